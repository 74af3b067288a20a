"""Print a :class:`kernels.ir.Kernel` as CUDA C++ for NVRTC / nvcc (sm_80 / sm_90).

The statements that carry index math (``Let``, ``Loop``, ``If``, comments) print exactly as in
:mod:`kernels.printer.hip` (this printer subclasses it: one expression printer,
:func:`layoutalg.symbolic.to_c`); what differs is the instructions:

* :class:`~kernels.ir.nvidia.CpAsync` -> ``lg_cp_async{4,8,16}(shared address, global pointer,
  bytes)`` (``bytes`` is 0 where the load's predicate is off: the hardware zero-fills); with
  ``meta["cp_src_chain"]`` the global pointer is a chained ``const T*`` declared on the line
  before (:mod:`kernels.printer.cuda_cp_chain`);
  :class:`~kernels.ir.nvidia.CpAsyncCommit` / :class:`~kernels.ir.nvidia.CpAsyncWait` ->
  ``lg_cp_async_commit()`` / ``lg_cp_async_wait<N>()``;
* :class:`~kernels.ir.nvidia.LdMatrixLoad` -> ``lg_ldmatrix_x4[_trans](r0..r3, address)``;
* :class:`~kernels.ir.core.Mfma` with an ``mma.sync`` spec -> ``lg_mma_f16 / lg_mma_bf16``;
* :class:`~kernels.ir.core.Barrier` -> ``__syncthreads()``;
* a global store of f32 accumulators to f16/bf16 -> ``lg_pack_*x2`` (2 elements) or
  ``lg_f32_to_*`` (1 element);
* :class:`~kernels.ir.nvidia_wgmma.WgmmaMma` -> ``lg_wgmma_m64n{N}_{dtype}_t{tnspB}(&acc[0],
  lg_gmma_desc(bits, sA, start), lg_gmma_desc(bits, sB, start))`` (``bits``: the
  descriptor's constant fields; a kernel with TMA statements prints
  ``lg_gmma_desc_u32(bits, sA_u32, start)`` from the array's 32-bit address,
  :mod:`kernels.printer.cuda_tma`, as does a kernel with ``meta["u32_shared"]``);
  ``WgmmaFence`` / ``WgmmaCommit`` / ``WgmmaWait`` -> ``lg_wgmma_fence()`` / ``lg_wgmma_commit()`` / ``lg_wgmma_wait<N>()`` followed by one
  ``lg_pin(frag);`` per pinned accumulator (a fence's pins printed before it);
  ``FenceProxyAsync`` -> ``lg_fence_proxy_async()``.  A scale-d 0 step with ``write_only``
  calls the ``_wo`` wrapper (an output-only accumulator, ``scale_d`` passed as 0).
  A register A (``WgmmaMma.a`` a ``Regs``) -> ``lg_wgmma_m64n{N}_{dtype}_rs_t{tnspB}(&acc[0],
  &a[word], lg_gmma_desc(bits, sB, start))``: the 4 32-bit words from ``word`` (the
  wrapper of :func:`kernels.nvidia.wgmma_prelude.wgmma_wrapper` with ``a_regs``; such kernels
  also get the ``lg_pin`` of a flat ``lg_u32`` array, ``PIN_WORDS``).
  A kernel with wgmmas rounds the dynamic shared base up to 1024 bytes (``lg_smem``, carved
  from ``lg_smem_raw``) and aligns every array to 1024 bytes: the descriptors' swizzle acts on
  the absolute address.

16-bit operand frags are declared as ``lg_u32`` arrays holding two elements per word (element
``i`` in word ``i / 2``, low half first: the PTX operand registers); a staging frag that only
``cp.async`` copies use exists in the model and is not declared.  Shared arrays are carved from
one dynamic ``extern __shared__`` buffer (a launch passes :func:`smem_bytes`).  The helpers come
from :data:`kernels.nvidia.prelude.PRELUDE` (inline PTX only, no include path).
"""

from __future__ import annotations

from typing import Any, List, Set

import sympy
from layoutalg.symbolic import to_c

from ..ir.core import (Access, Kernel, Mfma, Regs, SchedBarrier, SchedGroupBarrier, SetPrio,
                       WaitCnt, ZeroFrag, walk)
from ..ir.dtypes import ELEM_TYPES
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from ..ir.nvidia_wgmma import (FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaMma, WgmmaWait)
from ..nvidia.prelude import MMA, PACK, PRELUDE
from ..nvidia.wgmma_prelude import (GMMA_DESC, GMMA_DESC_U32, GMMA_DESC_U32_PIN, HELPERS,
                                    PIN_WORDS, wgmma_fn, wgmma_key, wgmma_wrapper)
from .cuda_cp_chain import plan_chains
from .cuda_ticket import ticket_stmt
from .cuda_tma import has_tma, tma_decls, tma_helpers, tma_param, tma_stmt, u32_base
from .hip import Printer

__all__ = ["CudaPrinter", "emit_cuda", "smem_bytes", "smem_align", "SMEM_ALIGN_LINE"]

#: the line a kernel with wgmmas rounds the dynamic shared base up with (1024 bytes)
SMEM_ALIGN_LINE = ("  unsigned char* const lg_smem = lg_smem_raw + ((1024u - "
                   "(lg_smem_u32(lg_smem_raw) & 1023u)) & 1023u);")

_BYTES = {name: t.bytes for name, t in ELEM_TYPES.items()}
_C_TYPE = {"f16": "lg_u16", "bf16": "lg_u16", "f32": "float", "i32": "int"}
_TO_16 = {"f16": "lg_f32_to_f16", "bf16": "lg_f32_to_bf16"}


def smem_align(k: Kernel) -> int:
    """Alignment of the printed kernel's shared arrays: 1024 bytes where a wgmma reads them
    through descriptors (the swizzle acts on absolute addresses), else 128."""
    return 1024 if any(isinstance(s, WgmmaMma) for s in walk(k.body)) else 128


def smem_bytes(k: Kernel) -> int:
    """Dynamic shared memory the printed kernel carves its arrays from (each aligned to
    :func:`smem_align`; plus the slack the base is rounded up with where that is 1024)."""
    a = smem_align(k)
    return sum(_align(s.count * _BYTES[s.dtype], a) for s in k.shared) + (a if a > 128 else 0)


def _align(n: int, a: int = 128) -> int:
    return -(-n // a) * a


class CudaPrinter(Printer):
    BANNER = "// Generated by layoutalg (kernels.printer.cuda): do not edit."

    def __init__(self, k: Kernel) -> None:
        super().__init__(k)
        self.staging: Set[str] = {s.load.regs.frag.name for s in walk(k.body)
                                  if isinstance(s, CpAsync)}
        self.tma = has_tma(k)       # shared addresses as 32-bit bases computed once
        # cp.async / ldmatrix shared addresses from each array's 32-bit base, computed once
        # (``(sA_u32 + 2 * (offset))``) where the kernel asks (``meta["u32_shared"]``): a
        # generic pointer converted per use costs 64-bit address math and registers in the
        # loop (the IR prefill and the runtime-size GEMMs, issue 20 item 1)
        self.u32_shared = bool(getattr(k, "meta", {}).get("u32_shared"))
        # cp.async sources as chained 64-bit pointers where the kernel asks (cuda_cp_chain)
        self.cp_chain = plan_chains(k.body, int(getattr(k, "meta", {}).get("cp_src_chain", 0)))

    # ---- operands ------------------------------------------------------------------------
    def words(self, r: Regs, what: str) -> int:
        """The first ``lg_u32`` word of 16-bit elements ``r`` (consecutive, starting even)."""
        idx = list(r.idx)
        if _BYTES[r.frag.dtype] != 2 or idx[0] % 2 or idx != list(range(idx[0], idx[0] + len(idx))):
            raise ValueError(f"cuda printer: {what} needs consecutive 16-bit elements starting "
                             f"at an even one, got {r.frag.name}{idx}")
        return idx[0] // 2

    def first(self, r: Regs, what: str) -> int:
        idx = list(r.idx)
        if idx != list(range(idx[0], idx[0] + len(idx))):
            raise ValueError(f"cuda printer: {what} needs consecutive registers, got "
                             f"{r.frag.name}{idx}")
        return idx[0]

    def elem(self, f: Any, i: int) -> str:
        """Element ``i`` of an f32 frag (declared flat: ``float acc[count]``)."""
        return f"{f.name}[{i}]"

    def saddr(self, a: Access) -> str:
        if not self.u32_shared:
            return f"lg_smem_u32({a.buf} + ({to_c(a.offset)}))"
        scale, base = _BYTES[self.buf_dtype[a.buf]], u32_base(a.buf)
        if self.k.meta.get("split_shared_offsets"):
            # the bare symbols (a per-thread base, loop-invariant) scaled apart from the rest
            # (the stage, constants: block-uniform), so the compiler keeps the first in a
            # register and folds the second into a uniform register and the immediate
            terms = sympy.Add.make_args(sympy.expand(a.offset))
            own = [t for t in terms if isinstance(t, sympy.Symbol)]
            rest = [t for t in terms if not isinstance(t, sympy.Symbol)]
            if own and rest:
                return (f"({base} + {scale} * ({to_c(sympy.Add(*own))}) + {scale} * "
                        f"({to_c(sympy.Add(*rest))}))")
        return f"({base} + {scale} * ({to_c(a.offset)}))"

    def desc_u32(self) -> bool:
        """Descriptors from the arrays' 32-bit bases (``lg_gmma_desc_u32``): a TMA kernel's,
        and any kernel whose shared addresses are printed from them (``u32_shared``); the
        generic-pointer form converts the array per descriptor, per k step."""
        return self.tma or self.u32_shared

    def pinned_descs(self) -> Set[str]:
        """The shared arrays whose descriptors are recomputed at each issue
        (``meta["pinned_desc_bases"]``, ``lg_gmma_desc_u32_pin``: never hoisted and held in
        registers by the compiler); only from 32-bit bases."""
        pinned = set(self.k.meta.get("pinned_desc_bases", ()))
        if pinned and not self.desc_u32():
            raise ValueError(f"cuda printer: pinned descriptors of {sorted(pinned)} need the "
                             "32-bit shared bases (meta u32_shared, or a TMA kernel)")
        return pinned

    # ---- statements ----------------------------------------------------------------------
    def stmt(self, s: Any, d: int) -> None:
        if tma_stmt(self.out, s, d) or ticket_stmt(self, s, d):
            return
        if isinstance(s, CpAsync):
            ld, st = s.load, s.store
            nbytes = ld.width * _BYTES[self.buf_dtype[ld.buf]]
            if nbytes not in (4, 8, 16):
                raise ValueError(f"cuda printer: cp.async {s.tag} moves {nbytes} bytes; 4, 8 "
                                 "or 16")
            src = f"{ld.buf} + ({to_c(ld.offset)})"
            link = self.cp_chain.get(id(s))
            if link is not None:
                self.out(d, f"const {_C_TYPE[self.buf_dtype[ld.buf]]}* {link.name} = "
                            f"{link.base} + ({to_c(link.offset)});")
                src = link.name
            n = str(nbytes) if ld.pred is None else f"({to_c(ld.pred)}) ? {nbytes} : 0"
            self.out(d, f"lg_cp_async{nbytes}({self.saddr(st)}, {src}, {n});")
        elif isinstance(s, CpAsyncCommit):
            self.out(d, "lg_cp_async_commit();")
        elif isinstance(s, CpAsyncWait):
            self.out(d, f"lg_cp_async_wait<{s.pending}>();")
        elif isinstance(s, LdMatrixLoad):
            w0 = self.words(s.regs, f"ldmatrix {s.tag}")
            f = s.regs.frag.name
            regs = ", ".join(f"{f}[{w0 + i}]" for i in range(s.atom.num))
            fn = f"lg_ldmatrix_x{s.atom.num}{'_trans' if s.atom.trans else ''}"
            self.out(d, f"{fn}({regs}, {self.saddr(s)});")
        elif isinstance(s, Mfma):
            self.mma(s, d)
        elif isinstance(s, WgmmaMma):
            self.wgmma(s, d)
        elif isinstance(s, WgmmaFence):
            for f in s.pins:
                self.out(d, f"lg_pin({f});")
            self.out(d, "lg_wgmma_fence();")
        elif isinstance(s, WgmmaCommit):
            self.out(d, "lg_wgmma_commit();")
        elif isinstance(s, WgmmaWait):
            self.out(d, f"lg_wgmma_wait<{s.pending}>();")
            for f in s.pins:
                self.out(d, f"lg_pin({f});")
        elif isinstance(s, FenceProxyAsync):
            self.out(d, "lg_fence_proxy_async();")
        elif isinstance(s, ZeroFrag):
            f = s.frag
            zero = "0.f" if f.dtype == "f32" else "0u"
            n = f.count if f.dtype == "f32" else f.count // 2
            self.out(d, f"for (int i = 0; i < {n}; ++i) {f.name}[i] = {zero};")
        elif isinstance(s, (SchedBarrier, SchedGroupBarrier, SetPrio, WaitCnt)):
            raise TypeError(f"cuda printer: {type(s).__name__} is an AMD scheduling statement")
        elif isinstance(s, Access):
            self.store(s, d)
        else:
            super().stmt(s, d)

    def mma(self, m: Mfma, d: int) -> None:
        sp = m.spec
        if getattr(sp, "family", "") != "SM80" or sp.a_type not in MMA:
            raise ValueError(f"cuda printer: {m.tag}: {sp.name} is not an mma.sync atom")
        acc = self.first(m.acc, f"mma {m.tag} accumulator")
        a = self.words(m.a, f"mma {m.tag} A")
        b = self.words(m.b, f"mma {m.tag} B")
        self.out(d, f"{MMA[sp.a_type]}(&{m.acc.frag.name}[{acc}], &{m.a.frag.name}[{a}], "
                    f"&{m.b.frag.name}[{b}]);")

    def wgmma(self, m: WgmmaMma, d: int) -> None:
        acc = self.first(m.acc, f"wgmma {m.tag} accumulator")
        shared = (m.b,) if m.a_in_regs else (m.a, m.b)
        fn_desc, base = ("lg_gmma_desc_u32", u32_base) if self.desc_u32() else \
            ("lg_gmma_desc", lambda b: b)
        pinned = self.pinned_descs()
        ops = [f"{fn_desc}{'_pin' if op.buf in pinned else ''}(0x{op.desc.constant_bits():016x}"
               f"ull, {base(op.buf)}, {to_c(op.start)})" for op in shared]
        if m.a_in_regs:
            ops.insert(0, f"&{m.a.frag.name}[{self.words(m.a, f'wgmma {m.tag} A')}]")
        fn = wgmma_fn(*wgmma_key(m))
        if not m.accumulate:
            ops.append("0")         # the wrapper's scale_d: overwrite the accumulator
        self.out(d, f"{fn}(&{m.acc.frag.name}[{acc}], {', '.join(ops)});")

    def helpers(self) -> str:
        """The wgmma helpers this kernel calls (none without wgmmas)."""
        ms = [s for s in walk(self.k.body) if isinstance(s, WgmmaMma)]
        if not ms:
            return tma_helpers(self.k)
        out = [HELPERS, GMMA_DESC_U32 if self.desc_u32() else GMMA_DESC, tma_helpers(self.k)]
        if self.pinned_descs():
            out.insert(2, GMMA_DESC_U32_PIN)
        keys = sorted({wgmma_key(m) for m in ms})
        if any(key[3] for key in keys):
            out.append(PIN_WORDS)
        for key in keys:
            out.append(wgmma_wrapper(wgmma_fn(*key), *key))
        return "".join(out)

    def store(self, a: Access, d: int) -> None:
        """The one plain access the NVIDIA builders print: f32 accumulators -> 16-bit C (a
        global tensor, or a shared buffer the TMA store reads)."""
        bt, rt = self.buf_dtype[a.buf], a.regs.frag.dtype
        if (a.kind, rt, bt) == ("store", "f32", "f32") and a.width in (1, 2):
            self.out(d, f32_store_line(a))     # fp32 partials (split-K workspace)
            return
        if (a.kind, rt) != ("store", "f32") or bt not in PACK or \
                a.width not in (1, 2):
            raise ValueError(f"cuda printer: access {a.tag} ({a.kind} {a.space} {rt} -> {bt}, "
                             f"{a.width} wide) has no CUDA form; global stores of 1 or 2 f32 "
                             "accumulators to f16/bf16 are printed")
        regs = [self.elem(a.regs.frag, i) for i in a.regs.idx]
        if a.width == 2:
            line = (f"*reinterpret_cast<lg_u32*>({a.buf} + ({to_c(a.offset)})) = "
                    f"{PACK[bt]}({regs[0]}, {regs[1]});")
        else:
            line = f"{a.buf}[{to_c(a.offset)}] = {_TO_16[bt]}({regs[0]});"
        self.out(d, f"if ({to_c(a.pred)}) {line}" if a.pred is not None else line)

    # ---- kernel --------------------------------------------------------------------------
    def params(self) -> List[str]:
        return [tma_param(p) or
                f"{'const ' if p.const else ''}{_C_TYPE[p.dtype]}* __restrict__ {p.name}"
                for p in self.k.params]

    def kernel(self, prelude: bool = True) -> str:
        k = self.k
        body_start = len(self.lines)
        for f in k.frags:
            if f.name in self.staging:
                continue
            if f.dtype == "f32":
                self.out(1, f"float {f.name}[{f.count}];")
            elif _BYTES[f.dtype] == 2 and f.count % 2 == 0:
                self.out(1, f"lg_u32 {f.name}[{f.count // 2}];  // {f.count} x {f.dtype}")
            else:
                raise ValueError(f"cuda printer: frag {f.name} ({f.count} x {f.dtype}) has no "
                                 "CUDA form")
        self.out(1, "const int tid = threadIdx.x;")
        for name, axis in zip(k.grid_symbols, "xyz"):
            self.out(1, f"const int {name} = blockIdx.{axis};")
        self.stmts(k.body, 1)
        body = self.lines[body_start:]
        notes = [f"// {h}".rstrip() for h in k.header]
        head: List[str] = [self.BANNER, *notes, PRELUDE + self.helpers()] if prelude else \
            ["", *notes]
        bounds = f"{k.block}, {k.min_blocks}" if k.min_blocks else f"{k.block}"
        head += [f'extern "C" __global__ void __launch_bounds__({bounds}) '
                 f"{k.name}({', '.join(self.params())}) {{"]
        align = smem_align(k)
        if align == 128:
            head.append("  extern __shared__ __align__(128) unsigned char lg_smem[];")
        else:
            head += ["  extern __shared__ __align__(1024) unsigned char lg_smem_raw[];",
                     SMEM_ALIGN_LINE]
        at = 0
        for s in k.shared:
            ct = _C_TYPE[s.dtype]
            head.append(f"  {ct}* const {s.name} = reinterpret_cast<{ct}*>(lg_smem + {at});"
                        f"  // {s.count} x {s.dtype}")
            at += _align(s.count * _BYTES[s.dtype], align)
        if self.u32_shared and not has_tma(k):   # (tma_decls prints them in a TMA kernel)
            head += [f"  const lg_u32 {u32_base(s.name)} = lg_smem_u32({s.name});"
                     for s in k.shared]
        head += tma_decls(k)
        return "\n".join(head + body + ["}", ""])


def f32_store_line(a: Access) -> str:
    """``if (pred) *reinterpret_cast<float2*>(buf + (offset)) = make_float2(r0, r1);`` or
    ``if (pred) buf[offset] = r0;``: f32 accumulators to an f32 global buffer."""
    regs = [f"{a.regs.frag.name}[{i}]" for i in a.regs.idx]
    if a.width == 2:
        line = (f"*reinterpret_cast<float2*>({a.buf} + ({to_c(a.offset)})) = "
                f"make_float2({regs[0]}, {regs[1]});")
    else:
        line = f"{a.buf}[{to_c(a.offset)}] = {regs[0]};"
    return f"if ({to_c(a.pred)}) {line}" if a.pred is not None else line


def emit_cuda(kernel: Kernel) -> str:
    """CUDA C++ source of ``kernel`` (one ``extern "C" __global__`` function)."""
    return CudaPrinter(kernel).kernel()
