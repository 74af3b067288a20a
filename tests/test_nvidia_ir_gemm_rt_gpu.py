"""The IR-built runtime-size mma.sync GEMM against the string template on a real GPU (skipped
without): same products in the same k order, so bitwise equal outputs, also within the float32
reference tolerance; NaN-poisoned outputs (an element never written fails).  On an H100 the
dispatch's mma.sync path is forced with ``atom="mma"``.

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_gemm_rt_gpu.py``.
The benchmark ``benchmarks/nvidia_mma_rt_ir.py`` makes the same comparison at the suite's
GEMM shapes with timings (docs/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia import dispatch  # noqa: E402
from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig  # noqa: E402
from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm  # noqa: E402

from _gemm_gpu_pair import assert_bitwise_pair  # noqa: E402

SMALL = CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3)


@pytest.mark.parametrize("cfg,shape", [
    (SMALL, (777, 333, 130)),
    (CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3, dtype="bf16",
                    b_major="k"), (777, 333, 130)),
    (SMALL, (1, 1, 8)),
    (CudaGemmConfig(), (1000, 1000, 1000)),
    (CudaGemmConfig(dtype="bf16", b_major="k"), (1100, 600, 520)),
    (CudaGemmConfig(bk=64, stages=3), (300, 700, 1000)),
    (CudaGemmConfig(mma_order="serp", group_m=4), (1300, 900, 264)),
], ids=str)
def test_bitwise_equal_to_the_template(cfg, shape):
    assert_bitwise_pair(cfg, shape, 7, IrMmaRtGemm(cfg), CudaGemm(cfg))


@pytest.mark.parametrize("b_major", ["n", "k"])
def test_odd_leading_dimensions_bitwise_equal(b_major):
    cfg = CudaGemmConfig(b_major=b_major)
    a = torch.randn((600, 1001), device="cuda").half()[:, :1000]
    b = (torch.randn((1000, 523), device="cuda").half()[:, :520] if b_major == "n" else
         torch.randn((520, 1003), device="cuda").half()[:, :1000])
    outs = [torch.full((600, 520), float("nan"), dtype=torch.float16, device="cuda")
            for _ in range(2)]
    IrMmaRtGemm(cfg)(a, b, outs[0])
    CudaGemm(cfg)(a, b, outs[1])
    torch.cuda.synchronize()
    assert torch.isfinite(outs[0].float()).all() and torch.equal(outs[0], outs[1])


def test_gemm_atom_mma_runs_the_ir_kernel_bitwise():
    """gemm(atom="mma") runs the IR-built kernel (choose_gemm names it) and its output is the
    template's, bit for bit."""
    dispatch.clear_plans()
    a = torch.randn((1000, 777), device="cuda").half()
    b = torch.randn((777, 640), device="cuda").half()
    ch = dispatch.choose_gemm(a, b, atom="mma")
    assert ch.kernel.startswith("lg_irgemm_rt_"), ch
    out = dispatch.gemm(a, b, atom="mma")
    ref = CudaGemm(ch.config)(a, b)
    torch.cuda.synchronize()
    assert torch.equal(out, ref)
