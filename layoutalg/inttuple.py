"""Nested integer tuples (CuTe's ``IntTuple``): the shapes, strides and coordinates of layouts.

An IntTuple is either a leaf or a Python ``tuple`` of IntTuples. A leaf is a Python ``int`` (a
CuTe *static* integer) or a sympy expression (a CuTe *dynamic* integer whose value is only known
at run time, e.g. a leading dimension ``lda``).

Invariants kept by every function here:
  * tuples are plain ``tuple`` objects (never lists), leaves are ``int`` or ``sympy.Expr``;
  * a 1-tuple ``(4,)`` and the int ``4`` are different IntTuples (CuTe prints ``(4)`` and ``4``);
  * functions never mutate their arguments.

Static-only checks (divisibility, comparisons) go through :func:`is_static`; on symbolic leaves
they either follow CuTe's dynamic-int semantics or raise :class:`SymbolicError`.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Tuple, Union

from .errors import ShapeError, SymbolicError

IntTuple = Union[int, Tuple["IntTuple", ...], Any]  # Any: sympy expression leaves

__all__ = [
    "IntTuple", "is_tuple", "is_static", "normalize", "flatten", "product", "rank", "depth",
    "congruent", "weakly_congruent", "compact_col_major", "compact_row_major", "crd2idx",
    "idx2crd", "shape_div", "ceil_div", "fmt", "unwrap", "product_each", "sym_ok",
]


def is_tuple(x: Any) -> bool:
    """True for a (possibly empty) tuple node."""
    return type(x) is tuple


def is_static(x: Any) -> bool:
    """True when every leaf is a plain Python int (CuTe: ``is_static``)."""
    if type(x) is int:
        return True
    if type(x) is tuple:
        return all(is_static(e) for e in x)
    return False


def _to_leaf(x: Any, what: str) -> Any:
    if type(x) is int:
        return x
    from .errors import ArgumentError
    if isinstance(x, bool):
        raise ArgumentError(f"{what}: got {x!r}, a bool; expected an integer")
    try:  # numpy integers, sympy Integer
        import numbers
        if isinstance(x, numbers.Integral):
            return int(x)
    except Exception:  # pragma: no cover - numbers is stdlib
        pass
    mod = type(x).__module__ or ""
    if mod.startswith("sympy"):
        import sympy
        if isinstance(x, sympy.Integer):
            return int(x)
        if isinstance(x, sympy.Expr):
            if x.is_integer is False:
                raise ShapeError(f"{what}: symbolic value {x} is not an integer expression")
            return x
    raise ArgumentError(f"{what}: got {x!r} ({type(x).__name__}), which is not an integer; "
                        "expected an int, a sympy integer expression or a tuple of those")


def normalize(t: Any, what: str = "IntTuple") -> IntTuple:
    """Return ``t`` with lists turned into tuples and leaves checked/converted to int or sympy."""
    if type(t) is int:
        return t
    if isinstance(t, (tuple, list)):
        return tuple(normalize(e, what) for e in t)
    return _to_leaf(t, what)


def flatten(t: IntTuple) -> tuple:
    """All leaves of ``t`` in order, as a flat tuple (a leaf gives a 1-tuple)."""
    if type(t) is not tuple:
        return (t,)
    for e in t:
        if type(e) is tuple:
            break
    else:
        return t  # already flat (the common case): no copy
    out: list = []
    stack = [iter(t)]
    while stack:
        for e in stack[-1]:
            if type(e) is tuple:
                stack.append(iter(e))
                break
            out.append(e)
        else:
            stack.pop()
    return tuple(out)


def product(t: IntTuple) -> Any:
    """Product of all leaves (1 for an empty tuple)."""
    if type(t) is not tuple:
        return t
    p = 1
    for e in flatten(t):
        p = p * e
    return p


def product_each(t: IntTuple) -> tuple:
    """``(product(t[0]), product(t[1]), ...)``; a leaf is treated as a 1-tuple."""
    if type(t) is not tuple:
        return (t,)
    return tuple(product(e) for e in t)


def rank(t: IntTuple) -> int:
    """Number of top-level modes (1 for a leaf)."""
    return len(t) if type(t) is tuple else 1


def depth(t: IntTuple) -> int:
    """Nesting depth: 0 for a leaf, 1 for a flat tuple, ..."""
    if type(t) is not tuple:
        return 0
    return 1 + max((depth(e) for e in t), default=0)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree structure (profile)."""
    ta, tb = type(a) is tuple, type(b) is tuple
    if ta != tb:
        return False
    if not ta:
        return True
    return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))


def weakly_congruent(a: IntTuple, b: IntTuple) -> bool:
    """``a``'s profile is a coarsening of ``b``'s (a leaf of ``a`` may stand for a subtree of b)."""
    if type(a) is not tuple:
        return True
    if type(b) is not tuple:
        return False
    return len(a) == len(b) and all(weakly_congruent(x, y) for x, y in zip(a, b))


def compact_col_major(shape: IntTuple, start: Any = 1) -> IntTuple:
    """Column-major (LayoutLeft) strides congruent to ``shape``, starting at ``start``.

    As in CuTe's ``compact_major``, a static extent-1 leaf gets stride 0 (it never moves).
    """
    if type(shape) is not tuple:
        return 0 if (type(shape) is int and shape == 1) else start
    out = []
    cur = start
    for s in shape:
        out.append(compact_col_major(s, cur))
        cur = cur * product(s)
    return tuple(out)


def compact_row_major(shape: IntTuple, start: Any = 1) -> IntTuple:
    """Row-major (LayoutRight) strides congruent to ``shape``: the last mode is fastest.

    A static extent-1 leaf gets stride 0 (CuTe ``compact_major``).
    """
    if type(shape) is not tuple:
        return 0 if (type(shape) is int and shape == 1) else start
    out = [None] * len(shape)
    cur = start
    for i in range(len(shape) - 1, -1, -1):
        out[i] = compact_row_major(shape[i], cur)
        cur = cur * product(shape[i])
    return tuple(out)


def crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple) -> Any:
    """Map a (possibly nested or 1-D) coordinate to an offset, exactly as CuTe's ``crd2idx``.

    An integer coordinate for a tuple mode is split column-major across the sub-modes; the last
    sub-mode is unbounded (CuTe extends a layout past its size along its last mode).
    """
    if not (_plain(crd, 0) and _plain(shape, 0) and _plain(stride, 0)):
        crd, shape, stride = _checked(crd, "crd2idx: coordinate"), \
            _checked(shape, "crd2idx: shape"), _checked(stride, "crd2idx: stride")
    return _crd2idx(crd, shape, stride)


def _plain(t: Any, depth: int) -> bool:
    """True for an int or a tuple tree of ints (or sympy leaves) at most MAX_DEPTH deep: the
    common case, which needs no normalizing."""
    tt = type(t)
    if tt is int:
        return True
    if tt is tuple:
        if depth >= 64:
            return False
        for e in t:
            if type(e) is not int and not _plain(e, depth + 1):
                return False
        return True
    return _is_sympy(t) and getattr(t, "is_integer", None) is not False


def _checked(t: Any, what: str) -> IntTuple:
    from .checks import check_depth
    check_depth(t, what)
    return normalize(t, what)


def _crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple) -> Any:
    if type(crd) is tuple:
        if type(shape) is not tuple or len(shape) != len(crd):
            raise ShapeError(f"coordinate {fmt(crd)} does not match shape {fmt(shape)}: "
                             f"expected rank {rank(shape)} coordinate")
        if type(stride) is not tuple or len(stride) != len(shape):
            raise ShapeError(f"stride {fmt(stride)} is not congruent to shape {fmt(shape)}")
        return sum((_crd2idx(c, s, d) for c, s, d in zip(crd, shape, stride)), 0)
    if type(shape) is not tuple:
        if type(stride) is tuple:
            raise ShapeError(f"stride {fmt(stride)} is not congruent to shape {fmt(shape)}")
        return crd * stride
    if type(stride) is not tuple or len(stride) != len(shape):
        raise ShapeError(f"stride {fmt(stride)} is not congruent to shape {fmt(shape)}")
    n = len(shape)
    if n == 0:
        return 0
    total = 0
    for i in range(n - 1):
        s = product(shape[i])
        total = total + _crd2idx(_mod(crd, s), shape[i], stride[i])
        crd = _floordiv(crd, s)
    return total + _crd2idx(crd, shape[-1], stride[-1])


def _mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int or not (_is_sympy(a) or _is_sympy(b)):
        return a % b
    from .symbolic import imod   # sympy's Mod, minus a sympy 1.14 wrong answer
    return imod(a, b)


def _floordiv(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int or not (_is_sympy(a) or _is_sympy(b)):
        return a // b
    from .symbolic import ifloordiv   # floor that sympy cannot mis-simplify
    return ifloordiv(a, b)


def _is_sympy(x: Any) -> bool:
    sympy = sys.modules.get("sympy")    # no sympy object exists before sympy is imported
    return sympy is not None and isinstance(x, sympy.Basic)


def idx2crd(idx: Any, shape: IntTuple) -> IntTuple:
    """The natural (column-major) coordinate of ``idx`` in ``shape``; last mode unbounded."""
    if not (type(idx) is int and type(shape) is int):
        idx, shape = _checked(idx, "idx2crd: index"), _checked(shape, "idx2crd: shape")
        if type(idx) is tuple:
            raise ShapeError(f"idx2crd: the index must be an integer, got {fmt(idx)}")
    return _idx2crd(idx, shape)


def _idx2crd(idx: Any, shape: IntTuple) -> IntTuple:
    if type(shape) is not tuple:
        return idx
    out = []
    n = len(shape)
    for i, s in enumerate(shape):
        if i == n - 1:
            out.append(_idx2crd(idx, s))
        else:
            p = product(s)
            out.append(_idx2crd(_mod(idx, p), s))
            idx = _floordiv(idx, p)
    return tuple(out)


def sym_ok(cond: Any, what: str) -> bool:
    """Decide a (possibly symbolic) boolean; raise SymbolicError when sympy cannot decide it."""
    if cond is True or cond is False:
        return cond
    try:
        return bool(cond)
    except TypeError:
        raise SymbolicError(f"cannot decide {what} for symbolic values ({cond}); give concrete "
                            "integers or sympy assumptions that decide it") from None


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe ``shape_div``: divide ``a`` by ``b``, consuming ``b`` mode by mode.

    For leaves it requires ``a % b == 0 or b % a == 0`` and returns ``ceil(a / b)``.
    """
    if type(a) is tuple:
        if type(b) is tuple:
            if len(a) != len(b):
                raise ShapeError(f"shape_div: rank mismatch {fmt(a)} / {fmt(b)}")
            return tuple(shape_div(x, y) for x, y in zip(a, b))
        out = []
        rest = b
        for x in a:
            out.append(shape_div(x, rest))
            rest = shape_div(rest, x)
        return tuple(out)
    if type(b) is tuple:
        return shape_div(a, product(b))
    if type(a) is int and type(b) is int:
        if a % b != 0 and b % a != 0:
            from .errors import DivisibilityError
            raise DivisibilityError(f"shape_div: neither of {a} and {b} divides the other")
        return (a + b - 1) // b
    return _ceil_div_leaf(a, b)


def _ceil_div_leaf(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return (a + b - 1) // b
    import sympy
    q = sympy.ceiling(sympy.Rational(1, 1) * a / b)
    return int(q) if q.is_Integer else q  # keep static results plain ints (CuTe's static 1s)


def ceil_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe ``ceil_div``: tuple/tuple elementwise (missing modes of b are 1), tuple/int folds."""
    if type(a) is tuple:
        if type(b) is tuple:
            if len(a) < len(b):
                raise ShapeError(f"ceil_div: {fmt(b)} has more modes than {fmt(a)}")
            bb = b + (1,) * (len(a) - len(b))
            return tuple(ceil_div(x, y) for x, y in zip(a, bb))
        out = []
        rest = b
        for x in a:
            out.append(ceil_div(x, rest))
            rest = ceil_div(rest, x)
        return tuple(out)
    if type(b) is tuple:
        return ceil_div(a, product(b))
    return _ceil_div_leaf(a, b)


def exact_div(a: Any, b: Any) -> Any:
    """``a / b`` for leaves that the caller knows ``b`` divides (``a // b`` on ints; on
    symbolic leaves the simplified quotient, a plain int when it is one)."""
    if type(a) is int and type(b) is int:
        return a // b
    import sympy
    q = sympy.simplify(a / b)
    return int(q) if q.is_Integer else q


def unwrap(t: IntTuple) -> IntTuple:
    """Strip 1-tuples at the top: ``((4,),)`` -> ``4``."""
    while type(t) is tuple and len(t) == 1:
        t = t[0]
    return t


def _fmt_leaf(x: Any) -> str:
    if type(x) is int:
        return str(x)
    return str(x).replace(" ", "")


def fmt(t: IntTuple) -> str:
    """CuTe's print form without static markers: ``(4,(2,3))``, ``(4)`` for a 1-tuple."""
    if type(t) is not tuple:
        return _fmt_leaf(t)
    return "(" + ",".join(fmt(e) for e in t) + ")"


def iter_leaves_with(a: IntTuple, b: IntTuple) -> Iterable[tuple]:
    """Pairs of corresponding leaves of two congruent IntTuples."""
    return zip(flatten(a), flatten(b))
