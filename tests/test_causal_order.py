"""Causal prefill launch order (issue 16, item 4): the causal kernel's grid is
(batch x heads, query tiles), so the x-fastest dispatch launches every head's longest query tile
before any shorter one (globally longest first) and the last wave of work-groups holds short
rows only.  The gate proves every block is still covered once (planted: the old grid), the
emulator agrees with torch (tests/test_attention_emulate.py runs the causal cases), and the
static model prices both orders."""

import math

import pytest

from kernels.amd.attention_plan import AttnConfig, plan_attention
from kernels.amd.flash_attention import AttnBuilder, PrefillShape
from kernels.ir import Let, walk
from kernels.perf import PerfError
from kernels.perf.estimate import parse_attention, whole_kernel
from kernels.verify.attention_gate import Instance, verify_attention


def _kernel(causal):
    return AttnBuilder(plan_attention(AttnConfig(head_dim=64, causal=causal))).build()


def test_grid_is_transposed_for_causal_only_and_needs_the_flag():
    s = PrefillShape.bhsd(2, 3, 3, 300, 300, 64)
    assert s.grid(128, False) == (3, 6, 1)
    assert s.grid(128, True) == (6, 3, 1)
    with pytest.raises(TypeError):
        s.grid(128)          # no default: the wrong grid would cover the wrong blocks


def test_causal_dispatch_order_is_longest_first_over_all_heads():
    k = _kernel(True)
    assert tuple(k.grid_symbols[:2]) == ("block_bh", "block_q")
    lets = {s.name: s.expr for s in walk(k.body) if isinstance(s, Let)}
    n_qt, bh_count = 5, 4
    tiles = []
    for by in range(n_qt):               # hardware order: x (block_bh) fastest
        for bx in range(bh_count):
            q = lets["q_tile"]
            val = {"n_qt": n_qt, "block_q": by, "block_bh": bx}
            tiles.append(int(q.subs({s: val[s.name] for s in q.free_symbols})))
    assert tiles == sorted(tiles, reverse=True)           # longest (last tile) first
    assert sorted(tiles) == sorted(list(range(n_qt)) * bh_count)
    assert tiles[-bh_count:] == [0] * bh_count            # the last wave: the shortest rows


def test_non_causal_grid_is_unchanged():
    assert tuple(_kernel(False).grid_symbols[:2]) == ("block_q", "block_bh")


def test_gate_refuses_the_causal_kernel_on_the_old_grid():
    k = _kernel(True)
    s = PrefillShape.bhsd(1, 2, 2, 300, 300, 64)           # 3 query tiles, 2 heads
    ok = verify_attention(k, instances=[Instance("t", s.env(), s.grid(128, True), True)])
    assert all(r.holds for r in ok.checks.values()), ok.checks
    bad = verify_attention(k, instances=[Instance("t", s.env(), s.grid(128, False), True)])
    assert not bad.checks["coverage"].holds


# ---------------------------------------------------------------- the static model

def test_model_order_field_is_parsed_and_validated():
    assert parse_attention("1,2,256,64,causal", "128").order == "longest_first"
    assert parse_attention("1,2,256,64,causal,head_major", "128").order == "head_major"
    with pytest.raises(PerfError, match="launch order"):
        parse_attention("1,2,256,64,causal,random", "128")
    with pytest.raises(PerfError, match="needs 'causal'"):
        parse_attention("1,2,256,64,0,head_major", "128")


@pytest.mark.parametrize("shape", ["2,8,4096,128,causal", "16,16,2048,128,causal"])
def test_longest_first_never_loses_to_head_major_and_wins_on_few_heads(shape):
    kw = dict(loop_flops_per_wg=4.0 * 128 * 128 * 64, cycles_per_iteration=6000.0,
              workgroups_per_cu=1, outside_instructions=2000, peak_flops_per_clk_simd=256.0)
    lf = whole_kernel(parse_attention(shape, "128"), **kw)
    hm = whole_kernel(parse_attention(shape + ",head_major", "128"), **kw)
    assert lf["causal_order"] == "longest_first" and hm["causal_order"] == "head_major"
    assert lf["workgroups"] == hm["workgroups"]
    assert lf["cycles"] < hm["cycles"]
    # a lower bound: the total work spread evenly over the 304 CUs
    per = [math.ceil(min(int(shape.split(",")[2]), (q + 1) * 128) / 64) * 6000.0
           for q in range(int(shape.split(",")[2]) // 128)]
    assert lf["cycles"] >= sum(per) * int(shape.split(",")[0]) * int(shape.split(",")[1]) / 304
