"""The verification gate proves the good kernel and refutes broken ones with a counterexample.

Each mutation below breaks one thing in the IR (what the emitter would print) and the matching
check must fail: a gate that passes these would be 'verifying' nothing.
"""

import copy

import pytest
import sympy

from layoutalg import Swizzle
from kernels.gate import CHECKS, VerificationError, verify_kernel
from kernels.gemm import GemmBuilder, build_gemm, choose_lds_layouts
from kernels.gemm_plan import GemmConfig, plan_gemm
from kernels.ir import Access, Barrier, Loop, Mfma, ZeroFrag, sym, walk

CFG = GemmConfig(200, 136, 72)          # edges in M, N and K; KT = 3 (a loop + a peel)


@pytest.fixture(scope="module")
def plan():
    p = plan_gemm(CFG)
    choose_lds_layouts(p)
    return p


def _ir(plan):
    return GemmBuilder(copy.deepcopy(plan)).build()


def _failed(k):
    r = verify_kernel(k)
    return {n for n, c in r.checks.items() if not c.holds}, r


def test_good_kernel_proves_every_check(plan):
    fails, r = _failed(_ir(plan))
    assert fails == set()
    assert set(r.checks) == set(CHECKS)
    for c in r.checks.values():
        assert c.method == "exhaustive" and c.domain
    assert r.details["bank_worst_ways"] == {"read": 1, "write": 1}
    # the dataflow pass really ran MFMAs and stores
    assert "MFMA issues" in r.checks["lane_mfma_operands"].domain
    assert " 0 wave-level" not in r.checks["lane_mfma_operands"].domain


def _accesses(k, tag):
    return [s for s in walk(k.body) if isinstance(s, Access) and s.tag == tag]


def test_printed_offset_differs_from_layout(plan):
    k = _ir(plan)
    a = _accesses(k, "A.frag.load")[0]
    a.offset = a.offset + 8                # what would be printed no longer equals the layout
    fails, r = _failed(k)
    assert "emitted_index_math" in fails
    assert "printed offset" in str(r.checks["emitted_index_math"].counterexample)


def test_missing_barrier_is_a_race(plan):
    k = _ir(plan)
    loop = next(s for s in k.body if isinstance(s, Loop))
    loop.body = [s for s in loop.body if not isinstance(s, Barrier)]
    fails, r = _failed(k)
    assert "lds_races" in fails
    assert "without a barrier" in str(r.checks["lds_races"].counterexample) or \
        "since the last barrier" in str(r.checks["lds_races"].counterexample)


def test_b_with_another_k_permutation(plan):
    """Feed B's second k-half to the first MFMA step: A and B disagree on k."""
    k = _ir(plan)
    it = plan.items
    for m in (s for s in walk(k.body) if isinstance(s, Mfma)):
        m.b = m.b.frag.regs([i + it if (i // it) % 2 == 0 else i - it for i in m.b.idx])
    fails, r = _failed(k)
    assert "lane_mfma_operands" in fails
    assert "disagree on k" in str(r.checks["lane_mfma_operands"].counterexample)


def test_wrong_mfma_row(plan):
    """Swap the A operands of two M tiles for one step: rows of C get the wrong A rows."""
    k = _ir(plan)
    ms = [s for s in walk(k.body) if isinstance(s, Mfma)]
    ms[0].a, ms[2].a = ms[2].a, ms[0].a
    fails, _ = _failed(k)
    assert "lane_mfma_operands" in fails


def test_unzeroed_accumulator(plan):
    k = _ir(plan)
    k.body = [s for s in k.body if not isinstance(s, ZeroFrag)]
    fails, r = _failed(k)
    assert "lane_mfma_operands" in fails


def test_off_by_one_predicate(plan):
    k = _ir(plan)
    for a in _accesses(k, "A.copy.load"):
        a.pred = sympy.And(*[sympy.StrictLessThan(t.lhs, t.rhs + 1)
                             for t in sympy.And.make_args(a.pred)])
    fails, r = _failed(k)
    assert fails == {"in_bounds"}
    assert "outside" in str(r.checks["in_bounds"].counterexample)


def test_conflicting_swizzle(plan):
    p = copy.deepcopy(plan)
    p.b.swizzle = Swizzle(0, 0, 0)           # consistent everywhere, but conflicted
    fails, r = _failed(GemmBuilder(p).build())
    assert fails == {"bank_conflicts_lds_read", "bank_conflicts_lds_write"}
    cex = str(r.checks["bank_conflicts_lds_write"].counterexample)
    assert "ds_write_b32" in cex and "bank" in cex


def test_wrong_store_target(plan):
    k = _ir(plan)
    st = _accesses(k, "C.store")
    st[0].offset, st[1].offset = st[1].offset, st[0].offset
    st[0].coords, st[1].coords = st[1].coords, st[0].coords
    fails, r = _failed(k)
    assert "lane_accumulator_writeback" in fails


def test_dropped_store_breaks_coverage(plan):
    k = _ir(plan)
    drop = _accesses(k, "C.store")[5]
    k.body = [s for s in k.body if s is not drop]
    fails, r = _failed(k)
    assert fails == {"coverage"}
    assert "stored 0 times" in str(r.checks["coverage"].counterexample)


def test_build_stops_with_the_counterexample(monkeypatch):
    import kernels.gemm as g

    def no_swizzle(plan):
        return plan
    monkeypatch.setattr(g, "choose_lds_layouts", no_swizzle)
    with pytest.raises(VerificationError) as e:
        build_gemm(CFG)
    msg = str(e.value)
    assert "bank_conflicts_lds" in msg and "counterexample" in msg
    assert e.value.exit_code == 1


def test_translation_lemma_refuses_block_dependent_k(plan):
    """Simulating one block per predicate pattern is only sound when blocks are translations;
    a k coordinate that moves with the block must turn the shortcut off."""
    from kernels.gate import _translation_lemma
    k = _ir(plan)
    assert _translation_lemma(k)[0]
    a = _accesses(k, "A.copy.load")[0]
    bm = sym("block_m")
    a.coords = tuple((c[0], c[1] + 32 * bm) for c in a.coords)
    ok, why = _translation_lemma(k)
    assert not ok and "shifts" in why
    # and the full gate then simulates every block and catches the wrong k
    fails, _ = _failed(k)
    assert fails   # printed offset no longer matches the coordinates, among others


# ---- the block-translation lemma (static pass at one block, carried to every block) ----------

CFG3 = GemmConfig(150, 140, 72, block_m=64, block_n=64)   # 3x3 grid, partial last row/column


@pytest.fixture(scope="module")
def plan3():
    p = plan_gemm(CFG3)
    choose_lds_layouts(p)
    return p


def _both(k):
    """(failed checks by the lemma, failed checks by enumerating every block, reports)."""
    r1 = verify_kernel(copy.deepcopy(k))
    r0 = verify_kernel(copy.deepcopy(k), translation=False)
    f1 = {n for n, c in r1.checks.items() if not c.holds}
    f0 = {n for n, c in r0.checks.items() if not c.holds}
    return f1, f0, r1, r0


def test_lemma_applies_and_agrees_with_enumeration(plan3):
    f1, f0, r1, r0 = _both(GemmBuilder(copy.deepcopy(plan3)).build())
    assert f1 == f0 == set()
    assert "block-translation lemma" in r1.checks["in_bounds"].domain
    assert "block-translation lemma" not in r0.checks["in_bounds"].domain
    # one block per class: first, interior and the partial last block along each axis
    assert r1.details["simulated_blocks"] == r0.details["simulated_blocks"] or \
        set(r0.details["simulated_blocks"]) <= set(r1.details["simulated_blocks"])
    assert "exactly once" in r1.checks["coverage"].domain


def _mut_offset_moves_with_block(k):
    a = _accesses(k, "B.copy.load")[0]
    a.offset = a.offset + sym("block_n")        # right at block 0, wrong at every other


def _mut_store_without_predicate(k):
    for a in _accesses(k, "C.store"):
        a.pred = None                           # the partial last tiles store past M, N


def _mut_store_drops_last_column(k):
    for a in _accesses(k, "C.store"):
        a.pred = sympy.And(*[sympy.StrictLessThan(t.lhs, t.rhs - 1) if "block_n" in str(t)
                             else t for t in sympy.And.make_args(a.pred)])


def _mut_load_predicate_too_strict(k):
    for a in _accesses(k, "A.copy.load"):
        a.pred = sympy.And(*[sympy.StrictLessThan(t.lhs, t.rhs - 8) if "block_m" in str(t)
                             else t for t in sympy.And.make_args(a.pred)])


@pytest.mark.parametrize("mutate, expect", [
    (_mut_offset_moves_with_block, {"emitted_index_math"}),
    (_mut_store_without_predicate, {"in_bounds"}),
    (_mut_store_drops_last_column, {"coverage"}),
    (_mut_load_predicate_too_strict, {"in_bounds"}),
])
def test_lemma_catches_errors_only_other_blocks_show(plan3, mutate, expect):
    k = GemmBuilder(copy.deepcopy(plan3)).build()
    mutate(k)
    f1, f0, r1, r0 = _both(k)
    assert expect <= f1 and expect <= f0, (f1, f0)
    assert f1 & {"emitted_index_math", "in_bounds", "vector_widths", "coverage"} == \
        f0 & {"emitted_index_math", "in_bounds", "vector_widths", "coverage"}
    for name in expect:
        cex = str(r1.checks[name].counterexample)
        assert "block" in cex, cex


def test_lemma_not_applicable_falls_back_to_every_block(plan3):
    """A block-dependent index binding turns the lemma off: every block is enumerated."""
    from kernels.ir import Let
    k = GemmBuilder(copy.deepcopy(plan3)).build()
    i = next(n for n, s in enumerate(k.body) if isinstance(s, Let))
    k.body[i] = Let(k.body[i].name, k.body[i].expr + 0 * sym("block_m") + sym("block_m") -
                    sym("block_m"))                 # sympy folds this: still block-free
    r = verify_kernel(k)
    assert "block-translation lemma:" in r.checks["in_bounds"].domain
    k2 = GemmBuilder(copy.deepcopy(plan3)).build()
    k2.body.insert(i + 1, Let("dummy", sympy.floor(sym("block_m") / 2)))
    r2 = verify_kernel(k2)
    assert r2.holds
    assert "lemma not applicable" in r2.checks["in_bounds"].domain
    assert "depends on the block index" in r2.checks["in_bounds"].domain


def test_4096_cubed_is_proved_by_the_lemma():
    """The benchmark size: the static pass evaluates one block and carries it to all 32x32."""
    p = plan_gemm(GemmConfig(4096, 4096, 4096))
    choose_lds_layouts(p)
    r = verify_kernel(GemmBuilder(p).build())
    assert r.holds
    assert "all 32x32 blocks" in r.checks["in_bounds"].domain
    assert "block-translation lemma" in r.checks["in_bounds"].domain
    assert r.details["simulated_blocks"] == [(0, 0)]


def test_dataflow_identity_encoding_refuses_coordinates_it_cannot_hold():
    # regression: _enc packed coordinates into bit fields without a range check, so a huge or
    # negative coordinate would alias another element and the dataflow proof compare the wrong ids
    import numpy as np
    from kernels.errors import KernelError
    from kernels.verify.gate_dataflow import _dec, _enc
    ids = _enc(3, np.array([0, 5]), np.array([7, (1 << 30) - 1]), np.array([False, True]))
    buf, c0, c1, zero = _dec(ids)
    assert list(buf) == [3, 3] and list(c0) == [0, 5] and list(c1) == [7, (1 << 30) - 1]
    assert list(zero) == [False, True]
    for c0, c1 in (([1 << 29], [0]), ([0], [1 << 30]), ([-1], [0]), ([0], [-1])):
        with pytest.raises(KernelError, match="cannot be tracked"):
            _enc(0, np.array(c0), np.array(c1), np.array([False]))
