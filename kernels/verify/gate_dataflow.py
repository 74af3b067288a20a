"""Pass 2 of the GEMM gate (:mod:`kernels.verify.gate`): the dataflow checks, simulated lane by
lane (MFMA operand pairing, accumulator write-back, LDS races)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import KernelError
from ..ir.core import Access, Barrier, If, Kernel, Let, Loop, Mfma, ZeroFrag, c_eval, sym
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait
from ..ir.nvidia_wgmma import WGMMA_STATEMENTS, WgmmaMma
from .gate_common import (ACC_SH, ID_MASK, ID_MASK0, ID_SH_BUF, ID_SH_C0, ID_ZERO, Fail,
                          LdsRaces, MfmaTables, bits_below, bits_to_list, ldmatrix_lane_table,
                          mode_coords, mode_extents)
from .gate_wgmma import WgmmaRules
from .spec import KernelSpec, SpecError

__all__ = ["sympy_coeff_add", "GemmDataflow"]


# ---------------------------------------------------------------------------- pass 2 (dataflow)

_UNSET = np.int64(-2)
_SH_C0, _SH_BUF, _ZERO = ID_SH_C0, ID_SH_BUF, ID_ZERO   # buf | zero | c0 (29 bits) | c1 (30 bits)
_MASK0, _MASK = ID_MASK0, ID_MASK


def _enc(buf: int, c0: np.ndarray, c1: np.ndarray, zero: np.ndarray) -> np.ndarray:
    c0, c1 = np.asarray(c0, dtype=np.int64), np.asarray(c1, dtype=np.int64)
    # A coordinate outside its bit field would alias another element (or the buffer id) and
    # the dataflow proof would compare the wrong identities: refuse instead.
    if c0.size and (c0.min() < 0 or c0.max() > _MASK0 or c1.min() < 0 or c1.max() > _MASK):
        raise KernelError(f"GEMM gate: element coordinates outside [0, 2^29) x [0, 2^30) "
                          f"(got {int(c0.min())}..{int(c0.max())} x {int(c1.min())}.."
                          f"{int(c1.max())}) cannot be tracked by the dataflow check")
    return ((np.int64(buf) << _SH_BUF) | (c0 << _SH_C0) | c1 | np.where(zero, _ZERO, 0))


_ACC_SH = ACC_SH
_ACC_LO = (1 << _ACC_SH) - 1


def _acc_dec(ids: Any):
    """(m, n) of accumulator identities ((m << 31) | n), -1 for both where none."""
    ids = np.asarray(ids)
    none = ids < 0
    return np.where(none, -1, ids >> _ACC_SH), np.where(none, -1, ids & _ACC_LO)


def _dec(ids: np.ndarray):
    return ids >> _SH_BUF, (ids >> _SH_C0) & _MASK0, ids & _MASK, (ids & _ZERO) != 0


def sympy_coeff_add(e: Any) -> Tuple[int, Any]:
    """``(k, rest)`` with ``e == k + rest`` read off the expression's top-level sum."""
    import sympy
    e = sympy.sympify(e)
    if e.is_Integer:
        return int(e), sympy.Integer(0)
    k, rest = e.as_coeff_Add()
    if not k.is_Integer:
        return 0, e
    return int(k), rest


def _operand_positions(spec: KernelSpec):
    """The contraction's operands and, per tensor, which coordinate positions the element
    identities track: (free, reduced) for each operand, (left free, right free) for the
    result.  No contraction: nothing to pair (identities keep positions 0 and 1)."""
    if not spec.contractions:
        return None, None, {}
    if len(spec.contractions) != 1:
        raise SpecError(f"spec {spec.name}: the every-block dataflow check follows one "
                        f"contraction, the spec has {len(spec.contractions)}")
    c = spec.contractions[0]
    pos: Dict[str, Tuple[int, int]] = {}
    free = {}
    for t in (c.lhs, c.rhs):
        f = spec.free_dims(c, t)
        if len(f) != 1 or len(c.over) != 1 or len(spec.tensor(t).dims) != 2:
            raise SpecError(f"spec {spec.name}: the every-block dataflow check tracks 2-D "
                            f"operands with one free and one reduced dimension; {t} has "
                            f"dimensions {spec.tensor(t).dims} reduced over {c.over}")
        free[t] = f[0]
        pos[t] = (spec.position(t, f[0]), spec.position(t, c.over[0]))
    if spec.has_tensor(c.out):
        pos[c.out] = (spec.position(c.out, free[c.lhs]), spec.position(c.out, free[c.rhs]))
    return c.lhs, c.rhs, pos


class GemmDataflow:
    def __init__(self, k: Kernel, spec: KernelSpec, fails: Fail, block: Tuple[int, ...],
                 k_span: int) -> None:
        self.k, self.f, self.block = k, fails, block
        self.lhs, self.rhs, self.pos = _operand_positions(spec)
        T = k.block
        self.T = T
        self.buf_id = {p.name: i + 1 for i, p in enumerate(k.params)}
        self.buf_name = {v: n for n, v in self.buf_id.items()}
        self.regs = {fr.name: np.full((T, fr.count), _UNSET) for fr in k.frags}
        self.lds = {s.name: np.full(s.count, _UNSET) for s in k.shared}
        self.races = LdsRaces(k.shared)
        # cp.async: shared elements whose asynchronous write has not landed, the copies of
        # the open group and the committed groups not yet waited for (oldest first)
        self.inflight = {s.name: np.zeros(s.count, bool) for s in k.shared}
        self.open_group: List[Any] = []
        self.async_groups: List[List[Any]] = []
        accs = {m.acc.frag.name for m in _mfmas(k.body)}
        self.wg = WgmmaRules(self)      # wgmma groups and proxy fences (kernels.ir.nvidia_wgmma)
        self.acc_frags = accs
        nw = max(1, -(-k_span // 64))
        # accumulator element identity: (m << 31) | n of the C element it sums, -1 = none yet
        self.acc_id = {n: np.full((T, self._frag(n).count), -1, np.int64) for n in accs}
        self.acc_zero = {n: np.zeros((T, self._frag(n).count), bool) for n in accs}
        # k bitsets per accumulator element, word-major: one MFMA touches one word, so its
        # gathers stay inside one contiguous [T, count] slice
        self.kbits = {n: np.zeros((nw, T, self._frag(n).count), np.uint64) for n in accs}
        self.specs: Dict[Tuple[int, bool], MfmaTables] = {}
        self.mplans: Dict[Any, Any] = {}
        self.groups: Dict[int, Any] = {}
        self.deltas: Dict[int, Any] = {}
        self.k_extent: Dict[str, int] = {}
        self.mfma_issues = 0
        self.stores_checked = 0

    def _frag(self, name: str):
        return next(fr for fr in self.k.frags if fr.name == name)

    def env0(self) -> Dict[Any, Any]:
        env: Dict[Any, Any] = {sym("tid"): np.arange(self.T)}
        for name, b in zip(self.k.grid_symbols, self.block):
            env[sym(name)] = b
        return env

    def run(self) -> None:
        self.stmts(self.k.body, self.env0())

    def where(self, tag: str, env) -> str:
        loop = [f"{s.name}={v}" for s, v in env.items()
                if np.ndim(v) == 0 and s.name in self.loop_vars]
        return f"{tag} in block {self.block}" + (f", {', '.join(loop)}" if loop else "")

    loop_vars: set = set()

    def stmts(self, body, env) -> None:
        for s in self._grouped(body):
            if isinstance(s, list):
                self.mfma_batch(s, env)
            elif isinstance(s, Let):
                env[s.symbol] = c_eval(s.expr, env)
            elif isinstance(s, Loop):
                self.loop_vars = self.loop_vars | {s.var}
                lo, hi = int(c_eval(s.start, env)), int(c_eval(s.stop, env))
                for i in range(lo, hi):
                    inner = dict(env)
                    inner[sym(s.var)] = i
                    self.stmts(s.body, inner)
            elif isinstance(s, If):
                c = np.asarray(c_eval(s.cond, env))
                if c.ndim and not (c == c.flat[0]).all():
                    self.f.add("lds_races", f"if ({s.cond}): condition is not block-uniform")
                if c.flat[0]:
                    self.stmts(s.body, dict(env))
            elif isinstance(s, Barrier):
                self.races.epoch += 1
                self.wg.barrier()
            elif isinstance(s, ZeroFrag):
                n = s.frag.name
                self.regs[n][:] = _UNSET
                if n not in self.acc_frags:
                    self.wg.regs_written(n, range(s.frag.count), env, f"zero fill of {n}")
                if n in self.acc_frags:
                    self.wg.zeroed(n, env)
                    self.acc_id[n][:] = -1
                    self.kbits[n][:] = 0
                    self.acc_zero[n][:] = True
            elif isinstance(s, Access):
                self.access(s, env)
            elif isinstance(s, Mfma):
                self.mfma(s, env)
            elif isinstance(s, CpAsync):
                self.cp_async(s, env)
            elif isinstance(s, CpAsyncCommit):
                self.async_groups.append(self.open_group)
                self.open_group = []
            elif isinstance(s, CpAsyncWait):
                self.cp_async_wait(s.pending, env)
            elif isinstance(s, WGMMA_STATEMENTS):
                self.wg.stmt(s, env)

    # ---- memory --------------------------------------------------------------------------
    def access(self, a: Access, env) -> None:
        T = self.T
        off = np.broadcast_to(np.asarray(c_eval(a.offset, env), dtype=np.int64), (T,))
        pred = np.broadcast_to(np.asarray(True if a.pred is None else c_eval(a.pred, env)), (T,))
        fr = a.regs.frag.name
        th = np.arange(T)
        if a.kind == "load":    # a register A of an unretired wgmma must not change
            self.wg.regs_written(fr, a.regs.idx, env, a.tag)
        if getattr(a, "atom", None) is not None:
            self.ldmatrix(a, off, env)
            return
        if a.space == "lds":
            # the whole vector at once: element j of thread t is (t, j); a race between two
            # elements is reported as between their threads, exactly as element by element
            w = a.width
            addr = (off[:, None] + np.arange(w)[None, :]).reshape(-1)
            thr = np.repeat(th, w)
            idx = np.array(a.regs.idx)
            if a.kind == "store":
                self.lds_touch(a, addr, thr, write=True, env=env)
                if addr.min() >= 0 and addr.max() < self.lds[a.buf].shape[0]:
                    self.in_flight(a, addr, thr, "writes", env)
                    self.wg.shared_write(a.buf, addr, a.tag, env)
                    self.lds[a.buf][addr] = self.regs[fr][:, idx].reshape(-1)
            else:
                self.lds_touch(a, addr, thr, write=False, env=env)
                if addr.min() < 0 or addr.max() >= self.lds[a.buf].shape[0]:
                    return   # reported by the static pass (in_bounds)
                self.in_flight(a, addr, thr, "reads", env)
                vals = self.lds[a.buf][addr]
                if (vals == _UNSET).any():
                    t = int(np.argmax(vals == _UNSET))
                    self.f.add("lds_races", f"{self.where(a.tag, env)}: thread {int(thr[t])} "
                                            f"reads {a.buf}[{int(addr[t])}] before anything was "
                                            "written")
                self.regs[fr][:, idx] = vals.reshape(T, w)
            return
        if a.space == "global" and a.kind == "load":
            deltas = self._coord_deltas(a)
            if deltas is not None:
                c = [np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (T,))
                     for x in self._mode_coords(a)[0]]
                self.k_extent[a.buf] = self._reduced_extent(a)
                cs = [c[p][:, None] + np.asarray(deltas[p])[None, :] for p in range(2)]
                p0, p1 = self.pos.get(a.buf, (0, 1))
                self.regs[fr][:, np.array(a.regs.idx)] = _enc(self.buf_id[a.buf], cs[p0],
                                                              cs[p1], ~pred[:, None])
                return
        for j, i in enumerate(a.regs.idx):
            addr = off + j
            if a.space == "global" and a.kind == "load":
                c = [np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (T,))
                     for x in self._mode_coords(a)[j]]
                self.k_extent[a.buf] = self._reduced_extent(a)
                p0, p1 = self.pos.get(a.buf, (0, 1))
                self.regs[fr][:, i] = _enc(self.buf_id[a.buf], c[p0], c[p1], ~pred)
            elif a.space == "lds" and a.kind == "store":
                self.lds_touch(a, addr, th, write=True, env=env)
                self.wg.shared_write(a.buf, addr, a.tag, env)
                self.lds[a.buf][addr] = self.regs[fr][:, i]
            elif a.space == "lds" and a.kind == "load":
                self.lds_touch(a, addr, th, write=False, env=env)
                vals = self.lds[a.buf][addr]
                if (vals == _UNSET).any():
                    t = int(np.argmax(vals == _UNSET))
                    self.f.add("lds_races", f"{self.where(a.tag, env)}: thread {t} reads "
                                            f"{a.buf}[{int(addr[t])}] before anything was written")
                self.regs[fr][:, i] = vals
            elif a.space == "global" and a.kind == "store":
                self.store_out(a, j, i, pred, env)

    # ---- NVIDIA: ldmatrix and cp.async (rules: kernels.ir.nvidia) ---------------------------
    def ldmatrix(self, a: Access, off: np.ndarray, env) -> None:
        """Lane ``l`` receives item ``e`` = element ``col`` of the row that lane
        ``8*matrix + row`` of its warp addresses (``atom.element(l, e)``)."""
        T, atom = self.T, a.atom
        src_lane, col = ldmatrix_lane_table(atom)                 # [32, items]
        th = np.arange(T)
        src = (th // 32 * 32)[:, None] + src_lane[th % 32]         # [T, items]
        addr = off[src] + col[th % 32]                             # [T, items]
        thr = np.broadcast_to(th[:, None], addr.shape).reshape(-1)
        flat = addr.reshape(-1)
        self.lds_touch(a, flat, thr, write=False, env=env)
        if flat.min() < 0 or flat.max() >= self.lds[a.buf].shape[0]:
            return   # reported by the static pass (in_bounds)
        self.in_flight(a, flat, thr, "reads", env)
        vals = self.lds[a.buf][addr]
        if (vals == _UNSET).any():
            t, e = (int(x) for x in np.argwhere(vals == _UNSET)[0])
            self.f.add("lds_races", f"{self.where(a.tag, env)}: thread {t} receives "
                                    f"{a.buf}[{int(addr[t, e])}] (ldmatrix item {e}) before "
                                    "anything was written")
        self.regs[a.regs.frag.name][:, np.array(a.regs.idx)] = vals

    def cp_async(self, s: Any, env) -> None:
        """The load fills the staging registers; the shared write joins the open group and is
        in flight until a wait retires its group (checked against this epoch's accesses now
        and again where it lands)."""
        self.access(s.load, env)
        st, T = s.store, self.T
        off = np.broadcast_to(np.asarray(c_eval(st.offset, env), dtype=np.int64), (T,))
        addr = (off[:, None] + np.arange(st.width)[None, :]).reshape(-1)
        thr = np.repeat(np.arange(T), st.width)
        self.lds_touch(st, addr, thr, write=True, env=env)
        if addr.min() < 0 or addr.max() >= self.lds[st.buf].shape[0]:
            return   # reported by the static pass (in_bounds)
        self.in_flight(st, addr, thr, "writes", env)
        self.wg.shared_write(st.buf, addr, st.tag, env, landed=False)
        vals = self.regs[st.regs.frag.name][:, np.array(st.regs.idx)].reshape(-1)
        self.inflight[st.buf][addr] = True
        self.open_group.append((st, addr, thr, vals))

    def cp_async_wait(self, pending: int, env) -> None:
        """Every committed group but the ``pending`` newest lands here."""
        while len(self.async_groups) > pending:
            for st, addr, thr, vals in self.async_groups.pop(0):
                self.inflight[st.buf][addr] = False
                self.wg.landed(st.buf, addr)
                self.lds_touch(st, addr, thr, write=True, env=env)
                self.lds[st.buf][addr] = vals

    def in_flight(self, a: Access, addr: np.ndarray, thr: np.ndarray, what: str, env) -> None:
        """No access may touch a shared element whose cp.async write has not landed."""
        hit = self.inflight[a.buf][addr]
        if hit.any():
            i = int(np.argmax(hit))
            self.f.add("lds_races", f"{self.where(a.tag, env)}: thread {int(thr[i])} {what} "
                                    f"{a.buf}[{int(addr[i])}] while a cp.async write to it is "
                                    "in flight (no cp.async.wait_group retired its group)")

    def _reduced_extent(self, a: Access) -> int:
        """The extent of the loaded tensor's reduced (second tracked) mode, from its layout."""
        ext = mode_extents(a.origin)
        p = self.pos.get(a.buf, (0, 1))[1]
        return int(ext[p]) if len(ext) > p else 0

    def _coord_deltas(self, a: Access) -> Optional[List[List[int]]]:
        """Per coordinate position, element j's coordinate minus element 0's, when every
        element's coordinate is element 0's printed sum with another integer constant term
        (``C(c_j) == C(c_0) - k_0 + k_j`` exactly); None otherwise."""
        key = id(a)
        if key in self.deltas:
            return self.deltas[key]
        out: Optional[List[List[int]]] = None
        per_elem = self._mode_coords(a)
        if per_elem and all(len(x) == 2 for x in per_elem):
            out = [[], []]
            for p in range(2):
                k0, r0 = sympy_coeff_add(per_elem[0][p])
                for lv in per_elem:
                    kj, rj = sympy_coeff_add(lv[p])
                    if rj != r0:
                        out = None
                        break
                    out[p].append(kj - k0)
                if out is None:
                    break
        self.deltas[key] = out
        return out

    def _mode_coords(self, a: Access) -> List[List[Any]]:
        """Per element, the logical coordinate of each top-level mode of the access's origin
        (``gate_common.mode_coords``), cached per access."""
        key = ("modes", id(a))
        hit = self.deltas.get(key)
        if hit is None:
            import sympy
            hit = self.deltas[key] = [[sympy.expand(x) for x in mode_coords(a.origin, c)]
                                      for c in a.coords]
        return hit

    def lds_touch(self, a: Access, addr, th, write: bool, env) -> None:
        b = a.buf
        for kind, t, other in self.races.touch(b, addr, th, write):
            if kind == "write_twice":
                msg = f"two threads write {b}[{int(addr[t])}] in one store"
            elif kind == "raw":
                msg = (f"thread {int(th[t])} reads {b}[{int(addr[t])}] written by thread {other} "
                       "without a barrier between")
            else:
                who = "several threads" if other < 0 else f"thread {other}"
                msg = (f"thread {int(th[t])} writes {b}[{int(addr[t])}], which {who} {kind} "
                       "since the last barrier")
            self.f.add("lds_races", f"{self.where(a.tag, env)}: {msg}")

    def store_out(self, a: Access, j: int, i: int, pred, env) -> None:
        fr = a.regs.frag.name
        T = self.T
        cc = [np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (T,))
              for x in self._mode_coords(a)[j]]
        p0, p1 = self.pos.get(a.buf, (0, 1))
        cm, cn = cc[p0], cc[p1]
        if fr not in self.acc_frags:
            self.f.add("lane_accumulator_writeback", f"{self.where(a.tag, env)}: stores "
                                                     f"{fr}, which no MFMA accumulates into")
            return
        self.wg.acc_read(fr, (i,), env, "stores")
        on = pred
        t_on = np.nonzero(on)[0]
        self.stores_checked += len(t_on)
        am, an = _acc_dec(self.acc_id[fr][t_on, i])
        bad = (am != cm[t_on]) | (an != cn[t_on])
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            self.f.add("lane_accumulator_writeback",
                       f"{self.where(a.tag, env)}: thread {t} stores {fr}[{i}] to C({int(cm[t])}, "
                       f"{int(cn[t])}) but it accumulates C({int(_acc_dec(self.acc_id[fr][t, i])[0])}, "
                       f"{int(_acc_dec(self.acc_id[fr][t, i])[1])})")
            return
        rng = self.k_range(a, cc, t_on, env)
        if rng is None:
            return
        lo, K = rng
        nw = self.kbits[fr].shape[0]
        want = bits_below(K, nw) & ~bits_below(lo, nw)
        got = self.kbits[fr][:, t_on, i].T
        bad = (got != want[None, :]).any(axis=1)
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            have = bits_to_list(self.kbits[fr][:, t, i])
            missing = sorted(set(range(lo, K)) - set(have))
            extra = sorted(set(have) - set(range(lo, K)))
            self.f.add("lane_accumulator_writeback",
                       f"{self.where(a.tag, env)}: thread {t} stores C({int(cm[t])}, {int(cn[t])}) "
                       f"summed over {len(have)} k values; missing k {missing[:8]}"
                       f"{'...' if len(missing) > 8 else ''}, unexpected k {extra[:8]}")

    def k_range(self, a: Access, cc: List[np.ndarray], t_on: np.ndarray,
                env) -> Optional[Tuple[int, int]]:
        """``[lo, hi)``: the k values a value stored by ``a`` must hold, all of them here (a
        split kernel's partial holds its split's range: :mod:`.gate_split_partials`); None
        when a failure was already recorded."""
        return 0, self.k_extent.get(self.lhs, 0)

    # ---- MFMA ----------------------------------------------------------------------------
    def _mfma_plan(self, m: Mfma, sp: "MfmaTables") -> Any:
        """Flat gather indices of one MFMA statement (register and accumulator tables)."""
        key = id(m)
        pl = self.mplans.get(key)
        if pl is not None:
            return pl
        L = sp.lanes
        W = self.T // L
        base = (np.arange(W) * L)[:, None, None]
        na, nb = self._frag(m.a.frag.name).count, self._frag(m.b.frag.name).count
        nacc = self._frag(m.acc.frag.name).count
        a_idx, b_idx, acc_idx = np.array(m.a.idx), np.array(m.b.idx), np.array(m.acc.idx)
        a_fi = (base + sp.a_lane[None]) * na + a_idx[sp.a_item][None]            # [W, M, K]
        b_fi = (base + sp.b_lane[None]) * nb + b_idx[sp.b_item][None]            # [W, K, N]
        th = (np.arange(W) * L)[:, None, None] + np.arange(L)[None, :, None]    # [W, L, 1]
        acc_fi = th * nacc + acc_idx[None, None, :]                               # [W, 64, C]
        wv = np.arange(W)[:, None, None]
        rowsel = wv * sp.M + sp.c_i[None]                                         # [W, 64, C]
        colsel = wv * sp.N + sp.c_j[None]
        pl = (a_fi, b_fi, acc_fi, rowsel, colsel)
        self.mplans[key] = pl
        return pl

    def mfma(self, m: Mfma, env) -> None:
        self.mfma_batch([m], env)

    def _batch_plan(self, ms: List[Mfma], sp: "MfmaTables") -> Any:
        key = tuple(id(m) for m in ms)
        pl = self.mplans.get(key)
        if pl is not None:
            return pl
        parts = [self._mfma_plan(m, sp) for m in ms]
        W = self.T // sp.lanes
        a_fi = np.stack([q[0] for q in parts])
        b_fi = np.stack([q[1] for q in parts])
        acc_fi = np.stack([q[2] for q in parts])
        rowsel = np.stack([n * W * sp.M + q[3] for n, q in enumerate(parts)])
        ijsel = rowsel * sp.N + sp.c_j[None, None]          # into [Nb, W, M, N] tables
        pl = (a_fi, b_fi, acc_fi, ijsel)
        self.mplans[key] = pl
        return pl

    def mfma_batch(self, ms: List[Mfma], env) -> None:
        """Fast path for MFMAs of one instruction and frags whose accumulator registers are
        pairwise disjoint (so issuing them together equals issuing them one by one): every
        condition of :meth:`mfma_checked` in few array operations over all of them.  On any
        failure the state is left untouched and :meth:`mfma_checked` (the reference
        implementation) runs on each in order to report the counterexample."""
        m0 = ms[0]
        key = (id(m0.spec), m0.swap_ab)
        sp = self.specs.get(key)
        if sp is None:
            sp = self.specs[key] = MfmaTables(m0.spec, m0.swap_ab)
        fr = m0.acc.frag.name
        kb_arr = self.kbits[fr]
        a_fi, b_fi, acc_fi, ijsel = self._batch_plan(ms, sp)
        A = np.take(self.regs[m0.a.frag.name], a_fi)     # [Nb, W, M, K]
        B = np.take(self.regs[m0.b.frag.name], b_fi)     # [Nb, W, K, N]
        ok = not ((A < 0).any() or (B < 0).any())
        if ok:
            an = (A & ~_ZERO) >> _SH_C0                   # buf | row
            bn = (B & ~_ZERO) >> _SH_C0                   # buf | column
            ka, kb = A & _MASK, B & _MASK
            kq = ka[..., 0, :]                            # [Nb, W, K]
            ok = ((an == an[..., :1]).all() and (bn == bn[..., :1, :]).all()
                  and ((an[..., 0] >> (_SH_BUF - _SH_C0)) == self.buf_id.get(self.lhs, -1)).all()
                  and ((bn[..., 0, :] >> (_SH_BUF - _SH_C0)) == self.buf_id.get(self.rhs, -1)).all()
                  and (ka == kq[..., None, :]).all() and (kb == kq[..., :, None]).all())
        if ok:
            row_m, col_n = an[..., 0] & _MASK0, bn[..., 0, :] & _MASK0
            code = (row_m[..., :, None] << _ACC_SH) | col_n[..., None, :]       # [Nb, W, M, N]
            want = np.take(code, ijsel)                                         # [Nb, W, 64, C]
            cur_id = np.take(self.acc_id[fr], acc_fi)
            fresh = cur_id < 0
            ok = not (~fresh & (cur_id != want)).any()
            if ok and fresh.any():
                ok = bool(np.take(self.acc_zero[fr], acc_fi[fresh]).all())
        if ok:
            srt = np.sort(kq, axis=-1)
            word = kq // 64
            ok = not (srt[..., 1:] == srt[..., :-1]).any() and (word == word[..., :1]).all() \
                and not (word[..., 0] >= kb_arr.shape[0]).any()
        if ok:
            one = np.left_shift(np.uint64(1), (kq % 64).astype(np.uint64))       # [Nb, W, K]
            zero = np.uint64(0)
            rowbits = np.bitwise_or.reduce(np.where((A & _ZERO) == 0, one[..., None, :], zero),
                                           axis=-1)                              # [Nb, W, M]
            colbits = np.bitwise_or.reduce(np.where((B & _ZERO) == 0, one[..., :, None], zero),
                                           axis=-2)                              # [Nb, W, N]
            new = np.take(rowbits[..., :, None] & colbits[..., None, :], ijsel)  # [Nb, W, 64, C]
            w0 = int(word.flat[0])
            if (word == w0).all():            # the usual case: one k window for the batch
                kb_sl = kb_arr[w0]
                kfi = acc_fi
            else:
                kb_sl = kb_arr
                kfi = word[..., :1, None] * kb_arr[0].size + acc_fi
            cur = np.take(kb_sl, kfi)
            ok = not ((cur & new) != 0).any()
        if not ok:
            for m in ms:
                self.mfma_checked(m, env)
            return
        self.mfma_issues += (self.T // sp.lanes) * len(ms)
        np.put(self.acc_id[fr], acc_fi, want)
        np.put(kb_sl, kfi, cur | new)

    def _grouped(self, body: List[Any]) -> List[Any]:
        """``body`` with each run of consecutive MFMAs split into batches (lists) of one
        instruction and frags with pairwise disjoint accumulator registers (cached)."""
        key = id(body)
        hit = self.groups.get(key)
        if hit is not None and hit[0] is body:
            return hit[1]
        out: List[Any] = []
        cur: List[Mfma] = []
        used: set = set()

        def flush():
            if cur:
                out.append(list(cur))
                cur.clear()
                used.clear()
        for s in body:
            if not isinstance(s, Mfma):
                flush()
                out.append(s)
                continue
            acc = set(s.acc.idx)
            if cur and (s.spec is not cur[0].spec or acc & used or
                        (s.a.frag.name, s.b.frag.name, s.acc.frag.name) !=
                        (cur[0].a.frag.name, cur[0].b.frag.name, cur[0].acc.frag.name)):
                flush()
            cur.append(s)
            used |= acc
        flush()
        self.groups[key] = (body, out)
        return out

    def mfma_checked(self, m: Mfma, env) -> None:
        key = (id(m.spec), m.swap_ab)
        sp = self.specs.get(key)
        if sp is None:
            sp = self.specs[key] = MfmaTables(m.spec, m.swap_ab)
        L = sp.lanes
        W = self.T // L
        self.mfma_issues += W
        base = (np.arange(W) * L)[:, None, None]
        a_regs, b_regs = self.regs[m.a.frag.name], self.regs[m.b.frag.name]
        a_idx, b_idx = np.array(m.a.idx), np.array(m.b.idx)
        A = a_regs[base + sp.a_lane[None], a_idx[sp.a_item][None]]      # [W, M, K]
        B = b_regs[base + sp.b_lane[None], b_idx[sp.b_item][None]]      # [W, K, N]
        where = _Lazy(lambda: self.where(m.tag, env))
        if (A == _UNSET).any() or (B == _UNSET).any():
            self.f.add("lane_mfma_operands", f"{where}: an operand register was never loaded")
            return
        ab, am, ak, az = _dec(A)
        bb, bn, bk, bz = _dec(B)
        if (ab != self.buf_id.get(self.lhs, -1)).any() or (bb != self.buf_id.get(self.rhs, -1)).any():
            w, i, q = (int(x) for x in np.argwhere(ab != self.buf_id.get(self.lhs, -1))[0]) \
                if (ab != self.buf_id.get(self.lhs, -1)).any() else (0, 0, 0)
            self.f.add("lane_mfma_operands", f"{where}: operand A/B registers hold elements of "
                                             f"another tensor (wave {w}, A row {i} slot {q})")
            return
        row_m = am[:, :, 0]
        if (am != row_m[:, :, None]).any():
            w, i, q = (int(x) for x in np.argwhere(am != row_m[:, :, None])[0])
            self.f.add("lane_mfma_operands",
                       f"{where}, wave {w}: MFMA row {i} mixes A rows {int(row_m[w, i])} and "
                       f"{int(am[w, i, q])} (lane {int(sp.a_lane[i, q])} item "
                       f"{int(sp.a_item[i, q])})")
            return
        col_n = bn[:, 0, :]
        if (bn != col_n[:, None, :]).any():
            w, q, j = (int(x) for x in np.argwhere(bn != col_n[:, None, :])[0])
            self.f.add("lane_mfma_operands",
                       f"{where}, wave {w}: MFMA column {j} mixes B columns {int(col_n[w, j])} and "
                       f"{int(bn[w, q, j])} (lane {int(sp.b_lane[q, j])} item {int(sp.b_item[q, j])})")
            return
        # every reduction slot q: A's k for row i must equal B's k for column j (for all i, j)
        ka = ak[:, :, :]                     # [W, M, K]
        if (ka != ka[:, :1, :]).any():
            w, i, q = (int(x) for x in np.argwhere(ka != ka[:, :1, :])[0])
            self.f.add("lane_mfma_operands",
                       f"{where}, wave {w}: slot {q} holds k={int(ka[w, 0, q])} in A row 0 but "
                       f"k={int(ka[w, i, q])} in A row {i}")
            return
        kb = bk
        if (kb != kb[:, :, :1]).any() or (kb[:, :, 0] != ka[:, 0, :]).any():
            w, q = (int(x) for x in np.argwhere((kb[:, :, 0] != ka[:, 0, :]) |
                                                (kb != kb[:, :, :1]).any(axis=2))[0])
            self.f.add("lane_mfma_operands",
                       f"{where}, wave {w}: reduction slot {q} multiplies A(., k={int(ka[w, 0, q])})"
                       f" by B(k={int(kb[w, q, 0])}, .): A and B disagree on k")
            return
        # accumulator element (lane, item) <- D[i][j] = (row_m[i], col_n[j])
        fr = m.acc.frag.name
        acc_idx = np.array(m.acc.idx)
        lanes = np.arange(L)
        th = (np.arange(W) * L)[:, None, None] + lanes[None, :, None]           # [W, L, 1]
        items = acc_idx[None, None, :]                                           # [1, 1, C]
        ci, cj = sp.c_i[None], sp.c_j[None]                                      # [1, 64, C]
        wv = np.arange(W)[:, None, None]
        want_m = row_m[wv, ci]
        want_n = col_n[wv, cj]
        th_b = np.broadcast_to(th, want_m.shape)
        it_b = np.broadcast_to(items, want_m.shape)
        cur_m, cur_n = _acc_dec(self.acc_id[fr][th_b, it_b])
        fresh = cur_m < 0
        bad = ~fresh & ((cur_m != want_m) | (cur_n != want_n))
        if bad.any():
            w, l, c = (int(x) for x in np.argwhere(bad)[0])
            self.f.add("lane_mfma_operands",
                       f"{where}: wave {w} lane {l} accumulator item {c} held C({int(cur_m[w, l, c])},"
                       f" {int(cur_n[w, l, c])}) but this MFMA adds into it C({int(want_m[w, l, c])}, "
                       f"{int(want_n[w, l, c])})")
            return
        if not self.acc_zero[fr][th_b[fresh], it_b[fresh]].all():
            self.f.add("lane_mfma_operands", f"{where}: accumulator used before it was zeroed")
        self.acc_id[fr][th_b, it_b] = (want_m.astype(np.int64) << _ACC_SH) | want_n
        # contributions: slot q counts when neither operand was zero-filled; all k of one issue
        # are distinct and (checked) fall into one 64-bit word of the per-element k bitset
        kq = ka[:, 0, :]                                                          # [W, K]
        srt = np.sort(kq, axis=1)
        if (srt[:, 1:] == srt[:, :-1]).any():
            w = int(np.argmax((srt[:, 1:] == srt[:, :-1]).any(axis=1)))
            self.f.add("lane_mfma_operands", f"{where}, wave {w}: two reduction slots carry the "
                                             f"same k ({sorted(kq[w].tolist())})")
            return
        word = kq // 64
        kb_arr = self.kbits[fr]
        if (word != word[:, :1]).any() or (word[:, 0] >= kb_arr.shape[0]).any():
            self.f.add("lane_mfma_operands", f"{where}: the k values of one MFMA "
                                             f"({kq[0].tolist()}) span two 64-k windows or pass "
                                             "the reduction extent (not supported by the check)")
            return
        one = np.left_shift(np.uint64(1), (kq % 64).astype(np.uint64))           # [W, K]
        zero = np.uint64(0)
        rowbits = np.bitwise_or.reduce(np.where(~az, one[:, None, :], zero), axis=2)   # [W, M]
        colbits = np.bitwise_or.reduce(np.where(~bz, one[:, :, None], zero), axis=1)   # [W, N]
        new = rowbits[wv, ci] & colbits[wv, cj]                                   # [W, 64, C]
        wd = np.broadcast_to(word[:, :1, None], new.shape)
        cur = kb_arr[wd, th_b, it_b]
        dup = (cur & new) != 0
        if dup.any():
            w, l, c = (int(x) for x in np.argwhere(dup)[0])
            self.f.add("lane_mfma_operands",
                       f"{where}: wave {w} lane {l} accumulator item {c} adds a k it already "
                       "summed (a reduction index used twice)")
            return
        kb_arr[wd, th_b, it_b] = cur | new


class _Lazy:
    """A message computed only when printed."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __str__(self) -> str:
        return self.fn()

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def _mfmas(body):
    from ..ir.core import walk
    return [s for s in walk(body) if isinstance(s, (Mfma, WgmmaMma))]
