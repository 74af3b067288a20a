"""NVIDIA Hopper (``sm_90a``) warpgroup MMA as ``layoutalg`` layouts.

``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` is issued by a warpgroup
(4 consecutive warps, 128 threads).  A and B are read by the tensor cores straight from
shared memory through 64-bit *matrix descriptors*; the f32 accumulator lives in registers.
This module states the three facts a kernel builder must get right, each as data a verifier
can evaluate:

* :class:`Wgmma` -- the accumulator fragment ``(thread, item) -> row + 64*col`` (PTX ISA
  9.7.15.5.1.1.1, figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix
  D"): warp ``w`` of the warpgroup owns rows ``16w .. 16w+15``; inside a warp the layout is the
  ``mma.m16n8`` C layout repeated ``N/8`` times along N (``d[4j + e]`` is ``c_e`` of the
  ``j``-th n8 tile).
* :func:`gmma_canonical` -- where the hardware reads operand element ``(mn, k)``: the
  "canonical layouts" table of PTX ISA 9.7.15.5.1.2.1.3, written there in CuTe notation in
  units of 128-bit elements, restated here in bytes::

      K-major,  no swizzle : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
      K-major,  W-byte swz : ((8,m),(T,2k)) : ((W/16 T, SBO),(1,T))
      MN-major, no swizzle : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
      MN-major, W-byte swz : ((T,W/16,m),(8,k)) : ((1,T,LBO),(W/16 T,SBO))

  (``T`` = elements per 16 bytes), followed by ``Swizzle<log2(W/16), 4, 3>`` on the byte
  address.  The swizzle acts on the *absolute* shared-memory address with the descriptor's
  "matrix base offset" field 0, which PTX allows only when the start address's row bits
  (``(start // W) % 8``) are 0: the 8-row swizzle pattern must start on a multiple of
  ``8 * W`` bytes (1024 for the 128-byte swizzle), while the start itself may move inside a
  row (k steps of a K-major operand advance it by 32 bytes).  :func:`gmma_addresses` refuses
  other starts; the kernels align their stages to 1024 bytes.
* :class:`GmmaDescriptor` -- the descriptor bit fields (PTX ISA "Matrix Descriptor Format"):
  bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45
  stride-dimension byte offset >> 4, 49-51 base offset, 62-63 swizzle mode (0 none,
  1 128-byte, 2 64-byte, 3 32-byte).

A may also come from registers (:meth:`Wgmma.layout_a`, the fragment an attention kernel feeds
``P`` through).  What is *not* modelled: the sparse, tf32 and 8-bit variants, and the
descriptor's base-offset field (always 0).  These facts are checked on the CPU against the
PTX examples restated literally (``tests/test_nvidia_wgmma.py``) and, on an H100/H200, by
the GEMM built on them matching ``torch.matmul`` (``tests/test_nvidia_gpu.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from layoutalg import Layout, Swizzle

from .errors import MfmaSpecError

__all__ = ["WARPGROUP", "Wgmma", "wgmma", "GmmaDescriptor", "gmma_canonical", "gmma_swizzle",
           "gmma_addresses", "SWIZZLE_MODE"]

WARPGROUP = 128
#: descriptor bits 62-63 for a swizzle width in bytes (0 = no swizzle)
SWIZZLE_MODE: Dict[int, int] = {0: 0, 128: 1, 64: 2, 32: 3}
_PTX = "PTX ISA 8.x section 9.7.15.5.1 (wgmma register fragments and shared-memory layouts)"


@dataclass(frozen=True)
class Wgmma:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}`` (A and B from shared
    memory, f32 accumulator in ``n/2`` registers per thread)."""

    dtype: str
    n: int
    m: int = 64
    k: int = 16

    @property
    def name(self) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n{self.n}k16.f32.{self.dtype}.{self.dtype}"

    @property
    def acc_registers(self) -> int:
        return self.n // 2

    def layout_c(self) -> Layout:
        """``(thread, item) -> row + 64*col`` of the accumulator.

        thread = ``t + 4g + 32w`` (``t = lane % 4``, ``g = lane // 4``, ``w`` = warp in the
        warpgroup); item = ``e + 4j`` with ``e`` in 0..3: row ``16w + g + 8*(e >> 1)``,
        col ``8j + 2t + (e & 1)``."""
        return Layout(((4, 8, 4), (2, 2, self.n // 8)), ((128, 1, 16), (64, 8, 512)))

    def layout_a(self) -> Layout:
        """A from registers: ``(thread, item) -> row + 64*col`` of the 64x16 A tile (PTX figure
        "WGMMA .m64nNk16 register fragment layout for matrix A"): warp ``w`` owns rows
        ``16w ..``; inside a warp the ``mma.m16n8k16`` A layout, item ``e`` (``a_e``, two per
        32-bit register, low half first) at row ``16w + g + 8*((e >> 1) & 1)``, col
        ``2t + (e & 1) + 8*(e >> 2)``."""
        return Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512)))

    def element_a(self, thread: int, item: int) -> Tuple[int, int]:
        """``(row, k)`` of A register item ``item`` (0..7) of ``thread``."""
        if not (isinstance(thread, int) and 0 <= thread < WARPGROUP):
            raise MfmaSpecError(f"{self.name}: thread {thread!r} out of range 0..127")
        if not (isinstance(item, int) and 0 <= item < 8):
            raise MfmaSpecError(f"{self.name}: A item {item!r} out of range 0..7")
        v = self.layout_a()((thread, item))
        return v % 64, v // 64

    def element_c(self, thread: int, item: int) -> Tuple[int, int]:
        """``(row, col)`` of accumulator register ``item`` of ``thread``."""
        if not (isinstance(thread, int) and 0 <= thread < WARPGROUP):
            raise MfmaSpecError(f"{self.name}: thread {thread!r} out of range 0..127")
        if not (isinstance(item, int) and 0 <= item < self.acc_registers):
            raise MfmaSpecError(f"{self.name}: item {item!r} out of range "
                                f"0..{self.acc_registers - 1}")
        v = self.layout_c()((thread, item))
        return v % 64, v // 64


def wgmma(dtype: str, n: int) -> Wgmma:
    """The m64nNk16 atom for ``dtype`` in {"f16", "bf16"} and ``n`` a multiple of 8 in 8..256."""
    key = str(dtype).replace("torch.", "").lower()
    key = {"float16": "f16", "half": "f16", "fp16": "f16", "bfloat16": "bf16"}.get(key, key)
    if key not in ("f16", "bf16"):
        raise MfmaSpecError(f"wgmma m64nNk16 is modelled for f16 and bf16 inputs, not {dtype!r}")
    if not (isinstance(n, int) and 8 <= n <= 256 and n % 8 == 0):
        raise MfmaSpecError(f"wgmma m64nNk16: N must be a multiple of 8 in 8..256, got {n!r}")
    return Wgmma(key, n)


# ------------------------------------------------------------------ shared-memory operands

def gmma_swizzle(width: int) -> Swizzle:
    """The byte-address swizzle of a ``width``-byte swizzle mode (``Swizzle<B,4,3>``)."""
    if width not in SWIZZLE_MODE:
        raise MfmaSpecError(f"GMMA swizzle width must be 0, 32, 64 or 128 bytes, got {width!r}")
    return Swizzle({0: 0, 32: 1, 64: 2, 128: 3}[width], 4, 3)


def gmma_canonical(major: str, width: int, elem_bytes: int, mn: int, k: int,
                   lbo: int, sbo: int) -> Layout:
    """``(mn, k) -> byte offset`` (before the swizzle) at which the tensor cores read element
    ``(mn, k)`` of an ``mn x k`` operand described by ``(major, width, lbo, sbo)``.

    ``major``: "K" (k contiguous) or "MN"; ``width``: swizzle width in bytes (0 = none);
    ``lbo``/``sbo``: the leading/stride byte offsets as they go into the descriptor."""
    if major not in ("K", "MN"):
        raise MfmaSpecError(f"major must be 'K' or 'MN', got {major!r}")
    if elem_bytes not in (1, 2, 4):
        raise MfmaSpecError(f"element size must be 1, 2 or 4 bytes, got {elem_bytes!r}")
    gmma_swizzle(width)
    T = 16 // elem_bytes
    if major == "K":
        if mn % 8 or k % T:
            raise MfmaSpecError(f"K-major operand {mn}x{k}: mn must be a multiple of 8 and k of "
                                f"{T} (16 bytes)")
        rows = (8, mn // 8)
        if width == 0:
            return Layout((rows, (T, k // T)), ((16, sbo), (elem_bytes, lbo)))
        if k * elem_bytes > width:
            raise MfmaSpecError(f"K-major operand: {k} elements of k ({k * elem_bytes} B) do not "
                                f"fit one {width}-byte swizzle row")
        return Layout((rows, (T, k // T)), ((width, sbo), (elem_bytes, 16)))
    if k % 8:
        raise MfmaSpecError(f"MN-major operand {mn}x{k}: k must be a multiple of 8")
    if width == 0:
        if mn % T:
            raise MfmaSpecError(f"MN-major operand: mn={mn} must be a multiple of {T}")
        return Layout(((T, mn // T), (8, k // 8)), ((elem_bytes, sbo), (16, lbo)))
    W = width // 16
    if mn % (T * W):
        raise MfmaSpecError(f"MN-major operand with {width}-byte swizzle: mn={mn} must be a "
                            f"multiple of {T * W}")
    return Layout(((T, W, mn // (T * W)), (8, k // 8)), ((elem_bytes, 16, lbo), (width, sbo)))


def gmma_addresses(desc: "GmmaDescriptor", major: str, elem_bytes: int, mn: int,
                   k: int) -> np.ndarray:
    """``[mn, k]`` array of the shared-memory byte addresses the tensor cores read for an
    ``mn x k`` operand given descriptor ``desc`` (the canonical layout, then the swizzle on
    the absolute address).  Refuses a swizzled start whose row bits ``(start // width) % 8``
    are not 0: that needs the base-offset field, which is not modelled."""
    width = desc.swizzle_width
    lay = gmma_canonical(major, width, elem_bytes, mn, k, desc.lbo, desc.sbo)
    if width and (desc.start // width) % 8:
        raise MfmaSpecError(f"descriptor start {desc.start}: with a {width}-byte swizzle the "
                            f"8-row pattern must start on a multiple of {8 * width} bytes "
                            f"(row bits {(desc.start // width) % 8} != 0 need the base offset "
                            "field, not modelled)")
    sw = gmma_swizzle(width)
    out = np.empty((mn, k), dtype=np.int64)
    for i in range(mn):
        for j in range(k):
            out[i, j] = sw(desc.start + lay((i, j)))
    return out


@dataclass(frozen=True)
class GmmaDescriptor:
    """A wgmma matrix descriptor: start address, LBO and SBO in bytes, swizzle width in bytes."""

    start: int
    lbo: int
    sbo: int
    swizzle_width: int = 0

    def __post_init__(self) -> None:
        for name, v, hi in (("start", self.start, 1 << 18), ("lbo", self.lbo, 1 << 18),
                            ("sbo", self.sbo, 1 << 18)):
            if not (isinstance(v, int) and 0 <= v < hi and v % 16 == 0):
                raise MfmaSpecError(f"descriptor {name}={v!r}: must be a multiple of 16 bytes "
                                    f"in 0..{hi - 16} (14-bit field of 16-byte units)")
        gmma_swizzle(self.swizzle_width)

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        return ((self.start >> 4) | (self.lbo >> 4) << 16 | (self.sbo >> 4) << 32
                | SWIZZLE_MODE[self.swizzle_width] << 62)

    def constant_bits(self) -> int:
        """The descriptor without its start-address field (the part a kernel can print as a
        constant and OR with a run-time ``address >> 4``)."""
        return self.encode() & ~0x3FFF

    @classmethod
    def decode(cls, value: int) -> "GmmaDescriptor":
        if not (isinstance(value, int) and 0 <= value < 1 << 64):
            raise MfmaSpecError(f"a descriptor is a 64-bit unsigned value, got {value!r}")
        if value >> 49 & 7:
            raise MfmaSpecError("descriptor has a non-zero base offset (bits 49-51): not modelled")
        mode = value >> 62 & 3
        width = {v: w for w, v in SWIZZLE_MODE.items()}[mode]
        return cls((value & 0x3FFF) << 4, (value >> 16 & 0x3FFF) << 4,
                   (value >> 32 & 0x3FFF) << 4, width)
