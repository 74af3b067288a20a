"""Print an attention-style :class:`kernels.ir.attention.AttnKernel` as CUDA C++: the statements
of :class:`kernels.printer.cuda.CudaPrinter` plus by-value scalar parameters, float variables,
f32 global loads, 4-wide 16-bit output stores and the log-sum-exp merge of
:mod:`kernels.ir.lse_merge` (the NVIDIA split-KV decode's combine kernel,
:mod:`kernels.nvidia.decode_mma_ir`).

Each statement prints as ONE line, which :func:`kernels.verify.source_text.read_cuda_source`
reads back for the ``printed_source`` check:

* ``const int x = min(a, b);`` (:class:`~kernels.ir.attention.LetMinMax`, CUDA's int ``min``);
* ``float m = LG_NEG_INF;`` / ``float l = 0.f;`` (:class:`~kernels.ir.attention.FVar`);
* ``[if (pred)] lg_ldg_f32x{1,4}(&frag[i], buf + (offset));`` (an f32 global load);
* ``[if (pred)] lg_st_u32x2(buf + (offset), lg_pack_*x2(o[i], o[i+1]), lg_pack_*x2(...));`` (4
  f32 registers rounded to a 16-bit output);
* the one-pass decode's dot products, axpys, frag-element shuffles and 16-byte stores
  (:mod:`kernels.printer.cuda_onepass`);
* the warp statements of :mod:`kernels.printer.cuda_warp` (operand words, shuffles, the
  probabilities split hi + lo) and the split kernel's softmax, loads, stores and warp merge
  (:mod:`kernels.printer.cuda_decode`);
* the ticket statements of :mod:`kernels.printer.cuda_ticket` (``__threadfence``,
  ``atomicAdd`` tickets, the last arrival's branch, the counter reset; f32 loads from L2);
* ``m = fmaxf(m, lse[i]);`` (:class:`~kernels.ir.lse_merge.LseMax`),
  ``lg_lse_merge<N>(m, l, &o[i], &x[j], lse[k]);`` (:class:`~kernels.ir.lse_merge.LseMergeStep`),
  ``lg_lse_normalize<N>(&o[i], l);`` (:class:`~kernels.ir.lse_merge.LseNormalize`).

The helpers (:data:`HELPERS`) follow the template combine kernel's arithmetic
(:func:`kernels.nvidia.decode_splitkv.emit_combine`) operation for operation.
"""

from __future__ import annotations

from typing import Any, List

from layoutalg.symbolic import to_c

from ..ir.attention import AttnKernel
from ..ir.core import Access
from ..ir.lse_merge import LseMax, LseMergeStep, LseNormalize
from ..nvidia.prelude import PACK
from .attention import ScalarStatements
from .cuda import CudaPrinter
from .cuda_decode import decode_helpers, decode_stmt
from .cuda_onepass import is_onepass, onepass_helpers, onepass_stmt
from .cuda_ticket import TICKET_HELPERS, coherent_load_fn, has_ticket, ticket_stmt
from .cuda_warp import warp_stmt

__all__ = ["CudaAttnPrinter", "emit_cuda_attention", "HELPERS"]

HELPERS = r"""#ifndef LG_NEG_INF
#define LG_NEG_INF (-__int_as_float(0x7f800000))
#endif
LG_DEV void lg_ldg_f32x1(float* r, const float* p) { r[0] = *p; }
LG_DEV void lg_ldg_f32x4(float* r, const float* p) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
LG_DEV void lg_st_u32x2(lg_u16* p, lg_u32 a, lg_u32 b) {
  lg_u32x2 r; r.x = a; r.y = b;
  *reinterpret_cast<lg_u32x2*>(p) = r;
}
template <int N> LG_DEV void lg_lse_merge(float m, float& l, float* o, const float* x, float lse) {
  const float w = lg_exp2(lse - m);
  l += w;
  #pragma unroll
  for (int i = 0; i < N; ++i) o[i] = fmaf(w, x[i], o[i]);
}
template <int N> LG_DEV void lg_lse_normalize(float* o, float l) {
  const float inv = 1.f / l;
  #pragma unroll
  for (int i = 0; i < N; ++i) o[i] *= inv;
}
"""


class CudaAttnPrinter(ScalarStatements, CudaPrinter):
    """:class:`~kernels.printer.cuda.CudaPrinter` plus the statements listed in the module
    docstring; anything else an attention kernel holds is refused by name."""

    MINMAX_PREFIX = ""
    FLOAT_INIT = {"-inf": "LG_NEG_INF", "0": "0.f"}

    def stmt(self, s: Any, d: int) -> None:
        if getattr(self, "_onepass", None) is None:
            self._onepass = is_onepass(self.k)
        if self.scalar_stmt(s, d) or \
                onepass_stmt(self.out, s, d, self.buf_dtype, self._onepass) or \
                warp_stmt(self.out, s, d) or \
                decode_stmt(self.out, s, d, self.buf_dtype, self.k.scale_param) or \
                ticket_stmt(self, s, d):
            pass
        elif isinstance(s, LseMax):
            self.out(d, f"{s.m} = fmaxf({s.m}, {self.elem(s.lse, s.item)});")
        elif isinstance(s, LseMergeStep):
            self.out(d, f"lg_lse_merge<{len(s.o_items)}>({s.m}, {s.l}, "
                        f"&{s.o.name}[{s.o_items[0]}], &{s.x.name}[{s.x_items[0]}], "
                        f"{self.elem(s.lse, s.lse_item)});")
        elif isinstance(s, LseNormalize):
            self.out(d, f"lg_lse_normalize<{len(s.items)}>(&{s.o.name}[{s.items[0]}], {s.l});")
        elif isinstance(s, Access) and s.kind == "load" and s.space == "global":
            self.load(s, d)
        elif isinstance(s, Access) and s.kind == "store" and s.width == 4:
            self.store4(s, d)
        elif type(s).__module__.endswith("ir.attention"):
            raise TypeError(f"cuda attention printer: {type(s).__name__} has no CUDA form yet")
        else:
            super().stmt(s, d)

    def _pred(self, a: Access, line: str) -> str:
        return f"if ({to_c(a.pred)}) {line}" if a.pred is not None else line

    def load(self, a: Access, d: int) -> None:
        if self.buf_dtype[a.buf] != "f32" or a.regs.frag.dtype != "f32" or a.width not in (1, 4):
            raise ValueError(f"cuda attention printer: load {a.tag} ({a.width} x "
                             f"{self.buf_dtype[a.buf]} into {a.regs.frag.dtype}): 1 or 4 f32")
        i = self.first(a.regs, f"load {a.tag}")
        # a kernel taking tickets reads other blocks' stores of this launch: from L2
        fn = coherent_load_fn(a.width) if has_ticket(self.k) else f"lg_ldg_f32x{a.width}"
        self.out(d, self._pred(a, f"{fn}(&{a.regs.frag.name}[{i}], {a.buf} + "
                                  f"({to_c(a.offset)}));"))

    def store4(self, a: Access, d: int) -> None:
        bt = self.buf_dtype[a.buf]
        if a.space != "global" or a.regs.frag.dtype != "f32" or bt not in PACK:
            raise ValueError(f"cuda attention printer: store {a.tag}: 4 f32 registers to a "
                             "16-bit global output")
        r = [self.elem(a.regs.frag, i) for i in a.regs.idx]
        self.out(d, self._pred(a, f"lg_st_u32x2({a.buf} + ({to_c(a.offset)}), "
                                  f"{PACK[bt]}({r[0]}, {r[1]}), {PACK[bt]}({r[2]}, {r[3]}));"))

    def helpers(self) -> str:
        return super().helpers() + HELPERS + decode_helpers(self.k) + \
            onepass_helpers(self.k) + \
            (TICKET_HELPERS if has_ticket(self.k) else "")

    def params(self) -> List[str]:
        return super().params() + [f"{p.ctype} {p.name}" for p in self.k.scalars]


def emit_cuda_attention(k: AttnKernel) -> str:
    """CUDA C++ source of an attention-style kernel (one ``extern "C" __global__`` function)."""
    return CudaAttnPrinter(k).kernel()
