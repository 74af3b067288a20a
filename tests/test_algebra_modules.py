"""The algebra split into modules by operation family (layoutalg/algebra.py is the facade).

What the split must keep: ``layoutalg.algebra.<name>``, ``layoutalg.<name>`` and the family
module's name are one object; ``layoutalg.composed_ops`` still names its four liftings; a family
module named like an exported function would shadow that function as a package attribute; and
the enumeration that moved into ``ComposedLayout.values`` (so that enumerate no longer imports
the layout types) gives the same offsets for every kind of outer function.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import layoutalg as la
import layoutalg.algebra as algebra
from layoutalg.checks import layout_kind
from layoutalg.enumerate import layout_values
from layoutalg.errors import ShapeError

FAMILIES = {
    "compose": ["composition"],
    "complements": ["complement"],
    "inverses": ["right_inverse", "left_inverse", "nullspace", "max_common_layout",
                 "max_common_vector"],
    "divides": ["logical_divide", "zipped_divide", "tiled_divide", "flat_divide"],
    "products": ["logical_product", "zipped_product", "tiled_product", "flat_product",
                 "blocked_product", "raked_product", "tile_to_shape", "zip_layouts"],
    "casts": ["upcast", "downcast"],
    "tilers": ["tiler_str"],
}


def test_every_facade_name_lives_in_exactly_one_family_module():
    named = [n for names in FAMILIES.values() for n in names]
    assert sorted(named) == sorted(algebra.__all__)
    for mod, names in FAMILIES.items():
        m = importlib.import_module(f"layoutalg.{mod}")
        for n in names:
            assert getattr(algebra, n) is getattr(m, n), (mod, n)
            assert n in m.__all__, (mod, n)
            if n != "tiler_str":
                assert getattr(la, n) is getattr(m, n), (mod, n)


def test_family_modules_do_not_shadow_exported_functions():
    """``import layoutalg.complement`` would make ``layoutalg.complement`` the module."""
    for mod in FAMILIES:
        assert not hasattr(la, mod) or isinstance(getattr(la, mod), type(la)), mod
    assert callable(la.composition) and callable(la.complement) and callable(la.upcast)


def test_composed_ops_names_its_liftings_where_they_live():
    from layoutalg import casts, composed_ops, inverses, swizzle
    assert composed_ops.on_inner is swizzle.on_inner
    assert composed_ops.upcast_composed is casts.upcast_composed
    assert composed_ops.downcast_composed is casts.downcast_composed
    assert composed_ops.max_common_layout_composed is inverses.max_common_layout_composed
    assert composed_ops.__all__ == ["on_inner", "upcast_composed", "downcast_composed",
                                    "max_common_layout_composed"]


@pytest.mark.parametrize("outer", [
    la.Swizzle(2, 1, 3),
    la.parse("(4,8):(8,1)"),
    la.ComposedLayout(la.Swizzle(1, 0, 2), 3, la.parse("64:1")),
])
def test_composed_values_match_evaluation_for_every_outer(outer):
    cl = la.ComposedLayout(outer, 2, la.parse("(4,6):(6,1)"))
    want = [cl(i) for i in range(cl.size())]
    assert [int(x) for x in cl.values()] == want
    assert [int(x) for x in layout_values(cl)] == want


def test_layout_kind_and_the_refusal_of_other_values():
    assert layout_kind(la.Layout(4, 1)) == "Layout"
    assert layout_kind(la.ComposedLayout(la.Swizzle(1, 0, 1), 0, la.Layout(4, 1))) == \
        "ComposedLayout"
    assert layout_kind((4, 1)) is None
    with pytest.raises(ShapeError, match=r"cannot enumerate \(4, 1\)"):
        layout_values((4, 1))
    assert np.array_equal(layout_values(la.parse("(2,3):(3,1)")), [0, 3, 1, 4, 2, 5])
