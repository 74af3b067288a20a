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

The checks and the module/function look-ups run once per :func:`launch_key` (what they read:
each tensor's dtype, shape, strides, device and pointer alignment, each scalar's value, the
kernel and its geometry); an equal key re-uses the :class:`PreparedLaunch` (issue 20: a
steady-state launch was hundreds of microseconds of Python).  A launch that fails a check is
never cached.
"""

from __future__ import annotations

import ctypes
import operator
import os
import threading
from typing import Any, Dict, Optional, Sequence, Tuple

from ..errors import LaunchError, NoDeviceError
from .launch_cache import ALIGN_MOD, BoundedCache, arg_key, stream_handle
from .rocm import TensorSpec, check_tensor, dim3

__all__ = ["launch", "prepare_launch", "PreparedLaunch", "LaunchSite", "launch_key",
           "clear_prepared", "check_cuda_tensor", "require_gpu_tensors", "device_info",
           "cuda_available", "SIGNATURE_TYPES", "function_attributes"]

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
    _check_nvidia_device(t, f"{where}{f' ({spec.name})' if spec.name else ''}")


def _check_nvidia_device(t, label: str) -> None:
    dev = getattr(t, "device", None)
    try:
        import torch
        hip = getattr(torch.version, "hip", None)
    except ImportError:  # pragma: no cover
        hip = None
    if dev is None or getattr(dev, "type", None) != "cuda" or hip:
        raise LaunchError(f"{label}: tensor is on {dev}; the kernel needs a tensor on an "
                          f"NVIDIA GPU (torch device 'cuda' of a CUDA build of torch)")


def require_gpu_tensors(where: str, **tensors: Any) -> None:
    """The device checks of a launch, made before anything is built for it: a
    :class:`LaunchError` naming the first of ``tensors`` (None skipped) that is not on an
    NVIDIA CUDA device (the message :func:`check_cuda_tensor` gives), a
    :class:`NoDeviceError` when cuda-python's driver bindings do not import.

    The entry points (``kernels.nvidia.dispatch``: ``gemm``, ``flash_attention``,
    ``decode_attention``) call it before they build a kernel, since building one verifies its
    IR and printed text (seconds on a CPU) and the launch's own checks come after that: a call
    without a GPU got its error only once the verifier had run.  Cheap (attribute reads), so
    it runs on every uncached call; the launch still checks everything again."""
    for name, t in tensors.items():
        if t is not None:
            _check_nvidia_device(t, f"{where}: {name}")
    if _driver() is None:
        raise NoDeviceError("cuda-python (cuda.bindings.driver) is not installed: "
                            "pip install cuda-python to launch CUDA kernels")


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

    The checks run once per :func:`launch_key` (kernel, geometry, each tensor's dtype, shape,
    strides, device and pointer alignment, each scalar's value): a later launch with an
    equal key re-uses the :class:`PreparedLaunch` they produced, so a steady-state call costs
    a key comparison, the pointer packing and ``cuLaunchKernel``.
    """
    key = launch_key(module, kernel, grid, block, args, signature, specs, smem_bytes)
    prep = _PREPARED.get(key)
    if prep is None:
        prep = _PREPARED.put(key, prepare_launch(module, kernel, grid, block, args,
                                                 signature=signature, specs=specs,
                                                 smem_bytes=smem_bytes))
    prep.run(args, stream)


def launch_key(module, kernel, grid, block, args, signature, specs, smem_bytes):
    """The hashable key of everything :func:`prepare_launch` checks, or None when some part
    is not hashable or no argument is a tensor (such a launch is checked every time)."""
    try:
        if specs is not None and any(s is not None and s.align > ALIGN_MOD for s in specs):
            return None
        if not any(hasattr(a, "data_ptr") for a in args):
            return None
        metas = tuple(arg_key(a) for a in args)
        key = (module.key, kernel, grid if isinstance(grid, int) else tuple(grid),
               block if isinstance(block, int) else tuple(block), smem_bytes, tuple(signature),
               None if specs is None else tuple(specs), metas)
        hash(key)
        return key
    except (AttributeError, TypeError):
        return None


_PREPARED: BoundedCache = BoundedCache(512)
_CUSTREAMS: Dict[int, Any] = {}


def clear_prepared() -> None:
    """Forget every prepared launch of :func:`launch` (the next one of each key is checked)."""
    _PREPARED.clear()
    _CUSTREAMS.clear()


class PreparedLaunch:
    """A launch that :func:`prepare_launch` validated: the loaded function, its geometry and
    the packed argument buffer.  :meth:`run` re-packs only the pointers (their values are not
    in the key) and calls ``cuLaunchKernel`` on the current stream; when another context is
    current on this thread it first makes torch's primary context of the device current (the
    uncached path's ``torch.cuda.device`` guard)."""

    def __init__(self, fn, ctx: int, index: int, kernel: str, grid, block, smem_bytes: int,
                 holders, ptrs, ptr_slots) -> None:
        self.fn, self.ctx, self.index, self.kernel = fn, ctx, index, kernel
        self.grid, self.block, self.smem_bytes = grid, block, smem_bytes
        self.holders, self.ptrs, self.ptr_slots = holders, ptrs, ptr_slots
        self.set_scalars([None] * len(holders))
        self.params = ctypes.addressof(ptrs)
        self._lock = threading.Lock()

    def set_scalars(self, args: Sequence[Any]) -> None:
        """Remember ``args``' scalars (the values packed into the holders)."""
        idx = [i for i in range(len(args)) if i not in self.ptr_slots]
        # itemgetter compares in C: a steady-state call checks its scalars for ~0.2 us
        self._pick_scalars = (operator.itemgetter(*idx, idx[0]) if idx else (lambda a: ()))
        self._scalar_values = self._pick_scalars(args)

    def scalars_match(self, args: Sequence[Any]) -> bool:
        """True when ``args`` has this launch's scalar values (the pointers are re-packed per
        run; their tensors' dtype/shape/strides/alignment are the caller's key)."""
        return self._pick_scalars(args) == self._scalar_values

    def run(self, args: Sequence[Any], stream: Any = None) -> None:
        """Launch with ``args``, which must have the :func:`launch_key` this launch was
        prepared with (:func:`launch` and :class:`LaunchSite` guarantee it)."""
        import torch
        drv = _driver()
        err, ctx = drv.cuCtxGetCurrent()
        if int(err) != 0 or int(ctx) != self.ctx:
            with torch.cuda.device(self.index):
                _ensure_context(self.index)
                self._launch(drv, torch, args, stream)
            return
        self._launch(drv, torch, args, stream)

    def _launch(self, drv, torch, args, stream) -> None:
        g, b = self.grid, self.block
        if stream is None:
            stream = stream_handle(self.index)
        cs = _CUSTREAMS.get(stream)
        if cs is None:                  # the driver's handle object, made once per stream
            if len(_CUSTREAMS) > 64:
                _CUSTREAMS.clear()
            cs = _CUSTREAMS[stream] = drv.CUstream(int(stream))
        # the driver copies the parameters during cuLaunchKernel: the holders are reusable
        # once it returns, and the lock keeps two threads from packing over each other
        with self._lock:
            for i in self.ptr_slots:
                a = args[i]
                self.holders[i].value = a.data_ptr() if a is not None else 0
            (err,) = drv.cuLaunchKernel(self.fn, g[0], g[1], g[2], b[0], b[1], b[2],
                                        self.smem_bytes, cs, self.params, 0)
        _check(err, f"cuLaunchKernel({self.kernel}, grid {g}, block {b}, smem {self.smem_bytes})")
        if os.environ.get("LAYOUTALG_CUDA_SYNC") == "1":
            torch.cuda.synchronize(self.index)


def prepare_launch(module, kernel: Optional[str], grid, block, args: Sequence[Any], *,
                   signature: Sequence[str],
                   specs: Optional[Sequence[Optional[TensorSpec]]] = None,
                   smem_bytes: int = 0) -> PreparedLaunch:
    """Every check of :func:`launch` on these arguments, the module loaded and the shared
    memory limit raised: the :class:`PreparedLaunch` :func:`launch` caches."""
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
        err, ctx = drv.cuCtxGetCurrent()
        _check(err, "cuCtxGetCurrent")
    ptr_slots = tuple(i for i, kind in enumerate(signature) if kind == "ptr")
    prep = PreparedLaunch(fn, int(ctx), index, kernel, g, b, smem_bytes, holders, ptrs,
                          ptr_slots)
    prep.set_scalars(args)
    return prep


class LaunchSite:
    """One launch statement of a kernel class, bound to its geometry (issue 20): the first
    call runs :func:`prepare_launch`'s checks on its arguments, later calls re-use that
    :class:`PreparedLaunch` while their scalars are the same (else they are checked again).

    The caller guarantees that the tensors of later calls have the first call's dtype,
    shape, strides, device and pointer alignment: a kernel class keeps one site per
    :func:`~kernels.runtime.launch_cache.tensor_key` of its inputs, and allocates its
    workspaces with fixed shapes."""

    def __init__(self, module, kernel: str, grid, block, *, signature: Sequence[str],
                 specs: Optional[Sequence[Optional[TensorSpec]]] = None,
                 smem_bytes: int = 0) -> None:
        self.module, self.kernel, self.grid, self.block = module, kernel, grid, block
        self.signature, self.specs, self.smem_bytes = tuple(signature), specs, smem_bytes
        self._prepared: Optional[PreparedLaunch] = None

    def __call__(self, args: Sequence[Any], stream: Any = None) -> None:
        p = self._prepared
        if p is None or not p.scalars_match(args):
            p = self._prepared = prepare_launch(
                self.module, self.kernel, self.grid, self.block, args,
                signature=self.signature, specs=self.specs, smem_bytes=self.smem_bytes)
        p.run(args, stream)
