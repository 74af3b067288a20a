"""The runtime-size IR GEMMs' wide (64-bit) form (kernels.nvidia.gemm_wide): long long leading
dimensions, verified as the 32-bit form is plus its printed text at launches past 2^31 (a
planted int leading dimension refused there), the 32-bit forms' sources unchanged, and the
launcher handing a call the 32-bit form cannot take to it with WIDE_GEMM_ON_IR (else to the
template), on a pretend H100."""

from __future__ import annotations

import pytest

from kernels.errors import KernelError
from kernels.nvidia.gemm import CudaGemmConfig
from kernels.nvidia.gemm_rt_ir import build_mma_rt_ir
from kernels.nvidia.gemm_wide import (LD_SCALARS, check_wide_text, past_2_31_instances,
                                      widen_rt_gemm)
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_rt_ir import RtWgmmaBuilder, build_wgmma_rt_ir
from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
from kernels.verify.verifier import verify

CASES = {"wgmma": (build_wgmma_rt_ir, WgmmaGemmConfig()),
         "wgmma-bk": (build_wgmma_rt_ir, WgmmaGemmConfig(b_major="k")),
         "mma": (build_mma_rt_ir, CudaGemmConfig())}


@pytest.mark.parametrize("case", list(CASES))
def test_wide_form_verifies_and_its_text_holds_past_2_31(case):
    build, cfg = CASES[case]
    k = build(cfg, wide=True)
    src = emit_cuda_gemm_rt(k)
    assert k.name.endswith("_i64") and "long long lda, long long ldb, long long ldc" in src
    assert "const int ag0" not in src and "const int bg0" not in src
    r = verify(k, arch="sm_90", source=src)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    check_wide_text(k, src)
    for inst in past_2_31_instances(cfg):
        v = inst.values
        assert v["M"] * v["lda"] > 2 ** 32 and v["M"] * v["ldc"] > 2 ** 32


@pytest.mark.parametrize("case", list(CASES))
def test_32_bit_form_is_unchanged_and_refused_past_2_31(case):
    """The default build prints the ag0 / bg0 lets (golden sources), and its text at the
    launches past 2^31 is refused (int offsets)."""
    build, cfg = CASES[case]
    k = build(cfg)
    src = emit_cuda_gemm_rt(k)
    assert "const int ag0" in src and not k.name.endswith("_i64")
    with pytest.raises(KernelError, match="index_ranges"):
        check_wide_text(k, src)


@pytest.mark.parametrize("int_ld", LD_SCALARS)
def test_a_leading_dimension_left_int_is_refused(int_ld):
    """Planted: the wide build with one leading dimension printed int."""
    cfg = WgmmaGemmConfig()
    b = RtWgmmaBuilder(cfg)
    b.wide = True
    k = widen_rt_gemm(b.build(), tuple(n for n in LD_SCALARS if n != int_ld))
    src = emit_cuda_gemm_rt(k)
    assert f"int {int_ld}," in src
    with pytest.raises(KernelError, match="index_ranges"):
        check_wide_text(k, src)


def test_wide_keeps_the_copy_lets_out_only_in_the_wide_build():
    """Planted: the wide scalars on the 32-bit body (ag0 / bg0 int lets of a row times a
    long long leading dimension) are refused past 2^31: the narrowing is caught."""
    k = widen_rt_gemm(build_wgmma_rt_ir(WgmmaGemmConfig()))
    src = emit_cuda_gemm_rt(k)
    assert "const int ag0" in src and "long long lda" in src
    with pytest.raises(KernelError, match="index_ranges"):
        check_wide_text(k, src)


@pytest.mark.parametrize("on", [False, True], ids=["switch-off", "switch-on"])
@pytest.mark.parametrize("kind", ["mma", "wgmma"])
def test_a_matrix_past_2_31_runs_the_wide_form_with_the_switch(monkeypatch, on, kind):
    """On a pretend H100 (nothing compiled): A of 70000 x 40000 (past 2^31 elements) runs the
    wide IR kernel with 64-bit lda / ldb / ldc arguments where WIDE_GEMM_ON_IR holds (its
    launch proved), else the template; a small call keeps the 32-bit IR kernel."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia import gemm_wide
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    from kernels.nvidia.wgmma_rt_ir import IrWgmmaRtGemm
    fake = fc.install(monkeypatch)
    monkeypatch.setattr(gemm_wide, "WIDE_GEMM_ON_IR", on)
    try:
        g = IrMmaRtGemm(CudaGemmConfig()) if kind == "mma" else IrWgmmaRtGemm(WgmmaGemmConfig())
        f16 = torch.float16
        g(fc.FakeCudaTensor((300, 200), f16), fc.FakeCudaTensor((200, 520), f16),
          fc.FakeCudaTensor((300, 520), f16))
        assert fake.launches[-1].kernel == g.kernel_name
        big = fc.FakeCudaTensor((70000, 40000), f16)
        g(big, fc.FakeCudaTensor((40000, 256), f16), fc.FakeCudaTensor((70000, 256), f16))
        L = fake.launches[-1]
        if on:
            assert L.kernel == g.kernel_name + "_i64"
            sig = fake.signatures[L.kernel]
            assert sig[3:] == ("i32",) * 3 + ("i64",) * 3 + ("i32",) * 2
            assert L.args[3:] == (70000, 256, 40000, 40000, 256, 256, 1, 1)
        else:
            assert not L.kernel.startswith("lg_ir") and not L.kernel.endswith("_i64")
    finally:
        fc.clear_caches()


def test_a_launch_the_wide_proof_refuses_runs_the_template(monkeypatch):
    """With the switch on, a launch whose printed wide arithmetic is not proved at its values
    (index_ranges fails: here a pretend refusal) runs the template, never an unproved kernel."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia import gemm_wide, prefill_wide
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    fake = fc.install(monkeypatch)
    monkeypatch.setattr(gemm_wide, "WIDE_GEMM_ON_IR", True)
    monkeypatch.setattr(prefill_wide, "launch_index_ranges",
                        lambda *a: type("R", (), {"holds": False})())
    try:
        g = IrMmaRtGemm(CudaGemmConfig())
        f16 = torch.float16
        g(fc.FakeCudaTensor((70000, 40000), f16), fc.FakeCudaTensor((40000, 256), f16),
          fc.FakeCudaTensor((70000, 256), f16))
        assert fake.launches[-1].kernel == "lg_gemm_f16_n_128x256x32_w2x4_s4_v8"
    finally:
        fc.clear_caches()
