"""The dataflow rules of :mod:`kernels.ir.warp_merge` (a block's warps' partials merged through
shared memory; the rules are listed in that module's docstring).  A mixin of
:class:`kernels.verify.attention_dataflow.AttentionDataflow`: shared memory written by these
statements (and by LDS stores of an accumulator's registers) holds :class:`Records` instead of
element identities."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict

import numpy as np

from ..ir.core import Access, sym
from ..ir.warp_merge import StoreVar, WarpCombine, WarpStats
from .attention_ids import OUT, UNSET, result_text
from .attention_static import eval_expr

__all__ = ["WarpMergeRules", "Records"]

VAR, ACC, WEIGHT, INV, LSE = 1, 2, 3, 4, 5
_KIND = {VAR: "a variable", ACC: "an accumulator element", WEIGHT: "a weight",
         INV: "a reciprocal sum", LSE: "a log-sum-exp"}


class Records:
    """What each element of one shared array holds: kind, row, head dim, maximum version (a
    weight: the version it was taken against), keys and visible keys."""

    def __init__(self, n: int, kw: int) -> None:
        self.kind = np.zeros(n, np.int8)
        self.row = np.full(n, -1, np.int64)
        self.col = np.full(n, -1, np.int64)
        self.ver = np.zeros(n, np.int64)
        self.kbits = np.zeros((n, kw), np.uint64)
        self.vbits = np.zeros((n, kw), np.uint64)


class WarpMergeRules:
    """``store_var`` / ``stash_acc`` / ``warp_stats`` / ``warp_combine`` / ``load_record``."""

    def _recs(self, buf: str) -> Records:
        if not hasattr(self, "_records"):
            self._records: Dict[str, Records] = {}
        if buf not in self._records:
            self._records[buf] = Records(self.lds[buf].size, self.kw)
        return self._records[buf]

    def holds_records(self, buf: str) -> bool:
        return buf in getattr(self, "_records", {})

    def _touch(self, buf: str, tag: str, addr: np.ndarray, th: np.ndarray, write: bool) -> bool:
        """The race rule for ``addr`` (one per thread ``th``); False if outside the array."""
        n = self.lds[buf].size
        if ((addr < 0) | (addr >= n)).any():
            t = int(th[np.argmax((addr < 0) | (addr >= n))])
            self.fail("in_bounds", f"{tag}: thread {t} touches {buf}[{int(addr[th == t][0])}], "
                                   f"outside its {n} elements")
            return False
        self.lds_touch(SimpleNamespace(buf=buf, tag=tag), addr, th, write)
        return True

    def _get(self, buf: str, addr: np.ndarray, kind: int, what: str):
        r = self._recs(buf)
        bad = r.kind[addr] != kind
        if bad.any():
            i = int(np.argmax(bad))
            self.fail("lds_races", f"{what}: {buf}[{int(addr[i])}] holds "
                                   f"{_KIND.get(int(r.kind[addr[i]]), 'nothing written')}, not "
                                   f"{_KIND[kind]}")
            return None
        return r

    def _put(self, buf: str, addr: np.ndarray, kind: int, row, col, ver, kbits, vbits) -> None:
        r = self._recs(buf)
        r.kind[addr], r.row[addr], r.col[addr], r.ver[addr] = kind, row, col, ver
        r.kbits[addr], r.vbits[addr] = kbits, vbits

    def _pred(self, pred: Any, env) -> np.ndarray:
        return np.broadcast_to(np.asarray(True if pred is None else eval_expr(pred, env)),
                               (self.T,)).astype(bool)

    def _expr(self, e: Any, env) -> np.ndarray:
        return np.broadcast_to(np.asarray(eval_expr(e, env), dtype=np.int64), (self.T,))

    # ---- stores -------------------------------------------------------------------------
    def store_var(self, s: StoreVar, env) -> None:
        v = self.vars.get(s.var)
        if v is None:
            self.fail("online_softmax", f"{s.tag or s.buf}: {s.var} is not set")
            return
        on = np.nonzero(self._pred(s.pred, env))[0]
        addr = self._expr(s.offset, env)[on]
        if self._touch(s.buf, s.tag or f"{s.buf}.store", addr, on, True):
            self._put(s.buf, addr, VAR, v.row[on], -1, v.ver[on], v.kbits[on], v.vbits[on])

    def stash_acc(self, a: Access, env) -> None:
        """An LDS store of accumulator registers: records of (row, head dim, version, keys);
        a zero-padded row is no partial to keep, and O from split probabilities must hold
        both parts."""
        acc = self.acc[a.regs.frag.name]
        on = np.nonzero(self._pred(a.pred, env))[0]
        off = self._expr(a.offset, env)[on]
        idx = np.array(a.regs.idx)
        if not self.check_pairs(acc, idx, a.tag):
            return
        for j, i in enumerate(a.regs.idx):
            if (acc.row[on, i] < 0).any():
                t = int(on[np.argmax(acc.row[on, i] < 0)])
                self.fail("lane_accumulator_writeback", f"{a.tag}: thread {t} stores "
                                                        f"{a.regs.frag.name}[{i}], which holds no "
                                                        "query row's O (a zero-padded row)")
                return
            if not self._touch(a.buf, a.tag, off + j, on, True):
                return
            self._put(a.buf, off + j, ACC, acc.row[on, i], acc.col[on, i], acc.ver[on, i],
                      acc.kbits[on, i], acc.vbits[on, i])

    # ---- the merge ----------------------------------------------------------------------
    def warp_stats(self, s: WarpStats) -> None:
        R, n = s.warps, s.rows
        th = np.arange(min(n, self.T))
        what = "warp stats"
        ms, ls = [], []
        for r in range(R):
            addr = r * n + th
            for buf, out in ((s.s_m, ms), (s.s_l, ls)):
                if not self._touch(buf, what, addr, th, False):
                    return
                rec = self._get(buf, addr, VAR, what)
                if rec is None:
                    return
                out.append((rec.row[addr], rec.ver[addr], rec.kbits[addr], rec.vbits[addr]))
        row = ms[0][0]
        seen = np.zeros((len(th), self.kw), np.uint64)
        for r, ((mr, mv, mk, _), (lr, lv, lk, _)) in enumerate(zip(ms, ls)):
            bad = (mr != lr) | (mv != lv) | (mk != lk).any(axis=1)
            if bad.any():
                j = int(np.argmax(bad))
                self.fail("online_softmax", f"{what}: row {j} warp {r}: the maximum "
                                            f"({result_text(mr[j])}) and the sum "
                                            f"({result_text(lr[j])}) are of different rows, "
                                            "maximum versions or keys")
                return
            if (mr != row).any():
                j = int(np.argmax(mr != row))
                self.fail("online_softmax", f"{what}: row {j}: warp {r} holds "
                                            f"{result_text(mr[j])}, warp 0 "
                                            f"{result_text(row[j])}")
                return
            if ((seen & mk) != 0).any():
                j = int(np.argmax(((seen & mk) != 0).any(axis=1)))
                self.fail("online_softmax", f"{what}: row {j}: warp {r} shares keys with an "
                                            "earlier warp (counted twice)")
                return
            seen |= mk
        vis = np.bitwise_or.reduce(np.stack([x[3] for x in ls]), axis=0)
        for r, (mr, mv, mk, mvis) in enumerate(ms):
            addr = r * n + th
            if self._touch(s.s_w, what, addr, th, True):
                self._put(s.s_w, addr, WEIGHT, mr, -1, mv, mk, mvis)
        for buf, kind in ((s.s_inv, INV), (s.s_lse, LSE)):
            if self._touch(buf, what, th, th, True):
                self._put(buf, th, kind, row, -1, 0, seen, vis)

    def warp_combine(self, s: WarpCombine, env) -> None:
        on = np.nonzero(self._pred(s.pred, env))[0]
        j, c = self._expr(s.j, env)[on], self._expr(s.c, env)[on]
        what = f"warp combine into {s.f.name}"
        acc = self.accs(s.f.name)
        acc.kind = OUT
        keys = np.zeros((len(on), self.kw), np.uint64)
        vis = np.zeros((len(on), s.n, self.kw), np.uint64)
        row = None
        for r in range(s.warps):
            wa = r * s.rows + j
            if not self._touch(s.s_w, what, wa, on, False):
                return
            w = self._get(s.s_w, wa, WEIGHT, what)
            if w is None:
                return
            wrow, wver, wk = w.row[wa], w.ver[wa], w.kbits[wa]
            if row is None:
                row = wrow
            for e in range(s.n):
                env2 = dict(env)
                env2[sym("r")], env2[sym("e")] = r, e
                xa = self._expr(s.x_offset, env2)[on]
                if not self._touch(s.s_acc, what, xa, on, False):
                    return
                x = self._get(s.s_acc, xa, ACC, what)
                if x is None:
                    return
                if (x.row[xa] != wrow).any() or (x.col[xa] != c + e).any():
                    i = int(np.argmax((x.row[xa] != wrow) | (x.col[xa] != c + e)))
                    self.fail("lane_mfma_operands", f"{what}: thread {int(on[i])} warp {r} "
                                                    f"element {e}: O({result_text(x.row[xa][i])}"
                                                    f", d {int(x.col[xa][i])}) under the weight "
                                                    f"of {result_text(wrow[i])} at d "
                                                    f"{int(c[i] + e)}")
                    return
                if (x.ver[xa] != wver).any() or (x.kbits[xa] != wk).any():
                    i = int(np.argmax((x.ver[xa] != wver) | (x.kbits[xa] != wk).any(axis=1)))
                    self.fail("online_softmax", f"{what}: thread {int(on[i])} warp {r}: O was "
                                                "accumulated under another maximum, or over "
                                                "other keys, than its weight was taken against")
                    return
                vis[:, e] |= x.vbits[xa]
            if (wrow != row).any():
                self.fail("online_softmax", f"{what}: the warps' weights are of different rows")
                return
            keys |= wk
        if not self._touch(s.s_inv, what, j, on, False):
            return
        inv = self._get(s.s_inv, j, INV, what)
        if inv is None:
            return
        if (inv.row[j] != row).any() or (inv.kbits[j] != keys).any():
            self.fail("online_softmax", f"{what}: divided by the sum of another row or of other "
                                        "keys than the merged O's")
            return
        idx = np.arange(s.n)
        acc.row[on[:, None], idx] = row[:, None]
        acc.col[on[:, None], idx] = c[:, None] + idx
        acc.kbits[on[:, None], idx] = keys[:, None, :]
        acc.vbits[on[:, None], idx] = vis
        acc.norm[on[:, None], idx] = True

    def load_record(self, a: Access, env) -> None:
        """An LDS load of a log-sum-exp record into a register (what the LSE store then
        writes): the record's row and visible keys."""
        on = np.nonzero(self._pred(a.pred, env))[0]
        addr = self._expr(a.offset, env)[on]
        if a.width != 1 or not self._touch(a.buf, a.tag, addr, on, False):
            return
        rec = self._get(a.buf, addr, LSE, a.tag)
        if rec is None:
            return
        row = np.full(self.T, -1, np.int64)
        vb = np.zeros((self.T, self.kw), np.uint64)
        row[on], vb[on] = rec.row[addr], rec.vbits[addr]
        self.lse_state[a.regs.frag.name] = (row, vb)
        self.regs[a.regs.frag.name][:, a.regs.idx[0]] = UNSET
