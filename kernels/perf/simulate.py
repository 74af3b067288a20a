"""A cycle-by-cycle model of one gfx942 compute unit running a kernel's hot loop.

Rules (each a public fact or a stated model choice):

* 4 SIMDs; the resident waves are dealt round-robin to them (wave ``i`` -> SIMD ``i % 4``);
  the resident work-groups come from the code object's registers and LDS (occupancy).
* SIMD ``s`` arbitrates on clocks ``t % 4 == s`` (GCN/CDNA issue cadence).  At an arbitration it
  issues at most one instruction per unit class (VALU-or-MFMA, SALU, LDS, VMEM, SMEM, branch)
  and at most one per wave, picking waves by ``s_setprio`` priority, then the one that issued
  least recently (so equal waves share a pipe instead of the oldest starving the others).
* MFMA: the SIMD's matrix pipe is busy ``mfma_specs`` cycles (32x32x8 f16 = 32 clocks); a later
  MFMA or VALU that reads its destination waits until it is written (plus one issue period);
  an MFMA whose srcC is its own destination chains in the pipe with no extra wait.
* VALU: 4 clocks per wave64 (16 for transcendentals) on the SIMD's VALU port.
* LDS: one pipe per CU, 128 B/clk, ``lds_latency`` after the data moved; VMEM: the CU's share
  of memory bandwidth (``vmem_bytes_per_clk``) and ``vmem_latency``; loads return in order.
* ``s_waitcnt vmcnt/lgkmcnt``: the wave waits until no more than N of its requests are
  outstanding; ``s_nop N`` holds the wave N+1 issue periods; ``s_barrier`` holds every wave of
  the work-group until all arrived; ``s_setprio`` changes the wave's arbitration priority.

Each wave runs ``iterations`` times through the loop body (forward branches not taken).  The
steady state is measured between the start of the second and of the last iteration; MFMA-idle
clocks of a SIMD are split equally over the reasons its waves could not issue an MFMA then.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .costs import GFX942, MachineModel
from .program import Op, PerfError

__all__ = ["SimResult", "simulate", "IDLE_CAUSES"]

IDLE_CAUSES = {
    "instruction_issue": "the wave was issuing other instructions (VALU, SALU, LDS, VMEM)",
    "mfma_dependency": "waiting for an MFMA result or an s_nop wait state",
    "lds_wait": "s_waitcnt lgkmcnt on LDS / scalar loads, or the LDS queue was full",
    "memory_wait": "s_waitcnt vmcnt on global loads, or the memory queue was full",
    "barrier": "s_barrier: waiting for the other waves of the work-group",
    "valu_busy": "the SIMD's VALU port was busy (transcendentals)",
    "arbitration": "ready, but another wave won the issue slot",
    "no_wave": "no resident wave on this SIMD (occupancy / work-group shape)",
    "not_steady": "no idle clock was seen, yet the loop's progress says the pipes were not "
                  "always busy: the simulated iterations had not reached a steady state (a "
                  "queue still filling); the busy figure is a transient",
}
_QUEUE_CLOCKS = 256      # model: requests beyond this many clocks of queued LDS/VMEM work stall


@dataclass
class _Wave:
    wid: int
    simd: int
    wg: int
    pc: int = 0
    iteration: int = 0
    ready: int = 0
    ready_cause: str = "instruction_issue"
    prio: int = 0
    at_barrier: bool = False
    done: bool = False
    last_issue: int = -1
    vm: List[int] = field(default_factory=list)
    lgkm: List[int] = field(default_factory=list)
    reg_ready: Dict[int, int] = field(default_factory=dict)
    starts: List[int] = field(default_factory=list)
    body: List[Op] = field(default_factory=list)


@dataclass
class SimResult:
    """Steady-state figures of one CU over the measured window."""

    cycles_per_iteration: float      # clocks per loop iteration of one work-group
    window: Tuple[int, int]
    mfma_busy: float                 # matrix-pipe busy fraction, averaged over the 4 SIMDs
    utilisation: Dict[str, float]    # mfma, valu, lds, vmem (fractions of their capacity)
    idle_breakdown: Dict[str, float]  # MFMA idle clocks by cause, fractions of all SIMD clocks
    waves_per_simd: List[int]
    workgroups: int
    waves_per_workgroup: int
    total_cycles: int


def _outstanding(q: List[int], t: int) -> int:
    while q and q[0] <= t:
        q.pop(0)
    return len(q)


class _CU:
    """The shared state of one compute unit: units' next free clocks, busy intervals, waves."""

    def __init__(self, waves: List[_Wave], model: MachineModel, iterations: int):
        self.model, self.iterations = model, iterations
        self.period = model.issue_period
        n = model.simds_per_cu
        self.waves = waves
        self.by_simd = [[w for w in waves if w.simd == s] for s in range(n)]
        self.groups: Dict[int, List[_Wave]] = defaultdict(list)
        for w in waves:
            self.groups[w.wg].append(w)
        self.mfma_free = [0] * n
        self.valu_free = [0] * n
        self.lds_free = 0.0
        self.vmem_free = 0.0
        self.busy: Dict[str, List[Tuple[float, float]]] = defaultdict(list)
        self.live = len(waves)

    def blocked(self, w: _Wave, op: Op, t: int, used: set) -> Optional[str]:
        """Why wave ``w`` cannot issue ``op`` at clock ``t`` (an IDLE_CAUSES key), or None."""
        c, s = op.cost, w.simd
        unit = "valu" if c.cls in ("mfma", "valu") else c.cls
        if w.ready > t:
            return w.ready_cause
        if w.at_barrier:
            return "barrier"
        if op.vmcnt is not None and _outstanding(w.vm, t) > op.vmcnt:
            return "memory_wait"
        if op.lgkmcnt is not None and _outstanding(w.lgkm, t) > op.lgkmcnt:
            return "lds_wait"
        if any(w.reg_ready.get(r, 0) > t for r in op.reads):
            return "mfma_dependency"
        if c.cls == "mfma" and self.mfma_free[s] > t:
            return "mfma_dependency"
        if unit == "valu" and self.valu_free[s] > t:
            return "valu_busy"
        if c.cls == "lds" and self.lds_free > t + _QUEUE_CLOCKS:
            return "lds_wait"
        if c.cls == "vmem" and self.vmem_free > t + _QUEUE_CLOCKS:
            return "memory_wait"
        if unit in used and unit != "internal":
            return "arbitration"
        return None

    def issue(self, w: _Wave, op: Op, t: int) -> None:
        """Issue ``op`` of wave ``w`` at clock ``t``: occupy its unit, queue its result."""
        c, s, m, period = op.cost, w.simd, self.model, self.period
        w.last_issue = t
        w.ready, w.ready_cause = t + period, "instruction_issue"
        if c.cls == "mfma":
            self.mfma_free[s] = t + c.cycles
            self.valu_free[s] = t + period
            self.busy[f"mfma{s}"].append((t, t + c.cycles))
            for r in op.writes:
                w.reg_ready[r] = t + c.cycles + period
        elif c.cls == "valu":
            self.valu_free[s] = t + c.cycles
            self.busy[f"valu{s}"].append((t, t + c.cycles))
        elif c.cls == "lds":
            start = max(t, self.lds_free)
            dur = c.bytes / m.lds_bytes_per_clk
            self.lds_free = start + dur
            self.busy["lds"].append((start, start + dur))
            w.lgkm.append(int(start + dur + m.lds_latency))
            w.lgkm.sort()
        elif c.cls == "smem":
            w.lgkm.append(t + m.smem_latency)
            w.lgkm.sort()
        elif c.cls == "vmem":
            start = max(float(t), self.vmem_free)
            dur = c.bytes / m.vmem_bytes_per_clk
            self.vmem_free = start + dur
            self.busy["vmem"].append((start, start + dur))
            done_at = int(start + dur + m.vmem_latency)
            w.vm.append(max(done_at, w.vm[-1] if w.vm else 0))   # loads return in order
        elif op.mnemonic == "s_nop":
            w.ready, w.ready_cause = t + period * (op.arg + 1), "mfma_dependency"
        elif op.mnemonic == "s_setprio":
            w.prio = op.arg
        elif op.mnemonic == "s_barrier":
            w.at_barrier = True
            self.release_barrier(w.wg, t)
        self.advance(w, t)

    def advance(self, w: _Wave, t: int) -> None:
        w.pc += 1
        if w.pc < len(w.body):
            return
        w.pc = 0
        w.iteration += 1
        w.starts.append(t + self.period)
        if w.iteration == self.iterations:
            w.done = True
            self.live -= 1
            self.release_barrier(w.wg, t)   # a finished wave no longer holds the barrier

    def release_barrier(self, wg: int, t: int) -> None:
        group = [x for x in self.groups[wg] if not x.done]
        if group and all(x.at_barrier for x in group):
            for x in group:
                x.at_barrier = False
                x.ready = max(x.ready, t + self.period)

    def arbitrate(self, s: int, t: int) -> Tuple[float, Dict[str, float]]:
        """SIMD ``s``'s issue slot at clock ``t``: issue what can issue; returns the matrix
        pipe's idle clocks until the next slot and why each of its waves did not issue."""
        causes: Dict[str, float] = defaultdict(float)
        used: set = set()
        order = sorted((w for w in self.by_simd[s] if not w.done),
                       key=lambda w: (-w.prio, w.last_issue, w.wid))
        for w in order:
            op = w.body[w.pc]
            cause = self.blocked(w, op, t, used)
            if cause is not None:
                causes[cause] += 1
                continue
            used.add("valu" if op.cost.cls in ("mfma", "valu") else op.cost.cls)
            self.issue(w, op, t)
            if op.cost.cls != "mfma":
                causes["instruction_issue"] += 1
        idle = max(0, min(self.period, t + self.period - self.mfma_free[s]))
        return idle, (dict(causes) if order else {"no_wave": 1.0})


def simulate(body: List[Op], *, waves_per_workgroup: int, workgroups: int,
             model: MachineModel = GFX942, iterations: int = 10,
             max_cycles: int = 20_000_000, roles: Sequence[List[Op]] = ()) -> SimResult:
    """Run ``workgroups`` x ``waves_per_workgroup`` waves through ``body`` ``iterations`` times.

    ``roles``: wave-specialised kernels: one loop body per role; wave ``i`` of a work-group
    runs ``roles[i * len(roles) // waves_per_workgroup]`` (consecutive waves share a role).
    """
    if not body:
        raise PerfError("empty loop body")
    if any(not r for r in roles):
        raise PerfError("empty role loop body")
    if iterations < 3:
        raise PerfError("iterations must be >= 3 (one warm-up, a measured window, one tail)")
    nsimd, wpg = model.simds_per_cu, waves_per_workgroup
    waves = [_Wave(wid=g * wpg + i, simd=(g * wpg + i) % nsimd, wg=g)
             for g in range(workgroups) for i in range(wpg)]
    for w in waves:
        w.starts.append(0)
        w.body = list(roles[(w.wid % wpg) * len(roles) // wpg]) if roles else body
    cu = _CU(waves, model, iterations)
    records: List[Tuple[int, float, Dict[str, float]]] = []   # (clock, idle clocks, causes)
    t = 0
    while cu.live:
        if t > max_cycles:
            raise PerfError(f"simulation did not finish in {max_cycles} clocks (a barrier that "
                            "not every wave reaches?)")
        s = t % model.issue_period
        if s < nsimd:
            idle, causes = cu.arbitrate(s, t)
            records.append((t, idle, causes))
        t += 1
    return _summarise(waves, cu.by_simd, cu.busy, records, iterations, model, wpg, workgroups, t)


def _progress(starts: List[int], x: float) -> float:
    """Iterations a wave has completed at clock ``x`` (linear within an iteration)."""
    if x <= starts[0]:
        return 0.0
    for k in range(1, len(starts)):
        if x <= starts[k]:
            return k - 1 + (x - starts[k - 1]) / max(1, starts[k] - starts[k - 1])
    return float(len(starts) - 1)


def _overlap(intervals: List[Tuple[float, float]], a: float, b: float) -> float:
    return sum(max(0.0, min(y, b) - max(x, a)) for x, y in intervals)


def _mfma_clocks(body: List[Op]) -> int:
    return sum(o.cost.cycles for o in body if o.cost.cls == "mfma")


def _summarise(waves, by_simd, busy, records, iterations, model, wpg, wgs, total) -> SimResult:
    nsimd = model.simds_per_cu
    first, last = 1, iterations - 1
    a = max(w.starts[first] for w in waves)
    b = min(w.starts[last] for w in waves)
    if b <= a:      # the waves did not all run at once (e.g. oldest-first): the whole run
        a = min(w.starts[first] for w in waves)
        b = max(w.starts[last] for w in waves)
    # iterations completed in the window, a wave's progress interpolated between its starts
    progress = {w.wid: _progress(w.starts, b) - _progress(w.starts, a) for w in waves}
    done = sum(progress.values())
    per_iter = (b - a) * len(waves) / done if done > 0 else float(b - a)
    span = float(b - a)
    idle: Dict[str, float] = defaultdict(float)
    for t, amount, causes in records:
        if not (a <= t < b) or amount <= 0:
            continue
        total_w = sum(causes.values())
        if total_w == 0:
            idle["arbitration"] += amount
            continue
        for k, v in causes.items():
            idle[k] += amount * v / total_w
    cap = span * nsimd
    # busy = matrix-pipe clocks of the iterations completed in the window (exact in a periodic
    # steady state, where counting busy clocks inside the window has edge effects)
    mfma_busy = min(1.0, sum(_mfma_clocks(w.body) * progress[w.wid] for w in waves) / cap) \
        if span > 0 else 0.0
    idle_sum = sum(idle.values())
    if idle_sum > 0:       # the causes share the idle clocks, which are 1 - busy of all clocks
        idle = {k: v * (1 - mfma_busy) * cap / idle_sum for k, v in idle.items()}
    elif mfma_busy < 0.995:
        idle = {"not_steady": (1 - mfma_busy) * cap}
    util = {"mfma": mfma_busy,
            "valu": sum(_overlap(busy[f"valu{s}"], a, b) for s in range(nsimd)) / cap,
            "lds": _overlap(busy["lds"], a, b) / span,
            "vmem": _overlap(busy["vmem"], a, b) / span}
    breakdown = {k: round(v / cap, 4) for k, v in sorted(idle.items(), key=lambda kv: -kv[1])
                 if v > 0}
    return SimResult(cycles_per_iteration=per_iter, window=(a, b), mfma_busy=mfma_busy,
                     utilisation={k: round(v, 4) for k, v in util.items()},
                     idle_breakdown=breakdown, waves_per_simd=[len(x) for x in by_simd],
                     workgroups=wgs, waves_per_workgroup=wpg, total_cycles=total)
