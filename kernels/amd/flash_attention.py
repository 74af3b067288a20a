"""Flash-attention forward (prefill) for gfx942: plan -> IR -> gate -> HIP (the torch API that
picks this kernel or decode: :mod:`kernels.amd.attention_api`).

``O = softmax(scale * Q K^T + mask) V`` with online softmax (fp32 accumulators and softmax
state), Q/K/V fp16 or bf16 in BHSD or any strided layout with unit head-dim stride, causal
(top-left like ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``, or
bottom-right via ``causal_offset``), GQA/MQA, any sequence lengths, optional logsumexp.
Shapes and strides are runtime arguments: one kernel per (head_dim, dtypes, causal).

Pipeline of one block (``W`` waves, ``32 W`` query rows; layouts in :mod:`.attention_plan`)::

    Q -> registers (128-bit loads, zero rows past seqlen_q)
    KV tile 0 -> registers -> LDS stage 0; barrier
    for kt in [0, n_full):            tiles whose keys are all visible to every row: no mask
    for kt in [n_full, n_end):        the ragged / causal-diagonal tiles: masked
        prefetch KV tile kt+1 -> registers            (if kt+1 < n_end; in the full-tile
                                                       loop pinned first: sched_barrier)
        S^T = K Q^T (LDS stage kt%2)  -> [mask] -> row max (lane max, exchange with lane^32)
        online softmax update; P = exp2(S c - m c) (stays in registers); O *= alpha
        O^T += V^T P^T (LDS stage kt%2)
        registers -> LDS stage (kt+1)%2; barrier
          (one LDS stage, the head_dim <= 128 default: both products read stage 0, then
           barrier; registers -> LDS stage 0; barrier)
    l = l + l(lane^32); O /= l; store O (128-bit) and logsumexp

One stage halves the LDS (32 KiB per work-group at head_dim 128, BN 64), so two work-groups
share a CU (two waves per SIMD) and one work-group's barriers and softmax overlap the other's
MFMAs; ``lds_stages=2`` keeps the double-buffered form (64 KiB, one wave per SIMD).

Causal blocks stop at the last tile any of their rows can see (``n_end``), so fully masked KV
tiles are skipped; the gate proves the processed-unmasked keys of every row are exactly its
visible keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import sympy

from layoutalg import Layout

from ..ir.attention import (AttnKernel, ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax, LOG2E,
                            MaskScores, Rescale, RowMax, ScalarParam, SoftmaxUpdate, runtime_symbol)
from ..printer.attention import emit_attention
from ..built import BuiltProgram
from .driver import KernelFamily, Stages, build_program
from .kernel_specs import prefill_spec
from .attention_plan import (AttnConfig, AttnPlan, ConfigError, k_read_groups, k_write_groups,
                             plan_attention, v_read_groups, v_write_groups)
from ..ir.core import (Access, Barrier, Comment, Frag, If, Let, LetThreadId, Loop, Mfma, Param,
                       SchedBarrier, Shared, ZeroFrag, swizzle_expr, sym)
from layoutalg.symbolic import Xor

__all__ = ["AttnConfig", "build_attention", "build_attention_ir", "BuiltAttention",
           "PrefillShape", "prefill_instances"]

# runtime arguments (order = kernel parameter order after the pointers)
_SCALARS = ("seqlen_q", "seqlen_kv", "heads", "group", "causal_off",
            "q_sb", "q_sh", "q_ss", "k_sb", "k_sh", "k_ss", "v_sb", "v_sh", "v_ss",
            "o_sb", "o_sh", "o_ss")


def R(name: str) -> sympy.Symbol:
    return runtime_symbol(name, signed=(name == "causal_off"))


def global_layouts(D: int, seqlen_q: Any = None) -> Dict[str, Layout]:
    """``(row, d, head, batch) -> element offset`` of Q, K, V, O (symbolic extents and strides);
    ``(row, head, batch)`` of the fp32 logsumexp (contiguous ``[B, H, seqlen_q]``).
    ``seqlen_q`` fixes the query length (decode: 1)."""
    B = R("batch")
    H, G = R("heads"), R("group")
    HK = sym("kv_heads")
    sq, skv = (R("seqlen_q") if seqlen_q is None else seqlen_q), R("seqlen_kv")
    out = {}
    for t, rows, heads in (("Q", sq, H), ("K", skv, HK), ("V", skv, HK), ("O", sq, H)):
        p = t.lower()
        out[t] = Layout((rows, D, heads, B), (R(f"{p}_ss"), 1, R(f"{p}_sh"), R(f"{p}_sb")))
    out["LSE"] = Layout((sq, H, B), (1, sq, H * sq))
    del G
    return out


class AttnBuilder:
    def __init__(self, plan: AttnPlan, name: Optional[str] = None,
                 hoist_lds: bool = True) -> None:
        self.p = plan
        c = plan.cfg
        self.c = c
        D, BN, W = c.head_dim, c.block_n, c.waves
        self.tid = sym("tid")
        self.name = name or (f"la_attn_fwd_{c.dtype}_{c.out_dtype}_d{D}"
                             f"{'_causal' if c.causal else ''}_bn{BN}_w{W}"
                             f"{'' if c.lds_stages == 2 else '_s1'}"
                             f"{'' if c.p_rounding == 'rtne' else '_p' + c.p_rounding}")
        self.glob = global_layouts(D)
        self.counter: Dict[str, int] = {}
        L = plan.layouts
        dt = c.dtype
        self.q_fr = Frag("q_fr", dt, L["q_row"][1].size(), 8)
        self.k_ld = Frag("k_ld", dt, L["kcp_key"][1].size(), 8)
        self.v_ld = Frag("v_ld", dt, L["vcp_key"][1].size(), 8)
        self.k_fr = Frag("k_fr", dt, L["kfr_key"][1].size(), 8)
        self.v_fr = Frag("v_fr", dt, L["vfr_key"][1].size(), 8)
        self.s_fr = Frag("s_acc", "f32", L["s_key"][1].size(), 16)
        self.p_fr = Frag("p_fr", dt, L["s_key"][1].size(), 4)
        self.o_fr = Frag("o_acc", "f32", L["o_d"][1].size(), 16)
        self.lse_fr = Frag("lse_v", "f32", 1, 1)
        # loop-invariant swizzled LDS bases (see hoisted_offset), printed after bases()
        self.hoist_lds = hoist_lds
        self.hoist: Dict[Any, Let] = {}
        self._href: Dict[str, Any] = {}
        self._tenv: Optional[Dict[Any, Any]] = None

    # ---- helpers ------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        i = self.counter.get(stem, 0)
        self.counter[stem] = i + 1
        return f"{stem}{i}"

    def val(self, name: str, v: int) -> int:
        return int(self.p.layouts[name]((0, v)))

    def bases(self) -> List[Any]:
        out: List[Any] = [Comment("per-thread coordinate bases: layout(tid, 0) of each TV layout")]
        for name in ("q_row", "q_d", "kcp_key", "kcp_d", "vcp_key", "vcp_d", "kfr_key", "kfr_d",
                     "vfr_key", "vfr_d", "s_row", "s_key", "o_row", "o_d"):
            out.append(Let(f"{name}_b", sympy.expand(sympy.sympify(
                self.p.layouts[name]((self.tid, 0))))))
        return out

    def b(self, name: str) -> sympy.Symbol:
        return sym(f"{name}_b")

    # ---- global -> registers -----------------------------------------------------------
    def load_q(self) -> List[Any]:
        D = self.c.head_dim
        q0, h, bb = sym("q0"), sym("h"), sym("bat")
        out: List[Any] = [Comment("Q -> registers (B operand of S^T = K Q^T), zero past "
                                  "seqlen_q")]
        G = self.glob["Q"]
        for p in range(D // 16):
            regs = list(range(8 * p, 8 * p + 8))
            row = q0 + self.b("q_row") + self.val("q_row", regs[0])
            coords = tuple((row, self.b("q_d") + self.val("q_d", v), h, bb) for v in regs)
            out.append(Access("load", "global", "Q", sympy.expand(G(coords[0])), 8,
                              self.q_fr.regs(regs), row < R("seqlen_q"), tag="Q.load",
                              origin=G, coords=coords))
        return out

    def load_kv(self, kt: Any, guarded: bool = True) -> List[Any]:
        """Global -> registers copy of KV tile ``kt``; ``guarded=False`` (a tile whose keys are
        all below seqlen_kv) without the per-vector predicate."""
        return self.load_tile("K", kt, guarded) + self.load_tile("V", kt, guarded)

    def load_tile(self, t: str, kt: Any, guarded: bool = True) -> List[Any]:
        """Global -> registers copy of the K (``t="K"``) or V tile ``kt`` (see :meth:`load_kv`)."""
        BN = self.c.block_n
        hk, bb = sym("hk"), sym("bat")
        frag, kname, dname = (self.k_ld, "kcp_key", "kcp_d") if t == "K" else \
            (self.v_ld, "vcp_key", "vcp_d")
        G = self.glob[t]
        out: List[Any] = []
        for g in range(frag.count // 8):
            regs = list(range(8 * g, 8 * g + 8))
            key = kt * BN + self.b(kname) + self.val(kname, regs[0])
            coords = tuple((key, self.b(dname) + self.val(dname, v), hk, bb) for v in regs)
            out.append(Access("load", "global", t, sympy.expand(G(coords[0])), 8,
                              frag.regs(regs), key < R("seqlen_kv") if guarded else None,
                              tag=f"{t}.copy.load", origin=G, coords=coords))
        return out

    # ---- registers <-> LDS -------------------------------------------------------------
    _FAMILY = {"K.frag.load": "kfr", "V.frag.load": "vfr", "K.copy.store": "kst",
               "V.copy.store": "vst"}

    def _thread_env(self) -> Dict[Any, Any]:
        """Every thread's value of the coordinate bases (for the hoisting below)."""
        if self._tenv is None:
            import numpy as np
            from ..ir.core import c_eval
            env: Dict[Any, Any] = {self.tid: np.arange(self.c.threads, dtype=np.int64)}
            for s in self.bases():
                if isinstance(s, Let):
                    env[sym(s.name)] = np.broadcast_to(
                        np.asarray(c_eval(s.expr, env), dtype=np.int64), (self.c.threads,))
            self._tenv = env
        return self._tenv

    def hoisted_offset(self, tag: str, sw: Any, lin0: Any, stage: Any, S: int) -> Any:
        """The swizzled LDS offset ``sw(lin0 + S stage)`` as ``base + S stage + hi`` with
        ``base = sw(t) ^ lo`` a loop-invariant per-thread value (a :class:`Let` printed before
        the KV loops, one per (access family, lo)), or None when that form is not equal to the
        swizzled offset for every thread and both stages.  ``t`` is the family's first
        ``lin0``; ``lin0 - t`` must be one constant ``c`` over the threads, split into the bits
        of ``sw(c)`` some thread's ``sw(t)`` may hold (``lo``, XORed in) and the others (``hi``,
        added: the compiler folds it into the ds_read/ds_write offset).  The gate re-checks the
        printed offsets against the layouts on every instance."""
        import numpy as np
        from ..ir.core import c_eval
        fam = self._FAMILY.get(tag)
        if fam is None:
            return None
        env = self._thread_env()
        x = np.broadcast_to(np.asarray(c_eval(lin0, env), dtype=np.int64), (self.c.threads,))
        if fam not in self._href:
            self._href[fam] = (lin0, x.copy())
        t_expr, t = self._href[fam]
        c = x - t
        if not (c == c[0]).all() or c[0] < 0:
            return None
        c = int(c[0])
        X = sympy.Symbol("x_", integer=True, nonnegative=True)
        swx = swizzle_expr(sw, X)

        def swf(v):
            return np.asarray(c_eval(swx, {X: np.asarray(v, dtype=np.int64)}), dtype=np.int64)
        sw_t = swf(t)
        bits_t = int(np.bitwise_or.reduce(sw_t))
        sc = int(swf(np.array([c]))[0])
        lo, hi = sc & bits_t, sc & ~bits_t
        base = sw_t ^ lo
        for sv in range(self.c.lds_stages):
            if not np.array_equal(swf(t + c + S * sv), base + hi + S * sv):
                return None
        key = (fam, lo)
        if key not in self.hoist:
            name = f"{fam}_sw{sum(1 for k in self.hoist if k[0] == fam)}"
            e = swizzle_expr(sw, t_expr)
            self.hoist[key] = Let(name, Xor(e, lo) if lo else e)
        return sym(self.hoist[key].name) + S * stage + hi

    def lds(self, kind: str, t: str, coords, regs, tag: str) -> List[Any]:
        p = self.p
        inner, sw, buf = (p.sk_inner, p.sk_swizzle, "sK") if t == "K" else \
            (p.sv_inner, p.sv_swizzle, "sVt")
        origin = p.sk if t == "K" else p.sv
        (kd, stage) = coords[0]
        lin0 = sympy.expand(sympy.sympify(inner((kd, 0))))
        S = int(inner(((0, 0), 1))) - int(inner(((0, 0), 0)))
        off = self.hoisted_offset(tag, sw, lin0, stage, S) if self.hoist_lds else None
        if off is not None:
            return [Access(kind, "lds", buf, off, len(regs.idx), regs, None, tag=tag,
                           origin=origin, coords=tuple(coords))]
        name = self.fresh(f"{t.lower()}_{'st' if kind == 'store' else 'rd'}")
        lin = sympy.expand(sympy.sympify(inner(coords[0])))
        return [Let(name, lin),
                Access(kind, "lds", buf, swizzle_expr(sw, sym(name)), len(regs.idx), regs, None,
                       tag=tag, origin=origin, coords=tuple(coords))]

    def store_kv(self, stage: Any) -> List[Any]:
        return self.store_tile("K", stage) + self.store_tile("V", stage)

    def store_tile(self, t: str, stage: Any) -> List[Any]:
        """Registers -> LDS ``stage`` of the K (``t="K"``) or V^T tile."""
        out: List[Any] = []
        if t == "K":
            for g in k_write_groups(self.p):
                coords = [((self.b("kcp_key") + self.val("kcp_key", v),
                            self.b("kcp_d") + self.val("kcp_d", v)), stage) for v in g]
                out += self.lds("store", "K", coords, self.k_ld.regs(g), "K.copy.store")
            return out
        for g in v_write_groups(self.p):
            coords = [((self.b("vcp_d") + self.val("vcp_d", v),
                        self.b("vcp_key") + self.val("vcp_key", v)), stage) for v in g]
            out += self.lds("store", "V", coords, self.v_ld.regs(g), "V.copy.store")
        return out

    # ---- the two MFMA chains -------------------------------------------------------------
    def qk(self, stage: Any) -> List[Any]:
        c, p = self.c, self.p
        D, BN = c.head_dim, c.block_n
        out: List[Any] = [ZeroFrag(self.s_fr)]
        groups = k_read_groups(p)
        for n in range(BN // 32):
            out.append(Comment(f"S^T tile {n} (keys {32 * n}..{32 * n + 31}) = K Q^T"))
            for pp in range(D // 16):
                g = groups[pp + (D // 16) * n]
                coords = [((self.b("kfr_key") + self.val("kfr_key", v),
                            self.b("kfr_d") + self.val("kfr_d", v)), stage) for v in g]
                out += self.lds("load", "K", coords, self.k_fr.regs(g), "K.frag.load")
                for s in range(2):
                    a = [g[4 * s + e] for e in range(4)]
                    bq = [8 * pp + 4 * s + e for e in range(4)]
                    out.append(Mfma(p.spec1, self.s_fr.regs(range(16 * n, 16 * n + 16)),
                                    self.k_fr.regs(a), self.q_fr.regs(bq),
                                    tag=f"qk(n{n},p{pp},s{s})"))
        return out

    def pv(self, stage: Any) -> List[Any]:
        c, p = self.c, self.p
        D, BN = c.head_dim, c.block_n
        out: List[Any] = []
        groups = v_read_groups(p)
        for t in range(D // 32):
            out.append(Comment(f"O^T d-tile {t} += V^T P^T"))
            for u in range(BN // 16):
                g = groups[u + (BN // 16) * t]
                coords = [((self.b("vfr_d") + self.val("vfr_d", v),
                            self.b("vfr_key") + self.val("vfr_key", v)), stage) for v in g]
                out += self.lds("load", "V", coords, self.v_fr.regs(g), "V.frag.load")
                for s in range(2):
                    ch = 2 * u + s
                    a = [g[4 * s + e] for e in range(4)]
                    bp = [4 * ch + e for e in range(4)]
                    out.append(Mfma(p.spec2, self.o_fr.regs(range(16 * t, 16 * t + 16)),
                                    self.v_fr.regs(a), self.p_fr.regs(bp),
                                    tag=f"pv(t{t},c{ch})"))
        return out

    def mask(self, kt: Any) -> List[Any]:
        """The mask of KV tile ``kt``: ``key < seqlen_kv`` (and ``key < row + causal_off + 1``)
        with the thread's bases and ``kt`` moved to the right-hand side, one per-tile limit
        ``mlim`` for all items, so that each item is one compare of its register's constant
        key offset (an inline constant) with ``mlim`` and one select, not an add, a compare
        and a select (32 VALU fewer per masked tile at BN 64).  The gate evaluates every
        condition at the (row, key) the item holds against the visibility rule."""
        c = self.c
        n = self.s_fr.count
        BN = c.block_n
        base = kt * BN + self.b("s_key")
        lim_kv = R("seqlen_kv") - base
        vr = [self.val("s_row", r) for r in range(n)]
        out: List[Any] = []
        if c.causal and not any(vr):
            # every item of the thread is the same query row: one limit for both conditions,
            # the thread's visible-key bound less the tile's base key (one loop-invariant
            # value, which the compiler keeps across the loop, instead of two)
            out.append(LetMinMax("mvis", "min", R("seqlen_kv"),
                                 sym("q0") + self.b("s_row") + R("causal_off") + 1))
            out.append(Let("mlim", sym("mvis") - base))
        else:
            out.append(Let("mlim", lim_kv))
            if c.causal:
                out.append(Let("mlim_c", sym("q0") + self.b("s_row") + R("causal_off") + 1
                               - base))
        rows, keys, conds = [], [], []
        for r in range(n):
            vk = self.val("s_key", r)
            rows.append(sym("q0") + self.b("s_row") + vr[r])
            keys.append(base + vk)
            cond = sympy.Integer(vk) < sym("mlim")
            if c.causal and any(vr):
                cond = sympy.And(cond, sympy.Integer(vk - vr[r]) < sym("mlim_c"))
            conds.append(cond)
        out.append(MaskScores(self.s_fr, tuple(range(n)), tuple(rows), tuple(keys),
                              tuple(conds)))
        return out

    def xor32(self, var: str, op: str, tid: Any = None) -> LaneXor:
        t = self.tid if tid is None else tid
        return LaneXor(var, op, "bpermute", addr=4 * Xor(t, 32),
                       note=f"row {op}: lane l and l^32 hold the same query row")

    def iteration(self, masked: bool, next_full: bool = False) -> List[Any]:
        """One KV tile.  ``next_full``: the loop runs only where tile kt+1 is a full tile
        (kt + 1 < n_full <= n_end), so the prefetch and the LDS store need neither the
        ``kt + 1 < n_end`` branch nor the per-vector seqlen_kv predicates."""
        kt = sym("kt")
        two = self.c.lds_stages == 2
        st = sym("st") if two else 0
        if next_full:
            # the sched_barrier pins the prefetch at the top of the iteration: without it
            # clang-19's scheduler sinks the loads to just before their LDS stores (about 70
            # instructions, far below the ~700-cycle memory latency), and the wait before the
            # stores stalls every wave (docs/PERFORMANCE.md, "The full-tile KV loop")
            nxt: List[Any] = [Comment("prefetch KV tile kt+1 (a full tile) into registers, "
                                      "issued before anything else of the iteration")] \
                + self.load_kv(kt + 1, guarded=False) + [SchedBarrier()]
        else:
            nxt = [If(kt + 1 < sym("n_end"), [Comment("prefetch KV tile kt+1 into registers")]
                      + self.load_kv(kt + 1))]
        out: List[Any] = ([Let("st", sympy.Mod(kt, 2))] if two else []) + nxt
        out += self.qk(st)
        if masked:
            out.append(Comment("mask keys past seqlen_kv" + (" and above the causal diagonal"
                                                             if self.c.causal else "")))
            out += self.mask(kt)
        n = self.s_fr.count
        out += [Comment("online softmax: row max (lane max + one exchange), P = exp2(S c - m c)"),
                RowMax("mt", self.s_fr, tuple(range(n))),
                self.xor32("mt", "max"),
                SoftmaxUpdate("m_run", "mt", "alpha", "mc"),
                ExpScores(self.p_fr, tuple(range(n)), self.s_fr, tuple(range(n)), "mc", "l_run",
                          "alpha", self.c.p_rounding),
                Rescale(self.o_fr, tuple(range(self.o_fr.count)), "alpha")]
        out += self.pv(st)
        if two:
            store = [Comment("registers -> the other LDS stage")] + self.store_kv(1 - st)
        else:
            # one stage: every wave's reads of tile kt end at this barrier before the tile
            # kt+1 overwrites it
            store = [Comment("registers -> the LDS stage, once every wave has read it"),
                     Barrier()] + self.store_kv(0)
        out += store if next_full else [If(kt + 1 < sym("n_end"), store)]
        out.append(Barrier())
        return out

    def epilogue(self) -> List[Any]:
        D = self.c.head_dim
        q0, h, bb = sym("q0"), sym("h"), sym("bat")
        # the thread's coordinates again, from a recomputed thread index: the ones of the
        # prologue would stay live across the KV loops (at 256 VGPRs clang spilled them)
        te = sym("tid_e")
        out: List[Any] = [Comment("the thread index recomputed (lane + 64 wave) and the output "
                                  "coordinates from it: nothing the loops do not need stays "
                                  "live across them"),
                          LetThreadId("tid_e")]
        for name in ("o_row", "o_d"):
            out.append(Let(f"{name}_e", sympy.expand(sympy.sympify(
                self.p.layouts[name]((te, 0))))))
        out += [Comment("row sum: exchange with lane^32; normalise; store O and LSE"),
                self.xor32("l_run", "sum", te),
                FinalNormalize(self.o_fr, tuple(range(self.o_fr.count)), "l_run", "mc",
                               self.lse_fr)]
        G = self.glob["O"]
        row = q0 + sym("o_row_e")
        for g in range(self.o_fr.count // 8):
            regs = list(range(8 * g, 8 * g + 8))
            coords = tuple((row, sym("o_d_e") + self.val("o_d", v), h, bb) for v in regs)
            out.append(Access("store", "global", "O", sympy.expand(G(coords[0])), 8,
                              self.o_fr.regs(regs), row < R("seqlen_q"), tag="O.store",
                              origin=G, coords=coords))
        GL = self.glob["LSE"]
        coords = ((row, h, bb),)
        out.append(Access("store", "global", "LSE", sympy.expand(GL(coords[0])), 1,
                          self.lse_fr.regs([0]),
                          sympy.And(row < R("seqlen_q"), sympy.Mod(te, 64) < 32),
                          tag="LSE.store", origin=GL, coords=coords))
        del D
        return out

    def block_lets(self) -> List[Any]:
        c = self.c
        BM, BN = c.block_m, c.block_n
        sq, skv, H, G = R("seqlen_q"), R("seqlen_kv"), R("heads"), R("group")
        bq, bh = sym("block_q"), sym("block_bh")
        out: List[Any] = [
            Comment("block -> (query tile, batch, head); causal: grid (batch x heads, query "
                    "tiles), every head's longest tile launched before any shorter one"
                    if c.causal else
                    "block -> (query tile, batch, head); causal blocks run heaviest first"),
            Let("n_qt", sympy.floor((sq + BM - 1) / BM)),
            Let("q_tile", (sym("n_qt") - 1 - bq) if c.causal else bq),
            Let("q0", BM * sym("q_tile")),
            Let("bat", sympy.floor(bh / H)),
            Let("h", sympy.Mod(bh, H)),
            Let("hk", sympy.floor(sym("h") / G)),
            Let("n_kv", sympy.floor((skv + BN - 1) / BN)),
        ]
        if c.causal:
            off = R("causal_off")
            out += [
                Comment("keys visible to the block's first row: [0, vis0); to its last: "
                        "[0, visL)"),
                LetMinMax("vis0m", "min", skv, sym("q0") + off + 1),
                LetMinMax("vis0", "max", 0, sym("vis0m")),
                LetMinMax("visLm", "min", skv, sym("q0") + BM + off),
                LetMinMax("visL", "max", 0, sym("visLm")),
                Let("n_full", sympy.floor(sym("vis0") / BN)),
                Let("n_end", sympy.floor((sym("visL") + BN - 1) / BN)),
            ]
        else:
            out += [Let("n_full", sympy.floor(skv / BN)), Let("n_end", sym("n_kv"))]
        return out

    def build(self) -> AttnKernel:
        c, p = self.c, self.p
        D, BN, T = c.head_dim, c.block_n, c.threads
        body: List[Any] = self.block_lets() + self.bases()
        at = len(body)
        body += self.load_q()
        body += [FVar("m_run", "-inf"), FVar("l_run", "0"), FVar("alpha", "0"), FVar("mc", "0"),
                 ZeroFrag(self.o_fr)]
        body.append(If(sym("n_end") > 0, [Comment("prologue: KV tile 0 -> LDS stage 0")]
                       + self.load_kv(0) + self.store_kv(0)))
        body.append(Barrier())
        if D <= 128:
            # head_dim 256 keeps one full-tile loop: the third copy of the body costs it spills
            # (clang 19: 3 VGPRs to scratch), for 232 AGPRs of accumulator and spill slots
            body.append(Comment("full tiles: every key visible to every row of the block; all "
                                "but the last prefetch a full tile (no bounds predicates)"))
            body.append(LetMinMax("n_full1", "max", 0, sym("n_full") - 1))
            body.append(Loop("kt", 0, sym("n_full1"),
                             self.iteration(masked=False, next_full=True)))
            body.append(Loop("kt", sym("n_full1"), sym("n_full"), self.iteration(masked=False)))
        else:
            body.append(Comment("full tiles: every key visible to every row of the block"))
            body.append(Loop("kt", 0, sym("n_full"), self.iteration(masked=False)))
        body.append(Comment("boundary tiles: ragged seqlen_kv / causal diagonal, masked"))
        body.append(Loop("kt", sym("n_full"), sym("n_end"), self.iteration(masked=True)))
        body += self.epilogue()
        if self.hoist:
            body[at:at] = [Comment("swizzled LDS bases of this thread (loop-invariant)")] + \
                list(self.hoist.values())
        dt, ot = c.dtype, c.out_dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("O", ot, const=False),
                  Param("LSE", "f32", const=False)]
        scalars = [ScalarParam(n) for n in _SCALARS] + [ScalarParam("scale_log2", "float")]
        ns = c.lds_stages
        shared = [Shared("sK", dt, ns * BN * D), Shared("sVt", dt, ns * D * BN)]
        frags = [self.q_fr, self.k_ld, self.v_ld, self.k_fr, self.v_fr, self.s_fr, self.p_fr,
                 self.o_fr, self.lse_fr]
        header = [f"flash-attention forward: O = softmax(scale Q K^T{' + causal mask' if c.causal else ''}) V",
                  f"Q/K/V {dt}, O {ot}, head_dim {D}, {c.waves} waves x 32 query rows, KV tiles "
                  f"of {BN} keys, {p.spec1.name} for both products",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in p.describe().items()]
        return AttnKernel(self.name, params, shared, frags, body, T, (0, 0, 1),
                          grid_symbols=(("block_bh", "block_q") if c.causal
                                        else ("block_q", "block_bh")), header=header,
                          meta={"plan": p}, scalars=scalars,
                          spec=prefill_spec(self.name, c, _SCALARS, prefill_instances),
                          waves_per_eu=c.waves_per_eu)


def build_attention_ir(cfg: AttnConfig) -> AttnKernel:
    return AttnBuilder(plan_attention(cfg)).build()


# ---------------------------------------------------------------------------- shapes / launch

@dataclass(frozen=True)
class PrefillShape:
    """One problem: sizes and element strides (head-dim stride 1) of Q, K, V, O."""

    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_kv: int
    q_strides: Tuple[int, int, int]      # (batch, head, seq)
    k_strides: Tuple[int, int, int]
    v_strides: Tuple[int, int, int]
    o_strides: Tuple[int, int, int]
    causal_off: int = 0

    @staticmethod
    def bhsd(batch: int, heads: int, kv_heads: int, sq: int, skv: int, d: int,
             causal_off: int = 0) -> "PrefillShape":
        q = (heads * sq * d, sq * d, d)
        k = (kv_heads * skv * d, skv * d, d)
        return PrefillShape(batch, heads, kv_heads, sq, skv, q, k, k, q, causal_off)

    @staticmethod
    def bshd(batch: int, heads: int, kv_heads: int, sq: int, skv: int, d: int) -> "PrefillShape":
        """[B, S, H, D] storage viewed as BHSD (strides batch, head, position)."""
        q = (sq * heads * d, d, heads * d)
        k = (skv * kv_heads * d, d, kv_heads * d)
        return PrefillShape(batch, heads, kv_heads, sq, skv, q, k, k, q, 0)

    def validate(self, block_m: int) -> None:
        if min(self.batch, self.heads, self.kv_heads) < 1 or self.seqlen_q < 0 or \
                self.seqlen_kv < 0:
            raise ConfigError(f"bad attention shape {self}")
        if self.heads % self.kv_heads:
            raise ConfigError(f"heads {self.heads} is not a multiple of kv_heads "
                              f"{self.kv_heads} (GQA/MQA need a whole group per KV head)")
        for nm, st in (("q", self.q_strides), ("k", self.k_strides), ("v", self.v_strides),
                       ("o", self.o_strides)):
            if any(s % 8 for s in st):
                raise ConfigError(f"{nm} strides {st} must be multiples of 8 elements (128-bit "
                                  "vectors); pass a contiguous copy")

    def grid(self, block_m: int, causal: bool) -> Tuple[int, int, int]:
        """The launch grid of the prefill kernel (``causal`` has no default: the causal kernel's
        grid is transposed, and launching it with the other one would cover the wrong blocks).

        Non-causal: (query tiles, batch x heads).  Causal: (batch x heads, query tiles), so
        that the hardware's x-fastest dispatch launches the longest query tile of every
        (batch, head) first, then the next longest, ...: globally longest first, and the last
        wave of work-groups holds only short rows (a head-major order ends every head with its
        shortest tiles, but the next head starts with its longest, so the tail of the grid is
        the last heads' long rows)."""
        n_qt, bh = max(1, -(-self.seqlen_q // block_m)), self.batch * self.heads
        return (bh, n_qt, 1) if causal else (n_qt, bh, 1)

    def env(self) -> Dict[str, int]:
        """Values of the runtime symbols (and the verifier's batch/kv_heads)."""
        v = {"seqlen_q": self.seqlen_q, "seqlen_kv": self.seqlen_kv, "heads": self.heads,
             "group": self.heads // self.kv_heads, "causal_off": self.causal_off,
             "batch": self.batch, "kv_heads": self.kv_heads}
        for p, st in (("q", self.q_strides), ("k", self.k_strides), ("v", self.v_strides),
                      ("o", self.o_strides)):
            for n, s in zip(("sb", "sh", "ss"), st):
                v[f"{p}_{n}"] = s
        return v

    def scalar_args(self, scale: float) -> List[Any]:
        e = self.env()
        return [int(e[n]) for n in _SCALARS] + [float(scale * LOG2E)]


@dataclass
class BuiltAttention(BuiltProgram):
    """A gated attention kernel: source, IR, plan, verification (travels into report.json)."""

    name: str
    source: str
    ir: Any
    plan: Any
    verification: Any
    timings: Dict[str, float] = field(default_factory=dict)
    code_object: Any = None
    kind: str = "prefill"

    @property
    def block(self) -> int:
        return self.ir.block

    @property
    def arch(self) -> str:
        return self.plan.cfg.arch

    def report_extra(self) -> Dict[str, Any]:
        """``report.json`` fields of an attention kernel: its kind, the instances it was
        verified on, and (prefill) its MFMA and LDS swizzles."""
        out: Dict[str, Any] = {"kind": self.kind,
                               "verification_domain": self.verification.details.get("instances")}
        if hasattr(self.plan, "sk_search"):
            out["mfma"] = self.plan.spec1.name
            out["swizzles"] = {
                "sK": None if self.plan.sk_search is None else self.plan.sk_search.summary(),
                "sVt": None if self.plan.sv_search is None else self.plan.sv_search.summary()}
        return out

    def hot_loop_instructions(self, hot_loop: Any) -> Dict[str, Any]:
        return hot_loop_match(self.ir, hot_loop)


def expected_loop_instructions(ir: Any, loop_index: int = 0) -> Dict[str, int]:
    """LDS instructions (as verified), global loads and MFMAs of one iteration of a loop."""
    from ..ir.core import walk
    loops = [s for s in ir.body if isinstance(s, Loop)]
    exp: Dict[str, int] = {}
    if len(loops) <= loop_index:
        return exp
    from ..ir.attention import LaneXor
    for s in walk(loops[loop_index].body):
        if isinstance(s, Access) and s.space == "lds":
            key = f"ds_{'read' if s.kind == 'load' else 'write'}_b{s.width * 16}"
        elif isinstance(s, Access) and s.kind == "load":
            bits = s.width * 16
            key = {128: "global_load_dwordx4", 64: "global_load_dwordx2",
                   32: "global_load_dword"}.get(bits, f"global_load_{bits}bit")
        elif isinstance(s, Mfma):
            key = s.spec.name
        elif isinstance(s, LaneXor):
            key = "ds_bpermute_b32" if s.method == "bpermute" else "ds_swizzle_b32"
        else:
            continue
        exp[key] = exp.get(key, 0) + 1
    return exp


def hot_loop_match(ir: Any, hot: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Do the hot loop's LDS / global / MFMA / cross-lane instructions equal one iteration of
    the verified IR (times the unroll factor)?  Checked against the unmasked loop first, then
    the masked one."""
    out: Dict[str, Any] = {"hot_loop": None, "match": None}
    if not hot:
        out["why"] = "no loop in the code object"
        return out
    got = {k: v for k, v in hot["histogram"].items()
           if k.startswith(("ds_read", "ds_write", "global_load", "buffer_load", "v_mfma",
                            "ds_bpermute", "ds_swizzle"))}
    out["hot_loop"] = got
    for li in (0, 1):
        exp = expected_loop_instructions(ir, li)
        mf = [k for k in exp if k.startswith("v_mfma")]
        if not mf:
            continue
        unroll = got.get(mf[0], 0) // exp[mf[0]] if exp[mf[0]] else 0
        ok = unroll >= 1 and set(got) == set(exp) and all(got[k] == unroll * v
                                                         for k, v in exp.items())
        if ok:
            return {"expected_per_iteration": exp, "hot_loop": got, "unroll": unroll,
                    "loop": li, "match": True}
        out.setdefault("expected_per_iteration", exp)
    out["match"] = False
    return out


def attention_family(build_ir: Any, plan: Any = None) -> KernelFamily:
    """An attention kernel for the build driver (prefill, decode, the split-KV pair's two
    kernels): ``build_ir`` (from the plan, or from the configuration without ``plan``), the
    attention gate, the attention printer, and the instances its builder names
    (``meta["instances"]``) for the printed-source checks."""
    from ..verify.attention_gate import verify_attention
    from ..verify.attention_static import default_instances
    return KernelFamily(build_ir=build_ir, plan=plan, verifier=verify_attention,
                        printer=emit_attention, instances=default_instances)


def built_attention(st: Stages, kind: str = "prefill") -> BuiltAttention:
    """The driver's stages of one attention kernel as a :class:`BuiltAttention`."""
    return BuiltAttention(st.ir.name, st.source, st.ir, st.plan, st.verification, st.timings,
                          kind=kind)


def build_attention(cfg: AttnConfig, *, verify: bool = True) -> BuiltAttention:
    """Plan, build the IR, run the attention gate, emit HIP (:mod:`kernels.amd.driver`; raises
    VerificationError / ConfigError)."""
    family = attention_family(lambda plan: AttnBuilder(plan).build(), plan=plan_attention)
    return build_program([family], cfg, lambda sts: built_attention(sts[0]), verify=verify)


# ---------------------------------------------------------------------------- verification domain

def prefill_instances(k: Any) -> List[Any]:
    """The edge shapes the attention gate checks a prefill kernel on (``k.meta['plan']``):
    ragged GQA (group 3, 3 heads), one head with one row and one key (group 1), a strided BSHD
    layout with partial tiles (group 2), and for causal kernels bottom-right masks with
    seqlen_q longer and shorter than seqlen_kv."""
    from ..verify.attention_gate import Instance
    c = k.meta["plan"].cfg
    D = c.head_dim
    BM = c.block_m
    shapes = [("ragged-gqa3", PrefillShape.bhsd(2, 3, 1, 77, 77, D)),
              ("one-row-one-key", PrefillShape.bhsd(1, 1, 1, 1, 1, D)),
              ("bshd-strided", PrefillShape.bshd(1, 2, 1, BM + 9, 3 * c.block_n + 5, D))]
    if c.causal:
        shapes.append(("q-longer-bottom-right", PrefillShape.bhsd(1, 1, 1, BM + 40, 70, D,
                                                                  causal_off=70 - BM - 40)))
        shapes.append(("kv-longer-bottom-right", PrefillShape.bhsd(1, 1, 1, 40, 3 * c.block_n
                                                                   + 7, D,
                                                                   causal_off=3 * c.block_n
                                                                   + 7 - 40)))
    return [Instance(name, sh.env(), sh.grid(BM, c.causal), c.causal) for name, sh in shapes]
