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
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from ..ir.attention import LetMinMax
from ..ir.core import Access, Comment, If, Let, Loop, ZeroFrag, c_eval, sym
from ..ir.nvidia_tma import (WARPGROUP, BulkCommit, BulkWait, LeaderOnly, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             NamedBarrier, RoleBranch, Setmaxnreg, TmaLoad, TmaPrefetch,
                             TmaStore)
from ..ir.nvidia_wgmma import FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaMma, WgmmaWait
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence
from .gate_common import NVIDIA_SM_SMEM_BYTES, NVIDIA_SMEM_BYTES, SMEM_RESERVED, Fail
from .gate_cp_ring import CP_STATEMENTS, CpRingRules
from .gate_tma_data import AccState, Agent, Bar, DataRules, Stop
from .gate_split_reduce import REDUCE_RULE, check_reduce
from .gate_tma_ticket import (TICKET_RULES, TicketLedger, TicketModel, has_tickets,
                              ticket_structure)
from .spec import KernelSpec, SpecError
from .wgmma_tables import wgmma_tables

__all__ = ["ROLE_CHECKS", "verify_roles", "role_cta"]

ROLE_CHECKS = ("in_bounds", "bank_conflicts_lds_write", "coverage", "lds_capacity",
               "lane_mfma_operands", "lane_accumulator_writeback", "lds_races",
               "mbarrier_protocol", "register_budget")
_REGISTER_FILE = 65536
_ROLE_STMT = (Setmaxnreg,)
#: the orders the agents run in: one statement each per round (producer first), then each
#: agent as far as it can before the next moves, producer first and consumers first
SCHEDULES = ("interleaved", "producer", "consumers")


class _Cta(CpRingRules, DataRules, TicketModel):
    """One CTA of one instance: shared memory identities, barriers, agents."""

    def __init__(self, g: "_Gate", values: Dict[str, int], bx: int, order: str) -> None:
        self.g, self.k, self.f = g, g.k, g.f
        self.values, self.bx, self.order = values, bx, order
        self.where0 = (f"instance {', '.join(f'{a}={v}' for a, v in values.items())}, "
                       f"CTA {bx} ({order} first)")
        T = self.k.block
        if T % WARPGROUP:
            raise SpecError(f"kernel {self.k.name}: {T} threads are not whole warpgroups")
        self.agents = [Agent(w) for w in range(T // WARPGROUP)]
        self.smem = {s.name: np.full(s.count, -1, np.int64) for s in self.k.shared}
        self.tok = {s.name: np.full(s.count, -1, np.int64) for s in self.k.shared}
        self.gen = {s.name: np.zeros(s.count, np.int8) for s in self.k.shared}
        self.writer = {s.name: np.full(s.count, -1, np.int16) for s in self.k.shared}
        self.pend = {s.name: np.zeros(s.count, np.int8) for s in self.k.shared}
        self.rd = {s.name: np.zeros((len(self.agents), s.count)) for s in self.k.shared}
        self.tokens: List[Tuple[Tuple[str, int], int]] = []
        self.bars: Dict[Tuple[str, int], Bar] = {}
        self.named: Dict[int, int] = {}
        # named barriers across warpgroups: id -> threads, (id, phase) -> warpgroups arrived
        self.group_threads: Dict[int, int] = {}
        self.group_arrived: Dict[Tuple[int, int], set] = {}

    # ---- helpers ---------------------------------------------------------------------------
    def where(self, a: Agent, what: str, env: Dict[Any, Any]) -> str:
        loops = ", ".join(f"{n}={int(np.asarray(env[sym(n)]).flat[0])}"
                          for n in self.g.loop_vars if sym(n) in env)
        return f"{self.where0}, warpgroup {a.wg} ({a.role}){', ' + loops if loops else ''}: {what}"

    def uni(self, a: Agent, e: Any, env: Dict[Any, Any], what: str) -> int:
        v = np.asarray(c_eval(e, env))
        if v.ndim == 0:
            return int(v)
        if a.leader:
            return int(v.flat[0])
        if (v != v.flat[0]).any():
            self.f.add("mbarrier_protocol", self.where(a, f"{what} is not uniform over the "
                                                          "warpgroup", env))
            raise Stop()
        return int(v.flat[0])

    def bar(self, a: Agent, name: str, idx: int, env: Dict[Any, Any], what: str) -> Bar:
        b = self.bars.get((name, idx))
        if b is None:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{what} on mbarrier {name}[{idx}], which no MbarrierInit before the init "
                   f"fence created (arrays: {sorted({n for n, _ in self.bars})})", env))
            raise Stop()
        return b

    def arrive(self, a: Agent, key: Tuple[str, int], b: Bar, n: int, env) -> None:
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

    def complete(self, key: Tuple[str, int], b: Bar) -> None:
        if b.pending == 0 and b.tx == 0:
            b.phase_clocks.append(b.clock)
            b.completed += 1
            b.pending, b.clock = b.count, {}

    # ---- running one agent -------------------------------------------------------------------
    def run(self, a: Agent, body: List[Any], env: Dict[Any, Any]) -> Iterator[None]:
        for s in body:
            yield from self.stmt(a, s, env)

    def stmt(self, a: Agent, s: Any, env: Dict[Any, Any]) -> Iterator[None]:
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
                raise Stop()
            a.leader = True
            yield from self.run(a, s.body, env)
            a.leader = False
        elif isinstance(s, Let):
            env[sym(s.name)] = c_eval(s.expr, env)
        elif isinstance(s, LetMinMax):          # the attention kernels' la_imin / la_imax
            x, y = np.asarray(c_eval(s.a, env)), np.asarray(c_eval(s.b, env))
            env[sym(s.name)] = np.minimum(x, y) if s.op == "min" else np.maximum(x, y)
        elif isinstance(s, Loop):
            lo = self.uni(a, s.start, env, f"loop {s.var}'s start")
            hi = self.uni(a, s.stop, env, f"loop {s.var}'s bound")
            for v in range(lo, hi):
                env[sym(s.var)] = v
                yield from self.run(a, s.body, env)
            env.pop(sym(s.var), None)
        elif isinstance(s, LastArrival):
            yield from self.last_arrival(a, s, env)
        elif isinstance(s, If):
            if self.uni(a, s.cond, env, "a branch condition"):
                yield from self.run(a, s.body, env)
        elif isinstance(s, MbarrierWait):
            yield from self.wait(a, s, env)
        elif isinstance(s, NamedBarrier) and (s.arrive or s.threads != WARPGROUP):
            yield from self.group_barrier(a, s, env)
            if self.order == "interleaved":
                yield None
        else:
            self.action(a, s, env)
            if self.order == "interleaved":
                yield None          # one statement per agent per round

    def role(self, a: Agent, s: RoleBranch, env) -> Iterator[None]:
        mask = np.broadcast_to(np.asarray(c_eval(s.cond, env)), (WARPGROUP,))
        if mask.any() != mask.all():
            self.f.add("mbarrier_protocol", self.where(a, f"role {s.role}'s branch splits the "
                                                          "warpgroup", env))
            raise Stop()
        if not mask.all():
            return
        if a.role is not None:
            self.f.add("mbarrier_protocol", self.where(a, f"runs role {s.role} inside role "
                                                          f"{a.role}", env))
            raise Stop()
        if s.role not in self.g.spec.warpgroup_roles:
            self.f.add("mbarrier_protocol", self.where(a, f"role {s.role!r} is not one of the "
                                                          f"spec's {self.g.spec.warpgroup_roles}",
                                                       env))
        a.role = s.role
        a.roles.append(s.role)
        yield from self.run(a, s.body, env)
        a.role = "after " + s.role

    def wait(self, a: Agent, s: MbarrierWait, env) -> Iterator[None]:
        idx = self.uni(a, s.index, env, "the wait's barrier index")
        par = self.uni(a, s.parity, env, "the wait's parity")
        key = (s.bar, idx)
        b = self.bar(a, s.bar, idx, env, "wait")
        if par not in (0, 1):
            self.f.add("mbarrier_protocol", self.where(a, f"wait parity {par} (0 or 1)", env))
            raise Stop()
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
    def action(self, a: Agent, s: Any, env) -> None:
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
            self.cp_fence(a)            # the cp.async copies it acquired (gate_cp_ring)
        elif isinstance(s, CP_STATEMENTS):
            self.cp_action(a, s, env)
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
            a.acc[s.frag.name] = AccState(zeroed=True)
            a.unfenced.add(s.frag.name)
        elif isinstance(s, (ThreadFence, AtomicTicket, CounterReset, PartialAdd)):
            self.ticket_action(a, s, env)
        elif isinstance(s, Access) and s.space == "global":
            self.global_store(a, s, env)
        elif isinstance(s, Access):
            self.c_store(a, s, env)
        else:
            self.f.add("mbarrier_protocol", self.where(a, f"{type(s).__name__} has no meaning "
                                                          "on the per-role model", env))
            raise Stop()

    def named_barrier(self, a: Agent, s: NamedBarrier, env) -> None:
        i = self.uni(a, s.id, env, "the named barrier's id")
        owner = self.named.setdefault(i, a.wg)
        if i in self.group_threads:
            self.f.add("mbarrier_protocol", self.where(
                a, f"bar.sync {i}, 128: id {i} is also a barrier across warpgroups "
                   f"({self.group_threads[i]} threads)", env))
        if s.threads != WARPGROUP or i < 1 or owner != a.wg:
            self.f.add("lds_races", self.where(
                a, f"bar.sync {i}, {s.threads}: a warpgroup's barrier is 128 threads on an id "
                   f">= 1 of its own (id {i} is warpgroup {owner}'s)", env))
        for buf in self.gen:
            m = (self.gen[buf] == 2) & (self.writer[buf] == a.wg)
            self.gen[buf][m] = 0
            self.pend[buf][(self.pend[buf] == 2) & (self.writer[buf] == a.wg)] = 0

    def group_barrier(self, a: Agent, s: NamedBarrier, env) -> Iterator[None]:
        """``bar.sync`` / ``bar.arrive`` on a barrier of several warpgroups (the rules of
        :class:`~kernels.ir.nvidia_tma.NamedBarrier`): one arrival per warpgroup per phase,
        a sync waits for its phase and acquires what its arrivals did before."""
        i = self.uni(a, s.id, env, "the named barrier's id")
        op = f"bar.{'arrive' if s.arrive else 'sync'} {i}, {s.threads}"
        T, seen = s.threads, self.group_threads.setdefault(i, s.threads)
        bad_range = T % WARPGROUP or not WARPGROUP <= T <= self.k.block or not 1 <= i <= 15
        if bad_range or seen != T or i in self.named:
            why = (f"ids are 1..15 and counts whole warpgroups up to the block's "
                   f"{self.k.block} threads" if bad_range else
                   f"id {i} is warpgroup {self.named[i]}'s own barrier" if i in self.named else
                   f"id {i} counts {seen} threads elsewhere")
            self.f.add("mbarrier_protocol", self.where(a, f"{op}: {why}", env))
            raise Stop()
        key = ("<named barrier>", i)
        b = self.bars.get(key)
        if b is None:
            b = self.bars[key] = Bar(T // WARPGROUP, T // WARPGROUP)
        phase = b.completed
        arrived = self.group_arrived.setdefault((i, phase), set())
        if a.wg in arrived:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{op}: warpgroup {a.wg} arrives twice in phase {phase} (the phase would "
                   "complete without the other warpgroups)", env))
            raise Stop()
        arrived.add(a.wg)
        self.arrive(a, key, b, 1, env)
        if s.arrive:
            return
        while b.completed <= phase:
            a.waiting = self.where(a, f"{op} waits in phase {phase} ({b.count - b.pending} of "
                                      f"{b.count} warpgroups arrived)", env)
            yield None
        a.waiting = ""
        for k_, v in b.phase_clocks[phase].items():
            a.vc[k_] = max(a.vc.get(k_, 0), v)

    # ---- the schedule --------------------------------------------------------------------------
    def simulate(self, body: List[Any], env0: Dict[Any, Any]) -> None:
        gens = []
        for a in self.agents:
            env = dict(env0)
            env[sym("tid")] = np.arange(a.wg * WARPGROUP, (a.wg + 1) * WARPGROUP)
            gens.append(self.run(a, body, env))
        self.schedule(self.agents, gens)

    def schedule(self, agents: List[Agent], gens: List[Any]) -> None:
        """Step the coroutines ``gens`` of ``agents`` round-robin, from the producer (or from
        the consumers: ``order``), until all finished -- then the end checks -- or none
        moves: a deadlock.  :meth:`simulate`'s schedule, and the ping-pong replay's
        (:mod:`.ring_pingpong`) over its recorded consumers."""
        live = list(range(len(agents)))
        if self.order == "consumers":
            live = live[1:] + live[:1]
        while live:
            moved = False
            for i in list(live):
                a = agents[i]
                before = (a.waiting, sum(b.completed for b in self.bars.values()), a.clock)
                try:
                    next(gens[i])
                except StopIteration:
                    a.done = True
                    live.remove(i)
                    moved = True
                    continue
                except Stop:
                    a.done = True
                    live.remove(i)
                    return
                except KeyError as e:
                    # c_eval of an expression naming a symbol no Let / loop / launch binds
                    # here: an ill-formed IR (a statement moved before its Let), not a verdict
                    raise SpecError(f"kernel {self.k.name}: {self.where0}, warpgroup {a.wg}"
                                    f" ({a.role}): a statement uses {e.args[0]}, which no Let, "
                                    "loop or launch symbol binds before it") from None
                if (a.waiting, sum(b.completed for b in self.bars.values()), a.clock) != before \
                        or not a.waiting:
                    moved = True
            if not moved:
                stuck = "; ".join(agents[i].waiting for i in live)
                self.f.add("mbarrier_protocol", f"deadlock: {stuck}")
                return
        self.end_checks()

    def end_checks(self) -> None:
        """Once every agent finished: no bulk store or wgmma group left in flight, no barrier
        part-way through a phase, no cp.async copy that no arrival covers."""
        self.cp_end_checks()
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
        self.incomplete: Dict[int, str] = {}     # warpgroup -> why its sums are not whole
        self.cover = np.zeros((1, 1), np.int64)
        self.atoms = {s.acc.frag.name: s.atom for s in walk(k.body) if isinstance(s, WgmmaMma)}

    def acc_table(self, s: Access) -> Tuple[np.ndarray, np.ndarray]:
        tab = wgmma_tables(self.atoms[s.regs.frag.name])
        return tab.c_i, tab.c_j

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
        # __launch_bounds__(threads, min_blocks): min_blocks CTAs share the register file, and
        # the roles only trade the registers their CTA was launched with (setmaxnreg.inc waits
        # for what the .dec of the others released): at most threads x the file's share per
        # thread rounded down to 8 (384 threads: 168 each, 64512; past it .inc never returns)
        T = self.k.block
        per_cta = _REGISTER_FILE // self.min_blocks // T // 8 * 8 * T
        if total > per_cta:
            self.f.add("register_budget", f"the roles ask for {total} registers "
                                          f"({', '.join(f'wg {a.wg}: {a.setmaxnreg[0].regs}' for a in self.last_agents if a.setmaxnreg)} "
                                          f"x 128); the register file has {_REGISTER_FILE}"
                                          + (f" for the {self.min_blocks} CTAs per SM the "
                                             "launch bounds ask for" if self.min_blocks > 1
                                             else "")
                                          + f", a CTA of {T} threads is launched with at most "
                                          f"{per_cta}")

    def run(self, instances: List[Dict[str, int]]) -> None:
        from ..printer.cuda import smem_bytes
        cap = NVIDIA_SMEM_BYTES.get(self.arch)
        nbars = sum(s.n for s in self.k.body if isinstance(s, MbarrierInit))
        need = smem_bytes(self.k) + 8 * nbars
        if cap is None or need > cap:
            self.f.add("lds_capacity", f"{need} bytes of shared memory (arrays + mbarriers); "
                                       f"{self.arch} allows {cap}")
        # min_blocks CTAs resident on one SM (launch bounds): each also costs the 1 KiB the
        # driver reserves per block, and together they must fit the SM's shared memory
        self.min_blocks = max(1, int(getattr(self.k, "min_blocks", 0) or 0))
        per_sm = NVIDIA_SM_SMEM_BYTES.get(self.arch)
        if self.min_blocks > 1 and (per_sm is None or
                                    self.min_blocks * (need + SMEM_RESERVED) > per_sm):
            self.f.add("lds_capacity", f"{self.min_blocks} CTAs per SM (__launch_bounds__) x "
                                       f"({need} bytes + {SMEM_RESERVED} reserved) of shared "
                                       f"memory; an {self.arch} SM has {per_sm}")
        self.tickets = has_tickets(self.k)
        if self.tickets:
            ticket_structure(self.k, self.f)
        # partials in a workspace are summed by the last ticket's arrival or by a reduce
        # kernel the split kernel names (meta["reduce"], gate_split_reduce); with neither,
        # nothing ever reads them
        self.reduce = getattr(self.k, "meta", {}).get("reduce")
        if any(t.role == "workspace" for t in self.spec.tensors) and not self.tickets and \
                self.reduce is None:
            self.f.add(REDUCE_RULE, f"{self.k.name} stores partials to a workspace but takes "
                                    "no ticket and names no reduce kernel (meta['reduce'])")
        inits, body = self.prologue(self.k.body)
        self.last_agents: List[Agent] = []
        for values in instances:
            M, N = values["M"], values["N"]
            self.cover = np.zeros((M, N), np.int64)
            env0 = {sym(k_): v for k_, v in values.items()}
            bad = False
            for order in SCHEDULES:
                self.cover = np.zeros((M, N), np.int64)
                self.ledger = TicketLedger(values, values.get("splits", 1))
                for bx in range(values["ctas"]):
                    cta = _Cta(self, values, bx, order)
                    cta.bars = {k_: Bar(c[0], c[0]) for k_, c in inits.items()}
                    env = dict(env0)
                    env[sym(self.k.grid_symbols[0])] = bx
                    cta.simulate(body, env)
                    self.last_agents = cta.agents
                    if self.f.first:
                        bad = True
                        break
                if bad:
                    break
                if self.tickets:
                    self.ledger.resolve(self.f, self.cover, f"instance {values} ({order} "
                                                           "first)")
                elif self.reduce is not None:       # the second launch (gate_split_reduce)
                    check_reduce(self.k, self, values, f"instance {values} ({order} first)")
                if self.f.first:
                    bad = True
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


def role_cta(k: Any, spec: KernelSpec, arch: str, values: Dict[str, int], bx: int,
             order: str = "interleaved") -> Tuple[Any, List[Any], Any]:
    """One CTA of the per-role model for a driver other than :func:`verify_roles` (the ring of
    :mod:`kernels.verify.ring_steps`, the ping-pong replay of :mod:`kernels.verify
    .ring_pingpong`): ``(cta, body, gate)`` -- the CTA with the barriers the kernel's prologue
    initialises, the body its agents run (``cta.run(agent, body, env)`` is an agent's
    coroutine, ``cta.stmt(agent, s, env)`` one statement's; ``cta.wait`` / ``cta.action`` /
    ``cta.end_checks`` the rules), and
    the gate holding the failures (``gate.f``) and the register rule (``gate.registers()``
    over ``gate.last_agents``)."""
    g = _Gate(k, spec, arch)
    g.min_blocks = max(1, int(getattr(k, "min_blocks", 0) or 0))
    inits, body = g.prologue(k.body)
    cta = _Cta(g, values, bx, order)
    cta.bars = {k_: Bar(c[0], c[0]) for k_, c in inits.items()}
    g.last_agents = cta.agents
    return cta, body, g


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
    checks = ROLE_CHECKS + (TICKET_RULES if g.tickets else (REDUCE_RULE,) if any(
        t.role == "workspace" for t in spec.tensors) else ())
    return GateReport(k.name, g.f.results(checks, {c: dom for c in checks}),
                      details={"engine": "per-role phase model (kernels.verify.gate_tma)"},
                      seconds=time.time() - t0)
