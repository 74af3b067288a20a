"""The dataflow rules of the tensor-core decode's warp statements (:mod:`kernels.ir.warp_registers`)
and of ``S = Q K^T`` on ``mma.sync`` (Q as the A operand, zero rows past the block's heads).
A mixin of :class:`kernels.verify.attention_dataflow.AttentionDataflow`: it reads the pass's
register identities (``regs``), variables (``vars``), accumulators (``acc``) and the spec's
roles, and reports to ``lane_mfma_operands``, ``cross_lane_reductions`` and ``online_softmax``.

Zero-padded rows: an A row whose every element is a zero (a :class:`~kernels.ir.warp_registers
.PackWord` zero half, or a predicated-off load) contributes nothing; its accumulator elements
hold the row :data:`PAD`, which every later rule carries along (its probabilities, the O^T
columns they make) and which no store may write (``lane_accumulator_writeback``: a stored
element must hold the row it is stored to).

Zero reduction slots (a head_dim padded to the lane maps' width, :mod:`kernels.nvidia
.decode_padded`): a slot whose A column and B row are both zero fill (predicated-off loads, or
constant zero halves) at a K head dim past D contributes no head dim; zero fill on one side only is refused (a real
row with a zero element, or a zero-filled K element, is as before: a key past seqlen_kv keeps
its key and must be masked).  The scores' head-dim sets are then checked by the softmax rules
to be exactly ``[0, D)``, so a slot zeroed that should have been summed is a missing head dim.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from ..ir.warp_registers import PackWord, RoundProbs, ShflBroadcast, SplitProbs
from .attention_ids import (OUT, PAD, PROBS, SCORES, UNSET, ZERO_ID, VarIds, decode_ids,
                            result_text, rowid)
from .attention_static import eval_expr

__all__ = ["WarpRegisterRules", "PAD", "ZERO_ID"]


class WarpRegisterRules:
    """``pack_word`` / ``shfl_broadcast`` / ``split_probs`` / ``round_probs`` /
    ``mma_scores_qk`` / ``mma_pv_pa``."""

    def _parts(self) -> Dict[str, str]:
        if not hasattr(self, "_prob_parts"):
            self._prob_parts: Dict[str, str] = {}
        return self._prob_parts

    # ---- (2) operands built from registers ----------------------------------------------
    def pack_word(self, s: PackWord) -> None:
        for item, half in ((2 * s.word, s.lo), (2 * s.word + 1, s.hi)):
            if half is None:
                self.regs[s.dst.name][:, item] = ZERO_ID
            else:
                self.regs[s.dst.name][:, item] = self.regs[half[0].name][:, half[1]]
        self.acc.pop(s.dst.name, None)        # a register operand now, not an accumulator

    # ---- (3) the broadcast of a lane's variable -----------------------------------------
    def shfl_broadcast(self, s: ShflBroadcast, env) -> None:
        v = self.vars.get(s.src)
        what = f"__shfl_sync({s.src}, {s.lane}) -> {s.dst}"
        if v is None:
            self.fail("cross_lane_reductions", f"{what}: {s.src} is not set")
            return
        tid = np.arange(self.T)
        lane = np.broadcast_to(np.asarray(eval_expr(s.lane, env), dtype=np.int64), (self.T,))
        src = tid - tid % 32 + (lane & 31)
        self.exchanges += 1
        d = VarIds(self.T, self.kw)
        for f in ("row", "kbits", "vbits", "ver", "ver_from", "set"):
            setattr(d, f, getattr(v, f)[src].copy())
        self.vars[s.dst] = d

    # ---- (4) probabilities split hi + lo ------------------------------------------------
    def split_probs(self, s: SplitProbs) -> None:
        P = self.acc.get(s.p.name)
        if P is None or P.kind != PROBS:
            self.fail("online_softmax", f"split probs: {s.p.name} holds no probabilities")
            return
        idx = np.array(s.items)
        for part, fr in (("hi", s.hi), ("lo", s.lo)):
            dst = self.accs(fr.name)
            dst.kind = PROBS
            for f in ("row", "col", "masked", "ver"):
                getattr(dst, f)[:, idx] = getattr(P, f)[:, idx]
            self._parts()[fr.name] = part

    def round_probs(self, s: RoundProbs) -> None:
        """``dst`` holds the probabilities' (row, key, masked, maximum version) at the same
        items: one 16-bit operand of P rounded once."""
        P = self.acc.get(s.p.name)
        idx = np.array(s.items)
        if P is None or P.kind != PROBS or (P.row[:, idx] == -1).any():
            self.fail("online_softmax", f"round probs: {s.p.name}{list(s.items)} holds no "
                                        "probabilities")
            return
        dst = self.accs(s.dst.name)
        dst.kind = PROBS
        for f in ("row", "col", "masked", "ver"):
            getattr(dst, f)[:, idx] = getattr(P, f)[:, idx]
        self._parts().pop(s.dst.name, None)

    def prob_part(self, frag: str) -> str:
        """"hi" / "lo" for the two frags of a :class:`SplitProbs`, "" for any other."""
        return self._parts().get(frag, "")

    def check_pairs(self, acc, idx: np.ndarray, what: str) -> bool:
        """O from split probabilities: every item that took a part took both, over exactly
        the same keys (the pair counts once, and only as a pair)."""
        paired = acc.paired[:, idx]
        bad = paired & (acc.lobits[:, idx] != acc.kbits[:, idx]).any(axis=2)
        if bad.any():
            t, c = (int(x) for x in np.argwhere(bad)[0])
            self.fail("lane_mfma_operands", f"{what}: thread {t} O item {int(idx[c])} summed "
                                            "the hi and lo parts of the probabilities over "
                                            "different keys (a part missing or added twice)")
            return False
        return True

    # ---- (1) S = Q K^T with Q as the A operand -------------------------------------------
    def mma_scores_qk(self, m, sp, A: np.ndarray, B: np.ndarray, where: str) -> None:
        """A[i][q] = Q(row_i, d_q) (or zero: a padding row), B[q][j] = K(key_j, d_q)."""
        at, abh, arow, acol, az = decode_ids(A)          # [W, M, K]
        bt, bbh, brow, bcol, bz = decode_ids(B)          # [W, K, N]
        q, kk = self.roles.query, self.roles.key
        # a reduction slot zero in every A row and every B column at a head dim past D:
        # padding head dims (a K tile past seqlen_kv meeting a Q tile past seqlen_q, as in
        # the prefill, is zero on both sides inside D: its head dims still count)
        zslot = az.all(axis=1) & bz.all(axis=2) & (bcol[:, :, 0] >= self.D)   # [W, K]
        pad = az.all(axis=2)                             # [W, M]
        real = ~pad
        mixed = (az & ~zslot[:, None, :]).any(axis=2) & real
        if mixed.any():
            w, i = (int(x) for x in np.argwhere(mixed)[0])
            self.fail("lane_mfma_operands", f"{where}: warp {w} A row {i} mixes {q} elements "
                                            "and zeros")
            return
        if (bt != self.tensor.get(kk)).any():
            self.fail("lane_mfma_operands", f"{where}: S = {q} {kk}^T needs {kk} in B")
            return
        rid = rowid(abh, arow)
        row_i = rid[:, :, 0]
        if ((rid != row_i[:, :, None]) & real[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: an mma row mixes query rows")
            return
        key_j = brow[:, 0, :]                            # [W, N]
        if (brow != key_j[:, None, :]).any() or (bbh != bbh[:, :1, :1]).any():
            self.fail("lane_mfma_operands", f"{where}: an mma column mixes keys or (batch, kv "
                                            "head)s")
            return
        kv_i = self.kv_of(row_i >> 22)
        if ((kv_i != bbh[:, :1, 0]) & real).any():
            w, i = (int(x) for x in np.argwhere((kv_i != bbh[:, :1, 0]) & real)[0])
            self.fail("lane_mfma_operands", f"{where}: warp {w} row {i} "
                                            f"({result_text(row_i[w, i])}) meets K of another "
                                            "(batch, kv head) (GQA mapping)")
            return
        dq = bcol[:, :, 0]                               # [W, K]
        live = ~zslot
        if ((bcol != dq[:, :, None]) & live[:, :, None]).any() or \
                ((acol != dq[:, None, :]) & real[:, :, None] & live[:, None, :]).any():
            self.fail("lane_mfma_operands", f"{where}: A and B disagree on the head dim of a "
                                            "reduction slot")
            return
        # a zero-filled K element (a key past the split) keeps its key coordinate: MaskScores
        # proves its score masked; a zero slot adds no head dim (-1: acc_update skips it)
        self.acc_update(m, sp, SCORES, np.where(real, row_i, PAD), key_j,
                        np.where(live, dq, -1), None, None, where, rows_on_i=True)

    # ---- (5) O = P V with P as the A operand (the prefill, kernels.nvidia.flash_ir) --------
    def mma_pv_pa(self, m, sp, P, a_idx: np.ndarray, b_idx: np.ndarray, where: str) -> None:
        """A[i][q] = P(row_i, key_q) from the probabilities' registers, B[q][j] = V(key_q,
        d_j): each C element (row i, d j) adds the keys q under one maximum version."""
        W, L = self.T // sp.lanes, sp.lanes
        base = (np.arange(W) * L)[:, None, None]
        B = self.regs[m.b.frag.name][base + sp.b_lane[None], b_idx[sp.b_item][None]]  # [W,K,N]
        if (B == UNSET).any():
            self.fail("lane_mfma_operands", f"{where}: a B register was never loaded")
            return
        self.pv_pair(m, sp, P, a_idx, B, where)

    def pv_pair(self, m, sp, P, a_idx: np.ndarray, B: np.ndarray, where: str) -> None:
        """``O += P V`` with P in A registers (item ``a_idx[a_item]`` of thread ``a_lane`` of
        each warp, or warpgroup: ``sp``) and V's identities ``B`` [W, K, N] (from registers,
        ``mma.sync``, or through a wgmma descriptor, :mod:`kernels.verify.attention_wgmma`)."""
        W, L = self.T // sp.lanes, sp.lanes
        base = (np.arange(W) * L)[:, None, None]
        th, it = np.broadcast_arrays(base + sp.a_lane[None], a_idx[sp.a_item][None])
        prow, pkey, pm, pv = P.row[th, it], P.col[th, it], P.masked[th, it], P.ver[th, it]
        if (prow == -1).any():
            self.fail("lane_mfma_operands", f"{where}: a P register holds no probability")
            return
        bt, bbh, brow, bcol, bz = decode_ids(B)
        val = self.roles.value
        if (bt != self.tensor.get(val)).any():
            self.fail("lane_mfma_operands", f"{where}: O = P {val} needs {val} in B")
            return
        d_j = bcol[:, 0, :]                                   # [W, N]
        if (bcol != d_j[:, None, :]).any():
            self.fail("lane_mfma_operands", f"{where}: an mma column of {val} mixes head dims")
            return
        kq = brow[:, :, 0]                                    # [W, K]
        if (brow != kq[:, :, None]).any() or (pkey != kq[:, None, :]).any():
            self.fail("lane_mfma_operands", f"{where}: P and {val} disagree on the key of a "
                                            "reduction slot")
            return
        row_i = prow[:, :, 0]                                 # [W, M]
        if (prow != row_i[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: a P row mixes query rows")
            return
        real = row_i != PAD
        kv_i = self.kv_of(row_i >> 22)
        if (bbh != bbh[:, :1, :1]).any() or ((bbh[:, 0, 0][:, None] != kv_i) & real).any():
            self.fail("lane_mfma_operands", f"{where}: {val} of another (batch, kv head) than "
                                            "the probabilities' rows (GQA mapping)")
            return
        ver_i = pv[:, :, 0]
        if (pv != ver_i[:, :, None]).any():
            self.fail("online_softmax", f"{where}: one query row's probabilities come from "
                                        "different running maxima")
            return
        self.acc_update(m, sp, OUT, row_i, d_j, kq, np.swapaxes(pm, 1, 2), ver_i, where,
                        rows_on_i=True, part=self.prob_part(m.a.frag.name))
