"""Complement: the layout that fills the gaps of a layout up to a cotarget.

Computed as CuTe's ``complement`` (sort the filtered modes by stride, fill each gap below a
mode, repeat up to the cotarget); refused where CuTe's result misses its post-condition (see
:func:`complement`).  :func:`complement_ints` is the all-int path, the seam the divides and
products call with flat modes they already hold.
"""

from __future__ import annotations

from typing import Any

from .errors import ComplementError, ShapeError
from .flat_modes import filter_lists, int_leaves
from .inttuple import (ceil_div, compact_col_major, exact_div, flatten, fmt, normalize, product,
                       sym_ok)
from .layout import (Layout, coalesce, filter as _filter, int_flat, int_layout,
                     int_layout_from_flat)

__all__ = ["complement"]


def _coalesce_shape(shape: Any) -> Any:
    """CuTe ``coalesce(Shape)``: multiply adjacent static (or adjacent dynamic) extents."""
    if type(shape) is not tuple:
        return shape
    out: list = []
    for x in flatten(shape):
        if out and (type(out[-1]) is int) == (type(x) is int):
            out[-1] = out[-1] * x
        else:
            out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


def complement(layout: Layout, cotarget: Any = None) -> Layout:
    """The layout ``C`` that fills the gaps of ``layout`` up to ``cotarget`` (default cosize).

    Computed exactly as CuTe's ``complement`` (sort the filtered modes by stride, fill each gap
    below a mode, then repeat up to the cotarget).  Post (CuTe's, with ``F = filter(layout)``):
      * ``C`` is strictly increasing: ``C(i-1) < C(i)``;
      * ``C(i) != layout(j)`` for ``i >= 1`` and every j (disjoint images);
      * ``size(C) * size(F) >= product(cotarget)`` (the pair covers the cotarget).
    When the sorted modes nest (each stride a multiple of the span of the modes below it),
    ``make_layout(layout, C)`` is moreover a bijection onto ``[0, size(F) * size(C))``.
    Raises ComplementError where CuTe refuses (a non-injective layout), for negative strides
    (CuTe returns a meaningless layout), and where CuTe's result violates the size
    post-condition (modes that do not nest, e.g. ``(2,2):(1,3)`` up to 24).
    """
    if type(layout) is not Layout:
        if not isinstance(layout, Layout):
            raise ShapeError(f"complement: expected a Layout, got {layout!r}")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        if cotarget is None or type(cotarget) is int:
            return complement_ints(layout, f[0], f[1], cotarget)
        if type(cotarget) is tuple and int_leaves(cotarget, cotarget):
            return complement_ints(layout, f[0], f[1], cotarget)
    fl = _filter(layout)
    if cotarget is None:
        cot = fl.cosize()
    elif isinstance(cotarget, Layout):
        cot = cotarget.shape
    elif type(cotarget) is int:
        cot = cotarget
    else:
        cot = normalize(cotarget, "complement cotarget")
    for x in flatten(cot):
        if type(x) is int and x <= 0:
            raise ShapeError(f"complement: cotarget {fmt(cot)} must have extents >= 1")
    s, d = fl.shape, fl.stride
    if type(d) is int and d == 0:
        # irreducible rank-1 stride-0 layout (filter() found nothing): fill the whole cotarget
        n = _coalesce_shape(cot)
        return Layout._make(n, compact_col_major(n))
    shapes = list(s) if type(s) is tuple else [s]
    strides = list(d) if type(d) is tuple else [d]
    r = len(shapes)
    if r > 1 and not all(type(x) is int for x in strides):
        raise ComplementError(f"complement of {layout}: dynamic strides are only supported for "
                              "rank-1 layouts (as in CuTe)")
    for x in strides:
        if type(x) is int and x < 0:
            raise ComplementError(f"complement of {layout}: negative stride {x} is not supported "
                                  "(CuTe's complement assumes positive strides and returns a "
                                  "meaningless layout)")
    res_s: list = []
    res_d: list = [1]
    nests = True
    for i in range(r):
        if i < r - 1:
            k = min(range(len(strides)), key=strides.__getitem__)  # first minimum, as cute::find
        else:
            k = 0
        ms = strides[k]
        below = res_d[i]
        if type(ms) is int and type(below) is int:
            gap = ms // below
            if gap == 0:
                raise ComplementError(
                    f"complement of {layout}: the layout is not injective: a mode of stride {ms} "
                    f"starts inside the span {below} of the smaller-stride modes (CuTe: "
                    "'Non-injective Layout detected in complement')")
            if ms % below:
                nests = False
        else:
            gap = exact_div(ms, below)
        res_s.append(gap)
        if i < r - 1:
            res_d.append(ms * shapes[k])
            del shapes[k]
            del strides[k]
    new_stride = strides[0] * shapes[0]
    rest_s = _coalesce_shape(ceil_div(cot, new_stride))
    rest_d = compact_col_major(rest_s, new_stride)
    out = coalesce(Layout._make((tuple(res_s), rest_s), (tuple(res_d), rest_d)))
    if not nests or type(cot) is tuple:
        # see complement_ints: CuTe's result may be too small
        total = out.size() * fl.size()
        need = product(cot)
        if sym_ok(total < need, "complement's size post-condition"):
            _too_small(layout, cot, out, total, need, nests)
    return out


def complement_ints(layout: Layout, fs: tuple, fd: tuple, cot: Any) -> Layout:
    """:func:`complement` for all-int layouts and cotargets (same algorithm, flat lists)."""
    shapes, strides = filter_lists(fs, fd)
    if cot is None:
        n = 1
        for x, y in zip(shapes, strides):
            n += (x - 1) * (y if y >= 0 else -y)
        cot = n
    elif type(cot) is int:
        if cot <= 0:
            raise ShapeError(f"complement: cotarget {cot} must have extents >= 1")
        n = cot
    else:
        n = 1
        for x in flatten(cot):
            if x <= 0:
                raise ShapeError(f"complement: cotarget {fmt(cot)} must have extents >= 1")
            n *= x
    if strides[0] == 0:  # filter left nothing (1:0): fill the whole cotarget
        return int_layout(n, 1, (n,), (1,)) if n != 1 else int_layout(1, 0, (1,), (0,))
    r = len(shapes)
    # CuTe repeatedly takes the first minimum stride: a stable ascending sort
    if r == 1:
        order: Any = (0,)
    elif r == 2:
        order = (0, 1) if strides[0] <= strides[1] else (1, 0)
    else:
        order = sorted(range(r), key=strides.__getitem__)
    res_s = []
    res_d = [1]
    below = 1
    nests = True
    for k in order:
        ms = strides[k]
        if ms < 0:
            raise ComplementError(f"complement of {layout}: negative stride {ms} is not "
                                  "supported (CuTe's complement assumes positive strides and "
                                  "returns a meaningless layout)")
        gap = ms // below
        if gap == 0:
            _non_injective(layout, ms, below)
        if nests and ms % below:
            nests = False
        res_s.append(gap)
        below = ms * shapes[k]
        res_d.append(below)
    # res_d's last entry is new_stride; rest = coalesce(ceil_div(cotarget, new_stride)), a
    # single product for static cotargets
    if type(cot) is int:
        rest = (cot + below - 1) // below
    else:
        rest = 1
        q = below
        for x in flatten(cot):
            rest *= (x + q - 1) // q
            q = (q + x - 1) // x
    res_s.append(rest)
    # CuTe coalesces (gaps..., rest):(1, spans...).  No two of these modes can merge (each gap
    # extent times its stride stays below the next stride, which is below the next span), so
    # coalescing just drops the extent-1 modes.
    out_s = []
    out_d = []
    for x, y in zip(res_s, res_d):
        if x != 1:
            out_s.append(x)
            out_d.append(y)
    if not out_s:
        out_s = [1]
        out_d = [0]
    out = int_layout_from_flat(out_s, out_d)
    # Post: size(C) * size(filter(A)) >= size(cotarget).  CuTe's result is always increasing and
    # disjoint from the layout (each gap mode stays below the next stride) but may be too small:
    # when the modes do not nest (CuTe truncates the gaps), or for a shape cotarget, whose
    # mode-by-mode ceil_div can fall short of size(cotarget) / new_stride.
    if not nests or type(cot) is not int:
        size = 1
        for x in out_s:
            size *= x
        for x in shapes:
            size *= x  # times size(filter(A))
        if size < n:
            _too_small(layout, cot, out, size, n, nests)
    return out


def _non_injective(layout: Layout, ms: Any, below: Any) -> None:
    raise ComplementError(
        f"complement of {layout}: the layout is not injective: a mode of stride {ms} starts "
        f"inside the span {below} of the smaller-stride modes (CuTe: 'Non-injective Layout "
        "detected in complement')")


def _too_small(layout: Layout, cot: Any, out: Layout, total: Any, need: Any,
               nests: bool = False) -> None:
    why = ("the modes do not nest (sorted, each stride must be a multiple of the span of the "
           "smaller modes), so the gaps cannot be filled by a layout" if not nests else
           f"the cotarget shape {fmt(cot)} divided mode by mode by the layout's span leaves too "
           "few repetitions")
    raise ComplementError(
        f"complement of {layout} up to {fmt(cot)}: {why}; CuTe returns {out}, and "
        f"size({out}) * size(filter(A)) = {total} < {need} = size(cotarget), violating "
        "complement's size post-condition")
