"""Search for the LDS layout that makes a write + read pair conflict-free.

:func:`suggest_padding` pads the leading dimension of a tile by ``p`` elements.  It does not
try paddings one by one: the padded layout is built with a sympy symbol ``p`` and the exact
conflict-free set of each access is computed by :mod:`.symbolic`; the answer is the smallest
``p`` in both sets for which every lane vector stays aligned (the vector width is kept).  The
winner is then re-verified with a concrete exhaustive check.

:func:`suggest_swizzle` enumerates ``Swizzle(B, M, S)`` in order of increasing ``B`` (fewest XOR
bits), then ``M``, then ``S``, keeping ``M >= log2(vector elements)`` so no lane vector is split,
and returns the first one for which both accesses are conflict-free (each candidate is proved
with the F2 rank argument and cross-checked exhaustively by :func:`bank_conflicts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple

from ..layout import Layout
from ..swizzle import ComposedLayout, Swizzle
from ..symbolic import index_symbol
from ._model import resolve_model, vector_elems
from .banks import bank_conflicts
from .model import LdsModel
from .result import CheckResult, VerifierBug, VerifyError

__all__ = ["suggest_padding", "suggest_swizzle", "PaddingSuggestion", "SwizzleSuggestion",
           "swizzle_from_triton"]


@dataclass(frozen=True, kw_only=True)
class PaddingSuggestion(CheckResult):
    pad: Optional[int]                       # elements added to the leading dimension
    lds: Optional[Layout]                    # the padded LDS layout
    results: Tuple[Any, ...] = field(repr=False)           # concrete BankResults at ``pad``
    symbolic: Tuple[Any, ...] = field(repr=False)          # SymbolicBankResult per access
    ways_unpadded: Tuple[int, ...]

    def summary(self) -> str:
        if self.pad is None:
            return "suggest_padding: no padding in range makes every access conflict-free"
        return (f"suggest_padding: pad {self.pad} element(s) -> {self.lds} (ways "
                f"{list(self.ways_unpadded)} unpadded -> 1)")

    def details(self) -> Tuple[str, ...]:
        return tuple(f"{r.model.instruction}: {r.conflict_free} conflict-free; aligned for "
                     f"{r.aligned}" for r in self.symbolic)


@dataclass(frozen=True, kw_only=True)
class SwizzleSuggestion(CheckResult):
    swizzle: Optional[Swizzle]
    lds: Any                                  # ComposedLayout(swizzle, 0, tile) (or the tile)
    results: Tuple[Any, ...] = field(repr=False)
    tried: int

    def summary(self) -> str:
        if self.swizzle is None:
            return f"suggest_swizzle: none of {self.tried} candidates is conflict-free"
        return f"suggest_swizzle: {self.swizzle} (candidate {self.tried}) -> {self.lds}"


def _pairs(write: Any, read: Any, write_instruction: str, read_instruction: str,
           write_model: Optional[LdsModel], read_model: Optional[LdsModel], arch: Any):
    out = []
    if write is not None:
        out.append((write, resolve_model(arch, write_instruction, write_model)))
    if read is not None:
        out.append((read, resolve_model(arch, read_instruction, read_model)))
    if not out:
        raise VerifyError("give at least one of write= / read=")
    return out


def _tile(tile_shape: Sequence[int], lead: Any, major: str) -> Layout:
    rows, cols = tile_shape
    if major == "row":
        return Layout((rows, cols), (lead, 1))
    if major == "col":
        return Layout((rows, cols), (1, lead))
    raise VerifyError(f"major must be 'row' or 'col', got {major!r}")


def suggest_padding(tile_shape: Sequence[int], write: Any = None, read: Any = None, *,
                    elem_bytes: int = 2, arch: Any = "gfx942",
                    write_instruction: str = "ds_write_b128",
                    read_instruction: str = "ds_read_b128",
                    write_model: Optional[LdsModel] = None, read_model: Optional[LdsModel] = None,
                    major: str = "row", max_pad: Optional[int] = None) -> PaddingSuggestion:
    """Smallest padding of the leading dimension making ``write`` and ``read`` conflict-free.

    ``tile_shape = (rows, cols)``; the LDS tile is ``(rows, cols):(cols + p, 1)`` (``major=
    "row"``) or ``(rows, cols):(1, rows + p)``.  ``write``/``read`` map (thread, value[, iter])
    to the tile's column-major index (CuTe convention), as in :func:`bank_conflicts` with
    ``lds=``.  Searches ``0 <= p <= max_pad`` (default: one full period, which by the
    periodicity lemma covers every residue).
    """
    if len(tuple(tile_shape)) != 2 or not all(type(x) is int and x > 0 for x in tile_shape):
        raise VerifyError(f"tile_shape must be (rows, cols) positive ints, got {tile_shape!r}")
    pairs = _pairs(write, read, write_instruction, read_instruction, write_model, read_model,
                   arch)
    p = index_symbol("pad")
    lead0 = tile_shape[1] if major == "row" else tile_shape[0]
    lds_sym = _tile(tile_shape, lead0 + p, major)
    if max_pad is None:
        max_pad = max(m.period_bytes for _, m in pairs) // elem_bytes * 2
    if type(max_pad) is not int or max_pad < 0:
        raise VerifyError(f"max_pad must be a non-negative int, got {max_pad!r}")
    sym = tuple(bank_conflicts(a, lds=lds_sym, model=m, elem_bytes=elem_bytes,
                               domain=(0, max_pad)) for a, m in pairs)
    unpadded = tuple(r.ways(0) for r in sym)
    pad = next((x for x in range(max_pad + 1)
                if all(x in r.conflict_free and x in r.aligned for r in sym)), None)
    dom = (f"every pad in [0, {max_pad}] for " + " and ".join(m.instruction for _, m in pairs)
           + " (exact conflict-free sets by the sympy periodicity argument; vectors must stay "
           "aligned)")
    if pad is None:
        best = min(range(max_pad + 1), key=lambda x: (max(r.ways(x) for r in sym), x))
        cex = (f"best pad {best}: ways {[r.ways(best) for r in sym]}, aligned "
               f"{[best in r.aligned for r in sym]}")
        return PaddingSuggestion(check="conflict-free padding", holds=False, method="sympy",
                                 domain=dom, counterexample=cex, pad=None, lds=None, results=(),
                                 symbolic=sym, ways_unpadded=unpadded)
    lds = _tile(tile_shape, lead0 + pad, major)
    conc = tuple(bank_conflicts(a, lds=lds, model=m, elem_bytes=elem_bytes) for a, m in pairs)
    if not all(r.holds and r.aligned for r in conc):
        raise VerifierBug(f"symbolic search picked pad {pad} but the concrete check disagrees: "
                          + "; ".join(r.summary() for r in conc))
    return PaddingSuggestion(check="conflict-free padding", holds=True, method="sympy",
                             domain=dom, pad=pad, lds=lds, results=conc, symbolic=sym,
                             ways_unpadded=unpadded)


def suggest_swizzle(tile_shape: Sequence[int], write: Any = None, read: Any = None, *,
                    elem_bytes: int = 2, arch: Any = "gfx942",
                    write_instruction: str = "ds_write_b128",
                    read_instruction: str = "ds_read_b128",
                    write_model: Optional[LdsModel] = None, read_model: Optional[LdsModel] = None,
                    major: str = "row", max_bits: int = 5) -> SwizzleSuggestion:
    """The first ``Swizzle(B, M, S)`` (by B, then M, then S) making both accesses conflict-free.

    The LDS layout is ``Swizzle(B, M, S) o 0 o tile`` with the compact ``tile`` of
    ``tile_shape`` (``major`` as in :func:`suggest_padding`).  ``M`` starts at
    log2(widest lane vector), so vectors stay whole; ``B <= max_bits``; the swizzle's bits stay
    inside the tile so it permutes the tile.  ``B = 0`` (no swizzle) is tried first.
    """
    if len(tuple(tile_shape)) != 2 or not all(type(x) is int and x > 0 for x in tile_shape):
        raise VerifyError(f"tile_shape must be (rows, cols) positive ints, got {tile_shape!r}")
    pairs = _pairs(write, read, write_instruction, read_instruction, write_model, read_model,
                   arch)
    rows, cols = tile_shape
    tile = _tile(tile_shape, cols if major == "row" else rows, major)
    size = rows * cols
    if size & (size - 1):
        raise VerifyError(f"tile size {size} is not a power of two; XOR swizzles need one "
                          "(try suggest_padding)")
    nbits = size.bit_length() - 1
    m_min = max(vector_elems(m, elem_bytes) for _, m in pairs).bit_length() - 1
    tried = 0
    cands = [(0, m_min, 0)] + [(b, mm, s) for b in range(1, max_bits + 1)
                               for mm in range(m_min, nbits) for s in range(b, nbits)
                               if mm + s + b <= nbits]
    for b, mm, s in cands:
        tried += 1
        sw = Swizzle(b, mm, s)
        lds = tile if b == 0 else ComposedLayout(sw, 0, tile)
        res = tuple(bank_conflicts(a, lds=lds, model=m, elem_bytes=elem_bytes) for a, m in pairs)
        if all(r.holds for r in res):
            meth = "f2" if all(r.method == "f2" for r in res) else "exhaustive"
            dom = (f"candidates Swizzle(B, M, S) with B <= {max_bits}, M >= {m_min}, "
                   f"M + S + B <= {nbits}, in (B, M, S) order: the first {tried - 1} fail; this "
                   f"one is proved conflict-free for " + " and ".join(
                       m.instruction for _, m in pairs) + f" ({meth})")
            return SwizzleSuggestion(check="conflict-free swizzle", holds=True, method=meth,
                                     domain=dom, swizzle=None if b == 0 else sw, lds=lds,
                                     results=res, tried=tried)
    dom = f"all {tried} candidates Swizzle(B, M, S), B <= {max_bits}, M >= {m_min}"
    return SwizzleSuggestion(check="conflict-free swizzle", holds=False, method="exhaustive",
                             domain=dom, counterexample="every candidate leaves a bank conflict "
                             "(try suggest_padding or a different access)", swizzle=None,
                             lds=tile, results=(), tried=tried)


def swizzle_from_triton(vec: int, per_phase: int, max_phase: int, row_elems: int) -> Swizzle:
    """Triton's ``SwizzledSharedEncoding(vec, perPhase, maxPhase)`` on a row-major tile as a
    CuTe ``Swizzle`` on the element offset.

    Triton stores element (row, col) at ``row * row_elems + ((col // vec) ^ phase) * vec +
    col % vec`` with ``phase = (row // per_phase) % max_phase``.  With powers of two that XORs
    log2(max_phase) row bits, starting at offset bit log2(row_elems * per_phase), into the
    column bits starting at log2(vec): ``Swizzle(log2 max_phase, log2 vec,
    log2(row_elems * per_phase) - log2 vec)``.
    """
    for name, v in (("vec", vec), ("per_phase", per_phase), ("max_phase", max_phase),
                    ("row_elems", row_elems)):
        if type(v) is not int or v <= 0 or v & (v - 1):
            raise VerifyError(f"{name} = {v!r} must be a power of two")
    if max_phase * vec > row_elems:
        raise VerifyError(f"max_phase * vec = {max_phase * vec} exceeds the row ({row_elems}): "
                          "not a permutation of the row's vectors")
    b = max_phase.bit_length() - 1
    m = vec.bit_length() - 1
    s = (row_elems * per_phase).bit_length() - 1 - m
    return Swizzle(b, m, s)
