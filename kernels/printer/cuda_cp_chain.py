"""The source pointers of a run of ``cp.async`` copies printed as a chain of 64-bit pointers
(``meta["cp_src_chain"] = depth``; the warp-specialised ``cp.async`` producer,
:class:`~kernels.nvidia.wgmma_ws_ir.WsOverlapBuilder`).

Printed plainly, each copy's source is ``K + (int index)``: one 32-bit index widened into a
64-bit address per copy, which ptxas builds in the same register pair for every copy of a
block, so each ``cp.async`` waits for the previous one to have read its operands (NVRTC 13.5,
sm_90a; docs/PERFORMANCE.md, the d256 IR prefill's gap).  With a chain, copy ``i`` of a run
(consecutive copies from the same global buffer in one statement list) reads a pointer
declared from the pointer of copy ``i - depth`` (copy 0 for the first ``depth``; the run's
first from the buffer)::

    const lg_u16* lg_src3_0 = K + (offset_0);
    lg_cp_async16(dst_0, lg_src3_0, n_0);
    const lg_u16* lg_src3_1 = lg_src3_0 + (offset_1 - offset_0);
    ...
    const lg_u16* lg_src3_4 = lg_src3_2 + (offset_4 - offset_2);      (depth 2)

so the compiler advances ``depth`` independent 64-bit pointers by a uniform step (the
template's form).  The element offsets are the IR's (their differences simplified by sympy);
the printed-text reader (:mod:`kernels.verify.source_pointers`) resolves each pointer to its
buffer plus the sum of its chain's offsets and checks that against the IR's offset like any
other copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

import sympy

from ..ir.core import If, Loop
from ..ir.nvidia import CpAsync

__all__ = ["ChainLink", "plan_chains", "CHAIN_PREFIX"]

#: the printed name of copy ``i`` of run ``r`` is ``f"{CHAIN_PREFIX}{r}_{i}"``
CHAIN_PREFIX = "lg_src"


@dataclass(frozen=True)
class ChainLink:
    """One copy's source pointer: ``name`` = ``base`` (the global buffer or an earlier
    link's name) ``+ offset`` elements."""

    name: str
    base: str
    offset: Any


def _lists(body: Sequence[Any]):
    yield body
    for s in body:
        if isinstance(s, (Loop, If)):
            yield from _lists(s.body)


def plan_chains(body: Sequence[Any], depth: int) -> Dict[int, ChainLink]:
    """``id(copy) -> ChainLink`` for every :class:`~kernels.ir.nvidia.CpAsync` of ``body``
    (every nested loop / if body) in runs chained ``depth`` deep; empty for ``depth`` 0.  A
    run: consecutive copies of one statement list reading the same global buffer."""
    if depth < 0:
        raise ValueError(f"cp_src_chain depth {depth}: 0 (off) or more")
    if not depth:
        return {}
    out: Dict[int, ChainLink] = {}
    runs: List[List[CpAsync]] = []
    for stmts in _lists(body):
        run: List[CpAsync] = []
        for s in list(stmts) + [None]:
            if isinstance(s, CpAsync) and (not run or run[0].load.buf == s.load.buf):
                run.append(s)
                continue
            if run:
                runs.append(run)
            run = [s] if isinstance(s, CpAsync) else []
    for r, run in enumerate(runs):
        names = [f"{CHAIN_PREFIX}{r}_{i}" for i in range(len(run))]
        for i, c in enumerate(run):
            if i == 0:
                out[id(c)] = ChainLink(names[0], c.load.buf, c.load.offset)
                continue
            b = i - depth if i >= depth else 0
            step = sympy.expand(c.load.offset - run[b].load.offset)
            out[id(c)] = ChainLink(names[i], names[b], step)
    return out
