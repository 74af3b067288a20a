"""The NVIDIA shared-memory statements in the attention dataflow: ``cp.async`` copies with their
commit / wait groups and ``ldmatrix`` loads (:mod:`kernels.ir.nvidia`), for the prefill built as
IR (:mod:`kernels.nvidia.flash_ir`).  A mixin of
:class:`kernels.verify.attention_dataflow.AttentionDataflow`; the rules are the ones the GEMM
dataflow applies (:mod:`kernels.verify.gate_dataflow`, the docstring of
:mod:`kernels.ir.nvidia`), on the attention pass's element identities:

* a :class:`~kernels.ir.nvidia.CpAsync` loads its global vector (identities, zero flag where
  the predicate is off) into the model-only staging registers, and its shared write joins the
  thread's open group; the write is *in flight* until a
  :class:`~kernels.ir.nvidia.CpAsyncWait` retires its group, and any access to an element in
  flight is an ``lds_races`` failure; where it lands it is an ordinary write of that thread
  (the barrier rule applies from there);
* an :class:`~kernels.ir.nvidia.LdMatrixLoad`: lane ``l`` receives item ``e`` = element ``col``
  of the row that lane ``8 matrix + row`` of its warp addresses (``atom.element(l, e)``).
"""

from __future__ import annotations

from typing import Any, List

import numpy as np

from .attention_ids import UNSET
from .gate_common import ldmatrix_lane_table
from .attention_static import eval_expr

__all__ = ["AsyncSharedRules"]


class AsyncSharedRules:
    """``cp_async`` / ``cp_async_commit`` / ``cp_async_wait`` / ``ldmatrix`` / ``in_flight``."""

    def _async_state(self) -> None:
        if not hasattr(self, "inflight"):
            self.inflight = {n: np.zeros(a.size, bool) for n, a in self.lds.items()}
            self.open_group: List[Any] = []
            self.async_groups: List[List[Any]] = []

    def in_flight(self, buf: str, addr: np.ndarray, thr: np.ndarray, what: str,
                  tag: str) -> None:
        """No access may touch a shared element whose cp.async write has not landed."""
        self._async_state()
        hit = self.inflight[buf][addr]
        if hit.any():
            i = int(np.argmax(hit))
            self.fail("lds_races", f"{tag}: thread {int(thr[i])} {what} {buf}[{int(addr[i])}] "
                                   "while a cp.async write to it is in flight (no "
                                   "cp.async.wait_group retired its group)")

    def cp_async(self, s: Any, env) -> None:
        """The load fills the staging registers; the shared write is in flight until a wait
        retires its group."""
        self._async_state()
        self.access(s.load, env)
        st, T = s.store, self.T
        off = np.broadcast_to(np.asarray(eval_expr(st.offset, env), dtype=np.int64), (T,))
        addr = (off[:, None] + np.arange(st.width)[None, :]).reshape(-1)
        thr = np.repeat(np.arange(T), st.width)
        if addr.min() < 0 or addr.max() >= self.lds[st.buf].size:
            return   # reported by the static pass (in_bounds)
        self.lds_touch(st, addr, thr, True)
        self.in_flight(st.buf, addr, thr, "writes", st.tag)
        self.wg_shared_write(st.buf, addr, st.tag, env, landed=False)
        vals = self.regs[st.regs.frag.name][:, np.array(st.regs.idx)].reshape(-1)
        self.inflight[st.buf][addr] = True
        self.open_group.append((st, addr, thr, vals))

    def cp_async_commit(self) -> None:
        self._async_state()
        self.async_groups.append(self.open_group)
        self.open_group = []

    def cp_async_wait(self, pending: int) -> None:
        """Every committed group but the ``pending`` newest lands here."""
        self._async_state()
        while len(self.async_groups) > pending:
            for st, addr, thr, vals in self.async_groups.pop(0):
                self.inflight[st.buf][addr] = False
                self.wg_landed(st.buf, addr)
                self.lds_touch(st, addr, thr, True)
                self.lds[st.buf][addr] = vals

    def ldmatrix(self, a: Any, env) -> None:
        """Lane ``l`` receives item ``e`` = element ``col`` of the row that lane
        ``8*matrix + row`` of its warp addresses."""
        self._async_state()
        T, atom = self.T, a.atom
        src_lane, col = ldmatrix_lane_table(atom)                 # [32, items]
        off = np.broadcast_to(np.asarray(eval_expr(a.offset, env), dtype=np.int64), (T,))
        th = np.arange(T)
        src = (th // 32 * 32)[:, None] + src_lane[th % 32]         # [T, items]
        addr = off[src] + col[th % 32]                             # [T, items]
        thr = np.broadcast_to(th[:, None], addr.shape).reshape(-1)
        flat = addr.reshape(-1)
        if flat.min() < 0 or flat.max() >= self.lds[a.buf].size:
            return   # reported by the static pass (in_bounds)
        self.lds_touch(a, flat, thr, False)
        self.in_flight(a.buf, flat, thr, "reads", a.tag)
        vals = self.lds[a.buf][addr]
        if (vals == UNSET).any():
            t, e = (int(x) for x in np.argwhere(vals == UNSET)[0])
            self.fail("lds_races", f"{a.tag}: thread {t} receives {a.buf}[{int(addr[t, e])}] "
                                   f"(ldmatrix item {e}) before anything was written")
        self.regs[a.regs.frag.name][:, np.array(a.regs.idx)] = vals
