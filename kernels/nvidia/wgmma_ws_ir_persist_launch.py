"""The host side of the persistent warp-specialised IR prefill
(:func:`~.wgmma_ws_ir_persist.build_ws_persist_ir`): :class:`IrWsPersistAttention`, the
launcher of :class:`~.wgmma_ws_ir_launch.IrWsAttention` (the IR and its printed text verified
first; the 4-D maps read against the tensors) with the template's persistent grid: one CTA per
SM, fewer when there are fewer work units (:meth:`~.wgmma_attention_ws.WsFlashAttention
.launch_grid`), the count passed to the kernel as ``ctas`` (its walk's step).  Dispatched
where :data:`~.prefill_select.IR_WS_PERSIST_AT_PARITY` holds the configuration
(:mod:`.prefill_ir`)."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from .wgmma_ws_ir_launch import IrWsAttention

__all__ = ["IrWsPersistAttention"]


class IrWsPersistAttention(IrWsAttention):
    """A persistent configuration (``persistent=True``, e.g. the dispatched
    ``lg_wsflash_*_d128_128x128_s3_pp_causal_tma_pt_uh4``) built as IR and launched on
    ``min(units, SMs)`` CTAs."""

    def __init__(self, cfg: Any, *, backend: str = "auto", one_loop: bool = False) -> None:
        """``one_loop``: :func:`~.wgmma_ws_ir_persist.build_ws_persist_ir`'s (blocks 1.. as one
        loop, the mask guarded at run time)."""
        from .wgmma_ws_ir_persist import build_ws_persist_ir
        self._init_ir(build_ws_persist_ir(cfg, one_loop=one_loop), backend)

    def ir_grid(self, q: Any) -> Tuple[Tuple[int, int, int], Dict[str, int]]:
        """``(min(units, SMs), 1, 1)`` and ``ctas``, that count (the template's grid)."""
        import torch
        from ..runtime.cuda import device_info
        B, Hq, Sq = (int(x) for x in q.shape[:3])
        dev = q.device
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        ctas = min(-(-Sq // self.cfg.bm) * Hq * B, device_info(index)["sms"])
        return (ctas, 1, 1), {"ctas": ctas}
