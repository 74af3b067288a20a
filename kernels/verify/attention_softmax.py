"""The attention rules of the attention gate's dataflow pass (:mod:`kernels.verify.attention_dataflow`):
masking, row maxima, cross-lane exchanges, the online softmax (every exponent uses its own row's
maximum; rescales pair the right versions), normalisation, the decode dot products, and the
split-KV partial statistics and their log-sum-exp merge.  A mixin: the state it reads and writes
(``self.vars``, ``self.accs``, ``self.fail``, ...) is the dataflow pass's."""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..ir.attention import (ExpScores, FinalNormalize, LaneXor, MaskScores, MergeFinal, MergeStep,
                            PartialStats, Rescale, RowMax, SoftmaxUpdate, VecAxpy, VecDot,
                            swizzle_source_lane)
from ..ir.core import Access
from .attention_ids import (MERGED, OUT, PAD, POS_MASK, PROBS, SCORES, UNSET, VarIds,
                            check_merge_slots, decode_ids, key_bits, popcount, result_text,
                            rowid)
from .attention_static import eval_expr
from .gate_common import bits_below, bits_to_list

__all__ = ["SoftmaxRules"]


class SoftmaxRules:
    """The statement handlers of :mod:`kernels.ir.attention` (mixed into
    :class:`kernels.verify.attention_dataflow.AttentionDataflow`)."""

    # ---- softmax -------------------------------------------------------------------------
    def _s_items(self, frag, items, what: str):
        acc = self.acc.get(frag.name)
        if acc is None or acc.kind != SCORES:
            self.fail("online_softmax", f"{what}: {frag.name} holds no scores")
            return None
        idx = np.array(items)
        n = acc.row.shape[1]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            # a softmax statement reading past its accumulator (e.g. a 192-key block's S read
            # as 256 columns): refused, not an IndexError out of the verifier
            bad = int(idx[(idx < 0) | (idx >= n)][0])
            self.fail("in_bounds", f"{what}: reads {frag.name}[{bad}], past its {n} registers")
            return None
        full = bits_below(self.D, self.dw)
        if (acc.dbits[:, idx] != full[None, None, :]).any():
            t, c = (int(x) for x in np.argwhere((acc.dbits[:, idx] != full).any(axis=2))[0])
            self.fail("lane_mfma_operands", f"{what}: thread {t} score item {items[c]} is not "
                                            f"summed over all {self.D} head dims")
        return acc, idx

    def mask(self, s: MaskScores, env) -> None:
        got = self._s_items(s.frag, s.items, "mask")
        if got is None:
            return
        acc, idx = got
        T = self.T
        for c, (i, r_e, k_e, cond) in enumerate(zip(s.items, s.rows, s.keys, s.conds)):
            r = np.broadcast_to(np.asarray(eval_expr(r_e, env), dtype=np.int64), (T,))
            kk = np.broadcast_to(np.asarray(eval_expr(k_e, env), dtype=np.int64), (T,))
            cv = np.broadcast_to(np.asarray(eval_expr(cond, env)), (T,))
            pos = acc.row[:, i] & POS_MASK
            real = acc.row[:, i] != PAD     # zero-padded mma.sync rows: no query row to mask
            off = real & ((pos != r) | (acc.col[:, i] != kk))
            if off.any():
                t = int(np.argmax(off))
                self.fail("masking_and_tile_skipping",
                          f"mask item {i}: thread {t} holds S({result_text(acc.row[t, i])}, "
                          f"{int(acc.col[t, i])}) but the condition is printed for "
                          f"({int(r[t])}, {int(kk[t])})")
                return
            vis = self.inst.visible(acc.row[:, i], kk)
            if (real & (cv != vis)).any():
                t = int(np.argmax(real & (cv != vis)))
                self.fail("masking_and_tile_skipping",
                          f"mask item {i}: thread {t} (row {int(r[t])}, key {int(kk[t])}) is "
                          f"{'kept' if cv[t] else 'masked'} but is "
                          f"{'visible' if vis[t] else 'not visible'}")
                return
            acc.masked[:, i] = ~cv

    def rowmax(self, s: RowMax) -> None:
        got = self._s_items(s.frag, s.items, f"row max {s.dst}")
        if got is None:
            return
        acc, idx = got
        rows = acc.row[:, idx]
        if (rows != rows[:, :1]).any():
            t = int(np.argmax((rows != rows[:, :1]).any(axis=1)))
            self.fail("online_softmax", f"row max {s.dst}: thread {t} combines rows "
                                        f"{sorted(set(rows[t].tolist()))}")
            return
        v = VarIds(self.T, self.kw)
        v.row = rows[:, 0].copy()
        v.kbits = np.bitwise_or.reduce(key_bits(acc.col[:, idx], self.kw), axis=1)
        v.set[:] = True
        self.vars[s.dst] = v

    def vecdot(self, s: VecDot) -> None:
        """Decode: a lane's partial dot product of one query row and one key."""
        A = self.regs[s.a.frag.name if hasattr(s.a, "frag") else s.a.name][:, list(s.a_items)]
        B = self.regs[s.b.name][:, list(s.b_items)]
        what = f"dot -> {s.dst.name}[{s.item}]"
        if (A == UNSET).any() or (B == UNSET).any():
            self.fail("lane_mfma_operands", f"{what}: an operand register was never loaded")
            return
        at, abh, arow, acol, _ = decode_ids(A)
        bt, bbh, brow, bcol, _ = decode_ids(B)
        q, kk = self.roles.query, self.roles.key
        if (at != self.tensor.get(q)).any() or (bt != self.tensor.get(kk)).any():
            self.fail("lane_mfma_operands", f"{what}: needs {q} times {kk}")
            return
        rid = rowid(abh, arow)
        if (rid != rid[:, :1]).any() or (brow != brow[:, :1]).any() or \
                (bbh != bbh[:, :1]).any():
            self.fail("lane_mfma_operands", f"{what}: mixes query rows or keys")
            return
        if (acol != bcol).any():
            self.fail("lane_mfma_operands", f"{what}: multiplies different head dims")
            return
        if (self.kv_of(abh[:, 0]) != bbh[:, 0]).any():
            self.fail("lane_mfma_operands", f"{what}: K of another (batch, kv head) than the "
                                            "query's (GQA mapping)")
            return
        srt = np.sort(acol, axis=1)
        if (srt[:, 1:] == srt[:, :-1]).any():
            self.fail("lane_mfma_operands", f"{what}: a head dim used twice")
            return
        acc = self.accs(s.dst.name)
        acc.kind = SCORES
        i = s.item
        acc.row[:, i] = rid[:, 0]
        acc.col[:, i] = brow[:, 0]
        acc.dbits[:, i] = np.bitwise_or.reduce(key_bits(acol, self.dw), axis=1)
        acc.masked[:, i] = False
        self.mfma_issues += 1

    def vecaxpy(self, s: VecAxpy) -> None:
        """Decode: O[row][d] += p(row, key) * V(key, d) for this lane's head dims."""
        P = self.acc.get(s.p.name)
        what = f"axpy {s.acc.name} += {s.p.name}[{s.p_item}] * {s.x.name}"
        if P is None or P.kind != PROBS:
            self.fail("lane_mfma_operands", f"{what}: {s.p.name} holds no probability")
            return
        X = self.regs[s.x.name][:, list(s.x_items)]
        if (X == UNSET).any():
            self.fail("lane_mfma_operands", f"{what}: V register never loaded")
            return
        xt, xbh, xrow, xcol, _ = decode_ids(X)
        j = s.p_item
        prow, pkey, pm, pv = P.row[:, j], P.col[:, j], P.masked[:, j], P.ver[:, j]
        if (xt != self.tensor.get(self.roles.value)).any() or (xrow != pkey[:, None]).any():
            self.fail("lane_mfma_operands", f"{what}: V rows are not the probability's key")
            return
        if (xbh != self.kv_of(prow >> 22)[:, None]).any():
            self.fail("lane_mfma_operands", f"{what}: V of another (batch, kv head) (GQA "
                                            "mapping)")
            return
        acc = self.accs(s.acc.name)
        if acc.kind is None:
            acc.kind = OUT
        idx = np.array(s.acc_items)
        cur_r, cur_c = acc.row[:, idx], acc.col[:, idx]
        fresh = cur_r < 0
        if not acc.zeroed[:, idx][fresh].all():
            self.fail("lane_mfma_operands", f"{what}: accumulator used before it was zeroed")
        bad = ~fresh & ((cur_r != prow[:, None]) | (cur_c != xcol))
        if bad.any():
            self.fail("lane_mfma_operands", f"{what}: accumulator element holds another (row, d)")
            return
        acc.row[:, idx] = prow[:, None]
        acc.col[:, idx] = xcol
        if (acc.ver[:, idx] != pv[:, None]).any():
            self.fail("online_softmax", f"{what}: O accumulated under another maximum (missing "
                                        "rescale)")
        kb = key_bits(pkey, self.kw)[:, None, :]
        if ((acc.kbits[:, idx] & kb) != 0).any():
            self.fail("lane_mfma_operands", f"{what}: a key accumulated twice")
            return
        acc.kbits[:, idx] |= kb
        acc.vbits[:, idx] |= np.where(~pm[:, None, None], kb, np.uint64(0))

    def lanexor(self, s: LaneXor, env) -> None:
        if s.frag is not None:
            self.lanexor_item(s, env)
            return
        v = self.vars.get(s.var)
        if v is None:
            self.fail("cross_lane_reductions", f"exchange of {s.var} before it is set")
            return
        src, src_lane = self._src_lanes(s, env)
        self.exchanges += 1
        if (v.row[src] != v.row).any():
            t = int(np.argmax(v.row[src] != v.row))
            self.fail("cross_lane_reductions", f"{s.method} {s.var} ({s.op}): lane {t % 64} of "
                                               f"wave {t // 64} (row {int(v.row[t])}) combines "
                                               f"lane {int(src_lane[t])} (row {int(v.row[src[t]])})")
            return
        if (v.ver[src] != v.ver).any():
            self.fail("online_softmax", f"{s.method} {s.var}: lanes of different maximum "
                                        "versions combined")
        if s.op == "sum" and ((v.kbits & v.kbits[src]) != 0).any():
            t = int(np.argmax(((v.kbits & v.kbits[src]) != 0).any(axis=1)))
            self.fail("cross_lane_reductions", f"{s.method} {s.var} (sum): lanes {t % 64} and "
                                               f"{int(src_lane[t])} both hold some keys: they "
                                               "would be counted twice")
            return
        v.kbits = v.kbits | v.kbits[src]
        v.vbits = v.vbits | v.vbits[src]

    def _src_lanes(self, s: LaneXor, env):
        T = self.T
        tid = np.arange(T)
        lane = tid % 64
        if s.method == "shfl_xor":      # __shfl_xor_sync on a 32-lane warp
            lane = tid % 32
            src_lane = lane ^ (int(s.pattern) & 31)
        elif s.method == "swizzle":
            src_lane = swizzle_source_lane(int(s.pattern), lane)
        else:
            addr = np.broadcast_to(np.asarray(eval_expr(s.addr, env), dtype=np.int64), (T,))
            src_lane = (addr >> 2) & 63
        return tid - lane + src_lane, src_lane

    def lanexor_item(self, s: LaneXor, env) -> None:
        """Exchange of a partial dot product: same (row, key), disjoint head dims."""
        acc = self.acc.get(s.frag.name)
        i = s.item
        what = f"{s.method} {s.frag.name}[{i}] ({s.op})"
        if acc is None or acc.kind != SCORES or s.op != "sum":
            self.fail("cross_lane_reductions", f"{what}: only sums of scores are exchanged")
            return
        src, src_lane = self._src_lanes(s, env)
        self.exchanges += 1
        bad = (acc.row[src, i] != acc.row[:, i]) | (acc.col[src, i] != acc.col[:, i])
        if bad.any():
            t = int(np.argmax(bad))
            self.fail("cross_lane_reductions", f"{what}: lane {t % 64} of wave {t // 64} "
                                               f"(row {result_text(acc.row[t, i])}, key "
                                               f"{int(acc.col[t, i])}) combines lane "
                                               f"{int(src_lane[t])} (row "
                                               f"{result_text(acc.row[src[t], i])}, key "
                                               f"{int(acc.col[src[t], i])})")
            return
        if ((acc.dbits[:, i] & acc.dbits[src, i]) != 0).any():
            t = int(np.argmax(((acc.dbits[:, i] & acc.dbits[src, i]) != 0).any(axis=1)))
            self.fail("cross_lane_reductions", f"{what}: lanes {t % 64} and {int(src_lane[t])} "
                                               "both hold some head dims: counted twice")
            return
        acc.dbits[:, i] = acc.dbits[:, i] | acc.dbits[src, i]

    def softmax_update(self, s: SoftmaxUpdate) -> None:
        m, mt = self.vars.get(s.m), self.vars.get(s.m_tile)
        if m is None or mt is None:
            self.fail("online_softmax", f"softmax update: {s.m} / {s.m_tile} not set")
            return
        both = m.set & mt.set
        if (m.row[both] != mt.row[both]).any():
            self.fail("online_softmax", f"softmax update: {s.m} and {s.m_tile} hold different "
                                        "rows")
            return
        old = m.ver.copy()
        m.row = np.where(m.set, m.row, mt.row)
        m.kbits = m.kbits | mt.kbits
        m.ver = self.version_ids(m.row, m.kbits)
        m.set[:] = True
        a = VarIds(self.T, self.kw)
        a.row, a.ver_from, a.ver, a.set[:] = m.row.copy(), old, m.ver.copy(), True
        self.vars[s.alpha] = a
        mc = VarIds(self.T, self.kw)
        mc.row, mc.kbits, mc.ver, mc.set[:] = m.row.copy(), m.kbits.copy(), m.ver.copy(), True
        self.vars[s.mc] = mc

    def version_ids(self, row: np.ndarray, kbits: np.ndarray) -> np.ndarray:
        """A running maximum's identity: (row, set of keys it is the maximum of).  Two lanes
        hold the same maximum value exactly when these agree; 0 is the empty maximum (-inf)."""
        out = np.zeros(row.shape[0], np.int64)
        for t in range(row.shape[0]):
            if not kbits[t].any():
                continue
            key = (int(row[t]), kbits[t].tobytes())
            out[t] = self.ver_table.setdefault(key, len(self.ver_table) + 1)
        return out

    def _scale(self, target_ver, target_row, target_set, alpha: VarIds, what: str):
        rows_ok = ~target_set | (target_row == alpha.row[..., None] if target_row.ndim == 2
                                 else target_row == alpha.row)
        if not rows_ok.all():
            self.fail("online_softmax", f"{what}: rescaled by the alpha of another row")
            return None
        src = alpha.ver_from[..., None] if target_ver.ndim == 2 else alpha.ver_from
        if (target_ver != src).any():
            self.fail("online_softmax", f"{what}: rescaled from maximum version "
                                        f"{int(src.flat[0])} but it is at version "
                                        f"{int(target_ver.flat[0])}")
            return None
        return alpha.ver[..., None] if target_ver.ndim == 2 else alpha.ver

    def exp_scores(self, s: ExpScores) -> None:
        l, mc, alpha = self.vars.get(s.l), self.vars.get(s.mc), self.vars.get(s.alpha)
        if l is None or mc is None or alpha is None:
            self.fail("online_softmax", "exp: l / mc / alpha not set")
            return
        nv = self._scale(l.ver, l.row, l.set, alpha, f"{s.l} *= {s.alpha}")
        if nv is None:
            return
        l.ver = nv.copy()
        got = self._s_items(s.s, s.s_items, "exp")
        if got is None:
            return
        acc, idx = got
        rows = acc.row[:, idx]
        if (rows != mc.row[:, None]).any():
            t = int(np.argmax((rows != mc.row[:, None]).any(axis=1)))
            self.fail("online_softmax", f"exp: thread {t} subtracts the maximum of row "
                                        f"{int(mc.row[t])} from a score of another row")
            return
        kb = key_bits(acc.col[:, idx], self.kw)                       # [T, n, kw]
        covered = ((kb & ~mc.kbits[:, None, :]) == 0).all(axis=2)
        if not covered.all():
            t, c = (int(x) for x in np.argwhere(~covered)[0])
            self.fail("online_softmax", f"exp: thread {t} key {int(acc.col[t, idx[c]])} is not "
                                        "covered by the running maximum (exp2 could overflow)")
        if (l.ver != mc.ver).any():
            self.fail("online_softmax", f"exp: {s.l} is at another maximum version than {s.mc}")
        new = np.bitwise_or.reduce(kb, axis=1)
        if ((l.kbits & new) != 0).any():
            self.fail("online_softmax", f"exp: {s.l} already summed one of these keys")
        l.kbits = l.kbits | new
        visk = np.bitwise_or.reduce(np.where(~acc.masked[:, idx, None], kb, np.uint64(0)), axis=1)
        l.vbits = l.vbits | visk
        l.row = np.where(l.set, l.row, mc.row)
        if (l.set & (l.row != mc.row)).any():
            self.fail("online_softmax", f"exp: {s.l} belongs to another row")
        l.set[:] = True
        P = self.accs(s.p.name)
        P.kind = PROBS
        pi = np.array(s.p_items)
        P.row[:, pi] = rows
        P.col[:, pi] = acc.col[:, idx]
        P.masked[:, pi] = acc.masked[:, idx]
        P.ver[:, pi] = mc.ver[:, None]

    def rescale(self, s: Rescale) -> None:
        acc = self.acc.get(s.frag.name)
        alpha = self.vars.get(s.alpha)
        if acc is None or alpha is None:
            self.fail("online_softmax", f"rescale of {s.frag.name}: nothing to rescale")
            return
        idx = np.array(s.items)
        nv = self._scale(acc.ver[:, idx], acc.row[:, idx], acc.row[:, idx] >= 0, alpha,
                         f"{s.frag.name} *= {s.alpha}")
        if nv is not None:
            acc.ver[:, idx] = nv

    def normalize(self, s: FinalNormalize) -> None:
        acc, l, mc = self.acc.get(s.o.name), self.vars.get(s.l), self.vars.get(s.mc)
        if l is None or mc is None:
            self.fail("online_softmax", "normalise: l / mc not set")
            return
        idx = np.array(s.items)
        if acc is None:
            acc = self.accs(s.o.name)
        rows = acc.row[:, idx]
        has = rows >= 0
        if (has & (rows != l.row[:, None])).any():
            self.fail("online_softmax", "normalise: O divided by the sum of another row")
            return
        if (has & ((acc.kbits[:, idx] != l.kbits[:, None, :]).any(axis=2))).any():
            t, c = (int(x) for x in np.argwhere(has & (acc.kbits[:, idx] != l.kbits[:, None, :])
                                                .any(axis=2))[0])
            self.fail("online_softmax", f"normalise: thread {t} O item {int(idx[c])} sums "
                                        f"{int(popcount(acc.kbits[t, idx[c]]).sum())} keys but "
                                        f"{s.l} sums {int(popcount(l.kbits[t]).sum())}")
            return
        if (has & (acc.ver[:, idx] != l.ver[:, None])).any() or (l.ver != mc.ver).any():
            self.fail("online_softmax", "normalise: O, l and the maximum are at different "
                                        "versions")
            return
        if not self.check_pairs(acc, idx, "normalise"):
            return
        acc.norm[:, idx] = True
        self.lse_state[s.lse.name] = (l.row.copy(), l.vbits.copy())

    # ---- split-KV ------------------------------------------------------------------------
    def partial_stats(self, s: PartialStats) -> None:
        """The split's (max, sum) are taken next to its unnormalised O: same row, same keys,
        same maximum version (what the reduction needs to rescale O exactly)."""
        acc, l, m = self.acc.get(s.o.name), self.vars.get(s.l), self.vars.get(s.m)
        if l is None or m is None:
            self.fail("online_softmax", "partial stats: l / m not set")
            return
        if acc is None:
            acc = self.accs(s.o.name)
        idx = np.array(s.items)
        rows = acc.row[:, idx]
        has = rows >= 0
        if (l.ver != m.ver).any() or (l.row != m.row).any():
            self.fail("online_softmax", f"partial stats: {s.l} and {s.m} are of different rows "
                                        "or maximum versions")
            return
        if (has & (rows != l.row[:, None])).any() or \
                (has & (acc.ver[:, idx] != l.ver[:, None])).any():
            self.fail("online_softmax", "partial stats: O is of another row or maximum version "
                                        "than the stored (max, sum)")
            return
        if (has & (acc.kbits[:, idx] != l.kbits[:, None, :]).any(axis=2)).any():
            self.fail("online_softmax", "partial stats: O and the sum are over different keys")
            return
        if not self.check_pairs(acc, idx, "partial stats"):
            return
        acc.partial[:, idx] = True
        st_m, st_l = self.roles.stats
        self.stat_buf = {s.m_out.name: st_m, s.l_out.name: st_l}
        self.lse_state[s.m_out.name] = (l.row.copy(), l.vbits.copy())
        self.lse_state[s.l_out.name] = (l.row.copy(), l.vbits.copy())

    def _merge_var(self, name: str) -> Optional[VarIds]:
        v = self.vars.get(name)
        if v is None:
            self.fail("reduction_reads_partials", f"merge: {name} not declared")
        return v

    def merge_step(self, s: MergeStep) -> None:
        """One split merged: O, max and sum of the SAME (batch, head) and split, O's head dims
        equal to the accumulator's, a split never merged twice."""
        what = f"merge into {s.o.name}"
        X = self.regs[s.x.name][:, list(s.x_items)]
        MP = self.regs[s.mp.name][:, [s.mp_item]]
        LP = self.regs[s.lp.name][:, [s.lp_item]]
        if (X == UNSET).any() or (MP == UNSET).any() or (LP == UNSET).any():
            self.fail("reduction_reads_partials", f"{what}: an operand register was never "
                                                  "loaded")
            return
        xt, xbh, xs, xd, _ = decode_ids(X)
        mt, mbh, ms, _, _ = decode_ids(MP)
        lt, lbh, ls, _, _ = decode_ids(LP)
        tens = self.tensor
        po, pm, pl = self.roles.partials
        if (xt != tens.get(po)).any() or (mt != tens.get(pm)).any() or \
                (lt != tens.get(pl)).any():
            self.fail("reduction_reads_partials", f"{what}: operands are not ({po}, {pm}, {pl})")
            return
        bh, sp = xbh[:, :1], xs[:, :1]
        if (xbh != bh).any() or (mbh != bh).any() or (lbh != bh).any() or (xs != sp).any() or \
                (ms != sp).any() or (ls != sp).any():
            t = int(np.argmax((xbh != bh).any(1) | (mbh != bh).any(1) | (lbh != bh).any(1)
                              | (xs != sp).any(1) | (ms != sp).any(1) | (ls != sp).any(1)))
            self.fail("reduction_reads_partials", f"{what}: thread {t} merges O of (bh, split) "
                                                  f"{list(zip(xbh[t].tolist(), xs[t].tolist()))}"
                                                  f" with max ({int(mbh[t, 0])}, {int(ms[t, 0])})"
                                                  f" and sum ({int(lbh[t, 0])}, {int(ls[t, 0])})")
            return
        rid = rowid(bh[:, 0], 0)
        bit = key_bits(sp[:, 0], self.kw)                                      # [T, kw]
        acc = self.accs(s.o.name)
        idx = np.array(s.o_items)
        if not check_merge_slots(acc, idx, rid, xd, what, self.fail):
            return
        if ((acc.kbits[:, idx] & bit[:, None, :]) != 0).any():
            self.fail("reduction_reads_partials", f"{what}: a split merged twice")
            return
        acc.kind = MERGED
        acc.row[:, idx] = rid[:, None]
        acc.col[:, idx] = xd
        acc.kbits[:, idx] |= bit[:, None, :]
        for name in (s.m, s.l):
            v = self._merge_var(name)
            if v is None:
                return
            if (v.set & (v.row != rid)).any() or ((v.kbits & bit) != 0).any():
                self.fail("reduction_reads_partials", f"{what}: {name} belongs to another "
                                                      "(batch, head) or already merged this "
                                                      "split")
                return
            v.row, v.set[:] = rid.copy(), True
            v.kbits = v.kbits | bit

    def merge_final(self, s: MergeFinal) -> None:
        acc, l, m = self.acc.get(s.o.name), self._merge_var(s.l), self._merge_var(s.mc)
        if acc is None or l is None or m is None:
            return
        idx = np.array(s.items)
        if (acc.row[:, idx] != l.row[:, None]).any() or (m.row != l.row).any() or \
                (acc.kbits[:, idx] != l.kbits[:, None, :]).any() or (m.kbits != l.kbits).any():
            self.fail("reduction_reads_partials", "merge: O, max and sum merged different "
                                                  "(batch, head) or splits")
            return
        acc.norm[:, idx] = True
        self.lse_state[s.lse.name] = (l.row.copy(), l.kbits.copy())

    def store_merged(self, a: Access, i: int, cs: List[np.ndarray], t_on: np.ndarray) -> None:
        """Combine kernel: each stored O / LSE element merged all n_splits partials of its own
        (batch, head) (and O its own head dim), normalised."""
        fr = a.regs.frag.name
        ns = self.inst.values["n_splits"]
        allb = bits_below(ns, self.kw)
        if fr in self.lse_state:
            row, kb = self.lse_state[fr]
            col_ok = np.ones(len(t_on), bool)
        else:
            acc = self.acc.get(fr)
            if acc is None or acc.kind != MERGED:
                self.fail("reduction_reads_partials", f"{a.tag}: stores {fr}, which merges no "
                                                      "partial")
                return
            if not acc.norm[t_on, i].all():
                self.fail("online_softmax", f"{a.tag}: stores an unnormalised merged O")
            row, kb = acc.row[:, i], acc.kbits[:, i]
            col_ok = acc.col[t_on, i] == cs[1][t_on]
        bad = (row[t_on] != cs[0][t_on]) | ~col_ok | (kb[t_on] != allb).any(axis=1)
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            got = bits_to_list(kb[t])
            self.fail("reduction_reads_partials", f"{a.tag}: thread {t} stores to "
                                                  f"{result_text(cs[0][t])} the merge of "
                                                  f"{result_text(row[t])} over splits {got[:8]}"
                                                  f"{'...' if len(got) > 8 else ''} (want all "
                                                  f"{ns})")
