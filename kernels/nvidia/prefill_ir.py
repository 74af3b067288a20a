"""The IR-built prefill kernels the dispatch runs (issue 20): which class builds a
configuration's verified IR kernel, and whether that kernel can launch given tensors (else the
dispatch runs the configuration's template).

:func:`.prefill_select.prefill_on_ir` says which configurations run on IR; this module keeps
the per-family knowledge out of :mod:`.dispatch`: the mma.sync prefill
(:class:`~.flash_ir.IrFlashAttention`), the wgmma one (:class:`~.wgmma_flash_ir
.IrWgmmaFlashAttention`) and the warp-specialised one (:class:`~.wgmma_ws_ir_launch
.IrWsAttention`; with the ``cp.async`` producer :class:`~.wgmma_ws_ir_cp_launch
.IrWsCpAttention`, which copies through pointers and strides: any tensors the template
takes), and their launch limits: 32-bit offsets and the (query block, batch x heads)
grid (:func:`~.flash_ir.ir_launch_fits`), and for the warp-specialised kernel tensors its TMA
maps can address (:func:`~.ws_tma_loads.tma_attention_ready`; the template of a TMA
configuration refuses the others too, the dispatch gives them the cp.async producer).
"""

from __future__ import annotations

from typing import Any

from .flash_ir import IrFlashAttention, ir_launch_fits
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig
from .wgmma_flash_ir import IrWgmmaFlashAttention
from .wgmma_ws_ir_cp_launch import IrWsCpAttention
from .wgmma_ws_ir_launch import IrWsAttention
from .ws_tma_loads import tma_attention_ready

__all__ = ["ir_prefill", "is_ir_prefill", "ir_prefill_launches", "prefill_config"]


def ir_prefill(cfg: Any) -> Any:
    """The verified IR-built kernel of ``cfg`` (a ``FlashConfig``, ``WgmmaFlashConfig`` or
    ``WsFlashConfig``), built and verified now, compiled on first launch."""
    if type(cfg) is WsFlashConfig:
        return IrWsCpAttention(cfg=cfg) if cfg.loader == "cp.async" else IrWsAttention(cfg)
    if type(cfg) is WgmmaFlashConfig:
        return IrWgmmaFlashAttention(cfg)
    return IrFlashAttention(cfg)


def is_ir_prefill(fa: Any) -> bool:
    """Is ``fa`` one of the IR-built prefill kernels :func:`ir_prefill` returns?"""
    return isinstance(fa, (IrFlashAttention, IrWsAttention))


def ir_prefill_launches(fa: Any, q: Any, k: Any, v: Any, out: Any) -> bool:
    """Can the IR-built prefill ``fa`` launch on these tensors?  Offsets below 2^31 and
    batch x heads inside grid y (:func:`~.flash_ir.ir_launch_fits`); the warp-specialised
    kernel also needs q, k and v addressable by its TMA maps."""
    if not ir_launch_fits(q, k, v, out):
        return False
    return not isinstance(fa, IrWsAttention) or all(tma_attention_ready(t) for t in (q, k, v))


def prefill_config(fa: Any) -> Any:
    """The dispatch's configuration of a prefill kernel ``fa``, the key its template is built
    from: the warp-specialised IR kernel's ``ws_cfg`` (its ``cfg`` is the consumers' wgmma
    tile), else ``fa.cfg``."""
    return fa.ws_cfg if isinstance(fa, (IrWsAttention, IrWsCpAttention)) else fa.cfg
