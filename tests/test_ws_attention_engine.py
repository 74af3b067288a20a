"""The warp-specialised attention engine (kernels/verify/attention_ring.py) on the smallest
warp-specialised d128 prefill IR (kernels/nvidia/wgmma_ws_ir_serial.py: a TMA producer with
4-D boxes, two consumer warpgroups on two-stage K / V rings, the serial schedule): one run
holds the producer / consumer protocol and the consumers' softmax dataflow, at the instances
of the other IR prefills (ragged GQA, one row and one key, strided BSHD with partial tiles;
causal adds more rows than keys and the reverse), in both ring schedules.  Each planted bug is
refused by the rule meant to catch it."""

from __future__ import annotations

import sympy
import pytest

from kernels.ir.core import Access, Loop, sym
from kernels.ir.nvidia_tma import (LeaderOnly, MbarrierArrive, MbarrierExpectTx, MbarrierWait,
                                   RoleBranch, Setmaxnreg, TmaLoad)
from kernels.ir.nvidia_wgmma import GmmaOperand, WgmmaMma, WgmmaWait
from kernels.ir.attention import MaskScores
from kernels.nvidia.wgmma_ws_ir_serial import build_ws_serial_ir
from kernels.verify.attention_ring import WS_ATTENTION_CHECKS, verify_ws_attention

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("causal", [False, True])
def test_the_ws_serial_prefill_is_verified(causal):
    """Through the one entry point, the IR alone: the verifier routes a ws attention spec to
    the engine (every instance, both ring schedules); with its printed text the report adds
    the printed-text checks (kernels.verify.printed_ws, tests/test_ws_printed_text.py)."""
    from kernels.verify.printed import PRINTED_CHECKS
    from kernels.verify.verifier import verify
    k = build_ws_serial_ir(causal)
    r = verify(k, arch="sm_90a")
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert set(r.checks) == set(WS_ATTENTION_CHECKS)
    assert r.details["engine"].startswith("warp-specialised attention")
    assert not set(PRINTED_CHECKS) & set(r.checks)
    assert "bshd-strided" in r.checks["online_softmax"].domain


def _role(k, name):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == name)


def _loops(k, role):
    """The key-block loops of ``role`` (consumer: the unmasked and the masked one)."""
    body = _role(k, role).body
    if role == "producer":
        body = next(s for s in body if isinstance(s, LeaderOnly)).body
    return [s for s in body if isinstance(s, Loop) and s.var == "j"]


def _edit_loops(k, role, fn):
    for lp in _loops(k, role):
        lp.body = fn(lp.body)


def _drop_wait(bar):
    return lambda k: _edit_loops(k, "consumer" if bar.startswith("full") else "producer",
                                 lambda b: [s for s in b if not (isinstance(s, MbarrierWait)
                                                                 and s.bar == bar)])


def _expect(delta):
    def plant(k):
        def f(b):
            return [MbarrierExpectTx(s.bar, s.index, s.bytes + delta)
                    if isinstance(s, MbarrierExpectTx) and s.bar == "fullK" else s for s in b]
        _edit_loops(k, "producer", f)
    return plant


def _flip_parity(bar):
    def plant(k):
        _edit_loops(k, "consumer", lambda b: [MbarrierWait(s.bar, s.index, 1 - s.parity)
                                              if isinstance(s, MbarrierWait) and s.bar == bar
                                              else s for s in b])
    return plant


def _release_k_before_s_retired(k):
    def f(b):
        b = [s for s in b if not (isinstance(s, MbarrierArrive) and s.bar == "emptyK")]
        i = next(i for i, s in enumerate(b) if isinstance(s, WgmmaWait))
        return b[:i] + [MbarrierArrive("emptyK", sympy.Mod(sym("j"), 2))] + b[i:]
    _edit_loops(k, "consumer", f)


def _setmaxnreg(regs):
    def plant(k):
        c = _role(k, "consumer")
        c.body = [Setmaxnreg(True, regs) if isinstance(s, Setmaxnreg) else s
                  for s in c.body if regs or not isinstance(s, Setmaxnreg)]
    return plant


def _box(tag_prefix, **change):
    """Every box of ``tag_prefix`` (Q / K / V) with a field changed."""
    def plant(k):
        import dataclasses

        def f(b):
            return [dataclasses.replace(s, **{n: v(s) for n, v in change.items()})
                    if isinstance(s, TmaLoad) and s.tag.startswith(tag_prefix) else s for s in b]
        lead = next(s for s in _role(k, "producer").body if isinstance(s, LeaderOnly))
        lead.body = f(lead.body)
        _edit_loops(k, "producer", f)
    return plant


def _q_start_unstepped(k):
    """Q's descriptor start stepping by ``wg`` (the block's warpgroup) instead of ``wg - 1``:
    the first consumer reads the second one's rows."""
    def f(b):
        out = []
        for s in b:
            if isinstance(s, WgmmaMma) and not s.a_in_regs:
                s = WgmmaMma(s.atom, s.acc, GmmaOperand(
                    s.a.buf, sympy.expand(s.a.start.subs(sym("wg"), sym("wg") + 1)), s.a.desc,
                    s.a.major, s.a.mn), s.b, s.tag, s.accumulate)
            out.append(s)
        return out
    _edit_loops(k, "consumer", f)


def _empty_count(n):
    def plant(k):
        from kernels.ir.nvidia_tma import MbarrierInit
        k.body = [MbarrierInit(s.bar, s.n, n) if isinstance(s, MbarrierInit) and
                  s.bar == "emptyK" else s for s in k.body]
    return plant


def _drop_o_store(k):
    c = _role(k, "consumer")
    i = max(i for i, s in enumerate(c.body) if isinstance(s, Access) and s.buf == "O")
    del c.body[i]


def _no_mask(k):
    _edit_loops(k, "consumer", lambda b: [s for s in b if not isinstance(s, MaskScores)])


BUGS = [
    ("consumer skips the full K wait", _drop_wait("fullK"), "lds_races",
     "no box has written"),
    ("producer skips the empty K wait", _drop_wait("emptyK"), "lds_races", "overwrites"),
    ("expect-tx 2 bytes short", _expect(-2), "mbarrier_protocol", "more than its expect_tx"),
    ("expect-tx 2 bytes over", _expect(2), "mbarrier_protocol", "deadlock"),
    ("full V wait parity flipped", _flip_parity("fullV"), "lds_races", "no box has written"),
    ("K released before S retired", _release_k_before_s_retired, "lds_races", "overwrites"),
    ("consumer without setmaxnreg", _setmaxnreg(0), "register_budget", "0 times"),
    ("consumer setmaxnreg 248 (24 + 2 x 248 over the file)", _setmaxnreg(248),
     "register_budget", "the register file has 65536"),
    ("K boxes at the query head (not its KV head)",
     _box("K", coords=lambda s: (sym("h"), sym("bat"))), "lane_mfma_operands", "GQA"),
    ("V boxes one block late", _box("V", c1=lambda s: s.c1 + 128), "lane_mfma_operands",
     "disagree on the key"),
    ("Q boxes at the next query block", _box("Q", c1=lambda s: s.c1 + 128),
     "lane_accumulator_writeback", "stores o_acc"),
    ("Q descriptor start stepped by wg, not wg - 1", _q_start_unstepped, "lane_mfma_operands",
     "disagree on the head dim"),
    ("ragged blocks not masked", _no_mask, "masking_and_tile_skipping", "invisible keys"),
    ("one O store dropped", _drop_o_store, "coverage", "stored 0 times"),
    # the empty barrier counting one consumer's warps: its phases run twice a round, the
    # producer's parities fall out of step with the consumers' releases
    ("empty K counts one warpgroup (4)", _empty_count(4), "mbarrier_protocol", "deadlock"),
    ("Q boxes at the next head", _box("Q", coords=lambda s: (s.coords[0] + 1, s.coords[1])),
     "lane_accumulator_writeback", "head"),
]
#: the 2-stage ring wraps only without the causal mask (bshd-strided: 4 key blocks); the
#: diagonal blocks' mask needs causal
CAUSAL_BUGS = [("diagonal blocks not masked (causal)", _no_mask, "masking_and_tile_skipping",
                "invisible keys")]


@pytest.mark.parametrize("name,plant,check,msg,causal",
                         [b + (False,) for b in BUGS] + [b + (True,) for b in CAUSAL_BUGS],
                         ids=[b[0] for b in BUGS + CAUSAL_BUGS])
def test_planted_bugs_are_refused(name, plant, check, msg, causal):
    k = build_ws_serial_ir(causal=causal)
    plant(k)
    r = verify_ws_attention(k)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, (name, bad)
    assert msg in bad[check], (name, bad[check])


def test_a_stray_consumer_barrier_is_refused_not_ignored():
    """A named barrier on the consumer index outside a ping-pong (consumer 1 hands a turn
    over on barrier 3, nobody syncs on it) is run by the ping-pong replay
    (kernels/verify/ring_pingpong.py), not skipped: with named barriers between the consumers
    every wgmma must be issued in its warpgroup's turn, and none is."""
    from kernels.ir.core import If
    from kernels.ir.nvidia_tma import NamedBarrier
    k = build_ws_serial_ir()
    c = _role(k, "consumer")
    c.body.insert(2, If(sympy.Eq(sym("wg"), 2), [NamedBarrier(3, 256, arrive=True)]))
    r = verify_ws_attention(k, schedules=("lazy",))
    cex = r.checks["mbarrier_protocol"].counterexample
    assert "ping-pong replay" in cex and "outside the warpgroup's ping-pong turn" in cex, cex


def test_a_split_guarding_data_is_still_refused():
    """Only a split whose body is named barriers is taken per warpgroup; one guarding data
    (here a wgmma wait on consumer 1 alone) is refused by the lockstep walk and the static
    pass."""
    from kernels.ir.core import If
    k = build_ws_serial_ir()
    c = _role(k, "consumer")
    c.body.insert(2, If(sympy.Eq(sym("wg"), 2), [WgmmaWait(0, ())]))
    r = verify_ws_attention(k, schedules=("lazy",))
    cex = r.checks["lds_races"].counterexample
    assert "depends on the thread" in cex and "more" in cex, cex
