"""The dataflow rules of :mod:`kernels.ir.lse_merge` (the merge of normalised split partials by
their log-sum-exp; the rules are listed in that module's docstring).  A mixin of
:class:`kernels.verify.attention_dataflow.AttentionDataflow`: it reads the pass's register
identities (``regs``), variables (``vars``), accumulators (``accs``) and the spec's roles, and
reports to ``reduction_reads_partials`` (what is merged) and ``online_softmax`` (under which
maximum)."""

from __future__ import annotations

from typing import Optional, Set

import numpy as np

from ..ir.lse_merge import LseMax, LseMergeStep, LseNormalize
from .attention_ids import (MERGED, UNSET, VarIds, check_merge_slots, decode_ids, key_bits,
                            result_text, rowid)
from .gate_common import bits_below

__all__ = ["LseMergeRules"]


class LseMergeRules:
    """``lse_max`` / ``lse_merge_step`` / ``lse_normalize``: see :mod:`kernels.ir.lse_merge`."""

    def _lse_partials(self, what: str) -> Optional[tuple]:
        parts = self.roles.partials
        if parts is None or len(parts) != 2:
            self.fail("reduction_reads_partials", f"{what}: the spec's merge reads {parts}; an "
                                                  "LSE merge needs partials (O, LSE)")
            return None
        return parts

    def _lse_var(self, name: str, what: str) -> Optional[VarIds]:
        v = self.vars.get(name)
        if v is None:
            self.fail("reduction_reads_partials", f"{what}: {name} not declared")
        return v

    def _loaded(self, frag: str, items, what: str) -> Optional[np.ndarray]:
        x = self.regs[frag][:, list(items)]
        if (x == UNSET).any():
            self.fail("reduction_reads_partials", f"{what}: {frag} was never loaded")
            return None
        return x

    def _used_maxima(self) -> Set[str]:
        if not hasattr(self, "_lse_used"):
            self._lse_used: Set[str] = set()
        return self._lse_used

    def lse_max(self, s: LseMax) -> None:
        what = f"max {s.m} of {s.lse.name}"
        parts = self._lse_partials(what)
        x = self._loaded(s.lse.name, [s.item], what)
        m = self._lse_var(s.m, what)
        if parts is None or x is None or m is None:
            return
        t, bh, sp, _, _ = (a[:, 0] for a in decode_ids(x))
        if (t != self.tensor.get(parts[1])).any():
            self.fail("reduction_reads_partials", f"{what}: not a {parts[1]} register")
            return
        if s.m in self._used_maxima():
            self.fail("online_softmax", f"{what}: the maximum is raised after a merge step "
                                        "took a weight against it (weights under different "
                                        "maxima)")
        rid, bit = rowid(bh, 0), key_bits(sp, self.kw)
        if (m.set & (m.row != rid)).any() or ((m.kbits & bit) != 0).any():
            th = int(np.argmax((m.set & (m.row != rid)) | ((m.kbits & bit) != 0).any(1)))
            self.fail("reduction_reads_partials", f"{what}: thread {th} takes the LSE of "
                                                  f"{result_text(rid[th])} split {int(sp[th])} "
                                                  f"into a maximum of {result_text(m.row[th])} "
                                                  "(another (batch, head), or the split twice)")
            return
        m.row, m.set[:] = rid.copy(), True
        m.kbits = m.kbits | bit

    def lse_merge_step(self, s: LseMergeStep) -> None:
        what = f"lse merge into {s.o.name}"
        parts = self._lse_partials(what)
        X = self._loaded(s.x.name, s.x_items, what)
        L = self._loaded(s.lse.name, [s.lse_item], what)
        m, l = self._lse_var(s.m, what), self._lse_var(s.l, what)
        if parts is None or X is None or L is None or m is None or l is None:
            return
        xt, xbh, xs, xd, _ = decode_ids(X)
        lt, lbh, ls, _, _ = decode_ids(L)
        if (xt != self.tensor.get(parts[0])).any() or (lt != self.tensor.get(parts[1])).any():
            self.fail("reduction_reads_partials", f"{what}: operands are not ({parts[0]}, "
                                                  f"{parts[1]})")
            return
        bh, sp = xbh[:, :1], xs[:, :1]
        bad = (xbh != bh).any(1) | (xs != sp).any(1) | (lbh[:, 0] != bh[:, 0]) | \
            (ls[:, 0] != sp[:, 0])
        if bad.any():
            t = int(np.argmax(bad))
            self.fail("reduction_reads_partials", f"{what}: thread {t} merges O of (bh, split) "
                                                  f"{list(zip(xbh[t].tolist(), xs[t].tolist()))}"
                                                  f" with the LSE of ({int(lbh[t, 0])}, "
                                                  f"{int(ls[t, 0])})")
            return
        rid, bit = rowid(bh[:, 0], 0), key_bits(sp[:, 0], self.kw)
        allb = bits_below(self.inst.values["n_splits"], self.kw)
        if not (m.set & (m.row == rid)).all() or (m.kbits != allb).any():
            th = int(np.argmax(~(m.set & (m.row == rid)) | (m.kbits != allb).any(1)))
            self.fail("online_softmax", f"{what}: thread {th}'s weight subtracts {s.m}, which "
                                        f"is not the maximum over all "
                                        f"{self.inst.values['n_splits']} splits' LSE of "
                                        f"{result_text(rid[th])}")
            return
        self._used_maxima().add(s.m)
        acc = self.accs(s.o.name)
        idx = np.array(s.o_items)
        if not check_merge_slots(acc, idx, rid, xd, what, self.fail):
            return
        if ((acc.kbits[:, idx] & bit[:, None, :]) != 0).any() or \
                (l.set & ((l.row != rid) | ((l.kbits & bit) != 0).any(1))).any():
            self.fail("reduction_reads_partials", f"{what}: a split merged twice, or the sum "
                                                  f"{s.l} belongs to another (batch, head)")
            return
        acc.kind = MERGED
        acc.row[:, idx] = rid[:, None]
        acc.col[:, idx] = xd
        acc.kbits[:, idx] |= bit[:, None, :]
        l.row, l.set[:] = rid.copy(), True
        l.kbits = l.kbits | bit

    def lse_normalize(self, s: LseNormalize) -> None:
        acc, l = self.acc.get(s.o.name), self._lse_var(s.l, f"normalise {s.o.name}")
        if acc is None or l is None:
            self.fail("reduction_reads_partials", f"normalise {s.o.name}: nothing merged")
            return
        idx = np.array(s.items)
        if (acc.row[:, idx] != l.row[:, None]).any() or \
                (acc.kbits[:, idx] != l.kbits[:, None, :]).any():
            self.fail("reduction_reads_partials", f"normalise {s.o.name} by {s.l}: the two "
                                                  "merged different (batch, head) or splits")
            return
        acc.norm[:, idx] = True
