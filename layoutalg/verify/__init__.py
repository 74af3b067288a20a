"""layoutalg.verify: proofs of layout properties (bank conflicts, coverage, vectors, lanes).

Every check returns a :class:`CheckResult` saying what was proved (``holds``), by which
``method`` ("exhaustive", "f2" or "sympy") and over which ``domain``, with a concrete
``counterexample`` when it fails.  See docs/VERIFY.md.

>>> import layoutalg as la
>>> import mfma_specs                  # registers the LDS phase tables (arch= / instruction=)
>>> from layoutalg.verify import bank_conflicts
>>> r = bank_conflicts(la.Layout(((16, 4), 4), ((132, 4), 1)), instruction="ds_read_b64")
>>> r.holds, r.max_ways, r.method
(True, 1, 'exhaustive')
"""

from .model import LdsModel
from .result import (CheckResult, VerifyError, AccessError, VerificationFailed, VerifierBug,
                     METHODS)
from .banks import bank_conflicts, BankResult, BankCounterexample
from .f2proof import F2BankProof, prove_banks_f2
from .symbolic import ParamSet, SymbolicBankResult
from .vectorize import vector_width, VectorResult, VectorCounterexample
from .coverage import (coverage, CoverageResult, CoverageCounterexample, in_bounds,
                       BoundsResult)
from .lanes import lane_correctness, LaneResult, LaneMismatch
from .search import (suggest_padding, suggest_swizzle, PaddingSuggestion, SwizzleSuggestion,
                     swizzle_from_triton)

__all__ = [
    "LdsModel", "CheckResult", "VerifyError", "AccessError", "VerificationFailed",
    "VerifierBug", "METHODS",
    "bank_conflicts", "BankResult", "BankCounterexample", "F2BankProof", "prove_banks_f2",
    "ParamSet", "SymbolicBankResult",
    "vector_width", "VectorResult", "VectorCounterexample",
    "coverage", "CoverageResult", "CoverageCounterexample", "in_bounds", "BoundsResult",
    "lane_correctness", "LaneResult", "LaneMismatch",
    "suggest_padding", "suggest_swizzle", "PaddingSuggestion", "SwizzleSuggestion",
    "swizzle_from_triton",
]
