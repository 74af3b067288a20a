"""The layout algebra: composition, complement, inverses, divides and products.

Every function follows CuTe C++ (include/cute/layout.hpp) with static integers: same result
shape, same value at every index.  Where CuTe's own check is weaker than the condition the
operation needs (CuTe accepts ``(6,4):(1,10) o 4:4`` and returns ``(2,2):(4,10)``, which is not
the composition), we raise a :class:`~layoutalg.errors.LayoutError` subclass that says which
condition failed.  Each function states its post-condition.
"""

from __future__ import annotations

from typing import Any, Optional

from .checks import require_any_layout, require_int, require_layout
from .errors import (ComplementError, CompositionError, InverseError, LayoutError, ShapeError,
                     DivisibilityError)
from .flat_modes import coalesce_lists, filter_lists, int_leaves
from .inttuple import (ceil_div, compact_col_major, exact_div, flatten, fmt, is_static, product,
                       product_each, rank as _rank, sym_ok, unwrap)
from .layout import (Layout, append, coalesce, filter as _filter, int_flat, int_layout,
                     int_layout_from_flat, make_layout, make_ordered_layout)
from .complements import complement, complement_ints
from .compose import EXHAUSTIVE_LIMIT, composition, composition_as_cute, compose_modes
from .divides import flat_divide, logical_divide, tiled_divide, zipped_divide
from .inverses import (left_inverse, max_common_layout, max_common_vector, nullspace,
                       right_inverse)
from .tilers import as_layout, by_mode, int_tile, tile_unzip, tiler_str, unpack_modes

__all__ = [
    "composition", "complement", "right_inverse", "left_inverse", "nullspace",
    "max_common_layout", "max_common_vector", "logical_divide", "zipped_divide",
    "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "upcast", "downcast",
    "zip_layouts", "tiler_str",
]


# ---------------------------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------------------------

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
    from .inttuple import normalize
    if not isinstance(block, Layout):
        require_any_layout(block, "tile_to_shape", "block")
        from .composed_ops import on_inner
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


# ---------------------------------------------------------------------------------------------
# Upcast / downcast (reinterpret element width)
# ---------------------------------------------------------------------------------------------

def _check_factor(n: Any, name: str) -> None:
    require_int(n, name, "the factor n")


def upcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times wider: stride-1 modes shrink, other strides divide.
    A ComposedLayout is cast whole (swizzle base, offset and inner; CuTe's ``upcast<N>``)."""
    _check_factor(n, "upcast")
    n = int(n)
    if not isinstance(layout, Layout):
        require_any_layout(layout, "upcast")
        from .composed_ops import upcast_composed
        return upcast_composed(layout, n)
    def up(s: Any, d: Any) -> tuple:
        if type(s) is tuple:
            parts = [up(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if type(d) is int and d == 0:
            return s, d
        if type(d) is int:
            ad = abs(d)
            if ad % n != 0 and n % ad != 0:
                raise DivisibilityError(f"upcast<{n}> of {layout}: stride {d} and {n} do not "
                                        "divide one another")
            return ceil_div(s, -(-n // ad)), (1 if d > 0 else -1) * (-(-ad // n))
        return s, d / n
    s, d = up(layout.shape, layout.stride)
    return Layout._make(s, d)


def downcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times narrower: stride-1 modes grow, other strides scale.
    A ComposedLayout is cast whole (swizzle base, offset and inner; CuTe's ``downcast<N>``)."""
    _check_factor(n, "downcast")
    n = int(n)
    if not isinstance(layout, Layout):
        require_any_layout(layout, "downcast")
        from .composed_ops import downcast_composed
        return downcast_composed(layout, n)
    fd = layout.flat()[1]
    if not any(type(x) is int and x == 1 for x in fd):
        raise DivisibilityError(f"downcast<{n}> of {layout}: needs a stride-1 mode (adjacent "
                                "elements)")

    def down(s: Any, d: Any) -> tuple:
        if type(s) is tuple:
            parts = [down(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if type(d) is int and abs(d) == 1:
            return s * n, d
        return s, d * n
    s, d = down(layout.shape, layout.stride)
    return Layout._make(s, d)
