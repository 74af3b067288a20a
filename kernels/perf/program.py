"""Read a gfx942 code object for the performance model: its kernel, hot loop and operands.

Works on any AMDGPU code object (ours, Triton's, FlyDSL's, a hand-written assembler kernel):
metadata and disassembly come from the public functions of :mod:`kernels.codeobject`; the hot
loop is the innermost loop (a backward branch to a header) with the most MFMAs, then the most
instructions, and ``Program.mfma_loops`` holds every innermost loop with MFMAs (the whole-kernel
estimate weights them by trip count, :mod:`.trips`).  Forward branches inside the loop guard blocks whose frequency the model cannot
know: by default every instruction of the loop body runs on every wave (``Program.path("all")``);
``path("skip")`` leaves the guarded blocks out.  Waves that run different roles in different
loops (wave-specialised kernels) are split over the innermost loops with MFMAs (consecutive waves
together) when the model sees a branch on the wave id (``readfirstlane(threadIdx.x >> 6)``
compared with a constant) or the caller asks for it; otherwise every wave runs the hot loop.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

# the one import of the code-object reader (issue 13 moves it to kernels.toolchain.codeobject)
from ..toolchain.codeobject import disassemble, find_loops, occupancy, read_metadata
from ..errors import KernelError
from .costs import GFX942, InsnCost, MachineModel, classify

__all__ = ["PerfError", "Op", "Program", "load_program", "code_object_arch", "occupancy"]

SUPPORTED = ("gfx942",)
# EF_AMDGPU_MACH values of the ELF header's e_flags (LLVM AMDGPUUsage.rst)
_MACH = {0x2c: "gfx908", 0x3f: "gfx90a", 0x40: "gfx940", 0x4b: "gfx941", 0x4c: "gfx942",
         0x4f: "gfx950", 0x41: "gfx1100", 0x48: "gfx1201"}


class PerfError(KernelError):
    """Bad input to the performance model (not a code object, another arch, no loop, ...)."""

    exit_code = 2


@dataclass(frozen=True)
class Op:
    """One instruction of the hot loop with what the model needs to know about it."""

    addr: int
    mnemonic: str
    operands: str
    cost: InsnCost
    reads: Tuple[int, ...] = ()      # vector registers read (v0.. = 0.., a0.. = 512..)
    writes: Tuple[int, ...] = ()     # vector registers written
    arg: int = 0                     # s_nop / s_setprio immediate
    vmcnt: Optional[int] = None      # s_waitcnt limits (None: not waited on)
    lgkmcnt: Optional[int] = None


@dataclass
class Program:
    """A kernel of a code object as the model sees it."""

    kernel: str
    arch: str
    metadata: Dict[str, Any]
    body: List[Op]                   # the hot loop, header first, back edge last
    loop: Tuple[int, int]            # (start, end) addresses
    outside_instructions: int        # instructions of the kernel not in the hot loop
    forward_branches: int            # branches inside the loop body that the model does not take
    loops: int                       # how many innermost loops the kernel has
    notes: List[str] = field(default_factory=list)
    guarded: List[Tuple[int, int]] = field(default_factory=list)   # [start, end) skipped blocks
    mfma_loops: List[List[Op]] = field(default_factory=list)       # innermost loops with MFMAs
    role_split: Optional[str] = None      # the branch on the wave id, when the model saw one

    @property
    def mfma_flops(self) -> int:
        return sum(o.cost.flops for o in self.body)

    def path(self, branches: str = "all", body: Optional[List[Op]] = None) -> List[Op]:
        """The loop body the model runs (the hot loop, or ``body``): ``"all"`` every
        instruction (no branch taken); ``"skip"`` without the blocks that forward branches
        inside the loop jump over."""
        body = self.body if body is None else body
        if branches == "all":
            return body
        if branches == "skip":
            return [o for o in body if not any(a <= o.addr < b for a, b in self.guarded)]
        raise PerfError(f"branches={branches!r}: expected 'all' (every instruction of the loop "
                        "runs) or 'skip' (guarded blocks left out)")

    @property
    def mfma_count(self) -> int:
        return sum(o.cost.cls == "mfma" for o in self.body)


_REG = re.compile(r"\b([va])(?:\[(\d+):(\d+)\]|(\d+)(?![\w]))")
_CNT = re.compile(r"(vmcnt|lgkmcnt)\((\d+)\)")


def _regs(text: str) -> Tuple[int, ...]:
    out: List[int] = []
    for m in _REG.finditer(text):
        base = 0 if m.group(1) == "v" else 512
        lo = int(m.group(2) if m.group(2) is not None else m.group(4))
        hi = int(m.group(3)) if m.group(3) is not None else lo
        out.extend(base + r for r in range(lo, hi + 1))
    return tuple(out)


def _split_operands(operands: str) -> List[str]:
    parts, depth, cur = [], 0, ""
    for ch in operands:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def make_op(arch: str, addr: int, mnemonic: str, operands: str,
            model: MachineModel = GFX942) -> Op:
    """An :class:`Op` from one disassembled instruction."""
    cost = classify(arch, mnemonic, model)
    parts = _split_operands(operands)
    reads: Tuple[int, ...] = ()
    writes: Tuple[int, ...] = ()
    if cost.cls in ("mfma", "valu"):
        writes = _regs(parts[0]) if parts else ()
        reads = _regs(",".join(parts[1:]))
        if cost.cls == "mfma" and len(parts) >= 4 and _regs(parts[3]) == writes:
            reads = _regs(",".join(parts[1:3]))   # srcC == vdst: the pipe chains it
    elif cost.cls in ("lds", "vmem"):
        reads = _regs(",".join(parts if cost.store else parts[1:]))
    arg, vm, lgkm = 0, None, None
    if mnemonic in ("s_nop", "s_setprio") and parts:
        try:
            arg = int(parts[0], 0)
        except ValueError:
            arg = 0
    if mnemonic == "s_waitcnt":
        for name, n in _CNT.findall(operands):
            if name == "vmcnt":
                vm = int(n)
            else:
                lgkm = int(n)
    return Op(addr, mnemonic, operands, cost, reads, writes, arg, vm, lgkm)


def code_object_arch(binary: bytes) -> str:
    """The gfx target of a code object (metadata ``amdhsa.target``, else the ELF e_flags)."""
    if binary[:4] != b"\x7fELF":
        raise PerfError("not a code object: the file does not start with the ELF magic "
                        "(expected an AMDGPU ELF, e.g. a .co/.hsaco from clang or Triton)")
    if len(binary) < 0x40 or binary[4] != 2:
        raise PerfError("not an AMDGPU code object: a truncated or 32-bit ELF")
    machine, = struct.unpack_from("<H", binary, 0x12)
    if machine != 0xE0:
        raise PerfError(f"not an AMDGPU code object: ELF machine {machine:#x} (EM_AMDGPU is "
                        "0xe0); a host object or library?")
    try:
        target = read_metadata(binary).get("amdhsa.target", "")
    except KernelError:
        target = ""
    m = re.search(r"(gfx[0-9a-f]+)", str(target))
    if m:
        return m.group(1)
    flags, = struct.unpack_from("<I", binary, 0x30)
    return _MACH.get(flags & 0xFF, f"unknown (EF_AMDGPU_MACH {flags & 0xFF:#x})")


def _objdump() -> str:
    from ..toolchain import find_toolchain
    return find_toolchain().tool("llvm-objdump")


def load_program(code: Union[bytes, str, Path], kernel: Optional[str] = None, *,
                 model: MachineModel = GFX942, objdump: Optional[str] = None) -> Program:
    """Read ``code`` (bytes or a path), pick ``kernel`` and find its hot loop."""
    if isinstance(code, (str, Path)):
        p = Path(code)
        if not p.is_file():
            raise PerfError(f"no such file: {p}")
        binary = p.read_bytes()
    else:
        binary = bytes(code)
    arch = code_object_arch(binary)
    if arch not in SUPPORTED:
        raise PerfError(f"code object is for {arch}; the performance model covers "
                        f"{', '.join(SUPPORTED)} (MI300X) only: recompile with --mcpu=gfx942 / "
                        "--offload-arch=gfx942")
    try:
        meta = read_metadata(binary)
    except KernelError as e:
        raise PerfError(f"not a usable code object: {e}") from None
    kmeta = _pick_kernel(meta.get("amdhsa.kernels", []), kernel)
    name = kmeta[".name"]
    funcs = disassemble(binary, arch, objdump or _objdump())
    insns = _kernel_insns(funcs, name, [k.get(".name") for k in meta.get("amdhsa.kernels", [])])
    if not insns:
        raise PerfError(f"kernel {name!r} has no instructions in the disassembly")
    loops = find_loops(insns)
    inner = [a for a in loops
             if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in loops)]
    if not inner:
        raise PerfError(f"kernel {name!r} has no loop (no backward branch): the model "
                        "simulates a hot loop; a straight-line kernel is not modelled")
    ops_of = {}
    for rng in inner:
        ops_of[rng] = [make_op(arch, i.addr, i.mnemonic, i.operands, model) for i in insns
                       if rng[0] <= i.addr <= rng[1]]
    best = max(inner, key=lambda r: (sum(o.cost.flops for o in ops_of[r]), len(ops_of[r]),
                                     -r[0]))
    body = ops_of[best]
    fwd = [i for i in insns if best[0] <= i.addr < best[1] and i.target is not None
           and i.mnemonic.startswith(("s_cbranch", "s_branch")) and i.target > i.addr]
    # a forward branch to a point inside its loop guards the block it jumps over (a mask, a
    # tail, a prefetch guard); one to a point after the loop is an exit
    guarded = [(i.addr + 1, i.target) for i in insns for rng in inner
               if rng[0] <= i.addr < rng[1] and i.target is not None and i.addr < i.target <= rng[1]
               and i.mnemonic.startswith(("s_cbranch", "s_branch"))]
    n_guarded = sum(1 for a, _ in guarded if best[0] <= a <= best[1])
    mfma_loops = [ops_of[r] for r in sorted(inner) if any(o.cost.flops for o in ops_of[r])]
    notes = []
    if n_guarded:
        notes.append(f"{n_guarded} forward branch(es) inside the hot loop guard blocks the "
                     "model cannot predict; by default every instruction runs on every wave "
                     "(branches='all'); branches='skip' leaves the guarded blocks out")
    role_split = _wave_id_branch(insns) if len(mfma_loops) > 1 else None
    if role_split:
        notes.append(f"wave-specialised: {role_split}, and the kernel has {len(mfma_loops)} "
                     "innermost loops with MFMAs: by default the waves of a work-group are split "
                     "over them (consecutive waves share a loop)")
    elif len(mfma_loops) > 1:
        notes.append(f"the kernel has {len(mfma_loops)} innermost loops with MFMAs; the loop "
                     "figures are the hot one's, run on every wave; with a problem size the "
                     "whole-kernel estimate weights each loop by its trip count; if the waves "
                     "run them in different roles (wave-specialised), roles=True (--roles on) "
                     "splits the waves between them")
    return Program(kernel=name, arch=arch, metadata=kmeta, body=body, loop=best,
                   outside_instructions=len(insns) - len(body), forward_branches=len(fwd),
                   loops=len(inner), notes=notes, guarded=guarded, mfma_loops=mfma_loops,
                   role_split=role_split)


_WAVE_VGPR = re.compile(r"^(v\d+), (?:6|0x6), v0$")        # v_lshrrev_b32 vX, 6, v0: tid / 64
_SCMP = re.compile(r"^s_cmp_(?:lt|le|gt|ge|eq|lg)_[iu]32$")


def _wave_id_branch(insns: Sequence[Any]) -> Optional[str]:
    """A branch on the wave id (``readfirstlane(threadIdx.x >> 6)`` compared with a constant),
    the mark of a kernel whose waves take different roles; None when there is none."""
    wave_v, wave_s = set(), set()
    for k, i in enumerate(insns):
        ops = i.operands.replace(" ", "").replace(",", ", ")
        if i.mnemonic.startswith("v_lshrrev_b32"):
            m = _WAVE_VGPR.match(ops)
            if m:
                wave_v.add(m.group(1))
        elif i.mnemonic == "v_readfirstlane_b32":
            dst, _, src = ops.partition(", ")
            if src in wave_v:
                wave_s.add(dst)
        elif _SCMP.match(i.mnemonic) and wave_s:
            a, _, b = ops.partition(", ")
            nxt = insns[k + 1] if k + 1 < len(insns) else None
            if a in wave_s and nxt is not None and nxt.mnemonic.startswith("s_cbranch_scc"):
                return f"{i.mnemonic} {a}, {b} at {i.addr:#x} branches on the wave id ({a} = " \
                       "readfirstlane(threadIdx.x >> 6))"
    return None


def _branch_target(insn: Any, labels: Dict[str, int]) -> Optional[int]:
    """The target of a branch whose operand is a label symbol or a raw simm16."""
    op = insn.operands.split()[0] if insn.operands else ""
    if op in labels:
        return labels[op]
    try:
        simm = int(op, 0) & 0xFFFF
    except ValueError:
        return None
    simm = simm - 0x10000 if simm & 0x8000 else simm
    return insn.addr + 4 + 4 * simm


def _kernel_insns(funcs: Dict[str, List[Any]], name: str, kernels: List[str]) -> List[Any]:
    """The instructions of kernel ``name``: its symbol and every label symbol after it up to the
    next kernel (hand-written assembly, e.g. AITER's, labels its blocks as symbols), with branch
    targets resolved through those labels."""
    starts = {f: ins[0].addr for f, ins in funcs.items() if ins}
    if name not in starts:
        return []
    begin = starts[name]
    later = [a for f, a in starts.items() if f in kernels and a > begin]
    end = min(later) if later else float("inf")
    parts = sorted((a, f) for f, a in starts.items() if begin <= a < end)
    insns = [i for _, f in parts for i in funcs[f]]
    out = []
    for i in insns:
        if i.target is None and i.mnemonic.startswith(("s_cbranch_", "s_branch")):
            i = replace(i, target=_branch_target(i, starts))
        out.append(i)
    return out


def _pick_kernel(kernels: Sequence[Dict[str, Any]], kernel: Optional[str]) -> Dict[str, Any]:
    names = [k.get(".name") for k in kernels]
    if not kernels:
        raise PerfError("code object declares no kernels (amdhsa.kernels is empty)")
    if kernel is None:
        if len(kernels) != 1:
            raise PerfError(f"code object has kernels {names}; name one with --kernel")
        return kernels[0]
    for k in kernels:
        if k.get(".name") == kernel:
            return k
    raise PerfError(f"no kernel {kernel!r} in the code object; it has {names}")
