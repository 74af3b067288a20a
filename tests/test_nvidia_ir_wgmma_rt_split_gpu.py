"""The IR-built split-K of the cp.async wgmma GEMM (split kernel + IR reduce kernel) against
the string template's two launches on a real GPU (skipped without): the same k tiles per split
in the same wgmma order, the same sum order from 0.f and one rounding, so bitwise equal
outputs, within the float32 reference tolerance, NaN-poisoned (an element never written
fails).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_wgmma_rt_split_gpu.py``.
``benchmarks/nvidia_wgmma_rt_split_ir.py`` makes the same comparison with timings."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig  # noqa: E402
from kernels.nvidia.wgmma_rt_ir_split import IrWgmmaRtSplitGemm  # noqa: E402

from _gemm_gpu_pair import assert_bitwise_pair  # noqa: E402

F16 = WgmmaGemmConfig(split_k=True)
BF16_K = WgmmaGemmConfig(split_k=True, dtype="bf16", b_major="k")


@pytest.mark.parametrize("cfg,shape,splits", [
    (F16, (253, 297, 1000), 3), (BF16_K, (777, 333, 1030), 4), (F16, (1, 1, 8), 1),
    (F16, (256, 1024, 16384), 8), (F16, (300, 520, 4160), 7),
], ids=str)
def test_bitwise_equal_to_the_template(cfg, shape, splits):
    ir, tpl = IrWgmmaRtSplitGemm(cfg), WgmmaGemm(cfg)
    assert_bitwise_pair(cfg, shape, 11, functools.partial(ir, splits=splits),
                        functools.partial(tpl, splits=splits))


def test_odd_leading_dimension_bitwise_equal():
    a = torch.randn((600, 1001), device="cuda").half()[:, :1000]
    b = torch.randn((1000, 520), device="cuda").half()
    outs = [torch.full((600, 520), float("nan"), dtype=torch.float16, device="cuda")
            for _ in range(2)]
    IrWgmmaRtSplitGemm(F16)(a, b, outs[0], splits=5)
    WgmmaGemm(F16)(a, b, outs[1], splits=5)
    torch.cuda.synchronize()
    assert torch.isfinite(outs[0].float()).all() and torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("m,n,k,pad,b_major", [(64, 4096, 4096, 3, "n"), (16, 1024, 16384, 1, "n"),
                                               (64, 512, 8192, 1, "k")], ids=str)
def test_gemm_runs_the_ir_split_bitwise_the_template(m, n, k, pad, b_major):
    """What the dispatch does with CP_SPLIT_ON_IR on: gemm() on a skinny long-K problem whose
    rows are not 16-byte aligned (the selection's cp.async split-K: 64x128 / 64x64 tiles,
    8-16 splits) launches the IR pair, and its output is the template pair's bit for bit."""
    from kernels.nvidia import dispatch
    from kernels.nvidia.wgmma_rt_ir_split import split_kernel_name
    dt = torch.bfloat16 if b_major == "k" else torch.float16
    a = torch.randn((m, k + pad), device="cuda").to(dt)[:, :k]
    b = torch.randn((k, n) if b_major == "n" else (n, k), device="cuda").to(dt)
    ch = dispatch.choose_gemm(a, b, b_major=b_major)
    assert ch.config.split_k and ch.splits > 1 and ch.kernel == split_kernel_name(ch.config)
    out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    dispatch.gemm(a, b, out, b_major=b_major)
    want = WgmmaGemm(ch.config)(a, b, splits=ch.splits)
    torch.cuda.synchronize()
    assert torch.isfinite(out.float()).all() and torch.equal(out, want)
