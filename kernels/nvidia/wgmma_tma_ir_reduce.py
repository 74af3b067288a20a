"""The TMA GEMM's split-K with a separate reduce launch (``TmaGemmConfig(split_k=True,
reduce="kernel")``, the selection's 64x256 split tile, whose inline merge would spill) as
kernel IR: two kernels in one module, proved together by the one verifier.

* The **split kernel** is :class:`~kernels.nvidia.wgmma_tma_ir_split.SplitTmaIrBuilder`'s
  program (the same work units ``(tile, k range)``, producer, ring and k steps) whose consumer
  epilogue is only the partial stores: fp32 accumulators -> ``W[split][r][col]`` (``splits x
  M x N``, row stride N; 8-byte pairs where N is even), at every split count, as the template
  writes them (no ticket, no counter).
* The **reduce kernel** (:func:`build_reduce_ir`) is the template's
  :func:`~kernels.nvidia.splitk.reduce_kernel` as IR: one thread per element ``i = r N + c``
  of C, ``acc = 0.f + W[0][i] + W[1][i] + ... + W[splits - 1][i]`` (the ticket form's
  :class:`~kernels.ir.ticket.PartialAdd` statements, in split order), rounded once into
  ``C[r ldc + c]``.  Its workspace layout (plane stride ``M N``, row stride ``N``) is declared
  in its ``meta`` as the split kernel's is, and the verifier checks the two agree.

The split kernel's spec is the inline form's (:func:`~kernels.nvidia.wgmma_tma_ir_split
.split_spec`: ``W`` a workspace, ``C`` the output); its ``meta["reduce"]`` names the reduce
kernel, so the per-role model runs the split kernel on every CTA of an instance, then the
reduce kernel on every thread of its grid (:mod:`kernels.verify.gate_split_reduce`), and proves
with the ticket form's rule (``merge_reads_partials``) that every C element is the sum of its
``splits`` partials read in split order, each written exactly once and holding that element's
accumulator over one k range, the ranges ascending and partitioning ``[0, K)``; the kernel
boundary orders the writes before the reads (no ticket).  The result is bitwise the template's
(same k ranges and wgmma order per split, same sum order from ``0.f``, one rounding).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import sympy

from ..ir.core import Access, Frag, Kernel, Let, Loop, Param, ZeroFrag, sym
from ..ir.nvidia_tma import IntParam
from ..ir.ticket import PartialAdd
from ..verify.spec import Dim, Domain, KernelSpec, Symbol, TensorSpec
from .splitk import REDUCE_THREADS
from .wgmma_tma import TmaGemmConfig
from .wgmma_tma_ir_split import SplitTmaIrBuilder, instance_values, operand_maps

__all__ = ["ReduceSplitTmaIrBuilder", "build_reduce_ir", "reduce_kernel_name",
           "reduce_spec", "workspace_meta", "reduce_run"]


def reduce_kernel_name(cfg: TmaGemmConfig) -> str:
    """The IR reduce kernel's name: the split kernel's (``lg_irtma_...``) + ``_reduce``."""
    from .wgmma_tma_ir_builder import ir_kernel_name
    return ir_kernel_name(cfg) + "_reduce"


def workspace_meta(M: Any, N: Any) -> Dict[str, Any]:
    """The fp32 workspace ``W`` both kernels address: ``splits`` planes of ``M x N`` floats,
    row stride ``N`` (the layout the verifier reads every W address back through)."""
    return {"row_stride": {"W": N}, "plane_stride": {"W": M * N}}


class ReduceSplitTmaIrBuilder(SplitTmaIrBuilder):
    """The split kernel of a ``reduce="kernel"`` configuration (module docstring)."""

    def epilogue_words(self) -> str:
        return ("split-K work units (tile, k range): fp32 partials in W at every split count, "
                "summed in split order and rounded once by the reduce kernel (a second launch)")

    def unit_epilogue(self) -> List[Any]:
        lets = self.direct_epilogue()[:2]      # rr, cc: the thread's first row and column
        return lets + self.partial_stores()

    def interface(self) -> Tuple[List[Any], List[Any], Dict[str, Any]]:
        params: List[Any] = [self.tm_a, self.tm_b, Param("W", "f32", const=False)]
        params += [IntParam(n) for n in ("M", "N", "K", "ctas", "splits", "kt_per")]
        meta = dict(workspace_meta(self.M, self.N), maps=(self.tm_a, self.tm_b),
                    reduce=build_reduce_ir(self.c))
        return params, [], meta

    def spec(self, name: str, instances: Sequence[Tuple[int, ...]]) -> KernelSpec:
        from .wgmma_tma_ir_split import split_spec
        return split_spec(name, self.c.dtype, instances, self.c.a_rows or 2 ** 20)


def reduce_spec(name: str, dtype: str) -> KernelSpec:
    """``C[m, n] = sum_s W[s, m, n]`` (in split order, one rounding); verified with the split
    kernel that writes ``W`` (its instances), not alone."""
    return KernelSpec(
        name=name, dims=(Dim("s", None), Dim("m", None), Dim("n", None)),
        tensors=(TensorSpec("W", ("s", "m", "n"), "workspace", "f32"),
                 TensorSpec("C", ("m", "n"), "output", dtype)),
        symbols=(Symbol("M", 1, 2 ** 20), Symbol("N", 1, 2 ** 20), Symbol("ldc", 1, 2 ** 20),
                 Symbol("splits", 1, 64)),
        domain=Domain.on_instances(lambda k: ()))


def build_reduce_ir(cfg: TmaGemmConfig, name: Any = None) -> Kernel:
    """The reduce kernel of ``cfg`` as IR: thread ``e = bx * 256 + tid`` of ``ceil(M N /
    256)`` blocks sums ``W[s][e]`` for s = 0, 1, ... from ``0.f`` and rounds once to
    ``C[(e / N) ldc + e % N]`` (threads with ``e >= M N`` read and store nothing) (the template's :func:`~kernels.nvidia.splitk.reduce_kernel`,
    which indexes ``W`` with 64-bit ints; the IR's are 32-bit: ``IrTmaGemm.fits``).  ``name``:
    the kernel's name (default :func:`reduce_kernel_name`; the cp.async split kernel's
    reduce kernel, :mod:`.wgmma_rt_ir_split`, is named after it; only ``cfg.dtype`` is read
    otherwise)."""
    M, N, ldc, splits = sym("M"), sym("N"), sym("ldc"), sym("splits")
    i, r = sym("e"), sym("r")       # e: the element (not i, the printer's zero-fill index)
    acc = Frag("acc", "f32", 1)
    on = i < M * N          # a per-thread predicate (an IR If is block-uniform)
    body: List[Any] = [
        Let("e", sym("bx") * REDUCE_THREADS + sym("tid")),
        Let("r", sympy.floor(i / N)),
        ZeroFrag(acc),
        Loop("sp", 0, splits, [PartialAdd("W", sym("sp") * M * N + i, 1, acc.regs([0]), on,
                                          tag="W.reduce")]),
        Access("store", "global", "C", r * ldc + i - r * N, 1, acc.regs([0]), pred=on,
               tag="C.reduce", coords=((r, i - r * N),))]
    name = name or reduce_kernel_name(cfg)
    return Kernel(name, [Param("W", "f32"), Param("C", cfg.dtype, const=False)]
                  + [IntParam(n) for n in ("M", "N", "ldc", "splits")],
                  [], [acc], body, REDUCE_THREADS, (1, 1, 1), grid_symbols=("bx",),
                  header=[f"C[M x N] (row stride ldc, {cfg.dtype}) = round(0.f + W[0] + ... + "
                          "W[splits - 1]) of the split kernel's fp32 partials (splits x M x N, "
                          "row stride N), one thread per element, splits in order"],
                  # W as the split kernel declares it; C row-major with row stride ldc
                  meta={"row_stride": {"W": N, "C": ldc}, "plane_stride": {"W": M * N}},
                  min_blocks=0, spec=reduce_spec(name, cfg.dtype))


def reduce_instances(instances: Sequence[Tuple[int, ...]]) -> List[Dict[str, int]]:
    """The reduce launch of each split-kernel instance (M, N, K, ctas, ldc, splits): its
    symbols (the split count the host really launches) and block count."""
    out = []
    for v in instances:
        d = instance_values(v)
        out.append(dict(M=d["M"], N=d["N"], ldc=d["ldc"], splits=d["splits"],
                        blocks=-(-d["M"] * d["N"] // REDUCE_THREADS)))
    return out


def reduce_run(g: Any, M: int, N: int, K: int, splits: int, tiles: int, slots: int):
    """``run(a, b, out)`` of the two-launch IR split-K kernel ``g`` (an ``IrTmaGemm``; its
    argument checks passed): the split kernel on ``min(units, slots)`` CTAs, then the reduce
    kernel on ``ceil(M N / 256)`` blocks.  The ``n x M x N`` fp32 partials are kept per CUDA
    stream (launches on one stream run in order; the template allocates them per call)."""
    import torch
    from ..printer.cuda import smem_bytes
    from ..runtime.cuda import LaunchSite
    from ..runtime.launch_cache import PerStream
    from ..runtime.rocm import TensorSpec as Spec
    from .wgmma import split_ranges
    cfg = g.cfg
    kt_per, n = split_ranges(K, cfg.bk, splits)
    ctas = min(tiles * n, slots)
    spaces = PerStream(lambda device: torch.empty((n, M, N), dtype=torch.float32,
                                                  device=device))
    main = LaunchSite(g.module, g.kernel_name, ctas, cfg.threads,
                      signature=("ptr",) * 3 + ("i32",) * 6,
                      specs=[Spec(strides=(), align=64)] * 2 + [Spec(strides=(), align=8)]
                      + [None] * 6, smem_bytes=smem_bytes(g.ir))
    red = g.ir.meta["reduce"]
    reduce = LaunchSite(g.module, red.name, -(-M * N // REDUCE_THREADS), REDUCE_THREADS,
                        signature=("ptr", "ptr") + ("i32",) * 4,
                        specs=[Spec(strides=(), align=4), Spec(strides=(), align=2)]
                        + [None] * 4)
    maps_of = operand_maps(g)

    def run(a, b, out):
        if out is None:
            out = torch.empty((M, N), dtype=a.dtype, device=a.device)
        maps = maps_of(a, b)
        ws, stream = spaces.on(a.device)
        main(maps + [ws, M, N, K, ctas, n, kt_per], stream)
        reduce([ws, out, M, N, out.stride(0), n], stream)
        return out
    return run
