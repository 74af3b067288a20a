"""The warp-specialised head_dim 256 prefill as kernel IR with the ``cp.async`` producer, serial
schedule: the first d256 piece of :mod:`.wgmma_ws_ir_plan` (the template the H100 runs at d256
is :mod:`.wgmma_attention_ws` with ``loader="cp.async"``, bn 64, two stages, ping-pong and the
deferred P V wait: ``prefill_select.WS_PREFILL_TILES[256]``; that dispatched configuration's IR
is the overlap builder's, :func:`~.wgmma_ws_ir.build_ws_ir`).  Not dispatched.

The kernel is :class:`~.wgmma_ws_ir_serial.WsSerialBuilder` on a ``cp.async`` configuration:
the ring builder's parts with the copying producer (:class:`~.ws_cp_producer.CpProducer`:
``setmaxnreg.dec`` 24, 128 threads copying Q, then K and V of block ``j`` into stage ``j % 2``,
each thread arriving on ``full`` with ``cp.async.mbarrier.arrive.noinc``: ``bQ`` / ``fullK`` /
``fullV`` count 128) and the consumers' ``fence.proxy.async`` after each ring wait
(:meth:`~.wgmma_ws_ir_serial.WsRingBuilder.acquired`); warpgroups 1 and 2 the consumers
(``setmaxnreg.inc`` 240; O's 128 f32 registers a thread at head_dim 256); ``pingpong``: the
consumers take turns to issue their GEMMs (:mod:`.ws_pingpong`).

:func:`build_ws_cp_ir` returns the kernel with its spec (``warpgroup_roles`` producer /
consumer), which :func:`kernels.verify.verifier.verify` runs on the warp-specialised attention
engine (:mod:`kernels.verify.attention_ring`, the producer's copies on the per-role model's
``cp.async`` rules, :mod:`kernels.verify.gate_cp_ring`) and, with its printed text, on
:mod:`kernels.verify.printed_ws`.  The launcher is
:class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`.
"""

from __future__ import annotations

from typing import Any

from .attention import AttentionConfigError
from .wgmma_attention_ws import WsFlashConfig
from .wgmma_ws_ir_serial import WsSerialBuilder

__all__ = ["build_ws_cp_ir", "WS_CP_STAGES", "WS_CP_BN"]

WS_CP_STAGES = 2
WS_CP_BN = 64


def build_ws_cp_ir(causal: bool = False, dtype: str = "bf16", pingpong: bool = False,
                   head_dim: int = 256) -> Any:
    """The two-consumer, two-stage (bn 64), serial-schedule warp-specialised prefill with the
    ``cp.async`` producer as IR (the module docstring), with its spec; ``pingpong``: the
    consumers take turns to issue their GEMMs (name ends in ``_pp``).
    :class:`~.attention.AttentionConfigError` where the tile does not build or prove out."""
    if head_dim != 256:
        raise AttentionConfigError(f"head_dim {head_dim}: the cp.async warp-specialised IR is "
                                   "built at 256 (the configuration the H100 runs with the "
                                   "cp.async producer)")
    ws = WsFlashConfig(dtype=dtype, head_dim=head_dim, bn=WS_CP_BN, stages=WS_CP_STAGES,
                       causal=causal, pingpong=pingpong, loader="cp.async")
    try:
        return WsSerialBuilder(ws).build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised cp.async IR: {e}") from None
