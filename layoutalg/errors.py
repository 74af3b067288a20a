"""The `LayoutError` family: every refusal of the algebra is one of these.

Each error says what was wrong and, where it can, what would have been valid. They derive from
`ValueError` so generic callers that catch bad values keep working.
"""

from __future__ import annotations


class LayoutError(ValueError):
    """Base class of every error raised by :mod:`layoutalg`."""


class LimitError(LayoutError):
    """An input beyond a stated limit (nesting depth, number of elements to enumerate)."""


class ShapeError(LayoutError):
    """A shape, stride or coordinate is malformed (non-congruent, non-positive, not an integer)."""


class ArgumentError(ShapeError, TypeError):
    """A public function got an argument of the wrong kind (None, a string, a float, ...).

    A ShapeError (the algebra's error for malformed input) and a TypeError (so callers that
    catch wrong-type arguments the Python way keep working).
    """


class ParseError(LayoutError):
    """Text could not be parsed as CuTe layout syntax."""


class DivisibilityError(LayoutError):
    """An operation is not defined because a divisibility condition fails.

    CuTe calls these the *stride* and *shape divisibility conditions*; where CuTe's own check is
    weaker than the real condition we still refuse, because the result would not be the operation.
    """


class CompositionError(DivisibilityError):
    """``A o B`` is not a layout: B's image does not respect A's mode boundaries."""


class ComplementError(DivisibilityError):
    """The complement does not exist (the layout is not injective or its strides do not nest)."""


class InverseError(DivisibilityError):
    """No (left/right) inverse of the requested kind exists."""


class SymbolicError(LayoutError):
    """A condition on symbolic (runtime) values could not be decided."""
