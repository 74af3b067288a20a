"""Planted bugs in the runtime-size cp.async wgmma GEMM (kernels/nvidia/wgmma_rt_ir.py), each
refused by the check that owns it when the verifier runs the kernel at its launches: the edge
copy's predicates (in_bounds), the fast path's bounds and the host's a_vec word
(in_bounds / vector_widths), the epilogue's pair-or-single rule and the raster (coverage), the
printed edge statements (printed_source)."""

from __future__ import annotations

import sympy
import pytest

from kernels.ir import Access, If, Let, sym, walk
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_rt_ir import build_wgmma_rt_ir, rt_instances
from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
from kernels.verify.concrete_instances import RuntimeInstance
from kernels.verify.printed import verify_printed
from kernels.verify.verifier import verify

from _planted import assert_refused, replaced

SMALL = WgmmaGemmConfig(bm=64, bn=64, stages=3)
K = sym("K")


def _inst(name):
    return [i for i in rt_instances(SMALL) if i.name == name]


def _failed(k, instances):
    r = verify(k, arch="sm_90a", instances=instances)
    return {n: c for n, c in r.checks.items() if not c.holds}


def test_edge_load_reading_element_k_is_refused():
    """``k <= K`` instead of ``k < K``: the load at k = K is on, outside A."""
    k = build_wgmma_rt_ir(SMALL)
    for a in walk(k.body):
        if isinstance(a, Access) and a.tag == "A.edge.load":
            a.pred = a.pred.xreplace({K: K + 1})
    bad = _failed(k, _inst("edge_odd"))
    assert "in_bounds" in bad and "A.edge.load" in str(bad["in_bounds"].counterexample)


def test_fast_path_without_its_k_bound_is_refused():
    """The cp.async path taken for a k tile that reaches past K (and the edge path too)."""
    k = build_wgmma_rt_ir(SMALL)
    fast = [s for s in walk(k.body) if isinstance(s, If) and isinstance(s.cond, sympy.And)
            and sym("a_vec") in s.cond.free_symbols and not any(
                isinstance(c, sympy.Not) for c in s.cond.args)]
    assert fast
    for s in fast:
        s.cond = sympy.And(*[c for c in s.cond.args if K not in c.free_symbols])
    bad = _failed(k, _inst("aligned_k_edge"))
    assert {"in_bounds", "lds_races"} & set(bad), set(bad)


def test_a_vec_with_an_odd_lda_is_refused():
    """The host claims 16-byte rows where lda is odd: the fast path's vectors are misaligned."""
    k = build_wgmma_rt_ir(SMALL)
    lie = RuntimeInstance("lie", dict(M=64, N=64, K=64, lda=65, ldb=64, ldc=64, a_vec=1,
                                      b_vec=1),
                          (1, 1, 1))
    bad = _failed(k, [lie])
    assert "vector_widths" in bad and "A.cp.async.load" in str(
        bad["vector_widths"].counterexample)


def test_pair_and_single_c_stores_both_on_are_refused():
    """The single-element stores without 'not the pair': elements stored twice where the pair
    is on (an even ldc: the aligned launch)."""
    k = build_wgmma_rt_ir(SMALL)
    for a in walk(k.body):
        if isinstance(a, Access) and a.tag == "C.store1":
            a.pred = sympy.And(*[c for c in a.pred.args if not isinstance(c, sympy.Not)])
    bad = _failed(k, _inst("aligned_k_edge"))
    assert "coverage" in bad and "stored 2 times" in str(bad["coverage"].counterexample)


def test_raster_ignoring_the_partial_group_is_refused():
    """m0 from pid % group_m instead of % gsize: the partial last group's blocks compute tiles
    of the wrong rows (some twice, some never)."""
    k = build_wgmma_rt_ir(SMALL)
    let = next(s for s in k.body if isinstance(s, Let) and s.name == "m0")
    let.expr = let.expr.xreplace({sym("gsize"): SMALL.group_m})
    bad = _failed(k, _inst("raster_odd_ld"))
    assert "coverage" in bad or "in_bounds" in bad, set(bad)


@pytest.mark.parametrize("old,new", [(" << 16;", ";"), ("< K);", "<= K);")])
def test_printed_edge_copy_bugs_are_refused(old, new):
    k = build_wgmma_rt_ir(SMALL)
    src = emit_cuda_gemm_rt(k)
    # at every launch (the first edge load's k < K differs from k <= K only where K < 64)
    res = verify_printed(k, replaced(src, old, new), instances=list(rt_instances(SMALL)))
    assert_refused(res, "printed_source", old)


def test_edge_copy_also_on_inside_tiles_is_refused():
    """The edge copy's condition without 'not the fast path': an inside k tile of 16-byte rows
    is copied twice, by cp.async and by the 2-byte loads, into the same shared vectors."""
    k = build_wgmma_rt_ir(SMALL)
    n = 0
    for s in walk(k.body):
        if isinstance(s, If) and isinstance(s.cond, sympy.And) and len(s.cond.args) == 2 \
                and all(isinstance(c, sympy.Not) for c in s.cond.args):
            s.cond, n = s.cond.args[0], n + 1
    assert n == 4           # A and B, prologue and loop
    bad = _failed(k, _inst("edge_odd"))
    assert "lds_races" in bad and "in flight" in str(bad["lds_races"].counterexample)


@pytest.mark.parametrize("old,new,check", [
    # a 32-bit base defined from the other array: every access through it lands in sB
    ("const lg_u32 sA_u32 = lg_smem_u32(sA);", "const lg_u32 sA_u32 = lg_smem_u32(sB);",
     "printed_source"),
    # the offset scaled as 4-byte elements
    ("(sA_u32 + 2 * (", "(sA_u32 + 4 * (", "printed_source"),
    # the descriptor helper from a 32-bit base, edited (its text is checked, not its name)
    ("(lg_u64)(((base & 0x3FFFF) >> 4)", "(lg_u64)(((base & 0x3FFFF) >> 3)", "declarations"),
])
def test_printed_32bit_shared_bases_are_checked(old, new, check):
    k = build_wgmma_rt_ir(SMALL)
    src = emit_cuda_gemm_rt(k)
    res = verify_printed(k, replaced(src, old, new), instances=_inst("edge_odd"))
    assert_refused(res, check, old)
