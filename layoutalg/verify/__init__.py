"""layoutalg.verify: proofs of layout properties (bank conflicts, coverage, vectors, lanes).

Every check returns a :class:`CheckResult` saying what was proved (``holds``), by which
``method`` ("exhaustive", "f2" or "sympy") and over which ``domain``, with a concrete
``counterexample`` when it fails.  See docs/VERIFY.md.
"""

from .model import LdsModel
from .result import (CheckResult, VerifyError, AccessError, VerificationFailed, VerifierBug,
                     METHODS)
from .banks import bank_conflicts, BankResult, BankCounterexample
from .f2proof import F2BankProof
from .symbolic import ParamSet, SymbolicBankResult

__all__ = ["LdsModel", "CheckResult", "VerifyError", "AccessError", "VerificationFailed",
           "VerifierBug", "METHODS", "bank_conflicts", "BankResult", "BankCounterexample",
           "F2BankProof", "ParamSet", "SymbolicBankResult"]
