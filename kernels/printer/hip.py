"""Print a :class:`kernels.ir.Kernel` as HIP C++ (plain string building).

Index expressions are printed with :func:`layoutalg.symbolic.to_c`, nothing else: the gate
evaluates the same sympy objects with :func:`kernels.ir.c_eval`.  Vector types are clang
``ext_vector_type`` typedefs named ``la_<dtype>x<N>`` (``la_f16x8``); bf16 data is carried as
16-bit integers (the MFMA bf16 builtins take ``short`` vectors).
"""

from __future__ import annotations

from typing import Any, Dict, List, Set

from layoutalg.symbolic import to_c

from ..ir.dtypes import ELEM_TYPES
from ..ir.core import (Access, Barrier, Comment, Frag, If, Kernel, Let, LetThreadId, Loop, Mfma,
                       Regs, THREAD_ID_AGAIN, Scale, SchedBarrier, SchedGroupBarrier, SetPrio,
                       WaitCnt, ZeroFrag)

__all__ = ["emit", "Printer", "SCALAR", "vec_type"]

SCALAR = {name: t.c_scalar for name, t in ELEM_TYPES.items()}
_BYTES = {name: t.bytes for name, t in ELEM_TYPES.items()}

# value conversions on stores (accumulator -> output type); lagen_hip.h rounds bf16 to nearest even
_CONVERT_FN = {("f32", "f16"): "(_Float16)", ("f32", "bf16"): "(short)lagen_f32_to_bf16"}
# vector typedefs lagen_hip.h provides; any other is typedef'd in the kernel file as la_<t>x<n>
_LAGEN_VECTORS = {("f16", 2), ("f16", 4), ("f16", 8), ("bf16", 2), ("bf16", 4), ("bf16", 8),
                  ("f32", 2), ("f32", 4), ("f32", 16), ("f32", 32)}


def vec_type(dtype: str, n: int) -> str:
    if n == 1:
        return SCALAR[dtype]
    return f"lagen_{dtype}x{n}" if (dtype, n) in _LAGEN_VECTORS else f"la_{dtype}x{n}"


class Printer:
    def __init__(self, k: Kernel) -> None:
        self.k = k
        self.lines: List[str] = []
        self.vtypes: Set[tuple] = set()
        self.buf_dtype: Dict[str, str] = {p.name: p.dtype for p in k.params}
        self.buf_dtype.update({s.name: s.dtype for s in k.shared})

    # ---- operands ------------------------------------------------------------------------
    def vt(self, dtype: str, n: int) -> str:
        if n > 1:
            self.vtypes.add((dtype, n))
        return vec_type(dtype, n)

    def elem(self, f: Frag, i: int) -> str:
        return f"{f.name}[{i}]" if f.width == 1 else f"{f.name}[{i // f.width}][{i % f.width}]"

    def whole(self, r: Regs) -> str:
        """The operand as an rvalue vector (or scalar) expression."""
        f, idx, n = r.frag, r.idx, len(r.idx)
        if n == 1:
            return self.elem(f, idx[0])
        j0 = idx[0]
        if list(idx) == list(range(j0, j0 + n)) and j0 // f.width == (j0 + n - 1) // f.width:
            if n == f.width:
                return f"{f.name}[{j0 // f.width}]"
            lo = j0 % f.width
            sel = ", ".join(str(lo + t) for t in range(n))
            v = f"{f.name}[{j0 // f.width}]"
            return f"__builtin_shufflevector({v}, {v}, {sel})"
        return f"{self.vt(f.dtype, n)}{{{', '.join(self.elem(f, i) for i in idx)}}}"

    def byte_column(self, r: Regs, vt: str) -> str:
        """Four 1-byte registers at the same position ``j`` of four whole register vectors (a
        column of a 4x4 byte transpose: the fp8 B tile stored k-contiguous) as
        ``lagen_gather_bytes4`` (8 ``v_perm_b32`` per 4x4 block once inlined; clang lowers the
        byte-wise vector initializer to ~28 VALU instructions); "" for any other operand."""
        f, idx = r.frag, list(r.idx)
        w = f.width
        if _BYTES[f.dtype] != 1 or len(idx) != 4 or w % 4:
            return ""
        vecs = [i // w for i in idx]
        j = idx[0] % w
        if any(i % w != j for i in idx) or len(set(vecs)) != 4:
            return ""
        args = ", ".join(f"{f.name}[{v}]" for v in vecs)
        return f"LAGEN_BITCAST({vt}, lagen_gather_bytes4({args}, {j}))"

    def is_lvalue_vector(self, r: Regs) -> bool:
        f, idx, n = r.frag, r.idx, len(r.idx)
        return n == 1 or (n == f.width and idx[0] % n == 0
                          and list(idx) == list(range(idx[0], idx[0] + n)))

    # ---- statements ----------------------------------------------------------------------
    def out(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmts(self, body: List[Any], depth: int) -> None:
        for s in body:
            self.stmt(s, depth)

    def stmt(self, s: Any, d: int) -> None:
        if isinstance(s, Comment):
            for line in s.text.splitlines():
                self.out(d, f"// {line}".rstrip())
        elif isinstance(s, LetThreadId):
            self.out(d, f"const int {s.name} = {THREAD_ID_AGAIN};")
        elif isinstance(s, Let):
            self.out(d, f"const int {s.name} = {to_c(s.expr)};")
        elif isinstance(s, Loop):
            if s.unroll is not None:
                self.out(d, f"#pragma unroll {int(s.unroll)}")
            self.out(d, f"for (int {s.var} = {to_c(s.start)}; {s.var} < {to_c(s.stop)}; "
                        f"++{s.var}) {{")
            self.stmts(s.body, d + 1)
            self.out(d, "}")
        elif isinstance(s, If):
            self.out(d, f"if ({to_c(s.cond)}) {{")
            self.stmts(s.body, d + 1)
            self.out(d, "}")
        elif isinstance(s, Barrier):
            self.out(d, "__syncthreads();")
        elif isinstance(s, SchedBarrier):
            self.out(d, "__builtin_amdgcn_sched_barrier(0);")
        elif isinstance(s, SchedGroupBarrier):
            self.out(d, f"__builtin_amdgcn_sched_group_barrier({hex(s.mask)}, {s.size}, "
                        f"{s.sync_id});  // {s.size} {s.what}")
        elif isinstance(s, SetPrio):
            self.out(d, f"__builtin_amdgcn_s_setprio({s.prio});")
        elif isinstance(s, WaitCnt):
            what = " ".join(f"{n}({v})" for n, v in (("vmcnt", s.vm), ("lgkmcnt", s.lgkm))
                            if v is not None)
            self.out(d, f"__builtin_amdgcn_s_waitcnt({hex(s.immediate())});  // {what}")
        elif isinstance(s, ZeroFrag):
            f = s.frag
            zero = f"{self.vt(f.dtype, f.width)}{{}}" if f.width > 1 else "0"
            for j in range(f.count // f.width):
                self.out(d, f"{f.name}[{j}] = {zero};" if f.width > 1 else f"{f.name}[{j}] = 0;")
        elif isinstance(s, Access):
            self.access(s, d)
        elif isinstance(s, Mfma):
            self.mfma(s, d)
        elif isinstance(s, Scale):
            f = s.frag
            if all(len(r.idx) == 1 for r in s.factors):      # one factor for every element
                factor = " * ".join(self.whole(r) for r in s.factors)
                for j in range(f.count // f.width):
                    self.out(d, f"{f.name}[{j}] *= {factor};")
            else:                                             # element-wise factors
                for i in range(f.count):
                    factor = " * ".join(self.elem(r.frag, r.idx[i if len(r.idx) > 1 else 0])
                                        for r in s.factors)
                    self.out(d, f"{self.elem(f, i)} *= {factor};")
        else:
            raise TypeError(f"emit: unknown statement {s!r}")

    def access(self, a: Access, d: int) -> None:
        bt = self.buf_dtype[a.buf]
        rt = a.regs.frag.dtype
        vt = self.vt(bt, a.width)
        ptr = f"({a.buf} + {to_c(a.offset)})"
        mem = f"*({'const ' if a.kind == 'load' and a.space == 'global' else ''}{vt}*){ptr}" \
            if a.width > 1 else f"{a.buf}[{to_c(a.offset)}]"
        pred = to_c(a.pred) if a.pred is not None else None
        if a.soffset is not None and pred and a.soffset == 0:
            # no branch: an off lane's voffset leaves the buffer, the hardware reads zeros (with
            # all of the offset per lane, soffset 0, nothing can bring it back in range)
            if a.width * _BYTES[bt] not in (4, 8, 16) or not self.is_lvalue_vector(a.regs):
                raise ValueError(f"emit: predicated buffer load {a.tag} must move one whole "
                                 "4-, 8- or 16-byte register vector")
            self.out(d, f"{self.whole(a.regs)} = lagen_buffer_load_if<{vt}>({a.buf}_rsrc, "
                        f"{pred}, {to_c(a.offset)}, {to_c(a.soffset)});")
            return
        if a.soffset is not None:
            if a.width * _BYTES[bt] != 16 or not self.is_lvalue_vector(a.regs):
                raise ValueError(f"emit: buffer load {a.tag} must move one whole 16-byte "
                                 "register vector")
            mem = (f"lagen_buffer_load_b128<{vt}>({a.buf}_rsrc, {to_c(a.offset)}, "
                   f"{to_c(a.soffset)})")
        if a.kind == "load":
            if bt != rt:
                raise TypeError(f"emit: load {a.tag} converts {bt} -> {rt}; not supported")
            if self.is_lvalue_vector(a.regs):
                dst = self.whole(a.regs)
                if pred:
                    self.out(d, f"{dst} = {vt + '{}' if a.width > 1 else '0'};")
                    self.out(d, f"if ({pred}) {dst} = {mem};")
                else:
                    self.out(d, f"{dst} = {mem};")
                return
            self.out(d, "{")
            init = f" = {vt}{{}}" if pred else ""
            self.out(d + 1, f"{vt} v{init};" if pred else f"{vt} v = {mem};")
            if pred:
                self.out(d + 1, f"if ({pred}) v = {mem};")
            for j, i in enumerate(a.regs.idx):
                self.out(d + 1, f"{self.elem(a.regs.frag, i)} = v[{j}];")
            self.out(d, "}")
            return
        # store
        if bt != rt:
            key = (rt, bt)
            if key not in _CONVERT_FN:
                raise TypeError(f"emit: store {a.tag} converts {rt} -> {bt}; not supported")
            fn = _CONVERT_FN[key]
            parts = [f"{fn}({self.elem(a.regs.frag, i)})" for i in a.regs.idx]
            val = parts[0] if a.width == 1 else f"{vt}{{{', '.join(parts)}}}"
        else:
            val = self.byte_column(a.regs, vt) or self.whole(a.regs)
        line = f"{mem} = {val};"
        self.out(d, f"if ({pred}) {line}" if pred else line)

    def mfma(self, m: Mfma, d: int) -> None:
        acc = self.whole(m.acc)
        if not self.is_lvalue_vector(m.acc):
            raise ValueError(f"emit: MFMA accumulator {m.tag} must be one whole vector")
        srcs = (m.b, m.a) if m.swap_ab else (m.a, m.b)      # swap_ab: srcA = B, srcB = A
        a, b = (self.operand(r, p) for r, p in zip(srcs, m.spec.builtin_params))
        self.out(d, f"{acc} = {m.spec.builtin}({a}, {b}, {acc}, 0, 0, 0);")

    def operand(self, r: Regs, param: Any) -> str:
        """An MFMA operand; a vector passed where the builtin takes one scalar (8 fp8 values
        in a ``long``) is bit-cast (``LAGEN_BITCAST``, a memcpy of the same bytes)."""
        v = self.whole(r)
        if getattr(param, "width", 1) == 1 and len(r.idx) > 1:
            return f"LAGEN_BITCAST({param.ctype}, {v})"
        return v

    # ---- kernel --------------------------------------------------------------------------
    BANNER = "// Generated by layoutalg (kernels.emit): do not edit."
    PRELUDE: List[str] = []      # helper functions printed after the include

    def params(self) -> List[str]:
        """The kernel's parameters, as printed in its signature."""
        return [f"{'const ' if p.const else ''}{SCALAR[p.dtype]}* __restrict__ {p.name}"
                for p in self.k.params]

    def kernel(self, prelude: bool = True) -> str:
        """The source; ``prelude=False``: the kernel alone, without the banner, the include
        and the helpers (to append to another kernel's source, which brings them)."""
        k = self.k
        body_start = len(self.lines)
        for f in k.frags:
            self.out(1, f"{self.vt(f.dtype, f.width)} {f.name}[{f.count // f.width}];")
        self.out(1, "const int tid = threadIdx.x;")
        if getattr(k.spec, "wave_roles", ()):
            # wave groups offset by barriers only some waves pass (ir.core.group_barrier)
            self.out(1, "LAGEN_STAGGERED_BARRIERS();")
        for name, axis in zip(k.grid_symbols, "xyz"):
            self.out(1, f"const int {name} = blockIdx.{axis};")
        for p in k.params:
            if p.buffer:
                self.out(1, f"const lagen_buffer {p.name}_rsrc = lagen_make_buffer({p.name}, "
                            f"{p.buffer_elems * _BYTES[p.dtype]}u);")
        self.stmts(k.body, 1)
        body = self.lines[body_start:]
        notes = [f"// {h}".rstrip() for h in k.header]
        head: List[str] = ([self.BANNER, *notes, '#include "lagen_hip.h"', "", *self.PRELUDE]
                           if prelude else ["", *notes])
        if prelude and getattr(k.spec, "wave_roles", ()):
            # wave groups offset by barriers only some waves pass: the emulator (hip_emu.h)
            # defines this to match barriers by count; on the devices s_barrier / bar.sync
            # already do, so it is nothing (defined here, not in the shared headers, so that
            # no other kernel's translation unit changes)
            head += ["#ifndef LAGEN_STAGGERED_BARRIERS",
                     "#define LAGEN_STAGGERED_BARRIERS() ((void)0)", "#endif", ""]
        for s in k.shared:       # the LDS arrays' 16-byte vector types (declared below)
            if 16 // _BYTES[s.dtype] > 1:
                self.vt(s.dtype, 16 // _BYTES[s.dtype])
        for dt, n in sorted(self.vtypes - _LAGEN_VECTORS):
            # a macro of lagen_hip.h / lagen_cuda.h: a clang vector on AMD and in the
            # emulator, lagen_vec<T, n> under NVCC/NVRTC (which ignore ext_vector_type)
            head.append(f"LAGEN_VEC_TYPEDEF({SCALAR[dt]}, {n}, {vec_type(dt, n)});")
        params = ", ".join(self.params())
        hint = f"LAGEN_WAVES_PER_EU({k.waves_per_eu}) " if k.waves_per_eu else ""
        head += ["", f"LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS({k.block}) {hint}void {k.name}({params}) {{"]
        for s in k.shared:
            # declared as 16-byte vectors so every LDS array is 16-byte aligned
            per = 16 // _BYTES[s.dtype]
            if s.count % per:
                raise ValueError(f"LDS array {s.name}: {s.count} elements is not a multiple of "
                                 f"{per} (16 bytes)")
            head.append(f"  LAGEN_SHARED({vec_type(s.dtype, per)}, {s.name}_v, {s.count // per});")
            head.append(f"  {SCALAR[s.dtype]}* const {s.name} = ({SCALAR[s.dtype]}*){s.name}_v;")
        return "\n".join(head + body + ["}", ""])


def emit(kernel: Kernel) -> str:
    """HIP C++ source of ``kernel`` (one ``extern "C" __global__`` function)."""
    return Printer(kernel).kernel()


_Printer = Printer     # the pre-issue-13 name, kept for one release
