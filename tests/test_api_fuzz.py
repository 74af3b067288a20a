"""Fuzz the public API of layoutalg: every call ends in a correct result or a LayoutError.

Arguments are drawn from garbage (None, text, floats, bools, out-of-range ints, numpy and sympy
scalars, nested junk) mixed with valid layouts, swizzled layouts and tilers.  Any exception that
is not the project's own fails; where the inputs are valid layouts, results are checked against
their defining post-condition (same offsets, inverse property, composition pointwise).
"""

import numpy as np
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutalg as la
from layoutalg import strategies as las
from layoutalg.errors import LayoutError

GARBAGE = st.one_of(
    st.none(), st.text(max_size=6), st.floats(allow_nan=True), st.booleans(),
    st.integers(-5, 5), st.just(10 ** 30), st.just(np.int64(4)), st.just(np.float32(2.0)),
    st.just(sympy.Rational(1, 2)), st.just(sympy.Symbol("x")), st.just(object()),
    st.lists(st.integers(-2, 6), max_size=3), st.tuples(st.integers(-2, 6), st.none()),
    st.just(((((4,),),),)), st.just({}))
LAYOUTS = st.one_of(las.layouts(max_size=64, max_depth=2), las.swizzled_layouts(max_size=64))
ARG = st.one_of(GARBAGE, LAYOUTS, st.integers(1, 8), las.tilers(max_size=16))

UNARY = [la.coalesce, la.filter, la.filter_zeros, la.size, la.cosize, la.rank, la.depth,
         la.right_inverse, la.left_inverse, la.nullspace, la.flatten_layout, la.complement,
         la.to_f2, la.parse, la.make_layout, la.layout_values, la.append, la.prepend]
BINARY = [la.composition, la.complement, la.logical_divide, la.zipped_divide, la.tiled_divide,
          la.flat_divide, la.logical_product, la.zipped_product, la.blocked_product,
          la.raked_product, la.tile_to_shape, la.upcast, la.downcast, la.max_common_vector,
          la.max_common_layout, la.zip_layouts, la.coalesce, la.filter, la.size, la.mode,
          la.make_layout, la.slice_and_offset, la.Layout, la.offset_expr]


def _call(fn, *args):
    try:
        return True, fn(*args)
    except LayoutError as e:
        assert str(e), f"{fn.__name__}: an empty error message"
        return False, None


def _is_layout(x):
    return isinstance(x, (la.Layout, la.ComposedLayout))


def _static(x):
    from layoutalg.inttuple import is_static
    inner = x.inner if isinstance(x, la.ComposedLayout) else x
    return is_static(inner.shape) and is_static(inner.stride)


FUZZ = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@FUZZ
@given(st.sampled_from(UNARY), ARG)
def test_unary_specific_error_or_correct_result(fn, x):
    ok, out = _call(fn, x)
    if not ok or not _is_layout(x) or not _static(x):
        return
    n = x.size()
    if fn is la.coalesce:
        assert list(out.values()) == list(x.values())
    if fn is la.right_inverse:
        assert all(x(out(i)) == i for i in range(min(out.size(), n)))


@FUZZ
@given(st.sampled_from(BINARY), ARG, ARG)
def test_binary_specific_error_or_correct_result(fn, a, b):
    ok, out = _call(fn, a, b)
    if not ok:
        return
    if fn is la.composition and isinstance(a, la.Layout) and isinstance(b, la.Layout) \
            and _static(a) and _static(b):
        assert all(out(i) == a(b(i)) for i in range(b.size()))
    if fn is la.coalesce and _is_layout(a) and _static(a) and b is None:
        assert list(out.values()) == list(a.values())


TERNARY = [la.local_tile, la.local_partition, la.thread_values, la.group, la.Swizzle,
           la.ComposedLayout, la.make_layout]


@FUZZ
@given(st.sampled_from(TERNARY), ARG, ARG, ARG)
def test_ternary_specific_error_or_result(fn, a, b, c):
    _call(fn, a, b, c)


@FUZZ
@given(LAYOUTS, st.integers(0, 63))
def test_valid_layouts_evaluate_or_refuse_specifically(L, i):
    ok, v = _call(L, i)
    assert ok and v == L.values()[i % L.size()] or i >= L.size()
