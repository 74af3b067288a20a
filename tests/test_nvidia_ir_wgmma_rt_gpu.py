"""The IR-built runtime-size cp.async + wgmma GEMM against the string template on a real GPU
(skipped without): same products in the same k order, so bitwise equal outputs, also within the
float32 reference tolerance; NaN-poisoned outputs (an element never written fails).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_wgmma_rt_gpu.py``.
The benchmark ``benchmarks/nvidia_wgmma_rt_ir.py`` makes the same comparison at the issue's
shapes with timings (docs/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig  # noqa: E402
from kernels.nvidia.wgmma_rt_ir import IrWgmmaRtGemm  # noqa: E402

from _gemm_gpu_pair import assert_bitwise_pair  # noqa: E402


@pytest.mark.parametrize("cfg,shape", [
    (WgmmaGemmConfig(bm=64, bn=64, stages=6), (777, 333, 130)),
    (WgmmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", b_major="k"), (777, 333, 130)),
    (WgmmaGemmConfig(bm=64, bn=64, stages=6), (1, 1, 8)),
    (WgmmaGemmConfig(), (1000, 1000, 1000)),
], ids=str)
def test_bitwise_equal_to_the_template(cfg, shape):
    assert_bitwise_pair(cfg, shape, 7, IrWgmmaRtGemm(cfg), WgmmaGemm(cfg))


def test_odd_leading_dimension_bitwise_equal():
    cfg = WgmmaGemmConfig()
    a = torch.randn((600, 1001), device="cuda").half()[:, :1000]
    b = torch.randn((1000, 520), device="cuda").half()
    outs = [torch.full((600, 520), float("nan"), dtype=torch.float16, device="cuda")
            for _ in range(2)]
    IrWgmmaRtGemm(cfg)(a, b, outs[0])
    WgmmaGemm(cfg)(a, b, outs[1])
    torch.cuda.synchronize()
    assert torch.isfinite(outs[0].float()).all() and torch.equal(outs[0], outs[1])
