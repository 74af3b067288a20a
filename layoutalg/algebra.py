"""The layout algebra: composition, complement, inverses, divides and products.

Every function follows CuTe C++ (include/cute/layout.hpp) with static integers: same result
shape, same value at every index.  Where CuTe's own check is weaker than the condition the
operation needs (CuTe accepts ``(6,4):(1,10) o 4:4`` and returns ``(2,2):(4,10)``, which is not
the composition), we raise a :class:`~layoutalg.errors.LayoutError` subclass that says which
condition failed.  Each function states its post-condition.
"""

from __future__ import annotations

from typing import Any, Optional

from .errors import (ComplementError, CompositionError, InverseError, LayoutError, ShapeError,
                     DivisibilityError)
from .inttuple import (ceil_div, compact_col_major, flatten, fmt, is_static, product,
                       product_each, rank as _rank, sym_ok, unwrap)
from .layout import (Layout, append, coalesce, coalesce_x, filter as _filter, make_layout,
                     make_ordered_layout)

__all__ = [
    "composition", "complement", "right_inverse", "left_inverse", "nullspace",
    "max_common_layout", "max_common_vector", "logical_divide", "zipped_divide",
    "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "upcast", "downcast",
    "zip_layouts", "tiler_str",
]


def tiler_str(t: Any) -> str:
    if t is None:
        return "_"
    if isinstance(t, tuple):
        return "<" + ",".join(tiler_str(x) for x in t) + ">"
    return str(t)


def _as_layout(x: Any, what: str) -> Layout:
    if isinstance(x, Layout):
        return x
    if type(x) is int or (type(x) is tuple and all(type(e) is int for e in flatten(x))):
        return make_layout(x)
    from .inttuple import normalize
    try:
        return make_layout(normalize(x, what))
    except LayoutError:
        raise
    except Exception:
        raise ShapeError(f"{what}: expected a Layout, an int or a shape, got {x!r}") from None


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------

def _abs(x: Any) -> Any:
    return abs(x)


def _composition_impl(ls: Any, ld: Any, rs: Any, rd: Any, lhs: Layout) -> Layout:
    """``(ls:ld) o (rs:rd)`` for a coalesced lhs; mirrors CuTe's composition_impl.

    Post: ``result(i) == lhs(rhs(i))`` for all ``0 <= i < size(rs)``.
    """
    if type(rs) is tuple:  # right-distributivity
        parts = [_composition_impl(ls, ld, s, d, lhs) for s, d in zip(rs, rd)]
        return Layout._make(tuple(p.shape for p in parts), tuple(p.stride for p in parts))
    if type(rd) is int and rd == 0:
        return Layout._make(rs, rd)
    if type(ls) is not tuple:
        return Layout._make(rs, rd * ld)

    n = len(ls)
    res_s: list = []
    res_d: list = []
    rest_s, rest_d = rs, rd
    for i in range(n - 1):
        cs, cd = ls[i], ld[i]
        ad = _abs(rest_d)
        static = type(cs) is int and type(ad) is int
        if static:
            # CuTe's (weak) stride divisibility condition
            if not (ad % cs == 0 or ad < cs):
                raise CompositionError(
                    f"composition {lhs} o {rs}:{rd}: stride divisibility condition fails: the "
                    f"stride {ad} must be a multiple of mode extent {cs} or smaller than it")
            next_s = -(-cs // ad)
            next_d = -(-ad // cs) * (1 if rest_d > 0 else -1)
        else:
            next_s = ceil_div(cs, ad)
            next_d = ceil_div(ad, cs) * (1 if sym_ok(rest_d > 0, "stride sign") else -1)
        if (type(next_s) is int and next_s == 1) or (type(rest_s) is int and rest_s == 1):
            rest_d = next_d
            continue
        if type(next_s) is int and type(rest_s) is int:
            new_s = min(next_s, rest_s)
            if rest_s % new_s != 0:
                raise CompositionError(
                    f"composition {lhs} o {rs}:{rd}: shape divisibility condition fails: "
                    f"{new_s} elements fit in mode {i} (extent {cs}) but {rest_s} remain, "
                    f"which is not a multiple of {new_s}")
            # CuTe stops checking here; the result is only the composition when the stride
            # divides the mode (so the walk continues at the next mode's start) or when the
            # remaining elements all fit inside this mode.
            if static and cs % ad != 0 and rest_s // new_s > 1:
                raise CompositionError(
                    f"composition {lhs} o {rs}:{rd} is not a layout: stride {ad} does not divide "
                    f"mode {i} extent {cs}, so after {new_s} elements the walk would wrap "
                    f"mid-mode (CuTe accepts this and returns a wrong layout)")
        else:
            new_s = _sym_min(next_s, rest_s)
        res_s.append(new_s)
        res_d.append(rest_d * cd)
        rest_s = rest_s // new_s
        rest_d = next_d

    if not res_s:
        return Layout._make(rest_s, rest_d * ld[-1])
    if type(rest_s) is int and rest_s == 1:
        return Layout._make(unwrap(tuple(res_s)), unwrap(tuple(res_d)))
    return Layout._make(tuple(res_s) + (rest_s,), tuple(res_d) + (rest_d * ld[-1],))


def _sym_min(a: Any, b: Any) -> Any:
    if sym_ok(a <= b, "min of symbolic extents"):
        return a
    return b


def composition(lhs: Any, rhs: Any) -> Any:
    """``lhs o rhs``: the layout ``R`` with ``R(c) == lhs(rhs(c))`` for every c in rhs's domain.

    ``rhs`` may be a Layout, an int ``n`` (meaning ``n:1``), ``None`` (identity) or a by-mode
    tiler tuple whose entries are any of those (modes of lhs beyond the tiler are dropped, as in
    CuTe).  ``lhs`` may be a Layout, a Swizzle or a ComposedLayout.
    Post: ``shape(result)`` is compatible with ``shape(rhs)``.
    """
    from .swizzle import ComposedLayout, Swizzle
    if isinstance(lhs, Swizzle):
        if isinstance(rhs, Layout):
            return ComposedLayout(lhs, 0, rhs)
        return ComposedLayout(lhs, 0, _as_layout(rhs, "composition rhs"))
    if isinstance(lhs, ComposedLayout):
        return lhs.compose(rhs)
    if not isinstance(lhs, Layout):
        raise ShapeError(f"composition: lhs must be a Layout, Swizzle or ComposedLayout, got {lhs!r}")
    if isinstance(rhs, Layout):
        f = coalesce_x(lhs)
        return _composition_impl(f.shape, f.stride, rhs.shape, rhs.stride, lhs)
    if rhs is None:
        return lhs
    if type(rhs) is tuple:
        if len(rhs) > len(lhs):
            raise ShapeError(f"composition: tiler {tiler_str(rhs)} has {len(rhs)} modes but "
                             f"{lhs} has rank {len(lhs)}")
        parts = [composition(lhs[i], t) for i, t in enumerate(rhs)]
        return make_layout(*parts)
    if isinstance(rhs, (Swizzle, ComposedLayout)):
        raise ShapeError("composition Layout o Swizzle is not supported; compose the swizzle on "
                         "the left (Swizzle o Layout)")
    from .inttuple import normalize
    n = normalize(rhs, "composition rhs")
    if type(n) is tuple:  # pragma: no cover - tuples handled above
        raise ShapeError("unreachable")
    f = coalesce_x(lhs)
    return _composition_impl(f.shape, f.stride, n, 1, lhs)


# ---------------------------------------------------------------------------------------------
# Complement
# ---------------------------------------------------------------------------------------------

def complement(layout: Layout, cotarget: Any = None) -> Layout:
    """The layout ``C`` that fills the gaps of ``layout`` up to ``cotarget`` (default cosize).

    Post: ``C`` is strictly increasing, ``C(i) != layout(j)`` for ``i >= 1``, and
    ``make_layout(layout, C)`` is injective with ``size(C) >= ceil(cotarget / size(filter(layout)))``.
    Refused (ComplementError) when the layout is not injective or its sorted modes do not nest
    (a stride not divisible by the extent of the modes below it), since no such C exists.
    """
    if not isinstance(layout, Layout):
        raise ShapeError(f"complement: expected a Layout, got {layout!r}")
    fl = _filter(layout)
    if cotarget is None:
        cotarget = fl.cosize()
    elif isinstance(cotarget, Layout):
        cotarget = cotarget.shape
    else:
        from .inttuple import normalize
        cotarget = normalize(cotarget, "complement cotarget")
    s, d = fl.shape, fl.stride
    if type(d) is int and d == 0:
        return Layout._make(product(cotarget), 1)
    shapes = list(s) if type(s) is tuple else [s]
    strides = list(d) if type(d) is tuple else [d]
    if len(strides) > 1 and not is_static(tuple(strides)):
        raise ComplementError(f"complement of {layout}: dynamic strides are only supported for "
                              "rank-1 layouts (as in CuTe)")
    for x in strides:
        if type(x) is int and x < 0:
            raise ComplementError(f"complement of {layout}: negative stride {x} is not supported "
                                  "(complement is defined for layouts with positive strides)")
    r = len(shapes)
    res_s: list = []
    res_d: list = [1]
    for i in range(r - 1):
        k = min(range(len(strides)), key=lambda j: strides[j])
        ms = strides[k]
        _check_nest(layout, ms, res_d[i])
        res_s.append(ms // res_d[i])
        res_d.append(ms * shapes[k])
        del shapes[k]
        del strides[k]
    _check_nest(layout, strides[0], res_d[r - 1])
    res_s.append(strides[0] // res_d[r - 1])
    new_d = strides[0] * shapes[0]
    rest_s = product(ceil_div(cotarget, new_d))
    out = Layout._make(tuple(res_s) + (rest_s,), tuple(res_d) + (new_d,))
    return coalesce(out)


def _check_nest(layout: Layout, stride: Any, below: Any) -> None:
    if type(stride) is int and type(below) is int:
        if stride < below:
            raise ComplementError(f"complement of {layout}: the layout is not injective (a mode "
                                  f"of stride {stride} overlaps modes spanning {below})")
        if stride % below != 0:
            raise ComplementError(
                f"complement of {layout}: stride {stride} is not a multiple of {below}, the span "
                "of the smaller modes, so the gaps cannot be filled by a layout")


# ---------------------------------------------------------------------------------------------
# Inverses, nullspace, common layouts
# ---------------------------------------------------------------------------------------------

def _wrapped_coalesce(layout: Layout) -> tuple:
    c = coalesce(layout)
    s = c.shape if type(c.shape) is tuple else (c.shape,)
    d = c.stride if type(c.stride) is tuple else (c.stride,)
    pre = [1]
    for x in s:
        pre.append(pre[-1] * x)
    return s, d, pre


def right_inverse(layout: Any) -> Any:
    """``R`` with ``layout(R(i)) == i`` for all ``i < size(R)`` (the largest such prefix).

    Post: ``composition(layout, R)`` equals ``make_layout(shape(R))`` on its domain.
    """
    if layout is None:
        return None
    if not isinstance(layout, Layout):
        raise ShapeError(f"right_inverse: expected a Layout, got {layout!r}")
    s, d, pre = _wrapped_coalesce(layout)
    order = sorted((i for i in range(len(d)) if type(d[i]) is int), key=lambda i: d[i])
    rs: list = [1]
    rd: list = [0]
    curr = 1
    for i in order:
        if d[i] == curr:
            rs.append(s[i])
            rd.append(pre[i])
            curr = s[i] * d[i]
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


def left_inverse(layout: Any) -> Any:
    """Quasi-inverse ``R``: ``layout(R(layout(i))) == layout(i)`` for all ``i < size(layout)``.

    For an injective layout, ``R(layout(i)) == i``.  Refused (InverseError) when the sorted
    strides fail CuTe's left-inverse divisibility condition.
    """
    if layout is None:
        return None
    if not isinstance(layout, Layout):
        raise ShapeError(f"left_inverse: expected a Layout, got {layout!r}")
    s, d, pre = _wrapped_coalesce(layout)
    if not is_static(d):
        raise InverseError(f"left_inverse of {layout}: requires static strides")
    order = sorted(range(len(d)), key=lambda i: d[i])
    rs: list = []
    rd: list = [0]
    sz = 1
    for i in order:
        if d[i] == 0:
            continue
        if d[i] % sz != 0:
            raise InverseError(f"left_inverse of {layout}: stride {d[i]} is not a multiple of "
                               f"{sz} (left inverse divisibility condition)")
        rs.append(d[i] // sz)
        rd.append(pre[i])
        sz = sz * (d[i] // sz)
    rs.append(s[order[-1]])
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


def nullspace(layout: Layout) -> Layout:
    """Layout of the indices that ``layout`` maps to 0 (its stride-0 modes).

    Post: ``layout(result(i)) == 0`` and ``size(result) == size(layout) / size(filter(layout))``.
    """
    fs, fd = layout.flat()
    pre = compact_col_major(fs)
    idx = [i for i in range(len(fd)) if type(fd[i]) is int and fd[i] == 0]
    if not idx:
        return Layout._make(1, 0)
    return Layout._make(unwrap(tuple(fs[i] for i in idx)), unwrap(tuple(pre[i] for i in idx)))


def max_common_layout(a: Layout, b: Layout) -> Layout:
    """``R`` with ``a(R(i)) == i`` and ``b(R(i)) == i`` on the largest contiguous prefix."""
    inv_b = right_inverse(b)
    common = coalesce(composition(a, inv_b))
    s0 = common.shape[0] if type(common.shape) is tuple else common.shape
    d0 = common.stride[0] if type(common.stride) is tuple else common.stride
    if type(s0) is int and type(d0) is int and d0 == 1:
        return composition(inv_b, Layout._make(s0, d0))
    return Layout._make(1, 0)


def max_common_vector(a: Layout, b: Layout) -> int:
    """Largest N such that ``a(b's i-th index) == i`` for ``i < N`` (contiguous in both)."""
    common = coalesce(composition(a, right_inverse(b)))
    s0 = common.shape[0] if type(common.shape) is tuple else common.shape
    d0 = common.stride[0] if type(common.stride) is tuple else common.stride
    if type(s0) is int and type(d0) is int and d0 == 1:
        return s0
    return 1


# ---------------------------------------------------------------------------------------------
# Divides
# ---------------------------------------------------------------------------------------------

def _by_mode(layout: Layout, tiler: tuple, fn: Any, name: str) -> Layout:
    """CuTe transform_layout(layout, tiler, fn): apply fn per mode, keep the untouched modes."""
    r = len(layout)
    if len(tiler) > r:
        raise ShapeError(f"{name}: tiler {tiler_str(tiler)} has {len(tiler)} modes but {layout} "
                         f"has rank {r}")
    parts = [fn(layout[i], t) for i, t in enumerate(tiler)]
    parts += [layout[i] for i in range(len(tiler), r)]
    return make_layout(*parts)


def logical_divide(layout: Layout, tiler: Any) -> Any:
    """``layout o (tiler, complement(tiler, shape(coalesce(layout))))``: rank-2 (tile, rest).

    ``tiler`` is a Layout, an int, ``None`` or a by-mode tuple of those.  A tiler that does not
    divide the layout pads the rest mode (CuTe semantics: ``(3,4):(1,5) / 2:1`` has size 16).
    """
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, logical_divide)
    if tiler is None:
        return layout
    if type(tiler) is tuple:
        return _by_mode(layout, tiler, logical_divide, "logical_divide")
    t = _as_layout(tiler, "logical_divide tiler")
    c = complement(t, coalesce(layout).shape)
    return composition(layout, make_layout(t, c))


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


def _tile_unzip(layout: Layout, tiler: Any, name: str) -> Layout:
    return Layout._make(_zip2_by(layout.shape, tiler, name), _zip2_by(layout.stride, tiler, name))


def _unpack(layout: Layout, which: tuple) -> Layout:
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


def zipped_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), (rest modes...))``: all tile modes first."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, zipped_divide)
    return _tile_unzip(logical_divide(layout, tiler), tiler, "zipped_divide")


def tiled_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), rest0, rest1, ...)``."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, tiled_divide)
    return _unpack(zipped_divide(layout, tiler), (False, True))


def flat_divide(layout: Layout, tiler: Any) -> Layout:
    """``(tile0, tile1, ..., rest0, rest1, ...)``."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, flat_divide)
    return _unpack(zipped_divide(layout, tiler), (True, True))


# ---------------------------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------------------------

def logical_product(block: Layout, tiler: Any) -> Layout:
    """``(block, complement(block, size(block)*cosize(tiler)) o tiler)``: rank-2 (block, tiles).

    Post: ``size(result) == size(block) * size(tiler)``; mode 0 is ``block`` unchanged.
    """
    if tiler is None:
        return block
    if type(tiler) is tuple:
        return _by_mode(block, tiler, logical_product, "logical_product")
    t = _as_layout(tiler, "logical_product tiler")
    c = complement(block, block.size() * t.cosize())
    return make_layout(block, composition(c, t))


def zipped_product(block: Layout, tiler: Any) -> Layout:
    return _tile_unzip(logical_product(block, tiler), tiler, "zipped_product")


def tiled_product(block: Layout, tiler: Any) -> Layout:
    return _unpack(zipped_product(block, tiler), (False, True))


def flat_product(block: Layout, tiler: Any) -> Layout:
    return _unpack(zipped_product(block, tiler), (True, True))


def zip_layouts(a: Layout, b: Layout) -> Layout:
    """CuTe ``zip(layoutA, layoutB)``: pair up corresponding modes."""
    return Layout._make(_zip((a.shape, b.shape)), _zip((a.stride, b.stride)))


def _zip(t: tuple) -> Any:
    first = t[0]
    if type(first) is not tuple:
        return (t,)
    n = len(first)
    for x in t:
        if type(x) is tuple and len(x) != n:
            raise ShapeError(f"zip: mismatched ranks in {fmt(t)}")
    return tuple(tuple(x[j] if type(x) is tuple else x for x in t) for j in range(n))


def _rank_product(block: Layout, tiler: Any, raked: bool) -> Layout:
    t = _as_layout(tiler, "product tiler")
    r = max(block.rank, t.rank)
    res = logical_product(append(block, n=r), append(t, n=r))
    m0, m1 = res[0], res[1]
    return zip_layouts(m1, m0) if raked else zip_layouts(m0, m1)


def blocked_product(block: Layout, tiler: Any) -> Layout:
    """Repeat ``block`` over ``tiler`` (block-major): mode i is ``(block_i, tiler_i)``."""
    return _rank_product(block, tiler, raked=False)


def raked_product(block: Layout, tiler: Any) -> Layout:
    """Interleave copies of ``block`` over ``tiler``: mode i is ``(tiler_i, block_i)``."""
    return _rank_product(block, tiler, raked=True)


def tile_to_shape(block: Layout, trg_shape: Any, order: Any = None) -> Layout:
    """Repeat ``block`` (blocked) until it has shape ``trg_shape``; ``order`` picks the mode order.

    Refused when the block's per-mode sizes do not divide the target's.
    """
    from .inttuple import normalize
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

def upcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times wider: stride-1 modes shrink, other strides divide."""
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
    """View ``layout`` in units ``n`` times narrower: stride-1 modes grow, other strides scale."""
    fd = layout.flat()[1]
    if not any(type(x) is int and abs(x) == 1 for x in fd):
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
