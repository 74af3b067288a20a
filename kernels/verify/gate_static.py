"""Pass 1 of the GEMM gate (:mod:`kernels.verify.gate`): the static checks of every LDS and global
access (index math as printed, bounds, vector widths, bank conflicts, coverage), over every
block or, by the translation argument, over the blocks that represent them all."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout

from ..errors import KernelError
from ..ir.core import Access, If, Kernel, Let, Loop, c_eval, sym
from .gate_common import BYTES, Fail, bank_result, compose_offset, lds_instruction, leaves

__all__ = ["eval_origin", "StaticChecks", "NeedFullEnumeration", "affine_slopes", "affine_plan",
           "AffineStaticChecks", "is_compact"]


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

class StaticChecks:
    AXES = ("loop", "block_m", "block_n", "tid")

    def __init__(self, k: Kernel, arch: str, fails: Fail) -> None:
        self.k, self.arch, self.f = k, arch, fails
        self.buf_dtype = {p.name: p.dtype for p in k.params}
        self.params = {p.name: p for p in k.params}
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
                # bounds that depend on the block (a split's k-tile count, where a tail loop
                # starts) run from the smallest start to the largest stop, each block active
                # inside its own
                start, stop = np.asarray(c_eval(s.start, env)), np.asarray(c_eval(s.stop, env))
                lo, hi = int(start.min()), int(stop.max())
                if hi <= lo:
                    continue
                vals = np.arange(lo, hi)
                inner = dict(env)
                inner[sym(s.var)] = vals.reshape(-1, 1, 1, 1)
                saved = self.axis_vals["loop"]
                self.axis_vals["loop"] = vals
                on = active if stop.ndim == 0 else active & (vals.reshape(-1, 1, 1, 1) < stop)
                on = on if start.ndim == 0 else on & (vals.reshape(-1, 1, 1, 1) >= start)
                self.stmts(s.body, inner, on, in_loop=True)
                self.axis_vals["loop"] = saved
            elif isinstance(s, If):
                self.stmts(s.body, dict(env), active & np.asarray(c_eval(s.cond, env)), in_loop)
            elif isinstance(s, Access):
                self.access(s, env, active)
            elif hasattr(s, "accesses"):      # a compound statement (cp.async): its halves
                for a in s.accesses():
                    self.access(a, env, active)

    def access(self, a: Access, env, active) -> None:
        f = self.f
        off = np.asarray(c_eval(a.total_offset, env), dtype=np.int64)
        pred = np.asarray(True if a.pred is None else c_eval(a.pred, env))
        on = active & pred
        where = f"{a.tag} ({a.kind} {a.space} {a.buf}[offset .. +{a.width}])"
        self.tensor_contract(a, where)
        if a.soffset is not None:
            self.buffer_offsets(a, env, on, where, None)
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
            shp = np.broadcast_shapes(np.shape(on), np.shape(off))    # an If's mask may vary
            mis = np.broadcast_to(on, shp) & (np.broadcast_to(off, shp) % a.width != 0)
            if mis.any():
                f.add("vector_widths", f"{where} at {self._at(mis)}: offset {int(off[mis][0])} "
                                       f"is not a multiple of the {a.width}-element vector")
        if a.space == "lds":
            self.banks(a, off, eb, where)

    def tensor_contract(self, a: Access, where: str) -> None:
        """A global access of a tensor that declares its storage layout (``Param.layout``)
        must be evaluated from that layout; a buffer load needs the tensor's buffer resource,
        whose num_records covers the layout (with in-range coordinates and offsets equal to
        the layout, proved per element, every load is then inside the buffer)."""
        if a.space != "global":
            return
        prm = self.params.get(a.buf)
        if prm is None:
            return
        if prm.layout is not None and a.origin != prm.layout:
            self.f.add("emitted_index_math", f"{where}: evaluated from the layout {a.origin}, but "
                                             f"the tensor {a.buf} is stored as {prm.layout} "
                                             "(its declared layout)")
        if a.soffset is not None:
            if not prm.buffer:
                self.f.add("in_bounds", f"{where}: a buffer load of {a.buf}, which has no "
                                        "buffer resource")
            elif int(a.origin.cosize()) > prm.buffer_elems:
                self.f.add("in_bounds", f"{where}: the layout {a.origin} reaches element "
                                        f"{int(a.origin.cosize()) - 1}, past the buffer's "
                                        f"{prm.buffer_elems} elements (num_records)")

    def buffer_offsets(self, a: Access, env, on, where: str, slopes: Any) -> None:
        """The soffset is the same at every lane of a wave (it is an SGPR), and voffset and
        soffset are each >= 0 (both unsigned on the hardware).  ``slopes``: per grid axis, the
        (voffset, soffset) slopes when only block (0, 0) is evaluated (affine pass)."""
        T = self.k.block
        vo = np.asarray(c_eval(a.offset, env), dtype=np.int64)
        so = np.asarray(c_eval(a.soffset, env), dtype=np.int64)
        shp = np.broadcast_shapes(np.shape(so), (1, 1, 1, T))
        sob = np.broadcast_to(so, shp).reshape(shp[:3] + (T // 64, 64))
        if (sob != sob[..., :1]).any():
            self.f.add("emitted_index_math", f"{where}: the scalar offset (soffset) {a.soffset} "
                                             "differs between lanes of one wave (an SGPR holds "
                                             "one value per wave)")
        for name, val, g_idx in (("voffset", vo, 0), ("soffset", so, 1)):
            low = val
            if slopes is not None:
                low = val + sum(min(0, int(sl[g_idx]) * (G - 1))
                                for sl, G in zip(slopes, self.k.grid[:2]))
            shape = np.broadcast_shapes(np.shape(low), np.shape(on))
            neg = np.broadcast_to(on, shape) & (np.broadcast_to(low, shape) < 0)
            if neg.any():
                self.f.add("in_bounds", f"{where} at {self._at(neg)}: {name} "
                                        f"{int(np.broadcast_to(low, shape)[neg][0])} < 0 "
                                        "(unsigned on the hardware: an out-of-range load)")

    def banks(self, a: Access, off: np.ndarray, eb: int, where: str) -> None:
        kind = "read" if a.kind == "load" else "write"
        instr = lds_instruction(self.arch, a, eb)
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

class NeedFullEnumeration(Exception):
    """The block-translation lemma does not apply; run the exhaustive static pass instead."""


def affine_slopes(expr: Any, grid: List[Any], cache: Dict[Any, Any]) -> Optional[Tuple[int, ...]]:
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


def affine_plan(k: Kernel) -> Tuple[Optional[Dict[int, Any]], str]:
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
        so = affine_slopes(s.total_offset, grid, cache)
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
                sc = affine_slopes(c, grid, cache)
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
                sl_l, sl_r = affine_slopes(a.lhs, grid, cache), affine_slopes(a.rhs, grid, cache)
                if sl_l is None or sl_r is None:
                    return None, f"{s.tag}: predicate atom {a} is not affine in the block index"
                sgn, plus = _REL[a.rel_op]
                sl = tuple(sgn * (x - y) for x, y in zip(sl_l, sl_r))
                if sum(1 for x in sl if x) > 1:
                    return None, f"{s.tag}: predicate atom {a} moves with two block indices"
                atoms.append((a.lhs, a.rhs, sgn, plus, sl))
        if s.space == "global" and s.kind == "store" and s.buf in outputs:
            if not is_compact(s.origin):
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


class AffineStaticChecks(StaticChecks):
    """The static pass at block (0, 0), extended to every block of the grid by the
    block-translation lemma (see :func:`verify_kernel`'s domain text).

    Every offset, coordinate and predicate atom is ``value at block 0 + slope . block`` with
    integer slopes (:func:`affine_plan`, symbolic).  Hence, per point (loop iteration, thread):
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
        off = np.asarray(c_eval(a.total_offset, env), dtype=np.int64)
        act = np.asarray(active, dtype=bool)
        on = _Box.full(act, self.G)
        for lhs, rhs, sgn, plus, sl in atoms:
            l0 = np.asarray(c_eval(lhs, env), dtype=np.int64)
            r0 = np.asarray(c_eval(rhs, env), dtype=np.int64)
            on.cut(sgn * (l0 - r0) + plus, sl)
        if atoms:
            self._note_breaks(on)
        where = f"{a.tag} ({a.kind} {a.space} {a.buf}[offset .. +{a.width}])"
        self.tensor_contract(a, where)
        if a.soffset is not None:
            parts = [affine_slopes(x, [sym(g) for g in self.k.grid_symbols[:2]], {})
                     for x in (a.offset, a.soffset)]
            if None in parts:
                raise NeedFullEnumeration(f"{a.tag}: voffset/soffset not affine in the block")
            # any block where the predicate is on somewhere counts (a bound, not a witness)
            self.buffer_offsets(a, env, on.nonempty(), where, list(zip(*parts)))
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
                        raise NeedFullEnumeration(f"{buf}: a block stores outside its {cell} tile")
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


def is_compact(layout: Any) -> bool:
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
