"""The runtime-size IR GEMMs' wide form (kernels.nvidia.gemm_wide) against the string template
on a real GPU (skipped without): A a strided view whose rows lie 2^20 + 8 elements apart over
2304 rows (2.4 x 10^9 elements, past 2^31; a 4.8 GB buffer), C likewise with ldc = 2^20 + 8;
the call bound with WIDE_GEMM_ON_IR launches the wide kernel, the template's output is
bitwise equal (same products in the same k order), NaN-poisoned outputs.  Written
2026-11-25; first run on an H100 the same day (bitwise), after which WIDE_GEMM_ON_IR is on."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

LD = 2 ** 20 + 8


def _strided(rows, cols, ld, fill=None):
    buf = torch.empty((rows - 1) * ld + cols, device="cuda", dtype=torch.float16)
    v = buf.as_strided((rows, cols), (ld, 1))
    if fill is None:
        v.normal_()
    else:
        v.fill_(fill)
    return v


@pytest.mark.parametrize("kind", ["mma", "wgmma"])
def test_wide_ir_equals_template_past_2_31(monkeypatch, kind):
    from kernels.nvidia import gemm_wide
    from kernels.nvidia.gemm import CudaGemmConfig
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    from kernels.nvidia.wgmma import WgmmaGemmConfig
    from kernels.nvidia.wgmma_rt_ir import IrWgmmaRtGemm
    g = IrMmaRtGemm(CudaGemmConfig()) if kind == "mma" else IrWgmmaRtGemm(WgmmaGemmConfig())
    M, K, N = 2304, 1000, 520
    a = _strided(M, K, LD)
    b = torch.randn((K, N), device="cuda").half()
    monkeypatch.setattr(gemm_wide, "WIDE_GEMM_ON_IR", True)
    vals = dict(M=M, N=N, K=K, lda=LD, ldb=N, ldc=LD, a_vec=1, b_vec=1)
    assert g.wide_launch(vals, -(-M // g.cfg.bm) * -(-N // g.cfg.bn)) is not None
    got = _strided(M, N, LD, float("nan"))
    g(a, b, got)
    want = _strided(M, N, LD, float("nan"))
    g.template()(a, b, want)
    torch.cuda.synchronize()
    assert not got.isnan().any()
    assert torch.equal(got, want)
