"""The rule table: which named check a kernel gets, from the features of its spec.

Every check the verifier can run is one :class:`Rule` in :data:`RULES`, in report order.  A rule
says which features of a :class:`~kernels.verify.spec.KernelSpec` call for it
(:meth:`KernelSpec.features`): an empty ``needs`` means every kernel; otherwise any one of the
listed features.  :func:`checks_for` is the list a kernel's report has: the same names, in the
same order, for the same kernel, whichever engine evaluated them.

``stage`` says when a rule runs: ``ir`` rules are proven on the IR before printing (by the
engine the spec's domain selects, :func:`kernels.verify.verifier.verify`), ``printed`` rules on
the printed source (:func:`kernels.verify.printed.attach_printed_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

from .spec import KernelSpec

__all__ = ["Rule", "RULES", "checks_for"]


@dataclass(frozen=True)
class Rule:
    """One named check: the spec features that call for it (any of them; empty: every
    kernel), when it runs, and what it proves."""

    needs: FrozenSet[str]
    stage: str
    proves: str

    def applies(self, features: FrozenSet[str]) -> bool:
        return not self.needs or bool(self.needs & features)


def _r(needs: Tuple[str, ...], proves: str, stage: str = "ir") -> Rule:
    return Rule(frozenset(needs), stage, proves)


_ANY: Tuple[str, ...] = ()
_SOFTMAX = ("online_softmax", "split_merge")

RULES: Dict[str, Rule] = {
    "emitted_index_math": _r(_ANY, "every printed offset equals its layout at the access's "
                                   "coordinates, element by element"),
    "in_bounds": _r(_ANY, "predicated-on elements lie in their tensor / LDS array; a predicated "
                          "load is on exactly when its whole vector is in range"),
    "vector_widths": _r(_ANY, "every vector access is aligned to its width"),
    "bank_conflicts_lds_read": _r(_ANY, "LDS reads are conflict-free under the target's "
                                        "phase model"),
    "bank_conflicts_lds_write": _r(_ANY, "LDS writes are conflict-free under the target's "
                                         "phase model"),
    "coverage": _r(_ANY, "every element of every output is stored exactly once over the grid"),
    "lds_capacity": _r(_ANY, "the LDS arrays fit the target"),
    "block_independence": _r(("heads",), "the (batch, head) symbols enter only global "
                                         "coordinates: blocks differ only in what they address"),
    "lane_mfma_operands": _r(("contraction", "heads"),
                             "each MFMA multiplies the operand elements its contraction pairs "
                             "(equal reduced index per slot, rows / columns of one element), "
                             "and operands are read at the thread's (batch, head)"),
    "cross_lane_reductions": _r(_SOFTMAX, "lane exchanges combine lanes of the same row, "
                                          "disjoint key sets"),
    "online_softmax": _r(_SOFTMAX, "exponents subtract a running max of their own row; "
                                   "rescaling and normalisation by the matching max / sum"),
    "masking_and_tile_skipping": _r(_SOFTMAX, "each row accumulates exactly its visible keys"),
    "lane_accumulator_writeback": _r(("contraction", "heads"),
                                     "each stored accumulator holds its own output element, "
                                     "summed over the whole reduction once"),
    "lds_races": _r(_ANY, "no LDS element is read and written by different threads without a "
                          "barrier between; nothing reads unwritten LDS"),
    "barrier_balance": _r(("wave_roles",), "every wave passes the same number of barriers on "
                                           "every path; no barrier under a lane-divergent "
                                           "branch"),
    "wave_role_schedule": _r(("wave_roles",), "each wave phase is MFMA or softmax, never both; "
                                              "a group's waves play one role per phase; no two "
                                              "groups run MFMAs in one phase; MFMAs under "
                                              "s_setprio >= 1, softmax under 0"),
    "wave_row_ownership": _r(("wave_roles",), "each wave stores exactly the output rows whose "
                                              "queries it loaded; no query row on two waves"),
    "lds_phase_races": _r(("wave_roles",), "LDS accesses of different waves to one element, one "
                                           "a write, are in different per-wave phases, ordered "
                                           "as the program orders them"),
    "split_partition": _r(("split_partition",), "the partials' key sets partition the keys of "
                                                "each (batch, head)"),
    "reduction_reads_partials": _r(("split_merge",), "every output merges each split's partials "
                                                     "of its own (batch, head) exactly once"),
    "mbarrier_protocol": _r(("warpgroup_roles",),
                            "every mbarrier wait completes on every schedule; arrivals and "
                            "expect_tx bytes balance each phase; each wait observes the next "
                            "phase (parity); barriers initialised and fenced before the roles"),
    "register_budget": _r(("warpgroup_roles",), "each warpgroup's one setmaxnreg is its role's "
                                                "first statement, a multiple of 8 in 24..256; "
                                                "the roles fit the 64K register file"),
    "ticket_parts": _r(("ticket",), "the kernels whose statements a ticket kernel runs pass "
                                    "the one verifier, each against its own spec and text"),
    "ticket_structure": _r(("ticket",), "partial stores, fence, barrier, ticket, barrier, then "
                                        "the last arrival's branch (fence, merge, one reset at "
                                        "the ticket's slot)"),
    "ticket_single_thread": _r(("ticket",), "the ticket and the reset are done by exactly one "
                                            "thread of a block"),
    "counter_slots": _r(("ticket",), "the blocks of a group share one counter slot, groups "
                                     "never do, slots lie in the counter buffer"),
    "arrival_orders": _r(("ticket",), "over every arrival order and two launches the branch "
                                      "runs once, after all tickets; the counter ends at 0"),
    "merge_reads_partials": _r(("ticket",), "the last arrival stores each output element once, "
                                            "reading every split's partial of it once, written "
                                            "by its own group"),
    "printed_source": _r(_ANY, "the printed text's statements and index expressions are the "
                               "IR's, evaluated with C semantics", "printed"),
    "declarations": _r(_ANY, "printed LDS arrays, vector types and parameters match the IR",
                       "printed"),
    "index_ranges": _r(_ANY, "every printed integer expression fits its C type over its "
                             "symbols' ranges", "printed"),
    "printed_ticket": _r(("ticket",), "the printed ticket, branch and reset equal the IR's; the "
                                      "text holds the verified parts' lines", "printed"),
}

# a ticket kernel is the composition of its parts (each verified with every rule its own spec
# calls for) and its ticket: its own checks are the ticket's
_COMPOSITE = "ticket"


def checks_for(spec: KernelSpec, stage: str = "ir") -> Tuple[str, ...]:
    """The names of the checks ``spec`` calls for at ``stage``, in report order."""
    feats = spec.features()
    if _COMPOSITE in feats:
        return tuple(n for n, r in RULES.items() if r.stage == stage and _COMPOSITE in r.needs)
    return tuple(n for n, r in RULES.items() if r.stage == stage and r.applies(feats))
