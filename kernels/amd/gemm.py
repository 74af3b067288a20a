"""The GEMM builder: a :class:`~kernels.gemm_plan.GemmPlan` -> kernel IR -> HIP source, gated.

Every index in the kernel is a layout of the plan evaluated on index symbols: a thread's
coordinate bases (``a_cp_mn = copy_mn(tid, 0)``, ...) are named once; each vector access adds
the layout's value-mode offset, maps the coordinate through the global or LDS layout, and
keeps the coordinates with the access so the gate can re-evaluate the layout point by point.

Pipeline (two LDS stages, one barrier per k-tile)::

    load k-tile 0 -> registers -> LDS stage 0; barrier
    for kt in 0 .. KT-2:   load k-tile kt+1 -> registers      (global loads in flight ...)
                           MFMAs on LDS stage kt%2            (... while the MFMAs run)
                           registers -> LDS stage (kt+1)%2; barrier
    MFMAs on LDS stage (KT-1)%2; write C (predicated at the edges)

With ``stages=1`` (half the LDS: a block_k=64 tile fits the occupancy of a 32-wide double
buffer) the store waits for every wave's reads: ``MFMAs; barrier; registers -> LDS; barrier``.
The two-stage loop is unrolled by two (each half on a constant stage) with an odd k-tile
peeled; the one-stage loop runs one k-tile per iteration and peels nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from layoutalg import Layout
from layoutalg.errors import LayoutError

from ..printer.hip import emit
from ..built import BuiltProgram
from .driver import KernelFamily, Stages, build_program
from .kernel_specs import gemm_spec
from .gemm_plan import DTYPE_BYTES, ConfigError, GemmConfig, GemmPlan, OperandPlan, plan_gemm
from .gemm_scales import scale_epilogue, scale_frags
from .gemm_interleave import interleaved_k_loop, operand_params
from .gemm_schedule import pipelined_k_tile
from ..ir.core import (Access, Barrier, Comment, Frag, Kernel, Let, Loop, Mfma, Param,
                 SchedBarrier, Shared, WaitCnt, ZeroFrag, swizzle_expr, sym)

__all__ = ["build_gemm", "BuiltKernel", "build_gemm_ir", "vector_groups", "GemmBuilder",
           "choose_lds_layouts"]


def vector_groups(offsets: Sequence[int], max_width: int) -> List[List[int]]:
    """Split values into vectors: runs of consecutive offsets, aligned to their power-of-two
    width (<= max_width).  ``offsets[v]`` is value v's offset for one representative thread;
    the gate proves the grouping for every thread."""
    pos = {int(o): v for v, o in enumerate(offsets)}
    if len(pos) != len(offsets):
        raise ValueError("vector_groups: two values share an offset")
    used: set = set()
    groups: List[List[int]] = []
    for o in sorted(pos):
        v = pos[o]
        if v in used:
            continue
        w = max_width
        while w > 1:
            run = [pos.get(o + j) for j in range(w)]
            if o % w == 0 and all(r is not None and r not in used for r in run):
                break
            w //= 2
        run = [pos[o + j] for j in range(w)]
        used.update(run)
        groups.append(run)
    return groups


def _value_coords(layout_pair: Tuple[Any, Any], v: int) -> Tuple[int, int]:
    a, b = layout_pair
    return int(a((0, v))), int(b((0, v)))


def _lds_groups(plan: GemmPlan, op: OperandPlan):
    """(kind, mn layout, k layout, vector groups) of the LDS writes and reads of ``op``."""
    eb = DTYPE_BYTES[plan.cfg.dtype]
    maxw = 16 // eb
    lin = lambda mn, k: mn * op.tile[1] + k  # noqa: E731 - row of BK elements (smem_inner)
    n_copy = op.copy[1].size()
    w_offs = [lin(*_value_coords((op.copy_mn, op.copy_k), v)) for v in range(n_copy)]
    writes = vector_groups(w_offs, maxw)
    per_read = plan.items * plan.kpack
    n_frag = op.frag_mn[1].size()
    r_offs = [lin(*_value_coords((op.frag_mn, op.frag_k), v)) for v in range(n_frag)]
    reads: List[List[int]] = []
    for base in range(0, n_frag, per_read):
        block = list(range(base, base + per_read))
        sub = vector_groups([r_offs[v] for v in block], maxw)
        reads += [[block[i] for i in g] for g in sub]
    return [("write", op.copy_mn, op.copy_k, writes), ("read", op.frag_mn, op.frag_k, reads)]


def _tile_index_arrays(plan: GemmPlan, op: OperandPlan):
    """(write instruction, write array, read instruction, read array) of ``op`` in tile indices
    ``mn + BMN*k`` ([threads, vectors x width], vectors in issue order), or None when the
    writes or reads mix vector widths."""
    eb = DTYPE_BYTES[plan.cfg.dtype]
    T = plan.cfg.threads
    (_, _, _, wg), (_, _, _, rg) = _lds_groups(plan, op)
    out = []
    for groups, tv in ((wg, op.copy), (rg, _join_tv(op.frag_mn, op.frag_k, op.tile[0]))):
        widths = {len(g) for g in groups}
        if len(widths) != 1:
            return None
        vals = tv.values().reshape((T, -1), order="F")
        arr = np.concatenate([vals[:, g] for g in groups], axis=1)
        out.append((f"ds_{'write' if tv is op.copy else 'read'}_b{widths.pop() * eb * 8}", arr))
    return out[0][0], out[0][1], out[1][0], out[1][1]


def _join_tv(mn_l: Any, k_l: Any, rows: int) -> Any:
    from layoutalg import Layout
    fs, fm = mn_l.flat()
    _, fk = k_l.flat()
    from .gemm_plan import unflatten
    return Layout(mn_l.shape, unflatten(mn_l.shape, tuple(a + rows * b for a, b in zip(fm, fk))))


def _swizzle_cannot_help(op: OperandPlan, arr: np.ndarray, instr: str, eb: int, arch: str,
                         min_vec: int) -> bool:
    """True when no XOR swizzle keeping ``min_vec``-element vectors whole can make the LDS
    access ``arr`` ([threads, issues x width] tile indices ``mn + BMN*k``) conflict-free.

    Such a swizzle permutes whole ``min_vec``-element chunks and never moves a dword inside its
    chunk, so a dword at in-chunk position ``p`` can only reach the ``banks / dwords-per-chunk``
    banks congruent to ``p``: a phase with more distinct dwords than that at one position
    conflicts under every such swizzle.  A necessary condition only, used to skip hopeless
    swizzle searches; the gate proves whatever is finally chosen.
    """
    from mfma_specs.arch import lds_model
    try:
        model = lds_model(arch, instr)
    except Exception:      # no phase model: let the search (and the gate) say so
        return False
    chunk_dw = min_vec * eb // 4
    if chunk_dw < 2 or model.banks % chunk_dw:
        return False
    slots = model.banks // chunk_dw
    BMN, BK = op.tile
    off = (arr % BMN) * BK + arr // BMN                        # k-contiguous rows (smem_inner)
    w = model.access_bytes // eb
    T = arr.shape[0]
    dw = (off * eb) // 4
    for wave in range(0, T, 64):
        for i in range(0, arr.shape[1], w):
            blk = dw[wave:wave + 64, i:i + w]
            for ph in model.phases:
                lanes = [l for l in ph if wave + l < T]
                d = np.unique(blk[lanes].reshape(-1))
                if np.bincount(d % chunk_dw, minlength=chunk_dw).max() > slots:
                    return True
    return False


_SWIZZLE_MAX_BITS = 5   # suggest_swizzle's default


def screen_swizzles(op: OperandPlan, accesses, eb: int) -> Optional[Tuple[Any, int]]:
    """The first ``(B, M, S)`` in :func:`layoutalg.verify.suggest_swizzle`'s candidate order
    whose XOR swizzle of ``op``'s k-contiguous LDS tile leaves every phase of every access free
    of bank conflicts, by a vectorized count of distinct bank words per bank and phase, and how
    many candidates were tried; ``(None, n)`` when none passes; None when the screen does not
    apply (a partial wave; a tile size that is not a power of two with a row length that is not
    one either).  A non-power-of-two row count (224 rows) with a power-of-two row length gets
    only the swizzles whose XOR target bits lie inside a row, so every offset stays in the tile.

    ``accesses``: ``[(array [threads, issues x width] of tile indices, LdsModel)]``.  A fast
    search only: the caller proves the winner with ``bank_conflicts`` (and the gate proves the
    kernel), and ``tests/test_gemm_plan.py`` checks it picks what ``suggest_swizzle`` picks.
    """
    from layoutalg import Swizzle
    BMN, BK = op.tile
    size = BMN * BK
    # a tile of a non-power-of-two row count (224 rows: the 4096^3 tile that fills the CUs)
    # keeps only swizzles that XOR within a row of a power-of-two BK: offsets stay in the tile
    row_only = bool(size & (size - 1))
    if row_only and BK & (BK - 1):
        return None
    nbits = (size - 1).bit_length() if row_only else size.bit_length() - 1
    kbits = BK.bit_length() - 1
    prep: List[Any] = []
    prep_rest: List[Any] = []
    m_min = 0
    for arr, model in accesses:
        T, nv = arr.shape
        if T % 64:
            return None
        w = model.access_bytes // eb
        m_min = max(m_min, w.bit_length() - 1)
        off = ((arr % BMN) * BK + arr // BMN).reshape(-1).astype(np.int64)
        rows = []
        for wave in range(0, T, 64):
            for i in range(0, nv, w):
                for ph in model.phases:
                    lanes = wave + np.asarray(ph)
                    rows.append((lanes[:, None] * nv + np.arange(i, i + w)[None, :]).reshape(-1))
        if len({len(r) for r in rows}) != 1:
            return None
        G = np.stack(rows)
        # a few rows first: most candidates already fail there
        prep.append((off, G[:16], model.banks, model.bank_bytes))
        prep_rest.append((off, G[16:], model.banks, model.bank_bytes))
    cands = [(0, m_min, 0)] + [(b, mm, sh) for b in range(1, _SWIZZLE_MAX_BITS + 1)
                               for mm in range(m_min, nbits) for sh in range(b, nbits)
                               if mm + sh + b <= nbits and not (row_only and mm + b > kbits)]
    for tried, (b, mm, sh) in enumerate(cands, 1):
        ok = True
        for off, G, banks, bank_bytes in prep + prep_rest:
            if not len(G):
                continue
            x = off
            if b:
                sw = Swizzle(b, mm, sh)
                x = x ^ ((x & sw.yyy_mask) >> sh)
            D = np.sort((x[G] * eb) // bank_bytes, axis=1)
            first = np.ones(D.shape, dtype=bool)
            first[:, 1:] = D[:, 1:] != D[:, :-1]
            R = D.shape[0]
            key = (np.arange(R)[:, None] * banks + D % banks)[first]
            if np.bincount(key, minlength=R * banks).max() > 1:
                ok = False
                break
        if ok:
            return (b, mm, sh), tried
    return None, len(cands)


def _screened_suggestion(cand: OperandPlan, wa, wi: str, ra, ri: str, eb: int, arch: str):
    """A ``SwizzleSuggestion`` for the screen's winner, proved by ``bank_conflicts``; None when
    the screen does not apply or the proof disagrees (the caller then runs suggest_swizzle);
    False when the screen finds no candidate."""
    from layoutalg import ComposedLayout, Swizzle
    from layoutalg.verify import bank_conflicts
    from layoutalg.verify.search import SwizzleSuggestion
    from mfma_specs.arch import lds_model
    try:
        models = (lds_model(arch, wi), lds_model(arch, ri))
    except Exception:
        return None
    got = screen_swizzles(cand, [(wa, models[0]), (ra, models[1])], eb)
    if got is None:
        return None
    found, tried = got
    if found is None:
        return False
    b, mm, sh = found
    BMN, BK = cand.tile
    tile = Layout((BMN, BK), (BK, 1))
    sw = Swizzle(b, mm, sh)
    lds = tile if b == 0 else ComposedLayout(sw, 0, tile)
    res = tuple(bank_conflicts(acc, lds=lds, model=m, elem_bytes=eb)
                for acc, m in ((wa, models[0]), (ra, models[1])))
    if not all(r.holds for r in res):
        return None
    meth = "f2" if all(r.method == "f2" for r in res) else "exhaustive"
    nbits = (BMN * BK - 1).bit_length()
    row = "" if (BMN * BK) & (BMN * BK - 1) == 0 else f", M + B <= log2({BK}) (inside a row)"
    dom = (f"candidates Swizzle(B, M, S) with B <= {_SWIZZLE_MAX_BITS}, M + S + B <= {nbits}{row}, "
           f"in suggest_swizzle's (B, M, S) order: the first {tried - 1} fail a vectorized "
           f"count of distinct bank words per bank and phase (kernels.gemm.screen_swizzles, "
           f"same phase models); this one is proved conflict-free for {wi} and {ri} ({meth})")
    return SwizzleSuggestion(check="conflict-free swizzle", holds=True, method=meth, domain=dom,
                             swizzle=None if b == 0 else sw, lds=lds, results=res, tried=tried)


def choose_lds_layouts(plan: GemmPlan) -> GemmPlan:
    """Pick, per operand, the copy-thread arrangement and the LDS swizzle.

    The swizzle comes from :func:`layoutalg.verify.suggest_swizzle` given the operand's LDS
    writes (the copy) and MFMA-operand reads (the fragments): the first XOR swizzle that makes
    both conflict-free under the target's phase model.  For an mn-contiguous operand (written to
    LDS transposed) the copy arrangement is searched too: threads along mn first (widest
    coalesced global segments), fewer if no swizzle works.  If nothing is conflict-free the
    unswizzled tile is kept and the gate will stop the build with the counterexample.
    """
    from layoutalg import Swizzle
    from layoutalg.verify import suggest_swizzle
    from .gemm_plan import operand_plan
    eb = DTYPE_BYTES[plan.cfg.dtype]
    for name in ("A", "B"):
        op = plan.a if name == "A" else plan.b
        if op.k_contig:
            arrangements = [None]
        else:
            tmn = op.tile[0] // op.vmn
            arrangements = [a for a in (tmn, 16, 8, 4, 2, 1) if a <= tmn and tmn % a == 0]
            arrangements = list(dict.fromkeys(arrangements))
        chosen = None
        # fast path: the first arrangement whose screened winner is proved conflict-free
        for a in arrangements:
            cand = op if a is None else operand_plan(plan, name, a)
            arrays = _tile_index_arrays(plan, cand)
            if arrays is None:
                continue
            wi, wa, ri, ra = arrays
            res = _screened_suggestion(cand, wa, wi, ra, ri, eb, plan.cfg.arch)
            if res is False:
                continue          # no candidate passes: this arrangement cannot work
            if res is not None:
                cand.swizzle = res.swizzle or Swizzle(0, 0, 0)
                cand.swizzle_search = res
                chosen = cand
            break
        if chosen is not None:
            if name == "A":
                plan.a = chosen
            else:
                plan.b = chosen
            continue
        for n_a, a in enumerate(arrangements):
            cand = op if a is None else operand_plan(plan, name, a)
            arrays = _tile_index_arrays(plan, cand)
            if arrays is None:
                continue
            wi, wa, ri, ra = arrays
            min_vec = max(int(wi[len("ds_write_b"):]), int(ri[len("ds_read_b"):])) // (8 * eb)
            if n_a + 1 < len(arrangements) and _swizzle_cannot_help(
                    cand, wa, wi, eb, plan.cfg.arch, min_vec):
                continue
            try:
                res = suggest_swizzle(cand.tile, write=wa, read=ra, elem_bytes=eb,
                                      arch=plan.cfg.arch, write_instruction=wi,
                                      read_instruction=ri)
            except LayoutError:  # e.g. no phase model for this LDS instruction: the gate says so
                if chosen is None:
                    chosen = cand
                continue
            if res.holds:
                cand.swizzle = res.swizzle or Swizzle(0, 0, 0)
                cand.swizzle_search = res
                chosen = cand
                break
            if chosen is None:
                chosen = cand
                chosen.swizzle_search = res
        if name == "A":
            plan.a = chosen
        else:
            plan.b = chosen
    return plan


class GemmBuilder:
    """Turns a plan into kernel IR (statements with sympy index math)."""

    def __init__(self, plan: GemmPlan, name: Optional[str] = None,
                 read_ahead: Optional[int] = None) -> None:
        self.p = plan
        self.read_ahead = plan.cfg.read_ahead if read_ahead is None else read_ahead
        c = plan.cfg
        self.c = c
        self.eb = DTYPE_BYTES[c.dtype]
        self.tid, self.bm, self.bn, self.kt = sym("tid"), sym("block_m"), sym("block_n"), sym("kt")
        self.name = name or (f"la_gemm_{c.layout_code.lower()}_{c.dtype}_{c.out_dtype}_"
                             f"{c.m}x{c.n}x{c.k}")
        self.counter: Dict[str, int] = {}
        self._vc_cache: Dict[Any, Any] = {}
        self._groups_cache: Dict[str, Any] = {}
        dt = c.dtype
        self.ld = {op.name: Frag(f"{op.name.lower()}_ld", dt, op.copy_elems, op.vec)
                   for op in (plan.a, plan.b)}
        fr_w = plan.items * plan.kpack
        self.fr = {op.name: Frag(f"{op.name.lower()}_fr", dt, op.frag_mn[1].size(), fr_w)
                   for op in (plan.a, plan.b)}
        c_items = plan.acc_m[1][0].size()
        self.acc = Frag("acc", "f32", plan.acc_m[1].size(), c_items)
        # epilogue scales in registers: per tensor (scale_a[0], scale_b[0]) or per row and
        # column (the distinct m and n of this thread's accumulator elements)
        self.scale_frags = scale_frags(c.scales, self.acc_values())

    def vc(self, pair: Tuple[Any, Any], v: int) -> Tuple[int, int]:
        """``_value_coords(pair, v)`` from each layout's values, computed once per layout."""
        key = (id(pair[0]), id(pair[1]))
        arr = self._vc_cache.get(key)
        if arr is None:
            a, b = pair
            T = a[0].size()
            arr = (a.values().reshape(-1, order="F")[::T], b.values().reshape(-1, order="F")[::T])
            self._vc_cache[key] = arr
        return int(arr[0][v]), int(arr[1][v])

    def groups(self, op: OperandPlan):
        g = self._groups_cache.get(op.name)
        if g is None or g[0] is not op:
            g = self._groups_cache[op.name] = (op, _lds_groups(self.p, op))
        return g[1]

    def fresh(self, stem: str) -> str:
        i = self.counter.get(stem, 0)
        self.counter[stem] = i + 1
        return f"{stem}{i}"

    # ---- thread bases -------------------------------------------------------------------
    def bases(self) -> List[Any]:
        p, t = self.p, self.tid
        out: List[Any] = [Comment("per-thread coordinate bases: layout(tid, 0) of each TV layout")]
        self.base: Dict[str, sympy.Symbol] = {}
        items = [("a_cp_mn", p.a.copy_mn), ("a_cp_k", p.a.copy_k),
                 ("b_cp_mn", p.b.copy_mn), ("b_cp_k", p.b.copy_k),
                 ("a_fr_mn", p.a.frag_mn), ("a_fr_k", p.a.frag_k),
                 ("b_fr_mn", p.b.frag_mn), ("b_fr_k", p.b.frag_k),
                 ("c_m", p.acc_m), ("c_n", p.acc_n)]
        for name, lay in items:
            out.append(Let(name, sympy.expand(sympy.sympify(lay((t, 0))))))
            self.base[name] = sym(name)
        return out

    # ---- global -> registers ---------------------------------------------------------------
    def load_tile(self, op: OperandPlan, kt_expr: Any) -> List[Any]:
        pre = op.name.lower()
        bmn = self.bm if op.name == "A" else self.bn
        BMN, BK = op.tile
        MN, K = op.extent
        mn0 = bmn * BMN + self.base[f"{pre}_cp_mn"]
        k0 = kt_expr * BK + self.base[f"{pre}_cp_k"]
        n = op.copy_elems
        # vectors run along the contiguous dimension; grouped on the block tile (a matrix
        # smaller than the tile would alias coordinates in its own layout)
        tile = Layout((BMN, BK), (BK, 1) if op.k_contig else (1, BMN))
        offs = [int(tile(self.vc((op.copy_mn, op.copy_k), v))) for v in range(n)]
        out: List[Any] = []
        for g in vector_groups(offs, op.vec):
            coords = []
            for v in g:
                dmn, dk = self.vc((op.copy_mn, op.copy_k), v)
                coords.append((mn0 + dmn, k0 + dk))
            off = sympy.expand(op.glob(coords[0]))
            last = coords[-1]
            pred = self._pred([(coords[0][0], last[0], MN, BMN), (coords[0][1], last[1], K, BK)])
            soff = sympy.Integer(0) if pred is not None and self.edge_buffer_loads else None
            out.append(Access("load", "global", op.name, off, len(g), self.ld[op.name].regs(g),
                              pred, tag=f"{op.name}.copy.load", origin=op.glob,
                              coords=tuple(coords), soffset=soff))
        return out

    @property
    def edge_buffer_loads(self) -> bool:
        """Predicated global loads as branch-free buffer loads (:mod:`.gemm_interleave`)."""
        return self.c.schedule == "interleaved"

    def _pred(self, dims) -> Any:
        """In-bounds predicate over (first, last, extent, block) per dimension; a dimension whose
        extent is a multiple of its block size never has a partial tile and is left out."""
        terms = []
        for first, last, extent, block in dims:
            if extent % block:
                terms.append(last < extent)
        if not terms:
            return None
        return sympy.And(*terms)

    # ---- registers -> LDS ----------------------------------------------------------------
    def store_tile(self, op: OperandPlan, stage: Any) -> List[Any]:
        pre = op.name.lower()
        out: List[Any] = []
        (_, mn_l, k_l, groups), _ = self.groups(op)
        for g in groups:
            coords = []
            for v in g:
                dmn, dk = self.vc((mn_l, k_l), v)
                coords.append(((self.base[f"{pre}_cp_mn"] + dmn, self.base[f"{pre}_cp_k"] + dk),
                               stage))
            out += self._lds_access("store", op, coords, self.ld[op.name].regs(g),
                                    f"{op.name}.copy.store", f"{pre}_st")
        return out

    def _lds_access(self, kind: str, op: OperandPlan, coords, regs, tag: str, stem: str):
        lin = sympy.expand(sympy.sympify(op.smem_inner(coords[0])))
        name = self.fresh(stem)
        s = sym(name)
        return [Let(name, lin),
                Access("load" if kind == "load" else "store", "lds", f"s{op.name}",
                       swizzle_expr(op.swizzle, s), len(coords), regs, None, tag=tag,
                       origin=op.smem, coords=tuple(coords))]

    # ---- LDS -> registers -> MFMA ----------------------------------------------------------
    def compute(self, stage: Any) -> List[Any]:
        """Operand reads from LDS stage ``stage`` and the MFMAs, k-group by k-group."""
        reads_of, mfmas_of = self.k_groups(stage)
        if self.c.schedule == "pipelined":
            return pipelined_k_tile(reads_of, mfmas_of, sync_id=stage)
        # issue order: the reads of `read_ahead` k-groups before the first MFMAs, then each
        # group's MFMAs followed by the reads of the group `read_ahead` further on (the LDS
        # latency hides behind MFMAs; the gate checks the dataflow in this order)
        ahead = min(max(int(self.read_ahead), 0), self.p.kgroups - 1)
        out: List[Any] = []
        for g in range(ahead + 1):
            out += reads_of[g]
        for g in range(self.p.kgroups):
            out += mfmas_of[g]
            if g + ahead + 1 < self.p.kgroups:
                out += reads_of[g + ahead + 1]
        return out

    def k_groups(self, stage: Any) -> Tuple[List[List[Any]], List[List[Any]]]:
        """Per k-group of LDS stage ``stage``: its operand reads and its MFMAs (unscheduled)."""
        p = self.p
        out: List[Any] = []
        per_read = p.items * p.kpack
        _, (_, _, _, a_reads) = self.groups(p.a)
        _, (_, _, _, b_reads) = self.groups(p.b)
        reads_of: List[List[Any]] = []
        mfmas_of: List[List[Any]] = []
        for g in range(p.kgroups):
            out = [Comment(f"k-group {g}: operand reads (one per MFMA tile)")]
            for op, reads in ((p.a, a_reads), (p.b, b_reads)):
                pre = op.name.lower()
                reps = p.reps_m if op.name == "A" else p.reps_n
                lo, hi = g * reps * per_read, (g + 1) * reps * per_read
                for rd in reads:
                    if not (lo <= rd[0] < hi):
                        continue
                    coords = []
                    for v in rd:
                        dmn, dk = self.vc((op.frag_mn, op.frag_k), v)
                        coords.append(((self.base[f"{pre}_fr_mn"] + dmn,
                                        self.base[f"{pre}_fr_k"] + dk), stage))
                    out += self._lds_access("load", op, coords, self.fr[op.name].regs(rd),
                                            f"{op.name}.frag.load", f"{pre}_rd")
            if self.c.explicit_waits and self.c.schedule == "basic":
                out.append(WaitCnt(lgkm=0))
            reads_of.append(out)
            out = [Comment(f"k-group {g}: {p.kpack * p.reps_m * p.reps_n} MFMAs")]
            it = p.items
            ci = self.acc.width
            for s in range(p.kpack):
                for rm in range(p.reps_m):
                    for rn in range(p.reps_n):
                        a_idx = [e + it * (s + p.kpack * (rm + p.reps_m * g)) for e in range(it)]
                        b_idx = [e + it * (s + p.kpack * (rn + p.reps_n * g)) for e in range(it)]
                        a_i = rm + p.reps_m * rn
                        out.append(Mfma(p.spec, self.acc.regs(range(a_i * ci, (a_i + 1) * ci)),
                                        self.fr["A"].regs(a_idx), self.fr["B"].regs(b_idx),
                                        f"mfma(m{rm},n{rn},g{g},s{s})", self.c.swap_ab))
            mfmas_of.append(out)
        return reads_of, mfmas_of

    # ---- epilogue --------------------------------------------------------------------------
    def epilogue(self) -> List[Any]:
        p, c = self.p, self.c
        ob = DTYPE_BYTES[c.out_dtype]
        m0 = self.bm * c.block_m + self.base["c_m"]
        n0 = self.bn * c.block_n + self.base["c_n"]
        n = self.acc.count
        tile = Layout((c.block_m, c.block_n),
                      (c.block_n, 1) if c.c_major == "row" else (1, c.block_m))
        offs = [int(tile(self.vc((p.acc_m, p.acc_n), v))) for v in range(n)]
        contig = c.m if c.c_major == "col" else c.n
        maxw = 16 // ob
        while maxw > 1 and contig % maxw:
            maxw //= 2
        out: List[Any] = self.scale_epilogue()
        out.append(Comment("write-back: accumulator TV layout -> C (predicated at edges)"))
        # the thread's part of the C offset bound once (block terms stay in each store, so the
        # gate's block-translation lemma still applies): without it clang recomputes and
        # sign-extends the whole sum before every store when registers are tight (224x128x32
        # at 240 VGPRs: 3 instructions more per store, 112 stores)
        thread_off = sympy.expand(p.c_glob((self.base["c_m"], self.base["c_n"])))
        out.append(Let("c_off", thread_off))
        for g in vector_groups(offs, maxw):
            coords = []
            for v in g:
                dm, dn = self.vc((p.acc_m, p.acc_n), v)
                coords.append((m0 + dm, n0 + dn))
            off = sympy.expand(p.c_glob(coords[0]))
            rest = sympy.expand(off - thread_off)
            if not rest.free_symbols & {self.base["c_m"], self.base["c_n"]}:
                off = sym("c_off") + rest
            pred = self._pred([(coords[0][0], coords[-1][0], c.m, c.block_m),
                               (coords[0][1], coords[-1][1], c.n, c.block_n)])
            out.append(Access("store", "global", "C", off, len(g), self.acc.regs(g), pred,
                              tag="C.store", origin=p.c_glob, coords=tuple(coords)))
        return out

    def acc_values(self) -> List[Tuple[int, int]]:
        """(m, n) offset of each accumulator element from the thread's (c_m, c_n) base."""
        return [self.vc((self.p.acc_m, self.p.acc_n), v) for v in range(self.acc.count)]

    def scale_epilogue(self) -> List[Any]:
        """The config's epilogue scaling (:mod:`kernels.amd.gemm_scales`)."""
        c = self.c
        return scale_epilogue(c.scales, self.scale_frags, self.acc, self.acc_values(),
                              (self.bm * c.block_m + self.base["c_m"], c.m, c.block_m),
                              (self.bn * c.block_n + self.base["c_n"], c.n, c.block_n),
                              self._pred)

    def iteration(self, kt: Any, stage: int) -> List[Any]:
        """k-tile ``kt``: prefetch k-tile kt+1, MFMAs on LDS stage ``stage``, store the
        prefetched tile into the other stage, barrier."""
        p = self.p
        out: List[Any] = [Comment(f"k-tile {kt}: prefetch k-tile {kt + 1} into registers")]
        for op in (p.a, p.b):
            out += self.load_tile(op, kt + 1)
        out.append(SchedBarrier())    # keep the prefetch ahead of the MFMAs
        out.append(Comment(f"MFMAs on LDS stage {stage}"))
        out += self.compute(stage)
        nxt = (stage + 1) % self.c.stages
        if self.c.stages == 1:
            out.append(Comment("single LDS stage: every wave has read it before it is rewritten"))
            out.append(Barrier())
        out.append(Comment(f"registers -> LDS stage {nxt}"))
        if self.c.explicit_waits:
            out.append(WaitCnt(vm=0))
        for op in (p.a, p.b):
            out += self.store_tile(op, nxt)
        out.append(Barrier())
        return out

    def k_loop(self) -> List[Any]:
        """After the prologue: the k loop (two k-tiles per iteration with two LDS stages, one
        with one stage) and the last k-tile."""
        p, c = self.p, self.c
        KT = p.k_tiles
        body: List[Any] = []
        # two stages: unrolled by two, so each half has constant LDS addresses (an odd leftover
        # k-tile is peeled); one stage: one k-tile per iteration, nothing peeled, kept a loop
        # (clang unrolls a short one completely: 15 k-tiles at K = 1000)
        pairs, rem = divmod(KT - 1, 2)
        kp = sym("kp")
        if c.stages == 1 and KT > 1:
            loop = Loop("kt", 0, KT - 1, unroll=1)
            loop.body += self.iteration(self.kt, 0)
            body.append(loop)
        elif pairs:
            loop = Loop("kp", 0, pairs)
            S = c.stages
            loop.body += self.iteration(2 * kp, 0) + self.iteration(2 * kp + 1, 1 % S)
            body.append(loop)
        if rem and c.stages != 1:
            body += self.iteration(KT - 2, (KT - 2) % c.stages)
        body.append(Comment(f"last k-tile ({KT - 1}) on LDS stage {(KT - 1) % c.stages}"))
        body += self.compute((KT - 1) % c.stages)
        return body

    # ---- whole kernel ----------------------------------------------------------------------
    def build(self) -> Kernel:
        p, c = self.p, self.c
        body: List[Any] = self.bases()
        body.append(ZeroFrag(self.acc))
        body.append(Comment("prologue: k-tile 0 -> LDS stage 0"))
        for op in (p.a, p.b):
            body += self.load_tile(op, 0)
        for op in (p.a, p.b):
            body += self.store_tile(op, 0)
        body.append(Barrier())
        if c.schedule == "interleaved":
            body += interleaved_k_loop(self)
        else:
            body += self.k_loop()
        body += self.epilogue()
        params = [*operand_params(p, self.edge_buffer_loads), Param("C", c.out_dtype, const=False)]
        if c.scales != "none":
            params += [Param("scale_a", "f32"), Param("scale_b", "f32")]
        shared = [Shared("sA", c.dtype, c.stages * p.a.stage_elems),
                  Shared("sB", c.dtype, c.stages * p.b.stage_elems)]
        frags = [self.ld["A"], self.ld["B"], self.fr["A"], self.fr["B"], self.acc]
        frags += self.scale_frags
        header = [f"C[{c.m}x{c.n}] ({c.c_major}-major {c.out_dtype}) = A[{c.m}x{c.k}] "
                  f"({c.a_major}-major {c.dtype}) @ B[{c.k}x{c.n}] ({c.b_major}-major {c.dtype})",
                  f"block tile {c.block_m}x{c.block_n}x{c.block_k}, {c.waves_m}x{c.waves_n} "
                  f"waves, {c.stages} LDS stage(s), {p.spec.name} (kpack {p.kpack}), grid {p.grid[0]}x{p.grid[1]}"
                  + ("" if c.schedule == "basic" else f", {c.schedule} schedule"),
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in p.describe().items()]
        return Kernel(self.name, params, shared, frags, body, c.threads, p.grid,
                      header=header, meta={"plan": p},
                      spec=gemm_spec(self.name, c, p.grid, p.k_tiles * c.block_k),
                      waves_per_eu=c.waves_per_eu)


def build_gemm_ir(cfg_or_plan: Any, choose_lds: bool = True) -> Kernel:
    """Kernel IR for a config (or a plan); LDS swizzles and copy arrangements are chosen by
    :func:`choose_lds_layouts` unless ``choose_lds`` is False (the plan's are kept)."""
    plan = cfg_or_plan if isinstance(cfg_or_plan, GemmPlan) else plan_gemm(cfg_or_plan)
    if choose_lds:
        choose_lds_layouts(plan)
    return GemmBuilder(plan).build()


# ---------------------------------------------------------------------------- the built kernel

@dataclass
class BuiltKernel(BuiltProgram):
    """A gated kernel: its source and IR, the plan it came from, and the verification results
    (which travel with it into ``report.json``)."""

    name: str
    source: str
    ir: Kernel
    plan: Any
    verification: Any                        # kernels.gate.GateReport
    timings: Dict[str, float] = field(default_factory=dict)
    code_object: Any = None

    @property
    def grid(self) -> Tuple[int, int, int]:
        return self.ir.grid

    @property
    def block(self) -> int:
        return self.ir.block

    @property
    def arch(self) -> str:
        return self.plan.cfg.arch

    def report_extra(self) -> Dict[str, Any]:
        """``report.json`` fields of a GEMM: its grid, MFMA, LDS swizzles and plan notes."""
        return {"grid": list(self.grid), "mfma": self.plan.spec.name,
                "swizzles": {op.name: (op.swizzle_search.summary()
                                       if op.swizzle_search is not None else str(op.swizzle))
                             for op in (self.plan.a, self.plan.b)},
                "notes": list(self.plan.notes),
                "tile_choice": (self.plan.cfg.selection
                                or "given by the caller (no tile selection)")}

    def hot_loop_instructions(self, hot_loop: Any) -> Dict[str, Any]:
        return self.hot_loop_match(hot_loop)

    def expected_loop_instructions(self) -> Dict[str, int]:
        """Per k-loop iteration: the LDS instructions the gate verified, global loads, MFMAs."""
        from ..ir.core import Loop, walk
        loops = [s for s in self.ir.body if isinstance(s, Loop)]
        exp: Dict[str, int] = {}
        if not loops:
            return exp
        eb = DTYPE_BYTES[self.plan.cfg.dtype]
        for s in walk(loops[0].body):
            if isinstance(s, Access) and s.space == "lds":
                key = f"ds_{'read' if s.kind == 'load' else 'write'}_b{s.width * eb * 8}"
            elif isinstance(s, Access):
                bits = s.width * eb * 8
                kind = "global" if s.soffset is None else "buffer"    # buffer: preshuffled B
                key = {128: f"{kind}_load_dwordx4", 64: f"{kind}_load_dwordx2",
                       32: f"{kind}_load_dword"}.get(bits, f"{kind}_load_{bits}bit")
            elif isinstance(s, Mfma):
                key = s.spec.name
            else:
                continue
            exp[key] = exp.get(key, 0) + 1
        return exp

    def hot_loop_match(self, hot: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """Do the compiled hot loop's LDS/global/MFMA instructions equal the verified ones
        (times the compiler's unroll factor)?  A compiler that split a ds_read_b128 into
        two ds_read_b64, or fused writes into ds_write2_*, would make the bank-conflict proof
        about another instruction: this says so."""
        exp = self.expected_loop_instructions()
        if not hot or not exp:
            return {"expected_per_iteration": exp, "hot_loop": None, "match": None,
                    "why": "no loop in the kernel or in the code object (fully unrolled)"}
        got = {k: v for k, v in hot["histogram"].items()
               if k.startswith(("ds_read", "ds_write", "global_load", "buffer_load",
                                "v_mfma"))}
        mf = [k for k in exp if k.startswith("v_mfma")]
        unroll = got.get(mf[0], 0) // exp[mf[0]] if mf and exp[mf[0]] else 0
        match = unroll >= 1 and set(got) == set(exp) and all(
            got[k] == unroll * v for k, v in exp.items())
        return {"expected_per_iteration": exp, "hot_loop": got, "unroll": unroll,
                "match": bool(match)}

    def default_grid(self) -> Tuple[int, int, int]:
        """The GEMM's sizes are compiled in, so is its grid: ``emulate(a, b, c)`` needs no
        ``grid=``."""
        return self.grid


def _plan_with_lds(cfg: GemmConfig) -> GemmPlan:
    plan = plan_gemm(cfg)
    choose_lds_layouts(plan)
    return plan


def gemm_family() -> KernelFamily:
    """The GEMM for the build driver: plan + LDS layouts, :class:`GemmBuilder`, the GEMM gate
    (``verify_kernel``), the HIP printer; its printed text is checked symbolically."""
    from ..verify.gate import verify_kernel
    return KernelFamily(plan=_plan_with_lds, build_ir=lambda plan: GemmBuilder(plan).build(),
                        verifier=lambda ir: verify_kernel(ir, arch=ir.meta["plan"].cfg.arch),
                        printer=emit)


def build_gemm(cfg: GemmConfig, *, verify: bool = True) -> BuiltKernel:
    """Plan, choose LDS layouts, build the IR, run the gate, emit HIP (:mod:`kernels.amd.driver`).

    Raises :class:`kernels.gate.VerificationError` (with the counterexample) when a check fails
    and :class:`kernels.gemm_plan.ConfigError` for options that cannot make a kernel.
    ``verify=False`` is for tests of the gate itself; the result then says nothing was checked.
    """
    if cfg.b_layout != "plain":   # another B storage: its own builder, never a silent plain B
        raise ConfigError(f"b_layout={cfg.b_layout!r}: use build_gemm_preshuffled")

    def make(stages: List[Stages]) -> BuiltKernel:
        st, = stages
        return BuiltKernel(st.ir.name, st.source, st.ir, st.plan, st.verification, st.timings)
    return build_program([gemm_family()], cfg, make, verify=verify)
