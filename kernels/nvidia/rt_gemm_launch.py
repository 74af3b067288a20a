"""What the runtime-size IR GEMMs do alike at launch: the mma.sync
:class:`~.gemm_rt_ir.IrMmaRtGemm` and the cp.async wgmma :class:`~.wgmma_rt_ir.IrWgmmaRtGemm`
(and its split-K form) are built, verified and bound the same way; only the IR and the string
template they fall back on differ.

* Built: the IR and its printed source, verified (IR and text, at the kernel's own launch
  instances) before anything compiles; a passing verdict is remembered on disk by content
  (:func:`kernels.verify.report_cache.verified`).
* Bound: the template's argument checks, then one launch of ``cdiv(M, bm) * cdiv(N, bn)``
  blocks with the runtime arguments :data:`~.rt_gemm_parts.RT_SCALARS`.  Matrices whose 32-bit
  offsets could reach :data:`INT_OFFSETS` run the template, whose pointers step in
  ``size_t`` (the verifier proves the IR's offsets at its launches, not past them), or with
  :data:`~.gemm_wide.WIDE_GEMM_ON_IR` the wide IR form (``long long`` leading dimensions,
  :mod:`.gemm_wide`) where its printed arithmetic is proved at the launch's values.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from .builder import CompiledKernel

__all__ = ["INT_OFFSETS", "RtGemmKernel"]

#: matrices of this many elements (rows x leading dimension) or more run on the template: the
#: IR's offsets are 32-bit ints
INT_OFFSETS = 2 ** 31


class RtGemmKernel(CompiledKernel):
    """A verified runtime-size IR GEMM: ``g(a, b, out=None) -> c`` with its template's
    arguments and checks.  Subclasses give :meth:`make_template` (the string-template kernel
    of the same configuration)."""

    def __init__(self, cfg: Any, ir: Any, source: str, plan: Any, backend: str) -> None:
        from ..verify.report_cache import verified
        self.ir = ir
        # verified here, or an identical passing verification remembered on disk
        self.report = verified(ir, source, cfg.arch)
        self.plan = plan
        self.gemm_cfg = cfg
        CompiledKernel.__init__(self, cfg, source, backend)
        self.kernel_name = ir.name
        self._template: Any = None
        self._wide: Any = None

    def build(self, cfg: Any, wide: bool = False) -> Any:
        """``(kernel IR, printed source)`` of ``cfg``; subclasses give it."""
        raise NotImplementedError

    def wide_kernel(self) -> Any:
        """``(IR, printed source, compiled kernel)`` of the wide form (:mod:`.gemm_wide`),
        verified as this kernel is and its text at launches past 2^31, built on first use."""
        if self._wide is None:
            from ..verify.report_cache import verified
            from .builder import ir_compiled_kernel
            from .gemm_wide import check_wide_text
            ir, source = self.build(self.gemm_cfg, wide=True)
            verified(ir, source, self.cfg.arch)
            check_wide_text(ir, source)
            self._wide = (ir, source, ir_compiled_kernel(ir, self.cfg.arch, source,
                                                         self.backend))
        return self._wide

    def make_template(self) -> Any:
        raise NotImplementedError

    def template(self) -> Any:
        """The string-template kernel of the same configuration (matrices of 2^31 elements
        or more), built on first use."""
        if self._template is None:
            self._template = self.make_template()
        return self._template

    def check_args(self, a, b, out=None):
        from .gemm import CudaGemm
        return CudaGemm.check_args(self, a, b, out)

    def bind_one_launch(self, a, b, out=None) -> Callable[..., Any]:
        """Check the arguments (the template's checks) and return ``run(a, b, out) -> c``:
        one launch over the output tiles, or the template's where the offsets leave int."""
        import torch
        from ..printer.cuda import smem_bytes
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec as Spec
        M, N, K = self.check_args(a, b, out)
        cfg = self.cfg
        lda, ldb, ldc = a.stride(0), b.stride(0), N if out is None else out.stride(0)
        pad = max(cfg.bm, cfg.bn, cfg.bk)     # rows past the edge a predicated-off copy names
        a_vec = int(lda % 8 == 0 and a.data_ptr() % 16 == 0)
        b_vec = int(ldb % 8 == 0 and b.data_ptr() % 16 == 0)
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        ir, module, name = self.ir, self.module, self.kernel_name
        if max((M + pad) * lda, (b.shape[0] + pad) * ldb, (M + pad) * ldc) >= INT_OFFSETS:
            wide = self.wide_launch(dict(M=M, N=N, K=K, lda=lda, ldb=ldb, ldc=ldc,
                                         a_vec=a_vec, b_vec=b_vec), tiles)
            if wide is None:
                return self.template().bind(a, b, out)
            ir, module, name = wide
        from .prefill_wide import scalar_signature
        site = LaunchSite(module, name, tiles,
                          cfg.threads, signature=("ptr", "ptr", "ptr") + scalar_signature(ir),
                          specs=[Spec(strides=(), align=2), Spec(strides=(), align=2),
                                 Spec(strides=(), align=4)] + [None] * 8,
                          smem_bytes=smem_bytes(ir))

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            site([a, b, out, M, N, K, lda, ldb, ldc, a_vec, b_vec])
            return out
        return run

    def wide_launch(self, values: Dict[str, int], tiles: int) -> Optional[Tuple[Any, Any, str]]:
        """``(IR, module, kernel name)`` of the wide form for a launch the 32-bit form cannot
        take, where :data:`~.gemm_wide.WIDE_GEMM_ON_IR` holds and the wide kernel's printed
        arithmetic is proved at these runtime values and grid
        (:func:`~.prefill_wide.launch_index_ranges`); else None (the template runs it)."""
        from . import gemm_wide
        if not gemm_wide.WIDE_GEMM_ON_IR or min(values.values()) < 0:
            return None
        from .prefill_wide import launch_index_ranges
        ir, source, kern = self.wide_kernel()
        if not launch_index_ranges(ir, source, values, (tiles, 1, 1)).holds:
            return None
        return ir, kern.module, ir.name
