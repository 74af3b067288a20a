"""The CUDA forms of the one-pass decode's statements (:mod:`kernels.nvidia.decode_onepass_ir`)
for :class:`kernels.printer.cuda_attention.CudaAttnPrinter`, one line each, with the template's
arithmetic (:func:`kernels.nvidia.attention.emit_decode`) operation for operation:

* :class:`~kernels.ir.attention.VecDot` of 8 consecutive 16-bit elements of two frags ->
  ``s[i] = lg_dot8_<t>(&a[w], &b[v]);`` (``d = 0.f; d = fmaf(a_e, b_e, d)`` for e = 0..7, the
  elements unpacked low half first: the template's ``lg_unpack8`` + ``fmaf`` loop);
* :class:`~kernels.ir.attention.VecAxpy` of 8 -> ``lg_axpy8_<t>(&o[i], p[j], &x[v]);``
  (``o[e] = fmaf(p, x_e, o[e])``, e = 0..7);
* ``LaneXor(method="shfl_xor")`` of a frag element -> ``s[i] += __shfl_xor_sync(0xffffffffu,
  s[i], P);`` (the template's lane-group sum);
* a predicated 16-byte load of 8 16-bit elements -> ``lg_ldg16x8z(&frag[w], buf + (offset),
  pred);``: zeros and the ``@p ld.global.nc.L1::no_allocate.v4`` in ONE inline-asm block, so the
  kernel stays straight-line code (``lg_ldg16x8(.., ok)``'s ``if (ok) .. else zeros`` made a
  branch of every load, and ptxas then issued the step's loads late, between the shuffles:
  0.58-0.75x the template's device time on an H100 at 8 / 16 keys per step, 2026-11-24);
* a 16-byte store of 8 f32 registers to a 16-bit output -> ``[if (pred)] lg_st_u32x4(O +
  (offset), lg_pack_*x2(o[0], o[1]), .., lg_pack_*x2(o[6], o[7]));`` (one ``st.global.v4``,
  the template's store).

The helpers (:func:`onepass_helpers`) are printed only into kernels holding these statements,
so every other kernel's source is unchanged.  :mod:`kernels.verify.source_onepass` reads the
lines back.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from layoutalg.symbolic import to_c

from ..ir.attention import LaneXor, VecAxpy, VecDot
from ..ir.core import Access, Frag, walk
from ..nvidia.prelude import PACK

__all__ = ["onepass_stmt", "onepass_helpers", "dot_fn", "axpy_fn", "ST16_FN", "LDZ_FN",
           "is_onepass"]

ST16_FN = "lg_st_u32x4"
LDZ_FN = "lg_ldg16x8z"
_UNPACK = {"f16": ("lg_f16_lo", "lg_f16_hi"), "bf16": ("lg_bf16_lo", "lg_bf16_hi")}


def dot_fn(dtype: str) -> str:
    return f"lg_dot8_{dtype}"


def axpy_fn(dtype: str) -> str:
    return f"lg_axpy8_{dtype}"


def _helpers(dtype: str) -> str:
    lo, hi = _UNPACK[dtype]
    un = [f"{lo if e % 2 == 0 else hi}" for e in range(8)]
    dot = "\n".join(f"  d = fmaf({un[e]}(a[{e // 2}]), {un[e]}(b[{e // 2}]), d);"
                    for e in range(8))
    axpy = "\n".join(f"  o[{e}] = fmaf(p, {un[e]}(x[{e // 2}]), o[{e}]);" for e in range(8))
    return (f"LG_DEV float {dot_fn(dtype)}(const lg_u32* a, const lg_u32* b) {{\n"
            f"  float d = 0.f;\n{dot}\n  return d;\n}}\n"
            f"LG_DEV void {axpy_fn(dtype)}(float* o, float p, const lg_u32* x) {{\n{axpy}\n}}\n")


STORE16 = (f"LG_DEV void {ST16_FN}(lg_u16* p, lg_u32 a, lg_u32 b, lg_u32 c, lg_u32 d) {{\n"
           "  lg_u32x4 r; r.x = a; r.y = b; r.z = c; r.w = d;\n"
           "  *reinterpret_cast<lg_u32x4*>(p) = r;\n}\n")


LOAD_Z = r"""LG_DEV void lg_ldg16x8z(lg_u32* r, const lg_u16* p, bool ok) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %5, 0;\n"
               " mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
               " @q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4]; }\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "l"(p), "r"((int)ok));
}
"""


def is_onepass(k: Any) -> bool:
    """Does kernel ``k`` hold the one-pass statements (its predicated loads then print as
    :data:`LDZ_FN`)?"""
    return any(isinstance(s, VecDot) for s in walk(k.body))


def onepass_helpers(k: Any) -> str:
    """The dot / axpy helpers of the input types the kernel's statements use and the 16-byte
    store, where it has them (else "")."""
    types: List[str] = []
    store = False
    for s in walk(k.body):
        if isinstance(s, (VecDot, VecAxpy)):
            t = (s.a if isinstance(s, VecDot) else s.x).dtype
            if t not in types:
                types.append(t)
        elif isinstance(s, Access) and s.kind == "store" and s.width == 8 and \
                s.regs.frag.dtype == "f32":
            store = True
    return ("".join(_helpers(t) for t in types) + (LOAD_Z if types else "") +
            (STORE16 if store else ""))


def _word(f: Frag, items: Any, what: str) -> int:
    """The first ``lg_u32`` word of 8 consecutive 16-bit elements ``items`` of ``f``."""
    idx = list(items)
    if f.dtype not in _UNPACK or len(idx) != 8 or idx[0] % 2 or \
            idx != list(range(idx[0], idx[0] + 8)):
        raise ValueError(f"cuda printer: {what}: 8 consecutive 16-bit elements of {f.name} "
                         f"from an even one, got {f.dtype} {idx}")
    return idx[0] // 2


def onepass_stmt(out: Callable[[int, str], None], s: Any, d: int, dtypes: Dict[str, str],
                 onepass: bool = True) -> bool:
    """Print ``s`` through ``out(depth, line)`` if it is one of this module's forms (the
    predicated loads only in a one-pass kernel: ``onepass``, :func:`is_onepass`)."""
    if onepass and isinstance(s, Access) and s.kind == "load" and s.space == "global" and \
            s.width == 8 and s.pred is not None and dtypes.get(s.buf) in _UNPACK:
        w = _word(s.regs.frag, s.regs.idx, f"load {s.tag}")
        out(d, f"{LDZ_FN}(&{s.regs.frag.name}[{w}], {s.buf} + ({to_c(s.offset)}), "
               f"{to_c(s.pred)});")
    elif isinstance(s, VecDot):
        if s.a.dtype != s.b.dtype or s.dst.dtype != "f32":
            raise ValueError(f"cuda printer: dot {s.a.name} . {s.b.name}: one 16-bit type "
                             "into an f32 frag")
        wa = _word(s.a, s.a_items, "dot")
        wb = _word(s.b, s.b_items, "dot")
        out(d, f"{s.dst.name}[{s.item}] = {dot_fn(s.a.dtype)}(&{s.a.name}[{wa}], "
               f"&{s.b.name}[{wb}]);")
    elif isinstance(s, VecAxpy):
        acc = list(s.acc_items)
        if s.acc.dtype != "f32" or acc != list(range(acc[0], acc[0] + 8)):
            raise ValueError(f"cuda printer: axpy into {s.acc.name}: 8 consecutive f32 "
                             f"registers, got {acc}")
        wx = _word(s.x, s.x_items, "axpy")
        out(d, f"{axpy_fn(s.x.dtype)}(&{s.acc.name}[{acc[0]}], {s.p.name}[{s.p_item}], "
               f"&{s.x.name}[{wx}]);")
    elif isinstance(s, LaneXor) and s.method == "shfl_xor" and s.frag is not None:
        if s.op != "sum" or s.frag.dtype != "f32":
            raise ValueError(f"cuda printer: __shfl_xor_sync of {s.frag.name}[{s.item}]: the "
                             "sum of an f32 element")
        e = f"{s.frag.name}[{s.item}]"
        out(d, f"{e} += __shfl_xor_sync(0xffffffffu, {e}, {int(s.pattern)});")
    elif isinstance(s, Access) and s.kind == "store" and s.space == "global" and \
            s.width == 8 and s.regs.frag.dtype == "f32" and dtypes.get(s.buf) in PACK:
        idx = list(s.regs.idx)
        if idx != list(range(idx[0], idx[0] + 8)):
            raise ValueError(f"cuda printer: store {s.tag}: 8 consecutive registers")
        f, pack = s.regs.frag.name, PACK[dtypes[s.buf]]
        words = ", ".join(f"{pack}({f}[{i}], {f}[{i + 1}])" for i in idx[::2])
        line = f"{ST16_FN}({s.buf} + ({to_c(s.offset)}), {words});"
        out(d, f"if ({to_c(s.pred)}) {line}" if s.pred is not None else line)
    else:
        return False
    return True

