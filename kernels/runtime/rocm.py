"""Launching a code object on a ROCm GPU (MI300X) through ctypes on ``libamdhip64``.

``launch(code_object, kernel, grid, block, args)`` checks everything it can before touching the
runtime, so mistakes come back as :class:`LaunchError` with the argument named:

* argument count and kinds against the code object's metadata (``global_buffer`` -> a tensor
  or None, ``by_value`` -> a scalar or exactly-sized bytes);
* per tensor, against an optional :class:`TensorSpec`: dtype, shape, strides (contiguous by
  default), alignment of ``data_ptr()``; then that it lives on a ROCm device;
* grid / block sizes against the kernel's ``.max_flat_workgroup_size``, and static + dynamic
  LDS against the target's LDS per work-group.

Then it loads the code object (``hipModuleLoadData``, cached per code object), finds the kernel
(``hipModuleGetFunction``) and launches it (``hipModuleLaunchKernel``) on torch's current
stream with the arguments packed at the metadata's offsets.  Without a ROCm runtime it raises
:class:`NoDeviceError` ("no ROCm runtime (libamdhip64) found").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import numbers
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import LaunchError, NoDeviceError

__all__ = ["TensorSpec", "check_tensor", "check_rocm_device", "launch", "hip_runtime", "pack_args",
           "dim3"]


@dataclass(frozen=True)
class TensorSpec:
    """What a kernel expects of one tensor argument.

    ``dtype``: a torch dtype or its name (``"float16"``, ``"bfloat16"``, ``"float32"``...).
    ``shape``: exact sizes, ``None`` entries match anything (``None``: any shape).
    ``strides``: element strides (``None``: C-contiguous required; ``()``: any strides).
    ``align``: required byte alignment of the data pointer (16 for dwordx4 loads).
    """

    dtype: Any = None
    shape: Optional[Tuple[Optional[int], ...]] = None
    strides: Optional[Tuple[int, ...]] = None
    align: int = 16
    name: str = ""


def _dtype_name(d) -> str:
    return str(d).replace("torch.", "")


def _contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def check_tensor(t, spec: TensorSpec, where: str, check_device: bool = True) -> None:
    """Raise :class:`LaunchError` unless tensor ``t`` meets ``spec`` (and is on a ROCm device)."""
    label = f"{where}{f' ({spec.name})' if spec.name else ''}"
    if not hasattr(t, "data_ptr") or not hasattr(t, "stride"):
        if hasattr(t, "ctypes") and hasattr(t, "strides"):  # a numpy array (emulator runs)
            shape, strides = tuple(t.shape), tuple(s // t.itemsize for s in t.strides)
            ptr, dtype = t.ctypes.data, t.dtype.name
        else:
            raise LaunchError(f"{label}: expected a torch tensor, got {type(t).__name__}")
    else:
        shape, strides, ptr, dtype = tuple(t.shape), tuple(t.stride()), t.data_ptr(), t.dtype
    if spec.dtype is not None and _dtype_name(dtype) != _dtype_name(spec.dtype):
        raise LaunchError(f"{label}: dtype {_dtype_name(dtype)}, the kernel needs "
                          f"{_dtype_name(spec.dtype)}")
    if spec.shape is not None:
        ok = len(shape) == len(spec.shape) and all(w is None or w == s
                                                    for s, w in zip(shape, spec.shape))
        if not ok:
            want = "(" + ", ".join("*" if w is None else str(w) for w in spec.shape) + ")"
            raise LaunchError(f"{label}: shape {shape}, the kernel needs {want}")
    if spec.strides is None:
        live = [(s, d) for s, d in zip(shape, strides) if s != 1]
        if live != [(s, d) for s, d in zip(shape, _contiguous_strides(shape)) if s != 1]:
            raise LaunchError(f"{label}: strides {strides} are not contiguous for shape {shape} "
                              f"(expected {_contiguous_strides(shape)}); pass .contiguous()")
    elif spec.strides and tuple(strides) != tuple(spec.strides):
        raise LaunchError(f"{label}: strides {strides}, the kernel needs {tuple(spec.strides)}")
    if spec.align and ptr % spec.align:
        raise LaunchError(f"{label}: data pointer 0x{ptr:x} is not {spec.align}-byte aligned "
                          f"(offset {ptr % spec.align}); a sliced view? pass .clone()")
    if check_device:
        check_rocm_device(t, label)


def check_rocm_device(t, label: str) -> None:
    """Raise :class:`LaunchError` unless tensor ``t`` lives on a ROCm GPU."""
    dev = getattr(t, "device", None)
    is_rocm = False
    try:
        import torch
        is_rocm = bool(getattr(torch.version, "hip", None)) and dev is not None and \
            dev.type == "cuda"
    except ImportError:  # pragma: no cover
        pass
    if not is_rocm:
        raise LaunchError(f"{label}: tensor is on {dev}; a launch needs tensors on a ROCm "
                          f"GPU (torch built for ROCm, device 'cuda'); run it on the CPU "
                          f"with kernels.emulator.run instead")


# ------------------------------------------------------------------ the runtime

class _Hip:
    """The few libamdhip64 entry points a launch needs."""

    def __init__(self, lib):
        self.lib = lib
        c = ctypes
        lib.hipGetErrorString.restype = c.c_char_p
        lib.hipGetErrorString.argtypes = [c.c_int]
        lib.hipModuleLoadData.argtypes = [c.POINTER(c.c_void_p), c.c_void_p]
        lib.hipModuleGetFunction.argtypes = [c.POINTER(c.c_void_p), c.c_void_p, c.c_char_p]
        lib.hipModuleLaunchKernel.argtypes = [c.c_void_p] + [c.c_uint] * 7 + \
            [c.c_void_p, c.c_void_p, c.c_void_p]
        lib.hipGetDeviceCount.argtypes = [c.POINTER(c.c_int)]
        self.modules: Dict[str, Tuple[Any, bytes]] = {}

    def check(self, err: int, what: str) -> None:
        if err != 0:
            msg = self.lib.hipGetErrorString(err)
            raise LaunchError(f"{what} failed: hip error {err} "
                              f"({msg.decode() if msg else 'unknown'})")

    def function(self, co, kernel: str):
        key = co.key + "/" + kernel
        if key not in self.modules:
            image = bytes(co.binary)
            module, fn = ctypes.c_void_p(), ctypes.c_void_p()
            self.check(self.lib.hipModuleLoadData(ctypes.byref(module), image), "hipModuleLoadData")
            self.check(self.lib.hipModuleGetFunction(ctypes.byref(fn), module, kernel.encode()),
                       f"hipModuleGetFunction({kernel})")
            self.modules[key] = (fn, image)  # keep the image alive with the module
        return self.modules[key][0]


_RUNTIME: List[_Hip] = []


def _library_candidates() -> List[str]:
    out = []
    for root in filter(None, [os.environ.get("ROCM_PATH"), "/opt/rocm"]):
        out.append(os.path.join(root, "lib", "libamdhip64.so"))
    found = ctypes.util.find_library("amdhip64")
    if found:
        out.append(found)
    out.append("libamdhip64.so")
    return out


def hip_runtime() -> _Hip:
    """The loaded HIP runtime; :class:`NoDeviceError` when there is none or no GPU."""
    if _RUNTIME:
        return _RUNTIME[0]
    lib = None
    for cand in _library_candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError:
            continue
    if lib is None:
        raise NoDeviceError("no ROCm runtime (libamdhip64) found: install ROCm (or set "
                            "ROCM_PATH) to launch on a GPU; kernels.emulator.run executes "
                            "kernels on the CPU")
    hip = _Hip(lib)
    n = ctypes.c_int(0)
    if lib.hipGetDeviceCount(ctypes.byref(n)) != 0 or n.value == 0:
        raise NoDeviceError("ROCm runtime found, but no AMD GPU is visible (hipGetDeviceCount)")
    _RUNTIME.append(hip)
    return hip


# ------------------------------------------------------------------ arguments

def _explicit_args(md: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [a for a in md.get(".args", []) if not str(a.get(".value_kind", "")).startswith("hidden")]


def pack_args(md: Dict[str, Any], args: Sequence[Any], specs: Optional[Sequence[Any]] = None,
              check_device: bool = True) -> bytes:
    """The kernel-argument buffer for ``args`` (validated against metadata and ``specs``)."""
    name = md[".name"]
    formal = _explicit_args(md)
    if len(args) != len(formal):
        kinds = ", ".join(f"{a['.value_kind']}[{a['.size']}]" for a in formal)
        raise LaunchError(f"{name} takes {len(formal)} arguments ({kinds}), got {len(args)}")
    if specs is not None and len(specs) != len(args):
        raise LaunchError(f"{name}: {len(specs)} specs for {len(args)} arguments")
    size = max((a[".offset"] + a[".size"] for a in formal), default=0)
    buf = bytearray(size)
    tensors = []
    for i, (a, f) in enumerate(zip(args, formal)):
        where = f"{name} argument {i}"
        kind, off, n = f[".value_kind"], f[".offset"], f[".size"]
        if kind == "global_buffer":
            if a is None:
                ptr = 0
            else:
                spec = (specs[i] if specs is not None else None) or TensorSpec()
                check_tensor(a, spec, where, check_device=False)
                tensors.append((a, where))
                ptr = a.data_ptr()
            struct.pack_into("<Q", buf, off, ptr)
        elif kind == "by_value":
            buf[off:off + n] = _scalar(a, n, where)
        else:
            raise LaunchError(f"{where}: argument kind {kind!r} is not supported by launch()")
    if check_device:  # last, so that shape/dtype/stride mistakes are reported first
        for t, where in tensors:
            check_rocm_device(t, where)
    return bytes(buf)


def _scalar(v, n: int, where: str) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        if len(v) != n:
            raise LaunchError(f"{where}: {len(v)} bytes given, the kernel takes {n}")
        return bytes(v)
    if hasattr(v, "item") and not hasattr(v, "data_ptr"):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise LaunchError(f"{where}: the kernel takes a {n}-byte value, got {type(v).__name__}")
    if isinstance(v, float):
        fmt = {2: "<e", 4: "<f", 8: "<d"}.get(n)
        if fmt is None:
            raise LaunchError(f"{where}: a float for a {n}-byte parameter")
        return struct.pack(fmt, v)
    lo, hi = -(1 << (8 * n - 1)), (1 << (8 * n)) - 1
    if not lo <= v <= hi:
        raise LaunchError(f"{where}: {v} does not fit a {n}-byte integer parameter")
    return (v % (1 << (8 * n))).to_bytes(n, "little")


def dim3(v, what: str) -> Tuple[int, int, int]:
    """``grid`` / ``block`` given as an int or 1-3 ints -> three positive ints below 2**31."""
    t = (v,) if isinstance(v, numbers.Integral) else tuple(v)
    if not 1 <= len(t) <= 3 or any(isinstance(x, bool) or not isinstance(x, numbers.Integral)
                                   or x < 1 for x in t):
        raise LaunchError(f"{what} must be 1 to 3 positive integers, got {v!r}")
    out = tuple(int(x) for x in t) + (1,) * (3 - len(t))
    if any(x >= 2 ** 31 for x in out):
        raise LaunchError(f"{what} {out} too large")
    return out  # type: ignore[return-value]


def launch(co, kernel: Optional[str], grid, block, args: Sequence[Any], *,
           specs: Optional[Sequence[Optional[TensorSpec]]] = None, lds_bytes: int = 0,
           stream: Any = None) -> None:
    """Launch ``kernel`` of code object ``co`` (a :class:`kernels.codeobject.CodeObject`).

    ``grid`` in blocks and ``block`` in threads (int or 1-3 ints); ``args`` torch tensors on a
    ROCm device (or None for a null pointer) and Python scalars, in the kernel's order;
    ``specs`` a :class:`TensorSpec` (or None) per argument; ``lds_bytes`` dynamic LDS;
    ``stream`` a hipStream_t handle (default: torch's current stream).  Asynchronous like any
    HIP launch: synchronise (``torch.cuda.synchronize()``) before reading the results.
    """
    md = co.kernel_metadata(kernel)
    g, b = dim3(grid, "grid"), dim3(block, "block")
    threads = b[0] * b[1] * b[2]
    limit = int(md.get(".max_flat_workgroup_size", 1024))
    if threads > limit:
        raise LaunchError(f"{md['.name']}: block {b} has {threads} threads; the kernel was "
                          f"compiled for at most {limit} (LAGEN_LAUNCH_BOUNDS)")
    if g[0] * b[0] >= 2 ** 32 or g[1] * b[1] >= 2 ** 32 or g[2] * b[2] >= 2 ** 32:
        raise LaunchError(f"{md['.name']}: grid {g} too large")
    from mfma_specs import arch as arch_model
    lds_cap = arch_model.target(co.arch).lds_bytes
    static = int(md.get(".group_segment_fixed_size", 0))
    if lds_bytes < 0 or static + lds_bytes > lds_cap:
        raise LaunchError(f"{md['.name']}: {static} bytes of static LDS + {lds_bytes} dynamic "
                          f"exceed the {lds_cap} bytes a work-group can have on {co.arch}")
    packed = pack_args(md, args, specs)
    hip = hip_runtime()
    _check_arch(co.arch, args)
    fn = hip.function(co, md[".name"])
    kernarg = ctypes.create_string_buffer(packed, max(len(packed), 1))
    size = ctypes.c_size_t(len(packed))
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(kernarg), 2, ctypes.addressof(size), 3)
    if stream is None:
        try:
            import torch
            stream = torch.cuda.current_stream().cuda_stream
        except Exception:  # pragma: no cover - no torch: the null stream
            stream = 0
    hip.check(hip.lib.hipModuleLaunchKernel(fn, *g, *b, lds_bytes, ctypes.c_void_p(stream), None,
                                            extra), f"hipModuleLaunchKernel({md['.name']})")


def _check_arch(arch: str, args: Sequence[Any]) -> None:
    """The GPU of the first tensor must be ``arch`` (torch reports e.g. gfx942:sramecc+:xnack-)."""
    try:
        import torch
        dev = next(a.device for a in args if hasattr(a, "device"))
        name = torch.cuda.get_device_properties(dev).gcnArchName.split(":")[0]
    except Exception:  # pragma: no cover - only reachable on ROCm machines
        return
    if name != arch:
        raise LaunchError(f"code object is for {arch}, the tensors are on a {name}; recompile "
                          f"with compile_hip(..., arch={name!r})")
