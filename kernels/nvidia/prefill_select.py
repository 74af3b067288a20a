"""Which prefill (flash-attention forward) configuration runs a problem on an NVIDIA GPU, and
why (issue 20 item 2): :func:`choose_prefill`.

The rules are H100 measurements (``benchmarks/gpu_attn_sweep.py``, every candidate tile on the
suite shapes, 2026-11-24; docs/PERFORMANCE.md), not a model:

* head_dim 256: the warp-specialised kernel, 128 rows x 64-key blocks, 2 stages, ping-pong
  (consumers at 240 registers: ``WsFlashConfig.regs``; its 128-thread producer copies
  256-wide rows with two per-thread shared bases): 0.86x cuDNN at B2 H16 S4K (0.72x for the
  2-warpgroup wgmma tile it replaces), 0.91x at B4 H8/1 S513 causal (0.83x; the one-warpgroup
  64 x 64 tile measured 0.92x, within noise: one rule kept). cuDNN was SDPA's fastest backend
  at both shapes.  With ``defer_pv_wait`` (the wait for P V after the next block's ring waits:
  ptxas otherwise hoists it above the softmax, whose ex2 then never overlap P V): 0.898x and
  0.902x against 0.860x and 0.863x at B2 H16 S4K, 0.928x against 0.919x at B4 H8/1 S513
  causal (H100, rotated rounds, ``prefill_ab_h100_2026-11-24_defer*``).  At d128 the same
  change measured no gain (0.999x against 1.048x at S8K, 192 keys; causal 0.995x against
  1.009x): the other consumer's GEMMs (ping-pong) already cover that softmax.
* head_dim 64: one warpgroup (64 query rows), 128-key blocks: 72 KiB of shared memory lets
  three blocks share an SM, whose warpgroups then overlap each other's softmax and MMAs
  (0.98x cuDNN at Sq 1000 / Skv 4097 against 0.73x for 128 rows; 0.93x against 0.64x at
  B4 H16 S2K; the warp-specialised kernel: 1.06x and 0.84x, a split decision kept simple).
  That tile runs built as verified IR (:mod:`.wgmma_flash_ir`, :func:`wgmma_prefill_on_ir`,
  bitwise the template's output, 0.98-1.00x its device time on an H100).
* head_dim 128: the warp-specialised FA3-style kernel (:mod:`.wgmma_attention_ws`: producer
  + mbarrier ring, two consumer warpgroups with ping-pong) with TMA loads and 3 stages when
  Q, K and V are TMA-addressable (:func:`.ws_tma_loads.tma_attention_ready`): 1.01-1.02x
  cuDNN at B8 H32 S8K (672-690 TFLOP/s in two runs, against 0.92-0.93x for the cp.async
  producer with 2 stages), 0.975x causal, 0.99x at B2 H32/8 S4K causal, 0.70x at B16 H32/8
  S512 causal (2026-11-24 sweeps, ``attn_sweep_ws_tma_h100_2026-11-24*.json*``).  Non-causal
  with more than :data:`WIDE_KEYS_MIN_SEQ` keys: 192-key blocks with 2 stages
  (:data:`WIDE_KEYS`; FA3 takes 176 there, read not copied), fewer per-block barrier waits,
  O rescales and Q re-reads per key: 1.06x / 1.04x cuDNN at B8 H32 S8K in two runs against
  0.99x / 0.98x for 128 keys x 3 stages, 1.10x against 1.05x at B4 H16 1000/4097 (medians of
  interleaved rounds, ``benchmarks/gpu_prefill_ab.py``, ``prefill_ab_h100_2026-11-24_*``; the
  suite then read 1.01x and 1.04x), but 0.69x against 0.75x at B16 H32/8 S512, whose 3 key
  blocks leave too short a loop.  Causal S8K measured no difference (1.02 vs 1.01): FA3's 128
  stays.  Otherwise
  (a broadcast or unaligned stride) the cp.async producer with 2 stages (0.93x at S8K).
  Causal with at most :data:`PERSISTENT_MAX_SEQ` query and key rows: the persistent TMA
  kernel (one block per SM over (query block, head, batch) units, the next unit's loads
  behind the current one's GEMMs): 0.84x cuDNN at B16 H32/8 S512 causal against 0.71x; at
  S8K causal it measured 0.61x (against 1.02x), so long sequences keep one block per unit.
  Its units in chunks of :data:`PERSISTENT_UNIT_HEADS` (batch, head) pairs (longest query
  block first inside a chunk; resident blocks then read few heads' K/V): 0.91x against 0.85x
  at B16 H32/8 S512, 0.90x against 0.59x at B16 H32 S512, 1.05x against 1.00x at B4 H32/8
  S1024 (H100, 7 interleaved rounds, ``prefill_ab_h100_2026-11-24_units*``).  At S8K causal
  no chunk size (1, 2, 4, 8) beat one block per unit (0.86-0.93x against 1.09x that run).
  Longer causal problems: :data:`CAUSAL_LONG`, 2 stages with the P V wait deferred past the
  next block's ring waits (``defer_pv_wait``; ptxas otherwise schedules that wait above the
  softmax): 1.014x the 3-stage kernel at B2 H32/8 S4K in every round, 1.034x / 1.017x / 0.985x
  at S8K in three runs (a small gain, inside one S8K run's spread).  Neither the deferred wait
  nor the warp-voted rescale nor V loaded behind K beat the 192-key non-causal kernel.
  The TMA configurations with one block per unit (192 keys, the causal-long one, 3 stages
  non-causal) run built as verified IR (:mod:`.wgmma_ws_ir`, :func:`ws_prefill_on_ir`,
  :mod:`.prefill_ir`: bitwise the template's output, 0.99-1.07x its device time on an H100),
  and so do the persistent short causal one (:mod:`.wgmma_ws_ir_persist`,
  :data:`IR_WS_PERSIST_AT_PARITY`: 0.99-1.04x) and the d256 cp.async tile
  (:data:`IR_WS_CP_PREFILL_AT_PARITY`: 0.99-1.02x its template at every d256 shape in a
  15-round run); the d128 cp.async fallback runs the template (0.96-0.97x as IR).

Off Hopper (or ``atom="mma"``) the mma.sync kernel's defaults run: built as verified IR
(:mod:`.flash_ir`, :func:`mma_prefill_on_ir`) where that kernel measured at parity with the
template (:data:`IR_PREFILL_AT_PARITY`), else the template (:mod:`.attention`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Tuple

from ..errors import LaunchError
from .attention import FLASH_DEFAULTS, FlashConfig
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig

__all__ = ["PrefillChoice", "choose_prefill", "IR_PREFILL_AT_PARITY", "mma_prefill_on_ir",
           "IR_WGMMA_PREFILL_AT_PARITY", "wgmma_prefill_on_ir", "IR_WS_PREFILL_AT_PARITY",
           "IR_WS_PERSIST_AT_PARITY", "IR_WS_CP_PREFILL_AT_PARITY",
           "ws_prefill_on_ir", "prefill_on_ir",
           "WGMMA_PREFILL_TILES", "WS_PREFILL_TILES",
           "WS_PREFILL_FALLBACK", "PERSISTENT_MAX_SEQ", "PERSISTENT_UNIT_HEADS", "WIDE_KEYS",
           "WIDE_KEYS_MIN_SEQ", "CAUSAL_LONG"]

# head_dim -> warp-specialised kernel settings (every mask): with TMA, and without (tensors
# TMA cannot address).  d256 runs the cp.async producer either way (measured so; the TMA
# producer was swept at d128)
# d256: the P V wait deferred past the next block's ring waits, so the softmax overlaps P V
# (0.86x -> 0.90x cuDNN at B2 H16 S4K, 0.92x -> 0.93x at B4 H8/1 S513 causal, two H100 runs)
WS_PREFILL_TILES: Dict[int, Dict[str, Any]] = {128: dict(stages=3, pingpong=True, loader="tma"),
                                                256: dict(bn=64, stages=2, pingpong=True,
                                                          defer_pv_wait=True)}
WS_PREFILL_FALLBACK: Dict[int, Dict[str, Any]] = {128: dict(stages=2, pingpong=True),
                                                  256: dict(bn=64, stages=2, pingpong=True,
                                                            defer_pv_wait=True)}
# causal problems up to this many query/key rows take the persistent TMA kernel (measured at
# 512, not between 512 and 8192: the bound is the measured side)
PERSISTENT_MAX_SEQ = 1024
# the persistent kernel's work units in chunks of this many (batch, head) pairs (measured 1, 2,
# 4, 8 at B16 H32/8 S512: 0.66, 0.81, 0.91, 0.92x cuDNN; 4 also measured at H32 S512, S1024)
PERSISTENT_UNIT_HEADS = 4
# d128 non-causal with TMA and more than this many keys (or an unknown length): the wider
# key block (measured better at 4097 and 8192 keys, worse at 512; the bound lies between)
WIDE_KEYS: Dict[str, Any] = dict(bn=192, stages=2)
WIDE_KEYS_MIN_SEQ = 1024
# d128 causal with TMA, one block per unit (longer than PERSISTENT_MAX_SEQ): 2 stages with the
# P V wait deferred (H100, select / this in rotated rounds: 1.014x (13 of 13 rounds) at B2
# H32/8 S4K; 1.034x, 1.017x, 0.985x in three runs at B8 H32 S8K, 22 of 35 rounds faster)
CAUSAL_LONG: Dict[str, Any] = dict(stages=2, defer_pv_wait=True)

# (head_dim, causal) of the mma.sync defaults (FLASH_DEFAULTS) whose IR-built kernel
# (kernels.nvidia.flash_ir, bitwise the template's output) measured at parity with the
# template: >= 0.98x its device time at B8 H32 S2K and S8K f16 and S2K bf16 (H100 2026-11-24,
# medians of 7 interleaved rounds, benchmarks/nvidia_ir_flash.py, docs/PERFORMANCE.md):
# d64 (V waited for before the softmax, flash_ir.V_WAIT_EARLY_HEAD_DIMS) 1.059 / 1.038 / 1.066
# non-causal, 1.050 / 1.050 / 1.050 causal; d128 non-causal 0.994 / 1.014 / 0.991; d128 causal
# 0.994 / 0.997 / 0.998 (run v6, rotated rounds; 0.971 / 0.980 / 0.981 in the run before the
# balanced RowMax tree); d256 (V early, one masked loop: flash_ir.ONE_MASKED_LOOP) 1.129 /
# 1.089 / 1.112 non-causal, 1.158 / 1.114 / 1.156 causal (run v6).  Every default is listed:
# the set stays the rule, so a head dim or tile added later runs the template until measured.
IR_PREFILL_AT_PARITY: FrozenSet[Tuple[int, bool]] = frozenset(
    {(64, False), (64, True), (128, False), (128, True), (256, False), (256, True)})


def mma_prefill_on_ir(cfg: Any) -> bool:
    """Does the mma.sync configuration ``cfg`` run the IR-built kernel
    (:class:`~.flash_ir.IrFlashAttention`)?  The defaults tile of a measured (head_dim, mask),
    with the template's copy form (``fast_copy``), else the template runs."""
    return (type(cfg) is FlashConfig and (cfg.head_dim, cfg.causal) in IR_PREFILL_AT_PARITY
            and cfg == FlashConfig(dtype=cfg.dtype, head_dim=cfg.head_dim, causal=cfg.causal,
                                   arch=cfg.arch, **FLASH_DEFAULTS[cfg.head_dim]))


# (head_dim, causal) of the wgmma tiles (WGMMA_PREFILL_TILES) whose IR-built kernel
# (kernels.nvidia.wgmma_flash_ir, bitwise the template's output) measured at parity with the
# template: >= 0.98x its device time at every shape of benchmarks/nvidia_ir_wgmma_flash.py
# (H100 2026-11-24 21:31Z, f16, medians of 11 rotated rounds against both template instances'
# 22: B4 H16 S2K 0.991, B4 H16 1000 / 4097 1.002, B4 H16 S2K causal 0.983 (0 of 11 rounds
# faster), B8 H32 S8K 0.986 (an A/A spread of 7 % there); docs/PERFORMANCE.md; 0.94-0.95x
# before the IR printed 32-bit shared bases)
IR_WGMMA_PREFILL_AT_PARITY: FrozenSet[Tuple[int, bool]] = frozenset({(64, False), (64, True)})


def wgmma_prefill_on_ir(cfg: Any) -> bool:
    """Does the wgmma configuration ``cfg`` run the IR-built kernel
    (:class:`~.wgmma_flash_ir.IrWgmmaFlashAttention`)?  The tile :func:`choose_prefill` runs
    for a measured (head_dim, mask), in the default (overlapped) schedule; else the template."""
    key = (getattr(cfg, "head_dim", None), bool(getattr(cfg, "causal", False)))
    if type(cfg) is not WgmmaFlashConfig or key not in IR_WGMMA_PREFILL_AT_PARITY:
        return False
    kw, _ = WGMMA_PREFILL_TILES[key]
    return cfg == WgmmaFlashConfig(dtype=cfg.dtype, head_dim=cfg.head_dim, causal=cfg.causal,
                                   arch=cfg.arch, **kw)


# (bn, stages, causal, defer_pv_wait) of the warp-specialised d128 configurations (TMA,
# ping-pong, one block per unit: WS_PREFILL_TILES with WIDE_KEYS / CAUSAL_LONG) whose IR-built
# kernel (kernels.nvidia.wgmma_ws_ir, IrWsAttention, bitwise the template's output) measured at
# parity with the template: >= 0.98x its device time at every shape measured that runs it
# (H100 2026-11-25, benchmarks/nvidia_ws_ir_serial.py --dispatched --rounds 9, medians of 9
# rotated rounds, nvidia_ws_ir_dispatched_h100_2026-11-25_pinned.json; docs/PERFORMANCE.md):
# 128 x 192 s2: 0.992 at B8 H32 S8K, 0.995 at B4 H16 1000 / 4097 (0.962 / 0.970 before Q's
# descriptors were pinned); 128 x 128 s2 causal dw: 0.999 at B8 H32 S8K, 0.996 at B2 H32/8
# S4K, 0.993 at B3 H8 S1500; 128 x 128 s3: 1.068 at B2 H4 S77, 0.989 at B16 H32 S512.  The
# persistent short causal kernel: IR_WS_PERSIST_AT_PARITY.
IR_WS_PREFILL_AT_PARITY: FrozenSet[Tuple[int, int, bool, bool]] = frozenset(
    {(192, 2, False, False), (128, 2, True, True), (128, 3, False, False)})

# (bn, stages, causal, defer_pv_wait, unit_heads) of the persistent warp-specialised d128
# configurations (TMA, ping-pong: the short causal one, PERSISTENT_MAX_SEQ) whose IR-built
# kernel (kernels.nvidia.wgmma_ws_ir_persist, IrWsPersistAttention, bitwise the template's
# output) measured at parity.  128 x 128 s3 causal, units of 4 heads, with its producer as the
# template's (printed last, its walk uniform, the block loop not unrolled): 0.993 / 1.001 at
# B16 H32 S512 causal, 0.991 / 1.008 at H32/8, 1.011 / 1.015 at B8 H16 S1024, 1.036 at B2 H16
# S4096 (H100 2026-11-25 03:20Z, benchmarks/nvidia_ws_ir_persist.py --rounds 9 / the diagnostic
# A/B of 11 rounds in the same call, docs/PERFORMANCE.md; before: 0.957-0.998).
IR_WS_PERSIST_AT_PARITY: FrozenSet[Tuple[int, int, bool, bool, int]] = frozenset(
    {(128, 3, True, False, 4)})


# (head_dim, bn, stages, causal, defer_pv_wait) of the warp-specialised cp.async
# configurations (ping-pong, one block per unit) whose IR-built kernel (kernels.nvidia
# .wgmma_ws_ir with the cp.async producer, IrWsCpAttention: whole blocks unpredicated, the
# sources chained 64-bit pointers, bitwise the template's output) measured at parity with the
# template: >= 0.98x its device time at every shape measured (H100 2026-11-25,
# benchmarks/nvidia_ws_ir_cp.py --dispatched, medians of rotated rounds, each IR / template /
# the template timed again; docs/PERFORMANCE.md).  The d256 tile (WS_PREFILL_TILES[256]), 15
# rounds (nvidia_ws_ir_cp_dispatched_h100_2026-11-25_r15.json): 1.015 / 1.004 at B2 H16 S4K,
# 0.994 / 0.999 causal, 0.988 / 1.000 at B4 H8/1 S513 causal, 1.010 / 1.011 at B2 H4 S77 (the
# two 7-round runs before: 1.008 / 1.017 / 1.089 / 1.025 and 0.996 / 1.001 / 1.032 / 0.948,
# that S77 in disturbed rounds).  Not the d128 fallback (WS_PREFILL_FALLBACK[128], B8 H32 S8K,
# K / V broadcast, 9 rounds): 0.968 / 0.967 causal at its template's 56 / 224 registers, 0.975
# / 0.956 at 40 / 232 (0.936 / 0.952 the run before).
IR_WS_CP_PREFILL_AT_PARITY: FrozenSet[Tuple[int, int, int, bool, bool]] = frozenset(
    {(256, 64, 2, False, True), (256, 64, 2, True, True)})


def ws_prefill_on_ir(cfg: Any) -> bool:
    """Does the warp-specialised configuration ``cfg`` run the IR-built kernel?  A ping-pong
    configuration without the warp vote or V behind K: a d128 TMA one, one block per unit
    (:class:`~.wgmma_ws_ir_launch.IrWsAttention`), whose (bn, stages, causal, defer_pv_wait)
    is in :data:`IR_WS_PREFILL_AT_PARITY`, or persistent
    (:class:`~.wgmma_ws_ir_persist_launch.IrWsPersistAttention`) with that and its
    ``unit_heads`` in :data:`IR_WS_PERSIST_AT_PARITY`; a ``cp.async`` one, one block per unit
    (:class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`), whose (head_dim, bn, stages, causal,
    defer_pv_wait) is in :data:`IR_WS_CP_PREFILL_AT_PARITY`; else the template."""
    if type(cfg) is not WsFlashConfig or not cfg.pingpong or cfg.rescale_vote or cfg.v_behind_k:
        return False
    key = (cfg.bn, cfg.stages, bool(cfg.causal), bool(cfg.defer_pv_wait))
    if cfg.loader == "cp.async":
        return not (cfg.persistent or cfg.unit_heads) and \
            (cfg.head_dim, *key) in IR_WS_CP_PREFILL_AT_PARITY
    if cfg.head_dim != 128 or cfg.loader != "tma":
        return False
    if cfg.persistent:
        return (*key, cfg.unit_heads) in IR_WS_PERSIST_AT_PARITY
    return key in IR_WS_PREFILL_AT_PARITY and not cfg.unit_heads


def prefill_on_ir(cfg: Any) -> bool:
    """Does ``cfg`` (mma.sync, wgmma or warp-specialised) run its IR-built kernel (the three
    rules above)?"""
    return mma_prefill_on_ir(cfg) or wgmma_prefill_on_ir(cfg) or ws_prefill_on_ir(cfg)


# (head_dim, causal) -> wgmma tile (warpgroups, bn) and the measured reason
WGMMA_PREFILL_TILES: Dict[Tuple[int, bool], Tuple[Dict[str, int], str]] = {
    (64, False): (dict(warpgroups=1, bn=128), "64 rows x 128 keys: three blocks per SM overlap"),
    (64, True): (dict(warpgroups=1, bn=128), "64 rows x 128 keys: three blocks per SM overlap"),
}


@dataclass(frozen=True)
class PrefillChoice:
    """The prefill kernel for a problem: ``atom`` ("wgmma" or "mma"), its ``config`` and why."""

    atom: str
    config: Any
    reason: str

    def __str__(self) -> str:
        return f"{self.atom} {self.config.name}: {self.reason}"


def choose_prefill(dtype: str, head_dim: int, causal: bool, atom: str,
                   tma_ok: bool = True, seq: int = 0, seq_kv: int = 0) -> PrefillChoice:
    """The configuration for ``head_dim`` / ``causal`` on an ``atom`` device ("wgmma": compute
    capability 9.0, else "mma"; :func:`kernels.nvidia.dispatch.pick_atom` decides);
    ``tma_ok``: TMA can address q, k and v (else the cp.async producer runs); ``seq``: the
    longer of the query and key lengths (0: unknown, treated as long); ``seq_kv``: the key
    length, the loop the key-block rule reads (0: unknown, ``seq`` stands in)."""
    if head_dim not in FLASH_DEFAULTS:
        raise LaunchError(f"head_dim {head_dim}: the prefill kernels support 64, 128 and 256")
    if atom == "wgmma" and head_dim in WS_PREFILL_TILES:
        kw = dict((WS_PREFILL_TILES if tma_ok else WS_PREFILL_FALLBACK)[head_dim])
        if kw.get("loader") == "tma" and causal and 0 < seq <= PERSISTENT_MAX_SEQ:
            kw.update(persistent=True, unit_heads=PERSISTENT_UNIT_HEADS)
        elif kw.get("loader") == "tma" and causal and head_dim == 128:
            kw.update(CAUSAL_LONG)
        keys = seq_kv or seq       # the key loop's length decides the key block
        if (kw.get("loader") == "tma" and head_dim == 128 and not causal
                and not 0 < keys <= WIDE_KEYS_MIN_SEQ):
            kw.update(WIDE_KEYS)
        cfg = WsFlashConfig(dtype=dtype, head_dim=head_dim, causal=causal, **kw)
        return PrefillChoice("wgmma", cfg,
                             f"sm_90a warp-specialised ({cfg.loader} producer + mbarrier ring "
                             f"of {cfg.stages}, 2 consumer warpgroups, ping-pong"
                             + (f", persistent, units in chunks of {cfg.unit_heads} heads"
                                if cfg.persistent else "")
                             + (", P V wait deferred" if cfg.defer_pv_wait else "")
                             + f"), {cfg.bm} rows "
                             f"x {cfg.bn} keys (H100 sweep), "
                             + (f"the verified IR kernel (kernels.nvidia.wgmma_ws_ir"
                                f"{'_persist' if cfg.persistent else ''}, at parity with the "
                                "template, H100)" if ws_prefill_on_ir(cfg) else
                                "the template (kernels.nvidia.wgmma_attention_ws"
                                + ("; no persistent IR form measured at parity for this "
                                   "configuration" if cfg.persistent else
                                   "; its IR form measured below parity, H100"
                                   if cfg.loader == "cp.async" else "") + ")")
                             + ("" if tma_ok else
                                                               "; TMA cannot address these "
                                                               "tensors"))
    if atom == "wgmma":
        kw, why = WGMMA_PREFILL_TILES[(head_dim, bool(causal))]
        wcfg = WgmmaFlashConfig(dtype=dtype, head_dim=head_dim, causal=causal, **kw)
        kernel = ("the verified IR kernel (kernels.nvidia.wgmma_flash_ir, at parity with the "
                  "template, H100)" if wgmma_prefill_on_ir(wcfg) else
                  "the template (kernels.nvidia.wgmma_attention)")
        return PrefillChoice("wgmma", wcfg, f"sm_90a wgmma, {why} (H100 sweep), {kernel}")
    if atom != "mma":
        raise LaunchError(f"atom must be 'wgmma' or 'mma' here, got {atom!r}")
    cfg = FlashConfig(dtype=dtype, head_dim=head_dim, causal=causal, **FLASH_DEFAULTS[head_dim])
    kernel = ("the verified IR kernel (kernels.nvidia.flash_ir, at parity with the template, "
              "H100)" if mma_prefill_on_ir(cfg) else "the template (kernels.nvidia.attention)")
    return PrefillChoice("mma", cfg, f"mma.sync (no wgmma on this device, or asked for), "
                                     f"{kernel}")
