"""Vectorised enumeration: every offset of a layout as one numpy array.

``layout_values(L)[i] == L(i)`` for ``0 <= i < size(L)``.  Built as an outer sum over the flat
modes (column-major, mode 0 fastest), so 2^20 elements cost a handful of numpy operations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import layout_kind
from .errors import ShapeError

__all__ = ["layout_values", "swizzle_values", "MAX_ENUMERATE"]

#: most offsets enumerated at once (2^28 int64 = 2 GiB); beyond it a LimitError, not a
#: MemoryError
MAX_ENUMERATE = 1 << 28


def flat_values(fs: tuple, fd: tuple) -> np.ndarray:
    """Every offset of the flat modes ``fs:fd`` (column-major, mode 0 fastest) as one array:
    int64, or Python ints (object) where an offset passes 2^63."""
    if not all(type(x) is int for x in fs + fd):
        raise ShapeError("numeric enumeration needs static (int) shapes and strides; "
                         "use layoutalg.symbolic for symbolic layouts")
    # int64 holds every offset unless the extreme offsets pass 2^63: then use Python ints
    # (object arrays) rather than wrap around silently
    n = 1
    for s in fs:
        n *= s
    if n > MAX_ENUMERATE:
        from .errors import LimitError
        raise LimitError(f"enumerating {n} offsets exceeds the limit of {MAX_ENUMERATE} "
                         f"(layoutalg.enumerate.MAX_ENUMERATE); use the symbolic or F2 views "
                         "for layouts this large")
    lo = hi = 0
    for s, d in zip(fs, fd):
        if d > 0:
            hi += (s - 1) * d
        else:
            lo += (s - 1) * d
    dtype: Any = np.int64 if hi < 2 ** 63 and lo >= -2 ** 63 else object
    out = np.zeros(1, dtype=dtype)
    for s, d in zip(fs, fd):
        # out is laid out with the earlier (faster) modes varying first
        step = np.arange(s, dtype=np.int64) if dtype is np.int64 else np.array(
            [k * d for k in range(s)], dtype=object)
        if dtype is np.int64:
            step = step * d
        out = (out[None, :] + step[:, None]).reshape(-1)
    return out


def swizzle_values(sw: Any, offsets: np.ndarray) -> np.ndarray:
    y = offsets & sw.yyy_mask
    if sw.shift >= 0:
        return offsets ^ (y >> sw.shift)
    return offsets ^ (y << -sw.shift)


def layout_values(layout: Any) -> np.ndarray:
    """All offsets of a Layout or ComposedLayout (Swizzle/Layout outer) as int64."""
    kind = layout_kind(layout)
    if kind == "Layout":
        fs, fd = layout.flat()
        return flat_values(fs, fd)
    if kind == "ComposedLayout":
        return layout.values()   # outer(offset + inner values): ComposedLayout.values
    raise ShapeError(f"cannot enumerate {layout!r}")


def eval_int_array(layout: Any, idx: np.ndarray) -> np.ndarray:
    """``layout(i)`` for every index in the int array ``idx`` (vectorised; the last mode is
    unbounded, as for ``layout(i)``, so any ``i >= 0`` is valid)."""
    fs, fd = layout.flat()
    total = np.zeros_like(idx)
    c = idx.copy()
    for k in range(len(fs) - 1):
        total += (c % fs[k]) * fd[k]
        c //= fs[k]
    return total + c * fd[-1]
