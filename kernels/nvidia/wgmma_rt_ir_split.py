"""Split-K of the ``cp.async`` + ``wgmma`` GEMM (``WgmmaGemmConfig(split_k=True)``) as kernel IR
at runtime sizes (issue 20 item 1): the template's two launches (:class:`~kernels.nvidia.wgmma
.WgmmaGemm`'s split path, :mod:`kernels.nvidia.splitk`), both built as IR and proved together.

* The **split kernel** is :class:`~kernels.nvidia.wgmma_rt_ir.RtWgmmaBuilder`'s program (copy
  paths, pipeline, wgmma k steps, grouped raster over ``blockIdx.x``) on the template's k
  range: block ``(pid, sp)`` multiplies k tiles ``kt0 = sp kt_per`` .. ``kt0 + KTn - 1``,
  ``KTn = min(KT - kt0, kt_per)`` (:func:`~kernels.nvidia.wgmma.split_ranges`), and stores its
  fp32 accumulators to ``W[sp][r][col]`` (``splits x M x N``, row stride N) as 8-byte pairs
  where both columns exist and N is even, else one float at a time (the template's
  :func:`~kernels.nvidia.splitk.emit_partial_store`).
* The **reduce kernel** is :func:`~kernels.nvidia.wgmma_tma_ir_reduce.build_reduce_ir` as it
  is (the TMA GEMM's two-launch split-K uses it): ``0.f + W[0] + ... + W[splits - 1]``, one
  rounding, printed after the split kernel in the same module.

Proved by :func:`kernels.verify.verify` at the launches of :func:`split_instances` (edges in
M, N and K, odd strides, uneven last split, more splits asked than k tiles allow, 1x1x8):
the every-block engine's checks with the split-aware dataflow of
:mod:`kernels.verify.gate_split_partials` (each stored partial holds its split's k range,
every workspace element stored once) and the reduce kernel's proof on the workspace every
block wrote, then the printed text of both.  Bitwise the template's result: the same k tiles
per split in the same wgmma order, the same sum order from ``0.f``, one rounding.

Dispatched (``dispatch.CP_SPLIT_ON_IR``): on an H100 (2026-11-24, two runs of
``benchmarks/nvidia_wgmma_rt_split_ir.py``, docs/PERFORMANCE.md) 0.98-0.99x the template's
device time at aligned long-K shapes, 1.15-1.25x at small ones and 1.24-1.51x where the
selection makes a cp.async split-K (rows not 16-byte aligned: the IR's per-operand copy
paths), bitwise equal.  It was 0.89-0.96x while the epilogue printed each store's row and
column in full (4261 SASS instructions against the template's 1396; now 654, the builder's
``er`` / ``ec`` Lets).
"""

from __future__ import annotations

from typing import Any, List, Tuple

import sympy

from layoutalg import Layout

from ..ir.core import Comment, Let, Param, sym
from ..verify.concrete_instances import RuntimeInstance
from ..verify.spec import Contraction, Dim, Domain, KernelSpec, Symbol, TensorSpec
from .splitk import REDUCE_THREADS
from .wgmma import WgmmaGemmConfig, split_ranges
from .rt_gemm_launch import INT_OFFSETS
from .wgmma_rt_ir import IrWgmmaRtGemm, RtWgmmaBuilder
from .wgmma_tma_ir_reduce import build_reduce_ir, workspace_meta

__all__ = ["SPLIT_SCALARS", "build_wgmma_rt_split_ir", "split_instances", "split_gemm_spec",
           "split_kernel_name", "split_ir_refusal", "split_source", "IrWgmmaRtSplitGemm"]

#: the split kernel's runtime arguments after A, B, W (the template's, less ``ldc``: the
#: workspace's row stride is N; plus ``a_vec`` / ``b_vec`` as the non-split IR form's)
SPLIT_SCALARS = ("M", "N", "K", "lda", "ldb", "a_vec", "b_vec", "kt_per")
#: the reduce kernel's 32-bit element index runs up to a whole last block past M N
REDUCE_PAD = REDUCE_THREADS


def split_ir_refusal(cfg: WgmmaGemmConfig) -> Any:
    """Why the split IR form cannot run ``cfg`` (None: it can)."""
    if not cfg.split_k:
        return (f"{cfg.name} is not a split-K configuration: the IR-built cp.async wgmma GEMM "
                "without split-K is kernels.nvidia.wgmma_rt_ir")
    return None


def split_kernel_name(cfg: WgmmaGemmConfig) -> str:
    """``lg_irwgmma_rt_`` + the template's suffix (which ends ``_sk``)."""
    return "lg_irwgmma_rt_" + cfg.name[len("lg_wgmma_"):]


def split_instances(cfg: WgmmaGemmConfig) -> Tuple[RuntimeInstance, ...]:
    """The launches the split program is verified at, each ``(values, grid (tiles, splits))``
    with the host's ``kt_per`` and split count (:func:`split_ranges`) and the reduce kernel's
    ``ldc``: (a) edges in M, N (odd) and K (not a multiple of 8), 3 even splits; (b) 16-byte
    rows, K edge uncut, 2 splits, the last one tile short; (c) 1 x 1 x 8, one split; (d) a
    partial raster group, odd ``lda`` / ``ldc``, 4 splits asked where 3 are non-empty."""
    bm, bn, bk, g = cfg.bm, cfg.bn, cfg.bk, cfg.group_m
    b_rows = lambda n, k: n if cfg.b_major == "n" else k     # noqa: E731 - ldb's minimum
    raw = [("edge_odd", 2 * bm - 3, bn + 41, 5 * bk + 2, 3, 6, 0, 0),
           ("aligned_k_edge", bm, 2 * bn, 2 * bk + 8, 2, 8, 16, 0),
           ("one", 1, 1, 8, 1, 0, 0, 0),
           ("raster_odd_ld", g * bm + 1, bn + 8, 5 * bk, 4, 3, 0, 1)]
    out = []
    for name, m, n, k, splits, pa, pb, pc in raw:
        lda, ldb, ldc = k + pa, b_rows(n, k) + pb, n + pc
        kt_per, used = split_ranges(k, bk, splits)
        tiles = -(-m // bm) * -(-n // bn)
        out.append(RuntimeInstance(name, dict(M=m, N=n, K=k, lda=lda, ldb=ldb,
                                              a_vec=int(lda % 8 == 0), b_vec=int(ldb % 8 == 0),
                                              kt_per=kt_per, splits=used, ldc=ldc),
                                   (tiles, used, 1)))
    return tuple(out)


def split_gemm_spec(name: str, cfg: WgmmaGemmConfig) -> KernelSpec:
    """``C = A B`` through the fp32 workspace ``W`` (``splits x M x N``, written by the split
    kernel, ``W[s, m, n]`` the sum over split ``s``'s k range; C is stored by the reduce
    kernel), proved at the launches of :func:`split_instances`."""
    return KernelSpec(
        name=name, dims=(Dim("s", "splits"), Dim("m", "M"), Dim("n", "N"), Dim("k", "K")),
        tensors=(TensorSpec("A", ("m", "k"), "input", cfg.dtype),
                 TensorSpec("B", ("n", "k"), "input", cfg.dtype),
                 TensorSpec("W", ("s", "m", "n"), "workspace", "f32"),
                 TensorSpec("C", ("m", "n"), "output", cfg.dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), None),),
        symbols=tuple(Symbol(n, 0, 2 ** 31 - 1) for n in SPLIT_SCALARS),
        domain=Domain.at_launches(lambda k: split_instances(cfg)))


class SplitRtBuilder(RtWgmmaBuilder):
    """The split kernel (module docstring)."""

    def refusal(self, cfg: WgmmaGemmConfig) -> Any:
        return split_ir_refusal(cfg)

    def k_range(self) -> Tuple[List[Any], Any]:
        kt_per = sym("kt_per")
        return [Comment("this split's k tiles: kt0 .. kt0 + KTn - 1 (the template's "
                        "partition)"),
                Let("kt0", sym("sp") * kt_per),
                Let("KTn", sympy.Min(sym("KT") - sym("kt0"), kt_per))], sym("KTn")

    def k_tile(self, kt: Any) -> Any:
        return sym("kt0") + kt

    def store_target(self) -> Tuple[str, Any, Any, Any, str]:
        """fp32 partials to ``W[sp]`` (row stride N): pairs (8 bytes) where N is even."""
        KT = sympy.floor((self.K + self.c.bk - 1) / self.c.bk)
        planes = sympy.floor((KT + sym("kt_per") - 1) / sym("kt_per"))
        w_glob = Layout((planes, self.M, self.N), (self.M * self.N, self.N, 1))
        return ("W", w_glob, lambda r, q: (sym("sp"), r, q), sympy.Mod(self.N, 2) < 1,
                "W[sp] (fp32, row stride N)")

    def kernel_name(self) -> str:
        return split_kernel_name(self.c)

    def interface(self) -> Tuple[Any, Tuple[str, ...], Tuple[str, ...], dict]:
        name = self.kernel_name()
        meta = dict(workspace_meta(self.M, self.N),
                    reduce=build_reduce_ir(self.c, name + "_reduce"),
                    split={"bk": self.c.bk, "workspace": "W"})
        return Param("W", "f32", const=False), SPLIT_SCALARS, ("pid", "sp"), meta

    def spec(self, name: str) -> KernelSpec:
        return split_gemm_spec(name, self.c)


def build_wgmma_rt_split_ir(cfg: WgmmaGemmConfig = WgmmaGemmConfig(split_k=True)) -> Any:
    """The split kernel's IR (its reduce kernel in ``meta["reduce"]``); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` for a configuration without split-K."""
    return SplitRtBuilder(cfg).build()


def split_source(k: Any) -> str:
    """The printed module: the split kernel, then its reduce kernel (one compilation)."""
    from ..printer.cuda_gemm_edge import emit_cuda_gemm_rt
    from ..verify.gate_split_reduce import reduce_text
    return emit_cuda_gemm_rt(k) + reduce_text(k.meta["reduce"])


class IrWgmmaRtSplitGemm(IrWgmmaRtGemm):
    """The IR-built split-K kernel of ``cfg`` and its IR reduce kernel, one module, verified
    together (:func:`kernels.verify.verify`; a passing verdict remembered on disk by content)
    before anything is compiled: ``g(a, b, out=None, splits=1) -> c`` with the template
    :class:`~kernels.nvidia.wgmma.WgmmaGemm`'s arguments, checks and two launches."""

    def __init__(self, cfg: WgmmaGemmConfig = WgmmaGemmConfig(split_k=True), *,
                 backend: str = "auto") -> None:
        super().__init__(cfg, backend=backend)
        self.reduce_name = self.ir.meta["reduce"].name

    def build(self, cfg: WgmmaGemmConfig) -> Tuple[Any, str]:
        ir = build_wgmma_rt_split_ir(cfg)
        return ir, split_source(ir)

    def bind(self, a, b, out=None, splits: int = 1):
        """Check the arguments (the template's checks) and return ``run(a, b, out) -> c``:
        the split kernel on ``(tiles, n)`` blocks, then the reduce kernel."""
        import torch
        from ..printer.cuda import smem_bytes
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec as Spec
        from .splitk import reduce_site
        M, N, K = self.check_args(a, b, out)
        cfg = self.cfg
        kt_per, n = split_ranges(K, cfg.bk, splits)
        lda, ldb = a.stride(0), b.stride(0)
        ldc = N if out is None else out.stride(0)
        pad = max(cfg.bm, cfg.bn, cfg.bk)     # rows past the edge a predicated-off copy names
        if max((M + pad) * lda, (b.shape[0] + pad) * ldb, (M + pad) * ldc,
               n * M * N + REDUCE_PAD) >= INT_OFFSETS:
            # the IR's offsets (copies, W, the reduce kernel's element index) are 32-bit ints
            return self.template().bind(a, b, out, splits)
        a_vec = int(lda % 8 == 0 and a.data_ptr() % 16 == 0)
        b_vec = int(ldb % 8 == 0 and b.data_ptr() % 16 == 0)
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        main = LaunchSite(self.module, self.kernel_name, (tiles, n), cfg.threads,
                          signature=("ptr",) * 3 + ("i32",) * len(SPLIT_SCALARS),
                          specs=[Spec(strides=(), align=2), Spec(strides=(), align=2),
                                 Spec(strides=(), align=8)] + [None] * len(SPLIT_SCALARS),
                          smem_bytes=smem_bytes(self.ir))
        reduce = reduce_site(self.module, self.reduce_name, M, N)

        def run(a, b, out):
            if out is None:
                out = torch.empty((M, N), dtype=a.dtype, device=a.device)
            ws = torch.empty((n, M, N), dtype=torch.float32, device=a.device)
            main([a, b, ws, M, N, K, lda, ldb, a_vec, b_vec, kt_per])
            reduce([ws, out, M, N, out.stride(0), n])
            return out
        return run
