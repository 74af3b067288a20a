"""Compile CUDA C++ for NVIDIA GPUs: NVRTC at run time (cuda-python), or ``nvcc`` offline.

``compile_cuda(source, arch="sm_90")`` returns a :class:`CudaModule` holding the cubin.  The
backend is NVRTC through cuda-python's low-level bindings (``cuda.bindings.nvrtc``; the
package ``cuda-python``/``cuda-bindings``) when importable, else ``nvcc -cubin`` when on the
PATH (the offline path the CPU tests use to catch compile errors without a GPU).  Products are
cached by content hash (source, arch, options, compiler version) in the ``kernels.cache``
store (``$LAYOUTALG_CACHE`` or ``~/.cache/layoutalg``, kind ``cubin``).

The kernels this package generates include no header (they use only built-in types and inline
PTX), so NVRTC needs no include path.  Errors: :class:`kernels.errors.CompileError` with the
offending source lines quoted, :class:`kernels.errors.ToolchainError` when neither backend
exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from .cache import Cache, content_key, default_cache
from ..errors import CompileError, Diagnostic, ToolchainError

__all__ = ["CudaModule", "compile_cuda", "nvrtc_available", "nvcc_path", "parse_nvcc_diagnostics",
           "DEFAULT_OPTIONS", "kernel_names"]

DEFAULT_OPTIONS: Tuple[str, ...] = ("-std=c++17",)

_INSTALL = ("install cuda-python (pip install cuda-python, for NVRTC at run time) or put the "
            "CUDA toolkit's nvcc on the PATH")


@dataclass
class CudaModule:
    """A compiled CUDA module: the cubin plus what produced it."""

    cubin: bytes
    arch: str                      # "sm_90"
    source: str
    name: str
    options: Tuple[str, ...]
    backend: str                   # "nvrtc" or "nvcc"
    compiler: str                  # version string
    key: str
    cache_status: str              # "hit", "miss", "corrupt", "uncached"
    compile_seconds: float = 0.0
    log: str = ""
    kernels: Tuple[str, ...] = field(default=())

    @property
    def cc(self) -> Tuple[int, int]:
        """Compute capability the cubin was built for, e.g. (9, 0)."""
        digits = re.sub(r"[^0-9]", "", self.arch)
        return int(digits[:-1]), int(digits[-1])


def kernel_names(source: str) -> Tuple[str, ...]:
    """Names of the ``extern "C" __global__`` functions of ``source`` (in order)."""
    pat = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
                     r'void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(')
    return tuple(pat.findall(source))


def _norm_arch(arch: str) -> str:
    a = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})(a?)", a)
    if not m:
        raise ToolchainError(f"unknown CUDA arch {arch!r}; give e.g. 'sm_80' or 'sm_90'")
    return f"sm_{m.group(1)}{m.group(2)}"


# ---------------------------------------------------------------------- NVRTC

def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # cuda-python >= 12.6
        return nvrtc
    except ImportError:
        pass
    try:
        from cuda import nvrtc  # type: ignore  # older cuda-python layout
        return nvrtc
    except ImportError:
        return None


def nvrtc_available() -> bool:
    nv = _nvrtc()
    if nv is None:
        return False
    try:
        err, _, _ = nv.nvrtcVersion()
        return int(err) == 0
    except Exception:   # the shared library itself is missing
        return False


def _nvrtc_version(nv) -> str:
    err, major, minor = nv.nvrtcVersion()
    return f"nvrtc {major}.{minor}"


def _nvrtc_compile(source: str, name: str, arch: str, options: Tuple[str, ...]) -> Tuple[bytes, str]:
    nv = _nvrtc()
    err, prog = nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check_nvrtc(nv, err, "nvrtcCreateProgram")
    try:
        opts = [f"-arch={arch}".encode()] + [o.encode() for o in options]
        (err,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        err_l, n = nv.nvrtcGetProgramLogSize(prog)
        # NVRTC writes into these buffers.  They must be fresh objects: for n <= 1, b" " * n is
        # CPython's shared empty/one-byte object, and writing its NUL into it corrupts every
        # later " " in the process (seen on Python 3.12: f"{a} {b}" printed "a\0b").
        log = _scratch(n)
        nv.nvrtcGetProgramLog(prog, log)
        log_s = log.split(b"\0", 1)[0].decode(errors="replace")
        if int(err) != 0:
            raise CompileError(f"NVRTC failed compiling {name} for {arch}",
                               parse_nvcc_diagnostics(log_s, {name: source}), log_s,
                               ["nvrtc"] + [o.decode() for o in opts])
        err, size = nv.nvrtcGetCUBINSize(prog)
        _check_nvrtc(nv, err, "nvrtcGetCUBINSize")
        cubin = _scratch(size)
        (err,) = nv.nvrtcGetCUBIN(prog, cubin)
        _check_nvrtc(nv, err, "nvrtcGetCUBIN")
        return cubin[:int(size)], log_s
    finally:
        nv.nvrtcDestroyProgram(prog)


def _scratch(n: int) -> bytes:
    """A new, writable-by-C buffer of at least ``n`` bytes (never an interned bytes object)."""
    return b"\0" * max(int(n) + 1, 2)


def _check_nvrtc(nv, err, what: str) -> None:
    if int(err) != 0:
        try:
            msg = nv.nvrtcGetErrorString(err)[1].decode()
        except Exception:
            msg = str(err)
        raise ToolchainError(f"{what} failed: {msg}")


# ---------------------------------------------------------------------- nvcc (offline)

def nvcc_path() -> Optional[str]:
    env = os.environ.get("LAYOUTALG_NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    for root in filter(None, [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                              "/usr/local/cuda"]):
        p = Path(root, "bin", "nvcc")
        if p.exists():
            return str(p)
    return None


def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"{nvcc} --version failed: {e}") from None
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return f"nvcc {m.group(2) if m else out.strip().splitlines()[-1:]}"


def _nvcc_compile(nvcc: str, source: str, name: str, arch: str,
                  options: Tuple[str, ...]) -> Tuple[bytes, str]:
    with tempfile.TemporaryDirectory(prefix="lagen-cuda-") as d:
        base = os.path.basename(name)
        Path(d, base).write_text(source)
        out = os.path.join(d, "kernel.cubin")
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", *options, base, "-o", out]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=d, timeout=600)
        except FileNotFoundError:
            raise ToolchainError(f"{nvcc} not found; {_INSTALL}") from None
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc did not finish compiling {name} in 600 s") from None
        log = (p.stderr or "") + (p.stdout or "")
        if p.returncode != 0:
            raise CompileError(f"nvcc failed compiling {name} for {arch}",
                               parse_nvcc_diagnostics(log, {base: source, name: source}), log, cmd)
        return Path(out).read_bytes(), log


_DIAG = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|remark)"
                   r"(?: #\w+-\w)?: (?P<msg>.*)$")


def parse_nvcc_diagnostics(log: str, sources: Dict[str, str]) -> List[Diagnostic]:
    """``file(line): error: msg`` lines of nvcc/NVRTC output, with the quoted source line."""
    out = []
    for line in log.splitlines():
        m = _DIAG.match(line.strip())
        if not m:
            continue
        f, ln = m.group("file"), int(m.group("line"))
        src = sources.get(f) or sources.get(os.path.basename(f))
        text = None
        if src is not None:
            lines = src.splitlines()
            if 1 <= ln <= len(lines):
                text = lines[ln - 1]
        out.append(Diagnostic(f, ln, 1, m.group("sev"), m.group("msg").strip(), text))
    return out


# ---------------------------------------------------------------------- entry point

def compile_cuda(source: str, arch: str = "sm_90", options: Iterable[str] = (), *,
                 name: str = "kernel.cu", backend: str = "auto", cache: Optional[Cache] = None,
                 use_cache: bool = True) -> CudaModule:
    """Compile ``source`` to a cubin for ``arch`` (``"sm_80"``, ``"sm_90"``, ``"sm_90a"``).

    ``backend``: ``"nvrtc"``, ``"nvcc"`` or ``"auto"`` (NVRTC if cuda-python is importable,
    else nvcc).  ``options`` are extra compiler flags (``-DNAME=1``, ``-lineinfo``...).
    """
    arch = _norm_arch(arch)
    options = DEFAULT_OPTIONS + tuple(o for o in options if o not in DEFAULT_OPTIONS)
    if backend not in ("auto", "nvrtc", "nvcc"):
        raise ToolchainError(f"backend must be 'auto', 'nvrtc' or 'nvcc', got {backend!r}")
    use_nvrtc = backend == "nvrtc" or (backend == "auto" and nvrtc_available())
    nvcc = None
    if use_nvrtc:
        if not nvrtc_available():
            raise ToolchainError(f"NVRTC is not available (cuda-python missing or libnvrtc not "
                                 f"found); {_INSTALL}")
        version = _nvrtc_version(_nvrtc())
    else:
        nvcc = nvcc_path()
        if nvcc is None:
            raise ToolchainError(f"no CUDA compiler: neither NVRTC nor nvcc found; {_INSTALL}")
        version = _nvcc_version(nvcc)
    back = "nvrtc" if use_nvrtc else "nvcc"
    key = content_key("cuda-cubin-v1", source, arch, "\0".join(options), back, version)
    info: Dict[str, object] = {}

    def build() -> bytes:
        t0 = time.perf_counter()
        if use_nvrtc:
            cubin, log = _nvrtc_compile(source, name, arch, options)
        else:
            cubin, log = _nvcc_compile(nvcc, source, name, arch, options)
        info["seconds"] = time.perf_counter() - t0
        info["log"] = log
        return cubin

    if use_cache:
        entry = (cache or default_cache()).get_or_build(
            "cubin", key, "cubin", build, {"arch": arch, "options": list(options),
                                           "compiler": version, "name": name,
                                           "log": None})
        cubin, status = entry.path.read_bytes(), entry.status
    else:
        cubin, status = build(), "uncached"
    return CudaModule(cubin=cubin, arch=arch, source=source, name=name, options=options,
                      backend=back, compiler=version, key=key, cache_status=status,
                      compile_seconds=float(info.get("seconds", 0.0)),
                      log=str(info.get("log", "")), kernels=kernel_names(source))
