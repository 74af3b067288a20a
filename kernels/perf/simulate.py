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
from typing import Dict, List, Sequence, Tuple

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
    nsimd, period = model.simds_per_cu, model.issue_period
    waves = [_Wave(wid=g * waves_per_workgroup + i, simd=(g * waves_per_workgroup + i) % nsimd,
                   wg=g)
             for g in range(workgroups) for i in range(waves_per_workgroup)]
    for w in waves:
        w.starts.append(0)
        w.body = list(roles[(w.wid % waves_per_workgroup) * len(roles) // waves_per_workgroup]) \
            if roles else body
    by_simd = [[w for w in waves if w.simd == s] for s in range(nsimd)]
    wg_waves = defaultdict(list)
    for w in waves:
        wg_waves[w.wg].append(w)
    mfma_free = [0] * nsimd
    valu_free = [0] * nsimd
    lds_free = 0
    vmem_free = 0.0
    # busy intervals for utilisation, and per-arbitration idle attribution records
    busy: Dict[str, List[Tuple[float, float]]] = defaultdict(list)
    records: List[Tuple[int, float, Dict[str, float]]] = []
    t = 0
    live = len(waves)
    while live:
        if t > max_cycles:
            raise PerfError(f"simulation did not finish in {max_cycles} clocks (a barrier that "
                            "not every wave reaches?)")
        s = t % period
        if s < nsimd:
            causes: Dict[str, float] = defaultdict(float)
            used = set()
            order = sorted((w for w in by_simd[s] if not w.done), key=lambda w: (-w.prio, w.last_issue, w.wid))
            for w in order:
                cause = None
                op = w.body[w.pc]
                c = op.cost
                unit = "valu" if c.cls in ("mfma", "valu") else c.cls
                if w.ready > t:
                    cause = w.ready_cause
                elif w.at_barrier:
                    cause = "barrier"
                elif op.mnemonic == "s_waitcnt" and op.vmcnt is not None \
                        and _outstanding(w.vm, t) > op.vmcnt:
                    cause = "memory_wait"
                elif op.mnemonic == "s_waitcnt" and op.lgkmcnt is not None \
                        and _outstanding(w.lgkm, t) > op.lgkmcnt:
                    cause = "lds_wait"
                elif any(w.reg_ready.get(r, 0) > t for r in op.reads):
                    cause = "mfma_dependency"
                elif c.cls == "mfma" and mfma_free[s] > t:
                    cause = "mfma_dependency"
                elif unit == "valu" and valu_free[s] > t:
                    cause = "valu_busy"
                elif c.cls == "lds" and lds_free > t + _QUEUE_CLOCKS:
                    cause = "lds_wait"
                elif c.cls == "vmem" and vmem_free > t + _QUEUE_CLOCKS:
                    cause = "memory_wait"
                elif unit in used and unit != "internal":
                    cause = "arbitration"
                if cause is not None:
                    causes[cause] += 1
                    continue
                # issue
                used.add(unit)
                w.last_issue = t
                w.ready, w.ready_cause = t + period, "instruction_issue"
                if c.cls == "mfma":
                    mfma_free[s] = t + c.cycles
                    valu_free[s] = t + period
                    busy[f"mfma{s}"].append((t, t + c.cycles))
                    for r in op.writes:
                        w.reg_ready[r] = t + c.cycles + period
                elif c.cls == "valu":
                    valu_free[s] = t + c.cycles
                    busy[f"valu{s}"].append((t, t + c.cycles))
                elif c.cls == "lds":
                    start = max(t, lds_free)
                    dur = c.bytes / model.lds_bytes_per_clk
                    lds_free = start + dur
                    busy["lds"].append((start, start + dur))
                    w.lgkm.append(int(start + dur + model.lds_latency))
                    w.lgkm.sort()
                elif c.cls == "smem":
                    w.lgkm.append(t + model.smem_latency)
                    w.lgkm.sort()
                elif c.cls == "vmem":
                    start = max(float(t), vmem_free)
                    dur = c.bytes / model.vmem_bytes_per_clk
                    vmem_free = start + dur
                    busy["vmem"].append((start, start + dur))
                    done_at = int(start + dur + model.vmem_latency)
                    w.vm.append(max(done_at, w.vm[-1] if w.vm else 0))
                elif op.mnemonic == "s_nop":
                    w.ready, w.ready_cause = t + period * (op.arg + 1), "mfma_dependency"
                elif op.mnemonic == "s_setprio":
                    w.prio = op.arg
                elif op.mnemonic == "s_barrier":
                    w.at_barrier = True
                    group = [x for x in wg_waves[w.wg] if not x.done]
                    if all(x.at_barrier for x in group):
                        for x in group:
                            x.at_barrier = False
                            x.ready = max(x.ready, t + period)
                w.pc += 1
                if w.pc == len(w.body):
                    w.pc = 0
                    w.iteration += 1
                    w.starts.append(t + period)
                    if w.iteration == iterations:
                        w.done = True
                        live -= 1
                        # a finished wave no longer holds its work-group's barriers
                        group = [x for x in wg_waves[w.wg] if not x.done]
                        if group and all(x.at_barrier for x in group):
                            for x in group:
                                x.at_barrier = False
                                x.ready = max(x.ready, t + period)
                causes["instruction_issue"] += 1 if c.cls != "mfma" else 0
            idle = max(0, min(period, t + period - mfma_free[s]))
            if not order:
                causes = {"no_wave": 1.0}
            records.append((t, idle, dict(causes)))
        t += 1
    return _summarise(waves, by_simd, busy, records, iterations, model, waves_per_workgroup,
                      workgroups, t)


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
    # busy = matrix-pipe clocks of the iterations completed in the window (no edge effects)
    mfma_busy = min(1.0, sum(_mfma_clocks(w.body) * progress[w.wid] for w in waves) / cap) \
        if span > 0 else 0.0
    idle_sum = sum(idle.values())
    if idle_sum > 0:       # the causes share the idle clocks, which are 1 - busy of all clocks
        idle = {k: v * (1 - mfma_busy) * cap / idle_sum for k, v in idle.items()}
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
