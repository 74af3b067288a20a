"""Which prefill (flash-attention forward) configuration runs a problem on an NVIDIA GPU, and
why (issue 20 item 2): :func:`choose_prefill`.

The rules are H100 measurements (``benchmarks/gpu_attn_sweep.py``, every candidate tile on the
suite shapes, 2026-11-24; docs/PERFORMANCE.md), not a model:

* head_dim 256: the warp-specialised kernel, 128 rows x 64-key blocks, 2 stages, ping-pong
  (consumers at 240 registers: ``WsFlashConfig.regs``; its 128-thread producer copies
  256-wide rows with two per-thread shared bases): 0.86x cuDNN at B2 H16 S4K (0.72x for the
  2-warpgroup wgmma tile it replaces), 0.91x at B4 H8/1 S513 causal (0.83x; the one-warpgroup
  64 x 64 tile measured 0.92x, within noise: one rule kept). cuDNN was SDPA's fastest backend
  at both shapes.
* head_dim 64: one warpgroup (64 query rows), 128-key blocks: 72 KiB of shared memory lets
  three blocks share an SM, whose warpgroups then overlap each other's softmax and MMAs
  (0.98x cuDNN at Sq 1000 / Skv 4097 against 0.73x for 128 rows; 0.93x against 0.64x at
  B4 H16 S2K; the warp-specialised kernel: 1.06x and 0.84x, a split decision kept simple).
* head_dim 128: the warp-specialised FA3-style kernel (:mod:`.wgmma_attention_ws`: producer
  warpgroup + mbarrier ring, two consumer warpgroups with ping-pong), 2 stages: 0.94x cuDNN at
  B8 H32 S8K (610 TFLOP/s, against 0.77x for the non-specialised kernel), 0.97x causal,
  0.96x at B2 H32/8 S4K causal; 0.67x at B16 H32/8 S512 causal, where the one-warpgroup
  64 x 64 tile measured 0.69x (within run-to-run noise; one rule kept).

Off Hopper (or ``atom="mma"``) the mma.sync kernel's defaults run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

from ..errors import LaunchError
from .attention import FLASH_DEFAULTS, FlashConfig
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig

__all__ = ["PrefillChoice", "choose_prefill", "WGMMA_PREFILL_TILES", "WS_PREFILL_TILES"]

# head_dim -> warp-specialised kernel settings (every mask)
WS_PREFILL_TILES: Dict[int, Dict[str, Any]] = {128: dict(stages=2, pingpong=True),
                                                256: dict(bn=64, stages=2, pingpong=True)}

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


def choose_prefill(dtype: str, head_dim: int, causal: bool, atom: str) -> PrefillChoice:
    """The configuration for ``head_dim`` / ``causal`` on an ``atom`` device ("wgmma": compute
    capability 9.0, else "mma"; :func:`kernels.nvidia.dispatch.pick_atom` decides)."""
    if head_dim not in FLASH_DEFAULTS:
        raise LaunchError(f"head_dim {head_dim}: the prefill kernels support 64, 128 and 256")
    if atom == "wgmma" and head_dim in WS_PREFILL_TILES:
        cfg = WsFlashConfig(dtype=dtype, head_dim=head_dim, causal=causal,
                            **WS_PREFILL_TILES[head_dim])
        return PrefillChoice("wgmma", cfg,
                             "sm_90a warp-specialised (producer + mbarrier ring, 2 consumer "
                             f"warpgroups, ping-pong), {cfg.bm} rows x {cfg.bn} keys (H100 sweep)")
    if atom == "wgmma":
        kw, why = WGMMA_PREFILL_TILES[(head_dim, bool(causal))]
        return PrefillChoice("wgmma", WgmmaFlashConfig(dtype=dtype, head_dim=head_dim,
                                                       causal=causal, **kw),
                             f"sm_90a wgmma, {why} (H100 sweep)")
    if atom != "mma":
        raise LaunchError(f"atom must be 'wgmma' or 'mma' here, got {atom!r}")
    return PrefillChoice("mma", FlashConfig(dtype=dtype, head_dim=head_dim, causal=causal,
                                            **FLASH_DEFAULTS[head_dim]),
                         "mma.sync (no wgmma on this device, or asked for)")
