"""``check_merge_slots``: the accumulator checks the split-KV merge (``merge_step``) and the LSE
merge (``lse_merge_step``) share; planted bugs for each of its two reports."""

import numpy as np

from kernels.verify.attention_ids import AccIds, check_merge_slots, rowid


def _run(acc, rid, xd):
    got = []
    ok = check_merge_slots(acc, np.array([0, 1]), rid, xd, "merge into o",
                           lambda check, msg: got.append((check, msg)))
    return ok, got


def _acc():
    return AccIds(T=2, n=2, words=1, kw=1)


RID = rowid(np.array([0, 1]), 0)
XD = np.array([[0, 1], [0, 1]])


def test_fresh_zeroed_slots_pass():
    acc = _acc()
    acc.zeroed[:] = True
    assert _run(acc, RID, XD) == (True, [])


def test_slots_merged_into_before_with_the_same_row_and_dims_pass():
    acc = _acc()
    acc.row[:] = RID[:, None]
    acc.col[:] = XD
    assert _run(acc, RID, XD) == (True, [])


def test_unzeroed_slot_is_reported_and_the_step_goes_on():
    acc = _acc()
    ok, got = _run(acc, RID, XD)
    assert ok is True
    assert got == [("reduction_reads_partials",
                    "merge into o: accumulator used before it was zeroed")]


def test_slot_of_another_row_stops_the_step():
    acc = _acc()
    acc.row[:] = RID[:, None]
    acc.col[:] = XD
    acc.row[1, 1] = rowid(5, 3)
    ok, got = _run(acc, RID, XD)
    assert ok is False
    assert got == [("reduction_reads_partials", "merge into o: thread 1 item 1 holds "
                    "O(bh 5 row 3, d 1) but merges (bh 1 row 0, d 1)")]


def test_slot_of_another_head_dim_stops_the_step():
    acc = _acc()
    acc.row[:] = RID[:, None]
    acc.col[:] = XD
    acc.col[0, 0] = 7
    ok, got = _run(acc, RID, XD)
    assert ok is False and "thread 0 item 0 holds O(bh 0 row 0, d 7)" in got[0][1]
