"""The algebra on ``ComposedLayout`` (``outer o offset o inner``), as CuTe defines it.

CuTe (``layout_composed.hpp``, ``swizzle_layout.hpp``) lifts the domain-side operations to a
composed layout by applying them to the inner layout and keeping ``outer`` and ``offset``:
``coalesce``, ``filter`` and ``tile_to_shape`` do that through ``on_inner``.
``upcast``/``downcast`` change the element width of all three parts
(``upcast<N>(Sw<B,M,S>) = Sw<B,M-log2 N,S>``).
``max_common_layout``/``max_common_vector`` start from the inner layouts' common layout (CuTe
also caps it at the swizzle's untouched low ``2^M`` offsets) and keep the longest prefix on which
the post-condition ``a(R(i)) == i == b(R(i))`` holds for the composed functions, checked on
every index of that prefix.

Each of these lives with the operation it lifts (this module names them in one place):

==============================  ==========================================================
``on_inner``                    :mod:`layoutalg.swizzle` (beside ``ComposedLayout``)
``upcast_composed``,            :mod:`layoutalg.casts` (``upcast`` and ``upcast_composed``
``downcast_composed``           call each other for a Layout or composed outer)
``max_common_layout_composed``  :mod:`layoutalg.inverses`
==============================  ==========================================================
"""

from __future__ import annotations

from .casts import downcast_composed, upcast_composed
from .inverses import max_common_layout_composed
from .swizzle import on_inner

__all__ = ["on_inner", "upcast_composed", "downcast_composed", "max_common_layout_composed"]
