"""Symbolic index math is exact: layoutalg.symbolic against numbers and against compiled C.

Random nested, negative-stride, swizzled and composed layouts are evaluated on ``k*t + c``
(strided indices); the sympy expression must equal the layout at every point, and the C that
``to_c`` prints, compiled by the host compiler (all expressions in ONE program), must too.
"""

import os
import random
import shutil
import tempfile
import subprocess

import pytest
import sympy

from layoutalg import ComposedLayout, Layout, Swizzle
from layoutalg.parse import parse
from layoutalg.symbolic import (clear_reduction_cache, ifloordiv, imod, index_bounds,
                                index_symbol, offset_expr, to_c)

t = index_symbol("t")
POINTS = range(0, 40)


def _tree(rng, depth):
    if depth == 0 or rng.random() < 0.4:
        return rng.randint(1, 5), rng.randint(-12, 12)
    kids = [_tree(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    return tuple(s for s, _ in kids), tuple(d for _, d in kids)


def _abs(d):
    return tuple(_abs(x) for x in d) if type(d) is tuple else abs(d)


def _random_cases(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        L = Layout(*_tree(rng, 3))
        if rng.random() < 0.3:   # a layout after a layout (the outer one sees indices >= 0)
            inner = Layout(L.shape, _abs(L.stride))
            L = ComposedLayout(Layout(*_tree(rng, 2)), rng.randint(0, 9), inner)
        elif rng.random() < 0.6:
            b = rng.randint(0, 3)
            s = rng.choice([-1, 1]) * rng.randint(max(b, 1), 4)
            L = ComposedLayout(Swizzle(b, rng.randint(0, 3), s), rng.randint(0, 200), L)
        out.append((L, rng.randint(1, 4), rng.randint(0, 3)))
    return out


# the examples of issue 18 (sympy 1.14 mis-simplified them / C truncated a floor)
ISSUE = [(parse("((3,2),2):((1,3),6)"), 2, 0), (parse("((4,3),2):((1,4),12)"), 3, 0),
         (parse("Sw<1,2,1> o 64 o 16:-4"), 1, 0), (parse("Sw<2,1,3> o 100 o (4,4):(-8,-1)"), 1, 0)]
CASES = ISSUE + _random_cases(100, 18)


@pytest.mark.parametrize("i", range(len(ISSUE)))
def test_issue_examples_are_exact(i):
    L, k, c = ISSUE[i]
    e = offset_expr(L, k * t + c)
    assert [e.subs(t, v) for v in range(16)] == [L(k * v + c) for v in range(16)]


def test_random_layouts_symbolic_equals_numeric():
    bad = []
    for L, k, c in CASES:
        e = offset_expr(L, k * t + c)
        for v in POINTS[:12]:
            if e.subs(t, v) != L(k * v + c):
                bad.append((str(L), k, c, v))
                break
    assert not bad


def _compiled_values(cases):
    """rows[v][j] = the printed C of case j at t = v (one program for all cases), or None."""
    cxx = shutil.which("g++") or shutil.which("clang++-19") or shutil.which("clang++")
    if cxx is None:
        return None
    lines = ["#include <cstdio>", "int main() {", "  for (long t = 0; t < %d; ++t) {" % len(POINTS)]
    for L, k, c in cases:
        lines.append(f"    printf(\"%ld \", (long)({to_c(offset_expr(L, k * t + c))}));")
    lines += ["    printf(\"\\n\");", "  }", "  return 0;", "}"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "e.cpp"), os.path.join(d, "e")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.run([cxx, "-O0", "-w", src, "-o", exe], check=True)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return [[int(x) for x in row.split()] for row in out.strip().split("\n")]


def _c_mismatches(cases):
    rows = _compiled_values(cases)
    if rows is None:
        pytest.skip("no host C++ compiler")
    return [(str(L), k, c, v, g, L(k * v + c)) for v, row in zip(POINTS, rows)
            for (L, k, c), g in zip(cases, row) if g != L(k * v + c)]


def test_printed_c_equals_layout():
    """One C program prints every expression at every point; compare with the layouts."""
    assert not _c_mismatches(CASES)[:5]


def test_planted_truncating_printer_is_caught(monkeypatch):
    """The differential test can fail: C's plain / and % on a negative dividend are caught."""
    import layoutalg.symbolic as S
    monkeypatch.setattr(S, "_signs", lambda num, den: "plain")
    assert _c_mismatches(ISSUE[2:])


def test_planted_sympy_simplification_is_caught(monkeypatch):
    """Without hiding nested Mod/floor from sympy, the issue's first example is wrong again."""
    import layoutalg.symbolic as S
    clear_reduction_cache()     # the reductions are memoised: recompute with the planted rule
    monkeypatch.setattr(S, "_opaque_atoms", lambda e: set())
    try:
        L, k, c = ISSUE[0]
        e = offset_expr(L, k * t + c)
        assert any(e.subs(t, v) != L(k * v + c) for v in range(8))
    finally:
        clear_reduction_cache()  # the wrong results must not outlive the planted rule


def test_memoised_reduction_is_the_unmemoised_one():
    """imod/ifloordiv are memoised (a prefill build repeats each reduction ~100 times); a hit
    returns exactly what a fresh reduction gives, for the layouts of the differential test."""
    fresh = []
    for L, k, c in CASES[:40]:
        clear_reduction_cache()
        fresh.append(offset_expr(L, k * t + c))
    again = [offset_expr(L, k * t + c) for L, k, c in CASES[:40]]
    assert again == fresh


def test_memo_keys_on_sympys_evaluate_switch():
    """Regression guard: a reduction made under ``sympy.evaluate(False)`` (left unevaluated)
    must not be served to a caller that evaluates, and vice versa."""
    clear_reduction_cache()
    e, f = t + 4, t + 8          # the same arguments (built outside the block) both times
    with sympy.evaluate(False):
        lazy = (imod(e, 4), ifloordiv(f, 4))
    assert lazy[0] != sympy.Mod(t, 4) and lazy[1] != sympy.floor(t / 4) + 2
    assert imod(e, 4) == sympy.Mod(t, 4)
    assert ifloordiv(f, 4) == sympy.floor(t / 4) + 2


def test_imod_does_not_distribute_a_factor_over_mod():
    # sympy 1.14: Mod(2*Mod(t,3),3) -> 2*Mod(t,3); Mod(5*Mod(t,8),4) -> Mod(Mod(t,8)**2,4)
    for e, m, f in ((2 * sympy.Mod(t, 3), 3, lambda v: (2 * (v % 3)) % 3),
                    (5 * sympy.Mod(t, 8), 4, lambda v: (5 * (v % 8)) % 4)):
        r = imod(e, m)
        assert [r.subs(t, v) for v in range(24)] == [f(v) for v in range(24)]


def test_proven_rules():
    assert imod(sympy.Mod(t, 8), 4) == sympy.Mod(t, 4)          # 4 | 8
    assert imod(sympy.Mod(t, 4), 8) == sympy.Mod(t, 4)          # already in [0, 8)
    assert ifloordiv(sympy.Mod(t, 4), 4) == 0
    assert imod(sympy.Mod(t, 4), 3) != sympy.Mod(t, 4)          # [0, 3] is not inside [0, 3)
    assert imod(sympy.Mod(t, 6), 4) != sympy.Mod(t, 4)          # 4 does not divide 6
    assert ifloordiv(sympy.Mod(t, 4), 3) != 0
    assert index_bounds(3 * sympy.Mod(t, 4) + 1) == (1, 10)
    assert index_bounds(-t)[0] == -float("inf")


def test_c_is_plain_only_where_proven_non_negative():
    assert to_c(sympy.floor(t / 4)) == "((t) / 4)"
    assert to_c(sympy.Mod(t, 4)) == "((t) % 4)"
    assert "% 2 < 0" in to_c(sympy.floor((5 - t) / 2))
    assert "+ 4) % 4" in to_c(sympy.Mod(5 - t, 4))


def test_to_c_parenthesises_a_product_divisor():
    """Regression: ``Mod(a, 8*b)`` printed as ``(a) % 8*b``, which C reads as ``((a) % 8) * b``
    (and ``floor(a / (8*b))`` as ``(a) / 8*b``): a silent wrong index for a runtime divisor."""
    import sympy
    from layoutalg.symbolic import to_c
    from kernels.ir.core import sym
    a, b = sym("a"), sym("b")
    assert to_c(sympy.Mod(a, 8 * b)) == "((a) % (8*b))"
    assert to_c(sympy.floor(a / (8 * b))) == "((a) / (8*b))"
    assert to_c(sympy.floor(a / 8)) == "((a) / 8)"
    assert to_c(sympy.Mod(a, b)) == "((a) % b)"
    for av in (0, 5, 77, 1000):
        for bv in (1, 3, 7):
            got = eval(to_c(sympy.Mod(a, 8 * b)).replace("a", str(av)).replace("b", str(bv)))
            assert got == av % (8 * bv)
