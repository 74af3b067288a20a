"""Symbolic index expressions: evaluate layouts on sympy symbols and print the result as C.

Layouts accept sympy expressions anywhere an int goes: in the index (``L(tid)``), in a
coordinate (``L((m, k))``), and in shapes/strides (``Layout((M, K), (lda, 1))``).  The result is
an exact integer expression built from ``+``, ``*``, ``floor``, ``Mod`` and :class:`Xor` (for
swizzles).  All symbols denote non-negative integers; create them with :func:`index_symbol`.

:func:`to_c` prints such an expression as C/HIP source (``/``, ``%``, ``^`` on non-negative ints),
which is how :mod:`kernels` prints the verified address math.
"""

from __future__ import annotations

from typing import Any, Dict

import sympy
from sympy.printing.c import C99CodePrinter

__all__ = ["Xor", "index_symbol", "offset_expr", "to_c", "substitute", "simplify_index",
           "imod"]


class Xor(sympy.Function):
    """Bitwise XOR of two non-negative integer expressions (folds when both are numbers)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) ^ int(b))
        if a == 0:
            return b
        if b == 0:
            return a
        if a == b:
            return sympy.Integer(0)
        return None


def imod(a: Any, b: Any) -> Any:
    """``Mod(a, b)`` of integer expressions, immune to sympy#28744.

    sympy 1.14 evaluates ``Mod(k*Mod(x, m), n)`` (integer ``x``, ``m != n``) by squaring the
    inner Mod (``Mod(5*Mod(t, 8), 4) -> Mod(Mod(t, 8)**2, 4)``, wrong at t = 2).  When sympy's
    answer shows such a power of a Mod that ``a`` did not have, the Mods of ``a`` are hidden
    behind integer dummies while sympy reduces, and put back unevaluated.  Otherwise sympy's
    answer is returned as it is.
    """
    out = sympy.Mod(a, b)
    if not _new_mod_powers(out, a):
        return out
    a = sympy.sympify(a)
    hide = {m: sympy.Dummy(integer=True) for m in a.atoms(sympy.Mod)}
    out = sympy.Mod(a.xreplace(hide), b)
    with sympy.evaluate(False):
        return out.xreplace({d: m for m, d in hide.items()})


def _new_mod_powers(out: Any, a: Any) -> bool:
    def powers(e: Any) -> set:
        return {p for p in sympy.sympify(e).atoms(sympy.Pow) if isinstance(p.base, sympy.Mod)}
    return bool(powers(out) - powers(a))


def index_symbol(name: str) -> sympy.Symbol:
    """A non-negative integer symbol (a thread index, a loop counter, a runtime extent)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def offset_expr(layout: Any, *coord: Any) -> Any:
    """``layout(coord)`` as a simplified sympy expression."""
    return simplify_index(sympy.sympify(layout(*coord)))


def simplify_index(expr: Any) -> Any:
    """Light simplification that keeps floor/Mod structure (no rational rewriting)."""
    return sympy.expand(expr) if not expr.has(sympy.floor, sympy.Mod, Xor) else expr


def substitute(expr: Any, values: Dict[Any, int]) -> int:
    """Evaluate an index expression at concrete symbol values (exact integer)."""
    out = sympy.sympify(expr).subs(values)
    out = sympy.simplify(out) if not out.is_Integer else out
    if not out.is_Integer:
        raise ValueError(f"expression did not reduce to an integer: {out}")
    return int(out)


class _IndexPrinter(C99CodePrinter):
    """C printer for non-negative integer index math."""

    def _print_floor(self, expr: Any) -> str:
        arg = expr.args[0]
        num, den = arg.as_numer_denom()
        if den != 1:
            return f"(({self._print(num)}) / {self._print(den)})"
        return self._print(arg)

    def _print_Mod(self, expr: Any) -> str:
        a, b = expr.args
        return f"(({self._print(a)}) % {self._print(b)})"

    def _print_Xor(self, expr: Any) -> str:
        a, b = expr.args
        return f"(({self._print(a)}) ^ ({self._print(b)}))"

    def _print_Integer(self, expr: Any) -> str:
        return str(int(expr))

    def _print_Symbol(self, expr: Any) -> str:
        return expr.name


def to_c(expr: Any) -> str:
    """Print an index expression as C (integer division and modulo on non-negative values)."""
    return _IndexPrinter().doprint(sympy.sympify(expr))
