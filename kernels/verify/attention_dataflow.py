"""Pass 2 of the attention gate (:mod:`kernels.verify.attention_gate`): every thread of the
simulated blocks, statement by statement, on element identities: MFMA operand pairing,
accumulator write-back, LDS races, and (in :mod:`kernels.verify.attention_softmax`) the
softmax, masking and split-KV merge rules."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .attention_roles import Roles
from .spec import KernelSpec
from ..errors import KernelError
from ..ir.attention import (ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax, MaskScores,
                            MergeFinal, MergeStep, PartialStats, Rescale, RowMax, SoftmaxUpdate,
                            VecAxpy, VecDot)
from ..ir.core import (Access, Barrier, Comment, If, Let, Loop, Mfma, SchedBarrier, SetPrio,
                       ZeroFrag, is_group_barrier, sym)
from .attention_ids import (OUT, PAD, PROBS, SCORES, AccIds, UNSET, VarIds, decode_ids, encode_ids,
                            key_bits, result_text, rowid)
from .attention_softmax import SoftmaxRules
from .lse_merge_rules import LseMergeRules
from .warp_register_rules import WarpRegisterRules
from .warp_merge_rules import WarpMergeRules
from ..ir.warp_merge import StoreVar, WarpCombine, WarpStats
from ..ir.warp_registers import PackWord, RoundProbs, ShflBroadcast, SplitProbs
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait
from .attention_async import AsyncSharedRules
from .attention_wgmma import AttentionWgmma, AttentionWgmmaRules
from ..ir.nvidia_wgmma import WGMMA_STATEMENTS, WgmmaMma
from ..ir.lse_merge import LseMax, LseMergeStep, LseNormalize
from .attention_static import Instance, eval_expr, let_value
from .gate_common import Fail, LdsRaces, MfmaTables, bits_to_list, leaves

__all__ = ["AttentionDataflow", "zero_fill_version"]


class AttentionDataflow(SoftmaxRules, LseMergeRules, WarpRegisterRules, WarpMergeRules,
                        AsyncSharedRules, AttentionWgmma):
    def __init__(self, k: Any, inst: Instance, block: Tuple[int, int], f: Fail,
                 kw: int, spec: Optional[KernelSpec] = None) -> None:
        self.k, self.inst, self.block, self.f = k, inst, block, f
        self.spec = spec if spec is not None else k.spec
        self.roles = Roles.from_spec(self.spec)
        T = k.block
        self.T = T
        self.D = self.roles.head_dim
        self.dw = max(1, -(-self.D // 64))
        self.kw = kw
        self.vals = inst.symbols()
        self.tensor = {p.name: i + 1 for i, p in enumerate(k.params)}
        self.regs = {fr.name: np.full((T, fr.count), UNSET) for fr in k.frags}
        self.frags = {fr.name: fr for fr in k.frags}
        self.acc: Dict[str, AccIds] = {}
        self.vars: Dict[str, VarIds] = {}
        self.lds = {s.name: np.full(s.count, UNSET) for s in k.shared}
        self.races = LdsRaces(k.shared)
        self.specs: Dict[Tuple[int, bool], MfmaTables] = {}
        self.ver_table: Dict[Any, int] = {}
        v = inst.values
        self.H, self.HK, self.G = v["heads"], v["kv_heads"], v["group"]
        self.mfma_issues = 0
        self.stores = 0
        self.exchanges = 0
        self.where = ""
        self.lse_state: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
        self.part_keys: Dict[int, np.ndarray] = {}   # split kernel: (bh, split) row -> key bits
        # Hopper wgmma (kernels.verify.attention_wgmma): the GEMM's asynchronous rules
        self._wg = AttentionWgmmaRules(self) if _has_wgmma(k) else None

    def fail(self, check: str, msg: str) -> None:
        self.f.add(check, f"{msg} (block {self.block}{', ' + self.where if self.where else ''}"
                          f" [{self.inst.name}])")

    def env0(self) -> Dict[Any, Any]:
        env: Dict[Any, Any] = dict(self.vals)
        env[sym("tid")] = np.arange(self.T)
        for name, b in zip(self.k.grid_symbols, self.block):
            env[sym(name)] = b
        return env

    def run(self) -> None:
        self.stmts(self.k.body, self.env0())

    def after_iteration(self, loop: Loop, env: Dict[Any, Any], inner: Dict[Any, Any]) -> None:
        """After each iteration of ``loop``, walked in ``inner`` (a copy of ``env``): nothing
        here; an engine whose kernels carry values across iterations copies them back
        (:mod:`.attention_ring`)."""

    def stmts(self, body, env) -> None:
        for s in body:
            if self._wg is not None and not isinstance(s, WGMMA_STATEMENTS):
                self.wg_effects(s, env)
            if isinstance(s, (Let, LetMinMax)):
                env[sym(s.name)] = let_value(s, env)
            elif isinstance(s, Loop):
                lo, hi = int(eval_expr(s.start, env)), int(eval_expr(s.stop, env))
                for i in range(lo, hi):
                    inner = dict(env)
                    inner[sym(s.var)] = i
                    saved = self.where
                    self.where = f"{s.var}={i}"
                    self.stmts(s.body, inner)
                    self.where = saved
                    self.after_iteration(s, env, inner)
            elif isinstance(s, If):
                c = np.asarray(eval_expr(s.cond, env))
                if c.ndim and not (c == c.flat[0]).all() and is_group_barrier(s) and \
                        self.spec.wave_roles:
                    continue    # a wave group's barrier: the per-wave phases (wave_phases)
                if c.ndim and not (c == c.flat[0]).all():
                    self.fail("lds_races", f"if ({s.cond}) is not uniform across the block")
                if c.flat[0]:
                    self.stmts(s.body, dict(env))
            elif isinstance(s, Barrier):
                self.races.epoch += 1
                self.wg_barrier()
            elif isinstance(s, ZeroFrag):
                self.zero(s.frag.name)
            elif isinstance(s, Access):
                self.access(s, env)
            elif isinstance(s, Mfma):
                self.mfma(s)
            elif isinstance(s, FVar):
                self.vars[s.name] = VarIds(self.T, self.kw)
            elif isinstance(s, MaskScores):
                self.mask(s, env)
            elif isinstance(s, RowMax):
                self.rowmax(s)
            elif isinstance(s, LaneXor):
                self.lanexor(s, env)
            elif isinstance(s, SoftmaxUpdate):
                self.softmax_update(s)
            elif isinstance(s, ExpScores):
                self.exp_scores(s)
            elif isinstance(s, Rescale):
                self.rescale(s)
            elif isinstance(s, FinalNormalize):
                self.normalize(s)
            elif isinstance(s, VecDot):
                self.vecdot(s)
            elif isinstance(s, VecAxpy):
                self.vecaxpy(s)
            elif isinstance(s, PartialStats):
                self.partial_stats(s)
            elif isinstance(s, MergeStep):
                self.merge_step(s)
            elif isinstance(s, MergeFinal):
                self.merge_final(s)
            elif isinstance(s, LseMax):
                self.lse_max(s)
            elif isinstance(s, LseMergeStep):
                self.lse_merge_step(s)
            elif isinstance(s, LseNormalize):
                self.lse_normalize(s)
            elif isinstance(s, PackWord):
                self.pack_word(s)
            elif isinstance(s, ShflBroadcast):
                self.shfl_broadcast(s, env)
            elif isinstance(s, SplitProbs):
                self.split_probs(s)
            elif isinstance(s, RoundProbs):
                self.round_probs(s)
            elif isinstance(s, CpAsync):
                self.cp_async(s, env)
            elif isinstance(s, CpAsyncCommit):
                self.cp_async_commit()
            elif isinstance(s, CpAsyncWait):
                self.cp_async_wait(s.pending)
            elif isinstance(s, StoreVar):
                self.store_var(s, env)
            elif isinstance(s, WarpStats):
                self.warp_stats(s)
            elif isinstance(s, WarpCombine):
                self.warp_combine(s, env)
            elif isinstance(s, WGMMA_STATEMENTS):
                self.wgmma_stmt(s, env)
            elif isinstance(s, (Comment, SetPrio, SchedBarrier)):   # scheduling only: no data
                pass
            else:
                raise KernelError(f"attention gate: unknown statement {type(s).__name__}")

    # ---- helpers -------------------------------------------------------------------------
    def accs(self, name: str) -> AccIds:
        if name not in self.acc:
            fr = self.frags[name]
            self.acc[name] = AccIds(self.T, fr.count, self.dw, self.kw)
        return self.acc[name]

    def zero(self, name: str) -> None:
        fr = self.frags[name]
        self.acc[name] = AccIds(self.T, fr.count, self.dw, self.kw)
        self.acc[name].zeroed[:] = True
        self.regs[name][:] = UNSET

    def visible_bits(self, rows: np.ndarray) -> np.ndarray:
        keys = np.arange(self.kw * 64)
        vis = self.inst.visible(rows[..., None], keys)
        out = np.zeros(rows.shape + (self.kw,), np.uint64)
        for w in range(self.kw):
            blk = vis[..., 64 * w: 64 * (w + 1)].astype(np.uint64)
            out[..., w] = (blk << np.arange(64, dtype=np.uint64)).sum(axis=-1).astype(np.uint64)
        return out

    # ---- memory --------------------------------------------------------------------------
    def access(self, a: Access, env) -> None:
        if a.space == "lds" and a.kind == "store" and a.regs.frag.name in self.acc and \
                self.acc[a.regs.frag.name].kind == OUT:
            self.stash_acc(a, env)          # accumulator registers: records (warp_merge_rules)
            return
        if a.space == "lds" and a.kind == "load" and self.holds_records(a.buf):
            self.load_record(a, env)
            return
        if getattr(a, "atom", None) is not None:        # ldmatrix (kernels.ir.nvidia)
            self.ldmatrix(a, env)
            return
        T = self.T
        off = np.broadcast_to(np.asarray(eval_expr(a.offset, env), dtype=np.int64), (T,))
        pred = np.broadcast_to(np.asarray(True if a.pred is None else eval_expr(a.pred, env)), (T,))
        fr = a.regs.frag.name
        th = np.arange(T)
        for j, i in enumerate(a.regs.idx):
            addr = off + j
            if a.space == "global":
                cs = [np.broadcast_to(np.asarray(eval_expr(x, env), dtype=np.int64), (T,))
                      for x in leaves(a.coords[j])]
                heads = self.HK if a.buf in self.roles.kv_tensors else self.H
                bh = cs[-1] * heads + cs[-2]
                if a.kind == "load":
                    # zero-filled elements keep their (out-of-range) coordinates: a key past
                    # seqlen_kv must still be masked, a row past seqlen_q never stored
                    self.regs[fr][:, i] = encode_ids(self.tensor[a.buf], bh, cs[0], cs[1], ~pred)
                else:
                    self.store_out(a, i, cs, pred)
            elif ((addr < 0) | (addr >= self.lds[a.buf].size)).any():
                continue   # outside the LDS array: the static pass reports it as in_bounds
            elif a.kind == "store":
                self.lds_touch(a, addr, th, True)
                self.in_flight(a.buf, addr, th, "writes", a.tag)
                self.wg_shared_write(a.buf, addr, a.tag, env, landed=True)
                self.lds[a.buf][addr] = self.regs[fr][:, i]
            else:
                self.lds_touch(a, addr, th, False)
                self.in_flight(a.buf, addr, th, "reads", a.tag)
                vals = self.lds[a.buf][addr]
                if (vals == UNSET).any():
                    t = int(np.argmax(vals == UNSET))
                    self.fail("lds_races", f"{a.tag}: thread {t} reads {a.buf}[{int(addr[t])}] "
                                           "before anything was written")
                self.regs[fr][:, i] = vals

    def kv_of(self, bh_q: np.ndarray) -> np.ndarray:
        """The KV (batch * kv_heads + kv head) a query (batch * heads + head) must read, by the
        definition of GQA: kv head = head // (heads / kv_heads)."""
        return (bh_q // self.H) * self.HK + (bh_q % self.H) // self.G

    def lds_touch(self, a: Access, addr, th, write: bool) -> None:
        b = a.buf
        for kind, t, other in self.races.touch(b, addr, th, write):
            if kind == "write_twice":
                msg = f"two threads write {b}[{int(addr[t])}] in one store"
            elif kind == "raw":
                msg = f"thread {t} reads {b}[{int(addr[t])}] written by thread {other} without a barrier"
            else:
                msg = (f"thread {t} writes {b}[{int(addr[t])}], which another thread {kind} "
                       "since the last barrier")
            self.fail("lds_races", f"{a.tag}: {msg}")

    def store_out(self, a: Access, i: int, cs: List[np.ndarray], pred: np.ndarray) -> None:
        fr = a.regs.frag.name
        t_on = np.nonzero(pred)[0]
        pos_c = cs[0]
        cs = [rowid(cs[-1] * self.H + cs[-2], cs[0])] + list(cs[1:])
        self.stores += len(t_on)
        if self.roles.merged:
            self.store_merged(a, i, cs, t_on)
            return
        want_buf = getattr(self, "stat_buf", {}).get(fr)
        what = "max" if self.roles.stats and want_buf == self.roles.stats[0] else "sum"
        if want_buf is not None and a.buf != want_buf:
            self.fail("lane_accumulator_writeback", f"{a.tag}: stores the split's "
                                                    f"{what} "
                                                    f"({fr}) to {a.buf}, not {want_buf}")
            return
        if a.buf == self.roles.lse or fr in self.lse_state:
            st = self.lse_state.get(fr)
            if st is None:
                self.fail("lane_accumulator_writeback", f"{a.tag}: {fr} was never computed")
                return
            row, vbits = st
            empty = (row[t_on] < 0) & ~self.visible_bits(cs[0][t_on]).any(axis=1)
            row = row.copy()
            row[t_on[empty]] = cs[0][t_on[empty]]
            if (row[t_on] != cs[0][t_on]).any():
                t = int(t_on[np.argmax(row[t_on] != cs[0][t_on])])
                self.fail("lane_accumulator_writeback", f"{a.tag}: thread {t} stores the "
                                                        f"logsumexp of row {int(row[t])} to row "
                                                        f"{int(cs[0][t])}")
                return
            want = self.visible_bits(cs[0][t_on])
            if fr in self.roles.stat_frags:
                for t in t_on:
                    self.part_keys[int(cs[0][t])] = vbits[t].copy()
            if (vbits[t_on] != want).any():
                t = int(t_on[np.argmax((vbits[t_on] != want).any(axis=1))])
                self.fail("masking_and_tile_skipping", f"{a.tag}: thread {t} row {int(pos_c[t])}:"
                                                       " the logsumexp is not over exactly the "
                                                       "visible keys")
            return
        acc = self.acc.get(fr)
        never = acc is not None and acc.kind is None and acc.zeroed[t_on, i].all()
        if acc is None or (acc.kind != OUT and not never):    # never: zeroed, no key at all
            self.fail("lane_accumulator_writeback", f"{a.tag}: stores {fr}, which no P V product "
                                                    "accumulates")
            return
        row, col = acc.row[t_on, i].copy(), acc.col[t_on, i].copy()
        # never accumulated (no tile processed): an empty sum, right only for a row that sees
        # no key at all
        empty = (row < 0) & acc.zeroed[t_on, i] & ~self.visible_bits(cs[0][t_on]).any(axis=1)
        row[empty], col[empty] = cs[0][t_on][empty], cs[1][t_on][empty]
        bad = (row != cs[0][t_on]) | (col != cs[1][t_on])
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            self.fail("lane_accumulator_writeback", f"{a.tag}: thread {t} stores {fr}[{i}] = "
                                                    f"O({result_text(acc.row[t, i])}, {int(acc.col[t, i])})"
                                                    f" to O({result_text(cs[0][t])}, {int(cs[1][t])})")
            return
        if self.roles.stats is not None and a.buf == self.roles.out:
            if not acc.partial[t_on, i].all():
                t = int(t_on[np.argmin(acc.partial[t_on, i])])
                self.fail("online_softmax", f"{a.tag}: thread {t} stores a partial O whose "
                                            "(max, sum) were not taken with it")
        elif not acc.norm[t_on, i].all():
            t = int(t_on[np.argmin(acc.norm[t_on, i])])
            self.fail("online_softmax", f"{a.tag}: thread {t} stores an unnormalised O")
        want = self.visible_bits(row)
        got = acc.vbits[t_on, i]
        bad = (got != want).any(axis=1)
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            ti = int(np.argmax(bad))
            have = bits_to_list(got[ti])
            exp = bits_to_list(want[ti])
            miss = sorted(set(exp) - set(have))
            extra = sorted(set(have) - set(exp))
            self.fail("masking_and_tile_skipping",
                      f"{a.tag}: thread {t} row {result_text(row[ti])}: visible keys missing "
                      f"{miss[:8]}{'...' if len(miss) > 8 else ''}, invisible keys accumulated "
                      f"unmasked {extra[:8]}{'...' if len(extra) > 8 else ''}")

    # ---- MFMA ----------------------------------------------------------------------------
    def mfma(self, m: Mfma) -> None:
        key = (id(m.spec), m.swap_ab)
        sp = self.specs.get(key)
        if sp is None:
            sp = self.specs[key] = MfmaTables(m.spec, m.swap_ab)
        T, L = self.T, sp.lanes                 # 64 (an AMD wave) or 32 (an NVIDIA warp)
        W = T // L
        self.mfma_issues += W
        base = (np.arange(W) * L)[:, None, None]
        a_idx, b_idx = np.array(m.a.idx), np.array(m.b.idx)
        where = f"MFMA {m.tag}"
        a_acc = self.acc.get(m.a.frag.name)
        if a_acc is not None and a_acc.kind == PROBS:   # O = P V (mma.sync: P as A)
            self.mma_pv_pa(m, sp, a_acc, a_idx, b_idx, where)
            return
        A = self.regs[m.a.frag.name][base + sp.a_lane[None], a_idx[sp.a_item][None]]  # [W,M,K]
        if (A == UNSET).any():
            self.fail("lane_mfma_operands", f"{where}: an A register was never loaded")
            return
        at, abh, arow, acol, az = decode_ids(A)
        b_acc = self.acc.get(m.b.frag.name)
        if b_acc is not None and b_acc.kind == PROBS:
            self.mfma_pv(m, sp, at, abh, arow, acol, b_acc, b_idx, where)
            return
        B = self.regs[m.b.frag.name][base + sp.b_lane[None], b_idx[sp.b_item][None]]  # [W,K,N]
        if (B == UNSET).any():
            self.fail("lane_mfma_operands", f"{where}: a B register was never loaded")
            return
        bt, bbh, brow, bcol, bz = decode_ids(B)
        q, kk = self.roles.query, self.roles.key
        q_in_a = ((at == self.tensor.get(q)) | az).all()
        if q_in_a and (not az.all() or (bt == self.tensor.get(kk)).all()):
            # (all of A zero-filled, e.g. Q rows past seqlen_q: B says which product it is)
            self.mma_scores_qk(m, sp, A, B, where)     # S = Q K^T (mma.sync: Q as A)
            return
        if (at != self.tensor.get(kk)).any() or (bt != self.tensor.get(q)).any():
            self.fail("lane_mfma_operands", f"{where}: S^T = {kk} {q}^T needs {kk} in A and {q} "
                                            "in B")
            return
        # A[i][q] = K(key_i, d_q); B[q][j] = Q(row_j, d_q)
        key_i = arow[:, :, 0]
        if (arow != key_i[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: an MFMA row mixes keys")
            return
        brid = rowid(bbh, brow)
        row_j = brid[:, 0, :]
        if (brid != row_j[:, None, :]).any():
            self.fail("lane_mfma_operands", f"{where}: an MFMA column mixes query rows")
            return
        kv_j = self.kv_of(row_j >> 22)                       # [W, N]
        if (abh[:, :, :1] != kv_j[:, None, :1]).any() or (kv_j != kv_j[:, :1]).any() or \
                (abh != abh[:, :1, :1]).any():
            self.fail("lane_mfma_operands", f"{where}: K rows of another (batch, kv head) than "
                                            "the query columns' (GQA mapping)")
            return
        dq = acol[:, 0, :]                                   # [W, K]
        if (acol != dq[:, None, :]).any() or (bcol != dq[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: A and B disagree on the head dim of a "
                                            "reduction slot")
            return
        self.acc_update(m, sp, SCORES, key_i, row_j, dq, None, None, where)

    def mfma_pv(self, m, sp, at, abh, arow, acol, P: AccIds, b_idx, where) -> None:
        W = self.T // sp.lanes
        base = (np.arange(W) * sp.lanes)[:, None, None]
        th = base + sp.b_lane[None]
        it = b_idx[sp.b_item][None]
        th, it = np.broadcast_arrays(th, it)
        prow, pkey, pm, pv = P.row[th, it], P.col[th, it], P.masked[th, it], P.ver[th, it]
        if (prow == -1).any():
            self.fail("lane_mfma_operands", f"{where}: a P register holds no probability")
            return
        if (at != self.tensor.get(self.roles.value)).any():
            self.fail("lane_mfma_operands", f"{where}: O^T = {self.roles.value}^T P^T needs "
                                            f"{self.roles.value} in A")
            return
        # A[i][q] = V(key_q, d_i): V^T row i is head dim d, slot q is a key
        d_i = acol[:, :, 0]
        if (acol != d_i[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: an MFMA row of V^T mixes head dims")
            return
        kq = arow[:, 0, :]
        if (arow != kq[:, None, :]).any() or (pkey != kq[:, :, None]).any():
            self.fail("lane_mfma_operands", f"{where}: V^T and P^T disagree on the key of a "
                                            "reduction slot")
            return
        row_j = prow[:, 0, :]
        if (prow != row_j[:, None, :]).any():
            self.fail("lane_mfma_operands", f"{where}: a P^T column mixes query rows")
            return
        kv_j = self.kv_of(row_j >> 22)
        real = row_j != PAD                     # zero-padded rows (mma.sync: heads past hg)
        if (abh != abh[:, :1, :1]).any() or ((abh[:, 0, 0][:, None] != kv_j) & real).any():
            self.fail("lane_mfma_operands", f"{where}: V of another (batch, kv head) than the "
                                            "probabilities' rows (GQA mapping)")
            return
        ver_j = pv[:, 0, :]
        if (pv != ver_j[:, None, :]).any():
            self.fail("online_softmax", f"{where}: one query row's probabilities come from "
                                        "different running maxima")
            return
        self.acc_update(m, sp, OUT, d_i, row_j, kq, pm, ver_j, where,
                        part=self.prob_part(m.b.frag.name))

    def acc_update(self, m, sp, kind, i_val, row_j, q_val, q_masked, ver_j, where, *,
                   rows_on_i: bool = False, part: str = "") -> None:
        """Accumulator (lane, item) <- C[i][j]: S: (row_j, key i) += d slots q;
        O: (row_j, d i) += keys q.  ``rows_on_i`` (S = Q K^T, mma.sync): (row i, key j)
        instead.  ``part`` (O from split probabilities, :class:`~kernels.ir.warp_registers
        .SplitProbs`): "hi" or "lo", each part summing every key once."""
        L = sp.lanes
        W = self.T // L
        acc = self.accs(m.acc.frag.name)
        if acc.kind is None:
            acc.kind = kind
        elif acc.kind != kind:
            self.fail("lane_mfma_operands", f"{where}: accumulator used for two products")
            return
        acc_idx = np.array(m.acc.idx)
        # the registers (thread, item) this product writes: threads 0 .. W L - 1 in order, so
        # every state array is read and written as a [W, L, items, ...] view of its first W L
        # rows (a slice of the items where they are consecutive: no gather, no scatter)
        ix = _items(acc_idx, acc.row.shape[1])

        def at(x):
            return _rows(x, W, L)[:, :, ix]
        wv = np.arange(W)[:, None, None]
        want_col = i_val[wv, sp.c_i[None]]           # key (S) or d (O)
        want_row = row_j[wv, sp.c_j[None]]
        if rows_on_i:
            want_col, want_row = row_j[wv, sp.c_j[None]], i_val[wv, sp.c_i[None]]
        cur_r, cur_c = at(acc.row), at(acc.col)
        fresh = cur_r < 0
        if not at(acc.zeroed)[fresh].all():
            self.fail("lane_mfma_operands", f"{where}: accumulator used before it was zeroed")
        bad = ~fresh & ((cur_r != want_row) | (cur_c != want_col))
        if bad.any():
            w, l, c = (int(x) for x in np.argwhere(bad)[0])
            self.fail("lane_mfma_operands", f"{where}: wave {w} lane {l} item {c} held "
                                            f"({int(cur_r[w, l, c])}, {int(cur_c[w, l, c])}) but "
                                            f"this MFMA adds ({int(want_row[w, l, c])}, "
                                            f"{int(want_col[w, l, c])})")
            return
        _rows(acc.row, W, L)[:, :, ix] = want_row
        _rows(acc.col, W, L)[:, :, ix] = want_col
        if kind == SCORES:
            words, nbits = acc.dbits, self.dw
        else:
            words, nbits = (acc.lobits if part == "lo" else acc.kbits), self.kw
            if part:
                _rows(acc.paired, W, L)[:, :, ix] = True
        srt = np.sort(q_val, axis=1)
        # -1: a zero reduction slot (warp_register_rules: padding head dims), no index
        if ((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any():
            self.fail("lane_mfma_operands", f"{where}: two reduction slots carry the same index")
            return
        if (q_val >= 64 * nbits).any():
            self.fail("lane_mfma_operands", f"{where}: reduction index past the tracked extent")
            return
        qb = key_bits(q_val, nbits)                      # [W, K, nbits]
        new = np.bitwise_or.reduce(qb, axis=1)        # [W, nbits]
        new_b = new[:, None, None, :]
        if ((at(words) & new_b) != 0).any():          # [W, L, C, nbits]
            self.fail("lane_mfma_operands", f"{where}: an accumulator adds a reduction index it "
                                            "already summed")
            return
        _rows(words, W, L)[:, :, ix] |= new_b
        if kind == OUT:
            vis = np.bitwise_or.reduce(np.where(~q_masked[..., None], qb[:, :, None, :],
                                                np.uint64(0)), axis=1)       # [W, N, nbits]
            rix = sp.c_i if rows_on_i else sp.c_j      # the C index of the query row
            _rows(acc.vbits, W, L)[:, :, ix] |= vis[wv, rix[None]]
            want_ver = ver_j[wv, rix[None]]
            cur_ver = zero_fill_version(fresh, at(acc.ver), want_ver)
            _rows(acc.ver, W, L)[:, :, ix] = cur_ver
            if (cur_ver != want_ver).any():
                self.fail("online_softmax", f"{where}: O accumulated under maximum version "
                                            f"{int(cur_ver.flat[0])} receives probabilities of "
                                            f"version {int(want_ver.flat[0])} (missing rescale)")


def _rows(x: np.ndarray, W: int, L: int) -> np.ndarray:
    """Rows ``0 .. W L - 1`` of a per-thread state array as ``[W, L, ...]``: a view, so what
    is written through it lands in ``x`` (a C-contiguous array reshapes without a copy; any
    other is refused rather than written into a copy)."""
    y = x[:W * L]
    if not y.flags.c_contiguous:
        raise KernelError("attention gate: a per-thread state array is not C-contiguous "
                          f"(shape {x.shape}): its [W, L] view would be a copy")
    return y.reshape((W, L) + x.shape[1:])


def _items(idx: np.ndarray, n: int) -> Any:
    """``idx`` as a slice where it is a run of consecutive items inside ``0 .. n - 1`` (the
    same elements, read as a view), else ``idx`` itself (numpy's gather / scatter)."""
    if idx.ndim == 1 and len(idx) and 0 <= idx[0] and idx[-1] < n and \
            (np.diff(idx) == 1).all():
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def zero_fill_version(fresh: np.ndarray, cur_ver: np.ndarray, want_ver: np.ndarray
                      ) -> np.ndarray:
    """The maximum version an O element is at when probabilities of ``want_ver`` reach it: an
    element still its zero fill (``fresh``: zeroed, nothing accumulated since) is zero under
    every maximum -- rescaling it is the identity -- so it takes ``want_ver`` (a kernel may
    skip the first block's rescale of the zero-filled O, as the template does); any element
    already holding a sum stays at ``cur_ver``, which must equal ``want_ver``."""
    return np.where(fresh, want_ver, cur_ver)


def _has_wgmma(k: Any) -> bool:
    """Whether ``k`` issues wgmmas."""
    from ..ir.core import walk
    return any(isinstance(s, WgmmaMma) for s in walk(k.body))
