"""Inverses and common layouts: ``right_inverse``, ``left_inverse``, ``nullspace``,
``max_common_layout`` and ``max_common_vector``.

Computed as CuTe does (its ``exchange_sort`` order included, which decides between modes of
equal stride); where CuTe's result may miss the post-condition (a non-injective layout, an
inexact intermediate composition), the post-condition is checked on every index, up to
:data:`layoutalg.compose.EXHAUSTIVE_LIMIT`, before the result is returned.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import require_any_layout, require_layout
from .compose import EXHAUSTIVE_LIMIT, composition, composition_as_cute
from .enumerate import eval_int_array, layout_values
from .errors import CompositionError, InverseError, ShapeError
from .flat_modes import coalesce_lists
from .inttuple import compact_col_major, unwrap
from .layout import Layout, coalesce, int_flat, int_layout, int_layout_from_flat
from .swizzle import ComposedLayout, Swizzle

__all__ = ["right_inverse", "left_inverse", "nullspace", "max_common_layout",
           "max_common_vector", "max_common_layout_composed"]


def _wrapped_coalesce(layout: Layout) -> tuple:
    """Flat (shapes, strides, prefix products) of ``coalesce(layout)`` (CuTe wraps a leaf)."""
    c = coalesce(layout)
    s = c.shape if type(c.shape) is tuple else (c.shape,)
    d = c.stride if type(c.stride) is tuple else (c.stride,)
    pre = [1]
    for x in s:
        pre.append(pre[-1] * x)
    return s, d, pre


def _exchange_order(keys: Any, vals: Any) -> list:
    """``vals`` reordered by ``keys`` with CuTe's ``exchange_sort`` (not stable: equal strides
    come out in CuTe's order, which decides which of two equal-stride modes an inverse uses)."""
    k = list(keys)
    v = list(vals)
    n = len(k)
    for i in range(n):
        ki = k[i]
        for j in range(i + 1, n):
            kj = k[j]
            if kj < ki:
                k[i] = kj
                k[j] = ki
                v[i], v[j] = v[j], v[i]
                ki = kj
    return v


def right_inverse(layout: Any) -> Any:
    """CuTe's ``right_inverse``: ``R`` with ``layout(R(i)) == i`` for all ``i < size(R)``.

    Starting from offset 1, it chains the modes whose stride equals the span reached so far (a
    mode of stride 0, a negative or a dynamic stride never matches; unlike pycute it does not
    stop at the first mode that does not chain).
    Post: ``composition(layout, R)`` equals ``make_layout(shape(R))`` on R's domain.
    """
    require_layout(layout, "right_inverse")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        return _right_inverse_int(*f)
    s, d, pre = _wrapped_coalesce(layout)
    idx = [i for i in range(len(d)) if type(d[i]) is int]
    order = _exchange_order([d[i] for i in idx], idx)
    rs: list = [1]
    rd: list = [0]
    curr: Any = 1
    for i in order:
        if type(curr) is int and d[i] == curr:
            rs.append(s[i])
            rd.append(pre[i])
            curr = s[i] * d[i]
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


def _right_inverse_int(fs: tuple, fd: tuple) -> Layout:
    """:func:`right_inverse` for all-int layouts (same algorithm on flat lists).

    CuTe walks the modes in (exchange-)sorted stride order and takes each mode whose stride is
    the span reached so far.  The span only grows, so with distinct strides this is a chain of
    dictionary look-ups; with equal strides the exchange-sort order decides which one is taken.
    """
    s, d = coalesce_lists(fs, fd, fs[-1], fd[-1])
    n = len(s)
    if n == 1:
        x = s[0]
        if d[0] == 1 and x != 1:
            return int_layout(x, 1, (x,), (1,))
        return int_layout(1, 0, (1,), (0,))
    pos = {}
    for i in range(n):
        pos[d[i]] = i
    rs = [1]
    rd = [0]
    if len(pos) == n:
        curr = 1
        while curr in pos:
            i = pos[curr]
            x = s[i]
            rs.append(x)
            p = 1
            for y in s[:i]:
                p *= y
            rd.append(p)
            curr = x * curr
    else:
        pres = []
        p = 1
        for x in s:
            pres.append(p)
            p *= x
        curr = 1
        for i in _exchange_order(d, range(n)):
            if d[i] == curr:
                rs.append(s[i])
                rd.append(pres[i])
                curr = s[i] * d[i]
    if len(rs) == 1:
        return int_layout(1, 0, (1,), (0,))
    out_s, out_d = coalesce_lists(rs, rd, rs[-1], rd[-1])
    return int_layout_from_flat(out_s, out_d)


def left_inverse(layout: Any) -> Any:
    """CuTe's ``left_inverse``: a quasi-inverse ``R`` with ``layout(R(layout(i))) == layout(i)``
    for all ``i < size(layout)``; for an injective layout ``R(layout(i)) == i``.

    Raises InverseError where CuTe refuses (dynamic strides; a sorted stride that is not a
    multiple of the size already covered: CuTe's left inverse divisibility condition) and for
    negative strides (CuTe returns a meaningless layout).
    """
    require_layout(layout, "left_inverse")
    s, d, pre = _wrapped_coalesce(layout)
    if not all(type(x) is int for x in d):
        raise InverseError(f"left_inverse of {layout}: requires static strides (as in CuTe)")
    for x in d:
        if x < 0:
            raise InverseError(f"left_inverse of {layout}: negative stride {x} is not supported "
                               "(CuTe returns a meaningless layout)")
    order = _exchange_order(list(d), list(range(len(d))))
    rs: list = []
    rd: list = [0]
    sz: Any = 1
    for i in order:
        if d[i] == 0:
            continue
        if type(sz) is not int:
            raise InverseError(f"left_inverse of {layout}: requires static shapes below the "
                               "largest stride")
        if d[i] % sz != 0:
            raise InverseError(f"left_inverse of {layout}: stride {d[i]} is not a multiple of "
                               f"{sz}, the size already covered (CuTe's left inverse "
                               "divisibility condition)")
        rs.append(d[i] // sz)
        rd.append(pre[i])
        sz = d[i]
    rs.append(s[order[-1]])
    out = coalesce(Layout._make(tuple(rs), tuple(rd)))
    # With the divisibility condition, the positive-stride modes are injective iff each sorted
    # stride is at least the span of the previous one; then R reads the coordinates back
    # digit by digit and the post-condition holds.  Otherwise CuTe's result is often not a
    # quasi-inverse (e.g. (6,4):(16,8)), so check it on every index.
    prev = None
    injective = True
    for i in order:
        if d[i] == 0:
            continue
        if prev is not None and d[i] < s[prev] * d[prev]:
            injective = False
            break
        prev = i
    if not injective:
        _check_quasi_inverse(layout, out)
    return out


def _check_quasi_inverse(layout: Layout, inv: Layout) -> None:
    """Raise InverseError unless ``layout(inv(layout(i))) == layout(i)`` for all i < size."""
    n = layout.size()
    if type(n) is not int or n > EXHAUSTIVE_LIMIT:
        raise InverseError(f"left_inverse of {layout}: the layout is not injective and too large "
                           "to check CuTe's quasi-inverse on every index")
    y = layout_values(layout)
    back = eval_int_array(layout, eval_int_array(inv, y))
    if not np.array_equal(back, y):
        i = int(np.nonzero(back != y)[0][0])
        raise InverseError(
            f"left_inverse of {layout}: the layout is not injective and CuTe's result {inv} is "
            f"not a quasi-inverse: layout(R(layout({i}))) = {int(back[i])} != layout({i}) = "
            f"{int(y[i])}")


def nullspace(layout: Layout) -> Layout:
    """Layout of the indices that ``layout`` maps to 0 (its stride-0 modes).

    Post: ``layout(result(i)) == 0`` and ``size(result) == size(layout) / size(filter(layout))``.
    """
    require_layout(layout, "nullspace")
    fs, fd = layout.flat()
    pre = compact_col_major(fs)
    idx = [i for i in range(len(fd)) if type(fd[i]) is int and fd[i] == 0]
    if not idx:
        return Layout._make(1, 0)
    return Layout._make(unwrap(tuple(fs[i] for i in idx)), unwrap(tuple(pre[i] for i in idx)))


def _common_prefix(a: Layout, inv_b: Layout) -> tuple:
    """CuTe's ``coalesce(composition(a, inv_b))`` and whether it is exactly ``a o inv_b``."""
    try:
        return coalesce(composition(a, inv_b)), True
    except CompositionError:
        # CuTe returns a layout that is not a o inv_b; its leading stride-1 mode may still be
        # right, which the callers check against their post-conditions
        return coalesce(composition_as_cute(a, inv_b)), False


def _leading_unit_mode(common: Layout) -> Any:
    s0 = common.shape[0] if type(common.shape) is tuple else common.shape
    d0 = common.stride[0] if type(common.stride) is tuple else common.stride
    if type(s0) is int and type(d0) is int and d0 == 1:
        return s0
    return None


def _check_identity(fn: Any, n: int, what: str) -> None:
    """Raise CompositionError unless ``fn(i) == i`` for all ``i < n``."""
    if n > EXHAUSTIVE_LIMIT:
        raise CompositionError(f"{what}: CuTe's intermediate composition is not exact and the "
                               f"claimed common prefix ({n} elements) is too long to check")
    for i in range(n):
        if fn(i) != i:
            raise CompositionError(f"{what}: CuTe's intermediate composition is not exact and "
                                   f"its claimed common prefix of {n} elements fails at {i}")


def max_common_layout(a: Layout, b: Layout) -> Layout:
    """CuTe's ``max_common_layout``: ``R`` with ``a(R(i)) == i`` and ``b(R(i)) == i`` for all
    ``i < size(R)`` (the largest contiguous prefix CuTe finds).

    When CuTe's intermediate composition is not exact, its answer is returned only after
    checking that post-condition on every index (else CompositionError).  With a
    ComposedLayout argument see :func:`layoutalg.composed_ops.max_common_layout_composed`.
    """
    if type(a) is not Layout or type(b) is not Layout:
        require_any_layout(a, "max_common_layout", "a")
        require_any_layout(b, "max_common_layout", "b")
        if not (isinstance(a, Layout) and isinstance(b, Layout)):
            return max_common_layout_composed(a, b)
    inv_b = right_inverse(b)
    common, exact = _common_prefix(a, inv_b)
    s0 = _leading_unit_mode(common)
    if s0 is None:
        return Layout._make(1, 0)
    tile = Layout._make(s0, 1)
    try:
        out = composition(inv_b, tile)
        ok = exact
    except CompositionError:
        out = composition_as_cute(inv_b, tile)
        ok = False
    if not ok:
        n = out.size()
        _check_identity(lambda i: a(out(i)), n, f"max_common_layout({a}, {b})")
        _check_identity(lambda i: b(out(i)), n, f"max_common_layout({a}, {b})")
    return out


def max_common_vector(a: Layout, b: Layout) -> int:
    """CuTe's ``max_common_vector``: the largest N (found by CuTe) such that
    ``a(b.get_1d_coord(n)) == n`` for ``n < N``, i.e. ``a(right_inverse(b)(n)) == n``.

    When CuTe's intermediate composition is not exact, its answer is returned only after
    checking that post-condition on every index (else CompositionError).  With a
    ComposedLayout argument: ``size(max_common_layout(a, b))``.
    """
    if type(a) is not Layout or type(b) is not Layout:
        require_any_layout(a, "max_common_vector", "a")
        require_any_layout(b, "max_common_vector", "b")
        if not (isinstance(a, Layout) and isinstance(b, Layout)):
            return max_common_layout(a, b).size()
    inv_b = right_inverse(b)
    common, exact = _common_prefix(a, inv_b)
    s0 = _leading_unit_mode(common)
    if s0 is None:
        return 1
    if not exact:
        _check_identity(lambda i: a(inv_b(i)), s0, f"max_common_vector({a}, {b})")
    return s0


# ---- ComposedLayout arguments ----------------------------------------------------------------

def _domain_layout(x: Any, name: str) -> Layout:
    if isinstance(x, ComposedLayout):
        return x.inner
    if isinstance(x, Layout):
        return x
    raise ShapeError(f"{name}: expected a Layout or a ComposedLayout, got {x!r} "
                     f"({type(x).__name__})")


def max_common_layout_composed(a: Any, b: Any) -> Layout:
    """``R`` with ``a(R(i)) == i`` and ``b(R(i)) == i`` for ``i < size(R)``, where ``a`` or ``b``
    is a composed layout: the inner layouts' common layout, cut to its longest valid prefix."""
    common = max_common_layout(_domain_layout(a, "max_common_layout"),
                               _domain_layout(b, "max_common_layout"))
    n = common.size()
    cap = min([1 << o.outer.base for o in (a, b) if isinstance(o, ComposedLayout)
               and isinstance(o.outer, Swizzle)] + [n]) if type(n) is int else n
    if cap < n and n % cap == 0:   # CuTe: common.compose(2^M), the bits the swizzle keeps
        common = composition(common, Layout(cap))
        n = cap
    if type(n) is not int:
        raise ShapeError(f"max_common_layout of {a} and {b}: the common layout {common} has a "
                         "symbolic size; give static shapes")
    good = 0
    while good < n:
        r = common(good)
        if a(r) != good or b(r) != good:
            break
        good += 1
    if good == n:
        return common
    for keep in range(good, 1, -1):      # the longest prefix that is itself a layout
        if n % keep == 0:
            try:
                return composition(common, Layout(keep))
            except CompositionError:
                continue
    return Layout._make(1, 0)            # one element (CuTe's minimum answer)
