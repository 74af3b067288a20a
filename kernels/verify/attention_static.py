"""Pass 1 of the attention gate (:mod:`kernels.verify.attention_gate`): the verification instances
and the static checks of every access (index math as printed, bounds, vector widths, bank
conflicts, coverage, LDS capacity), instance by instance."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from layoutalg import ComposedLayout, Layout

from .attention_roles import Roles
from .spec import KernelSpec
from ..errors import KernelError
from ..ir.attention import LetMinMax
from ..ir.core import Access, If, Let, Loop, c_eval, is_group_barrier, sym
from ..ir.nvidia import CpAsync
from .attention_ids import POS_MASK
from .gate_common import BYTES, Fail, bank_result, compose_offset, lds_instruction, leaves

__all__ = ["Instance", "grid_blocks", "default_instances", "eval_layout", "eval_expr", "let_value",
           "AttentionStatic"]


class Instance:
    """Values of the runtime symbols (plus the verifier-only ``batch`` / ``kv_heads``), the grid
    and the problem definition (causal or not)."""

    def __init__(self, name: str, values: Dict[str, int], grid: Tuple[int, int, int],
                 causal: bool) -> None:
        self.name, self.values, self.grid, self.causal = name, dict(values), grid, causal

    def __repr__(self) -> str:
        # by value: the verified-report cache keys on the instances' repr (an object address
        # there made every process's key differ, so a stored verdict was never found again)
        return (f"Instance({self.name!r}, {sorted(self.values.items())!r}, {tuple(self.grid)!r}, "
                f"{self.causal!r})")

    def symbols(self) -> Dict[Any, int]:
        out = {}
        for k, v in self.values.items():
            out[sympy.Symbol(k, integer=True, nonnegative=True)] = v
            out[sympy.Symbol(k, integer=True)] = v
        return out

    def visible(self, row: np.ndarray, key: np.ndarray) -> np.ndarray:
        """Is ``key`` visible to query row id ``row`` (``(batch * heads + head) << 22 |
        position``; a plain position works too)."""
        row = np.asarray(row) & POS_MASK
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
             f"(GQA group {v['heads'] // max(1, v['kv_heads'])}) seqlen_q={v['seqlen_q']} seqlen_kv={v['seqlen_kv']}")
        if self.causal:
            s += f" causal_off={v['causal_off']}"
        if "kv_chunk" in v:
            s += f" n_splits={v['n_splits']} kv_chunk={v['kv_chunk']}"
        gz = self.grid[2] if len(self.grid) > 2 else 1
        return s + f" grid {self.grid[0]}x{self.grid[1]}" + (f"x{gz}" if gz != 1 else "")


def grid_blocks(grid: Sequence[int], axes: int = 2) -> List[Tuple[int, ...]]:
    """Every block id of ``grid``, x fastest: ``(bx, by)`` pairs for a kernel of two grid
    symbols (``axes``; grid z 1), ``(bx, by, bz)`` for three (the wide prefills' (query
    blocks, heads, batch): :mod:`kernels.nvidia.prefill_wide`)."""
    gx, gy = int(grid[0]), int(grid[1])
    gz = int(grid[2]) if len(grid) > 2 else 1
    if axes < 3:
        if gz != 1:
            raise KernelError(f"grid {tuple(grid)} has a z extent but the kernel {axes} "
                              "grid symbols")
        return [(bx, by) for by in range(gy) for bx in range(gx)]
    return [(bx, by, bz) for bz in range(gz) for by in range(gy) for bx in range(gx)]


def default_instances(k: Any) -> List[Instance]:
    """The instances the kernel's spec names (``k.spec.domain``: a function of the kernel IR,
    e.g. :func:`kernels.amd.flash_attention.prefill_instances`).  The gate knows no kernel
    family: the builder's spec says on which shapes its kernel is checked."""
    spec = getattr(k, "spec", None)
    if spec is None or spec.domain.instances is None:
        raise KernelError(f"attention gate: kernel {k.name} names no verification instances "
                          "(its builder attaches a spec with an instances domain, "
                          "kernels.verify.spec.Domain.on_instances); pass instances=[...]")
    return list(spec.domain.instances(k))


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


def eval_expr(expr: Any, env: Dict[Any, Any]) -> Any:
    return c_eval(expr, env)


def let_value(s: Any, env: Dict[Any, Any]) -> Any:
    if isinstance(s, LetMinMax):
        a, b = np.asarray(eval_expr(s.a, env)), np.asarray(eval_expr(s.b, env))
        return np.minimum(a, b) if s.op == "min" else np.maximum(a, b)
    return eval_expr(s.expr, env)


# ============================================================================ pass 1: static

class AttentionStatic:
    """Every block x iteration x thread; arrays shaped [blocks, threads]."""

    def __init__(self, k: Any, inst: Instance, arch: str, f: Fail, bank_cache: Dict,
                 spec: Optional[KernelSpec] = None) -> None:
        self.k, self.inst, self.arch, self.f = k, inst, arch, f
        self.spec = spec if spec is not None else k.spec
        self.roles = Roles.from_spec(self.spec)
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

    def after_iteration(self, loop: Loop, env: Dict[Any, Any], inner: Dict[Any, Any]) -> None:
        """After each iteration of ``loop`` some block runs, walked in ``inner`` (a copy of
        ``env``): nothing here; an engine whose kernels carry values across iterations copies
        them back (:mod:`.attention_ring`)."""

    def stmts(self, body, env, active, where) -> None:
        for s in body:
            if isinstance(s, (Let, LetMinMax)):
                env[sym(s.name)] = let_value(s, env)
            elif isinstance(s, Loop):
                lo = np.broadcast_to(np.asarray(eval_expr(s.start, env)), (self.nb, 1))
                hi = np.broadcast_to(np.asarray(eval_expr(s.stop, env)), (self.nb, 1))
                if hi.size == 0 or (hi <= lo).all():
                    continue
                for it in range(int(lo.min()), int(hi.max())):
                    inner = dict(env)
                    inner[sym(s.var)] = it
                    act = active & (it >= lo) & (it < hi)
                    if act.any():
                        self.stmts(s.body, inner, act, f"{s.var}={it}")
                        self.after_iteration(s, env, inner)
            elif isinstance(s, If):
                cond = np.asarray(eval_expr(s.cond, env))
                if cond.ndim == 2 and cond.shape[1] > 1 and is_group_barrier(s) and \
                        self.spec.wave_roles:
                    continue    # a wave group's barrier: the per-wave phases (wave_phases)
                if cond.ndim == 2 and cond.shape[1] > 1:
                    self.f.add("lds_races", f"if ({s.cond}): condition depends on the thread")
                    cond = cond[:, :1]
                cond = np.broadcast_to(cond, (self.nb, 1))
                self.stmts(s.body, dict(env), active & cond, where)
            elif isinstance(s, Access):
                self.access(s, env, active, where)
            elif isinstance(s, CpAsync):        # NVIDIA: the global read and the shared write
                for a in s.accesses():
                    self.access(a, env, active, where)

    def _at(self, mask: np.ndarray, where: str) -> str:
        b, t = (int(x) for x in np.argwhere(mask)[0])
        return f"block {b}, thread {t}" + (f", {where}" if where else "") + \
            f" [{self.inst.name}]"

    def access(self, a: Access, env, active, where) -> None:
        f = self.f
        T = self.k.block
        shape = (self.nb, T)
        off = np.broadcast_to(np.asarray(eval_expr(a.offset, env), dtype=np.int64), shape)
        pred = np.broadcast_to(np.asarray(True if a.pred is None else eval_expr(a.pred, env)), shape)
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
                cs = [np.broadcast_to(np.asarray(eval_expr(x, env), dtype=np.int64), shape)
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
        H, G = v["heads"], v["group"]
        lv = leaves(a.coords[0])
        head = np.broadcast_to(np.asarray(eval_expr(lv[-2], env), dtype=np.int64), shape)
        bat = np.broadcast_to(np.asarray(eval_expr(lv[-1], env), dtype=np.int64), shape)
        if a.buf == self.roles.anchor:
            self.qbh = np.where(act, bat * H + head, getattr(self, "qbh", np.full(shape, -1)))
            return
        qbh = getattr(self, "qbh", None)
        if qbh is None:
            self.f.add("lane_mfma_operands", f"{what}: accessed before "
                                             f"{self.roles.anchor} (which fixes "
                                             "the thread's (batch, head)) is loaded")
            return
        if a.buf in self.roles.kv_tensors:
            want_b, want_h = qbh // H, (qbh % H) // G
            check = "lane_mfma_operands"
        else:
            want_b, want_h = qbh // H, qbh % H
            check = "lane_accumulator_writeback"
            if self.spec.store_heads == "kv_group":      # any head of the Q's kv group
                want_h = np.where(head // G == want_h // G, head, want_h)
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
        instr = lds_instruction(self.arch, a, eb)
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
        want = {t.name: self.spec.elements(t.name, v) for t in self.spec.by_role("output")}
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
