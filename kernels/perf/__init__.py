"""A static MI300X (gfx942) performance model: read a code object, find its loops, simulate one
compute unit cycle by cycle, name the bottleneck, estimate the whole kernel.

Without a problem size the model simulates the hot loop (the innermost loop with the most MFMA
flops, then the longest).  With one (``gemm=`` / ``attention=`` and ``tile=``) it simulates
every innermost MFMA loop and weights each by its trip count derived from the problem and the
tile (:mod:`.trips`: full vs boundary K-steps / KV tiles per work-group, causal and not); the
report's hot loop is then the loop with the largest share of the clocks, and
``whole_kernel["loops"]`` lists each loop (instructions, clocks per iteration, MFMA busy,
binding, trips over the grid, share of the clocks).  Loops without a trip model fall back to the
hot loop alone, named in ``whole_kernel["trip_model"]``.

>>> from kernels.perf import analyze
>>> r = analyze("kernel.co", gemm="4096,4096,4096", tile="256x256")   # doctest: +SKIP
>>> r.mfma_busy, r.binding, r.idle_breakdown, r.peak_fraction          # doctest: +SKIP

Modules: :mod:`.program` (code object -> kernel, hot loop, operands), :mod:`.costs` (the
per-instruction cost table and machine constants), :mod:`.simulate` (the CU simulator),
:mod:`.trips` (trip counts of the MFMA loops from the problem), :mod:`.estimate` (whole-kernel
GEMM / attention estimates), :mod:`.report` (result, JSON, text),
:mod:`.cli` (``layoutalg perf``).  Every result is a model estimate with an error bar
(``docs/PERFORMANCE.md``, "Static performance model"), never a measurement.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import List, Optional, Union

from .costs import GFX942, MachineModel, classify, mfma_cost
from .estimate import AttentionProblem, GemmProblem, parse_attention, parse_gemm, whole_kernel
from .program import PerfError, Program, code_object_arch, load_program, occupancy
from .report import MODEL_NOTE, PerfReport, binding_resource
from .simulate import IDLE_CAUSES, SimResult, simulate
from .trips import BOUNDARY, FULL, LoopCost, loop_classes

__all__ = ["analyze", "analyze_program", "PerfReport", "PerfError", "MachineModel", "GFX942",
           "GemmProblem", "AttentionProblem", "parse_gemm", "parse_attention", "load_program",
           "simulate", "SimResult", "IDLE_CAUSES", "MODEL_NOTE", "code_object_arch",
           "classify", "mfma_cost", "Program", "report_fields"]


def analyze(code: Union[bytes, str, Path], kernel: Optional[str] = None, *,
            gemm: Optional[str] = None, attention: Optional[str] = None,
            tile: Optional[str] = None, block_threads: Optional[int] = None,
            dynamic_lds_bytes: int = 0, model: MachineModel = GFX942,
            iterations: int = 10, branches: str = "all",
            roles: Optional[bool] = None) -> PerfReport:
    """Model ``kernel`` of the code object ``code`` (bytes or a path).

    ``roles``: a wave-specialised kernel whose waves run different loops: the waves of a
    work-group are split, consecutive waves together, over its innermost loops with MFMAs in
    address order (e.g. AITER's FA: waves 0-3 one loop, 4-7 the other).  None (default): when
    the model sees a branch on the wave id and two or more such loops.

    ``branches``: ``"all"`` runs every instruction of the hot loop on every wave, ``"skip"``
    leaves out the blocks that forward branches inside the loop jump over (masks, tails);
    when the loop has such blocks the report's notes give the MFMA busy of the other choice.

    ``gemm="M,N,K"`` or ``attention="B,H,S,D[,causal]"`` with ``tile`` (``"BMxBN"`` / ``"BM"``)
    add the whole-kernel estimate.  A GEMM counts MFMAs that waves repeat (the accumulators
    of the work-group's waves hold the tile more than once) once and reports
    ``whole_kernel["mfma_duplication"]``; ``"BMxBNxBK"`` also checks that one loop iteration
    does a whole number of BK-steps (``loop_unroll``).
    ``block_threads`` defaults to the metadata's ``.reqd_workgroup_size`` or
    ``.max_flat_workgroup_size``; ``dynamic_lds_bytes`` adds launch-time LDS (Triton's ``shared``) to the occupancy.
    """
    prog = load_program(code, kernel, model=model)
    problem = None
    if gemm is not None and attention is not None:
        raise PerfError("give --gemm or --attention, not both")
    if (gemm is not None or attention is not None) and tile is None:
        raise PerfError("a problem size needs --tile (BMxBN for --gemm, BM for --attention)")
    if gemm is not None:
        problem = parse_gemm(gemm, tile)
    elif attention is not None:
        problem = parse_attention(attention, tile)
    elif tile is not None:
        raise PerfError("--tile needs --gemm M,N,K or --attention B,H,S,D[,causal]")
    return analyze_program(prog, problem, block_threads=block_threads,
                           dynamic_lds_bytes=dynamic_lds_bytes, model=model,
                           iterations=iterations, branches=branches, roles=roles)


def _accumulator_elements(mfmas) -> int:
    """Output elements one wave accumulates in the loop: the distinct registers its MFMAs
    write, times 64 lanes (an f64 element takes two registers)."""
    regs = {r for o in mfmas for r in o.writes}
    per = 2 if any(o.mnemonic.startswith("v_mfma_f64") for o in mfmas) else 1
    return len(regs) * 64 // per


def _block_threads(prog: Program, block_threads: Optional[int]) -> int:
    if block_threads is not None:
        if block_threads <= 0:
            raise PerfError(f"block_threads {block_threads} must be positive")
        return int(block_threads)
    req = prog.metadata.get(".reqd_workgroup_size")
    if req:
        return int(math.prod(int(x) for x in req))
    return int(prog.metadata.get(".max_flat_workgroup_size", 256))


def analyze_program(prog: Program, problem=None, *, block_threads: Optional[int] = None,
                    dynamic_lds_bytes: int = 0, model: MachineModel = GFX942,
                    iterations: int = 10, branches: str = "all",
                    roles: Optional[bool] = None) -> PerfReport:
    """:func:`analyze` on an already loaded :class:`Program`."""
    if roles is None:
        roles = prog.role_split is not None
    md = prog.metadata
    threads = _block_threads(prog, block_threads)
    wpg = max(1, math.ceil(threads / 64))
    lds = int(md.get(".group_segment_fixed_size", 0)) + int(dynamic_lds_bytes)
    occ = occupancy(prog.arch, int(md.get(".vgpr_count", 0)), int(md.get(".sgpr_count", 0)),
                    lds, threads)
    per_simd = int(occ["waves_per_simd"])
    if per_simd <= 0:
        raise PerfError(f"kernel {prog.kernel!r} cannot be resident on a CU: "
                        f"{occ.get('reason', occ)}")
    wgs = max(1, (per_simd * model.simds_per_cu) // wpg)
    if lds > 0:       # LDS is shared by the work-groups of a CU, not per SIMD
        import mfma_specs
        t = mfma_specs.target(prog.arch)
        alloc = -(-lds // t.lds_alloc_granule) * t.lds_alloc_granule
        wgs = max(1, min(wgs, t.lds_per_cu_bytes // alloc))
    body = prog.path(branches)
    role_bodies = [prog.path(branches, b) for b in prog.mfma_loops] if roles else []
    if roles and len(role_bodies) < 2:
        raise PerfError(f"roles=True needs two or more innermost loops with MFMAs; kernel "
                        f"{prog.kernel!r} has {len(role_bodies)}")
    if roles and wpg < len(role_bodies):
        raise PerfError(f"roles=True: {wpg} wave(s) per work-group cannot run "
                        f"{len(role_bodies)} roles")
    sim = _simulate(body, wpg, wgs, model, iterations, role_bodies)
    notes = list(prog.notes)
    whole, hot = None, (prog.loop, body, sim)
    if problem is not None:
        if not any(o.cost.cls == "mfma" for o in body):
            raise PerfError("the hot loop has no MFMA: a whole-kernel MFMA-peak estimate needs "
                            "one")
        whole, hot = _whole_kernel(prog, problem, hot, role_bodies, wpg, wgs, model, iterations,
                                   branches, notes)
    (start, end), body, sim = hot
    mfmas = [o for o in body if o.cost.cls == "mfma"]
    # flops per wave and loop iteration: the mean over the roles' loops when roles are split
    flops = (sum(sum(o.cost.flops for o in b) for b in role_bodies) / len(role_bodies)
             if role_bodies else sum(o.cost.flops for o in body))
    loop = {"start": start, "end": end, "instructions": len(body),
            "mfma": len(mfmas), "mfma_flops_per_wave": flops,
            "waves_per_workgroup": wpg, "workgroups_per_cu": wgs,
            "waves_per_simd": list(sim.waves_per_simd), "forward_branches": prog.forward_branches,
            "guarded_blocks": len(prog.guarded), "branches": branches,
            "roles": len(role_bodies) or 1}
    if not mfmas:
        hbm = 5.3e12 / model.cus / (model.clock_mhz * 1e6)
        notes.append(f"no MFMA in the hot loop: MFMA busy is 0 by construction.  The memory "
                     f"model is an L2-level share ({model.vmem_bytes_per_clk:g} B/clk per CU); "
                     f"a kernel that streams from HBM (decode) is more memory-bound than shown "
                     f"(5.3 TB/s peak HBM is ~{hbm:.0f} B/clk per CU)")
    if prog.guarded:
        other = "skip" if branches == "all" else "all"
        raw = next((ops for ops in prog.mfma_loops if ops and ops[0].addr == start), prog.body)
        alt = _simulate(prog.path(other, raw), wpg, wgs, model, iterations,
                        [prog.path(other, b) for b in prog.mfma_loops] if roles else [])
        notes.append(f"with branches='{other}' the model gives MFMA busy "
                     f"{100 * alt.mfma_busy:.1f}% (this report: branches='{branches}', "
                     f"{100 * sim.mfma_busy:.1f}%)")
    if whole is not None:
        dup = whole.get("mfma_duplication", 1)
        if dup > 1:
            notes.append(f"the waves' MFMA accumulators hold {dup:g}x the tile's outputs: the "
                         f"waves repeat each other's MFMAs (a tile too small for the "
                         f"work-group's waves); the whole-kernel estimate counts the tile's "
                         f"work once, the loop's MFMA busy counts every executed MFMA")
    return PerfReport(kernel=prog.kernel, arch=prog.arch, mfma_busy=sim.mfma_busy,
                      binding=binding_resource(sim.utilisation, sim.idle_breakdown),
                      idle_breakdown=dict(sim.idle_breakdown),
                      utilisation=dict(sim.utilisation),
                      cycles_per_iteration=sim.cycles_per_iteration, loop=loop,
                      occupancy={k: v for k, v in occ.items()}, error_bar=model.error_bar,
                      peak_fraction=whole["peak_fraction"] if whole else None,
                      whole_kernel=whole, notes=notes, model=model.to_dict())


def _simulate(body, wpg: int, wgs: int, model: MachineModel, iterations: int,
              roles=()) -> SimResult:
    """:func:`.simulate`, remembered: a benchmark models one code object for several problem
    sizes, and the loops' simulation does not depend on the problem (the result is shared:
    callers copy what they hand out)."""
    return _simulate_cached(tuple(body), wpg, wgs, model, iterations,
                            tuple(tuple(r) for r in roles))


@functools.lru_cache(maxsize=64)
def _simulate_cached(body, wpg, wgs, model, iterations, roles) -> SimResult:
    return simulate(list(body), waves_per_workgroup=wpg, workgroups=wgs, model=model,
                    iterations=iterations, roles=[list(r) for r in roles])


def _loop_cost(start: int, end: int, body, sim: SimResult, wpg: int) -> LoopCost:
    return LoopCost(start=start, end=end, instructions=len(body),
                    flops_per_wg=float(sum(o.cost.flops for o in body) * wpg),
                    cycles_per_iteration=sim.cycles_per_iteration, mfma_busy=sim.mfma_busy,
                    binding=binding_resource(sim.utilisation, sim.idle_breakdown))


def _whole_kernel(prog: Program, problem, hot, role_bodies, wpg: int, wgs: int,
                  model: MachineModel, iterations: int, branches: str, notes: List[str]):
    """The whole-kernel estimate over every MFMA loop weighted by its trip count
    (:mod:`.trips`), and the loop the kernel spends the most clocks in (the report's hot loop):
    ``(whole, (range, body, sim))``.  Loops without a trip model (see
    :func:`.trips.loop_classes`) and wave-specialised roles fall back to the hot loop alone."""
    (start, end), body, sim = hot
    runs = {start: hot}
    if role_bodies:
        classes, why = None, "wave-specialised roles run their loops at the same time"
    else:
        for ops in prog.mfma_loops:
            if ops[0].addr not in runs:
                b = prog.path(branches, ops)
                runs[ops[0].addr] = ((ops[0].addr, ops[-1].addr), b,
                                     _simulate(b, wpg, wgs, model, iterations))
        order = sorted(runs)
        costs = [_loop_cost(*runs[a][0], runs[a][1], runs[a][2], wpg) for a in order]
        classes, why = loop_classes(costs)
    if classes is None:
        order = [start]
        costs = [_loop_cost(start, end, body, sim, wpg)]
        classes = [(FULL, BOUNDARY)]
        why = (f"hot loop only ({why}): every work unit at the hot loop's rate")
        if len(prog.mfma_loops) > 1:
            notes.append(f"trip model: {why}")
    mfmas = [o for o in body if o.cost.cls == "mfma"]
    flops = (sum(sum(o.cost.flops for o in b) for b in role_bodies) / len(role_bodies)
             if role_bodies else sum(o.cost.flops for o in body))
    main = max(mfmas, key=lambda o: o.cost.flops)
    whole = whole_kernel(problem, loop_flops_per_wg=flops * wpg,
                         cycles_per_iteration=sim.cycles_per_iteration,
                         workgroups_per_cu=wgs,
                         outside_instructions=prog.outside_instructions,
                         peak_flops_per_clk_simd=main.cost.flops / main.cost.cycles,
                         model=model,
                         # wave-specialised roles hold different outputs: not compared
                         output_elements_per_wg=None if role_bodies
                         else _accumulator_elements(mfmas) * wpg,
                         loops=costs, classes=classes, trip_model=why)
    whole["peak_mfma"] = main.mnemonic
    shares = [row["share"] for row in whole["loops"]]
    top = order[max(range(len(order)), key=lambda i: (shares[i], -order[i]))]
    if top != start:
        notes.append(f"hot loop: the loop at {top:#x}, where the kernel spends the largest "
                     f"share of its clocks for this problem (the loop with the most MFMA work, "
                     f"then the longest, is at {start:#x})")
    return whole, runs[top]


def report_fields(binary: bytes, kernel: Optional[str] = None, *,
                  block_threads: Optional[int] = None, dynamic_lds_bytes: int = 0) -> dict:
    """The model's fields for a compiled kernel's ``report.json`` (key ``perf_model``): the
    loop figures of :meth:`PerfReport.report_fields`, or ``{"model": ..., "unavailable":
    reason}`` when the kernel cannot be modelled (no loop, no MFMA timing)."""
    try:
        return analyze(binary, kernel, block_threads=block_threads,
                       dynamic_lds_bytes=dynamic_lds_bytes).report_fields()
    except PerfError as e:
        return {"model": MODEL_NOTE, "unavailable": str(e)}
