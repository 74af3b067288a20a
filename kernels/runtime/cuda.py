"""Launch a :class:`~kernels.cuda.compile.CudaModule` on an NVIDIA GPU, on torch CUDA tensors.

``launch(module, kernel, grid, block, args, signature=..., specs=..., smem_bytes=...)`` checks
everything it can before touching the driver, so mistakes come back as
:class:`kernels.errors.LaunchError` naming the argument:

* argument count and kinds against ``signature`` (a tuple of ``"ptr"``, ``"i32"``, ``"u32"``,
  ``"i64"``, ``"f32"``), each pointer argument against an optional
  :class:`kernels.launch.TensorSpec` (dtype, shape, strides, alignment);
* every tensor on the same CUDA device, of an NVIDIA build of torch, whose compute capability
  runs the cubin (an ``sm_90`` cubin runs only on 9.x; ``sm_80`` on 8.x and 9.x);
* grid/block limits and the dynamic shared memory against the device's opt-in maximum.

Then it loads the module in torch's primary context (``cuModuleLoadData``, cached), raises the
kernel's dynamic shared-memory limit when needed and calls ``cuLaunchKernel`` on torch's current
stream (cuda-python's ``cuda.bindings.driver``).  Like any launch it is asynchronous;
``LAYOUTALG_CUDA_SYNC=1`` synchronises after each launch so a fault is reported at its launch.
Without cuda-python or without a GPU it raises :class:`kernels.errors.NoDeviceError`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, Optional, Sequence, Tuple

from ..errors import LaunchError, NoDeviceError
from .rocm import TensorSpec, check_tensor, dim3

__all__ = ["launch", "check_cuda_tensor", "device_info", "cuda_available", "SIGNATURE_TYPES",
           "function_attributes"]

SIGNATURE_TYPES = {
    "ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64, "f32": ctypes.c_float,
}


def _driver():
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda as driver  # type: ignore  # older cuda-python layout
        return driver
    except ImportError:
        return None


def cuda_available() -> bool:
    """True when torch sees an NVIDIA GPU and cuda-python's driver bindings import."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available() and not getattr(torch.version, "hip", None)
                and _driver() is not None)


def _check(err, what: str) -> None:
    code = int(err)
    if code != 0:
        drv = _driver()
        try:
            e2, msg = drv.cuGetErrorString(err)
            text = msg.decode() if msg else str(err)
        except Exception:
            text = str(err)
        raise LaunchError(f"{what} failed: CUDA error {code} ({text})")


def check_cuda_tensor(t, spec: TensorSpec, where: str) -> None:
    """:class:`LaunchError` unless ``t`` meets ``spec`` and lives on an NVIDIA CUDA device."""
    check_tensor(t, spec, where, check_device=False)
    dev = getattr(t, "device", None)
    try:
        import torch
        hip = getattr(torch.version, "hip", None)
    except ImportError:  # pragma: no cover
        hip = None
    if dev is None or dev.type != "cuda" or hip:
        label = f"{where}{f' ({spec.name})' if spec.name else ''}"
        raise LaunchError(f"{label}: tensor is on {dev}; the kernel needs a tensor on an "
                          f"NVIDIA GPU (torch device 'cuda' of a CUDA build of torch)")


_LOCK = threading.Lock()
_MODULES: Dict[Tuple[str, int], Any] = {}
_FUNCS: Dict[Tuple[str, int, str], Any] = {}
_SMEM_SET: Dict[Tuple[str, int, str], int] = {}


_DEVICE_INFO: Dict[int, Dict[str, Any]] = {}


def device_info(index: int) -> Dict[str, Any]:
    """Name, compute capability, SM count, opt-in shared memory and memory of device ``index``
    (read once per process: a launch asks for it every time, and the properties and the
    driver attribute query cost tens of microseconds a launch)."""
    info = _DEVICE_INFO.get(index)
    if info is None:
        info = _DEVICE_INFO[index] = _read_device_info(index)
    return dict(info)


def _read_device_info(index: int) -> Dict[str, Any]:
    import torch
    p = torch.cuda.get_device_properties(index)
    drv = _driver()
    optin = None
    if drv is not None:
        try:
            err, optin = drv.cuDeviceGetAttribute(
                drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, index)
            if int(err) != 0:
                optin = None
        except Exception:  # pragma: no cover
            optin = None
    return {"name": p.name, "cc": (p.major, p.minor), "sms": p.multi_processor_count,
            "smem_optin": int(optin) if optin is not None else 227 * 1024,
            "total_memory": p.total_memory}


def _ensure_context(index: int):
    import torch
    drv = _driver()
    torch.cuda.init()
    with torch.cuda.device(index):
        torch.cuda.current_stream()
        err, ctx = drv.cuCtxGetCurrent()
        _check(err, "cuCtxGetCurrent")
        if int(ctx) == 0:
            err, dev = drv.cuDeviceGet(index)
            _check(err, "cuDeviceGet")
            err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
            _check(err, "cuDevicePrimaryCtxRetain")
            (err,) = drv.cuCtxSetCurrent(ctx)
            _check(err, "cuCtxSetCurrent")
    return drv


def _function(module, kernel: str, index: int):
    key = (module.key, index, kernel)
    fn = _FUNCS.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        drv = _driver()
        mkey = (module.key, index)
        mod = _MODULES.get(mkey)
        if mod is None:
            err, mod = drv.cuModuleLoadData(module.cubin)
            _check(err, f"cuModuleLoadData({module.name})")
            _MODULES[mkey] = mod
        err, fn = drv.cuModuleGetFunction(mod, kernel.encode())
        _check(err, f"cuModuleGetFunction({kernel})")
        _FUNCS[key] = fn
    return fn


def function_attributes(module, kernel: Optional[str] = None, device: int = 0) -> Dict[str, int]:
    """Registers, static shared/local memory and max threads of a loaded kernel (needs a GPU)."""
    drv = _ensure_context(device)
    kernel = kernel or module.kernels[0]
    fn = _function(module, kernel, device)
    A = drv.CUfunction_attribute
    out = {}
    for name, attr in (("registers", A.CU_FUNC_ATTRIBUTE_NUM_REGS),
                       ("static_smem", A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                       ("local_bytes", A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
                       ("max_threads", A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)):
        err, v = drv.cuFuncGetAttribute(attr, fn)
        _check(err, "cuFuncGetAttribute")
        out[name] = int(v)
    return out


def _pack(signature: Sequence[str], args: Sequence[Any], specs, name: str):
    if len(args) != len(signature):
        raise LaunchError(f"{name} takes {len(signature)} arguments ({', '.join(signature)}), "
                          f"got {len(args)}")
    if specs is not None and len(specs) != len(args):
        raise LaunchError(f"{name}: {len(specs)} specs for {len(args)} arguments")
    holders, tensors = [], []
    for i, (kind, a) in enumerate(zip(signature, args)):
        where = f"{name} argument {i}"
        ctype = SIGNATURE_TYPES.get(kind)
        if ctype is None:
            raise LaunchError(f"{where}: unknown signature type {kind!r}; known: "
                              f"{', '.join(SIGNATURE_TYPES)}")
        if kind == "ptr":
            if a is None:
                holders.append(ctypes.c_void_p(0))
                continue
            spec = (specs[i] if specs is not None else None) or TensorSpec()
            check_cuda_tensor(a, spec, where)
            tensors.append(a)
            holders.append(ctypes.c_void_p(a.data_ptr()))
            continue
        if hasattr(a, "data_ptr"):
            raise LaunchError(f"{where}: the kernel takes a {kind} scalar, got a tensor")
        if hasattr(a, "item"):
            a = a.item()
        if kind == "f32":
            if isinstance(a, bool) or not isinstance(a, (int, float)):
                raise LaunchError(f"{where}: the kernel takes a float, got {type(a).__name__}")
            holders.append(ctypes.c_float(float(a)))
            continue
        if isinstance(a, bool) or not isinstance(a, int):
            raise LaunchError(f"{where}: the kernel takes an integer ({kind}), got "
                              f"{type(a).__name__}")
        bits = 64 if kind == "i64" else 32
        lo, hi = (0, 2 ** bits - 1) if kind.startswith("u") else (-2 ** (bits - 1),
                                                                   2 ** (bits - 1) - 1)
        if not lo <= a <= hi:
            raise LaunchError(f"{where}: {a} does not fit a {kind} parameter")
        holders.append(ctype(a))
    ptrs = (ctypes.c_void_p * max(len(holders), 1))(
        *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    return holders, ptrs, tensors


def launch(module, kernel: Optional[str], grid, block, args: Sequence[Any], *,
           signature: Sequence[str], specs: Optional[Sequence[Optional[TensorSpec]]] = None,
           smem_bytes: int = 0, stream: Any = None) -> None:
    """Launch ``kernel`` of ``module`` with ``grid`` blocks of ``block`` threads.

    ``args`` are torch CUDA tensors (or None for a null pointer) and Python scalars in the
    kernel's order, typed by ``signature``; ``specs`` a :class:`TensorSpec` (or None) per
    argument; ``smem_bytes`` the dynamic shared memory; ``stream`` a ``cudaStream_t`` handle
    (int; default: torch's current stream of the tensors' device).
    """
    kernel = kernel or (module.kernels[0] if module.kernels else None)
    if kernel is None:
        raise LaunchError(f"{module.name}: no kernel name given and none found in the source")
    if module.kernels and kernel not in module.kernels:
        raise LaunchError(f"{module.name} has no kernel {kernel!r}; it has "
                          f"{', '.join(module.kernels)}")
    g, b = dim3(grid, "grid"), dim3(block, "block")
    threads = b[0] * b[1] * b[2]
    if threads > 1024 or b[2] > 64:
        raise LaunchError(f"{kernel}: block {b} has {threads} threads; NVIDIA GPUs allow at "
                          "most 1024 (z at most 64)")
    if g[1] >= 65536 or g[2] >= 65536:
        raise LaunchError(f"{kernel}: grid {g}: y and z must be below 65536")
    if not isinstance(smem_bytes, int) or smem_bytes < 0:
        raise LaunchError(f"{kernel}: smem_bytes must be a non-negative int, got {smem_bytes!r}")
    holders, ptrs, tensors = _pack(signature, args, specs, kernel)
    if _driver() is None:
        raise NoDeviceError("cuda-python (cuda.bindings.driver) is not installed: "
                            "pip install cuda-python to launch CUDA kernels")
    try:
        import torch
    except ImportError:  # pragma: no cover
        raise NoDeviceError("torch is needed to launch on CUDA tensors") from None
    if not torch.cuda.is_available():
        raise NoDeviceError("no CUDA GPU is visible to torch")
    devs = {t.device.index if t.device.index is not None else torch.cuda.current_device()
            for t in tensors}
    if len(devs) > 1:
        raise LaunchError(f"{kernel}: tensors on several devices {sorted(devs)}; put them on one")
    index = devs.pop() if devs else torch.cuda.current_device()
    info = device_info(index)
    cc = info["cc"]
    want = module.cc
    # a cubin runs on its own major version at an equal or higher minor; "a" targets only on
    # exactly their chip (PTX JIT is not used: the module holds SASS only)
    runs = cc == want if module.arch.endswith("a") else (cc[0] == want[0] and cc[1] >= want[1])
    if not runs:
        raise LaunchError(f"{kernel}: the cubin is for {module.arch}, the tensors are on "
                          f"{info['name']} (sm_{cc[0]}{cc[1]}); compile with "
                          f"arch='sm_{cc[0]}{cc[1]}'")
    if smem_bytes > info["smem_optin"]:
        raise LaunchError(f"{kernel}: {smem_bytes} bytes of dynamic shared memory exceed the "
                          f"{info['smem_optin']} a block can have on {info['name']}")
    drv = _ensure_context(index)
    with torch.cuda.device(index):
        fn = _function(module, kernel, index)
        skey = (module.key, index, kernel)
        if smem_bytes > 48 * 1024 and _SMEM_SET.get(skey, 0) < smem_bytes:
            (err,) = drv.cuFuncSetAttribute(
                fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem_bytes)
            _check(err, f"cuFuncSetAttribute({kernel}, max dynamic smem {smem_bytes})")
            _SMEM_SET[skey] = smem_bytes
        if stream is None:
            stream = torch.cuda.current_stream(index).cuda_stream
        (err,) = drv.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], smem_bytes,
                                    drv.CUstream(int(stream)), ctypes.addressof(ptrs), 0)
        _check(err, f"cuLaunchKernel({kernel}, grid {g}, block {b}, smem {smem_bytes})")
        if os.environ.get("LAYOUTALG_CUDA_SYNC") == "1":
            torch.cuda.synchronize(index)
    del holders
