"""The warp-specialised attention engine (piece 1 of :mod:`kernels.nvidia.wgmma_ws_ir_plan`):
one verifier run over a TMA producer warpgroup and lockstep consumer warpgroups that run the
attention dataflow.

The consumers are **one** :class:`~kernels.verify.attention_dataflow.AttentionDataflow` over a
view of the kernel (``block`` = the consumer threads, ``tid`` = their ids in the block): the
softmax, masking, operand-pairing, write-back and wgmma rules are the attention engine's own.
Its walk calls the :class:`~kernels.verify.ring_steps.Ring` at the ring's statements: a wait
steps the producer (the per-role model's coroutine) until the awaited phase completes; every
box the producer lands is copied into the dataflow's shared identities
(:meth:`~kernels.verify.ring_steps.Ring.box_coords` -> :func:`~kernels.verify.attention_ids
.encode_ids`, rows past a plane's sequence zero-filled with their own coordinates, as a
predicated ``cp.async`` load gives); each wgmma's shared operands are first read through the
ring's stamp rule (a phase the warpgroup has not observed, an element no box wrote, a box
overwriting a read before the release after its retire: ``lds_races``); arrivals, parities,
transaction bytes, deadlocks and ``setmaxnreg`` are the per-role model's rules.

The static pass of the attention gate runs on the same consumer view (:class:`RingStatic`:
the O stores' index math, bounds and coverage over every block, the thread's (batch, head)
anchor taken from the Q box its wait observes).

A ``cp.async`` producer (:mod:`kernels.nvidia.ws_cp_producer`) runs on the same ring: its
copies are the per-role model's (:mod:`kernels.verify.gate_cp_ring`: pending until each
thread's ``cp.async.mbarrier.arrive.noinc``, stamped with the phase it joins); the dataflow
takes their identities as they are (``cta.copied_ids``) where a box's are read back by
``Ring.box_coords``; a consumer's ``fence.proxy.async`` is the ring's too (:meth:`~kernels
.verify.ring_steps.Ring.fence`: without it after the wait, a wgmma reading a copy is a race);
the Q anchor comes from the Q copies the ``bQ`` wait orders; and the static pass also runs on
the producer role (the copies' index math, bounds, banks and GQA heads).

The printed text of these kernels is checked beside this engine by
:mod:`kernels.verify.printed_ws` (:func:`kernels.verify.verifier.verify` with ``source``).
Named barriers between the consumers (the ping-pong, :mod:`kernels.nvidia.ws_pingpong`) are
run beside the lockstep data by :mod:`kernels.verify.ring_pingpong`: the walk takes a branch
that splits the consumer warpgroups but guards only named barriers for every thread's data
and records each warpgroup's own protocol sequence, which a second CTA of the per-role model
replays with the producer as three agents (the group named-barrier rule, deadlocks, the turn
rule); any other split is refused.  :data:`NAMED_BARRIERS` says so to the plan's probe.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..ir.attention import LetMinMax
from ..ir.core import Comment, If, Let, Loop, Param, sym, walk
from ..ir.nvidia import CpAsync
from ..ir.nvidia_tma import (WARPGROUP, MbarrierArrive, MbarrierWait, NamedBarrier,
                             RoleBranch, Setmaxnreg, VarSet)
from ..ir.nvidia_wgmma import FenceProxyAsync, WgmmaCommit, WgmmaMma, WgmmaWait
from .attention_dataflow import AttentionDataflow
from .attention_ids import encode_ids
from .attention_static import (AttentionStatic, Instance, default_instances, eval_expr,
                               grid_blocks, let_value)
from .gate_common import Fail
from .gate_cp_ring import anchor_loads
from .gate_tma_data import Stop
from .ring_carried import (assigns_carried, carried_names, carry_back, declared_ranges,
                           masked_set, out_of_range)
from .ring_pingpong import PingPong, has_pingpong, is_barrier_branch
from .ring_steps import RING_SCHEDULES, Ring
from .spec import KernelSpec

__all__ = ["RingDataflow", "RingStatic", "verify_ws_attention", "WS_ATTENTION_CHECKS",
           "NAMED_BARRIERS"]

#: whether the engine runs the consumers' named barriers (the ping-pong): it does (ring_pingpong)
NAMED_BARRIERS = True
#: the checks one run of this engine decides (the attention dataflow's and the ring's)
WS_ATTENTION_CHECKS = ("emitted_index_math", "vector_widths", "coverage", "lane_mfma_operands", "cross_lane_reductions", "online_softmax",
                       "masking_and_tile_skipping", "lane_accumulator_writeback", "lds_races",
                       "in_bounds", "mbarrier_protocol", "register_budget")


class RingDataflow(AttentionDataflow):
    """The consumer warpgroups of ``k`` as one lockstep attention dataflow on ``ring``."""

    def __init__(self, k: Any, inst: Instance, block: Any, kw: int, spec: KernelSpec,
                 ring: Ring, replay: bool = True) -> None:
        view = dataclasses.replace(k, block=len(ring.consumers) * WARPGROUP)
        super().__init__(view, inst, block, ring.f, kw, spec)
        self.ring = ring
        # the ping-pong's named barriers: recorded per warpgroup, replayed as three agents
        self.pp = PingPong(ring) if has_pingpong(k) else None
        self.replay = replay
        # element identities name spec tensors (the kernel's parameters are tensor maps)
        self.tensor = {t.name: i + 1 for i, t in enumerate(spec.tensors)}
        self.synced = 0
        # loop-carried variables (VarInit / VarSet: the persistent ring counter, ring_carried)
        self.carried = carried_names(k.body)
        self.carried_ranges = declared_ranges(k, inst.values, inst.grid)

    def env0(self) -> Dict[Any, Any]:
        env = super().env0()
        env[sym("tid")] = self.ring.lo + np.arange(self.T)
        return env

    def run(self) -> None:
        """Walk the consumer role, then let the producer finish (the ring's end checks); a
        failure that stops the walk is recorded in ``ring.f``."""
        try:
            self.stmts(self.ring.body, self.env0())
            if self.pp is not None and self.replay:
                self.pp.replay()
            self.ring.finish()
        except Stop:
            pass

    def sync(self) -> None:
        """Copy what the producer's boxes wrote since the last call into the shared
        identities the dataflow reads."""
        cta = self.ring.cta
        if len(cta.tokens) == self.synced:
            return
        for buf, tok in cta.tok.items():
            el = np.nonzero(tok >= self.synced)[0]
            if el.size == 0:
                continue
            copied, ids = cta.copied_ids(buf, el)     # cp.async copies (gate_cp_ring)
            self.lds[buf][el[copied]] = ids[copied]
            el = el[~copied]
            if el.size == 0:
                continue
            tensor, co, zero = self.ring.box_coords(buf, el)
            dims = self.spec.tensor(tensor).dims
            heads = self.HK if tensor in self.roles.kv_tensors else self.H
            bh = co[dims[3]] * heads + co[dims[2]]
            self.lds[buf][el] = encode_ids(self.tensor[tensor], bh, co[dims[0]], co[dims[1]],
                                           zero)
        self.synced = len(cta.tokens)

    def stmts(self, body, env) -> None:
        r = self.ring
        for s in body:
            if isinstance(s, Comment):
                continue
            r.count(s)
            if isinstance(s, RoleBranch):
                c = np.asarray(eval_expr(s.cond, env))
                if c.ndim and (c != c.flat[0]).any():
                    self.fail("mbarrier_protocol", f"role {s.role}'s branch splits the "
                                                   "lockstep consumer warpgroups")
                    raise Stop()
                if c.flat[0]:
                    r.enter(s)
                    self.stmts(s.body, env)
                    r.leave(s)
            elif isinstance(s, NamedBarrier) and self.pp is not None:
                self.pp.barrier(s, env)           # no data: the protocol's, per warpgroup
            elif is_barrier_branch(s) and self.pp is not None:
                self.pp.branch(s, env)
            elif isinstance(s, MbarrierWait):
                if self.pp is not None:
                    self.pp.record(s, env)
                r.wait(s, env)
                self.sync()
            elif isinstance(s, MbarrierArrive):
                if self.pp is not None:
                    self.pp.record(s, env)
                r.arrive(s, env)
            elif isinstance(s, Setmaxnreg):
                r.setmaxnreg(s, env)
            elif isinstance(s, If) and assigns_carried(s) and not is_barrier_branch(s):
                if self._wg is not None:
                    self.wg_effects(s, env)
                self.carried_if(s, env)
            elif isinstance(s, WgmmaMma):
                if self.pp is not None:
                    self.pp.record(s, env)
                self.sync()
                r.wgmma(s, env)
                super().stmts([s], env)
            elif isinstance(s, WgmmaCommit):
                r.commit()
                super().stmts([s], env)
            elif isinstance(s, FenceProxyAsync):
                r.fence(env)
                super().stmts([s], env)
            elif isinstance(s, WgmmaWait):
                r.retire(s)
                super().stmts([s], env)
            else:
                super().stmts([s], env)


    def after_iteration(self, loop: Loop, env: Dict[Any, Any], inner: Dict[Any, Any]) -> None:
        """A loop assigning a carried variable: each iteration's carried values copied back
        and checked against their declared ranges (:mod:`.ring_carried`)."""
        if assigns_carried(loop):
            carry_back(env, inner, self.carried)
            self.check_carried(env)

    def carried_if(self, s: If, env: Dict[Any, Any]) -> None:
        """A branch assigning a carried variable: taken by every consumer warpgroup or by
        none (a split refused), its carried values copied back."""
        c = np.asarray(eval_expr(s.cond, env))
        if c.ndim and (c != c.flat[0]).any():
            self.fail("mbarrier_protocol", f"if ({s.cond}) assigns a loop-carried variable "
                                           "and is not uniform over the consumer warpgroups")
            raise Stop()
        if c.flat[0]:
            inner = dict(env)
            self.stmts(s.body, inner)
            carry_back(env, inner, self.carried)
            self.check_carried(env)

    def check_carried(self, env: Dict[Any, Any]) -> None:
        """Each carried variable inside the range the kernel declares (:mod:`.ring_carried`)."""
        why = out_of_range(env, self.carried, self.carried_ranges)
        if why is not None:
            self.fail("in_bounds", why)
            raise Stop()


class RingStatic(AttentionStatic):
    """The attention gate's static pass (every block x iteration x thread: the O stores'
    index math, bounds, vector widths and coverage) on the consumer view of ``k``: the
    top-level lets and the consumer role's body, ``tid`` the consumer threads' ids.  The
    thread's (batch, head) anchor is the plane of the Q box its ``bQ`` wait observes (there is
    no Q load to take it from)."""

    def __init__(self, k: Any, inst: Instance, arch: str, f: Fail, spec: KernelSpec,
                 lo: int, threads: int, role: str = "consumer") -> None:
        body: List[Any] = []
        for s in k.body:
            if isinstance(s, RoleBranch):
                if s.role == role:
                    body += s.body
            elif isinstance(s, (Let, LetMinMax, Comment)):
                body.append(s)
        view = dataclasses.replace(k, block=threads, body=body,
                                   params=[p for p in k.params if isinstance(p, Param)])
        super().__init__(view, inst, arch, f, {}, spec)
        self.env[sym("tid")] = lo + np.arange(threads).reshape(1, threads)
        # the Q loads a wait orders: TMA boxes or the producer's cp.async copies
        self.q_boxes = anchor_loads(k, self.roles.anchor)
        self.carried = carried_names(body)

    def stmts(self, body, env, active, where) -> None:
        for s in body:
            if isinstance(s, NamedBarrier) or is_barrier_branch(s):
                continue        # no index math: the ping-pong's (ring_pingpong)
            if isinstance(s, VarSet):       # the active blocks' value only (ring_carried)
                masked_set(env, s.name, let_value(s, env), active)
            elif isinstance(s, If) and assigns_carried(s):
                self.carried_if(s, env, active, where)
            elif isinstance(s, MbarrierWait):
                for box in (b for b in self.q_boxes if b.bar == s.bar):
                    shape = (self.nb, self.k.block)
                    head, bat = (np.broadcast_to(np.asarray(eval_expr(c, env), dtype=np.int64),
                                                 shape) for c in box.coords)
                    H = self.inst.values["heads"]
                    self.qbh = np.where(np.broadcast_to(active, shape), bat * H + head,
                                        getattr(self, "qbh", np.full(shape, -1)))
            else:
                super().stmts([s], env, active, where)


    def after_iteration(self, loop: Loop, env: Dict[Any, Any], inner: Dict[Any, Any]) -> None:
        """A loop assigning a carried variable: each iteration's carried values copied back
        (:mod:`.ring_carried`)."""
        if assigns_carried(loop):
            carry_back(env, inner, self.carried)

    def carried_if(self, s: If, env: Dict[Any, Any], active: Any, where: str) -> None:
        """A branch assigning a carried variable, block-uniform as the base pass requires,
        its carried values copied back."""
        cond = np.asarray(eval_expr(s.cond, env))
        if cond.ndim == 2 and cond.shape[1] > 1:      # as the base pass: block-uniform
            self.f.add("lds_races", f"if ({s.cond}): condition depends on the thread")
            cond = cond[:, :1]
        cond = np.broadcast_to(cond, (self.nb, 1))
        inner = dict(env)
        self.stmts(s.body, inner, active & cond, where)
        carry_back(env, inner, self.carried)


def _kw(inst: Instance, spec: KernelSpec) -> int:
    from .attention_roles import Roles
    bn = Roles.from_spec(spec).key_tile
    skv = inst.values["seqlen_kv"]
    return max(1, -(-(-(-skv // bn) * bn + bn) // 64))


def verify_ws_attention(k: Any, *, instances: Optional[Sequence[Instance]] = None,
                        arch: str = "sm_90a",
                        schedules: Sequence[str] = RING_SCHEDULES) -> Any:
    """Run the producer and the consumers' attention dataflow of ``k`` (a kernel with
    ``warpgroup_roles`` producer / consumer, consumers warpgroups 1 and 2) on every block of
    every instance (the spec's unless ``instances``), in each ring schedule; a
    :class:`~kernels.verify.gate.GateReport` with :data:`WS_ATTENTION_CHECKS`."""
    from .gate import GateReport
    t0 = time.perf_counter()
    spec = k.spec
    insts = list(instances) if instances is not None else default_instances(k)
    f = Fail()
    runs: List[str] = []
    copies = any(isinstance(s, CpAsync) for s in walk(k.body))
    for inst in insts:
        st = RingStatic(k, inst, arch, f, spec, WARPGROUP, 2 * WARPGROUP)
        st.run()
        cover = st.coverage()
        if copies:      # the cp.async producer's copies: index math, bounds, banks, GQA heads
            RingStatic(k, inst, arch, f, spec, 0, WARPGROUP, role="producer").run()
        kw = _kw(inst, spec)
        blocks = grid_blocks(inst.grid, len(k.grid_symbols))
        for sched in schedules:
            for blk in blocks:
                env0 = dict(inst.symbols())
                for name, v in zip(k.grid_symbols, blk):
                    env0[sym(name)] = v
                ring = Ring(k, spec, arch, dict(inst.values), blk[0], schedule=sched, env0=env0)
                # the ping-pong's replay does not depend on the ring schedule: once a block
                RingDataflow(k, inst, blk, kw, spec, ring, replay=sched == schedules[0]).run()
                for check, msg in ring.f.first.items():
                    f.add(check, f"{msg} [{inst.name}, {sched}]")
                if ring.f.first:
                    break
        runs.append(f"{inst.describe()}: {len(blocks)} blocks x schedules {list(schedules)}; "
                    f"stores of {cover}")
    dom = ("the producer stepped at the consumers' waits, the consumer warpgroups as one "
           "lockstep attention dataflow (every thread, loop iteration and wgmma) on "
           + "; ".join(runs))
    return GateReport(k.name, f.results(WS_ATTENTION_CHECKS, {c: dom for c in
                                                              WS_ATTENTION_CHECKS}),
                      details={"engine": "warp-specialised attention (kernels.verify."
                                         "attention_ring)"},
                      seconds=time.perf_counter() - t0)
