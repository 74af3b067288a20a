"""A model of the persistent warp-specialised prefill's barrier protocol
(:mod:`.wgmma_attention_ws` with ``persistent=True``): does every wait complete?

Each actor (the producer thread; the consumer warpgroups) is a list of barrier operations in
program order, written down from what the kernel prints: ``("wait", bar, phase)`` passes once
``phase + 1`` phases of ``bar`` completed; ``("fill", bar)`` completes the full barrier's next
phase (TMA bytes); ``("arrive", bar)`` is one of the arrivals an empty barrier counts (one per
consumer). The simulation steps the actors until all finish; if every unfinished actor waits,
the kernel would hang and :class:`AttentionConfigError` names the waits. Every work unit's
stages must be released, Q included, or the next unit's producer waits forever: the bug of
the first persistent build (the last V stage of each unit was never released), which the
single-unit ring check (:func:`.wgmma_attention_ws.check_ring_protocol`) could not see.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from layoutalg.verify import CheckResult

from .attention import AttentionConfigError
from .wgmma import proved

__all__ = ["producer_ops", "consumer_ops", "check_persistent_protocol", "check_release_lag"]

Op = Tuple


def producer_ops(nbs: Sequence[int], stages: int, v_behind_k: bool = False) -> List[Op]:
    """The producer thread: per unit wait Q released (unit it - 1), fill Q, then per block
    wait the stage's K (V) empty barrier for the block ``stages`` before, fill K (V).
    ``v_behind_k``: V of block j - 1 after K of block j (the last V after the loop)."""
    ops: List[Op] = []
    g0 = 0

    def fill(kv: str, g: int) -> None:
        s, use = g % stages, g // stages
        if use:
            ops.append(("wait", f"{kv}e{s}", use - 1))
        ops.append(("fill", f"{kv}f{s}"))
    for it, nb in enumerate(nbs):
        if it:
            ops.append(("wait", "Qe", it - 1))
        ops.append(("fill", "Qf"))
        for j in range(nb + 1 if v_behind_k else nb):
            if not v_behind_k:
                fill("K", g0 + j)
                fill("V", g0 + j)
                continue
            if j < nb:
                fill("K", g0 + j)
            if j > 0:
                fill("V", g0 + j - 1)
        g0 += nb
    return ops


def consumer_ops(nbs: Sequence[int], stages: int, lag: int = 0) -> List[Op]:
    """One consumer warpgroup: per unit wait Q and K of its first block, release K (and Q
    when the unit has one block); per later block wait K j and V j - 1, release K j (Q after
    the unit's last S GEMM) and V j - 1; at the unit's end wait and release the last V.

    ``lag``: how many blocks later a V stage is released. 0: V j - 1 at the end of block j
    (after its P V wait); 1 (``defer_pv_wait``): V j - 2 at the top of block j, after that
    block's ring waits; at the unit's end every V not yet released, in order."""
    ops: List[Op] = []
    g0 = 0
    for it, nb in enumerate(nbs):
        ops += [("wait", "Qf", it), ("wait", f"Kf{g0 % stages}", g0 // stages),
                ("arrive", f"Ke{g0 % stages}")]
        if nb == 1:
            ops.append(("arrive", "Qe"))
        released = g0                     # the unit's next V block to release
        for j in range(1, nb):
            g = g0 + j
            ops += [("wait", f"Kf{g % stages}", g // stages),
                    ("wait", f"Vf{(g - 1) % stages}", (g - 1) // stages)]
            if lag and g - 1 - lag >= g0:
                ops.append(("arrive", f"Ve{(g - 1 - lag) % stages}"))
                released += 1
            ops.append(("arrive", f"Ke{g % stages}"))
            if j == nb - 1:
                ops.append(("arrive", "Qe"))
            if not lag:
                ops.append(("arrive", f"Ve{(g - 1) % stages}"))
                released += 1
        last = g0 + nb - 1
        ops.append(("wait", f"Vf{last % stages}", last // stages))
        ops += [("arrive", f"Ve{b % stages}") for b in range(released, last + 1)]
        g0 += nb
    return ops


def _simulate(actors: Dict[str, List[Op]], consumers: int) -> int:
    done: Dict[str, int] = {}          # barrier -> completed phases
    arrivals: Dict[str, int] = {}      # empty barrier -> arrivals in its current phase
    pc = {a: 0 for a in actors}
    steps = 0
    while True:
        moved = False
        for a, ops in actors.items():
            while pc[a] < len(ops):
                kind, bar, *ph = ops[pc[a]]
                if kind == "wait" and done.get(bar, 0) <= ph[0]:
                    break
                if kind == "fill":
                    done[bar] = done.get(bar, 0) + 1
                elif kind == "arrive":
                    arrivals[bar] = arrivals.get(bar, 0) + 1
                    if arrivals[bar] == consumers:
                        arrivals[bar] = 0
                        done[bar] = done.get(bar, 0) + 1
                pc[a] += 1
                steps += 1
                moved = True
        if all(pc[a] == len(ops) for a, ops in actors.items()):
            return steps
        if not moved:
            stuck = {a: actors[a][pc[a]] for a in actors if pc[a] < len(actors[a])}
            raise AttentionConfigError(f"persistent ring: every actor waits (a hang): {stuck}")


def _run_all(seqs: Sequence[Sequence[int]], stages: int, consumers: int, lag: int,
             v_behind_k: bool = False) -> int:
    n = 0
    for nbs in seqs:
        actors = {"producer": producer_ops(nbs, stages, v_behind_k)}
        for c in range(consumers):
            actors[f"consumer {c}"] = consumer_ops(nbs, stages, lag)
        n += _simulate(actors, consumers)
    return n


def check_persistent_protocol(stages: int, consumers: int = 2, lag: int = 0,
                              v_behind_k: bool = False) -> CheckResult:
    """Simulate the producer and ``consumers`` consumer warpgroups over unit sequences with
    1..5 blocks each (including every pair of block counts): every wait completes."""
    seqs = [[a, b, c] for a in range(1, 6) for b in range(1, 6) for c in (1, 3)]
    n = _run_all(seqs, stages, consumers, lag, v_behind_k)
    late = (f", V released {lag} block(s) late" if lag else "") + (
        ", V loaded behind K" if v_behind_k else "")
    return proved(f"persistent barrier protocol, {stages} stages{late}: {len(seqs)} unit "
                  f"sequences ({n} operations) run to the end",
                  "units of 1..5 key blocks")


def check_release_lag(stages: int, consumers: int = 2, lag: int = 1, max_blocks: int = 12,
                      v_behind_k: bool = False) -> CheckResult:
    """One work unit (the non-persistent kernel) of 1..``max_blocks`` key blocks with the V
    stages released ``lag`` blocks late (``v_behind_k``: the producer's V one block behind its
    K): the producer's refills and the consumers' waits all complete (a release later than
    the ring can absorb would hang the kernel)."""
    n = _run_all([[nb] for nb in range(1, max_blocks + 1)], stages, consumers, lag, v_behind_k)
    order = ", V loaded behind K" if v_behind_k else ""
    return proved(f"V released {lag} block(s) late{order}, {stages} stages: units of "
                  f"1..{max_blocks} blocks ({n} operations) run to the end", "every block count")
