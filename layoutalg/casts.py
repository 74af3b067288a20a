"""Casts: ``upcast`` and ``downcast`` reinterpret a layout's element width.

``upcast<N>`` views a layout in units ``N`` times wider (stride-1 modes shrink, other strides
divide), ``downcast<N>`` in units ``N`` times narrower.  A ComposedLayout is cast whole, as in
CuTe: the swizzle's base (``upcast<N>(Sw<B,M,S>) = Sw<B,M-log2 N,S>``), the offset and the
inner layout; an outer Layout or ComposedLayout is cast by the same functions, so both halves
live here.
"""

from __future__ import annotations

from typing import Any

from .checks import require_any_layout, require_int
from .errors import DivisibilityError
from .inttuple import ceil_div
from .layout import Layout
from .swizzle import ComposedLayout, Swizzle

__all__ = ["upcast", "downcast", "upcast_composed", "downcast_composed"]


def _check_factor(n: Any, name: str) -> None:
    require_int(n, name, "the factor n")


def upcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times wider: stride-1 modes shrink, other strides divide.
    A ComposedLayout is cast whole (swizzle base, offset and inner; CuTe's ``upcast<N>``)."""
    _check_factor(n, "upcast")
    n = int(n)
    if not isinstance(layout, Layout):
        require_any_layout(layout, "upcast")
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


# ---- ComposedLayout: swizzle base, offset and inner together ------------------------------

def _log2_factor(n: int, name: str) -> int:
    if n & (n - 1):
        raise DivisibilityError(f"{name}<{n}> of a composed layout: the factor must be a power "
                                "of two (a swizzle acts on bits)")
    return n.bit_length() - 1


def _cast_outer(outer: Any, n: int, up: bool, name: str) -> Any:
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
    off = cl.offset
    if type(off) is int and off % n:
        raise DivisibilityError(f"upcast<{n}> of {cl}: the offset {off} is not a multiple of {n}")
    return ComposedLayout(_cast_outer(cl.outer, n, True, "upcast"),
                          off // n if type(off) is int else off / n, upcast(cl.inner, n))


def downcast_composed(cl: ComposedLayout, n: int) -> ComposedLayout:
    """View ``cl`` in units ``n`` times narrower: swizzle base, offset and inner all scale up."""
    return ComposedLayout(_cast_outer(cl.outer, n, False, "downcast"), cl.offset * n,
                          downcast(cl.inner, n))
