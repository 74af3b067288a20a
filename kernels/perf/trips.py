"""Trip counts of a kernel's MFMA loops, derived from the problem and the tile.

A work-group walks a stream of *work units* along the reduction axis: a GEMM's K-steps, an
attention row block's KV tiles.  The problem and the tile split each work-group's units in two:

* **full** units: every element in bounds and, for attention, every key visible to every query
  row of the block (no mask is needed);
* **boundary** units: the ragged end of K / of the keys, and for causal attention the tiles
  that cross the diagonal (some keys visible to some rows only).

A kernel runs the units through its innermost MFMA loops.  One loop: every unit goes through it.
Two loops doing the same MFMA work per iteration (a full-tile loop and a masked one, as our
flash-attention prefill and FA kernels built as "unmasked stage + masked stage" have): the
masked body is the unmasked body plus the mask, so the **shorter** body (fewer instructions: a
property of the code, not of the simulation) takes the full units and the **longer** one the
boundary units.  Any other shape (loops with different work per iteration, three or more such
loops, wave-specialised roles) has no trip model: :func:`loop_classes` says why and the caller
falls back to the hot loop alone (every unit at its rate, the method before the trip model).

Straight-line MFMA code (a peeled first or last iteration) is not a loop: it is charged as
before, at the issue rate with the rest of the prologue / epilogue, and its units are still
counted in the loop's trips (slightly pessimistic, the same for every kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

__all__ = ["LoopCost", "loop_classes", "gemm_units", "attention_units", "FULL", "BOUNDARY"]

FULL, BOUNDARY = "full", "boundary"


@dataclass(frozen=True)
class LoopCost:
    """One innermost MFMA loop as the whole-kernel estimate uses it."""

    start: int                       # address of the loop header
    end: int                         # address of the back edge
    instructions: int
    flops_per_wg: float              # MFMA flops of one iteration, all waves of a work-group
    cycles_per_iteration: float      # simulated clocks per iteration of one work-group
    mfma_busy: float                 # simulated matrix-pipe busy fraction of the loop
    binding: str = ""


def loop_classes(loops: Sequence[LoopCost]) -> Tuple[Optional[List[Tuple[str, ...]]], str]:
    """The unit classes each loop runs (``[("full", "boundary")]`` for a single loop), or
    ``(None, why)`` when the loops have no trip model (the caller then uses the hot loop)."""
    if not loops:
        return None, "no MFMA loop"
    if len(loops) == 1:
        return [(FULL, BOUNDARY)], "one MFMA loop: every work unit runs through it"
    if len(loops) > 2:
        return None, (f"{len(loops)} innermost MFMA loops: the trip model knows a full-tile "
                      "loop and a boundary (masked) loop, not more")
    a, b = loops
    if not math.isclose(a.flops_per_wg, b.flops_per_wg, rel_tol=1e-9):
        return None, (f"the two MFMA loops do different work per iteration ({a.flops_per_wg:g} "
                      f"and {b.flops_per_wg:g} flops per work-group): not a full-tile / "
                      "boundary pair")
    if a.instructions == b.instructions:
        return None, ("the two MFMA loops have the same length: which one is the masked "
                      "(boundary) loop cannot be told from the code")
    short = 0 if a.instructions < b.instructions else 1
    classes: List[Tuple[str, ...]] = [(), ()]
    classes[short], classes[1 - short] = (FULL,), (BOUNDARY,)
    return classes, ("two MFMA loops with the same work per iteration: the shorter runs the "
                     "full units, the longer (the mask's instructions) the boundary units")


def gemm_units(k: int, step: float) -> Tuple[int, int]:
    """(full, boundary) K-steps of one GEMM work-group: ``step`` K elements per iteration; a
    ragged K leaves one boundary step."""
    total = math.ceil(k / step)
    full = min(total, int(math.floor(k / step + 1e-9)))
    return full, total - full


def attention_units(seqlen: int, tile_m: int, q_block: int, step: float,
                    causal: bool) -> Tuple[int, int]:
    """(full, boundary) KV tiles of query block ``q_block`` (rows ``[q_block * tile_m,
    (q_block + 1) * tile_m)``) with ``step`` keys per iteration, seqlen_q = seqlen_kv.

    Non-causal: every key is visible to every row; only a ragged last tile is boundary.
    Causal (top-left, row ``r`` sees keys ``[0, r]``): the block's first row sees
    ``q0 + 1`` keys, its last row ``min(S, q0 + BM)``; tiles inside the first are full, the
    tiles from there to the last row's end cross the diagonal (boundary); later tiles are
    skipped (fully masked)."""
    q0 = q_block * tile_m
    last = min(seqlen, q0 + tile_m) if causal else seqlen
    first = min(last, q0 + 1) if causal else seqlen
    total = math.ceil(last / step)
    full = min(total, int(math.floor(first / step + 1e-9)))
    return full, total - full
