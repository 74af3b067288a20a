"""layoutalg: a CuTe-exact layout algebra in pure Python, with symbolic and F2 views and checkers.

Quick tour::

    >>> import layoutalg as la
    >>> L = la.parse("(4,(2,3)):(1,(8,16))")
    >>> la.composition(L, la.Layout(6, 2))
    Layout((2,3):(2,8))

Everything CuTe computes with static integers is computed identically (same shape, same value at
every index); where CuTe returns something that is not the operation, a ``LayoutError`` says
which condition failed.
"""

# re-exported: ``__all__`` below is every public name bound here
from .errors import (LayoutError, ShapeError, ParseError, DivisibilityError,  # noqa: F401
                     CompositionError, ComplementError, InverseError, SymbolicError,
                     ArgumentError, LimitError)
from .inttuple import (IntTuple, crd2idx, idx2crd, flatten, product, congruent,  # noqa: F401
                       fmt)
from .layout import (Layout, make_layout, make_ordered_layout, make_identity_layout,  # noqa: F401
                     size, cosize, rank, depth, shape, stride, coalesce, filter, filter_zeros,
                     append, prepend, slice_and_offset, mode, group, flatten_layout)
from .algebra import (composition, complement, right_inverse, left_inverse,  # noqa: F401
                      nullspace, max_common_layout, max_common_vector, logical_divide,
                      zipped_divide, tiled_divide, flat_divide, logical_product, zipped_product,
                      tiled_product, flat_product, blocked_product, raked_product,
                      tile_to_shape, upcast, downcast, zip_layouts)
from .swizzle import Swizzle, ComposedLayout, make_composed_layout  # noqa: F401
from .parse import parse  # noqa: F401
from .tv import (make_layout_tv, local_partition, local_tile, TVLayout, TVPair,  # noqa: F401
                 thread_values)
from .f2 import F2Map, F2Error, to_f2, from_f2  # noqa: F401
from .enumerate import layout_values  # noqa: F401
from .install import PackageClashWarning, package_clashes  # noqa: F401
from . import install  # the clash check below (already bound by the line above)

__version__ = "0.1.0"

# The symbolic view needs sympy, which takes a while to import: load it on first use.
_LAZY_SYMBOLIC = ("index_symbol", "offset_expr", "to_c", "Xor", "substitute")

__all__ = [name for name in dir() if not name.startswith("_")] + list(_LAZY_SYMBOLIC)

# a foreign top-level 'kernels' / 'visualize' / 'mfma_specs' first on sys.path: say so now
install.warn_on_clashes()


def __getattr__(name: str):
    if name in _LAZY_SYMBOLIC:
        from . import symbolic
        return getattr(symbolic, name)
    raise AttributeError(f"module 'layoutalg' has no attribute {name!r}")
