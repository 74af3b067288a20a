"""Proofs over GF(2) for power-of-two and XOR-swizzled layouts.

When an access ``(lane, value, iteration...) -> element offset`` is affine over GF(2) (see
:mod:`layoutalg.f2`), every instruction issue computes ``A(lane, v) = K ^ L(lane) ^ v``: a
constant ``K`` that depends only on the issue (wave, value group, k step, tile position,
stage), the *linear* lane part ``L`` and the vector element ``v``.  Bank conflicts then depend
on ``L`` alone:

* the lanes served together form a coset ``c ^ P`` of the phase subspace ``P`` (gfx942
  ``ds_read_b128``: ``P = span(1, 2, 20)``, Triton PR 11365);
* two lanes ``x, y`` of a phase touch the same vector ("chunk") iff the chunk bits of
  ``L(x ^ y)`` are 0, and the same banks iff its bank bits are 0;
* so a phase touches ``2^rank(chunk o L|P)`` distinct chunks spread over ``2^rank(bank o L|P)``
  bank groups, each group receiving the same number: ``ways = 2^(r_chunk - r_bank)``, for
  *every* phase of *every* issue, whatever ``K`` is.

That is the whole proof; :func:`prove_banks_f2` returns it with a witness lane pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from ..f2 import F2Error, F2Map, add_offset, f2_rank, swizzle_f2, to_f2
from ..f2 import log2_exact
from ..layout import Layout
from ..swizzle import ComposedLayout, Swizzle
from ..tv import TVLayout
from .model import LdsModel
from .result import VerifierBug, VerifyError

__all__ = ["F2BankProof", "prove_banks_f2", "access_f2", "log2_exact", "f2_span", "cross_check"]


def cross_check(method: str, layout: Any, f2_answer: Callable[[], Any], exhaustive: Any,
                what: str) -> Tuple[str, Tuple[str, ...]]:
    """Answer a question by F2 as well, beside the exhaustive ``exhaustive``: ``(method, notes)``.

    ``method`` is the caller's (``"auto"``, ``"exhaustive"`` or ``"f2"``); ``layout`` is None
    for an offset array.  ``f2_answer()`` raises :class:`~layoutalg.f2.F2Error` when the F2
    view does not apply (a note, or :class:`~.result.VerifyError` under ``method="f2"``);
    otherwise it must equal ``exhaustive`` or :class:`~.result.VerifierBug` is raised.
    """
    if method not in ("auto", "f2"):
        return "exhaustive", ()
    if layout is None:
        if method == "f2":
            raise VerifyError("the F2 method needs a layout, not an offset array")
        return "exhaustive", ()
    try:
        got = f2_answer()
    except F2Error as e:
        if method == "f2":
            raise VerifyError(f"the F2 method does not apply: {e}") from None
        return "exhaustive", (f"F2 view not applicable: {e}",)
    if got != exhaustive:
        raise VerifierBug(f"F2 says {what} {got!r}, exhaustive evaluation says {exhaustive!r} "
                          f"for {layout}")
    return "f2", ()


def _input_cols(full: F2Map, n_in: int) -> list:
    """``full.cols`` padded with zero columns to ``n_in`` input bits."""
    return list(full.cols) + [0] * max(0, n_in - full.n_in)


def vector_misfit(full: F2Map, t_bits: int, v_bits: int, k: int) -> Optional[str]:
    """Why the first ``k`` value bits of ``full`` (thread bits below them) are not one aligned
    ``2^k``-element vector per lane; None when they are.

    They are when value bit j is element bit j and no other input bit (nor the constant) sets
    any of the low ``k`` element bits.
    """
    cols = _input_cols(full, t_bits + v_bits)
    for j in range(k):
        if cols[t_bits + j] != 1 << j:
            return (f"value bit {j} maps to {bin(cols[t_bits + j])}, not element {1 << j}: lane "
                    "vectors are not contiguous in the F2 view")
    low = (1 << k) - 1
    others = [c for n, c in enumerate(cols) if not (t_bits <= n < t_bits + k)]
    if any(c & low for c in others) or full.const & low:
        return f"lane vectors are not aligned to {1 << k} elements in the F2 view"
    return None


def f2_span(basis: Tuple[int, ...]):
    """All ``2^len(basis)`` XOR combinations, as (combination mask, vector) pairs."""
    out = [(0, 0)]
    for k, b in enumerate(basis):
        out += [(m | (1 << k), v ^ b) for m, v in out]
    return out


def access_f2(access: Any, lds: Any = None) -> Tuple[F2Map, F2Map, Optional[Swizzle]]:
    """``(full, pre, swizzle)``: the F2 view of ``lds o access`` and of its pre-swizzle part.

    ``full = swizzle o pre`` when the outermost map is a Swizzle, else ``full = pre`` and
    ``swizzle`` is None.  Raises :class:`~layoutalg.f2.F2Error` when not F2-linear.
    """
    if isinstance(access, TVLayout):
        access = access.layout_tv

    def split(obj: Any, inner_map: Optional[F2Map]):
        # obj maps indices -> offsets; inner_map (if any) produces those indices
        if isinstance(obj, ComposedLayout) and isinstance(obj.outer, Swizzle):
            m = to_f2(obj.inner)
            if inner_map is not None:
                m = m.compose(inner_map)
            return add_offset(m, obj.offset), obj.outer
        if isinstance(obj, (Layout, ComposedLayout)):
            m = to_f2(obj)
            return (m.compose(inner_map) if inner_map is not None else m), None
        raise F2Error(f"no F2 view for {type(obj).__name__}")

    if lds is None:
        pre, sw = split(access, None)
    else:
        if not isinstance(access, Layout):
            raise F2Error("with lds=, the access must be a plain Layout for the F2 view")
        pre, sw = split(lds, to_f2(access))
    if sw is None:
        return pre, pre, None
    full = swizzle_f2(sw, pre.n_out).compose(pre)
    return full, pre, sw


@dataclass(frozen=True)
class F2BankProof:
    """The GF(2) certificate of a bank-conflict verdict (see the module docstring)."""

    phase_basis: Tuple[int, ...]     # lane ids spanning the phase of lane 0
    lane_images: Tuple[int, ...]     # element-offset XOR image L(q) of each basis lane q
    vec_bits: int                    # log2(elements per lane vector)
    bank_bits: int                   # element bits below the bank period
    rank_chunk: int
    rank_bank: int
    varying_mask: int                # pre-swizzle element bits varied by lanes/vector elements
    swizzle: Optional[Swizzle]
    witness: Optional[int]           # a lane of phase 0 conflicting with lane 0

    @property
    def ways(self) -> int:
        return 1 << (self.rank_chunk - self.rank_bank)

    def __str__(self) -> str:
        basis = ", ".join(str(q) for q in self.phase_basis)
        imgs = ", ".join(f"L({q})={bin(i)}" for q, i in zip(self.phase_basis, self.lane_images))
        s = (f"phase subspace P = span({basis}); {imgs}; chunks = element bits >= {self.vec_bits},"
             f" banks = bits [{self.vec_bits}, {self.bank_bits}); rank(chunk o L|P) = "
             f"{self.rank_chunk}, rank(bank o L|P) = {self.rank_bank} -> ways = "
             f"2^{self.rank_chunk - self.rank_bank} = {self.ways}")
        if self.witness is not None:
            s += f"; witness: lanes 0 and {self.witness} (same banks, different vectors)"
        return s


def prove_banks_f2(access: Any, lds: Any, model: LdsModel, elem_bytes: int, threads: int,
                   values: int, vec: int) -> F2BankProof:
    """Bank-conflict ways of ``lds o access`` under ``model`` by GF(2) rank; see module doc.

    Raises :class:`~layoutalg.f2.F2Error` (with the reason) when the F2 argument does not apply:
    non power-of-two extents/strides, non-contiguous or misaligned lane vectors, phases that are
    not cosets of a subspace, or a vector narrower than a bank.
    """
    full, pre, sw = access_f2(access, lds)
    t_bits = log2_exact(threads, "thread count")
    v_bits = log2_exact(values, "values per thread")
    l_bits = log2_exact(model.wave_size, "wave size")
    vec_bits = log2_exact(vec, "vector elements")
    log2_exact(elem_bytes, "elem_bytes")
    period = log2_exact(model.period_bytes // elem_bytes if model.period_bytes >= elem_bytes
                        else 0, "bank period in elements")
    if model.access_bytes < model.bank_bytes:
        raise F2Error(f"{model.instruction} moves {model.access_bytes} B per lane, narrower than "
                      f"a {model.bank_bytes}-byte bank")
    if l_bits > t_bits:
        raise F2Error("fewer threads than a wave")
    basis = model.phase_subspace()
    if basis is None:
        raise F2Error(f"the phases of {model.arch} {model.instruction} are not cosets of a "
                      "GF(2) subspace")
    cols = _input_cols(full, t_bits + v_bits)
    why = vector_misfit(full, t_bits, v_bits, vec_bits)
    if why is not None:
        raise F2Error(why)
    low = vec - 1
    # the verdict is claimed for every issue constant K (a multiple of vec) reaching the lanes
    # as sw(K): that needs a swizzle that never XORs a bit of K into the vector's low bits
    if sw is not None and any(c & low for c in swizzle_f2(sw, full.n_out).cols[vec_bits:]):
        raise F2Error(f"the swizzle {sw} XORs offset bits into the low {vec_bits} bits of a "
                      f"{vec}-element vector: another issue constant could split the lane "
                      "vectors")
    lane_cols = cols[:l_bits]
    images = []
    for q in basis:
        img = 0
        for k in range(l_bits):
            if (q >> k) & 1:
                img ^= lane_cols[k]
        images.append(img)
    bank_mask = (1 << max(0, period - vec_bits)) - 1
    chunk = [i >> vec_bits for i in images]
    bank = [c & bank_mask for c in chunk]
    r_chunk, r_bank = f2_rank(chunk), f2_rank(bank)
    witness = None
    if r_chunk > r_bank:
        for mask, img in f2_span(tuple(images)):
            if (img >> vec_bits) and not ((img >> vec_bits) & bank_mask):
                lane = 0
                for k, q in enumerate(basis):
                    if (mask >> k) & 1:
                        lane ^= q
                witness = lane
                break
    pcols = _input_cols(pre, t_bits + v_bits)
    varying = 0
    for c in pcols[:l_bits] + pcols[t_bits:t_bits + vec_bits]:
        varying |= c
    return F2BankProof(tuple(basis), tuple(images), vec_bits, period, r_chunk, r_bank, varying,
                       sw, witness)
