"""Turning the user's description of an access into arrays of element offsets.

An *access* says, for every (thread, value[, iteration...]), which element of LDS (or of a tile)
it touches.  Accepted forms:

* a :class:`~layoutalg.Layout` or :class:`~layoutalg.ComposedLayout` whose mode 0 is the thread
  (lane) mode and mode 1 the thread's values; any further modes are *iterations* (k steps, tile
  positions, stages): each iteration coordinate is a separate instruction issue;
* a :class:`~layoutalg.TVLayout` (its ``layout_tv`` is used);
* an integer array ``[threads, values]`` or ``[threads, values, iterations]``.

With ``lds=`` the access yields indices into ``lds`` (a Layout, ComposedLayout or a callable on
numpy arrays), e.g. a TV partition of a tile composed with the tile's swizzled LDS layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

import numpy as np

from ..enumerate import eval_int_array, swizzle_values
from ..errors import SymbolicError
from ..inttuple import flatten, is_static
from ..layout import Layout
from ..swizzle import ComposedLayout, Swizzle
from ..tv import TVLayout
from .result import AccessError

__all__ = ["Access", "as_access", "eval_at", "has_symbols", "tv_sizes", "MAX_POINTS"]

MAX_POINTS = 1 << 24   # refuse to enumerate more (thread, value, iteration) points than this
MAX_OFFSET = 1 << 62   # offsets (and byte addresses) must stay below this: int64 never wraps


@dataclass(frozen=True)
class Access:
    """Concrete element offsets of an access: ``offsets[thread, value, iteration]``."""

    offsets: np.ndarray            # int64 [threads, values, iterations]
    iter_shape: Tuple[int, ...]    # shape of the iteration modes (() when there are none)
    layout: Any                    # the Layout/ComposedLayout described, None for arrays
    lds: Any                       # the LDS layout applied after ``layout`` (or None)

    @property
    def threads(self) -> int:
        return self.offsets.shape[0]

    @property
    def values(self) -> int:
        return self.offsets.shape[1]

    @property
    def iterations(self) -> int:
        return self.offsets.shape[2]

    def iter_coord(self, i: int) -> Tuple[int, ...]:
        """Coordinate of flat iteration ``i`` (first iteration mode fastest, as CuTe)."""
        if not self.iter_shape:
            return ()
        return tuple(int(c) for c in np.unravel_index(i, self.iter_shape, order="F"))


def has_symbols(obj: Any) -> bool:
    """True when a Layout/ComposedLayout has a symbolic (sympy) shape, stride or offset."""
    if isinstance(obj, TVLayout):
        obj = obj.layout_tv
    if isinstance(obj, Layout):
        return not (is_static(obj.shape) and is_static(obj.stride))
    if isinstance(obj, ComposedLayout):
        return (type(obj.offset) is not int or has_symbols(obj.inner)
                or (not isinstance(obj.outer, Swizzle) and has_symbols(obj.outer)))
    return False


def tv_sizes(layout: Layout, what: str) -> Tuple[int, ...]:
    """``(threads, values, iteration extents...)``: the sizes of a TV layout's modes (a rank-1
    layout has one value per thread); at most :data:`MAX_POINTS` points in all."""
    shp = layout.shape if type(layout.shape) is tuple else (layout.shape,)
    sizes = []
    for s in shp:
        n = 1
        for x in flatten(s):
            if type(x) is not int:
                raise SymbolicError(f"{what} {layout} has a symbolic extent {x}")
            n *= x
        sizes.append(n)
    if len(sizes) == 1:
        sizes.append(1)
    total = 1
    for n in sizes:
        total *= n
    if total > MAX_POINTS:
        raise AccessError(f"{what} has {total} points, more than the exhaustive limit "
                          f"{MAX_POINTS}; check one tile (drop iteration modes)")
    return tuple(sizes)


def eval_at(layout: Any, idx: np.ndarray, what: str = "layout") -> np.ndarray:
    """``layout(i)`` for every integer ``i`` of ``idx`` (vectorised, exact int64).

    Layouts are evaluated CuTe-style on the 1-D index (column-major over the flat modes, last
    mode unbounded); composed layouts apply ``outer(offset + inner(i))``.
    """
    idx = np.asarray(idx, dtype=np.int64)
    if isinstance(layout, TVLayout):
        layout = layout.layout_tv
    if isinstance(layout, Layout):
        fs, fd = layout.flat()
        if not all(type(x) is int for x in fs + fd):
            raise AccessError(f"{what} {layout} has symbolic extents or strides; this check "
                              "needs concrete integers here")
        # |offset| <= sum (s-1)|d| over all but the last mode + (idx // their size) |d_last|
        span, block = 0, 1
        for s, d in zip(fs[:-1], fd[:-1]):
            span += (s - 1) * abs(d)
            block *= s
        span += (int(idx.max()) // block if idx.size else 0) * abs(fd[-1])
        if span >= MAX_OFFSET:
            raise AccessError(f"{what} {layout} reaches offsets up to {span}, past the verifier's "
                              f"exact int64 range (< 2^62)")
        return eval_int_array(layout, idx)
    if isinstance(layout, ComposedLayout):
        if type(layout.offset) is not int:
            raise AccessError(f"{what} {layout} has a symbolic offset; this check needs an int")
        return eval_at(layout.outer, eval_at(layout.inner, idx, what) + layout.offset, what)
    if isinstance(layout, Swizzle):
        return swizzle_values(layout, idx)
    if callable(layout):
        out = np.asarray(layout(idx))
        if out.shape != idx.shape or not np.issubdtype(out.dtype, np.integer):
            raise AccessError(f"{what}: a callable must map an int array to an int array of the "
                              f"same shape; got {out.dtype} {out.shape} for {idx.shape}")
        return out.astype(np.int64)
    raise AccessError(f"{what}: expected a Layout, ComposedLayout, Swizzle or callable, got "
                      f"{type(layout).__name__}")


def check_in_domain(lds: Any, idx: np.ndarray) -> None:
    """Indices past a layout's size (or below 0) only exist through CuTe's unbounded last mode:
    for a verifier that is almost surely a partition reaching outside its tile, so refuse it."""
    if idx.size and int(idx.min()) < 0:
        t, v, i = (int(x) for x in np.argwhere(idx < 0)[0])
        raise AccessError(f"thread {t} value {v} reaches negative tile index {int(idx[t, v, i])}; "
                          "the lds layout has no such element")
    if isinstance(lds, TVLayout):
        lds = lds.layout_tv
    if isinstance(lds, (Layout, ComposedLayout)):
        n = lds.size()
        if type(n) is int and idx.size and int(idx.max()) >= n:
            t, v, i = (int(x) for x in np.argwhere(idx == idx.max())[0])
            raise AccessError(f"thread {t} value {v} reaches index {int(idx.max())} but the lds "
                              f"layout {lds} has only {n} elements")


def as_access(access: Any, lds: Any = None, what: str = "access") -> Access:
    """Normalise ``access`` (and an optional ``lds``) into concrete element offsets."""
    if isinstance(access, TVLayout):
        access = access.layout_tv
    layout = None
    iter_shape: Tuple[int, ...] = ()
    if isinstance(access, (Layout, ComposedLayout)):
        inner = access.inner if isinstance(access, ComposedLayout) else access
        if has_symbols(access):
            raise AccessError(f"{what} {access} is symbolic; use the sympy method "
                              "(bank_conflicts dispatches to it automatically)")
        t, v, *iters = tv_sizes(inner, what)
        iter_shape = tuple(iters)
        it = int(np.prod(iter_shape, dtype=np.int64))
        vals = eval_at(access, np.arange(t * v * it, dtype=np.int64), what)
        offsets = vals.reshape(it, v, t).transpose(2, 1, 0)
        layout = access
    else:
        try:
            arr = np.asarray(access)
        except Exception:  # pragma: no cover - numpy accepts nearly anything
            arr = None
        if arr is None or arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer)):
            raise AccessError(f"{what}: expected a TV Layout, ComposedLayout, TVLayout or an int "
                              f"array [lanes, values], got {type(access).__name__}"
                              + (f" of dtype {arr.dtype}" if arr is not None else ""))
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise AccessError(f"{what}: an offset array must be [lanes, values] or "
                              f"[lanes, values, iterations], got shape {arr.shape}")
        offsets = arr.astype(np.int64)
        if offsets.shape[2] > 1:
            iter_shape = (offsets.shape[2],)
    if lds is not None:
        check_in_domain(lds, offsets)
        offsets = eval_at(lds, offsets, "lds")
    if offsets.size == 0:
        raise AccessError(f"{what} is empty")
    if offsets.min() < 0:
        t, v, i = np.argwhere(offsets < 0)[0]
        raise AccessError(f"{what}: thread {t} value {v} has negative offset {offsets[t, v, i]}")
    return Access(offsets, iter_shape, layout, lds)
