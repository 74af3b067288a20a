"""Helpers shared by the GEMM gate (:mod:`kernels.gate`) and the attention gate
(:mod:`kernels.attention_gate`): failure collection, layout-evaluation pieces, the cached LDS
bank check, MFMA lane tables and uint64 bit-set helpers.  The checks themselves stay in the
two gates."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from layoutalg import ComposedLayout, Swizzle

from .errors import KernelError

BYTES = {"f16": 2, "bf16": 2, "f32": 4}


class Fail:
    """First counterexample per check (later ones are counted, not kept)."""

    def __init__(self) -> None:
        self.first: Dict[str, str] = {}
        self.count: Dict[str, int] = {}

    def add(self, check: str, msg: str) -> None:
        self.count[check] = self.count.get(check, 0) + 1
        self.first.setdefault(check, msg)


# ---------------------------------------------------------------------------- layout evaluation

def leaves(c: Any) -> List[Any]:
    """The leaves of a nested tuple, left to right (a non-tuple is its own single leaf)."""
    if isinstance(c, tuple):
        out: List[Any] = []
        for x in c:
            out += leaves(x)
        return out
    return [c]


def compose_offset(origin: Any, off: Any) -> Any:
    """``off`` (the inner layout's offset) through the rest of ``origin``: unchanged for a
    Layout; plus the offset, then the swizzle, for a Swizzle-ComposedLayout."""
    if not isinstance(origin, ComposedLayout):
        return off
    off = off + origin.offset
    sw = origin.outer
    if not isinstance(sw, Swizzle):
        raise KernelError(f"gate: unsupported composed layout {origin}")
    if sw.bits:
        y = off & sw.yyy_mask
        off = off ^ (y >> sw.shift if sw.shift >= 0 else y << -sw.shift)
    return off


# ---------------------------------------------------------------------------- LDS banks

def bank_result(cache: Dict[Any, Any], full: np.ndarray, arch: str, instr: str,
                eb: int) -> Any:
    """:func:`layoutalg.verify.bank_conflicts` (exhaustive) of one wave's element offsets
    ``full`` [lane, element], memoised in ``cache``; the exception instead where it cannot
    check (no phase model for the instruction, bad access...), for the caller to report."""
    from layoutalg.verify import bank_conflicts
    ck = (instr, full.tobytes())
    if ck not in cache:
        try:
            cache[ck] = bank_conflicts(full, arch=arch, instruction=instr, elem_bytes=eb,
                                       method="exhaustive")
        except Exception as e:  # noqa: BLE001 - reported as the check's counterexample
            cache[ck] = e
    return cache[ck]


# ---------------------------------------------------------------------------- MFMA lane tables

def mfma_inverse(lay: Any, shape: Tuple[int, int], lanes: int):
    """``(lane, item)`` tables [shape] of an MFMA operand's TV layout: for every element of
    the tile, the first (lane, item) that holds it."""
    v = lay.values().reshape((lanes, -1), order="F")
    lane = np.full(shape[0] * shape[1], -1)
    item = np.full(shape[0] * shape[1], -1)
    for l in range(v.shape[0]):
        for e in range(v.shape[1]):
            if lane[v[l, e]] < 0:
                lane[v[l, e]] = l
                item[v[l, e]] = e
    if (lane < 0).any():
        raise KernelError(f"gate: MFMA layout {lay} does not cover its {shape} tile")
    return lane.reshape(shape, order="F"), item.reshape(shape, order="F")


# ---------------------------------------------------------------------------- bit sets

def bits_below(n: int, words: int) -> np.ndarray:
    """uint64 words [words] with bits 0 .. n-1 set (bits past 64 * words dropped)."""
    out = np.zeros(words, np.uint64)
    for w in range(words):
        lo, hi = w * 64, min(n, (w + 1) * 64)
        if hi > lo:
            k = hi - lo
            out[w] = np.uint64((1 << k) - 1) if k < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return out


def bits_to_list(words: np.ndarray) -> List[int]:
    """The set bits of uint64 words, as indices (word * 64 + bit), ascending."""
    out = []
    for w, x in enumerate(words):
        x = int(x)
        for b in range(64):
            if x >> b & 1:
                out.append(w * 64 + b)
    return out
