"""Integer C expressions as printed in a kernel: parse, evaluate, bound.

The verifier reads the printed source back (:mod:`kernels.verify.printed`); every index
expression in it goes through :func:`parse` into a small tree of tuples, which is then

* evaluated with C semantics (:func:`evaluate`: truncating ``/``, C ``%``, ``^ & | << >>``,
  comparisons, ``&&``/``||``/``!``, ``?:``, ``la_imin``/``la_imax``) on int64 numpy arrays, and
* bounded (:func:`bound`): the interval of every subexpression over the intervals of its
  symbols, with each node's C type (``int`` unless a literal does not fit one), so that an
  ``int`` product that passes 2^31 is reported with the subexpression that overflows.

Only what the printers emit for index math is accepted; anything else raises
:class:`CExprError` naming the text (never a silent guess).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import numpy as np

from ..errors import KernelError

__all__ = ["CExprError", "split_args", "parse", "evaluate", "bound", "Node", "INT_MIN", "INT_MAX", "text_of"]

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1

Node = Tuple[Any, ...]      # ("num", v) | ("id", name) | ("un", op, a) | ("bin", op, a, b)
#                             | ("cond", c, a, b) | ("call", fn, args) ; each ends with its text


class CExprError(KernelError):
    """A printed expression the verifier cannot read as integer C."""

    exit_code = 1


_TOK = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)|([A-Za-z_]\w*(?:\.[xyz])?)|"
                  r"(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%^&|<>!~?:(),]))")
_BIN = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
        ("<<", ">>"), ("+", "-"), ("*", "/", "%")]
_CALLS = {"la_imin": 2, "la_imax": 2, "min": 2, "max": 2}


def _tokens(text: str) -> List[Tuple[str, Any]]:
    out: List[Tuple[str, Any]] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOK.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise CExprError(f"cannot read {text[pos:pos + 20]!r} in the printed expression "
                             f"{text!r}")
        if m.group(1) is not None:
            if "u" in m.group(2).lower():
                raise CExprError(f"unsigned literal {m.group(0).strip()!r} in {text!r}: the "
                                 f"index verifier only reads signed int arithmetic")
            out.append(("num", int(m.group(1), 0)))
        elif m.group(3) in ("true", "false"):      # to_c prints sympy's true and false
            out.append(("num", int(m.group(3) == "true")))
        elif m.group(3) is not None:
            out.append(("id", m.group(3)))
        else:
            out.append(("op", m.group(4)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> Optional[Tuple[str, Any]]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, op: Optional[str] = None) -> Tuple[str, Any]:
        t = self.peek()
        if t is None or (op is not None and t != ("op", op)):
            raise CExprError(f"expected {op or 'more'} in the printed expression {self.text!r}")
        self.i += 1
        return t

    def expr(self) -> Node:
        c = self.binary(0)
        if self.peek() == ("op", "?"):
            self.take("?")
            a = self.expr()
            self.take(":")
            b = self.expr()
            return ("cond", c, a, b)
        return c

    def binary(self, level: int) -> Node:
        if level == len(_BIN):
            return self.unary()
        lhs = self.binary(level + 1)
        while True:
            t = self.peek()
            if t is None or t[0] != "op" or t[1] not in _BIN[level]:
                return lhs
            self.take()
            rhs = self.binary(level + 1)
            lhs = ("bin", t[1], lhs, rhs)

    def unary(self) -> Node:
        t = self.peek()
        if t in (("op", "-"), ("op", "!"), ("op", "~"), ("op", "+")):
            self.take()
            return ("un", t[1], self.unary())
        return self.primary()

    def primary(self) -> Node:
        t = self.take()
        if t == ("op", "("):
            e = self.expr()
            self.take(")")
            return e
        if t[0] == "num":
            return ("num", t[1])
        if t[0] == "id":
            if self.peek() == ("op", "("):
                if t[1] not in _CALLS:
                    raise CExprError(f"call of {t[1]} in the printed index expression "
                                     f"{self.text!r}")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ("op", ","):
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                return ("call", t[1], tuple(args))
            return ("id", t[1])
        raise CExprError(f"unexpected {t[1]!r} in the printed expression {self.text!r}")


_CACHE: Dict[str, Node] = {}


def parse(text: str) -> Node:
    """The expression tree of ``text`` (cached); :class:`CExprError` when it is not the integer
    C the printers emit."""
    n = _CACHE.get(text)
    if n is None:
        p = _Parser(text)
        n = p.expr()
        if p.peek() is not None:
            raise CExprError(f"trailing {p.peek()[1]!r} in the printed expression {text!r}")
        _CACHE[text] = n
    return n


def text_of(n: Node) -> str:
    """C text of a tree (fully parenthesised; for messages)."""
    k = n[0]
    if k == "num":
        return str(n[1])
    if k == "id":
        return n[1]
    if k == "un":
        return f"{n[1]}{text_of(n[2])}"
    if k == "bin":
        return f"({text_of(n[2])} {n[1]} {text_of(n[3])})"
    if k == "cond":
        return f"({text_of(n[1])} ? {text_of(n[2])} : {text_of(n[3])})"
    return f"{n[1]}({', '.join(text_of(a) for a in n[2])})"


# ---------------------------------------------------------------------------- evaluation

def _tdiv(a: Any, b: Any) -> Any:
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if np.any(b == 0):
        raise CExprError("division by zero in a printed index expression")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


_EVAL: Dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": _tdiv, "%": lambda a, b: a - _tdiv(a, b) * b,
    "^": np.bitwise_xor, "&": np.bitwise_and, "|": np.bitwise_or,
    "<<": np.left_shift, ">>": np.right_shift,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal,
    "&&": np.logical_and, "||": np.logical_or,
}


def evaluate(n: Node, env: Dict[str, Any]) -> Any:
    """Value of ``n`` with C semantics; ``env`` maps names to ints or int64 arrays (broadcast).
    Booleans come back as 0/1 integers, as in C."""
    k = n[0]
    if k == "num":
        return np.int64(n[1])
    if k == "id":
        try:
            return np.asarray(env[n[1]], dtype=np.int64)
        except KeyError:
            raise CExprError(f"the printed expression uses {n[1]!r}, which is not bound at "
                             f"this point of the kernel") from None
    if k == "un":
        a = evaluate(n[2], env)
        return {"-": lambda: -a, "+": lambda: a, "!": lambda: (a == 0).astype(np.int64),
                "~": lambda: ~a}[n[1]]()
    if k == "bin":
        a, b = evaluate(n[2], env), evaluate(n[3], env)
        return np.asarray(_EVAL[n[1]](a, b)).astype(np.int64)
    if k == "cond":
        return np.where(evaluate(n[1], env) != 0, evaluate(n[2], env), evaluate(n[3], env))
    args = [evaluate(a, env) for a in n[2]]
    return np.minimum(*args) if n[1] in ("la_imin", "min") else np.maximum(*args)


# ---------------------------------------------------------------------------- intervals

Interval = Tuple[int, int]


def _mul(a: Interval, b: Interval) -> Interval:
    ps = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return min(ps), max(ps)


def _div(a: Interval, b: Interval) -> Interval:
    if b[0] <= 0 <= b[1]:
        return (-max(abs(a[0]), abs(a[1])), max(abs(a[0]), abs(a[1])))
    qs = [int(_tdiv(x, y)) for x in a for y in b]
    return min(qs), max(qs)


def _mod(a: Interval, b: Interval) -> Interval:
    m = max(abs(b[0]), abs(b[1])) - 1
    if a[0] >= 0:
        if b[0] == b[1] and b[0] > 0 and a[1] < b[0]:
            return a                     # x % c == x for 0 <= x < c
        return 0, min(m, a[1])
    return (-m, m) if a[1] > 0 else (-m, 0)


def _bits(a: Interval, b: Interval, op: str) -> Interval:
    if a[0] < 0 or b[0] < 0:
        return (INT_MIN, INT_MAX)
    if op == "&":
        return 0, min(a[1], b[1])
    top = (1 << max(a[1], b[1]).bit_length()) - 1
    return 0, top


def _shift(a: Interval, b: Interval, op: str) -> Interval:
    if b[0] < 0 or b[1] > 62:
        return (LONG_MIN, LONG_MAX)
    if op == "<<":
        return _mul(a, (1 << b[0], 1 << b[1]))
    return (a[0] >> b[1] if a[0] >= 0 else a[0] >> b[0], a[1] >> b[0] if a[1] >= 0 else
            a[1] >> b[1])


def bound(n: Node, ranges: Dict[str, Interval],
          report: Callable[[Node, Interval, str], None],
          longs: FrozenSet[str] = frozenset()) -> Tuple[Interval, str]:
    """Interval and C type (``"int"`` or ``"long"``) of ``n`` over ``ranges``; calls
    ``report(node, interval, ctype)`` for every subexpression whose interval does not fit its
    type (an int operation whose exact result leaves [-2^31, 2^31 - 1]).  The names in
    ``longs`` are ``long long`` (a kernel's 64-bit arguments); every other name is ``int``."""
    k = n[0]
    if k == "num":
        v = n[1]
        return (v, v), ("int" if v <= INT_MAX else "long")
    if k == "id":
        if n[1] not in ranges:
            raise CExprError(f"no range known for {n[1]!r} (not a kernel symbol, argument, "
                             f"loop variable or earlier const int)")
        return ranges[n[1]], ("long" if n[1] in longs else "int")
    if k == "un":
        iv, t = bound(n[2], ranges, report, longs)
        if n[1] == "-":
            iv = (-iv[1], -iv[0])
        elif n[1] == "!":
            iv = (0, 1)
        elif n[1] == "~":
            iv = (~iv[1], ~iv[0])
        _fit(n, iv, t, report)
        return iv, t
    if k == "cond":
        bound(n[1], ranges, report, longs)
        a, ta = bound(n[2], ranges, report, longs)
        b, tb = bound(n[3], ranges, report, longs)
        return (min(a[0], b[0]), max(a[1], b[1])), ("long" if "long" in (ta, tb) else "int")
    if k == "call":
        ivs = [bound(a, ranges, report, longs) for a in n[2]]
        (a, ta), (b, tb) = ivs
        if ta != "int" or tb != "int":
            report(n, (min(a[0], b[0]), max(a[1], b[1])), "long argument of an int function")
        f = min if n[1] in ("la_imin", "min") else max
        return (f(a[0], b[0]), f(a[1], b[1])), "int"
    op = n[1]
    a, ta = bound(n[2], ranges, report, longs)
    b, tb = bound(n[3], ranges, report, longs)
    t = "long" if "long" in (ta, tb) else "int"
    if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
        return (0, 1), "int"
    if op == "+":
        iv = (a[0] + b[0], a[1] + b[1])
    elif op == "-":
        iv = (a[0] - b[1], a[1] - b[0])
    elif op == "*":
        iv = _mul(a, b)
    elif op == "/":
        iv = _div(a, b)
    elif op == "%":
        iv = _mod(a, b)
    elif op in ("^", "&", "|"):
        iv = _bits(a, b, op)
    else:
        iv = _shift(a, b, op)
    _fit(n, iv, t, report)
    return iv, t


def _fit(n: Node, iv: Interval, t: str, report: Callable[[Node, Interval, str], None]) -> None:
    lo, hi = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
    if iv[0] < lo or iv[1] > hi:
        report(n, iv, t)


def split_args(s: str) -> List[str]:
    """Top-level comma-separated parts of ``s`` (a printed call's or initialiser's
    arguments): commas inside ``()``, ``{}`` or ``[]`` do not split."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out
