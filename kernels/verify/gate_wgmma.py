"""The dataflow rules of the Hopper wgmma statements (:mod:`kernels.ir.nvidia_wgmma`), run by
the GEMM dataflow pass (:class:`kernels.verify.gate_dataflow.GemmDataflow`) on every simulated
block, loop iteration and thread.  What each rule proves is in the IR module's docstring; the
failures go to the GEMM gate's named checks (``lane_mfma_operands``,
``lane_accumulator_writeback``, ``lds_races``, ``in_bounds``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Set, Tuple

import numpy as np

from ..ir.core import c_eval
from .gate_common import ACC_SH, ID_MASK, ID_MASK0, ID_SH_BUF, ID_SH_C0, ID_ZERO
from ..ir.nvidia_wgmma import (FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaMma, WgmmaWait,
                               operand_elements)
from .wgmma_tables import wgmma_tables

__all__ = ["WgmmaRules"]

_WG = 128
_SH_C0, _SH_BUF, _ZERO = ID_SH_C0, ID_SH_BUF, ID_ZERO   # the dataflow's element identities
_MASK0, _MASK, _ACC_SH = ID_MASK0, ID_MASK, ACC_SH


class WgmmaRules:
    """Asynchronous wgmma state of one simulated block: the groups in flight (their shared
    reads and accumulator registers), the accumulators written since the last
    ``wgmma.fence`` and the shared elements written by the generic proxy since the last
    ``fence.proxy.async``.  ``df`` is the dataflow pass whose registers, shared identities and
    failure list it reads and updates."""

    def __init__(self, df: Any) -> None:
        self.df = df
        self.open: List[Tuple[str, np.ndarray, str, Set[int]]] = []
        self.groups: List[List[Tuple[str, np.ndarray, str, Set[int]]]] = []
        self.unfenced: Set[str] = set()
        # register-A wgmmas: (A frag, its items) read by the open group and each committed one
        self.a_open: List[Tuple[str, Set[int]]] = []
        self.a_groups: List[List[Tuple[str, Set[int]]]] = []
        # 0: visible to the async proxy; 1: written through the generic proxy, not fenced;
        # 2: fenced by its writer, not yet published to the other threads by a barrier
        self.generic = {s.name: np.zeros(s.count, np.int8) for s in df.k.shared}
        self.issues = 0

    # ---- statements ------------------------------------------------------------------------
    def stmt(self, s: Any, env) -> None:
        if isinstance(s, WgmmaMma):
            self.wgmma(s, env)
        elif isinstance(s, WgmmaFence):
            for f in s.pins:    # lg_pin: the compiler sees the registers rewritten there
                self.acc_read(f, range(10 ** 9), env, "pins")
                n = next(x.count for x in self.df.k.frags if x.name == f)
                self.regs_written(f, range(n), env, "lg_pin")
            self.unfenced.clear()
        elif isinstance(s, WgmmaCommit):
            self.groups.append(self.open)
            self.open = []
            self.a_groups.append(self.a_open)
            self.a_open = []
        elif isinstance(s, WgmmaWait):
            self.wait(s, env)
        elif isinstance(s, FenceProxyAsync):
            for v in self.generic.values():
                v[v == 1] = 2

    def barrier(self) -> None:
        """A block barrier publishes every thread's fenced writes to the other warpgroups."""
        for v in self.generic.values():
            v[v == 2] = 0

    def wait(self, s: WgmmaWait, env) -> None:
        while len(self.a_groups) > s.pending:
            for frag in sorted({f for f, _ in self.a_groups.pop(0)} - set(s.pins)):
                self.df.f.add("lane_accumulator_writeback",
                              f"{self.df.where('wgmma.wait_group', env)}: retires a wgmma "
                              f"reading A registers {frag} without pinning {frag} (lg_pin): "
                              "the compiler may reuse them before the wait")
        while len(self.groups) > s.pending:
            for buf, read, frag, _ in self.groups.pop(0):
                # each warpgroup retires its own wgmmas: the simulation runs them in lockstep,
                # the hardware does not, so the retired reads count as reads by every thread
                # until the next barrier (another warpgroup's write needs one in between)
                self.df.lds_touch(SimpleNamespace(buf=buf, tag="wgmma.wait_group"), read,
                                  np.full(read.shape, -1), write=False, env=env)
                if frag not in s.pins:
                    self.df.f.add("lane_accumulator_writeback",
                                  f"{self.df.where('wgmma.wait_group', env)}: retires a wgmma "
                                  f"into {frag} without pinning {frag} (lg_pin): the compiler "
                                  "may move its reads before the wait")

    # ---- hooks the dataflow pass calls -------------------------------------------------------
    def zeroed(self, frag: str, env) -> None:
        """A non-wgmma write of every register of ``frag``."""
        self.acc_read(frag, range(10 ** 9), env, "zeroes")
        self.unfenced.add(frag)

    def regs_written(self, frag: str, idx: Any, env, tag: str) -> None:
        """``frag[idx]`` is written by a non-wgmma instruction (a load): no unretired wgmma
        may read it as a register A, and a later wgmma reading it needs a ``wgmma.fence``
        first."""
        want = set(int(i) for i in idx)
        for grp in self.a_groups + [self.a_open]:
            for f, items in grp:
                if f == frag and items & want:
                    self.df.f.add("lane_mfma_operands",
                                  f"{self.df.where(tag, env)}: overwrites A registers "
                                  f"{frag}{sorted(items & want)[:4]} that a wgmma not yet "
                                  "retired by wgmma.wait_group reads")
                    return
        self.unfenced.add(frag)

    def acc_read(self, frag: str, idx: Any, env, what: str = "reads") -> None:
        """``frag[idx]`` is read (stored, overwritten): no unretired wgmma may write it."""
        want = set(idx) if not isinstance(idx, range) else None
        for grp in self.groups + [self.open]:
            for _, _, f, regs in grp:
                if f == frag and (want is None or regs & want):
                    self.df.f.add("lane_accumulator_writeback",
                                  f"{self.df.where('accumulator ' + frag, env)}: {what} "
                                  f"{frag} while a wgmma writing it is in flight (no "
                                  "wgmma.wait_group retired its group)")
                    return

    def shared_write(self, buf: str, addr: np.ndarray, tag: str, env,
                     landed: bool = True) -> None:
        """``buf[addr]`` is written (from now on; ``landed``: now): no unretired wgmma may
        read it; the write goes through the generic proxy (visible to wgmma only after a
        ``fence.proxy.async`` executed once it landed: :meth:`landed`)."""
        for grp in self.groups + [self.open]:
            for b, read, _, _ in grp:
                if b == buf:
                    hit = np.isin(addr, read)
                    if hit.any():
                        self.df.f.add("lds_races",
                                      f"{self.df.where(tag, env)}: writes {buf}"
                                      f"[{int(addr[np.argmax(hit)])}], which a wgmma not yet "
                                      "retired by wgmma.wait_group reads")
                        return
        if landed:
            self.landed(buf, addr)

    def landed(self, buf: str, addr: np.ndarray) -> None:
        """A generic-proxy write of ``buf[addr]`` lands."""
        ok = (addr >= 0) & (addr < self.generic[buf].shape[0])
        self.generic[buf][addr[ok]] = 1

    # ---- one wgmma -------------------------------------------------------------------------
    def _acc_table(self, atom: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` [thread, item] of each accumulator register (``layout_c``)."""
        tab = wgmma_tables(atom)
        return tab.c_i, tab.c_j

    def _operand(self, op: Any, env, g: int, s: WgmmaMma) -> Any:
        """Identities ``[mn, 16]`` of operand ``op`` for warpgroup ``g`` (None: refused)."""
        df = self.df
        th = np.arange(g * _WG, (g + 1) * _WG)
        st = np.broadcast_to(np.asarray(c_eval(op.start, env), dtype=np.int64), (df.T,))[th]
        where = df.where(s.tag, env)
        if (st != st[0]).any():
            df.f.add("lane_mfma_operands", f"{where}: warpgroup {g}'s {op.buf} descriptor start "
                                           f"differs between its threads ({int(st[0])} vs "
                                           f"{int(st[np.argmax(st != st[0])])})")
            return None
        try:
            el = operand_elements(op, int(st[0]))
        except ValueError as e:
            df.f.add("lane_mfma_operands", f"{where}: warpgroup {g}, {op.buf}: {e}")
            return None
        n = df.lds[op.buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            df.f.add("in_bounds", f"{where}: warpgroup {g} reads {op.buf}"
                                  f"[{int(el.min())}..{int(el.max())}] of a {n}-element array")
            return None
        flat = el.reshape(-1)
        acc = SimpleNamespace(buf=op.buf, tag=s.tag)
        df.lds_touch(acc, flat, np.full(flat.shape, -1), write=False, env=env)
        df.in_flight(acc, flat, np.full(flat.shape, g * _WG), "reads (wgmma)", env)
        gen = self.generic[op.buf][flat]
        if gen.any():
            i = int(flat[np.argmax(gen > 0)])
            why = ("with no fence.proxy.async after the write landed" if gen.max() == 1 else
                   "fenced by its writer but with no barrier since the fence")
            df.f.add("lds_races", f"{where}: warpgroup {g}'s wgmma (async proxy) reads "
                                  f"{op.buf}[{i}], written through the generic proxy {why}")
        ids = df.lds[op.buf][el]
        if (ids < 0).any():
            i = int(el.reshape(-1)[np.argmax(ids.reshape(-1) < 0)])
            df.f.add("lds_races", f"{where}: warpgroup {g}'s wgmma reads {op.buf}[{i}] before "
                                  "anything was written")
            return None
        return el, ids

    def wgmma(self, s: WgmmaMma, env) -> None:
        df = self.df
        fr = s.acc.frag.name
        where = df.where(s.tag, env)
        if fr in self.unfenced:
            df.f.add("lane_mfma_operands", f"{where}: {fr} was written since the last "
                                           "wgmma.fence (a wgmma must follow a fence after "
                                           "other writes of its registers)")
            self.unfenced.discard(fr)
        acc_idx = np.array(s.acc.idx)
        ci, cj = self._acc_table(s.atom)
        if not s.accumulate:
            self.overwritten(fr, acc_idx)
        if s.a_in_regs:
            af = s.a.frag.name
            if af in self.unfenced:
                df.f.add("lane_mfma_operands", f"{where}: A registers {af} were written since "
                                               "the last wgmma.fence (a wgmma reading them must "
                                               "follow a fence)")
                self.unfenced.discard(af)
            self.a_open.append((af, set(s.a.idx)))
        for g in range(df.T // _WG):
            a = self._register_a(s, g, where) if s.a_in_regs else self._operand(s.a, env, g, s)
            b = self._operand(s.b, env, g, s)
            if a is None or b is None:
                continue
            for op, (el, _) in ((s.a, a), (s.b, b)):
                if el is not None:
                    self.open.append((op.buf, el.reshape(-1), fr, set(s.acc.idx)))
            self.issues += 1
            self._multiply(s, g, a[1], b[1], acc_idx, ci, cj, where)

    def overwritten(self, frag: str, idx: np.ndarray) -> None:
        """scale-d 0: the items ``idx`` of ``frag`` start over from this wgmma's product."""
        df = self.df
        df.acc_id[frag][:, idx] = -1
        df.kbits[frag][:, :, idx] = 0
        df.acc_zero[frag][:, idx] = True

    def _a_table(self, atom: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``[64, 16]`` (thread, item) of the register holding ``A[row, k]`` (layout_a)."""
        tab = wgmma_tables(atom)
        return tab.a_lane, tab.a_item

    def _register_a(self, s: WgmmaMma, g: int, where: str) -> Any:
        """Identities ``[64, 16]`` of a register A for warpgroup ``g``: ``A[row, k]`` is item
        ``e`` of thread ``t`` where ``layout_a`` maps ``(t, e)`` to ``(row, k)``; None (and a
        failure) where a register was never loaded."""
        th, it = self._a_table(s.atom)
        ids = self.df.regs[s.a.frag.name][g * _WG + th, np.array(s.a.idx)[it]]
        if (ids < 0).any():
            r, q = (int(x) for x in np.argwhere(ids < 0)[0])
            self.df.f.add("lane_mfma_operands", f"{where}, warpgroup {g}: A register "
                                                f"{s.a.frag.name}[{int(s.a.idx[it[r, q]])}] of "
                                                f"thread {g * _WG + int(th[r, q])} (A[{r}, {q}]) "
                                                "was never loaded")
            return None
        return None, ids

    def _multiply(self, s: WgmmaMma, g: int, A: np.ndarray, B: np.ndarray, acc_idx: np.ndarray,
                  ci: np.ndarray, cj: np.ndarray, where: str) -> None:
        df = self.df
        abuf, bbuf = A >> _SH_BUF, B >> _SH_BUF
        if (abuf != df.buf_id.get(df.lhs, -1)).any() or (bbuf != df.buf_id.get(df.rhs, -1)).any():
            df.f.add("lane_mfma_operands", f"{where}, warpgroup {g}: operand A/B shared elements "
                                           "hold elements of another tensor")
            return
        am, ak, az = (A >> _SH_C0) & _MASK0, A & _MASK, (A & _ZERO) != 0
        bn, bk, bz = (B >> _SH_C0) & _MASK0, B & _MASK, (B & _ZERO) != 0
        for nm, rows in (("A row", am), ("B column", bn)):
            bad = rows != rows[:, :1]
            if bad.any():
                i, q = (int(x) for x in np.argwhere(bad)[0])
                df.f.add("lane_mfma_operands", f"{where}, warpgroup {g}: wgmma {nm.split()[0]} "
                                               f"row {i} mixes {nm}s {int(rows[i, 0])} and "
                                               f"{int(rows[i, q])} (slot {q})")
                return
        kq = ak[0]
        if (ak != kq[None]).any() or (bk != kq[None]).any():
            q = int(np.argmax((ak != kq[None]).any(axis=0) | (bk != kq[None]).any(axis=0)))
            df.f.add("lane_mfma_operands", f"{where}, warpgroup {g}: reduction slot {q} "
                                           f"multiplies A(., k={int(ak[0, q])}) by B(., "
                                           f"k={int(bk[0, q])}) (or mixes k within an operand)")
            return
        if len(set(kq.tolist())) != 16 or len(set((kq // 64).tolist())) != 1 or \
                int(kq[0]) // 64 >= df.kbits[s.acc.frag.name].shape[0]:
            df.f.add("lane_mfma_operands", f"{where}, warpgroup {g}: the 16 slots carry k "
                                           f"{sorted(kq.tolist())} (repeated, or across two "
                                           "64-k windows of the check)")
            return
        fr = s.acc.frag.name
        th = g * _WG + np.arange(_WG)[:, None]                                 # [128, 1]
        it = acc_idx[None, :]                                                  # [1, C]
        want = (am[ci, 0] << _ACC_SH) | bn[cj, 0]                             # [128, C]
        cur = df.acc_id[fr][th, it]
        fresh = cur < 0
        if (~fresh & (cur != want)).any():
            t, e = (int(x) for x in np.argwhere(~fresh & (cur != want))[0])
            df.f.add("lane_mfma_operands", f"{where}: thread {g * _WG + t} accumulator "
                                           f"{fr}[{int(acc_idx[e])}] held another C element "
                                           "than this wgmma adds into it")
            return
        if fresh.any() and not df.acc_zero[fr][np.broadcast_to(th, fresh.shape)[fresh],
                                               np.broadcast_to(it, fresh.shape)[fresh]].all():
            df.f.add("lane_mfma_operands", f"{where}: accumulator {fr} used before it was zeroed")
        one = np.left_shift(np.uint64(1), (kq % 64).astype(np.uint64))        # [16]
        zero = np.uint64(0)
        rowbits = np.bitwise_or.reduce(np.where(~az, one[None, :], zero), axis=1)   # [64]
        colbits = np.bitwise_or.reduce(np.where(~bz, one[None, :], zero), axis=1)   # [N]
        new = rowbits[ci] & colbits[cj]                                        # [128, C]
        w = int(kq[0]) // 64
        old = df.kbits[fr][w][th, it]
        if ((old & new) != 0).any():
            t, e = (int(x) for x in np.argwhere((old & new) != 0)[0])
            df.f.add("lane_mfma_operands", f"{where}: thread {g * _WG + t} accumulator item "
                                           f"{e} adds a k it already summed")
            return
        df.acc_id[fr][th, it] = want
        df.kbits[fr][w][th, it] = old | new
        df.mfma_issues += 1
