"""The mutation catalogue's entries for the ticket checks (tests/test_mutation_catalogue.py is
at the line limit): the registry :data:`TICKET_CASES` names one planted bug per case and the
check of the one verifier that must refuse it; every rule of :data:`kernels.verify.rules.RULES`
that a ticket protocol calls for has at least one case (a new ticket rule without a planted
bug fails :func:`test_every_ticket_check_has_a_planted_bug`).

Each bug is planted in the fused split-KV decode (kernels/nvidia/decode_fused_ir.py) - its IR
or its printed text - and refused by ``verify(ir, source=...)`` by name (tests/_planted.py: a bug
in the IR is printed with it, a text bug planted in that print)."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.core import Barrier, walk
from kernels.ir.ticket import AtomicTicket, CounterReset, LastArrival, ThreadFence
from kernels.nvidia.decode_fused_ir import build_decode_fused_ir
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.rules import RULES, checks_for

from _planted import assert_case_refused

CFG = MmaDecodeConfig(head_dim=64, hg=4)


def _top(k, kind):
    return next(i for i, s in enumerate(k.body) if isinstance(s, kind))


def _fence_dropped(k):
    del k.body[_top(k, ThreadFence)]


def _ticket_by_every_thread(k):
    k.body[_top(k, AtomicTicket)].pred = sympy.true


def _groups_share_slot(k):
    k.body[_top(k, AtomicTicket)].slot = sympy.Integer(0)
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).slot = sympy.Integer(0)


def _last_test_off_by_one(k):
    i = _top(k, LastArrival)
    k.body[i] = LastArrival("s_ticket", k.body[i].last - 1, k.body[i].body)


def _output_stored_twice(k):
    st = next(s for s in walk(k.body[_top(k, LastArrival)].body)
              if getattr(s, "buf", None) == "O" and s.kind == "store")
    st.pred = sympy.true


def _split_part_barrier_dropped(k):
    split = k.meta["split"]
    i = next(j for j, s in enumerate(split.body) if isinstance(s, Barrier))
    del split.body[i]
    del k.body[i]


def _printed_slot(src):
    return src.replace("atomicAdd(&CNT[block_bh], 1)", "atomicAdd(&CNT[block_bh + 1], 1)")


# (case, check that refuses it, IR mutation or None, text mutation or None)
TICKET_CASES = [
    ("ticket-no-fence-before-ticket", "ticket_structure", _fence_dropped, None),
    ("ticket-by-every-thread", "ticket_single_thread", _ticket_by_every_thread, None),
    ("ticket-groups-share-slot", "counter_slots", _groups_share_slot, None),
    ("ticket-last-test-off-by-one", "arrival_orders", _last_test_off_by_one, None),
    ("ticket-output-stored-twice", "merge_reads_partials", _output_stored_twice, None),
    ("ticket-split-part-barrier-dropped", "ticket_parts", _split_part_barrier_dropped, None),
    ("ticket-printed-slot", "printed_ticket", None, _printed_slot),
]


def test_every_ticket_check_has_a_planted_bug():
    spec = build_decode_fused_ir(CFG).spec
    want = set(checks_for(spec, "ir") + checks_for(spec, "printed"))
    assert want == {n for n, r in RULES.items() if "ticket" in r.needs}
    assert {c[1] for c in TICKET_CASES} == want
    assert len({c[0] for c in TICKET_CASES}) == len(TICKET_CASES)


@pytest.mark.parametrize("case, check, ir_bug, text_bug", TICKET_CASES,
                         ids=[c[0] for c in TICKET_CASES])
def test_ticket_planted_bug_is_refused_by_its_check(case, check, ir_bug, text_bug):
    assert_case_refused(case, lambda: build_decode_fused_ir(CFG), emit_cuda_attention, check,
                        ir_bug, text_bug, arch=CFG.arch)
