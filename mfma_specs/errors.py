"""Errors raised by :mod:`mfma_specs`.

Every error derives from :class:`layoutalg.errors.LayoutError` (itself a ``ValueError``) so the
CLI maps it to exit code 2, and every message says what was wrong and what would be valid.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from layoutalg.errors import LayoutError

__all__ = [
    "MfmaSpecError", "UnknownTargetError", "UnknownInstructionError", "OperandError",
    "LaneItemError", "UnsupportedDtypeError", "NotModelledError", "SelectionError",
    "ResourceError",
    "close_matches",
]


class MfmaSpecError(LayoutError):
    """Base class of every :mod:`mfma_specs` error."""


class UnknownTargetError(MfmaSpecError):
    """An arch name, or an LDS instruction, this model does not know."""


class UnknownInstructionError(MfmaSpecError):
    """An instruction mnemonic that does not exist on the requested target."""


class OperandError(MfmaSpecError):
    """An operand name that is not one of the instruction's operands (A, B, C, D, K)."""


class LaneItemError(MfmaSpecError):
    """A lane or item (register slot) index outside the operand's range."""


class UnsupportedDtypeError(MfmaSpecError):
    """A dtype name that is unknown, or a dtype combination no matrix instruction supports."""


class NotModelledError(MfmaSpecError):
    """A fact this library deliberately does not model (it says so rather than guessing)."""


class SelectionError(MfmaSpecError):
    """Bad arguments to the instruction-selection helpers (shapes, warps, nonkdim)."""


class ResourceError(MfmaSpecError):
    """Register, LDS or work-group sizes outside what the target allows."""


def close_matches(word: object, candidates: Iterable[str], n: int = 3,
                  cutoff: float = 0.6) -> str:
    """`` (did you mean a, b?)`` for the closest ``candidates`` to ``word``, else ``""``."""
    cands = list(candidates)
    close = difflib.get_close_matches(str(word).lower(), cands, n=n, cutoff=cutoff)
    return f" (did you mean {', '.join(close)}?)" if close else ""
