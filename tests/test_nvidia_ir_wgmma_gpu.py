"""The IR-built cp.async + wgmma GEMM against the string-template one on a real GPU (skipped
without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_wgmma_gpu.py``.
Both kernels issue the same wgmma instructions on the same shared layouts and descriptors in the
same k order and round with the same ``cvt.rn`` pairs, so their outputs must be bitwise equal;
both are also compared with a float32 torch reference (tolerances of tests/test_nvidia_gpu.py).
The output is poisoned with NaN first, so an element the kernel never writes fails.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernels.cuda.launch import cuda_available  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_available(),
                                 reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")]

from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig  # noqa: E402
from kernels.nvidia.wgmma_ir import IrWgmmaGemm  # noqa: E402

TOL = {torch.float16: 1e-3, torch.bfloat16: 6e-3}


@pytest.mark.parametrize("cfg,shape", [
    (WgmmaGemmConfig(bm=128, bn=64, bk=32, stages=3), (256, 128, 128)),
    (WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"),
     (128, 256, 192)),
    (WgmmaGemmConfig(bm=128, bn=128, bk=16, stages=4), (256, 384, 80)),
    (WgmmaGemmConfig(), (512, 1024, 512)),
    (WgmmaGemmConfig(dtype="bf16", b_major="k"), (384, 512, 256)),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_wgmma_kernel_equals_template(cfg, shape):
    m, n, k = shape
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    g = torch.Generator(device="cuda").manual_seed(20)
    a = torch.randn((m, k), device="cuda", generator=g).to(dt)
    b = torch.randn((k, n) if cfg.b_major == "n" else (n, k), device="cuda", generator=g).to(dt)
    ref = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
    ir_out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    tpl_out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    ir = IrWgmmaGemm(cfg, m, n, k)
    assert ir.report.holds
    ir(a, b, ir_out)
    WgmmaGemm(cfg)(a, b, tpl_out)
    torch.cuda.synchronize()
    assert torch.isfinite(ir_out.float()).all()
    err = ((ir_out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dt], err
    assert torch.equal(ir_out, tpl_out), (ir_out.float() - tpl_out.float()).abs().max().item()


@pytest.mark.parametrize("cfg,shape", [
    (WgmmaGemmConfig(bm=128, bn=64, bk=32, stages=3), (256, 128, 128)),
    (WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"),
     (128, 256, 192)),
    (WgmmaGemmConfig(), (512, 1024, 512)),
    (WgmmaGemmConfig(dtype="bf16", b_major="k"), (384, 512, 256)),
], ids=lambda x: getattr(x, "name", str(x)))
def test_register_a_form_equals_shared_a(cfg, shape):
    """The .rs form (A by ldmatrix into the wgmma register-A fragment, the layout the attention
    kernels feed P through) against the shared-A IR kernel: the same wgmma products in the same
    k order, so bitwise equal if the register-A layout (mfma_specs Wgmma.layout_a) is the
    hardware's; also against the float32 reference."""
    m, n, k = shape
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    g = torch.Generator(device="cuda").manual_seed(21)
    a = torch.randn((m, k), device="cuda", generator=g).to(dt)
    b = torch.randn((k, n) if cfg.b_major == "n" else (n, k), device="cuda", generator=g).to(dt)
    ref = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
    rs_out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    ss_out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    rs = IrWgmmaGemm(cfg, m, n, k, a_from="registers")
    assert rs.report.holds and rs.ir.name.endswith("_rs")
    rs(a, b, rs_out)
    IrWgmmaGemm(cfg, m, n, k)(a, b, ss_out)
    torch.cuda.synchronize()
    assert torch.isfinite(rs_out.float()).all()
    err = ((rs_out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dt], err
    assert torch.equal(rs_out, ss_out), (rs_out.float() - ss_out.float()).abs().max().item()
