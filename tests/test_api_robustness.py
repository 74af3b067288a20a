"""Issue 18: every op CuTe defines on composed layouts, and no raw exception on bad input.

The examples of the issue are regression tests here; the hypothesis fuzz test of the public
API lives in test_api_fuzz.py.
"""

import subprocess
import sys

import numpy as np
import pytest
import sympy

import layoutalg as la
from layoutalg.errors import ArgumentError, LayoutError, LimitError, ParseError, ShapeError
from layoutalg.f2 import F2Error, to_f2

SW = la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)")


# ---- composed layouts -------------------------------------------------------------------------

def _same_function(a, b):
    return a.size() == b.size() and list(a.values()) == list(b.values())


def test_coalesce_and_filter_act_on_the_inner_layout():
    for fn in (la.coalesce, la.filter):
        out = fn(SW)
        assert isinstance(out, la.ComposedLayout) and out.outer == SW.outer
        assert out.inner == fn(SW.inner)
        assert _same_function(out, SW)          # a compact inner layout: same offsets
    CL = la.parse("Sw<2,1,3> o 4 o (4,(1,8)):(8,(0,1))")
    assert list(la.coalesce(CL).values()) == list(CL.values())


def test_tile_to_shape_tiles_the_inner_layout():
    out = la.tile_to_shape(SW, (16, 128))
    assert out.outer == SW.outer and out.inner == la.tile_to_shape(SW.inner, (16, 128))
    assert out.size() == 16 * 128


def test_upcast_and_downcast_scale_swizzle_offset_and_inner():
    up = la.upcast(SW, 2)
    assert str(up) == "Sw<3,2,3> o 0 o (8,32):(32,1)"
    # 2 adjacent 16-bit elements are one 32-bit element: same addresses, halved
    assert all(up((r, c)) == SW((r, 2 * c)) // 2 for r in range(8) for c in range(32))
    down = la.downcast(SW, 2)
    assert str(down) == "Sw<3,4,3> o 0 o (8,128):(128,1)"
    assert all(down((r, 2 * c)) == 2 * SW((r, c)) for r in range(8) for c in range(64))
    with pytest.raises(la.DivisibilityError, match="factors up to 8"):
        la.upcast(SW, 16)
    with pytest.raises(la.DivisibilityError, match="offset 3 is not a multiple"):
        la.upcast(la.parse("Sw<3,3,3> o 3 o (8,64):(64,1)"), 2)


def test_max_common_vector_and_layout_on_composed_layouts():
    A = la.parse("Sw<3,3,3> o 0 o (8,64):(1,8)")
    B = la.Layout((8, 64), (1, 8))
    assert la.max_common_vector(A, B) == 8          # CuTe: capped at 2^M, the untouched bits
    R = la.max_common_layout(B, A)
    assert all(A(R(i)) == i and B(R(i)) == i for i in range(R.size()))
    assert la.max_common_vector(SW, SW) >= 1
    # an offset moves every element: no common vector beyond one element
    assert la.max_common_vector(la.parse("Sw<3,3,3> o 5 o (8,64):(1,8)"), B) == 1


def test_to_f2_accepts_maps_affine_on_their_domain():
    CL = la.parse("Sw<1,4,-4> o 3 o (2):(2)")
    m = to_f2(CL)
    assert [m(i) for i in range(2)] == list(CL.values())
    with pytest.raises(F2Error):
        to_f2(la.parse("(2,2):(1,3)"))    # 0, 1, 3, 4: not affine over F2


def test_symbolic_coalesce_merges_provably_contiguous_modes():
    N = sympy.Symbol("N", integer=True, positive=True)
    assert str(la.coalesce(la.Layout((16, N), (1, 16)))) == "16*N:1"
    assert str(la.coalesce(la.Layout((N, 4), (1, N)))) == "4*N:1"
    assert len(la.coalesce(la.Layout((16, N), (1, 32)))) == 2     # not contiguous: kept


# ---- bad input --------------------------------------------------------------------------------

L = la.Layout((4, 2), (1, 4))


@pytest.mark.parametrize("call", [
    lambda: la.coalesce(None), lambda: la.filter("4:1"), lambda: la.nullspace(4.5),
    lambda: la.cosize(None), lambda: la.right_inverse(None), lambda: la.left_inverse(None),
    lambda: la.upcast(L, 2.5), lambda: la.append(None), lambda: la.zip_layouts(L, None),
    lambda: la.group(L, None, 1), lambda: la.slice_and_offset("4:1", L),
    lambda: la.offset_expr(None, 1), lambda: la.to_c(L), lambda: la.to_c(None),
    lambda: la.substitute(None, {}), lambda: la.max_common_vector(L, "x"),
    lambda: la.F2Map(None), lambda: la.from_f2(None), lambda: la.thread_values(None, L, 0),
])
def test_wrong_types_are_specific_errors(call):
    with pytest.raises(LayoutError) as info:
        call()
    assert "got" in str(info.value)       # says what it got (and what would be valid)
    if not isinstance(info.value, F2Error):
        assert isinstance(info.value, ArgumentError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("call, fragment", [
    (lambda: la.size(-3), ">= 1"),
    (lambda: la.Swizzle(3, 3, 3)(2.5), "not an integer"),
    (lambda: la.ComposedLayout(la.Swizzle(3, 3, 3), 1.5, L), "not an integer"),
    (lambda: la.Layout((4, 0), (1, 4)), ">= 1"),
    (lambda: la.upcast(L, 0), "positive int"),
    (lambda: la.size(L, "0"), "mode must be an int"),
])
def test_bad_values_are_shape_errors(call, fragment):
    with pytest.raises(ShapeError, match=fragment):
        call()


def test_non_ascii_digits_are_refused():
    with pytest.raises(ParseError, match="non-ASCII"):
        la.parse("４:１")
    with pytest.raises(ParseError, match="non-ASCII"):
        la.parse("(4,٣):(1,4)")      # an Arabic-Indic three


def test_deep_nesting_is_a_stated_limit():
    deep_text = "(" * 2000 + "4" + ")" * 2000
    with pytest.raises(ParseError, match="nested more than 64"):
        la.parse(deep_text + ":" + "(" * 2000 + "1" + ")" * 2000)
    s, d = 4, 1
    for _ in range(2000):
        s, d = (s,), (d,)
    with pytest.raises(LimitError, match="64 levels"):
        la.Layout(s, d)
    s, d = 4, 1
    for _ in range(60):          # within the limit: works, including the algebra
        s, d = (s,), (d,)
    M = la.Layout(s, d)
    assert la.coalesce(M) == la.Layout(4, 1) and la.composition(M, la.Layout(2, 2))(1) == 2


def test_enumeration_has_a_stated_limit():
    with pytest.raises(LimitError, match="exceeds the limit"):
        la.Layout((1 << 20, 1 << 20), (1, 1 << 20)).values()


def test_vector_width_needs_power_of_two_bytes():
    from layoutalg.verify import VerifyError, vector_width
    with pytest.raises(VerifyError, match="powers of two"):
        vector_width(la.Layout((64, 8), (8, 1)), max_bytes=3)


def test_lookup_wave_size_must_be_an_int():
    import mfma_specs
    with pytest.raises(mfma_specs.UnknownTargetError, match="must be an int"):
        mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x16_f16", wave_size="64")


# ---- CLI: one line, exit 2 --------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "layoutalg.cli", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ("show", "(1048576,1048576):(1,1048576)"),
    ("show", "４:１"),
    ("show", "(4,8):(8,1)", "--svg", "diagram.txt"),
    ("show", "(4,8):(8,1)", "--max-cols", "-3"),
    ("show", "(" * 100 + "4" + ")" * 100),
])
def test_cli_bad_input_is_one_line_and_exit_2(args):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "error:" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_cli_out_naming_a_file(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    for args in (("show", "(4,8):(8,1)", "--svg", str(f / "x.svg")),
                 ("demo", "--out", str(f), "--no-kernels", "--no-png")):
        r = _cli(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_closed_pipe_is_one_line():
    p = subprocess.Popen([sys.executable, "-m", "layoutalg.cli", "show", "(256,256):(256,1)",
                          "--max-cols", "256"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()             # the reader goes away at once
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
