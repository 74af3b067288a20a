"""The direct-store epilogue (``TmaGemmConfig(store="direct")``) of the IR-built TMA GEMM: every
accumulator pair goes from registers to C in global memory (one 4-byte store where ``ldc`` is
even, else two 2-byte stores; rows past M and columns past N skipped), proved on the per-role
model by reading each stored address back through C's row stride ``ldc``.

The registry :data:`DIRECT_BUGS` plants one bug per rule of the global-store check (bounds in
rows and columns, the pair store's alignment, the accumulator each address must hold, the
accumulator still in flight, coverage, an undeclared row stride) and in the printed text (the
predicate, the offset, the conversion, the registers, the parameter); each must be refused by
the named check."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from kernels.ir.core import Access, Loop, sym, walk
from kernels.ir.nvidia_tma import RoleBranch
from kernels.ir.nvidia_wgmma import WgmmaWait
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import (DIRECT_INSTANCES, build_tma_gemm_ir,
                                         default_instances, ir_form_refusal, ir_kernel_name)
from kernels.printer.cuda import emit_cuda
from kernels.verify.verifier import verify

BASE = TmaGemmConfig(bm=64, bn=64, stages=4, store="direct")
SMALL = ((70, 75, 72, 2, 75), (70, 64, 72, 1, 66))    # odd N = ldc; even ldc > N


def _bad(k, source=None, instances=None):
    r = verify(k, arch="sm_90a", source=source, instances=instances)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", [
    TmaGemmConfig(store="direct"), TmaGemmConfig(dtype="bf16", b_major="k", store="direct"),
    TmaGemmConfig(bm=64, bn=128, stages=6, store="direct"),
    TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", store="direct", a_rows=16),
], ids=lambda c: c.name)
def test_direct_store_ir_verifies(cfg):
    assert ir_form_refusal(cfg) is None
    k = build_tma_gemm_ir(cfg)
    src = emit_cuda(k)
    assert k.name == ir_kernel_name(cfg) and k.name.endswith("_ds" + (f"_a{cfg.a_rows}"
                                                                     if cfg.a_rows else ""))
    # no C buffer, no C tensor map, no TMA store: the row stride is a parameter
    assert [s.name for s in k.shared] == ["sA", "sB"] and "lg_tma_store_2d(tm" not in src
    assert "lg_u16* __restrict__ C, int M, int N, int K, int ctas, int ldc)" in src
    assert all(len(v) == 5 for v in default_instances(cfg))
    assert _bad(k, src) == {}


def test_direct_store_instances_cover_both_store_widths():
    """The default launches run the 4-byte pair store (even ldc) and the 2-byte stores (odd
    ldc, and the last column of an odd N) on several CTAs."""
    ldcs = [v[4] for v in DIRECT_INSTANCES]
    assert any(x % 2 == 0 for x in ldcs) and any(x % 2 for x in ldcs)
    assert any(v[1] % 2 and v[4] == v[1] for v in DIRECT_INSTANCES)
    assert all(v[4] >= v[1] for v in DIRECT_INSTANCES)


@settings(max_examples=5, deadline=None)
@given(m=st.integers(1, 140), n=st.integers(1, 200), pad=st.integers(0, 9),
       k=st.integers(1, 200), ctas=st.integers(1, 4))
def test_direct_store_verifies_at_any_size(m, n, pad, k, ctas):
    kern = build_tma_gemm_ir(BASE, ((m, n, k, ctas, n + pad),))
    assert _bad(kern) == {}


def test_instances_of_the_wrong_arity_are_refused():
    from kernels.nvidia.gemm import GemmConfigError
    with pytest.raises(GemmConfigError, match="ldc"):
        build_tma_gemm_ir(BASE, ((64, 64, 64, 1),))


# ---------------------------------------------------------------------------- planted bugs

def _stores(k):
    return [s for s in walk(k.body) if isinstance(s, Access) and s.space == "global"]


def _by_tag(k, tag):
    return [s for s in _stores(k) if s.tag == tag]


def _no_row_bound(k):              # rows >= M stored (the edge tile's rows past the tensor)
    for s in _stores(k):
        s.pred = sympy.And(*[a for a in s.pred.args if sym("M") not in a.free_symbols])


def _no_col_bound_on_lo(k):        # the 2-byte store of column col without col < N
    for s in _by_tag(k, "C.store.lo"):
        s.pred = sympy.And(*[a for a in s.pred.args if sym("M") in a.free_symbols])


def _pair_at_odd_ldc(k):           # the pair store without the even-ldc test: misaligned
    even = sympy.Eq(sympy.Mod(sym("ldc"), 2), 0)
    for s in _by_tag(k, "C.store2"):
        s.pred = sympy.And(*[a for a in s.pred.args if a != even])
    for s in _by_tag(k, "C.store.lo") + _by_tag(k, "C.store.hi"):
        s.pred = sympy.false


def _swapped_registers(k):         # the pair's two accumulators exchanged
    for s in _by_tag(k, "C.store2"):
        i, j = s.regs.idx
        s.regs = s.regs.frag.regs([j, i])


def _row_stride_ignored(k):        # offset r * N + col: right only where ldc == N
    for s in _stores(k):
        s.offset = s.offset.subs(sym("ldc"), sym("N"))


def _hi_store_dropped(k):          # the odd-ldc path loses every odd column
    for s in _by_tag(k, "C.store.hi"):
        s.pred = sympy.false


def _store_before_the_last_wait(k):    # wgmma.wait_group 0 moved after the epilogue
    role = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")
    unit = next(s for s in role.body if isinstance(s, Loop) and s.var == "iu")
    w = next(i for i, s in enumerate(unit.body) if isinstance(s, WgmmaWait))
    unit.body.append(unit.body.pop(w))


def _row_stride_undeclared(k):
    k.meta["row_stride"] = {}


def _leader_row(k):                # C row 8h + 1: another thread's accumulator
    for s in _stores(k):
        s.offset = s.offset + sym("ldc")


#: launches with C's rows padded (ldc > N): a column past N lands in the padding, not the
#: next row
PADDED = ((70, 75, 72, 2, 80),)

#: (name, IR mutation, the check that must refuse it[, launches other than SMALL])
DIRECT_BUGS = (
    ("row bound dropped", _no_row_bound, "in_bounds"),
    # ldc = N: column N is the next row's column 0, holding another element's accumulator
    ("column bound dropped", _no_col_bound_on_lo, "lane_accumulator_writeback"),
    ("column bound dropped, padded rows", _no_col_bound_on_lo, "in_bounds", PADDED),
    ("pair store at odd ldc", _pair_at_odd_ldc, "in_bounds"),
    ("pair registers swapped", _swapped_registers, "lane_accumulator_writeback"),
    ("row stride ignored", _row_stride_ignored, "lane_accumulator_writeback"),
    ("odd columns never stored", _hi_store_dropped, "coverage"),
    ("stored before the wgmma retired", _store_before_the_last_wait,
     "lane_accumulator_writeback"),
    ("row stride undeclared", _row_stride_undeclared, "lds_races"),
    ("stored one row down", _leader_row, "lane_accumulator_writeback"),
)


@pytest.fixture(scope="module")
def base():
    k = build_tma_gemm_ir(BASE, SMALL)
    assert _bad(k) == {}
    return k


@pytest.mark.parametrize("bug", DIRECT_BUGS, ids=[b[0] for b in DIRECT_BUGS])
def test_planted_direct_store_bug_is_refused(base, bug):
    name, plant, check = bug[:3]
    k = copy.deepcopy(base)
    plant(k)
    bad = _bad(k, instances=None if len(bug) == 3 else [dict(zip(("M", "N", "K", "ctas", "ldc"),
                                                                 v)) for v in bug[3]])
    assert check in bad, (name, bad)


def test_a_store_before_its_lets_is_an_ill_formed_ir(base):
    """A statement moved before the Lets it reads: SpecError naming the symbol, not a deep
    KeyError from the model."""
    from kernels.verify.spec import SpecError
    k = copy.deepcopy(base)
    role = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")
    unit = next(s for s in role.body if isinstance(s, Loop) and s.var == "iu")
    w = next(i for i, s in enumerate(unit.body) if isinstance(s, WgmmaWait))
    st_i = next(i for i, s in enumerate(unit.body) if isinstance(s, Access))
    unit.body.insert(w, unit.body.pop(st_i))
    with pytest.raises(SpecError, match="uses cc, which no Let"):
        verify(k, arch="sm_90a")


def test_every_global_store_rule_has_a_planted_bug():
    """The checks the global-store rule reports under (gate_tma_data.global_store) each have a
    planted bug here."""
    assert {b[2] for b in DIRECT_BUGS} >= {"in_bounds", "lane_accumulator_writeback",
                                              "coverage", "lds_races"}


def _printed_bugs(src):
    return (
        # the predicate: rows past M stored
        (src.replace(" && rr < M && cc + 1 < N)", " && cc + 1 < N)", 1), "printed_source"),
        # the offset: C's row stride replaced by N
        (src.replace("C + (cc + ldc*rr))", "C + (cc + N*rr))", 1), "printed_source"),
        # the conversion: bf16 rounding of an f16 kernel
        (src.replace("C[cc + ldc*rr] = lg_f32_to_f16(acc[0]);",
                     "C[cc + ldc*rr] = lg_f32_to_bf16(acc[0]);", 1), "printed_source"),
        # the registers
        (src.replace("lg_pack_f16x2(acc[0], acc[1])", "lg_pack_f16x2(acc[1], acc[0])", 1),
         "printed_source"),
        # the parameter: C declared const
        (src.replace("lg_u16* __restrict__ C,", "const lg_u16* __restrict__ C,", 1),
         "declarations"),
    )


def test_printed_direct_store_mutations_are_refused(base):
    src = emit_cuda(base)
    assert _bad(base, src) == {}
    for bad, check in _printed_bugs(src):
        assert bad != src
        got = _bad(base, bad)
        assert check in got, (check, got)


def test_dispatch_names_the_ir_direct_store_kernel():
    """The IR form's name is the template's with the ``lg_irtma_`` prefix (``_ds`` kept)."""
    cfg = dataclasses.replace(BASE, dtype="bf16")
    assert ir_kernel_name(cfg) == "lg_irtma_" + cfg.name[len("lg_wgmma_tma_"):]
    assert ir_kernel_name(cfg).endswith("_ds")
