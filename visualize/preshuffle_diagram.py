"""Preshuffled operand storage: which lane of a wave's 16-byte load reads each element.

``draw_preshuffle(layout, vec)`` draws a layout from logical ``(k, n)`` (rows k, columns n) to
storage offsets, such as ``kernels.amd.preshuffle.preshuffle_layout``: each cell shows
``L<lane>`` over ``+<byte>`` and its offset, coloured by lane, where ``vec`` consecutive
elements (16 bytes) are one lane's vector and ``lanes`` vectors one wave's load.  A
fragment-ordered B shows each lane's vector as a short column run of one colour (its k
values) and the 64 lanes of one load tiling a (k block x n tile) rectangle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from layoutalg import Layout
from layoutalg.errors import ShapeError

from .colors import thread_color
from .grid import Cell, grid_or_overview, render
from .layout_diagram import layout_grid
from .svg import Diagram

__all__ = ["draw_preshuffle"]


def draw_preshuffle(layout: Any, vec: int, lanes: int = 64, title: str = "",
                    max_cells: int = 4096) -> Diagram:
    """Rows = k, columns = n of ``layout``; cell colour = the lane whose ``vec``-element vector
    holds the element (offset // vec mod lanes), label = lane and position in the vector."""
    if not isinstance(layout, Layout):
        raise ShapeError(f"draw_preshuffle draws a Layout (k, n) -> offset, got {layout!r}")
    if type(vec) is not int or vec < 1 or type(lanes) is not int or lanes < 1:
        raise ShapeError(f"draw_preshuffle: vec and lanes must be positive integers, got "
                         f"vec={vec!r}, lanes={lanes!r}")
    grid, note = layout_grid(layout)
    R, C = grid.shape
    lane = (grid // vec) % lanes
    load = grid // (vec * lanes)

    def cell(i: int, j: int) -> Cell:
        o = int(grid[i, j])
        return Cell(fill=thread_color(int(lane[i, j]), lanes),
                    lines=(f"L{int(lane[i, j])}", f"+{o % vec}"),
                    tip=f"B[k={i}][n={j}] at offset {o}: load {int(load[i, j])}, lane "
                        f"{int(lane[i, j])}, element {o % vec} of its {vec}-element vector")

    body, notes = grid_or_overview(R, C, cell, "", max_cells=max_cells)
    if note:
        notes.insert(0, note)
    runs = np.diff(grid, axis=0)
    contiguous = R % vec == 0 and bool((runs.reshape(-1, C)[
        np.arange(R - 1) % vec != vec - 1] == 1).all()) if R > 1 else True
    notes.append(f"Each lane's {vec} consecutive k of one column are one {vec}-element vector"
                 f" ({'contiguous in storage' if contiguous else 'NOT contiguous'}); "
                 f"{lanes} lanes = one load of {lanes} vectors.")
    sub = [f"{R} k x {C} n, offsets 0..{int(grid.max())}; colour = lane of the wave load"]
    return render(body, title=title or f"preshuffled {layout}", subtitle=sub, notes=notes)
