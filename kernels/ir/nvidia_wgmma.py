"""Hopper warpgroup-MMA statements of the kernel IR (issue 20 item 1): ``wgmma.mma_async`` with
both operands read from shared memory through matrix descriptors, its fence / commit / wait
groups, and the generic-to-async proxy fence the ``cp.async`` writes need before a wgmma reads
them.

The rules the verifier applies (:mod:`kernels.verify.gate_wgmma`, reported under the same named
checks as every GEMM):

* :class:`WgmmaMma` - each warpgroup (128 consecutive threads) reads operand element
  ``(mn, k)`` at the shared address its :class:`GmmaOperand` descriptor gives
  (:func:`mfma_specs.nvidia_wgmma.gmma_addresses`, the PTX canonical layouts); A's row ``i``
  must be one row of the A tensor, B's row ``j`` one column of C, and A's k equal B's k in
  every one of the 16 slots (``lane_mfma_operands``); accumulator item ``e`` of thread ``t``
  receives ``D[row, col]`` of :meth:`mfma_specs.nvidia_wgmma.Wgmma.layout_c`
  (``lane_accumulator_writeback`` then checks what is stored).  The descriptor's start must
  be uniform over the warpgroup and every address inside the shared array (``in_bounds``).
* :class:`WgmmaMma` with A from registers (``a`` a :class:`~kernels.ir.core.Regs` of 8
  16-bit items, the ``.rs`` form an attention kernel feeds ``P`` through): register item ``e``
  of thread ``t`` of the warpgroup is ``A[row, k]`` of
  :meth:`mfma_specs.nvidia_wgmma.Wgmma.layout_a`; the 64 x 16 A the tensor cores see is built
  from the registers by that layout, then paired with B exactly as a shared A
  (``lane_mfma_operands``: every row one row of the A tensor, every slot's k B's k).  The A
  registers are read asynchronously too: written since the last ``wgmma.fence``, or written
  again before the ``wgmma.wait_group`` retiring a wgmma that reads them, is refused
  (``lane_mfma_operands``), and that wait must pin them (``lane_accumulator_writeback``).
* :class:`WgmmaMma` with ``accumulate=False`` (scale-d 0): the accumulator items start over
  from this product (``acc = A B``) instead of adding to what they held; an engine that does
  not model it refuses it (the TMA per-role engine, ``lane_mfma_operands``).
* :class:`WgmmaFence` - a wgmma whose accumulator was written by another instruction (a zero
  fill) since the last ``wgmma.fence`` is refused (``lane_mfma_operands``).
* :class:`WgmmaCommit` / :class:`WgmmaWait` - wgmmas run asynchronously: the accumulators they
  write may be read (stored, zeroed) only after the ``wgmma.wait_group`` that retires their
  group (``lane_accumulator_writeback``), and the shared elements they read may be written
  again only after it (``lds_races``).  Each wait names the accumulator frags it pins
  (``lg_pin``: the compiler sees the registers written at issue, not at the wait); a wait
  that retires a wgmma without pinning its accumulator is refused.
* :class:`FenceProxyAsync` - ``cp.async`` and ``st.shared`` write through the generic proxy,
  wgmma reads through the async proxy: a shared element written by the generic proxy since the
  last ``fence.proxy.async`` executed after the write landed, and a barrier after that fence
  (each thread fences its own writes; another warpgroup sees them after the barrier), is not
  visible to a wgmma (``lds_races``).

The shared arrays a wgmma reads are 1024-byte aligned in the printed kernel (the swizzle acts on
the absolute address; :mod:`kernels.printer.cuda` rounds the dynamic base up and the
``declarations`` check proves each array's offset), so the model's addresses relative to the
array are the hardware's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Tuple, Union

import numpy as np

from mfma_specs.nvidia_wgmma import GmmaDescriptor, Wgmma, gmma_canonical

from .core import Regs

__all__ = ["GmmaOperand", "WgmmaMma", "WgmmaFence", "WgmmaCommit", "WgmmaWait",
           "FenceProxyAsync", "WGMMA_STATEMENTS", "operand_elements"]

_ELEM_BYTES = 2


@dataclass(frozen=True)
class GmmaOperand:
    """One shared-memory operand of a wgmma: array ``buf``, ``start`` (an element offset in
    it, a sympy expression uniform over the warpgroup) and the descriptor's constant fields
    ``desc`` (LBO, SBO, swizzle; its start field 0), read ``major`` ("K" or "MN") as an
    ``mn x 16`` operand."""

    buf: str
    start: Any
    desc: GmmaDescriptor
    major: str
    mn: int

    def __post_init__(self) -> None:
        if self.major not in ("K", "MN"):
            raise ValueError(f"wgmma operand {self.buf}: major must be 'K' or 'MN', got "
                             f"{self.major!r}")
        if self.desc.start != 0:
            raise ValueError(f"wgmma operand {self.buf}: the descriptor's constant part has "
                             f"start 0 (the start is the operand's `start`), got "
                             f"{self.desc.start}")


@lru_cache(maxsize=64)
def _canonical(major: str, width: int, lbo: int, sbo: int, mn: int) -> np.ndarray:
    lay = gmma_canonical(major, width, _ELEM_BYTES, mn, 16, lbo, sbo)
    return np.array([[lay((i, j)) for j in range(16)] for i in range(mn)], dtype=np.int64)


def operand_elements(op: GmmaOperand, start: int) -> np.ndarray:
    """``[mn, 16]`` element offsets (in ``op.buf``) the tensor cores read for ``op`` with its
    start at element ``start`` (the PTX canonical layout, then the swizzle on the byte
    address).  Raises :class:`ValueError` for a start the descriptor cannot encode (not a
    multiple of 16 bytes, or a swizzled start off the 8-row pattern)."""
    d = op.desc
    sb = int(start) * _ELEM_BYTES
    w = d.swizzle_width
    if sb < 0 or sb % 16 or sb >= 1 << 18:
        raise ValueError(f"descriptor start {sb} B: a multiple of 16 bytes in 0..2^18")
    if w and (sb // w) % 8:
        raise ValueError(f"descriptor start {sb} B: with a {w}-byte swizzle the 8-row pattern "
                         f"must start on a multiple of {8 * w} bytes")
    x = sb + _canonical(op.major, w, d.lbo, d.sbo, op.mn)
    if w:
        bits = {32: 1, 64: 2, 128: 3}[w]
        x = x ^ (((x >> 7) & ((1 << bits) - 1)) << 4)       # Swizzle<bits, 4, 3> on bytes
    return x // _ELEM_BYTES


@dataclass
class WgmmaMma:
    """``acc (+)= A B`` by ``wgmma.mma_async.m64n{N}k16`` (``atom``) of each warpgroup, B
    (``N x 16``) from shared memory, A (``64 x 16``) from shared memory (a
    :class:`GmmaOperand`) or from registers (a :class:`Regs` of 8 ``atom.dtype`` items per
    thread, in the order of :meth:`~mfma_specs.nvidia_wgmma.Wgmma.layout_a`)."""

    atom: Wgmma
    acc: Regs
    a: Union[GmmaOperand, Regs]
    b: GmmaOperand
    tag: str = ""
    # False: scale-d 0, ``acc = A B`` (the old accumulator values are not read; what the
    # attention kernels' first S = Q K^T step does instead of zeroing S: 64 moves a block)
    accumulate: bool = True
    # scale-d 0 only: the accumulator printed as an output-only asm operand (``"=f"``,
    # kernels.nvidia.wgmma_prelude.wgmma_wrapper), so the compiler need not keep its dead old
    # values up to the issue (the warp-specialised prefill's S: kernels.nvidia.wgmma_ws_ir)
    write_only: bool = False

    def __post_init__(self) -> None:
        if self.write_only and self.accumulate:
            raise ValueError(f"wgmma {self.tag}: write_only is the scale-d 0 form "
                             "(accumulate=False)")
        if len(self.acc.idx) != self.atom.acc_registers or self.acc.frag.dtype != "f32":
            raise ValueError(f"wgmma {self.tag}: {self.atom.name} accumulates into "
                             f"{self.atom.acc_registers} f32 registers, got "
                             f"{len(self.acc.idx)} x {self.acc.frag.dtype}")
        if self.a_in_regs:
            fr, idx = self.a.frag, list(self.a.idx)
            if fr.dtype != self.atom.dtype or len(idx) != 8 or idx[0] % 2 or \
                    idx != list(range(idx[0], idx[0] + 8)):
                raise ValueError(f"wgmma {self.tag}: a register A is 8 consecutive "
                                 f"{self.atom.dtype} items starting at an even one (4 32-bit "
                                 f"registers), got {fr.name}{idx} x {fr.dtype}")
            if self.b.mn != self.atom.n:
                raise ValueError(f"wgmma {self.tag}: B is an {self.atom.n} x 16 operand, got "
                                 f"{self.b.mn}")
            return
        if not isinstance(self.a, GmmaOperand):
            raise ValueError(f"wgmma {self.tag}: A is a GmmaOperand (shared memory) or Regs "
                             f"(registers), got {type(self.a).__name__}")
        if self.a.mn != 64 or self.a.major != "K" or self.b.mn != self.atom.n:
            raise ValueError(f"wgmma {self.tag}: A is a 64 x 16 K-major operand and B an "
                             f"{self.atom.n} x 16 one (got A {self.a.mn} {self.a.major}-major, "
                             f"B {self.b.mn})")

    @property
    def a_in_regs(self) -> bool:
        """A comes from registers (``wgmma ... {a0..a3}, db``), not a descriptor."""
        return isinstance(self.a, Regs)

    @property
    def trans_b(self) -> int:
        """The instruction's ``tnspB`` immediate: 1 for an MN-major B."""
        return 1 if self.b.major == "MN" else 0


@dataclass
class WgmmaFence:
    """``wgmma.fence.sync.aligned``: orders earlier register writes before later wgmmas.
    ``pins``: frags pinned (``lg_pin``) just before it, so the compiler computes them above the
    issue that follows (no wgmma may have them in flight there): without them ptxas sank the
    warp-specialised prefill's O rescale and P conversion below its S / P V issue and spilled
    (kernels.nvidia.wgmma_ws_ir); no instruction."""

    pins: Tuple[str, ...] = ()


@dataclass
class WgmmaCommit:
    """``wgmma.commit_group.sync.aligned``: closes the warpgroup's open group of wgmmas."""


@dataclass
class WgmmaWait:
    """``wgmma.wait_group.sync.aligned pending``: at most ``pending`` committed groups stay in
    flight; ``pins`` are the accumulator frags pinned after it (``lg_pin``)."""

    pending: int
    pins: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (type(self.pending) is int and 0 <= self.pending <= 7):
            raise ValueError(f"wgmma.wait_group {self.pending!r}: the count must be an int in "
                             "0..7")


@dataclass
class FenceProxyAsync:
    """``fence.proxy.async.shared::cta``: this thread's landed generic-proxy shared writes
    become visible to the async proxy (wgmma operand reads)."""


WGMMA_STATEMENTS = (WgmmaMma, WgmmaFence, WgmmaCommit, WgmmaWait, FenceProxyAsync)
