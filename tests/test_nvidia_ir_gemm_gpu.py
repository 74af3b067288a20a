"""The IR-built mma.sync GEMM against the string-template one on a real GPU (skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_gemm_gpu.py``.
Both kernels issue the same mma.sync instructions on the same fragments in the same k order and
round with the same ``cvt.rn`` pairs, so their outputs must be bitwise equal; both are also
compared with a float32 torch reference (tolerances of tests/test_nvidia_gpu.py).  The output is
poisoned with NaN first, so an element the kernel never writes fails.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig  # noqa: E402
from kernels.nvidia.gemm_ir import IrMmaGemm  # noqa: E402

from _gemm_gpu_pair import assert_bitwise_pair  # noqa: E402


@pytest.mark.parametrize("cfg,shape", [
    (CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3), (256, 256, 128)),
    (CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3, dtype="bf16",
                    b_major="k"), (128, 192, 96)),
    (CudaGemmConfig(), (512, 1024, 512)),
    (CudaGemmConfig(dtype="bf16", b_major="k"), (1024, 512, 256)),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_kernel_equals_template(cfg, shape):
    ir = IrMmaGemm(cfg, *shape)
    assert ir.report.holds
    assert_bitwise_pair(cfg, shape, 20, ir, CudaGemm(cfg))
