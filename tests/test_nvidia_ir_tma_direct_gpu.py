"""The IR-built TMA GEMM's direct-store form against the string template on a real GPU
(skipped without): ``python3 -m pytest -m gpu tests/test_nvidia_ir_tma_direct_gpu.py``.

Both kernels issue the same TMA boxes and wgmma instructions in the same k order and round each
accumulator with the same ``cvt.rn`` into the same C element, so their outputs must be bitwise
equal, at an even row stride (4-byte pair stores) and an odd one (2-byte stores), with edge
tiles in M and N.  The outputs are poisoned with NaN first (an element never written fails) and
the padding columns of a padded C must stay NaN (a store past N fails)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig, tma_padded  # noqa: E402
from kernels.nvidia.wgmma_tma_ir import IrTmaGemm  # noqa: E402

TOL = {torch.float16: 1e-3, torch.bfloat16: 6e-3}


@pytest.mark.parametrize("cfg,shape,ldc", [
    (TmaGemmConfig(store="direct"), (1000, 3001, 1000), None),      # odd N: ldc = N odd
    (TmaGemmConfig(store="direct"), (1000, 3001, 1000), 3010),      # padded, even
    (TmaGemmConfig(dtype="bf16", b_major="k", store="direct"), (777, 333, 130), 341),
    (TmaGemmConfig(bm=64, bn=128, stages=6, store="direct"), (130, 4104, 200), None),
    (TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", store="direct", a_rows=16),
     (13, 517, 4096), 520),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_direct_store_equals_template(cfg, shape, ldc):
    m, n, k = shape
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    g = torch.Generator(device="cuda").manual_seed(20)
    a = torch.randn((m, k), device="cuda", generator=g).to(dt)
    b = torch.randn((k, n) if cfg.b_major == "n" else (n, k), device="cuda", generator=g).to(dt)
    ref = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
    a, b = tma_padded(a), tma_padded(b)         # rows on 16 bytes, as gemm() pads them
    full = [torch.full((m, ldc or n), float("nan"), dtype=dt, device="cuda") for _ in range(2)]
    ir_out, tpl_out = (f[:, :n] for f in full)
    ir = IrTmaGemm(cfg)
    assert ir.report.holds and ir.kernel_name.startswith("lg_irtma_")
    ir(a, b, ir_out)
    TmaGemm(cfg)(a, b, tpl_out)
    torch.cuda.synchronize()
    assert torch.isfinite(ir_out.float()).all()
    if ldc:
        assert torch.isnan(full[0][:, n:].float()).all()       # nothing stored past N
    err = ((ir_out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dt], err
    assert torch.equal(ir_out, tpl_out), (ir_out.float() - tpl_out.float()).abs().max().item()
