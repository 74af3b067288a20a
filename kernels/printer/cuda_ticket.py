"""The CUDA forms of the inter-block ticket statements (:mod:`kernels.ir.ticket`) and the
L2-coherent f32 loads a kernel holding them reads other blocks' stores with, for
:class:`kernels.printer.cuda_attention.CudaAttnPrinter`:

* ``ThreadFence`` -> ``__threadfence();``
* ``AtomicTicket`` -> ``__shared__ int dst;`` and ``if (pred) dst = atomicAdd(&counter[slot],
  1);``
* ``LastArrival`` -> ``if (dst == last) {`` body ``}``
* ``CounterReset`` -> ``if (pred) counter[slot] = 0;``
* per-warpgroup tickets (``dst_index``): ``__shared__ int dst[dst_count];``, ``dst[index] =
  atomicAdd(...)``, ``if (dst[index] == last) {``
* ``PartialAdd`` -> ``{ float2 v = make_float2(0.f, 0.f); if (pred) v = __ldcg(...);
  acc[i] += v.x; acc[i + 1] += v.y; }`` (width 2) or ``{ float x = 0.f; if (pred) x =
  __ldcg(buf + (offset)); acc[i] += x; }``
* an f32 global load in such a kernel -> ``lg_ldcg_f32x{1,4}(...)`` (``ld.global.cg``: from
  L2, never a stale L1 line of another block's partial).
"""

from __future__ import annotations

from typing import Any

from layoutalg.symbolic import to_c

from ..ir.core import walk
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence

__all__ = ["ticket_stmt", "has_ticket", "coherent_load_fn", "TICKET_HELPERS",
           "partial_add_line"]

TICKET_HELPERS = r"""LG_DEV void lg_ldcg_f32x1(float* r, const float* p) { r[0] = __ldcg(p); }
LG_DEV void lg_ldcg_f32x4(float* r, const float* p) {
  const float4 v = __ldcg(reinterpret_cast<const float4*>(p));
  r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
"""


def partial_add_line(s: PartialAdd) -> str:
    """The printed line of a :class:`PartialAdd` (one statement: a predicated L2 load of 1 or
    2 floats, 0.f where the predicate is off, added into the registers)."""
    f, idx = s.regs.frag.name, list(s.regs.idx)
    pred = "true" if s.pred is None else to_c(s.pred)
    if s.width == 2:
        return (f"{{ float2 v = make_float2(0.f, 0.f); if ({pred}) v = __ldcg(reinterpret_cast"
                f"<const float2*>({s.buf} + ({to_c(s.offset)}))); {f}[{idx[0]}] += v.x; "
                f"{f}[{idx[1]}] += v.y; }}")
    return (f"{{ float x = 0.f; if ({pred}) x = __ldcg({s.buf} + ({to_c(s.offset)})); "
            f"{f}[{idx[0]}] += x; }}")


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
        if s.dst_index is None:
            p.out(d, f"__shared__ int {s.dst};")
            dst = s.dst
        else:
            p.out(d, f"__shared__ int {s.dst}[{s.dst_count}];")
            dst = f"{s.dst}[{to_c(s.dst_index)}]"
        p.out(d, f"if ({to_c(s.pred)}) {dst} = atomicAdd(&{s.counter}[{to_c(s.slot)}], 1);")
    elif isinstance(s, LastArrival):
        dst = s.dst if s.index is None else f"{s.dst}[{to_c(s.index)}]"
        p.out(d, f"if ({dst} == {to_c(s.last)}) {{")
        p.stmts(s.body, d + 1)
        p.out(d, "}")
    elif isinstance(s, CounterReset):
        p.out(d, f"if ({to_c(s.pred)}) {s.counter}[{to_c(s.slot)}] = 0;")
    elif isinstance(s, PartialAdd):
        p.out(d, partial_add_line(s))
    else:
        return False
    return True
