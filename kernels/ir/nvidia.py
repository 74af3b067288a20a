"""NVIDIA statements of the kernel IR: ``cp.async`` copies with their commit / wait groups and
``ldmatrix`` loads (issue 20 item 1).  The MMA atom is the existing :class:`~kernels.ir.core.Mfma`
with an NVIDIA :class:`~mfma_specs.spec.MatrixInstruction` (``mma.sync`` m16n8k16 of
:mod:`mfma_specs.nvidia`, warp-wide); ``__syncthreads`` is :class:`~kernels.ir.core.Barrier`.

The rules the verifier applies to them (:mod:`kernels.verify.gate_dataflow`,
:mod:`kernels.verify.gate_static`):

* :class:`CpAsync` is a global load and a shared-memory store in one instruction.  Both halves
  are ordinary :class:`~kernels.ir.core.Access` records (``load``, ``store``), so index math,
  bounds, alignment and bank conflicts are checked exactly as for any access; the load's
  registers are a *staging* frag that exists only in the model (the hardware moves the bytes
  without registers; the printer declares nothing for it).  The shared write is **asynchronous**:
  it belongs to the thread's open group, closed by :class:`CpAsyncCommit`; it lands no later
  than the :class:`CpAsyncWait` that leaves at most ``pending`` newer groups outstanding.  Until
  it lands the element is *in flight*: any read of it, or another write to it, is a race
  (``lds_races``), and after it lands other threads see it only after a barrier (the ordinary
  race rule, applied at the landing point).  A predicated-off copy writes zeros (``src-size``
  0), exactly the zero-fill of a predicated load.
* :class:`LdMatrixLoad` is an LDS load whose ``offset`` is the row address *this lane
  supplies* (``width`` = 8 consecutive 16-bit elements) while its registers receive, per the
  atom's destination layout (``atom.element(lane, item) -> (row, col, matrix)``), element
  ``col`` of the row supplied by lane ``8*matrix + row`` of the same warp.  The address side is
  what the bank model sees; the destination side is what the dataflow moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

from .core import Access

__all__ = ["CpAsync", "CpAsyncCommit", "CpAsyncWait", "LdMatrixLoad"]


@dataclass
class CpAsync:
    """``cp.async`` of ``load.width`` elements: ``load`` (global, into the staging frag) and
    ``store`` (LDS, from the same registers); ``load.pred`` off: the shared vector is zeroed."""

    load: Access
    store: Access
    tag: str = ""

    def __post_init__(self) -> None:
        ld, st = self.load, self.store
        if (ld.kind, ld.space, st.kind, st.space) != ("load", "global", "store", "lds"):
            raise ValueError(f"cp.async {self.tag}: needs a global load and an LDS store, got "
                             f"{ld.kind} {ld.space} and {st.kind} {st.space}")
        if ld.width != st.width or ld.regs != st.regs:
            raise ValueError(f"cp.async {self.tag}: the load and the store must move the same "
                             f"registers ({ld.width} vs {st.width} elements)")
        if st.pred is not None:
            raise ValueError(f"cp.async {self.tag}: the shared write is never predicated (a "
                             "predicated-off copy writes zeros); predicate the load")

    def accesses(self) -> Tuple[Access, Access]:
        """The two halves, in order (:func:`kernels.ir.core.walk` yields them after the
        statement)."""
        return (self.load, self.store)


@dataclass
class CpAsyncCommit:
    """``cp.async.commit_group``: closes this thread's open group of copies."""


@dataclass
class CpAsyncWait:
    """``cp.async.wait_group pending``: waits until at most ``pending`` of this thread's
    committed groups are outstanding (their shared writes have landed)."""

    pending: int

    def __post_init__(self) -> None:
        if not (type(self.pending) is int and 0 <= self.pending <= 7):
            raise ValueError(f"cp.async.wait_group {self.pending!r}: the count must be an int "
                             "in 0..7")


@dataclass
class LdMatrixLoad(Access):
    """``ldmatrix`` (``atom``: :func:`mfma_specs.nvidia.ldmatrix`): see the module docstring."""

    atom: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.atom is None:
            raise ValueError(f"ldmatrix {self.tag}: no atom (mfma_specs.nvidia.ldmatrix)")
        if (self.kind, self.space, self.width) != ("load", "lds", 8):
            raise ValueError(f"ldmatrix {self.tag}: an LDS load of one 8-element row per lane")
        if len(self.regs.idx) != 2 * self.atom.num:
            raise ValueError(f"ldmatrix {self.tag}: {self.atom.name} fills {2 * self.atom.num} "
                             f"16-bit registers halves, got {len(self.regs.idx)}")
        if self.pred is not None:
            raise ValueError(f"ldmatrix {self.tag}: cannot be predicated")


