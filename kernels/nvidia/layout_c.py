"""Print layoutalg layouts as C index expressions, and check the printed text against them.

The NVIDIA builders describe every address they use as a ``layoutalg`` object: a
:class:`~layoutalg.Layout` from (thread/lane, value, iteration) to an element offset, and a
:class:`~layoutalg.Swizzle` on top for shared memory.  :func:`expr` evaluates such an object on
sympy index symbols (``lane``, ``tid``, ``wm``...) and :func:`c` prints it with
:func:`layoutalg.symbolic.to_c`; :func:`check_printed` evaluates the *same sympy object* the way
the printed C does (truncating ``/``, ``%``, ``^`` on non-negative ints) at every point of the
symbols' ranges and compares it with the layout evaluated directly, so what is verified is what
is printed.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

import numpy as np
import sympy

from layoutalg import Layout, Swizzle
from layoutalg.symbolic import Xor, index_symbol, to_c

__all__ = ["sym", "expr", "c", "swizzle_expr", "check_printed", "eval_c_semantics"]


def sym(name: str) -> sympy.Symbol:
    return index_symbol(name)


def swizzle_expr(sw: Swizzle, x: Any) -> Any:
    """``Swizzle(B, M, S)`` of ``x`` as ``x ^ (((x >> (M+S)) & (2^B-1)) << M)`` (S > 0)."""
    if sw is None or sw.bits == 0:
        return x
    if sw.shift <= 0:
        return sw(x)
    hi = sympy.Mod(sympy.floor(x / 2 ** (sw.base + sw.shift)), 2 ** sw.bits)
    return Xor(x, 2 ** sw.base * hi)


def expr(layout: Layout, coord: Any, swizzle: Swizzle = None, offset: Any = 0) -> Any:
    """``swizzle(offset + layout(coord))`` as a sympy expression."""
    v = sympy.sympify(layout(coord)) + offset
    return swizzle_expr(swizzle, v)


def c(e: Any) -> str:
    return to_c(e)


def eval_c_semantics(e: Any, env: Mapping[sympy.Symbol, np.ndarray]) -> np.ndarray:
    """Evaluate an index expression like the printed C does (non-negative ints)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return np.int64(int(e))
    if e.is_Symbol:
        return np.asarray(env[e], dtype=np.int64)
    if isinstance(e, sympy.Add):
        out = np.int64(0)
        for a in e.args:
            out = out + eval_c_semantics(a, env)
        return out
    if isinstance(e, sympy.Mul):
        out = np.int64(1)
        num, den = e.as_numer_denom()
        if den != 1:
            return eval_c_semantics(num, env) // eval_c_semantics(den, env)
        for a in e.args:
            out = out * eval_c_semantics(a, env)
        return out
    if isinstance(e, sympy.Mod):
        a, b = e.args
        return eval_c_semantics(a, env) % eval_c_semantics(b, env)
    if isinstance(e, sympy.floor):
        num, den = e.args[0].as_numer_denom()
        return eval_c_semantics(num, env) // eval_c_semantics(den, env)
    if isinstance(e, Xor):
        a, b = e.args
        return np.bitwise_xor(eval_c_semantics(a, env), eval_c_semantics(b, env))
    raise ValueError(f"cannot evaluate {e!r} with C semantics")


def check_printed(printed: Any, reference: Any, ranges: Mapping[sympy.Symbol, int],
                  what: str) -> None:
    """Raise AssertionError unless ``printed`` (sympy, as printed) equals ``reference(env)``
    (a callable on numpy int arrays, e.g. the layout evaluated numerically) at every point of
    ``ranges`` (symbol -> extent)."""
    syms = list(ranges)
    grids = np.meshgrid(*[np.arange(ranges[s]) for s in syms], indexing="ij") if syms else []
    env: Dict[sympy.Symbol, np.ndarray] = {s: g.reshape(-1) for s, g in zip(syms, grids)}
    got = np.broadcast_to(eval_c_semantics(printed, env), (len(env[syms[0]]),) if syms else ())
    want = np.asarray(reference(env), dtype=np.int64)
    if not np.array_equal(got, want):
        i = int(np.flatnonzero(got != want)[0])
        at = {str(s): int(env[s][i]) for s in syms}
        raise AssertionError(f"{what}: printed expression {to_c(printed)} gives {int(got[i])} at "
                             f"{at}, the layout gives {int(want[i])}")
