"""Thread-value (TV) layouts and partitioning.

A TV layout maps ``(thread, value)`` to an index of a tile (an ``M x N`` tile is indexed
column-major unless the tile layout says otherwise).  ``make_layout_tv`` is CuTe's raked
construction used by ``make_tiled_copy``: threads are laid out by ``thr_layout`` over the tile,
each owning a ``val_layout`` block of values.

``local_partition`` / ``local_tile`` are CuTe's inner/outer partitioning helpers.
"""

from __future__ import annotations

from typing import Any, Tuple

from .algebra import composition, raked_product, right_inverse, zipped_divide
from .errors import ShapeError
from .inttuple import product_each
from .layout import Layout, make_layout

__all__ = ["make_layout_tv", "tv_tile_shape", "local_partition", "local_tile", "TVLayout",
           "TVPair", "thread_values"]


class TVPair(tuple):
    """``(tiler_mn, layout_tv)`` as :func:`make_layout_tv` returns it: a plain 2-tuple (unpack
    it as CuTe does) that a notebook draws as the TV picture, not as two separate objects.

    ``.tv`` is the same pair as a :class:`TVLayout` (what to keep when you want to draw the TV
    layout later: ``layout_tv`` alone is a plain layout and draws as an offset grid).
    """

    __slots__ = ()

    @property
    def tv(self) -> "TVLayout":
        return TVLayout(self[1], self[0])

    def _repr_svg_(self) -> str:
        return self.tv._repr_svg_()

    def _repr_html_(self) -> str:
        return self.tv._repr_html_()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(f"(tiler {self[0]}, layout_tv {self[1]})")


def make_layout_tv(thr_layout: Layout, val_layout: Layout = None) -> Tuple[tuple, Layout]:
    """CuTe ``make_layout_tv``: returns ``(tiler_mn, layout_tv)`` (a :class:`TVPair`: a tuple
    that Jupyter draws as the TV picture; ``.tv`` gives the :class:`TVLayout`).

    ``layout_mn = raked_product(thr_layout, val_layout)`` places thread t's value v at tile
    coordinate ``layout_mn^-1``; ``layout_tv = right_inverse(layout_mn).with_shape(
    (size(thr), size(val)))`` maps ``(t, v)`` to the column-major tile index.
    Post: ``layout_tv`` is a bijection onto ``[0, size(thr) * size(val))``.
    """
    if val_layout is None:
        val_layout = Layout._make(1, 0)
    if not isinstance(thr_layout, Layout) or not isinstance(val_layout, Layout):
        raise ShapeError("make_layout_tv takes two Layouts (threads, values)")
    layout_mn = raked_product(thr_layout, val_layout)
    inv = right_inverse(layout_mn)
    if inv.size() != layout_mn.size():
        raise ShapeError(f"make_layout_tv: raked_product({thr_layout}, {val_layout}) = "
                         f"{layout_mn} is not a bijection onto its tile; thread and value "
                         "layouts must be compact")
    layout_tv = composition(inv, make_layout((thr_layout.size(), val_layout.size())))
    return TVPair((product_each(layout_mn.shape), layout_tv))


def tv_tile_shape(thr_layout: Layout, val_layout: Layout) -> tuple:
    return make_layout_tv(thr_layout, val_layout)[0]


def thread_values(layout_tv: Layout, tile_layout: Any, thread: int) -> list:
    """The offsets (through ``tile_layout``) of every value owned by ``thread``, in value order."""
    vals = layout_tv(thread, None)
    n = vals.size()
    return [tile_layout(vals(v)) for v in range(n)]


def _rep_under(n: int) -> Any:
    """CuTe ``repeat<n>(_)``: ``_`` itself for n == 1 (keeps the mode whole), else n of them
    (splices the mode's sub-modes into the result)."""
    return None if n == 1 else (None,) * n


def _append_under(coord: tuple, n: int, what: str) -> tuple:
    """CuTe ``append<n>(coord, _)``: pad a tuple coordinate with ``_`` up to n entries."""
    if len(coord) > n:
        raise ShapeError(f"{what}: coordinate {coord} has {len(coord)} entries but the mode it "
                         f"slices has rank {n}")
    return coord + (None,) * (n - len(coord))


def local_partition(tensor_layout: Layout, tile: Layout, index: int) -> Tuple[Layout, Any]:
    """CuTe ``local_partition`` (= ``outer_partition`` by the tile's per-mode shape): the
    elements thread ``index`` of ``tile`` owns, one per tile.

    The tensor is divided by ``product_each(shape(tile))``; thread ``index`` sits at
    ``tile.get_flat_coord(index)`` (per mode, the column-major index of
    ``(index // stride) % shape``).  As in CuTe the coordinate slices the tile modes and the rest
    modes are spliced into the result.  Returns ``(layout, offset)``: the thread's elements are
    ``offset + layout(i)``.
    """
    from .inttuple import compact_col_major, crd2idx, is_tuple
    from .layout import slice_and_offset
    shp = product_each(tile.shape)
    divided = zipped_divide(tensor_layout, shp)

    def hier(s: Any, d: Any) -> Any:
        if is_tuple(s):
            return tuple(hier(x, y) for x, y in zip(s, d))
        return (index // d) % s if d != 0 else 0

    if is_tuple(tile.shape):
        coord: Any = tuple(crd2idx(hier(s, d), s, compact_col_major(s))
                           for s, d in zip(tile.shape, tile.stride))
        coord = _append_under(coord, divided[0].rank, "local_partition")
    else:
        coord = hier(tile.shape, tile.stride)
    return slice_and_offset((coord, _rep_under(divided[1].rank)), divided)


def local_tile(tensor_layout: Layout, tiler: Any, coord: Any) -> Tuple[Layout, Any]:
    """CuTe ``local_tile`` (= ``inner_partition``): the tile at ``coord`` of
    ``zipped_divide(tensor, tiler)``, with the tile modes spliced into the result as in CuTe.
    A tuple ``coord`` shorter than the rest mode is padded with ``None`` (``_``).
    Returns ``(layout, offset)``.
    """
    from .layout import slice_and_offset
    divided = zipped_divide(tensor_layout, tiler)
    if type(coord) is tuple:
        coord = _append_under(coord, divided[1].rank, "local_tile")
    return slice_and_offset((_rep_under(divided[0].rank), coord), divided)


class TVLayout:
    """A TV layout bundled with its tile shape: ``(thread, value) -> (m, n)`` coordinates."""

    def __init__(self, layout_tv: Layout, tile_shape: tuple) -> None:
        self.layout_tv = layout_tv
        self.tile_shape = tuple(tile_shape)

    def draw(self, **kw: Any) -> Any:
        """The :func:`visualize.draw_tv` diagram (``highlight=``, ``isolate=``, ...)."""
        from visualize import draw_tv
        return draw_tv(self, **kw)

    def _repr_svg_(self) -> str:
        """Jupyter renders a TV layout as its T<thread>/V<value> diagram."""
        return self.draw()._repr_svg_()

    def _repr_html_(self) -> str:
        """The same diagram, fitted to the cell width (full size on click)."""
        return self.draw()._repr_html_()

    def __repr__(self) -> str:
        return (f"TVLayout({self.num_threads} threads x {self.num_values} values over a "
                f"{'x'.join(map(str, self.tile_shape))} tile: {self.layout_tv})")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    @classmethod
    def raked(cls, thr_layout: Layout, val_layout: Layout) -> "TVLayout":
        tiler, tv = make_layout_tv(thr_layout, val_layout)
        return cls(tv, tiler)

    @property
    def num_threads(self) -> int:
        return self.layout_tv[0].size()

    @property
    def num_values(self) -> int:
        return self.layout_tv[1].size()

    def coord(self, thread: int, value: int) -> tuple:
        from .inttuple import idx2crd
        return idx2crd(self.layout_tv((thread, value)), self.tile_shape)

    def __str__(self) -> str:
        return f"TV{self.tile_shape}: {self.layout_tv}"
