"""The ring of kernels/verify/ring_steps.py: the per-role model's producer stepped at the waits
of consumer warpgroups walked in lockstep (as the warp-specialised attention engine will run
its 256 consumer threads), boxes stamped with their (barrier, phase).

The vehicle is the IR TMA GEMM with two consumer warpgroups (bm=128: a producer, a 3-stage
ring of full / empty mbarriers, each consumer reading its own rows of A at its own descriptor
start): the smallest verified warp-specialised kernel in the code base.  Its consumer epilogue
(shared C stores, TMA stores) is data the ring does not model (:meth:`RingWalk.data`); the
per-role model proves it (tests/test_nvidia_ir_tma.py).  Every planted bug is refused under
the check meant to catch it, in both schedules where the bug does not depend on timing."""

from __future__ import annotations

import dataclasses

import pytest
import sympy

from kernels.errors import KernelError
from kernels.ir.core import Access, If, Loop, ZeroFrag, sym
from kernels.ir.nvidia_tma import (BulkWait, LeaderOnly, MbarrierArrive, MbarrierExpectTx,
                                   MbarrierWait, NamedBarrier, RoleBranch, Setmaxnreg, TmaStore)
from kernels.ir.nvidia_wgmma import (FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaMma,
                                     WgmmaWait)
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
from kernels.verify.ring_steps import RING_SCHEDULES, Ring, RingWalk

CFG = TmaGemmConfig(bm=128, bn=128)
#: 2 x 2 tiles over 2 CTAs (two units each: the ring's counters run on over units), 5 k tiles
#: on a 3-stage ring (it wraps), and an edge K (zero-filled k past K)
INSTANCES = ({"M": 256, "N": 256, "K": 320, "ctas": 2}, {"M": 128, "N": 128, "K": 200, "ctas": 1})
#: the GEMM consumer's data statements: the per-role model's, not the ring's
_GEMM_DATA = (ZeroFrag, Access, FenceProxyAsync, NamedBarrier, LeaderOnly, TmaStore, BulkWait,
              WgmmaFence, WgmmaMma, WgmmaCommit, WgmmaWait)


class _GemmWalk(RingWalk):
    def data(self, s, env):
        if not isinstance(s, _GEMM_DATA):
            super().data(s, env)


def _run(k, schedule="lazy", instances=INSTANCES):
    """The ring over every CTA of every instance; the failures of the first failing CTA."""
    for values in instances:
        for bx in range(values["ctas"]):
            ring = Ring(k, k.spec, "sm_90a", values, bx, consumers=(1, 2), schedule=schedule)
            _GemmWalk(ring).run()
            if ring.f.first:
                return ring.f.first
    return {}


def _role(k, name):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == name)


def _kloop(k, role):
    units = next(s for s in _role(k, role).body if isinstance(s, Loop) and s.var == "iu") \
        if role == "consumer" else None
    if units is None:       # the producer's loops sit in its leader-only block
        lead = next(s for s in _role(k, role).body if isinstance(s, LeaderOnly))
        units = next(s for s in lead.body if isinstance(s, Loop) and s.var == "iu")
    return units, next(s for s in units.body if isinstance(s, Loop) and s.var == "kk")


@pytest.mark.parametrize("schedule", RING_SCHEDULES)
def test_the_two_consumer_ring_is_accepted(schedule):
    k = build_tma_gemm_ir(CFG)
    assert _run(k, schedule) == {}


def test_the_walk_refuses_a_statement_nobody_models():
    k = build_tma_gemm_ir(CFG)
    ring = Ring(k, k.spec, "sm_90a", INSTANCES[0], 0)
    with pytest.raises(KernelError, match="data statement the ring does not model"):
        RingWalk(ring).run()


def test_a_bad_consumer_set_or_schedule_is_refused():
    k = build_tma_gemm_ir(CFG)
    with pytest.raises(KernelError, match="consumer warpgroups"):
        Ring(k, k.spec, "sm_90a", INSTANCES[0], 0, consumers=(0, 1))
    with pytest.raises(KernelError, match="schedule"):
        Ring(k, k.spec, "sm_90a", INSTANCES[0], 0, schedule="sometimes")


# ---- planted bugs: (name, mutation of the IR, check, message, schedules) ----------------------

def _no_full_wait(k):
    _, kl = _kloop(k, "consumer")
    kl.body = [s for s in kl.body if not isinstance(s, MbarrierWait)]


def _no_empty_wait(k):
    _, kl = _kloop(k, "producer")
    kl.body = [s for s in kl.body if not isinstance(s, MbarrierWait)]


def _expect_tx(delta):
    def plant(k):
        _, kl = _kloop(k, "producer")
        i = next(i for i, s in enumerate(kl.body) if isinstance(s, MbarrierExpectTx))
        s = kl.body[i]
        kl.body[i] = MbarrierExpectTx(s.bar, s.index, s.bytes + delta)
    return plant


def _full_parity_flipped(k):
    _, kl = _kloop(k, "consumer")
    i = next(i for i, s in enumerate(kl.body) if isinstance(s, MbarrierWait))
    s = kl.body[i]
    kl.body[i] = MbarrierWait(s.bar, s.index, 1 - s.parity)


def _full_parity_fixed(k):
    """The parity never advances: the second round's wait sees the first round's phase."""
    _, kl = _kloop(k, "consumer")
    i = next(i for i, s in enumerate(kl.body) if isinstance(s, MbarrierWait))
    s = kl.body[i]
    kl.body[i] = MbarrierWait(s.bar, s.index, 0)


def _release_before_retire(k):
    """The stage of this k tile released right after its wgmmas are issued (not after the
    wait retiring them): arrive on ``st`` before ``wgmma.wait_group``."""
    _, kl = _kloop(k, "consumer")
    i = next(i for i, s in enumerate(kl.body) if isinstance(s, WgmmaCommit))
    kl.body.insert(i + 1, MbarrierArrive("empty", sym("st"), per_warp=True))
    j = next(j for j, s in enumerate(kl.body) if isinstance(s, If) and not isinstance(s, LeaderOnly)
             and any(isinstance(x, MbarrierArrive) for x in s.body))
    del kl.body[j]
    units, _ = _kloop(k, "consumer")
    units.body = [s for s in units.body if not isinstance(s, MbarrierArrive)]


def _no_consumer_setmaxnreg(k):
    c = _role(k, "consumer")
    c.body = [s for s in c.body if not isinstance(s, Setmaxnreg)]


def _consumer_setmaxnreg(regs):
    def plant(k):
        c = _role(k, "consumer")
        c.body = [Setmaxnreg(True, regs) if isinstance(s, Setmaxnreg) else s for s in c.body]
    return plant


def _setmaxnreg_late(k):
    c = _role(k, "consumer")
    i = next(i for i, s in enumerate(c.body) if isinstance(s, Setmaxnreg))
    c.body.insert(2, c.body.pop(i))


BUGS = [
    ("consumer skips the full wait", _no_full_wait, "lds_races", "no box has written", "both"),
    # lazily the box overwrites a stage the consumers read; eagerly the producer runs the
    # whole ring ahead before any read, and the consumers' waits miss its phases
    ("producer skips the empty wait", _no_empty_wait, "lds_races", "overwrites", "lazy"),
    ("producer skips the empty wait", _no_empty_wait, "mbarrier_protocol", "deadlock",
     "eager"),
    ("expect-tx 2 bytes short", _expect_tx(-2), "mbarrier_protocol",
     "more than its expect_tx announced", "both"),
    ("expect-tx 2 bytes over", _expect_tx(2), "mbarrier_protocol", "deadlock", "both"),
    # a flipped parity passes the first wait at once (phase -1): lazily the read finds no
    # box, eagerly (the ring filled) the wait never completes
    ("full wait parity flipped", _full_parity_flipped, "lds_races", "no box has written",
     "lazy"),
    ("full wait parity flipped", _full_parity_flipped, "mbarrier_protocol", "deadlock",
     "eager"),
    ("full wait parity never advances", _full_parity_fixed, "mbarrier_protocol",
     "a phase it had already observed", "lazy"),
    ("full wait parity never advances", _full_parity_fixed, "mbarrier_protocol", "deadlock",
     "eager"),
    ("stage released before its wgmma retired", _release_before_retire, "lds_races",
     "overwrites", "both"),
    ("consumer without setmaxnreg", _no_consumer_setmaxnreg, "register_budget",
     "setmaxnreg 0 times", "both"),
    ("consumer setmaxnreg 240 (40 + 240 + 240 > 512 per thread slot)", _consumer_setmaxnreg(240),
     "register_budget", "the register file has 65536", "both"),
    ("setmaxnreg after other statements", _setmaxnreg_late, "register_budget",
     "first statement of a role", "both"),
]


CASES = [(n, p, c, m, sch) for n, p, c, m, when in BUGS for sch in RING_SCHEDULES
         if when in ("both", sch)]


@pytest.mark.parametrize("name,plant,check,msg,schedule", CASES,
                         ids=[f"{c[0]} ({c[4]})" for c in CASES])
def test_planted_bugs_are_refused_by_their_rule(name, plant, check, msg, schedule):
    k = build_tma_gemm_ir(CFG)
    plant(k)
    fails = _run(k, schedule)
    assert check in fails, (name, fails)
    assert msg in fails[check], (name, fails[check])


def test_a_branch_splitting_the_lockstep_consumers_is_refused():
    """The lockstep walk's premise: control flow uniform over both consumer warpgroups (a
    branch on ``cg`` is a ping-pong's business, the protocol model's, not the walk's)."""
    k = build_tma_gemm_ir(CFG)
    _, kl = _kloop(k, "consumer")
    kl.body.insert(0, If(sympy.Eq(sym("cg"), 0), []))
    fails = _run(k)
    assert "not uniform over the lockstep consumer warpgroups" in fails["mbarrier_protocol"]


def test_a_wgmma_reading_outside_its_array_is_refused():
    k = build_tma_gemm_ir(CFG)
    _, kl = _kloop(k, "consumer")
    i = next(i for i, s in enumerate(kl.body) if isinstance(s, WgmmaMma))
    s = kl.body[i]
    kl.body[i] = dataclasses.replace(s, b=dataclasses.replace(s.b, start=s.b.start + 3 * 8192))
    fails = _run(k)
    assert "reads sB[" in fails["in_bounds"], fails
