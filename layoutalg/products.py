"""Products: ``logical_product`` and its zipped, tiled and flat forms, ``blocked_product``,
``raked_product``, ``zip_layouts`` and ``tile_to_shape``.

``logical_product(B, T) = (B, complement(B, size(B)*cosize(T)) o T)``: a rank-2
``(block, tiles)`` layout, as CuTe (include/cute/layout.hpp); the blocked and raked products
zip its two modes mode by mode.  ``tile_to_shape`` on a ComposedLayout tiles the inner layout.
"""

from __future__ import annotations

from typing import Any

from .checks import require_any_layout, require_layout
from .complements import complement, complement_ints
from .compose import compose_modes, composition
from .errors import DivisibilityError, ShapeError
from .inttuple import ceil_div, fmt, normalize, product_each, rank as _rank
from .layout import Layout, append, int_flat, make_layout, make_ordered_layout
from .swizzle import on_inner
from .tilers import as_layout, by_mode, int_tile, tile_unzip, unpack_modes

__all__ = ["logical_product", "zipped_product", "tiled_product", "flat_product",
           "blocked_product", "raked_product", "tile_to_shape", "zip_layouts"]


def logical_product(block: Layout, tiler: Any) -> Layout:
    """``(block, complement(block, size(block)*cosize(tiler)) o tiler)``: rank-2 (block, tiles).

    Post: ``size(result) == size(block) * size(tiler)``; mode 0 is ``block`` unchanged.
    """
    if type(block) is Layout:
        tt = type(tiler)
        if tt is Layout or tt is int:
            t = tiler if tt is Layout else int_tile(tiler, "logical_product tiler")
            bf = block._ints
            if bf is None:
                bf = int_flat(block)
            tf = t._ints
            if tf is None:
                tf = int_flat(t)
            if bf and tf:
                n = 1
                for x in bf[0]:
                    n *= x
                cos = 1
                for x, y in zip(tf[0], tf[1]):
                    cos += (x - 1) * (y if y >= 0 else -y)
                c = complement_ints(block, bf[0], bf[1], n * cos)
                r = compose_modes(c, t.shape, t.stride, tf)
                return Layout._make((block.shape, r.shape), (block.stride, r.stride))
    elif not isinstance(block, Layout):
        raise ShapeError(f"logical_product: expected a Layout block, got {block!r}")
    if tiler is None:
        return block
    if type(tiler) is tuple:
        return by_mode(block, tiler, logical_product, "logical_product")
    t = as_layout(tiler, "logical_product tiler")
    c = complement(block, block.size() * t.cosize())
    return make_layout(block, composition(c, t))


def zipped_product(block: Layout, tiler: Any) -> Layout:
    return tile_unzip(logical_product(block, tiler), tiler, "zipped_product")


def tiled_product(block: Layout, tiler: Any) -> Layout:
    return unpack_modes(zipped_product(block, tiler), (False, True))


def flat_product(block: Layout, tiler: Any) -> Layout:
    return unpack_modes(zipped_product(block, tiler), (True, True))


def zip_layouts(a: Layout, b: Layout) -> Layout:
    """CuTe ``zip(layoutA, layoutB)``: pair up corresponding modes.

    ``((a0,a1,...),(b0,b1,...)) -> ((a0,b0),(a1,b1),...)``; when ``a`` is a single mode (not a
    tuple) the result is the single mode ``((a,b))``.  Raises ShapeError when a is a tuple and
    b is not one of the same rank (CuTe: "Mismatched Ranks" / incomplete tuple_size).
    """
    require_layout(a, "zip_layouts", "a")
    require_layout(b, "zip_layouts", "b")
    return Layout._make(_zip2(a.shape, b.shape), _zip2(a.stride, b.stride))


def _zip2(x: Any, y: Any) -> Any:
    if type(x) is not tuple:
        return ((x, y),)
    if type(y) is not tuple or len(y) != len(x):
        raise ShapeError(f"zip: mismatched ranks: {fmt(x)} and {fmt(y)} (both must be tuples of "
                         "the same rank, or the first a single mode)")
    return tuple(zip(x, y))


def _rank_product(block: Layout, tiler: Any, raked: bool) -> Layout:
    name = "raked_product" if raked else "blocked_product"
    if not isinstance(block, Layout) or not isinstance(tiler, Layout):
        raise ShapeError(f"{name} takes two Layouts (as in CuTe); got {block!r} and {tiler!r}: "
                         "wrap an int or a shape with make_layout(...)")
    r = max(block.rank, tiler.rank)
    res = logical_product(append(block, n=r), append(tiler, n=r))
    m0, m1 = res[0], res[1]
    try:
        return zip_layouts(m1, m0) if raked else zip_layouts(m0, m1)
    except ShapeError:
        raise ShapeError(
            f"{name}({block}, {tiler}): the modes {m0} and {m1} of the logical product cannot "
            "be zipped mode by mode (a rank-1 layout whose single mode is a tuple is combined "
            "with a plain mode; CuTe refuses this too): give both layouts the same mode "
            "structure") from None


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Repeat ``block`` over ``tiler`` (block-major): mode i is ``(block_i, tiler_i)``.

    Post: ``rank(result) == max(rank(block), rank(tiler))`` and
    ``size(result) == size(block) * size(tiler)``.
    """
    return _rank_product(block, tiler, raked=False)


def raked_product(block: Layout, tiler: Layout) -> Layout:
    """Interleave copies of ``block`` over ``tiler``: mode i is ``(tiler_i, block_i)``.

    Post: ``rank(result) == max(rank(block), rank(tiler))`` and
    ``size(result) == size(block) * size(tiler)``.
    """
    return _rank_product(block, tiler, raked=True)


def tile_to_shape(block: Layout, trg_shape: Any, order: Any = None) -> Layout:
    """Repeat ``block`` (blocked) until it has shape ``trg_shape``; ``order`` picks the mode order.

    Refused when the block's per-mode sizes do not divide the target's.  On a ComposedLayout
    it tiles the inner layout (CuTe).
    """
    if not isinstance(block, Layout):
        require_any_layout(block, "tile_to_shape", "block")
        return on_inner(block, tile_to_shape, trg_shape, order)
    trg_shape = normalize(trg_shape, "tile_to_shape target")
    r = _rank(trg_shape)
    if block.rank > r:
        raise ShapeError(f"tile_to_shape: block {block} has rank {block.rank} > rank of target "
                         f"{fmt(trg_shape)}")
    padded = append(block, n=r)
    bs = product_each(padded.shape)
    ts = product_each(trg_shape)
    for b_, t_ in zip(bs, ts):
        if type(b_) is int and type(t_) is int and t_ % b_ != 0:
            raise DivisibilityError(f"tile_to_shape: block shape {fmt(bs)} does not divide the "
                                    f"target shape {fmt(ts)}")
    prod_shape = ceil_div(ts, bs)
    if order is None:
        tl = make_layout(prod_shape)
    else:
        tl = make_ordered_layout(prod_shape, order)
    return blocked_product(padded, tl)
