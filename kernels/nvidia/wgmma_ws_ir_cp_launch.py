"""The host side of the warp-specialised ``cp.async`` IR prefill (:mod:`.wgmma_ws_ir_cp`): its
producer copies through plain pointers and strides, so the launch is the IR prefills' own
(:class:`~.flash_ir.IrFlashAttention`: Q, K, V, O, the sizes and strides as 32-bit ints, the
scale; grid (query blocks, batch x heads); refused with :class:`~kernels.errors.LaunchError`
where an offset reaches 2^31 or batch x heads is past 65535), with the IR's 384 threads and
its shared memory.  No tensor maps (the TMA producer's launcher is
:mod:`.wgmma_ws_ir_launch`).  Not dispatched.
"""

from __future__ import annotations

from .builder import CompiledKernel
from .flash_ir import IrFlashAttention
from .wgmma_ws_ir_cp import build_ws_cp_ir

__all__ = ["IrWsCpAttention"]


class IrWsCpAttention(IrFlashAttention):
    """The serial warp-specialised d256 prefill with the ``cp.async`` producer built as IR,
    verified (the IR and its printed CUDA; a passing verdict remembered on disk by content)
    before anything is compiled: ``fa(q, k, v, out=None, scale=None) -> out`` with the
    template's arguments and checks.  ``pingpong``: the consumers take turns to issue their
    GEMMs.  ``report`` is the verifier's; ``ws_cfg`` the template configuration of the same
    tile, stages and loader (:class:`~.wgmma_attention_ws.WsFlashConfig`)."""

    def __init__(self, causal: bool = False, dtype: str = "bf16", *, pingpong: bool = False,
                 backend: str = "auto") -> None:
        from ..printer.cuda_attention import emit_cuda_attention
        from ..verify.report_cache import verified
        self.ir = build_ws_cp_ir(causal, dtype, pingpong=pingpong)
        source = emit_cuda_attention(self.ir)
        cfg = self.ir.meta["cfg"]
        self.report = verified(self.ir, source, cfg.arch)
        self.plan = self.ir.meta["plan"]
        self.ws_cfg = self.ir.meta["ws_cfg"]
        CompiledKernel.__init__(self, cfg, source, backend)
        self.kernel_name = self.ir.name
