"""The one-launch split-K of the IR-built TMA GEMM (``TmaGemmConfig(split_k=True,
reduce="inline")``, :mod:`kernels.nvidia.wgmma_tma_ir_split`) on the per-role model with the
ticket rules (:mod:`kernels.verify.gate_tma_ticket`).

The registry :data:`SPLIT_BUGS` plants one bug per ticket rule and per new model rule (the
fence, the barrier, the ticket's thread, the reset, the slots, the last test, the merge's
order and planes, the partial stores' plane and place) and in the printed text; each must be
refused by its named check (a new ticket rule without a planted bug fails
:func:`test_every_ticket_rule_has_a_planted_bug`)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from kernels.ir.core import Access, If, Loop, sym, walk
from kernels.ir.nvidia_tma import NamedBarrier, RoleBranch
from kernels.ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import (build_tma_gemm_ir, default_instances, ir_form_refusal,
                                         ir_kernel_name)
from kernels.printer.cuda import emit_cuda
from kernels.verify.gate_tma_ticket import TICKET_RULES
from kernels.verify.verifier import verify

SPLIT = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=6, store="direct", split_k=True,
                      reduce="inline")
TWO = dataclasses.replace(SPLIT, bm=128)         # two consumer warpgroups: two slots a tile
SMALL = ((70, 75, 320, 2, 75, 3), (130, 128, 200, 2, 136, 2))


def _bad(k, source=None):
    r = verify(k, arch="sm_90a", source=source)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", [
    SPLIT, dataclasses.replace(SPLIT, bn=128, stages=8, a_rows=16),
    dataclasses.replace(SPLIT, bm=128, bn=128, dtype="f16", b_major="k"),
], ids=lambda c: c.name)
def test_split_k_ir_verifies(cfg):
    assert ir_form_refusal(cfg) is None
    k = build_tma_gemm_ir(cfg)
    src = emit_cuda(k)
    assert k.name == ir_kernel_name(cfg) and "_ski" in k.name
    assert all(len(v) == 6 for v in default_instances(cfg))
    r = verify(k, arch="sm_90a", source=src)
    assert set(TICKET_RULES) <= set(r.checks)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "atomicAdd(&cnt[" in src and src.count("__threadfence();") == 2


@settings(max_examples=5, deadline=None)
@given(m=st.integers(1, 140), n=st.integers(1, 200), pad=st.integers(0, 9),
       k=st.integers(1, 700), ctas=st.integers(1, 4), splits=st.integers(1, 6))
def test_split_k_verifies_at_any_size(m, n, pad, k, ctas, splits):
    kern = build_tma_gemm_ir(SPLIT, ((m, n, k, ctas, n + pad, splits),))
    assert _bad(kern) == {}


def test_reduce_kernel_form_is_ir_too():
    """The two-launch form (reduce="kernel") is IR as well (tests/test_nvidia_ir_tma_reduce.py):
    a split kernel without ticket, then the reduce kernel."""
    cfg = dataclasses.replace(SPLIT, bn=256, stages=4, reduce="kernel")
    assert ir_form_refusal(cfg) is None and \
        not any(isinstance(s, AtomicTicket) for s in walk(build_tma_gemm_ir(cfg).body))


# ---------------------------------------------------------------------------- planted bugs

def _block(k):
    """The statements of the ``splits > 1`` block (partials, fence, ticket, branch)."""
    return next(s.body for s in walk(k.body) if isinstance(s, If)
                and any(isinstance(x, AtomicTicket) for x in s.body))


def _first(k, kind):
    return next(s for s in walk(k.body) if isinstance(s, kind))


def _fence_dropped(k):
    b = _block(k)
    del b[next(i for i, s in enumerate(b) if isinstance(s, ThreadFence))]


def _barrier_dropped(k):
    b = _block(k)
    del b[next(i for i, s in enumerate(b) if isinstance(s, NamedBarrier))]


def _barrier_made_arrive(k):
    """The barrier between the fence and the ticket as ``bar.arrive`` (no wait)."""
    b = _block(k)
    nb = next(s for s in b if isinstance(s, NamedBarrier))
    b[b.index(nb)] = NamedBarrier(nb.id, nb.threads, arrive=True)


def _ticket_by_every_thread(k):
    _first(k, AtomicTicket).pred = sympy.true


def _reset_dropped(k):
    br = _first(k, LastArrival)
    br.body = [s for s in br.body if not isinstance(s, CounterReset)]


def _reset_by_every_thread(k):
    _first(k, CounterReset).pred = sympy.true


def _slot_per_tile(k):              # both warpgroups of a 128-row tile at one counter
    t, r = _first(k, AtomicTicket), _first(k, CounterReset)
    t.slot = r.slot = sym("tile")


def _slot_past_the_buffer(k):
    t, r = _first(k, AtomicTicket), _first(k, CounterReset)
    t.slot = r.slot = t.slot + 1


def _last_test_off_by_one(k):
    br = _first(k, LastArrival)
    br.last = sym("splits") - 2
    br.cond = sympy.Eq(sym(br.dst), br.last)


def _merge_reversed(k):             # sums W[splits-1] .. W[0]: another rounding order
    for s in walk(k.body):
        if isinstance(s, PartialAdd):
            s.offset = s.offset.subs(sym("sp"), sym("splits") - 1 - sym("sp"))


def _merge_skips_split_0(k):
    for s in walk(k.body):
        if isinstance(s, Loop) and s.var == "sp":
            s.start = sympy.Integer(1)


def _partials_into_one_plane(k):    # every split's partial at W[0]
    for s in walk(_block(k)):
        if isinstance(s, Access) and s.buf == "W":
            s.offset = s.offset.subs(sym("split"), 0)


def _partial_row_stride_m(k):       # every partial one row down
    for s in walk(_block(k)):
        if isinstance(s, Access) and s.buf == "W":
            s.offset = s.offset + sym("N")


def _partial_after_the_ticket(k):
    b = _block(k)
    i = next(i for i, s in enumerate(b) if isinstance(s, Access))
    b.insert(next(j for j, s in enumerate(b) if isinstance(s, AtomicTicket)), b.pop(i))


def _merge_outside_the_branch(k):
    b, br = _block(k), _first(k, LastArrival)
    j = next(i for i, s in enumerate(br.body) if isinstance(s, If))
    b.insert(len(b) - 1, br.body.pop(j))


#: (name, IR mutation, the check that must refuse it, configuration)
SPLIT_BUGS = (
    ("fence dropped", _fence_dropped, "ticket_structure", SPLIT),
    ("barrier before the ticket dropped", _barrier_dropped, "ticket_structure", SPLIT),
    ("barrier before the ticket only arrives", _barrier_made_arrive, "ticket_structure",
     SPLIT),
    ("ticket by every thread", _ticket_by_every_thread, "ticket_single_thread", SPLIT),
    ("counter reset dropped", _reset_dropped, "ticket_structure", SPLIT),
    ("counter reset by every thread", _reset_by_every_thread, "ticket_single_thread", SPLIT),
    ("one slot for both warpgroups", _slot_per_tile, "counter_slots", TWO),
    ("slot past the counter buffer", _slot_past_the_buffer, "counter_slots", SPLIT),
    ("last test off by one", _last_test_off_by_one, "arrival_orders", SPLIT),
    ("merge in reverse split order", _merge_reversed, "merge_reads_partials", SPLIT),
    ("merge skips split 0", _merge_skips_split_0, "merge_reads_partials", SPLIT),
    ("every partial in plane 0", _partials_into_one_plane, "merge_reads_partials", SPLIT),
    ("partial rows misplaced", _partial_row_stride_m, "lane_accumulator_writeback", SPLIT),
    ("a partial stored after the ticket", _partial_after_the_ticket, "ticket_structure",
     SPLIT),
    ("partial reads outside the branch", _merge_outside_the_branch, "ticket_structure",
     SPLIT),
)


@pytest.fixture(scope="module")
def built():
    out = {}
    for cfg in (SPLIT, TWO):
        k = build_tma_gemm_ir(cfg, SMALL)
        assert _bad(k) == {}, cfg.name
        out[cfg] = k
    return out


@pytest.mark.parametrize("bug", SPLIT_BUGS, ids=[b[0] for b in SPLIT_BUGS])
def test_planted_split_k_bug_is_refused(built, bug):
    name, plant, check, cfg = bug
    k = copy.deepcopy(built[cfg])
    plant(k)
    bad = _bad(k)
    assert check in bad, (name, bad)


def test_every_ticket_rule_has_a_planted_bug():
    assert {b[2] for b in SPLIT_BUGS} >= set(TICKET_RULES)


def test_printed_split_k_mutations_are_refused(built):
    k = built[SPLIT]
    src = emit_cuda(k)
    assert _bad(k, src) == {}
    for bad in (src.replace("__threadfence();\n", "\n", 1),                  # fence dropped
                src.replace("atomicAdd(&cnt[cg + tile], 1)", "atomicAdd(&cnt[tile], 1)"),
                src.replace("if (lg_tk[cg] == splits - 1) {", "if (lg_tk[cg] == splits) {"),
                src.replace("if (t == 0) cnt[cg + tile] = 0;", ""),           # no reset
                src.replace("M*N*sp + ", "M*N*(splits - 1 - sp) + ", 1),      # merge order
                src.replace("M*N*split + ", "M*N*(split + 1) + ", 1),         # partial plane
                src.replace("make_float2(acc[0], acc[1])", "make_float2(acc[1], acc[0])", 1),
                src.replace("float* __restrict__ W", "const float* __restrict__ W")):
        assert bad != src
        got = _bad(k, bad)
        assert {"printed_source", "declarations"} & set(got), got
