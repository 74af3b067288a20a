"""Which NVIDIA GEMM kernel and tile run a problem (issue 20 item 2), with the reason.

Hopper (``sm_90a``) takes the wgmma kernel (rows that are not 16-byte aligned go through its
edge copy, 2-byte loads), except for problems with 8/4-byte rows big enough to fill the SMs
with mma.sync's 128x256 tiles, where mma.sync's 8/4-byte ``cp.async`` wins; the tile and the split-K count are chosen by
a small cost model over the candidates of :data:`WGMMA_TILES`:

    time ~ waves * per_sm * (bm * bn * k_tiles_per_split) / tile_efficiency,
    waves = ceil(tiles * splits / (SMs * per_sm))

(``per_sm``: the CTAs one SM holds by shared memory; they share it, so each runs slower)

so a tile that leaves most SMs idle in its last wave (SM quantisation), or a big tile on a
problem with few tiles, loses to a smaller one.  Split-K is considered when the tiles fill at
most half the SMs, the k loop has at least 8 tiles, and the fp32 workspace it writes and reads
back is no larger than the operands.  ``tile_efficiency`` is a relative per-tile throughput
ASSUMED from the tile shape (bigger tiles reuse each loaded byte more), not measured; the GPU
benchmark (``benchmarks/gpu.py --suite``) is what says whether the choices are good.

Elsewhere (sm_80, sm_89) the mma.sync kernel runs with the widest copy the rows allow.

On Hopper that cp.async choice is then handed to the TMA kernel (:mod:`.wgmma_tma`, issue 20
item 4) when it can run it: a 128-row tile without split-K becomes the same tile in the
persistent, warp-specialised TMA kernel (:func:`tma_choice`; rows that are not 16-byte aligned
are first copied onto 128-byte lines when :data:`PAD_GBPS` / :data:`TMA_TFLOPS` say the copy
plus the kernel beats the edge path at :data:`EDGE_TFLOPS`); a split-K or 64-row choice with
16-byte rows becomes the split-K TMA kernel, whose tile and split count
:func:`split_estimate` ranks (:func:`tma_split_choice`).  Small problems with unaligned rows
keep the cp.async kernel.

The skinny rules (H100 sweeps of 2026-11-24 12:31Z / 12:40Z, ``benchmarks/gpu_gemm_low.py``):
a 64-row tile on a problem of M <= 32 rows loads A boxes of only 8 / 16 / 32 rows
(:func:`a_box_rows`: the zero fill of a 64-row box cost 16x4096x4096 a third of its time);
64x64 tiles compete with 64x128 (more SMs stream B with fewer splits to reduce); and an
N-major B whose rows straddle 128-byte lines is copied onto lines first when the copy costs
less than the slowdown it removes (:func:`straddle_pad`).  Every figure is ASSUMED from the H100 runs of 2026-11-24 (the
results files named next to them), not a model of the chip.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Tuple

from ..errors import LaunchError
from ..selection import GemmChoice, GemmProblem, Target, cdiv
from .gemm import CudaGemmConfig
from .wgmma import WgmmaGemmConfig
from .wgmma_tma import A_ROWS, TmaGemmConfig

__all__ = ["select_nvidia_gemm", "WGMMA_TILES", "TILE_EFFICIENCY", "resident", "tma_choice",
           "EDGE_TFLOPS", "cp_async_choice", "tma_split_choice", "split_estimate", "TMA_TFLOPS",
           "PAD_GBPS", "STRADDLE_SLOWDOWN", "PAD_COPY_S", "a_box_rows", "straddle_pad"]

# (bm, bn, stages): every candidate's plan is proved when it is built.  The 64-row tiles keep
# 4 / 6 stages (97 KiB) so two CTAs share an SM: a skinny problem's split-K CTAs then overlap
# one's epilogue with the other's loads (measured on an H100: 16x4096x4096 bf16 13.4 us with
# 64x128 s4 split 8 against 18.9 us with s8 split 4)
WGMMA_TILES: List[Tuple[int, int, int]] = [(128, 256, 4), (128, 128, 6), (64, 128, 4), (64, 64, 6)]
# relative per-tile throughput, assumed (see the module docstring), not measured
TILE_EFFICIENCY: Dict[Tuple[int, int], float] = {(128, 256): 1.0, (128, 128): 0.85,
                                                 (64, 128): 0.7, (64, 64): 0.5}
SMEM_PER_SM = 228 * 1024      # H100/H200: shared memory of one SM (227 KiB per block + 1 KiB)
MIN_K_TILES_PER_SPLIT = 4
MAX_SPLITS = 16


def resident(cfg: WgmmaGemmConfig) -> int:
    """CTAs of ``cfg`` one SM holds at once, by shared memory (1 KiB reserved per CTA)."""
    return max(1, SMEM_PER_SM // (cfg.smem_bytes + 1024))


def _splits(p: GemmProblem, tiles: int, kt: int, slots: int) -> int:
    if tiles * 2 > slots or kt < 2 * MIN_K_TILES_PER_SPLIT:
        return 1
    s = min(slots // tiles, kt // MIN_K_TILES_PER_SPLIT, MAX_SPLITS)
    operand_bytes = 2 * (p.m * p.k + p.k * p.n)
    while s > 1 and s * p.m * p.n * 4 > operand_bytes:
        s -= 1
    # equal ranges of whole k tiles: the count the kernel will really launch
    return cdiv(kt, cdiv(kt, s)) if s > 1 else 1


def _wgmma_choice(p: GemmProblem, t: Target) -> GemmChoice:
    best = None
    for bm, bn, stages in WGMMA_TILES:
        cfg = WgmmaGemmConfig(dtype=p.dtype, b_major=p.b_major, bm=bm, bn=bn, stages=stages)
        per_sm = resident(cfg)
        slots = t.sms * per_sm
        tiles = cdiv(p.m, bm) * cdiv(p.n, bn)
        kt = cdiv(p.k, 64)
        s = _splits(p, tiles, kt, slots)
        ctas = tiles * s
        waves = cdiv(ctas, slots)
        # CTAs sharing an SM each take per_sm times as long
        cost = waves * per_sm * bm * bn * cdiv(kt, s) / TILE_EFFICIENCY[(bm, bn)]
        if best is None or cost < best[0]:
            best = (cost, cfg, per_sm, slots, tiles, s, ctas, waves)
    cost, cfg, per_sm, slots, tiles, s, ctas, waves = best
    cfg = replace(cfg, split_k=s > 1)
    why = [f"{cfg.bm}x{cfg.bn} tiles ({per_sm} CTA(s) per SM by shared memory): {tiles} tiles "
           f"on {t.sms} SMs"]
    if s > 1:
        why.append(f"split-K {s} (k tiles of 64: {cdiv(p.k, 64)}, {cdiv(cdiv(p.k, 64), s)} "
                   f"per split) to fill the SMs: {ctas} CTAs")
    why.append(f"{waves} wave(s) of {slots} slots, last wave {ctas - (waves - 1) * slots}/{slots} "
               "busy")
    if p.vec != 8:
        why.append("rows not 16-byte aligned: every vector takes the edge copy (2-byte loads)")
    return GemmChoice("wgmma", cfg, s, ctas, "; ".join(why), cost)


# Figures of the padding decision (assumed from the H100 suite of 2026-11-24, not a model of the
# chip): the edge-copy path ran 4097^3 at 74 TFLOP/s; the aligned kernels run big problems at
# ~600; a device copy moves ~3000 GB/s (the pad reads and writes each operand once).
EDGE_TFLOPS = 75e12
TMA_TFLOPS = 600e12
PAD_GBPS = 2500e9
# an unaligned operand is copied anyway: onto 128-byte lines, which TMA fetches whole (4097^3
# f16: 509 us with 16-byte rows, 383 us with 128-byte rows, H100 2026-11-24).  Aligned rows
# that straddle lines were NOT copied: 4000x3000x1000 f16 ran its kernel at 589 TF on padded
# rows against 381 TF on its own, but copying both operands ate the gain (63.1 us against
# 62.1 us in all)
LINE = 128
TMA_STAGES = {256: 3, 128: 6}     # with the TMA-store epilogue's C buffers, in 227 KiB
# ... but most of that gain is B's when B is N-major (bn / 64 boxes of 64 k rows x 128 bytes):
# with its rows straddling 128-byte lines the kernel took 1.53x as long (4000x3000x1000 f16,
# 128x256: 64.1 us against 41.8 us with B alone on 128-byte lines; A too: another 1.1 us; A
# alone 55.3 us; benchmarks/results/gpu_gemm_low_h100_2026-11-24_1231Z.txt).  So B alone is
# copied onto 128-byte lines when the copy costs less than the slowdown it removes
STRADDLE_SLOWDOWN = 0.53
# what one padding copy costs beyond its bytes (a launch-bound small copy: 777x333x130's two
# copies took 3.7 us of device time for 0.5 MB, gpu_gemm_low_h100_2026-11-24_1240Z.txt)
PAD_COPY_S = 1.8e-6


def tma_choice(p: GemmProblem, t: Target, base: GemmChoice) -> Optional[GemmChoice]:
    """The TMA kernel (:mod:`kernels.nvidia.wgmma_tma`) in place of the cp.async ``base``
    choice when ``base`` is a 128-row tile without split-K (the problem fills the SMs): same
    tile, persistent CTAs, warp-specialised TMA loads.  Rows that are not 16-byte aligned are
    first copied into padded buffers when that copy plus the aligned kernel is estimated faster
    than the edge path (:data:`EDGE_TFLOPS` etc.); else None (keep ``base``)."""
    cfg = base.config
    if base.kind != "wgmma" or base.splits != 1 or cfg.bm != 128 or cfg.bn not in TMA_STAGES:
        return None
    tiles = cdiv(p.m, cfg.bm) * cdiv(p.n, cfg.bn)
    why = [f"{cfg.bm}x{cfg.bn} tiles: {tiles} tiles on {min(tiles, t.sms)} persistent CTAs "
           f"({cdiv(tiles, t.sms)} per CTA at most); TMA producer warpgroup + 2 wgmma consumers"]
    pad_rows = 0
    if p.vec != 8:
        pad = pad_bytes(p)
        t_pad = pad / PAD_GBPS + p.flops / TMA_TFLOPS
        t_edge = p.flops / EDGE_TFLOPS
        if t_pad >= t_edge:
            return None
        pad_rows = LINE
        why.append(f"rows not 16-byte aligned: A and B copied into padded buffers first "
                   f"(~{pad / 1e6:.0f} MB, est. {1e6 * t_pad:.0f} us with the copy against "
                   f"{1e6 * t_edge:.0f} us on the edge path)")
    pad_ops = "ab"
    if not pad_rows:
        pad_rows, pad_ops = straddle_pad(p, why)
    store = "tma" if p.n % 8 == 0 else "direct"
    if store == "direct":
        why.append(f"N = {p.n}: C rows not 16-byte aligned, registers -> global stores")
    tcfg = TmaGemmConfig(dtype=p.dtype, b_major=p.b_major, bm=cfg.bm, bn=cfg.bn,
                         stages=TMA_STAGES[cfg.bn], store=store)
    return GemmChoice("wgmma_tma", tcfg, 1, min(tiles, t.sms), "; ".join(why), base.score,
                      pad_rows, pad_ops)


def straddle_pad(p: GemmProblem, why: List[str]) -> Tuple[int, str]:
    """``(LINE, "b")`` when N-major B's 16-byte aligned rows straddle 128-byte lines (judged
    on contiguous rows of ``N`` elements; the runtime copies only a B whose rows really do)
    and copying B (read + write at :data:`PAD_GBPS`) costs less than :data:`STRADDLE_SLOWDOWN`
    of the kernel's time at :data:`TMA_TFLOPS` (plus :data:`PAD_COPY_S` a copy); else
    ``(0, "ab")``.  Appends the reason."""
    if p.b_major != "n" or (2 * p.n) % LINE == 0:
        return 0, "ab"
    t_copy = PAD_COPY_S + 2 * 2 * p.k * p.n / PAD_GBPS
    t_loss = STRADDLE_SLOWDOWN * p.flops / TMA_TFLOPS
    if t_copy >= t_loss:
        return 0, "ab"
    why.append(f"B's {2 * p.n}-byte rows straddle 128-byte lines: B copied onto 128-byte "
               f"lines first (~{4 * p.k * p.n / 1e6:.0f} MB, est. {1e6 * t_copy:.1f} us "
               f"against {1e6 * t_loss:.1f} us lost to the straddle)")
    return LINE, "b"


def pad_bytes(p: GemmProblem) -> int:
    """Bytes the padding copy moves: A and B read and written once."""
    return 2 * 2 * (p.m * p.k + p.k * p.n)


# The split-K TMA candidates (bm, bn, stages: the most that fit 227 KiB with no C buffer) and
# the time estimate that ranks them: every figure ASSUMED from the H100 runs of 2026-11-24
# (benchmarks/results/gpu_tma_skinny_h100_2026-11-24.json), not a model of the chip.
# 64x64 (12 stages) last: it wins where the operands' bytes bound the time and more tiles
# spread them over more SMs with fewer splits (64x4096x4096: 11.7 us at 2 splits against 14.7
# us for 64x128 at 4; 128x4096x14336: 43.7 against 48.3 us for 64x128 at 2; H100,
# gpu_gemm_low_h100_2026-11-24_1240Z), and a tie (16x14336x4096: both DRAM-bound) keeps the
# earlier 64x128
SPLIT_TILES: List[Tuple[int, int, int]] = [(64, 128, 8), (64, 256, 5), (128, 128, 6),
                                           (64, 64, 12)]
SPLIT_EFFICIENCY = {(64, 128): 0.65, (64, 256): 0.8, (128, 128): 0.85, (64, 64): 0.5}
SM_TFLOPS = 6.0e12          # dense f16/bf16 wgmma per SM at full efficiency (~800 TF / 132)
DRAM_BPS = 3.0e12           # operands read once (L2 shares them within a wave), workspace
# the one-launch split-K (reduce="inline"): what the last CTA of a tile adds per split when it
# reads the partials back, by tile (H100, 2026-11-24: inline against reduce-kernel device time,
# benchmarks/results/gpu_splitk_inline_h100_2026-11-24.json; 64x256 keeps 128 accumulators and
# cannot keep many loads in flight).  The two-launch form it replaces paid a second launch:
# ~20-40 us more host time per call by wall, the same run
INLINE_SPLIT_S = {(64, 128): 0.6e-6, (128, 128): 0.8e-6, (64, 64): 0.6e-6}
# 64x256 cannot reduce inline (ptxas spills): it keeps the reduce kernel, whose second launch
# costs the caller ~20-45 us more host time than one launch (same run, "host" column)
SECOND_LAUNCH_S = 25e-6


def split_estimate(p: GemmProblem, t: Target, bm: int, bn: int) -> Tuple[float, int, int]:
    """``(seconds, splits, units)`` of the split-K TMA kernel with ``bm x bn`` tiles: splits
    so that the (tile, k range) units fill at most the SMs once (at least 4 k tiles each);
    time = max(compute of the busiest CTA, operand bytes / DRAM) + the fp32 workspace written
    and read back + the last CTA's wait per split (:data:`INLINE_SPLIT_S`), or for a tile that
    cannot reduce inline the reduce kernel's second launch (:data:`SECOND_LAUNCH_S`).

    The most splits that fit, not the fewest the estimate allows: the operand bytes stream
    faster from more SMs than the DRAM term says (64x64 tiles, 16x4096x4096 with 16-row A
    boxes: 64 CTAs 11.3 us, 2 splits on 128 CTAs 10.0 us; 1x4096x4096 11.0 / 10.0 us; H100,
    gpu_gemm_low_h100_2026-11-24_1240Z)."""
    tiles = cdiv(p.m, bm) * cdiv(p.n, bn)
    kt = cdiv(p.k, 64)
    s = max(1, min(t.sms // tiles, kt // MIN_K_TILES_PER_SPLIT, MAX_SPLITS))
    s = cdiv(kt, cdiv(kt, s))                       # the count the kernel really launches
    units = tiles * s
    compute = cdiv(units, t.sms) * 2 * bm * bn * 64 * cdiv(kt, s) / (
        SM_TFLOPS * SPLIT_EFFICIENCY[(bm, bn)])
    mem = 2 * (p.m * p.k + p.k * p.n) / DRAM_BPS
    if (bm, bn) in INLINE_SPLIT_S:
        ws = (8 * s * p.m * p.n / DRAM_BPS + s * INLINE_SPLIT_S[(bm, bn)]) if s > 1 else 0.0
    else:       # fp32 partials at every split count, then the reduce kernel's launch
        ws = 8 * s * p.m * p.n / DRAM_BPS + SECOND_LAUNCH_S
    return max(compute, mem) + ws, s, units


def a_box_rows(p: GemmProblem, bm: int) -> int:
    """``TmaGemmConfig.a_rows`` for ``p``: the fewest rows of :data:`A_ROWS` holding M when the
    tile has one consumer (bm 64) and M fits one, else 0 (the whole tile).  A 64-row box of a
    16-row A is 48 rows of TMA zero fill, and filling them was slow: 64x64 tiles, 1 split,
    11.5 us at M = 64 but 16.3 us at M = 16 and 19.5 us at M = 1 (H100,
    gpu_gemm_low_h100_2026-11-24_1231Z)."""
    if bm != 64:
        return 0
    return next((r for r in A_ROWS if p.m <= r), 0)


def tma_split_choice(p: GemmProblem, t: Target) -> GemmChoice:
    """The split-K TMA kernel for a problem whose 128x256 tiles do not fill the SMs (skinny
    M, long K): the candidate of :data:`SPLIT_TILES` with the least :func:`split_estimate`."""
    best = None
    for bm, bn, st in SPLIT_TILES:
        est, s, units = split_estimate(p, t, bm, bn)
        if best is None or est < best[0]:
            best = (est, bm, bn, st, s, units)
    est, bm, bn, st, s, units = best
    cfg = TmaGemmConfig(dtype=p.dtype, b_major=p.b_major, bm=bm, bn=bn, stages=st,
                        store="direct", split_k=True,
                        reduce="inline" if (bm, bn) in INLINE_SPLIT_S else "kernel",
                        a_rows=a_box_rows(p, bm))
    tiles = cdiv(p.m, bm) * cdiv(p.n, bn)
    why = (f"{bm}x{bn} tiles: {tiles} tiles" + (f", split-K {s} ({cdiv(cdiv(p.k, 64), s)} k "
           f"tiles each)" if s > 1 else "") + f": {units} work units on {min(units, t.sms)} "
           f"persistent CTAs (TMA producer + wgmma consumer), "
           + ("one launch (the last split of each tile reduces)" if cfg.inline_reduce else
              "partials + the reduce kernel")
           + (f"; A boxes of {cfg.a_rows} rows (M = {p.m})" if cfg.a_rows else "")
           + f"; est. {1e6 * est:.1f} us "
           "(assumed figures, gemm_select.SPLIT_TILES)")
    return GemmChoice("wgmma_tma", cfg, s, min(units, t.sms), why, est)


def cp_async_choice(p: GemmProblem, t: Target) -> GemmChoice:
    """The cp.async wgmma kernel's choice alone (tile, split-K), without the TMA kernel: the
    baseline a benchmark compares the TMA kernel with."""
    return _wgmma_choice(p, t)


def select_nvidia_gemm(p: GemmProblem, t: Target, atom: str = "auto") -> GemmChoice:
    """The NVIDIA kernel for ``p`` on ``t``; ``atom`` "auto", "wgmma" (refused off sm_90a)
    or "mma" (mma.sync everywhere)."""
    if atom not in ("auto", "wgmma", "mma"):
        raise LaunchError(f"atom must be 'auto', 'wgmma' or 'mma', got {atom!r}")
    hopper = t.arch == "sm_90a"
    if atom == "wgmma" and not hopper:
        raise LaunchError(f"atom='wgmma' needs an sm_90a device (H100/H200); the target is "
                          f"{t.arch}: use atom='auto' or 'mma'")
    vec = p.vec if p.vec > 1 else 8
    cfg = CudaGemmConfig(dtype=p.dtype, b_major=p.b_major, vec=vec)
    tiles = cdiv(p.m, cfg.bm) * cdiv(p.n, cfg.bn)
    # 8/4-byte rows: mma.sync's cp.async of that width beats wgmma's 2-byte edge loads when the
    # problem is big enough to fill the SMs with its 128x256 tiles; small ones want wgmma's
    # smaller tiles more than wide copies
    narrow_big = p.vec in (2, 4) and tiles >= t.sms
    if hopper and atom in ("auto", "wgmma"):
        base = _wgmma_choice(p, t)
        fast = tma_choice(p, t, base)
        if fast is not None:
            return fast
        if p.vec == 8 and (base.splits > 1 or base.config.bm == 64):
            return tma_split_choice(p, t)
        if atom == "wgmma" or not narrow_big:
            return base
    if atom == "mma":
        why = "atom='mma' asked for"
    elif not hopper:
        why = f"{t.arch}: no wgmma"
    else:
        why = (f"rows allow {2 * p.vec}-byte copies only (the wgmma kernel copies 16 bytes, "
               f"else 2-byte edge loads) and {tiles} tiles fill the SMs")
    if p.vec == 1:
        why += "; rows not 4-byte aligned: every vector takes the edge copy (2-byte loads)"
    return GemmChoice("mma", cfg, 1, tiles, f"{why}; {cfg.bm}x{cfg.bn} tiles: {tiles} tiles")
