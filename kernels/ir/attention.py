"""What attention needs beyond :mod:`kernels.ir`: runtime scalar parameters, integer min/max
lets, float per-thread variables, and the softmax statements (mask, row max, cross-lane
exchange, online-softmax update, exponentials, rescale, normalisation).

Every statement here has two readers: :class:`kernels.printer.attention.AttnPrinter` prints
it as HIP C++ and
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


from .core import Frag, Kernel

__all__ = ["ScalarParam", "LetMinMax", "FVar", "MaskScores", "RowMax", "LaneXor",
           "SoftmaxUpdate", "ExpScores", "Rescale", "FinalNormalize", "VecDot", "VecAxpy",
           "PartialStats", "MergeStep", "MergeFinal",
           "AttnKernel", "LOG2E", "LN2",
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
    # CUDA form only (the HIP form is always raw): keep the raw score on the kept branch
    # rather than scaling it to base 2 there; a kernel's MaskScores, SoftmaxUpdate, ExpScores
    # and FinalNormalize are raw together (the verifier refuses a mix): the scale then goes
    # into each exponent's fma, as both prefill templates' softmax does
    # (kernels.nvidia.flash_ir, kernels.nvidia.wgmma_flash_ir; kernels.printer.cuda_decode)
    raw: bool = False


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
    expression of ``tid``; the source lane is ``(addr >> 2) & 63``), or (NVIDIA, a 32-lane warp)
    ``__shfl_xor_sync(0xffffffffu, var, pattern)`` (the source lane is ``lane ^ pattern``)."""

    var: str                     # a float variable, or "" with ``frag``/``item``
    op: str                      # "max" | "sum"
    method: str                  # "swizzle" | "bpermute" | "shfl_xor"
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
    raw: bool = False           # CUDA form: m raw, mc the guarded scaled maximum (MaskScores.raw)
    # raw CUDA form only: ``alpha`` is a float variable declared before (an FVar) and assigned
    # here, not a ``const float`` of the block: it outlives the block, where O is rescaled by it
    # a block later (the warp-specialised prefill's deferred P V wait, kernels.nvidia.wgmma_ws_ir)
    alpha_declared: bool = False

    def __post_init__(self) -> None:
        if self.alpha_declared and not self.raw:
            raise ValueError("SoftmaxUpdate(alpha_declared=True) is the raw CUDA form's "
                             "(raw=True)")


@dataclass
class ExpScores:
    """``l = l * alpha``; for each item: ``e = exp2(fma(s, c, -mc))``, ``l += e``, ``p = e``
    rounded to the P type by ``rounding`` (:mod:`kernels.ir.p_rounding`)."""

    p: Frag
    p_items: Tuple[int, ...]
    s: Frag
    s_items: Tuple[int, ...]
    mc: str
    l: str
    alpha: str
    rounding: str = "rtne"       # f32 -> 16-bit P: one of kernels.ir.p_rounding.P_ROUNDINGS
    # CUDA form only: guard the row's maximum once (``mc`` of a row with no key yet is -inf:
    # subtract 0 instead) rather than every score (``s == -inf ? 0``); the same values, since
    # exp2(-inf - finite) = 0, with two instructions fewer per score (kernels.nvidia.flash_ir)
    row_guard: bool = False
    # CUDA form only: raw scores (MaskScores.raw): ``mc`` is the guarded row maximum already
    # scaled to base 2 (SoftmaxUpdate.raw), each exponent is ``exp2(fma(s, c, -mc))`` and the
    # row sum adds pairs, then ``l = fma(l, alpha, sum)``; no row_guard (mc is guarded)
    raw: bool = False

    def __post_init__(self) -> None:
        if self.raw and self.row_guard:
            raise ValueError("ExpScores(raw=True) takes no row_guard: the raw SoftmaxUpdate's "
                             "mc is already guarded (row_guard=False)")


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
    raw: bool = False           # CUDA form: mc in raw score units (scaled in the lse)


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
