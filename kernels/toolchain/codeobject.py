"""AMDGPU code objects and their resource report.

:class:`CodeObject` is what :func:`kernels.toolchain.compile_hip` returns.  ``report(kernel)``
reads two things:

* the ``NT_AMDGPU_METADATA`` note (msgpack, decoded here: no PyYAML, no llvm-readelf needed):
  register counts, LDS and scratch sizes, spills, kernel arguments;
* the disassembly (``llvm-objdump -d --mcpu=<arch>``): instruction histogram, MFMA count, and the
  MFMAs of the hot loop (the innermost loop, found from its backward branch, with most MFMAs).

Occupancy (waves per SIMD) comes from the arch model, see :func:`occupancy`.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import KernelError

__all__ = ["CodeObject", "KernelReport", "occupancy", "read_metadata", "disassemble",
           "find_loops"]


# --------------------------------------------------------------------------- ELF + msgpack

NT_AMDGPU_METADATA = 32


def _elf_notes(data: bytes):
    """``(name, type, desc)`` of every note in the SHT_NOTE sections of a 64-bit LE ELF."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise KernelError("not a 64-bit little-endian ELF code object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        base = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, base + 4)
        if sh_type != 7:  # SHT_NOTE
            continue
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        p, end = off, off + size
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            p += 12
            name = data[p:p + namesz].rstrip(b"\0").decode(errors="replace")
            p += (namesz + 3) & ~3
            desc = data[p:p + descsz]
            p += (descsz + 3) & ~3
            yield name, ntype, desc


def _msgpack(buf: bytes, i: int = 0) -> Tuple[Any, int]:
    """Decode one msgpack value at ``buf[i]``; returns ``(value, next index)``."""
    b = buf[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F:
        return _mp_map(buf, i, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _mp_array(buf, i, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return buf[i:i + n].decode(), i + n
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], i
    fixed = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
             0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if b in fixed:
        v, = struct.unpack_from(fixed[b], buf, i)
        return v, i + struct.calcsize(fixed[b])
    lens = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if b in lens:
        n, = struct.unpack_from(lens[b], buf, i)
        i += struct.calcsize(lens[b])
        raw = buf[i:i + n]
        return (raw.decode() if b >= 0xD9 else bytes(raw)), i + n
    counts = {0xDC: (">H", _mp_array), 0xDD: (">I", _mp_array), 0xDE: (">H", _mp_map),
              0xDF: (">I", _mp_map)}
    if b in counts:
        fmt, fn = counts[b]
        n, = struct.unpack_from(fmt, buf, i)
        return fn(buf, i + struct.calcsize(fmt), n)
    raise KernelError(f"unsupported msgpack byte 0x{b:02x} in AMDGPU metadata")


def _mp_array(buf, i, n):
    out = []
    for _ in range(n):
        v, i = _msgpack(buf, i)
        out.append(v)
    return out, i


def _mp_map(buf, i, n):
    out = {}
    for _ in range(n):
        k, i = _msgpack(buf, i)
        v, i = _msgpack(buf, i)
        out[k] = v
    return out, i


def read_metadata(binary: bytes) -> Dict[str, Any]:
    """The decoded ``amdhsa.*`` metadata map of a code object."""
    for name, ntype, desc in _elf_notes(binary):
        if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
            return _msgpack(desc)[0]
    raise KernelError("code object has no AMDGPU metadata note")


# --------------------------------------------------------------------------- disassembly

_INSN = re.compile(r"^\s+([a-z_][a-z0-9_]*)(.*?)\s*//\s*([0-9A-Fa-f]+):.*?(?:<([^>+]+)\+0x([0-9a-f]+)>)?\s*$")
_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:\s*$")


@dataclass(frozen=True)
class Insn:
    addr: int
    mnemonic: str
    operands: str
    target: Optional[int] = None     # absolute branch target, for branches


def disassemble(binary: bytes, arch: str, objdump: str) -> Dict[str, List[Insn]]:
    """Instructions of every function symbol, via ``llvm-objdump -d --mcpu=arch``."""
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(binary)
        f.flush()
        p = subprocess.run([objdump, "-d", f"--mcpu={arch}", f.name], capture_output=True,
                           text=True, timeout=300)
    if p.returncode != 0:
        raise KernelError(f"llvm-objdump failed: {p.stderr.strip()}")
    funcs: Dict[str, List[Insn]] = {}
    starts: Dict[str, int] = {}
    cur: Optional[List[Insn]] = None
    for line in p.stdout.splitlines():
        m = _FUNC.match(line)
        if m:
            starts[m.group(2)] = int(m.group(1), 16)
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            target = None
            if m.group(4) is not None and m.group(4) in starts:
                target = starts[m.group(4)] + int(m.group(5), 16)
            cur.append(Insn(int(m.group(3), 16), m.group(1), m.group(2).strip(), target))
    for name, insns in funcs.items():  # drop the s_nop / s_code_end padding after the last s_endpgm
        ends = [i for i, x in enumerate(insns) if x.mnemonic == "s_endpgm"]
        if ends:
            del insns[ends[-1] + 1:]
    return funcs


def _is_branch(mn: str) -> bool:
    return mn.startswith("s_cbranch_") or mn == "s_branch"


def find_loops(insns: List[Insn]) -> List[Tuple[int, int]]:
    """``(start, end)`` address ranges of loops: branches back to a header ``start``.

    Several back edges to one header are one loop (a loop body with an early ``continue`` or a
    predicated edge path has two), ending at the last of them; counting each back edge as its
    own loop would cut the body short and miss its tail instructions.  A backward branch to an
    ``s_endpgm`` is a jump to the kernel's exit, not a loop: nothing after the target runs
    (Triton 3.9 lays out a GEMM's pipeline drain that way; taken for a second MFMA loop it
    made the performance model weight the drain as a loop).
    """
    exits = {i.addr for i in insns if i.mnemonic == "s_endpgm"}
    ends: Dict[int, int] = {}
    for i in insns:
        if _is_branch(i.mnemonic) and i.target is not None and i.target <= i.addr \
                and i.target not in exits:
            ends[i.target] = max(ends.get(i.target, i.addr), i.addr)
    return sorted(ends.items())


def _innermost(loops: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    return [a for a in loops
            if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in loops)]


def is_mfma(mnemonic: str) -> bool:
    return mnemonic.startswith(("v_mfma_", "v_smfmac_"))


# --------------------------------------------------------------------------- occupancy

def occupancy(arch: str, vgpr_unified: int, sgpr: int = 0, lds_bytes: int = 0,
              block_threads: Optional[int] = None) -> Dict[str, Any]:
    """Waves per SIMD on ``arch`` and the limit each resource imposes; delegates to
    :func:`mfma_specs.arch.occupancy` (the arch model owns the numbers).

    The gfx942 rule (LLVM ``AMDGPUBaseInfo``: ``getTotalNumVGPRs`` 512, ``getVGPRAllocGranule``
    8, ``getMaxWavesPerEU`` 8): ArchVGPRs and AGPRs share 512 registers per SIMD lane; a wave
    allocates ``align(vgpr_unified, 8)`` of them, where ``vgpr_unified`` is the metadata
    ``.vgpr_count`` (already ``align(arch_vgpr, 4) + agpr`` on gfx90a+), so
    ``waves = min(8, 512 // alloc)``; SGPRs (> 100 -> 7 waves) and, given ``block_threads``,
    LDS (64 KiB per CU shared by the resident work-groups, 512-byte granules) and barriers
    can lower it; a work-group that cannot be resident at all gives 0 with a ``reason``.
    """
    from mfma_specs.arch import occupancy as arch_occupancy
    return arch_occupancy(arch, vgpr_unified=vgpr_unified, sgpr=sgpr, lds_bytes=lds_bytes,
                          block_threads=block_threads or 0)


# --------------------------------------------------------------------------- report

@dataclass
class KernelReport:
    kernel: str
    arch: str
    vgpr: int                 # arch VGPRs (aligned to 4 when AGPRs are used)
    agpr: int
    vgpr_unified: int         # metadata .vgpr_count: what occupancy is computed from
    sgpr: int
    lds_bytes: int            # static LDS (group segment) + the dynamic LDS given to report()
    scratch_bytes: int        # private segment per work-item
    vgpr_spills: int
    sgpr_spills: int
    waves_per_simd: int
    occupancy: Dict[str, Any]
    mfma_count: int
    hot_loop_mfma: int
    hot_loop: Optional[Dict[str, Any]]
    histogram: Dict[str, int]
    instructions: int
    max_flat_workgroup_size: int
    kernarg_bytes: int
    uses_dynamic_stack: bool
    args: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def spills(self) -> int:
        return self.vgpr_spills + self.sgpr_spills

    # the resource keys every report.json starts with (the CLI contract), in this order
    REPORT_KEYS = ("vgpr", "agpr", "sgpr", "lds_bytes", "scratch_bytes", "spills",
                   "waves_per_simd", "mfma_count", "hot_loop_mfma")

    def report_fields(self) -> Dict[str, Any]:
        """The :data:`REPORT_KEYS` of this report, for a kernel builder's ``report.json``."""
        return {k: getattr(self, k) for k in self.REPORT_KEYS}

    def to_dict(self) -> Dict[str, Any]:
        d = {k: getattr(self, k) for k in (
            "kernel", "arch", "vgpr", "agpr", "vgpr_unified", "sgpr", "lds_bytes",
            "scratch_bytes", "spills", "vgpr_spills", "sgpr_spills", "waves_per_simd",
            "occupancy", "mfma_count", "hot_loop_mfma", "hot_loop", "instructions",
            "max_flat_workgroup_size", "kernarg_bytes", "uses_dynamic_stack", "histogram")}
        return d

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def summary(self) -> str:
        hot = (f"{self.hot_loop_mfma} MFMA in hot loop ({self.hot_loop['instructions']} insns)"
               if self.hot_loop else "no loop")
        return (f"{self.kernel} [{self.arch}]: VGPR {self.vgpr} AGPR {self.agpr} SGPR {self.sgpr}"
                f" | LDS {self.lds_bytes} B | scratch {self.scratch_bytes} B | spills "
                f"{self.spills} | waves/SIMD {self.waves_per_simd} | MFMA {self.mfma_count}, {hot}")


@dataclass
class CodeObject:
    """A compiled AMDGPU code object (ELF bytes) and how it was made."""

    binary: bytes
    arch: str
    source: str
    flags: Tuple[str, ...]
    toolchain: Any                 # kernels.toolchain.Toolchain
    key: str
    path: Any = None               # cached file (pathlib.Path) or None
    cache_status: str = "uncached"  # "hit", "miss", "corrupt" (rebuilt) or "uncached"
    compile_seconds: float = 0.0
    _meta: Optional[Dict[str, Any]] = field(default=None, repr=False)
    _disasm: Optional[Dict[str, List[Insn]]] = field(default=None, repr=False)

    @property
    def metadata(self) -> Dict[str, Any]:
        if self._meta is None:
            self._meta = read_metadata(self.binary)
        return self._meta

    @property
    def kernels(self) -> List[str]:
        return [k[".name"] for k in self.metadata.get("amdhsa.kernels", [])]

    def kernel_metadata(self, kernel: Optional[str] = None) -> Dict[str, Any]:
        ks = self.metadata.get("amdhsa.kernels", [])
        if kernel is None:
            if len(ks) != 1:
                raise KernelError(f"code object has kernels {self.kernels}; name one")
            return ks[0]
        for k in ks:
            if k[".name"] == kernel:
                return k
        raise KernelError(f"no kernel {kernel!r} in code object (it has {self.kernels}); "
                          f"was it declared extern \"C\" __global__?")

    def disassembly(self) -> Dict[str, List[Insn]]:
        if self._disasm is None:
            self._disasm = disassemble(self.binary, self.arch, self.toolchain.tool("llvm-objdump"))
        return self._disasm

    def report(self, kernel: Optional[str] = None, *, block_threads: Optional[int] = None,
               dynamic_lds_bytes: int = 0) -> KernelReport:
        """Resource report of ``kernel`` (the only kernel when None).  ``block_threads`` adds the
        LDS / work-group limits to the occupancy; ``dynamic_lds_bytes`` adds launch-time LDS."""
        md = self.kernel_metadata(kernel)
        name = md[".name"]
        agpr = int(md.get(".agpr_count", 0))
        unified = int(md.get(".vgpr_count", 0))
        vgpr = unified - agpr if agpr else unified
        sgpr = int(md.get(".sgpr_count", 0))
        lds = int(md.get(".group_segment_fixed_size", 0)) + int(dynamic_lds_bytes)
        occ = occupancy(self.arch, unified, sgpr, lds, block_threads)
        insns = self.disassembly().get(name, [])
        hist = Counter(i.mnemonic for i in insns)
        hot = None
        inner = _innermost(find_loops(insns))
        if inner:
            def body(rng):
                return [i for i in insns if rng[0] <= i.addr <= rng[1]]
            best = max(inner, key=lambda r: (sum(is_mfma(i.mnemonic) for i in body(r)), -r[0]))
            b = body(best)
            hot = {"start": best[0], "end": best[1], "instructions": len(b),
                   "mfma": sum(is_mfma(i.mnemonic) for i in b),
                   "histogram": dict(Counter(i.mnemonic for i in b).most_common())}
        return KernelReport(
            kernel=name, arch=self.arch, vgpr=vgpr, agpr=agpr, vgpr_unified=unified, sgpr=sgpr,
            lds_bytes=lds, scratch_bytes=int(md.get(".private_segment_fixed_size", 0)),
            vgpr_spills=int(md.get(".vgpr_spill_count", 0)),
            sgpr_spills=int(md.get(".sgpr_spill_count", 0)),
            waves_per_simd=occ["waves_per_simd"], occupancy=occ,
            mfma_count=sum(v for k, v in hist.items() if is_mfma(k)),
            hot_loop_mfma=hot["mfma"] if hot else 0, hot_loop=hot,
            histogram=dict(hist.most_common()), instructions=len(insns),
            max_flat_workgroup_size=int(md.get(".max_flat_workgroup_size", 1024)),
            kernarg_bytes=int(md.get(".kernarg_segment_size", 0)),
            uses_dynamic_stack=bool(md.get(".uses_dynamic_stack", False)),
            args=list(md.get(".args", [])))
