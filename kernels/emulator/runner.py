"""Run a kernel's exact HIP source on the CPU.

``run(source, kernel, grid, block, args)`` compiles the source as host C++ against
``hip_emu.h`` (``-DLAGEN_EMULATE``, MFMA builtins generated from mfma_specs), caches the shared
library by content hash, and calls the exported launcher through ctypes.

Arguments are numpy arrays / CPU torch tensors (C-contiguous), ``None`` (a null pointer) or
scalars; their types are checked against the kernel's real C++ signature, which the library
reports.  Arrays are copied into page-guarded shared memory, so an out-of-bounds access past
the end of a buffer is caught and reported with the argument it overran; after the run every
array passed to a non-const pointer is copied back in place.

By default the launch runs in forked worker processes (``workers``, one per CPU core, blocks
dealt round-robin), so a crash, hang or runaway kernel cannot take the caller down: crashes are
reported as :class:`EmulatorError`, hangs end at ``timeout`` seconds.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from layoutalg.progress import count

from ..toolchain.cache import Cache, content_key, default_cache
from ..errors import EmulatorError, KernelError, LaunchError
from ..runtime.rocm import check_tensor, dim3
from ..toolchain.hip import INCLUDE_DIR, find_host_compiler, run_compiler
from . import mfma_gen

__all__ = ["run", "build", "EmuLibrary", "RunResult", "ArgType", "kernel_names"]

EMU_DIR = Path(__file__).resolve().parent
PAGE = mmap.PAGESIZE
HOST_FLAGS = ("-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-DLAGEN_EMULATE=1",
              "-fvisibility=hidden", "-fvisibility-inlines-hidden",
              "-fstack-clash-protection")  # big frames probe each page: they hit the guard page
# line tables only: a fault's instruction is mapped back to the kernel source line
CLANG_FLAGS = ("-fno-color-diagnostics", "-gline-tables-only")
GCC_FLAGS = ("-fdiagnostics-color=never", "-Wno-attributes", "-g1")
_ERR_CAP = 8192
_EXIT_FAULT = 86

# ------------------------------------------------------------------ kernel signatures

_SCALARS = {"f2": np.float16, "f4": np.float32, "f8": np.float64, "b1": np.bool_,
            "i1": np.int8, "i2": np.int16, "i4": np.int32, "i8": np.int64,
            "u1": np.uint8, "u2": np.uint16, "u4": np.uint32, "u8": np.uint64}
_CNAMES = {"f2": "_Float16", "f4": "float", "f8": "double", "b1": "bool", "i1": "int8_t",
           "i2": "short", "i4": "int", "i8": "int64_t", "u1": "uint8_t", "u2": "unsigned short",
           "u4": "unsigned", "u8": "uint64_t"}


@dataclass(frozen=True)
class ArgType:
    """One kernel parameter as the compiled kernel declares it."""

    code: str                 # e.g. "pcf4" (const float*), "i4", "v4f2"
    pointer: bool
    const: bool
    elem: Optional[str]       # scalar code of the (pointee) element, None for opaque ("x")
    count: int                # vector width of the (pointee) type
    nbytes: int               # size of the (pointee) type

    @staticmethod
    def parse(code: str) -> "ArgType":
        m = re.fullmatch(r"(p(c?))?(?:v(\d+))?([fiub]\d+|x\d+)", code)
        if not m:
            raise KernelError(f"cannot parse emulator type code {code!r}")
        pointer, const = bool(m.group(1)), bool(m.group(2))
        count = int(m.group(3) or 1)
        scal = m.group(4)
        if scal.startswith("x"):
            return ArgType(code, pointer, const, None, 1, int(scal[1:]))
        return ArgType(code, pointer, const, scal, count, count * int(scal[1:]))

    def cname(self) -> str:
        base = _CNAMES.get(self.elem, f"<{self.nbytes}-byte type>") if self.elem else \
            f"<{self.nbytes}-byte type>"
        if self.count > 1:
            base = f"{base} x{self.count}"
        return ("const " if self.const else "") + base + ("*" if self.pointer else "")


_KERNEL_RE = re.compile(r'annotate\("lagen_kernel"\)\)\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)*'
                        r'void\s+([A-Za-z_]\w*)\s*\(')


def kernel_names(preprocessed: str) -> List[str]:
    """Kernels (``LAGEN_KERNEL`` / ``__global__`` functions) of a source preprocessed with
    ``-DLAGEN_EMULATE``, where both expand to an ``annotate("lagen_kernel")`` attribute."""
    return list(dict.fromkeys(_KERNEL_RE.findall(preprocessed)))


# ------------------------------------------------------------------ building

class _LaunchParams(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("lds_limit", ctypes.c_ulonglong), ("dyn_lds", ctypes.c_ulonglong),
                ("block_begin", ctypes.c_ulonglong), ("block_step", ctypes.c_ulonglong),
                ("stack_bytes", ctypes.c_ulonglong), ("err", ctypes.c_void_p),
                ("err_cap", ctypes.c_ulonglong), ("catch_signals", ctypes.c_longlong),
                ("stats", ctypes.c_ulonglong * 4)]


@dataclass
class EmuLibrary:
    """A kernel source compiled for the emulator."""

    path: Path
    kernels: Tuple[str, ...]
    arch: str
    cache_status: str
    compile_seconds: float
    _lib: Any = field(default=None, repr=False)
    _sigs: Dict[str, List[ArgType]] = field(default_factory=dict, repr=False)

    @property
    def lib(self):
        if self._lib is None:
            self._lib = ctypes.CDLL(str(self.path))
        return self._lib

    def signature(self, kernel: str) -> List[ArgType]:
        if kernel not in self._sigs:
            if kernel not in self.kernels:
                raise KernelError(f"no kernel {kernel!r} in the source (found: "
                                  f"{', '.join(self.kernels) or 'none'}); declare it "
                                  f"LAGEN_KERNEL void {kernel}(...)")
            f = getattr(self.lib, f"lagen_emu_signature__{kernel}")
            f.restype = ctypes.c_char_p
            text = f().decode()
            self._sigs[kernel] = [ArgType.parse(c) for c in text.split(",")] if text else []
        return self._sigs[kernel]

    def launcher(self, kernel: str):
        self.signature(kernel)
        f = getattr(self.lib, f"lagen_emu_launch__{kernel}")
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.POINTER(_LaunchParams), ctypes.c_void_p]
        return f


_LOADED: Dict[str, EmuLibrary] = {}


def build(source: str, arch: str = "gfx942", options: Sequence[str] = (), *,
          name: str = "kernel.hip", cache: Optional[Cache] = None) -> EmuLibrary:
    """Compile ``source`` for the emulator (cached by content hash) and return the library.

    Two steps on a cache miss: preprocess (to find every kernel, macro-generated ones included),
    then compile with an exported launcher and signature function per kernel.
    """
    host = find_host_compiler()
    mfma = mfma_gen.generate(arch, mfma_gen.builtins_used(source))
    # everything that shapes the library: headers, generated MFMA code, this build recipe
    headers = [(INCLUDE_DIR / "lagen_hip.h").read_bytes(), (EMU_DIR / "hip_emu.h").read_bytes(),
               Path(__file__).read_bytes()]
    flags = HOST_FLAGS + (CLANG_FLAGS if host.is_clang else GCC_FLAGS) + tuple(options)
    key = content_key("emu-v1", source, arch, "\0".join(flags), host.version, host.path, mfma,
                      *headers, name)
    if key in _LOADED:
        return _LOADED[key]
    store = cache or default_cache()
    path, meta = store.lookup("emu", key, "so")
    status, seconds = "hit", 0.0
    if path is None:
        status = "corrupt" if meta == "corrupt" else "miss"
        t0 = time.perf_counter()
        base = os.path.basename(name)
        with tempfile.TemporaryDirectory(prefix="lagen-emu-") as d:
            Path(d, base).write_text(source)
            Path(d, "lagen_mfma_emu.inc").write_text(mfma)
            what = f"compiling {base} for the CPU emulator with {host.version}"
            srcs = {base: source, os.path.join(d, base): source}
            inc = ["-I", str(INCLUDE_DIR), "-I", str(EMU_DIR), "-I", d]
            pre, main = os.path.join(d, "kernel.ii"), os.path.join(d, "lagen_emu_main.cpp")
            run_compiler([host.path, *flags, *inc, "-E", base, "-o", pre], what, srcs, d)
            names = kernel_names(Path(pre).read_text(errors="replace"))
            # the source inline under its own name (so __FILE__ and diagnostics say `base`),
            # then one exported launcher per kernel
            Path(main).write_text(f'#line 1 "{base}"\n{source}\n#line 1 "lagen_emu_exports"\n' +
                                  "".join(f"LAGEN_EMU_EXPORT({k})\n" for k in names))
            out = os.path.join(d, "kernel.so")
            run_compiler([host.path, *flags, *inc, "lagen_emu_main.cpp", "-o", out], what, srcs, d)
            meta = {"arch": arch, "kernels": names, "compiler": host.version}
            path = store.store("emu", key, "so", Path(out).read_bytes(), meta)
        seconds = time.perf_counter() - t0
    lib = EmuLibrary(path, tuple(meta["kernels"]), arch, status, seconds)
    _LOADED[key] = lib
    return lib


# ------------------------------------------------------------------ arguments

@dataclass
class _Buffer:
    index: int
    mm: mmap.mmap
    addr: int          # address of the data in this process (and in forked workers)
    nbytes: int
    view: np.ndarray   # flat uint8 view of the data
    orig: Any
    array: np.ndarray  # the caller's data as numpy (same dtype/shape)

    @property
    def region(self) -> Tuple[int, int]:
        return self.addr, self.addr + self.nbytes


def _libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib


def _as_numpy(x, where: str) -> np.ndarray:
    """A numpy view of an array / CPU tensor argument (bf16 tensors as int16 bits)."""
    if isinstance(x, np.ndarray):
        arr = x
    elif type(x).__module__.startswith("torch"):
        import torch
        if x.device.type != "cpu":
            raise LaunchError(f"{where}: tensor is on {x.device}; the CPU emulator needs CPU "
                              f"tensors (use .cpu())")
        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        elif t.dtype in (getattr(torch, "float8_e4m3fnuz", None), getattr(torch, "float8_e5m2fnuz", None),
                         getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
            t = t.view(torch.uint8)
        if not t.is_contiguous():
            raise LaunchError(f"{where}: tensor is not contiguous (strides {tuple(x.stride())}); "
                              f"pass .contiguous()")
        arr = t.numpy()
    else:
        raise LaunchError(f"{where}: expected a numpy array or torch tensor, got "
                          f"{type(x).__name__}")
    if not arr.flags.c_contiguous:
        raise LaunchError(f"{where}: array is not C-contiguous (strides {arr.strides}); pass "
                          f"np.ascontiguousarray(...)")
    return arr


def _check_pointee(arr: np.ndarray, t: ArgType, where: str, orig) -> None:
    if t.elem is None:
        return
    want = np.dtype(_SCALARS[t.elem])
    # 16-bit integer pointers also take raw 16-bit float bits (bf16 tensors arrive as int16)
    ok = arr.dtype == want or (t.elem in ("i2", "u2") and arr.dtype.itemsize == 2)
    if not ok:
        got = str(orig.dtype) if hasattr(orig, "dtype") else str(arr.dtype)
        is_bf16 = got == "torch.bfloat16"
        raise LaunchError(f"{where}: the kernel takes {t.cname()}, but the array has dtype "
                          f"{got} (element type {want.name} expected"
                          f"{'; bf16 data goes to short/unsigned short pointers' if is_bf16 else ''})")
    if arr.nbytes % t.nbytes:
        raise LaunchError(f"{where}: {arr.nbytes} bytes is not a whole number of "
                          f"{t.cname().rstrip('*')} ({t.nbytes} bytes)")


def _guarded(index: int, arr: np.ndarray, orig, libc) -> _Buffer:
    """Copy ``arr`` into shared memory that ends at a PROT_NONE page (and starts after one)."""
    nbytes = arr.nbytes
    span = (-(-max(nbytes, 1) // PAGE)) * PAGE
    mm = mmap.mmap(-1, span + 2 * PAGE)  # MAP_SHARED | MAP_ANONYMOUS: workers write into it
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    for off in (0, PAGE + span):
        if libc.mprotect(base + off, PAGE, 0) != 0:  # PROT_NONE
            raise EmulatorError(f"mprotect failed (errno {ctypes.get_errno()})")
    start = PAGE + span - ((nbytes + 15) // 16) * 16
    view = np.frombuffer(mm, dtype=np.uint8, count=nbytes, offset=start)
    view[:] = arr.reshape(-1).view(np.uint8)
    return _Buffer(index, mm, base + start, nbytes, view, orig, arr)


def _scalar_bytes(value, t: ArgType, where: str) -> bytes:
    if t.elem is None:
        if isinstance(value, (bytes, bytearray)) and len(value) == t.nbytes:
            return bytes(value)
        raise LaunchError(f"{where}: the kernel takes a {t.nbytes}-byte value ({t.code}); pass "
                          f"exactly {t.nbytes} bytes")
    dt = np.dtype(_SCALARS[t.elem])
    vals = np.asarray(value).reshape(-1) if t.count > 1 else np.asarray([value])
    if vals.size != t.count:
        raise LaunchError(f"{where}: the kernel takes {t.cname()} ({t.count} values), got "
                          f"{vals.size}")
    if isinstance(value, np.ndarray) and value.ndim and t.count == 1:
        raise LaunchError(f"{where}: the kernel takes a scalar {t.cname()}, got an array")
    if dt.kind in "iu":
        for v in vals.tolist():
            if isinstance(v, float) and not float(v).is_integer():
                raise LaunchError(f"{where}: {v!r} is not an integer ({t.cname()} expected)")
            info = np.iinfo(dt)
            if not info.min <= int(v) <= info.max:
                raise LaunchError(f"{where}: {v} does not fit {t.cname()} "
                                  f"[{info.min}, {info.max}]")
        return np.array([int(v) for v in vals.tolist()], dtype=dt).tobytes()
    return vals.astype(dt).tobytes()


# ------------------------------------------------------------------ running

@dataclass
class RunResult:
    outputs: List[Optional[np.ndarray]]   # per argument: its array after the run (None: scalar)
    seconds: float                        # wall time of the launch (workers included)
    library: EmuLibrary
    stats: Dict[str, int]                 # blocks, fiber_switches, barriers, wave_collectives


def run(source: str, kernel: str, grid, block, args: Sequence[Any], *, lds_bytes: int = 0,
        arch: str = "gfx942", options: Sequence[str] = (), lds_limit: Optional[int] = None,
        workers: Optional[int] = None, timeout: float = 120.0, isolate: bool = True,
        stack_kib: int = 64, cache: Optional[Cache] = None, name: str = "kernel.hip",
        specs: Optional[Sequence[Any]] = None) -> RunResult:
    """Run ``kernel`` of HIP ``source`` on the CPU emulator.

    ``grid``/``block``: int or 1-3 ints.  ``args``: arrays/tensors (C-contiguous), ``None`` or
    scalars, matched against the kernel's C++ parameters.  ``lds_bytes``: dynamic LDS.
    ``lds_limit``: LDS per work-group (default: the arch's, 64 KiB on gfx942).  ``specs``:
    optional :class:`kernels.launch.TensorSpec` per argument (None entries skip), checked like
    :func:`kernels.launch.launch` does.  Non-const pointer arguments are written back in place.
    Raises :class:`LaunchError` for bad arguments, :class:`EmulatorError` when the kernel
    deadlocks, diverges, overruns a buffer or LDS, crashes or times out.
    """
    grid3, block3 = dim3(grid, "grid"), dim3(block, "block")
    nthreads = block3[0] * block3[1] * block3[2]
    if nthreads > 1024:
        raise LaunchError(f"block {block3} has {nthreads} threads; the limit is 1024")
    if lds_limit is None:
        from mfma_specs import arch as arch_model
        lds_limit = arch_model.target(arch).lds_bytes
    if not 0 <= lds_bytes <= lds_limit:
        raise LaunchError(f"dynamic LDS of {lds_bytes} bytes: must be 0..{lds_limit} on {arch}")
    lib = build(source, arch, options, name=name, cache=cache)
    sig = lib.signature(kernel)
    if len(args) != len(sig):
        raise LaunchError(f"{kernel} takes {len(sig)} arguments "
                          f"({', '.join(t.cname() for t in sig)}), got {len(args)}")
    if specs is not None:
        for i, (a, s) in enumerate(zip(args, specs)):
            if s is not None:
                check_tensor(a, s, f"{kernel} argument {i}", check_device=False)
    libc = _libc()
    buffers: List[_Buffer] = []
    slots: List[bytes] = []
    for i, (a, t) in enumerate(zip(args, sig)):
        where = f"{kernel} argument {i} ({t.cname()})"
        if t.pointer and a is None:
            slots.append((0).to_bytes(8, "little"))
        elif t.pointer:
            arr = _as_numpy(a, where)
            _check_pointee(arr, t, where, a)
            buf = _guarded(i, arr, a, libc)
            buffers.append(buf)
            slots.append(buf.addr.to_bytes(8, "little"))
        else:
            slots.append(_scalar_bytes(a, t, where))
    # argument storage: one 64-byte-aligned slot per argument, and the pointer array
    sizes = [-(-max(len(s), 1) // 64) * 64 for s in slots]
    store = np.zeros(sum(sizes) + 64, dtype=np.uint8)
    base = (store.ctypes.data + 63) // 64 * 64
    argv = (ctypes.c_void_p * max(len(slots), 1))()
    off = base - store.ctypes.data
    for i, (s, n) in enumerate(zip(slots, sizes)):
        store[off:off + len(s)] = np.frombuffer(s, dtype=np.uint8)
        argv[i] = store.ctypes.data + off
        off += n
    nblocks = grid3[0] * grid3[1] * grid3[2]
    nworkers = max(1, min(workers or os.cpu_count() or 1, nblocks)) if isolate else 1
    launcher = lib.launcher(kernel)
    control = mmap.mmap(-1, nworkers * (ctypes.sizeof(_LaunchParams) + _ERR_CAP + 64))
    params = []
    stride = ctypes.sizeof(_LaunchParams) + _ERR_CAP + 64
    for w in range(nworkers):
        p = _LaunchParams.from_buffer(control, w * stride)
        p.grid[:] = grid3
        p.block[:] = block3
        p.lds_limit, p.dyn_lds = lds_limit, lds_bytes
        p.block_begin, p.block_step = w, nworkers
        p.stack_bytes = stack_kib * 1024
        p.err = ctypes.addressof(p) + ctypes.sizeof(_LaunchParams)
        p.err_cap = _ERR_CAP
        p.catch_signals = 1 if isolate else 0
        params.append(p)
    t0 = time.perf_counter()
    try:
        if isolate:
            _run_forked(launcher, params, argv, timeout, buffers, sig, kernel, lib.path)
        else:
            if launcher(ctypes.byref(params[0]), argv) != 0:
                raise EmulatorError(f"{kernel}: {_err_text(params[0])}")
        seconds = time.perf_counter() - t0
        outputs: List[Optional[np.ndarray]] = [None] * len(args)
        for b in buffers:
            result = b.view.copy().view(b.array.dtype).reshape(b.array.shape)
            outputs[b.index] = result
            if not sig[b.index].const:
                _write_back(b, result)
        stats = {k: sum(int(p.stats[i]) for p in params) for i, k in
                 enumerate(("blocks", "fiber_switches", "barriers", "wave_collectives"))}
    finally:
        del params, p
        for b in buffers:
            del b.view
            _close(b.mm)
        _close(control)
    return RunResult(outputs, seconds, lib, stats)


def _close(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:  # a view is still referenced somewhere: the GC unmaps it later
        pass


def _write_back(b: _Buffer, result: np.ndarray) -> None:
    if isinstance(b.orig, np.ndarray):
        if b.orig.flags.writeable:
            np.copyto(b.orig, result)
    else:  # torch tensor: b.array shares its memory
        b.array[...] = result


def _err_text(p: _LaunchParams) -> str:
    return ctypes.string_at(p.err).decode(errors="replace") or "unknown emulator error"


def _source_line(lib_path: Any, text: str) -> str:
    """``" at kernel.hip:123"`` for the faulting instruction (``pcoff=`` of the fault report,
    mapped through the library's line table with llvm-symbolizer / addr2line), or ``""``."""
    m = re.search(r"pcoff=0x([0-9a-f]+)", text)
    if not m or lib_path is None:
        return ""
    import shutil
    import subprocess
    for tool in ("llvm-symbolizer-19", "llvm-symbolizer", "addr2line"):
        exe = shutil.which(tool)
        if not exe:
            continue
        cmd = ([exe, f"--obj={lib_path}", f"0x{m.group(1)}"]
               if "symbolizer" in tool else [exe, "-e", str(lib_path), f"0x{m.group(1)}"])
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for ln in out.splitlines():
            fm = re.search(r"([^/\s:]+):(\d+)(?::\d+)?$", ln.strip())
            if fm and fm.group(2) != "0" and "lagen_emu" not in fm.group(1) \
                    and "hip_emu.h" not in fm.group(1):
                return f" at {fm.group(1)}:{fm.group(2)}"
    return ""


def _describe_fault(text: str, buffers: List[_Buffer], sig: List[ArgType], kernel: str,
                    lib_path: Any = None) -> str:
    m = re.search(r"addr=0x([0-9a-f]+)", text)
    where = text.split("block", 1)[1] if "block" in text else ""
    line = _source_line(lib_path, text)
    where = re.sub(r" pcoff=0x[0-9a-f]+", line, where)
    if not m:
        return text
    addr = int(m.group(1), 16)
    lds = re.search(r" (LDS array .*?(?:past its end|before its start))", where)
    if lds:
        return (f"out-of-bounds LDS access: address 0x{addr:x}: {lds.group(1)}; in block"
                f"{where.replace(lds.group(0), '')}")
    for b in buffers:   # past an end first: one buffer's upper guard may lie below the next
        lo, hi = b.region
        what = f"argument {b.index} ({sig[b.index].cname()}, {b.nbytes} bytes)"
        if hi <= addr < hi + 2 * PAGE:
            return (f"out-of-bounds access: address 0x{addr:x} is {addr - hi} bytes past the end "
                    f"of {what}; in block{where}")
    for b in buffers:
        lo, hi = b.region
        what = f"argument {b.index} ({sig[b.index].cname()}, {b.nbytes} bytes)"
        if lo - 2 * PAGE <= addr < lo:
            return (f"out-of-bounds access: address 0x{addr:x} is {lo - addr} bytes before the "
                    f"start of {what}; in block{where}")
    if "stack overflow" in text:
        return (f"thread stack overflow in block{where.split(' (thread stack')[0]}: the kernel needs "
                f"more stack per thread than stack_kib gives it; raise stack_kib")
    return f"invalid memory access at 0x{addr:x} (not inside any argument buffer); in block{where}"


def _run_forked(launcher, params, argv, timeout, buffers, sig, kernel, lib_path=None) -> None:
    pids = []
    for p in params:
        pid = os.fork()
        if pid == 0:  # worker: run its blocks, report through the shared control page
            code = 70
            try:
                code = 0 if launcher(ctypes.byref(p), argv) == 0 else 1
            finally:
                os._exit(code)
        pids.append(pid)
    deadline = time.monotonic() + timeout
    status: Dict[int, int] = {}
    delay = 0.0005
    g = params[0].grid
    nblocks = int(g[0]) * int(g[1]) * int(g[2])
    try:
        while len(status) < len(pids):
            # the workers count their finished blocks in the shared control page (stats[0])
            count(f"{kernel}: blocks emulated", sum(int(p.stats[0]) for p in params), nblocks)
            for pid in pids:
                if pid not in status:
                    done, st = os.waitpid(pid, os.WNOHANG)
                    if done:
                        status[pid] = st
            if len(status) < len(pids):
                if any(os.waitstatus_to_exitcode(s) != 0 for s in status.values()):
                    break  # one worker failed: stop the others
                if time.monotonic() > deadline:
                    raise EmulatorError(
                        f"{kernel}: did not finish in {timeout:g} s (an infinite loop, or a "
                        f"thread spinning on a value another thread of the block never gets to "
                        f"write between barriers?)")
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
    finally:
        for pid in pids:
            if pid not in status:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
    for pid, p in zip(pids, params):
        if pid not in status:
            continue
        code = os.waitstatus_to_exitcode(status[pid])
        if code == 0:
            continue
        text = _err_text(p)
        if code == 1:
            raise EmulatorError(f"{kernel}: {text}")
        if code == _EXIT_FAULT:
            raise EmulatorError(f"{kernel}: {_describe_fault(text, buffers, sig, kernel, lib_path)}")
        if code < 0:
            raise EmulatorError(f"{kernel}: the emulator process died with signal "
                                f"{signal.Signals(-code).name} ({text})")
        raise EmulatorError(f"{kernel}: emulator worker exited with status {code} ({text})")
