"""Tiled copies: the source and destination TV layouts side by side, coloured by thread.

A copy moves value ``v`` of thread ``t`` from ``src(t, v)`` to ``dst(t, v)``; drawing both tiles
with the same thread colours shows at a glance where each thread's vector lands (CuTe's
``print_latex(TiledCopy)`` convention: source left, destination right).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .colors import thread_color
from .grid import HStack, Legend, VStack, grid_or_overview, render
from .svg import Diagram
from .tv_diagram import as_tv, tv_cell_fn, tv_owners

__all__ = ["draw_copy"]


def draw_copy(src: Any, dst: Any, src_tile: Any = None, dst_tile: Any = None, *,
              highlight: Optional[Sequence[int]] = None, title: str = "",
              src_title: str = "source", dst_title: str = "destination",
              max_cells: int = 4096) -> Diagram:
    """Draw a copy: ``src`` and ``dst`` are TV layouts (see :func:`~visualize.draw_tv` inputs).

    Both must have the same number of threads and values (value ``v`` of thread ``t`` moves
    from the source cell holding T<t>V<v> to the destination cell holding T<t>V<v>).
    """
    s_layout, s_tile = as_tv(src, src_tile)
    d_layout, d_tile = as_tv(dst, dst_tile)
    s_own, sT, sV, _ = tv_owners(s_layout, s_tile)
    d_own, dT, dV, _ = tv_owners(d_layout, d_tile)
    notes = []
    if (sT, sV) != (dT, dV):
        notes.append(f"source has {sT}x{sV} (threads x values) but destination {dT}x{dV}: "
                     "this is not one copy")
    T = max(sT, dT)
    panels = []
    for name, own, layout, tile in ((src_title, s_own, s_layout, s_tile),
                                    (dst_title, d_own, d_layout, d_tile)):
        cell = tv_cell_fn(own, T, highlight)
        body, n = grid_or_overview(tile[0], tile[1], cell, "", max_cells=max_cells)
        head = f"{name}: {tile[0]}x{tile[1]} tile, TV {layout}"
        panels.append(VStack([_Title(head), body], gap=4))
        notes += [f"{name}: {x}" for x in n]
    side = HStack(panels, gap=40)
    if side.width > 2400:  # wide tiles read better stacked
        side = VStack(panels, gap=24)
    parts = [side]
    if any(t[0] * t[1] > max_cells for t in (s_tile, d_tile)) and T <= 256:
        parts.append(Legend([(thread_color(t, T), f"T{t}") for t in range(T)],
                            title="thread colours", per_row=16))
    sub = [f"{sT} threads x {sV} values; T<t> V<v> moves from its {src_title} cell to its "
           f"{dst_title} cell; colour = thread"]
    return render(VStack(parts), title=title or "tiled copy", subtitle=sub, notes=notes)


class _Title:
    """A bold panel heading (a Text block with the heading style)."""

    def __init__(self, text: str) -> None:
        from .grid import Text
        self._t = Text([text], size=12, bold_first=True)
        self.width, self.height = self._t.width, self._t.height

    def draw(self, svg, x: float, y: float) -> None:
        self._t.draw(svg, x, y)
