"""What attention needs beyond :mod:`kernels.ir`: runtime scalar parameters, integer min/max
lets, float per-thread variables, and the softmax statements (mask, row max, cross-lane
exchange, online-softmax update, exponentials, rescale, normalisation), plus their printer.

Every statement here has two readers: :class:`AttnPrinter` prints it as HIP C++ and
:mod:`kernels.attention_gate` interprets it on element identities (which query row, which key,
which reduction indices a register holds).  Index expressions inside them (mask coordinates,
conditions, ``ds_bpermute`` addresses) are sympy objects printed with ``to_c`` and evaluated by
the gate with :func:`kernels.ir.c_eval`, so what is checked is what is printed.

Value arithmetic (``exp2``, ``fma``, ``max``) is not proved here: the emulator tests check it
numerically against torch.  The gate proves the dataflow: that each exponent uses the maximum
of its own row, that exchanged lanes hold the same row, that rescales and normalisations pair
the right rows and versions of the running maximum, and that the keys summed are exactly the
visible ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import sympy

from layoutalg.symbolic import to_c

from ..printer.hip import _Printer
from .core import Frag, Kernel

__all__ = ["ScalarParam", "LetMinMax", "FVar", "MaskScores", "RowMax", "LaneXor",
           "SoftmaxUpdate", "ExpScores", "Rescale", "FinalNormalize", "VecDot", "VecAxpy",
           "PartialStats", "MergeStep", "MergeFinal",
           "AttnKernel", "AttnPrinter", "emit_attention", "LOG2E", "LN2",
           "swizzle_source_lane", "runtime_symbol"]

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def runtime_symbol(name: str, signed: bool = False) -> sympy.Symbol:
    """A runtime kernel argument as an integer symbol (``signed`` ones may be negative)."""
    if signed:
        return sympy.Symbol(name, integer=True)
    return sympy.Symbol(name, integer=True, nonnegative=True)


@dataclass(frozen=True)
class ScalarParam:
    """A by-value kernel argument: ``int`` (sizes, strides, offsets) or ``float``."""

    name: str
    ctype: str = "int"


@dataclass
class LetMinMax:
    """``const int name = la_imin(a, b)`` (or ``la_imax``): a and b are index expressions."""

    name: str
    op: str                      # "min" | "max"
    a: Any
    b: Any


@dataclass
class FVar:
    """A per-thread float variable ``float name = init;`` (init: "-inf" or "0")."""

    name: str
    init: str


@dataclass
class MaskScores:
    """``s[item] = cond ? s[item] : -inf`` for each item; ``rows``/``keys`` are the query row and
    key the item holds (from the layouts), ``conds`` the printed visibility conditions."""

    frag: Frag
    items: Tuple[int, ...]
    rows: Tuple[Any, ...]
    keys: Tuple[Any, ...]
    conds: Tuple[Any, ...]


@dataclass
class RowMax:
    """``dst = max(items of frag)`` (a fresh per-lane partial maximum)."""

    dst: str
    frag: Frag
    items: Tuple[int, ...]


@dataclass
class LaneXor:
    """``var = op(var, var of the source lane)``: ``ds_swizzle`` bit mode with ``pattern`` (the
    source lane follows from the pattern) or ``ds_bpermute`` with byte address ``addr`` (an index
    expression of ``tid``; the source lane is ``(addr >> 2) & 63``)."""

    var: str                     # a float variable, or "" with ``frag``/``item``
    op: str                      # "max" | "sum"
    method: str                  # "swizzle" | "bpermute"
    pattern: Optional[int] = None
    addr: Any = None
    note: str = ""
    frag: Optional[Frag] = None  # exchange an element of a frag instead of a variable
    item: int = 0


@dataclass
class SoftmaxUpdate:
    """Online softmax: ``m_new = max(m, m_tile)``; ``alpha = exp2((m - m_new') * c)``;
    ``mc = m_new' * c`` where ``m_new'`` is ``m_new`` with -inf replaced by 0 (a row with no
    visible key so far), ``c = scale * log2(e)``; then ``m = m_new``."""

    m: str
    m_tile: str
    alpha: str
    mc: str


@dataclass
class ExpScores:
    """``l = l * alpha``; for each item: ``e = exp2(fma(s, c, -mc))``, ``l += e``, ``p = e``
    rounded to the P type."""

    p: Frag
    p_items: Tuple[int, ...]
    s: Frag
    s_items: Tuple[int, ...]
    mc: str
    l: str
    alpha: str


@dataclass
class Rescale:
    """``frag[items] *= alpha`` (the accumulator follows the new running maximum)."""

    frag: Frag
    items: Tuple[int, ...]
    alpha: str


@dataclass
class FinalNormalize:
    """``o[items] *= (l > 0 ? 1 / l : 0)``; ``lse[0] = l > 0 ? (mc + log2 l) * ln 2 : -inf``."""

    o: Frag
    items: Tuple[int, ...]
    l: str
    mc: str
    lse: Frag


@dataclass
class VecDot:
    """Decode: ``dst[item] = sum_j a[a_items[j]] * b[b_items[j]]`` in f32 (a partial dot product
    of this lane's elements; the lanes' partials are combined by :class:`LaneXor`)."""

    dst: Frag
    item: int
    a: Frag
    a_items: Tuple[int, ...]
    b: Frag
    b_items: Tuple[int, ...]


@dataclass
class VecAxpy:
    """Decode: ``acc[acc_items[j]] += p[p_item] * x[x_items[j]]`` in f32."""

    acc: Frag
    acc_items: Tuple[int, ...]
    p: Frag
    p_item: int
    x: Frag
    x_items: Tuple[int, ...]


@dataclass
class PartialStats:
    """Split-KV: ``m_out[0] = m * c`` (the running maximum in log2 units, -inf for a split that
    saw no key) and ``l_out[0] = l`` next to the UNnormalised accumulator ``o[items]``: the
    partial ``(max, sum, O)`` of one KV split, ``O = sum_k exp2(s_k c - m c) v_k``."""

    o: Frag
    items: Tuple[int, ...]
    l: str
    m: str
    m_out: Frag
    l_out: Frag


@dataclass
class MergeStep:
    """Split-KV reduction, one split (log-sum-exp merge, online over the splits)::

        mn = max(M, ms); mu = mn == -inf ? 0 : mn; a = exp2(M - mu); w = exp2(ms - mu)
        L = L a + w ls;  o[j] = o[j] a + w x[j];  M = mn

    ``ms``/``ls``/``x`` are the split's partial max (log2 units), sum and unnormalised O."""

    o: Frag
    o_items: Tuple[int, ...]
    x: Frag
    x_items: Tuple[int, ...]
    mp: Frag
    mp_item: int
    lp: Frag
    lp_item: int
    m: str
    l: str


@dataclass
class MergeFinal:
    """``o[items] *= (L > 0 ? 1 / L : 0)``; ``lse[0] = L > 0 ? (M + log2 L) ln 2 : -inf`` (M in
    log2 units): printed like :class:`FinalNormalize`."""

    o: Frag
    items: Tuple[int, ...]
    l: str
    mc: str
    lse: Frag


@dataclass
class AttnKernel(Kernel):
    """A :class:`kernels.ir.Kernel` with by-value scalar parameters (after the pointers) and
    grid symbols bound to ``blockIdx.{x,y,z}``."""

    scalars: List[ScalarParam] = field(default_factory=list)
    scale_param: str = "scale_log2"


def swizzle_source_lane(pattern: int, lane: Any) -> Any:
    """The lane a ``ds_swizzle_b32`` reads from (hardware semantics; numpy arrays welcome)."""
    import numpy as np
    lane = np.asarray(lane)
    if pattern & 0x8000:
        return (lane & ~3) | ((pattern >> (2 * (lane & 3))) & 3)
    and_m, or_m, xor_m = pattern & 0x1F, (pattern >> 5) & 0x1F, (pattern >> 10) & 0x1F
    return (lane & 0x20) | ((((lane & 0x1F) & and_m) | or_m) ^ xor_m)


_PRELUDE = """\
// integer min/max of index math, the float helpers of the softmax
__device__ __forceinline__ int la_imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int la_imax(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int la_f2i(float x) { return __builtin_bit_cast(int, x); }
__device__ __forceinline__ float la_i2f(int x) { return __builtin_bit_cast(float, x); }
// f32 -> bf16 bits, round to nearest even, quiet NaN: lagen_f32_to_bf16 without a branch
__device__ __forceinline__ short la_bf16(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  const unsigned r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (short)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}
#if defined(LAGEN_EMULATE)
// v_exp_f32 flushes results below 2^-126 to zero; exp2f keeps them (only denormals differ)
__device__ __forceinline__ float la_exp2(float x) { return __builtin_exp2f(x); }
#else
__device__ __forceinline__ float la_exp2(float x) { return __builtin_amdgcn_exp2f(x); }
#endif
"""


class AttnPrinter(_Printer):
    """:class:`kernels.emit._Printer` plus the statements of this module."""

    def stmt(self, s: Any, d: int) -> None:
        k = self.k
        c = k.scale_param
        if isinstance(s, LetMinMax):
            self.out(d, f"const int {s.name} = la_i{s.op}({to_c(s.a)}, {to_c(s.b)});")
        elif isinstance(s, FVar):
            init = {"-inf": "-__builtin_inff()", "0": "0.0f"}[s.init]
            self.out(d, f"float {s.name} = {init};")
        elif isinstance(s, MaskScores):
            for i, cond in zip(s.items, s.conds):
                e = self.elem(s.frag, i)
                self.out(d, f"{e} = ({to_c(cond)}) ? {e} : -__builtin_inff();")
        elif isinstance(s, RowMax):
            es = [self.elem(s.frag, i) for i in s.items]
            self.out(d, f"float {s.dst} = {es[0]};")
            for e in es[1:]:
                self.out(d, f"{s.dst} = __builtin_fmaxf({s.dst}, {e});")
        elif isinstance(s, LaneXor):
            var = self.elem(s.frag, s.item) if s.frag is not None else s.var
            if s.method == "swizzle":
                src = f"la_i2f(__builtin_amdgcn_ds_swizzle(la_f2i({var}), {s.pattern:#06x}))"
            elif s.method == "bpermute":
                src = f"la_i2f(__builtin_amdgcn_ds_bpermute({to_c(s.addr)}, la_f2i({var})))"
            else:
                raise ValueError(f"LaneXor: unknown method {s.method}")
            op = "__builtin_fmaxf({v}, {o})" if s.op == "max" else "{v} + {o}"
            note = f"  // {s.note}" if s.note else ""
            self.out(d, "{" + note)
            self.out(d + 1, f"const float o_ = {src};")
            self.out(d + 1, f"{var} = {op.format(v=var, o='o_')};")
            self.out(d, "}")
        elif isinstance(s, SoftmaxUpdate):
            self.out(d, "{")
            self.out(d + 1, f"const float mn_ = __builtin_fmaxf({s.m}, {s.m_tile});")
            self.out(d + 1, "const float mu_ = mn_ == -__builtin_inff() ? 0.0f : mn_;")
            self.out(d + 1, f"{s.alpha} = la_exp2(({s.m} - mu_) * {c});")
            self.out(d + 1, f"{s.mc} = mu_ * {c};")
            self.out(d + 1, f"{s.m} = mn_;")
            self.out(d, "}")
        elif isinstance(s, ExpScores):
            self.out(d, f"{s.l} *= {s.alpha};")
            conv = {"f16": "(_Float16)", "bf16": "la_bf16", "f32": ""}[s.p.dtype]
            for pi, si in zip(s.p_items, s.s_items):
                self.out(d, "{")
                self.out(d + 1, f"const float e_ = la_exp2(__builtin_fmaf({self.elem(s.s, si)}, "
                                f"{c}, -{s.mc}));")
                self.out(d + 1, f"{s.l} += e_;")
                self.out(d + 1, f"{self.elem(s.p, pi)} = {conv}(e_);")
                self.out(d, "}")
        elif isinstance(s, Rescale):
            for i in s.items:
                self.out(d, f"{self.elem(s.frag, i)} *= {s.alpha};")
        elif isinstance(s, PartialStats):
            self.out(d, f"{self.elem(s.m_out, 0)} = {s.m} * {c};  // -inf * c = -inf: empty split")
            self.out(d, f"{self.elem(s.l_out, 0)} = {s.l};")
        elif isinstance(s, MergeStep):
            self.out(d, "{")
            self.out(d + 1, f"const float ms_ = {self.elem(s.mp, s.mp_item)};")
            self.out(d + 1, f"const float ls_ = {self.elem(s.lp, s.lp_item)};")
            self.out(d + 1, f"const float mn_ = __builtin_fmaxf({s.m}, ms_);")
            self.out(d + 1, "const float mu_ = mn_ == -__builtin_inff() ? 0.0f : mn_;")
            self.out(d + 1, f"const float a_ = la_exp2({s.m} - mu_);")
            self.out(d + 1, "const float w_ = la_exp2(ms_ - mu_);")
            self.out(d + 1, f"{s.l} = __builtin_fmaf({s.l}, a_, w_ * ls_);")
            for i, j in zip(s.o_items, s.x_items):
                e = self.elem(s.o, i)
                self.out(d + 1, f"{e} = __builtin_fmaf({e}, a_, w_ * {self.elem(s.x, j)});")
            self.out(d + 1, f"{s.m} = mn_;")
            self.out(d, "}")
        elif isinstance(s, (FinalNormalize, MergeFinal)):
            self.out(d, "{")
            self.out(d + 1, f"const float inv_ = {s.l} > 0.0f ? 1.0f / {s.l} : 0.0f;")
            for i in s.items:
                self.out(d + 1, f"{self.elem(s.o, i)} *= inv_;")
            self.out(d + 1, f"{self.elem(s.lse, 0)} = {s.l} > 0.0f ? ({s.mc} + "
                            f"__builtin_log2f({s.l})) * {LN2!r}f : -__builtin_inff();")
            self.out(d, "}")
        elif isinstance(s, VecDot):
            dst = self.elem(s.dst, s.item)
            pairs = list(zip(s.a_items, s.b_items))
            i0, j0 = pairs[0]
            self.out(d, f"{dst} = {self._f32(s.a, i0)} * {self._f32(s.b, j0)};")
            for i, j in pairs[1:]:
                self.out(d, f"{dst} = __builtin_fmaf({self._f32(s.a, i)}, {self._f32(s.b, j)}, "
                            f"{dst});")
        elif isinstance(s, VecAxpy):
            p = self.elem(s.p, s.p_item)
            for i, j in zip(s.acc_items, s.x_items):
                e = self.elem(s.acc, i)
                self.out(d, f"{e} = __builtin_fmaf({p}, {self._f32(s.x, j)}, {e});")
        else:
            super().stmt(s, d)

    def _f32(self, f: Frag, i: int) -> str:
        e = self.elem(f, i)
        if f.dtype == "bf16":
            return f"lagen_bf16_to_f32((unsigned short){e})"
        if f.dtype == "f16":
            return f"(float){e}"
        return e

    BANNER = "// Generated by layoutalg (kernels.attention): do not edit."
    PRELUDE = [_PRELUDE]

    def params(self) -> List[str]:
        return super().params() + [f"{p.ctype} {p.name}" for p in self.k.scalars]


def emit_attention(k: AttnKernel, prelude: bool = True) -> str:
    """HIP C++ source of an attention kernel (``prelude=False``: without the include and the
    helper functions, to append to another kernel's source)."""
    return AttnPrinter(k).kernel(prelude)
