"""Bad input: every refusal is a specific LayoutError subclass whose message says what was wrong.

Each case names the exception class and a fragment the message must contain, so a refactoring
that loses the explanation (or changes the class) fails here.
"""

import pytest

import layoutalg as la
from layoutalg.errors import (ComplementError, CompositionError, DivisibilityError,
                              InverseError, LayoutError, ParseError, ShapeError)

L48 = la.Layout((4, 8), (1, 4))


def raises(cls, fragment, fn, *args, **kwargs):
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, LayoutError)
    assert fragment in str(info.value), f"message {str(info.value)!r} lacks {fragment!r}"
    return info.value


# ---- construction ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, stride", [
    ((4, 2), (1,)),
    ((4, 2), 1),
    (4, (1, 2)),
    ((4, (2, 3)), (1, (2,))),
    ((4, (2, 3)), (1, 2, 6)),
])
def test_non_congruent_shape_and_stride(shape, stride):
    raises(ShapeError, "not congruent", la.Layout, shape, stride)


@pytest.mark.parametrize("shape", [0, -3, (4, 0), (4, (2, -1))])
def test_non_positive_extents(shape):
    raises(ShapeError, "must be >= 1", la.Layout, shape)


@pytest.mark.parametrize("bad, fragment", [
    (4.0, "float"), (2.5, "float"), ("4", "str"), (None, "NoneType"), ([4, "x"], "str"),
])
def test_non_integer_shape_entries(bad, fragment):
    raises(ShapeError, fragment, la.Layout, bad, 1 if not isinstance(bad, list) else [1, 4])


@pytest.mark.parametrize("bad", [True, False, (4, True)])
def test_bools_are_not_integers(bad):
    raises(ShapeError, "bool", la.Layout, bad, 1 if type(bad) is bool else (1, 4))


@pytest.mark.parametrize("stride", [1.0, "1", (1, 2.0), (1, False)])
def test_non_integer_strides(stride):
    shape = 4 if not isinstance(stride, tuple) else (4, 2)
    raises(ShapeError, "stride", la.Layout, shape, stride)


def test_bad_major():
    raises(ShapeError, "major must be", la.make_layout, (4, 2), major="diag")


def test_concatenation_takes_no_stride():
    raises(ShapeError, "takes no stride", la.make_layout, L48, stride=2)


@pytest.mark.parametrize("args", [(3, 0, 2), (-1, 0, 0), (1, -1, 1)])
def test_bad_swizzle_parameters(args):
    raises(ShapeError, "Swizzle<", la.Swizzle, *args)


@pytest.mark.parametrize("args", [(True, 0, 2), (1.0, 0, 1), (1, "2", 1)])
def test_non_integer_swizzle_parameters(args):
    raises(ShapeError, "must be an int", la.Swizzle, *args)


# ---- evaluation ----------------------------------------------------------------------------------

def test_negative_index():
    raises(ShapeError, "negative index -1", la.Layout(8), -1)


def test_negative_coordinate():
    raises(ShapeError, "negative coordinate", L48, (1, -1))


@pytest.mark.parametrize("coord", [(1, 2, 3), ((1, 2), 3)])
def test_coordinate_rank_mismatch(coord):
    raises(ShapeError, "does not match shape", L48, coord)


@pytest.mark.parametrize("coord, fragment", [(1.5, "float"), ("a", "str"), (True, "bool")])
def test_non_integer_index(coord, fragment):
    raises(ShapeError, fragment, L48, coord)


def test_mode_out_of_range():
    e = raises(ShapeError, "mode 5 does not exist", L48.__getitem__, 5)
    assert isinstance(e, IndexError)
    raises(ShapeError, "rank 1", la.Layout(8).__getitem__, 1)


def test_slice_coordinate_rank_mismatch():
    raises(ShapeError, "does not match", la.slice_and_offset, (None, 1, 2), L48)


# ---- rank mismatches ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", [la.composition, la.logical_divide, la.zipped_divide,
                                la.tiled_divide, la.flat_divide, la.logical_product,
                                la.zipped_product])
def test_tiler_longer_than_layout(op):
    raises(ShapeError, "has 3 modes but", op, L48, (2, 2, 2))


def test_profile_longer_than_layout():
    raises(ShapeError, "more modes than layout", la.coalesce, L48, (1, 1, 1))
    raises(ShapeError, "more modes than layout", la.filter, L48, (1, 1, 1))


def test_tile_to_shape_rank_and_divisibility():
    raises(ShapeError, "has rank 3 >", la.tile_to_shape, la.Layout((2, 2, 2)), (4, 8))
    raises(DivisibilityError, "does not divide the target", la.tile_to_shape,
           la.Layout((2, 3)), (4, 8))


def test_ordered_layout_profile():
    raises(ShapeError, "profile of shape", la.make_ordered_layout, (4, 2), (1,))


def test_blocked_product_needs_layouts():
    raises(ShapeError, "takes two Layouts", la.blocked_product, L48, 4)
    raises(ShapeError, "takes two Layouts", la.raked_product, L48, (2, 2))


def test_blocked_product_mode_structure():
    # CuTe cannot zip a rank-1 tuple mode with a plain mode either
    raises(ShapeError, "mode structure", la.blocked_product, la.parse("(12):(1)"), la.Layout(1))


# ---- inadmissible operations -------------------------------------------------------------------

@pytest.mark.parametrize("a, b, fragment", [
    ("(6,4):(1,10)", "4:4", "wrap in the middle"),            # CuTe accepts, returns (2,2):(4,10)
    ("(4,4):(1,10)", "(2,2):(3,1)", "carries into the next"),  # CuTe accepts, returns (2,2):(3,1)
    ("(4,8):(1,5)", "4:-1", "negative stride"),
    ("(4,8):(1,5)", "2:6", "stride divisibility condition"),   # CuTe refuses too
    ("(4,8):(1,5)", "6:1", "shape divisibility condition"),    # CuTe refuses too
])
def test_inadmissible_composition(a, b, fragment):
    raises(CompositionError, fragment, la.composition, la.parse(a), la.parse(b))


def test_inadmissible_divide_names_the_composition():
    raises(CompositionError, "is not a layout", la.logical_divide,
           la.parse("((2,12),5):((5,10),1)"), la.parse("(8):(2)"))


@pytest.mark.parametrize("tiler", [0, -3])
def test_non_positive_tiler(tiler):
    raises(ShapeError, ">= 1", la.composition, L48, tiler)
    raises(ShapeError, ">= 1", la.logical_divide, L48, tiler)


@pytest.mark.parametrize("layout", ["(2,2):(1,1)", "(4,2):(1,2)", "(3,2):(2,3)", "(2,2):(2,2)"])
def test_complement_of_non_injective_layout(layout):
    raises(ComplementError, "not injective", la.complement, la.parse(layout))


def test_complement_without_room():
    raises(ComplementError, "do not nest", la.complement, la.parse("(2,2):(1,3)"), 24)


def test_complement_negative_stride_and_bad_cotarget():
    raises(ComplementError, "negative stride", la.complement, la.parse("4:-1"))
    raises(ShapeError, "extents >= 1", la.complement, L48, 0)


def test_left_inverse_refusals():
    raises(InverseError, "divisibility", la.left_inverse, la.parse("(2,2):(2,3)"))
    raises(InverseError, "not a quasi-inverse", la.left_inverse, la.parse("(6,4):(16,8)"))
    raises(InverseError, "negative stride", la.left_inverse, la.parse("4:-1"))


def test_up_and_downcast():
    raises(DivisibilityError, "do not divide one another", la.upcast, la.parse("(8,3):(3,1)"), 2)
    raises(DivisibilityError, "stride-1 mode", la.downcast, la.parse("(4,2):(-1,4)"), 2)
    raises(ShapeError, "positive int", la.upcast, L48, 0)
    raises(ShapeError, "positive int", la.downcast, L48, 2.5)


def test_make_layout_tv_needs_a_bijective_tile():
    raises(ShapeError, "not a bijection", la.make_layout_tv, la.Layout(4, 2), la.Layout(2, 2))


# ---- parsing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("(4,2:(1,4)", "expected ')'"),
    ("4:", "end of text"),
    (":4", "expected an integer"),
    ("(4,2):(1)", "not congruent"),
    ("Sw<1,2>", "expected ','"),
    ("4:1 o", "end of text"),
    ("(4,,2):(1,2,3)", "expected an integer"),
    ("", "empty string"),
    ("4:1)", "unexpected ')'"),
    ("(-4):(1)", "must be >= 1"),
    ("4.5:1", "unexpected '.'"),
    ("Sw<3,0,2>", "|S| must be >= B"),
])
def test_malformed_parse_text(text, fragment):
    raises(ParseError, fragment, la.parse, text)


def test_parse_needs_a_string():
    raises(ParseError, "expects a string", la.parse, 4)
