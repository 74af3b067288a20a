"""kernels.verify.cexpr / printed: the printed index expressions read back with C semantics."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernels.ir import NonIntegerExpr, c_compile, c_eval, sym
from kernels.verify.cexpr import CExprError, bound, evaluate, parse
from kernels.verify.printed import verify_printed
from layoutalg.symbolic import Xor, to_c

T, B = sym("tid"), sym("blk")
TV = np.arange(256, dtype=np.int64)[None, :]
BV = np.arange(7, dtype=np.int64)[:, None]


@st.composite
def index_exprs(draw, depth=3):
    """Non-negative index expressions of the kinds the builders print."""
    if depth == 0 or draw(st.booleans()) and depth < 3:
        return draw(st.sampled_from([T, B, sympy.Integer(draw(st.integers(0, 300)))]))
    a = draw(index_exprs(depth - 1))
    b = draw(index_exprs(depth - 1))
    c = draw(st.integers(1, 64))
    op = draw(st.sampled_from(["add", "mul", "div", "mod", "xor"]))
    if op == "add":
        return a + b
    if op == "mul":
        return a * c
    if op == "div":
        return sympy.floor(a / c)
    if op == "mod":
        return sympy.Mod(a, c)
    return Xor(a, b)


def _printable(e) -> bool:
    """What the builders can print: c_eval refuses the rest (sympy may fold x*x into a power)."""
    try:
        c_compile(e)
    except NonIntegerExpr:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(index_exprs())
def test_printed_expression_evaluates_like_the_ir(e):
    """parse(to_c(e)) evaluated with C semantics == c_eval(e) at every tid and block."""
    assume(_printable(e))
    got = evaluate(parse(to_c(e)), {"tid": TV, "blk": BV})
    want = c_eval(e, {T: TV, B: BV})
    assert np.array_equal(np.broadcast_to(got, (7, 256)), np.broadcast_to(want, (7, 256)))


@settings(max_examples=150, deadline=None)
@given(index_exprs())
def test_bound_contains_every_value(e):
    """The interval of bound() is sound: it contains the value at every point of the ranges."""
    assume(_printable(e))
    (lo, hi), _ = bound(parse(to_c(e)), {"tid": (0, 255), "blk": (0, 6)}, lambda *a: None)
    v = np.asarray(c_eval(e, {T: TV, B: BV}))
    assert lo <= v.min() and v.max() <= hi


def test_c_semantics_of_division_and_remainder():
    assert int(evaluate(parse("-7 / 2"), {})) == -3
    assert int(evaluate(parse("-7 % 2"), {})) == -1
    assert int(evaluate(parse("7 / -2"), {})) == -3
    assert int(evaluate(parse("la_imin(3, x) + la_imax(0, -x)"), {"x": 5})) == 3
    assert int(evaluate(parse("x < 3 && !(x == 1) ? 10 : 20"), {"x": 2})) == 10


def test_int_overflow_reported_with_the_subexpression():
    seen = []
    bound(parse("a + 8388608*block_m"), {"a": (0, 10), "block_m": (0, 511)},
          lambda n, iv, t: seen.append((iv, t)))
    assert seen and seen[0] == ((0, 4286578688), "int")


def test_long_literal_is_not_an_int_overflow():
    seen = []
    (lo, hi), t = bound(parse("4294967296*x"), {"x": (0, 3)}, lambda *a: seen.append(a))
    assert t == "long" and hi == 3 * 4294967296 and not seen


def test_unreadable_expressions_are_refused_by_name():
    with pytest.raises(CExprError, match="call of foo"):
        parse("foo(x)")
    with pytest.raises(CExprError, match="unsigned literal"):
        parse("x + 3u")
    with pytest.raises(CExprError, match="not bound"):
        evaluate(parse("y + 1"), {"x": 1})


def test_source_without_the_kernel_fails_every_printed_check():
    from kernels.gemm import build_gemm_ir
    from kernels.gemm_plan import GemmConfig
    ir = build_gemm_ir(GemmConfig(m=64, n=64, k=32, block_m=64, block_n=64))
    r = verify_printed(ir, "// nothing here\n")
    assert all(not c.holds and "cannot be read back" in c.counterexample for c in r.values())
