"""What a tiler argument means, shared by composition, the divides and the products.

A *tiler* is a Layout, an int ``n`` (the layout ``n:1``), ``None`` (leave the mode alone) or a
by-mode tuple of those (CuTe's ``Tile``).  The helpers here turn one into a Layout, apply an
operation mode by mode, print it as CuTe does, and regroup the rank-2 ``(tile, rest)`` results
of the divides and products into their zipped / tiled / flat forms.
"""

from __future__ import annotations

from typing import Any

from .errors import LayoutError, ShapeError
from .inttuple import flatten, fmt, normalize
from .layout import Layout, int_layout, make_layout

__all__ = ["tiler_str", "int_tile", "as_layout", "by_mode", "tile_unzip", "unpack_modes"]


def tiler_str(t: Any) -> str:
    """A tiler as CuTe prints it: ``_`` for None, ``<a,b>`` for a by-mode tuple."""
    if t is None:
        return "_"
    if isinstance(t, tuple):
        return "<" + ",".join(tiler_str(x) for x in t) + ">"
    return str(t)


def int_tile(n: int, what: str) -> Layout:
    """``make_layout(n)`` for an int tiler: ``n:1`` (``1:0`` for n == 1, as CuTe)."""
    if n < 1:
        raise ShapeError(f"{what}: extent must be >= 1, got {n}")
    return int_layout(n, 1, (n,), (1,)) if n != 1 else int_layout(1, 0, (1,), (0,))


def as_layout(x: Any, what: str) -> Layout:
    """A Layout, an int ``n`` (``n:1``) or a shape (its compact column-major layout) as a
    Layout; ShapeError naming ``what`` for anything else."""
    if isinstance(x, Layout):
        return x
    if type(x) is int:
        return int_tile(x, what)
    if type(x) is int or (type(x) is tuple and all(type(e) is int for e in flatten(x))):
        return make_layout(x)
    try:
        return make_layout(normalize(x, what))
    except LayoutError:
        raise
    except Exception:
        raise ShapeError(f"{what}: expected a Layout, an int or a shape, got {x!r}") from None


def by_mode(layout: Layout, tiler: tuple, fn: Any, name: str) -> Layout:
    """CuTe transform_layout(layout, tiler, fn): apply fn per mode, keep the untouched modes."""
    r = len(layout)
    if len(tiler) > r:
        raise ShapeError(f"{name}: tiler {tiler_str(tiler)} has {len(tiler)} modes but {layout} "
                         f"has rank {r}")
    parts = [fn(layout[i], t) for i, t in enumerate(tiler)]
    parts += [layout[i] for i in range(len(tiler), r)]
    return make_layout(*parts)


def _zip2_by(t: Any, guide: Any, name: str) -> Any:
    if type(guide) is tuple:
        if type(t) is not tuple or len(t) < len(guide):
            raise ShapeError(f"{name}: result {fmt(t)} does not match tiler profile")
        split = [_zip2_by(t[i], g, name) for i, g in enumerate(guide)]
        return (tuple(x[0] for x in split), tuple(x[1] for x in split) + tuple(t[len(guide):]))
    if type(t) is not tuple or len(t) != 2:
        raise ShapeError(f"{name}: mode {fmt(t)} is not a (tile, rest) pair; a '_' tiler entry "
                         "can only stand for a rank-2 mode here")
    return t


def tile_unzip(layout: Layout, tiler: Any, name: str) -> Layout:
    """CuTe's ``zipped`` form of a rank-2-per-tiled-mode result: ``((tiles...), (rests...))``."""
    return Layout._make(_zip2_by(layout.shape, tiler, name), _zip2_by(layout.stride, tiler, name))


def unpack_modes(layout: Layout, which: tuple) -> Layout:
    """CuTe ``result(repeat<R0>(_), repeat<R1>(_))`` style slicing of a rank-2 layout."""
    s, d = layout.shape, layout.stride
    out_s: tuple = ()
    out_d: tuple = ()
    for k in range(2):
        if which[k] and type(s[k]) is tuple and len(s[k]) > 1:
            out_s += s[k]
            out_d += d[k]
        else:
            out_s += (s[k],)
            out_d += (d[k],)
    return Layout._make(out_s, out_d)

