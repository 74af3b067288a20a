"""Divides: ``logical_divide`` and its zipped, tiled and flat forms.

``logical_divide(L, T) = L o (T, complement(T, size(L)))``: a rank-2 ``(tile, rest)`` layout,
mode by mode for a by-mode tiler, as CuTe (include/cute/layout.hpp); the other forms regroup
the same modes (:mod:`layoutalg.tilers`).  A ComposedLayout divides its inner layout.
"""

from __future__ import annotations

from typing import Any

from .complements import complement, complement_ints
from .compose import compose_modes, composition
from .errors import ShapeError
from .flat_modes import coalesce_lists
from .layout import Layout, coalesce, int_flat, make_layout
from .swizzle import ComposedLayout
from .tilers import as_layout, by_mode, int_tile, tile_unzip, unpack_modes

__all__ = ["logical_divide", "zipped_divide", "tiled_divide", "flat_divide"]


def logical_divide(layout: Layout, tiler: Any) -> Any:
    """``layout o (tiler, complement(tiler, shape(coalesce(layout))))``: rank-2 (tile, rest).

    ``tiler`` is a Layout, an int, ``None`` or a by-mode tuple of those.  A tiler that does not
    divide the layout pads the rest mode (CuTe semantics: ``12:1 / 5`` is ``(5,3):(1,5)``, of
    size 15).  Post: ``result(i) == layout(B(i))`` for ``B = (tiler, complement)`` and
    ``size(result) >= size(layout)``; raises where CuTe's result is not that (e.g.
    ``(3,4):(1,5) / 2:1``: CuTe returns ``(2,(2,4)):(1,(2,5))``, whose value at 3 is 3, not 5).
    """
    if type(layout) is Layout:
        tt = type(tiler)
        if tt is Layout or tt is int:
            t = tiler if tt is Layout else int_tile(tiler, "logical_divide tiler")
            lf = layout._ints
            if lf is None:
                lf = int_flat(layout)
            tf = t._ints
            if tf is None:
                tf = int_flat(t)
            if lf and tf:
                fs, fd = lf
                cs = coalesce_lists(fs, fd, fs[-1], fd[-1])[0]
                c = complement_ints(t, tf[0], tf[1], cs[0] if len(cs) == 1 else tuple(cs))
                cf = c._flat
                return compose_modes(layout, (t.shape, c.shape), (t.stride, c.stride),
                                       (tf[0] + cf[0], tf[1] + cf[1]))
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, logical_divide)
    if not isinstance(layout, Layout):
        raise ShapeError(f"logical_divide: expected a Layout, got {layout!r}")
    if tiler is None:
        return layout
    if type(tiler) is tuple:
        return by_mode(layout, tiler, logical_divide, "logical_divide")
    t = as_layout(tiler, "logical_divide tiler")
    c = complement(t, coalesce(layout).shape)
    return composition(layout, make_layout(t, c))


def zipped_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), (rest modes...))``: all tile modes first."""
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, zipped_divide)
    return tile_unzip(logical_divide(layout, tiler), tiler, "zipped_divide")


def tiled_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), rest0, rest1, ...)``."""
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, tiled_divide)
    return unpack_modes(zipped_divide(layout, tiler), (False, True))


def flat_divide(layout: Layout, tiler: Any) -> Layout:
    """``(tile0, tile1, ..., rest0, rest1, ...)``."""
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, flat_divide)
    return unpack_modes(zipped_divide(layout, tiler), (True, True))
