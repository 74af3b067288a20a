"""Worked examples: CuTe's 02_layout_algebra.md (results as printed by CuTe C++ 4.2 with static
integers), the symbolic and F2 views, the parse round trip, and regressions for every bug fixed in
the core (each names what was wrong)."""

import pytest
import sympy

import layoutalg as la
from layoutalg.errors import (ComplementError, CompositionError, DivisibilityError,
                              InverseError, ShapeError)
from layoutalg.symbolic import index_symbol, offset_expr, substitute, to_c

P = la.parse


def vals(L):
    return [int(v) for v in L.values()]


# ---- CuTe 02_layout_algebra.md -------------------------------------------------------------------

DOC = [
    # (op, args, CuTe's printed result)
    ("coalesce", ["(2,(1,6)):(1,(6,2))"], "12:1"),
    ("composition", ["(6,2):(8,2)", "(4,3):(3,1)"], "((2,2),3):((24,2),8)"),
    ("composition", ["20:2", "(5,4):(4,1)"], "(5,4):(8,2)"),
    ("composition", ["(10,2):(16,4)", "(5,4):(1,5)"], "(5,(2,2)):(16,(80,4))"),
    ("composition", ["(12,(4,8)):(59,(13,1))", "<3:4, 8:2>"], "(3,(2,4)):(236,(26,1))"),
    ("composition", ["(12,(4,8)):(59,(13,1))", "(3,8)"], "(3,(4,2)):(59,(13,1))"),
    ("composition", ["4:1", "4:0"], "4:0"),
    ("complement", ["4:1", "24"], "6:4"),
    ("complement", ["6:4", "24"], "4:1"),
    ("complement", ["(4,6):(1,4)", "24"], "1:0"),
    ("complement", ["4:2", "24"], "(2,3):(1,8)"),
    ("complement", ["(2,4):(1,6)", "24"], "3:2"),
    ("complement", ["(2,2):(1,6)", "24"], "(3,2):(2,12)"),
    ("complement", ["4:0", "8"], "8:1"),
    ("logical_divide", ["(4,2,3):(2,1,8)", "4:2"], "((2,2),(2,3)):((4,1),(2,8))"),
    ("logical_divide", ["(9,(4,8)):(59,(13,1))", "<3:3, (2,4):(1,8)>"],
     "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"),
    ("zipped_divide", ["(9,(4,8)):(59,(13,1))", "<3:3, (2,4):(1,8)>"],
     "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"),
    ("tiled_divide", ["(9,(4,8)):(59,(13,1))", "<3:3, (2,4):(1,8)>"],
     "((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"),
    ("flat_divide", ["(9,(4,8)):(59,(13,1))", "<3:3, (2,4):(1,8)>"],
     "(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))"),
    ("logical_product", ["(2,2):(4,1)", "6:1"], "((2,2),(2,3)):((4,1),(2,8))"),
    ("logical_product", ["(2,2):(4,1)", "(4,2):(2,1)"], "((2,2),(4,2)):((4,1),(8,2))"),
    ("blocked_product", ["(2,5):(5,1)", "(3,4):(1,3)"], "((2,3),(5,4)):((5,10),(1,30))"),
    ("raked_product", ["(2,5):(5,1)", "(3,4):(1,3)"], "((3,2),(4,5)):((10,5),(30,1))"),
    ("zipped_product", ["(2,5):(5,1)", "<3:1, 4:1>"], "((2,5),(3,4)):((5,1),(1,5))"),
    ("right_inverse", ["(4,8):(8,1)"], "(8,4):(4,1)"),
    ("left_inverse", ["(4,2):(1,16)"], "(16,2):(1,4)"),
    ("nullspace", ["(4,2,3):(1,0,4)"], "2:4"),
]


@pytest.mark.parametrize("op, args, expected", DOC, ids=[f"{d[0]}-{i}" for i, d in enumerate(DOC)])
def test_cute_doc_example(op, args, expected):
    out = getattr(la, op)(*[P(a) for a in args])
    assert str(out) == expected


def test_doc_coalesce_by_mode():
    assert str(la.coalesce(P("(2,(1,6)):(1,(6,2))"), (1, 1))) == "(2,6):(1,2)"


def test_doc_composition_is_the_function_composition():
    A, B = P("(10,2):(16,4)"), P("(5,4):(1,5)")
    R = la.composition(A, B)
    assert [R(i) for i in range(20)] == [A(B(i)) for i in range(20)]


def test_doc_inadmissible_examples():
    # CuTe refuses this one (shape divisibility) ...
    with pytest.raises(CompositionError, match="shape divisibility"):
        la.composition(P("(12,2):(16,2)"), P("(5,4):(1,5)"))
    # ... but accepts this one and returns (2,2):(4,10), which is not A o B (A(B(2)) = A(8) = 12)
    with pytest.raises(CompositionError, match="wrap in the middle"):
        la.composition(P("(6,4):(1,10)"), P("4:4"))


def test_doc_tv_layout_and_max_common_vector():
    tiler, tv = la.make_layout_tv(P("(32,4):(1,32)"), P("(4,1):(1,1)"))
    assert tiler == (128, 4) and str(tv) == "(128,4):(4,1)"
    assert la.max_common_vector(P("(4,8):(1,4)"), P("(4,8):(1,4)")) == 32


def test_layout_evaluation_and_print():
    L = P("(4,(2,3)):(1,(8,16))")
    assert (str(L), L.size(), L.cosize(), L.rank, L.depth) == ("(4,(2,3)):(1,(8,16))", 24, 44, 2, 2)
    assert L(5) == 9 and L((1, (1, 2))) == 41 and L((1, 5)) == L(1 + 4 * 5)
    assert str(L(None, (1, None))) == "(4,3):(1,16)"
    assert vals(L) == [L(i) for i in range(24)]


# ---- symbolic ----------------------------------------------------------------------------------

def test_symbolic_index_and_runtime_strides():
    t = index_symbol("t")
    L = P("(4,8):(8,1)")
    e = offset_expr(L, t)
    assert all(substitute(e, {t: i}) == L(i) for i in range(32))
    assert to_c(e) == "8*((t) % 4) + ((t) / 4)" or "%" in to_c(e)
    M, K, lda = sympy.symbols("M K lda", integer=True, positive=True)
    m, k = index_symbol("m"), index_symbol("k")
    A = la.Layout((M, K), (1, lda))
    assert sympy.simplify(A((m, k)) - (m + k * lda)) == 0
    assert str(A) == "(M,K):(1,lda)" and la.parse(str(A)) == A


def test_symbolic_swizzled_layout():
    t = index_symbol("t")
    CL = la.composition(la.Swizzle(3, 3, 3), P("(8,64):(64,1)"))
    e = CL(t)
    for i in (0, 1, 9, 64, 65, 130, 511):
        assert substitute(e, {t: i}) == CL(i)


def test_symbolic_offsets_survive_sympys_mod_of_a_product_bug():
    """sympy 1.14 evaluates Mod(k*Mod(x, m), n) for integer x by squaring the inner Mod
    (sympy#28744: Mod(5*Mod(t, 8), 4) -> Mod(Mod(t, 8)**2, 4)).  A swizzled or composed layout
    with a non-power-of-two stride hits exactly that: its symbolic offset (and the C printed
    from it) was wrong at t = 2, 6, ..."""
    t = index_symbol("t")
    cases = [la.ComposedLayout(la.Swizzle(2, 0, 2), 0, P("(8,1,3):(5,2,24)")),
             la.ComposedLayout(la.Swizzle(2, 0, 3), 64, P("(8,3):(3,24)")),
             la.ComposedLayout(P("(4,64):(64,1)"), 0, P("(4,8):(8,1)")),
             la.ComposedLayout(P("(3,40):(1,3)"), 0, P("(8,3):(5,1)"))]
    for CL in cases:
        e = CL(t)
        c = to_c(offset_expr(CL, t)).replace("/", "//")
        for i in range(CL.size()):
            assert substitute(e, {t: i}) == CL(i), (CL, i, e)
            assert eval(c, {"t": i}) == CL(i), (CL, i, c)
    # the workaround leaves sympy's own (correct) simplifications alone
    assert offset_expr(P("(4,8):(8,1)"), t) == 8 * sympy.Mod(t, 4) + sympy.floor(t / 4)


# ---- F2 ------------------------------------------------------------------------------------------

def test_f2_view_of_layouts_and_swizzles():
    L = P("(4,8):(8,1)")
    m = la.to_f2(L)
    assert [m(i) for i in range(32)] == vals(L)
    assert la.from_f2(m) == la.coalesce(L) or vals(la.from_f2(m)) == vals(L)
    sw = la.Swizzle(2, 0, 2)
    ms = la.to_f2(sw)
    assert all(ms(x) == sw(x) for x in range(16))
    assert ms.compose(ms).cols == tuple(1 << j for j in range(ms.n_in))
    CL = la.composition(sw, P("(4,4):(4,1)"))
    mc = la.to_f2(CL)
    assert [mc(i) for i in range(16)] == vals(CL) and mc.is_injective()


def test_f2_refuses_non_linear_layouts():
    with pytest.raises(la.F2Error, match="not a power of two"):
        la.to_f2(P("(3,4):(1,3)"))
    with pytest.raises(la.F2Error, match="same output bit"):
        la.to_f2(P("(4,4):(1,2)"))


# ---- parse round trip ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "4:1", "(4):(1)", "(4,(2,3)):(1,(8,16))", "((2,2),3):((24,2),8)", "(4,2):(-1,0)", "1:0",
    "Sw<3,4,3>", "Sw<2,1,-3>", "Sw<3,4,3> o 0 o (8,64):(64,1)", "Sw<1,1,2> o 32 o 16:1",
])
def test_parse_round_trip(text):
    x = P(text)
    assert str(x) == text and P(str(x)) == x


def test_parse_cute_static_markers_and_tilers():
    assert P("(_4,_8):(_8,_1)") == la.Layout((4, 8), (8, 1))
    assert P("<3:4, 8:2>") == (la.Layout(3, 4), la.Layout(8, 2))
    assert P("<_, 2>") == (None, 2)
    assert P("(3,8)") == (3, 8)


# ---- regressions: bugs fixed in the core -----------------------------------------------------------

def test_regression_compact_strides_of_extent_one_are_zero():
    # CuTe's compact_major gives a static extent-1 mode stride 0 (we used to give it the running
    # product), visible in make_layout, nullspace, with_shape and TV layouts.
    assert str(la.make_layout((1, 4))) == "(1,4):(0,1)"
    assert str(la.make_layout((4, 1), major="row")) == "(4,1):(1,0)"
    assert str(la.Layout(1)) == "1:0"
    assert str(la.nullspace(P("((2,6,4),(4,12,1),12):((2,32,8),(2,1,0),16)"))) == "1:0"
    assert str(la.make_layout_tv(P("4:1"), P("1:1"))[1]) == "(4,1):(1,0)"


def test_regression_complement_follows_cute():
    # complement(1:1) is 1:0 (filter leaves a stride-0 layout); non-nesting modes are accepted
    # when CuTe's result meets the post-conditions, refused when it is too small
    assert str(la.complement(P("1:1"))) == "1:0"
    assert str(la.complement(P("(2,2):(1,5)"))) == "2:2"
    assert str(la.complement(P("4:2"), (4, 6))) == "(2,3):(1,8)"
    assert str(la.complement(P("3:0"), (4, 6))) == "24:1"
    with pytest.raises(ComplementError, match="size post-condition"):
        la.complement(P("(2,2):(1,3)"), 24)  # CuTe returns 4:6: 4 * 4 < 24


def test_regression_composition_cross_mode_carry():
    # each mode of B composes fine alone, but (2,2):(3,1) reaches offset 4 in a mode of extent 4:
    # A(B(1,1)) = A(4) = 10 while CuTe's (2,2):(3,1) gives 4
    with pytest.raises(CompositionError, match="carries into the next"):
        la.composition(P("(4,4):(1,10)"), P("(2,2):(3,1)"))


def test_regression_composition_exact_in_exotic_cases():
    # a walk that wraps inside a stride-0 mode can still be exact: CuTe's answer is right here
    assert str(la.composition(P("(8,8,2):(1,0,6)"), P("6:24"))) == "(3,2):(0,6)"
    # negative strides that only move along A's last mode are exact
    assert str(la.composition(P("(4,8):(1,5)"), P("2:-4"))) == "2:-5"
    # ... and one whose borrow cancels (A(-1) = 1 + 3 - 5 = -1)
    assert str(la.composition(P("(2,2,4):(1,3,5)"), P("2:-1"))) == "2:-1"
    with pytest.raises(CompositionError, match="wrap in the middle"):
        la.composition(P("(6,4):(0,10)"), P("4:4"))  # CuTe: (2,2):(0,10) gives 10, not 20, at 3


def test_regression_inverses_use_cutes_exchange_sort():
    # CuTe sorts strides with a non-stable exchange sort; with equal strides it picks other modes
    assert str(la.right_inverse(P("(2,3,2):(1,1,0)"))) == "3:2"
    assert str(la.right_inverse(P("(2,2,3):(1,1,2)"))) == "2:1"
    assert str(la.right_inverse(P("(3,2,2):(2,1,1)"))) == "(2,3):(3,1)"
    assert str(la.left_inverse(P("(2,2):(1,1)"))) == "2:2"


def test_regression_left_inverse_of_non_injective_layout_is_checked():
    # CuTe returns (8,2,6):(0,6,1), but L(R(L(17))) = 8 != L(17) = 96
    with pytest.raises(InverseError, match="not a quasi-inverse"):
        la.left_inverse(P("(6,4):(16,8)"))


def test_regression_products_and_casts_follow_cute():
    with pytest.raises(ShapeError, match="takes two Layouts"):
        la.blocked_product(P("(2,2):(1,2)"), 4)
    with pytest.raises(DivisibilityError, match="stride-1"):
        la.downcast(P("(4,2):(-1,4)"), 2)  # CuTe's has_int1 wants a +1 stride
    assert str(la.upcast(P("(4,2):(-1,4)"), 2)) == "(2,2):(-1,2)"


def test_regression_f2_ignores_strides_of_extent_one_modes():
    m = la.to_f2(la.Layout((4, 1, 2), (1, 3, 4)))
    assert [m(i) for i in range(8)] == list(range(8))


def test_pycute_bugs_are_not_reproduced():
    # right_inverse does not stop at the first stride that does not chain
    assert str(la.right_inverse(P("(4,2,2):(1,3,4)"))) == "(4,2):(1,8)"
    # cosize counts |stride|
    assert la.cosize(P("4:-1")) == 4 and la.cosize(P("(4,3):(-2,5)")) == 17
    # logical_product with an int tiler is a product, not a divide
    assert str(la.logical_product(P("4:1"), 3)) == "(4,3):(1,4)"
    # composition checks divisibility
    with pytest.raises(CompositionError):
        la.composition(P("(4,8):(1,5)"), P("2:6"))


def test_regression_complement_shape_cotarget_size():
    # CuTe divides a shape cotarget mode by mode: ceil_div((2,4,6), 12) = (1,1,3), so its
    # complement (6,3):(1,12) has 18 * 2 < 48 elements: not a complement of 2:6 up to (2,4,6)
    with pytest.raises(ComplementError, match="size post-condition"):
        la.complement(P("2:6"), (2, 4, 6))
    assert str(la.complement(P("4:2"), (4, 6))) == "(2,3):(1,8)"


def test_regression_divide_that_does_not_cover():
    # 5:1 tiles of (4,6):(1,5): CuTe's rest, complement(5:1, (4,6)), has 3 tiles (15 < 24)
    with pytest.raises(ComplementError):
        la.logical_divide(P("(4,6):(1,5)"), 5)
    assert str(la.logical_divide(la.Layout(12), 5)) == "(5,3):(1,5)"  # padding is fine
    with pytest.raises(CompositionError):  # CuTe: (2,(2,4)):(1,(2,5)), value 3 at 3 (A(B(3)) = 5)
        la.logical_divide(P("(3,4):(1,5)"), 2)


def test_regression_identity_swizzle_composes_to_the_layout():
    # CuTe: composition(Swizzle<0,M,S>, layout) is the layout itself
    L = P("(4,16,2):(16,1,64)")
    assert la.composition(la.Swizzle(0, 1, 1), L) == L


def test_regression_max_common_vector_with_inexact_composition():
    # a o right_inverse(b) is not a layout here, but CuTe's answers (1 and 1:0) meet the
    # post-conditions, so they are returned instead of refusing
    assert la.max_common_vector(P("(2,12,4):(4,8,1)"), P("(8,2,4):(2,1,16)")) == 1
    assert str(la.max_common_layout(P("(10,5):(5,1)"), P("(2,3,12):(1,24,2)"))) == "1:0"


def test_symbolic_algebra():
    # runtime extents and strides (sympy symbols) go through the general path: CuTe's dynamic
    # rules, with every condition decided by sympy
    M, K, lda = sympy.symbols("M K lda", integer=True, positive=True)
    A = la.Layout((M, K), (1, lda))
    assert str(la.composition(A, (32, 8))) == "(32,8):(1,lda)"
    assert str(la.zipped_divide(A, (32, 8))) == \
        "((32,8),(ceiling(M/32),ceiling(K/8))):((1,lda),(32,8*lda))"
    assert str(la.complement(la.Layout(32), M)) == "ceiling(M/32):32"
    assert str(la.logical_product(la.Layout((4, 8)), la.Layout(M))) == "((4,8),M):((1,4),32)"
    assert str(la.right_inverse(A)) == "M:1"
    tile, off = la.local_tile(A, (32, 8), (1, 2))
    assert str(tile) == "(32,8):(1,lda)" and sympy.simplify(off - (32 + 16 * lda)) == 0
    assert str(la.composition(la.Layout((4, M), (1, 8)), la.parse("(2,4):(1,2)"))) == \
        "(2,(2,2)):(1,(2,8))"


def test_import_does_not_pull_in_hypothesis():
    # layoutalg.strategies imports hypothesis; the package itself must not
    import subprocess
    import sys
    code = ("import sys, layoutalg; assert 'hypothesis' not in sys.modules; "
            "import layoutalg.strategies; assert 'hypothesis' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_strategies_respect_their_knobs():
    from hypothesis import given, settings
    from layoutalg import strategies as las

    @settings(max_examples=50, deadline=None)
    @given(las.layouts(max_size=32, max_rank=2, max_depth=1, power_of_two=True,
                       zero_strides=False), las.int_tuples(max_depth=0, power_of_two=True))
    def check(L, t):
        assert L.size() <= 32 and L.depth <= 1 and L.rank <= 2
        assert all(x & (x - 1) == 0 and x != 0 for x in L.flat()[0] + tuple(abs(d) for d in L.flat()[1]))
        assert type(t) is int and t & (t - 1) == 0
    check()


def test_regression_partition_shapes_follow_cute():
    # CuTe's own comment: local_partition(data (_16,_64), Layout<Shape<_2,_16>>{}, thr) -> (_8,_4)
    # (the rest modes are spliced in; we used to return them nested as ((8,4)))
    part, off = la.local_partition(la.Layout((16, 64)), la.Layout((2, 16)), 5)
    assert str(part) == "(8,4):(2,256)" and off == 1 + 2 * 16
    # local_tile splices the tile modes: (32,64), not ((32,64)); a short coordinate is padded
    tile, off = la.local_tile(la.Layout((64, 128)), (32, 64), (1, 1))
    assert str(tile) == "(32,64):(1,64)" and off == 32 + 64 * 64
    assert str(la.local_tile(la.Layout((64, 128)), (32, 64), (1,))[0]) == "(32,64,2):(1,64,4096)"


def test_regression_values_do_not_wrap_around():
    # offsets beyond int64 used to wrap silently in values(); now they come back exact
    L = la.Layout((4, 3), (2 ** 62, 5))
    assert [int(v) for v in L.values()] == [L(i) for i in range(12)]
    assert la.Layout((4, 3), (1, 5)).values().dtype.name == "int64"


def test_symbolic_refusals_are_symbolic_errors():
    M, lda = sympy.symbols("M lda", integer=True, positive=True)
    # whether 2 elements fit in a mode of runtime extent M is undecidable: refuse, don't guess
    with pytest.raises(la.SymbolicError):
        la.composition(la.Layout((M, 4), (1, lda)), la.parse("(2,2):(1,2)"))
    # a whole-layout tiler on a runtime (M,N) shape: the rest covers the layout only if M >= 4
    N = sympy.Symbol("N", integer=True, positive=True)
    with pytest.raises(la.SymbolicError):
        la.logical_divide(la.Layout((M, N), (1, M)), la.Layout(4, 1))
    # static results of symbolic arithmetic are plain ints again: CuTe's 1:0
    assert str(la.complement(la.Layout((M, 4), (1, M)))) == "1:0"
