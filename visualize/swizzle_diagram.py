"""Swizzles: a tile's offsets before and after ``Sw<B,M,S>``.

Cells show the offset; the colour is what the swizzle permutes, so its effect is visible:

* ``color_by="chunk"`` (default): bits ``[M, M+B)`` of the offset, i.e. which ``2^M``-element
  vector slot of a ``2^(M+B)``-element row the offset falls in.  Unswizzled columns have one
  colour each; swizzled ones form the XOR diagonals.
* ``color_by="bank"``: the LDS bank of the element's first byte (``elem_bytes``, 32 banks of 4
  bytes by default, gfx942).
* ``color_by="offset"``: the plain offset ramp.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from layoutalg import ComposedLayout, Layout, Swizzle
from layoutalg.errors import ShapeError

from .colors import category_color, offset_color
from .grid import Cell, HStack, Legend, Text, VStack, grid_or_overview, render
from .layout_diagram import layout_grid
from .svg import Diagram

__all__ = ["draw_swizzle"]


def _split(layout: Any, swizzle: Optional[Swizzle]):
    """(swizzle, offset, inner layout) from a ComposedLayout or a Layout plus a Swizzle."""
    if isinstance(layout, str):
        from layoutalg import parse
        layout = parse(layout)
    if isinstance(layout, ComposedLayout):
        if not isinstance(layout.outer, Swizzle):
            raise ShapeError(f"draw_swizzle needs a swizzle outside: {layout}")
        if swizzle is not None and swizzle != layout.outer:
            raise ShapeError(f"{layout} already has swizzle {layout.outer}, not {swizzle}")
        return layout.outer, layout.offset, layout.inner
    if isinstance(layout, Layout):
        if swizzle is None:
            raise ShapeError("draw_swizzle(layout, swizzle): give the Swizzle to apply")
        return swizzle, 0, layout
    raise ShapeError(f"draw_swizzle takes a Layout (+ Swizzle) or Sw o off o Layout, got {layout!r}")


def draw_swizzle(layout: Any, swizzle: Optional[Swizzle] = None, *, color_by: str = "chunk",
                 elem_bytes: int = 2, banks: int = 32, bank_bytes: int = 4, title: str = "",
                 max_cells: int = 4096) -> Diagram:
    """Draw ``layout`` before and after the swizzle (``Sw o 0 o L`` or ``L`` plus ``Sw``)."""
    sw, off, inner = _split(layout, swizzle)
    composed = ComposedLayout(sw, off, inner)
    before, note = layout_grid(inner)
    before = before + off
    after, _ = layout_grid(composed)
    B, M = sw.bits, sw.base
    if color_by == "chunk":
        n = 1 << B
        key = lambda v: (v >> M) & (n - 1)  # noqa: E731
        fill = lambda k: category_color(k, n)  # noqa: E731
        legend = Legend([(category_color(k, n), str(k)) for k in range(n)],
                        title=f"colour = offset bits [{M},{M + B}) (vector slot of {1 << M} "
                              f"elements)", per_row=16)
    elif color_by == "bank":
        key = lambda v: (v * elem_bytes // bank_bytes) % banks  # noqa: E731
        fill = lambda k: category_color(k, banks)  # noqa: E731
        legend = Legend([(category_color(k, banks), f"b{k}") for k in range(banks)],
                        title=f"colour = LDS bank of the element ({elem_bytes}-byte elements, "
                              f"{banks} banks x {bank_bytes} B)", per_row=16)
    elif color_by == "offset":
        hi = max(1, int(max(before.max(), after.max())))
        key = lambda v: v  # noqa: E731
        fill = lambda k: offset_color(k / hi)  # noqa: E731
        legend = None
    else:
        raise ShapeError(f"color_by must be 'chunk', 'bank' or 'offset', got {color_by!r}")

    def panel(grid: np.ndarray, head: str):
        R, C = grid.shape

        def cell(i: int, j: int) -> Cell:
            v = int(grid[i, j])
            return Cell(fill=fill(key(v)), lines=(str(v),))

        body, notes = grid_or_overview(R, C, cell, "", max_cells=max_cells)
        return VStack([Text([head], size=12, bold_first=True), body], gap=4), notes

    p1, n1 = panel(before, f"before: {inner}" + (f" + {off}" if off else ""))
    p2, n2 = panel(after, f"after: {composed}")
    side = HStack([p1, p2], gap=40)
    if side.width > 2000:  # long rows: stack so each panel stays wide enough to read
        side = VStack([p1, p2], gap=24)
    parts = [side] + ([legend] if legend else [])
    R, C = before.shape
    sub = [f"{sw}: XOR offset bits [{M + max(0, sw.shift)},{M + max(0, sw.shift) + B}) into "
           f"bits [{M - min(0, sw.shift)},{M - min(0, sw.shift) + B}); {R}x{C} tile, cell = offset"]
    notes = ([note] if note else []) + n1
    return render(VStack(parts), title=title or f"swizzle {sw} on {inner}", subtitle=sub,
                  notes=notes)
