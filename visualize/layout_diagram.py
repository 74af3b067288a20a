"""Plain layouts: the offset ``L(i, j)`` in each cell, rows down, columns right, shaded by offset.

A rank-2 layout draws mode 0 as rows and mode 1 as columns (each mode indexed by its 1-D
colexicographic coordinate, as CuTe's ``print_layout``); a rank-1 layout is a single row; for
rank > 2 the modes after the first are folded into the columns (said in a note).
"""

from __future__ import annotations

from typing import Any, Tuple, Union

import numpy as np

from layoutalg import ComposedLayout, Layout
from layoutalg.errors import ShapeError
from layoutalg.inttuple import flatten

from .colors import offset_color
from .grid import Cell, grid_or_overview, render
from .svg import Diagram

__all__ = ["draw_layout", "layout_grid", "offset_table"]

AnyLayout = Union[Layout, ComposedLayout]


def _check_static(layout: AnyLayout) -> None:
    if not all(type(s) is int for s in flatten(layout.shape)):
        raise ShapeError(f"cannot draw {layout}: its shape is symbolic; substitute integers "
                         "first (layoutalg.symbolic)")


def layout_grid(layout: AnyLayout) -> Tuple[np.ndarray, str]:
    """The offsets as a 2-D int array ``[row, col]`` and a note on how modes were mapped."""
    _check_static(layout)
    vals = np.asarray(layout.values(), dtype=np.int64)  # L(k) for k in colex order
    r = layout.rank if isinstance(layout.shape, tuple) else 1
    if r == 1:
        return vals.reshape(1, -1), ""
    rows = layout[0].size()
    note = "" if r == 2 else (f"rank {r}: mode 0 drawn as rows, modes 1..{r - 1} folded into "
                              "columns (colexicographically)")
    # colex order: mode 0 fastest, so column j of the table is k // rows
    return vals.reshape(-1, rows).T, note


def offset_table(layout: AnyLayout, max_cols: int = 32, max_rows: int = 64) -> str:
    """CuTe ``print_layout``-style text table (columns/rows beyond the limits elided)."""
    grid, note = layout_grid(layout)
    R, C = grid.shape
    cols = list(range(C)) if C <= max_cols else list(range(max_cols - 2)) + [-1, C - 1]
    rows = list(range(R)) if R <= max_rows else list(range(max_rows - 2)) + [-1, R - 1]
    w = max(len(str(int(grid.max()))), len(str(int(grid.min()))), len(str(C - 1))) + 1
    hw = len(str(R - 1)) + 1
    out = []
    head = " " * hw + "".join(("..".rjust(w) if j < 0 else str(j).rjust(w)) for j in cols)
    out.append(head)
    for i in rows:
        if i < 0:
            out.append("..".rjust(hw))
            continue
        out.append(str(i).rjust(hw) + "".join(
            ("..".rjust(w) if j < 0 else str(int(grid[i, j])).rjust(w)) for j in cols))
    if note:
        out.append(f"({note})")
    return "\n".join(out)


def draw_layout(layout: Any, title: str = "", max_cells: int = 4096, **kw: Any) -> Diagram:
    """Draw a Layout or ComposedLayout (offset per cell, shaded); TV layouts go to ``draw_tv``.

    ``max_cells``: above this many cells an overview plus a labelled 32x32 detail is drawn.
    """
    from layoutalg.tv import TVLayout
    if isinstance(layout, TVLayout):
        from .tv_diagram import draw_tv
        return draw_tv(layout, title=title, max_cells=max_cells, **kw)
    if isinstance(layout, str):
        from layoutalg import parse
        layout = parse(layout)
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise ShapeError(f"draw_layout draws a Layout or ComposedLayout, got {layout!r}")
    grid, note = layout_grid(layout)
    R, C = grid.shape
    lo, hi = int(grid.min()), int(grid.max())
    span = max(1, hi - lo)
    counts = np.bincount((grid - lo).ravel())
    fills = {v: offset_color((v - lo) / span) for v in np.unique(grid).tolist()}

    def cell(i: int, j: int) -> Cell:
        v = int(grid[i, j])
        dup = counts[v - lo] > 1  # not injective: show it, kernel authors care
        return Cell(fill=fills[v], lines=(str(v),), mark="#000000" if dup else "")

    body, notes = grid_or_overview(R, C, cell, "", max_cells=max_cells)
    if note:
        notes.insert(0, note)
    if (counts > 1).any():
        notes.append(f"Offsets hit more than once are boxed ({int((counts > 1).sum())} offsets; "
                     "the layout is not injective).")
    sub = [f"{R}x{C} cells, offsets {lo}..{hi} (cosize {hi + 1}); shade = offset"]
    return render(body, title=title or str(layout), subtitle=sub, notes=notes)
