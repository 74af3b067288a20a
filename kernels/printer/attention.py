"""Print the attention kernels (:class:`kernels.ir.attention.AttnKernel`) as HIP C++: the
statements of :mod:`kernels.ir.attention` on top of :class:`kernels.printer.hip.Printer`, and
the float helpers they call (the prelude)."""

from __future__ import annotations

from typing import Any, Dict, List

from layoutalg.symbolic import to_c

from ..ir.attention import (LN2, AttnKernel, ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax,
                            MaskScores, MergeFinal, MergeStep, PartialStats, Rescale, RowMax,
                            SoftmaxUpdate, VecAxpy, VecDot)
from ..ir.core import Frag, walk
from ..ir.p_rounding import bf16_helper, p_conversion
from .hip import Printer

__all__ = ["AttnPrinter", "ScalarStatements", "emit_attention"]

_PRELUDE_HEAD = """\
// integer min/max of index math, the float helpers of the softmax
__device__ __forceinline__ int la_imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int la_imax(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int la_f2i(float x) { return __builtin_bit_cast(int, x); }
__device__ __forceinline__ float la_i2f(int x) { return __builtin_bit_cast(float, x); }
"""
_PRELUDE_TAIL = """\
#if defined(LAGEN_EMULATE)
// v_exp_f32 flushes results below 2^-126 to zero; exp2f keeps them (only denormals differ)
__device__ __forceinline__ float la_exp2(float x) { return __builtin_exp2f(x); }
#else
__device__ __forceinline__ float la_exp2(float x) { return __builtin_amdgcn_exp2f(x); }
#endif
"""


# the rtne helper (la_bf16) sits in every attention source's prelude, where it always was
_PRELUDE = _PRELUDE_HEAD + bf16_helper("rtne")[1] + _PRELUDE_TAIL


def _p_roundings(body: Any) -> List[str]:
    """The P roundings other than rtne that the kernel's ExpScores use, in first-use order."""
    seen: List[str] = []
    for s in walk(body):
        if isinstance(s, ExpScores) and s.rounding != "rtne" and s.rounding not in seen:
            seen.append(s.rounding)
    return seen


class ScalarStatements:
    """The scalar statements both attention printers share (:class:`AttnPrinter` for HIP,
    :class:`kernels.printer.cuda_attention.CudaAttnPrinter` for CUDA): one form each, the
    dialect's spellings in the subclass's ``MINMAX_PREFIX`` (before ``min`` / ``max``) and
    ``FLOAT_INIT`` (an :class:`~kernels.ir.attention.FVar` init to its literal)."""

    MINMAX_PREFIX: str
    FLOAT_INIT: Dict[str, str]

    def scalar_stmt(self, s: Any, d: int) -> bool:
        """Print ``s`` if it is a :class:`LetMinMax` or an :class:`FVar`; whether it was."""
        if isinstance(s, LetMinMax):
            self.out(d, f"const int {s.name} = {self.MINMAX_PREFIX}{s.op}({to_c(s.a)}, "
                        f"{to_c(s.b)});")
        elif isinstance(s, FVar):
            self.out(d, f"float {s.name} = {self.FLOAT_INIT[s.init]};")
        else:
            return False
        return True


class AttnPrinter(ScalarStatements, Printer):
    """:class:`kernels.printer.hip.Printer` plus the attention statements."""

    MINMAX_PREFIX = "la_i"
    FLOAT_INIT = {"-inf": "-__builtin_inff()", "0": "0.0f"}

    def stmt(self, s: Any, d: int) -> None:
        k = self.k
        c = k.scale_param
        if self.scalar_stmt(s, d):
            pass
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
            if s.row_guard:
                raise ValueError("hip printer: ExpScores(row_guard=True) is a CUDA form "
                                 "(kernels/printer/cuda_decode.py)")
            self.out(d, f"{s.l} *= {s.alpha};")
            conv = p_conversion(s.p.dtype, s.rounding)
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
            # l is 0 (no visible key: O = 0, lse = -inf), positive, or NaN (a NaN or +inf
            # score in the row): NaN must reach O and lse, since P's 16-bit rounding does not
            # keep NaN (kernels.ir.p_rounding)
            self.out(d + 1, f"const float inv_ = {s.l} == 0.0f ? 0.0f : 1.0f / {s.l};")
            for i in s.items:
                self.out(d + 1, f"{self.elem(s.o, i)} *= inv_;")
            self.out(d + 1, f"{self.elem(s.lse, 0)} = {s.l} == 0.0f ? -__builtin_inff() : "
                            f"({s.mc} + __builtin_log2f({s.l})) * {LN2!r}f;")
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

    def __init__(self, k: AttnKernel) -> None:
        super().__init__(k)
        # helpers of the other P roundings: printed only by the kernels that call them, so a
        # default (rtne) source is unchanged byte for byte
        extra = [bf16_helper(r)[1] for r in _p_roundings(k.body)]
        if extra:
            self.PRELUDE = [_PRELUDE + "".join(extra)]

    def params(self) -> List[str]:
        return super().params() + [f"{p.ctype} {p.name}" for p in self.k.scalars]


def emit_attention(k: AttnKernel, prelude: bool = True) -> str:
    """HIP C++ source of an attention kernel (``prelude=False``: without the include and the
    helper functions, to append to another kernel's source)."""
    return AttnPrinter(k).kernel(prelude)
