"""GEMM for NVIDIA Hopper (``sm_90a``): ``wgmma.mma_async`` from shared memory, ``cp.async`` stages.

``C = A @ B`` with ``A`` (M, K) row-major and ``B`` (K, N) row-major (``b_major="n"``, the
tensor cores read it N-major, i.e. transposed) or (N, K) row-major (``b_major="k"``), f16 or
bf16 in, f32 accumulation, ``C`` in the input dtype.  A block of ``bm // 64`` warpgroups
computes a ``bm x bn`` tile; warpgroup ``g`` issues ``wgmma.m64n{bn}k16`` on rows
``64g .. 64g+63``.  All threads fill ``stages`` shared-memory buffers with 16-byte
``cp.async`` (zero-filled past the matrix edges), ``stages - 2`` tiles ahead; one wgmma group
stays in flight across the barrier, so the tensor cores work while the next tile is waited for.

What is proved before any source is printed (:func:`plan_wgmma_gemm`, each a
``layoutalg.verify`` result or an exhaustive comparison):

* the ``cp.async`` partitions cover each tile exactly once and are bank-conflict-free under
  the 32-bank model (:func:`mfma_specs.nvidia.smem_model`);
* for every warpgroup and k step, the address the tensor cores read for operand element
  ``(mn, k)`` -- the descriptor printed into the source, decoded and evaluated with the PTX
  canonical layout (:func:`mfma_specs.nvidia_wgmma.gmma_addresses`) -- is the address the copy
  wrote that element to (the shared layout ``Swizzle o tile``), at every element;
* every stage base is 1024-byte aligned (the kernel rounds the dynamic shared base up), which
  the descriptor model requires;
* the epilogue's (row, col) of each accumulator register is printed from
  :meth:`mfma_specs.nvidia_wgmma.Wgmma.layout_c` and checked at every thread and register.

The wgmma semantics themselves (that the instruction multiplies what the descriptors say) can
only be checked on a GPU: ``tests/test_nvidia_gpu.py`` compares with ``torch.matmul``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout, Swizzle, composition
from layoutalg.verify import CheckResult, bank_conflicts, coverage
from layoutalg.verify._access import eval_at
from mfma_specs.nvidia import smem_model
from mfma_specs.nvidia_wgmma import GmmaDescriptor, gmma_addresses, wgmma

from . import layout_c as lc
from .edge_copy import EDGE_COPY, edge_copy_call, fast_condition
from .wgmma_prelude import HELPERS, wgmma_wrapper
from .prelude import source_head
from .splitk import emit_partial_store, k_range_lines, reduce_kernel, reduce_site
from ..errors import LaunchError
from ..runtime.rocm import TensorSpec
from .gemm import (CopyPlan, CudaGemm, GemmConfigError, c_layout, copy_plan,
                        need, split_rows, swz_fn, emit_block_origin, emit_pair_store)

__all__ = ["check_copy_offsets", "copy_base_name", "WgmmaGemmConfig", "WgmmaPlan", "plan_wgmma_gemm", "emit_wgmma_gemm", "WgmmaGemm",
           "WGMMA_DEFAULT_CONFIGS", "split_ranges", "GemmTileBytes", "emit_wgmma_k_steps"]

STAGE_ALIGN = 1024          # stage alignment: the 128-byte swizzle pattern repeats every 1024 bytes


class GemmTileBytes:
    """What the wgmma GEMM configurations (this one and :class:`.wgmma_tma.TmaGemmConfig`)
    derive the same way from their ``bm``, ``bn``, ``bk`` and ``name``."""

    bm: int
    bn: int
    bk: int
    name: str

    @property
    def a_stage(self) -> int:
        """Bytes of one stage's A tile (bm x bk, 16-bit)."""
        return self.bm * self.bk * 2

    @property
    def b_stage(self) -> int:
        """Bytes of one stage's B tile (bk x bn, 16-bit)."""
        return self.bk * self.bn * 2

    @property
    def reduce_name(self) -> str:
        """The split-K reduce kernel's name (in the same module)."""
        return self.name + "_reduce"


@dataclass(frozen=True)
class WgmmaGemmConfig(GemmTileBytes):
    dtype: str = "f16"          # "f16" or "bf16" (A, B and C)
    b_major: str = "n"          # "n": B is (K, N) row-major; "k": B is (N, K) row-major
    bm: int = 128               # 64 rows per warpgroup
    bn: int = 256               # the wgmma N (a multiple of 64, at most 256)
    bk: int = 64                # 64 (128-byte swizzle), 32 (64-byte) or 16 (32-byte)
    stages: int = 4
    group_m: int = 8            # block rasterisation: group_m block rows share B tiles in L2
    arch: str = "sm_90a"        # wgmma needs the arch-specific target
    split_k: bool = False       # k tiles split over gridDim.y; fp32 partials + reduce kernel

    vec = 8                     # elements per cp.async (16 bytes); not a field: fixed

    @property
    def warpgroups(self) -> int:
        return self.bm // 64

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.a_stage + self.b_stage) + STAGE_ALIGN

    @property
    def name(self) -> str:
        return (f"lg_wgmma_{self.dtype}_{self.b_major}_{self.bm}x{self.bn}x{self.bk}"
                f"_s{self.stages}" + ("" if self.group_m == 8 else f"_g{self.group_m}")
                + ("_sk" if self.split_k else ""))


WGMMA_DEFAULT_CONFIGS = {"f16": WgmmaGemmConfig(dtype="f16"),
                         "bf16": WgmmaGemmConfig(dtype="bf16")}


def _validate(cfg: WgmmaGemmConfig) -> None:
    need(cfg.dtype in ("f16", "bf16"), f"dtype must be 'f16' or 'bf16', got {cfg.dtype!r}")
    need(cfg.b_major in ("n", "k"), f"b_major must be 'n' or 'k', got {cfg.b_major!r}")
    need(cfg.bm in (64, 128, 192, 256), f"bm={cfg.bm}: 64 rows per warpgroup, 1 to 4 "
          "warpgroups (64, 128, 192 or 256)")
    need(cfg.bn % 64 == 0 and 64 <= cfg.bn <= 256, f"bn={cfg.bn}: the wgmma N, a multiple "
          "of 64 (one 128-byte swizzle row of B) in 64..256")
    need(cfg.bk in (16, 32, 64), f"bk={cfg.bk}: 16, 32 or 64 (a K-major row of bk 16-bit "
          "elements is one 32/64/128-byte swizzle row)")
    need(cfg.stages >= 3, f"stages={cfg.stages}: at least 3 (stages - 2 tiles are loaded "
          "ahead while one wgmma group is in flight)")
    need(cfg.arch.endswith("a") and cfg.arch.startswith("sm_90"),
          f"arch={cfg.arch!r}: wgmma needs 'sm_90a'")
    need(cfg.smem_bytes <= 227 * 1024, f"{cfg.smem_bytes} bytes of shared memory; sm_90 "
          "allows 227 KiB per block")


# --------------------------------------------------------------------------- the plan

@dataclass(frozen=True)
class Operand:
    """One operand's shared-memory side: the stage layout over the row-major tile index, the
    copy partition, and the descriptor each (warpgroup, k step) issues."""

    name: str
    rows: int
    cols: int
    smem: Any                   # row-major tile index -> element offset in the stage
    copy: CopyPlan
    major: str                  # "K" or "MN" (how the tensor cores read it)
    desc: GmmaDescriptor        # start = 0 (added at run time: stage base + offsets below)
    wg_step: int                # bytes between warpgroups' operands (0: shared by all)
    k_starts: Tuple[int, ...]   # start byte (in the stage) of each k16 step's operand
    copy_consts: Tuple[Tuple[int, int, int, int], ...]  # per iteration (drow, dcol, dsmem, base)
    copy_bases: Tuple[int, ...] = (0,)  # iterations whose shared offsets are per-thread bases

    def base_index(self, b: int) -> int:
        """The copy iteration whose per-thread shared offset is base ``b`` (0: iteration 0)."""
        return self.copy_bases[b]


@dataclass
class WgmmaPlan:
    cfg: WgmmaGemmConfig
    a: Operand
    b: Operand
    checks: Dict[str, Any] = field(default_factory=dict)

    def describe(self) -> Dict[str, str]:
        out = {}
        for op in (self.a, self.b):
            out[f"{op.name} smem"] = str(op.smem)
            out[f"{op.name} copy"] = str(op.copy.off)
            out[f"{op.name} descriptor"] = (f"{op.major}-major, swizzle {op.desc.swizzle_width} B, "
                                            f"LBO {op.desc.lbo} B, SBO {op.desc.sbo} B, k steps at "
                                            f"{_span(op.k_starts)} B, warpgroup step "
                                            f"{op.wg_step} B")
        out.update({k: v.summary() for k, v in self.checks.items()})
        return out


def _span(starts: Tuple[int, ...]) -> str:
    return ", ".join(map(str, starts)) if len(starts) <= 8 else \
        f"{starts[0]}, {starts[1]}, ..., {starts[-1]}"


def blocked_tile(rows: int, cols: int) -> ComposedLayout:
    """A (rows x cols) 16-bit tile as ``cols / 64`` column blocks of (rows x 64), each row of a
    block one 128-byte swizzle row: ``Sw<3,3,3> o (64, cols/64, rows):(1, 64 rows, 64)`` over
    the row-major index ``row * cols + col`` (element offsets)."""
    return ComposedLayout(Swizzle(3, 3, 3), 0,
                          Layout((64, cols // 64, rows), (1, 64 * rows, 64)))


def kmajor_operand(name: str, rows: int, cols: int, threads: int, wg_rows: int = 0) -> Operand:
    """A (rows x cols) tile read with k = cols contiguous (K-major).  ``cols`` <= 64: rows of
    ``cols`` elements are 32/64/128-byte swizzle rows; ``cols`` a multiple of 64: column blocks
    of :func:`blocked_tile`.  ``wg_rows``: rows per warpgroup (0: every warpgroup reads all)."""
    if cols <= 64:
        width = 2 * cols
        smem = ComposedLayout(Swizzle({32: 1, 64: 2, 128: 3}[width], 3, 3), 0,
                              Layout(rows * cols, 1))      # Swizzle<B,4,3> on bytes
    else:
        need(cols % 64 == 0, f"{name}: {cols} columns is not a multiple of 64")
        width, smem = 128, blocked_tile(rows, cols)
    desc = GmmaDescriptor(0, 16, 8 * width, width)          # LBO unused ("assumed 1")
    block = rows * width                                    # bytes per column block
    starts = tuple((16 * s // 64) * block + 2 * (16 * s % 64) for s in range(cols // 16))
    cpl = copy_plan(rows, cols, threads, 8)
    return _checked(Operand(name, rows, cols, smem, cpl, "K", desc, wg_rows * width, starts,
                            *_copy_consts(cpl, smem, name)))


def mnmajor_operand(name: str, rows: int, cols: int, threads: int) -> Operand:
    """A (rows x cols) tile with k = rows and mn = cols contiguous (MN-major), stored as
    :func:`blocked_tile`: LBO is the next 64 columns' block, SBO the next 8 rows."""
    need(cols % 64 == 0, f"{name}: {cols} columns is not a multiple of 64")
    desc = GmmaDescriptor(0, 64 * rows * 2, 1024, 128)
    smem = blocked_tile(rows, cols)
    cpl = copy_plan(rows, cols, threads, 8)
    return _checked(Operand(name, rows, cols, smem, cpl, "MN", desc, 0,
                            tuple(16 * 128 * s for s in range(rows // 16)),
                            *_copy_consts(cpl, smem, name)))


def _checked(op: Operand) -> Operand:
    check_copy_offsets(op)      # raises on a mismatch: the constants printed are proved
    return op


MAX_COPY_BASES = 2          # per-thread shared-offset registers a copy may use


def _copy_consts(cpl: CopyPlan, smem: Any, name: str
                 ) -> Tuple[Tuple[Tuple[int, int, int, int], ...], Tuple[int, ...]]:
    """Per copy iteration ``(drow, dcol, dsmem, b)`` and the base iterations: the kernel keeps
    one shared offset per thread for each base (the swizzled offset of that base iteration's
    vector) and adds the constant ``dsmem`` to base ``b``'s.  Iteration ``i`` uses the first
    base whose difference is the same at every thread (checked at every thread), else becomes
    a base itself.  One base serves when an iteration covers whole swizzle periods (8 rows);
    a 128-thread copy of 256-wide rows covers 4 rows, so odd iterations need a second base
    (their rows sit half a period on).  Refused past :data:`MAX_COPY_BASES`."""
    T = cpl.off[0].size()
    offs = [eval_at(smem, np.array([cpl.off((t, 0, i)) for t in range(T)]))
            for i in range(cpl.iters)]
    bases: list = []
    out = []
    for i in range(cpl.iters):
        for b, j in enumerate(bases):
            d = offs[i] - offs[j]
            if (d == d[0]).all():
                out.append((cpl.row((0, i)), cpl.col((0, i)), int(d[0]), b))
                break
        else:
            need(len(bases) < MAX_COPY_BASES,
                 f"{name} copy iteration {i}: the shared offset is not base + constant for "
                 f"every thread with {MAX_COPY_BASES} per-thread bases; choose another tile shape")
            bases.append(i)
            out.append((cpl.row((0, i)), cpl.col((0, i)), 0, len(bases) - 1))
    return tuple(out), tuple(bases)


def check_copy_offsets(op: Operand) -> CheckResult:
    """Every thread and copy iteration: base ``b``'s shared offset (the swizzled offset of
    iteration ``copy_bases[b]``'s vector) plus the printed constant is the stage layout's
    offset of the vector that iteration copies.  Raises on a mismatch."""
    T = op.copy.off[0].size()
    at = lambda i: eval_at(op.smem, np.array([op.copy.off((t, 0, i)) for t in range(T)]))  # noqa: E731
    need(len(op.copy_consts) == op.copy.iters, f"{op.name}: {len(op.copy_consts)} copy "
         f"constants for {op.copy.iters} iterations")
    for i, (dr, dc, ds, b) in enumerate(op.copy_consts):
        need(0 <= b < len(op.copy_bases), f"{op.name} copy iteration {i}: base {b} of "
             f"{len(op.copy_bases)}")
        got, want = at(op.copy_bases[b]) + ds, at(i)
        if not np.array_equal(got, want):
            t = int(np.argwhere(got != want)[0][0])
            raise GemmConfigError(f"{op.name} copy iteration {i}, thread {t}: base {b} + {ds} is "
                                  f"element {int(got[t])}, the layout puts the vector at "
                                  f"{int(want[t])}")
        need((dr, dc) == (op.copy.row((0, i)), op.copy.col((0, i))),
             f"{op.name} copy iteration {i}: row/col step ({dr}, {dc}) is not the partition's")
    return proved(f"{op.name}: copy base + constant == stage layout at all {T * op.copy.iters} "
                  f"(thread, iteration) points, {len(op.copy_bases)} base(s)",
                  "every thread and copy iteration")


def copy_base_name(prefix: str, b: int) -> str:
    """The C name of per-thread shared base ``b`` (base 0 keeps the plain name)."""
    return prefix if b == 0 else f"{prefix}{b}"


def check_descriptor(op: Operand, cfg: Any, wgs: int, mn: int) -> CheckResult:
    """Every (warpgroup, k step, element): the hardware's read address (descriptor model) ==
    the address the copy wrote that element to.  Raises on a mismatch."""
    n_checked = 0
    for g in range(wgs):
        for s, start in enumerate(op.k_starts):
            d = GmmaDescriptor(g * op.wg_step + start, op.desc.lbo, op.desc.sbo,
                               op.desc.swizzle_width)
            hw = gmma_addresses(d, op.major, 2, mn, 16)
            ii, kk = np.meshgrid(np.arange(mn), np.arange(16), indexing="ij")
            if op.major == "K":     # tile rows are mn, cols are k
                idx = (g * mn + ii) * op.cols + 16 * s + kk
            else:                   # tile rows are k, cols are mn
                idx = (16 * s + kk) * op.cols + ii
            ours = 2 * eval_at(op.smem, idx.reshape(-1)).reshape(mn, 16)
            if not np.array_equal(hw, ours):
                i, j = map(int, np.argwhere(hw != ours)[0])
                raise GemmConfigError(
                    f"{cfg.name}: operand {op.name}, warpgroup {g}, k step {s}: the descriptor "
                    f"{d} reads element ({i}, {j}) at byte {int(hw[i, j])}, the copy wrote it at "
                    f"{int(ours[i, j])}")
            n_checked += hw.size
    return proved(f"{op.name}: descriptor reads == copy writes at all {n_checked} (warpgroup, "
                  "k step, element) points", "every warpgroup, k step and operand element")


def proved(check: str, domain: str) -> CheckResult:
    """The record of a property checked here point by point (a mismatch raises before this)."""
    return CheckResult(check=check, holds=True, method="exhaustive", domain=domain)


@lru_cache(maxsize=32)
def plan_wgmma_gemm(cfg: WgmmaGemmConfig) -> WgmmaPlan:
    """Layouts, descriptors and proofs of one configuration (cached); raises
    :class:`GemmConfigError` if any check fails."""
    _validate(cfg)
    a = kmajor_operand("A", cfg.bm, cfg.bk, cfg.threads, 64)
    b = mnmajor_operand("B", cfg.bk, cfg.bn, cfg.threads) if cfg.b_major == "n" else \
        kmajor_operand("B", cfg.bn, cfg.bk, cfg.threads)
    for op in (a, b):
        need(len(op.copy_bases) == 1, f"{cfg.name}: the {op.name} copy needs "
             f"{len(op.copy_bases)} per-thread shared bases; the GEMM prints one: choose another "
             "bm / bn / bk")
    plan = WgmmaPlan(cfg, a, b)
    ch = plan.checks
    wmodel = smem_model("cp.async.16")
    for op in (a, b):
        ch[f"{op.name} copy coverage"] = coverage(op.copy.off, op.rows * op.cols)
        ch[f"{op.name} cp.async banks"] = bank_conflicts(op.copy.off, lds=op.smem, model=wmodel,
                                                         elem_bytes=2)
        offs = eval_at(op.smem, np.arange(op.rows * op.cols))
        need(np.array_equal(np.sort(offs), np.arange(op.rows * op.cols)),
              f"{op.name}: the shared layout is not a bijection onto the stage")
    ch["A descriptors"] = check_descriptor(a, cfg, cfg.warpgroups, 64)
    ch["B descriptors"] = check_descriptor(b, cfg, 1, cfg.bn)
    for stage_bytes in (cfg.a_stage, cfg.b_stage):
        need(stage_bytes % STAGE_ALIGN == 0, f"stage of {stage_bytes} bytes is not a multiple of "
              f"{STAGE_ALIGN}: later stages would break the descriptor's base-offset-0 assumption")
    ch["stage alignment"] = proved(f"stages {cfg.a_stage} / {cfg.b_stage} B, multiples of "
                                   f"{STAGE_ALIGN}; the kernel rounds the shared base up to {STAGE_ALIGN}",
                                   "every stage")
    for name, r in ch.items():
        if not r.holds:
            raise GemmConfigError(f"{cfg.name}: {name} does not hold:\n{r}")
    return plan


# --------------------------------------------------------------------------- emission

def emit_copy_base(w, op: Operand, nm: str, threads: int) -> None:
    """Print thread ``tid``'s copy base: ``{nm}r``/``{nm}c`` (tile row/col of its first
    vector) and ``{nm}s`` (its byte offset in a stage, through ``lg_swz_{nm}``), from the copy
    partition composed with the stage layout; each printed text checked at every thread.
    Further bases (``{nm}s1``, ...: :func:`_copy_consts`) are the offsets of their base
    iteration's vector, printed the same way."""
    tid = lc.sym("tid")
    w(f"  const int {nm}r = {c_layout(op.copy.row, (tid, 0), {tid: threads}, nm + ' copy row')};")
    w(f"  const int {nm}c = {c_layout(op.copy.col, (tid, 0), {tid: threads}, nm + ' copy col')};")
    pre = composition(op.smem.inner, op.copy.off)
    for b, it in enumerate(op.copy_bases):
        so = c_layout(pre, (tid, 0, it), {tid: threads}, f"{nm} copy smem, base {b}")
        w(f"  const lg_u32 {copy_base_name(nm + 's', b)} = 2u * lg_swz_{nm}({so});")


def emit_wgmma_k_steps(w, cfg: GemmTileBytes, plan: Any, stage: str, indent: str) -> None:
    """One ``lg_wgmma`` per 16-deep k step of shared-memory stage ``stage`` (a C expression):
    each descriptor advanced by the stage's bytes plus the plan's proved start of that k step
    (``>> 4``: descriptors count 16-byte units).  Both wgmma GEMMs (cp.async and TMA) print
    their k loop with it, so their descriptor arithmetic is the one the plans prove."""
    for s in range(cfg.bk // 16):
        da = f"adesc + (({stage} * {cfg.a_stage} + {plan.a.k_starts[s]}) >> 4)"
        db = f"bdesc + (({stage} * {cfg.b_stage} + {plan.b.k_starts[s]}) >> 4)"
        w(f"{indent}lg_wgmma(acc, {da}, {db});")


def emit_wgmma_gemm(cfg: WgmmaGemmConfig) -> str:
    """The CUDA source of one configuration (plan proofs run first)."""
    p = plan_wgmma_gemm(cfg)
    T, S = cfg.threads, cfg.stages
    L = source_head("kernels/cuda_wgmma.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    w = L.append
    w(HELPERS)
    w(EDGE_COPY)
    w(wgmma_wrapper("lg_wgmma", cfg.dtype, cfg.bn, 1 if cfg.b_major == "n" else 0))
    for op in (p.a, p.b):
        w(swz_fn(f"lg_swz_{op.name.lower()}", op.smem.outer, op.rows * op.cols))
    w(f'extern "C" __global__ void __launch_bounds__({T}, 1)')
    w(f"{cfg.name}(const lg_u16* __restrict__ A, const lg_u16* __restrict__ B, "
      + ("float* __restrict__ C, int M, int N, int K, int lda, int ldb, int ldc, int kt_per) {"
         if cfg.split_k else "lg_u16* __restrict__ C, int M, int N, int K, int lda, int ldb, int ldc) {"))
    w("  extern __shared__ __align__(1024) unsigned char lg_smem[];")
    w(f"  const lg_u32 sA = (lg_smem_u32(lg_smem) + {STAGE_ALIGN - 1}u) & ~{STAGE_ALIGN - 1}u;")
    w(f"  const lg_u32 sB = sA + {S * cfg.a_stage};")
    w("  const int tid = threadIdx.x, wg = tid >> 7;")
    emit_block_origin(w, cfg)
    # the k tiles this block multiplies: all, or one split's range
    nkt, kfirst = ("KTn", "(kt0 + kt)") if cfg.split_k else ("KT", "kt")
    if cfg.split_k:
        k_range_lines(w, cfg.bk)
    # ---- copy setup: one base (row, col, shared offset) per thread, constants per iteration
    for op in (p.a, p.b):
        emit_copy_base(w, op, op.name.lower(), T)
    w("  const lg_u16* ag = A + (size_t)(m0 + ar) * lda + ac;")
    if cfg.b_major == "n":
        w("  const lg_u16* bg = B + (size_t)br * ldb + n0 + bc;")
    else:
        w("  const lg_u16* bg = B + (size_t)(n0 + br) * ldb + bc;")
    w(f"  const bool full = {fast_condition(cfg.bm, cfg.bn, 8)};")
    w("  auto load_stage = [&](int stage, int kt) {")
    w(f"    const int k0 = {kfirst} * {cfg.bk};")
    w(f"    const lg_u32 da = sA + stage * {cfg.a_stage} + as, db = sB + stage * {cfg.b_stage} + bs;")
    w("    const lg_u16* ak = ag + k0;")
    w("    const lg_u16* bk = bg + (size_t)k0 * ldb;" if cfg.b_major == "n" else
      "    const lg_u16* bk = bg + k0;")
    w(f"    if (full && k0 + {cfg.bk} <= K) {{")
    for op, src, ld in ((p.a, "ak", "lda"), (p.b, "bk", "ldb")):
        nm = op.name.lower()
        for dr, dc, ds, _ in op.copy_consts:
            w(f"      lg_cp_async16_i<{2 * ds}>(d{nm}, {src} + (size_t){dr} * {ld} + {dc});")
    w("    } else {")
    for op, src, ld in ((p.a, "ak", "lda"), (p.b, "bk", "ldb")):
        nm = op.name.lower()
        for dr, dc, ds, _ in op.copy_consts:
            if op is p.a:
                ok, valid = f"m0 + ar + {dr} < M", f"K - (k0 + ac + {dc})"
            elif cfg.b_major == "n":   # rows are k, cols are n
                ok, valid = f"k0 + br + {dr} < K", f"N - (n0 + bc + {dc})"
            else:                      # rows are n, cols are k
                ok, valid = f"n0 + br + {dr} < N", f"K - (k0 + bc + {dc})"
            w("      " + edge_copy_call(16, f"d{nm} + {2 * ds}",
                                       f"{src} + (size_t){dr} * {ld} + {dc}", ok, valid))
    w("    }")
    w("  };")
    # ---- descriptors: constant fields printed, start address (>> 4) added at run time
    for op in (p.a, p.b):
        nm = op.name.lower()
        base = "sA" if op is p.a else "sB"
        wg_off = f" + wg * {op.wg_step}" if op.wg_step else ""
        w(f"  const lg_u64 {nm}desc = 0x{op.desc.constant_bits():016x}ull | "
          f"(lg_u64)((({base}{wg_off}) & 0x3FFFF) >> 4);   // {op.desc}")
    nacc = cfg.bn // 2
    w(f"  float acc[{nacc}];")
    w(f"  #pragma unroll\n  for (int i = 0; i < {nacc}; ++i) acc[i] = 0.f;")
    # ---- pipeline: stages - 2 tiles loaded ahead; one wgmma group in flight across the barrier
    w(f"  #pragma unroll\n  for (int s = 0; s < {S - 2}; ++s) {{")
    w(f"    if (s < {nkt}) load_stage(s, s);")
    w("    lg_cp_async_commit();\n  }")
    w(f"  int rs = 0, ws = {S - 2};")
    w(f"  for (int kt = 0; kt < {nkt}; ++kt) {{")
    w(f"    lg_cp_async_wait<{S - 3}>();")
    w("    lg_fence_proxy_async();")
    w("    __syncthreads();")
    w("    lg_wgmma_fence();")
    emit_wgmma_k_steps(w, cfg, p, "rs", "    ")
    w("    lg_wgmma_commit();")
    w(f"    if (kt + {S - 2} < {nkt}) load_stage(ws, kt + {S - 2});")
    w("    lg_cp_async_commit();")
    w(f"    rs = rs + 1 == {S} ? 0 : rs + 1;")
    w(f"    ws = ws + 1 == {S} ? 0 : ws + 1;")
    w("    lg_wgmma_wait<1>();")
    w("    lg_pin(acc);")
    w("  }")
    w("  lg_wgmma_wait<0>();")
    w("  lg_pin(acc);")
    w("  lg_cp_async_wait<0>();")
    _epilogue(w, cfg)
    if cfg.split_k:
        w(reduce_kernel(cfg.reduce_name, cfg.dtype))
    return "\n".join(L) + "\n"


def accumulator_rows_cols(n: int) -> Tuple[Layout, Layout]:
    """``layout_c`` of ``m64n{n}`` split into per-(thread, item) row and col layouts, after
    checking the pattern the emitted loops rely on: item ``4j + 2h + e`` of a thread sits at
    (row of item 0 + 8h, col of item 0 + 8j + e)."""
    crow, ccol = split_rows(wgmma("f16", n).layout_c(), 64)
    for j in range(n // 8):
        for h in range(2):
            for e in range(2):
                it = 4 * j + 2 * h + e
                need(crow((0, it)) - crow((0, 0)) == 8 * h and
                      ccol((0, it)) - ccol((0, 0)) == 8 * j + e,
                      f"unexpected wgmma accumulator layout at item {it}")
    return crow, ccol


def _epilogue(w, cfg: WgmmaGemmConfig) -> None:
    """Accumulator register ``4j + 2h + e`` of thread ``t`` -> C[row + 8h][col + 8j + e], the
    (row, col) printed from the wgmma accumulator layout and checked at every thread."""
    crow, ccol = accumulator_rows_cols(cfg.bn)
    t = lc.sym("t")
    r0 = c_layout(crow, (t, 0), {t: 128}, "C row")
    c0 = c_layout(ccol, (t, 0), {t: 128}, "C col")
    w("  const int t = tid & 127;")
    w(f"  const int crow = m0 + wg * 64 + {r0};")
    w(f"  const int ccol = n0 + {c0};")
    w("  const bool pair_ok = (ldc & 1) == 0;")
    w(f"  #pragma unroll\n  for (int j = 0; j < {cfg.bn // 8}; ++j)\n"
      "  #pragma unroll\n  for (int h = 0; h < 2; ++h) {")
    w("    const int r = crow + 8 * h, col = ccol + 8 * j;")
    store = emit_partial_store if cfg.split_k else \
        (lambda w_, lo, hi: emit_pair_store(w_, cfg.dtype, lo, hi))
    store(w, "acc[4 * j + 2 * h]", "acc[4 * j + 2 * h + 1]")


# --------------------------------------------------------------------------- running it

class WgmmaGemm(CudaGemm):
    """A compiled configuration: ``g(a, b, out=None) -> c`` on torch CUDA tensors (sm_90)."""

    def __init__(self, cfg: WgmmaGemmConfig = WgmmaGemmConfig(), *, backend: str = "auto"):
        self.plan = plan_wgmma_gemm(cfg)
        super(CudaGemm, self).__init__(cfg, emit_wgmma_gemm(cfg), backend)

    def __call__(self, a, b, out=None, splits: int = 1):
        """``a @ b`` (or ``a @ b.T``); a ``split_k`` configuration takes ``splits`` (the k
        tiles are divided into that many nearly equal ranges, none empty)."""
        return self.bound(a, b, out, splits)(a, b, out)

    def bind(self, a, b, out=None, splits: int = 1):
        """Check the arguments; ``run(a, b, out)`` for every call with their ``call_key``."""
        if not self.cfg.split_k:
            if splits != 1:
                raise LaunchError(f"{self.cfg.name} is not a split-K configuration; splits="
                                  f"{splits} needs WgmmaGemmConfig(split_k=True)")
            return super().bind(a, b, out)
        import torch
        from ..runtime.cuda import LaunchSite
        M, N, K = self.check_args(a, b, out)
        cfg = self.cfg
        kt_per, n = split_ranges(K, cfg.bk, splits)
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        main = LaunchSite(self.module, cfg.name, (tiles, n), cfg.threads,
                          signature=("ptr", "ptr", "ptr") + ("i32",) * 7,
                          specs=[TensorSpec(strides=(), align=2), TensorSpec(strides=(), align=2),
                                 TensorSpec(strides=(), align=8)] + [None] * 7,
                          smem_bytes=cfg.smem_bytes)
        reduce = reduce_site(self.module, cfg.reduce_name, M, N)
        lda, ldb = a.stride(0), b.stride(0)

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            ws = torch.empty((n, M, N), dtype=torch.float32, device=a.device)
            main([a, b, ws, M, N, K, lda, ldb, N, kt_per])
            reduce([ws, out, M, N, out.stride(0), n])
            return out
        return run


def split_ranges(K: int, bk: int, splits: int) -> Tuple[int, int]:
    """``(kt_per, n)``: k tiles per split and the number of (non-empty) splits when the
    ``ceil(K / bk)`` k tiles are divided ``splits`` ways.  Raises :class:`LaunchError` for
    ``splits < 1``."""
    if not isinstance(splits, int) or splits < 1:
        raise LaunchError(f"splits must be a positive int, got {splits!r}")
    kt = -(-K // bk)
    kt_per = -(-kt // splits)
    return kt_per, -(-kt // kt_per)
