"""The TMA GEMM as kernel IR on the per-role phase model (issue 20 item 1): the IR-built kernel
of every selection tile passes every check, its printed text compiles (NVRTC, no spills, no
serialised wgmma), and planted bugs in the IR and the printed text are each refused by a named
check: the mbarrier protocol (bytes, parities, counts, missing waits), the stage ring's races,
the operands and accumulators, the epilogue's proxy fence / barriers / bulk waits, the register
budget and the raster's coverage."""

from __future__ import annotations

import copy

import pytest
import sympy

from hypothesis import given, settings, strategies as st

from kernels.ir.core import Access, If, Let, Loop, ZeroFrag, sym, walk
from kernels.ir.nvidia_tma import (BulkWait, LeaderOnly, MbarrierArrive, MbarrierExpectTx,
                                   MbarrierInit, MbarrierWait, NamedBarrier, RoleBranch,
                                   Setmaxnreg, TmaLoad, VarSet)
from kernels.ir.nvidia_wgmma import FenceProxyAsync, GmmaOperand, WgmmaMma, WgmmaWait
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
from kernels.printer.cuda import emit_cuda
from kernels.verify.gate_tma import ROLE_CHECKS
from kernels.verify.verifier import verify

SMALL = ((200, 300, 136, 3),)       # edge tiles in M, N, K; 3 CTAs, 2 units on one


def _check(k, source=None):
    return verify(k, arch="sm_90a", source=source)


@pytest.mark.parametrize("cfg", [
    TmaGemmConfig(), TmaGemmConfig(dtype="bf16", b_major="k"),
    TmaGemmConfig(bn=128, stages=6), TmaGemmConfig(bm=64, bn=128, stages=6, b_major="k"),
    TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16"),
], ids=lambda c: c.name)
def test_ir_tma_gemm_verifies(cfg):
    k = build_tma_gemm_ir(cfg)
    r = _check(k, emit_cuda(k))
    assert tuple(r.checks)[:len(ROLE_CHECKS)] == ROLE_CHECKS
    assert {"printed_source", "declarations"} <= set(r.checks)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_ir_tma_gemm_refuses_invalid_configurations():
    """Every form of the template is IR now (the two-launch split-K and two CTAs per SM too:
    tests/test_nvidia_ir_tma_reduce.py, test_nvidia_ir_tma_two_ctas.py); what the plan refuses,
    the builder refuses with the plan's message."""
    with pytest.raises(GemmConfigError, match="direct stores"):
        build_tma_gemm_ir(TmaGemmConfig(split_k=True))
    with pytest.raises(GemmConfigError, match="228 KiB"):
        build_tma_gemm_ir(TmaGemmConfig(bm=64, bn=128, stages=6, store="direct",
                                        ctas_per_sm=2))


def test_ir_tma_gemm_compiles_without_spills(tmp_path):
    from kernels.toolchain.nvrtc import nvrtc_available
    if not nvrtc_available():
        pytest.skip("needs NVRTC (cuda-python)")
    from kernels.cache import Cache
    from kernels.toolchain.nvrtc import compile_cuda
    for cfg in (TmaGemmConfig(), TmaGemmConfig(bm=64, bn=128, stages=6, dtype="bf16")):
        k = build_tma_gemm_ir(cfg, SMALL)
        m = compile_cuda(emit_cuda(k), "sm_90a", ["--ptxas-options=-v"], name=f"{k.name}.cu",
                         cache=Cache(tmp_path))
        assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


# ---------------------------------------------------------------------------- planted bugs

@pytest.fixture(scope="module")
def base():
    k = build_tma_gemm_ir(TmaGemmConfig(bn=128, stages=3), SMALL)
    assert _check(k).holds
    return k


def _role(k, name):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == name)


def _find(body, pred):
    """(list, index) of the first statement satisfying ``pred``, depth first."""
    for i, s in enumerate(body):
        if pred(s):
            return body, i
        if isinstance(s, (Loop, If)):
            hit = _find(s.body, pred)
            if hit:
                return hit
    return None


def _mutate(base, role, pred, fn):
    k = copy.deepcopy(base)
    body = _role(k, role).body if role else k.body
    lst, i = _find(body, pred)
    out = fn(lst[i])
    if out is None:
        del lst[i]
    else:
        lst[i] = out
    return k


def _refused(k, check, match=""):
    r = _check(k)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, bad
    assert match in bad[check], bad[check]


def _is(cls, **kw):
    return lambda s: isinstance(s, cls) and all(getattr(s, a) == v for a, v in kw.items())


def test_expect_tx_short_is_refused(base):
    k = _mutate(base, "producer", _is(MbarrierExpectTx),
                lambda s: MbarrierExpectTx(s.bar, s.index, s.bytes - 1024))
    _refused(k, "mbarrier_protocol", "more than its expect_tx")


def test_expect_tx_long_deadlocks(base):
    k = _mutate(base, "producer", _is(MbarrierExpectTx),
                lambda s: MbarrierExpectTx(s.bar, s.index, s.bytes + 1024))
    _refused(k, "mbarrier_protocol", "deadlock")


def test_producer_parity_not_flipped_deadlocks(base):
    k = _mutate(base, "producer", _is(MbarrierWait, bar="empty"),
                lambda s: MbarrierWait(s.bar, s.index, sym("ph")))
    _refused(k, "mbarrier_protocol", "deadlock")


def test_consumer_wrong_parity_reads_unlanded_boxes(base):
    k = _mutate(base, "consumer", _is(MbarrierWait, bar="full"),
                lambda s: MbarrierWait(s.bar, s.index, sympy.Mod(sym("ph") + 1, 2)))
    # a fresh barrier passes parity 1 at once: the consumer reads boxes not landed (consumers
    # first), or waits for a second phase that never comes (producer first)
    r = _check(k)
    assert not r.checks["lds_races"].holds or "deadlock" in \
        str(r.checks["mbarrier_protocol"].counterexample), r.to_json()


def test_missing_empty_wait_is_a_race(base):
    k = _mutate(base, "producer", _is(MbarrierWait, bar="empty"), lambda s: None)
    _refused(k, "lds_races", "overwrites")


def test_stage_released_before_its_wgmma_retired_is_a_race(base):
    # release the stage just issued (its wgmma group still in flight) instead of the previous
    k = _mutate(base, "consumer", lambda s: isinstance(s, If) and s.body and
                isinstance(s.body[0], MbarrierArrive),
                lambda s: If(sympy.true, [MbarrierArrive("empty", sym("st"))]))
    unit = next(s for s in _role(k, "consumer").body if isinstance(s, Loop))
    unit.body = [s for s in unit.body if not isinstance(s, MbarrierArrive)]
    _refused(k, "lds_races", "still in flight")


def _var_set(name):
    return lambda s: isinstance(s, VarSet) and s.name == name


def test_ring_not_advanced_is_refused(base):
    # the consumers' stage never moves: they wait on full[0] again, observing its phase 0
    # twice (or never seeing it complete), whatever the producer does
    k = _mutate(base, "consumer", _var_set("st"), lambda s: None)
    _refused(k, "mbarrier_protocol")


def test_ring_phase_never_flipped_is_refused(base):
    k = _mutate(base, "producer", _var_set("ph"), lambda s: VarSet("ph", sym("ph")))
    _refused(k, "mbarrier_protocol")


def test_ring_of_the_wrong_length_is_refused(base):
    k = _mutate(base, "consumer", _var_set("st"),
                lambda s: VarSet("st", sympy.Mod(sym("st") + 1, 2)))
    r = _check(k)
    assert not r.holds, r.to_json()


def test_prev_taken_after_the_advance_is_refused():
    # prev set from the advanced st: each k step releases the stage its own wgmma group is
    # still reading.  K = 520 (9 k tiles > 3 stages): the producer refills such a stage while
    # the group reads it (with K <= 3 k tiles the unit-end release, after wait_group 0, comes
    # first and the early releases do no harm; the model finds no race there, rightly)
    k = build_tma_gemm_ir(TmaGemmConfig(bn=128, stages=3), ((128, 128, 520, 1),))
    kloop = next(s for s in walk(_role(k, "consumer").body)
                 if isinstance(s, Loop) and s.var == "kk")
    prev = kloop.body.pop(next(j for j, s in enumerate(kloop.body) if _var_set("prev")(s)))
    kloop.body.append(prev)
    r = _check(k)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "lds_races" in bad or "deadlock" in bad.get("mbarrier_protocol", ""), bad


def test_carried_variables_are_refused_by_the_lockstep_engines():
    from kernels.ir.core import Kernel
    from kernels.verify.spec import SpecError
    k = build_tma_gemm_ir(TmaGemmConfig(bn=128, stages=3), SMALL)
    spec = copy.copy(k.spec)
    object.__setattr__(spec, "warpgroup_roles", ())
    with pytest.raises(SpecError, match="loop-carried"):
        verify(k, spec, arch="sm_90a")
    assert isinstance(k, Kernel)


def test_empty_count_too_small_is_refused(base):
    k = _mutate(base, None, _is(MbarrierInit, bar="empty"),
                lambda s: MbarrierInit(s.bar, s.n, s.count // 2))
    _refused(k, "mbarrier_protocol")


def test_wrong_box_coordinate_is_refused(base):
    k = _mutate(base, "producer", _is(TmaLoad, tag="A.tma"),
                lambda s: TmaLoad(s.tmap, s.c0, s.c1 + 64, s.dst, s.offset, s.bar, s.index,
                                  s.tag))
    _refused(k, "lane_accumulator_writeback")


def test_box_into_the_wrong_stage_is_refused(base):
    k = _mutate(base, "producer", _is(TmaLoad, tag="A.tma"),
                lambda s: TmaLoad(s.tmap, s.c0, s.c1, s.dst,
                                  sympy.Mod(sym("st") + 1, 3) * 8192, s.bar, s.index, s.tag))
    _refused(k, "lds_races")


def test_wgmma_k_step_mismatch_is_refused(base):
    def swap(s):
        a = s.a
        return WgmmaMma(s.atom, s.acc, GmmaOperand(a.buf, a.start + 16, a.desc, a.major, a.mn),
                        s.b, s.tag)
    k = _mutate(base, "consumer", _is(WgmmaMma, tag="wgmma(k0)"), swap)
    _refused(k, "lane_mfma_operands")


def test_missing_proxy_fence_is_refused(base):
    k = _mutate(base, "consumer", _is(FenceProxyAsync), lambda s: None)
    _refused(k, "lds_races", "no fence.proxy.async")


def test_missing_barrier_after_the_fence_is_refused(base):
    lst, i = _find(_role(base, "consumer").body, _is(FenceProxyAsync))
    k = copy.deepcopy(base)
    lst2, _ = _find(_role(k, "consumer").body, _is(FenceProxyAsync))
    del lst2[i + 1]
    _refused(k, "lds_races", "not published")


def test_missing_bulk_read_wait_is_refused(base):
    k = _mutate(base, "consumer", lambda s: isinstance(s, LeaderOnly) and
                isinstance(s.body[0], BulkWait) and s.body[0].read, lambda s: None)
    _refused(k, "lds_races", "bulk store not yet waited")


def test_missing_final_bulk_wait_is_refused(base):
    k = copy.deepcopy(base)
    body = _role(k, "consumer").body
    assert isinstance(body[-1], LeaderOnly) and not body[-1].body[0].read
    del body[-1]
    _refused(k, "lds_races", "ends with bulk stores")


def test_shared_named_barrier_id_is_refused(base):
    k = _mutate(base, "consumer", _is(NamedBarrier), lambda s: NamedBarrier(1, 128))
    _refused(k, "lds_races", "bar.sync")


def test_register_budget_is_checked(base):
    k = _mutate(base, "consumer", _is(Setmaxnreg), lambda s: Setmaxnreg(True, 248))
    _refused(k, "register_budget", "register file")
    k = _mutate(base, "producer", _is(Setmaxnreg), lambda s: Setmaxnreg(False, 44))
    _refused(k, "register_budget", "multiple of 8")


def test_unswizzled_c_buffer_is_refused(base):
    from layoutalg.symbolic import Xor
    k = copy.deepcopy(base)
    for s in walk(_role(k, "consumer").body):
        if isinstance(s, Access):
            s.offset = s.offset.replace(lambda e: isinstance(e, Xor), lambda e: e.args[0])
    _refused(k, "lane_accumulator_writeback")


def test_short_k_loop_is_refused(base):
    k = _mutate(base, None, _is(Let, name="KT"),
                lambda s: Let("KT", sympy.floor(sym("K") / 64)))
    _refused(k, "lane_accumulator_writeback", "never summed")


def test_skipped_unit_is_refused(base):
    k = _mutate(base, None, _is(Let, name="nloc"),
                lambda s: Let("nloc", sympy.floor((sym("tiles") - sym("bx")) / sym("ctas"))))
    _refused(k, "coverage", "never")


def test_unpinned_wait_is_refused(base):
    k = _mutate(base, "consumer", _is(WgmmaWait, pending=1), lambda s: WgmmaWait(1, ()))
    _refused(k, "lane_accumulator_writeback", "lg_pin")


def test_missing_zero_fill_is_refused(base):
    k = _mutate(base, "consumer", _is(ZeroFrag), lambda s: None)
    _refused(k, "lane_mfma_operands", "zeroed")


def test_tma_issued_by_every_thread_is_refused(base):
    k = copy.deepcopy(base)
    prod = _role(k, "producer")
    lead = prod.body[1]
    prod.body[1:2] = lead.body
    _refused(k, "mbarrier_protocol", "arrival(s) more than the count")


def test_raster_without_the_partial_group_is_refused(base):
    k = _mutate(base, "consumer", _is(Let, name="gsize"), lambda s: Let("gsize", 8))
    k2 = _mutate(k, "producer", _is(Let, name="gsize"), lambda s: Let("gsize", 8))
    r = _check(k2)
    assert not r.checks["coverage"].holds, r.to_json()


# ---------------------------------------------------------------------------- printed text

def test_printed_text_mutations_are_refused(base):
    src = emit_cuda(base)
    assert _check(base, src).holds
    for bad, check in ((src.replace("__launch_bounds__(384, 1)", "__launch_bounds__(384)"),
                        "declarations"),
                       (src.replace("mbarrier.try_wait.parity", "mbarrier.test_wait.parity"),
                        "declarations"),
                       (src.replace("lg_bar_full[3];", "lg_bar_full[2];"), "declarations"),
                       (src.replace("lg_tma_load_2d((sA_u32", "lg_tma_load_2d((sB_u32"),
                        "printed_source"),
                       (src.replace("lg_mbar_expect_tx((lg_bar_full_u32 + 8 * (st)), 32768u)",
                                    "lg_mbar_expect_tx((lg_bar_full_u32 + 8 * (st)), 16384u)"),
                        "printed_source"),
                       # the 32-bit shared bases, their scale, the barriers' initialisation
                       (src.replace("sA_u32 = lg_smem_u32(sA);", "sA_u32 = lg_smem_u32(sB);"),
                        "declarations"),
                       (src.replace("lg_bar_empty_u32 = lg_smem_u32(lg_bar_empty);",
                                    "lg_bar_empty_u32 = lg_smem_u32(lg_bar_full);"),
                        "declarations"),
                       (src.replace("(sB_u32 + 2 * (", "(sB_u32 + 4 * (", 1), "printed_source"),
                       (src.replace("(lg_bar_empty_u32 + 8 * (i)), 8)",
                                    "(lg_bar_empty_u32 + 8 * (i)), 4)"), "declarations"),
                       (src.replace(", sA_u32, 4096*cg", ", sB_u32, 4096*cg", 1),
                        "printed_source"),
                       # the loop-carried ring position: updates read back, stray / missing ones
                       (src.replace("ph = ((ph) ^ (max(0, st - 1)));",
                                    "ph = ((ph) ^ (max(0, st - 2)));", 1), "printed_source"),
                       (src.replace("prev = st;\n", "prev = st;\n st = 0;\n", 1),
                        "printed_source"),
                       (src.replace("prev = st;\n", "\n", 1), "printed_source"),
                       (src.replace("st = st - 3*max(0, st - 1) + 1;", "st++;", 1),
                        "printed_source"),
                       # index expressions read back and evaluated against the IR's
                       (src.replace("const int gsize = min(8, -first_m + grid_m);",
                                    "const int gsize = min(8, -first_m + grid_m + 1);"),
                        "printed_source"),
                       (src.replace("^ (rx)", "^ (0)", 1), "printed_source"),
                       (src.replace("(lg_u32)(((ph + 1) % 2))", "(lg_u32)(ph)"),
                        "printed_source")):
        assert bad != src
        r = _check(base, bad)
        assert not r.checks[check].holds, (check, r.to_json())


# ---------------------------------------------------------------------------- runtime sizes


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 700), n=st.integers(1, 90).map(lambda x: 8 * x),
       k=st.integers(1, 400), ctas=st.integers(1, 6))
def test_ir_tma_gemm_verifies_at_any_size(m, n, k, ctas):
    """Runtime M / N / K (N a multiple of 8: C rows 16-byte aligned for the TMA store) and
    any CTA count up to the tiles: every check holds (edges, partial raster groups, several
    units per CTA, K past the ring's length)."""
    cfg = TmaGemmConfig(bm=64, bn=128, stages=3)
    tiles = -(-m // 64) * -(-n // 128)
    k_ir = build_tma_gemm_ir(cfg, ((m, n, k, min(ctas, tiles)),))
    r = _check(k_ir)
    assert r.holds, {c: v.counterexample for c, v in r.checks.items() if not v.holds}


def test_ir_tma_gemm_object_is_verified_before_compiling():
    from kernels.nvidia.wgmma_tma_ir import IrTmaGemm
    g = IrTmaGemm(TmaGemmConfig(bm=64, bn=128, stages=6))
    assert g.report.holds and {"mbarrier_protocol", "printed_source"} <= set(g.report.checks)
    assert g.source == emit_cuda(g.ir) and g.kernel_name in g.source


@pytest.mark.parametrize("cfg", [TmaGemmConfig(), TmaGemmConfig(bm=64, bn=128, stages=6)],
                         ids=lambda c: c.name)
def test_prev_after_the_advance_is_refused_at_the_default_instances(cfg):
    """What IrTmaGemm verifies (the default instances: K = 200, 4 k tiles, 2 units on a CTA)
    refuses the early release for the 3- and the 6-stage rings: the stage never released
    deadlocks the producer."""
    k = build_tma_gemm_ir(cfg)
    kloop = next(s for s in walk(_role(k, "consumer").body)
                 if isinstance(s, Loop) and s.var == "kk")
    kloop.body.append(kloop.body.pop(next(j for j, s in enumerate(kloop.body)
                                          if _var_set("prev")(s))))
    _refused(k, "mbarrier_protocol", "deadlock")
