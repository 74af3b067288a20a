"""The CUDA forms of the tensor-core decode's warp statements (:mod:`kernels.ir.warp_registers`)
and of :class:`~kernels.ir.attention.LaneXor` on a 32-lane warp, one line each (a statement of
two words prints two lines), for :class:`kernels.printer.cuda_attention.CudaAttnPrinter`:

* :class:`~kernels.ir.warp_registers.PackWord` -> ``dst[w] = 0u;`` / ``dst[w] = src[v];`` /
  ``dst[w] = __byte_perm(a[u], b[v], 0x5410);`` (``0x7632``: the high halves);
* :class:`~kernels.ir.warp_registers.ShflBroadcast` -> ``const float dst =
  __shfl_sync(0xffffffffu, src, lane);``;
* :class:`~kernels.ir.warp_registers.SplitProbs` -> per word ``w`` (items ``i, i + 1``):
  ``hi[w] = lg_pack_*x2(p[i], p[i+1]);`` and ``lo[w] = lg_pack_*x2(p[i] - lg_*_lo(hi[w]),
  p[i+1] - lg_*_hi(hi[w]));`` (the template's rounding of the residual, operation for
  operation);
* :class:`~kernels.ir.warp_registers.RoundProbs` -> per word ``w``: ``dst[w] =
  lg_pack_*x2(p[i], p[i+1]);`` (the form of SplitProbs' ``hi`` line);
* ``LaneXor(method="shfl_xor")`` -> ``v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, P));`` or
  ``v += __shfl_xor_sync(0xffffffffu, v, P);``.

16-bit frags are ``lg_u32`` arrays (element ``i`` in word ``i / 2``, low half first), as
:class:`~kernels.printer.cuda.CudaPrinter` declares them.
"""

from __future__ import annotations

from typing import Any, Callable

from layoutalg.symbolic import to_c

from ..ir.attention import LaneXor
from ..ir.warp_registers import PackWord, RoundProbs, ShflBroadcast, SplitProbs, word_form
from ..nvidia.prelude import PACK

__all__ = ["warp_stmt", "FULL_MASK"]

FULL_MASK = "0xffffffffu"
_UNPACK = {"f16": ("lg_f16_lo", "lg_f16_hi"), "bf16": ("lg_bf16_lo", "lg_bf16_hi")}


def pack_word_line(s: PackWord) -> str:
    kind, how = word_form(s.lo, s.hi)
    dst = f"{s.dst.name}[{s.word}]"
    if kind == "zero":
        return f"{dst} = 0u;"
    if kind == "copy":
        return f"{dst} = {how[0].name}[{how[1]}];"
    a, u, b, v, sel = how
    return f"{dst} = __byte_perm({a.name}[{u}], {b.name}[{v}], 0x{sel:04x});"


def warp_stmt(out: Callable[[int, str], None], s: Any, d: int) -> bool:
    """Print ``s`` through ``out(depth, line)`` if it is one of this module's forms."""
    if isinstance(s, PackWord):
        out(d, pack_word_line(s))
    elif isinstance(s, ShflBroadcast):
        out(d, f"const float {s.dst} = __shfl_sync({FULL_MASK}, {s.src}, {to_c(s.lane)});")
    elif isinstance(s, SplitProbs):
        if s.hi.dtype != s.lo.dtype:
            raise ValueError(f"cuda printer: split probs {s.hi.name} ({s.hi.dtype}) and "
                             f"{s.lo.name} ({s.lo.dtype}) must share a type")
        pack, (lo, hi) = PACK[s.hi.dtype], _UNPACK[s.hi.dtype]
        for i in s.items[::2]:
            w, p0, p1 = i // 2, f"{s.p.name}[{i}]", f"{s.p.name}[{i + 1}]"
            h = f"{s.hi.name}[{w}]"
            out(d, f"{h} = {pack}({p0}, {p1});")
            out(d, f"{s.lo.name}[{w}] = {pack}({p0} - {lo}({h}), {p1} - {hi}({h}));")
    elif isinstance(s, RoundProbs):
        pack = PACK[s.dst.dtype]
        for i in s.items[::2]:
            out(d, f"{s.dst.name}[{i // 2}] = {pack}({s.p.name}[{i}], {s.p.name}[{i + 1}]);")
    elif isinstance(s, LaneXor) and s.method == "shfl_xor":
        if s.frag is not None or s.op not in ("max", "sum"):
            raise ValueError(f"cuda printer: __shfl_xor_sync of {s.var or s.frag.name} "
                             f"({s.op}): a float variable, max or sum")
        x = f"__shfl_xor_sync({FULL_MASK}, {s.var}, {int(s.pattern)})"
        out(d, f"{s.var} = fmaxf({s.var}, {x});" if s.op == "max" else f"{s.var} += {x};")
    else:
        return False
    return True
