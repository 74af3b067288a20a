"""One-instruction HIP probe kernels generated from specs, and their disassembly check.

``probe_source(specs)`` writes one ``extern "C"`` kernel per spec that calls the spec's clang
builtin with its argument vector types (immediates 0, run-time operands loaded from pointer
arguments) and stores the result.  ``check_probes(specs, arch)`` compiles them with clang-19
for ``arch``, disassembles with llvm-objdump-19 and returns, per kernel, the matrix
instructions found: each should be exactly the spec's mnemonic.  This is how the test suite
proves the builtin name, its argument types and the mnemonic belong together.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import NotModelledError
from .spec import MatrixInstruction, Param

__all__ = ["probe_source", "compile_probes", "check_probes", "find_tool", "MATRIX_MNEMONIC"]

MATRIX_MNEMONIC = re.compile(r"\b(v_s?mfma\w*|v_wmma\w*|v_swmmac\w*)\b")


def find_tool(name: str) -> Optional[str]:
    """Path of ``name`` (e.g. ``clang++-19``) on PATH or in /usr/lib/llvm-19/bin."""
    path = shutil.which(name)
    if path:
        return path
    base = name.rsplit("-", 1)[0]
    cand = f"/usr/lib/llvm-19/bin/{base}"
    return cand if os.access(cand, os.X_OK) else None


def _typename(p: Param) -> str:
    base = {"__fp16": "h", "__bf16": "y", "short": "s", "int": "i", "long": "l",
            "float": "f", "double": "d", "bool": "b"}[p.ctype]
    return f"v{p.width}{base}" if p.width > 1 else p.ctype


def probe_source(specs: Sequence[MatrixInstruction]) -> Tuple[str, Dict[str, str]]:
    """HIP source with kernel ``probe_<i>`` per spec; returns ``(source, {kernel: name})``."""
    typedefs: Dict[str, str] = {}
    kernels: List[str] = []
    names: Dict[str, str] = {}
    for i, s in enumerate(specs):
        if s.builtin is None:
            raise NotModelledError(f"{s.name} has no clang builtin to probe")
        args, call = [], []
        for j, p in enumerate(s.builtin_params):
            t = _typename(p)
            if p.width > 1:
                typedefs[t] = f"typedef {p.ctype} {t} __attribute__((ext_vector_type({p.width})));"
            if p.immediate:
                call.append("false" if p.ctype == "bool" else "0")
            else:
                args.append(f"const {t}* p{j}")
                call.append(f"p{j}[0]")
        r = s.builtin_return
        rt = _typename(r)
        if r.width > 1:
            typedefs[rt] = f"typedef {r.ctype} {rt} __attribute__((ext_vector_type({r.width})));"
        kname = f"probe_{i}"
        names[kname] = s.name
        kernels.append(f'// {s.name}\nextern "C" __attribute__((global)) void {kname}('
                       + ", ".join(args + [f"{rt}* out"]) + ") {\n"
                       f"  out[0] = {s.builtin}({', '.join(call)});\n}}\n")
    src = "\n".join(sorted(typedefs.values())) + "\n\n" + "\n".join(kernels)
    return src, names


def compile_probes(specs: Sequence[MatrixInstruction], arch: str, workdir: str,
                   extra_flags: Sequence[str] = ()) -> Tuple[subprocess.Popen, str, Dict[str, str]]:
    """Start compiling the probes for ``arch`` in ``workdir``; returns (process, object, names)."""
    clang = find_tool("clang++-19")
    if clang is None:
        raise FileNotFoundError("clang++-19 not found (install clang-19, see README)")
    src, names = probe_source(specs)
    tag = f"{arch}{''.join(extra_flags).replace('-', '_')}"
    hip = os.path.join(workdir, f"probe_{tag}.hip")
    obj = os.path.join(workdir, f"probe_{tag}.o")
    with open(hip, "w") as f:
        f.write(src)
    cmd = [clang, "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc",
           "--offload-device-only", "--no-gpu-bundle-output", "-O3", *extra_flags, "-c", hip,
           "-o", obj]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, obj, names


def disassemble(obj: str, arch: str) -> Dict[str, List[str]]:
    """Matrix mnemonics found in each ``probe_<i>`` function of ``obj``."""
    objdump = find_tool("llvm-objdump-19")
    if objdump is None:
        raise FileNotFoundError("llvm-objdump-19 not found (install llvm-19, see README)")
    out = subprocess.run([objdump, "-d", f"--mcpu={arch}", obj], capture_output=True,
                         text=True, check=True).stdout
    found: Dict[str, List[str]] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-fA-F]+ <(probe_\d+)>:", line)
        if m:
            current = m.group(1)
            found[current] = []
            continue
        if current:
            found[current] += MATRIX_MNEMONIC.findall(line.split("//")[0])
    return found


def check_probes(specs: Sequence[MatrixInstruction], arch: str,
                 extra_flags: Sequence[str] = ()) -> Dict[str, List[str]]:
    """Compile + disassemble; ``{instruction name: [matrix mnemonics in its probe]}``."""
    with tempfile.TemporaryDirectory() as d:
        proc, obj, names = compile_probes(specs, arch, d, extra_flags)
        _, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"clang failed for {arch}:\n{err}")
        found = disassemble(obj, arch)
    return {names[k]: v for k, v in found.items()}
