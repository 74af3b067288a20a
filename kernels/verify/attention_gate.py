"""The attention verification gate: prove the attention IR before it is emitted, or stop.

Shapes and strides are runtime arguments, so the gate checks the kernel on **instances**
(concrete shapes chosen to hit every edge: ragged sequence lengths, a single row or key, GQA,
strided BSHD layouts, causal with seqlen_q != seqlen_kv and rows that see no key), and says so
in every domain.  Everything is evaluated from the IR, i.e. from the sympy objects the printer
prints, with C semantics (:func:`kernels.ir.c_eval`).

1. **Static, every block of the instance's grid x every loop iteration x every thread**:
   ``emitted_index_math`` (printed offset == layout(coordinates), element by element),
   ``in_bounds`` (predicated-on elements in range; a predicated load is on exactly when its
   whole vector is in range, so zero-filled means out of range; LDS inside its array),
   ``vector_widths`` (aligned vectors), ``bank_conflicts_lds_read`` / ``_write`` (every LDS
   access of every wave and iteration under the gfx942 phase model, max ways 1),
   ``coverage`` (every element of O and LSE stored exactly once over the grid),
   ``lds_capacity``.
2. **Dataflow** per simulated block (every query tile of two (batch, head) pairs; the other
   blocks are the same program on other global coordinates, ``block_independence``): registers
   and LDS hold element identities instead of values.

   * ``lane_mfma_operands`` - each MFMA of ``S^T = K Q^T`` multiplies a key row of K by a query
     row of Q with equal head dims in every reduction slot; each MFMA of ``O^T = V^T P^T``
     multiplies a head-dim row of V^T by a query row of P with equal keys; accumulators keep
     their (row, column) and never add an index twice;
   * ``cross_lane_reductions`` - every ``ds_swizzle`` / ``ds_bpermute`` exchange (source lane
     from the printed pattern or address, hardware semantics) pairs lanes holding the same
     query row; sums combine disjoint key sets;
   * ``online_softmax`` - each exponent subtracts a maximum of its own row that covers every key
     exponentiated so far; ``O`` and ``l`` are rescaled by the ``alpha`` of their own row from
     the version of the maximum they were accumulated under; ``O`` and ``l`` are combined only
     under the same maximum; the normaliser sums exactly the keys accumulated into ``O``;
   * ``masking_and_tile_skipping`` - each mask condition is evaluated at the (row, key) the
     register really holds and equals visibility (``key < seqlen_kv`` and, causal, ``key <= row +
     causal_off``); at the store, the keys accumulated unmasked into each output row are exactly
     its visible keys (so skipped tiles held no visible key and unmasked tiles no invisible one);
   * ``lane_accumulator_writeback`` - each stored O element is O[row][d] of the coordinates it
     is stored to (batch and head included), normalised, over its complete head-dim reduction;
   * ``lds_races`` - no LDS element is read and written (or written twice) by different threads
     without a barrier in between; nothing reads LDS never written.

3. **Split-KV decode** (:mod:`kernels.decode_splitkv`, two kernels): the split kernel is checked
   as a decode whose query "row" ``s`` is split ``s`` (Q's row mode has stride 0) and sees
   exactly the keys ``[s kv_chunk, (s+1) kv_chunk)`` below seqlen_kv, so the checks above prove
   each partial's keys; ``split_partition`` adds that per (batch, head) the partials' key sets
   are disjoint and cover ``[0, seqlen_kv)``; the partial O is stored unnormalised next to the
   (max, sum) of the same row, keys and maximum version.  For the combine kernel,
   ``reduction_reads_partials``: every merge step combines O, max and sum of one (batch, head)
   and split, at the accumulator's head dims, no split twice, and each stored O / LSE element
   merged all ``n_splits`` splits of its own (batch, head); the pair's workspace layouts are
   the same objects on both sides (``decode_splitkv._check_same_workspace``).

Value arithmetic (exp2, fma, max, rounding) is outside the proof: the emulator tests check it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from layoutalg import ComposedLayout, Layout

from ..ir.attention import (ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax, MaskScores,
                           MergeFinal, MergeStep, PartialStats, Rescale, RowMax, SoftmaxUpdate,
                           VecAxpy, VecDot, swizzle_source_lane)
from ..errors import KernelError
from .gate import GateReport, VerificationError
from .gate_common import (BYTES, Fail, LdsRaces, MfmaTables, bank_result, bits_below,
                          bits_to_list, check_lds_capacity, compose_offset, leaves)
from ..ir.core import (Access, Barrier, Comment, If, Let, Loop, Mfma, ZeroFrag, c_eval, sym, walk)

__all__ = ["verify_attention", "CHECKS", "Instance", "default_instances"]

CHECKS = ("emitted_index_math", "in_bounds", "vector_widths", "bank_conflicts_lds_read",
          "bank_conflicts_lds_write", "coverage", "lds_capacity", "block_independence",
          "lane_mfma_operands", "cross_lane_reductions", "online_softmax",
          "masking_and_tile_skipping", "lane_accumulator_writeback", "lds_races")
# split-KV decode only: the split kernel's partials cover every key of each (batch, head) once;
# the reduction merges exactly the partials written, each once, into the output they belong to
SPLIT_CHECKS = ("split_partition", "reduction_reads_partials")
_POS_MASK = (1 << 22) - 1


class Instance:
    """Values of the runtime symbols (plus the verifier-only ``batch`` / ``kv_heads``), the grid
    and the problem definition (causal or not)."""

    def __init__(self, name: str, values: Dict[str, int], grid: Tuple[int, int, int],
                 causal: bool) -> None:
        self.name, self.values, self.grid, self.causal = name, dict(values), grid, causal

    def symbols(self) -> Dict[Any, int]:
        out = {}
        for k, v in self.values.items():
            out[sympy.Symbol(k, integer=True, nonnegative=True)] = v
            out[sympy.Symbol(k, integer=True)] = v
        return out

    def visible(self, row: np.ndarray, key: np.ndarray) -> np.ndarray:
        """Is ``key`` visible to query row id ``row`` (``(batch * heads + head) << 22 |
        position``; a plain position works too)."""
        row = np.asarray(row) & _POS_MASK
        v = self.values
        ok = (key >= 0) & (key < v["seqlen_kv"])
        if "kv_chunk" in v:     # split-KV: "row" s is split s, which sees [s chunk, (s+1) chunk)
            c = v["kv_chunk"]
            ok = ok & (key >= row * c) & (key < (row + 1) * c)
        if self.causal:
            ok = ok & (key <= row + v["causal_off"])
        return ok

    def describe(self) -> str:
        v = self.values
        s = (f"{self.name}: B={v['batch']} H={v['heads']} HK={v['kv_heads']} "
             f"seqlen_q={v['seqlen_q']} seqlen_kv={v['seqlen_kv']}")
        if self.causal:
            s += f" causal_off={v['causal_off']}"
        if "kv_chunk" in v:
            s += f" n_splits={v['n_splits']} kv_chunk={v['kv_chunk']}"
        return s + f" grid {self.grid[0]}x{self.grid[1]}"


def default_instances(k: Any) -> List[Instance]:
    """The instances the kernel's builder names (``k.meta["instances"]``: a function of the
    kernel IR, e.g. :func:`kernels.amd.flash_attention.prefill_instances`).  The gate knows
    no kernel family: the builder says on which shapes its kernel is checked."""
    make = k.meta.get("instances")
    if make is None:
        raise KernelError(f"attention gate: kernel {k.name} names no verification instances "
                          "(its builder sets meta['instances']); pass instances=[...]")
    return list(make(k))


def _subs(x: Any, vals: Dict[Any, int]) -> Any:
    if isinstance(x, tuple):
        return tuple(_subs(y, vals) for y in x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    v = sympy.sympify(x).xreplace(vals)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if not v.is_Integer:
        raise KernelError(f"attention gate: {x} does not reduce to an integer for this instance")
    return int(v)


def _concrete(origin: Any, vals: Dict[Any, int]) -> Any:
    """``origin`` with its symbolic shape and strides replaced by the instance's values."""
    if isinstance(origin, ComposedLayout):
        return ComposedLayout(origin.outer, origin.offset, _concrete(origin.inner, vals))
    return Layout(_subs(origin.shape, vals), _subs(origin.stride, vals))


def _eval_mode(shape: Any, stride: Any, c: np.ndarray) -> Tuple[Any, Any]:
    """Offset and in-range flag of one top-level coordinate ``c`` of a (nested) mode:
    colexicographic decomposition, as CuTe's idx2crd."""
    fs, fd = Layout(shape, stride).flat()
    off: Any = 0
    rem = c
    for i, (s, d) in enumerate(zip(fs, fd)):
        if i == len(fs) - 1:
            part = rem
        else:
            part = rem % s
            rem = rem // s
        off = off + part * d
    total = int(np.prod(fs))
    return off, (c >= 0) & (c < total)


def eval_layout(origin: Any, coords: Any, env: Dict[Any, Any]) -> Tuple[Any, Any]:
    """``(offset, in_range)`` of a concrete Layout / Swizzle-ComposedLayout at the coordinates
    (sympy expressions evaluated in ``env``), matching the top-level (possibly nested) modes."""
    inner = origin.inner if isinstance(origin, ComposedLayout) else origin

    def rec(shape, stride, crd):
        if isinstance(crd, tuple):
            if not isinstance(shape, tuple) or len(shape) != len(crd):
                raise KernelError(f"gate: coordinates {crd} do not match shape {shape}")
            off, ok = 0, True
            for s, d, x in zip(shape, stride, crd):
                o, k = rec(s, d, x)
                off, ok = off + o, ok & k
            return off, ok
        c = np.asarray(c_eval(crd, env), dtype=np.int64)
        return _eval_mode(shape, stride, c)

    off, ok = rec(inner.shape, inner.stride, coords)
    return compose_offset(origin, off), ok


def _eval(expr: Any, env: Dict[Any, Any]) -> Any:
    return c_eval(expr, env)


def _let_value(s: Any, env: Dict[Any, Any]) -> Any:
    if isinstance(s, LetMinMax):
        a, b = np.asarray(_eval(s.a, env)), np.asarray(_eval(s.b, env))
        return np.minimum(a, b) if s.op == "min" else np.maximum(a, b)
    return _eval(s.expr, env)


# ============================================================================ pass 1: static

class _Static:
    """Every block x iteration x thread; arrays shaped [blocks, threads]."""

    def __init__(self, k: Any, inst: Instance, arch: str, f: Fail, bank_cache: Dict) -> None:
        self.k, self.inst, self.arch, self.f = k, inst, arch, f
        self.vals = inst.symbols()
        self.buf_dtype = {p.name: p.dtype for p in k.params}
        self.buf_dtype.update({s.name: s.dtype for s in k.shared})
        self.shared = {s.name: s.count for s in k.shared}
        self.outputs = {p.name for p in k.params if not p.const}
        self.origins: Dict[str, Any] = {}
        self.bank_cache = bank_cache
        self.bank_worst = {"read": 1, "write": 1}
        self.bank_n = {"read": 0, "write": 0}
        self.widths: Dict[str, int] = {}
        self.points = 0
        self.stored: Dict[str, List[np.ndarray]] = {}
        gx, gy, gz = inst.grid
        nb = gx * gy * gz
        self.nb = nb
        bid = np.arange(nb)
        T = k.block
        self.env: Dict[Any, Any] = dict(self.vals)
        self.env[sym("tid")] = np.arange(T).reshape(1, T)
        names = list(k.grid_symbols) + ["_bz"]
        ids = (bid % gx, (bid // gx) % gy, bid // (gx * gy))
        for name, v in zip(names, ids):
            self.env[sym(name)] = v.reshape(nb, 1)

    def run(self) -> None:
        self.stmts(self.k.body, self.env, np.ones((self.nb, 1), bool), "")

    def stmts(self, body, env, active, where) -> None:
        for s in body:
            if isinstance(s, (Let, LetMinMax)):
                env[sym(s.name)] = _let_value(s, env)
            elif isinstance(s, Loop):
                lo = np.broadcast_to(np.asarray(_eval(s.start, env)), (self.nb, 1))
                hi = np.broadcast_to(np.asarray(_eval(s.stop, env)), (self.nb, 1))
                if hi.size == 0 or (hi <= lo).all():
                    continue
                for it in range(int(lo.min()), int(hi.max())):
                    inner = dict(env)
                    inner[sym(s.var)] = it
                    act = active & (it >= lo) & (it < hi)
                    if act.any():
                        self.stmts(s.body, inner, act, f"{s.var}={it}")
            elif isinstance(s, If):
                cond = np.asarray(_eval(s.cond, env))
                if cond.ndim == 2 and cond.shape[1] > 1:
                    self.f.add("lds_races", f"if ({s.cond}): condition depends on the thread")
                    cond = cond[:, :1]
                cond = np.broadcast_to(cond, (self.nb, 1))
                self.stmts(s.body, dict(env), active & cond, where)
            elif isinstance(s, Access):
                self.access(s, env, active, where)

    def _at(self, mask: np.ndarray, where: str) -> str:
        b, t = (int(x) for x in np.argwhere(mask)[0])
        return f"block {b}, thread {t}" + (f", {where}" if where else "") + \
            f" [{self.inst.name}]"

    def access(self, a: Access, env, active, where) -> None:
        f = self.f
        T = self.k.block
        shape = (self.nb, T)
        off = np.broadcast_to(np.asarray(_eval(a.offset, env), dtype=np.int64), shape)
        pred = np.broadcast_to(np.asarray(True if a.pred is None else _eval(a.pred, env)), shape)
        act = np.broadcast_to(active, shape)
        on = act & pred
        what = f"{a.tag} ({a.kind} {a.space} {a.buf}[offset .. +{a.width}])"
        eb = BYTES[self.buf_dtype[a.buf]]
        self.widths[a.tag] = a.width * eb * 8
        key = str(a.origin)
        if key not in self.origins:
            self.origins[key] = _concrete(a.origin, self.vals)
        origin = self.origins[key]
        all_in = np.ones(shape, bool)
        for j, coords in enumerate(a.coords):
            want, rng = eval_layout(origin, coords, env)
            want = np.broadcast_to(np.asarray(want, dtype=np.int64), shape)
            rng = np.broadcast_to(np.asarray(rng), shape)
            self.points += int(act.sum())
            bad = act & (off + j != want)
            if bad.any():
                i = tuple(np.argwhere(bad)[0])
                f.add("emitted_index_math", f"{what} element {j} at {self._at(bad, where)}: "
                                            f"printed offset {int(off[i] + j)} != layout "
                                            f"{a.origin} -> {int(want[i])}")
            if (on & ~rng).any():
                f.add("in_bounds", f"{what} element {j} at {self._at(on & ~rng, where)}: "
                                   f"coordinates outside {a.origin}")
            all_in &= rng
            if a.space == "lds":
                n = self.shared[a.buf]
                oob = on & ((off + j < 0) | (off + j >= n))
                if oob.any():
                    f.add("in_bounds", f"{what} element {j} at {self._at(oob, where)}: outside "
                                       f"{a.buf}[{n}]")
            elif a.kind == "store" and a.buf in self.outputs:
                cs = [np.broadcast_to(np.asarray(_eval(x, env), dtype=np.int64), shape)
                      for x in leaves(coords)]
                sel = on & rng
                ext = [int(x) for x in leaves(origin.shape)]
                lin = np.zeros(shape, np.int64)
                mul = 1
                for c, e in zip(cs, ext):
                    lin = lin + c * mul
                    mul *= e
                self.stored.setdefault(a.buf, [mul]).append(lin[sel])
        if a.space == "global" and len(a.coords[0]) >= 3:
            self.head_mapping(a, env, act, shape, what, where)
        if a.pred is not None and a.kind == "load":
            mism = act & (pred != all_in)
            if mism.any():
                i = tuple(np.argwhere(mism)[0])
                f.add("in_bounds", f"{what} at {self._at(mism, where)}: the predicate is "
                                   f"{'on' if pred[i] else 'off'} but the vector is "
                                   f"{'' if all_in[i] else 'not '}entirely in range")
        if a.width > 1:
            mis = on & (off % a.width != 0)
            if mis.any():
                f.add("vector_widths", f"{what} at {self._at(mis, where)}: offset not a multiple "
                                       f"of the {a.width}-element vector")
        if a.space == "lds":
            self.banks(a, off, act, eb, what, where)

    def head_mapping(self, a: Access, env, act, shape, what: str, where: str) -> None:
        """Every block and thread: K/V are read at the (batch, kv head) that GQA assigns to the
        (batch, head) of the thread's Q, and O/LSE are written at the Q's (batch, head)."""
        v = self.inst.values
        H, HK, G = v["heads"], v["kv_heads"], v["group"]
        lv = leaves(a.coords[0])
        head = np.broadcast_to(np.asarray(_eval(lv[-2], env), dtype=np.int64), shape)
        bat = np.broadcast_to(np.asarray(_eval(lv[-1], env), dtype=np.int64), shape)
        if a.buf == self.k.meta.get("head_ref", "Q"):
            self.qbh = np.where(act, bat * H + head, getattr(self, "qbh", np.full(shape, -1)))
            return
        qbh = getattr(self, "qbh", None)
        if qbh is None:
            self.f.add("lane_mfma_operands", f"{what}: accessed before "
                                             f"{self.k.meta.get('head_ref', 'Q')} (which fixes "
                                             "the thread's (batch, head)) is loaded")
            return
        if a.buf in ("K", "V"):
            want_b, want_h = qbh // H, (qbh % H) // G
            check = "lane_mfma_operands"
        else:
            want_b, want_h = qbh // H, qbh % H
            check = "lane_accumulator_writeback"
        bad = act & ((bat != want_b) | (head != want_h))
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            self.f.add(check, f"{what} at {self._at(bad, where)}: (batch, head) ({int(bat[i])}, "
                              f"{int(head[i])}) but the thread's Q is (batch, head) "
                              f"({int(qbh[i] // H)}, {int(qbh[i] % H)}): needs "
                              f"({int(want_b[i])}, {int(want_h[i])})")

    def banks(self, a: Access, off: np.ndarray, act: np.ndarray, eb: int, what: str,
              where: str) -> None:
        kind = "read" if a.kind == "load" else "write"
        instr = f"ds_{kind}_b{a.width * eb * 8}"
        rows = np.nonzero(act.all(axis=1))[0]
        if rows.size == 0:
            if act.any():
                self.f.add(f"bank_conflicts_lds_{kind}", f"{what}: only part of a block "
                                                         "executes it")
            return
        ref = off[rows[0]]
        if not (off[rows] == ref).all():
            self.f.add(f"bank_conflicts_lds_{kind}", f"{what}: LDS offsets depend on the block")
        full = ref[:, None] + np.arange(a.width)[None, :]
        r = bank_result(self.bank_cache, full, self.arch, instr, eb)
        self.bank_n[kind] += 1
        if isinstance(r, Exception):
            self.f.add(f"bank_conflicts_lds_{kind}", f"{what}: cannot check {instr}: {r}")
            return
        self.bank_worst[kind] = max(self.bank_worst[kind], r.max_ways)
        if not r.holds:
            self.f.add(f"bank_conflicts_lds_{kind}", f"{what} ({where}): {r.max_ways}-way "
                                                     f"{instr} conflict: {r.counterexample}")

    def coverage(self) -> str:
        v = self.inst.values
        want = {"O": v["batch"] * v["heads"] * v["seqlen_q"] * self.k.meta["plan"].cfg.head_dim,
                "LSE": v["batch"] * v["heads"] * v["seqlen_q"]}
        parts = []
        for buf in sorted(self.outputs):
            got = self.stored.get(buf)
            n = want.get(buf)
            if got is None:
                if n:
                    self.f.add("coverage", f"{buf} is never stored [{self.inst.name}]")
                continue
            total, sels = got[0], got[1:]
            cnt = np.bincount(np.concatenate(sels), minlength=total) if sels else \
                np.zeros(total, np.int64)
            bad = cnt != 1
            if bad.any():
                o = int(np.argmax(bad))
                self.f.add("coverage", f"{buf} element {o} (linear logical index) is stored "
                                       f"{int(cnt[o])} times over the grid [{self.inst.name}]")
            parts.append(f"{buf} ({total} elements)")
        return ", ".join(parts)


# ============================================================================ pass 2: dataflow

_UNSET = np.int64(-1)
# element identity: tensor (3 bits) | zero-filled | batch*heads+head (20) | row (22) | col (16)
_T_SHIFT, _Z_BIT, _BH_SHIFT, _ROW_SHIFT = 59, np.int64(1) << 58, 38, 16


def _enc(tensor: int, bh: np.ndarray, row: np.ndarray, col: np.ndarray,
         zero: np.ndarray) -> np.ndarray:
    if (np.asarray(row) >= (1 << 22)).any() or (np.asarray(bh) >= (1 << 20)).any():
        raise KernelError("attention gate: instance too large for the identity encoding")
    return ((np.int64(tensor) << _T_SHIFT) | (bh.astype(np.int64) << _BH_SHIFT)
            | (row.astype(np.int64) << _ROW_SHIFT) | col.astype(np.int64)
            | np.where(zero, _Z_BIT, 0))


def _dec(x: np.ndarray):
    """(tensor, batch*heads+head, row, col, zero-filled)."""
    return ((x >> _T_SHIFT) & 7, (x >> _BH_SHIFT) & ((1 << 20) - 1),
            (x >> _ROW_SHIFT) & _POS_MASK, x & 0xFFFF, (x & _Z_BIT) != 0)


def rowid(bh: Any, pos: Any) -> Any:
    """The identity of a query row: (batch * heads + head) << 22 | position."""
    return (np.asarray(bh, dtype=np.int64) << 22) | np.asarray(pos, dtype=np.int64)


class _Acc:
    """Accumulator state of a frag: S (row, key, head-dim bits, masked) or O (row, d, key bits,
    visible-key bits, version, normalised)."""

    def __init__(self, T: int, n: int, words: int, kw: int) -> None:
        self.kind = None            # "S" | "O"
        self.row = np.full((T, n), -1, np.int64)
        self.col = np.full((T, n), -1, np.int64)
        self.dbits = np.zeros((T, n, words), np.uint64)
        self.kbits = np.zeros((T, n, kw), np.uint64)
        self.vbits = np.zeros((T, n, kw), np.uint64)
        self.masked = np.zeros((T, n), bool)
        self.ver = np.zeros((T, n), np.int64)
        self.norm = np.zeros((T, n), bool)
        self.zeroed = np.zeros((T, n), bool)
        self.partial = np.zeros((T, n), bool)     # split-KV: unnormalised partial, stats taken


class _Var:
    def __init__(self, T: int, kw: int) -> None:
        self.row = np.full(T, -1, np.int64)
        self.kbits = np.zeros((T, kw), np.uint64)
        self.vbits = np.zeros((T, kw), np.uint64)
        self.ver = np.zeros(T, np.int64)
        self.ver_from = np.zeros(T, np.int64)
        self.set = np.zeros(T, bool)


def _bits(keys: np.ndarray, kw: int) -> np.ndarray:
    """One-hot uint64 words [..., kw] of keys (keys < 64 kw)."""
    out = np.zeros(keys.shape + (kw,), np.uint64)
    w = keys // 64
    b = np.left_shift(np.uint64(1), (keys % 64).astype(np.uint64))
    for i in range(kw):
        out[..., i] = np.where(w == i, b, np.uint64(0))
    return out


def _popcount(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64)
    cnt = np.zeros(x.shape, np.int64)
    for s in range(64):
        cnt += ((x >> np.uint64(s)) & np.uint64(1)).astype(np.int64)
    return cnt


class _Flow:
    def __init__(self, k: Any, inst: Instance, block: Tuple[int, int], f: Fail,
                 kw: int) -> None:
        self.k, self.inst, self.block, self.f = k, inst, block, f
        T = k.block
        self.T = T
        self.D = k.meta["plan"].cfg.head_dim
        self.dw = max(1, -(-self.D // 64))
        self.kw = kw
        self.vals = inst.symbols()
        self.tensor = {p.name: i + 1 for i, p in enumerate(k.params)}
        self.regs = {fr.name: np.full((T, fr.count), _UNSET) for fr in k.frags}
        self.frags = {fr.name: fr for fr in k.frags}
        self.acc: Dict[str, _Acc] = {}
        self.vars: Dict[str, _Var] = {}
        self.lds = {s.name: np.full(s.count, _UNSET) for s in k.shared}
        self.races = LdsRaces(k.shared)
        self.specs: Dict[int, MfmaTables] = {}
        self.ver_table: Dict[Any, int] = {}
        v = inst.values
        self.H, self.HK, self.G = v["heads"], v["kv_heads"], v["group"]
        self.mfma_issues = 0
        self.stores = 0
        self.exchanges = 0
        self.where = ""
        self.lse_state: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
        self.part_keys: Dict[int, np.ndarray] = {}   # split kernel: (bh, split) row -> key bits

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

    def stmts(self, body, env) -> None:
        for s in body:
            if isinstance(s, (Let, LetMinMax)):
                env[sym(s.name)] = _let_value(s, env)
            elif isinstance(s, Loop):
                lo, hi = int(_eval(s.start, env)), int(_eval(s.stop, env))
                for i in range(lo, hi):
                    inner = dict(env)
                    inner[sym(s.var)] = i
                    saved = self.where
                    self.where = f"{s.var}={i}"
                    self.stmts(s.body, inner)
                    self.where = saved
            elif isinstance(s, If):
                c = np.asarray(_eval(s.cond, env))
                if c.ndim and not (c == c.flat[0]).all():
                    self.fail("lds_races", f"if ({s.cond}) is not uniform across the block")
                if c.flat[0]:
                    self.stmts(s.body, dict(env))
            elif isinstance(s, Barrier):
                self.races.epoch += 1
            elif isinstance(s, ZeroFrag):
                self.zero(s.frag.name)
            elif isinstance(s, Access):
                self.access(s, env)
            elif isinstance(s, Mfma):
                self.mfma(s)
            elif isinstance(s, FVar):
                self.vars[s.name] = _Var(self.T, self.kw)
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
            elif isinstance(s, Comment):
                pass
            else:
                raise KernelError(f"attention gate: unknown statement {type(s).__name__}")

    # ---- helpers -------------------------------------------------------------------------
    def accs(self, name: str) -> _Acc:
        if name not in self.acc:
            fr = self.frags[name]
            self.acc[name] = _Acc(self.T, fr.count, self.dw, self.kw)
        return self.acc[name]

    def zero(self, name: str) -> None:
        fr = self.frags[name]
        self.acc[name] = _Acc(self.T, fr.count, self.dw, self.kw)
        self.acc[name].zeroed[:] = True
        self.regs[name][:] = _UNSET

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
        T = self.T
        off = np.broadcast_to(np.asarray(_eval(a.offset, env), dtype=np.int64), (T,))
        pred = np.broadcast_to(np.asarray(True if a.pred is None else _eval(a.pred, env)), (T,))
        fr = a.regs.frag.name
        th = np.arange(T)
        for j, i in enumerate(a.regs.idx):
            addr = off + j
            if a.space == "global":
                cs = [np.broadcast_to(np.asarray(_eval(x, env), dtype=np.int64), (T,))
                      for x in leaves(a.coords[j])]
                heads = self.HK if a.buf in ("K", "V") else self.H
                bh = cs[-1] * heads + cs[-2]
                if a.kind == "load":
                    # zero-filled elements keep their (out-of-range) coordinates: a key past
                    # seqlen_kv must still be masked, a row past seqlen_q never stored
                    self.regs[fr][:, i] = _enc(self.tensor[a.buf], bh, cs[0], cs[1], ~pred)
                else:
                    self.store_out(a, i, cs, pred)
            elif a.kind == "store":
                self.lds_touch(a, addr, th, True)
                self.lds[a.buf][addr] = self.regs[fr][:, i]
            else:
                self.lds_touch(a, addr, th, False)
                vals = self.lds[a.buf][addr]
                if (vals == _UNSET).any():
                    t = int(np.argmax(vals == _UNSET))
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
        if self.k.meta.get("kind") == "decode_combine":
            self.store_merged(a, i, cs, t_on)
            return
        want_buf = getattr(self, "stat_buf", {}).get(fr)
        if want_buf is not None and a.buf != want_buf:
            self.fail("lane_accumulator_writeback", f"{a.tag}: stores the split's "
                                                    f"{'max' if want_buf == 'Mp' else 'sum'} "
                                                    f"({fr}) to {a.buf}, not {want_buf}")
            return
        if a.buf == "LSE" or fr in self.lse_state:
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
            if fr in self.k.meta.get("partition_frags", ()):
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
        if acc is None or (acc.kind != "O" and not never):    # never: zeroed, no key at all
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
                                                    f"O({_rtxt(acc.row[t, i])}, {int(acc.col[t, i])})"
                                                    f" to O({_rtxt(cs[0][t])}, {int(cs[1][t])})")
            return
        if a.buf in self.k.meta.get("partials", ()):
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
                      f"{a.tag}: thread {t} row {_rtxt(row[ti])}: visible keys missing "
                      f"{miss[:8]}{'...' if len(miss) > 8 else ''}, invisible keys accumulated "
                      f"unmasked {extra[:8]}{'...' if len(extra) > 8 else ''}")

    # ---- MFMA ----------------------------------------------------------------------------
    def mfma(self, m: Mfma) -> None:
        sp = self.specs.get(id(m.spec))
        if sp is None:
            sp = self.specs[id(m.spec)] = MfmaTables(m.spec)
        T, W = self.T, self.T // 64
        self.mfma_issues += W
        base = (np.arange(W) * 64)[:, None, None]
        a_idx, b_idx = np.array(m.a.idx), np.array(m.b.idx)
        A = self.regs[m.a.frag.name][base + sp.a_lane[None], a_idx[sp.a_item][None]]  # [W,M,K]
        where = f"MFMA {m.tag}"
        if (A == _UNSET).any():
            self.fail("lane_mfma_operands", f"{where}: an A register was never loaded")
            return
        at, abh, arow, acol, az = _dec(A)
        b_acc = self.acc.get(m.b.frag.name)
        if b_acc is not None and b_acc.kind == "P":
            self.mfma_pv(m, sp, at, abh, arow, acol, b_acc, b_idx, where)
            return
        B = self.regs[m.b.frag.name][base + sp.b_lane[None], b_idx[sp.b_item][None]]  # [W,K,N]
        if (B == _UNSET).any():
            self.fail("lane_mfma_operands", f"{where}: a B register was never loaded")
            return
        bt, bbh, brow, bcol, bz = _dec(B)
        if (at != self.tensor.get("K")).any() or (bt != self.tensor.get("Q")).any():
            self.fail("lane_mfma_operands", f"{where}: S^T = K Q^T needs K in A and Q in B")
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
        self.acc_update(m, sp, "S", key_i, row_j, dq, None, None, where)

    def mfma_pv(self, m, sp, at, abh, arow, acol, P: _Acc, b_idx, where) -> None:
        W = self.T // 64
        base = (np.arange(W) * 64)[:, None, None]
        th = base + sp.b_lane[None]
        it = b_idx[sp.b_item][None]
        th, it = np.broadcast_arrays(th, it)
        prow, pkey, pm, pv = P.row[th, it], P.col[th, it], P.masked[th, it], P.ver[th, it]
        if (prow < 0).any():
            self.fail("lane_mfma_operands", f"{where}: a P register holds no probability")
            return
        if (at != self.tensor.get("V")).any():
            self.fail("lane_mfma_operands", f"{where}: O^T = V^T P^T needs V in A")
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
        if (abh != abh[:, :1, :1]).any() or (abh[:, 0, 0][:, None] != kv_j).any():
            self.fail("lane_mfma_operands", f"{where}: V of another (batch, kv head) than the "
                                            "probabilities' rows (GQA mapping)")
            return
        ver_j = pv[:, 0, :]
        if (pv != ver_j[:, None, :]).any():
            self.fail("online_softmax", f"{where}: one query row's probabilities come from "
                                        "different running maxima")
            return
        self.acc_update(m, sp, "O", d_i, row_j, kq, pm, ver_j, where)

    def acc_update(self, m, sp, kind, i_val, row_j, q_val, q_masked, ver_j, where) -> None:
        """Accumulator (lane, item) <- C[i][j]: S: (row_j, key i) += d slots q;
        O: (row_j, d i) += keys q."""
        W = self.T // 64
        acc = self.accs(m.acc.frag.name)
        if acc.kind is None:
            acc.kind = kind
        elif acc.kind != kind:
            self.fail("lane_mfma_operands", f"{where}: accumulator used for two products")
            return
        acc_idx = np.array(m.acc.idx)
        th = (np.arange(W) * 64)[:, None, None] + np.arange(64)[None, :, None]
        items = acc_idx[None, None, :]
        wv = np.arange(W)[:, None, None]
        want_col = i_val[wv, sp.c_i[None]]           # key (S) or d (O)
        want_row = row_j[wv, sp.c_j[None]]
        th_b, it_b = np.broadcast_arrays(th, items)
        th_b, it_b = th_b.copy(), it_b.copy()
        cur_r, cur_c = acc.row[th_b, it_b], acc.col[th_b, it_b]
        fresh = cur_r < 0
        if not acc.zeroed[th_b[fresh], it_b[fresh]].all():
            self.fail("lane_mfma_operands", f"{where}: accumulator used before it was zeroed")
        bad = ~fresh & ((cur_r != want_row) | (cur_c != want_col))
        if bad.any():
            w, l, c = (int(x) for x in np.argwhere(bad)[0])
            self.fail("lane_mfma_operands", f"{where}: wave {w} lane {l} item {c} held "
                                            f"({int(cur_r[w, l, c])}, {int(cur_c[w, l, c])}) but "
                                            f"this MFMA adds ({int(want_row[w, l, c])}, "
                                            f"{int(want_col[w, l, c])})")
            return
        acc.row[th_b, it_b] = want_row
        acc.col[th_b, it_b] = want_col
        if kind == "S":
            words, nbits = acc.dbits, self.dw
        else:
            words, nbits = acc.kbits, self.kw
        srt = np.sort(q_val, axis=1)
        if (srt[:, 1:] == srt[:, :-1]).any():
            self.fail("lane_mfma_operands", f"{where}: two reduction slots carry the same index")
            return
        if (q_val >= 64 * nbits).any():
            self.fail("lane_mfma_operands", f"{where}: reduction index past the tracked extent")
            return
        qb = _bits(q_val, nbits)                      # [W, K, nbits]
        new = np.bitwise_or.reduce(qb, axis=1)        # [W, nbits]
        new_b = new[:, None, None, :]
        cur = words[th_b, it_b]                       # [W, 64, C, nbits]
        if ((cur & new_b) != 0).any():
            self.fail("lane_mfma_operands", f"{where}: an accumulator adds a reduction index it "
                                            "already summed")
            return
        words[th_b, it_b] = cur | new_b
        if kind == "O":
            vis = np.bitwise_or.reduce(np.where(~q_masked[..., None], qb[:, :, None, :],
                                                np.uint64(0)), axis=1)       # [W, N, nbits]
            acc.vbits[th_b, it_b] = acc.vbits[th_b, it_b] | vis[wv, sp.c_j[None]]
            want_ver = ver_j[wv, sp.c_j[None]]
            cur_ver = acc.ver[th_b, it_b]
            if (cur_ver != want_ver).any():
                self.fail("online_softmax", f"{where}: O accumulated under maximum version "
                                            f"{int(cur_ver.flat[0])} receives probabilities of "
                                            f"version {int(want_ver.flat[0])} (missing rescale)")

    # ---- softmax -------------------------------------------------------------------------
    def _s_items(self, frag, items, what: str):
        acc = self.acc.get(frag.name)
        if acc is None or acc.kind != "S":
            self.fail("online_softmax", f"{what}: {frag.name} holds no scores")
            return None
        idx = np.array(items)
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
            r = np.broadcast_to(np.asarray(_eval(r_e, env), dtype=np.int64), (T,))
            kk = np.broadcast_to(np.asarray(_eval(k_e, env), dtype=np.int64), (T,))
            cv = np.broadcast_to(np.asarray(_eval(cond, env)), (T,))
            pos = acc.row[:, i] & _POS_MASK
            if (pos != r).any() or (acc.col[:, i] != kk).any():
                t = int(np.argmax((pos != r) | (acc.col[:, i] != kk)))
                self.fail("masking_and_tile_skipping",
                          f"mask item {i}: thread {t} holds S({_rtxt(acc.row[t, i])}, "
                          f"{int(acc.col[t, i])}) but the condition is printed for "
                          f"({int(r[t])}, {int(kk[t])})")
                return
            vis = self.inst.visible(acc.row[:, i], kk)
            if (cv != vis).any():
                t = int(np.argmax(cv != vis))
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
        v = _Var(self.T, self.kw)
        v.row = rows[:, 0].copy()
        v.kbits = np.bitwise_or.reduce(_bits(acc.col[:, idx], self.kw), axis=1)
        v.set[:] = True
        self.vars[s.dst] = v

    def vecdot(self, s: VecDot) -> None:
        """Decode: a lane's partial dot product of one query row and one key."""
        A = self.regs[s.a.frag.name if hasattr(s.a, "frag") else s.a.name][:, list(s.a_items)]
        B = self.regs[s.b.name][:, list(s.b_items)]
        what = f"dot -> {s.dst.name}[{s.item}]"
        if (A == _UNSET).any() or (B == _UNSET).any():
            self.fail("lane_mfma_operands", f"{what}: an operand register was never loaded")
            return
        at, abh, arow, acol, _ = _dec(A)
        bt, bbh, brow, bcol, _ = _dec(B)
        if (at != self.tensor.get("Q")).any() or (bt != self.tensor.get("K")).any():
            self.fail("lane_mfma_operands", f"{what}: needs Q times K")
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
        acc.kind = "S"
        i = s.item
        acc.row[:, i] = rid[:, 0]
        acc.col[:, i] = brow[:, 0]
        acc.dbits[:, i] = np.bitwise_or.reduce(_bits(acol, self.dw), axis=1)
        acc.masked[:, i] = False
        self.mfma_issues += 1

    def vecaxpy(self, s: VecAxpy) -> None:
        """Decode: O[row][d] += p(row, key) * V(key, d) for this lane's head dims."""
        P = self.acc.get(s.p.name)
        what = f"axpy {s.acc.name} += {s.p.name}[{s.p_item}] * {s.x.name}"
        if P is None or P.kind != "P":
            self.fail("lane_mfma_operands", f"{what}: {s.p.name} holds no probability")
            return
        X = self.regs[s.x.name][:, list(s.x_items)]
        if (X == _UNSET).any():
            self.fail("lane_mfma_operands", f"{what}: V register never loaded")
            return
        xt, xbh, xrow, xcol, _ = _dec(X)
        j = s.p_item
        prow, pkey, pm, pv = P.row[:, j], P.col[:, j], P.masked[:, j], P.ver[:, j]
        if (xt != self.tensor.get("V")).any() or (xrow != pkey[:, None]).any():
            self.fail("lane_mfma_operands", f"{what}: V rows are not the probability's key")
            return
        if (xbh != self.kv_of(prow >> 22)[:, None]).any():
            self.fail("lane_mfma_operands", f"{what}: V of another (batch, kv head) (GQA "
                                            "mapping)")
            return
        acc = self.accs(s.acc.name)
        if acc.kind is None:
            acc.kind = "O"
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
        kb = _bits(pkey, self.kw)[:, None, :]
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
        if s.method == "swizzle":
            src_lane = swizzle_source_lane(int(s.pattern), lane)
        else:
            addr = np.broadcast_to(np.asarray(_eval(s.addr, env), dtype=np.int64), (T,))
            src_lane = (addr >> 2) & 63
        return tid - lane + src_lane, src_lane

    def lanexor_item(self, s: LaneXor, env) -> None:
        """Exchange of a partial dot product: same (row, key), disjoint head dims."""
        acc = self.acc.get(s.frag.name)
        i = s.item
        what = f"{s.method} {s.frag.name}[{i}] ({s.op})"
        if acc is None or acc.kind != "S" or s.op != "sum":
            self.fail("cross_lane_reductions", f"{what}: only sums of scores are exchanged")
            return
        src, src_lane = self._src_lanes(s, env)
        self.exchanges += 1
        bad = (acc.row[src, i] != acc.row[:, i]) | (acc.col[src, i] != acc.col[:, i])
        if bad.any():
            t = int(np.argmax(bad))
            self.fail("cross_lane_reductions", f"{what}: lane {t % 64} of wave {t // 64} "
                                               f"(row {_rtxt(acc.row[t, i])}, key "
                                               f"{int(acc.col[t, i])}) combines lane "
                                               f"{int(src_lane[t])} (row "
                                               f"{_rtxt(acc.row[src[t], i])}, key "
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
        a = _Var(self.T, self.kw)
        a.row, a.ver_from, a.ver, a.set[:] = m.row.copy(), old, m.ver.copy(), True
        self.vars[s.alpha] = a
        mc = _Var(self.T, self.kw)
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

    def _scale(self, target_ver, target_row, target_set, alpha: _Var, what: str):
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
        kb = _bits(acc.col[:, idx], self.kw)                       # [T, n, kw]
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
        P.kind = "P"
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
            self.fail("online_softmax", f"normalise: O divided by the sum of another row")
            return
        if (has & ((acc.kbits[:, idx] != l.kbits[:, None, :]).any(axis=2))).any():
            t, c = (int(x) for x in np.argwhere(has & (acc.kbits[:, idx] != l.kbits[:, None, :])
                                                .any(axis=2))[0])
            self.fail("online_softmax", f"normalise: thread {t} O item {int(idx[c])} sums "
                                        f"{int(_popcount(acc.kbits[t, idx[c]]).sum())} keys but "
                                        f"{s.l} sums {int(_popcount(l.kbits[t]).sum())}")
            return
        if (has & (acc.ver[:, idx] != l.ver[:, None])).any() or (l.ver != mc.ver).any():
            self.fail("online_softmax", "normalise: O, l and the maximum are at different "
                                        "versions")
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
        acc.partial[:, idx] = True
        self.stat_buf = {s.m_out.name: "Mp", s.l_out.name: "Lp"}
        self.lse_state[s.m_out.name] = (l.row.copy(), l.vbits.copy())
        self.lse_state[s.l_out.name] = (l.row.copy(), l.vbits.copy())

    def _merge_var(self, name: str) -> Optional[_Var]:
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
        if (X == _UNSET).any() or (MP == _UNSET).any() or (LP == _UNSET).any():
            self.fail("reduction_reads_partials", f"{what}: an operand register was never "
                                                  "loaded")
            return
        xt, xbh, xs, xd, _ = _dec(X)
        mt, mbh, ms, _, _ = _dec(MP)
        lt, lbh, ls, _, _ = _dec(LP)
        tens = self.tensor
        if (xt != tens.get("Op")).any() or (mt != tens.get("Mp")).any() or \
                (lt != tens.get("Lp")).any():
            self.fail("reduction_reads_partials", f"{what}: operands are not (Op, Mp, Lp)")
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
        bit = _bits(sp[:, 0], self.kw)                                      # [T, kw]
        acc = self.accs(s.o.name)
        idx = np.array(s.o_items)
        fresh = acc.row[:, idx] < 0
        if not acc.zeroed[:, idx][fresh].all():
            self.fail("reduction_reads_partials", f"{what}: accumulator used before it was "
                                                  "zeroed")
        bad = ~fresh & ((acc.row[:, idx] != rid[:, None]) | (acc.col[:, idx] != xd))
        if bad.any():
            t, c = (int(x) for x in np.argwhere(bad)[0])
            self.fail("reduction_reads_partials", f"{what}: thread {t} item {int(idx[c])} holds "
                                                  f"O({_rtxt(acc.row[t, idx[c]])}, d "
                                                  f"{int(acc.col[t, idx[c]])}) but merges "
                                                  f"({_rtxt(rid[t])}, d {int(xd[t, c])})")
            return
        if ((acc.kbits[:, idx] & bit[:, None, :]) != 0).any():
            self.fail("reduction_reads_partials", f"{what}: a split merged twice")
            return
        acc.kind = "M"
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
            if acc is None or acc.kind != "M":
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
                                                  f"{_rtxt(cs[0][t])} the merge of "
                                                  f"{_rtxt(row[t])} over splits {got[:8]}"
                                                  f"{'...' if len(got) > 8 else ''} (want all "
                                                  f"{ns})")


def _rtxt(r: Any) -> str:
    r = int(r)
    return f"bh {r >> 22} row {r & _POS_MASK}" if r >= 0 else "none"


# ============================================================================ entry point

_BLOCK_SYMBOLS = ("bat", "h", "hk", "block_bh")


def block_independence(k: Any) -> Tuple[bool, str]:
    """The batch / head symbols enter nothing but global accesses (and the lets defining
    them): blocks of other (batch, head) pairs run the same program on other global
    coordinates, which the static pass checks for every block."""
    syms = {sym(n) for n in _BLOCK_SYMBOLS} | {sympy.Symbol(n, integer=True) for n in
                                               _BLOCK_SYMBOLS}
    defining = {"bat", "h", "hk"}
    for s in walk(k.body):
        exprs: List[Any] = []
        if isinstance(s, Let) and s.name not in defining:
            exprs = [s.expr]
        elif isinstance(s, LetMinMax):
            exprs = [s.a, s.b]
        elif isinstance(s, (Loop,)):
            exprs = [s.start, s.stop]
        elif isinstance(s, If):
            exprs = [s.cond]
        elif isinstance(s, Access) and s.space == "lds":
            exprs = [s.offset, s.pred] + leaves(s.coords)
        elif isinstance(s, MaskScores):
            exprs = list(s.rows) + list(s.keys) + list(s.conds)
        elif isinstance(s, LaneXor) and s.addr is not None:
            exprs = [s.addr]
        for e in exprs:
            if e is not None and sympy.sympify(e).free_symbols & syms:
                return False, f"{type(s).__name__} depends on the batch/head index: {e}"
    return True, ("batch/head symbols (bat, h, hk, block_bh) appear only in global access "
                  "offsets and coordinates (checked symbolically on every statement), and the "
                  "static pass checks for every block and thread that K/V are read at the GQA "
                  "(batch, kv head) of the thread's Q and O/LSE written at its (batch, head)")


def _check_partition(inst: Instance, part: Dict[int, np.ndarray], kw: int, f: Fail) -> None:
    """Split-KV: per (batch, head), the partials' key sets partition [0, seqlen_kv)."""
    v = inst.values
    skv, ns = v["seqlen_kv"], v["n_splits"]
    want = np.zeros(kw * 64, np.int64)
    want[:skv] = 1
    for bh in range(v["batch"] * v["heads"]):
        cnt = np.zeros(kw * 64, np.int64)
        for s in range(ns):
            bits = part.get(int(rowid(bh, s)))
            if bits is None:
                f.add("split_partition", f"(batch, head) {divmod(bh, v['heads'])}: split {s} "
                                         f"stores no partial [{inst.name}]")
                return
            cnt[bits_to_list(bits)] += 1
        bad = cnt != want
        if bad.any():
            key = int(np.argmax(bad))
            f.add("split_partition", f"(batch, head) {divmod(bh, v['heads'])}: key {key} is in "
                                     f"{int(cnt[key])} splits' partials (want {int(want[key])})"
                                     f" [{inst.name}]")
            return


def _dataflow_blocks(inst: Instance, k: Any) -> List[Tuple[int, int]]:
    """Every query tile (grid x) of the first and the last grid row (batch, head pairs)."""
    gx, gy, _ = inst.grid
    return [(bx, by) for by in sorted({0, gy - 1}) for bx in range(gx)]


def verify_attention(k: Any, *, instances: Optional[Sequence[Instance]] = None,
                     arch: Optional[str] = None) -> GateReport:
    """Run every check on an attention kernel's IR; returns the report (``raise_if_failed``)."""
    t0 = time.perf_counter()
    plan = k.meta["plan"]
    arch = arch or plan.cfg.arch
    insts = list(instances) if instances is not None else default_instances(k)
    f = Fail()
    bank_cache: Dict = {}
    points = 0
    widths: Dict[str, int] = {}
    worst = {"read": 1, "write": 1}
    nbank = {"read": 0, "write": 0}
    cov = []
    issues = stores = exchanges = 0
    sim = []
    indep, why = block_independence(k)
    if not indep:
        f.add("block_independence", why)
    for inst in insts:
        st = _Static(k, inst, arch, f, bank_cache)
        st.run()
        cov.append(st.coverage())
        points += st.points
        widths.update(st.widths)
        for kd in ("read", "write"):
            worst[kd] = max(worst[kd], st.bank_worst[kd])
            nbank[kd] += st.bank_n[kd]
        v = inst.values
        BN = plan.cfg.block_n
        kw = max(1, -(-(-(-v["seqlen_kv"] // BN) * BN) // 64))
        every = not indep or k.meta.get("kind") in ("decode_split", "decode_combine")
        blocks = [(bx, by) for by in range(inst.grid[1]) for bx in range(inst.grid[0])] \
            if every else _dataflow_blocks(inst, k)
        part: Dict[int, np.ndarray] = {}
        for blk in blocks:
            fl = _Flow(k, inst, blk, f, kw)
            fl.run()
            issues += fl.mfma_issues
            stores += fl.stores
            exchanges += fl.exchanges
            part.update(fl.part_keys)
        if k.meta.get("kind") == "decode_split":
            _check_partition(inst, part, kw, f)
        sim.append(f"{inst.name}: blocks {blocks}")
    lds_total, cap = check_lds_capacity(k, arch, f)
    t1 = time.perf_counter()
    inst_txt = "; ".join(i.describe() for i in insts)
    static_dom = (f"instances [{inst_txt}]: every block x every loop iteration x every thread, "
                  f"every element of every access ({points} points)")
    flow_dom = (f"instances [{inst_txt}]; simulated {'; '.join(sim)} (every query tile of the "
                f"first and last (batch, head); {why}), all loop iterations, all {k.block} "
                f"threads ({issues} wave-level MFMA issues, {exchanges} exchanges, {stores} "
                f"stores checked)")
    doms = {
        "emitted_index_math": static_dom, "in_bounds": static_dom,
        "vector_widths": static_dom + "; widths: " + ", ".join(
            f"{t} {w}-bit" for t, w in sorted(widths.items())),
        "bank_conflicts_lds_read": f"{nbank['read']} (access, iteration) issues of all waves "
                                   f"under the {arch} phase model; worst {worst['read']}-way",
        "bank_conflicts_lds_write": f"{nbank['write']} (access, iteration) issues of all waves "
                                    f"under the {arch} phase model; worst {worst['write']}-way",
        "coverage": "every element of " + "; ".join(cov) + " over the whole grid of each instance",
        "lds_capacity": f"{lds_total} bytes of LDS vs {cap} on {arch}",
        "block_independence": why,
    }
    for c in ("lane_mfma_operands", "cross_lane_reductions", "online_softmax",
              "masking_and_tile_skipping", "lane_accumulator_writeback", "lds_races"):
        doms[c] = flow_dom
    doms["split_partition"] = (f"{flow_dom}; for every (batch, head): the key sets of the "
                               "stored partials (max/sum/O of split s) are disjoint and their "
                               "union is [0, seqlen_kv)")
    doms["reduction_reads_partials"] = (f"{flow_dom}; every stored O / LSE element merged the "
                                        "partials (Op, Mp, Lp) of its own (batch, head) and "
                                        "split, each of the n_splits splits exactly once, O at "
                                        "its own head dim")
    checks = f.results(CHECKS + tuple(k.meta.get("extra_checks", ())), doms)
    details = {"instances": [i.describe() for i in insts], "bank_worst_ways": worst,
               "access_bits": widths, "lds_bytes": lds_total, "simulated": sim}
    return GateReport(k.name, checks, details, t1 - t0)
