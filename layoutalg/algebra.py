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
from .products import (blocked_product, flat_product, logical_product, raked_product,
                       tile_to_shape, tiled_product, zip_layouts, zipped_product)
from .tilers import as_layout, by_mode, int_tile, tile_unzip, tiler_str, unpack_modes

__all__ = [
    "composition", "complement", "right_inverse", "left_inverse", "nullspace",
    "max_common_layout", "max_common_vector", "logical_divide", "zipped_divide",
    "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "upcast", "downcast",
    "zip_layouts", "tiler_str",
]


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
