"""Algebraic laws of the layout algebra, property-tested with hypothesis.

Each test states a law from CuTe's documentation (layout.hpp post-conditions) or a consequence
of the definitions, and checks it on every index of bounded random inputs
(``layoutalg.strategies``).  Where an operation may refuse (LayoutError), the test checks the
law only on the inputs it accepts, and a companion test checks that *admissible* inputs are
never refused.  Runtime budget for the whole file: well under 60 s.
"""

import math

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import layoutalg as la
from layoutalg import strategies as las
from layoutalg.errors import ComplementError, CompositionError, LayoutError
from layoutalg.inttuple import flatten, product
from layoutalg.symbolic import index_symbol, substitute

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- helpers ---------------------------------------------------------------------------------

def floor_eval(L, x):
    """L at any integer x, extending along the last mode (floor division): L(x + t*P) = ..."""
    fs, fd = L.flat()
    r = 0
    for k in range(len(fs) - 1):
        r += (x % fs[k]) * fd[k]
        x //= fs[k]
    return r + x * fd[-1]


def vals(L):
    return [int(v) for v in L.values()]


def compatible(a, b):
    """CuTe ``compatible(a, b)``: b refines a (each leaf of a is a subtree of b of equal size)."""
    if type(a) is not tuple:
        return product(b) == a
    return type(b) is tuple and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))


def same_function(X, Y):
    """Same shape and same value everywhere (strides of extent-1 modes may differ)."""
    return X.shape == Y.shape and vals(X) == vals(Y)


def nested(L):
    """Sorted positive strides each a multiple of the span below (complement fills the gaps)."""
    f = la.filter(L)
    fs, fd = f.flat()
    span = 1
    for d, s in sorted(zip(fd, fs)):
        if d == 0:
            continue
        if d % span:
            return False
        span = d * s
    return True


def prefix_sizes(L):
    """Sizes n = s0*...*s_{k-1}*g (g | s_k) over the flat extents: B = n:1 is admissible for L."""
    fs = flatten(L.shape)
    out = set()
    pre = 1
    for s in fs:
        for g in range(1, s + 1):
            if s % g == 0:
                out.add(pre * g)
        pre *= s
    return sorted(out)


# ---- composition -----------------------------------------------------------------------------

@FAST
@given(las.layouts(max_size=64, negative_strides=True), las.layouts(max_size=32, max_stride=24))
def test_composition_is_function_composition(A, B):
    """R = A o B satisfies R(i) == A(B(i)) on B's domain, and shape(R) is compatible with B."""
    try:
        R = la.composition(A, B)
    except CompositionError:
        return
    assert compatible(B.shape, R.shape)
    assert [R(i) for i in range(B.size())] == [floor_eval(A, B(i)) for i in range(B.size())]


@FAST
@given(las.layouts(max_size=64, negative_strides=True),
       las.layouts(max_size=16, max_stride=24, negative_strides=True))
def test_composition_negative_rhs_strides(A, B):
    """With negative strides in B, A o B (when returned) is A extended along its last mode."""
    try:
        R = la.composition(A, B)
    except CompositionError:
        return
    assert [R(i) for i in range(B.size())] == [floor_eval(A, B(i)) for i in range(B.size())]


@FAST
@given(las.layouts(max_size=128, zero_strides=True), st.data())
def test_admissible_composition_never_raises(A, data):
    """B = n:1 with n a prefix product of A's extents times a divisor of the next extent is
    admissible, and so is the compact (a, n/a) when a is such a size too: they must compose,
    and equal A on [0, n)."""
    sizes = prefix_sizes(A)
    n = data.draw(st.sampled_from(sizes))
    a = data.draw(st.sampled_from([k for k in sizes if n % k == 0]))
    for B in (la.Layout(n, 1), la.make_layout((a, n // a)), n):
        R = la.composition(A, B)
        assert [R(i) for i in range(n)] == [A(i) for i in range(n)]


@FAST
@given(las.compact_layouts(max_size=64), las.layouts(max_size=64, negative_strides=True))
def test_composition_with_right_inverse_is_identity(B, A):
    """composition(L, right_inverse(L)) is the identity on right_inverse's domain."""
    R = la.right_inverse(A)
    C = la.composition(A, R)
    assert [C(i) for i in range(R.size())] == list(range(R.size()))


# ---- complement ------------------------------------------------------------------------------

@FAST
@given(las.injective_layouts(max_size=64), st.integers(1, 256), st.booleans())
def test_complement_post_conditions(L, cot, default):
    """complement(L, M): strictly increasing, disjoint from L's image (beyond 0), and
    size(C) * size(filter(L)) >= M.  Refused only when L's modes do not nest."""
    M = L.cosize() if default else cot
    try:
        C = la.complement(L) if default else la.complement(L, cot)
    except ComplementError:
        assert not nested(L)
        return
    cv = vals(C)
    assert all(a < b for a, b in zip(cv, cv[1:]))
    image = set(vals(L))
    assert not (set(cv[1:]) & image)
    assert C.size() * la.filter(L).size() >= M


@FAST
@given(las.injective_layouts(max_size=64, nested=True), st.integers(1, 512))
def test_complement_of_nested_layout_is_a_cover(L, cot):
    """For nesting modes, (L, complement(L, M)) is injective and covers [0, M)."""
    C = la.complement(L, cot)
    both = la.make_layout(L, C)
    v = vals(both)
    assert len(set(v)) == len(v)
    assert set(range(cot)) <= set(v)


@FAST
@given(las.compact_layouts(max_size=64))
def test_complement_of_compact_layout_is_trivial(L):
    """A bijection onto [0, n) has nothing to fill: its complement up to n is 1:0."""
    assert la.complement(L, L.size()).size() == 1


# ---- divides ---------------------------------------------------------------------------------

@FAST
@given(st.data())
def test_divides_share_values_and_size(data):
    """logical/zipped/tiled/flat_divide are the same function up to mode regrouping; the
    divide covers A (size >= size(A)); mode 0 of logical_divide(A, T) is A o T."""
    A = data.draw(las.layouts(max_size=96, max_depth=2))
    T = data.draw(las.tilers(for_layout=A))
    D = la.logical_divide(A, T)  # admissible tilers: must not raise
    outs = [D]
    for f in (la.zipped_divide, la.tiled_divide, la.flat_divide):
        try:
            outs.append(f(A, T))
        except la.ShapeError as e:  # '_' against a mode that is not a (tile, rest) pair: as CuTe
            assert "(tile, rest) pair" in str(e)
    sizes = {o.size() for o in outs}
    assert sizes == {D.size()} and D.size() >= A.size()
    ref = sorted(vals(D))
    for o in outs[1:]:
        assert sorted(vals(o)) == ref
    if D.size() == A.size():
        assert ref == sorted(vals(A))
    if isinstance(T, la.Layout):
        assert same_function(D[0], la.composition(A, T))
    elif type(T) is tuple:
        for i, t in enumerate(T):
            if t is not None:
                assert same_function(D[i][0], la.composition(A[i], t))
            else:
                assert D[i] == A[i]


@FAST
@given(las.layouts(max_size=64), las.tilers(max_size=16))
def test_divide_is_composition_with_tiler_and_rest(A, T):
    """When a divide is returned it is A o (T, complement(T, shape(coalesce(A)))) exactly."""
    try:
        D = la.logical_divide(A, T)
    except LayoutError:
        return
    if not isinstance(T, la.Layout):
        return
    B = la.make_layout(T, la.complement(T, la.coalesce(A).shape))
    assert [D(i) for i in range(D.size())] == [floor_eval(A, B(i)) for i in range(D.size())]


# ---- products --------------------------------------------------------------------------------

@FAST
@given(las.compact_layouts(max_size=32), las.injective_layouts(max_size=16, max_depth=1))
def test_logical_product_laws(A, B):
    """size(A x B) == size(A) * size(B); mode 0 is A; mode 1 is complement(A) o B.  With A
    compact the product never raises and is injective when B is."""
    P = la.logical_product(A, B)
    assert P.size() == A.size() * B.size()
    assert P[0] == A
    v = vals(P)
    assert len(set(v)) == len(v)


@FAST
@given(las.injective_layouts(max_size=32, nested=True), las.layouts(max_size=16))
def test_logical_product_accepted_results(A, B):
    try:
        P = la.logical_product(A, B)
    except LayoutError:
        return
    assert P.size() == A.size() * B.size()
    assert P[0] == A
    C = la.complement(A, A.size() * B.cosize())
    assert [P[1](i) for i in range(B.size())] == [C(B(i)) for i in range(B.size())]


@FAST
@given(las.compact_layouts(max_size=32, max_depth=1), las.compact_layouts(max_size=16, max_depth=1))
def test_blocked_and_raked_products_of_compact_layouts_are_compact(A, B):
    """Rank-sensitive products of bijections are bijections onto [0, size(A)*size(B)), with
    rank max(rank(A), rank(B)); zipped/tiled/flat products have the same values."""
    n = A.size() * B.size()
    for f in (la.blocked_product, la.raked_product):
        try:
            P = f(A, B)
        except LayoutError as e:  # only the mode-structure refusal CuTe shares
            assert "zip" in str(e) or "mode structure" in str(e)
            continue
        assert P.size() == n and sorted(vals(P)) == list(range(n))
        assert P.rank == max(A.rank, B.rank)
    Z = la.logical_product(A, B)
    for f in (la.zipped_product, la.tiled_product, la.flat_product):
        try:
            Q = f(A, B)
        except LayoutError:
            continue
        assert sorted(vals(Q)) == sorted(vals(Z))


# ---- inverses --------------------------------------------------------------------------------

@FAST
@given(las.layouts(max_size=128, negative_strides=True))
def test_right_inverse(L):
    """L(R(i)) == i for every i < size(R) (any layout, never refused)."""
    R = la.right_inverse(L)
    assert [L(R(i)) for i in range(R.size())] == list(range(R.size()))


@FAST
@given(las.compact_layouts(max_size=128))
def test_right_inverse_of_bijection_is_full(L):
    R = la.right_inverse(L)
    assert R.size() == L.size()


@FAST
@given(las.injective_layouts(max_size=128, nested=True))
def test_left_inverse_of_injective_layout(L):
    """R(L(i)) == i for injective L with nesting strides (never refused)."""
    R = la.left_inverse(L)
    assert [R(L(i)) for i in range(L.size())] == list(range(L.size()))


@FAST
@given(las.layouts(max_size=64))
def test_left_inverse_is_a_quasi_inverse(L):
    """Whenever a left inverse is returned: L(R(L(i))) == L(i); and R(L(i)) == i if L is
    injective."""
    try:
        R = la.left_inverse(L)
    except LayoutError:
        return
    v = vals(L)
    assert [L(R(y)) for y in v] == v
    if len(set(v)) == len(v):
        assert [R(y) for y in v] == list(range(len(v)))


# ---- coalesce / filter -----------------------------------------------------------------------

@FAST
@given(las.layouts(max_size=128, negative_strides=True, max_depth=3))
def test_coalesce(L):
    """coalesce keeps size and every value on the domain and has depth <= 1."""
    C = la.coalesce(L)
    assert C.size() == L.size() and C.depth <= 1
    assert vals(C) == vals(L)


@FAST
@given(las.layouts(max_size=128, max_depth=2), st.data())
def test_coalesce_with_profile(L, data):
    """coalesce(L, profile) coalesces inside each mode: same values, same rank."""
    r = L.rank
    prof = tuple(1 for _ in range(data.draw(st.integers(1, r))))
    C = la.coalesce(L, prof)
    assert C.rank == r or type(L.shape) is not tuple
    assert vals(C) == vals(L)


@FAST
@given(las.layouts(max_size=128, negative_strides=True))
def test_filter(L):
    """filter drops stride-0 and extent-1 modes: same image, size(L) = size(filter) * zeros."""
    F = la.filter(L)
    assert set(vals(F)) == set(vals(L))
    fs, fd = L.flat()
    zeros = math.prod(s for s, d in zip(fs, fd) if d == 0)
    assert F.size() * zeros == L.size()
    assert F.depth <= 1
    assert all(d != 0 for d in F.flat()[1]) or F.size() == 1


# ---- swizzles --------------------------------------------------------------------------------

@FAST
@given(las.swizzles(negative_shift=True))
def test_swizzle_involution_and_bijection(sw):
    n = 1 << (sw.base + abs(sw.shift) + sw.bits)
    img = [sw(x) for x in range(n)]
    assert sorted(img) == list(range(n))
    assert all(sw(y) == x for x, y in enumerate(img))


@FAST
@given(las.swizzled_layouts(max_size=256, offset=True))
def test_swizzled_layout_values(CL):
    assert vals(CL) == [CL(i) for i in range(CL.size())]


# ---- parse / print / values -------------------------------------------------------------------

@FAST
@given(st.one_of(las.layouts(max_size=4096, negative_strides=True, max_depth=3),
                 las.swizzles(negative_shift=True), las.swizzled_layouts(offset=True)))
def test_parse_round_trip(x):
    assert la.parse(str(x)) == x


@FAST
@given(las.layouts(max_size=256, negative_strides=True, max_depth=3))
def test_values_match_evaluation(L):
    v = L.values()
    assert v.dtype == np.int64
    assert [int(x) for x in v] == [L(i) for i in range(L.size())]


# ---- F2 ---------------------------------------------------------------------------------------

@FAST
@given(las.injective_layouts(max_size=1024, power_of_two=True, max_gap=4))
def test_f2_view_of_power_of_two_layout(L):
    m = la.to_f2(L)
    assert [m(i) for i in range(L.size())] == [L(i) for i in range(L.size())]


@FAST
@given(las.layouts(max_size=256, power_of_two=True))
def test_f2_view_when_defined(L):
    """Power-of-two layouts with overlapping bits are refused (F2Error); otherwise exact."""
    try:
        m = la.to_f2(L)
    except la.F2Error:
        return
    assert [m(i) for i in range(L.size())] == [L(i) for i in range(L.size())]


@FAST
@given(las.swizzles(negative_shift=True))
def test_swizzle_f2_map_is_an_involution(sw):
    m = la.to_f2(sw)
    mm = m.compose(m)
    assert mm.cols == tuple(1 << j for j in range(m.n_in))
    assert all(m(x) == sw(x) for x in range(1 << m.n_in))


@FAST
@given(las.swizzled_layouts(max_size=256))
def test_f2_view_of_swizzled_layout(CL):
    m = la.to_f2(CL)
    assert [m(i) for i in range(CL.size())] == vals(CL)


# ---- symbolic ----------------------------------------------------------------------------------

@SLOW
@given(las.layouts(max_size=64, max_depth=2), st.lists(st.integers(0, 63), min_size=1, max_size=3))
def test_symbolic_evaluation_matches_int(L, idx):
    t = index_symbol("t")
    e = L(t)
    for i in idx:
        if i < L.size():
            assert substitute(e, {t: i}) == L(i)


@SLOW
@given(las.swizzled_layouts(max_size=64), st.lists(st.integers(0, 63), min_size=1, max_size=3))
def test_symbolic_swizzled_evaluation_matches_int(CL, idx):
    t = index_symbol("t")
    e = CL(t)
    for i in idx:
        if i < CL.size():
            assert substitute(e, {t: i}) == CL(i)


# ---- TV layouts --------------------------------------------------------------------------------

@FAST
@given(las.tv_layouts(max_threads=64, max_values=16))
def test_make_layout_tv_is_a_bijection(tv):
    thr, val, tiler, L = tv
    n = thr.size() * val.size()
    assert product(tiler) == n and L.size() == n
    assert sorted(vals(L)) == list(range(n))
    # layout_tv inverts layout_mn = raked_product(thr, val), which sends a tile index to
    # thread + value * size(thr)
    mn = la.raked_product(thr, val)
    T = thr.size()
    assert all(mn(L((t, v))) == t + v * T for t in range(T) for v in range(val.size()))


# ---- fast paths ----------------------------------------------------------------------------------

def _general(L):
    """A copy of L that the algebra must treat through its general (symbolic-capable) path."""
    M = la.Layout._make(L.shape, L.stride)
    M._ints = False
    return M


def _outcome(f):
    try:
        return "ok", str(f())
    except LayoutError as e:
        return "error", type(e).__name__


@FAST
@given(las.layouts(max_size=128, negative_strides=True), las.layouts(max_size=32, max_depth=1,
                                                                     negative_strides=True),
       st.sampled_from([None, 16, 24, 64, (4, 6), (2, 3, 4)]))
def test_int_fast_paths_match_the_general_paths(A, B, cot):
    """The all-int fast paths (flat lists, no Layout intermediates) compute exactly what the
    general implementation computes: same printed result, or the same error class."""
    ops = [
        lambda X, Y: la.complement(X) if cot is None else la.complement(X, cot),
        lambda X, Y: la.coalesce(X), lambda X, Y: la.filter(X), la.composition,
        lambda X, Y: la.right_inverse(X), lambda X, Y: la.left_inverse(X), la.logical_divide,
        la.logical_product,
    ]
    for f in ops:
        assert _outcome(lambda: f(A, B)) == _outcome(lambda: f(_general(A), _general(B)))


# ---- max_common_vector / max_common_layout -------------------------------------------------------

@FAST
@given(las.layouts(max_size=64), las.layouts(max_size=64))
def test_max_common_post_conditions(a, b):
    """max_common_vector N: a(right_inverse(b)(n)) == n for n < N; max_common_layout R:
    a(R(i)) == i and b(R(i)) == i for i < size(R)."""
    try:
        n = la.max_common_vector(a, b)
        R = la.max_common_layout(a, b)
    except LayoutError:
        return
    inv = la.right_inverse(b)
    assert all(a(inv(i)) == i for i in range(n))
    assert all(a(R(i)) == i and b(R(i)) == i for i in range(R.size()))


@FAST
@given(las.compact_layouts(max_size=64))
def test_max_common_vector_of_a_layout_with_itself(L):
    """A bijection shares its whole stride-1 run with itself."""
    n = la.max_common_vector(L, L)
    assert n >= 1 and all(L(la.right_inverse(L)(i)) == i for i in range(n))


@FAST
@given(las.injective_layouts(max_size=64, nested=True), las.shapes(max_size=256, max_depth=1))
def test_complement_with_a_shape_cotarget(L, M):
    """With a shape cotarget CuTe divides mode by mode; an accepted result still meets the
    post-conditions with size(M)."""
    try:
        C = la.complement(L, M)
    except ComplementError as e:
        assert "size post-condition" in str(e)
        return
    cv = vals(C)
    assert all(x < y for x, y in zip(cv, cv[1:]))
    assert not (set(cv[1:]) & set(vals(L)))
    assert C.size() * la.filter(L).size() >= product(M)
