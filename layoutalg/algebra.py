"""The layout algebra: composition, complement, inverses, divides and products.

Every function follows CuTe C++ (include/cute/layout.hpp) with static integers: same result
shape, same value at every index.  Where CuTe's own check is weaker than the condition the
operation needs (CuTe accepts ``(6,4):(1,10) o 4:4`` and returns ``(2,2):(4,10)``, which is not
the composition), we raise a :class:`~layoutalg.errors.LayoutError` subclass that says which
condition failed.  Each function states its post-condition.

This module is the algebra's one import point; each family of operations lives in a module of
its own (``layoutalg.algebra.<name>`` and ``layoutalg.<name>`` are the same objects):

===================================================  ============================================
operations                                           module
===================================================  ============================================
``composition``                                      :mod:`layoutalg.compose`
``complement``                                       :mod:`layoutalg.complements`
``right_inverse``, ``left_inverse``, ``nullspace``,  :mod:`layoutalg.inverses`
``max_common_layout``, ``max_common_vector``
``logical_divide``, ``zipped_divide``,               :mod:`layoutalg.divides`
``tiled_divide``, ``flat_divide``
``logical_product``, ``zipped_product``,             :mod:`layoutalg.products`
``tiled_product``, ``flat_product``,
``blocked_product``, ``raked_product``,
``zip_layouts``, ``tile_to_shape``
``upcast``, ``downcast``                             :mod:`layoutalg.casts`
``tiler_str`` (and what a tiler argument means)      :mod:`layoutalg.tilers`
===================================================  ============================================

Below them: :mod:`layoutalg.flat_modes` (coalesce/filter on flat mode lists),
:mod:`layoutalg.layout` (the Layout type and its all-int fast-path constructors) and
:mod:`layoutalg.enumerate` (every offset as one numpy array).  The ComposedLayout liftings are
listed in :mod:`layoutalg.composed_ops`.
"""

from __future__ import annotations

from .casts import downcast, upcast
from .complements import complement
from .compose import composition
from .divides import flat_divide, logical_divide, tiled_divide, zipped_divide
from .inverses import (left_inverse, max_common_layout, max_common_vector, nullspace,
                       right_inverse)
from .products import (blocked_product, flat_product, logical_product, raked_product,
                       tile_to_shape, tiled_product, zip_layouts, zipped_product)
from .tilers import tiler_str

# Names this module has exposed since before the split (it imported them for its own code);
# kept so that code reaching them as ``layoutalg.algebra.<name>`` keeps working.
from typing import Any, Optional  # noqa: E402,F401
from .checks import require_any_layout, require_int, require_layout  # noqa: E402,F401
from .errors import (ComplementError, CompositionError, DivisibilityError,  # noqa: E402,F401
                     InverseError, LayoutError, ShapeError)
from .inttuple import (ceil_div, compact_col_major, flatten, fmt, is_static,  # noqa: E402,F401
                       product, product_each, sym_ok, unwrap)
from .layout import (Layout, append, coalesce, make_layout,  # noqa: E402,F401
                     make_ordered_layout)

__all__ = [
    "composition", "complement", "right_inverse", "left_inverse", "nullspace",
    "max_common_layout", "max_common_vector", "logical_divide", "zipped_divide",
    "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "upcast", "downcast",
    "zip_layouts", "tiler_str",
]
