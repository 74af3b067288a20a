"""The GEMM's epilogue scaling: per-tensor or per-row/column scales (fp8/bf8 by default).

``scales="tensor"``: ``C = scale_a[0] * scale_b[0] * (A @ B)``; ``scales="rowcol"``:
``C[m][n] = scale_a[m] * scale_b[n] * (A @ B)[m][n]`` (``scale_a`` of M floats, ``scale_b`` of
N).  The scale loads are ordinary global :class:`~kernels.ir.Access` statements (each scale
vector seen as an ``(extent, 1)`` tensor, so the gate checks their printed offsets, bounds and
predicates like any other load); the multiplication is one :class:`~kernels.ir.Scale`
statement, which changes values only (the emulator checks them).  For rowcol a thread loads
each distinct row and column of its accumulator once.
"""

from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

import sympy

from layoutalg import Layout

from ..ir.core import Access, Comment, Frag, Scale

__all__ = ["scale_frags", "scale_epilogue"]


def _distinct(acc_values: Sequence[Tuple[int, int]]) -> Tuple[List[int], List[int]]:
    return sorted({m for m, _ in acc_values}), sorted({n for _, n in acc_values})


def scale_frags(mode: str, acc_values: Sequence[Tuple[int, int]]) -> List[Frag]:
    """The registers the scales are loaded into (none, ``sc[2]``, or ``sa`` / ``sb`` with one
    element per distinct row / column of the thread's accumulator)."""
    if mode == "none":
        return []
    if mode == "tensor":
        return [Frag("sc", "f32", 2)]
    ms, ns = _distinct(acc_values)
    return [Frag("sa", "f32", len(ms)), Frag("sb", "f32", len(ns))]


def scale_epilogue(mode: str, frags: Sequence[Frag], acc: Frag,
                   acc_values: Sequence[Tuple[int, int]], rows: Tuple[Any, int, int],
                   cols: Tuple[Any, int, int], pred: Callable[[Any], Any]) -> List[Any]:
    """Statements scaling ``acc`` before the write-back.

    ``acc_values[i]``: (m, n) offset of accumulator element i from the thread's base;
    ``rows`` / ``cols``: (the thread's first row / column as an index expression, the matrix
    extent, the block extent); ``pred``: the builder's in-bounds predicate over
    ``[(first, last, extent, block)]`` (None where the extent is a multiple of the block)."""
    if mode == "none":
        return []
    if mode == "tensor":
        sc, = frags
        one = Layout((1, 1), (0, 0))      # a one-element tensor: coordinate (0, 0) -> 0
        out: List[Any] = [Comment("per-tensor scales: C = scale_a[0] * scale_b[0] * (A @ B)")]
        for i, buf in enumerate(("scale_a", "scale_b")):
            out.append(Access("load", "global", buf, 0, 1, sc.regs([i]), None,
                              tag=f"{buf}.load", origin=one, coords=((0, 0),)))
        out.append(Scale(acc, (sc.regs([0]), sc.regs([1]))))
        return out
    sa, sb = frags
    ms, ns = _distinct(acc_values)
    out = [Comment("per-row/column scales: C[m][n] = scale_a[m] * scale_b[n] * (A @ B)[m][n]")]
    for frag, buf, offs, (base, ext, blk) in ((sa, "scale_a", ms, rows),
                                              (sb, "scale_b", ns, cols)):
        vec = Layout((ext, 1), (1, 0))        # an ext-element vector as an (ext, 1) tensor
        for i, d in enumerate(offs):
            x = sympy.expand(base + d)
            out.append(Access("load", "global", buf, x, 1, frag.regs([i]),
                              pred([(x, x, ext, blk)]), tag=f"{buf}.load", origin=vec,
                              coords=((x, 0),)))
    out.append(Scale(acc, (sa.regs([ms.index(m) for m, _ in acc_values]),
                           sb.regs([ns.index(n) for _, n in acc_values]))))
    return out
