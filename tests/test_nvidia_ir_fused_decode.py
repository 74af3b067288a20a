"""The one-launch IR split-KV decode (kernels/nvidia/decode_fused_ir.py) and the ticket rules
(kernels/verify/ticket_rules.py), all run by the one verifier (``verify(ir, source=...)``) from
the kernel's spec (a TicketProtocol): the built kernel passes, and each rule refuses a planted
bug by name through ``verify`` (fences, barriers, the ticket's thread, counter slots, the last
test, the reset, what the last block reads and stores), as does the printed-text read-back
(``printed_ticket``); ticket statements under a spec without the protocol are refused."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.attention import runtime_symbol as R
from kernels.ir.core import Access, Barrier, Let, Loop, sym, walk
from kernels.ir.ticket import AtomicTicket, CounterReset, LastArrival, ThreadFence
from kernels.nvidia.decode_fused_ir import (build_decode_fused_ir, fused_instances,
                                            verify_fused)
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.spec import SpecError
from kernels.verify.ticket_rules import TICKET_RULES
from kernels.verify.verifier import verify

CFG = MmaDecodeConfig(head_dim=64, hg=4)


def _k():
    return build_decode_fused_ir(CFG)


def _at(k, kind):
    return next(i for i, s in enumerate(k.body) if isinstance(s, kind))


def _branch(k):
    return k.body[_at(k, LastArrival)]


def _merge(k):
    return next(s for s in _branch(k).body if isinstance(s, Loop))


def _refused(k, rule, text="", source=None):
    """``verify`` refuses ``k`` by the check ``rule``, its counterexample holding ``text``."""
    rep = verify(k, source=source)
    assert not rep.holds
    got = rep.checks[rule]
    assert not got.holds, {c: r.counterexample for c, r in rep.checks.items() if not r.holds}
    assert text in str(got.counterexample), got.counterexample


def test_built_kernel_passes_every_rule_and_its_text():
    k = _k()
    src = emit_cuda_attention(k)
    got = verify_fused(k, src)
    assert got["ticket"]["instances"] == 4
    assert got["ticket"]["orders"] > 100          # every order of 3, 4 and 5 arrivals (and 1)
    assert got["split"].holds and got["combine"].holds
    rep = got["report"]                           # the one verifier ran every ticket check
    assert tuple(rep.checks) == ("ticket_parts",) + TICKET_RULES + ("printed_ticket",)
    assert rep.holds and rep.details["ticket"]["instances"] == len(fused_instances(CFG))
    assert "atomicAdd(&CNT[block_bh], 1);" in src and "lg_ldcg_f32x4(" in src
    assert "lg_ldg_f32x4(" not in src.split("s_ticket")[1]    # the merge reads from L2


def test_merge_statements_are_the_combine_kernels():
    from kernels.nvidia.decode_mma_ir import build_decode_combine_ir
    comb = [s for s in walk(build_decode_combine_ir(CFG).body) if isinstance(s, Access)
            and s.kind == "load"]
    mine = [s for s in walk(_merge(_k()).body) if isinstance(s, Access) and s.kind == "load"]
    assert [(a.buf, a.offset, a.width) for a in mine] == [(a.buf, a.offset, a.width)
                                                          for a in comb]


def test_no_fence_before_the_ticket_is_refused():
    k = _k()
    del k.body[_at(k, ThreadFence)]
    _refused(k, "ticket_structure", "__threadfence")


def test_no_barrier_between_fence_and_ticket_is_refused():
    k = _k()
    del k.body[_at(k, ThreadFence) + 1]
    _refused(k, "ticket_structure", "barrier between the fence and the ticket")


def test_no_barrier_before_the_branch_is_refused():
    k = _k()
    del k.body[_at(k, AtomicTicket) + 1]
    _refused(k, "ticket_structure", "before it is written")


def test_partial_store_after_the_ticket_is_refused():
    k = _k()
    i = max(j for j, s in enumerate(k.body) if any(isinstance(a, Access) and a.kind == "store"
                                                   and a.buf == "Op" for a in walk([s])))
    st = k.body.pop(i)
    k.body.insert(_at(k, AtomicTicket) + 1, st)
    _refused(k, "ticket_structure", "after the ticket")


def test_ticket_by_every_thread_is_refused():
    k = _k()
    k.body[_at(k, AtomicTicket)].pred = sympy.true
    _refused(k, "ticket_single_thread", "ticket")


def test_counter_slot_per_split_is_refused():
    k = _k()
    slot = sym("block_bh") * R("n_splits") + sym("split")
    k.body[_at(k, AtomicTicket)].slot = slot
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).slot = slot
    _refused(k, "counter_slots", "not one")


def test_groups_sharing_a_counter_are_refused():
    k = _k()
    k.body[_at(k, AtomicTicket)].slot = sympy.Integer(0)
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).slot = sympy.Integer(0)
    _refused(k, "counter_slots", "share")


@pytest.mark.parametrize("last", [R("n_splits"), sympy.Integer(0)])
def test_wrong_last_test_is_refused(last):
    k = _k()
    i = _at(k, LastArrival)
    k.body[i] = LastArrival("s_ticket", last, k.body[i].body)
    _refused(k, "arrival_orders")


def test_missing_reset_is_refused():
    k = _k()
    b = _branch(k)
    b.body = [s for s in b.body if not isinstance(s, CounterReset)]
    _refused(k, "ticket_structure", "counter resets")


def test_reset_by_every_block_is_refused():
    k = _k()
    b = _branch(k)
    r = next(s for s in b.body if isinstance(s, CounterReset))
    b.body.remove(r)
    k.body.append(r)
    _refused(k, "ticket_structure", "counter resets")


def test_reset_of_another_slot_is_refused():
    k = _k()
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).slot = sym("block_bh") + 1
    _refused(k, "ticket_structure", "the reset zeroes")


def test_merge_outside_the_branch_is_refused():
    k = _k()
    m = _merge(k)
    _branch(k).body.remove(m)
    k.body.append(m)
    _refused(k, "ticket_structure", "outside the last arrival's branch")


def test_no_fence_in_the_branch_is_refused():
    k = _k()
    b = _branch(k)
    b.body = [s for s in b.body if not isinstance(s, ThreadFence)]
    _refused(k, "ticket_structure", "first partial read")


def test_merge_skipping_the_last_split_is_refused():
    k = _k()
    for s in walk(_merge(k).body):
        if isinstance(s, Loop) and s.var == "s":
            s.stop = R("n_splits") - 1
            break
    _refused(k, "merge_reads_partials", "not each of the")


def test_merge_reading_another_groups_rows_is_refused():
    k = _k()
    m = _merge(k)
    i = next(j for j, s in enumerate(m.body) if isinstance(s, Let) and s.name == "h")
    m.body[i] = Let("h", sym("h0") + sym("frc") + CFG.hg)
    _refused(k, "merge_reads_partials", "no ticket of this group")


def test_output_stored_twice_is_refused():
    k = _k()
    st = next(s for s in walk(_merge(k).body) if isinstance(s, Access) and s.buf == "O")
    st.pred = sympy.true
    _refused(k, "merge_reads_partials")


def test_printed_slot_other_than_the_irs_is_refused():
    k = _k()
    src = emit_cuda_attention(k).replace("atomicAdd(&CNT[block_bh], 1)",
                                         "atomicAdd(&CNT[block_bh + 1], 1)")
    _refused(k, "printed_ticket", "printed slot", source=src)


def test_printed_body_other_than_the_verified_split_kernels_is_refused():
    k = _k()
    src = emit_cuda_attention(k)
    line = next(ln for ln in src.splitlines() if "lg_ldg16x8(&" in ln)
    src = src.replace(line, line.replace("lg_ldg16x8(", "lg_ldg16x8( "), 1)
    _refused(k, "printed_ticket", "verified split kernel", source=src)


def test_printed_barrier_missing_after_the_fence_is_refused():
    k = _k()
    src = emit_cuda_attention(k).replace("__threadfence();\n  __syncthreads();",
                                         "__threadfence();", 1)
    _refused(k, "printed_ticket", "fence and a barrier", source=src)


def test_ticket_kernel_whose_spec_drops_the_protocol_is_refused():
    """The ticket statements without a TicketProtocol in the spec: verify() refuses the kernel
    (the ticket rules cannot be skipped by leaving the protocol out)."""
    import dataclasses
    k = _k()
    k.spec = dataclasses.replace(k.spec, ticket=None)
    with pytest.raises(SpecError, match="declares no ticket protocol"):
        verify(k)


def test_split_kernel_given_a_ticket_is_refused():
    """A ticket statement added to a kernel whose spec never declared one (the split kernel)."""
    k = _k().meta["split"]
    k.body.append(ThreadFence())
    with pytest.raises(SpecError, match="ThreadFence"):
        verify(k)


def test_counter_other_than_the_specs_is_refused():
    k = _k()
    k.body[_at(k, AtomicTicket)].counter = "CNT2"
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).counter = "CNT2"
    _refused(k, "ticket_structure", "the spec's counter is 'CNT'")


def test_part_failing_its_own_check_is_refused_by_ticket_parts():
    """A planted bug in the split part (its shared statements): ticket_parts names it."""
    k = _k()
    split = k.meta["split"]
    i = next(j for j, s in enumerate(split.body) if isinstance(s, Barrier))
    del split.body[i]
    _refused(k, "ticket_parts", "does not begin with the split kernel's statements")
    del k.body[i]                               # the fused kernel runs the same bug
    _refused(k, "ticket_parts", "split.lds_races")


def test_a_later_rules_failure_never_reports_an_earlier_per_instance_rule_holding():
    k = _k()
    k.body[_at(k, AtomicTicket)].slot = sympy.Integer(0)
    next(s for s in walk(k.body) if isinstance(s, CounterReset)).slot = sympy.Integer(0)
    rep = verify(k)
    assert rep.checks["ticket_structure"].holds
    assert not rep.checks["ticket_single_thread"].holds
    assert "not evaluated" in str(rep.checks["ticket_single_thread"].counterexample)
