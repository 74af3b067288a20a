"""Text round trip in CuTe's own print syntax.

Grammar (whitespace ignored)::

    expr     := composed | layout | inttuple | tiler | swizzle | '_'
    composed := (swizzle | layout) 'o' INT 'o' layout
    layout   := inttuple ':' inttuple
    inttuple := INT | NAME | '(' inttuple (',' inttuple)* ')'
    tiler    := '<' item (',' item)* '>'        item := layout | inttuple | tiler | '_'
    swizzle  := 'Sw<' INT ',' INT ',' INT '>'
    INT      := ['-'] ['_'] digits               ('_4' is CuTe's static marker, accepted)
    NAME     := identifier                        (a positive integer sympy symbol, e.g. lda)

``parse(str(x)) == x`` for every Layout, Swizzle and ComposedLayout.  A tiler parses to a Python
tuple (``None`` for ``_``), an inttuple to an int or a tuple.
"""

from __future__ import annotations

import re
from typing import Any, List

from .errors import ParseError, ShapeError
from .layout import Layout
from .swizzle import ComposedLayout, Swizzle

__all__ = ["parse"]

_TOKEN = re.compile(r"\s*(?:(Sw<)|(-?_?\d+)|([A-Za-z][A-Za-z0-9_]*)|(.))")


def _tokenize(text: str) -> List[str]:
    toks: List[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing whitespace
            break
        tok = m.group(m.lastindex) if m.lastindex else ""
        if tok.strip():
            toks.append(tok)
        pos = m.end()
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> Any:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def eat(self, tok: Any = None) -> str:
        t = self.peek()
        if t is None or (tok is not None and t != tok):
            want = f"'{tok}'" if tok else "more input"
            got = f"'{t}'" if t is not None else "end of text"
            raise ParseError(f"cannot parse {self.text!r}: expected {want} at token {self.i}, "
                             f"got {got}")
        self.i += 1
        return t

    # inttuple -------------------------------------------------------------------------------
    def leaf(self) -> Any:
        t = self.eat()
        if re.fullmatch(r"-?_?\d+", t):
            return int(t.replace("_", ""))
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", t) and t != "o":
            import sympy
            return sympy.Symbol(t, integer=True, positive=True)
        raise ParseError(f"cannot parse {self.text!r}: expected an integer, got '{t}'")

    def inttuple(self) -> Any:
        if self.peek() == "(":
            self.eat("(")
            items = [self.inttuple()]
            while self.peek() == ",":
                self.eat(",")
                items.append(self.inttuple())
            self.eat(")")
            return tuple(items)
        return self.leaf()

    # compound -----------------------------------------------------------------------------
    def swizzle(self) -> Swizzle:
        self.eat("Sw<")
        b = self.leaf()
        self.eat(",")
        m = self.leaf()
        self.eat(",")
        s = self.leaf()
        self.eat(">")
        try:
            return Swizzle(b, m, s)
        except ShapeError as e:
            raise ParseError(f"cannot parse {self.text!r}: {e}") from None

    def layout_or_tuple(self) -> Any:
        shp = self.inttuple()
        if self.peek() == ":":
            self.eat(":")
            std = self.inttuple()
            try:
                return Layout(shp, std)
            except ShapeError as e:
                raise ParseError(f"cannot parse {self.text!r}: {e}") from None
        return shp

    def tiler(self) -> tuple:
        self.eat("<")
        items = [self.item()]
        while self.peek() == ",":
            self.eat(",")
            items.append(self.item())
        self.eat(">")
        return tuple(items)

    def item(self) -> Any:
        t = self.peek()
        if t == "_":
            self.eat()
            return None
        if t == "<":
            return self.tiler()
        return self.layout_or_tuple()

    def expr(self) -> Any:
        t = self.peek()
        if t is None:
            raise ParseError("cannot parse an empty string")
        if t == "Sw<":
            head: Any = self.swizzle()
        elif t == "<":
            return self.tiler()
        elif t == "_":
            self.eat()
            return None
        else:
            head = self.layout_or_tuple()
        if self.peek() == "o":
            if not isinstance(head, (Swizzle, Layout)):
                raise ParseError(f"cannot parse {self.text!r}: only a swizzle or layout can be "
                                 "composed with 'o'")
            self.eat("o")
            off = self.leaf()
            self.eat("o")
            inner = self.layout_or_tuple()
            if not isinstance(inner, Layout):
                raise ParseError(f"cannot parse {self.text!r}: expected a layout after 'o'")
            return ComposedLayout(head, off, inner)
        return head


def parse(text: str) -> Any:
    """Parse CuTe syntax: ``"(4,(2,3)):(1,(8,16))"``, ``"Sw<3,3,3> o 0 o (8,64):(64,1)"``, ...

    The printed forms of CuTe C++, CuTe DSL and FlyDSL are read too (``S<3,3,3>``, ``?``,
    ``!fly.layout<...>``, ``smem_ptr[16b](unset) o ...``); :func:`layoutalg.dialects.read` also
    says which dialect it read."""
    if not isinstance(text, str):
        raise ParseError(f"parse expects a string, got {type(text).__name__}")
    from .dialects import canonical   # CuTe C++ / CuTe DSL / FlyDSL printed forms
    p = _Parser(canonical(text).text)
    out = p.expr()
    if p.peek() is not None:
        raise ParseError(f"cannot parse {text!r}: unexpected '{p.peek()}' after a complete "
                         "expression")
    return out
