"""The one build driver (kernels/amd/driver.py, issue 13 item 4): every AMD builder goes through
it, and a new kernel family plugs in a builder, a verifier and a printer.  The planted bugs here
are in the pieces a family supplies; the driver must refuse them with a named check."""

from __future__ import annotations

from typing import Any, List

import pytest

from kernels.amd import driver as drv
from kernels.amd.decode import DecodeConfig, build_decode
from kernels.amd.decode_splitkv import build_splitkv
from kernels.amd.flash_attention import AttnConfig, build_attention
from kernels.amd.gemm import BuiltKernel, build_gemm, gemm_family
from kernels.amd.gemm_plan import GemmConfig
from kernels.printer.hip import emit
from kernels.verify.gate import GateReport, VerificationError
from layoutalg.verify.result import CheckResult

CFG = GemmConfig(m=128, n=128, k=128)
ARRAY = "LAGEN_SHARED(lagen_f16x8, sA_v, 1024)"
HALVED = "LAGEN_SHARED(lagen_f16x8, sA_v, 512)"


def _as_gemm(sts: List[drv.Stages]) -> BuiltKernel:
    st, = sts
    return BuiltKernel(st.ir.name, st.source, st.ir, st.plan, st.verification, st.timings)


def _family(**over: Any) -> drv.KernelFamily:
    f = gemm_family()
    return drv.KernelFamily(**{**{k: getattr(f, k) for k in
                                  ("build_ir", "verifier", "printer", "plan", "instances")},
                               **over})


def test_new_family_with_a_printer_bug_is_refused_by_declarations():
    """A family is three pieces; a bug in its printer is caught by the printed-source checks the
    driver runs for every family (here: an LDS array printed at half its size)."""
    assert ARRAY in emit(build_gemm(CFG).ir)          # the mutation below applies
    fam = _family(printer=lambda ir: emit(ir).replace(ARRAY, HALVED))
    with pytest.raises(VerificationError) as e:
        drv.build_program([fam], CFG, _as_gemm)
    assert "declarations" in {k for k, r in e.value.report.checks.items() if not r.holds}


def test_printed_checks_read_the_program_source_not_the_stage_text():
    """The checked text is what compiles (``program.source``): a program that alters the
    printed text after the stages is refused.  A driver that checked ``Stages.source`` would
    pass this kernel."""
    def make(sts: List[drv.Stages]) -> BuiltKernel:
        bk = _as_gemm(sts)
        bk.source = bk.source.replace(ARRAY, HALVED)
        return bk
    with pytest.raises(VerificationError) as e:
        drv.build_program([gemm_family()], CFG, make)
    assert not e.value.report.checks["declarations"].holds


def test_a_failing_verifier_raises_and_verify_false_skips_everything():
    def bad_gate(ir: Any) -> GateReport:
        return GateReport(ir.name, {"planted": CheckResult(
            check="planted", holds=False, method="exhaustive", domain="-", counterexample="x")}, {})
    with pytest.raises(VerificationError) as e:
        drv.build_program([_family(verifier=bad_gate)], CFG, _as_gemm)
    assert list(e.value.report.checks)[0] == "planted"
    # verify=False: no gate, no printed checks, no raise, and the report says nothing was checked
    bk = drv.build_program([_family(verifier=bad_gate, printer=lambda ir: "garbage")], CFG,
                           _as_gemm, verify=False)
    assert bk.verification.checks == {} and bk.verification.details == {"skipped": True}
    assert bk.source == "garbage" and "printed_s" not in bk.timings


def test_link_runs_after_printed_checks_and_can_refuse():
    seen = []

    def link(program: Any) -> None:
        seen.append(sorted(program.verification.checks))
        program.verification.checks["linked"] = CheckResult(
            check="linked", holds=False, method="exhaustive", domain="-", counterexample="pair")
    with pytest.raises(VerificationError):
        drv.build_program([gemm_family()], CFG, _as_gemm, link=link)
    assert "index_ranges" in seen[0] and "declarations" in seen[0]


def test_builders_go_through_the_driver_with_their_timings():
    g = build_gemm(CFG)
    assert set(g.timings) == {"plan_s", "ir_s", "gate_s", "emit_s", "printed_s"}
    a = build_attention(AttnConfig(head_dim=64))
    assert set(a.timings) == {"plan_s", "ir_s", "gate_s", "emit_s", "printed_s"}
    d = build_decode(DecodeConfig())
    assert set(d.timings) == {"ir_s", "gate_s", "emit_s", "printed_s"} and d.kind == "decode"
    assert "printed_source" in g.verification.checks and "printed_source" in d.verification.checks


def test_splitkv_pair_builds_two_different_kernels():
    """Regression: the pair's families are made in a loop; a late-binding closure would build
    the combine kernel twice."""
    sk = build_splitkv(DecodeConfig())
    assert sk.split.ir.name != sk.combine.ir.name
    assert (sk.split.kind, sk.combine.kind) == ("decode_split", "decode_combine")
    assert sk.split.source != sk.combine.source
    assert set(sk.timings) == {"build_and_gate_s"}
    for b in (sk.split, sk.combine):           # printed checks ran on the pair's one source
        assert b.verification.checks["printed_source"].holds


def test_emulate_one_signature_and_clear_refusals():
    """``emulate(*args, grid=None)`` for every built program: an attention kernel's grid depends
    on the shape and must be given; the split-KV pair points to ``emulate_pair``.  Both refuse
    before compiling anything, with the project's error type."""
    from kernels.errors import KernelError
    a = build_attention(AttnConfig(head_dim=64))
    with pytest.raises(KernelError, match="pass grid="):
        a.emulate()
    sk = build_splitkv(DecodeConfig())
    with pytest.raises(KernelError, match="emulate_pair"):
        sk.emulate(grid=(1, 1, 1))
    assert build_gemm(CFG).default_grid() == build_gemm(CFG).grid
