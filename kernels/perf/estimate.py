"""Whole-kernel estimates from the hot-loop simulation: GEMM and attention forward on MI300X.

The loop's MFMA flops per iteration say how much of the problem one iteration covers (a GEMM's
BK, an attention kernel's KV block); the grid is dealt to ``cus x work-groups per CU`` slots
(greedy, in launch order; causal attention's query blocks have different lengths); each
work-group costs, over the kernel's MFMA loops, ``trips x clocks per iteration`` (trips from the
problem: :mod:`.trips`) plus a prologue/epilogue of its other instructions and two memory
latencies.  The result is the fraction of MFMA peak and TFLOP/s at
the model's sustained clock.  A model, not a measurement: see ``MachineModel.error_bar``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .costs import GFX942, MachineModel
from .program import PerfError
from .trips import BOUNDARY, FULL, LoopCost, attention_units, gemm_units

__all__ = ["GemmProblem", "AttentionProblem", "parse_gemm", "parse_attention", "whole_kernel"]


@dataclass(frozen=True)
class GemmProblem:
    m: int
    n: int
    k: int
    tile_m: int
    tile_n: int
    # the kernel's BK (--tile BMxBNxBK): checks that a loop iteration does a whole number of
    # BK-steps of useful work (the unroll factor); None: not checked
    tile_k: Optional[int] = None

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class AttentionProblem:
    batch: int
    heads: int
    seqlen: int
    head_dim: int
    causal: bool
    tile_m: int
    # causal launch order of the query blocks: "longest_first" over all (batch, head) pairs
    # (the layoutalg causal prefill kernel's grid, FA kernels'), or "head_major": each head's
    # blocks longest to shortest, head after head (the layoutalg kernel before issue 16 item 4)
    order: str = "longest_first"

    @property
    def flops(self) -> float:   # the FA convention: 4*B*H*S*S*D, halved when causal
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f


def _ints(text: str, what: str, n: Tuple[int, ...]) -> List[str]:
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) not in n:
        raise PerfError(f"{what} {text!r}: expected {' or '.join(map(str, n))} comma-separated "
                        "values")
    return parts


def _pos(v: str, what: str) -> int:
    try:
        x = int(v)
    except ValueError:
        raise PerfError(f"{what}: {v!r} is not an integer") from None
    if x <= 0:
        raise PerfError(f"{what}: {x} must be positive")
    return x


def parse_gemm(shape: str, tile: str) -> GemmProblem:
    """``"M,N,K"`` and ``"BMxBN"`` or ``"BMxBNxBK"`` -> :class:`GemmProblem` (BK: the kernel's K
    step; with it the estimate checks that one loop iteration does a whole number of BK-steps
    of useful work)."""
    m, n, k = (_pos(v, "--gemm") for v in _ints(shape, "--gemm", (3,)))
    t = str(tile).lower().split("x")
    if len(t) not in (2, 3):
        raise PerfError(f"--tile {tile!r}: expected BMxBN or BMxBNxBK for a GEMM, e.g. 256x256 "
                        "or 256x256x64")
    bk = _pos(t[2], "--tile") if len(t) == 3 else None
    return GemmProblem(m, n, k, _pos(t[0], "--tile"), _pos(t[1], "--tile"), bk)


def _gemm_k_step(problem: GemmProblem, loop_flops_per_wg: float,
                 output_elements_per_wg: Optional[int]) -> Tuple[float, Dict]:
    """K elements of useful work per loop iteration, and the fields that say how it was found.

    The loop's executed MFMA flops over the tile's ``2*BM*BN`` flops per K element overstate the
    work when waves repeat each other's MFMAs (a tile too small for the work-group's waves:
    Triton replicates the MFMAs over its warps).  The accumulators say which: the distinct
    registers the loop's MFMAs write, times 64 lanes, times the waves, is the output a
    work-group holds; more than BM*BN by an integer factor means every output is computed that
    many times, and only one of the copies is work.  (A kernel that splits K over the waves of
    a work-group and reduces at the end would look the same; none of the kernels we model
    does.)  With BK (``--tile BMxBNxBK``) the useful K per iteration must be a whole number of
    BK-steps (the compiler's unroll factor), else the tile does not match the kernel."""
    inferred = loop_flops_per_wg / (2.0 * problem.tile_m * problem.tile_n)
    dup, fields = 1.0, {"executed_k_per_iteration": inferred}
    if output_elements_per_wg:
        cover = output_elements_per_wg / (problem.tile_m * problem.tile_n)
        fields["accumulator_coverage"] = round(cover, 4)
        if cover > 1 and abs(cover - round(cover)) < 1e-9:
            dup = float(round(cover))
    fields["mfma_duplication"] = dup
    step = inferred / dup
    if problem.tile_k is not None:
        unroll = step / problem.tile_k
        if unroll < 1 or abs(unroll - round(unroll)) > 1e-9:
            raise PerfError(
                f"--tile {problem.tile_m}x{problem.tile_n}x{problem.tile_k}: one iteration of "
                f"the hot loop does {step:g} K elements of a {problem.tile_m}x{problem.tile_n} "
                f"tile's work (executed MFMA flops {loop_flops_per_wg:.0f} per work-group, "
                f"duplication {dup:g}), not a whole number of BK={problem.tile_k} steps: the "
                "tile or BK does not match the kernel")
        fields["loop_unroll"] = int(round(unroll))
    return step, fields


CAUSAL_ORDERS = ("longest_first", "head_major")


def parse_attention(shape: str, tile: str) -> AttentionProblem:
    """``"B,H,S,D[,causal[,ORDER]]"`` and ``"BM"`` -> :class:`AttentionProblem` (ORDER: the
    causal launch order, ``longest_first`` (default) or ``head_major``)."""
    parts = _ints(shape, "--attention", (4, 5, 6))
    causal = False
    order = "longest_first"
    if len(parts) == 6:
        order = parts[5].lower()
        if order not in CAUSAL_ORDERS:
            raise PerfError(f"--attention: the sixth field {parts[5]!r} is the causal launch "
                            f"order: {' or '.join(CAUSAL_ORDERS)}")
    if len(parts) >= 5:
        if parts[4].lower() not in ("causal", "1", "true", "0", "false", "noncausal"):
            raise PerfError(f"--attention: the fifth field {parts[4]!r} must be 'causal'")
        causal = parts[4].lower() in ("causal", "1", "true")
        if len(parts) == 6 and not causal:
            raise PerfError("--attention: a launch order (sixth field) needs 'causal' as the "
                            "fifth: non-causal blocks all have the same length")
    b, h, s, d = (_pos(v, "--attention") for v in parts[:4])
    return AttentionProblem(b, h, s, d, causal, _pos(str(tile), "--tile"), order)


def _makespan(lengths: List[float], slots: int) -> float:
    """Greedy list scheduling of work-group times (in launch order) onto ``slots``."""
    heap = [0.0] * min(slots, max(1, len(lengths)))
    for x in lengths:
        t = heapq.heappop(heap)
        heapq.heappush(heap, t + x)
    return max(heap)


def whole_kernel(problem, *, loop_flops_per_wg: float, cycles_per_iteration: float,
                 workgroups_per_cu: int, outside_instructions: int, peak_flops_per_clk_simd: float,
                 model: MachineModel = GFX942,
                 output_elements_per_wg: Optional[int] = None,
                 loops: Optional[Sequence[LoopCost]] = None,
                 classes: Optional[Sequence[Tuple[str, ...]]] = None,
                 trip_model: str = "") -> Dict[str, object]:
    """The whole-kernel estimate of ``problem`` (a GemmProblem or AttentionProblem).

    ``loops`` / ``classes``: the kernel's MFMA loops and the work units each runs
    (:func:`.trips.loop_classes`); each work-group costs the sum over its loops of trips x
    simulated clocks per iteration, trips from the problem (:mod:`.trips`).  Without them,
    one loop of ``loop_flops_per_wg`` / ``cycles_per_iteration`` runs every unit.
    ``output_elements_per_wg``: the accumulator elements the work-group's waves hold (a GEMM's
    duplicated MFMAs are found from it, see :func:`_gemm_k_step`)."""
    if loop_flops_per_wg <= 0:
        raise PerfError("the hot loop has no MFMA: a whole-kernel MFMA-peak estimate needs one")
    if loops is None:
        loops = [LoopCost(0, 0, 0, loop_flops_per_wg, cycles_per_iteration, 0.0)]
        classes = [(FULL, BOUNDARY)]
    if classes is None or len(classes) != len(loops):
        raise PerfError("whole_kernel: one tuple of unit classes per loop is needed")
    overhead = outside_instructions * model.issue_period + 2 * model.vmem_latency
    trips = [0] * len(loops)          # over the whole grid

    def length(full: int, boundary: int) -> float:
        """Clocks of one work-group with these units: its loops' trips, plus the overhead."""
        t = 0.0
        for i, cls in enumerate(classes):
            n = (full if FULL in cls else 0) + (boundary if BOUNDARY in cls else 0)
            trips[i] += n
            t += n * loops[i].cycles_per_iteration
        return t + overhead

    if isinstance(problem, GemmProblem):
        step, how = _gemm_k_step(problem, loop_flops_per_wg, output_elements_per_wg)
        full, boundary = gemm_units(problem.k, step)
        iters = full + boundary
        tiles = math.ceil(problem.m / problem.tile_m) * math.ceil(problem.n / problem.tile_n)
        lengths = [length(full, boundary) for _ in range(tiles)]
        unit = {"k_per_iteration": step, "iterations_per_workgroup": iters, "workgroups": tiles,
                **how}
    elif isinstance(problem, AttentionProblem):
        per_iter = 4.0 * problem.tile_m * problem.head_dim
        step = loop_flops_per_wg / per_iter               # KV rows per loop iteration
        qblocks = math.ceil(problem.seqlen / problem.tile_m)
        per_q = {q: attention_units(problem.seqlen, problem.tile_m, q, step, problem.causal)
                 for q in range(qblocks)}
        lengths = []
        for _ in range(problem.batch * problem.heads):
            for q in reversed(range(qblocks)):      # each head's longest block first
                lengths.append(length(*per_q[q]))
        if problem.causal and problem.order == "longest_first":
            lengths.sort(reverse=True)   # over all heads, as the causal prefill grid launches
        unit = {"kv_per_iteration": step, "workgroups": len(lengths)}
        if problem.causal:
            unit["causal_order"] = problem.order
    else:
        raise PerfError(f"unknown problem {problem!r}")
    slots = model.cus * max(1, workgroups_per_cu)
    cycles = _makespan(lengths, slots)
    peak = peak_flops_per_clk_simd * model.simds_per_cu * model.cus
    frac = problem.flops / (cycles * peak)
    tflops = frac * peak * model.clock_mhz * 1e6 / 1e12
    out = {"peak_fraction": round(frac, 4), "cycles": round(cycles),
           "tflops": round(tflops, 1), "tflops_low": round(tflops * (1 - model.error_bar), 1),
           "tflops_high": round(tflops * (1 + model.error_bar), 1),
           "peak_tflops_at_clock": round(peak * model.clock_mhz * 1e6 / 1e12, 1),
           "clock_mhz": model.clock_mhz, "slots": slots,
           "prologue_epilogue_cycles": overhead, **unit}
    if loops[0].instructions:         # described loops (not the bare single-loop call)
        out.update(_loop_table(loops, classes, trips, sum(lengths), overhead * len(lengths),
                               trip_model))
    return out


def _loop_table(loops: Sequence[LoopCost], classes, trips: List[int], total: float,
                overhead: float, trip_model: str) -> Dict[str, object]:
    """Each loop's figures and its share of the work-groups' summed clocks (the rest is the
    straight-line prologue / epilogue), and the MFMA busy weighted by those clocks."""
    rows, busy_clocks, loop_clocks = [], 0.0, 0.0
    for lc, cls, n in zip(loops, classes, trips):
        clocks = n * lc.cycles_per_iteration
        busy_clocks += clocks * lc.mfma_busy
        loop_clocks += clocks
        rows.append({"start": lc.start, "end": lc.end, "instructions": lc.instructions,
                     "units": "+".join(cls), "cycles_per_iteration":
                     round(lc.cycles_per_iteration, 1), "mfma_busy": round(lc.mfma_busy, 4),
                     "binding": lc.binding, "trips": n,
                     "share": round(clocks / total, 4) if total else 0.0})
    return {"loops": rows, "trip_model": trip_model,
            "prologue_epilogue_share": round(overhead / total, 4) if total else 0.0,
            "mfma_busy_weighted": round(busy_clocks / loop_clocks, 4) if loop_clocks else 0.0}
