"""Symbolic index expressions: evaluate layouts on sympy symbols and print the result as C.

Layouts accept sympy expressions anywhere an int goes: in the index (``L(tid)``), in a
coordinate (``L((m, k))``), and in shapes/strides (``Layout((M, K), (lda, 1))``).  The result is
an exact integer expression built from ``+``, ``*``, ``floor``, ``Mod`` and :class:`Xor` (for
swizzles).  All symbols denote non-negative integers; create them with :func:`index_symbol`.

:func:`to_c` prints such an expression as C/HIP source with the same value: C's ``/`` and ``%``
where the dividend is proven non-negative (the kernels' address math), a floor-corrected form
elsewhere.  Floors and Mods are built by :func:`ifloordiv` / :func:`imod` so that sympy never
simplifies a Mod/floor nested inside another (sympy 1.14 gets some of those wrong).  See
docs/ALGEBRA.md.
"""

from __future__ import annotations

import functools
from typing import Any, Dict

import sympy
from sympy.core.parameters import global_parameters
from sympy.printing.c import C99CodePrinter

__all__ = ["Xor", "index_symbol", "offset_expr", "to_c", "substitute", "simplify_index",
           "imod", "ifloordiv", "index_bounds", "clear_reduction_cache"]


def _as_index_expr(x: Any, fn: str, what: str = "expression", allow_bool: bool = False) -> Any:
    """``x`` as a sympy integer expression, or an ArgumentError naming what was wrong."""
    from .errors import ArgumentError
    if isinstance(x, bool) or x is None or isinstance(x, (str, float, complex)):
        raise ArgumentError(f"{fn}: {what} must be an int or a sympy integer expression, got "
                            f"{x!r} ({type(x).__name__})")
    if isinstance(x, sympy.Basic):
        e = x
    else:
        import numbers
        if not isinstance(x, numbers.Integral):
            hint = ("; evaluate the layout on a symbol first: offset_expr(layout, t)"
                    if hasattr(x, "shape") else "")
            raise ArgumentError(f"{fn}: {what} must be an int or a sympy integer expression, "
                                f"got {type(x).__name__}{hint}")
        e = sympy.Integer(int(x))
    if isinstance(e, sympy.logic.boolalg.Boolean) and allow_bool:
        return e    # a predicate over index expressions (printed with &&, ||, <, ==)
    if not isinstance(e, sympy.Expr) or e.is_integer is False or e.has(sympy.Float):
        raise ArgumentError(f"{fn}: {what} {e} is not an integer expression")
    return e


class Xor(sympy.Function):
    """Bitwise XOR of two non-negative integer expressions (folds when both are numbers)."""

    is_integer = True
    is_nonnegative = True

    def __new__(cls, a: Any, b: Any, **kw: Any) -> Any:
        return super().__new__(cls, _as_index_expr(a, "Xor"), _as_index_expr(b, "Xor"), **kw)

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
    """``a mod b`` (Python/floor semantics, result in ``[0, b)`` for ``b > 0``) of integer
    expressions, built so that sympy cannot mis-simplify it.

    sympy 1.14's ``Mod`` rewrites ``Mod(2*Mod(t, 3), 3)`` to ``2*Mod(t, 3)`` and
    ``Mod(5*Mod(t, 8), 4)`` to ``Mod(Mod(t, 8)**2, 4)`` (both wrong).  So sympy never sees a
    ``Mod``/``floor``/``Xor`` inside ``a``: those are hidden behind integer dummies while sympy
    reduces the polynomial that is left (where its rules are sound: it only drops multiples of
    ``b``), and are put back unevaluated.  On top of that, two proven rules:

    * ``Mod(Mod(x, m), n) = Mod(x, n)`` when ``n`` divides ``m`` (both positive integers);
    * ``Mod(x, n) = x`` when ``x`` is provably in ``[0, n)`` (see :func:`index_bounds`).
    """
    return _reduce(a, b, "mod")


def ifloordiv(a: Any, b: Any) -> Any:
    """``floor(a / b)`` of integer expressions, built like :func:`imod` (sympy sees no
    ``Mod``/``floor``/``Xor`` inside ``a``).  Proven rule on top: ``floor(x / n) = 0`` when
    ``x`` is provably in ``[0, n)``."""
    return _reduce(a, b, "floor")


def _reduce(a: Any, b: Any, kind: str) -> Any:
    if type(a) is int and type(b) is int:
        return a % b if kind == "mod" else a // b
    a = sympy.sympify(a)
    b = sympy.sympify(b)
    if b.is_zero:
        from .errors import ShapeError
        raise ShapeError(f"integer division or modulo of {a} by zero; divisors are extents "
                         "(>= 1)")
    # sympy's own cache cannot help here: every reduction hides its Mod/floor/Xor atoms behind
    # fresh Dummy symbols, so no two calls look alike to it.  The kernels evaluate the same
    # layouts on the same symbols thousands of times per build (a d128 prefill: ~1100
    # reductions, 75 % of its build time), and the result is a pure function of the two
    # (immutable, structurally compared) expressions, the kind and sympy's evaluate/distribute
    # switches, so it is memoised on exactly those.
    return _reduce_exprs(a, b, kind, global_parameters.evaluate, global_parameters.distribute)


def clear_reduction_cache() -> None:
    """Forget the memoised :func:`imod` / :func:`ifloordiv` results (a test that patches the
    reduction rules must recompute, not read back what the unpatched rules gave)."""
    _reduce_exprs.cache_clear()


_REDUCTIONS = {"mod": sympy.Mod, "floor": lambda x, y: sympy.floor(x / y)}


@functools.lru_cache(maxsize=1 << 16, typed=True)
def _reduce_exprs(a: Any, b: Any, kind: str, evaluate: bool, distribute: bool) -> Any:
    op = _REDUCTIONS[kind]
    rules = _mod_rules if kind == "mod" else _floor_rules
    early = rules(a, b)
    if early is not None:
        return early
    hide = {m: sympy.Dummy(integer=True) for m in _opaque_atoms(a)}
    if not hide:
        return op(a, b)
    out = op(a.xreplace(hide), b)
    back = {d: m for m, d in hide.items()}
    with sympy.evaluate(False):
        out = out.xreplace(back)
    if op is sympy.Mod and isinstance(out, sympy.Mod):
        again = rules(out.args[0], out.args[1])
        if again is not None:
            return again
    return out


def _opaque_atoms(e: Any) -> set:
    """The outermost Mod/floor/Xor subexpressions of ``e`` (what sympy must not rewrite)."""
    out: set = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, (sympy.Mod, sympy.floor, Xor)):
            out.add(x)
        else:
            stack.extend(x.args)
    return out


def _mod_rules(a: Any, b: Any) -> Any:
    if a.is_Integer and b.is_Integer:
        return sympy.Integer(int(a) % int(b))
    if isinstance(a, sympy.Mod) and b.is_Integer and a.args[1].is_Integer and b > 0 \
            and int(a.args[1]) % int(b) == 0:
        return imod(a.args[0], b)
    lo, hi = index_bounds(a)
    if b.is_Integer and lo >= 0 and hi < int(b):
        return a
    return None


def _floor_rules(a: Any, b: Any) -> Any:
    if a.is_Integer and b.is_Integer:
        return sympy.Integer(int(a) // int(b))
    lo, hi = index_bounds(a)
    if b.is_Integer and lo >= 0 and hi < int(b):
        return sympy.Integer(0)
    return None


_INF = float("inf")


def index_bounds(e: Any) -> tuple:
    """``(lo, hi)`` with ``lo <= e <= hi`` for every value of the symbols (``±inf`` when
    unbounded), by interval arithmetic: a non-negative symbol is ``[0, inf)``, ``Mod(x, n)``
    with a positive ``n`` is ``[0, n-1]``, ``floor(x/n)`` is ``floor`` of ``x``'s bounds over
    ``n``, ``Xor`` of non-negative values is below the next power of two.  Sound, not tight."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        return (0 if e.is_nonnegative else -_INF), (_INF if not e.is_nonpositive else 0)
    if e.is_Add:
        lo = hi = 0
        for t in e.args:
            a, b = index_bounds(t)
            lo, hi = lo + a, hi + b
        return lo, hi
    if e.is_Mul:
        lo = hi = 1
        for t in e.args:
            a, b = index_bounds(t)
            cands = [_mul(x, y) for x in (lo, hi) for y in (a, b)]
            lo, hi = min(cands), max(cands)
        return lo, hi
    if isinstance(e, sympy.Mod):
        x, n = e.args
        xl, xh = index_bounds(x)
        if n.is_Integer and n > 0:
            if xl >= 0 and xh < int(n):
                return xl, xh
            return 0, int(n) - 1
        if n.is_positive:
            return 0, _INF
        return -_INF, _INF
    if isinstance(e, sympy.floor):
        num, den = e.args[0].as_numer_denom()
        if den.is_Integer and den > 0:
            nl, nh = index_bounds(num)
            d = int(den)
            return (nl // d if nl != -_INF else -_INF), (nh // d if nh != _INF else _INF)
        return -_INF, _INF
    if isinstance(e, Xor):
        (al, ah), (bl, bh) = index_bounds(e.args[0]), index_bounds(e.args[1])
        if al >= 0 and bl >= 0 and ah != _INF and bh != _INF:
            return 0, (1 << max(int(ah), int(bh)).bit_length()) - 1
        return (0 if al >= 0 and bl >= 0 else -_INF), _INF
    return -_INF, _INF


def _mul(x: Any, y: Any) -> Any:
    if x == 0 or y == 0:
        return 0
    return x * y


def index_symbol(name: str) -> sympy.Symbol:
    """A non-negative integer symbol (a thread index, a loop counter, a runtime extent)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def offset_expr(layout: Any, *coord: Any) -> Any:
    """``layout(coord)`` as a simplified sympy expression."""
    from .checks import require_any_layout
    require_any_layout(layout, "offset_expr")
    from .errors import ArgumentError
    if not coord:
        raise ArgumentError("offset_expr: give an index or a coordinate, e.g. "
                            "offset_expr(layout, index_symbol('t'))")
    out = layout(*coord)
    if not isinstance(out, (int, sympy.Basic)):
        raise ArgumentError(f"offset_expr: the coordinate {coord!r} slices the layout (None is "
                            "CuTe's _); give an index or a full coordinate")
    return simplify_index(sympy.sympify(out))


def simplify_index(expr: Any) -> Any:
    """Light simplification that keeps floor/Mod structure (no rational rewriting)."""
    return sympy.expand(expr) if not expr.has(sympy.floor, sympy.Mod, Xor) else expr


def substitute(expr: Any, values: Dict[Any, int]) -> int:
    """Evaluate an index expression at concrete symbol values (exact integer)."""
    from .errors import ArgumentError, SymbolicError
    e = _as_index_expr(expr, "substitute")
    if not isinstance(values, dict):
        raise ArgumentError(f"substitute: values must be a dict {{symbol: int}}, got "
                            f"{type(values).__name__}")
    vals = {}
    for k, v in values.items():
        if not isinstance(k, sympy.Symbol):
            raise ArgumentError(f"substitute: keys must be sympy symbols, got {k!r}")
        vals[k] = _as_index_expr(v, "substitute", f"the value of {k}")
    out = e.subs(vals)
    out = sympy.simplify(out) if not out.is_Integer else out
    if not out.is_Integer:
        raise SymbolicError(f"substitute: expression did not reduce to an integer: {out}; give "
                            f"a value for each of {sorted(map(str, out.free_symbols))}")
    return int(out)


class _IndexPrinter(C99CodePrinter):
    """C printer for integer index math with Python's floor semantics.

    C's ``/`` and ``%`` truncate toward zero; sympy's ``floor`` and ``Mod`` round toward minus
    infinity.  They agree when the dividend is >= 0 and the divisor > 0, which
    :func:`index_bounds` (or sympy's assumptions) must prove for the short form ``(n) / d``,
    ``(n) % d``.  Otherwise the printed C corrects the truncated result (see :func:`to_c`).
    """

    def _print_floor(self, expr: Any) -> str:
        arg = expr.args[0]
        num, den = arg.as_numer_denom()
        if den == 1:
            return self._print(arg)
        n, d = self._print(num), _atom(self._print(den), den)
        sign = _signs(num, den)
        if sign == "plain":
            return f"(({n}) / {d})"
        if sign == "den+":   # C's remainder has the dividend's sign: < 0 means round down
            return f"(({n}) / {d} - (({n}) % {d} < 0))"
        return (f"(({n}) / ({d}) - ((({n}) % ({d})) != 0 && ((({n}) < 0) != (({d}) < 0))))")

    def _print_Mod(self, expr: Any) -> str:
        a, b = expr.args
        n, d = self._print(a), _atom(self._print(b), b)
        sign = _signs(a, b)
        if sign == "plain":
            return f"(({n}) % {d})"
        if sign == "den+":
            return f"(((({n}) % {d}) + {d}) % {d})"
        return (f"(({n}) % ({d}) + ((({n}) % ({d})) != 0 && ((({n}) < 0) != (({d}) < 0))) "
                f"* ({d}))")

    def _print_Min(self, expr: Any) -> str:
        """``min(a, b)`` of integers (C99's ``fmin`` is a double): CUDA's / HIP's int
        overload, nested for more arguments."""
        return self._int_minmax("min", expr)

    def _print_Max(self, expr: Any) -> str:
        return self._int_minmax("max", expr)

    def _int_minmax(self, fn: str, expr: Any) -> str:
        from .errors import SymbolicError
        if not all(a.is_integer for a in expr.args):
            raise SymbolicError(f"to_c: {fn} of non-integer arguments {expr}")
        out = self._print(expr.args[0])
        for a in expr.args[1:]:
            out = f"{fn}({out}, {self._print(a)})"
        return out

    def _print_Xor(self, expr: Any) -> str:
        a, b = expr.args
        return f"(({self._print(a)}) ^ ({self._print(b)}))"

    def _print_Integer(self, expr: Any) -> str:
        return str(int(expr))

    def _print_Symbol(self, expr: Any) -> str:
        return expr.name


def _atom(text: str, e: Any) -> str:
    """``text`` (the printed divisor ``e``) parenthesised unless it is one integer or symbol:
    ``(n) / 8*b`` would be C's ``((n) / 8) * b``."""
    return text if (e.is_Integer and int(e) >= 0) or e.is_Symbol else f"({text})"


def _signs(num: Any, den: Any) -> str:
    """``"plain"`` when ``num >= 0`` and ``den > 0`` are proven (C's ``/``, ``%`` are floor's),
    ``"den+"`` when only ``den > 0`` is, ``"any"`` otherwise.  A divisor that is a
    non-negative symbol counts as positive: dividing by zero is undefined in either form."""
    den_pos = den.is_positive or den.is_nonnegative or index_bounds(den)[0] > 0
    if not den_pos:
        return "any"
    if num.is_nonnegative or index_bounds(num)[0] >= 0:
        return "plain"
    return "den+"


def to_c(expr: Any) -> str:
    """Print an index expression as C with the same integer value as the expression.

    ``floor(n/d)`` and ``Mod(n, d)`` print as C's ``(n) / d`` and ``(n) % d`` where
    ``n >= 0`` and ``d > 0`` are proven (non-negative symbols from :func:`index_symbol`,
    ``Mod``, ``Xor`` and sums/products of those: the kernels' address math); otherwise as
    C's truncating division corrected to floor semantics, e.g. ``((n) / 2 - ((n) % 2 < 0))``.
    """
    return _IndexPrinter().doprint(_as_index_expr(expr, "to_c", allow_bool=True))
