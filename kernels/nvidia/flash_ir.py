"""The ``mma.sync`` flash-attention prefill (:class:`~.attention.FlashAttention`, what sm_80 /
sm_89 run) built as kernel IR, printed from the IR and proved, IR and printed text, by the one
verifier (issue 20 item 1).

Same layouts as the template (:func:`~.attention.plan_flash`: swizzled Q / K / V tiles, the
``cp.async`` copy partitions, the ``ldmatrix`` address layouts, ``mma.sync`` m16n8k16), the same
schedule (Q and K tile 0 in one ``cp.async`` group, V tile 0 in the next; per key block: wait,
barrier, prefetch K of the next block, ``S = Q K^T``, online softmax, wait, barrier, prefetch V
of the next block, ``O += P V`` with ``P`` rounded once from the S registers into the A
operand), every statement IR (:mod:`kernels.ir.nvidia`, :mod:`kernels.ir.attention`,
:mod:`kernels.ir.warp_registers`), printed by :mod:`kernels.printer.cuda_attention`, checked by
:func:`kernels.verify.verifier.verify` on launch instances (ragged GQA, one row and one key,
strided BSHD with partial tiles; causal: more query rows than keys and the reverse): index
math, bounds, vector widths, bank conflicts of every ``cp.async`` write and ``ldmatrix`` read,
O coverage, shared capacity, ``ldmatrix -> mma`` operands, cross-lane reductions, the online
softmax, masking, the write-back and races (the ``cp.async`` group rule included), and the
printed source read back against the IR.

What the template does and the IR does too, instruction for instruction (SASS compared with
nvdisasm, sm_90): shared addresses from 32-bit bases computed once (``meta["u32_shared"]``);
the softmax folded as the template computes it (the statements' ``raw=True``: raw scores, the
maximum scaled once per row, ``p = exp2(fma(s, scale, -m))``, ``l = fma(l, alpha, pairwise
sum)``), so the output is bitwise the template's; K / V copies of whole key blocks (``blk <
n_whole``) without predicates (the template's ``fast_copy``).  Where the two still differ: key
blocks wholly visible to the whole query block run an unmasked copy of the loop body (the
template tests ``need_mask`` at run time; at d256 one masked loop, as the template's); index
arithmetic is 32-bit ``int`` (the launcher refuses tensors whose element offsets reach 2^31;
the dispatch then runs the configuration's wide form, :mod:`.prefill_wide`: 64-bit batch and
head strides, the template's grid; or the template where that cannot launch).

At d64 and d256 the V wait comes right after ``S = Q K^T`` (:data:`V_WAIT_EARLY_HEAD_DIMS`):
ptxas then interleaves the exponentials with ``O += P V``.  At d256 the key loop is one masked
loop (:data:`ONE_MASKED_LOOP`, the template's loop): split into an unmasked and a masked loop,
ptxas spilled (24 / 8 bytes of stack, ``LDL`` in the masked loop) where one loop spills none.

Speed (H100, 2026-11-24, ``benchmarks/nvidia_ir_flash.py``, docs/PERFORMANCE.md): 1.04-1.07x
the template's device time at d64, 0.99-1.01x at d128 non-causal, 0.994-0.998x at d128 causal
(0.97-0.98x in an earlier run, before the balanced ``RowMax`` tree; the cause of the change is
not isolated; the one-loop forms measured 0.91-0.94x), 1.09-1.16x at d256 (B8 H32 S2K / S8K):
at parity (>= 0.98x at every measured shape) at every head dim and mask, where
:func:`kernels.nvidia.dispatch.flash_attention` runs it
(:data:`kernels.nvidia.prefill_select.IR_PREFILL_AT_PARITY`).  Not in the IR form:
``q_in_regs``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import sympy

from layoutalg import ComposedLayout, Layout
from layoutalg.symbolic import Xor
from mfma_specs.nvidia import ldmatrix, mma_m16n8k16

from ..errors import LaunchError
from ..ir.attention import (AttnKernel, ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax,
                            MaskScores, Rescale, RowMax, ScalarParam, SoftmaxUpdate,
                            runtime_symbol as R)
from ..ir.core import (Access, Barrier, Comment, Frag, If, Let, Loop, Mfma, Param, Shared,
                       ZeroFrag, swizzle_expr, sym)
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from ..ir.warp_registers import RoundProbs
from .attention import AttentionConfigError, FlashAttention, FlashConfig, plan_flash
from .builder import CompiledKernel

__all__ = ["query_block_lets", "key_range_lets", "build_flash_ir", "flash_ir_spec", "attention_ir_spec", "flash_ir_instances",
           "ONE_MASKED_LOOP", "V_WAIT_EARLY_HEAD_DIMS", "normalized_row_store",
           "flash_ir_name",
           "FLASH_IR_SCALARS", "ir_flash_supported", "IrFlashAttention", "int_offsets_fit"]

#: head dims whose IR waits for V (and prefetches the next block's) right after S = Q K^T, before
#: the softmax: ptxas then interleaves the exponentials with the P V mma.sync (SASS: MUFU among
#: the P V HMMAs; 227 registers against 232): d64 1.04-1.07x the template on an H100 against
#: 0.97-1.00x waiting after the softmax (benchmarks/nvidia_ir_flash.py --v-early, 2026-11-24).
#: Not d128: 156 bytes of spills there (ptxas -v); with one masked loop (no spills) d128 causal
#: measured 0.93x against 0.99x for the default.  d256 (with :data:`ONE_MASKED_LOOP`): 1.09-1.16x
#: the template against 1.06-1.10x waiting after the softmax (2026-11-24 run v6).
V_WAIT_EARLY_HEAD_DIMS: frozenset = frozenset({64, 256})

#: (head_dim, causal) whose IR runs one key loop, every block masked (the template's loop),
#: instead of an unmasked loop over the blocks every row sees whole and a masked one.  d256:
#: split, ptxas spills 24 / 8 bytes (LDL in the masked loop), one loop none; 1.06-1.10x the
#: template against 1.02-1.09x split (V after the softmax; H100 B8 H32 S2K / S8K, 2026-11-24
#: run v6).  Not d128 causal: one loop there measured 0.91x (its 64 mask selects in every
#: block; the split form 0.99x).
ONE_MASKED_LOOP: frozenset = frozenset({(256, False), (256, True)})

FLASH_IR_SCALARS = ("seqlen_q", "seqlen_kv", "heads", "group", "q_sb", "q_sh", "q_ss", "k_sb", "k_sh",
                    "k_ss", "v_sb", "v_sh", "v_ss", "o_sb", "o_sh", "o_ss")


def ir_flash_supported(cfg: FlashConfig) -> Optional[str]:
    """None if the IR builds ``cfg``, else why not."""
    if cfg.q_in_regs:
        return "q_in_regs (Q fragments kept in registers) is not in the IR form"
    return None


def flash_ir_name(cfg: FlashConfig) -> str:
    return (f"lg_flash_ir_{cfg.dtype}_d{cfg.head_dim}_{cfg.bm}x{cfg.bn}_w{cfg.warps}"
            f"{'_causal' if cfg.causal else ''}")


def global_layouts(D: int) -> Dict[str, Layout]:
    """``(row, d, head, batch) -> element offset`` of Q, K, V, O (runtime extents and
    strides; ``heads`` / ``kv_heads`` / ``batch`` are the verifier's extents)."""
    out = {}
    for t, rows, heads in (("Q", "seqlen_q", "heads"), ("K", "seqlen_kv", "kv_heads"),
                           ("V", "seqlen_kv", "kv_heads"), ("O", "seqlen_q", "heads")):
        p = t.lower()
        out[t] = Layout((R(rows), D, R(heads), R("batch")),
                        (R(f"{p}_ss"), 1, R(f"{p}_sh"), R(f"{p}_sb")))
    return out


def flash_ir_spec(name: str, cfg: FlashConfig, instances: Any) -> Any:
    """``S = Q K^T`` over d, online softmax over the keys (masked past seqlen_kv and, causal,
    above the top-left diagonal), ``O = P V`` over the keys, normalised; no log-sum-exp."""
    return attention_ir_spec(name, cfg.dtype, cfg.dtype, cfg.head_dim, cfg.bn, FLASH_IR_SCALARS,
                             instances, ("bat", "h", "hk", "block_bh"))


def attention_ir_spec(name: str, in_dtype: str, out_dtype: str, head_dim: int, key_tile: int,
                      scalars: Any, instances: Any, head_symbols: Any, wide: Any = ()) -> Any:
    """The spec of an NVIDIA attention kernel built as IR that stores O and no log-sum-exp (the
    prefill here, the one-pass decode of :mod:`.decode_onepass_ir`): ``S = Q K^T`` over d, the
    online softmax over the keys in steps of ``key_tile``, ``O = P V``, normalised; the int
    ``scalars`` in [0, 2^31) (those in ``wide``, ``long long`` arguments: [0, 2^63)), the
    domain ``instances``."""
    from ..verify.spec import (Contraction, Dim, Domain, KernelSpec, OnlineSoftmax, Symbol,
                               TensorSpec)
    dims = (Dim("row", "seqlen_q"), Dim("key", "seqlen_kv"), Dim("d", head_dim),
            Dim("head", "heads"), Dim("kv_head", "kv_heads"), Dim("batch", "batch"))
    tensors = (TensorSpec("Q", ("row", "d", "head", "batch"), "input", in_dtype),
               TensorSpec("K", ("key", "d", "kv_head", "batch"), "input", in_dtype),
               TensorSpec("V", ("key", "d", "kv_head", "batch"), "input", in_dtype),
               TensorSpec("O", ("row", "d", "head", "batch"), "output", out_dtype))
    return KernelSpec(
        name=name, dims=dims, tensors=tensors,
        contractions=(Contraction("S", "Q", "K", ("d",)), Contraction("O", "P", "V", ("key",))),
        softmax=OnlineSoftmax("S", "P", "key", "d", key_tile),
        symbols=tuple(Symbol(n, 0, 2 ** (63 if n in wide else 31) - 1) for n in scalars),
        domain=Domain.on_instances(instances), head_anchor="Q", kv_head="kv_head",
        head_symbols=tuple(head_symbols))


class _Builder:
    def __init__(self, cfg: FlashConfig, v_early: Optional[bool] = None,
                 split: Optional[bool] = None) -> None:
        self.v_early = cfg.head_dim in V_WAIT_EARLY_HEAD_DIMS if v_early is None else v_early
        self.split = (cfg.head_dim, cfg.causal) not in ONE_MASKED_LOOP if split is None \
            else split
        why = ir_flash_supported(cfg)
        if why is not None:
            raise AttentionConfigError(f"{cfg.name}: {why}")
        self.c, self.p = cfg, plan_flash(cfg)
        d, bm, bn, mt = cfg.head_dim, cfg.bm, cfg.bn, cfg.mt
        self.kd, self.nt, self.dt = d // 16, bn // 8, d // 8
        self.spec = mma_m16n8k16(cfg.dtype)
        self.G = global_layouts(d)
        self.tid, self.lane = sym("tid"), sym("lane")
        self.n_lets = 0
        dt = cfg.dtype
        self.stage = Frag("cp_stage", dt, 8, 8)
        self.qf = Frag("qf", dt, mt * 8)
        self.kb = Frag("kf", dt, 8)
        self.vb = Frag("vf", dt, 8)
        self.sc = Frag("sc", "f32", mt * self.nt * 4)
        self.pf = Frag("pf", "f32", mt * self.nt * 4)
        self.pa = Frag("pa", dt, mt * self.nt * 4)
        self.o = Frag("o_acc", "f32", mt * self.dt * 4)
        self.lse = Frag("lse_r", "f32", 1)
        self.tiles = {"Q": (self.p.sw_q, bm * d, 1), "K": (self.p.sw_k, bn * d, 2),
                      "V": (self.p.sw_v, bn * d, 2)}

    # ---- shared memory ------------------------------------------------------------------
    def origin(self, t: str) -> Any:
        """``(tile offset[, stage]) -> element`` of the shared array of ``t``."""
        sw, elems, stages = self.tiles[t]
        lay = Layout((elems,), (1,)) if stages == 1 else Layout((elems, stages), (1, elems))
        return ComposedLayout(sw, 0, lay) if sw is not None else lay

    def let(self, stem: str, expr: Any) -> Tuple[Let, Any]:
        self.n_lets += 1
        name = f"{stem}{self.n_lets}"
        return Let(name, sympy.expand(sympy.sympify(expr))), sym(name)

    def lds(self, t: str, tile_off: Any, stage: Any) -> Tuple[Let, Any, Any]:
        """(let of the linear offset, printed swizzled offset, coordinates of element j)."""
        sw, elems, stages = self.tiles[t]
        # the constant part of the tile offset in whole swizzle periods is added outside the
        # XOR (it changes no bit the swizzle reads): the lane's swizzled offsets are a few
        # loop-invariant values and the rest an immediate, as the template's swz_split
        const, rest = sympy.expand(sympy.sympify(tile_off)).as_coeff_Add()
        period = 2 ** (sw.base + sw.shift + sw.bits) if sw is not None else 1
        hi = int(const) - int(const) % period
        let, s = self.let(f"s{t.lower()}_", rest + (int(const) - hi))
        off = (swizzle_expr(sw, s) if sw is not None else s) + hi
        if stages > 1:
            # the stage offset lies above every bit the swizzle reads or writes, so it is added
            # outside the XOR: the swizzled tile offset is loop-invariant (the verifier checks
            # the printed sum against the swizzled (tile offset, stage) layout at every point)
            if sw is not None and elems % 2 ** (sw.base + sw.shift + sw.bits):
                raise AttentionConfigError(f"{t} stage of {elems} elements is not a multiple of "
                                           f"the swizzle {sw}'s period")
            off = off + stage * elems

        def coords(j: int) -> Any:
            return (tile_off + j,) if stages == 1 else (tile_off + j, stage)
        return let, off, coords

    def base_lets(self) -> List[Any]:
        """Each shared access pattern's swizzled lane (or thread) base, computed once: an access
        at constant ``c`` from it is then ``(base ^ lo) + hi`` (:func:`.gemm.swz_split`, proved
        for every lane and warp; the template's form), one XOR and an immediate."""
        from .gemm import lane_bases
        c, p, tid = self.c, self.p, self.tid
        T = c.threads
        copy_bases = {n: np.array([cpl.off((t, 0, 0)) for t in range(T)], dtype=np.int64)
                      for n, cpl in (("q", p.q_copy), ("kv", p.kv_copy))}
        self.bases = {
            "q_rd": ("Q", p.q_read((self.lane, 0, (0, 0, sym("warp")))),
                     lane_bases(p.q_read, 3, c.warps)),
            "k_rd": ("K", p.k_read((self.lane, 0, (0, 0))), lane_bases(p.k_read, 2, 1)),
            "v_rd": ("V", p.v_read((self.lane, 0, (0, 0))), lane_bases(p.v_read, 2, 1)),
            "q_cp": ("Q", p.q_copy.off((tid, 0, 0)), copy_bases["q"]),
            "k_cp": ("K", p.kv_copy.off((tid, 0, 0)), copy_bases["kv"]),
            "v_cp": ("V", p.kv_copy.off((tid, 0, 0)), copy_bases["kv"])}
        out: List[Any] = [Comment("swizzled shared bases of this thread (loop-invariant)")]
        for key, (t, expr, _) in self.bases.items():
            sw = self.tiles[t][0]
            e = sympy.expand(expr)
            out.append(Let(f"{key}_sw", swizzle_expr(sw, e) if sw is not None else e))
        return out

    def lds_at(self, key: str, c: int, stage: Any) -> Tuple[List[Any], Any, Any]:
        """(lets, printed offset, coordinates of element j) of the shared vector at constant
        offset ``c`` from base ``key``: ``(base ^ lo) + hi [+ stage offset]`` where the split is
        proved, else the swizzle of the whole offset (:meth:`lds`)."""
        from .gemm import swz_split
        t, expr, bases = self.bases[key]
        sw, elems, stages = self.tiles[t]
        tile_off = sympy.expand(expr + c)
        sp = swz_split(sw, bases, int(c))
        if sp is None:
            let, off, coords = self.lds(t, tile_off, stage)
            return [let], off, coords
        lo, hi = sp
        b = sym(f"{key}_sw")
        off = (Xor(b, lo) if lo else b) + hi + (stage * elems if stages > 1 else 0)

        def coords(j: int) -> Any:
            return (tile_off + j,) if stages == 1 else (tile_off + j, stage)
        return [], off, coords

    # ---- global -> shared -----------------------------------------------------------------
    def copy(self, t: str, row0: Any, stage: Any, whole: bool = False) -> List[Any]:
        """The tile of ``t`` whose first row is ``row0``: one predicated 16-byte ``cp.async``
        per copy vector (rows past the sequence are zero-filled); ``whole``: unpredicated (the
        caller runs it only where every row of the tile is inside the sequence: the
        verifier's bounds check proves that on every instance)."""
        cpl = self.p.q_copy if t == "Q" else self.p.kv_copy
        G = self.G[t]
        rows = R("seqlen_q") if t == "Q" else R("seqlen_kv")
        head = sym("h") if t == "Q" else sym("hk")
        out: List[Any] = []
        for i in range(cpl.iters):
            row = sympy.expand(row0 + cpl.row((self.tid, i)))
            col = sympy.expand(cpl.col((self.tid, i)))
            cs = tuple((row, col + j, head, sym("bat")) for j in range(8))
            regs = self.stage.regs(range(8))
            load = Access("load", "global", t, sympy.expand(G(cs[0])), 8, regs,
                          None if whole else _lt(row, rows),
                          tag=f"{t}.cp.async.load", origin=G, coords=cs)
            c = int(cpl.off((0, 0, i)) - cpl.off((0, 0, 0)))
            lets, soff, coords = self.lds_at(f"{t.lower()}_cp", c, stage)
            store = Access("store", "lds", f"s{t}", soff, 8, regs, tag=f"{t}.cp.async.store",
                           origin=self.origin(t), coords=tuple(coords(j) for j in range(8)))
            out += lets + [CpAsync(load, store, tag=f"{t}.cp.async")]
        return out

    def copy_kv(self, t: str, blk: Any, stage: Any) -> List[Any]:
        """Key block ``blk`` of ``t`` (K or V): unpredicated where the block lies wholly
        inside the sequence (``blk < n_whole``), else predicated row by row (the template's
        ``fast_copy``)."""
        row0 = blk * self.c.bn
        return [If(sympy.StrictLessThan(blk, sym("n_whole"), evaluate=False),
                   self.copy(t, row0, stage, whole=True)),
                If(sympy.GreaterThan(blk, sym("n_whole"), evaluate=False),
                   self.copy(t, row0, stage))]

    def ldm(self, key: str, c: int, stage: Any, fr: Frag, first: int, trans: bool,
            tag: str) -> List[Any]:
        t = self.bases[key][0]
        lets, soff, coords = self.lds_at(key, c, stage)
        return lets + [LdMatrixLoad("load", "lds", f"s{t}", soff, 8, fr.regs(range(first,
                                                                                 first + 8)),
                                  tag=tag, origin=self.origin(t),
                                  coords=tuple(coords(j) for j in range(8)),
                                  atom=ldmatrix(4, trans))]

    # ---- the products -------------------------------------------------------------------
    def scores(self, st: Any) -> List[Any]:
        """``S = Q K^T`` of the key block in stage ``st``: per 16-wide d step, the warp's Q
        fragments and K fragments by ``ldmatrix``, one ``mma.sync`` per (16 rows, 8 keys)."""
        p, mt, nt = self.p, self.c.mt, self.nt
        out: List[Any] = [ZeroFrag(self.sc)]
        for kk in range(self.kd):
            for i in range(mt):
                out += self.ldm("q_rd", p.q_read((0, 0, (kk, i, 0))), 0,
                                self.qf, 8 * i, False, "Q.ldmatrix")
            for n in range(nt // 2):
                out += self.ldm("k_rd", p.k_read((0, 0, (kk, n))), st, self.kb, 0, False,
                                "K.ldmatrix")
                for i in range(mt):
                    for h in range(2):
                        s0 = (i * nt + 2 * n + h) * 4
                        out.append(Mfma(self.spec, self.sc.regs(range(s0, s0 + 4)),
                                        self.qf.regs(range(8 * i, 8 * i + 8)),
                                        self.kb.regs(range(4 * h, 4 * h + 4)),
                                        tag=f"S(k{kk},m{i},n{2 * n + h})"))
        return out

    def pv(self, st: Any) -> List[Any]:
        """``O += P V``: per 16-key step, P of two 8-key score tiles rounded into the A
        operand (register for register: A item e is C item e & 3 of tile e >> 2), V by
        ``ldmatrix.trans``."""
        p, mt, nt = self.p, self.c.mt, self.nt
        out: List[Any] = []
        for kb in range(self.c.bn // 16):
            for i in range(mt):
                a0 = (i * nt + 2 * kb) * 4
                out.append(RoundProbs(self.pa, self.pf, tuple(range(a0, a0 + 8))))
            for n in range(self.kd):
                out += self.ldm("v_rd", p.v_read((0, 0, (kb, n))), st, self.vb, 0, True,
                                "V.ldmatrix.trans")
                for i in range(mt):
                    a0 = (i * nt + 2 * kb) * 4
                    for h in range(2):
                        o0 = (i * self.dt + 2 * n + h) * 4
                        out.append(Mfma(self.spec, self.o.regs(range(o0, o0 + 4)),
                                        self.pa.regs(range(a0, a0 + 8)),
                                        self.vb.regs(range(4 * h, 4 * h + 4)),
                                        tag=f"O(k{kb},m{i},n{2 * n + h})"))
        return out

    # ---- softmax ------------------------------------------------------------------------
    def row_of(self, i: int, e: int) -> Any:
        return sym("row0") + 16 * i + 8 * (e >> 1)

    def mask(self) -> List[Any]:
        """Set the invisible scores to -inf (``key < seqlen_kv``; causal: ``key <= row``): the
        masked blocks only (the scores stay raw; the scale is folded into the exponent's
        ``fma``: ``raw=True``)."""
        mt, nt = self.c.mt, self.nt
        items, rows, keys, conds = [], [], [], []
        for i in range(mt):
            for n in range(nt):
                for e in range(4):
                    row = self.row_of(i, e)
                    key = sym("n0") + 8 * n + sym("col0") + (e & 1)
                    cond: Any = _lt(key, R("seqlen_kv"))
                    if self.c.causal:
                        cond = sympy.And(cond, sympy.Le(key, row, evaluate=False))
                    items.append((i * nt + n) * 4 + e)
                    rows.append(row)
                    keys.append(key)
                    conds.append(cond)
        return [MaskScores(self.sc, tuple(items), tuple(rows), tuple(keys), tuple(conds),
                           raw=True)]

    def softmax(self) -> List[Any]:
        """Per row (16-row tile ``i``, half ``hh``: rows g and g + 8 of the mma C layout): the
        lane's max, the max over the 4 lanes of the row, the update, P = exp2(S - m), and O's
        rescale."""
        mt, nt = self.c.mt, self.nt
        out: List[Any] = []
        for i in range(mt):
            for hh in range(2):
                r = f"{i}{hh}"
                items = tuple((i * nt + n) * 4 + 2 * hh + e for n in range(nt) for e in range(2))
                out += [RowMax(f"mx{r}", self.sc, items),
                        LaneXor(f"mx{r}", "max", "shfl_xor", 1),
                        LaneXor(f"mx{r}", "max", "shfl_xor", 2),
                        SoftmaxUpdate(f"m{r}", f"mx{r}", f"alpha{r}", f"mc{r}", raw=True),
                        ExpScores(self.pf, items, self.sc, items, f"mc{r}", f"l{r}",
                                  f"alpha{r}", raw=True),
                        Rescale(self.o, tuple((i * self.dt + n) * 4 + 2 * hh + e
                                              for n in range(self.dt) for e in range(2)),
                                f"alpha{r}")]
        return out

    # ---- the loop -----------------------------------------------------------------------
    def block(self, masked: bool) -> List[Any]:
        bn = self.c.bn
        j = sym("j")
        st = sympy.Mod(j, 2)
        nxt = sympy.Mod(j + 1, 2)
        return [
            Let("n0", j * bn),
            Comment("K of block j (with Q at j = 0) has landed; the barrier also retires every "
                    "warp's reads of the stage the next K copy overwrites"),
            CpAsyncWait(1), Barrier(),
            If(j + 1 < sym("n_blocks"), self.copy_kv("K", j + 1, nxt)),
            CpAsyncCommit(),
            *self.scores(st),
            *([Comment("keys past seqlen_kv" + (" and above the diagonal" if self.c.causal
                                                  else "") + " masked"),
               *self.mask()] if masked else []),
            *(self.v_wait(j, nxt) if self.v_early else []),
            *self.softmax(),
            *(self.v_wait(j, nxt) if not self.v_early else []),
            *self.pv(st)]

    def v_wait(self, j: Any, nxt: Any) -> List[Any]:
        """Wait for V of block ``j``, then prefetch V of block ``j + 1`` into the other stage
        (the barrier retires every warp's P V reads of that stage, one block back)."""
        return [Comment("V of block j has landed"),
                CpAsyncWait(1), Barrier(),
                If(j + 1 < sym("n_blocks"), self.copy_kv("V", j + 1, nxt)),
                CpAsyncCommit()]

    def block_lets(self) -> List[Any]:
        c = self.c
        bm, bn = c.bm, c.bn
        crow, ccol = _c_rows(self.spec)
        skv = R("seqlen_kv")
        out: List[Any] = [
            Let("lane", sympy.Mod(self.tid, 32)), Let("warp", sympy.floor(self.tid / 32))]
        out += query_block_lets(bm, c.causal)
        out += [Let("row0", sym("m0") + c.rpw * sym("warp") + crow((self.lane, 0))),
                Let("col0", ccol((self.lane, 0)))] + self.base_lets()
        out += key_range_lets(bm, bn, c.causal)
        out += [Comment("key blocks below n_whole lie wholly inside the sequence: their copies "
                        "need no predicate"), Let("n_whole", sympy.floor(skv / bn))]
        return out

    def epilogue(self) -> List[Any]:
        mt, G = self.c.mt, self.G["O"]
        out: List[Any] = [CpAsyncWait(0)]
        for i in range(mt):
            for hh in range(2):
                out += normalized_row_store(
                    self.o, self.lse, G, self.row_of(i, 2 * hh), f"{i}{hh}",
                    [(i * self.dt + n) * 4 + 2 * hh for n in range(self.dt)])
        return out

    def build(self) -> AttnKernel:
        c = self.c
        mt = c.mt
        body: List[Any] = self.block_lets()
        body += [Comment("Q and K block 0: group 0; V block 0: group 1")]
        body += self.copy("Q", sym("m0"), 0)
        body += self.copy_kv("K", sympy.Integer(0), 0) + [CpAsyncCommit()] + \
            self.copy_kv("V", sympy.Integer(0), 0) + [CpAsyncCommit()]
        for i in range(mt):
            for hh in range(2):
                body += [FVar(f"m{i}{hh}", "-inf"), FVar(f"l{i}{hh}", "0")]
        body.append(ZeroFrag(self.o))
        if self.split:
            body += [Comment("key blocks visible to every row of the query block: no mask"),
                     Loop("j", 0, sym("n_full"), self.block(False)),
                     Comment("the ragged last block" + (" and the blocks on the diagonal"
                                                        if c.causal else "") + ": masked"),
                     Loop("j", sym("n_full"), sym("n_blocks"), self.block(True))]
        else:
            body += [Comment("one loop, every key block masked (the template's loop)"),
                     Loop("j", 0, sym("n_blocks"), self.block(True))]
        body += self.epilogue()
        name = flash_ir_name(c)
        d, bm, bn, dt = c.head_dim, c.bm, c.bn, c.dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("O", dt, const=False)]
        shared = [Shared("sQ", dt, bm * d), Shared("sK", dt, 2 * bn * d),
                  Shared("sV", dt, 2 * bn * d)]
        header = [f"flash-attention prefill (kernels/nvidia/flash_ir.py): O = softmax(scale Q "
                  f"K^T{' + causal mask' if c.causal else ''}) V, {dt}, head_dim {d}, {bm} query "
                  f"rows x {bn} keys, {c.warps} warps, mma.sync m16n8k16; built as kernel IR "
                  "and verified",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()
                   if not any(w in k for w in ("banks", "lanes", "coverage"))]
        frags = [self.stage, self.qf, self.kb, self.vb, self.sc, self.pf, self.pa, self.o,
                 self.lse]
        return AttnKernel(name, params, shared, frags, body, c.threads, (0, 0, 1),
                          grid_symbols=("block_q", "block_bh"), header=header,
                          meta={"kind": "flash_ir", "cfg": c, "plan": self.p,
                                "u32_shared": True},
                          scalars=[ScalarParam(n) for n in FLASH_IR_SCALARS] +
                          [ScalarParam("scale_log2", "float")], min_blocks=c.min_blocks,
                          spec=flash_ir_spec(name, c, flash_ir_instances))


def query_block_lets(bm: int, causal: bool) -> List[Any]:
    """The block's coordinates as Lets, shared by the IR prefills: ``bat`` / ``h`` / ``hk``
    (batch, query head, its KV head) from ``block_bh``, the query block ``qb`` (causal: the
    longest blocks first) and its first row ``m0``."""
    out: List[Any] = [Comment("block: (query block, batch x heads)"),
                      Let("bat", sympy.floor(sym("block_bh") / R("heads"))),
                      Let("h", sympy.Mod(sym("block_bh"), R("heads"))),
                      Let("hk", sympy.floor(sym("h") / R("group")))]
    if causal:
        out += [Comment("causal: the longest query blocks first"),
                Let("n_qb", sympy.floor((R("seqlen_q") + bm - 1) / bm)),
                Let("qb", sym("n_qb") - 1 - sym("block_q"))]
    else:
        out.append(Let("qb", sym("block_q")))
    return out + [Let("m0", bm * sym("qb"))]


def key_range_lets(bm: int, bn: int, causal: bool) -> List[Any]:
    """The key loop's bounds as Lets, shared by the IR prefills: ``n_end`` (keys the block's
    last row reaches), ``n_full`` (key blocks every row of the block sees whole) and
    ``n_blocks``."""
    skv = R("seqlen_kv")
    if causal:
        out: List[Any] = [Comment("keys [0, n_end) reach the block's last row; blocks below "
                                  "n_full are visible to its first row"),
                          LetMinMax("n_end", "min", skv, sym("m0") + bm),
                          LetMinMax("n_vis", "min", skv, sym("m0") + 1),
                          Let("n_full", sympy.floor(sym("n_vis") / bn))]
    else:
        out = [Let("n_end", skv), Let("n_full", sympy.floor(skv / bn))]
    return out + [Let("n_blocks", sympy.floor((sym("n_end") + bn - 1) / bn))]


def _lt(a: Any, b: Any) -> Any:
    """``a < b`` as printed (sympy would rewrite ``floor(x / 8) < n`` as ``x / 8 < n``)."""
    return sympy.StrictLessThan(a, b, evaluate=False)


def normalized_row_store(o: Frag, lse: Any, G: Any, row: Any, name: str,
                         pairs: List[int]) -> List[Any]:
    """The write-back of one accumulator row of a prefill (the mma.sync and wgmma IR share it):
    the row sum ``l{name}`` summed over the 4 lanes of the quad that share the row (``shfl_xor``
    1 and 2), O normalised by it in the raw-score form (row maximum ``m{name}``), then for each
    ``pairs[n]`` (the first O register of column pair ``n``) columns ``8 n + col0`` and ``+ 1``
    stored as one pair under ``row < seqlen_q``."""
    items = tuple(o0 + e for o0 in pairs for e in range(2))
    out: List[Any] = [LaneXor(f"l{name}", "sum", "shfl_xor", 1),
                      LaneXor(f"l{name}", "sum", "shfl_xor", 2),
                      FinalNormalize(o, items, f"l{name}", f"m{name}", lse, raw=True)]
    for n, o0 in enumerate(pairs):
        cs = tuple((row, 8 * n + sym("col0") + e, sym("h"), sym("bat")) for e in range(2))
        out.append(Access("store", "global", "O", sympy.expand(G(cs[0])), 2,
                          o.regs([o0, o0 + 1]), _lt(row, R("seqlen_q")),
                          tag="O.store", origin=G, coords=cs))
    return out


def _c_rows(spec: Any) -> Tuple[Layout, Layout]:
    from .gemm import split_rows
    return split_rows(spec.tv_layout("C"), 16)


def build_flash_ir(cfg: FlashConfig, v_early: Optional[bool] = None,
                   split: Optional[bool] = None) -> AttnKernel:
    """The IR of ``cfg`` with its spec; :class:`~.attention.AttentionConfigError` where the
    template's plan refuses ``cfg`` or the IR form does not cover it.  ``v_early``: wait for V
    (and prefetch the next block's) right after ``S = Q K^T`` instead of after the softmax
    (default: :data:`V_WAIT_EARLY_HEAD_DIMS`).  ``split``: the key blocks every row sees whole
    in a loop without the mask, the rest in a masked loop; False: one loop, every block masked
    (default: split, except :data:`ONE_MASKED_LOOP`)."""
    return _Builder(cfg, v_early, split).build()


# ---------------------------------------------------------------------------- verification

def flash_instance(cfg: FlashConfig, name: str, B: int, H: int, HK: int, sq: int, skv: int,
                   bshd: bool = False) -> Any:
    """A launch of ``B x H`` heads (``HK`` kv heads) of ``sq`` rows and ``skv`` keys, BHSD
    (or BSHD: rows strided by the heads) contiguous tensors."""
    from ..verify.attention_gate import Instance
    D = cfg.head_dim
    v: Dict[str, int] = dict(batch=B, heads=H, kv_heads=HK, group=H // HK, seqlen_q=sq,
                             seqlen_kv=skv, causal_off=0)
    for t, rows, heads in (("q", sq, H), ("k", skv, HK), ("v", skv, HK), ("o", sq, H)):
        if bshd:
            v.update({f"{t}_sb": rows * heads * D, f"{t}_sh": D, f"{t}_ss": heads * D})
        else:
            v.update({f"{t}_sb": heads * rows * D, f"{t}_sh": rows * D, f"{t}_ss": D})
    return Instance(name, v, (-(-sq // cfg.bm), B * H, 1), cfg.causal)


def flash_ir_instances(k: Any) -> List[Any]:
    """Ragged GQA (group 2, 77 rows and keys), one row and one key, strided BSHD with partial
    tiles; causal adds more rows than keys and more keys than rows (top-left diagonal)."""
    c = k.meta["cfg"]
    bm, bn = c.bm, c.bn
    out = [flash_instance(c, "ragged-gqa2", 2, 4, 2, 77, 77),
           flash_instance(c, "one-row-one-key", 1, 1, 1, 1, 1),
           flash_instance(c, "bshd-strided", 1, 2, 1, bm + 9, 3 * bn + 5, bshd=True)]
    if c.causal:
        out += [flash_instance(c, "q-longer", 1, 1, 1, bm + 40, 70),
                flash_instance(c, "kv-longer", 1, 1, 1, 40, 3 * bn + 7)]
    return out


def int_offsets_fit(*tensors: Any) -> bool:
    """Every element offset of the (B, H, S, D) tensors, and every stride (each an ``int``
    argument, even of a dimension of extent 1: a stride of 2^31 there adds no offset but the
    launch refuses it as an i32), fits the IR's 32-bit ``int`` math."""
    for t in tensors:
        last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        if last >= 2 ** 31 or max(t.stride()) >= 2 ** 31:
            return False
    return True


#: the IR prefills' grid is (query blocks, batch x query heads): grid y below 2^16
IR_MAX_BATCH_HEADS = 65535


def ir_launch_fits(q: Any, k: Any, v: Any, out: Any = None) -> bool:
    """Can the IR prefills launch these tensors: every offset and stride fits 32-bit ``int``
    (:func:`int_offsets_fit`) and batch x query heads fits grid y
    (:data:`IR_MAX_BATCH_HEADS`)?  Where not, the dispatch runs the wide IR form
    (:mod:`.prefill_wide`: grid (query blocks, heads, batch), 64-bit batch / head strides) or
    the template."""
    ts = (q, k, v) + (() if out is None else (out,))
    return int_offsets_fit(*ts) and q.shape[0] * q.shape[1] <= IR_MAX_BATCH_HEADS


def scale_log2_of(head_dim: int, scale: Optional[float]) -> float:
    s = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    if not s > 0 or not math.isfinite(s):
        raise LaunchError(f"scale must be a positive finite number, got {s}")
    return s * math.log2(math.e)


# ---------------------------------------------------------------------------- runtime

class IrFlashAttention(FlashAttention):
    """The IR-built prefill of ``cfg``, verified (the IR and its printed CUDA; a passing verdict
    is remembered on disk by content, :mod:`kernels.verify.report_cache`) before anything is
    compiled: ``fa(q, k, v, out=None, scale=None) -> out`` with the template's arguments and
    checks (:class:`~.attention.FlashAttention`), plus 32-bit element offsets and batch x
    heads inside grid y; ``wide=True``: the 64-bit form (:mod:`.prefill_wide`: ``long long``
    strides, grid (query blocks, heads, batch)) for tensors the 32-bit form cannot launch.
    ``report`` is the verifier's."""

    def __init__(self, cfg: FlashConfig = FlashConfig(), *, backend: str = "auto",
                 v_early: Optional[bool] = None, split: Optional[bool] = None,
                 wide: bool = False) -> None:
        self._load(build_flash_ir(cfg, v_early, split), plan_flash(cfg), backend, wide)

    def _load(self, ir: Any, plan: Any, backend: str, wide: bool) -> None:
        """Widen ``ir`` (``wide``), verify it with its printed CUDA (a passing verdict
        remembered on disk by content) and load it: the one loading step of the mma.sync and
        wgmma prefills."""
        from ..printer.cuda_attention import emit_cuda_attention
        from ..verify.report_cache import verified
        from .prefill_wide import widen_prefill
        self.wide = wide
        self.ir = widen_prefill(ir) if wide else ir
        source = emit_cuda_attention(self.ir)
        self.report = verified(self.ir, source, self.ir.meta["cfg"].arch)
        self.plan = plan
        CompiledKernel.__init__(self, self.ir.meta["cfg"], source, backend)
        self.kernel_name = self.ir.name

    def bind(self, q, k, v, out=None, scale: Optional[float] = None):
        """Check the arguments; ``run(q, k, v, out)`` for every call with their ``call_key``."""
        import torch
        from ..printer.cuda import smem_bytes
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec
        from .prefill_wide import launch_values, prove_launch, scalar_signature, wide_grid
        B, Hq, Sq, Hkv, Skv = self.check_args(q, k, v, out)
        cfg = self.cfg
        wide = getattr(self, "wide", False)
        if not wide:
            if not int_offsets_fit(q, k, v) or (out is not None and not int_offsets_fit(out)):
                raise LaunchError(f"{self.kernel_name}: an element offset of q / k / v / out "
                                  "reaches 2^31; the IR-built prefill indexes with 32-bit int "
                                  "(its wide=True form takes 64-bit strides)")
            if B * Hq > IR_MAX_BATCH_HEADS:
                raise LaunchError(f"batch x heads = {B * Hq} must be below 65536 (grid y; "
                                  "the wide=True form's grid is (query blocks, heads, batch))")
        log2_scale = scale_log2_of(cfg.head_dim, scale)
        grid = wide_grid(self.kernel_name, q, cfg.bm) if wide else (-(-Sq // cfg.bm), B * Hq, 1)
        site = LaunchSite(self.module, self.kernel_name, grid, self.ir.block,
                          signature=("ptr",) * 4 + scalar_signature(self.ir),
                          specs=[TensorSpec(strides=())] * 4
                          + [None] * (len(FLASH_IR_SCALARS) + 1),
                          smem_bytes=smem_bytes(self.ir))
        head = [Sq, Skv, Hq, Hq // Hkv] + [t.stride(d) for t in (q, k, v) for d in range(3)]
        if wide:        # this launch's own values proved (out: as given, or contiguous)
            vals = launch_values(q, k, v, out)
            o_st = (vals["o_sb"], vals["o_sh"], vals["o_ss"])
            prove_launch(self.ir, self.source, vals, grid)

        def run(q, k, v, out):
            if out is None:
                out = torch.empty_like(q, memory_format=torch.contiguous_format)
                if not wide and not int_offsets_fit(out):
                    raise LaunchError(f"{self.kernel_name}: out has offsets past 2^31")
            elif wide and tuple(out.stride()[:3]) != o_st:
                raise LaunchError(f"{self.kernel_name}: out strides {tuple(out.stride())} "
                                  f"differ from the proved launch's {o_st}")
            site([q, k, v, out, *head, out.stride(0), out.stride(1), out.stride(2),
                  log2_scale])
            return out
        return run
