"""Hopper GEMM with TMA loads, mbarriers, warp specialisation and persistent tiles (issue 20
item 4): the published design of CUTLASS's sm90 "cooperative" kernel, written from the PTX ISA.

``C = A @ B`` (``A`` (M, K) row-major; ``B`` (K, N) row-major with ``b_major="n"`` or (N, K)
with ``"k"``), f16/bf16 in, f32 accumulation, ``C`` in the input dtype.  One CTA per SM
(grid = min(tiles, SMs)) walks the output tiles ``blockIdx.x, blockIdx.x + gridDim.x, ...``
in a grouped raster (``group_m`` tile rows walk N together, so the CTAs of one wave share A
and B tiles in L2).  Warpgroup 0 is the producer: it gives registers back (``setmaxnreg.dec``)
and one thread issues, per k tile, the TMA boxes of A and B into a ring of ``stages`` stages
(``cp.async.bulk.tensor.2d`` completing on the stage's *full* mbarrier); it waits on the
stage's *empty* mbarrier before reusing it.  Warpgroups 1.. are consumers (``setmaxnreg.inc``):
each waits for a stage to be full, issues ``wgmma.m64n{bn}k16`` on its 64 rows, keeps one
wgmma group in flight, and releases the previous stage (one arrive per warp); after the last
k tile it stores its accumulators to C (registers -> global) while the producer already fills
the stages with the next tile's operands.

TMA zero-fills outside the tensor, so any M, N, K runs with no edge code in the k loop; the
tensors must have 16-byte aligned bases and row strides (the runner refuses others;
:func:`kernels.nvidia.dispatch.gemm` copies unaligned operands into padded buffers first when
the selection says so).

Proved before any source is printed (:func:`plan_tma_gemm`): for every consumer warpgroup, k
step and operand element, the address the printed descriptor makes the tensor cores read is
where the TMA boxes wrote that element (:func:`kernels.nvidia.tma.check_tma_against_descriptors`
with the 128-byte TMA swizzle model), the stage and box offsets are multiples of the swizzle
repeat, the expected transaction bytes are the boxes' bytes, and the epilogue's (row, col) of
each accumulator register is the wgmma accumulator layout at every thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Tuple

from ..errors import LaunchError
from ..runtime.launch_cache import PerStream
from ..runtime.rocm import TensorSpec
from . import layout_c as lc
from .builder import CompiledKernel
from .gemm import CudaGemm, c_layout, need
from .prelude import PACK, source_head
from .splitk import reduce_kernel, reduce_site
from .splitk_inline import (INLINE_PARAMS, counter_slots, emit_inline_epilogue,
                           prove_inline_reduce)
from .tma import (SWIZZLE_REPEAT, TMA_HELPERS, DeviceMaps, TmaOperandLoad, box_offset_expr,
                  check_printed_offsets, check_tma_against_descriptors, encode_tensor_map,
                  tma_tile_addresses)
from .wgmma import (HELPERS, GemmTileBytes, accumulator_rows_cols, emit_wgmma_k_steps, proved,
                    split_ranges, wgmma_wrapper)
import numpy as np

from mfma_specs.nvidia_wgmma import GmmaDescriptor, wgmma

__all__ = ["TmaGemmConfig", "TmaGemmPlan", "plan_tma_gemm", "emit_tma_gemm", "TmaGemm"]

STAGE_ALIGN = 1024
STATIC_SMEM = 1024          # the mbarriers, as ptxas reports the static shared memory
PRODUCER_REGS = 40          # setmaxnreg of the producer warpgroup
CONSUMER_REGS = 232         # ... and of each consumer (128 * 40 + 256 * 232 <= 64K)
REGISTER_FILE = 65536       # 32-bit registers of one SM
A_ROWS = (8, 16, 32)        # the short A boxes (multiples of the 128-byte swizzle's 8 rows)


@dataclass(frozen=True)
class TmaGemmConfig(GemmTileBytes):
    dtype: str = "f16"
    b_major: str = "n"
    bm: int = 128               # 64 rows per consumer warpgroup
    bn: int = 256               # the wgmma N
    bk: int = 64                # one 128-byte swizzle row of 16-bit elements
    stages: int = 3             # 3 x 48 KiB + the 64 KiB C buffers of 128x256 in 227 KiB
    group_m: int = 8
    arch: str = "sm_90a"
    store: str = "tma"          # "tma": registers -> swizzled shared -> TMA store; "direct"
    split_k: bool = False       # (tile, k range) work units; fp32 partials + reduce kernel
    reduce: str = "kernel"      # split-K: "kernel" (a second launch) or "inline" (the last
                                # split CTA of each tile reduces: one launch, splitk_inline.py)
    ctas_per_sm: int = 1        # 2: __launch_bounds__(threads, 2), the consumers' setmaxnreg
                                # share of half the register file, grid = min(units, 2 x SMs)
                                # (two CTAs of a skinny split-K GEMM overlap one's epilogue
                                # with the other's loads)
    a_rows: int = 0             # rows of A's TMA box: 0 = bm; 8/16/32 (bm=64) for M <= a_rows:
                                # the box carries only rows that exist (a box mostly outside
                                # the tensor is slow to fill); the wgmma still reads 64 rows,
                                # the rows past a_rows only feed C rows >= M, never stored

    @property
    def consumers(self) -> int:
        return self.bm // 64

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def c_stage(self) -> int:
        """Bytes of one consumer's C buffer (64 x bn), 0 with direct stores."""
        return 64 * self.bn * 2 if self.store == "tma" else 0

    @property
    def a_box_rows(self) -> int:
        """Rows of A's TMA box (``a_rows``, or the whole tile)."""
        return self.a_rows or self.bm

    @property
    def consumer_regs(self) -> int:
        """``setmaxnreg.inc`` of each consumer thread: 232 with one CTA per SM; with two, what
        half the register file leaves after the producer's 40 (a multiple of 8, as
        ``setmaxnreg`` needs): 216 for one consumer."""
        if self.ctas_per_sm == 1:
            return CONSUMER_REGS
        per_cta = REGISTER_FILE // self.ctas_per_sm
        return min(CONSUMER_REGS, (per_cta - 128 * PRODUCER_REGS) // (128 * self.consumers)
                   // 8 * 8)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory (the mbarriers are static shared memory)."""
        return (self.stages * (self.a_stage + self.b_stage) + self.consumers * self.c_stage
                + STAGE_ALIGN)

    @property
    def name(self) -> str:
        return (f"lg_wgmma_tma_{self.dtype}_{self.b_major}_{self.bm}x{self.bn}x{self.bk}"
                f"_s{self.stages}" + ("" if self.group_m == 8 else f"_g{self.group_m}")
                + ("" if self.store == "tma" else "_ds") + ("_sk" if self.split_k else "")
                + ("i" if self.inline_reduce else "")
                + ("" if self.ctas_per_sm == 1 else f"_c{self.ctas_per_sm}")
                + (f"_a{self.a_rows}" if self.a_rows else ""))

    @property
    def inline_reduce(self) -> bool:
        """Split-K whose partials the last-arriving CTA of each tile sums (one launch)."""
        return self.split_k and self.reduce == "inline"


def _validate(cfg: TmaGemmConfig) -> None:
    need(cfg.dtype in ("f16", "bf16"), f"dtype must be 'f16' or 'bf16', got {cfg.dtype!r}")
    need(cfg.b_major in ("n", "k"), f"b_major must be 'n' or 'k', got {cfg.b_major!r}")
    need(cfg.bm in (64, 128), f"bm={cfg.bm}: 64 or 128 (64 rows per consumer warpgroup, 1 or "
         "2 consumers: their accumulators must fit the 232 registers setmaxnreg gives them)")
    need(cfg.bn % 64 == 0 and 64 <= cfg.bn <= 256, f"bn={cfg.bn}: a multiple of 64 in 64..256")
    need(cfg.bk == 64, f"bk={cfg.bk}: 64 (a TMA box row of 128 bytes, the 128-byte swizzle)")
    need(cfg.stages >= 2, f"stages={cfg.stages}: at least 2")
    need(cfg.store in ("tma", "direct"), f"store={cfg.store!r}: 'tma' or 'direct'")
    need(not (cfg.split_k and cfg.store == "tma"), "split_k writes fp32 partials with direct "
         "stores: use store='direct'")
    need(cfg.reduce in ("kernel", "inline"), f"reduce={cfg.reduce!r}: 'kernel' or 'inline'")
    need(cfg.reduce == "kernel" or cfg.split_k, "reduce='inline' is a split-K form: "
         "split_k=True")
    need(cfg.reduce == "kernel" or cfg.bn <= 128, f"reduce='inline' with bn={cfg.bn}: its "
         "reducer's loads and the bn/2 accumulators exceed the 232 registers (ptxas spills at "
         "bn=256): use bn <= 128 or reduce='kernel'")
    need(cfg.group_m >= 1, f"group_m={cfg.group_m}: at least 1")
    need(cfg.arch == "sm_90a", f"arch={cfg.arch!r}: wgmma and setmaxnreg need 'sm_90a'")
    need(cfg.smem_bytes + STATIC_SMEM <= 227 * 1024, f"{cfg.smem_bytes} bytes of dynamic "
         f"shared memory + {STATIC_SMEM} static; sm_90 allows 227 KiB per block")
    need(cfg.ctas_per_sm in (1, 2), f"ctas_per_sm={cfg.ctas_per_sm}: 1 or 2")
    need(cfg.a_rows in (0,) + A_ROWS, f"a_rows={cfg.a_rows}: 0 (the whole tile) or one of "
         f"{A_ROWS}")
    need(not cfg.a_rows or cfg.bm == 64, f"a_rows={cfg.a_rows} with bm={cfg.bm}: a short A box "
         "is for one consumer warpgroup (bm=64) on problems of at most a_rows rows")
    if cfg.ctas_per_sm > 1:
        need(cfg.consumers == 1, f"ctas_per_sm={cfg.ctas_per_sm} with bm={cfg.bm}: two "
             "consumer warpgroups' accumulators do not fit half the register file; use bm=64")
        need(cfg.ctas_per_sm * (cfg.smem_bytes + STATIC_SMEM + 1024) <= 228 * 1024,
             f"ctas_per_sm={cfg.ctas_per_sm}: {cfg.ctas_per_sm} x ({cfg.smem_bytes} + "
             f"{STATIC_SMEM} static + 1024 reserved) bytes of shared memory exceed the SM's "
             "228 KiB: use fewer stages")


@dataclass(frozen=True)
class TmaOperand:
    """How the tensor cores read one operand's stage: ``major`` "K" or "MN", the descriptor's
    constant fields (start 0), the start byte of each k16 step and between warpgroups."""

    name: str
    major: str
    desc: GmmaDescriptor
    k_starts: Tuple[int, ...]
    wg_step: int


def kmajor_reads(name: str, wg_rows: int, bk: int = 64) -> TmaOperand:
    """K-major rows of ``bk`` = 64 elements, each one 128-byte swizzle row: SBO = 8 rows
    (1024 B), LBO unused; k step ``s`` starts 32 s bytes into the row; warpgroups
    ``wg_rows`` rows apart."""
    return TmaOperand(name, "K", GmmaDescriptor(0, 16, 1024, 128),
                      tuple(32 * s for s in range(bk // 16)), wg_rows * 128)


def mnmajor_reads(name: str, bk: int, bn: int) -> TmaOperand:
    """MN-major (k rows of bn elements stored as 64-column blocks of ``bk`` 128-byte rows):
    LBO = the next 64-column block (``bk * 128`` B), SBO = the next 8 k rows (1024 B); k
    step ``s`` starts 16 rows (2048 B) further."""
    return TmaOperand(name, "MN", GmmaDescriptor(0, bk * 128, 1024, 128),
                      tuple(16 * 128 * s for s in range(bk // 16)), 0)


@dataclass
class TmaGemmPlan:
    cfg: TmaGemmConfig
    a: TmaOperand
    b: TmaOperand
    a_load: TmaOperandLoad
    b_load: TmaOperandLoad
    c_load: TmaOperandLoad      # one consumer's 64 x bn C buffer, read by the TMA store
    checks: Dict[str, Any] = field(default_factory=dict)

    @property
    def stage_tx_bytes(self) -> int:
        return self.a_load.stage_bytes + self.b_load.stage_bytes

    def describe(self) -> Dict[str, str]:
        out = {}
        for op, ld in ((self.a, self.a_load), (self.b, self.b_load)):
            out[f"{op.name} TMA"] = (f"{ld.boxes} box(es) of ({ld.box_inner}, {ld.rows}) every "
                                     f"{ld.stride} B, swizzle {ld.swizzle} B")
            out[f"{op.name} descriptor"] = (f"{op.major}-major, swizzle {op.desc.swizzle_width} B,"
                                            f" LBO {op.desc.lbo} B, SBO {op.desc.sbo} B, "
                                            f"warpgroup step {op.wg_step} B")
        out.update({k: v.summary() for k, v in self.checks.items()})
        return out


def operand_loads(cfg: TmaGemmConfig):
    """The TMA boxes filling each stage: A (bm x 64, K-major) one box; B N-major (64 x bn)
    ``bn / 64`` boxes of 64 columns side by side; B K-major (bn x 64) one box."""
    a = TmaOperandLoad(cfg.a_box_rows, cfg.bk)
    b = TmaOperandLoad(cfg.bk, cfg.bn) if cfg.b_major == "n" else TmaOperandLoad(cfg.bn, cfg.bk)
    return a, b


@lru_cache(maxsize=32)
def plan_tma_gemm(cfg: TmaGemmConfig) -> TmaGemmPlan:
    """Descriptors, TMA boxes and the proofs of one configuration (cached); raises
    :class:`GemmConfigError` if any fails."""
    _validate(cfg)
    a = kmajor_reads("A", 64, cfg.bk)
    b = mnmajor_reads("B", cfg.bk, cfg.bn) if cfg.b_major == "n" else kmajor_reads("B", 0, cfg.bk)
    a_load, b_load = operand_loads(cfg)
    plan = TmaGemmPlan(cfg, a, b, a_load, b_load, TmaOperandLoad(64, cfg.bn))
    if cfg.a_rows:
        plan.checks["A short box"] = check_short_a_box(cfg, a_load)
    # the descriptors read every row of the tile: proved against the whole tile's box model
    # (a short box writes the first a_rows rows of it, check_short_a_box)
    a_tile = TmaOperandLoad(cfg.bm, cfg.bk)
    for op, ld, wgs, mn in ((a, a_tile, cfg.consumers, 64), (b, b_load, 1, cfg.bn)):
        n = check_tma_against_descriptors(f"{cfg.name}: operand {op.name}", ld, op.major,
                                          op.desc, op.k_starts, op.wg_step, wgs, mn)
        plan.checks[f"{op.name} TMA == descriptors"] = proved(
            f"{op.name}: descriptor reads == TMA writes at all {n} (warpgroup, k step, "
            "element) points", "every consumer warpgroup, k step and operand element")
    for nm, b_ in (("A", cfg.a_stage), ("B", cfg.b_stage)):
        need(b_ % STAGE_ALIGN == 0, f"{nm} stage of {b_} bytes is not a multiple of "
             f"{STAGE_ALIGN}: later stages would break the swizzle models")
    need(a_load.stage_bytes == cfg.a_box_rows * cfg.bk * 2 and b_load.stage_bytes == cfg.b_stage
         and a_load.stage_bytes <= cfg.a_stage,
         "the TMA boxes do not fill the stages exactly (the expected transaction bytes would "
         "not match)")
    if cfg.store == "tma":
        plan.checks.update(check_c_buffer(cfg, plan.c_load))
    if cfg.inline_reduce:
        tot = prove_inline_reduce(cfg.dtype, cfg.bm, cfg.bn, cfg.group_m)
        plan.checks["split-K inline reduce"] = proved(
            f"{tot['units']} work units each run once with a non-empty k range, tiles' k "
            f"ranges partition K; {tot['partials']} partial stores disjoint and inside the "
            f"workspace; {tot['slots']} counter slots distinct; {tot['orders']} arrival "
            "orders x 2 launches: each tile reduced once, after all splits, counter back to 0",
            "problems with edge tiles in M and N (odd N), uneven k ranges, splits 1-7, "
            "grids 1 / 3 / 132")
    plan.checks["stage alignment"] = proved(
        f"stages {cfg.a_stage} / {cfg.b_stage} B and boxes multiples of {STAGE_ALIGN} "
        f"(swizzle repeat {SWIZZLE_REPEAT[128]} B); transaction bytes {plan.stage_tx_bytes} "
        "per stage = the boxes' bytes", "every stage and box")
    return plan


def check_short_a_box(cfg: TmaGemmConfig, a_load: TmaOperandLoad) -> Any:
    """A box of ``a_rows`` rows writes exactly the bytes the whole tile's box writes for its
    first ``a_rows`` rows (the 128-byte swizzle XORs with the row mod 8, and ``a_rows`` is a
    multiple of 8), inside the A stage; the rows past it are read by the wgmma but hold stale
    bytes that feed only accumulator rows ``>= a_rows``, which no store reaches because the
    runner refuses ``M > a_rows`` (:meth:`TmaGemm.bind`)."""
    short = tma_tile_addresses(a_load)
    whole = tma_tile_addresses(TmaOperandLoad(cfg.bm, cfg.bk))
    need(short.shape == (cfg.a_rows, cfg.bk) and bool((short == whole[:cfg.a_rows]).all()),
         f"{cfg.name}: the {cfg.a_rows}-row A box does not write where the tile's first "
         f"{cfg.a_rows} rows are read")
    need(int(short.max()) + 2 <= cfg.a_stage, f"{cfg.name}: the A box writes past its stage")
    return proved(f"the {cfg.a_rows}-row A box writes the tile's first {cfg.a_rows} rows at "
                  f"all {short.size} elements; expect_tx counts its {a_load.stage_bytes} bytes; "
                  f"rows >= {cfg.a_rows} feed only C rows the runner keeps out (M <= "
                  f"{cfg.a_rows})", "every element of the short box")


def check_c_buffer(cfg: TmaGemmConfig, load: TmaOperandLoad) -> Dict[str, Any]:
    """The TMA-store epilogue's proofs: the printed shared offset is the TMA model's at every
    element of a consumer's 64 x bn buffer; the accumulator registers of the 128 threads
    cover that buffer exactly once (pairs of columns); each warp's 4-byte shared stores of one
    (j, h) hit 32 distinct banks."""
    n = check_printed_offsets(load, box_offset_expr(load, "r", "c"))
    mma = wgmma(cfg.dtype, cfg.bn)
    seen = np.zeros((64, cfg.bn), dtype=np.int64)
    want = tma_tile_addresses(load)
    for t in range(128):
        for item in range(cfg.bn // 2):
            r, c = mma.element_c(t, item)
            seen[r, c] += 1
    need(bool((seen == 1).all()), f"{cfg.name}: the accumulators do not cover the C buffer "
         "exactly once")
    worst = 1
    for w in range(4):
        for j in range(cfg.bn // 8):
            for h in range(2):
                banks = []
                for lane in range(32):
                    r, c = mma.element_c(32 * w + lane, 4 * j + 2 * h)
                    need(c % 2 == 0, "an accumulator pair starts on an odd column")
                    banks.append((int(want[r, c]) // 4) % 32)
                worst = max(worst, 32 // len(set(banks)) if len(set(banks)) else 32)
    need(worst == 1, f"{cfg.name}: the epilogue's shared stores are {worst}-way bank conflicted")
    return {"C buffer == TMA store": proved(
                f"printed C-buffer offsets == TMA store reads at all {n} elements; accumulators "
                "cover the buffer once", "every element of a consumer's 64 x bn buffer"),
            "C buffer banks": proved("every warp's 4-byte shared store of the epilogue: 32 "
                                     "distinct banks", "every warp, j and h")}


# --------------------------------------------------------------------------- emission

def _tile_origin(w, cfg: TmaGemmConfig, ind: str) -> None:
    """``m0``/``n0`` of tile ``tile``: groups of ``group_m`` tile rows walk N together."""
    w(f"{ind}const int first_m = (tile / group) * {cfg.group_m};")
    w(f"{ind}const int gsize = min(grid_m - first_m, {cfg.group_m});")
    w(f"{ind}const int m0 = (first_m + (tile % group) % gsize) * {cfg.bm};")
    w(f"{ind}const int n0 = ((tile % group) / gsize) * {cfg.bn};")


def _producer(w, cfg: TmaGemmConfig, p: TmaGemmPlan) -> None:
    w("  if (wg == 0) {")
    w(f"    lg_setmaxnreg_dec<{PRODUCER_REGS}>();")
    w("    if (tid == 0) {")
    w("      lg_tma_prefetch(tmA);\n      lg_tma_prefetch(tmB);")
    w("      int stage = 0;\n      lg_u32 phase = 0;")
    w("      for (int u = blockIdx.x; u < units; u += gridDim.x) {")
    w("        const int tile = u % tiles, kt0 = (u / tiles) * kt_per, kn = min(KT - kt0, kt_per);")
    _tile_origin(w, cfg, "        ")
    w("        for (int kk = 0; kk < kn; ++kk) {")
    w("          const int kt = kt0 + kk;")
    w("          lg_mbar_wait(empty0 + 8 * stage, phase ^ 1u);")
    w("          const lg_u32 full = full0 + 8 * stage;")
    w(f"          lg_mbar_expect_tx(full, {p.stage_tx_bytes}u);")
    w(f"          lg_tma_load_2d(sA + stage * {cfg.a_stage}, tmA, full, kt * {cfg.bk}, m0);")
    bl = p.b_load
    for j in range(bl.boxes):
        if cfg.b_major == "n":     # box j: columns n0 + 64 j .. of the k rows
            w(f"          lg_tma_load_2d(sB + stage * {cfg.b_stage} + {j * bl.stride}, tmB, full, "
              f"n0 + {j * bl.box_inner}, kt * {cfg.bk});")
        else:
            w(f"          lg_tma_load_2d(sB + stage * {cfg.b_stage}, tmB, full, kt * {cfg.bk}, n0);")
    w(f"          if (++stage == {cfg.stages}) {{ stage = 0; phase ^= 1u; }}")
    w("        }\n      }\n    }\n  } else {")


def _consumer(w, cfg: TmaGemmConfig, p: TmaGemmPlan) -> None:
    w(f"    lg_setmaxnreg_inc<{cfg.consumer_regs}>();")
    w("    const int cg = wg - 1, lane = tid & 31;")
    if cfg.store == "tma":
        w(f"    const lg_u32 sC = sB + {cfg.stages * cfg.b_stage} + cg * {cfg.c_stage};")
    for op in (p.a, p.b):
        nm = op.name.lower()
        base = "sA" if op is p.a else "sB"
        wg_off = f" + cg * {op.wg_step}" if op.wg_step else ""
        w(f"    const lg_u64 {nm}desc = 0x{op.desc.constant_bits():016x}ull | "
          f"(lg_u64)((({base}{wg_off}) & 0x3FFFF) >> 4);   // {op.desc}")
    nacc = cfg.bn // 2
    crow, ccol = accumulator_rows_cols(cfg.bn)
    t = lc.sym("t")
    r0 = c_layout(crow, (t, 0), {t: 128}, "C row")
    c0 = c_layout(ccol, (t, 0), {t: 128}, "C col")
    w(f"    float acc[{nacc}];")
    w("    const int t = tid & 127;")
    w(f"    const int trow = cg * 64 + {r0}, tcol = {c0};")
    w("    const bool pair_ok = (ldc & 1) == 0;")
    if cfg.inline_reduce:
        w("    const bool opair = (ldo & 1) == 0 && (reinterpret_cast<size_t>(O) & 3) == 0;")
    w("    int stage = 0, prev = 0;\n    lg_u32 phase = 0;")
    w("    for (int u = blockIdx.x; u < units; u += gridDim.x) {")
    w("      const int tile = u % tiles, kt0 = (u / tiles) * kt_per, kn = min(KT - kt0, kt_per);")
    _tile_origin(w, cfg, "      ")
    w(f"      #pragma unroll\n      for (int i = 0; i < {nacc}; ++i) acc[i] = 0.f;")
    w("      for (int kk = 0; kk < kn; ++kk) {")
    w("        lg_mbar_wait(full0 + 8 * stage, phase);")
    w("        lg_wgmma_fence();")
    emit_wgmma_k_steps(w, cfg, p, "stage", "        ")
    w("        lg_wgmma_commit();")
    w("        lg_wgmma_wait<1>();")
    w("        lg_pin(acc);")
    w("        // the group before this one is done: its stage may be refilled")
    w("        if (kk > 0) { __syncwarp(); if (lane == 0) lg_mbar_arrive(empty0 + 8 * prev); }")
    w("        prev = stage;")
    w(f"        if (++stage == {cfg.stages}) {{ stage = 0; phase ^= 1u; }}")
    w("      }")
    w("      lg_wgmma_wait<0>();\n      lg_pin(acc);")
    w("      __syncwarp();\n      if (lane == 0) lg_mbar_arrive(empty0 + 8 * prev);")
    if cfg.store == "tma":
        _tma_epilogue(w, cfg, p)
        w("    }")
        w("    if (t == 0) lg_bulk_wait0();   // the last stores have read the buffer")
        w("  }\n}")
    elif cfg.inline_reduce:
        emit_inline_epilogue(w, cfg.dtype, cfg.bn, cfg.consumers)
        w("    }\n  }\n}")
    else:
        _epilogue(w, cfg)
        w("    }\n  }\n}")


def _epilogue(w, cfg: TmaGemmConfig) -> None:
    """Accumulator ``4j + 2h + e`` -> C[m0 + trow + 8h][n0 + tcol + 8j + e] (the layout
    pattern :func:`accumulator_rows_cols` checks), rows past M and columns past N skipped."""
    cvt = "lg_f32_to_f16" if cfg.dtype == "f16" else "lg_f32_to_bf16"
    w(f"      #pragma unroll\n      for (int j = 0; j < {cfg.bn // 8}; ++j)\n"
      "      #pragma unroll\n      for (int h = 0; h < 2; ++h) {")
    w("        const int r = m0 + trow + 8 * h, col = n0 + tcol + 8 * j;")
    w("        const float lo = acc[4 * j + 2 * h], hi = acc[4 * j + 2 * h + 1];")
    w("        if (r < M) {")
    if cfg.split_k:     # fp32 partials of split u / tiles, rounded once by the reduce kernel
        w("          float* dst = C + (size_t)(u / tiles) * M * ldc + (size_t)r * ldc + col;")
        w("          if (col + 1 < N && pair_ok) {")
        w("            *reinterpret_cast<float2*>(dst) = make_float2(lo, hi);")
        w("          } else {")
        w("            if (col < N) dst[0] = lo;")
        w("            if (col + 1 < N) dst[1] = hi;")
    else:
        w("          lg_u16* dst = C + (size_t)r * ldc + col;")
        w("          if (col + 1 < N && pair_ok) {")
        w(f"            *reinterpret_cast<lg_u32*>(dst) = {PACK[cfg.dtype]}(lo, hi);")
        w("          } else {")
        w(f"            if (col < N) dst[0] = {cvt}(lo);")
        w(f"            if (col + 1 < N) dst[1] = {cvt}(hi);")
    w("          }\n        }\n      }")


def _tma_epilogue(w, cfg: TmaGemmConfig, p: TmaGemmPlan) -> None:
    """Registers -> this consumer's swizzled C buffer (offsets printed from the TMA model,
    proved by :func:`check_c_buffer`) -> ``bn / 64`` TMA stores of 64 x 64 boxes, which clip
    at the tensor's edges.  Thread 0 of the warpgroup waits for its previous stores to have
    read the buffer before anyone rewrites it."""
    cl = p.c_load
    w("      if (t == 0) lg_bulk_wait_read0();")
    w("      lg_named_bar(1 + cg, 128);")
    w(f"      #pragma unroll\n      for (int j = 0; j < {cfg.bn // 8}; ++j)\n"
      "      #pragma unroll\n      for (int h = 0; h < 2; ++h) {")
    w("        const int r = trow - cg * 64 + 8 * h, c = tcol + 8 * j;")
    w(f"        lg_st_shared_u32(sC + {box_offset_expr(cl, 'r', 'c')}, "
      f"{PACK[cfg.dtype]}(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));")
    w("      }")
    w("      lg_fence_proxy_async();   // generic-proxy writes -> the TMA (async proxy) read")
    w("      lg_named_bar(1 + cg, 128);")
    w("      if (t == 0) {")
    for j in range(cl.boxes):
        w(f"        lg_tma_store_2d(tmC, sC + {j * cl.stride}, n0 + {64 * j}, m0 + cg * 64);")
    w("        lg_bulk_commit();\n      }")


def emit_tma_gemm(cfg: TmaGemmConfig) -> str:
    """The CUDA source of one configuration (the plan's proofs run first)."""
    p = plan_tma_gemm(cfg)
    S = cfg.stages
    L = source_head("kernels/nvidia/wgmma_tma.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    w = L.append
    w(HELPERS)
    w(TMA_HELPERS)
    w(wgmma_wrapper("lg_wgmma", cfg.dtype, cfg.bn, 1 if cfg.b_major == "n" else 0))
    # the setmaxnreg budgets are shares of the register file of ctas_per_sm CTAs: ptxas gives
    # every thread 64K / (threads x ctas_per_sm) registers at launch
    w(f'extern "C" __global__ void __launch_bounds__({cfg.threads}, {cfg.ctas_per_sm})')
    w(f"{cfg.name}(const void* __restrict__ tmA, const void* __restrict__ tmB, "
      "const void* __restrict__ tmC, " + ("float" if cfg.split_k else "lg_u16")
      + "* __restrict__ C, int M, int N, int K, int ldc, int splits, int kt_per"
      + (f", {INLINE_PARAMS}" if cfg.inline_reduce else "") + ") {")
    w("  extern __shared__ __align__(1024) unsigned char lg_smem[];")
    if cfg.inline_reduce:
        w(f"  __shared__ int lg_last[{cfg.consumers}];   // a warpgroup's split-K arrival was last")
    w(f"  __shared__ __align__(8) lg_u64 lg_bars[{2 * S}];   // full[0..S), empty[0..S)")
    w(f"  const lg_u32 sA = (lg_smem_u32(lg_smem) + {STAGE_ALIGN - 1}u) & ~{STAGE_ALIGN - 1}u;")
    w(f"  const lg_u32 sB = sA + {S * cfg.a_stage};")
    w(f"  const lg_u32 full0 = lg_smem_u32(lg_bars), empty0 = full0 + {8 * S};")
    w("  const int tid = threadIdx.x, wg = tid >> 7;")
    w("  if (tid == 0) {")
    w(f"    for (int s = 0; s < {S}; ++s) {{")
    w("      lg_mbar_init(full0 + 8 * s, 1);              // the producer's arrive.expect_tx")
    w(f"      lg_mbar_init(empty0 + 8 * s, {4 * cfg.consumers});   // one arrive per consumer warp")
    w("    }\n    lg_mbar_init_fence();\n  }")
    w("  __syncthreads();")
    w(f"  const int grid_m = (M + {cfg.bm - 1}) / {cfg.bm}, grid_n = (N + {cfg.bn - 1}) / {cfg.bn};")
    w(f"  const int tiles = grid_m * grid_n, group = {cfg.group_m} * grid_n;")
    w(f"  const int KT = (K + {cfg.bk - 1}) / {cfg.bk}, units = tiles * splits;")
    _producer(w, cfg, p)
    _consumer(w, cfg, p)
    if cfg.split_k and not cfg.inline_reduce:
        w(reduce_kernel(cfg.reduce_name, cfg.dtype))
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------- running it

class TmaGemm(CudaGemm):
    """A compiled configuration: ``g(a, b, out=None) -> c`` on torch CUDA tensors (sm_90a),
    operands with 16-byte aligned bases and row strides (:func:`tensor_map_args` says why
    others are refused).  The tensor maps are encoded once per (pointer, shape, stride)."""

    def __init__(self, cfg: TmaGemmConfig = TmaGemmConfig(), *, backend: str = "auto"):
        self.plan = plan_tma_gemm(cfg)
        CompiledKernel.__init__(self, cfg, emit_tma_gemm(cfg), backend)
        self._maps = DeviceMaps()

    def tensor_map(self, t, box_inner: int, box_outer: int):
        """The device copy (a 128-byte uint8 tensor) of ``t``'s tensor map, cached."""
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), box_inner,
               box_outer, t.device)
        return self._maps.get(key, lambda: encode_tensor_map(t, box_inner, box_outer), t.device)

    def __call__(self, a, b, out=None, splits: int = 1):
        """``a @ b`` (or ``a @ b.T``); a ``split_k`` configuration takes ``splits`` (k tiles
        divided into that many nearly equal, non-empty ranges).  The checks run once per
        :func:`~kernels.runtime.launch_cache.call_key` of the arguments (:meth:`bound`)."""
        return self.bound(a, b, out, splits)(a, b, out)

    def bind(self, a, b, out=None, splits: int = 1) -> Callable[..., Any]:
        """Check the arguments and return ``run(a, b, out) -> c`` for every call whose
        arguments have the same :func:`~kernels.runtime.launch_cache.call_key`: it allocates
        the output and the split-K partials, looks up the tensor maps and launches."""
        import torch
        from ..runtime.cuda import LaunchSite, device_info
        M, N, K = self.check_args(a, b, out)
        for t, nm in ((a, "a"), (b, "b"), (out, "out")):
            if t is not None and not getattr(t, "is_cuda", False):
                raise LaunchError(f"{nm}: the TMA GEMM takes torch CUDA tensors on an NVIDIA GPU, "
                                  f"got device {t.device}")
        if splits != 1 and not self.cfg.split_k:
            raise LaunchError(f"{self.cfg.name} is not a split-K configuration; splits={splits} "
                              "needs TmaGemmConfig(split_k=True, store='direct')")
        if self.cfg.a_rows and M > self.cfg.a_rows:
            raise LaunchError(f"{self.cfg.name} loads {self.cfg.a_rows} rows of A (a_rows): "
                              f"M = {M} needs a_rows=0 (the whole {self.cfg.bm}-row tile) or "
                              f"a_rows >= M")
        kt_per, n = split_ranges(K, self.cfg.bk, splits)
        check_aligned(a, "a")
        check_aligned(b, "b")
        if self.cfg.store == "tma" and out is not None:
            check_aligned(out, "out")
        cfg = self.cfg
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        index = a.device.index if a.device.index is not None else torch.cuda.current_device()
        grid = min(tiles * n, cfg.ctas_per_sm * device_info(index)["sms"])
        ldc = N if cfg.split_k or out is None else out.stride(0)
        inline = cfg.inline_reduce
        main = LaunchSite(self.module, cfg.name, grid, cfg.threads,
                          signature=("ptr", "ptr", "ptr", "ptr") + ("i32",) * 6
                          + (("ptr", "ptr", "i32") if inline else ()),
                          specs=[TensorSpec(strides=(), align=64), TensorSpec(strides=(), align=64),
                                 TensorSpec(strides=(), align=64),
                                 TensorSpec(strides=(), align=8 if inline else 4)] + [None] * 6
                          + ([TensorSpec(strides=(), align=2), TensorSpec(strides=(), align=4),
                              None] if inline else []),
                          smem_bytes=cfg.smem_bytes)
        b_box = (64, cfg.bk) if cfg.b_major == "n" else (cfg.bk, cfg.bn)
        if inline:
            return self._inline_run(main, M, N, K, n, kt_per, tiles, b_box)
        reduce = reduce_site(self.module, cfg.reduce_name, M, N) if cfg.split_k else None

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            ta = self.tensor_map(a, cfg.bk, cfg.a_box_rows)
            tb = self.tensor_map(b, *b_box)
            tc = self.tensor_map(out, 64, 64) if cfg.store == "tma" else None
            dst = torch.empty((n, M, N), dtype=torch.float32, device=a.device) \
                if cfg.split_k else out
            main([ta, tb, tc, dst, M, N, K, ldc, n, kt_per])
            if reduce is not None:
                reduce([dst, out, M, N, out.stride(0), n])
            return out
        return run

    def _inline_run(self, main, M: int, N: int, K: int, n: int, kt_per: int, tiles: int,
                    b_box) -> Callable[..., Any]:
        """``run(a, b, out)`` of an inline-reduce split-K call: one launch.  Its workspaces
        (the ``n x M x N`` fp32 partials and the zeroed per-(tile, warpgroup) arrival
        counters, which the kernel leaves at zero) are kept per CUDA stream: launches on one
        stream run in order, so they never share them concurrently.  One split needs
        neither (null pointers: the kernel then rounds its accumulators straight to C)."""
        import torch
        cfg = self.cfg
        slots = counter_slots(tiles, cfg.consumers)
        spaces = PerStream(lambda device: (
            torch.empty((n, M, N), dtype=torch.float32, device=device),
            torch.zeros(slots, dtype=torch.int32, device=device)) if n > 1 else (None, None))
        maps = self._maps
        keys = []   # tensor_map's keys less the pointer: the same for every call bound here

        def run(a, b, out):
            if not keys:
                keys.extend((tuple(t.shape), tuple(t.stride()), str(t.dtype)) + box + (t.device,)
                            for t, box in ((a, (cfg.bk, cfg.a_box_rows)), (b, b_box)))
            ta = maps.get((a.data_ptr(),) + keys[0],
                          lambda: encode_tensor_map(a, cfg.bk, cfg.a_box_rows), a.device)
            tb = maps.get((b.data_ptr(),) + keys[1], lambda: encode_tensor_map(b, *b_box),
                          b.device)
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            ws, stream = spaces.on(a.device)
            main([ta, tb, None, ws[0], M, N, K, N, n, kt_per, out, ws[1], out.stride(0)], stream)
            return out
        return run


def tma_ready(t, line: int = 0) -> bool:
    """True when TMA can address ``t`` as it is (16-byte aligned base and row stride), and
    its rows start on ``line``-byte boundaries when ``line`` is given."""
    al = max(16, line)
    return t.data_ptr() % al == 0 and (t.stride(0) * 2) % al == 0 and t.stride(1) == 1


def tma_padded(t, line: int = 0):
    """A copy of 2-D ``t`` whose rows start on ``max(16, line)``-byte boundaries (leading
    dimension rounded up), viewed at ``t``'s shape: TMA reads it, its zero fill covers the
    edges."""
    view = padded_empty(t, line)
    copy_rows(view, t)
    return view


def padded_empty(t, line: int = 0):
    """An uninitialised buffer shaped like 2-D ``t`` whose rows start on ``max(16, line)``-byte
    boundaries (a view of the first ``t.shape[1]`` columns of a wider allocation)."""
    import torch
    rows, cols = t.shape
    el = max(16, line) // 2
    ld = -(-cols // el) * el
    buf = torch.empty((rows, ld), dtype=t.dtype, device=t.device)
    return buf[:, :cols]


def copy_rows(dst, src) -> None:
    """``dst.copy_(src)`` for 2-D 16-bit tensors of one shape, through the widest integer
    elements that tile both (:func:`wide_copy_dtype`): the same bytes."""
    wide = wide_copy_dtype(src, dst)
    if wide is None:
        dst.copy_(src)
    else:       # fewer, wider loads and stores per row
        dst.view(wide).copy_(src.view(wide))


def row_copier(dst, src) -> Callable[[Any], None]:
    """``copy(s)``, which does :func:`copy_rows` ``(dst, s)`` for every ``s`` with ``src``'s
    :func:`~kernels.runtime.launch_cache.tensor_key` (dtype, shape, strides, pointer modulo
    128 bytes: all that :func:`wide_copy_dtype` reads, the storage offset's residue following
    from the pointer's for allocator memory), with the element width decided and ``dst``'s
    wide view made once: a call is one view of ``s`` and one ``copy_`` (issue 20: the
    per-call decision and views cost ~10 us of host time on the H100 host)."""
    wide = wide_copy_dtype(src, dst)
    if wide is None:
        return dst.copy_
    dst_wide = dst.view(wide)
    return lambda s: dst_wide.copy_(s.view(wide))


def wide_copy_dtype(*ts):
    """The widest integer dtype (int64, int32) whose elements tile the rows of every tensor in
    ``ts`` exactly: base, row stride and row length in bytes multiples of the element; None for
    none.  torch copied 16-bit rows element by element at ~1.2 TB/s (4000x3000 f16, H100,
    benchmarks/results/gpu_gemm_low_h100_2026-11-24_1231Z.txt)."""
    import torch
    for dt, r in ((torch.int64, 4), (torch.int32, 2)):
        if all(t.dim() == 2 and t.stride(1) == 1 and t.element_size() == 2
               and t.shape[1] % r == 0 and t.stride(0) % r == 0 and t.storage_offset() % r == 0
               and t.data_ptr() % (2 * r) == 0 for t in ts):
            return dt
    return None


def check_aligned(t, nm: str) -> None:
    if not tma_ready(t):
        raise LaunchError(f"{nm}: TMA needs a 16-byte aligned base and row stride (here base "
                          f"% 16 = {t.data_ptr() % 16}, row stride {t.stride(0)} elements); "
                          "pass kernels.nvidia.wgmma_tma.tma_padded(t)")
