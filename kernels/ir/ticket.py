"""Inter-block ordering statements: the ticket pattern by which the last block of a group to
finish does the group's final work (the CUDA threadFenceReduction pattern; issue 20: the
split-KV decode's one-launch form, :mod:`kernels.nvidia.decode_fused_ir`).

* :class:`ThreadFence` -> ``__threadfence();``: this thread's global stores are visible
  GPU-wide before anything it does after;
* :class:`AtomicTicket` -> ``if (pred) dst = atomicAdd(&counter[slot], 1);`` with ``dst`` a
  ``__shared__ int``: one thread of the block takes the arrival index of its block;
* :class:`LastArrival` -> ``if (dst == last) { body }``: the block that drew ``last`` (block
  uniform: every thread reads the shared ticket after a barrier);
* :class:`CounterReset` -> ``if (pred) counter[slot] = 0;``: the counter ready for the next
  launch;
* :class:`PartialAdd` -> ``acc[i] += pred ? __ldcg(buf + offset) : 0.f`` (1 or 2 f32
  elements): the last arrival summing another block's fp32 partial into its registers (the
  TMA GEMM's one-launch split-K).

A ticket may be taken per warpgroup rather than per block (``dst_index``: the shared ints are
an array ``dst[dst_count]`` indexed by the warpgroup; the barriers around it are then the
warpgroup's named barrier).

The rules these statements must keep are :mod:`kernels.verify.ticket_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import sympy

from .core import If, sym

__all__ = ["ThreadFence", "AtomicTicket", "LastArrival", "CounterReset", "PartialAdd"]


@dataclass
class ThreadFence:
    """``__threadfence();`` (every thread that runs it)."""


@dataclass
class AtomicTicket:
    """``dst = atomicAdd(&counter[slot], 1)`` by the threads where ``pred`` holds (one per
    block); ``dst`` is a block-shared int, read by :class:`LastArrival` after a barrier."""

    counter: str        # an int pointer parameter
    slot: Any           # index expression: the block's group's counter
    dst: str            # the __shared__ int that holds the ticket
    pred: Any           # which thread takes it (e.g. tid == 0)
    dst_index: Any = None   # per-warpgroup tickets: dst is an array, this its index
    dst_count: int = 1      # ... of this many ints


class LastArrival(If):
    """``if (dst == last) { body }``: the body runs in the block whose ticket is ``last``
    (an expression of the runtime symbols, e.g. ``n_splits - 1``).  An :class:`If` whose
    condition is the ticket's test, so every walk over the IR enters its body."""

    def __init__(self, dst: str, last: Any, body: Optional[List[Any]] = None,
                 index: Any = None) -> None:
        super().__init__(sympy.Eq(sym(dst), last), list(body or []))
        self.dst, self.last, self.index = dst, last, index


@dataclass
class CounterReset:
    """``if (pred) counter[slot] = 0;``."""

    counter: str
    slot: Any
    pred: Any


@dataclass
class PartialAdd:
    """``regs[j] += buf[offset + j]`` (j < ``width``, 1 or 2 f32 elements, read from L2 with
    ``ld.global.cg``: another block wrote them), where ``pred`` holds; 0.f is added where it
    does not (the register keeps its value bit for bit: it is never -0.f)."""

    buf: str
    offset: Any
    width: int
    regs: Any           # kernels.ir.core.Regs of an f32 frag
    pred: Any = None
    tag: str = ""
