"""kernels.launch: argument validation up to the ROCm runtime; the launch itself needs an AMD GPU.

Everything before ``hipModuleLaunchKernel`` is checked here with CPU tensors; the GPU test skips
cleanly ("no ROCm runtime (libamdhip64) found") on machines without ROCm.
"""

from __future__ import annotations

import struct

import pytest
import torch

from kernels import LaunchError, NoDeviceError, compile_hip
from kernels.launch import TensorSpec, check_tensor, hip_runtime, launch, pack_args
from kernels.testkernels import VECTOR_ADD, require

F32 = TensorSpec(dtype=torch.float32, shape=(None,))


@pytest.fixture(scope="module")
def co():
    require("device")
    return compile_hip(VECTOR_ADD)


def _args(n=256):
    return [torch.zeros(n), torch.zeros(n), torch.zeros(n), n]


def test_tensor_checks():
    t = torch.zeros(4, 8, dtype=torch.float16)
    check_tensor(t, TensorSpec("float16", (4, None)), "x", check_device=False)
    cases = [
        (t, TensorSpec(torch.bfloat16), r"x: dtype float16, the kernel needs bfloat16"),
        (t, TensorSpec(shape=(4, 16)), r"x: shape \(4, 8\), the kernel needs \(4, 16\)"),
        (t, TensorSpec(shape=(None,)), r"shape \(4, 8\), the kernel needs \(\*\)"),
        (t.t(), TensorSpec(), r"strides \(1, 8\) are not contiguous for shape \(8, 4\)"),
        (t.t(), TensorSpec(strides=(2, 8)), r"strides \(1, 8\), the kernel needs \(2, 8\)"),
        (t.view(-1)[1:9], TensorSpec(align=16), r"not 16-byte aligned \(offset 2\)"),
        (t, TensorSpec(name="A"), r"x \(A\): tensor is on cpu; a launch needs tensors on a ROCm"),
        (3.0, TensorSpec(), r"expected a torch tensor, got float"),
    ]
    for tensor, spec, pattern in cases:
        with pytest.raises(LaunchError, match=pattern):
            check_tensor(tensor, spec, "x")
    check_tensor(t.t(), TensorSpec(strides=()), "x", check_device=False)   # any strides


def test_pack_args_follows_the_metadata(co):
    md = co.kernel_metadata("vector_add")
    a, b, c = (torch.zeros(256) for _ in range(3))
    buf = pack_args(md, [a, b, None, 200], [F32, F32, None, None], check_device=False)
    assert len(buf) == 28   # three pointers + int, as in .kernarg_segment_size
    ptrs = struct.unpack_from("<QQQi", buf)
    assert ptrs == (a.data_ptr(), b.data_ptr(), 0, 200)
    assert pack_args(md, [a, b, c, -1], check_device=False)[24:28] == b"\xff\xff\xff\xff"


def test_launch_validation_before_the_runtime(co):
    with pytest.raises(LaunchError, match=r"vector_add takes 4 arguments \(global_buffer\[8\], "
                                          r"global_buffer\[8\], global_buffer\[8\], by_value\[4\]\)"
                                          r", got 3"):
        launch(co, "vector_add", 1, 256, _args()[:3])
    with pytest.raises(LaunchError, match=r"block \(512, 1, 1\) has 512 threads; the kernel was "
                                          r"compiled for at most 256"):
        launch(co, "vector_add", 1, 512, _args())
    with pytest.raises(LaunchError, match="grid must be 1 to 3 positive integers"):
        launch(co, "vector_add", 0, 256, _args())
    with pytest.raises(LaunchError, match=r"1024 bytes of static LDS \+ 65536 dynamic exceed the "
                                          r"65536 bytes"):
        launch(co, "vector_add", 1, 256, _args(), lds_bytes=65536)
    with pytest.raises(LaunchError, match=r"argument 3: 4294967296 does not fit a 4-byte"):
        launch(co, "vector_add", 1, 256, _args()[:3] + [2 ** 32])
    with pytest.raises(LaunchError, match=r"argument 3: the kernel takes a 4-byte value, got str"):
        launch(co, "vector_add", 1, 256, _args()[:3] + ["256"])
    with pytest.raises(LaunchError, match=r"argument 0: dtype float16, the kernel needs float32"):
        launch(co, "vector_add", 1, 256, [torch.zeros(256).half()] + _args()[1:],
               specs=[F32, F32, F32, None])
    # everything right but the device: the last check before the runtime
    with pytest.raises(LaunchError, match=r"argument 0: tensor is on cpu; a launch needs tensors "
                                          r"on a ROCm GPU"):
        launch(co, "vector_add", 1, 256, _args(), specs=[F32, F32, F32, None])


@pytest.mark.gpu
def test_launch_on_rocm(co):
    try:
        hip_runtime()
    except NoDeviceError as e:
        pytest.skip(str(e))
    if not (getattr(torch.version, "hip", None) and torch.cuda.is_available()):  # pragma: no cover
        pytest.skip("torch is not a ROCm build with a visible GPU")
    n = 1000  # pragma: no cover - runs only on an AMD GPU
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.zeros(n, device="cuda")
    launch(co, "vector_add", (n + 255) // 256, 256, [a, b, c, n], specs=[F32, F32, F32, None])
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
