"""The consumers' ping-pong of the warp-specialised prefill as IR statements: the two consumer
warpgroups take turns to issue their GEMMs, as the template prints it
(:mod:`.wgmma_attention_ws`, ``pingpong=True``)::

    const int cw = wg - 1;                    // the consumer's index (warpgroup 0 produces)
    if (cw == 1) bar.arrive 1, 256;           // consumer 1 opens consumer 0's first turn
    ...
    bar.sync 1 + cw, 256;                     // wait for my turn
    <wgmma fence, issue, commit>
    if (cw == 0 || !last) bar.arrive 2 - cw, 256;   // hand the turn over

Barrier ``1`` is consumer 0's turn (its ``bar.sync`` and consumer 1's ``bar.arrive``), barrier
``2`` consumer 1's; consumer 1 skips its hand-over after its last GEMM (nobody syncs on
barrier 1 after consumer 0's last turn), so no phase is left part-way.  The statements are
:class:`~kernels.ir.nvidia_tma.NamedBarrier` (``bar.sync`` / ``bar.arrive`` of 256 threads);
the verifier runs them on the per-role model's group-barrier rule beside the consumers'
lockstep dataflow (:mod:`kernels.verify.ring_pingpong`).

Builders call :func:`pingpong_lets` at the top of the consumer role (after ``setmaxnreg``),
:func:`pingpong_open` once before the first turn and :func:`pingpong_turn` around each GEMM
issue.
"""

from __future__ import annotations

from typing import Any, List, Sequence

import sympy

from ..ir.core import If, Let, sym
from ..ir.nvidia_tma import NamedBarrier

__all__ = ["CW", "PINGPONG_THREADS", "pingpong_lets", "pingpong_open", "pingpong_turn",
           "turn_begin", "turn_end"]

#: the consumer's index (0 or 1) the turns are named by
CW = sym("cw")
#: both consumer warpgroups take part in each turn barrier
PINGPONG_THREADS = 256


def pingpong_lets() -> List[Any]:
    """``cw = wg - 1``: the consumer warpgroup's index (warpgroup 0 is the producer)."""
    return [Let("cw", sym("wg") - 1)]


def pingpong_open() -> List[Any]:
    """Consumer 1's opening ``bar.arrive 1, 256``: consumer 0 takes the first turn."""
    return [If(sympy.Eq(CW, 1), [NamedBarrier(1, PINGPONG_THREADS, arrive=True)])]


def turn_begin() -> List[Any]:
    """``bar.sync 1 + cw, 256``: wait for this consumer's turn."""
    return [NamedBarrier(1 + CW, PINGPONG_THREADS)]


def turn_end(last: Any = sympy.false) -> List[Any]:
    """``bar.arrive 2 - cw, 256``: hand the turn over -- skipped by consumer 1 where ``last``
    (a condition: this is its last GEMM) holds."""
    hand_over = NamedBarrier(2 - CW, PINGPONG_THREADS, arrive=True)
    if sympy.sympify(last) is sympy.false:      # Python's False too
        return [hand_over]
    return [If(sympy.Or(sympy.Eq(CW, 0), sympy.Not(last)), [hand_over])]


def pingpong_turn(issue: Sequence[Any], last: Any = sympy.false) -> List[Any]:
    """``issue`` (a GEMM's fence, wgmmas and commit) inside the consumer's turn:
    :func:`turn_begin` before, :func:`turn_end` after."""
    return [*turn_begin(), *issue, *turn_end(last)]
