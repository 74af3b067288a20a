"""XOR swizzles and composed layouts.

``Swizzle(B, M, S)`` is CuTe's ``Swizzle<B,M,S>``: it XORs the B bits starting at bit ``M + S``
into the B bits starting at bit ``M`` (``S`` may be negative, in which case the direction is
reversed).  It is an involution: ``sw(sw(x)) == x``.

``ComposedLayout(outer, offset, inner)`` is the function ``c -> outer(offset + inner(c))``; CuTe
prints it ``outer o offset o inner``.  The usual shared-memory layout is
``Swizzle o 0 o Layout``.  Composition and the divides act on ``inner`` (the domain side), so
tiling a swizzled tile keeps the swizzle on the absolute offset.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .checks import register_layout_type
from .enumerate import eval_int_array, layout_values, swizzle_values
from .errors import LayoutError, ShapeError
from .layout import Layout, has_none, slice_and_offset

__all__ = ["Swizzle", "ComposedLayout", "make_composed_layout"]


def _xor(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return a ^ b
    from .symbolic import Xor
    return Xor(a, b)


def _offset_value(x: Any, what: str) -> Any:
    """An offset as an int or a sympy integer expression (ShapeError otherwise)."""
    from .inttuple import normalize
    if isinstance(x, (tuple, list)) or x is None:
        raise ShapeError(f"{what}: the offset must be an integer, got {x!r}")
    return normalize(x, f"{what}: offset")


class Swizzle:
    """``Swizzle(B, M, S)``: ``x ^ ((x & yyy_mask) >> S)`` with ``yyy_mask = (2^B-1) << (M+max(0,S))``."""

    __slots__ = ("bits", "base", "shift", "yyy_mask", "zzz_mask")

    def __init__(self, bits: int, base: int, shift: int) -> None:
        for name, v in (("B", bits), ("M", base), ("S", shift)):
            if type(v) is not int:
                raise ShapeError(f"Swizzle {name} must be an int, got {v!r}")
        if bits < 0 or base < 0:
            raise ShapeError(f"Swizzle<{bits},{base},{shift}>: B and M must be >= 0")
        if max(bits, base, abs(shift)) > 64:
            raise ShapeError(f"Swizzle<{bits},{base},{shift}>: B, M and |S| must be <= 64 "
                             "(offsets are at most 64-bit)")
        if abs(shift) < bits:
            raise ShapeError(f"Swizzle<{bits},{base},{shift}>: |S| must be >= B so the source "
                             "and destination bit ranges do not overlap")
        self.bits, self.base, self.shift = bits, base, shift
        msk = (1 << bits) - 1
        self.yyy_mask = msk << (base + max(0, shift))
        self.zzz_mask = msk << (base - min(0, shift))

    def __call__(self, offset: Any) -> Any:
        if type(offset) is not int:
            offset = _offset_value(offset, str(self))
        if type(offset) is int:
            y = offset & self.yyy_mask
            return offset ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)
        return self.symbolic(offset)

    def symbolic(self, offset: Any) -> Any:
        """Exact sympy expression of the swizzled offset (bits via floor/Mod, XOR as Xor)."""
        from .symbolic import ifloordiv, imod
        if self.bits == 0:
            return offset
        lo = self.base - min(0, self.shift)
        hi = self.base + max(0, self.shift)
        span = 2 ** self.bits
        zzz = imod(ifloordiv(offset, 2 ** lo), span)
        yyy = imod(ifloordiv(offset, 2 ** hi), span)
        return offset + (_xor(zzz, yyy) - zzz) * 2 ** lo

    def size(self) -> int:  # a swizzle acts on every offset; CuTe treats it as unbounded
        raise ShapeError("a Swizzle has no size; compose it with a layout")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Swizzle) and (self.bits, self.base, self.shift) == (
            other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Sw", self.bits, self.base, self.shift))

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    __repr__ = __str__


class ComposedLayout:
    """``outer o offset o inner``: ``c -> outer(offset + inner(c))``."""

    __slots__ = ("outer", "offset", "inner")

    def __init__(self, outer: Any, offset: Any, inner: Layout) -> None:
        if not isinstance(inner, Layout):
            raise ShapeError(f"ComposedLayout inner must be a Layout, got {inner!r}")
        if not isinstance(outer, (Swizzle, Layout, ComposedLayout)):
            raise ShapeError(f"ComposedLayout outer must be a Swizzle or Layout, got {outer!r}")
        offset = _offset_value(offset, "ComposedLayout")
        self.outer, self.offset, self.inner = outer, offset, inner

    # the domain is the inner layout's
    @property
    def shape(self) -> Any:
        return self.inner.shape

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def depth(self) -> int:
        return self.inner.depth

    def size(self) -> Any:
        return self.inner.size()

    def cosize(self) -> Any:
        # the swizzle only permutes bits within the span of its masks
        if isinstance(self.outer, Swizzle):
            vals = self.values()
            return int(np.max(vals)) + 1 if len(vals) else 0
        return self.outer.cosize()

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int) -> "ComposedLayout":
        return ComposedLayout(self.outer, self.offset, self.inner[i])

    def __call__(self, *coord: Any) -> Any:
        c = coord[0] if len(coord) == 1 else tuple(coord)
        if has_none(c):
            sub, off = slice_and_offset(c, self.inner)
            return ComposedLayout(self.outer, self.offset + off, sub)
        return self.outer(self.offset + self.inner(c))

    def values(self):
        """All offsets ``self(i)`` for ``i < size`` as one numpy array (vectorised)."""
        inner = layout_values(self.inner) + self.offset
        outer = self.outer
        if isinstance(outer, Swizzle):
            return swizzle_values(outer, inner)
        if isinstance(outer, Layout):
            return eval_int_array(outer, inner)
        return np.array([outer(int(v)) for v in inner], dtype=np.int64)

    def compose(self, rhs: Any) -> "ComposedLayout":
        from .compose import composition
        return ComposedLayout(self.outer, self.offset, composition(self.inner, rhs))

    def divide(self, tiler: Any, fn: Any) -> "ComposedLayout":
        return ComposedLayout(self.outer, self.offset, fn(self.inner, tiler))

    def with_shape(self, *shape: Any) -> "ComposedLayout":
        return ComposedLayout(self.outer, self.offset, self.inner.with_shape(*shape))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComposedLayout) and (self.outer, self.offset, self.inner) == (
            other.outer, other.offset, other.inner)

    def __hash__(self) -> int:
        return hash((self.outer, self.offset, self.inner))

    def __str__(self) -> str:
        return f"{self.outer} o {self.offset} o {self.inner}"

    def __repr__(self) -> str:
        return f"ComposedLayout({self})"

    def _repr_svg_(self) -> str:  # pragma: no cover - visualize tests cover it
        from visualize import draw_layout
        return draw_layout(self)._repr_svg_()

    def _repr_html_(self) -> Optional[str]:
        """The diagram fitted to the notebook cell (full size on click), None if not drawable."""
        from visualize import draw_layout
        try:
            return draw_layout(self)._repr_html_()
        except LayoutError:
            return None


def on_inner(cl: ComposedLayout, fn: Callable[..., Layout], *args: Any) -> ComposedLayout:
    """``outer o offset o fn(inner, *args)`` (CuTe's lifting of a domain-side operation: how
    coalesce, filter and tile_to_shape act on a composed layout)."""
    return ComposedLayout(cl.outer, cl.offset, fn(cl.inner, *args))


def make_composed_layout(outer: Any, offset: Any, inner: Layout) -> ComposedLayout:
    return ComposedLayout(outer, offset, inner)


register_layout_type("ComposedLayout", ComposedLayout)   # for layoutalg.checks
