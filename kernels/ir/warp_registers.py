"""Statements on a 32-lane NVIDIA warp's registers that the tensor-core split-KV decode
(:mod:`kernels.nvidia.decode_mma`) needs between its ``mma.sync`` instructions (issue 20 item 1,
the split kernel's engine pieces (2)-(4)):

* :class:`PackWord` builds one 32-bit operand word from two 16-bit halves of other registers
  (or a zero): a whole word copied, ``__byte_perm(a, b, 0x5410)`` (the low halves of ``a`` and
  ``b``) or ``__byte_perm(a, b, 0x7632)`` (their high halves).  The decode's Q operand words
  ``{q[2s], 0, q[2s+1], 0}`` and its V^T pairs are such words.
* :class:`ShflBroadcast` is ``dst = __shfl_sync(0xffffffffu, src, lane)``: every lane takes
  the float variable ``src`` of the lane ``lane`` (an index expression of ``tid``) of its own
  warp; the decode broadcasts the rescale factor ``alpha`` from the lane that owns a head's
  scores to the lanes that hold that head's O^T column.  (The xor reductions are
  :class:`~kernels.ir.attention.LaneXor` with ``method="shfl_xor"``.)
* :class:`SplitProbs` splits the f32 probabilities :class:`~kernels.ir.attention.ExpScores`
  wrote in two 16-bit operands: ``hi`` = P rounded and ``lo`` = P - hi rounded, so that two
  ``mma.sync`` per step (``hi`` then ``lo``) keep ~16 mantissa bits of P.
* :class:`RoundProbs` rounds them once into one 16-bit operand (``dst[j] = round16(p[j])``):
  the prefill's ``P`` A operand (:mod:`kernels.nvidia.flash_ir`), one ``mma.sync`` per step.

The rules the verifier applies (:mod:`kernels.verify.warp_register_rules`):

* :class:`PackWord` moves element identities: each destination half holds what its source half
  held (or a constant zero); the ``mma.sync`` rules then check the operand it builds;
* :class:`ShflBroadcast`: ``dst`` is ``src`` of the source lane (its row and maximum version);
  the source lane is computed from the printed expression with hardware semantics (``lane &
  31`` within the warp), so a rescale by it (:class:`~kernels.ir.attention.Rescale`) checks
  that the lane owns the row of the column it scales (``online_softmax``);
* :class:`RoundProbs`: ``dst`` holds the (row, key, maximum version) of ``p`` at the same
  items (the ``mma.sync`` rules then check the product it feeds);
* :class:`SplitProbs`: ``hi`` and ``lo`` hold the (row, key, maximum version) of ``p``; an O
  accumulated from ``hi`` must also be accumulated from ``lo`` for exactly the same keys (each
  part once: "no key twice" counts the pair once, and only a whole pair) before its partial
  or normalisation is taken (``lane_mfma_operands``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from .core import Frag

__all__ = ["PackWord", "ShflBroadcast", "SplitProbs", "RoundProbs", "word_form", "PERM_LO", "PERM_HI"]

PERM_LO, PERM_HI = 0x5410, 0x7632     # __byte_perm selectors: low halves / high halves

Half = Optional[Tuple[Frag, int]]      # (frag, 16-bit element) or None: a zero half


def _is16(f: Frag) -> bool:
    return f.dtype in ("f16", "bf16")


def word_form(lo: Half, hi: Half) -> Tuple[str, Any]:
    """How a word of halves ``(lo, hi)`` is printed: ``("zero", None)``, ``("copy", (frag,
    word))`` or ``("perm", (a, word_a, b, word_b, selector))``; ValueError otherwise."""
    if lo is None and hi is None:
        return "zero", None
    if lo is None or hi is None:
        raise ValueError("pack word: one zero half and one register half has no one-"
                         "instruction form (both halves zero, or neither)")
    (a, i), (b, j) = lo, hi
    if not (_is16(a) and _is16(b)):
        raise ValueError(f"pack word: {a.name} / {b.name} are not 16-bit frags")
    if a is b and i % 2 == 0 and j == i + 1:
        return "copy", (a, i // 2)
    if i % 2 == j % 2:
        return "perm", (a, i // 2, b, j // 2, PERM_LO if i % 2 == 0 else PERM_HI)
    raise ValueError(f"pack word: halves {a.name}[{i}] / {b.name}[{j}]: __byte_perm 0x5410 "
                     "takes two low halves, 0x7632 two high halves")


@dataclass
class PackWord:
    """Word ``word`` of the 16-bit frag ``dst`` (its elements ``2 word`` and ``2 word + 1``) is
    the halves ``lo`` and ``hi`` (see :func:`word_form`)."""

    dst: Frag
    word: int
    lo: Half
    hi: Half

    def __post_init__(self) -> None:
        if not _is16(self.dst) or not 0 <= 2 * self.word < self.dst.count:
            raise ValueError(f"pack word: {self.dst.name} word {self.word} is not a word of a "
                             "16-bit frag")
        word_form(self.lo, self.hi)


@dataclass
class ShflBroadcast:
    """``const float dst = __shfl_sync(0xffffffffu, src, lane);`` (``lane``: an index
    expression of ``tid``; the hardware reads lane ``lane & 31`` of the warp)."""

    dst: str
    src: str
    lane: Any


@dataclass
class SplitProbs:
    """``hi[j] = round16(p[j])``, ``lo[j] = round16(p[j] - hi[j])`` for the items ``j`` of the
    f32 probabilities ``p`` (:class:`~kernels.ir.attention.ExpScores` wrote them); ``hi`` and
    ``lo`` are 16-bit ``mma.sync`` B operands with the same items."""

    hi: Frag
    lo: Frag
    p: Frag
    items: Tuple[int, ...]

    def __post_init__(self) -> None:
        if not (_is16(self.lo) and _is16(self.hi)) or self.p.dtype != "f32":
            raise ValueError(f"split probs {self.p.name} -> {self.hi.name} + {self.lo.name}: "
                             "f32 probabilities into two 16-bit frags")
        if self.lo is self.hi:
            raise ValueError(f"split probs: hi and lo are the same frag {self.hi.name}")
        if len(self.items) % 2 or list(self.items) != list(range(self.items[0],
                                                               self.items[0] + len(self.items))):
            raise ValueError(f"split probs {self.p.name}: whole words of consecutive items, got "
                             f"{list(self.items)}")


@dataclass
class RoundProbs:
    """``dst[j] = round16(p[j])`` for the items ``j`` of the f32 probabilities ``p``
    (:class:`~kernels.ir.attention.ExpScores` wrote them), whole 32-bit words: one 16-bit
    ``mma.sync`` operand holding P rounded once (round to nearest even, the ``cvt.rn`` of the
    prelude's pack helpers)."""

    dst: Frag
    p: Frag
    items: Tuple[int, ...]

    def __post_init__(self) -> None:
        if not _is16(self.dst) or self.p.dtype != "f32":
            raise ValueError(f"round probs {self.p.name} -> {self.dst.name}: f32 probabilities "
                             "into a 16-bit frag")
        if len(self.items) % 2 or self.items[0] % 2 or \
                list(self.items) != list(range(self.items[0], self.items[0] + len(self.items))):
            raise ValueError(f"round probs {self.p.name}: whole words of consecutive items "
                             f"starting at an even one, got {list(self.items)}")
        if self.items[-1] >= min(self.dst.count, self.p.count):
            raise ValueError(f"round probs: item {self.items[-1]} past {self.dst.name} "
                             f"({self.dst.count}) or {self.p.name} ({self.p.count})")
