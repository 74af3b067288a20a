"""The host side of the warp-specialised ``cp.async`` IR prefills (the serial kernel of
:mod:`.wgmma_ws_ir_cp`, and the overlap builder's, :mod:`.wgmma_ws_ir`, on a ``cp.async``
configuration such as the dispatched d256 one): their
producer copies through plain pointers and strides, so the launch is the IR prefills' own
(:class:`~.flash_ir.IrFlashAttention`: Q, K, V, O, the sizes and strides as 32-bit ints, the
scale; grid (query blocks, batch x heads); refused with :class:`~kernels.errors.LaunchError`
where an offset reaches 2^31 or batch x heads is past 65535), with the IR's 384 threads and
its shared memory.  No tensor maps (the TMA producer's launcher is
:mod:`.wgmma_ws_ir_launch`).  Not dispatched.
"""

from __future__ import annotations

from typing import Any, Optional

from .flash_ir import IrFlashAttention
from .wgmma_ws_ir import build_ws_ir
from .wgmma_ws_ir_cp import build_ws_cp_ir
from .wgmma_ws_ir_launch import load_verified_ws

__all__ = ["IrWsCpAttention"]


class IrWsCpAttention(IrFlashAttention):
    """A warp-specialised d256 prefill with the ``cp.async`` producer built as IR, verified
    (the IR and its printed CUDA; a passing verdict remembered on disk by content) before
    anything is compiled: ``fa(q, k, v, out=None, scale=None) -> out`` with the template's
    arguments and checks.  Without ``cfg``: the serial kernel (``pingpong``: the consumers
    take turns to issue their GEMMs); with ``cfg`` (a ``cp.async``
    :class:`~.wgmma_attention_ws.WsFlashConfig`, e.g. the dispatched d256 one): the overlap
    builder's kernel of that configuration (``causal``, ``dtype`` and ``pingpong`` are
    then ``cfg``'s; :class:`~.attention.AttentionConfigError` where it does not build).
    ``report`` is the verifier's; ``ws_cfg`` the template configuration of the same tile,
    stages and loader."""

    def __init__(self, causal: bool = False, dtype: str = "bf16", *, pingpong: bool = False,
                 cfg: Optional[Any] = None, backend: str = "auto") -> None:
        load_verified_ws(self, build_ws_cp_ir(causal, dtype, pingpong=pingpong)
                         if cfg is None else build_ws_ir(cfg), backend)
