"""The algebra on ``ComposedLayout`` (``outer o offset o inner``), as CuTe defines it.

CuTe (``layout_composed.hpp``, ``swizzle_layout.hpp``) lifts the domain-side operations to a
composed layout by applying them to the inner layout and keeping ``outer`` and ``offset``:
``coalesce``, ``filter`` and ``tile_to_shape`` do that here.  ``upcast``/``downcast`` change the
element width of all three parts (``upcast<N>(Sw<B,M,S>) = Sw<B,M-log2 N,S>``).
``max_common_layout``/``max_common_vector`` start from the inner layouts' common layout (CuTe
also caps it at the swizzle's untouched low ``2^M`` offsets) and keep the longest prefix on which
the post-condition ``a(R(i)) == i == b(R(i))`` holds for the composed functions, checked on
every index of that prefix.
"""

from __future__ import annotations

from typing import Any, Callable

from .errors import ShapeError
from .layout import Layout
from .casts import downcast_composed, upcast_composed
from .swizzle import ComposedLayout, Swizzle

__all__ = ["on_inner", "upcast_composed", "downcast_composed", "max_common_layout_composed"]


def on_inner(cl: ComposedLayout, fn: Callable[..., Layout], *args: Any) -> ComposedLayout:
    """``outer o offset o fn(inner, *args)`` (CuTe's lifting of a domain-side operation)."""
    return ComposedLayout(cl.outer, cl.offset, fn(cl.inner, *args))


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
    from .compose import composition
    from .inverses import max_common_layout
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
    from .errors import CompositionError
    for keep in range(good, 1, -1):      # the longest prefix that is itself a layout
        if n % keep == 0:
            try:
                return composition(common, Layout(keep))
            except CompositionError:
                continue
    return Layout._make(1, 0)            # one element (CuTe's minimum answer)
