"""The ``cp.async`` producer's mbarrier arrival as an IR statement: what a warpgroup of 128
copying threads (the warp-specialised prefill's ``loader="cp.async"`` producer,
:mod:`kernels.nvidia.ws_cp_producer`) signals a ring stage's ``full`` barrier with.

* :class:`CpAsyncArrive` ``(bar, index)``: ``cp.async.mbarrier.arrive.noinc.shared::cta.b64``
  by **every** thread of the warpgroup: each thread's arrival on ``bar[index]`` happens once
  every ``cp.async`` that thread issued before it has landed; ``.noinc``: the arrival counts
  against the barrier's expected count (no pending-count increment), so a ``full`` barrier the
  128 producer threads signal is initialised with count 128 (:class:`~kernels.ir.nvidia_tma
  .MbarrierInit`).

The copies themselves are :class:`~kernels.ir.nvidia.CpAsync` statements (global -> shared, 16
bytes a thread, predicated rows zero-filled) inside the producer role.  The per-role model runs
them (:mod:`kernels.verify.gate_cp_ring`): a copy's shared elements are written through the
generic proxy and land at the thread's next ``CpAsyncArrive``, on the phase of ``bar[index]``
that arrival joins; a consumer's wgmma may read them only after a wait observed that phase
**and** a ``fence.proxy.async`` (:class:`~kernels.ir.nvidia_wgmma.FenceProxyAsync`) by that
consumer after the wait (the wgmma reads through the async proxy); copies no arrival covers
when the producer ends are refused, as is an arrival count the barrier does not expect.

Printed by :func:`kernels.printer.cuda_tma.tma_stmt` as ``lg_cp_mbar_arrive(bar);`` with
:data:`CP_ARRIVE_HELPER` (declared only in kernels that use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CpAsyncArrive", "CP_ARRIVE_HELPER"]

#: the helper a kernel with :class:`CpAsyncArrive` declares (the template's PTX:
#: :mod:`kernels.nvidia.wgmma_attention_ws`'s ``lg_cp_async_mbar_arrive``)
CP_ARRIVE_HELPER = r"""
// arrives on bar once every cp.async this thread issued before has landed (.noinc: the
// barrier's expected count includes this arrival)
LG_DEV void lg_cp_mbar_arrive(lg_u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}
"""


@dataclass
class CpAsyncArrive:
    """``cp.async.mbarrier.arrive.noinc`` on ``bar[index]`` by every thread of the warpgroup
    (one arrival each, when that thread's earlier copies landed)."""

    bar: str
    index: Any
