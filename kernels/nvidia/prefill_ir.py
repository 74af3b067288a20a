"""The IR-built prefill kernels the dispatch runs (issue 20): which class builds a
configuration's verified IR kernel, and whether that kernel can launch given tensors (else the
dispatch runs the configuration's template).

:func:`.prefill_select.prefill_on_ir` says which configurations run on IR; this module keeps
the per-family knowledge out of :mod:`.dispatch`: the mma.sync prefill
(:class:`~.flash_ir.IrFlashAttention`), the wgmma one (:class:`~.wgmma_flash_ir
.IrWgmmaFlashAttention`) and the warp-specialised one (:class:`~.wgmma_ws_ir_launch
.IrWsAttention`; persistent: :class:`~.wgmma_ws_ir_persist_launch.IrWsPersistAttention`;
with the ``cp.async`` producer :class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`, which copies
through pointers and strides: any tensors the template takes), and their launch limits:
32-bit offsets and the (query block, batch x heads)
grid (:func:`~.flash_ir.ir_launch_fits`), and for the warp-specialised kernel tensors its TMA
maps can address (:func:`~.ws_tma_loads.tma_attention_ready`; the template of a TMA
configuration refuses the others too, the dispatch gives them the cp.async producer).

Where the 32-bit form cannot launch (offsets or strides from 2^31, batch x heads past grid y)
the dispatch runs the same configuration's ``wide`` IR form (:mod:`.prefill_wide`: ``long
long`` strides, grid (query blocks, heads, batch), each launch's index arithmetic proved at its
own values) with :data:`WIDE_PREFILL_ON_IR`; the template only where the wide form cannot
launch either (:func:`wide_prefill_launches`: heads or batch past 65535, the template's grid
limits too; the warp-specialised kernel's TMA maps unable to address the tensors).
"""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError
from .flash_ir import IrFlashAttention, ir_launch_fits
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig
from .wgmma_flash_ir import IrWgmmaFlashAttention
from .wgmma_ws_ir_cp_launch import IrWsCpAttention
from .wgmma_ws_ir_launch import IrWsAttention
from .wgmma_ws_ir_persist_launch import IrWsPersistAttention
from .ws_tma_loads import tma_attention_ready

__all__ = ["ir_prefill", "is_ir_prefill", "ir_prefill_launches", "prefill_config",
           "WIDE_PREFILL_ON_IR", "wide_prefill_launches"]

#: a call the 32-bit IR prefill cannot launch runs the configuration's wide IR form
#: (:mod:`.prefill_wide`) instead of its template.  H100, 2026-11-25 (benchmarks/
#: gpu_prefill_wide.py, medians of 7 rotated rounds; docs/PERFORMANCE.md): bitwise the
#: template at every dispatched configuration, at B2 H16 S4K with batches 2^31 + 8192 elements
#: apart and at B2048 H40 S64; the d64 wgmma kernel (what flash_attention() runs at d64)
#: 0.986-1.019x the template's time, the warp-specialised d128 ones 0.954-1.007x past 2^31
#: and 0.869-0.911x at B2048 H40 S64, the mma.sync ones 0.982-1.033x / 0.913-0.950x.  On: the
#: verified kernel everywhere it launches (issue 20 item 1), at those costs
WIDE_PREFILL_ON_IR = True


def ir_prefill(cfg: Any, wide: bool = False) -> Any:
    """The verified IR-built kernel of ``cfg`` (a ``FlashConfig``, ``WgmmaFlashConfig`` or
    ``WsFlashConfig``; a persistent one: :class:`~.wgmma_ws_ir_persist_launch
    .IrWsPersistAttention`), built and verified now, compiled on first launch; ``wide``: its
    64-bit form (:mod:`.prefill_wide`; the persistent and the cp.async kernels have none:
    :class:`~kernels.errors.LaunchError`)."""
    if type(cfg) is WsFlashConfig and wide and (cfg.persistent or cfg.loader == "cp.async"):
        raise LaunchError(f"{cfg.name}: the persistent and cp.async IR prefills have no wide "
                          "(64-bit) form")
    if type(cfg) is WsFlashConfig and cfg.persistent:
        return IrWsPersistAttention(cfg)
    if type(cfg) is WsFlashConfig:
        return IrWsCpAttention(cfg=cfg) if cfg.loader == "cp.async" else \
            IrWsAttention(cfg, wide=wide)
    if type(cfg) is WgmmaFlashConfig:
        return IrWgmmaFlashAttention(cfg, wide=wide)
    return IrFlashAttention(cfg, wide=wide)


def is_ir_prefill(fa: Any) -> bool:
    """Is ``fa`` one of the IR-built prefill kernels :func:`ir_prefill` returns?"""
    return isinstance(fa, (IrFlashAttention, IrWsAttention))


def ir_prefill_launches(fa: Any, q: Any, k: Any, v: Any, out: Any) -> bool:
    """Can the IR-built prefill ``fa`` launch on these tensors?  Offsets below 2^31 and
    batch x heads inside grid y (:func:`~.flash_ir.ir_launch_fits`); the warp-specialised
    kernel also needs q, k and v addressable by its TMA maps.  The wide form
    (``fa.wide``): :func:`wide_prefill_launches`."""
    if getattr(fa, "wide", False):
        from .prefill_wide import launch_proved
        return wide_prefill_launches(fa, q, k, v, out,
                                     lambda *a: launch_proved(fa, *a))
    if not ir_launch_fits(q, k, v, out):
        return False
    return not isinstance(fa, IrWsAttention) or all(tma_attention_ready(t) for t in (q, k, v))


def wide_prefill_launches(fa: Any, q: Any, k: Any, v: Any, out: Any = None,
                          proved: Any = None) -> bool:
    """Can the wide form of the IR prefill ``fa``'s configuration launch on these tensors?
    Heads and batch inside grid y and z (65535 each, as the template's grid) and query
    blocks inside grid x; the warp-specialised kernel's TMA maps able to address q, k, v;
    and, given ``proved`` (the wide kernel's :func:`~.prefill_wide.launch_proved`, or a
    callable ``proved(q, k, v, out)``), its index arithmetic proved at this launch (a row
    times its ``int`` row stride past 2^31 is not: one batch of more than 2^31 elements).
    Never for the persistent and the cp.async kernels, which have no wide form."""
    from .prefill_wide import MAX_GRID_X, MAX_GRID_YZ
    if isinstance(fa, (IrWsPersistAttention, IrWsCpAttention)):   # no wide form: template
        return False
    B, H, S = (int(x) for x in q.shape[:3])
    if B > MAX_GRID_YZ or H > MAX_GRID_YZ or -(-S // fa.cfg.bm) > MAX_GRID_X:
        return False
    if isinstance(fa, IrWsAttention) and not all(tma_attention_ready(t) for t in (q, k, v)):
        return False
    return proved is None or bool(proved(q, k, v, out))


def prefill_config(fa: Any) -> Any:
    """The dispatch's configuration of a prefill kernel ``fa``, the key its template is built
    from: the warp-specialised IR kernel's ``ws_cfg`` (its ``cfg`` is the consumers' wgmma
    tile), else ``fa.cfg``."""
    return fa.ws_cfg if isinstance(fa, (IrWsAttention, IrWsCpAttention)) else fa.cfg
