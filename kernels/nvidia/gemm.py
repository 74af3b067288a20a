"""GEMM for NVIDIA GPUs (sm_80 / sm_90): ``mma.sync`` m16n8k16, ``ldmatrix``, ``cp.async``.

``C = A @ B`` with ``A`` (M, K) row-major, ``B`` either (K, N) row-major (``b_major="n"``,
``torch.matmul(a, b)``) or (N, K) row-major (``b_major="k"``, ``a @ b.T``), f16 or bf16 in,
f32 accumulation, ``C`` (M, N) in the input dtype.  One thread block computes a ``bm x bn``
tile with ``warps_m x warps_n`` warps; ``stages`` shared-memory buffers are filled by
``cp.async`` (zero-filled past the matrix edges, so ragged M/N/K need no special path) and
read with ``ldmatrix`` into the ``mma.sync`` fragments.

Everything address-related is a ``layoutalg`` object in :class:`GemmPlan`:

* the shared-memory tiles are ``Swizzle o 0 o (rows, cols):(cols, 1)``; the swizzle is the
  first one (fewest XOR bits) that :func:`layoutalg.verify.bank_conflicts` proves
  conflict-free for both the ``cp.async`` writes and the ``ldmatrix`` reads under the 32-bank
  model :func:`mfma_specs.nvidia.smem_model` (every warp, k step and fragment position);
* the copy partitions ``(thread, value, iteration) -> offset`` are proved to cover each tile
  exactly once (:func:`layoutalg.verify.coverage`);
* the ``ldmatrix`` address layouts, composed with the ``ldmatrix`` destination layout, are
  proved to put into every ``mma`` register the element the PTX fragment layout expects
  (:func:`layoutalg.verify.lane_correctness` against :data:`mfma_specs.nvidia.MMA_M16N8K16_F16`);
* every address printed into the CUDA source is that layout evaluated on index symbols and
  printed by :func:`layoutalg.symbolic.to_c`, and the printed expression is re-evaluated
  with C semantics at every lane and compared with the layout (:mod:`kernels.cuda.layout_c`).

On H100/H200 (compute capability 9.0) :func:`gemm` runs the Hopper ``wgmma`` kernel of
:mod:`kernels.cuda_wgmma` instead (about 1.35x faster at 8192^3, see docs/PERFORMANCE.md);
:func:`pick_atom` says which, and ``gemm(..., atom="mma")`` forces this one.

>>> g = CudaGemm(CudaGemmConfig(dtype="bf16"))          # doctest: +SKIP
>>> c = g(a, b)                                         # torch CUDA tensors   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout, Swizzle
from layoutalg.verify import bank_conflicts, coverage, lane_correctness
from mfma_specs.nvidia import ldmatrix, mma_m16n8k16, smem_model

from . import layout_c as lc
from .builder import TORCH_DT as _TORCH_DT, CompiledKernel, dtype_name
from .edge_copy import EDGE_COPY, edge_copy_call, fast_condition
from .prelude import MMA, PACK, source_head
from ..errors import KernelError, LaunchError
from ..runtime.rocm import TensorSpec

__all__ = ["CudaGemmConfig", "GemmPlan", "plan_gemm", "emit_gemm", "CudaGemm",
           "GemmConfigError", "DEFAULT_CONFIGS"]


class GemmConfigError(KernelError):
    """A configuration the NVIDIA GEMM builder cannot build (says which constraint failed)."""

    exit_code = 2


@dataclass(frozen=True)
class CudaGemmConfig:
    dtype: str = "f16"          # "f16" or "bf16" (A, B and C)
    b_major: str = "n"          # "n": B is (K, N) row-major; "k": B is (N, K) row-major
    bm: int = 128
    bn: int = 256
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 4
    vec: int = 8                # elements per cp.async: 8 (16 B), 4 (8 B) or 2 (4 B)
    group_m: int = 8            # block rasterisation: group_m block rows share B tiles in L2
    min_blocks: int = 1         # __launch_bounds__ minimum blocks per SM
    mma_order: str = "nm"       # issue order of a warp's mma: "mn", "nm" or "serp" (serpentine)
    arch: str = "sm_90"

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def wtm(self) -> int:
        return self.bm // self.warps_m

    @property
    def wtn(self) -> int:
        return self.bn // self.warps_n

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.bm * self.bk + self.bk * self.bn) * 2

    @property
    def name(self) -> str:
        return (f"lg_gemm_{self.dtype}_{self.b_major}_{self.bm}x{self.bn}x{self.bk}_w"
                f"{self.warps_m}x{self.warps_n}_s{self.stages}_v{self.vec}"
                + ("" if self.mma_order == "nm" else f"_{self.mma_order}")
                + ("" if self.group_m == 8 else f"_g{self.group_m}"))


DEFAULT_CONFIGS = {
    "f16": CudaGemmConfig(dtype="f16"),
    "bf16": CudaGemmConfig(dtype="bf16"),
}


def need(cond: bool, msg: str) -> None:
    if not cond:
        raise GemmConfigError(msg)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _validate(cfg: CudaGemmConfig) -> None:
    need(cfg.dtype in ("f16", "bf16"), f"dtype must be 'f16' or 'bf16', got {cfg.dtype!r}")
    need(cfg.b_major in ("n", "k"), f"b_major must be 'n' or 'k', got {cfg.b_major!r}")
    for n in ("bm", "bn", "bk", "warps_m", "warps_n", "stages"):
        need(_pow2(getattr(cfg, n)) or n == "stages" and getattr(cfg, n) >= 2,
              f"{n}={getattr(cfg, n)} must be a power of two")
    need(cfg.stages >= 2, "stages must be >= 2")
    need(cfg.vec in (2, 4, 8), f"vec must be 2, 4 or 8 elements, got {cfg.vec}")
    need(cfg.bk % 16 == 0, f"bk={cfg.bk} must be a multiple of 16 (the mma k)")
    # the fragments alternate between two buffers per 16-wide k step, statically: with one
    # k step per tile (bk=16) every tile's mma would read k tile 0's fragments again
    need(cfg.bk % 32 == 0, f"bk={cfg.bk}: the double-buffered fragments need an even number "
          "of 16-wide k steps per tile, so bk a multiple of 32 (32, 64, ...)")
    need(cfg.wtm % 16 == 0, f"bm/warps_m = {cfg.wtm} must be a multiple of 16")
    need(cfg.wtn % 16 == 0, f"bn/warps_n = {cfg.wtn} must be a multiple of 16 (ldmatrix.x4 "
          "loads two n8 fragments)")
    need(cfg.threads <= 1024, f"{cfg.threads} threads per block; at most 1024")
    for rows, cols, what in ((cfg.bm, cfg.bk, "A"), _b_tile(cfg) + ("B",)):
        chunks = rows * cols // cfg.vec
        need(chunks % cfg.threads == 0, f"{what} tile {rows}x{cols} has {chunks} vectors, not "
              f"a multiple of {cfg.threads} threads")
        cpr = cols // cfg.vec
        need(cfg.threads % cpr == 0 or cpr % cfg.threads == 0,
              f"{what} tile: {cpr} vectors per row and {cfg.threads} threads do not nest")
    need(cfg.smem_bytes <= 227 * 1024, f"{cfg.smem_bytes} bytes of shared memory; sm_90 allows "
          "227 KiB per block (sm_80: 163 KiB)")


def _b_tile(cfg: CudaGemmConfig) -> Tuple[int, int]:
    return (cfg.bk, cfg.bn) if cfg.b_major == "n" else (cfg.bn, cfg.bk)


# --------------------------------------------------------------------------- the plan

@dataclass(frozen=True)
class CopyPlan:
    """cp.async partition of a (rows, cols) row-major tile: offset/row/col layouts over
    ``(thread, value, iteration)`` (row/col without the value mode)."""

    rows: int
    cols: int
    off: Layout
    row: Layout
    col: Layout
    iters: int


@dataclass
class GemmPlan:
    cfg: CudaGemmConfig
    a_copy: CopyPlan
    b_copy: CopyPlan
    a_read: Layout          # (lane, 8, (kk, mi, wm)) -> offset in the A tile
    b_read: Layout          # (lane, 8, (kk, nj, wn)) -> offset in the B tile
    sw_a: Optional[Swizzle]
    sw_b: Optional[Swizzle]
    checks: Dict[str, Any] = field(default_factory=dict)

    def smem_layout(self, op: str) -> Any:
        rows, cols = (self.cfg.bm, self.cfg.bk) if op == "A" else _b_tile(self.cfg)
        sw = self.sw_a if op == "A" else self.sw_b
        tile = Layout((rows, cols), (cols, 1))
        return ComposedLayout(sw, 0, tile) if sw is not None else tile

    def flat_smem(self, op: str) -> Any:
        rows, cols = (self.cfg.bm, self.cfg.bk) if op == "A" else _b_tile(self.cfg)
        sw = self.sw_a if op == "A" else self.sw_b
        flat = Layout(rows * cols, 1)
        return ComposedLayout(sw, 0, flat) if sw is not None else flat

    def describe(self) -> Dict[str, str]:
        return {"A smem": str(self.smem_layout("A")), "B smem": str(self.smem_layout("B")),
                "A copy": str(self.a_copy.off), "B copy": str(self.b_copy.off),
                "A ldmatrix": str(self.a_read), "B ldmatrix": str(self.b_read),
                **{k: v.summary() for k, v in self.checks.items()}}


def copy_plan(rows: int, cols: int, threads: int, vec: int) -> CopyPlan:
    """Thread ``t`` copies ``vec``-element vectors of a (rows, cols) row-major tile: the threads
    tile whole rows (or a row tiles whole thread sets), iterating down the tile.  Raises
    :class:`GemmConfigError` when the vectors do not divide evenly among the threads."""
    cpr = cols // vec
    chunks = rows * cpr
    need(cols % vec == 0 and chunks % threads == 0 and (threads % cpr == 0 or
                                                         cpr % threads == 0),
          f"a {rows}x{cols} tile has {chunks} {2 * vec}-byte vectors ({cpr} per row), not a "
          f"multiple of {threads} threads that tile whole rows")
    if threads % cpr == 0:
        tpr = threads // cpr
        it = rows // tpr
        off = Layout(((cpr, tpr), vec, it), ((vec, cols), 1, tpr * cols))
        row = Layout(((cpr, tpr), it), ((0, 1), tpr))
        col = Layout(((cpr, tpr), it), ((vec, 0), 0))
    else:
        per = cpr // threads
        it = per * rows
        off = Layout((threads, vec, (per, rows)), (vec, 1, (threads * vec, cols)))
        row = Layout((threads, (per, rows)), (0, (0, 1)))
        col = Layout((threads, (per, rows)), (vec, (threads * vec, 0)))
    return CopyPlan(rows, cols, off, row, col, it)


def _read_layouts(cfg: CudaGemmConfig) -> Tuple[Layout, Layout]:
    kk = cfg.bk // 16
    mt, nj = cfg.wtm // 16, cfg.wtn // 16
    # A (bm x bk): lane bits 0-2 row, bit 3 row+8, bit 4 col+8  (matrices a0a1, a2a3, a4a5, a6a7)
    a = Layout(((8, 2, 2), 8, (kk, mt, cfg.warps_m)),
               ((cfg.bk, 8 * cfg.bk, 8), 1, (16, 16 * cfg.bk, cfg.wtm * cfg.bk)))
    if cfg.b_major == "n":   # B tile (bk x bn), n contiguous: ldmatrix.trans
        cols = cfg.bn
        b = Layout(((8, 2, 2), 8, (kk, nj, cfg.warps_n)),
                   ((cols, 8 * cols, 8), 1, (16 * cols, 16, cfg.wtn)))
    else:                    # B tile (bn x bk), k contiguous: ldmatrix
        cols = cfg.bk
        b = Layout(((8, 2, 2), 8, (kk, nj, cfg.warps_n)),
                   ((cols, 8, 8 * cols), 1, (16, 16 * cols, cfg.wtn * cols)))
    return a, b


def search_swizzle(rows: int, cols: int, write: Layout, read: Layout, vec: int):
    """First Swizzle(B, 3, S) (fewest bits, then smallest S) proved conflict-free for both."""
    size = rows * cols
    nbits = size.bit_length() - 1
    wmodel, rmodel = smem_model(f"cp.async.{2 * vec}"), smem_model("ldmatrix")
    flat = Layout(size, 1)
    cands = [None] + [Swizzle(b, 3, s) for b in range(1, 5) for s in range(b, nbits)
                      if 3 + s + b <= nbits]
    for sw in cands:
        lds = flat if sw is None else ComposedLayout(sw, 0, flat)
        rw = bank_conflicts(write, lds=lds, model=wmodel, elem_bytes=2)
        rr = bank_conflicts(read, lds=lds, model=rmodel, elem_bytes=2)
        if rw.holds and rr.holds:
            return sw, rw, rr
    raise GemmConfigError(f"no Swizzle(B, 3, S) makes the {rows}x{cols} tile conflict-free for "
                          "both cp.async writes and ldmatrix reads")


def ldm_partition(read: Layout, ldm, iters: Tuple[int, ...], item_map, steps: int,
                   step_pos: int) -> np.ndarray:
    """``[lane, mma item, k step] -> tile offset``: the element each mma register receives.

    The ldmatrix address layout says which row lane ``8*m + r`` points at; the ldmatrix
    destination layout (``ldm.element``) says which (row, col, matrix) each lane gets in each
    register half; ``item_map[e]`` is the ldmatrix item feeding mma item ``e``."""
    out = np.zeros((32, len(item_map), steps), dtype=np.int64)
    for s in range(steps):
        it = list(iters)
        it[step_pos] = s
        for lane in range(32):
            for e, li in enumerate(item_map):
                r8, c8, m = ldm.element(lane, li)
                out[lane, e, s] = read((8 * m + r8, c8, tuple(it)))
    return out


@lru_cache(maxsize=64)
def plan_gemm(cfg: CudaGemmConfig) -> GemmPlan:
    """Layouts and proofs of one configuration (cached); raises :class:`GemmConfigError`."""
    _validate(cfg)
    a_copy = copy_plan(cfg.bm, cfg.bk, cfg.threads, cfg.vec)
    br, bc = _b_tile(cfg)
    b_copy = copy_plan(br, bc, cfg.threads, cfg.vec)
    a_read, b_read = _read_layouts(cfg)
    sw_a, wa, ra = search_swizzle(cfg.bm, cfg.bk, a_copy.off, a_read, cfg.vec)
    sw_b, wb, rb = search_swizzle(br, bc, b_copy.off, b_read, cfg.vec)
    plan = GemmPlan(cfg, a_copy, b_copy, a_read, b_read, sw_a, sw_b)
    ch = plan.checks
    ch["A cp.async banks"], ch["A ldmatrix banks"] = wa, ra
    ch["B cp.async banks"], ch["B ldmatrix banks"] = wb, rb
    ch["A copy coverage"] = coverage(a_copy.off, cfg.bm * cfg.bk)
    ch["B copy coverage"] = coverage(b_copy.off, br * bc)
    spec = mma_m16n8k16(cfg.dtype)
    kk = cfg.bk // 16
    # A: ldmatrix.x4 registers 0..3 are a0a1, a2a3, a4a5, a6a7
    part = ldm_partition(a_read, ldmatrix(4, False), (0, 0, 0), range(8), kk, 0)
    ch["A lanes"] = lane_correctness(spec, "A", part, lds=plan.flat_smem("A"),
                                     memory=plan.smem_layout("A"), steps=kk)
    ldm_b = ldmatrix(4, cfg.b_major == "n")
    if cfg.b_major == "n":
        mem_b = plan.smem_layout("B")                      # B[k][n] at k*bn + n
    else:
        mem_b = ComposedLayout(sw_b, 0, Layout((cfg.bk, cfg.bn), (1, cfg.bk))) if sw_b \
            else Layout((cfg.bk, cfg.bn), (1, cfg.bk))      # B[k][n] at n*bk + k
    for half, items in ((0, range(4)), (1, range(4, 8))):
        part = ldm_partition(b_read, ldm_b, (0, 0, 0), items, kk, 0)
        ch[f"B lanes (n8 tile {half})"] = lane_correctness(
            spec, "B", part, lds=plan.flat_smem("B"), memory=mem_b, steps=kk,
            step=lambda s, h=half: (16 * s, 8 * h))
    for name, r in ch.items():
        if not r.holds:
            raise GemmConfigError(f"{cfg.name}: {name} does not hold:\n{r}")
    return plan


# --------------------------------------------------------------------------- emission

def c_layout(layout: Layout, coord: Any, ranges: Dict[Any, int], what: str,
              offset: int = 0) -> str:
    """Print ``layout(coord) + offset`` and check the printed text at every symbol value."""
    e = lc.expr(layout, coord, offset=offset)
    syms = list(ranges)

    def ref(env):
        n = len(env[syms[0]])
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            sub = {s: int(env[s][i]) for s in syms}
            out[i] = int(layout(_subst(coord, sub))) + offset
        return out

    lc.check_printed(e, ref, ranges, what)
    return lc.c(e)


def _subst(coord: Any, sub: Dict[Any, int]) -> Any:
    if isinstance(coord, tuple):
        return tuple(_subst(x, sub) for x in coord)
    return sub.get(coord, coord) if not isinstance(coord, int) else coord


def swz_fn(name: str, sw: Optional[Swizzle], size: int) -> str:
    x = lc.sym("x")
    e = lc.swizzle_expr(sw, x)
    if sw is not None:
        lc.check_printed(e, lambda env: np.array([sw(int(v)) for v in env[x]]), {x: size},
                         f"swizzle {sw}")
    return f"LG_DEV int {name}(int x) {{ return {lc.c(e)}; }}  // {sw or 'identity'}\n"


def emit_gemm(cfg: CudaGemmConfig) -> str:
    """The CUDA source of one configuration (plan proofs run first)."""
    p = plan_gemm(cfg)
    T = cfg.threads
    kk, mt, nt = cfg.bk // 16, cfg.wtm // 16, cfg.wtn // 8
    br, bc = _b_tile(cfg)
    a_stage, b_stage = cfg.bm * cfg.bk * 2, br * bc * 2
    tid, lane, wm, wn = lc.sym("tid"), lc.sym("lane"), lc.sym("wm"), lc.sym("wn")
    mma = MMA[cfg.dtype]
    cp = {8: "lg_cp_async16", 4: "lg_cp_async8", 2: "lg_cp_async4"}[cfg.vec]
    vbytes = 2 * cfg.vec
    L = source_head("kernels/cuda_gemm.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    w = L.append
    w(EDGE_COPY)
    w(swz_fn("lg_swz_a", p.sw_a, cfg.bm * cfg.bk))
    w(swz_fn("lg_swz_b", p.sw_b, br * bc))
    w(f'extern "C" __global__ void __launch_bounds__({T}, {cfg.min_blocks})')
    w(f"{cfg.name}(const lg_u16* __restrict__ A, const lg_u16* __restrict__ B, "
      "lg_u16* __restrict__ C, int M, int N, int K, int lda, int ldb, int ldc) {")
    w("  extern __shared__ __align__(128) unsigned char lg_smem[];")
    w("  const lg_u32 sA = lg_smem_u32(lg_smem);")
    w(f"  const lg_u32 sB = sA + {cfg.stages * a_stage};")
    w("  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;")
    w(f"  const int wm = warp % {cfg.warps_m}, wn = warp / {cfg.warps_m};")
    emit_block_origin(w, cfg)
    # ---- copy setup: one base row/col/smem offset per thread (from the copy layouts), plus
    # per-iteration constants (proved: the swizzle is translation-invariant over iterations)
    for name, cpl, sw, swz in (("a", p.a_copy, p.sw_a, "lg_swz_a"),
                               ("b", p.b_copy, p.sw_b, "lg_swz_b")):
        w(f"  const int {name}r = {c_layout(cpl.row, (tid, 0), {tid: T}, name + ' copy row')};")
        w(f"  const int {name}c = {c_layout(cpl.col, (tid, 0), {tid: T}, name + ' copy col')};")
        so = c_layout(cpl.off, (tid, 0, 0), {tid: T}, f"{name} copy smem")
        w(f"  const lg_u32 {name}s = 2u * {swz}({so});")
    if cfg.b_major == "n":
        w("  const lg_u16* ag = A + (size_t)(m0 + ar) * lda + ac;")
        w("  const lg_u16* bg = B + (size_t)br * ldb + n0 + bc;")
    else:
        w("  const lg_u16* ag = A + (size_t)(m0 + ar) * lda + ac;")
        w("  const lg_u16* bg = B + (size_t)(n0 + br) * ldb + bc;")
    # interior blocks (the whole tile and every k tile inside the matrices) copy without
    # predicates; edge blocks zero-fill what lies outside
    w(f"  const bool full = {fast_condition(cfg.bm, cfg.bn, cfg.vec)};")
    w("  auto load_stage = [&](int stage, int kt) {")
    w(f"    const int k0 = kt * {cfg.bk};")
    w(f"    const lg_u32 da = sA + stage * {a_stage}, db = sB + stage * {b_stage};")
    w("    const lg_u16* ak = ag + k0;")
    if cfg.b_major == "n":
        w("    const lg_u16* bk = bg + (size_t)k0 * ldb;")
    else:
        w("    const lg_u16* bk = bg + k0;")
    a_steps = copy_steps(p.a_copy, p.flat_smem("A"))
    b_steps = copy_steps(p.b_copy, p.flat_smem("B"))

    def smem(steps, i, sb, fn, cpl):
        ds = steps[i][2]
        return f"{sb} + {2 * ds}" if ds is not None else \
            f"2u * {fn}({c_layout(cpl.off, (tid, 0, i), {tid: T}, 'copy smem')})"

    for full in (True, False):
        w(f"    if (full && k0 + {cfg.bk} <= K) {{" if full else "    } else {")
        if full and all(st[2] is not None for st in a_steps + b_steps):
            for nm, steps, base, ld_, sb in (("a", a_steps, "ak", "lda", "as"),
                                             ("b", b_steps, "bk", "ldb", "bs")):
                w(f"      {{ const lg_u16* q = {base};")
                prev = (0, 0)
                for (dr, dc, ds) in steps:
                    ddr, ddc = dr - prev[0], dc - prev[1]
                    if (ddr, ddc) != (0, 0):
                        w(f"        q += (size_t){ddr} * {ld_} + {ddc};" if ddr else
                          f"        q += {ddc};")
                    prev = (dr, dc)
                    w(f"        {cp}_i<{2 * ds}>(d{nm} + {sb}, q);")
                w("      }")
            continue
        for i, (dr, dc, _) in enumerate(a_steps):
            src = f"ak + (size_t){dr} * lda + {dc}"
            dst = f"da + {smem(a_steps, i, 'as', 'lg_swz_a', p.a_copy)}"
            if full:
                w(f"      {cp}({dst}, {src}, {vbytes});")
            else:
                w("      " + edge_copy_call(vbytes, dst, src, f"m0 + ar + {dr} < M",
                                           f"K - (k0 + ac + {dc})"))
        for i, (dr, dc, _) in enumerate(b_steps):
            src = f"bk + (size_t){dr} * ldb + {dc}"
            dst = f"db + {smem(b_steps, i, 'bs', 'lg_swz_b', p.b_copy)}"
            if full:
                w(f"      {cp}({dst}, {src}, {vbytes});")
                continue
            if cfg.b_major == "n":   # rows are k, cols are n
                w("      " + edge_copy_call(vbytes, dst, src, f"k0 + br + {dr} < K",
                                           f"N - (n0 + bc + {dc})"))
            else:                    # rows are n, cols are k
                w("      " + edge_copy_call(vbytes, dst, src, f"n0 + br + {dr} < N",
                                           f"K - (k0 + bc + {dc})"))
    w("    }")
    w("  };")
    # ---- ldmatrix lane offsets (pre-swizzle), from the read layouts
    a_lane = c_layout(p.a_read, (lane, 0, (0, 0, wm)), {lane: 32, wm: cfg.warps_m},
                       "A ldmatrix lane offset")
    b_lane = c_layout(p.b_read, (lane, 0, (0, 0, wn)), {lane: 32, wn: cfg.warps_n},
                       "B ldmatrix lane offset")
    w(f"  const int a_ld = {a_lane};")
    w(f"  const int b_ld = {b_lane};")
    w(f"  float acc[{mt}][{nt}][4];")
    w(f"  #pragma unroll\n  for (int i = 0; i < {mt}; ++i)\n  #pragma unroll\n"
      f"  for (int j = 0; j < {nt}; ++j)\n  #pragma unroll\n"
      "  for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;")
    # swizzle(lane base + constant) = (swizzle(lane base) ^ lo) + hi, proved per constant
    a_bases = lane_bases(p.a_read, 3, cfg.warps_m)
    b_bases = lane_bases(p.b_read, 3, cfg.warps_n)
    w("  const int a_sw = lg_swz_a(a_ld), b_sw = lg_swz_b(b_ld);")
    decl_at = len(L)

    xa = _XorRegs("a", p.sw_a, a_bases, "a_sw", "lg_swz_a", "a_ld")
    xb = _XorRegs("b", p.sw_b, b_bases, "b_sw", "lg_swz_b", "b_ld")
    ldi = "lg_ldsm_x4_trans" if cfg.b_major == "n" else "lg_ldsm_x4"

    def frags(buf: str, base_a: str, base_b: str, k: int, ind: str) -> None:
        for i in range(mt):
            reg, imm = xa(p.a_read((0, 0, (k, i, 0))))
            w(f"{ind}lg_ldsm_x4<{imm}>(af[{buf}][{i}][0], af[{buf}][{i}][1], af[{buf}][{i}][2], "
              f"af[{buf}][{i}][3], {base_a} + {reg});")
        for j in range(nt // 2):
            reg, imm = xb(p.b_read((0, 0, (k, j, 0))))
            w(f"{ind}{ldi}<{imm}>(bf[{buf}][{2 * j}][0], bf[{buf}][{2 * j}][1], "
              f"bf[{buf}][{2 * j + 1}][0], bf[{buf}][{2 * j + 1}][1], {base_b} + {reg});")

    # ---- pipeline: stages-1 tiles in flight; fragments double-buffered across k steps and
    # across the tile boundary (the barrier sits before the last k step's mma, CUTLASS-style)
    S = cfg.stages
    w(f"  #pragma unroll\n  for (int s = 0; s < {S - 1}; ++s) {{")
    w("    if (s < KT) load_stage(s, s);")
    w("    lg_cp_async_commit();\n  }")
    w(f"  lg_cp_async_wait<{S - 2}>();")
    w("  __syncthreads();")
    w(f"  int rs = 0, ws = {S - 1};")
    w(f"  lg_u32 af[2][{mt}][4], bf[2][{nt}][2];")
    frags("0", "sA", "sB", 0, "  ")
    w("  for (int kt = 0; kt < KT; ++kt) {")
    for k in range(kk):
        cur, nxt = k % 2, (k + 1) % 2
        if k == kk - 1:
            w(f"    lg_cp_async_wait<{S - 2}>();")
            w("    __syncthreads();")
            w(f"    rs = rs + 1 == {S} ? 0 : rs + 1;")
        w(f"    {{ const lg_u32 ra = sA + rs * {a_stage}, rb = sB + rs * {b_stage};")
        frags(str(nxt), "ra", "rb", (k + 1) % kk, "      ")
        w("    }")
        if k == 0:
            w(f"    if (kt + {S - 1} < KT) load_stage(ws, kt + {S - 1});")
            w("    lg_cp_async_commit();")
            w(f"    ws = ws + 1 == {S} ? 0 : ws + 1;")
        for i, j in mma_issue_order(cfg.mma_order, mt, nt):
            w(f"    {mma}(acc[{i}][{j}], af[{cur}][{i}], bf[{cur}][{j}]);")
    w("  }")
    L[decl_at:decl_at] = xa.declarations() + xb.declarations()
    w("  lg_cp_async_wait<0>();")
    # ---- epilogue: accumulator (row, col) from the mma C layout
    spec = mma_m16n8k16(cfg.dtype)
    crow, ccol = split_rows(spec.tv_layout("C"), 16)
    r0 = c_layout(crow, (lane, 0), {lane: 32}, "C row")
    c0 = c_layout(ccol, (lane, 0), {lane: 32}, "C col")
    w(f"  const int crow = m0 + wm * {cfg.wtm} + {r0};")
    w(f"  const int ccol = n0 + wn * {cfg.wtn} + {c0};")
    w("  const bool pair_ok = (ldc & 1) == 0;")
    w(f"  #pragma unroll\n  for (int i = 0; i < {mt}; ++i)\n  #pragma unroll\n"
      f"  for (int j = 0; j < {nt}; ++j)\n  #pragma unroll\n  for (int h = 0; h < 2; ++h) {{")
    # items 2h, 2h+1 are (row + 8h, col), (row + 8h, col + 1): from the C layout
    dr = crow((0, (0, 1))) - crow((0, (0, 0)))
    need(dr == 8 and ccol((0, (1, 0))) - ccol((0, (0, 0))) == 1, "unexpected C layout")
    w(f"    const int r = crow + i * 16 + {dr} * h, col = ccol + j * 8;")
    emit_pair_store(w, cfg.dtype, "acc[i][j][2 * h]", "acc[i][j][2 * h + 1]")
    return "\n".join(L) + "\n"


def emit_block_origin(w, cfg: Any) -> None:
    """Print ``m0``/``n0`` (the block's tile origin) and ``KT`` (k tiles): blocks are
    rasterised in groups of ``cfg.group_m`` block rows that walk N together, so consecutive
    blocks share B tiles in L2."""
    w(f"  const int grid_m = (M + {cfg.bm - 1}) / {cfg.bm}, grid_n = (N + {cfg.bn - 1}) / {cfg.bn};")
    w(f"  const int group = {cfg.group_m} * grid_n;")
    w("  const int pid = blockIdx.x;")
    w(f"  const int first_m = (pid / group) * {cfg.group_m};")
    w(f"  const int gsize = min(grid_m - first_m, {cfg.group_m});")
    w(f"  const int m0 = (first_m + (pid % group) % gsize) * {cfg.bm};")
    w(f"  const int n0 = ((pid % group) / gsize) * {cfg.bn};")
    w(f"  const int KT = (K + {cfg.bk - 1}) / {cfg.bk};")


def emit_pair_store(w, dtype: str, lo: str, hi: str) -> None:
    """Print the store of accumulators ``lo``, ``hi`` (C[r][col], C[r][col + 1]) rounded to
    ``dtype``: one 4-byte store when both columns exist and ``ldc`` is even, else masked
    2-byte stores; rows past M are skipped.  Closes the caller's loop and the kernel."""
    cvt = "lg_f32_to_f16" if dtype == "f16" else "lg_f32_to_bf16"
    w("    if (r < M) {")
    w("      lg_u16* dst = C + (size_t)r * ldc + col;")
    w("      if (col + 1 < N && pair_ok) {")
    w(f"        *reinterpret_cast<lg_u32*>(dst) = {PACK[dtype]}({lo}, {hi});")
    w("      } else {")
    w(f"        if (col < N) dst[0] = {cvt}({lo});")
    w(f"        if (col + 1 < N) dst[1] = {cvt}({hi});")
    w("      }\n    }\n  }\n}")


def mma_issue_order(order: str, mt: int, nt: int) -> List[Tuple[int, int]]:
    """The (m fragment, n fragment) order a warp issues its ``mma`` in: ``mn``, ``nm``
    (n outer) or ``serp`` (serpentine)."""
    if order == "mn":
        return [(i, j) for i in range(mt) for j in range(nt)]
    if order == "nm":
        return [(i, j) for j in range(nt) for i in range(mt)]
    if order == "serp":
        return [(i, j if i % 2 == 0 else nt - 1 - j) for i in range(mt) for j in range(nt)]
    raise GemmConfigError(f"mma_order must be 'mn', 'nm' or 'serp', got {order!r}")


def copy_steps(cpl: CopyPlan, smem: Any) -> List[Tuple[int, int, Optional[int]]]:
    """Per copy iteration ``i``: ``(drow, dcol, dsmem)`` with ``row(t, i) = row(t, 0) + drow``
    (layouts are additive) and, where the difference is the same for every thread (checked at
    every thread), ``smem(off(t, 0, i)) = smem(off(t, 0, 0)) + dsmem`` -- so the kernel adds a
    constant to one per-thread shared offset; else ``dsmem`` is None (evaluate the swizzle).
    ``smem``: the stage layout over the row-major tile index (element offsets)."""
    from layoutalg.verify._access import eval_at
    T = cpl.off[0].size()
    base = eval_at(smem, np.array([cpl.off((t, 0, 0)) for t in range(T)]))
    out = []
    for i in range(cpl.iters):
        d = eval_at(smem, np.array([cpl.off((t, 0, i)) for t in range(T)])) - base
        out.append((cpl.row((0, i)), cpl.col((0, i)), int(d[0]) if (d == d[0]).all() else None))
    return out


def lane_bases(read: Layout, n_iter_modes: int, warp_extent: int) -> np.ndarray:
    """Pre-swizzle offsets ``read(lane, 0, (0, .., 0, w))`` for every lane and warp index
    ``w`` (the last iteration mode; ``warp_extent`` 1 and any mode count for no warp mode)."""
    out = []
    for w in range(warp_extent):
        it = (0,) * (n_iter_modes - 1) + (w,)
        for lane in range(32):
            out.append(read((lane, 0, it)))
    return np.array(out, dtype=np.int64)


def swz_step(sw: Optional[Swizzle], bases: np.ndarray, c: int, sbase: str) -> str:
    """C text for ``swizzle(base + c)`` given ``sbase`` = ``swizzle(base)`` already computed.

    Splits ``c`` into the bits the swizzle touches (``lo``) and those above (``hi``) and
    proves, for every lane/warp base, ``swizzle(base + c) == (swizzle(base) ^ lo) + hi``; if
    that fails the full swizzle is printed instead."""
    if sw is None:
        return f"({sbase} + {c})"
    from layoutalg.verify._access import eval_at
    top = sw.base + sw.bits + max(sw.shift, 0)
    lo, hi = c & ((1 << top) - 1), c >> top << top
    want = eval_at(sw, bases + c)
    got = (eval_at(sw, bases) ^ lo) + hi
    if (want == got).all():
        return f"(({sbase} ^ {lo}) + {hi})" if lo else f"({sbase} + {hi})"
    return None


def swz_split(sw: Optional[Swizzle], bases: np.ndarray, c: int) -> Optional[Tuple[int, int]]:
    """``(lo, hi)`` with ``swizzle(base + c) == (swizzle(base) ^ lo) + hi`` proved for every
    base in ``bases`` (all lanes and warps), or None."""
    if sw is None:
        return (0, c) if (bases & 0).all() else None
    from layoutalg.verify._access import eval_at
    top = sw.base + sw.bits + max(sw.shift, 0)
    lo, hi = c & ((1 << top) - 1), c >> top << top
    if ((eval_at(sw, bases + c)) == (eval_at(sw, bases) ^ lo) + hi).all():
        return lo, hi
    return None


class _XorRegs:
    """Loop-invariant registers ``2 * (swizzle(lane base) ^ lo)`` (bytes), one per distinct
    ``lo``; an access is then ``stage base + register + 2*hi`` with ``2*hi`` an immediate."""

    def __init__(self, prefix: str, sw, bases, sbase: str, fn: str, ld_name: str):
        self.prefix, self.sw, self.bases = prefix, sw, bases
        self.sbase, self.fn, self.ld = sbase, fn, ld_name
        self.regs: Dict[int, str] = {}
        self.fallback: Dict[int, str] = {}

    def __call__(self, c: int) -> Tuple[str, int]:
        """``(register expression, immediate byte offset)`` for constant ``c``."""
        split = swz_split(self.sw, self.bases, c)
        if split is None:   # not provable: full swizzle, no immediate
            name = f"{self.prefix}_f{c}"
            self.fallback[c] = name
            return name, 0
        lo, hi = split
        name = f"{self.prefix}_x{lo}"
        self.regs[lo] = name
        return name, 2 * hi

    def declarations(self) -> List[str]:
        out = [f"  const lg_u32 {n} = 2u * ({self.sbase} ^ {lo});" for lo, n in sorted(self.regs.items())]
        out += [f"  const lg_u32 {n} = 2u * {self.fn}({self.ld} + {c});"
                for c, n in sorted(self.fallback.items())]
        return out


def split_rows(layout: Layout, rows: int) -> Tuple[Layout, Layout]:
    """Split a layout into a column-major ``row + rows*col`` tile into row and col layouts."""
    fs, fd = layout.flat()
    rs, cs = [], []
    for s, d in zip(fs, fd):
        if d % rows == 0:
            rs.append(0)
            cs.append(d // rows)
        elif (s - 1) * d < rows:
            rs.append(d)
            cs.append(0)
        else:
            raise GemmConfigError(f"cannot split {layout} into rows/cols of {rows}")
    shape = layout.shape
    return Layout(shape, _unflatten(list(rs), shape)), Layout(shape, _unflatten(list(cs), shape))


def _unflatten(flat: List[int], profile: Any) -> Any:
    """``flat`` values laid out in the nesting of ``profile`` (consumed front to back)."""
    if isinstance(profile, tuple):
        return tuple(_unflatten(flat, p) for p in profile)
    return flat.pop(0)


# --------------------------------------------------------------------------- running it

class CudaGemm(CompiledKernel):
    """A compiled configuration: ``g(a, b, out=None) -> c`` on torch CUDA tensors."""

    def __init__(self, cfg: CudaGemmConfig = CudaGemmConfig(), *, backend: str = "auto"):
        self.plan = plan_gemm(cfg)
        super().__init__(cfg, emit_gemm(cfg), backend)

    def check_args(self, a, b, out=None) -> Tuple[int, int, int]:
        """Validate shapes/dtypes/strides/alignment; returns (M, N, K)."""
        cfg = self.cfg
        dt = _TORCH_DT[cfg.dtype]
        for t, nm in ((a, "a"), (b, "b")):
            if not hasattr(t, "dim") or t.dim() != 2:
                raise LaunchError(f"{nm} must be a 2-D torch tensor, got "
                                  f"{getattr(t, 'shape', type(t).__name__)}")
            if dtype_name(t) != dt:
                raise LaunchError(f"{nm}: dtype {dtype_name(t)}, this GEMM "
                                  f"was built for {dt}")
            if t.stride(1) != 1:
                raise LaunchError(f"{nm}: the last dimension must be contiguous (stride 1), got "
                                  f"strides {tuple(t.stride())}; pass .contiguous()")
        M, K = a.shape
        if cfg.b_major == "n":
            K2, N = b.shape
        else:
            N, K2 = b.shape
        if K2 != K:
            want = f"({K}, N)" if cfg.b_major == "n" else f"(N, {K})"
            raise LaunchError(f"b has shape {tuple(b.shape)}; with a {tuple(a.shape)} it must be "
                              f"{want}")
        for t, nm in ((a, "a"), (b, "b")):
            if t.data_ptr() % 2:
                raise LaunchError(f"{nm}: data pointer not 2-byte aligned (a sliced byte view?)")
        if min(M, N, K) < 1:
            raise LaunchError(f"empty GEMM: M={M}, N={N}, K={K}")
        if out is not None:
            TensorSpec(dtype=dt, shape=(M, N), strides=()).dtype
            if tuple(out.shape) != (M, N) or out.stride(1) != 1 or \
                    dtype_name(out) != dt:
                raise LaunchError(f"out must be a ({M}, {N}) {dt} tensor with contiguous rows, got "
                                  f"{tuple(out.shape)} {out.dtype} strides {tuple(out.stride())}")
            if out.data_ptr() % 4:
                raise LaunchError("out must be 4-byte aligned")
        return M, N, K

    def __call__(self, a, b, out=None):
        return self.bound(a, b, out)(a, b, out)

    def bind(self, a, b, out=None):
        """Check the arguments; ``run(a, b, out)`` for every call with their ``call_key``."""
        import torch
        from ..runtime.cuda import LaunchSite
        M, N, K = self.check_args(a, b, out)
        cfg = self.cfg
        site = LaunchSite(self.module, cfg.name, -(-M // cfg.bm) * -(-N // cfg.bn), cfg.threads,
                          signature=("ptr", "ptr", "ptr") + ("i32",) * 6,
                          # any alignment: misaligned or edge vectors take the kernel's edge copy
                          specs=[TensorSpec(strides=(), align=2), TensorSpec(strides=(), align=2),
                                 TensorSpec(strides=(), align=4)] + [None] * 6,
                          smem_bytes=cfg.smem_bytes)
        lda, ldb, ldc = a.stride(0), b.stride(0), N if out is None else out.stride(0)

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            site([a, b, out, M, N, K, lda, ldb, ldc])
            return out
        return run
