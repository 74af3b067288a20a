"""The CUDA text of the TMA / mbarrier / warpgroup-role statements (:mod:`kernels.ir.nvidia_tma`),
called by :class:`kernels.printer.cuda.CudaPrinter`.

* an mbarrier array ``bar`` of :class:`~kernels.ir.nvidia_tma.MbarrierInit` is a static
  ``__shared__ __align__(8) unsigned long long lg_bar_<bar>[n]``; element ``i`` is addressed as
  ``lg_smem_u32(&lg_bar_<bar>[i])``;
* the statements print as calls of the helpers in :data:`kernels.nvidia.tma.TMA_HELPERS` (the
  same text the string templates print): ``lg_mbar_init`` / ``lg_mbar_init_fence`` (thread 0,
  then ``__syncthreads()``), ``lg_mbar_expect_tx``, ``lg_mbar_arrive`` (per warp: after
  ``__syncwarp()``, by lane 0), ``lg_mbar_wait``, ``lg_tma_prefetch``, ``lg_tma_load_2d``,
  ``lg_tma_store_2d``, ``lg_bulk_commit``, ``lg_bulk_wait_read0`` / ``lg_bulk_wait0``,
  ``lg_named_bar``, ``lg_setmaxnreg_inc`` / ``_dec``;
* a :class:`~kernels.ir.nvidia_tma.TensorMap` parameter is ``const void* __restrict__``, an
  :class:`~kernels.ir.attention.ScalarParam` ``int``.
"""

from __future__ import annotations

from typing import Any, Callable, List

from layoutalg.symbolic import to_c

from ..ir.core import walk
from ..ir.nvidia_tma import (TMA_STATEMENTS, BulkCommit, BulkWait, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             NamedBarrier, Setmaxnreg, TensorMap, TmaLoad, TmaPrefetch, TmaStore)
from ..nvidia.tma import TMA_HELPERS

__all__ = ["has_tma", "tma_decls", "tma_helpers", "tma_stmt", "tma_param", "bar_addr"]


def has_tma(k: Any) -> bool:
    """Does kernel ``k`` use any TMA / mbarrier statement?"""
    return any(isinstance(s, TMA_STATEMENTS) for s in walk(k.body))


def tma_helpers(k: Any) -> str:
    return TMA_HELPERS if has_tma(k) else ""


def tma_decls(k: Any) -> List[str]:
    """The static shared mbarrier arrays of ``k``."""
    return [f"  __shared__ __align__(8) unsigned long long lg_bar_{s.bar}[{s.n}];"
            for s in walk(k.body) if isinstance(s, MbarrierInit)]


def tma_param(p: Any) -> str:
    """The C declaration of a tensor-map or scalar parameter ("" for others)."""
    if isinstance(p, TensorMap):
        return f"const void* __restrict__ {p.name}"
    if getattr(p, "ctype", None) == "int":
        return f"int {p.name}"
    return ""


def bar_addr(bar: str, index: Any) -> str:
    return f"lg_smem_u32(&lg_bar_{bar}[{to_c(index)}])"


def tma_stmt(out: Callable[[int, str], None], s: Any, d: int) -> bool:
    """Print ``s`` if it is a TMA statement (True), else leave it to the caller (False)."""
    if isinstance(s, MbarrierInit):
        out(d, f"if (tid == 0) {{ for (int i = 0; i < {s.n}; ++i) "
               f"lg_mbar_init(lg_smem_u32(&lg_bar_{s.bar}[i]), {s.count}); }}")
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
    elif isinstance(s, MbarrierWait):
        out(d, f"lg_mbar_wait({bar_addr(s.bar, s.index)}, (lg_u32)({to_c(s.parity)}));")
    elif isinstance(s, TmaPrefetch):
        out(d, f"lg_tma_prefetch({s.tmap.name});")
    elif isinstance(s, TmaLoad):
        out(d, f"lg_tma_load_2d(lg_smem_u32({s.dst} + ({to_c(s.offset)})), {s.tmap.name}, "
               f"{bar_addr(s.bar, s.index)}, {to_c(s.c0)}, {to_c(s.c1)});")
    elif isinstance(s, TmaStore):
        out(d, f"lg_tma_store_2d({s.tmap.name}, lg_smem_u32({s.src} + ({to_c(s.offset)})), "
               f"{to_c(s.c0)}, {to_c(s.c1)});")
    elif isinstance(s, BulkCommit):
        out(d, "lg_bulk_commit();")
    elif isinstance(s, BulkWait):
        out(d, "lg_bulk_wait_read0();" if s.read else "lg_bulk_wait0();")
    elif isinstance(s, NamedBarrier):
        out(d, f"lg_named_bar({to_c(s.id)}, {int(s.threads)});")
    elif isinstance(s, Setmaxnreg):
        out(d, f"lg_setmaxnreg_{'inc' if s.inc else 'dec'}<{s.regs}>();")
    else:
        return False
    return True
