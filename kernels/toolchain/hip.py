"""Finding a HIP device compiler and compiling kernel sources to AMDGPU code objects.

Search order for the device compiler (the first that exists wins):

1. ``$LAYOUTALG_HIP_CLANG`` (an explicit path; must be a clang that targets amdgcn);
2. ROCm: ``$ROCM_PATH`` then ``/opt/rocm``: ``llvm/bin/amdclang++``, ``llvm/bin/clang++``,
   ``bin/amdclang++``, ``bin/hipcc``;
3. on ``PATH``: ``amdclang++``, ``hipcc``, then Debian/Ubuntu's ``clang++-19`` (and newer
   ``clang++-2x``), then a plain ``clang++`` of version >= 17.

Every compiler gets the same self-contained command (no HIP headers, no device libraries; the
kernel includes ``lagen_hip.h`` from ``kernels/include``)::

    clang++ -x hip -std=c++17 --offload-arch=gfx942 -nogpulib -nogpuinc --offload-device-only
            --no-gpu-bundle-output -cuid=layoutalg -O3 -I kernels/include -c kernel.hip -o kernel.co

With ``--no-gpu-bundle-output`` clang links the device object with lld, so the output is a
loadable AMDGPU code object (ELF type DYN), the input of ``hipModuleLoadData``.  Debian's clang
therefore needs ``lld-19`` beside it; the report needs ``llvm-objdump`` (``llvm-19``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .cache import Cache, content_key, default_cache
from ..errors import CompileError, Diagnostic, KernelError, ToolchainError

__all__ = ["Toolchain", "HostCompiler", "find_toolchain", "find_host_compiler", "compile_hip",
           "parse_diagnostics", "SUPPORTED_ARCHS", "INCLUDE_DIR", "DEVICE_FLAGS"]

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
SUPPORTED_ARCHS = ("gfx90a", "gfx942", "gfx950")
# -cuid fixes the per-file "__hip_cuid_*" symbol, which clang otherwise derives from the
# (temporary) path: with it the same source and flags give the same bytes
DEVICE_FLAGS = ("-x", "hip", "-std=c++17", "-nogpulib", "-nogpuinc", "--offload-device-only",
                "--no-gpu-bundle-output", "-cuid=layoutalg", "-fno-color-diagnostics",
                "-fno-caret-diagnostics")
DEFAULT_OPT = "-O3"

_INSTALL_HINT = ("install a HIP-capable clang: on Debian/Ubuntu `apt-get install clang-19 lld-19 "
                 "llvm-19` (scripts/dev.sh setup does it), or ROCm (hipcc/amdclang++ under "
                 "/opt/rocm, or set ROCM_PATH), or point LAYOUTALG_HIP_CLANG at a clang++")


@dataclass(frozen=True)
class Toolchain:
    """A device compiler and its LLVM tools."""

    clang: str               # the compiler driver (clang++, amdclang++ or hipcc)
    kind: str                # "rocm" or "clang"
    version: str             # first line of ``--version``
    major: int               # LLVM major version (0 when unknown, e.g. hipcc)
    bindir: str              # clang's InstalledDir (where lld / llvm-objdump are looked for)

    def tool(self, name: str, package: str = "llvm-19") -> str:
        """Path of an LLVM tool (``llvm-objdump``, ``llvm-readelf``) matching this compiler."""
        candidates = [os.path.join(self.bindir, name)]
        if self.major:
            candidates.append(shutil.which(f"{name}-{self.major}") or "")
        candidates.append(shutil.which(name) or "")
        for c in candidates:
            if c and os.access(c, os.X_OK):
                return c
        raise ToolchainError(f"{name} not found (next to {self.clang} or on PATH); "
                             f"install {package} (Debian) or ROCm's llvm")

    @property
    def description(self) -> str:
        return f"{self.version} [{self.clang}]"

    def check_arch(self, arch: str) -> None:
        if arch not in SUPPORTED_ARCHS:
            raise KernelError(f"unsupported arch {arch!r}; the backend targets "
                              f"{', '.join(SUPPORTED_ARCHS)}")
        if arch == "gfx950" and self.kind == "clang" and 0 < self.major < 20:
            raise ToolchainError(f"{self.version} cannot target gfx950 (LLVM added gfx950 in "
                                 f"version 20); install clang-20 or newer, or ROCm >= 6.4 "
                                 f"(amdclang++), or compile for gfx942")


def _version(path: str) -> tuple:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.splitlines()[0] if out else ""
    m = re.search(r"clang version (\d+)", out)
    inst = re.search(r"^InstalledDir:\s*(.+)$", out, re.M)
    bindir = inst.group(1).strip() if inst else os.path.dirname(os.path.realpath(path))
    return first, (int(m.group(1)) if m else 0), bindir


def _candidates() -> List[tuple]:
    out: List[tuple] = []
    env = os.environ.get("LAYOUTALG_HIP_CLANG")
    if env:
        out.append((env, "rocm" if "rocm" in env else "clang"))
    roots = [os.environ.get("ROCM_PATH"), "/opt/rocm"]
    for root in filter(None, roots):
        for rel in ("llvm/bin/amdclang++", "llvm/bin/clang++", "bin/amdclang++", "bin/hipcc"):
            out.append((os.path.join(root, rel), "rocm"))
    for name in ("amdclang++", "hipcc"):
        out.append((shutil.which(name) or "", "rocm"))
    for v in ("19", "20", "21", "22", "18", "17"):
        out.append((shutil.which(f"clang++-{v}") or "", "clang"))
    out.append((shutil.which("clang++") or "", "clang"))
    return [(p, k) for p, k in out if p]


@functools.lru_cache(maxsize=None)
def _find(candidates: tuple) -> Toolchain:
    seen = []
    for path, kind in candidates:
        if not os.access(path, os.X_OK):
            continue
        v = _version(path)
        if v is None:
            continue
        first, major, bindir = v
        if kind == "clang" and major and major < 17:
            seen.append(f"{path} ({first}: too old, gfx942 needs clang >= 17)")
            continue
        tc = Toolchain(path, kind, first, major, bindir)
        if kind == "clang" and not any(os.access(os.path.join(bindir, n), os.X_OK)
                                       for n in ("ld.lld", "lld")):
            if not shutil.which(f"ld.lld-{major}") and not shutil.which("ld.lld"):
                seen.append(f"{path} (no ld.lld: install lld-{major or 19})")
                continue
        return tc
    extra = f" (rejected: {'; '.join(seen)})" if seen else ""
    raise ToolchainError(f"no HIP device compiler found{extra}; {_INSTALL_HINT}")


def find_toolchain() -> Toolchain:
    """The device compiler to use (see the module docstring for the search order).

    Raises :class:`ToolchainError` saying what to install when none is usable.
    """
    return _find(tuple(_candidates()))


@dataclass(frozen=True)
class HostCompiler:
    """The host C++ compiler the emulator builds kernels with."""

    path: str
    version: str
    is_clang: bool


@functools.lru_cache(maxsize=None)
def _find_host(candidates: tuple) -> HostCompiler:
    for path in candidates:
        if path and os.access(path, os.X_OK):
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=60).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            first = out.splitlines()[0] if out else path
            return HostCompiler(path, first, "clang" in out)
    raise ToolchainError("no host C++ compiler for the CPU emulator; install clang-19 "
                         "(`apt-get install clang-19`), or g++ >= 12, or set LAYOUTALG_HOST_CXX")


def find_host_compiler() -> HostCompiler:
    """Host compiler for the emulator: ``$LAYOUTALG_HOST_CXX``, else clang++-19 (or newer), else
    ``clang++``, else ``g++``.  Clang is preferred: the kernel's vector types are clang
    ``ext_vector_type``s, exactly as on the device."""
    names = [os.environ.get("LAYOUTALG_HOST_CXX", "")]
    names += [shutil.which(n) or "" for n in ("clang++-19", "clang++-20", "clang++-21",
                                               "clang++", "g++")]
    return _find_host(tuple(names))


# --------------------------------------------------------------------------- diagnostics

_DIAG = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): "
                   r"(?P<sev>fatal error|error|warning|note): (?P<msg>.*)$")


def parse_diagnostics(log: str, sources: Optional[Mapping[str, str]] = None) -> List[Diagnostic]:
    """The ``file:line:col: severity: message`` lines of a clang/gcc log, each with the quoted
    source line: from ``sources`` (file name -> text; matched on the base name too) or read from
    disk when the file exists."""
    sources = dict(sources or {})
    by_base = {os.path.basename(k): v for k, v in sources.items()}
    cache: Dict[str, Optional[List[str]]] = {}
    out = []
    for raw in log.splitlines():
        m = _DIAG.match(raw.strip())
        if not m:
            continue
        f = m.group("file")
        if f not in cache:
            text = sources.get(f, by_base.get(os.path.basename(f)))
            if text is None and os.path.isfile(f):
                try:
                    text = Path(f).read_text(errors="replace")
                except OSError:
                    text = None
            cache[f] = text.splitlines() if text is not None else None
        lines, ln = cache[f], int(m.group("line"))
        src = lines[ln - 1] if lines is not None and 0 < ln <= len(lines) else None
        out.append(Diagnostic(f, ln, int(m.group("col")), m.group("sev"), m.group("msg"), src))
    return out


def run_compiler(cmd: Sequence[str], what: str, sources: Mapping[str, str], cwd: str) -> None:
    """Run ``cmd``; a non-zero exit becomes :class:`CompileError` with quoted source lines."""
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, timeout=600)
    except FileNotFoundError as e:
        raise ToolchainError(f"{cmd[0]} not found: {e}; {_INSTALL_HINT}") from None
    except subprocess.TimeoutExpired:
        raise CompileError(f"{what}: the compiler did not finish in 600 s", log="", command=cmd)
    if p.returncode != 0:
        log = (p.stderr or "") + (p.stdout or "")
        if re.search(r"invalid target ID|unknown target CPU|unsupported .*offload-arch", log):
            raise ToolchainError(f"{what}: {cmd[0]} does not support this arch:\n{log.strip()}")
        if re.search(r"unable to execute command: Executable \"(ld\.)?lld\"", log):
            raise ToolchainError(f"{what}: the linker ld.lld is missing; install lld-19")
        raise CompileError(f"{what} failed", parse_diagnostics(log, sources), log, cmd)


# --------------------------------------------------------------------------- compile

def compile_hip(source: str, arch: str = "gfx942", options: Iterable[str] = (), *,
                name: str = "kernel.hip", cache: Optional[Cache] = None, use_cache: bool = True,
                toolchain: Optional[Toolchain] = None):
    """Compile HIP ``source`` for ``arch`` into a :class:`kernels.codeobject.CodeObject`.

    ``options`` are extra compiler flags (``-DNAME=1``, ``-O2``; default optimisation ``-O3``).
    ``name`` is the file name diagnostics use.  The product is cached under a key of
    (source, arch, flags, compiler version and path, lagen_hip.h); a damaged cache entry is
    rebuilt.  Errors: :class:`CompileError` (with the offending source lines quoted),
    :class:`ToolchainError` (no compiler, or it cannot target ``arch``).
    """
    from .codeobject import CodeObject

    tc = toolchain or find_toolchain()
    tc.check_arch(arch)
    options = tuple(options)
    opt = () if any(o.startswith("-O") for o in options) else (DEFAULT_OPT,)
    flags = DEVICE_FLAGS + (f"--offload-arch={arch}",) + opt + options
    header = (INCLUDE_DIR / "lagen_hip.h").read_bytes()
    key = content_key("hip-codeobject-v1", source, arch, "\0".join(flags), tc.description, header)
    timing = {}

    def build() -> bytes:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="lagen-hip-") as d:
            base = os.path.basename(name)
            Path(d, base).write_text(source)
            out = os.path.join(d, "kernel.co")
            cmd = [tc.clang, *flags, "-I", str(INCLUDE_DIR), "-c", base, "-o", out]
            run_compiler(cmd, f"compiling {name} for {arch} with {tc.version}",
                         {base: source, name: source}, d)
            data = Path(out).read_bytes()
        timing["compile_s"] = time.perf_counter() - t0
        return data

    if use_cache:
        entry = (cache or default_cache()).get_or_build(
            "codeobj", key, "co", build, {"arch": arch, "flags": list(flags),
                                          "compiler": tc.description, "name": name})
        binary, status, path = entry.path.read_bytes(), entry.status, entry.path
    else:
        binary, status, path = build(), "uncached", None
    return CodeObject(binary=binary, arch=arch, source=source, flags=flags, toolchain=tc,
                      key=key, path=path, cache_status=status,
                      compile_seconds=timing.get("compile_s", 0.0))


def compile_built(kernel: Any, arch: str, **kw: Any):
    """Compile a built kernel's ``source`` (``kernel.name`` names the file), record the compile
    time and cache status in ``kernel.timings`` and the result in ``kernel.code_object``."""
    import time
    t0 = time.perf_counter()
    co = compile_hip(kernel.source, arch, name=f"{kernel.name}.hip", **kw)
    kernel.timings["compile_s"] = time.perf_counter() - t0
    kernel.timings["compile_cache"] = co.cache_status
    kernel.code_object = co
    return co
