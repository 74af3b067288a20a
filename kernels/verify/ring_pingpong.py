"""The consumers' ping-pong on the warp-specialised attention engine (plan piece
``engine_pingpong`` of :mod:`kernels.nvidia.wgmma_ws_ir_plan`): named barriers across the
consumer warpgroups (:mod:`kernels.nvidia.ws_pingpong`: ``bar.sync 1 + cw, 256`` before a
consumer's GEMM issue, ``bar.arrive 2 - cw, 256`` after, consumer 1 opening with an arrive
on barrier 1), run as a **three-agent protocol beside the lockstep data**.

The engine (:mod:`kernels.verify.attention_ring`) walks the consumer warpgroups as one
lockstep dataflow; the ping-pong's statements split them (``cw``), and a lockstep walk cannot
run a barrier one warpgroup waits on while the other issues.  They carry no data (the
consumers only read what the producer's boxes wrote, which the ring's stamps order), so:

* the walk takes both branches' statements for the data where the split only guards
  barriers (an ``if`` whose body is named barriers, :func:`is_barrier_branch`; any other
  split is still refused), and hands every named barrier, mbarrier wait / arrive and wgmma
  issue to :class:`PingPong`, which records each consumer warpgroup's own sequence of them
  (ids, indices, parities and branch conditions evaluated on that warpgroup's threads, uniform
  within it: the per-role model's ``uni``);
* :meth:`PingPong.replay` then runs the **producer** (the per-role model's coroutine over the
  kernel body, on a fresh CTA of :func:`~kernels.verify.gate_tma.role_cta`) and the **two
  consumer warpgroups** (their recorded sequences) as three agents of the per-role model, in
  each of its schedules (:data:`~kernels.verify.gate_tma.SCHEDULES`): the group named-barrier
  rule (``_Cta.group_barrier`` through ``cta.stmt``: ids 1..15, one thread count per id, one
  arrival per warpgroup per phase, a sync waiting for its phase), the mbarrier rules, a
  deadlock when no agent can move (a sync without its arrive, the opening arrive dropped), and
  the end check (no barrier part-way through a phase: a hand-over nobody takes);
* the **turn rule** (the ping-pong's purpose: the two consumers' GEMM issues never overlap):
  a consumer's turn opens when its group ``bar.sync`` completes and closes at its next group
  ``bar.arrive``; a wgmma issued outside its warpgroup's turn, or a turn opened while the
  other consumer holds one, is refused (``mbarrier_protocol``).

Only a kernel whose consumer role holds named barriers is recorded and replayed; the others
run exactly as before.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Set, Tuple

import numpy as np

from ..ir.core import If, sym, walk
from ..ir.nvidia_tma import WARPGROUP, MbarrierArrive, MbarrierWait, NamedBarrier, RoleBranch
from ..ir.nvidia_wgmma import WgmmaMma
from .gate_tma import SCHEDULES, role_cta
from .gate_tma_data import Agent, Stop

__all__ = ["PingPong", "has_pingpong", "is_barrier_branch"]


def is_barrier_branch(s: Any) -> bool:
    """Is ``s`` a plain ``if`` whose whole body is named barriers (a split that only guards
    barriers: the data walk takes it for every thread, the protocol per warpgroup)?"""
    return type(s) is If and bool(s.body) and all(isinstance(b, NamedBarrier) for b in s.body)


def has_pingpong(k: Any) -> bool:
    """Does ``k``'s consumer role hold named barriers (the ping-pong)?"""
    return any(isinstance(s, NamedBarrier) for r in k.body
               if isinstance(r, RoleBranch) and r.role == "consumer" for s in walk(r.body))


class _Issue:
    """A wgmma issue in a recorded sequence (the turn rule's event)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag


class PingPong:
    """The consumer warpgroups' protocol sequences of one :class:`~kernels.verify.ring_steps
    .Ring` (recorded by the lockstep walk) and their three-agent replay (module docstring)."""

    def __init__(self, ring: Any) -> None:
        self.ring = ring
        self.traces: List[List[Tuple[Any, Dict[Any, Any]]]] = [[] for _ in ring.consumers]
        self.loop_vars = [sym(n) for n in ring.gate.loop_vars]

    # ---- recording (the lockstep walk) --------------------------------------------------------
    def _each(self, env: Dict[Any, Any]) -> Iterator[Tuple[List[Any], Agent, Dict[Any, Any],
                                                           Dict[Any, Any]]]:
        r = self.ring
        for i, a in enumerate(r.consumers):
            ae = r.agent_env(i, env)
            loops = {v: ae[v] for v in self.loop_vars if v in ae}
            yield self.traces[i], a, ae, loops

    def barrier(self, s: NamedBarrier, env: Dict[Any, Any]) -> None:
        """``bar.sync`` / ``bar.arrive``: each consumer warpgroup's id (uniform within it)."""
        cta = self.ring.cta
        for trace, a, ae, loops in self._each(env):
            i = cta.uni(a, s.id, ae, "the named barrier's id")
            trace.append((NamedBarrier(i, s.threads, s.arrive), loops))

    def branch(self, s: If, env: Dict[Any, Any]) -> None:
        """An ``if`` guarding only named barriers: each warpgroup takes it on its own
        condition (uniform within the warpgroup)."""
        cta = self.ring.cta
        for trace, a, ae, loops in self._each(env):
            if cta.uni(a, s.cond, ae, "a named barrier's branch condition"):
                for b in s.body:
                    trace.append((NamedBarrier(cta.uni(a, b.id, ae, "the named barrier's id"),
                                               b.threads, b.arrive), loops))

    def record(self, s: Any, env: Dict[Any, Any]) -> None:
        """A ring statement the replay runs too: an mbarrier wait or arrive (its index and
        parity evaluated), or a wgmma issue (the turn rule's event)."""
        cta = self.ring.cta
        for trace, a, ae, loops in self._each(env):
            if isinstance(s, MbarrierWait):
                trace.append((MbarrierWait(s.bar, cta.uni(a, s.index, ae, "the wait's index"),
                                           cta.uni(a, s.parity, ae, "the wait's parity")),
                              loops))
            elif isinstance(s, MbarrierArrive):
                trace.append((MbarrierArrive(s.bar, cta.uni(a, s.index, ae, "the arrive's "
                                                            "index"), per_warp=s.per_warp),
                              loops))
            elif isinstance(s, WgmmaMma):
                trace.append((_Issue(s.tag), loops))

    # ---- the replay ---------------------------------------------------------------------------
    def replay(self) -> None:
        """Run the producer and the recorded consumer sequences as three agents of the
        per-role model, in each of its schedules; failures go to the ring's ``f``."""
        r = self.ring
        for order in SCHEDULES:
            cta, body, gate = role_cta(r.k, r.spec, r.arch, r.values, r.bx, order)
            penv = dict(r.env0)
            penv[sym("tid")] = np.arange(WARPGROUP)
            agents = [cta.agents[0]] + [cta.agents[a.wg] for a in r.consumers]
            turns: Set[int] = set()
            gens = [cta.run(agents[0], body, penv)] + \
                [self._consumer(cta, a, t, turns) for a, t in zip(agents[1:], self.traces)]
            cta.schedule(agents, gens)
            for check, msg in gate.f.first.items():
                r.f.add(check, f"ping-pong replay ({order} first): {msg}")
            if gate.f.first:
                return

    @staticmethod
    def _consumer(cta: Any, a: Agent, trace: List[Tuple[Any, Dict[Any, Any]]],
                  turns: Set[int]) -> Iterator[None]:
        a.role = "consumer"
        a.roles.append("consumer")
        for s, env in trace:
            if isinstance(s, _Issue):
                if a.wg not in turns:
                    cta.f.add("mbarrier_protocol", cta.where(
                        a, f"wgmma {s.tag} is issued outside the warpgroup's ping-pong turn (no "
                           "bar.sync took the turn since its last bar.arrive handed it over)",
                        env))
                    raise Stop()
                if cta.order == "interleaved":
                    yield None      # the issue takes a round: the turn is held across rounds
                continue
            group = isinstance(s, NamedBarrier) and (s.arrive or s.threads != WARPGROUP)
            if group and s.arrive:
                turns.discard(a.wg)
            yield from cta.stmt(a, s, env)
            if group and not s.arrive:
                if turns:
                    cta.f.add("mbarrier_protocol", cta.where(
                        a, f"bar.sync {s.id}, {s.threads} opens the warpgroup's ping-pong turn "
                           f"while warpgroup {min(turns)} still holds its own (no bar.arrive "
                           "handed it over)", env))
                    raise Stop()
                turns.add(a.wg)
        a.role = "after consumer"
