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

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig  # noqa: E402
from kernels.nvidia.wgmma_ir import IrWgmmaGemm  # noqa: E402

from _gemm_gpu_pair import assert_bitwise_pair  # noqa: E402


@pytest.mark.parametrize("cfg,shape", [
    (WgmmaGemmConfig(bm=128, bn=64, bk=32, stages=3), (256, 128, 128)),
    (WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"),
     (128, 256, 192)),
    (WgmmaGemmConfig(bm=128, bn=128, bk=16, stages=4), (256, 384, 80)),
    (WgmmaGemmConfig(), (512, 1024, 512)),
    (WgmmaGemmConfig(dtype="bf16", b_major="k"), (384, 512, 256)),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_wgmma_kernel_equals_template(cfg, shape):
    ir = IrWgmmaGemm(cfg, *shape)
    assert ir.report.holds
    assert_bitwise_pair(cfg, shape, 20, ir, WgmmaGemm(cfg))


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
    rs = IrWgmmaGemm(cfg, *shape, a_from="registers")
    assert rs.report.holds and rs.ir.name.endswith("_rs")
    assert_bitwise_pair(cfg, shape, 21, rs, IrWgmmaGemm(cfg, *shape))
