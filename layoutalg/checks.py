"""Argument checks at the public boundary: a wrong kind of argument is an :class:`ArgumentError`
that names the function, the parameter, what it got and what would be valid.

The checks are a type test on the fast path (``type(x) is Layout``) and only build messages on
failure, so the algebra's hot paths stay fast.
"""

from __future__ import annotations

from typing import Any, Optional

from .errors import ArgumentError, LimitError

__all__ = ["require_layout", "require_any_layout", "require_int", "MAX_DEPTH", "check_depth",
           "register_layout_type", "layout_kind"]

# The checks sit below every module of the algebra and import none of them (no import cycle):
# the layout types register themselves here when their modules load (layout.py, swizzle.py).
_LAYOUT_TYPES: dict = {}


def register_layout_type(name: str, cls: type) -> None:
    """Called by :mod:`layoutalg.layout` (``"Layout"``) and :mod:`layoutalg.swizzle`
    (``"ComposedLayout"``) as they load."""
    _LAYOUT_TYPES[name] = cls


def layout_kind(x: Any) -> Optional[str]:
    """``"Layout"`` or ``"ComposedLayout"`` when ``x`` is an instance of that registered type,
    else None: how a module below the layout types (enumerate) dispatches on them."""
    for name, cls in _LAYOUT_TYPES.items():
        if isinstance(x, cls):
            return name
    return None

#: deepest nesting of an IntTuple / layout text accepted (CuTe layouts are a few levels deep;
#: the limit keeps every recursive walk far from Python's recursion limit)
MAX_DEPTH = 64


def _got(x: Any) -> str:
    r = repr(x)
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{r} ({type(x).__name__})"


def require_layout(x: Any, fn: str, param: str = "layout") -> None:
    """``x`` must be a :class:`Layout` (not a ComposedLayout)."""
    if not isinstance(x, _LAYOUT_TYPES["Layout"]):
        raise ArgumentError(f"{fn}: {param} must be a Layout, got {_got(x)}; build one with "
                            "Layout(shape, stride) or parse('(4,2):(1,4)')")


def require_any_layout(x: Any, fn: str, param: str = "layout") -> None:
    """``x`` must be a :class:`Layout` or a :class:`ComposedLayout`."""
    if not isinstance(x, tuple(_LAYOUT_TYPES.values())):
        raise ArgumentError(f"{fn}: {param} must be a Layout or a ComposedLayout, got "
                            f"{_got(x)}; build one with Layout(shape, stride) or "
                            "parse('Sw<3,3,3> o 0 o (8,64):(64,1)')")


def require_int(x: Any, fn: str, param: str, lo: int = 1) -> int:
    """``x`` must be a Python/numpy integer (not a bool) ``>= lo``; returns it as an int."""
    import numbers
    want = "a positive int" if lo == 1 else f"an int >= {lo}"
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise ArgumentError(f"{fn}: {param} must be {want}, got {_got(x)}")
    x = int(x)
    if x < lo:
        from .errors import ShapeError
        raise ShapeError(f"{fn}: {param} must be {want}, got {x}")
    return x


def check_depth(t: Any, what: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` before any recursive walk (iteratively)."""
    stack = [(t, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (tuple, list)):
            if d >= MAX_DEPTH:
                raise LimitError(f"{what} is nested more than {MAX_DEPTH} levels deep; "
                                 f"layouts are at most {MAX_DEPTH} levels deep")
            stack.extend((e, d + 1) for e in x)
