"""TV layouts: which thread holds which value of a tile.

A TV layout maps ``(thread, value)`` to the column-major index ``m + M * n`` of an ``M x N``
tile (what :func:`layoutalg.make_layout_tv` returns).  Each cell of the tile shows ``T<thread>``
over ``V<value>`` in that thread's colour (one distinct colour per thread, see
:mod:`visualize.colors`).  ``highlight`` fades every other thread; ``isolate`` blanks them.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from layoutalg import Layout
from layoutalg.errors import ShapeError
from layoutalg.inttuple import product_each
from layoutalg.tv import TVLayout

from .colors import EMPTY, fade, thread_color
from .grid import Cell, Grid, Legend, VStack, grid_or_overview, render
from .svg import Diagram

__all__ = ["draw_tv", "tv_owners", "as_tv", "tv_cell_fn", "holder_labels"]


def as_tv(tv: Any, tile_shape: Any = None) -> Tuple[Layout, Tuple[int, int]]:
    """Normalise the accepted inputs to ``(layout_tv, (M, N))``.

    Accepts a :class:`~layoutalg.tv.TVLayout`, the ``(tiler, layout_tv)`` pair that
    ``make_layout_tv`` returns, or a layout plus ``tile_shape``.
    """
    if isinstance(tv, TVLayout):
        layout, tile = tv.layout_tv, tv.tile_shape
    elif isinstance(tv, tuple) and len(tv) == 2 and isinstance(tv[1], Layout):
        tile, layout = tv
    elif isinstance(tv, Layout):
        layout, tile = tv, tile_shape
    else:
        raise ShapeError(f"draw_tv takes a TVLayout, a (tiler, layout_tv) pair or a Layout with "
                         f"tile_shape=, got {tv!r}")
    if tile_shape is not None:
        tile = tile_shape
    if tile is None:
        raise ShapeError(f"TV layout {layout} needs a tile shape (M, N): pass tile_shape=")
    if not isinstance(layout.shape, tuple) or len(layout.shape) != 2:
        raise ShapeError(f"a TV layout has two modes (thread, value); {layout} has "
                         f"{layout.rank if isinstance(layout.shape, tuple) else 1}")
    tile = tuple(product_each(tile)) if isinstance(tile, tuple) else (int(tile),)
    if len(tile) == 1:
        tile = (tile[0], 1)
    if len(tile) != 2:
        raise ShapeError(f"tile shape must be (M, N), got {tile}")
    return layout, (int(tile[0]), int(tile[1]))


def tv_owners(layout: Layout, tile: Tuple[int, int]) -> Tuple[Dict[Tuple[int, int], List[Tuple[int, int]]], int, int, int]:
    """``{(m, n): [(thread, value), ...]}`` in thread-major order, plus T, V and the number of
    (thread, value) pairs that fall outside the tile."""
    T, V = layout[0].size(), layout[1].size()
    M, N = tile
    idx = np.asarray(layout.values(), dtype=np.int64).reshape(V, T).T  # [t, v], t fastest
    owners: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
    outside = 0
    for t in range(T):
        row = idx[t]
        for v in range(V):
            k = int(row[v])
            if k < 0 or k >= M * N:
                outside += 1
                continue
            owners.setdefault((k % M, k // M), []).append((t, v))
    return owners, T, V, outside


def holder_labels(holders: Sequence[Tuple[int, int]], value_prefix: str = "V") -> Tuple[str, str]:
    """Cell text for the (thread, value) pairs holding one element.

    One holder: ``T5`` over ``V3``.  Replicated elements (stride-0 thread modes, WMMA half-waves)
    list two holders, ``T5,21`` over ``V3`` (or ``V3,7`` when the values differ), and ``+k``
    for k more; the tooltip lists all.
    """
    t, v = holders[0]
    if len(holders) == 1:
        return f"T{t}", f"{value_prefix}{v}"
    t2, v2 = holders[1]
    more = f"+{len(holders) - 2}" if len(holders) > 2 else ""
    vals = f"{value_prefix}{v}" if v2 == v else f"{value_prefix}{v},{v2}"
    return f"T{t},{t2}{more}", vals


def tv_cell_fn(owners: Dict[Tuple[int, int], List[Tuple[int, int]]], num_threads: int,
               highlight: Optional[Iterable[int]] = None, isolate: Optional[Iterable[int]] = None,
               value_prefix: str = "V"):
    """A ``cell(i, j)`` function for :func:`~visualize.grid.grid_or_overview`."""
    hi = set(highlight) if highlight is not None else None
    iso = set(isolate) if isolate is not None else None

    def cell(i: int, j: int) -> Cell:
        who = owners.get((i, j))
        if not who:
            return Cell(fill=EMPTY, lines=())
        shown = who
        if iso is not None:
            shown = [p for p in who if p[0] in iso]
            if not shown:
                return Cell(fill="#ffffff", lines=())
        if hi is not None:  # a highlighted holder of a shared element is the one shown
            shown = sorted(shown, key=lambda p: p[0] not in hi)
        t = shown[0][0]
        color = thread_color(t, num_threads)
        lines = holder_labels(shown, value_prefix)
        tip = ("held by " + ", ".join(f"T{a}{value_prefix}{b}" for a, b in shown)
               if len(shown) > 1 else "")
        if hi is not None and t not in hi:
            return Cell(fill=fade(color, 0.8), lines=lines, ink="#9a9a9a", tip=tip)
        mark = "#000000" if hi is not None else ""
        return Cell(fill=color, lines=lines, mark=mark, tip=tip)

    return cell


def draw_tv(tv: Any, tile_shape: Any = None, *, highlight: Optional[Sequence[int]] = None,
            isolate: Optional[Sequence[int]] = None, title: str = "", max_cells: int = 4096,
            legend: Optional[bool] = None) -> Diagram:
    """Draw a TV layout over its tile: ``T<thread>`` over ``V<value>``, coloured by thread.

    ``highlight``: threads drawn in colour with a border, all others faded.
    ``isolate``: only these threads are drawn; other cells are left blank.
    ``legend``: the thread-colour key (default: only when cells are unlabelled, i.e. large).
    """
    layout, tile = as_tv(tv, tile_shape)
    owners, T, V, outside = tv_owners(layout, tile)
    M, N = tile
    cell = tv_cell_fn(owners, T, highlight, isolate)
    body, notes = grid_or_overview(M, N, cell, "", max_cells=max_cells)
    large = M * N > max_cells
    show = sorted(set(isolate)) if isolate is not None else list(range(T))
    if legend or (legend is None and large and len(show) <= 256):
        body = VStack([body] + _thread_legends(show, T))
    if T > 64:  # several waves: where each wave's threads sit, labelled by thread range
        body = VStack([body, _wave_map(owners, T, M, N, max_cells)])
    sub = [f"{T} threads x {V} values over a {M}x{N} tile (rows m, columns n); "
           f"cell = T<thread> over V<value>, colour = thread"]
    if T > 64:
        sub.append(f"{-(-T // 64)} waves of 64: " + ", ".join(_wave_ranges(T)))
    if highlight is not None:
        sub.append("highlighted: " + _threads(highlight) + " (others faded)")
    if isolate is not None:
        sub.append("isolated: " + _threads(isolate) + " (others not drawn)")
    missing = M * N - len(owners)
    if missing:
        notes.append(f"{missing} tile cells are held by no thread (grey).")
    dups = sum(1 for w in owners.values() if len(w) > 1)
    if dups:
        notes.append(f"{dups} cells are held by several (thread, value) pairs: T0,16 means "
                     "threads 0 and 16, +k k more (hover a cell for all).")
    if outside:
        notes.append(f"{outside} (thread, value) pairs map outside the {M}x{N} tile.")
    return render(body, title=title or f"TV layout {layout}", subtitle=sub, notes=notes)


def _wave_ranges(T: int) -> List[str]:
    return [f"wave {w} = T{64 * w}-T{min(T, 64 * w + 64) - 1}" for w in range(-(-T // 64))]


def _thread_legends(show: Sequence[int], T: int) -> List[Any]:
    """The thread-colour key, one block per wave when there are several (titled by range)."""
    if T <= 64:
        return [Legend([(thread_color(t, T), f"T{t}") for t in show], title="thread colours",
                       per_row=16)]
    out = []
    for w, rng in enumerate(_wave_ranges(T)):
        ts = [t for t in show if t // 64 == w]
        if ts:
            out.append(Legend([(thread_color(t, T), f"T{t}") for t in ts],
                              title=f"thread colours, {rng}", per_row=16))
    return out


def _wave_map(owners: Dict[Tuple[int, int], List[Tuple[int, int]]], T: int, M: int, N: int,
              max_cells: int) -> Any:
    """The tile coloured by wave (``W<w>`` in each cell): the wave boundaries at a glance."""
    from .colors import category_color
    waves = -(-T // 64)

    def cell(i: int, j: int) -> Cell:
        who = owners.get((i, j))
        if not who:
            return Cell(fill=EMPTY, lines=())
        w = who[0][0] // 64
        return Cell(fill=category_color(w, waves), lines=())
    size = max(3.0, min(12.0, 512.0 / max(M, N)))   # a compact map, whatever the tile size
    body = Grid([[cell(i, j) for j in range(N)] for i in range(M)], labels=False, cell_w=size,
                cell_h=size, title="wave map (colour = wave)")
    key = Legend([(category_color(w, waves), rng) for w, rng in enumerate(_wave_ranges(T))],
                 per_row=4)
    return VStack([body, key])


def _threads(ts: Iterable[int]) -> str:
    ts = sorted(set(ts))
    if len(ts) > 12:
        return f"{len(ts)} threads (T{ts[0]}..T{ts[-1]})"
    return ", ".join(f"T{t}" for t in ts)
