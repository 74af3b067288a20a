"""What every verifier check returns: a statement, the method that proved it, and its domain.

A :class:`CheckResult` is a small frozen record:

* ``holds``  - the verdict (``True``: the property was *proved* over ``domain``);
* ``method`` - how: ``"exhaustive"`` (every point of a finite domain was evaluated),
  ``"f2"`` (linear algebra over GF(2) on the binary view of the layout) or ``"sympy"``
  (a symbolic argument over a parameter, with the finitely many cases it reduces to evaluated);
* ``domain`` - in words, what was covered (lanes, values, issues, parameter ranges, alignments);
* ``counterexample`` - when ``holds`` is False, a concrete witness (or None).

Truth-testing a result (``if result:``) raises: a result object is always truthy in Python,
and an ``if`` that silently passes on a failed proof is exactly the bug this package must not
have.  Use ``result.holds`` or ``result.assert_holds()``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from ..errors import LayoutError

__all__ = ["METHODS", "CheckResult", "VerifyError", "AccessError", "VerificationFailed",
           "VerifierBug"]

METHODS = ("exhaustive", "f2", "sympy")


class VerifyError(LayoutError):
    """Bad input to a verifier check (the check could not be posed)."""


class AccessError(VerifyError):
    """The access cannot be the instruction it claims to be (shape, vector, lane count...)."""


class VerificationFailed(VerifyError):
    """Raised by :meth:`CheckResult.assert_holds` when the property does not hold."""

    def __init__(self, result: "CheckResult") -> None:
        super().__init__(str(result))
        self.result = result


class VerifierBug(RuntimeError):
    """Two independent methods disagreed: a bug in the verifier itself, never a user error."""


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """Base record of a proof (or refutation) of one property."""

    check: str                       # the property, e.g. "bank-conflict freedom"
    holds: bool
    method: str                      # one of METHODS
    domain: str                      # what was covered, in words
    counterexample: Optional[Any] = None
    notes: Tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise VerifierBug(f"unknown proof method {self.method!r}")
        if not isinstance(self.holds, bool):
            raise VerifierBug(f"holds must be a bool, got {self.holds!r}")
        if not self.holds and self.counterexample is None and not self._may_fail_silently():
            raise VerifierBug(f"{self.check}: a failed check must carry a counterexample")

    def _may_fail_silently(self) -> bool:
        """Subclasses whose failure is fully described by other fields override this."""
        return False

    def __bool__(self) -> bool:
        raise TypeError(f"truth value of a {type(self).__name__} is ambiguous; use .holds "
                        "(or .assert_holds())")

    def assert_holds(self) -> "CheckResult":
        """Return self if the property holds, else raise :class:`VerificationFailed`."""
        if not self.holds:
            raise VerificationFailed(self)
        return self

    # ---- presentation --------------------------------------------------------------------
    def summary(self) -> str:
        """One line: the verdict and the headline numbers (subclasses extend)."""
        return f"{self.check}: {'HOLDS' if self.holds else 'FAILS'}"

    def details(self) -> Tuple[str, ...]:
        """Extra lines shown by ``str`` (subclasses extend)."""
        return ()

    def __str__(self) -> str:
        lines = [self.summary(), f"  method: {self.method}", f"  domain: {self.domain}"]
        lines += ["  " + d for d in self.details()]
        if self.counterexample is not None and not self.holds:
            cex = str(self.counterexample).splitlines()
            lines.append("  counterexample: " + cex[0])
            lines += ["    " + c for c in cex[1:]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.holds else "#cf222e"
        body = html.escape(str(self)).replace("\n", "<br>")
        out = (f"<div style='font-family:monospace;border-left:4px solid {color};"
               f"padding-left:6px'>{body}</div>")
        d = self._diagram()
        return out + d._repr_html_() if d is not None else out

    def _diagram(self) -> Any:
        """A diagram of the result for notebooks (subclasses that have one override)."""
        return None

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's text view: the verdict, not a dataclass dump of the arrays."""
        p.text(str(self))

    def __init_subclass__(cls, **kw: Any) -> None:
        # IPython's printer takes a class's own __repr__ (each dataclass subclass generates
        # one) before an inherited _repr_pretty_: put ours on every subclass too
        super().__init_subclass__(**kw)
        cls._repr_pretty_ = CheckResult._repr_pretty_
