"""The CUDA text of the TMA / mbarrier / warpgroup-role statements (:mod:`kernels.ir.nvidia_tma`),
called by :class:`kernels.printer.cuda.CudaPrinter`.

* an mbarrier array ``bar`` of :class:`~kernels.ir.nvidia_tma.MbarrierInit` is a static
  ``__shared__ __align__(8) unsigned long long lg_bar_<bar>[n]``; its 32-bit shared address is
  computed once, ``const lg_u32 lg_bar_<bar>_u32 = lg_smem_u32(lg_bar_<bar>);``, and element
  ``i`` is addressed as ``(lg_bar_<bar>_u32 + 8 * (i))``;
* so is every shared array's (``const lg_u32 sA_u32 = lg_smem_u32(sA);``): a TMA box's
  destination / source at element ``off`` is ``(sA_u32 + 2 * (off))`` and a wgmma operand's
  descriptor ``lg_gmma_desc_u32(bits, sA_u32, start)`` (:data:`~kernels.nvidia.wgmma_prelude.
  GMMA_DESC_U32`): the generic pointer's conversion inside the k loop cost the IR TMA GEMM
  ~40 SASS instructions per k tile (``benchmarks/nvidia_tma_ir_diff.py``);
* :class:`~kernels.ir.nvidia_tma.VarInit` / :class:`~kernels.ir.nvidia_tma.VarSet` print as
  ``int name = expr;`` / ``name = expr;`` (a role's loop-carried scalars);
* the statements print as calls of the helpers in :data:`kernels.nvidia.tma.TMA_HELPERS` (the
  same text the string templates print): ``lg_mbar_init`` / ``lg_mbar_init_fence`` (thread 0,
  then ``__syncthreads()``), ``lg_mbar_expect_tx``, ``lg_mbar_arrive`` (per warp: after
  ``__syncwarp()``, by lane 0), ``lg_mbar_wait``, ``lg_tma_prefetch``, ``lg_tma_load_2d`` (a
  4-D box: ``lg_tma_load_4d`` with its two plane coordinates, its helper
  :data:`~kernels.nvidia.tma.TMA_LOAD_4D_HELPER` printed only where used), ``lg_tma_store_2d``, ``lg_bulk_commit``, ``lg_bulk_wait_read0`` / ``lg_bulk_wait0``,
  ``lg_named_bar`` (``bar.sync``), ``lg_named_arrive`` (``bar.arrive``, its helper
  :data:`~kernels.nvidia.tma.NAMED_ARRIVE_HELPER` printed only where used),
  ``lg_setmaxnreg_inc`` / ``_dec``;
* a :class:`~kernels.ir.nvidia_tma.TensorMap` parameter is ``const void* __restrict__``, an
  :class:`~kernels.ir.attention.ScalarParam` ``int``.
"""

from __future__ import annotations

from typing import Any, Callable, List

from layoutalg.symbolic import to_c

from ..ir.core import sym, walk
from ..ir.nvidia_tma import (TMA_STATEMENTS, BulkCommit, BulkWait, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             NamedBarrier, Setmaxnreg, TensorMap, TmaLoad, TmaPrefetch, TmaStore,
                             VarInit, VarSet)
from ..ir.nvidia_cp_ring import CP_ARRIVE_HELPER, CpAsyncArrive
from ..nvidia.tma import NAMED_ARRIVE_HELPER, TMA_HELPERS, TMA_LOAD_4D_HELPER

__all__ = ["has_tma", "has_cp_arrive", "has_named_arrive", "has_tma_4d", "tma_decls", "tma_helpers", "tma_stmt", "tma_param", "bar_addr",
           "shared_addr", "u32_base"]

#: bytes per element of the arrays a TMA box reads or writes (TensorMap: 16-bit elements)
TMA_ELEM_BYTES = 2


def has_tma(k: Any) -> bool:
    """Does kernel ``k`` use any TMA / mbarrier statement?"""
    return any(isinstance(s, TMA_STATEMENTS) for s in walk(k.body))


def has_named_arrive(k: Any) -> bool:
    """Does kernel ``k`` hold a ``bar.arrive`` (:class:`NamedBarrier` with ``arrive``)?"""
    return any(isinstance(s, NamedBarrier) and s.arrive for s in walk(k.body))


def has_tma_4d(k: Any) -> bool:
    """Does kernel ``k`` load 4-D boxes (:class:`TmaLoad` with plane ``coords``)?"""
    return any(isinstance(s, TmaLoad) and s.coords for s in walk(k.body))


def tma_helpers(k: Any) -> str:
    """The PTX helpers of ``k``'s TMA statements (``lg_named_arrive`` and ``lg_tma_load_4d``
    only where used)."""
    if not has_tma(k):
        return ""
    return TMA_HELPERS + (NAMED_ARRIVE_HELPER if has_named_arrive(k) else "") + \
        (TMA_LOAD_4D_HELPER if has_tma_4d(k) else "") + \
        (CP_ARRIVE_HELPER if has_cp_arrive(k) else "")


def has_cp_arrive(k: Any) -> bool:
    """Does kernel ``k`` hold a ``cp.async.mbarrier.arrive.noinc``
    (:class:`~kernels.ir.nvidia_cp_ring.CpAsyncArrive`)?"""
    return any(isinstance(s, CpAsyncArrive) for s in walk(k.body))


def u32_base(name: str) -> str:
    """The C name of shared array ``name``'s 32-bit shared address (computed once)."""
    return f"{name}_u32"


def tma_decls(k: Any) -> List[str]:
    """The static shared mbarrier arrays of ``k`` and, in a kernel with TMA statements, the
    32-bit shared address of each mbarrier array and each shared array (computed once)."""
    bars = [s.bar for s in walk(k.body) if isinstance(s, MbarrierInit)]
    out = [f"  __shared__ __align__(8) unsigned long long lg_bar_{s.bar}[{s.n}];"
           for s in walk(k.body) if isinstance(s, MbarrierInit)]
    if has_tma(k):
        out += [f"  const lg_u32 {u32_base(s.name)} = lg_smem_u32({s.name});" for s in k.shared]
        out += [f"  const lg_u32 {u32_base('lg_bar_' + b)} = lg_smem_u32(lg_bar_{b});"
                for b in bars]
    return out


def tma_param(p: Any) -> str:
    """The C declaration of a tensor-map or scalar parameter ("" for others)."""
    if isinstance(p, TensorMap):
        return f"const void* __restrict__ {p.name}"
    if getattr(p, "ctype", None) == "int":
        return f"int {p.name}"
    return ""


def bar_addr(bar: str, index: Any) -> str:
    """The 32-bit shared address of mbarrier ``bar[index]``."""
    return f"({u32_base('lg_bar_' + bar)} + 8 * ({to_c(index)}))"


def shared_addr(buf: str, offset: Any) -> str:
    """The 32-bit shared address of element ``offset`` of the 16-bit shared array ``buf``."""
    return f"({u32_base(buf)} + {TMA_ELEM_BYTES} * ({to_c(offset)}))"


def tma_stmt(out: Callable[[int, str], None], s: Any, d: int) -> bool:
    """Print ``s`` if it is a TMA statement (True), else leave it to the caller (False)."""
    if isinstance(s, VarInit):
        out(d, f"int {s.name} = {to_c(s.expr)};")
    elif isinstance(s, VarSet):
        out(d, f"{s.name} = {to_c(s.expr)};")
    elif isinstance(s, MbarrierInit):
        out(d, f"if (tid == 0) {{ for (int i = 0; i < {s.n}; ++i) "
               f"lg_mbar_init({bar_addr(s.bar, sym('i'))}, {s.count}); }}")
    elif isinstance(s, MbarrierInitFence):
        out(d, "if (tid == 0) lg_mbar_init_fence();")
        out(d, "__syncthreads();")
    elif isinstance(s, MbarrierExpectTx):
        out(d, f"lg_mbar_expect_tx({bar_addr(s.bar, s.index)}, {int(s.bytes)}u);")
    elif isinstance(s, MbarrierArrive):
        if s.per_warp:
            out(d, "__syncwarp();")
            out(d, f"if ((tid & 31) == 0) lg_mbar_arrive({bar_addr(s.bar, s.index)});")
        else:
            out(d, f"lg_mbar_arrive({bar_addr(s.bar, s.index)});")
    elif isinstance(s, CpAsyncArrive):
        out(d, f"lg_cp_mbar_arrive({bar_addr(s.bar, s.index)});")
    elif isinstance(s, MbarrierWait):
        out(d, f"lg_mbar_wait({bar_addr(s.bar, s.index)}, (lg_u32)({to_c(s.parity)}));")
    elif isinstance(s, TmaPrefetch):
        out(d, f"lg_tma_prefetch({s.tmap.name});")
    elif isinstance(s, TmaLoad):
        planes = "".join(f", {to_c(c)}" for c in s.coords)
        out(d, f"lg_tma_load_{2 + len(s.coords)}d({shared_addr(s.dst, s.offset)}, "
               f"{s.tmap.name}, {bar_addr(s.bar, s.index)}, {to_c(s.c0)}, {to_c(s.c1)}{planes});")
    elif isinstance(s, TmaStore):
        out(d, f"lg_tma_store_2d({s.tmap.name}, {shared_addr(s.src, s.offset)}, "
               f"{to_c(s.c0)}, {to_c(s.c1)});")
    elif isinstance(s, BulkCommit):
        out(d, "lg_bulk_commit();")
    elif isinstance(s, BulkWait):
        out(d, "lg_bulk_wait_read0();" if s.read else "lg_bulk_wait0();")
    elif isinstance(s, NamedBarrier):
        fn = "lg_named_arrive" if s.arrive else "lg_named_bar"
        out(d, f"{fn}({to_c(s.id)}, {int(s.threads)});")
    elif isinstance(s, Setmaxnreg):
        out(d, f"lg_setmaxnreg_{'inc' if s.inc else 'dec'}<{s.regs}>();")
    else:
        return False
    return True
