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
from .casts import downcast, upcast
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


