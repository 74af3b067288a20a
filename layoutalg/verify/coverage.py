"""Coverage of a tiled copy: every tile element exactly once, and no access out of bounds.

:func:`coverage` proves that a TV partition ``(thread, value[, iteration]) -> tile index`` is a
bijection onto the tile (exhaustively, and by GF(2) rank when the layout is F2-linear: an affine
map of ``n`` bits onto ``n`` bits is a bijection iff its linear part has rank ``n``).

:func:`in_bounds` proves that tiling a (possibly symbolic) problem with that partition never
touches an element outside the problem under the stated predicate:

* ``"none"``: no predicate; safe iff along every dimension the last block's largest coordinate
  stays below the extent: ``(ceil(P/T) - 1) * T + max_c < P``;
* ``"element"``: each element is guarded by ``coord < P`` (always safe);
* ``"vector"``: one guard per lane vector of ``vector`` elements along ``vector_dim``, on its
  first element (what a vectorised predicated load does); safe iff no vector straddles the
  boundary, i.e. ``P % vector == 0`` when vector starts are multiples of ``vector``.

Conditions are built as sympy Booleans and decided under the symbols' assumptions
(e.g. ``M = 128*m`` with integer ``m``); an undecided condition is *not* reported as holding:
``holds`` is False with the condition in ``requires`` and a concrete violating size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import sympy

from ..tv import TVLayout
from ._access import as_access
from .f2proof import cross_check
from .result import AccessError, CheckResult, VerifierBug, VerifyError

__all__ = ["coverage", "CoverageResult", "CoverageCounterexample", "in_bounds", "BoundsResult"]


@dataclass(frozen=True)
class CoverageCounterexample:
    kind: str                         # "duplicate" | "missing" | "out of range"
    element: int                      # tile index
    coord: Tuple[int, ...]            # tile coordinate (column-major in tile_shape)
    touched_by: Tuple[Tuple[int, int, Tuple[int, ...]], ...]   # (thread, value, iteration)

    def __str__(self) -> str:
        who = ", ".join(f"(thread {t}, value {v}" + (f", iteration {i})" if i else ")")
                        for t, v, i in self.touched_by)
        if self.kind == "missing":
            return f"tile element {self.element} {self.coord} is never touched"
        if self.kind == "out of range":
            return f"index {self.element} is outside the tile, touched by {who}"
        return (f"tile element {self.element} {self.coord} is touched {len(self.touched_by)} "
                f"times: {who}")


@dataclass(frozen=True, kw_only=True)
class CoverageResult(CheckResult):
    tile_shape: Tuple[int, ...]
    duplicates: int          # elements touched more than once
    missing: int             # elements never touched
    out_of_range: int        # accesses outside the tile

    def summary(self) -> str:
        if self.holds:
            return f"coverage of tile {self.tile_shape}: every element exactly once"
        return (f"coverage of tile {self.tile_shape}: FAILS ({self.duplicates} duplicated, "
                f"{self.missing} missing, {self.out_of_range} out-of-range accesses)")


def _tile_coord(i: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    out = []
    for s in shape:
        out.append(i % s)
        i //= s
    return tuple(out)


def coverage(tv: Any, tile: Any = None, *, method: str = "auto") -> CoverageResult:
    """Prove that ``tv`` touches every element of its tile exactly once.

    ``tv``: TV layout / TVLayout / int array ``(thread, value[, iteration]) -> tile index``.
    ``tile``: the tile's shape (tuple) or size (int); default: a TVLayout's tile shape, else
    the number of (thread, value, iteration) points.
    """
    if method not in ("auto", "exhaustive", "f2"):
        raise VerifyError(f"unknown method {method!r}")
    if tile is None and isinstance(tv, TVLayout):
        tile = tv.tile_shape
    acc = as_access(tv, None, "tv")
    n_pts = acc.offsets.size
    if tile is None:
        tile = n_pts
    shape = tuple(tile) if isinstance(tile, (tuple, list)) else (tile,)
    if not all(type(s) is int and s > 0 for s in shape):
        raise VerifyError(f"tile must be a positive int or a tuple of them, got {tile!r}")
    n = int(np.prod(shape))
    flat = acc.offsets.transpose(2, 1, 0).reshape(-1)     # column-major (thread fastest)
    t, v, _ = acc.offsets.shape

    def who(mask: np.ndarray) -> Tuple[Tuple[int, int, Tuple[int, ...]], ...]:
        out = []
        for k in np.flatnonzero(mask)[:8]:
            out.append((int(k % t), int((k // t) % v), acc.iter_coord(int(k // (t * v)))))
        return tuple(out)

    oor = flat >= n
    counts = np.bincount(flat[~oor], minlength=n)
    dup, miss = int((counts > 1).sum()), int((counts == 0).sum())
    holds = not (oor.any() or dup or miss)
    cex = None
    if oor.any():
        k = int(np.flatnonzero(oor)[0])
        cex = CoverageCounterexample("out of range", int(flat[k]), (), who(flat == flat[k]))
    elif dup:
        e = int(np.flatnonzero(counts > 1)[0])
        cex = CoverageCounterexample("duplicate", e, _tile_coord(e, shape), who(flat == e))
    elif miss:
        e = int(np.flatnonzero(counts == 0)[0])
        cex = CoverageCounterexample("missing", e, _tile_coord(e, shape), ())
    meth, notes = cross_check(method, acc.layout, lambda: _f2_bijective(acc.layout, n), holds,
                              "bijective")
    dom = f"all {n_pts} (thread, value, iteration) points onto the {n} elements of tile {shape}"
    if meth == "f2":
        dom += " (GF(2): affine map of full rank onto log2(tile) bits)"
    return CoverageResult(check="tile coverage (bijectivity)", holds=holds, method=meth,
                          domain=dom, counterexample=cex, notes=notes, tile_shape=shape,
                          duplicates=dup, missing=miss, out_of_range=int(oor.sum()))


def _f2_bijective(layout: Any, n: int) -> bool:
    from ..f2 import to_f2
    from .f2proof import log2_exact
    m = to_f2(layout)
    bits = log2_exact(n, "tile size")
    if m.n_in != bits:
        return False
    return m.rank() == bits and m.n_out <= bits


# ---- bounds --------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class BoundsResult(CheckResult):
    predicate: str
    requires: Any = field(repr=False)        # sympy Boolean: the exact condition for safety
    decided: bool                            # sympy decided ``requires`` under the assumptions

    def summary(self) -> str:
        s = f"in-bounds ({self.predicate} predicate): {'HOLDS' if self.holds else 'FAILS'}"
        if not self.decided:
            s += " (not provable for all sizes)"
        return s

    def details(self) -> Tuple[str, ...]:
        return (f"safe iff {self.requires}",)


def in_bounds(tv: Any, tile_shape: Sequence[int], problem_shape: Sequence[Any], *,
              predicate: str = "none", vector: Optional[int] = None,
              vector_dim: int = 0) -> BoundsResult:
    """Prove a tiled copy stays inside a (possibly symbolic) ``problem_shape``.

    ``tv`` maps (thread, value[, iteration]) to the column-major index of a tile of shape
    ``tile_shape``; the grid has ``ceil(P_d / T_d)`` blocks along each dimension d.
    ``predicate``: ``"none"``, ``"element"`` or ``"vector"`` (see module docstring; with
    ``"vector"``, each thread's values form vectors of ``vector`` consecutive values that are
    consecutive along ``vector_dim``).
    """
    if predicate not in ("none", "element", "vector"):
        raise VerifyError(f"predicate must be 'none', 'element' or 'vector', got {predicate!r}")
    tshape = tuple(tile_shape)
    if not all(type(t) is int and t > 0 for t in tshape):
        raise VerifyError(f"tile_shape must be positive ints, got {tile_shape!r}")
    pshape = tuple(sympy.sympify(p) for p in problem_shape)
    if len(tshape) != len(pshape):
        raise VerifyError(f"tile {tshape} and problem {tuple(problem_shape)} need the same rank")
    if predicate == "vector" and (type(vector_dim) is not int
                                  or not 0 <= vector_dim < len(tshape)):
        raise VerifyError(f"vector_dim must be a dimension of tile {tshape} (0..{len(tshape) - 1})"
                          f", got {vector_dim!r}")
    for p in pshape:
        if p.is_positive is False or (p.is_integer is False):
            raise VerifyError(f"problem extent {p} must be a positive integer (declare symbols "
                              "with integer=True, positive=True)")
    acc = as_access(tv, None, "tv")
    n = int(np.prod(tshape))
    flat = acc.offsets
    if flat.max() >= n:
        raise AccessError(f"tv reaches tile index {int(flat.max())} >= tile size {n}")
    coords = []
    rest = flat
    for s in tshape:
        coords.append(rest % s)
        rest = rest // s
    conds, vecinfo = [], {}
    for d, (t_d, p_d) in enumerate(zip(tshape, pshape)):
        maxc = int(coords[d].max())
        if predicate == "element":
            continue
        if predicate == "vector" and d == vector_dim:
            vecinfo = _vector_groups(flat, coords, d, vector, t_d)
            # starts are multiples of w in every block: a vector straddles P iff P % w != 0
            conds.append(sympy.Eq(sympy.Mod(p_d, vector), 0))
            continue
        # last block's largest coordinate (nb-1)*T + maxc < P, with r = P mod T:
        # r == 0 -> always; r > 0 -> iff maxc < r   (exact for positive integers P)
        r = sympy.Mod(p_d, t_d)
        conds.append(sympy.Eq(r, 0) if maxc == t_d - 1 else
                     sympy.Or(sympy.Eq(r, 0), sympy.Gt(r, maxc)))
    req = sympy.And(*conds) if conds else sympy.true
    req_s = sympy.simplify(req)
    decided = req_s in (sympy.true, sympy.false)
    holds = req_s == sympy.true
    cex = None
    if not holds:
        sizes = _violation(req, pshape)
        if sizes is None and decided:
            raise VerifierBug(f"condition {req} is false but no violating size was found")
        if sizes is None:
            cex = (f"could not prove {req_s} from the assumptions on "
                   f"{sorted(map(str, req.free_symbols))}")
        else:
            cex = _witness(sizes, pshape, tshape, coords, acc, predicate, vector_dim, vecinfo)
    syms = sorted(map(str, set().union(*[p.free_symbols for p in pshape])))
    dom = (f"every block of the ceil(P/T) grid, every thread, value and iteration, tile {tshape}"
           + (f", for every value of {', '.join(syms)} allowed by its assumptions" if syms else
              f", problem {tuple(int(p) for p in pshape)}"))
    return BoundsResult(check="in-bounds", holds=holds, method="sympy", domain=dom,
                        counterexample=cex, predicate=predicate, requires=req_s, decided=decided)


def _vector_groups(flat: np.ndarray, coords: list, d: int, w: Any, t_d: int) -> dict:
    if type(w) is not int or w <= 0:
        raise VerifyError("predicate='vector' needs vector=<elements per lane vector>")
    tt, vv, it = flat.shape
    if vv % w:
        raise AccessError(f"each thread has {vv} values, not a multiple of vector={w}")
    cd = coords[d].reshape(tt, vv // w, w, it)
    others = [c.reshape(tt, vv // w, w, it) for k, c in enumerate(coords) if k != d]
    if not ((cd - cd[:, :, :1, :]) == np.arange(w)[None, None, :, None]).all() or \
            any((o != o[:, :, :1, :]).any() for o in others):
        raise AccessError(f"the {w}-value groups are not consecutive along dimension {d}")
    if (cd[:, :, 0, :] % w).any() or t_d % w:
        raise AccessError(f"vectors along dimension {d} do not start at multiples of {w} in "
                          f"every block (tile extent {t_d})")
    return {"w": w, "starts": cd[:, :, 0, :]}


def _witness(sizes: dict, pshape: tuple, tshape: tuple, coords: list, acc: Any,
             predicate: str, vector_dim: int, vecinfo: dict) -> str:
    """A concrete out-of-bounds access at the violating sizes."""
    conc = tuple(int(p.subs(sizes)) if sizes else int(p) for p in pshape)
    head = (", ".join(f"{k} = {v}" for k, v in sizes.items()) + f" (problem {conc})") if sizes \
        else f"problem {conc}"
    for d, (t_d, p_d) in enumerate(zip(tshape, conc)):
        nb = -(-p_d // t_d)
        if predicate == "vector" and d == vector_dim:
            w = vecinfo["w"]
            if p_d % w == 0:
                continue
            s = (p_d // w) * w
            b, c = divmod(s, t_d)
            th, g, i = (int(x) for x in np.argwhere(vecinfo["starts"] == c)[0])
            return (f"{head}: block {b} along dim {d}, thread {th} values {g * w}..{g * w + w - 1}"
                    f"{_it(acc, i)}: the guard checks coordinate {s} < {p_d} but the vector "
                    f"reaches {s + w - 1}")
        if predicate != "none" and not (predicate == "vector" and d != vector_dim):
            continue
        top = (nb - 1) * t_d + int(coords[d].max())
        if predicate == "none" and top >= p_d:
            th, v, i = (int(x) for x in np.argwhere(coords[d] == coords[d].max())[0])
            return (f"{head}: block {nb - 1} along dim {d}, thread {th} value {v}{_it(acc, i)} "
                    f"touches coordinate {top} >= {p_d}")
    return f"{head} violates the condition"  # pragma: no cover - conditions mirror the loop


def _it(acc: Any, i: int) -> str:
    return f" iteration {acc.iter_coord(i)}" if acc.iter_shape else ""


def _violation(req: Any, pshape: Tuple[Any, ...]) -> Optional[dict]:
    """Symbol values (small, allowed by their assumptions) for which ``req`` is false."""
    syms = sorted(set().union(*[p.free_symbols for p in pshape]), key=str)
    if not syms:
        return {} if req.subs({}) == sympy.false or sympy.simplify(req) == sympy.false else None
    import itertools
    for vals in itertools.product(range(1, 65), repeat=min(len(syms), 2)):
        sub = dict(zip(syms, list(vals) + [1] * (len(syms) - len(vals))))
        if any(s.is_even and v % 2 or s.is_odd and not v % 2 for s, v in sub.items()):
            continue
        try:
            val = req.subs(sub)
        except Exception:  # pragma: no cover
            continue
        if val == sympy.false:
            return sub
    return None
