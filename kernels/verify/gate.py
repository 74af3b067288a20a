"""The verification gate: prove a kernel's IR correct before it is compiled, or stop the build.

Everything is evaluated from the IR, i.e. from the exact sympy objects the emitter prints, with
C semantics (:func:`kernels.ir.c_eval`).  Two passes:

1. **Static** over every block x every loop iteration x every thread (numpy broadcasting),
   access by access.  When the block-translation lemma's symbolic conditions hold
   (:func:`_affine_plan`: every offset, coordinate and predicate atom is its value at block
   (0, 0) plus an integer slope times the block id), block (0, 0) is evaluated at every point
   and the verdict carried to every block exactly (:class:`_StaticAffine`); otherwise every
   block is enumerated (``verify_kernel(..., translation=False)`` forces that):

   * ``emitted_index_math`` - each printed offset equals its layoutalg origin (global layout, or
     the swizzled LDS layout) at the access's coordinates, element by element (this also proves
     each vector's elements are consecutive);
   * ``in_bounds`` - predicated-on elements lie inside their tensor (coordinates within the
     extents), LDS elements inside their array and tile; a predicated load is on exactly when
     its whole vector is in range (so zero-filled registers are exactly the out-of-range ones);
   * ``vector_widths`` - every vector access is aligned to its width in bytes;
   * ``bank_conflicts_lds_read`` / ``bank_conflicts_lds_write`` - every LDS access of every wave
     and loop iteration by :func:`layoutalg.verify.bank_conflicts` under the target's
     per-instruction phase model (max ways must be 1);
   * ``coverage`` - every element of each output is stored exactly once over the whole grid;
   * ``lds_capacity`` - the LDS arrays fit the target.

2. **Dataflow**, per simulated block, every loop iteration, every thread: registers and LDS hold
   element identities (tensor, coordinates, zero-filled?) instead of values:

   * ``lane_mfma_operands`` - for every MFMA issue and every lane/item, the A and B registers
     hold the elements the instruction's spec (``spec.tv_layout``) says they must: each row of
     A from one row of the A tensor, each column of B from one column of B, and A's k equal to
     B's k at every reduction slot;
   * ``lane_accumulator_writeback`` - each stored accumulator element holds C[m][n] for the
     (m, n) it is stored to, summed over every k in [0, K) exactly once;
   * ``lds_races`` - no LDS element is read and written (or written twice) by different
     threads without a barrier in between; no LDS read of a never-written element.

A failed check raises :class:`VerificationError` carrying the counterexample; the results
(``CheckResult`` records: holds, method, domain, counterexample) travel with the kernel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout
from layoutalg.verify.result import CheckResult

from ..errors import KernelError
from .gate_common import (BYTES, Fail, LdsRaces, MfmaTables, bank_result, bits_below,
                          bits_to_list, check_lds_capacity, compose_offset, leaves)
from ..ir.core import Access, Barrier, If, Kernel, Let, Loop, Mfma, ZeroFrag, c_eval, sym

__all__ = ["GateReport", "VerificationError", "verify_kernel", "CHECKS"]

CHECKS = ("emitted_index_math", "in_bounds", "vector_widths", "bank_conflicts_lds_read",
          "bank_conflicts_lds_write", "coverage", "lds_capacity", "lane_mfma_operands",
          "lane_accumulator_writeback", "lds_races")


class VerificationError(KernelError):
    """A gate check failed; ``report`` holds every result, ``failed`` the failing ones."""

    exit_code = 1

    def __init__(self, report: "GateReport") -> None:
        self.report = report
        self.failed = {k: r for k, r in report.checks.items() if not r.holds}
        lines = [f"verification failed for kernel {report.kernel}:"]
        for k, r in self.failed.items():
            lines.append(f"[{k}] {r}")
        super().__init__("\n".join(lines))


@dataclass
class GateReport:
    kernel: str
    checks: Dict[str, CheckResult]
    details: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        return all(r.holds for r in self.checks.values())

    def as_bools(self) -> Dict[str, bool]:
        return {k: bool(r.holds) for k, r in self.checks.items()}

    def to_json(self) -> Dict[str, Any]:
        return {k: {"holds": bool(r.holds), "method": r.method, "domain": r.domain,
                    "counterexample": None if r.holds else str(r.counterexample)}
                for k, r in self.checks.items()}

    def raise_if_failed(self) -> "GateReport":
        if not self.holds:
            raise VerificationError(self)
        return self


# ---------------------------------------------------------------------------- layout evaluation

def eval_origin(origin: Any, coords: Any, env: Dict[Any, Any]) -> Tuple[Any, Any]:
    """``(offset, in_range)`` of ``origin`` (Layout or Swizzle-ComposedLayout) at symbolic
    ``coords`` evaluated in ``env``: an independent numpy evaluation of the layout."""
    inner = origin.inner if isinstance(origin, ComposedLayout) else origin
    fs, fd = inner.flat()
    cs = [np.asarray(c_eval(c, env), dtype=np.int64) for c in leaves(coords)]
    if len(cs) != len(fs):
        raise KernelError(f"gate: coordinates {coords} do not match layout {origin}")
    off: Any = 0
    ok: Any = True
    for c, s, d in zip(cs, fs, fd):
        off = off + c * d
        ok = ok & (c >= 0) & (c < s)
    return compose_offset(origin, off), ok


def _where(mask: np.ndarray, names: Tuple[str, ...], env_vals: Dict[str, np.ndarray]) -> str:
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    parts = []
    for name, i in zip(names, idx):
        vals = env_vals.get(name)
        if vals is not None and vals.shape[0] > 1:
            parts.append(f"{name}={int(vals[i])}")
        elif vals is not None:
            parts.append(f"{name}={int(vals[0])}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- pass 1 (static)

class _Static:
    AXES = ("loop", "block_m", "block_n", "tid")

    def __init__(self, k: Kernel, arch: str, fails: Fail) -> None:
        self.k, self.arch, self.f = k, arch, fails
        self.buf_dtype = {p.name: p.dtype for p in k.params}
        self.buf_dtype.update({s.name: s.dtype for s in k.shared})
        self.shared = {s.name: s.count for s in k.shared}
        self.outputs = {p.name for p in k.params if not p.const}
        self.counts: Dict[str, np.ndarray] = {}
        self.origins: Dict[str, Any] = {}
        self.bank_cache: Dict[Tuple[str, bytes], Any] = {}
        self.bank_worst = {"read": 1, "write": 1}
        self.bank_n = {"read": 0, "write": 0}
        self.bank_methods: set = set()
        self.widths: Dict[str, int] = {}
        self.axis_vals: Dict[str, np.ndarray] = {}
        self.points = 0
        gm, gn = (k.grid + (1, 1))[:2]
        self.block_sig = [[0] * gn for _ in range(gm)]   # hash of every predicate, per block

    def env0(self) -> Dict[Any, Any]:
        k = self.k
        T = k.block
        env: Dict[Any, Any] = {sym("tid"): np.arange(T).reshape(1, 1, 1, T)}
        self.axis_vals["tid"] = np.arange(T)
        self.axis_vals["loop"] = np.zeros(1, dtype=np.int64)
        shapes = [(1, -1, 1, 1), (1, 1, -1, 1)]
        for i, name in enumerate(k.grid_symbols[:2]):
            vals = np.arange(k.grid[i])
            env[sym(name)] = vals.reshape(shapes[i])
            self.axis_vals[("block_m", "block_n")[i]] = vals
        return env

    def run(self) -> None:
        self.stmts(self.k.body, self.env0(), True, in_loop=False)

    def stmts(self, body, env, active, in_loop) -> None:
        for s in body:
            if isinstance(s, Let):
                env[s.symbol] = c_eval(s.expr, env)
            elif isinstance(s, Loop):
                if in_loop:
                    raise KernelError("gate: nested loops are not supported by the static pass")
                lo, hi = int(c_eval(s.start, env)), int(c_eval(s.stop, env))
                if hi <= lo:
                    continue
                vals = np.arange(lo, hi)
                inner = dict(env)
                inner[sym(s.var)] = vals.reshape(-1, 1, 1, 1)
                saved = self.axis_vals["loop"]
                self.axis_vals["loop"] = vals
                self.stmts(s.body, inner, active, in_loop=True)
                self.axis_vals["loop"] = saved
            elif isinstance(s, If):
                self.stmts(s.body, dict(env), active & np.asarray(c_eval(s.cond, env)), in_loop)
            elif isinstance(s, Access):
                self.access(s, env, active)

    def access(self, a: Access, env, active) -> None:
        f = self.f
        off = np.asarray(c_eval(a.offset, env), dtype=np.int64)
        pred = np.asarray(True if a.pred is None else c_eval(a.pred, env))
        on = active & pred
        where = f"{a.tag} ({a.kind} {a.space} {a.buf}[offset .. +{a.width}])"
        if a.pred is not None:
            pb = np.broadcast_to(on, np.broadcast_shapes(np.shape(on), (1, 1, 1, 1)))
            for i in range(len(self.block_sig)):
                for j in range(len(self.block_sig[0])):
                    sl = pb[:, min(i, pb.shape[1] - 1), min(j, pb.shape[2] - 1), :]
                    self.block_sig[i][j] = hash((self.block_sig[i][j], sl.tobytes()))
        eb = BYTES[self.buf_dtype[a.buf]]
        self.widths[a.tag] = a.width * eb * 8
        all_in = True
        per_elem_off = []
        for j, coords in enumerate(a.coords):
            want, in_rng = eval_origin(a.origin, coords, env)
            got = off + j
            shape = np.broadcast_shapes(np.shape(got), np.shape(want), np.shape(on),
                                        np.shape(in_rng))
            got_b, want_b = np.broadcast_to(got, shape), np.broadcast_to(want, shape)
            on_b, in_b = np.broadcast_to(on, shape), np.broadcast_to(in_rng, shape)
            self.points += int(np.prod(shape))
            bad = got_b != want_b
            if bad.any():
                f.add("emitted_index_math",
                      f"{where} element {j} at {self._at(bad)}: printed offset "
                      f"{int(got_b[bad][0])} != layout {a.origin} -> {int(want_b[bad][0])}")
            if (on_b & ~in_b).any():
                f.add("in_bounds", f"{where} element {j} at {self._at(on_b & ~in_b)}: "
                                   f"coordinates outside {a.origin}")
            all_in = all_in & in_b
            per_elem_off.append((got_b, on_b))
            if a.space == "lds":
                n = self.shared[a.buf]
                oob = on_b & ((got_b < 0) | (got_b >= n))
                if oob.any():
                    f.add("in_bounds", f"{where} element {j} at {self._at(oob)}: offset "
                                       f"{int(got_b[oob][0])} outside {a.buf}[{n}]")
            elif a.buf in self.outputs and a.kind == "store":
                n_out = int(a.origin.cosize())
                self.origins[a.buf] = a.origin
                sel = got_b[on_b & in_b]
                if sel.size and 0 <= sel.min() and sel.max() < n_out:
                    self.counts.setdefault(a.buf, []).append(sel.astype(np.int32))
                elif sel.size:
                    f.add("in_bounds", f"{where} element {j}: offset outside {a.buf}")
        if a.pred is not None and a.kind == "load":
            shape = np.broadcast_shapes(np.shape(pred), np.shape(active), np.shape(all_in))
            p_b = np.broadcast_to(pred, shape)
            in_all = np.broadcast_to(all_in, shape)
            mism = np.broadcast_to(active, shape) & (p_b != in_all)
            if mism.any():
                on_txt = "on" if p_b[mism][0] else "off"
                rng = "entirely in range" if in_all[mism][0] else "not entirely in range"
                f.add("in_bounds", f"{where} at {self._at(mism)}: the predicate is {on_txt} but "
                                   f"the vector is {rng} (a predicated load must be on exactly "
                                   "for in-range vectors, so zero-filled means out of range)")
        if a.width > 1:
            mis = np.broadcast_to(on, np.shape(off)) & (off % a.width != 0)
            if mis.any():
                f.add("vector_widths", f"{where} at {self._at(mis)}: offset {int(off[mis][0])} "
                                       f"is not a multiple of the {a.width}-element vector")
        if a.space == "lds":
            self.banks(a, off, eb, where)

    def banks(self, a: Access, off: np.ndarray, eb: int, where: str) -> None:
        kind = "read" if a.kind == "load" else "write"
        instr = f"ds_{kind}_b{a.width * eb * 8}"
        T = self.k.block
        arr = np.broadcast_to(off, np.broadcast_shapes(np.shape(off), (1, 1, 1, T)))
        # LDS offsets must not depend on the block index
        if arr.shape[1] > 1 and not (arr == arr[:, :1]).all() or \
                arr.shape[2] > 1 and not (arr == arr[:, :, :1]).all():
            self.f.add(f"bank_conflicts_lds_{kind}", f"{where}: LDS offsets depend on the block "
                                                     "index (not supported by the bank check)")
        arr = arr[:, 0, 0, :]
        pats = {p.tobytes(): (i, p) for i, p in reversed(list(enumerate(arr)))}
        for key, (i, p) in pats.items():
            full = p[:, None] + np.arange(a.width)[None, :]
            r = bank_result(self.bank_cache, full, self.arch, instr, eb)
            self.bank_n[kind] += 1
            if isinstance(r, Exception):
                self.f.add(f"bank_conflicts_lds_{kind}", f"{where}: cannot check {instr}: {r}")
                continue
            self.bank_methods.add(r.method)
            self.bank_worst[kind] = max(self.bank_worst[kind], r.max_ways)
            if not r.holds:
                it = self.axis_vals["loop"]
                at = f"loop={int(it[i])}" if len(it) > 1 else "outside the loop"
                self.f.add(f"bank_conflicts_lds_{kind}", f"{where} ({at}): {r.max_ways}-way "
                                                         f"{instr} conflict: {r.counterexample}")

    def _at(self, mask: np.ndarray) -> str:
        mask = np.asarray(mask)
        shape = mask.shape
        full = np.broadcast_to(mask, shape)
        idx = tuple(int(i) for i in np.argwhere(full)[0])
        parts = []
        for name, i, n in zip(self.AXES, idx, shape):
            vals = self.axis_vals.get(name)
            if n > 1 and vals is not None:
                label = {"loop": "iteration"}.get(name, name)
                parts.append(f"{label}={int(vals[i])}")
        return ", ".join(parts) or "every point"


# ---------------------------------------------------------------------------- pass 1 by translation

class _NeedFull(Exception):
    """The block-translation lemma does not apply; run the exhaustive static pass instead."""


def _slopes(expr: Any, grid: List[Any], cache: Dict[Any, Any]) -> Optional[Tuple[int, ...]]:
    """Integer ``s_g`` with ``expr == base + sum(s_g * g)`` and ``base`` free of every grid
    symbol ``g``, read off the expression's own top-level sum (the printed C evaluates an Add
    term by term, so then ``C(expr)(b) == C(expr)(0) + sum(s_g * b_g)`` exactly); None when a
    grid symbol appears anywhere else (inside a floor, a product with another symbol, ...)."""
    import sympy
    e = sympy.sympify(expr)
    hit = cache.get(e)
    if hit is not None or e in cache:
        return hit
    out: Optional[Tuple[int, ...]] = None
    gs = set(grid)
    if not (e.free_symbols & gs):
        out = (0,) * len(grid)
    else:
        rest, sl = e, []
        for g in grid:
            indep, dep = rest.as_independent(g, as_Add=True)
            if dep == 0:
                sl.append(0)
                continue
            c, m = dep.as_coeff_Mul()
            if m != g or not c.is_Integer:
                sl = None
                break
            sl.append(int(c))
            rest = indep
        if sl is not None and not (sympy.sympify(rest).free_symbols & gs):
            out = tuple(sl)
    cache[e] = out
    return out


_REL = {"<": (1, 1), "<=": (1, 0), ">": (-1, 1), ">=": (-1, 0)}   # sign of lhs-rhs, +1


def _affine_plan(k: Kernel) -> Tuple[Optional[Dict[int, Any]], str]:
    """Per access: slopes of its offset, coordinates and predicate atoms in the grid symbols.

    Returns ``(info, "")`` when the block-translation lemma's symbolic conditions hold, else
    ``(None, why)``.  Conditions: block-free ``Let``s, loop bounds and ``If`` conditions; every
    offset and coordinate affine in the block ids (integer slopes, read off the printed sum);
    LDS offsets block-free; global origins plain (linear) layouts; vector offsets moving by
    multiples of the vector; predicates conjunctions of ``<, <=, >, >=`` atoms, each affine in
    at most one block id; every output's stores with one slope per coordinate, each grid axis
    (of more than one block) moving exactly one output coordinate, forward.
    """
    import sympy
    from ..ir.core import walk
    if len(k.grid_symbols) < 2 or any(int(g) != 1 for g in tuple(k.grid)[2:]):
        return None, "grid is not two-dimensional"
    grid = [sym(g) for g in k.grid_symbols[:2]]
    G = [int(k.grid[0]), int(k.grid[1])]
    gs = set(grid)
    cache: Dict[Any, Any] = {}
    info: Dict[int, Any] = {}
    outputs = {p.name for p in k.params if not p.const}
    out_slopes: Dict[str, Tuple[Any, ...]] = {}
    for s in walk(k.body):
        if isinstance(s, Let) and sympy.sympify(s.expr).free_symbols & gs:
            return None, f"index {s.name} depends on the block index"
        if isinstance(s, Loop) and (sympy.sympify(s.start).free_symbols |
                                    sympy.sympify(s.stop).free_symbols) & gs:
            return None, f"loop {s.var} bounds depend on the block index"
        if isinstance(s, If) and sympy.sympify(s.cond).free_symbols & gs:
            return None, "an if condition depends on the block index"
        if not isinstance(s, Access):
            continue
        so = _slopes(s.offset, grid, cache)
        if so is None:
            return None, f"{s.tag}: offset is not affine in the block index"
        if s.space == "lds" and any(so):
            return None, f"{s.tag}: LDS offset depends on the block index"
        if s.width > 1 and any(x % s.width for x in so):
            return None, f"{s.tag}: offset moves by {so}, not multiples of the vector"
        if s.space == "global" and isinstance(s.origin, ComposedLayout):
            return None, f"{s.tag}: global origin is not a plain layout"
        if len(s.coords) != s.width:
            return None, f"{s.tag}: coordinates per element missing"
        csl = []
        for coords in s.coords:
            row = []
            for c in leaves(coords):
                sc = _slopes(c, grid, cache)
                if sc is None:
                    return None, f"{s.tag}: coordinate {c} is not affine in the block index"
                if sum(1 for x in sc if x) > 1:
                    return None, f"{s.tag}: coordinate {c} moves with two block indices"
                if s.space == "lds" and any(sc):
                    return None, f"{s.tag}: LDS coordinate {c} depends on the block index"
                row.append(sc)
            csl.append(tuple(row))
        atoms = []
        if s.pred is not None:
            pr = sympy.sympify(s.pred)
            if pr is sympy.true:
                parts: Tuple[Any, ...] = ()
            elif pr is sympy.false:       # never on: the atom 1 < 0
                parts = (sympy.StrictLessThan(sympy.Integer(1), sympy.Integer(0),
                                              evaluate=False),)
            elif isinstance(pr, sympy.And):
                parts = pr.args
            else:
                parts = (pr,)
            for a in parts:
                if not isinstance(a, sympy.core.relational.Relational) or a.rel_op not in _REL:
                    return None, f"{s.tag}: predicate atom {a} is not <, <=, > or >="
                sl_l, sl_r = _slopes(a.lhs, grid, cache), _slopes(a.rhs, grid, cache)
                if sl_l is None or sl_r is None:
                    return None, f"{s.tag}: predicate atom {a} is not affine in the block index"
                sgn, plus = _REL[a.rel_op]
                sl = tuple(sgn * (x - y) for x, y in zip(sl_l, sl_r))
                if sum(1 for x in sl if x) > 1:
                    return None, f"{s.tag}: predicate atom {a} moves with two block indices"
                atoms.append((a.lhs, a.rhs, sgn, plus, sl))
        if s.space == "global" and s.kind == "store" and s.buf in outputs:
            if not _is_compact(s.origin):
                return None, f"{s.tag}: output layout {s.origin} is not a bijection onto its range"
            for row in csl:
                if out_slopes.setdefault(s.buf, row) != row:
                    return None, f"{s.buf}: stores move with the block by different slopes"
        info[id(s)] = (so, csl, atoms)
    for buf, row in out_slopes.items():
        taken: set = set()
        for g in range(2):
            if G[g] == 1:
                continue
            moving = [p for p, sc in enumerate(row) if sc[g]]
            if len(moving) != 1 or row[moving[0]][g] < 0 or moving[0] in taken:
                return None, (f"{buf}: grid axis {g} does not move exactly one coordinate "
                              "(of its own) forward")
            taken.add(moving[0])
    return info, ""


class _Box:
    """Per point (loop iteration, thread): the set of blocks as a box ``prod_g [lo_g, hi_g]``
    of the grid, ``mask`` False meaning empty."""

    def __init__(self, mask: Any, lo: List[Any], hi: List[Any]) -> None:
        self.mask, self.lo, self.hi = mask, lo, hi

    @classmethod
    def full(cls, mask: Any, G: List[int]) -> "_Box":
        return cls(np.asarray(mask, dtype=bool), [np.int64(0)] * len(G),
                   [np.int64(g - 1) for g in G])

    def cut(self, u: Any, s: Tuple[int, ...]) -> None:
        """Intersect with ``{b : u + s . b <= 0}`` (at most one non-zero slope)."""
        u = np.asarray(u, dtype=np.int64)
        g = next((i for i, x in enumerate(s) if x), None)
        if g is None:
            self.mask = self.mask & (u <= 0)
        elif s[g] > 0:
            self.hi[g] = np.minimum(self.hi[g], np.floor_divide(-u, s[g]))
        else:
            self.lo[g] = np.maximum(self.lo[g], -np.floor_divide(-u, -s[g]))   # ceil(u / -s)

    def nonempty(self) -> Any:
        ne = self.mask
        for lo, hi in zip(self.lo, self.hi):
            ne = ne & (lo <= hi)
        return ne

    def inside(self, other: "_Box") -> Any:
        """Per point: self (non-empty) is a subset of other."""
        ok = other.mask
        for a, b, c, d in zip(self.lo, self.hi, other.lo, other.hi):
            ok = ok & (c <= a) & (b <= d)
        return ok

    def equal(self, other: "_Box") -> Any:
        na, nb = self.nonempty(), other.nonempty()
        same = np.asarray(True)
        for a, b, c, d in zip(self.lo, self.hi, other.lo, other.hi):
            same = same & (a == c) & (b == d)
        return (na == nb) & (~na | same)

    def meet(self, other: "_Box") -> "_Box":
        return _Box(self.mask & other.mask,
                    [np.maximum(a, b) for a, b in zip(self.lo, other.lo)],
                    [np.minimum(a, b) for a, b in zip(self.hi, other.hi)])

    def witness(self, other: Optional["_Box"], idx: Tuple[int, ...]) -> Tuple[int, ...]:
        """A block in self (at point idx) outside ``other`` when one exists (else self's lo)."""
        def at(x):
            x = np.asarray(x)
            return int(x[tuple(min(i, n - 1) for i, n in zip(idx, x.shape))]) if x.ndim else int(x)
        b = [at(lo) for lo in self.lo]
        if other is not None and bool(np.asarray(other.mask).reshape(-1)[0] if
                                      np.ndim(other.mask) == 0 else at(other.mask)):
            for g in range(len(b)):
                if at(self.lo[g]) < at(other.lo[g]):
                    b[g] = at(self.lo[g])
                    break
                if at(self.hi[g]) > at(other.hi[g]):
                    b[g] = at(self.hi[g])
                    break
        return tuple(b)


class _StaticAffine(_Static):
    """The static pass at block (0, 0), extended to every block of the grid by the
    block-translation lemma (see :func:`verify_kernel`'s domain text).

    Every offset, coordinate and predicate atom is ``value at block 0 + slope . block`` with
    integer slopes (:func:`_affine_plan`, symbolic).  Hence, per point (loop iteration, thread):
    the printed offset minus the layout's value is block-free when the slopes agree (so one block
    decides ``emitted_index_math`` for all); each atom holds on an exact interval of blocks per
    grid axis, so a predicate and a coordinate range are boxes of blocks, computed exactly, and
    ``in_bounds`` becomes box containment / equality; alignment is block-free (slopes are
    multiples of the vector); coverage reduces to one block per class of blocks that agree on
    every store predicate and on the clipping of their output tile (:meth:`coverage`).
    """

    def __init__(self, k: Kernel, arch: str, fails: Fail, info: Dict[int, Any]) -> None:
        super().__init__(k, arch, fails)
        self.info = info
        self.G = [int(k.grid[0]), int(k.grid[1])]
        self.breaks: List[set] = [{0, self.G[0]}, {0, self.G[1]}]
        self.stores: Dict[str, List[Any]] = {}
        self.out_shape: Dict[str, Tuple[int, ...]] = {}
        self.out_slopes: Dict[str, Any] = {}

    def env0(self) -> Dict[Any, Any]:
        k = self.k
        T = k.block
        env: Dict[Any, Any] = {sym("tid"): np.arange(T).reshape(1, 1, 1, T)}
        self.axis_vals["tid"] = np.arange(T)
        self.axis_vals["loop"] = np.zeros(1, dtype=np.int64)
        for i, name in enumerate(k.grid_symbols[:2]):
            env[sym(name)] = 0
            self.axis_vals[("block_m", "block_n")[i]] = np.zeros(1, dtype=np.int64)
        return env

    def _note_breaks(self, box: _Box) -> None:
        ne = np.asarray(box.nonempty())
        if not ne.any():
            return
        for g in range(2):
            for arr, add in ((box.lo[g], 0), (box.hi[g], 1)):
                a = np.asarray(arr)
                vals = np.unique(np.broadcast_to(a, np.broadcast_shapes(a.shape, ne.shape))[
                    np.broadcast_to(ne, np.broadcast_shapes(a.shape, ne.shape))]) + add
                self.breaks[g].update(int(v) for v in vals if 0 <= v <= self.G[g])

    def _where_block(self, mask: Any, box: _Box, other: Optional[_Box]) -> str:
        mask = np.asarray(mask)
        idx = tuple(int(i) for i in np.argwhere(mask)[0])
        b = box.witness(other, idx)
        return f"{self._at(mask)}, block ({b[0]}, {b[1]})"

    def access(self, a: Access, env, active) -> None:
        f = self.f
        so, csl, atoms = self.info[id(a)]
        off = np.asarray(c_eval(a.offset, env), dtype=np.int64)
        act = np.asarray(active, dtype=bool)
        on = _Box.full(act, self.G)
        for lhs, rhs, sgn, plus, sl in atoms:
            l0 = np.asarray(c_eval(lhs, env), dtype=np.int64)
            r0 = np.asarray(c_eval(rhs, env), dtype=np.int64)
            on.cut(sgn * (l0 - r0) + plus, sl)
        if atoms:
            self._note_breaks(on)
        where = f"{a.tag} ({a.kind} {a.space} {a.buf}[offset .. +{a.width}])"
        eb = BYTES[self.buf_dtype[a.buf]]
        self.widths[a.tag] = a.width * eb * 8
        on_ne = on.nonempty()
        all_in = _Box.full(True, self.G)
        is_out = a.space == "global" and a.buf in self.outputs and a.kind == "store"
        if is_out:
            self._note_breaks(on)
            self.origins[a.buf] = a.origin
            self.out_shape[a.buf] = tuple(int(x) for x in a.origin.flat()[0])
            self.out_slopes[a.buf] = csl[0]
        for j, coords in enumerate(a.coords):
            want, _ = eval_origin(a.origin, coords, env)
            got = off + j
            shape = np.broadcast_shapes(np.shape(got), np.shape(want), np.shape(on_ne))
            got_b, want_b = np.broadcast_to(got, shape), np.broadcast_to(want, shape)
            self.points += int(np.prod(shape))
            bad = got_b != want_b
            if bad.any():
                f.add("emitted_index_math",
                      f"{where} element {j} at {self._at(bad)} (and every block): printed "
                      f"offset {int(got_b[bad][0])} != layout {a.origin} -> "
                      f"{int(want_b[bad][0])}")
            # slopes: printed offset vs the layout at the coordinates (a plain layout is linear)
            inner = a.origin.inner if isinstance(a.origin, ComposedLayout) else a.origin
            fs, fd = inner.flat()
            for g in range(2):
                lay = sum(int(d) * row[g] for d, row in zip(fd, csl[j]))
                if self.G[g] > 1 and lay != so[g]:
                    f.add("emitted_index_math",
                          f"{where} element {j}: the printed offset moves by {so[g]} per block "
                          f"along grid axis {g}, the layout {a.origin} at its coordinates by "
                          f"{lay}: they differ at block {'(1, 0)' if g == 0 else '(0, 1)'}")
            inb = _Box.full(True, self.G)
            c0s = []
            for c, size, sc in zip(leaves(coords), fs, csl[j]):
                c0 = np.asarray(c_eval(c, env), dtype=np.int64)
                c0s.append(c0)
                inb.cut(-c0, tuple(-x for x in sc))
                inb.cut(c0 - int(size) + 1, sc)
            bad = on_ne & ~on.inside(inb)
            if np.any(bad):
                f.add("in_bounds", f"{where} element {j} at "
                                   f"{self._where_block(bad, on, inb)}: coordinates outside "
                                   f"{a.origin}")
            all_in = all_in.meet(inb)
            if a.space == "lds":
                n = self.shared[a.buf]
                oob = on_ne & ((got < 0) | (got >= n))
                if np.any(oob):
                    oob = np.broadcast_to(oob, shape)
                    f.add("in_bounds", f"{where} element {j} at {self._at(oob)}: offset "
                                       f"{int(got_b[oob][0])} outside {a.buf}[{n}]")
            elif is_out:
                sel = on.meet(inb)
                ne = np.broadcast_to(sel.nonempty(), shape)
                lo_off = got_b + sum(np.minimum(so[g] * sel.lo[g], so[g] * sel.hi[g])
                                     for g in range(2))
                hi_off = got_b + sum(np.maximum(so[g] * sel.lo[g], so[g] * sel.hi[g])
                                     for g in range(2))
                n_out = int(a.origin.cosize())
                if np.any(ne & ((lo_off < 0) | (hi_off >= n_out))):
                    f.add("in_bounds", f"{where} element {j}: offset outside {a.buf}")
                self.stores.setdefault(a.buf, []).append((c0s, on, shape))
        if atoms and a.kind == "load":
            pred_box = _Box.full(True, self.G)       # the predicate alone (no If mask)
            for lhs, rhs, sgn, plus, sl in atoms:
                l0 = np.asarray(c_eval(lhs, env), dtype=np.int64)
                r0 = np.asarray(c_eval(rhs, env), dtype=np.int64)
                pred_box.cut(sgn * (l0 - r0) + plus, sl)
            mism = act & ~pred_box.equal(all_in)
            if np.any(mism):
                shape = np.broadcast_shapes(np.shape(mism), (1, 1, 1, self.k.block))
                mism = np.broadcast_to(mism, shape)
                f.add("in_bounds", f"{where} at {self._where_block(mism, pred_box, all_in)}: "
                                   "the predicate and 'the whole vector is in range' hold on "
                                   "different blocks (a predicated load must be on exactly for "
                                   "in-range vectors, so zero-filled means out of range)")
        if a.width > 1:
            mis = on_ne & (off % a.width != 0)
            if np.any(mis):
                mis = np.broadcast_to(mis, np.broadcast_shapes(np.shape(mis), np.shape(off)))
                f.add("vector_widths", f"{where} at {self._at(mis)}: offset "
                                       f"{int(np.broadcast_to(off, mis.shape)[mis][0])} is not "
                                       f"a multiple of the {a.width}-element vector")
        if a.space == "lds":
            self.banks(a, off, eb, where)

    # ---- coverage ----------------------------------------------------------------------
    def cells(self, buf: str) -> Tuple[List[int], List[Optional[int]]]:
        """Cell extent per output coordinate (the slope of the axis that moves it, or the whole
        extent) and the grid axis moving it (None: no axis)."""
        shape, row = self.out_shape[buf], self.out_slopes[buf]
        cell, axis = [], []
        for p, sc in enumerate(row):
            g = next((g for g in range(2) if sc[g] and self.G[g] > 1), None)
            axis.append(g)
            cell.append(sc[g] if g is not None else shape[p])
        return cell, axis

    def class_breaks(self) -> List[List[int]]:
        br = [set(b) for b in self.breaks]
        for buf in self.stores:
            cell, axis = self.cells(buf)
            for p, g in enumerate(axis):
                if g is not None:
                    q = self.out_shape[buf][p] // cell[p]
                    br[g].update(x for x in (q, q + 1) if 0 <= x <= self.G[g])
        return [sorted(b) for b in br]

    def representatives(self) -> List[Tuple[int, int]]:
        """One block per class: blocks between consecutive break points agree on every
        predicate of every access at every point and on the clipping of their output tile."""
        br = self.class_breaks()
        reps = [[b for b in bs if b < self.G[g]] for g, bs in enumerate(br)]
        return [(i, j) for j in reps[1] for i in reps[0]]

    def coverage(self) -> None:
        f = self.f
        reps = self.representatives()
        for buf, recs in self.stores.items():
            shape = self.out_shape[buf]
            cell, axis = self.cells(buf)
            for p, g in enumerate(axis):
                if g is not None and self.G[g] * cell[p] < shape[p]:
                    f.add("coverage", f"{buf}: coordinate {p} from {self.G[g] * cell[p]} to "
                                      f"{shape[p] - 1} lies in no block's tile")
            for p, g in enumerate(axis):     # each block stores inside its own tile only
                if g is None:
                    continue
                for c0s, on, shp in recs:
                    outside = on.nonempty() & ((c0s[p] < 0) | (c0s[p] >= cell[p]))
                    if np.any(outside):
                        raise _NeedFull(f"{buf}: a block stores outside its {cell} tile")
            size = int(np.prod(cell))
            strides = [int(np.prod(cell[:p])) for p in range(len(cell))]
            for b in reps:
                lim = [min(cell[p], shape[p] - b[g] * cell[p]) if g is not None else shape[p]
                       for p, g in enumerate(axis)]
                idx_all = []
                for c0s, on, shp in recs:
                    sel = np.broadcast_to(on.mask, shp)
                    for g in range(2):
                        sel = sel & np.broadcast_to((on.lo[g] <= b[g]) & (b[g] <= on.hi[g]), shp)
                    for p in range(len(cell)):
                        sel = sel & np.broadcast_to((c0s[p] >= 0) & (c0s[p] < lim[p]), shp)
                    idx = 0
                    for p in range(len(cell)):
                        idx = idx + np.broadcast_to(c0s[p], shp)[sel] * strides[p]
                    idx_all.append(np.asarray(idx, dtype=np.int64).reshape(-1))
                cnt = np.bincount(np.concatenate(idx_all) if idx_all else np.zeros(0, np.int64),
                                  minlength=size)
                want = np.zeros(cell, dtype=np.int64, order="F")
                want[tuple(slice(0, max(x, 0)) for x in lim)] = 1
                want = want.reshape(-1, order="F")
                bad = cnt != want
                if bad.any():
                    o = int(np.argmax(bad))
                    rel = [(o // strides[p]) % cell[p] for p in range(len(cell))]
                    absc = [r + (b[g] * cell[p] if g is not None else 0)
                            for p, (r, g) in enumerate(zip(rel, axis))]
                    f.add("coverage", f"{buf} element {tuple(absc)} is stored {int(cnt[o])} "
                                      f"times (expected {int(want[o])}) by block {b} (and every "
                                      "block of its class)")


# ---------------------------------------------------------------------------- pass 2 (dataflow)

_UNSET = np.int64(-2)
_SH_C0, _SH_BUF, _ZERO = 30, 60, np.int64(1) << 59    # buf | zero | c0 (29 bits) | c1 (30 bits)
_MASK0, _MASK = (1 << 29) - 1, (1 << 30) - 1


def _enc(buf: int, c0: np.ndarray, c1: np.ndarray, zero: np.ndarray) -> np.ndarray:
    c0, c1 = np.asarray(c0, dtype=np.int64), np.asarray(c1, dtype=np.int64)
    # A coordinate outside its bit field would alias another element (or the buffer id) and
    # the dataflow proof would compare the wrong identities: refuse instead.
    if c0.size and (c0.min() < 0 or c0.max() > _MASK0 or c1.min() < 0 or c1.max() > _MASK):
        raise KernelError(f"GEMM gate: element coordinates outside [0, 2^29) x [0, 2^30) "
                          f"(got {int(c0.min())}..{int(c0.max())} x {int(c1.min())}.."
                          f"{int(c1.max())}) cannot be tracked by the dataflow check")
    return ((np.int64(buf) << _SH_BUF) | (c0 << _SH_C0) | c1 | np.where(zero, _ZERO, 0))


_ACC_SH = 31
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


class _Flow:
    def __init__(self, k: Kernel, fails: Fail, block: Tuple[int, ...], k_span: int) -> None:
        self.k, self.f, self.block = k, fails, block
        T = k.block
        self.T = T
        self.buf_id = {p.name: i + 1 for i, p in enumerate(k.params)}
        self.buf_name = {v: n for n, v in self.buf_id.items()}
        self.regs = {fr.name: np.full((T, fr.count), _UNSET) for fr in k.frags}
        self.lds = {s.name: np.full(s.count, _UNSET) for s in k.shared}
        self.races = LdsRaces(k.shared)
        accs = {m.acc.frag.name for m in _mfmas(k.body)}
        self.acc_frags = accs
        nw = max(1, -(-k_span // 64))
        # accumulator element identity: (m << 31) | n of the C element it sums, -1 = none yet
        self.acc_id = {n: np.full((T, self._frag(n).count), -1, np.int64) for n in accs}
        self.acc_zero = {n: np.zeros((T, self._frag(n).count), bool) for n in accs}
        # k bitsets per accumulator element, word-major: one MFMA touches one word, so its
        # gathers stay inside one contiguous [T, count] slice
        self.kbits = {n: np.zeros((nw, T, self._frag(n).count), np.uint64) for n in accs}
        self.specs: Dict[int, MfmaTables] = {}
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
            elif isinstance(s, ZeroFrag):
                n = s.frag.name
                self.regs[n][:] = _UNSET
                if n in self.acc_frags:
                    self.acc_id[n][:] = -1
                    self.kbits[n][:] = 0
                    self.acc_zero[n][:] = True
            elif isinstance(s, Access):
                self.access(s, env)
            elif isinstance(s, Mfma):
                self.mfma(s, env)

    # ---- memory --------------------------------------------------------------------------
    def access(self, a: Access, env) -> None:
        T = self.T
        off = np.broadcast_to(np.asarray(c_eval(a.offset, env), dtype=np.int64), (T,))
        pred = np.broadcast_to(np.asarray(True if a.pred is None else c_eval(a.pred, env)), (T,))
        fr = a.regs.frag.name
        th = np.arange(T)
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
                    self.lds[a.buf][addr] = self.regs[fr][:, idx].reshape(-1)
            else:
                self.lds_touch(a, addr, thr, write=False, env=env)
                if addr.min() < 0 or addr.max() >= self.lds[a.buf].shape[0]:
                    return   # reported by the static pass (in_bounds)
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
                     for x in leaves(a.coords[0])]
                self.k_extent[a.buf] = int(a.origin.shape[1]) \
                    if isinstance(a.origin.shape, tuple) else 0
                cs = [c[p][:, None] + np.asarray(deltas[p])[None, :] for p in range(2)]
                self.regs[fr][:, np.array(a.regs.idx)] = _enc(self.buf_id[a.buf], cs[0], cs[1],
                                                              ~pred[:, None])
                return
        for j, i in enumerate(a.regs.idx):
            addr = off + j
            if a.space == "global" and a.kind == "load":
                c = [np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (T,))
                     for x in leaves(a.coords[j])]
                self.k_extent[a.buf] = int(a.origin.shape[1]) if isinstance(a.origin.shape, tuple) else 0
                self.regs[fr][:, i] = _enc(self.buf_id[a.buf], c[0], c[1], ~pred)
            elif a.space == "lds" and a.kind == "store":
                self.lds_touch(a, addr, th, write=True, env=env)
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

    def _coord_deltas(self, a: Access) -> Optional[List[List[int]]]:
        """Per coordinate position, element j's coordinate minus element 0's, when every
        element's coordinate is element 0's printed sum with another integer constant term
        (``C(c_j) == C(c_0) - k_0 + k_j`` exactly); None otherwise."""
        key = id(a)
        if key in self.deltas:
            return self.deltas[key]
        out: Optional[List[List[int]]] = None
        per_elem = [leaves(c) for c in a.coords]
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
        cm, cn = (np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (T,))
                  for x in leaves(a.coords[j]))
        if fr not in self.acc_frags:
            self.f.add("lane_accumulator_writeback", f"{self.where(a.tag, env)}: stores "
                                                     f"{fr}, which no MFMA accumulates into")
            return
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
        K = self.k_extent.get("A", 0)
        want = bits_below(K, self.kbits[fr].shape[0])
        got = self.kbits[fr][:, t_on, i].T
        bad = (got != want[None, :]).any(axis=1)
        if bad.any():
            t = int(t_on[np.argmax(bad)])
            have = bits_to_list(self.kbits[fr][:, t, i])
            missing = sorted(set(range(K)) - set(have))
            extra = sorted(set(have) - set(range(K)))
            self.f.add("lane_accumulator_writeback",
                       f"{self.where(a.tag, env)}: thread {t} stores C({int(cm[t])}, {int(cn[t])}) "
                       f"summed over {len(have)} k values; missing k {missing[:8]}"
                       f"{'...' if len(missing) > 8 else ''}, unexpected k {extra[:8]}")

    # ---- MFMA ----------------------------------------------------------------------------
    def _mfma_plan(self, m: Mfma, sp: "MfmaTables") -> Any:
        """Flat gather indices of one MFMA statement (register and accumulator tables)."""
        key = id(m)
        pl = self.mplans.get(key)
        if pl is not None:
            return pl
        W = self.T // 64
        base = (np.arange(W) * 64)[:, None, None]
        na, nb = self._frag(m.a.frag.name).count, self._frag(m.b.frag.name).count
        nacc = self._frag(m.acc.frag.name).count
        a_idx, b_idx, acc_idx = np.array(m.a.idx), np.array(m.b.idx), np.array(m.acc.idx)
        a_fi = (base + sp.a_lane[None]) * na + a_idx[sp.a_item][None]            # [W, M, K]
        b_fi = (base + sp.b_lane[None]) * nb + b_idx[sp.b_item][None]            # [W, K, N]
        th = (np.arange(W) * 64)[:, None, None] + np.arange(64)[None, :, None]  # [W, 64, 1]
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
        W = self.T // 64
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
        sp = self.specs.get(id(m0.spec))
        if sp is None:
            sp = self.specs[id(m0.spec)] = MfmaTables(m0.spec)
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
                  and ((an[..., 0] >> (_SH_BUF - _SH_C0)) == self.buf_id.get("A", -1)).all()
                  and ((bn[..., 0, :] >> (_SH_BUF - _SH_C0)) == self.buf_id.get("B", -1)).all()
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
        self.mfma_issues += (self.T // 64) * len(ms)
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
        sp = self.specs.get(id(m.spec))
        if sp is None:
            sp = self.specs[id(m.spec)] = MfmaTables(m.spec)
        W = self.T // 64
        self.mfma_issues += W
        base = (np.arange(W) * 64)[:, None, None]
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
        if (ab != self.buf_id.get("A", -1)).any() or (bb != self.buf_id.get("B", -1)).any():
            w, i, q = (int(x) for x in np.argwhere(ab != self.buf_id.get("A", -1))[0]) \
                if (ab != self.buf_id.get("A", -1)).any() else (0, 0, 0)
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
        lanes = np.arange(64)
        th = (np.arange(W) * 64)[:, None, None] + lanes[None, :, None]          # [W, 64, 1]
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
    return [s for s in walk(body) if isinstance(s, Mfma)]


def _translation_lemma(k: Kernel) -> Tuple[bool, str]:
    """Do blocks differ only by a translation of the global coordinates?

    Holds when (1) no ``Let`` depends on a grid symbol, (2) every coordinate of every global
    access is ``c * block + (block-free terms)`` with an integer ``c`` per (buffer, coordinate
    position, grid symbol), the same for every access of that buffer, and (3) the shifts agree
    where the dataflow check compares coordinates: A rows with C rows, B columns with C
    columns, A's k with B's k, and k does not move at all (the k-sum is checked against
    [0, K)).  Then a block's dataflow is its representative's, translated,
    whenever the two have the same predicate values everywhere.
    """
    import sympy
    from ..ir.core import walk
    grid = [sym(g) for g in k.grid_symbols]
    tainted = set(grid)
    shifts: Dict[Tuple[str, int], Tuple[int, ...]] = {}
    cache: Dict[Any, Any] = {}
    for s in walk(k.body):
        if isinstance(s, Let) and sympy.sympify(s.expr).free_symbols & tainted:
            return False, f"index {s.name} depends on the block index"
        if isinstance(s, Access) and s.space == "lds":
            if sympy.sympify(s.offset).free_symbols & tainted:
                return False, f"{s.tag}: LDS offset depends on the block index"
        if isinstance(s, Access) and s.space == "global":
            for coords in s.coords:
                for p, c in enumerate(leaves(coords)):
                    sh = _slopes(c, grid, cache)
                    if sh is None:
                        c = sympy.expand(sympy.sympify(c))
                        sh = []
                        for g in grid:
                            d = sympy.diff(c, g)
                            if not d.is_Integer:
                                return False, f"{s.tag}: coordinate {c} is not affine in {g}"
                            sh.append(int(d))
                    if shifts.setdefault((s.buf, p), tuple(sh)) != tuple(sh):
                        return False, f"{s.tag}: {s.buf} coordinate {p} shifts differently"
    for key in (("A", 1), ("B", 1)):   # the reduction index must not move with the block
        if any(shifts.get(key, ())):
            return False, f"{key[0]}'s k coordinate shifts with the block ({shifts[key]})"
    pairs = ((("A", 0), ("C", 0)), (("B", 0), ("C", 1)), (("A", 1), ("B", 1)))
    for x, y in pairs:
        if x in shifts and y in shifts and shifts[x] != shifts[y]:
            return False, f"{x[0]} coordinate {x[1]} and {y[0]} coordinate {y[1]} shift " \
                          f"differently with the block ({shifts[x]} vs {shifts[y]})"
    return True, "blocks are translations of one another"


def _representatives(sig: List[List[int]]) -> List[Tuple[int, int]]:
    seen: Dict[int, Tuple[int, int]] = {}
    for j in range(len(sig[0])):
        for i in range(len(sig)):
            seen.setdefault(sig[i][j], (i, j))
    return sorted(seen.values())


def _blocks_to_simulate(grid: Tuple[int, ...], limit: int = 4) -> List[Tuple[int, int]]:
    gm, gn = grid[0], grid[1]
    if gm * gn <= limit:
        return [(i, j) for j in range(gn) for i in range(gm)]
    return sorted({(0, 0), (gm - 1, 0), (0, gn - 1), (gm - 1, gn - 1)})


# ---------------------------------------------------------------------------- entry point

def verify_kernel(k: Kernel, *, arch: str = "gfx942", k_span: Optional[int] = None,
                  blocks: Optional[List[Tuple[int, int]]] = None,
                  translation: bool = True) -> GateReport:
    """Run every check on ``k``; returns the report (use ``raise_if_failed``).

    ``translation=True`` (default) runs the static pass at one block and extends it to every
    block by the block-translation lemma when its symbolic conditions hold (falling back to the
    exhaustive enumeration of every block otherwise); ``False`` always enumerates every block.
    """
    t0 = time.perf_counter()
    fails = Fail()
    info, affine_why = _affine_plan(k) if translation else (None, "not requested")
    st: Any = None
    if info is not None:
        st = _StaticAffine(k, arch, fails, info)
        try:
            st.run()
            st.coverage()
        except _NeedFull as e:
            info, affine_why, st, fails = None, str(e), None, Fail()
    if st is None:
        st = _Static(k, arch, fails)
        st.run()
    for buf, sels in st.counts.items():
        origin = st.origins[buf]
        cnt = np.bincount(np.concatenate(sels), minlength=int(origin.cosize()))
        del sels
        if _is_compact(origin):
            want = np.ones_like(cnt)
        else:
            want = np.zeros_like(cnt)
            want[np.asarray(origin.values()).reshape(-1)] = 1
        bad = cnt != want
        if bad.any():
            o = int(np.argmax(bad))
            fails.add("coverage", f"{buf} element at offset {o} is stored {int(cnt[o])} times "
                                  f"(expected {int(want[o])}) over the grid")
    lds_total, cap = check_lds_capacity(k, arch, fails)
    lemma, why = _translation_lemma(k)
    if blocks is not None:
        blist, how = blocks, "blocks chosen by the caller"
    elif lemma and info is not None:
        blist = st.representatives()
        how = (f"one block per class of blocks that agree on every predicate; every other block "
               f"is a translation of its representative ({why}: affine coordinates with uniform "
               f"shifts, block-free LDS and register indexing, checked symbolically) with "
               f"identical predicates (predicate intervals computed exactly in the static pass)")
    elif lemma:
        blist = _representatives(st.block_sig)
        how = (f"one block per predicate pattern; every other block is a translation of its "
               f"representative ({why}: affine coordinates with uniform shifts, block-free LDS "
               f"and register indexing, checked symbolically) with identical predicates "
               f"(checked in the static pass)")
    else:
        blist = [(i, j) for j in range(k.grid[1]) for i in range(k.grid[0])]
        how = f"every block ({why})"
    span = k_span if k_span is not None else int(k.meta.get("k_span", 64))
    issues = stores = 0
    for b in blist:
        fl = _Flow(k, fails, b, span)
        fl.run()
        issues += fl.mfma_issues
        stores += fl.stores_checked
    t1 = time.perf_counter()
    grid = f"{k.grid[0]}x{k.grid[1]} blocks"
    T = k.block
    loops = ", ".join(f"{s.var} in [{s.start}, {s.stop})" for s in _loops(k.body)) or "no loop"
    static_dom = f"all {grid} x all loop iterations ({loops}) x all {T} threads, every element " \
                 f"of every access ({st.points} points)"
    if info is not None:
        static_dom = (
            f"all {grid} x all loop iterations ({loops}) x all {T} threads, every element of "
            f"every access, by the block-translation lemma: every offset, coordinate and "
            f"predicate atom was shown symbolically to be (its value at block (0, 0)) + "
            f"(integer slope) x (block id), so block (0, 0) is evaluated at every point "
            f"({st.points} points) and the result carried to every block exactly: index math by "
            f"equal slopes of printed offset and layout, bounds and predicates as exact "
            f"intervals of blocks per point, alignment by slopes that are multiples of the "
            f"vector")
    elif translation:
        static_dom += f" (block-translation lemma not applicable: {affine_why})"
    flow_dom = f"blocks {blist} of {grid} ({how}), all loop iterations, all {T} threads " \
               f"({issues} wave-level MFMA issues, {stores} accumulator stores)"
    doms = {
        "emitted_index_math": static_dom,
        "in_bounds": static_dom,
        "vector_widths": static_dom + "; widths: " + ", ".join(
            f"{t} {w}-bit" for t, w in sorted(st.widths.items())),
        "bank_conflicts_lds_read": f"{st.bank_n['read']} (access, wave-set, iteration) issues "
                                   f"under the {arch} phase model; worst {st.bank_worst['read']}-way",
        "bank_conflicts_lds_write": f"{st.bank_n['write']} (access, wave-set, iteration) issues "
                                    f"under the {arch} phase model; worst "
                                    f"{st.bank_worst['write']}-way",
        "coverage": (f"every element of {', '.join(sorted(st.counts)) or 'no output'} over {grid}"
                     if info is None else
                     f"every element of {', '.join(sorted(st.stores)) or 'no output'} over {grid}: "
                     f"each block stores only inside its own output tile (the slopes move "
                     f"one coordinate per grid axis by the tile extent; checked at every point), "
                     f"the tiles cover the output, and within a tile every element is stored "
                     f"exactly once, checked at one block per class of blocks that agree on "
                     f"every store predicate and on the clipping of the tile: "
                     f"{len(st.representatives())} block(s) {st.representatives()}"),
        "lds_capacity": f"{lds_total} bytes of LDS vs {cap} on {arch}",
        "lane_mfma_operands": flow_dom,
        "lane_accumulator_writeback": flow_dom,
        "lds_races": flow_dom,
    }
    checks = fails.results(CHECKS, doms)
    details = {"bank_worst_ways": dict(st.bank_worst), "access_bits": dict(st.widths),
               "simulated_blocks": blist, "lds_bytes": lds_total,
               "bank_methods": sorted(st.bank_methods)}
    return GateReport(k.name, checks, details, t1 - t0)


def _is_compact(layout: Any) -> bool:
    """A bijection onto [0, size): sorted by stride, each stride is the product of the extents
    below it."""
    if not isinstance(layout, Layout):
        return False
    fs, fd = layout.flat()
    span = 1
    for sz, d in sorted(zip(fs, fd), key=lambda x: x[1]):
        if sz == 1:
            continue
        if d != span:
            return False
        span *= sz
    return True


def _loops(body):
    from ..ir.core import walk
    return [s for s in walk(body) if isinstance(s, Loop)]
