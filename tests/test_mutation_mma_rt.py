"""Planted bugs in the runtime-size mma.sync GEMM with the template's schedule
(kernels/nvidia/gemm_rt_ir.py), each refused by the check that owns it when the verifier runs
the kernel at its launches: the fragment double-buffering (the mma of a k step reading the
other buffer; the next tile's fragments read from this tile's stage), the cp.async wait and
barrier, the loop-invariant fast-path bounds (a_fkt / ab_fkt), the ldmatrix XOR bases, the
main loop of constant stages (its fragment and copy stages, its trip count, where the tail
starts), and the printed text of each."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir import Barrier, If, Let, Loop, Mfma, sym, walk
from kernels.ir.nvidia import CpAsync, CpAsyncWait, LdMatrixLoad
from kernels.nvidia.gemm import CudaGemmConfig
from kernels.nvidia.gemm_rt_ir import build_mma_rt_ir, mma_rt_instances
from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
from kernels.verify.printed import verify_printed
from kernels.verify.verifier import verify

from _planted import replaced

SMALL = CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3)


def _inst(*names):
    return [i for i in mma_rt_instances(SMALL) if i.name in names]


def _failed(k, instances):
    r = verify(k, arch="sm_90", instances=instances)
    return {n: c for n, c in r.checks.items() if not c.holds}


def _loop(k):
    return next(s for s in k.body if isinstance(s, Loop) and s.var == "kt")


def _main(k):
    return next(s for s in k.body if isinstance(s, Loop) and s.var == "kq")


def test_mma_reading_the_other_fragment_buffer_is_refused():
    """k step 1's mma on buffer 0 (what the template does at bk=16: a tile of one k step
    re-uses k tile 0's fragments): the products are of the wrong k."""
    k = build_mma_rt_ir(SMALL)
    mt, nt = SMALL.wtm // 16, SMALL.wtn // 8
    for m in [s for s in walk(_loop(k).body) if isinstance(s, Mfma)][mt * nt:]:
        m.a = m.a.frag.regs([i - mt * 8 for i in m.a.idx])
        m.b = m.b.frag.regs([i - nt * 4 for i in m.b.idx])
    bad = _failed(k, _inst("aligned_k_edge"))
    assert "lane_mfma_operands" in bad, set(bad)


def test_next_tile_fragments_from_this_tiles_stage_are_refused():
    """The tail's cross-tile ldmatrix from stage kt % S instead of the next tile's."""
    k = build_mma_rt_ir(SMALL)
    lds = [s for s in _loop(k).body if isinstance(s, LdMatrixLoad)
           and sym("rn") in s.offset.free_symbols]
    assert lds
    for ld in lds:
        ld.offset = ld.offset.xreplace({sym("rn"): sym("rs")})
        ld.coords = tuple((c[0], sym("rs")) for c in ld.coords)
    bad = _failed(k, _inst("aligned_k_edge"))
    assert "lane_mfma_operands" in bad, set(bad)


def test_main_loop_next_fragments_from_this_tiles_stage_are_refused():
    """In the main loop, tile s's cross-tile ldmatrix from its own constant stage s instead
    of stage (s + 1) % S: caught only at the launch that runs the main loop."""
    k = build_mma_rt_ir(SMALL)
    S, e = SMALL.stages, SMALL.bm * SMALL.bk
    body = _main(k).body
    waits = [i for i, s in enumerate(body) if isinstance(s, CpAsyncWait)]
    first = waits[0] + 2                        # after tile 0's wait and barrier
    lds = [s for s in body[first:] if isinstance(s, LdMatrixLoad)][:2]
    for ld in lds:
        assert {int(c[1]) for c in ld.coords} == {1}
        ld.offset = ld.offset - e if ld.buf == "sA" else ld.offset - 2 * e
        ld.coords = tuple((c[0], 0) for c in ld.coords)
    assert not _failed(k, _inst("aligned_k_edge", "edge_odd"))     # the main loop not run
    bad = _failed(k, _inst("main_loop"))
    assert "lane_mfma_operands" in bad, set(bad)


def test_main_loop_copy_into_the_stage_being_read_is_refused():
    """Tile s's copy into stage s (the one its k steps still read) instead of (s + S - 1) % S."""
    k = build_mma_rt_ir(SMALL)
    S = SMALL.stages
    cp = next(s for s in _main(k).body if isinstance(s, CpAsync))
    st = cp.store
    assert {int(c[1]) for c in st.coords} == {S - 1}
    el = SMALL.bm * SMALL.bk if st.buf == "sA" else SMALL.bn * SMALL.bk
    st.offset = st.offset - (S - 1) * el
    st.coords = tuple((c[0], 0) for c in st.coords)
    bad = _failed(k, _inst("main_loop"))
    assert "lds_races" in bad, set(bad)


@pytest.mark.parametrize("edit", [
    # one trip too many: the main loop's last copies are of the K edge tile, unpredicated
    lambda e, S: sympy.floor(sympy.Max(0, sym("ab_fkt") - S + 1) / S) + 1,
    # the fast bound of the copy forgotten: S - 1 tiles past the last fast one
    lambda e, S: sympy.floor(sympy.Max(0, sym("ab_fkt")) / S),
])
def test_main_loop_past_the_fast_tiles_is_refused(edit):
    """``kq_n`` counting trips whose copies leave both operands' fast path: the unpredicated
    ``cp.async`` reads past K (caught by the static pass, whose loops start where each block's
    tail starts)."""
    k = build_mma_rt_ir(SMALL)
    s = next(x for x in k.body if isinstance(x, Let) and x.name == "kq_n")
    s.expr = edit(s.expr, SMALL.stages)
    bad = _failed(k, _inst("main_loop"))
    assert "in_bounds" in bad, set(bad)


@pytest.mark.parametrize("shift,word", [(1, "missing k"), (-1, "used twice")])
def test_tail_not_starting_after_the_main_loop_is_refused(shift, word):
    """The tail loop one tile after the main loop's last (a tile never summed) or one before
    it (a tile summed twice)."""
    k = build_mma_rt_ir(SMALL)
    tail = _loop(k)
    tail.start = tail.start + shift
    bad = _failed(k, _inst("main_loop"))
    assert bad and word in str({n: c.counterexample for n, c in bad.items()}), set(bad)


def test_missing_barrier_is_refused():
    k = build_mma_rt_ir(SMALL)
    loop = _loop(k)
    loop.body = [s for s in loop.body if not isinstance(s, Barrier)]
    bad = _failed(k, _inst("aligned_k_edge"))
    assert "lds_races" in bad, set(bad)


def test_wait_leaving_the_landing_tile_in_flight_is_refused():
    k = build_mma_rt_ir(SMALL)
    for s in walk(_loop(k).body):
        if isinstance(s, CpAsyncWait):
            s.pending = SMALL.stages - 1
    bad = _failed(k, _inst("aligned_k_edge"))
    assert "lds_races" in bad and "in flight" in str(bad["lds_races"].counterexample)


@pytest.mark.parametrize("let,edit", [
    # every k tile fast, the K edge's too (ceil instead of floor)
    ("a_fkt", lambda e: e.xreplace({sympy.floor(sym("K") / 32): sympy.floor((sym("K") + 31)
                                                                             / 32)})),
    # both operands fast when either is
    ("ab_fkt", lambda e: sympy.Max(sym("a_fkt"), sym("b_fkt"))),
])
def test_fast_path_bounds_past_the_matrix_are_refused(let, edit):
    k = build_mma_rt_ir(SMALL)
    s = next(x for x in k.body if isinstance(x, Let) and x.name == let)
    before = s.expr
    s.expr = edit(s.expr)
    assert s.expr != before
    bad = _failed(k, _inst("edge_odd", "aligned_k_edge"))
    assert {"in_bounds", "vector_widths"} & set(bad), set(bad)


def test_wrong_ldmatrix_xor_base_is_refused():
    k = build_mma_rt_ir(SMALL)
    s = next(x for x in k.body if isinstance(x, Let) and x.name == "a_x16")
    s.expr = s.expr.xreplace({sympy.Integer(16): sympy.Integer(24)})
    bad = _failed(k, _inst("aligned_k_edge"))
    assert {"lane_mfma_operands", "emitted_index_math"} & set(bad), set(bad)


@pytest.mark.parametrize("old,new", [
    ("const int ab_fkt = min(a_fkt, b_fkt);", "const int ab_fkt = max(a_fkt, b_fkt);"),
    ("const int a_x16 = ((a_sw) ^ (16));", "const int a_x16 = ((a_sw) ^ (8));"),
    # the last tile's fragments from the stage after it (never written at short K)
    ("const int rn = ((((min(KT - 1, kt + 1)) % 3) + 3) % 3);", "const int rn = ((kt + 1) % 3);"),
    # a main-loop immediate: tile 0's next fragments from stage 0, not stage 1
    ("lg_ldmatrix_x4(af[0], af[1], af[2], af[3], (sA_u32 + 2 * (a_x0) + 2 * (2048)));",
     "lg_ldmatrix_x4(af[0], af[1], af[2], af[3], (sA_u32 + 2 * (a_x0) + 2 * (0)));"),
    # the main loop's trip count without the copy's fast bound
    ("const int kq_n = ((max(0, ab_fkt - 2)) / 3);", "const int kq_n = ((max(0, ab_fkt)) / 3);"),
    ("for (int kt = 3*kq_n; kt < KT; ++kt) {", "for (int kt = 3*kq_n + 1; kt < KT; ++kt) {"),
    # the split shared offsets (per-thread base + uniform rest), each term read back
    ("(sA_u32 + 2 * (a_x0) + 2 * (512))", "(sA_u32 + 2 * (a_x0) + 2 * (520))"),
    ("(sA_u32 + 2 * (a_x16) + 2 * (2048*rs + 512))", "(sA_u32 + 2 * (a_x16) + 2 * (2048*rn + 512))"),
    # the same bytes at another scale: not joined, read as 2 * (a_x0) + 4 * 256, refused
    ("(sA_u32 + 2 * (a_x0) + 2 * (512))", "(sA_u32 + 2 * (a_x0) + 4 * (256))"),
    ("lg_cp_async_wait<1>();\n    __syncthreads();", "lg_cp_async_wait<2>();\n    __syncthreads();"),
])
def test_printed_bugs_are_refused(old, new):
    k = build_mma_rt_ir(SMALL)
    src = emit_cuda_gemm_rt(k)
    res = verify_printed(k, replaced(src, old, new), instances=list(mma_rt_instances(SMALL)))
    assert not all(c.holds for c in res.values()), old
