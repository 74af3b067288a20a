"""The printed forms of CuTe C++, CuTe DSL and FlyDSL, read into layoutalg's syntax and back.

Each tool prints the same algebra a little differently (real strings, made by the commands in
tests/fixtures/dialect_strings.json)::

    layoutalg   Sw<3,3,3> o 0 o (8,64):(64,1)
    cute-c++    Sw<3,3,3> o _0 o (_8,_64):(_64,_1)           ('_' marks a static int)
                smem_ptr[16b](unset) o ...                    (a tensor: pointer o layout)
                Sw<3,4,3> o smem_ptr[16b](unset) o (...)      (GMMA atoms: a swizzle on BYTE
                                                               addresses, see below)
    cute-dsl    S<3,3,3> o 0 o (8,64):(64,1), (8,?):(?,1)    ('?' a dynamic extent/stride,
                (8,?{div=16}):(?{div=16},1)                   with its divisibility)
    flydsl      !fly.layout<(4,?):(1,4)>, !fly.composed_layout<S<3,3,3> o 0 o ...>,
                !fly.swizzle<S<3,3,3>> (FlyDSL 0.5.0's type prints), and the Layout<...>
                wrapper issue 17 reports (not seen in FlyDSL 0.5.0's type prints here)

:func:`canonical` rewrites any of them into layoutalg's grammar (what :func:`layoutalg.parse`
reads); :func:`read` parses and says which dialect it read; :func:`format_as` prints a layout in
a chosen dialect.  Each ``?`` becomes its own positive integer symbol ``dyn0``, ``dyn1``, ...
(in order of appearance): two ``?`` are not known to be equal, so they are different symbols.

A CuTe ``smem_ptr_flag`` in the offset position (``Sw<B,M,S> o smem_ptr[Nb](unset) o L``) means
the swizzle acts on the byte address of an N-bit element; on element offsets that is
``Sw<B, M - log2(N/8), S>`` (e.g. the 128-byte GMMA atom ``Sw<3,4,3>`` on 16-bit elements is
``Sw<3,3,3>``), so that is what it reads to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from .errors import ParseError

__all__ = ["DIALECTS", "Dialect", "canonical", "read", "format_as"]

DIALECTS = ("layoutalg", "cute-c++", "cute-dsl", "flydsl")

_FLY_WRAP = re.compile(r"^!fly\.(layout|composed_layout|swizzle|int_tuple)<(.*)>$", re.S)
_LAYOUT_WRAP = re.compile(r"^Layout<(.*)>$", re.S)
_SMEM_PREFIX = re.compile(r"^smem_ptr\[(\d+)b\]\(([^()]*|\(nil\))\)\s*o\s*")
_SMEM_MIDDLE = re.compile(r"Sw<\s*(\d+)\s*,\s*(\d+)\s*,\s*(-?\d+)\s*>\s*o\s*"
                          r"smem_ptr\[(\d+)b\]\(unset\)\s*o")
_DSL_SWIZZLE = re.compile(r"(?<![A-Za-z0-9_])S<")
_DYNAMIC = re.compile(r"\?(\{[^{}]*\})?")
_STATIC = re.compile(r"(?<![A-Za-z0-9_])_(-?\d+)")
_STATIC_NEG = re.compile(r"(?<![A-Za-z0-9_])_(-\d+)")


@dataclass(frozen=True)
class Dialect:
    """What :func:`canonical` found: the dialect, the element width a CuTe pointer named (bits),
    the names given to ``?`` extents and the divisibility CuTe DSL printed for them."""

    name: str
    text: str                                  # the canonical (layoutalg) text
    elem_bits: Optional[int] = None
    dynamic: Tuple[str, ...] = ()
    divisibility: Tuple[Optional[int], ...] = ()


def canonical(text: str) -> Dialect:
    """Rewrite CuTe C++ / CuTe DSL / FlyDSL printed text into layoutalg's grammar."""
    if not isinstance(text, str):
        raise ParseError(f"parse expects a string, got {type(text).__name__}")
    t = text.strip()
    name = "layoutalg"
    elem_bits = None
    m = _FLY_WRAP.match(t)
    if m:
        t, name = m.group(2).strip(), "flydsl"
    else:
        m = _LAYOUT_WRAP.match(t)
        if m:
            t, name = m.group(1).strip(), "flydsl"
    m = _SMEM_PREFIX.match(t)
    if m:                                     # a printed tensor: keep its layout
        t, name, elem_bits = t[m.end():], "cute-c++", int(m.group(1))
    m = _SMEM_MIDDLE.search(t)
    if m:
        t, elem_bits = _smem_swizzle(t, m, text), int(m.group(4))
        name = "cute-c++"
    if "smem_ptr" in t:
        raise ParseError(f"cannot parse {text!r}: a CuTe smem_ptr is read only as a tensor's "
                         "prefix ('smem_ptr[16b](...) o LAYOUT') or as a swizzle's offset "
                         "('Sw<B,M,S> o smem_ptr[16b](unset) o LAYOUT')")
    if _DSL_SWIZZLE.search(t):
        t = _DSL_SWIZZLE.sub("Sw<", t)
        if name == "layoutalg":
            name = "cute-dsl"
    dyn, divs = [], []

    def sym(mm: "re.Match[str]") -> str:
        dyn.append(f"dyn{len(dyn)}")
        div = re.search(r"div\s*=\s*(\d+)", mm.group(1) or "")
        divs.append(int(div.group(1)) if div else None)
        return dyn[-1]
    if "?" in t:
        t = _DYNAMIC.sub(sym, t)
        if name == "layoutalg":
            name = "cute-dsl"
    if name == "layoutalg" and _STATIC.search(t):
        name = "cute-c++"
    t = _STATIC_NEG.sub(r"\1", t)              # CuTe prints Int<-1> as _-1
    return Dialect(name, t, elem_bits, tuple(dyn), tuple(divs))


def _smem_swizzle(t: str, m: "re.Match[str]", text: str) -> str:
    b, base, shift, bits = (int(m.group(i)) for i in range(1, 5))
    if bits % 8 or bits & (bits - 1):
        raise ParseError(f"cannot parse {text!r}: smem_ptr[{bits}b] elements are not a "
                         "power-of-two number of bytes, so the byte swizzle has no element form")
    lg = (bits // 8).bit_length() - 1
    if base < lg:
        raise ParseError(f"cannot parse {text!r}: Sw<{b},{base},{shift}> on byte addresses "
                         f"splits a {bits}-bit element (base {base} < log2({bits // 8}))")
    return t[:m.start()] + f"Sw<{b},{base - lg},{shift}> o 0 o" + t[m.end():]


def read(text: str) -> Tuple[Any, Dialect]:
    """Parse ``text`` in any dialect; return ``(value, dialect)``."""
    from .parse import parse
    d = canonical(text)
    return parse(d.text), d


def format_as(obj: Any, dialect: str = "layoutalg") -> str:
    """Print a Layout / Swizzle / ComposedLayout / IntTuple as ``dialect`` prints it.

    cute-c++ marks every integer static (``_8``), as CuTe prints ``Int<8>``; cute-dsl and flydsl
    print ``S<B,M,S>`` and ``?`` for symbols; flydsl wraps the value in its ``!fly.<type><...>``.
    """
    from .layout import Layout
    from .swizzle import ComposedLayout, Swizzle
    if dialect not in DIALECTS:
        raise ParseError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    from .inttuple import fmt
    s = str(obj) if isinstance(obj, (Layout, Swizzle, ComposedLayout)) else fmt(obj)
    if dialect == "layoutalg":
        return s
    if dialect == "cute-c++":
        parts = re.split(r"(Sw<[^>]*>)", s)       # CuTe prints a swizzle's B,M,S bare
        return "".join(p if p.startswith("Sw<") else
                       re.sub(r"(?<![A-Za-z0-9_])(-?\d+)", r"_\1", p) for p in parts)
    s = re.sub(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9_]*(?![A-Za-z0-9_<])",
               lambda mm: mm.group(0) if mm.group(0) == "o" else "?", s)
    s = s.replace("Sw<", "S<")
    if dialect == "flydsl":
        kind = ("composed_layout" if isinstance(obj, ComposedLayout) else "layout"
                if isinstance(obj, Layout) else "swizzle" if isinstance(obj, Swizzle)
                else "int_tuple")
        return f"!fly.{kind}<{s}>"
    return s
