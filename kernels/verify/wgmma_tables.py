"""The index tables of one Hopper ``wgmma.m64n{N}k16`` atom over a 128-thread warpgroup, built
once per process and shared by every engine that reads them (the GEMM dataflow's wgmma rules,
:mod:`kernels.verify.gate_wgmma`; the TMA GEMM gate's stores, :mod:`kernels.verify.gate_tma`;
the attention dataflow, :mod:`kernels.verify.attention_wgmma`).

The tables are a function of the atom's value alone (:class:`mfma_specs.nvidia_wgmma.Wgmma`
is a frozen dataclass; its layouts depend on ``n`` only), so :func:`wgmma_tables` memoises
them by that value.  Each engine used to evaluate ``layout_c`` (128 x N/2 layout calls) again
for every simulated block, which was half of a warp-specialised attention verification.  The
arrays are read-only: a caller that wrote into one would change every later verification.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["WgmmaTables", "wgmma_tables"]

_WG = 128


class WgmmaTables:
    """The tables the accumulator rules read (the ``MfmaTables`` interface) for one
    ``wgmma.m64n{N}k16`` over a 128-thread warpgroup: ``c_i`` / ``c_j`` [thread, item] the
    accumulator element (row, column) each register holds (``layout_c``), ``a_lane`` /
    ``a_item`` [64, 16] the thread and item holding register-A element ``(row, k)``
    (``layout_a``).  Raises ``ValueError`` if ``layout_a`` leaves an element of A unheld."""

    def __init__(self, atom: Any) -> None:
        lay = atom.layout_c()
        v = np.array([[lay((t, e)) for e in range(atom.acc_registers)] for t in range(_WG)])
        self.c_i, self.c_j = v % 64, v // 64
        la = atom.layout_a()
        self.a_lane = np.full((64, 16), -1, np.int64)
        self.a_item = np.full((64, 16), -1, np.int64)
        for t in range(_WG):
            for e in range(8):
                x = la((t, e))
                self.a_lane[x % 64, x // 64], self.a_item[x % 64, x // 64] = t, e
        if (self.a_lane < 0).any():
            raise ValueError(f"{atom.name}: layout_a does not cover its 64 x 16 A")
        for a in (self.c_i, self.c_j, self.a_lane, self.a_item):
            a.setflags(write=False)
        self.M, self.N, self.K, self.lanes = 64, atom.n, 16, _WG


@lru_cache(maxsize=None)
def wgmma_tables(atom: Any) -> WgmmaTables:
    """The (memoised, read-only) :class:`WgmmaTables` of ``atom`` (hashable by value)."""
    return WgmmaTables(atom)
