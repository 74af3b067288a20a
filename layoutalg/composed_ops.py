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

from .errors import DivisibilityError, ShapeError
from .layout import Layout
from .swizzle import ComposedLayout, Swizzle

__all__ = ["on_inner", "upcast_composed", "downcast_composed", "max_common_layout_composed"]


def on_inner(cl: ComposedLayout, fn: Callable[..., Layout], *args: Any) -> ComposedLayout:
    """``outer o offset o fn(inner, *args)`` (CuTe's lifting of a domain-side operation)."""
    return ComposedLayout(cl.outer, cl.offset, fn(cl.inner, *args))


def _log2_factor(n: int, name: str) -> int:
    if n & (n - 1):
        raise DivisibilityError(f"{name}<{n}> of a composed layout: the factor must be a power "
                                "of two (a swizzle acts on bits)")
    return n.bit_length() - 1


def _cast_outer(outer: Any, n: int, up: bool, name: str) -> Any:
    from .algebra import downcast, upcast
    if isinstance(outer, Swizzle):
        k = _log2_factor(n, name)
        base = outer.base - k if up else outer.base + k
        if base < 0:
            raise DivisibilityError(f"{name}<{n}> of {outer}: the swizzle moves bits below "
                                    f"bit {k}, so {n} adjacent elements are not a unit; factors "
                                    f"up to {1 << outer.base} are valid")
        return Swizzle(outer.bits, base, outer.shift)
    if isinstance(outer, ComposedLayout):
        return upcast_composed(outer, n) if up else downcast_composed(outer, n)
    return upcast(outer, n) if up else downcast(outer, n)


def upcast_composed(cl: ComposedLayout, n: int) -> ComposedLayout:
    """View ``cl`` in units ``n`` times wider: swizzle base, offset and inner all scale down."""
    from .algebra import upcast
    off = cl.offset
    if type(off) is int and off % n:
        raise DivisibilityError(f"upcast<{n}> of {cl}: the offset {off} is not a multiple of {n}")
    return ComposedLayout(_cast_outer(cl.outer, n, True, "upcast"),
                          off // n if type(off) is int else off / n, upcast(cl.inner, n))


def downcast_composed(cl: ComposedLayout, n: int) -> ComposedLayout:
    """View ``cl`` in units ``n`` times narrower: swizzle base, offset and inner all scale up."""
    from .algebra import downcast
    return ComposedLayout(_cast_outer(cl.outer, n, False, "downcast"), cl.offset * n,
                          downcast(cl.inner, n))


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
