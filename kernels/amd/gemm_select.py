"""Tile choice for a GEMM problem (issue 15 item 3): which verified configuration to build when
the user gives no tile (``layoutalg compile gemm`` / ``check gemm`` without ``--block``, and
:func:`select_gemm` in Python).

The whole GEMM on MI300X is ``tiles`` work-groups dealt to ``304 CUs x work-groups per CU``
slots; the last wave of work-groups may leave slots idle, and a tile that overhangs the matrix
computes padding.  For a candidate configuration the static performance model (kernels.perf)
estimates the whole kernel as::

    fraction of MFMA peak = busy x M*N / (waves * slots * BM * BN) x K / (k_tiles * BK)
                            x loop / (loop + prologue and epilogue)

where ``busy`` is the MFMA-busy fraction of the compiled hot loop with ``wg_per_cu``
work-groups resident per CU, ``slots = 304 * wg_per_cu`` and ``waves = ceil(tiles / slots)``
(:func:`kernels.perf.estimate.whole_kernel` computes exactly this, plus a prologue / epilogue
term from the candidate's instructions outside the loop, also measured: the 224-row tile's
predicated epilogue is 5x a 128-row one's).  The loop's busy fraction, residency and
outside-loop count depend on the compiled code, not on M, N, K (beyond predication at ragged
edges), so they are a property of the candidate: they are
recorded in :data:`CANDIDATES`, measured by the model on the compiled code objects (command in
docs/PERFORMANCE.md), and the choice is this closed form, which needs neither clang nor the
model at run time (``check gemm --emulate`` works without a toolchain).  Work-group order: the
grid runs the tiles of a column of M first (blockIdx.x over M); the model does not see L2
reuse, so no other order is claimed to be better.

Split-K / stream-K for long K with small M*N is NOT offered: it needs either fp32 atomics into
C (a result that depends on the order of the adds, and a gate that proves coverage of a
reduction across work-groups, which it does not do today) or a second reduction kernel; the
decision text says when a problem would want it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

from .gemm import choose_lds_layouts
from .gemm_plan import DTYPE_BYTES, ConfigError, GemmConfig, norm_dtype, plan_gemm

__all__ = ["Candidate", "CANDIDATES", "FP8_CANDIDATES", "PRESHUFFLED_FP8_CANDIDATES",
           "TileChoice", "candidate_table", "select_gemm", "score", "CUS", "overhead_cycles"]

MEASURED_SHAPE = (4096, 4096, 4096)   # where a candidate's first figures were measured
CUS = 304            # MI300X compute units (mfma_specs.arch gfx942; the model's GFX942.cus)


@dataclass(frozen=True)
class Candidate:
    """A configuration the selection may pick, with its model figures (4096^3 f16 NN, or fp8
    NN for ``elem_bytes`` 1, the pipelined schedule, clang-19; ``busy``: MFMA-pipe busy fraction of the hot loop;
    ``waves_per_simd``: the residency the code object allows)."""

    block_m: int
    block_n: int
    block_k: int
    waves_m: int
    waves_n: int
    stages: int
    busy: float
    waves_per_simd: int
    mfma: Optional[str] = None
    busy_ragged: Optional[float] = None       # the same at 4000x3000x1000 (every edge
    waves_per_simd_ragged: Optional[int] = None  # predicated: more VALU, more registers)
    elem_bytes: int = 2                       # 1: an fp8/bf8 candidate (twice the MFMA peak)
    waves_per_eu: int = 0                     # GemmConfig.waves_per_eu (2: a 256-register
    #                                           budget that keeps two waves per SIMD)
    outside: int = 400                        # instructions outside the hot loop (prologue,
    outside_ragged: Optional[int] = None      # epilogue), aligned / ragged; 400: a typical
    #                                           figure, for rows not measured for it
    schedule: str = "pipelined"               # GemmConfig.schedule ("interleaved": one wave
    #                                           per SIMD hiding its own latencies)
    swap_ab: bool = False                     # GemmConfig.swap_ab for a row-major C: each
    #                                           lane's accumulator values along N, wide stores

    @property
    def waves(self) -> int:
        return self.waves_m * self.waves_n

    @property
    def wg_per_cu(self) -> int:
        """Work-groups resident per CU (4 SIMDs): the model's ``workgroups_per_cu``."""
        return max(1, self.waves_per_simd * 4 // self.waves)

    def on(self, m: int, n: int, k: int) -> "Candidate":
        """The figures that apply to an M x N x K problem: the ragged ones when an edge tile is
        partial (the kernel then predicates its loads and stores)."""
        if self.busy_ragged is None or self._partial_edges(m, n, k) <= self._partial_edges(
                *MEASURED_SHAPE):
            return self
        return replace(self, busy=self.busy_ragged,
                       waves_per_simd=self.waves_per_simd_ragged or self.waves_per_simd,
                       outside=self.outside_ragged or self.outside)

    def _partial_edges(self, m: int, n: int, k: int) -> frozenset:
        """The dimensions whose last tile is partial (predicated loads / stores) at M x N x K:
        the 4096^3 figures already include those of a tile that does not divide 4096 (224)."""
        return frozenset(d for d, v, b in (("m", m, self.block_m), ("n", n, self.block_n),
                                           ("k", k, self.block_k)) if v % b)

    def label(self) -> str:
        m = f", {self.mfma}" if self.mfma else ""
        w = f", waves_per_eu {self.waves_per_eu}" if self.waves_per_eu else ""
        return (f"{self.block_m}x{self.block_n}x{self.block_k} ({self.waves_m}x{self.waves_n} "
                f"waves, {self.stages} LDS stage{'s' if self.stages > 1 else ''}, "
                f"{self.schedule}{m}{w})")


# measured with benchmarks/gfx942_static.py's model on 4096x4096x4096 f16 NN code objects of
# the pipelined schedule (docs/PERFORMANCE.md, "Tile choice"); a change to the builder that
# moves these figures should re-measure them (tools/measure_gemm_candidates.py prints every
# row; tests/test_gemm_select.py checks four rows).  Re-measured 2026-11-24 after the loop
# changes of "the loop against Triton's" (docs/PERFORMANCE.md): 128x128x64 one stage 0.927 ->
# 1.000 busy
_F16 = "16x16x16"
CANDIDATES: Tuple[Candidate, ...] = (
    Candidate(256, 256, 32, 4, 2, 2, 0.698, 2, busy_ragged=0.696, waves_per_simd_ragged=2,
              outside=914, outside_ragged=2812),
    Candidate(128, 128, 32, 2, 2, 2, 0.900, 2, busy_ragged=0.808, waves_per_simd_ragged=2,
              outside=717, outside_ragged=1522),
    Candidate(128, 128, 64, 2, 2, 1, 1.000, 2, busy_ragged=0.796, waves_per_simd_ragged=2,
              outside=642, outside_ragged=1477),
    Candidate(128, 128, 32, 2, 2, 1, 1.000, 3, busy_ragged=0.747, waves_per_simd_ragged=2,
              outside=577, outside_ragged=1343),
    Candidate(128, 64, 32, 2, 2, 1, 0.886, 5, busy_ragged=0.738, waves_per_simd_ragged=4,
              outside=399, outside_ragged=784),
    # against CU quantisation: 224 = 7 x 32 rows give 19 x 32 = 608 tiles at 4096^2, one full
    # round of 2 work-groups on each of the 304 CUs; the 256-register hint keeps 2 waves/SIMD
    # (its 4096^3 figures already predicate the partial last row of tiles: 4096 = 18 x 224 + 64)
    Candidate(224, 128, 32, 1, 4, 1, 0.835, 2, busy_ragged=0.752, waves_per_simd_ragged=2,
              waves_per_eu=2, outside=1737, outside_ragged=2231),
    # one wave per SIMD (512 registers: 224 accumulators in AGPRs), 2x2 waves of 112x128: A and
    # B each read twice from LDS, 19 x 16 = 304 tiles at 4096^2 = one work-group on every CU;
    # the wave hides its own latencies (kernels.amd.gemm_interleave)
    Candidate(224, 256, 32, 2, 2, 1, 0.951, 1, _F16, busy_ragged=0.945,
              waves_per_simd_ragged=1, waves_per_eu=1, outside=1691, outside_ragged=2698,
              schedule="interleaved", swap_ab=True),
    Candidate(64, 64, 64, 2, 2, 1, 0.637, 4, busy_ragged=0.661, waves_per_simd_ragged=4,
              outside=288, outside_ragged=526),
    Candidate(64, 64, 32, 2, 2, 2, 0.487, 4, busy_ragged=0.474, waves_per_simd_ragged=4,
              outside=323, outside_ragged=556),
    # small M (the decode-time linear layer): 16x16x16 MFMAs, few rows per work-group
    Candidate(64, 64, 64, 2, 2, 2, 0.447, 2, _F16, busy_ragged=0.409, waves_per_simd_ragged=2,
              outside=372, outside_ragged=667),
    Candidate(32, 64, 64, 1, 4, 2, 0.241, 2, _F16, busy_ragged=0.239, waves_per_simd_ragged=2,
              outside=277, outside_ragged=346),
    Candidate(16, 64, 128, 1, 4, 2, 0.104, 1, _F16, busy_ragged=0.105, waves_per_simd_ragged=1,
              outside=301, outside_ragged=415),
    Candidate(16, 32, 64, 1, 2, 2, 0.163, 3, _F16, busy_ragged=0.154, waves_per_simd_ragged=3,
              outside=219, outside_ragged=293),
    Candidate(16, 16, 64, 1, 1, 2, 0.133, 2, _F16, busy_ragged=0.117, waves_per_simd_ragged=2,
              outside=236, outside_ragged=315),
    # mid-size squares (2048^3: 512 work-groups of 64x128 on 304 CUs x 2; Triton's best of its
    # autotune list there).  Its transpose 128x64x64 is not a candidate: its 4096^3 figure
    # (0.701) would rank it first at 2048^3, where the model puts it below this tile (55.4 %
    # against 56.7 %; 4096^3 strides need more address arithmetic than 2048^3 ones, so the
    # loops' busy differs between the shapes); at 4000x3000x1000 it is 0.672 busy against 0.717
    Candidate(64, 128, 64, 2, 2, 1, 0.690, 2, busy_ragged=0.717, waves_per_simd_ragged=2,
              outside=400, outside_ragged=858),
)

# fp8/bf8: the same tiles with 64 bytes of k per LDS row (block_k doubled, the 16x16x32 MFMA
# for the small-M rows), measured as fp8 NN kernels (scales off, f16 C) by the same model:
# (busy, waves/SIMD, instructions outside the loop) at 4096^3 and the same at 4000x3000x1000.
# They differ from the f16 figures (e.g. ragged 128x128x128 one stage: 27 % busy at 1 wave/SIMD
# against f16 128x128x64's 80 %), so the fp8 choice and its estimate use these
# (docs/PERFORMANCE.md, "fp8 through the tile choice" and "fp8 against CU quantisation";
# re-measure: tools/measure_gemm_candidates.py --dtype fp8; re-measured 2026-11-24 after the
# loop changes of "the loop against Triton's": s_setprio after the first MFMA, one k-tile per
# one-stage iteration).  16x64x256 and 16x32x128: at K = 1000 clang unrolls the short (two-stage)
# k loop completely and the model finds no loop; their 4096^3 figures stand in.
_FP8_FIGURES: Tuple[Tuple[float, int, int, float, int, Optional[int]], ...] = (
    (0.687, 2, 896, 0.682, 2, 2877), (0.864, 2, 706, 0.694, 2, 1595),
    (1.000, 2, 634, 0.269, 1, 1640), (0.997, 3, 568, 0.670, 2, 1389),
    (0.837, 5, 396, 0.719, 4, 842), (0.818, 2, 1706, 0.713, 2, 2221),
    (0.926, 1, 1703, 0.029, 1, 3087),     # 224x256x64 interleaved: spills when ragged
    (0.615, 4, 280, 0.569, 4, 573), (0.468, 4, 323, 0.420, 4, 628),
    (0.425, 2, 366, 0.359, 2, 755), (0.227, 2, 280, 0.203, 2, 394),
    (0.096, 1, 316, 0.096, 1, None), (0.153, 3, 226, 0.153, 3, None),
    (0.125, 2, 233, 0.101, 2, 371), (0.715, 2, 398, 0.335, 2, 993),
)
_FP8_MFMA = {_F16: "16x16x32"}
# every f16 row has an fp8 twin, the 224-row quantisation tile (608 work-groups at 4096^2, one
# full round of 2 per CU) included: fp8 224x128x64 keeps 2 waves/SIMD under the same hint
FP8_CANDIDATES: Tuple[Candidate, ...] = tuple(
    replace(c, block_k=2 * c.block_k, busy=b, waves_per_simd=w, busy_ragged=br,
            waves_per_simd_ragged=wr, mfma=_FP8_MFMA.get(c.mfma, c.mfma), elem_bytes=1,
            outside=o, outside_ragged=orr)
    for c, (b, w, o, br, wr, orr) in zip(CANDIDATES, _FP8_FIGURES))

# fp8/bf8 with B preshuffled (kernels.amd.gemm_preshuffle: B from global memory straight into
# registers, no LDS for B, so LDS holds and serves A only): two LDS stages (the builder's B
# register sets alternate with them), measured as fp8 NN kernels with preshuffled B (scales
# off, f16 C) by the same model: tools/measure_gemm_candidates.py --dtype fp8 --b-layout
# preshuffled (docs/PERFORMANCE.md, "fp8 with preshuffled B").  Only a caller who says B is
# preshuffled (b_layout="preshuffled") gets these: a plain B never meets a kernel that expects
# the shuffled order.  (tile, waves, MFMA, waves_per_eu; busy, waves/SIMD, outside) at 4096^3
# and at 4000x3000x1000.
_F8_16 = "16x16x32"
# (block_m, block_n, block_k, waves_m, waves_n, mfma, waves_per_eu;
#  4096^3: busy, waves/SIMD, outside; 4000x3000x1000: the same, None where clang unrolls the
#  short k loop completely and the model finds no loop: the 4096^3 figures stand in)
_PS_FP8 = (
    (224, 128, 64, 1, 4, None, 2, 0.893, 2, 2155, 0.890, 2, 2346),
    (128, 128, 64, 2, 2, None, 0, 1.000, 3, 547, 0.786, 2, 1459),
    (256, 256, 64, 4, 2, None, 0, 0.641, 2, 731, 0.572, 2, 2859),
    (128, 64, 64, 2, 2, None, 0, 0.676, 4, 391, 0.790, 4, 827),
    (64, 64, 128, 2, 2, None, 0, 0.495, 4, 271, 0.650, 4, 562),
    (64, 64, 128, 2, 2, _F8_16, 0, 0.498, 4, 259, 0.666, 4, 571),
    (32, 64, 128, 1, 4, _F8_16, 0, 0.657, 7, 186, 0.483, 6, 204),
    (16, 64, 256, 1, 4, _F8_16, 0, 0.299, 5, 160, None, None, None),
    (16, 32, 128, 1, 2, _F8_16, 0, 0.323, 8, 130, None, None, None),
    (16, 16, 128, 1, 1, _F8_16, 0, 0.250, 4, 135, 0.250, 4, 184),
)
PRESHUFFLED_FP8_CANDIDATES: Tuple[Candidate, ...] = tuple(
    Candidate(bm, bn, bk, wm, wn, 2, b, w, mf, busy_ragged=br, waves_per_simd_ragged=wr,
              elem_bytes=1, waves_per_eu=wpe, outside=o, outside_ragged=orr)
    for bm, bn, bk, wm, wn, mf, wpe, b, w, o, br, wr, orr in _PS_FP8)


def candidate_table(dtype: str, b_layout: str = "plain") -> Tuple[Candidate, ...]:
    """The measured candidates for an element type and B storage: 16-bit and fp8/bf8 tables
    for plain B, the fp8/bf8 preshuffled table for preshuffled B.  Raises ``ConfigError`` for a
    combination no table was measured for (16-bit preshuffled B: give the tile yourself)."""
    one_byte = DTYPE_BYTES.get(norm_dtype(dtype), 2) == 1
    if b_layout == "plain":
        return FP8_CANDIDATES if one_byte else CANDIDATES
    if b_layout == "preshuffled" and one_byte:
        return PRESHUFFLED_FP8_CANDIDATES
    if b_layout == "preshuffled":
        raise ConfigError(f"no measured tile table for {dtype} with preshuffled B (only fp8/bf8 "
                          "have one): give the tile yourself (--block, e.g. 128x128x32)")
    raise ConfigError(f"b_layout must be 'plain' or 'preshuffled', got {b_layout!r}")


# kernels.perf.estimate.whole_kernel's prologue / epilogue term; a candidate's instruction count
# outside the loop is measured with its busy figure (a 224-row tile's 112-accumulator predicated
# epilogue is ~1900 instructions, 5x the typical 400 that unmeasured rows keep)
def overhead_cycles(outside_instructions: int) -> int:
    """The model's per-work-group prologue / epilogue: two memory latencies (2 x 700 clocks)
    and the instructions outside the hot loop at one per 4 clocks."""
    return 2 * 700 + outside_instructions * 4

PEAK_FLOPS_PER_CLK_CU = 4 * 512     # 4 SIMDs x a 32x32x8 f16/bf16 MFMA's 16384 flops / 32 clk
#                                     (fp8/bf8: twice that, 32x32x16 in the same 32 clk)


@dataclass(frozen=True)
class Score:
    candidate: Candidate
    tiles: int
    slots: int
    waves: int
    quantisation: float      # M*N / (waves * slots * BM * BN): idle slots and tile overhang
    k_fill: float            # K / (k_tiles * BK)
    value: float             # busy * quantisation * k_fill: the model's whole-kernel fraction

    def describe(self) -> str:
        c = self.candidate
        last = self.tiles - (self.waves - 1) * self.slots
        peak = "the fp8 MFMA peak" if c.elem_bytes == 1 else "MFMA peak"
        return (f"{c.label()}: {self.tiles} work-groups on {CUS} CUs x {c.wg_per_cu} per CU = "
                f"{self.tiles / self.slots:.2f} waves (last wave {100 * last / self.slots:.0f}% "
                f"full), M*N use {100 * self.quantisation:.0f}%, K use {100 * self.k_fill:.0f}%, "
                f"loop busy {100 * c.busy:.0f}% -> estimate {100 * self.value:.1f}% of {peak}")


def score(c: Candidate, m: int, n: int, k: int) -> Score:
    """The closed-form whole-kernel estimate of candidate ``c`` on an M x N x K GEMM (its
    ragged figures when an edge tile is partial)."""
    c = c.on(m, n, k)
    tiles = math.ceil(m / c.block_m) * math.ceil(n / c.block_n)
    slots = CUS * c.wg_per_cu
    waves = math.ceil(tiles / slots)
    quant = (m * n) / (waves * slots * c.block_m * c.block_n)
    iters = math.ceil(k / c.block_k)
    kfill = k / (iters * c.block_k)
    # clocks of one loop iteration with wg_per_cu work-groups sharing the CU's MFMA pipes
    peak = PEAK_FLOPS_PER_CLK_CU * (2 // c.elem_bytes)
    cyc = c.wg_per_cu * 2.0 * c.block_m * c.block_n * c.block_k / (peak * c.busy)
    loop_share = iters * cyc / (iters * cyc + overhead_cycles(c.outside))
    return Score(c, tiles, slots, waves, quant, kfill, c.busy * quant * kfill * loop_share)


@dataclass(frozen=True)
class TileChoice:
    """The chosen configuration, why, and the candidates it was chosen from (best first)."""

    config: GemmConfig
    reason: str
    ranking: Tuple[Score, ...]

    def to_json(self) -> dict:
        return {"chosen": self.ranking[0].candidate.label(), "reason": self.reason,
                "candidates": [{"config": s.candidate.label(), "estimate": round(s.value, 4),
                                "waves": round(s.tiles / s.slots, 3),
                                "quantisation": round(s.quantisation, 4)}
                               for s in self.ranking]}


def _conflict_free(plan) -> None:
    """The interleaved schedule reads one MFMA k-step (8 bytes a lane) per LDS read; for some
    operand arrangements (k-contiguous B, narrow B loads) no swizzle in the search makes those
    reads and the copy's writes conflict-free, and the gate would refuse the kernel: refuse the
    candidate here instead (ConfigError with the search's verdict)."""
    choose_lds_layouts(plan)
    for op in (plan.a, plan.b):
        s = op.swizzle_search
        if s is not None and not s.holds:
            raise ConfigError(f"{op.name}: {s.summary()} (one-k-step LDS reads)")


def select_gemm(m: int, n: int, k: int, dtype: str = "f16", **options) -> TileChoice:
    """Pick tile, waves, block_k, LDS stages and the pipelined schedule for ``C[m,n] =
    A[m,k] @ B[k,n]``: the candidate with the highest closed-form whole-kernel estimate among
    those that plan for this problem (``options``: the other GemmConfig fields, e.g. layouts and
    out_dtype).  The reason names the winner's waves, quantisation and estimate, and the
    runner-up's."""
    for bad in ("block_m", "block_n", "block_k", "waves_m", "waves_n", "stages", "schedule"):
        if bad in options:
            raise ConfigError(f"select_gemm chooses {bad}; build a GemmConfig yourself to "
                              f"set it")
    for name, v in (("m", m), ("n", n), ("k", k)):
        if type(v) is not int or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    # 1-byte fp8/bf8: the fp8 table (an LDS row keeps its 64 bytes of k, twice the elements,
    # and the figures were measured on fp8 code objects: the f16 ones overstate fp8's loop);
    # preshuffled B: the table of the kernels that read B from registers (what runs)
    table = candidate_table(dtype, options.get("b_layout", "plain"))
    ranked = sorted((score(c, m, n, k) for c in table),
                    key=lambda s: (-s.value, -s.candidate.block_m * s.candidate.block_n))
    usable: List[Tuple[Score, GemmConfig]] = []
    refused: List[str] = []
    for s in ranked:
        c = s.candidate
        cfg = GemmConfig(m, n, k, dtype=dtype, block_m=c.block_m, block_n=c.block_n,
                         block_k=c.block_k, waves_m=c.waves_m, waves_n=c.waves_n,
                         stages=c.stages, mfma=c.mfma, schedule=c.schedule,
                         waves_per_eu=c.waves_per_eu, **options)
        # swapped MFMA operands put a lane's values along N: wide stores for a row-major C only
        cfg = replace(cfg, swap_ab=c.swap_ab and cfg.c_major == "row")
        try:
            if cfg.b_layout == "preshuffled":    # B's order is the shuffle, not b_major; and
                from .gemm_preshuffle import check_preshuffled    # the builder's conditions
                check_preshuffled(plan_gemm(replace(cfg, b_major="row")))
            else:
                plan = plan_gemm(cfg)
                if c.schedule == "interleaved":
                    _conflict_free(plan)
        except ConfigError as e:
            refused.append(f"{c.label()}: {e}")
            continue
        usable.append((s, cfg))
    if not usable:
        raise ConfigError(f"no candidate tile plans for {m}x{n}x{k}: " + "; ".join(refused))
    best, cfg = usable[0]
    reason = f"chosen {best.describe()}"
    if len(usable) > 1:
        reason += f"; runner-up {usable[1][0].describe()}"
    big = math.ceil(m / 128) * math.ceil(n / 128)
    if big < CUS and k >= 4 * max(m, n):
        reason += (f"; long K with a small M*N: 128x128 tiles would occupy {big} of {CUS} CUs, "
                   "so a smaller, less efficient tile was weighed against them; split-K would "
                   "fill the CUs but is not offered (see kernels.amd.gemm_select)")
    cfg = replace(cfg, selection=reason)
    return TileChoice(cfg, reason, tuple(s for s, _ in usable))
