"""The merge of a block's warps' partials through shared memory (the tensor-core split-KV
decode's tail, :func:`kernels.nvidia.decode_splitkv.emit_row_merge`; issue 20 item 1, the split
kernel's engine piece (5)).  Each warp ``r`` holds, per query row ``j`` of the block, its
running maximum ``m_r`` and sum ``l_r`` (base 2) and its unnormalised ``O_r``, over its own
keys; the block's partial is::

    M = max_r m_r;  w_r = m_r == -inf ? 0 : exp2(m_r - M);  L = sum_r w_r l_r
    O = (sum_r w_r O_r) / L;  LSE = M + log2(L)

* :class:`StoreVar` ``if (pred) buf[offset] = var;`` puts a lane's ``m`` / ``l`` in shared
  memory (``O_r`` goes through ordinary LDS stores of the accumulator's registers);
* :class:`WarpStats`: thread ``j < rows`` reads the ``warps`` pairs ``(m_r, l_r)`` of row ``j``
  and writes ``s_w[r rows + j] = w_r``, ``s_inv[j] = 1 / L`` and ``s_lse[j] = M + log2 L``;
* :class:`WarpCombine`: ``f[e] = (sum_r s_w[r rows + j] s_acc[x(r, e)]) * s_inv[j]`` for
  ``e < n`` (``x``: where warp ``r`` stored row ``j``'s head dim ``c + e``): the normalised
  partial of row ``j`` at head dims ``c .. c + n``.

The rules (:mod:`kernels.verify.warp_merge_rules`): shared memory holds *records* of what was
stored (a variable's row, keys and maximum version; an accumulator element's row, head dim,
keys, visible keys and version); ``WarpStats`` requires each ``(m_r, l_r)`` to be of one row,
one maximum version and the same keys, every warp's row the same and the warps' key sets
disjoint (``online_softmax``); ``WarpCombine`` requires each ``O_r`` element to be of the row
and version its weight was taken against, over the same keys, at head dim ``c + e``
(``lane_mfma_operands`` for a wrong element, ``online_softmax`` for a wrong weight); the result
is the row's O over the union of the warps' keys, normalised, which the partial's store rule
checks against the split's visible keys (``masking_and_tile_skipping``).  Every read and write
is a shared-memory access of the race rule (``lds_races``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .core import Frag

__all__ = ["StoreVar", "WarpStats", "WarpCombine"]


@dataclass
class StoreVar:
    """``if (pred) buf[offset] = var;`` (a float variable to shared memory)."""

    buf: str
    offset: Any
    var: str
    pred: Any = None
    tag: str = ""


@dataclass
class WarpStats:
    """Threads ``tid < rows``: the merged statistics of row ``tid`` over ``warps`` warps (see
    the module docstring)."""

    warps: int
    rows: int
    s_m: str
    s_l: str
    s_w: str
    s_inv: str
    s_lse: str

    def __post_init__(self) -> None:
        if self.warps < 1 or self.rows < 1:
            raise ValueError(f"warp stats: {self.warps} warps x {self.rows} rows")


@dataclass
class WarpCombine:
    """Threads where ``pred`` holds: ``f[0 .. n)`` = the normalised merge of row ``j`` at head
    dims ``c .. c + n`` (``j``, ``c``: index expressions); ``x_offset`` is the offset in
    ``s_acc`` of warp ``r``'s element ``e`` (an index expression of the symbols ``r`` and
    ``e``, the layout the warps stored their O with)."""

    f: Frag
    n: int
    warps: int
    rows: int
    x_offset: Any
    j: Any
    c: Any
    pred: Any
    s_acc: str
    s_w: str
    s_inv: str

    def __post_init__(self) -> None:
        if self.f.dtype != "f32" or self.f.count < self.n:
            raise ValueError(f"warp combine into {self.f.name}: {self.n} f32 registers")
