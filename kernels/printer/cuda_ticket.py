"""The CUDA forms of the inter-block ticket statements (:mod:`kernels.ir.ticket`) and the
L2-coherent f32 loads a kernel holding them reads other blocks' stores with, for
:class:`kernels.printer.cuda_attention.CudaAttnPrinter`:

* ``ThreadFence`` -> ``__threadfence();``
* ``AtomicTicket`` -> ``__shared__ int dst;`` and ``if (pred) dst = atomicAdd(&counter[slot],
  1);``
* ``LastArrival`` -> ``if (dst == last) {`` body ``}``
* ``CounterReset`` -> ``if (pred) counter[slot] = 0;``
* an f32 global load in such a kernel -> ``lg_ldcg_f32x{1,4}(...)`` (``ld.global.cg``: from
  L2, never a stale L1 line of another block's partial).
"""

from __future__ import annotations

from typing import Any

from layoutalg.symbolic import to_c

from ..ir.core import walk
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, ThreadFence

__all__ = ["ticket_stmt", "has_ticket", "coherent_load_fn", "TICKET_HELPERS"]

TICKET_HELPERS = r"""LG_DEV void lg_ldcg_f32x1(float* r, const float* p) { r[0] = __ldcg(p); }
LG_DEV void lg_ldcg_f32x4(float* r, const float* p) {
  const float4 v = __ldcg(reinterpret_cast<const float4*>(p));
  r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
"""


def has_ticket(k: Any) -> bool:
    """Does ``k`` take tickets (and so read other blocks' stores in the same launch)?"""
    return any(isinstance(s, AtomicTicket) for s in walk(k.body))


def coherent_load_fn(width: int) -> str:
    return f"lg_ldcg_f32x{width}"


def ticket_stmt(p: Any, s: Any, d: int) -> bool:
    """Print ``s`` through printer ``p`` (its ``out`` and ``stmts``) if it is a ticket
    statement."""
    if isinstance(s, ThreadFence):
        p.out(d, "__threadfence();")
    elif isinstance(s, AtomicTicket):
        p.out(d, f"__shared__ int {s.dst};")
        p.out(d, f"if ({to_c(s.pred)}) {s.dst} = atomicAdd(&{s.counter}[{to_c(s.slot)}], 1);")
    elif isinstance(s, LastArrival):
        p.out(d, f"if ({s.dst} == {to_c(s.last)}) {{")
        p.stmts(s.body, d + 1)
        p.out(d, "}")
    elif isinstance(s, CounterReset):
        p.out(d, f"if ({to_c(s.pred)}) {s.counter}[{to_c(s.slot)}] = 0;")
    else:
        return False
    return True
