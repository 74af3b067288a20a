"""The per-role phase model: verify a warpgroup-specialised kernel (TMA producer, wgmma consumers;
:mod:`kernels.ir.nvidia_tma`) on instances of its runtime sizes.

The lockstep engines run every thread through the same statement at the same time and refuse a
branch that is not block-uniform.  The per-wave model of :mod:`kernels.verify.wave_phases` runs
each wave group on its own, but its synchronisation is ``s_barrier`` (the k-th barrier of every
wave is one instant), which has no arrival counts, transaction bytes or parities; mbarriers need
the model below (the same idea - each group its own program, uniform within the group - with
barrier phases and vector clocks in place of barrier counts).  Here every warpgroup is an **agent** running its own role's
statements (:class:`~kernels.ir.nvidia_tma.RoleBranch`) with its own environment (``tid`` is the
warpgroup's 128 thread ids; what must be uniform - loop bounds, barrier indices, parities,
descriptor starts, TMA coordinates - is checked to be).  Agents run as coroutines that yield
when an ``mbarrier`` wait cannot complete; a round in which no agent can move while some have
not finished is a deadlock.  Happens-before is a vector clock per agent, merged into a barrier
phase by each arrival and out of it by each wait that observes the phase (the mbarrier's
release / acquire semantics).  The rules are those of the IR module's docstring; each failure
goes to a named check (:data:`ROLE_CHECKS`).

Every CTA of every instance (``(M, N, K, ctas)`` launches of the spec's domain) is run; each
global element of C must be stored exactly once, holding its own accumulator summed over every
k < K once.  What the model does not see: timing (it checks orderings, so any interleaving the
barriers allow is covered only as far as the vector clocks order it; the agents are run in three
schedules, :data:`SCHEDULES`), the TMA unit's swizzle beyond the model of
:mod:`kernels.nvidia.tma`, and the compiled code (the GPU tests compare with the template).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..ir.core import Access, Comment, If, Let, Loop, ZeroFrag, c_eval, sym
from ..ir.nvidia_tma import (WARPGROUP, BulkCommit, BulkWait, LeaderOnly, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             NamedBarrier, RoleBranch, Setmaxnreg, TmaLoad, TmaPrefetch,
                             TmaStore)
from ..ir.nvidia_wgmma import (FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaMma, WgmmaWait,
                               operand_elements)
from ..nvidia.tma import TmaOperandLoad, tma_tile_addresses
from .gate_common import NVIDIA_SMEM_BYTES, Fail
from .spec import KernelSpec, SpecError

__all__ = ["ROLE_CHECKS", "verify_roles"]

ROLE_CHECKS = ("in_bounds", "bank_conflicts_lds_write", "coverage", "lds_capacity",
               "lane_mfma_operands", "lane_accumulator_writeback", "lds_races",
               "mbarrier_protocol", "register_budget")
_REGISTER_FILE = 65536
_SH0, _SHT = 25, 50          # an element's identity: tensor << 50 | coord0 << 25 | coord1
_INCOMPLETE = -2
_ROLE_STMT = (Setmaxnreg,)
#: the orders the agents run in: one statement each per round (producer first), then each
#: agent as far as it can before the next moves, producer first and consumers first
SCHEDULES = ("interleaved", "producer", "consumers")


class _Stop(Exception):
    """An agent cannot go on (its failure is recorded)."""


@dataclass
class _Bar:
    count: int
    pending: int
    tx: int = 0
    completed: int = 0
    clock: Dict[int, int] = field(default_factory=dict)
    phase_clocks: List[Dict[int, int]] = field(default_factory=list)


@dataclass
class _Acc:
    rows: Optional[np.ndarray] = None
    cols: Optional[np.ndarray] = None
    kcount: Dict[int, int] = field(default_factory=dict)
    zeroed: bool = False


class _Agent:
    def __init__(self, wg: int) -> None:
        self.wg = wg
        self.role: Optional[str] = None
        self.roles: List[str] = []
        self.clock = 0
        self.vc: Dict[int, int] = {}
        self.obs: Dict[Tuple[str, int], int] = {}
        self.leader = False
        self.stmts_in_role = 0
        self.setmaxnreg: List[Setmaxnreg] = []
        self.open: List[Tuple[str, np.ndarray, str]] = []
        self.groups: List[List[Tuple[str, np.ndarray, str]]] = []
        self.acc: Dict[str, _Acc] = {}
        self.unfenced: set = set()
        self.bulk_open: List[Tuple[str, np.ndarray]] = []
        self.bulk_groups: List[List[Tuple[str, np.ndarray]]] = []
        self.bulk_unwaited = 0
        self.named_ids: set = set()
        self.waiting: str = ""
        self.done = False


class _Cta:
    """One CTA of one instance: shared memory identities, barriers, agents."""

    def __init__(self, g: "_Gate", values: Dict[str, int], bx: int, order: str) -> None:
        self.g, self.k, self.f = g, g.k, g.f
        self.values, self.bx, self.order = values, bx, order
        self.where0 = (f"instance {', '.join(f'{a}={v}' for a, v in values.items())}, "
                       f"CTA {bx} ({order} first)")
        T = self.k.block
        if T % WARPGROUP:
            raise SpecError(f"kernel {self.k.name}: {T} threads are not whole warpgroups")
        self.agents = [_Agent(w) for w in range(T // WARPGROUP)]
        self.smem = {s.name: np.full(s.count, -1, np.int64) for s in self.k.shared}
        self.tok = {s.name: np.full(s.count, -1, np.int64) for s in self.k.shared}
        self.gen = {s.name: np.zeros(s.count, np.int8) for s in self.k.shared}
        self.writer = {s.name: np.full(s.count, -1, np.int16) for s in self.k.shared}
        self.pend = {s.name: np.zeros(s.count, np.int8) for s in self.k.shared}
        self.rd = {s.name: np.zeros((len(self.agents), s.count)) for s in self.k.shared}
        self.tokens: List[Tuple[Tuple[str, int], int]] = []
        self.bars: Dict[Tuple[str, int], _Bar] = {}
        self.named: Dict[int, int] = {}

    # ---- helpers ---------------------------------------------------------------------------
    def where(self, a: _Agent, what: str, env: Dict[Any, Any]) -> str:
        loops = ", ".join(f"{n}={int(np.asarray(env[sym(n)]).flat[0])}"
                          for n in self.g.loop_vars if sym(n) in env)
        return f"{self.where0}, warpgroup {a.wg} ({a.role}){', ' + loops if loops else ''}: {what}"

    def uni(self, a: _Agent, e: Any, env: Dict[Any, Any], what: str) -> int:
        v = np.asarray(c_eval(e, env))
        if v.ndim == 0:
            return int(v)
        if a.leader:
            return int(v.flat[0])
        if (v != v.flat[0]).any():
            self.f.add("mbarrier_protocol", self.where(a, f"{what} is not uniform over the "
                                                          "warpgroup", env))
            raise _Stop()
        return int(v.flat[0])

    def bar(self, a: _Agent, name: str, idx: int, env: Dict[Any, Any], what: str) -> _Bar:
        b = self.bars.get((name, idx))
        if b is None:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{what} on mbarrier {name}[{idx}], which no MbarrierInit before the init "
                   f"fence created (arrays: {sorted({n for n, _ in self.bars})})", env))
            raise _Stop()
        return b

    def arrive(self, a: _Agent, key: Tuple[str, int], b: _Bar, n: int, env) -> None:
        a.vc[a.wg] = a.clock
        for k_, v in a.vc.items():
            b.clock[k_] = max(b.clock.get(k_, 0), v)
        b.pending -= n
        if b.pending < 0:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{-b.pending} arrival(s) more than the count {b.count} on {key[0]}"
                   f"[{key[1]}] in phase {b.completed}", env))
            b.pending = 0
        self.complete(key, b)

    def complete(self, key: Tuple[str, int], b: _Bar) -> None:
        if b.pending == 0 and b.tx == 0:
            b.phase_clocks.append(b.clock)
            b.completed += 1
            b.pending, b.clock = b.count, {}

    # ---- running one agent -------------------------------------------------------------------
    def run(self, a: _Agent, body: List[Any], env: Dict[Any, Any]) -> Iterator[None]:
        for s in body:
            yield from self.stmt(a, s, env)

    def stmt(self, a: _Agent, s: Any, env: Dict[Any, Any]) -> Iterator[None]:
        if isinstance(s, Comment):
            return
        if a.role is not None and not isinstance(s, _ROLE_STMT):
            a.stmts_in_role += 1
        if isinstance(s, RoleBranch):
            yield from self.role(a, s, env)
        elif isinstance(s, LeaderOnly):
            mask = np.broadcast_to(np.asarray(c_eval(s.cond, env)), (WARPGROUP,))
            if a.leader or mask.sum() != 1 or not mask[0]:
                self.f.add("mbarrier_protocol", self.where(a, "a leader-only block not run by "
                                                              "exactly the first thread", env))
                raise _Stop()
            a.leader = True
            yield from self.run(a, s.body, env)
            a.leader = False
        elif isinstance(s, Let):
            env[sym(s.name)] = c_eval(s.expr, env)
        elif isinstance(s, Loop):
            lo = self.uni(a, s.start, env, f"loop {s.var}'s start")
            hi = self.uni(a, s.stop, env, f"loop {s.var}'s bound")
            for v in range(lo, hi):
                env[sym(s.var)] = v
                yield from self.run(a, s.body, env)
            env.pop(sym(s.var), None)
        elif isinstance(s, If):
            if self.uni(a, s.cond, env, "a branch condition"):
                yield from self.run(a, s.body, env)
        elif isinstance(s, MbarrierWait):
            yield from self.wait(a, s, env)
        else:
            self.action(a, s, env)
            if self.order == "interleaved":
                yield None          # one statement per agent per round

    def role(self, a: _Agent, s: RoleBranch, env) -> Iterator[None]:
        mask = np.broadcast_to(np.asarray(c_eval(s.cond, env)), (WARPGROUP,))
        if mask.any() != mask.all():
            self.f.add("mbarrier_protocol", self.where(a, f"role {s.role}'s branch splits the "
                                                          "warpgroup", env))
            raise _Stop()
        if not mask.all():
            return
        if a.role is not None:
            self.f.add("mbarrier_protocol", self.where(a, f"runs role {s.role} inside role "
                                                          f"{a.role}", env))
            raise _Stop()
        if s.role not in self.g.spec.warpgroup_roles:
            self.f.add("mbarrier_protocol", self.where(a, f"role {s.role!r} is not one of the "
                                                          f"spec's {self.g.spec.warpgroup_roles}",
                                                       env))
        a.role = s.role
        a.roles.append(s.role)
        yield from self.run(a, s.body, env)
        a.role = "after " + s.role

    def wait(self, a: _Agent, s: MbarrierWait, env) -> Iterator[None]:
        idx = self.uni(a, s.index, env, "the wait's barrier index")
        par = self.uni(a, s.parity, env, "the wait's parity")
        key = (s.bar, idx)
        b = self.bar(a, s.bar, idx, env, "wait")
        if par not in (0, 1):
            self.f.add("mbarrier_protocol", self.where(a, f"wait parity {par} (0 or 1)", env))
            raise _Stop()
        while b.completed % 2 == par:
            a.waiting = self.where(a, f"waits on {s.bar}[{idx}] parity {par} (phase "
                                      f"{b.completed} has {b.count - b.pending} of {b.count} "
                                      f"arrivals, {b.tx} transaction bytes outstanding)", env)
            yield None
        a.waiting = ""
        q = b.completed - 1
        last = a.obs.get(key, -2)
        if q <= last or (last >= -1 and q > last + 1) or (last == -2 and q > 0):
            why = ("a phase it had already observed (the parity did not advance)" if q <= last
                   else f"phase {q}, skipping phase {last + 1} (the parity is a round late)")
            self.f.add("mbarrier_protocol", self.where(a, f"the wait on {s.bar}[{idx}] parity "
                                                          f"{par} observes {why}", env))
        a.obs[key] = max(q, last)
        if q >= 0:
            for k_, v in b.phase_clocks[q].items():
                a.vc[k_] = max(a.vc.get(k_, 0), v)

    # ---- statements without control flow ---------------------------------------------------
    def action(self, a: _Agent, s: Any, env) -> None:
        if isinstance(s, Setmaxnreg):
            if a.leader or a.role is None or a.stmts_in_role:
                self.f.add("register_budget", self.where(a, "setmaxnreg must be the first "
                                                            "statement of a role, run by the "
                                                            "whole warpgroup", env))
            a.setmaxnreg.append(s)
        elif isinstance(s, (MbarrierInit, MbarrierInitFence)):
            self.f.add("mbarrier_protocol", self.where(a, "mbarriers are initialised at the "
                                                          "top of the kernel, before any role",
                                                       env))
        elif isinstance(s, MbarrierExpectTx):
            idx = self.uni(a, s.index, env, "expect_tx's barrier index")
            b = self.bar(a, s.bar, idx, env, "arrive.expect_tx")
            b.tx += int(s.bytes) * (1 if a.leader else WARPGROUP)
            self.arrive(a, (s.bar, idx), b, 1 if a.leader else WARPGROUP, env)
        elif isinstance(s, MbarrierArrive):
            idx = self.uni(a, s.index, env, "the arrive's barrier index")
            b = self.bar(a, s.bar, idx, env, "arrive")
            n = 1 if a.leader else (4 if s.per_warp else WARPGROUP)
            self.arrive(a, (s.bar, idx), b, n, env)
        elif isinstance(s, TmaPrefetch):
            pass
        elif isinstance(s, TmaLoad):
            self.tma_load(a, s, env)
        elif isinstance(s, TmaStore):
            self.tma_store(a, s, env)
        elif isinstance(s, BulkCommit):
            a.bulk_groups.append(a.bulk_open)
            a.bulk_open = []
            a.bulk_unwaited += 1
        elif isinstance(s, BulkWait):
            for grp in a.bulk_groups:
                for buf, el in grp:
                    self.pend[buf][el] = 2          # read; the other threads need a barrier
            a.bulk_groups = []
            if not s.read:
                a.bulk_unwaited = 0
        elif isinstance(s, NamedBarrier):
            self.named_barrier(a, s, env)
        elif isinstance(s, FenceProxyAsync):
            for buf in self.gen:
                m = (self.gen[buf] == 1) & (self.writer[buf] == a.wg)
                self.gen[buf][m] = 2
        elif isinstance(s, WgmmaFence):
            a.unfenced.clear()
        elif isinstance(s, WgmmaCommit):
            a.groups.append(a.open)
            a.open = []
        elif isinstance(s, WgmmaWait):
            self.wgmma_wait(a, s, env)
        elif isinstance(s, WgmmaMma):
            self.wgmma(a, s, env)
        elif isinstance(s, ZeroFrag):
            self.acc_busy(a, s.frag.name, env, "zeroes")
            a.acc[s.frag.name] = _Acc(zeroed=True)
            a.unfenced.add(s.frag.name)
        elif isinstance(s, Access):
            self.c_store(a, s, env)
        else:
            self.f.add("mbarrier_protocol", self.where(a, f"{type(s).__name__} has no meaning "
                                                          "on the per-role model", env))
            raise _Stop()

    def named_barrier(self, a: _Agent, s: NamedBarrier, env) -> None:
        i = self.uni(a, s.id, env, "the named barrier's id")
        owner = self.named.setdefault(i, a.wg)
        if s.threads != WARPGROUP or i < 1 or owner != a.wg:
            self.f.add("lds_races", self.where(
                a, f"bar.sync {i}, {s.threads}: a warpgroup's barrier is 128 threads on an id "
                   f">= 1 of its own (id {i} is warpgroup {owner}'s)", env))
        for buf in self.gen:
            m = (self.gen[buf] == 2) & (self.writer[buf] == a.wg)
            self.gen[buf][m] = 0
            self.pend[buf][(self.pend[buf] == 2) & (self.writer[buf] == a.wg)] = 0

    # ---- TMA ---------------------------------------------------------------------------------
    def box(self, a: _Agent, tm: Any, buf: str, offset: Any, env, what: str) -> np.ndarray:
        off = self.uni(a, offset, env, f"{what}'s shared offset")
        if (off * 2) % 1024:
            self.f.add("in_bounds", self.where(a, f"{what} at {buf}[{off}]: byte {off * 2} is "
                                                  "not on the 1024-byte swizzle repeat the TMA "
                                                  "model needs", env))
            raise _Stop()
        el = off + tma_tile_addresses(TmaOperandLoad(tm.box_outer, tm.box_inner)) // 2
        n = self.smem[buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{what} writes {buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            raise _Stop()
        return el

    def coords(self, tm: Any, c0: int, c1: int, env) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Spec coordinates (d0, d1) of the box's (row, col) elements and their out-of-range
        mask (the TMA zero fill / store clip)."""
        r, c = np.meshgrid(np.arange(tm.box_outer), np.arange(tm.box_inner), indexing="ij")
        inner, outer = c0 + c, c1 + r
        ie, oe = int(c_eval(tm.inner, env)), int(c_eval(tm.outer, env))
        oob = (inner < 0) | (inner >= ie) | (outer < 0) | (outer >= oe)
        dims = self.g.spec.tensor(tm.tensor).dims
        by = {tm.dims[0]: inner, tm.dims[1]: outer}
        return by[dims[0]], by[dims[1]], oob

    def tma_load(self, a: _Agent, s: TmaLoad, env) -> None:
        if not a.leader:
            self.f.add("mbarrier_protocol", self.where(a, f"{s.tag}: a TMA load issued by "
                                                          "every thread of the warpgroup", env))
            raise _Stop()
        idx = self.uni(a, s.index, env, "the box's barrier index")
        key = (s.bar, idx)
        b = self.bar(a, s.bar, idx, env, s.tag)
        el = self.box(a, s.tmap, s.dst, s.offset, env, s.tag)
        flat = el.reshape(-1)
        for c, stamps in enumerate(self.rd[s.dst]):
            bad = stamps[flat] > a.vc.get(c, 0)
            if c != a.wg and bad.any():
                i = int(flat[np.argmax(bad)])
                state = "still in flight" if np.isinf(stamps[i]) else "retired"
                self.f.add("lds_races", self.where(
                    a, f"{s.tag} overwrites {s.dst}[{i}], which warpgroup {c}'s wgmma read "
                       f"({state}) with no wait since on a phase that warpgroup released the "
                       "stage on after retiring the read", env))
                break
        d0, d1, oob = self.coords(s.tmap, self.uni(a, s.c0, env, "c0"),
                                  self.uni(a, s.c1, env, "c1"), env)
        t = self.g.tensor_id[s.tmap.tensor]
        self.smem[s.dst][el] = (t << _SHT) | (np.maximum(d0, 0) << _SH0) | np.maximum(d1, 0)
        self.smem[s.dst][el[oob]] |= 1 << 62
        self.tokens.append((key, b.completed))
        self.tok[s.dst][el] = len(self.tokens) - 1
        b.tx -= s.tmap.box_bytes
        if b.tx < 0:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{s.tag}: the boxes on {s.bar}[{idx}] phase {b.completed} bring "
                   f"{-b.tx} bytes more than its expect_tx announced (the phase can complete "
                   "before they land)", env))
            b.tx = 0
        self.complete(key, b)

    def tma_store(self, a: _Agent, s: TmaStore, env) -> None:
        if not a.leader:
            self.f.add("lds_races", self.where(a, f"{s.tag}: a TMA store issued by every thread",
                                               env))
            raise _Stop()
        el = self.box(a, s.tmap, s.src, s.offset, env, s.tag)
        flat = el.reshape(-1)
        gen = self.gen[s.src][flat]
        if gen.any():
            i = int(flat[np.argmax(gen > 0)])
            why = ("with no fence.proxy.async after it" if gen.max() == 1 else
                   "fenced but not published to the storing thread by a barrier")
            self.f.add("lds_races", self.where(a, f"{s.tag} (async proxy) reads {s.src}[{i}], "
                                                  f"written through the generic proxy {why}", env))
        m, n, oob = self.coords(s.tmap, self.uni(a, s.c0, env, "c0"),
                                self.uni(a, s.c1, env, "c1"), env)
        ids = self.smem[s.src][el]
        keep = ~oob
        want = (self.g.tensor_id[s.tmap.tensor] << _SHT) | (m << _SH0) | n
        if (ids[keep] == -1).any():
            self.f.add("lds_races", self.where(a, f"{s.tag} stores C elements never written to "
                                                  f"{s.src}", env))
        elif (ids[keep] == _INCOMPLETE).any():
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores an accumulator not summed over every k < K exactly once "
                   f"({self.g.incomplete.get(a.wg, '')})", env))
        elif (ids[keep] != want[keep]).any():
            j = np.argwhere(keep & (ids != want))[0]
            got = int(ids[tuple(j)])
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores C[{int(m[tuple(j)])}, {int(n[tuple(j)])}] from a shared "
                   f"element holding C[{(got >> _SH0) & ((1 << 25) - 1)}, "
                   f"{got & ((1 << 25) - 1)}]", env))
        self.g.cover[m[keep], n[keep]] += 1
        self.pend[s.src][flat] = 1
        self.writer[s.src][flat] = a.wg
        a.bulk_open.append((s.src, flat))

    # ---- wgmma -------------------------------------------------------------------------------
    def acc_busy(self, a: _Agent, frag: str, env, what: str) -> None:
        for grp in a.groups + [a.open]:
            if any(f == frag for _, _, f in grp):
                self.f.add("lane_accumulator_writeback", self.where(
                    a, f"{what} {frag} while a wgmma writing it is in flight (no "
                       "wgmma.wait_group retired its group)", env))
                return

    def wgmma_wait(self, a: _Agent, s: WgmmaWait, env) -> None:
        while len(a.groups) > s.pending:
            grp = a.groups.pop(0)
            a.clock += 1
            for buf, el, frag in grp:
                self.rd[buf][a.wg][el] = a.clock
                if frag not in s.pins:
                    self.f.add("lane_accumulator_writeback", self.where(
                        a, f"wgmma.wait_group retires a wgmma into {frag} without pinning it "
                           "(lg_pin)", env))

    def operand(self, a: _Agent, op: Any, s: WgmmaMma, env) -> Optional[np.ndarray]:
        start = self.uni(a, op.start, env, f"{s.tag}'s {op.buf} descriptor start")
        try:
            el = operand_elements(op, start)
        except ValueError as e:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}, {op.buf}: {e}", env))
            return None
        n = self.smem[op.buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{s.tag} reads {op.buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            return None
        tok = self.tok[op.buf][el]
        if (tok < 0).any():
            self.f.add("lds_races", self.where(a, f"{s.tag} reads {op.buf}"
                                                  f"[{int(el.reshape(-1)[np.argmax(tok.reshape(-1) < 0)])}]"
                                                  " before anything was written", env))
            return None
        for t in np.unique(tok):
            key, ph = self.tokens[int(t)]
            if a.obs.get(key, -2) < ph:
                self.f.add("lds_races", self.where(
                    a, f"{s.tag} reads {op.buf} elements whose box completes on {key[0]}"
                       f"[{key[1]}] phase {ph}, which this warpgroup has not waited on", env))
                return None
        self.rd[op.buf][a.wg][el.reshape(-1)] = np.inf
        a.open.append((op.buf, el.reshape(-1), s.acc.frag.name))
        return self.smem[op.buf][el]

    def wgmma(self, a: _Agent, s: WgmmaMma, env) -> None:
        fr = s.acc.frag.name
        if fr in a.unfenced:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {fr} was written since "
                                                           "the last wgmma.fence", env))
            a.unfenced.discard(fr)
        A, B = self.operand(a, s.a, s, env), self.operand(a, s.b, s, env)
        if A is None or B is None:
            return
        A, B = A & ~(1 << 62), B & ~(1 << 62)
        ta, tb = self.g.tensor_id["A"], self.g.tensor_id["B"]
        if ((A >> _SHT) != ta).any() or ((B >> _SHT) != tb).any():
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: operand elements hold "
                                                           "another tensor's", env))
            return
        mask = (1 << 25) - 1
        am, ak = (A >> _SH0) & mask, A & mask
        bn, bk = (B >> _SH0) & mask, B & mask
        for nm, rows in (("A", am), ("B", bn)):
            if (rows != rows[:, :1]).any():
                i = int(np.argwhere(rows != rows[:, :1])[0][0])
                self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {nm} operand row {i} "
                                                               "mixes rows of the tensor", env))
                return
        kq = ak[0]
        if (ak != kq[None]).any() or (bk != kq[None]).any() or len(set(kq.tolist())) != 16:
            self.f.add("lane_mfma_operands", self.where(
                a, f"{s.tag}: the 16 reduction slots pair A's k {ak[0].tolist()} with B's k "
                   f"{bk[0].tolist()}", env))
            return
        st = a.acc.get(fr)
        if st is None or not st.zeroed:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {fr} used before it was "
                                                           "zeroed", env))
            return
        if st.rows is None:
            st.rows, st.cols = am[:, 0].copy(), bn[:, 0].copy()
        elif not (np.array_equal(st.rows, am[:, 0]) and np.array_equal(st.cols, bn[:, 0])):
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: the accumulators held "
                                                           "other C elements than this wgmma "
                                                           "adds into", env))
            return
        for k_ in kq.tolist():
            st.kcount[k_] = st.kcount.get(k_, 0) + 1

    def c_store(self, a: _Agent, s: Access, env) -> None:
        """A consumer thread's accumulator pair -> the shared C buffer (the TMA store's
        source); identity: the C element the accumulator holds (incomplete sums marked)."""
        if (s.kind, s.space) != ("store", "lds") or a.leader:
            self.f.add("lds_races", self.where(a, f"{s.tag}: only warpgroup-wide shared stores "
                                                  "of accumulators are modelled", env))
            raise _Stop()
        fr = s.regs.frag.name
        self.acc_busy(a, fr, env, "stores")
        off = np.broadcast_to(np.asarray(c_eval(s.offset, env), dtype=np.int64), (WARPGROUP,))
        n = self.smem[s.buf].shape[0]
        el = off[:, None] + np.arange(s.width)[None, :]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{s.tag} writes {s.buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            return
        words = (off * 2) // 4
        for w in range(WARPGROUP // 32):
            banks = set((words[32 * w:32 * w + 32] % 32).tolist())
            if len(banks) != 32 or ((off[32 * w:32 * w + 32] * 2) % (2 * s.width)).any():
                self.f.add("bank_conflicts_lds_write", self.where(
                    a, f"{s.tag}: warp {w}'s {2 * s.width}-byte stores hit {len(banks)} banks "
                       "(or are misaligned)", env))
                break
        flat = el.reshape(-1)
        busy = self.pend[s.buf][flat]
        if busy.any():
            i = int(flat[np.argmax(busy > 0)])
            why = ("a bulk store not yet waited on still reads it" if busy.max() == 1 else
                   "the bulk wait has not been published by a barrier")
            self.f.add("lds_races", self.where(a, f"{s.tag} rewrites {s.buf}[{i}]: {why}", env))
        st = a.acc.get(fr)
        ids = np.full(el.shape, _INCOMPLETE, np.int64)
        if st is not None and st.rows is not None:
            K = self.values["K"]
            bad = [k_ for k_, c in st.kcount.items() if c != 1 or k_ < 0]
            miss = [k_ for k_ in range(K) if k_ not in st.kcount]
            if not bad and not miss:
                ci, cj = self.g.acc_table(s)
                rows = st.rows[ci[:, list(s.regs.idx)]]
                cols = st.cols[cj[:, list(s.regs.idx)]]
                ids = (self.g.tensor_id["C"] << _SHT) | (rows << _SH0) | cols
            else:
                self.g.incomplete[a.wg] = (
                    f"k {bad[:3]} summed {[st.kcount[x] for x in bad[:3]]} times" if bad
                    else f"k {miss[:3]} never summed")
        self.smem[s.buf][el] = ids
        self.gen[s.buf][flat] = 1
        self.writer[s.buf][flat] = a.wg

    # ---- the schedule --------------------------------------------------------------------------
    def simulate(self, body: List[Any], env0: Dict[Any, Any]) -> None:
        gens = []
        for a in self.agents:
            env = dict(env0)
            env[sym("tid")] = np.arange(a.wg * WARPGROUP, (a.wg + 1) * WARPGROUP)
            gens.append(self.run(a, body, env))
        live = list(range(len(self.agents)))
        if self.order == "consumers":
            live = live[1:] + live[:1]
        while live:
            moved = False
            for i in list(live):
                a = self.agents[i]
                before = (a.waiting, sum(b.completed for b in self.bars.values()), a.clock)
                try:
                    next(gens[i])
                except StopIteration:
                    a.done = True
                    live.remove(i)
                    moved = True
                    continue
                except _Stop:
                    a.done = True
                    live.remove(i)
                    return
                if (a.waiting, sum(b.completed for b in self.bars.values()), a.clock) != before \
                        or not a.waiting:
                    moved = True
            if not moved:
                stuck = "; ".join(self.agents[i].waiting for i in live)
                self.f.add("mbarrier_protocol", f"deadlock: {stuck}")
                return
        for a in self.agents:
            if a.bulk_unwaited or a.bulk_open:
                self.f.add("lds_races", f"{self.where0}: warpgroup {a.wg} ends with bulk stores "
                                        "not waited on (the CTA's shared memory may be freed "
                                        "while they read it)")
            if a.groups or a.open:
                self.f.add("lane_accumulator_writeback", f"{self.where0}: warpgroup {a.wg} ends "
                                                         "with wgmma groups in flight")
        for (nm, i), b in self.bars.items():
            if b.pending != b.count or b.tx:
                self.f.add("mbarrier_protocol", f"{self.where0}: {nm}[{i}] ends part-way "
                                                f"through phase {b.completed} ({b.count - b.pending}"
                                                f" of {b.count} arrivals, {b.tx} bytes)")


class _Gate:
    def __init__(self, k: Any, spec: KernelSpec, arch: str) -> None:
        self.k, self.spec, self.arch = k, spec, arch
        self.f = Fail()
        self.tensor_id = {t.name: i + 1 for i, t in enumerate(spec.tensors)}
        from ..ir.core import walk
        self.loop_vars = list(dict.fromkeys(s.var for s in walk(k.body) if isinstance(s, Loop)))
        self.tables: Dict[Any, Tuple[np.ndarray, np.ndarray]] = {}
        self.incomplete: Dict[int, str] = {}     # warpgroup -> why its sums are not whole
        self.cover = np.zeros((1, 1), np.int64)
        self.atoms = {s.acc.frag.name: s.atom for s in walk(k.body) if isinstance(s, WgmmaMma)}

    def acc_table(self, s: Access) -> Tuple[np.ndarray, np.ndarray]:
        atom = self.atoms[s.regs.frag.name]
        tab = self.tables.get(atom)
        if tab is None:
            lay = atom.layout_c()
            v = np.array([[lay((t, e)) for e in range(atom.acc_registers)]
                          for t in range(WARPGROUP)])
            tab = self.tables[atom] = (v % 64, v // 64)
        return tab

    def prologue(self, body: List[Any]) -> Tuple[Dict[Tuple[str, int], Tuple[int]], List[Any]]:
        """The barriers the top level initialises before its init fence (none if no fence
        comes before the roles), and the body the agents run (without the initialisation)."""
        inits: Dict[Tuple[str, int], Tuple[int]] = {}
        for s in body:
            if isinstance(s, MbarrierInit):
                for j in range(s.n):
                    inits[(s.bar, j)] = (s.count,)
            elif isinstance(s, MbarrierInitFence):
                return inits, [x for x in body if not isinstance(x, (MbarrierInit,
                                                                     MbarrierInitFence))]
            elif isinstance(s, RoleBranch):
                break
        if inits:
            self.f.add("mbarrier_protocol", "mbarriers initialised with no fence.mbarrier_init "
                                            "+ __syncthreads between them and the roles")
        return {}, [x for x in body if not isinstance(x, (MbarrierInit, MbarrierInitFence))]

    def registers(self) -> None:
        total = 0
        for a in self.last_agents:
            if len(a.roles) != 1:
                self.f.add("mbarrier_protocol", f"warpgroup {a.wg} runs roles {a.roles} "
                                                "(exactly one)")
        for a in self.last_agents:
            if len(a.setmaxnreg) != 1:
                self.f.add("register_budget", f"warpgroup {a.wg} ({a.role}) runs setmaxnreg "
                                              f"{len(a.setmaxnreg)} times (once, first)")
                continue
            r = a.setmaxnreg[0].regs
            if r % 8 or not 24 <= r <= 256:
                self.f.add("register_budget", f"warpgroup {a.wg}: setmaxnreg {r} (a multiple of "
                                              "8 in 24..256)")
            total += WARPGROUP * r
        if total > _REGISTER_FILE:
            self.f.add("register_budget", f"the roles ask for {total} registers "
                                          f"({', '.join(f'wg {a.wg}: {a.setmaxnreg[0].regs}' for a in self.last_agents if a.setmaxnreg)} "
                                          f"x 128); the register file has {_REGISTER_FILE}")

    def run(self, instances: List[Dict[str, int]]) -> None:
        from ..printer.cuda import smem_bytes
        cap = NVIDIA_SMEM_BYTES.get(self.arch)
        nbars = sum(s.n for s in self.k.body if isinstance(s, MbarrierInit))
        need = smem_bytes(self.k) + 8 * nbars
        if cap is None or need > cap:
            self.f.add("lds_capacity", f"{need} bytes of shared memory (arrays + mbarriers); "
                                       f"{self.arch} allows {cap}")
        inits, body = self.prologue(self.k.body)
        self.last_agents: List[_Agent] = []
        for values in instances:
            M, N = values["M"], values["N"]
            self.cover = np.zeros((M, N), np.int64)
            env0 = {sym(k_): v for k_, v in values.items()}
            bad = False
            for order in SCHEDULES:
                self.cover = np.zeros((M, N), np.int64)
                for bx in range(values["ctas"]):
                    cta = _Cta(self, values, bx, order)
                    cta.bars = {k_: _Bar(c[0], c[0]) for k_, c in inits.items()}
                    env = dict(env0)
                    env[sym(self.k.grid_symbols[0])] = bx
                    cta.simulate(body, env)
                    self.last_agents = cta.agents
                    if self.f.first:
                        bad = True
                        break
                if bad:
                    break
                c = self.cover
                if (c != 1).any():
                    i, j = (int(x) for x in np.argwhere(c != 1)[0])
                    self.f.add("coverage", f"instance {values}: C[{i}, {j}] stored {int(c[i, j])} "
                                           f"times ({int((c == 0).sum())} elements never, "
                                           f"{int((c > 1).sum())} more than once)")
                    break
            if bad:
                break
        self.registers()


def verify_roles(k: Any, spec: KernelSpec, arch: str, instances: List[Dict[str, int]]) -> Any:
    """Run ``k`` on the per-role model at ``instances`` (dicts of the runtime symbols and
    ``ctas``); a :class:`~kernels.verify.gate.GateReport` with :data:`ROLE_CHECKS`."""
    from .gate import GateReport
    if not instances:
        raise SpecError(f"spec {spec.name}: the per-role model needs at least one instance")
    t0 = time.time()
    g = _Gate(k, spec, arch)
    g.run(list(instances))
    dom = (f"instances {[tuple(v.values()) for v in instances]} of ({', '.join(instances[0])}):"
           " every CTA, warpgroup, unit, k tile and element; schedules " + ", ".join(SCHEDULES))
    return GateReport(k.name, g.f.results(ROLE_CHECKS, {c: dom for c in ROLE_CHECKS}),
                      details={"engine": "per-role phase model (kernels.verify.gate_tma)"},
                      seconds=time.time() - t0)
