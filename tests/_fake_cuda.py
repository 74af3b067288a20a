"""A pretend H100 for CPU tests of the NVIDIA host path (dispatch, kernel classes, runtime
launch): tensors that say they are on ``cuda:0``, a driver that records each
``cuLaunchKernel`` with its parameters decoded from the packed buffer, and modules that are
never compiled.  Nothing here runs a kernel; it shows what would have been launched.

    fake = install(monkeypatch)          # in a test
    c = dispatch.gemm(FakeCudaTensor((16, 64), torch.float16), ...)
    fake.launches[-1]                    # Launch(kernel, grid, block, smem, stream, args)
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import pytest
import torch

import kernels.runtime.cuda as rc
import kernels.runtime.launch_cache as lc
from kernels.nvidia import builder, wgmma_tma
from kernels.toolchain.nvrtc import kernel_names

_NEXT = itertools.count(1)


def _contiguous(shape) -> Tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


class FakeCudaTensor:
    """Shape, dtype, strides and a data pointer on ``cuda:0``; no storage."""

    is_cuda = True

    def __init__(self, shape, dtype, stride=None, ptr=None):
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self._stride = tuple(stride) if stride is not None else _contiguous(self.shape)
        self._ptr = ptr if ptr is not None else next(_NEXT) * (1 << 20)
        self.device = torch.device("cuda", 0)

    def stride(self, d=None):
        return self._stride if d is None else self._stride[d]

    def data_ptr(self) -> int:
        return self._ptr

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        shape, ptr = list(self.shape), self._ptr
        for d, s in enumerate(idx):
            start, stop, _ = s.indices(shape[d])
            ptr += start * self._stride[d] * self.element_size()
            shape[d] = stop - start
        return FakeCudaTensor(shape, self.dtype, self._stride, ptr)

    def copy_(self, src):
        self.copies = getattr(self, "copies", 0) + 1
        return self

    def storage_offset(self) -> int:
        return 0

    def view(self, dtype):
        """The same bytes as ``dtype`` elements (the last dimension rescaled), as torch's."""
        r = torch.empty((), dtype=dtype).element_size() / self.element_size()
        shape = list(self.shape[:-1]) + [int(self.shape[-1] / r)]
        stride = [int(s / r) for s in self._stride[:-1]] + [1]
        return FakeCudaTensor(shape, dtype, stride, self._ptr)


@dataclass
class Launch:
    kernel: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    smem: int
    stream: Any
    args: Tuple[Any, ...]


class FakeDriver:
    """The cuda-python driver calls the runtime makes, recorded."""

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self) -> None:
        self.launches: List[Launch] = []
        self.signatures: Dict[str, Tuple[str, ...]] = {}
        self.prepared = 0
        self.ctx = 0xC0

    @staticmethod
    def CUstream(x):
        return ("stream", x)

    def cuCtxGetCurrent(self):
        return 0, self.ctx

    def cuModuleLoadData(self, cubin):
        return 0, ("module", cubin)

    def cuModuleGetFunction(self, mod, name):
        return 0, SimpleNamespace(name=name.decode())

    def cuFuncSetAttribute(self, fn, attr, value):
        return (0,)

    def cuGetErrorString(self, err):
        return 0, b"fake"

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        sig = self.signatures.get(fn.name, ())
        vals = []
        for i, kind in enumerate(sig):
            p = ctypes.c_void_p.from_address(params + 8 * i).value
            vals.append(rc.SIGNATURE_TYPES[kind].from_address(p).value)
        self.launches.append(Launch(fn.name, (gx, gy, gz), (bx, by, bz), smem, stream,
                                    tuple(vals)))
        return (0,)


def _fake_module(self):
    if self._module is None:
        self._module = SimpleNamespace(
            key=f"fake:{self.cfg.name}", name=self.cfg.name, arch=self.cfg.arch,
            cc=(9, 0), cubin=b"", kernels=kernel_names(self.source))
    return self._module


def install(monkeypatch) -> FakeDriver:
    """Pretend an H100 is device 0: returns the :class:`FakeDriver` that records launches.
    Clears the launch and dispatch caches first (and monkeypatch's undo leaves them
    holding fakes: tests using this clear them again through the fixture below)."""
    from kernels.nvidia import dispatch
    fake = FakeDriver()
    real_prepare = rc.prepare_launch

    def prepare(module, kernel, grid, block, args, **kw):
        fake.signatures[kernel] = tuple(kw["signature"])
        fake.prepared += 1
        return real_prepare(module, kernel, grid, block, args, **kw)

    real_empty = torch.empty

    def empty(*shape, dtype=None, device=None, **kw):
        if device is not None and torch.device(device).type == "cuda":
            shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
            return FakeCudaTensor(shape, dtype or torch.float32)
        return real_empty(*shape, dtype=dtype, device=device, **kw)

    monkeypatch.setattr(rc, "_driver", lambda: fake)
    if hasattr(rc, "prepare_launch"):
        monkeypatch.setattr(rc, "prepare_launch", prepare)
    monkeypatch.setitem(rc._DEVICE_INFO, 0, {"name": "fake H100", "cc": (9, 0), "sms": 132,
                                             "smem_optin": 232448, "total_memory": 80 << 30})
    real_zeros = torch.zeros

    def zeros(*shape, dtype=None, device=None, **kw):
        if device is not None and torch.device(device).type == "cuda":
            return empty(*shape, dtype=dtype, device=device)     # nothing is ever read back
        return real_zeros(*shape, dtype=dtype, device=device, **kw)

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(torch, "zeros", zeros)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda i: contextlib.nullcontext())
    monkeypatch.setattr(lc, "RAW_STREAM", False)     # the patched current_stream below
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda i=None: SimpleNamespace(cuda_stream=7))
    monkeypatch.setattr(builder.CompiledKernel, "module", property(_fake_module))
    monkeypatch.setattr(wgmma_tma, "encode_tensor_map", lambda t, bi, bo: bytes(128))
    clear_caches()
    return fake


def clear_caches() -> None:
    """Every cache of the host path emptied and the built kernels' (fake) modules dropped, so
    neither a pretend launch nor a fake module outlives the test."""
    from kernels.nvidia import attention, dispatch
    dispatch.clear_plans()
    for g in [*dispatch._GEMMS.values(), *dispatch._TEMPLATES.values(), *dispatch._FLASH.values(),
              *dispatch._SPLIT_DECODE.values(), *dispatch._ONE_PASS.values(),
              *attention._DECODE.values()]:
        g.forget_calls()
        g._module = None
        # the kernels a built object holds besides itself (the IR decodes' split, combine
        # and fused kernels): a module compiled by an earlier real-GPU test in the same
        # process would otherwise reach the fake driver (and a fake one a real launch)
        for part in vars(g).values():
            if isinstance(part, builder.CompiledKernel):
                part._module = None
        maps = getattr(g, "_maps", None)
        if maps is not None:
            maps.clear()


@dataclass
class EncodedMap:
    """One ``cuTensorMapEncodeTiled`` call, its arguments read back: enums by name (``"128B"``),
    sizes as ints."""
    dtype: str
    rank: int
    ptr: int
    dims: Tuple[int, ...]
    strides: Tuple[int, ...]
    box: Tuple[int, ...]
    element_strides: Tuple[int, ...]
    interleave: str
    swizzle: str
    l2: str
    oob: str


def _enum(prefix: str, *names: str) -> Any:
    return SimpleNamespace(**{prefix + n: n for n in names})


class FakeTmaDriver:
    """cuda-python's ``cuTensorMapEncodeTiled`` and the enums and integer types
    :func:`kernels.nvidia.tma.encode_tiled_map` names, recording each call
    (:class:`EncodedMap`) and returning an opaque map whose words count the calls."""

    CUtensorMapDataType = _enum("CU_TENSOR_MAP_DATA_TYPE_", "FLOAT16", "BFLOAT16", "FLOAT32")
    CUtensorMapInterleave = _enum("CU_TENSOR_MAP_INTERLEAVE_", "NONE", "16B", "32B")
    CUtensorMapSwizzle = _enum("CU_TENSOR_MAP_SWIZZLE_", "NONE", "32B", "64B", "128B")
    CUtensorMapL2promotion = _enum("CU_TENSOR_MAP_L2_PROMOTION_", "NONE", "L2_64B", "L2_128B",
                                   "L2_256B")
    CUtensorMapFloatOOBfill = _enum("CU_TENSOR_MAP_FLOAT_OOB_FILL_", "NONE",
                                    "NAN_REQUEST_ZERO_FMA")

    def __init__(self) -> None:
        self.maps: List[EncodedMap] = []

    @staticmethod
    def cuuint64_t(x):
        return int(x)

    @staticmethod
    def cuuint32_t(x):
        return int(x)

    def cuTensorMapEncodeTiled(self, dt, rank, ptr, dims, strides, box, elem, interleave,
                               swizzle, l2, oob):
        self.maps.append(EncodedMap(dt, rank, ptr, tuple(dims), tuple(strides), tuple(box),
                                    tuple(elem), interleave, swizzle, l2, oob))
        return 0, SimpleNamespace(opaque=[len(self.maps)] * 16)


def install_tma_encoder(monkeypatch) -> FakeTmaDriver:
    """Make ``from cuda.bindings import driver`` (the tensor-map encoder's import) return a
    :class:`FakeTmaDriver`, whatever cuda-python is installed; returns it."""
    import sys
    import types
    fake = FakeTmaDriver()
    pkg = types.ModuleType("cuda.bindings")
    pkg.driver = fake           # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings", pkg)
    return fake


@pytest.fixture
def fake_flash(monkeypatch):
    """The fake driver and TMA encoder, with the dispatch's built prefill kernels forgotten so
    a test's kernels are built under the rules it sets; caches cleared after.  Test files take
    it as their ``fake`` fixture (``from _fake_cuda import fake_flash as fake``)."""
    from kernels.nvidia import dispatch
    f = install(monkeypatch)
    install_tma_encoder(monkeypatch)
    monkeypatch.setattr(dispatch, "_FLASH", {})
    yield f
    clear_caches()
