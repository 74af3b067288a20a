"""The mbarrier ring of a warp-specialised kernel seen from lockstep consumers: the producer
warpgroup of the per-role phase model (:mod:`kernels.verify.gate_tma`) stepped at the
consumers' waits, its boxes stamped with the (barrier, phase) they complete on -- piece 1 of
:mod:`kernels.nvidia.wgmma_ws_ir_plan` (the engine), its protocol half.

The attention engine the plan describes runs the consumer warpgroups as **one lockstep agent**
(the attention dataflow of 256 threads) and the producer as the per-role model runs it.  This
module is the seam between the two: a :class:`Ring` holds one CTA of the per-role model
(:func:`~kernels.verify.gate_tma.role_cta`) with the producer's coroutine and one protocol
:class:`~kernels.verify.gate_tma_data.Agent` per consumer warpgroup, and the lockstep walker
calls it at the ring's statements:

* ``MbarrierWait`` -- every consumer warpgroup waits (the per-role model's ``wait``: parity
  0 / 1, the phase observed exactly once, the vector clock acquired); while a wait cannot
  complete the producer is stepped one statement at a time; a producer that cannot move (it
  waits on a release the consumers have not made, or it finished without the box) is a
  ``mbarrier_protocol`` deadlock;
* ``MbarrierArrive`` -- each consumer warpgroup arrives (the per-role ``action``: arrival
  counts, ``per_warp`` 4 per warpgroup, the clock released);
* a wgmma's shared operands -- each consumer warpgroup's elements (its own descriptor start)
  must have been written by boxes whose phase that warpgroup observed
  (:meth:`~kernels.verify.gate_tma_data.DataRules.stamped_read`, ``lds_races``), and stay
  marked in flight until the ``wgmma.wait_group`` retiring them
  (:meth:`~kernels.verify.gate_tma_data.DataRules.retire_reads`); a box overwriting them
  before a release the producer observed after that retire is refused by the producer's own
  ``TmaLoad`` rule (``lds_races``);
* ``Setmaxnreg`` -- the per-role register rule (first statement of the role, once, the
  split within the register file: ``register_budget``, checked by :meth:`Ring.finish`).

No rule is copied: every one of them is the per-role model's method on the same CTA.  What is
left to the caller (the lockstep dataflow): the data -- the box identities are the per-role
model's (``cta.smem``; a 4-D box's read back as spec coordinates by :meth:`Ring.box_coords`,
the attention dataflow's to encode), registers, softmax, stores.  :class:`RingWalk` is the smallest such caller: the lockstep
walk of the consumer role's control flow over the ring, with every other statement handed to
:meth:`RingWalk.data` (which refuses it unless a subclass says what it does).
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import KernelError
from ..ir.core import Comment, If, Let, Loop, c_eval, sym, walk
from ..ir.nvidia_tma import (WARPGROUP, MbarrierArrive, MbarrierWait, RoleBranch, Setmaxnreg,
                             TmaLoad)
from ..ir.nvidia_wgmma import WgmmaCommit, WgmmaMma, WgmmaWait, operand_elements
from .gate_tma import role_cta
from .gate_tma_data import SHT, Agent, Stop, plane_coords
from .spec import KernelSpec

__all__ = ["Ring", "RingWalk", "RING_SCHEDULES"]

#: "lazy": the producer moves only while a consumer wait cannot complete; "eager": it also
#: runs as far as it can before every consumer wait (the two ends of what the barriers allow)
RING_SCHEDULES = ("lazy", "eager")


class Ring:
    """One CTA's ring: the producer warpgroup of ``k`` (the first ``RoleBranch`` its threads
    take) stepped on demand, and the consumer warpgroups ``consumers`` driven in lockstep by
    the caller.  Failures go to ``self.f`` (the per-role model's named checks); a method that
    cannot go on raises :class:`~kernels.verify.gate_tma_data.Stop` after recording why."""

    def __init__(self, k: Any, spec: KernelSpec, arch: str, values: Dict[str, int],
                 bx: int = 0, consumers: Sequence[int] = (1, 2), schedule: str = "lazy",
                 env0: Optional[Dict[Any, Any]] = None) -> None:
        if schedule not in RING_SCHEDULES:
            raise KernelError(f"ring: schedule {schedule!r} is not one of {RING_SCHEDULES}")
        self.cta, self.body, self.gate = role_cta(k, spec, arch, values, bx)
        # what a second CTA of the same block needs (the ping-pong's replay, ring_pingpong)
        self.k, self.spec, self.arch, self.values, self.bx = k, spec, arch, dict(values), bx
        self.f = self.gate.f
        self.schedule = schedule
        agents = self.cta.agents
        if not consumers or min(consumers) < 1 or max(consumers) >= len(agents):
            raise KernelError(f"ring: consumer warpgroups {tuple(consumers)} of a "
                              f"{len(agents)}-warpgroup block (warpgroup 0 is the producer)")
        self.consumers: List[Agent] = [agents[c] for c in consumers]
        self.lo = min(consumers) * WARPGROUP          # the first consumer thread
        env = dict(env0 or {})
        env.update({sym(n): v for n, v in values.items()})
        env[sym(k.grid_symbols[0])] = bx
        self.env0 = env
        penv = dict(env)
        penv[sym("tid")] = np.arange(WARPGROUP)
        self.producer = agents[0]
        # the 4-D maps of the kernel's boxes (box_coords reads their identities back)
        self.maps = list({s.tmap.name: s.tmap for s in walk(k.body)
                          if isinstance(s, TmaLoad) and s.tmap.planes}.values())
        self._gen: Optional[Iterator[None]] = self.cta.run(self.producer, self.body, penv)

    # ---- the consumers' view ----------------------------------------------------------------
    def consumer_env(self) -> Dict[Any, Any]:
        """The lockstep environment: ``tid`` the consumer threads' ids."""
        env = dict(self.env0)
        env[sym("tid")] = self.lo + np.arange(len(self.consumers) * WARPGROUP)
        return env

    def agent_env(self, i: int, env: Dict[Any, Any]) -> Dict[Any, Any]:
        """Consumer warpgroup ``i``'s slice of the lockstep environment (its 128 threads), on
        which the per-role rules evaluate indices, parities and descriptor starts."""
        n = len(self.consumers) * WARPGROUP
        sl = slice(i * WARPGROUP, (i + 1) * WARPGROUP)
        return {k_: (v[sl] if isinstance(v, np.ndarray) and v.shape[:1] == (n,) else v)
                for k_, v in env.items()}

    def enter(self, s: RoleBranch) -> None:
        for a in self.consumers:
            if a.role is not None:
                self.f.add("mbarrier_protocol", f"warpgroup {a.wg}: runs role {s.role} inside "
                                                f"role {a.role}")
                raise Stop()
            a.role = s.role
            a.roles.append(s.role)

    def leave(self, s: RoleBranch) -> None:
        for a in self.consumers:
            a.role = "after " + s.role

    def count(self, s: Any) -> None:
        """A consumer statement inside the role (setmaxnreg must come before any)."""
        for a in self.consumers:
            if a.role is not None and not isinstance(s, Setmaxnreg):
                a.stmts_in_role += 1

    def setmaxnreg(self, s: Setmaxnreg, env) -> None:
        for i, a in enumerate(self.consumers):
            self.cta.action(a, s, self.agent_env(i, env))

    def wait(self, s: MbarrierWait, env) -> None:
        """Every consumer warpgroup waits on ``s``; the producer moves until the phase
        completes (a deadlock if it cannot)."""
        for i, a in enumerate(self.consumers):
            if self.schedule == "eager":
                self.run_producer(block_ok=True)
            g = self.cta.wait(a, s, self.agent_env(i, env))
            while True:
                try:
                    next(g)
                except StopIteration:
                    break
                if not self.step():
                    self.deadlock([a.waiting])

    def arrive(self, s: MbarrierArrive, env) -> None:
        for i, a in enumerate(self.consumers):
            self.cta.action(a, s, self.agent_env(i, env))

    def wgmma(self, s: WgmmaMma, env) -> None:
        """The shared operands of ``s``, warpgroup by warpgroup (each at its own descriptor
        start): stamped reads, in flight until retired."""
        for i, a in enumerate(self.consumers):
            ae = self.agent_env(i, env)
            for op in ((s.b,) if s.a_in_regs else (s.a, s.b)):
                start = self.cta.uni(a, op.start, ae, f"{s.tag}'s {op.buf} descriptor start")
                try:
                    el = operand_elements(op, start).reshape(-1)
                except ValueError as e:
                    self.f.add("lane_mfma_operands", self.cta.where(a, f"{s.tag}: {e}", ae))
                    raise Stop() from None
                n = self.cta.smem[op.buf].shape[0]
                if el.min() < 0 or el.max() >= n:
                    self.f.add("in_bounds", self.cta.where(
                        a, f"{s.tag} reads {op.buf}[{int(el.min())}..{int(el.max())}] of a "
                           f"{n}-element array", ae))
                    raise Stop()
                if (self.cta.tok[op.buf][el] < 0).any():
                    i = int(el[np.argmax(self.cta.tok[op.buf][el] < 0)])
                    self.f.add("lds_races", self.cta.where(
                        a, f"{s.tag} reads {op.buf}[{i}], which no box has written yet (no "
                           "wait ordered the read after a load)", ae))
                    raise Stop()
                if not self.cta.stamped_read(a, op.buf, el, s.tag, ae):
                    raise Stop()
                a.open.append((op.buf, el, s.acc.frag.name))

    def fence(self, env) -> None:
        """``fence.proxy.async`` by every consumer warpgroup (the per-role rule: the
        ``cp.async`` copies each has acquired become visible to its wgmma reads)."""
        from ..ir.nvidia_wgmma import FenceProxyAsync
        for i, a in enumerate(self.consumers):
            self.cta.action(a, FenceProxyAsync(), self.agent_env(i, env))

    def commit(self) -> None:
        for a in self.consumers:
            a.groups.append(a.open)
            a.open = []

    def retire(self, s: WgmmaWait) -> None:
        """``wgmma.wait_group pending``: the older groups' reads retire (stamped with a tick
        of each warpgroup's clock)."""
        for a in self.consumers:
            while len(a.groups) > s.pending:
                grp = a.groups.pop(0)
                self.cta.retire_reads(a, [(buf, el) for buf, el, _ in grp])
            # an element an older group and a group still in flight both read stays in flight
            for grp in a.groups + [a.open]:
                for buf, el, _ in grp:
                    self.cta.rd[buf][a.wg][el] = np.inf

    def box_coords(self, buf: str, el: np.ndarray) -> Tuple[str, Dict[str, np.ndarray],
                                                            np.ndarray]:
        """What the boxes wrote at ``buf[el]`` (all of one 4-D tensor map's tensor): (tensor,
        spec dimension -> coordinates, zero-filled) -- the identities the attention dataflow
        encodes (:func:`~kernels.verify.attention_ids.encode_ids`).  ``KernelError`` where no
        box wrote an element or the elements are not all of one 4-D map's tensor."""
        el = np.asarray(el)
        ids = self.cta.smem[buf][el]
        if (self.cta.tok[buf][el] < 0).any():
            raise KernelError(f"ring: {buf} elements no box wrote")
        tids = np.unique((ids & ~(np.int64(1) << 62)) >> SHT)
        maps = [tm for tm in self.maps if self.gate.tensor_id[tm.tensor] == int(tids[0])]
        if len(tids) != 1 or not maps:
            raise KernelError(f"ring: {buf} elements of tensors {tids.tolist()}, not of one 4-D "
                              "tensor map's")
        coords, zero = plane_coords(ids, maps[0], self.env0)
        return maps[0].tensor, coords, zero

    # ---- the producer -----------------------------------------------------------------------
    def step(self) -> bool:
        """One producer statement; False when it could not move (blocked or finished)."""
        if self._gen is None:
            return False
        p = self.producer
        before = (p.waiting, sum(b.completed for b in self.cta.bars.values()), p.clock)
        try:
            next(self._gen)
        except StopIteration:
            self._gen = None
            p.done = True
            return True
        after = (p.waiting, sum(b.completed for b in self.cta.bars.values()), p.clock)
        return after != before or not p.waiting

    def run_producer(self, block_ok: bool) -> None:
        """Step the producer until it finishes, or blocks (a deadlock unless ``block_ok``)."""
        while self._gen is not None:
            if not self.step():
                if block_ok:
                    return
                self.deadlock([self.producer.waiting])

    def deadlock(self, stuck: List[str]) -> None:
        if self._gen is None:
            stuck = stuck + [f"warpgroup {self.producer.wg} (producer) has finished"]
        elif self.producer.waiting:
            stuck = stuck + [self.producer.waiting]
        self.f.add("mbarrier_protocol", "deadlock: " + "; ".join(w for w in stuck if w))
        raise Stop()

    def finish(self) -> None:
        """The consumers are done: the producer runs to its end, then the per-role model's end
        checks (no barrier part-way, nothing in flight) and register rule."""
        self.run_producer(block_ok=False)
        self.cta.end_checks()
        self.gate.registers()


class RingWalk:
    """The lockstep walk of the consumer role over a :class:`Ring`: ``Let`` (and its
    ``VarInit`` / ``VarSet``), ``Loop`` and ``If`` (uniform over every consumer thread),
    ``RoleBranch``, and the ring's statements; every other statement goes to :meth:`data`.
    The attention engine's dataflow is meant to take this walk's place (its ``stmts`` calling
    the same :class:`Ring` methods); this class is the walk the ring is proven with."""

    def __init__(self, ring: Ring) -> None:
        self.ring = ring

    def run(self) -> None:
        """Walk the kernel body for the consumer threads, then finish the ring; a failure
        stops the walk (recorded in ``ring.f``)."""
        try:
            self.stmts(self.ring.body, self.ring.consumer_env())
            self.ring.finish()
        except Stop:
            pass

    def data(self, s: Any, env: Dict[Any, Any]) -> None:
        """A statement outside the ring's control flow and protocol: the dataflow's."""
        raise KernelError(f"ring walk: {type(s).__name__} is a data statement the ring does "
                          "not model (the caller's dataflow must)")

    def stmts(self, body: List[Any], env: Dict[Any, Any]) -> None:
        r = self.ring
        for s in body:
            if isinstance(s, Comment):
                continue
            r.count(s)
            if isinstance(s, RoleBranch):
                if self.uniform(s.cond, env, f"role {s.role}'s branch"):
                    r.enter(s)
                    self.stmts(s.body, env)
                    r.leave(s)
            elif isinstance(s, Let):
                env[sym(s.name)] = c_eval(s.expr, env)
            elif isinstance(s, Loop):
                lo = self.uniform(s.start, env, f"loop {s.var}'s start")
                hi = self.uniform(s.stop, env, f"loop {s.var}'s bound")
                for v in range(lo, hi):
                    env[sym(s.var)] = v
                    self.stmts(s.body, env)
                env.pop(sym(s.var), None)
            elif isinstance(s, If) and type(s) is If:
                if self.uniform(s.cond, env, "a branch condition"):
                    self.stmts(s.body, env)
            elif isinstance(s, Setmaxnreg):
                r.setmaxnreg(s, env)
            elif isinstance(s, MbarrierWait):
                r.wait(s, env)
            elif isinstance(s, MbarrierArrive):
                r.arrive(s, env)
            elif isinstance(s, WgmmaMma):
                r.wgmma(s, env)
                self.data(s, env)
            elif isinstance(s, WgmmaCommit):
                r.commit()
                self.data(s, env)
            elif isinstance(s, WgmmaWait):
                r.retire(s)
                self.data(s, env)
            else:
                self.data(s, env)

    def uniform(self, e: Any, env: Dict[Any, Any], what: str) -> int:
        """``e`` over every consumer thread: one value (the lockstep walk's premise)."""
        v = np.asarray(c_eval(e, env))
        if v.ndim and (v != v.flat[0]).any():
            self.ring.f.add("mbarrier_protocol", f"{what} ({e}) is not uniform over the "
                                                 "lockstep consumer warpgroups")
            raise Stop()
        return int(v.flat[0])
