"""The TMA GEMM of :mod:`kernels.nvidia.wgmma_tma` built as kernel IR and proved by the one
verifier (issue 20 item 1).

Same plan as the string template (:func:`~kernels.nvidia.wgmma_tma.plan_tma_gemm`: the TMA
boxes, the wgmma descriptors' constant fields and k-step starts, the swizzled C buffer), same
program: one producer warpgroup (``setmaxnreg.dec`` 40; its first thread issues, per k tile,
``arrive.expect_tx`` and the A / B boxes into a ring of ``stages`` full/empty-mbarrier stages),
``bm / 64`` consumer warpgroups (``setmaxnreg.inc`` 232; wait ``full``, 4 wgmma k steps, one
group in flight, release the previous stage on ``empty`` with one arrive per warp), persistent
CTAs over the template's grouped raster, epilogue registers -> swizzled shared C -> TMA store.
**Runtime M, N, K** (kernel arguments; TMA's zero fill makes edge tiles need no code) and the
CTA count ``ctas`` (the host launches ``min(tiles, SMs)``).

Every statement is IR (:mod:`kernels.ir.core`, :mod:`kernels.ir.nvidia_wgmma`,
:mod:`kernels.ir.nvidia_tma`), printed by :mod:`kernels.printer.cuda` and verified by
:func:`kernels.verify.verify` on its per-role phase model (:mod:`kernels.verify.gate_tma`) at
the spec's instances (runtime sizes incl. edge tiles, several CTAs, units per CTA > 1).

Both epilogues of the template: the TMA store (``store="tma"``) and the direct store
(``store="direct"``, used when C's rows are not 16-byte aligned: every accumulator pair goes
from registers to global memory as one 4-byte store where the row stride ``ldc`` is even,
else as two 2-byte stores, rows past M and columns past N skipped; the per-role model reads the
C element of every stored address back through ``ldc`` and checks it is the accumulator's own,
inside M x N, stored once).  The one-launch split-K (``split_k=True, reduce="inline"``) is
:mod:`kernels.nvidia.wgmma_tma_ir_split` (work units, fp32 partials, a per-warpgroup ticket, the
last arrival's ordered sum); the split-K with a second reduce launch (``reduce="kernel"``) is
:mod:`kernels.nvidia.wgmma_tma_ir_reduce` (the split kernel's partial stores, then the reduce
kernel as IR, proved together); two CTAs per SM (``ctas_per_sm=2``) is a builder option
(launch bounds, the consumers' ``setmaxnreg`` share); the base builder is
:mod:`kernels.nvidia.wgmma_tma_ir_builder`.  Every form of the template is IR.  Short A boxes (``a_rows``) are
IR: the A map's box and ``expect_tx`` carry ``a_rows`` rows, and the per-role model checks
that the shared rows no box wrote feed only C rows past M (verified at M <= a_rows).  The ring position (stage, phase parity, previous
stage) is carried through each role's loops as the template's counters are
(:class:`~kernels.ir.nvidia_tma.VarInit` / :class:`~kernels.ir.nvidia_tma.VarSet`; the per-role
model runs the updates, so the parity rules check the values they produce): computed as
``g % stages`` of ``g = i * KT + kk`` it ran 0.84-0.92x the template on the H100, with the
counters and 32-bit shared bases 0.99-1.01x (``benchmarks/results/
nvidia_tma_ir_variants_h100_2026-11-24.json``).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..ir.core import Kernel
from ..printer.cuda import emit_cuda
from ..verify.gate_split_reduce import reduce_text
from .builder import CompiledKernel
from .wgmma_tma import TmaGemm, TmaGemmConfig, plan_tma_gemm
from .wgmma_tma_ir_builder import (DEFAULT_INSTANCES, DIRECT_INSTANCES, TmaIrBuilder,
                                   instance_symbols, ir_form_refusal, ir_kernel_name,
                                   plain_instances, tma_gemm_spec)
from .wgmma_tma_ir_reduce import ReduceSplitTmaIrBuilder, reduce_run
from .wgmma_tma_ir_split import SplitTmaIrBuilder, operand_maps, split_instances, split_run

__all__ = ["build_tma_gemm_ir", "tma_gemm_spec", "IrTmaGemm", "tma_ir_source", "DEFAULT_INSTANCES",
           "DIRECT_INSTANCES", "default_instances", "instance_symbols", "ir_form_refusal",
           "ir_kernel_name"]

def default_instances(cfg: TmaGemmConfig) -> Tuple[Tuple[int, ...], ...]:
    """The launches ``cfg`` is verified at: the split-K form's
    (:func:`~kernels.nvidia.wgmma_tma_ir_split.split_instances`: (M, N, K, ctas, ldc, splits))
    or :func:`~kernels.nvidia.wgmma_tma_ir_builder.plain_instances`."""
    return split_instances(cfg) if cfg.split_k else plain_instances(cfg)


def builder_for(cfg: TmaGemmConfig) -> TmaIrBuilder:
    """The builder of ``cfg``'s form (the split-K ones live in their own modules)."""
    if cfg.split_k and cfg.reduce == "kernel":
        return ReduceSplitTmaIrBuilder(cfg)
    if cfg.split_k:
        return SplitTmaIrBuilder(cfg)
    return TmaIrBuilder(cfg)


def build_tma_gemm_ir(cfg: TmaGemmConfig = TmaGemmConfig(),
                      instances: Optional[Sequence[Tuple[int, int, int, int]]] = None
                      ) -> Kernel:
    """The IR of ``cfg`` (any M, N, K at run time; M <= ``a_rows`` with a short A box); its
    spec verifies it at ``instances`` ((M, N, K, ctas) launches; default
    :func:`default_instances`).  Raises :class:`~kernels.nvidia.gemm.GemmConfigError` for a
    configuration the IR form does not have or whose plan fails its proofs."""
    return builder_for(cfg).build(default_instances(cfg) if instances is None else instances)


def tma_ir_source(ir: Kernel) -> str:
    """The CUDA text of a built TMA GEMM IR: the kernel, and for the two-launch split-K its
    reduce kernel after it (one module; the verifier checks the reduce part is exactly the
    verified reduce IR's text)."""
    source = emit_cuda(ir)
    if "reduce" in ir.meta:
        source += reduce_text(ir.meta["reduce"])
    return source


class IrTmaGemm(TmaGemm):
    """The IR-built TMA GEMM of ``cfg``, verified (:func:`kernels.verify.verify`, the IR and its
    printed CUDA; a passing verdict is remembered on disk by content,
    :mod:`kernels.verify.report_cache`) before anything is compiled: ``g(a, b, out=None) ->
    c`` with the template's arguments, checks and tensor maps
    (:class:`~kernels.nvidia.wgmma_tma.TmaGemm`), any M/N/K.  ``report`` is the verifier's."""

    def __init__(self, cfg: TmaGemmConfig = TmaGemmConfig(), *, backend: str = "auto") -> None:
        from ..verify.report_cache import verified
        from .tma import DeviceMaps
        self.ir = build_tma_gemm_ir(cfg)
        source = tma_ir_source(self.ir)
        # verified here, or an identical passing verification remembered on disk (keyed by
        # the source, the IR, its instances and the verifier's code: report_cache)
        self.report = verified(self.ir, source, cfg.arch)
        self.plan = plan_tma_gemm(cfg)
        self.gemm_cfg = cfg
        CompiledKernel.__init__(self, cfg, source, backend)
        self.kernel_name = self.ir.name
        self._maps = DeviceMaps()

    def fits(self, m: int, ldc: int, n: int = 0, splits: int = 1) -> bool:
        """Can this kernel address C of ``m`` rows of stride ``ldc``?  The direct store's
        printed offsets ``r * ldc + col`` are 32-bit ints: fewer than 2^31 elements (the
        template's are size_t; dispatch runs it beyond)."""
        if self.cfg.split_k:     # and the workspace's offsets split * M * N + r * N + col
            return m * ldc < 2 ** 31 and splits * m * n < 2 ** 31
        return self.cfg.store != "direct" or m * ldc < 2 ** 31

    def bind(self, a, b, out=None, splits: int = 1):
        """Check the arguments (the template's checks) and return ``run(a, b, out) -> c``: the
        output, the three tensor maps and one launch of ``min(tiles, SMs)`` CTAs."""
        import torch
        from ..errors import LaunchError
        from ..runtime.cuda import LaunchSite, device_info
        from ..runtime.rocm import TensorSpec as Spec
        from .wgmma_tma import check_aligned
        if splits != 1 and not self.cfg.split_k:
            raise LaunchError(f"{self.kernel_name} is not a split-K configuration; "
                              f"splits={splits} needs TmaGemmConfig(split_k=True)")
        M, N, K = self.check_args(a, b, out)
        if self.cfg.a_rows and M > self.cfg.a_rows:
            raise LaunchError(f"{self.kernel_name} loads {self.cfg.a_rows} rows of A (a_rows): "
                              f"M = {M} needs a_rows=0 (the whole {self.cfg.bm}-row tile) or "
                              "a_rows >= M")
        direct = self.cfg.store == "direct"
        ldc = N if out is None else out.stride(0)
        if not self.fits(M, ldc, N, splits):
            # the printed store offsets are 32-bit ints (r * ldc + col)
            raise LaunchError(f"{self.kernel_name}: C of {M} rows x row stride {ldc} has "
                              f"{M * ldc} elements (its split-K workspace {splits} x {M} x "
                              f"{N}); the IR indexes them with 32-bit ints (< 2^31): the "
                              "template TmaGemm runs it")
        if N % 8 and not direct:
            raise LaunchError(f"N = {N}: the TMA store needs C rows of a 16-byte multiple; "
                              "TmaGemmConfig(store='direct') runs this shape")
        for t, nm in ((a, "a"), (b, "b"), (out, "out")):
            if t is not None and not getattr(t, "is_cuda", False):
                raise LaunchError(f"{nm}: the TMA GEMM takes torch CUDA tensors on an NVIDIA GPU, "
                                  f"got device {t.device}")
            if t is not None and (nm != "out" or not direct):
                check_aligned(t, nm)
        cfg = self.cfg
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        index = a.device.index if a.device.index is not None else torch.cuda.current_device()
        # ctas_per_sm CTAs per SM (the kernel's __launch_bounds__ and register shares)
        slots = cfg.ctas_per_sm * device_info(index)["sms"]
        if cfg.split_k:
            run = reduce_run if cfg.reduce == "kernel" else split_run
            return run(self, M, N, K, splits, tiles, slots)
        ctas = min(tiles, slots)
        from ..printer.cuda import smem_bytes
        # the direct store's C is a pointer (4-byte aligned: check_args) and its row stride
        c_spec = Spec(strides=(), align=4) if direct else Spec(strides=(), align=64)
        sizes = len(self.ir.params) - 3
        main = LaunchSite(self.module, self.kernel_name, ctas, cfg.threads,
                          signature=("ptr", "ptr", "ptr") + ("i32",) * sizes,
                          specs=[Spec(strides=(), align=64)] * 2 + [c_spec] + [None] * sizes,
                          smem_bytes=smem_bytes(self.ir))
        # the boxes the host encodes are the verified IR's tensor maps (A's: a_rows rows),
        # kept per operand pointers for this bound call
        maps_of = operand_maps(self)

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            maps = maps_of(a, b, out)
            if direct:
                main(maps + [out, M, N, K, ctas, out.stride(0)])
            else:
                main(maps + [M, N, K, ctas])
            return out
        return run
