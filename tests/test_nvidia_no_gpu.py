"""Without a GPU, the NVIDIA entry points refuse at once (session 12): ``flash_attention()``,
``gemm()`` and ``decode_attention()`` built their kernel first, and building one verifies its
IR and printed text (2-5 s per kernel on this project's CPU, ~15 s on a busy one) before the
launch's device check refused the CPU tensors; ``decode_attention()`` on a CPU-only torch then
failed with torch's ``AssertionError`` ("Torch not compiled with CUDA enabled"), not ours.
Now ``runtime.cuda.require_gpu_tensors`` runs before any build: our error, the verifier never
called, nothing built or cached."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
import kernels.runtime.cuda as rc  # noqa: E402
import kernels.verify.report_cache as report_cache  # noqa: E402
from kernels.errors import LaunchError, NoDeviceError  # noqa: E402
from kernels.nvidia import dispatch  # noqa: E402
from kernels.nvidia.attention import FlashConfig  # noqa: E402
from kernels.nvidia.gemm import CudaGemmConfig  # noqa: E402


@pytest.fixture
def no_build(monkeypatch):
    """Every verification and every kernel construction fails the test; returns the list of
    the builds attempted (empty when the call refused first)."""
    attempts = []

    def verified(*a, **kw):
        attempts.append("verify")
        raise AssertionError("the verifier ran before the device check")

    monkeypatch.setattr(report_cache, "verified", verified)
    for name in ("compiled_gemm", "compiled_flash", "_decode_kernel"):
        def refuse(*a, _name=name, **kw):
            attempts.append(_name)
            raise AssertionError(f"{_name} ran before the device check")
        monkeypatch.setattr(dispatch, name, refuse)
    dispatch.clear_plans()
    yield attempts
    dispatch.clear_plans()


def _cpu(*shape, dtype=torch.float16):
    return torch.randn(*shape, dtype=dtype)


CALLS = {
    "gemm": lambda: dispatch.gemm(_cpu(64, 128), _cpu(128, 64)),
    "gemm out": lambda: dispatch.gemm(_cpu(64, 128), _cpu(128, 64), _cpu(64, 64)),
    "gemm config": lambda: dispatch.gemm(_cpu(64, 128), _cpu(128, 64), config=CudaGemmConfig()),
    "flash": lambda: dispatch.flash_attention(*[_cpu(1, 2, 64, 128)] * 3, causal=True),
    "flash d64": lambda: dispatch.flash_attention(*[_cpu(1, 2, 64, 64, dtype=torch.bfloat16)] * 3),
    "flash config": lambda: dispatch.flash_attention(*[_cpu(1, 2, 64, 128)] * 3,
                                                     config=FlashConfig(head_dim=128)),
    "decode": lambda: dispatch.decode_attention(_cpu(1, 8, 1, 128), *[_cpu(1, 2, 4096, 128)] * 2),
    "decode short": lambda: dispatch.decode_attention(_cpu(4, 8, 1, 64), *[_cpu(4, 8, 8, 64)] * 2),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_cpu_tensors_are_refused_before_anything_is_built(no_build, name):
    for _ in range(2):                         # and again: nothing was cached by the refusal
        with pytest.raises(LaunchError, match="tensor is on cpu; the kernel needs a tensor on "
                                              "an NVIDIA GPU"):
            CALLS[name]()
    assert no_build == []
    assert len(dispatch._GEMM_PLANS) == len(dispatch._FLASH_PLANS) == \
        len(dispatch._DECODE_PLANS) == len(dispatch._GEMM_RUNS) == 0


def test_the_refusal_names_the_first_tensor_off_the_gpu(no_build, monkeypatch):
    fc.install(monkeypatch)                    # a pretend H100: q is on it, v is not
    try:
        q = fc.FakeCudaTensor((1, 2, 64, 128), torch.float16)
        with pytest.raises(LaunchError, match="flash_attention: v: tensor is on cpu"):
            dispatch.flash_attention(q, q, _cpu(1, 2, 64, 128))
        with pytest.raises(LaunchError, match="gemm: out: tensor is on cpu"):
            dispatch.gemm(fc.FakeCudaTensor((64, 128), torch.float16),
                          fc.FakeCudaTensor((128, 64), torch.float16), _cpu(64, 64))
        with pytest.raises(LaunchError, match="decode_attention: k: tensor is on cpu"):
            dispatch.decode_attention(fc.FakeCudaTensor((1, 8, 1, 128), torch.float16),
                                      _cpu(1, 2, 4096, 128), _cpu(1, 2, 4096, 128))
    finally:
        fc.clear_caches()
    assert no_build == []


def test_no_cuda_python_is_refused_before_anything_is_built(no_build, monkeypatch):
    fc.install(monkeypatch)                    # CUDA tensors, but no driver bindings
    monkeypatch.setattr(rc, "_driver", lambda: None)
    try:
        q = fc.FakeCudaTensor((1, 2, 64, 128), torch.float16)
        with pytest.raises(NoDeviceError, match="cuda-python"):
            dispatch.flash_attention(q, q, q)
        with pytest.raises(NoDeviceError, match="cuda-python"):
            dispatch.gemm(fc.FakeCudaTensor((64, 128), torch.float16),
                          fc.FakeCudaTensor((128, 64), torch.float16))
        with pytest.raises(NoDeviceError, match="cuda-python"):
            dispatch.decode_attention(fc.FakeCudaTensor((1, 8, 1, 128), torch.float16),
                                      *[fc.FakeCudaTensor((1, 2, 4096, 128), torch.float16)] * 2)
    finally:
        fc.clear_caches()
    assert no_build == []


def test_bad_dtypes_still_get_their_own_error_first(no_build):
    """The dtype checks come before the device check (they need no kernel either)."""
    with pytest.raises(LaunchError, match="float16 or bfloat16"):
        dispatch.gemm(_cpu(64, 128, dtype=torch.float32), _cpu(128, 64, dtype=torch.float32))
    with pytest.raises(LaunchError, match="float16 or bfloat16"):
        dispatch.flash_attention(*[_cpu(1, 2, 64, 128, dtype=torch.float32)] * 3)
    assert no_build == []


def test_a_pretend_gpu_still_builds_verifies_and_launches(monkeypatch):
    """The check lets CUDA tensors through: the build (and its verification) and the launch
    follow as before."""
    fake = fc.install(monkeypatch)
    try:
        a, b = fc.FakeCudaTensor((64, 256), torch.float16), fc.FakeCudaTensor((256, 64),
                                                                              torch.float16)
        dispatch.gemm(a, b)
        assert len(fake.launches) == 1 and len(dispatch._GEMM_PLANS) == 1
    finally:
        fc.clear_caches()
