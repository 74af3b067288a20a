"""The wgmma flash-attention prefill (:class:`~.wgmma_attention.WgmmaFlashAttention`, what
:func:`~.dispatch.flash_attention` runs at head_dim 64 on an H100) built as kernel IR, printed
from the IR and proved, IR and printed text, by the one verifier (issue 20 item 1).

Same plan as the template (:func:`~.wgmma_attention.plan_wgmma_flash`: the swizzled Q / K / V
tiles, the ``cp.async`` partitions with their per-thread bases, the descriptors' constant
fields and each k step's start), same products: ``S = Q K^T`` by ``wgmma.m64n{bn}k16`` with Q
and K read through shared-memory descriptors; the online softmax on the S accumulator registers
(each row's maximum and sum over the 4 lanes of the ``layout_c`` quad that share it, by
``shfl_xor`` 1 and 2); ``P`` rounded once into the register-A fragment (A item ``e`` of k step
``s`` is S register ``8 s + e``: :func:`~.wgmma_softmax_emit.p_item`) and ``O += P V`` by the
``.rs`` ``wgmma.m64n{D}k16`` with V MN-major in shared memory; the normalised write-back.
Every statement is IR (:mod:`kernels.ir.nvidia`, :mod:`kernels.ir.nvidia_wgmma`,
:mod:`kernels.ir.attention`, :mod:`kernels.ir.warp_registers`), printed by
:mod:`kernels.printer.cuda_attention` and verified by :func:`kernels.verify.verifier.verify` on
the launch instances of the ``mma.sync`` IR prefill (:func:`~.flash_ir.flash_ir_instances`:
ragged GQA, one row and one key, strided BSHD with partial tiles; causal: more rows than keys
and the reverse): the GEMM's wgmma rules (descriptor reads, fences, groups, pins, the
generic-to-async proxy fence; :mod:`kernels.verify.attention_wgmma`) and every attention rule
(operand pairing of both products, the softmax, masking, write-back, races), and the printed
source read back against the IR.

Schedules: ``overlap=False`` runs one key block at a time (S, softmax, P V, each waited for);
``overlap=True`` (the template's default, FA3's intra-warpgroup overlap) issues ``S`` of block
``j`` and ``P V`` of block ``j - 1`` together and runs block ``j``'s softmax while ``P V`` is
still on the tensor cores (in the source: ptxas places the ``P V`` wait above most of the
softmax, in the template too; the three blocks per SM overlap each other instead).

The softmax arithmetic is the template's: raw scores (masked to -inf, not scaled), the row
maximum of raw scores (the scale is positive), the guarded maximum scaled once per row (``mc
= m == -inf ? 0 : m scale_log2``), ``alpha = exp2(fma(m_old, scale_log2, -mc))``, each
exponent ``exp2(fma(s, scale_log2, -mc))``, pairs of probabilities summed into a row sum, ``l =
fma(l, alpha, rs)`` (the raw-score form, ``raw=True``, of :mod:`kernels.printer.cuda_decode`:
the one form the mma.sync prefill :mod:`.flash_ir` prints too); the first ``S`` step
overwrites S (scale-d 0, ``WgmmaMma(accumulate=False)``); whole K / V blocks are copied without
predicates, partial ones predicated per row.  Shared addresses and descriptors come from the
arrays' 32-bit bases computed once (``meta["u32_shared"]``), each copy address a per-thread
base plus the stage and constant (``split_shared_offsets``: ``[R + imm]`` as the template's), and
with one warpgroup ``wg`` is the constant 0: the hot key-block loop is 494 SASS instructions
against the template's 516 (574 before; NVRTC 13.5, nvdisasm), 165 / 167 registers (plain /
causal), no spills.  What differs from the template (the output is the same, bitwise, on an
H100): key blocks visible to every row of the query block run an unmasked copy of the loop body
(the template tests ``need_mask`` at run time), and block 0 is always masked (the template
masks it only where it needs; :data:`MASK_BLOCK0_WHEN_NEEDED` builds the template's form,
verified, and stays off: timed on the H100 against this form it was 1.0-1.4 % faster causal but
up to 1.3 % slower at the plain shapes, below).  Index arithmetic is 32-bit ``int`` (the launcher refuses
offsets from 2^31, as :class:`~.flash_ir.IrFlashAttention`; the dispatch then runs the
template).

Tiles: one or two computing warpgroups (64 query rows each: ``row0`` and Q's descriptor start
step by the warpgroup), head_dim 64 or 128.  Two warpgroups at head_dim 128 (128 rows x 128
keys) is the consumer half of the warp-specialised prefill :func:`~.dispatch.flash_attention`
runs at d128 (:mod:`.wgmma_attention_ws`; what its IR form still needs:
:mod:`.wgmma_ws_ir_plan`); here both warpgroups also issue the ``cp.async`` loads.  On the
H100 (``benchmarks/nvidia_ir_wgmma_flash_d128.py``, docs/PERFORMANCE.md) its output is bitwise
its template's at every shape measured and bitwise the warp-specialised kernel's wherever both
take the same key block (128, or 192 with ``bn=192``); 0.94-0.99x the template's device time at
the long shapes (not dispatched).  Refused: head_dim 256 (verified in one trial, never run on a GPU), except as the two
consumer warpgroups of the warp-specialised cp.async kernel (``ws_consumer=True``,
:mod:`.wgmma_ws_ir_cp`: run on the H100, bitwise its template).
The 32-bit bases apply to both tiles; the d128 figures above predate them.

Speed (H100, 2026-11-24 21:31Z, ``benchmarks/nvidia_ir_wgmma_flash.py --rounds 11 --aa``,
docs/PERFORMANCE.md), the template's device time over the IR's (medians, both template
instances pooled): B4 H16 S2K 0.991, B4 H16 1000 / 4097 1.002, B4 H16 S2K causal 0.983, B8 H32
S8K 0.986; outputs bitwise equal there and at 20 more shapes, f16 and bf16.  At parity (>= 0.98x
at every shape): :func:`~.dispatch.flash_attention` runs it for the d64 wgmma tile
(:data:`~.prefill_select.IR_WGMMA_PREFILL_AT_PARITY`).

Block 0 masked only where needed (:data:`MASK_BLOCK0_WHEN_NEEDED`; H100, 2026-11-24 22:12Z,
``benchmarks/nvidia_ir_wgmma_flash.py --rounds 11 --aa --mask0-ab``, twice, both forms and two
template instances in one rotation; docs/PERFORMANCE.md): the form with the switch on over the
form with it off (medians, runs 1 / 2; rounds where on was faster, of 22): B4 H16 S2K 0.987 /
1.009 (4), 1000 / 4097 0.989 / 0.995 (8), S2K causal 1.013 / 1.010 (17), B8 H32 S8K 0.999 /
1.006 (6); A/A 0.98-1.013.  Both forms bitwise the template at every shape and GPU-test case.
Slower at two plain shapes in a run, so off (112 / 128 fewer SASS instructions in all, plain /
causal, same registers: not instruction count).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import sympy

from layoutalg import ComposedLayout, Layout, composition
from mfma_specs.nvidia_wgmma import wgmma

from ..ir.attention import (AttnKernel, ExpScores, FVar, LaneXor, LetMinMax,
                            MaskScores, Rescale, RowMax, ScalarParam, SoftmaxUpdate,
                            runtime_symbol as R)
from ..ir.core import (Access, Barrier, Comment, Frag, If, Let, Loop, Param, Shared, ZeroFrag,
                       swizzle_expr, sym)
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait
from ..ir.nvidia_wgmma import (FenceProxyAsync, GmmaOperand, WgmmaCommit, WgmmaFence, WgmmaMma,
                               WgmmaWait)
from ..ir.warp_registers import RoundProbs
from .attention import AttentionConfigError
from .flash_ir import (FLASH_IR_SCALARS, IrFlashAttention, flash_ir_instances, flash_ir_spec,
                       global_layouts, key_range_lets, normalized_row_store,
                       query_block_lets)
from .wgmma import Operand, accumulator_rows_cols
from .wgmma_attention import WgmmaFlashConfig, WgmmaFlashPlan, plan_wgmma_flash

__all__ = ["build_wgmma_flash_ir", "wgmma_flash_ir_name", "wgmma_flash_ir_supported",
           "IrWgmmaFlashAttention", "WgmmaFlashBuilder"]


#: the overlapped schedule masks block 0 only where a row does not see it whole (the template's
#: ``need_mask``), not in every query block.  Verified (IR and text) both ways and bitwise the
#: template both ways on the H100; off: timed against the always-masked form (module docstring,
#: docs/PERFORMANCE.md) it was 1.0-1.4 % faster at S2K causal but 0.5-1.3 % slower at plain
#: shapes in a run, so it fails the "not slower at any shape" bar (what runs is what was timed)
MASK_BLOCK0_WHEN_NEEDED = False


def wgmma_flash_ir_supported(cfg: WgmmaFlashConfig, ws_consumer: bool = False
                             ) -> Optional[str]:
    """None if the IR builds ``cfg``, else why not.  ``ws_consumer``: the tile is the two
    consumer warpgroups of a warp-specialised kernel (:mod:`.wgmma_ws_ir_cp`), which also take
    head_dim 256 (O's 128 registers fit the consumers' 240 once the producer gives its
    registers back; the copies are the producer's)."""
    if cfg.warpgroups not in (1, 2):
        return (f"warpgroups={cfg.warpgroups}: the IR form has one or two computing "
                "warpgroups (64 query rows each)")
    if ws_consumer and cfg.warpgroups == 2 and cfg.head_dim == 256:
        return None
    if cfg.head_dim not in (64, 128):
        return (f"head_dim {cfg.head_dim}: the IR form takes 64 (the tile choose_prefill runs "
                "on this kernel) and 128 (the consumer tile of the warp-specialised kernel, "
                "which runs there; verified and measured against the template, not dispatched)")
    return None


def wgmma_flash_ir_name(cfg: WgmmaFlashConfig) -> str:
    return "lg_wgflash_ir_" + cfg.name[len("lg_wgflash_"):]


def _blocks_per_sm(cfg: WgmmaFlashConfig) -> int:
    """The ``__launch_bounds__`` minimum of blocks per SM: as many as shared memory admits, at
    most 3.  The head_dim 64 tile is chosen for three blocks per SM overlapping each other's
    softmax and MMAs (:mod:`.prefill_select`); without the bound ptxas gives the overlapped
    schedule 188 registers, two blocks' worth (165 with it, no spills: nvcc 13, sm_90a)."""
    return max(1, min(3, (227 * 1024) // cfg.smem_bytes))


def _lt(a: Any, b: Any) -> Any:
    """``a < b`` as printed (sympy would rewrite ``floor(x / 8) < n`` as ``x / 8 < n``)."""
    return sympy.StrictLessThan(a, b, evaluate=False)


class WgmmaFlashBuilder:
    """The statements of the wgmma prefill's IR for one ``cfg`` (:meth:`build` the kernel);
    the warp-specialised form (:mod:`.wgmma_ws_ir_serial`) reuses its tile, products,
    softmax and epilogue through the methods it overrides (``scores``, ``block_lets``).
    ``mask_block0_when_needed``: see :data:`MASK_BLOCK0_WHEN_NEEDED` (its default)."""

    def __init__(self, cfg: WgmmaFlashConfig, mask_block0_when_needed: Optional[bool] = None,
                 ws_consumer: bool = False) -> None:
        self.mask_block0_when_needed = (MASK_BLOCK0_WHEN_NEEDED if mask_block0_when_needed
                                        is None else mask_block0_when_needed)
        why = wgmma_flash_ir_supported(cfg, ws_consumer)
        if why is not None:
            raise AttentionConfigError(f"{cfg.name}: {why}")
        self.c: WgmmaFlashConfig = cfg
        self.p: WgmmaFlashPlan = plan_wgmma_flash(cfg)
        d, bn, dt = cfg.head_dim, cfg.bn, cfg.dtype
        self.G = global_layouts(d)
        self.tid, self.t = sym("tid"), sym("t")
        self.qk_atom, self.pv_atom = wgmma(dt, bn), wgmma(dt, d)
        self.stage = Frag("cp_stage", dt, 8, 8)
        self.sc = Frag("sc", "f32", bn // 2)
        self.pf = Frag("pf", "f32", bn // 2)
        self.pa = Frag("pa", dt, bn // 2)
        self.o = Frag("o_acc", "f32", d // 2)
        self.lse = Frag("lse_r", "f32", 1)
        self.elems = {"Q": cfg.bm * d, "K": bn * d, "V": bn * d}
        self.crow, self.ccol = accumulator_rows_cols(bn)
        accumulator_rows_cols(d)        # O is read with the same (row, col) pattern
        self.n_lets = 0

    # ---- global -> shared ---------------------------------------------------------------
    def origin(self, t: str) -> Any:
        """``(pre-swizzle tile offset[, stage]) -> element`` of the shared array of ``t``."""
        op = self.op(t)
        e = self.elems[t]
        lay = Layout((e,), (1,)) if t == "Q" else Layout((e, 2), (1, e))
        return ComposedLayout(op.smem.outer, 0, lay)

    def op(self, t: str) -> Operand:
        return {"Q": self.p.q, "K": self.p.k, "V": self.p.v}[t]

    def copy_bases(self) -> List[Any]:
        """Each copy's per-thread swizzled shared bases (one per base iteration of the plan's
        proved ``copy_consts``): a vector at constant ``ds`` from base ``b`` is ``base + ds``
        (+ the stage), as the template's copies are."""
        out: List[Any] = [Comment("swizzled shared bases of this thread's copy vectors")]
        for nm, op in (("qs", self.p.q), ("kvs", self.p.k)):
            pre = composition(op.smem.inner, op.copy.off)
            for b, it in enumerate(op.copy_bases):
                out.append(Let(f"{nm}{b}", swizzle_expr(op.smem.outer, pre((self.tid, 0, it)))))
        return out

    def kv_copy(self, t: str, row0: Any, stage: Any, exists: Any = sympy.true) -> List[Any]:
        """K or V block at ``row0`` into ``stage`` when ``exists``: unpredicated where the
        whole block lies inside the sequence (block-uniform test), else predicated per row
        (the template's two paths)."""
        whole = sympy.Le(row0 + self.c.bn, R("seqlen_kv"), evaluate=False)
        part = sympy.StrictGreaterThan(row0 + self.c.bn, R("seqlen_kv"), evaluate=False)
        return [If(sympy.And(exists, whole), self.copy(t, row0, stage, predicated=False)),
                If(sympy.And(exists, part), self.copy(t, row0, stage))]

    def copy(self, t: str, row0: Any, stage: Any, predicated: bool = True) -> List[Any]:
        """The tile of ``t`` whose first row is ``row0``: one 16-byte ``cp.async`` per copy
        vector, predicated on its row (rows past the sequence are zero-filled) unless
        ``predicated`` is False (the caller proved the whole tile inside)."""
        op = self.op(t)
        G = self.G[t]
        rows = R("seqlen_q") if t == "Q" else R("seqlen_kv")
        head = sym("h") if t == "Q" else sym("hk")
        pre = composition(op.smem.inner, op.copy.off)
        base = "qs" if t == "Q" else "kvs"
        out: List[Any] = []
        for i, (_, _, ds, b) in enumerate(op.copy_consts):
            row = sympy.expand(row0 + op.copy.row((self.tid, i)))
            col = sympy.expand(op.copy.col((self.tid, i)))
            cs = tuple((row, col + j, head, sym("bat")) for j in range(8))
            regs = self.stage.regs(range(8))
            load = Access("load", "global", t, sympy.expand(G(cs[0])), 8, regs,
                          _lt(row, rows) if predicated else None, tag=f"{t}.cp.async.load",
                          origin=G, coords=cs)
            off = sympy.expand(pre((self.tid, 0, i)))
            soff = sym(f"{base}{b}") + ds + (stage * self.elems[t] if t != "Q" else 0)
            coords = tuple((off + j,) if t == "Q" else (off + j, stage) for j in range(8))
            store = Access("store", "lds", f"s{t}", soff, 8, regs, tag=f"{t}.cp.async.store",
                           origin=self.origin(t), coords=coords)
            out.append(CpAsync(load, store, tag=f"{t}.cp.async"))
        return out

    # ---- the products -------------------------------------------------------------------
    def scores(self, st: Any) -> List[Any]:
        """``S = Q K_st^T``: one wgmma per 16-wide head-dim step, Q and K by descriptor."""
        q, k = self.p.q, self.p.k
        out: List[Any] = []
        for s, (qs, ks) in enumerate(zip(q.k_starts, k.k_starts)):
            a = GmmaOperand("sQ", sympy.expand(sym("wg") * (q.wg_step // 2) + qs // 2), q.desc,
                            q.major, 64)
            b = GmmaOperand("sK", sympy.expand(st * self.elems["K"] + ks // 2), k.desc, k.major,
                            self.c.bn)
            # the first k step overwrites S (scale-d 0): no zero fill of the 64 registers
            out.append(WgmmaMma(self.qk_atom, self.sc.regs(range(self.sc.count)), a, b,
                                tag=f"S(k{s})", accumulate=s > 0))
        return out

    def pv(self, st: Any) -> List[Any]:
        """``O += P V_st``: one register-A wgmma per 16 keys, P item ``8 s + e`` (the S
        register :func:`~.wgmma_softmax_emit.p_item` names) as A item ``e`` of step ``s``."""
        v = self.p.v
        out: List[Any] = []
        for s, vs in enumerate(v.k_starts):
            b = GmmaOperand("sV", sympy.expand(st * self.elems["V"] + vs // 2), v.desc, v.major,
                            self.c.head_dim)
            out.append(WgmmaMma(self.pv_atom, self.o.regs(range(self.o.count)),
                                self.pa.regs(range(8 * s, 8 * s + 8)), b, tag=f"O(k{s})"))
        return out

    # ---- softmax ------------------------------------------------------------------------
    def row_of(self, item: int) -> Any:
        return sym("row0") + 8 * ((item >> 1) & 1)

    def mask(self, masked: bool) -> List[Any]:
        """Keys past seqlen_kv (causal: above the diagonal) to -inf; nothing in a block
        visible to every row (the scores stay raw: the scale goes into each exponent)."""
        if not masked:
            return []
        items, rows, keys, conds = [], [], [], []
        for i in range(self.sc.count):
            row = self.row_of(i)
            key = sym("n0") + sym("col0") + 8 * (i >> 2) + (i & 1)
            cond: Any = _lt(key, R("seqlen_kv"))
            if self.c.causal:
                cond = sympy.And(cond, sympy.Le(key, row, evaluate=False))
            items.append(i)
            rows.append(row)
            keys.append(key)
            conds.append(cond)
        return [MaskScores(self.sc, tuple(items), tuple(rows), tuple(keys), tuple(conds),
                           raw=True)]

    def half_items(self, n: int, hh: int) -> Tuple[int, ...]:
        """Accumulator items of row half ``hh`` (row0 + 8 hh) of an ``m64n{n}`` accumulator."""
        return tuple(4 * j + 2 * hh + e for j in range(n // 8) for e in range(2))

    def softmax(self, rescale: bool = True) -> List[Any]:
        """Per row half: the lane's max, the max over the 4 lanes of the row, the update,
        P = exp2(S - m) (and O's rescale, unless deferred: ``rescale=False``)."""
        out: List[Any] = []
        for hh in range(2):
            items = self.half_items(self.c.bn, hh)
            out += [RowMax(f"mx{hh}", self.sc, items),
                    LaneXor(f"mx{hh}", "max", "shfl_xor", 1),
                    LaneXor(f"mx{hh}", "max", "shfl_xor", 2),
                    SoftmaxUpdate(f"mr{hh}", f"mx{hh}", f"alpha{hh}", f"mc{hh}", raw=True),
                    ExpScores(self.pf, items, self.sc, items, f"mc{hh}", f"lr{hh}", f"alpha{hh}",
                              raw=True)]
            if rescale:
                out += self.rescale_half(hh)
        return out

    def rescale_half(self, hh: int) -> List[Any]:
        return [Rescale(self.o, self.half_items(self.c.head_dim, hh), f"alpha{hh}")]

    def round_p(self) -> List[Any]:
        return [RoundProbs(self.pa, self.pf, tuple(range(self.pa.count)))]

    # ---- schedules ----------------------------------------------------------------------
    def sync_loads(self, pending: int, what: str) -> List[Any]:
        return [Comment(f"{what} landed: the proxy fence makes the cp.async writes visible to "
                        "wgmma, the barrier every thread's"),
                CpAsyncWait(pending), FenceProxyAsync(), Barrier()]

    def issue_scores(self, st: Any) -> List[Any]:
        return [WgmmaFence(), *self.scores(st), WgmmaCommit()]

    def serial_block(self, masked: bool) -> List[Any]:
        """One key block at a time: S, softmax, P V, each waited for (``overlap=False``)."""
        bn = self.c.bn
        j = sym("j")
        st, nxt = sympy.Mod(j, 2), sympy.Mod(j + 1, 2)
        return [
            Let("n0", j * bn),
            *self.sync_loads(1, "K of block j (with Q at j = 0)"),
            *self.kv_copy("K", sym("n0") + bn, nxt, j + 1 < sym("n_blocks")),
            CpAsyncCommit(),
            *self.issue_scores(st),
            WgmmaWait(0, (self.sc.name,)),
            *self.mask(masked), *self.softmax(), *self.round_p(),
            *self.sync_loads(1, "V of block j"),
            *self.kv_copy("V", sym("n0") + bn, nxt, j + 1 < sym("n_blocks")),
            CpAsyncCommit(),
            WgmmaFence(), *self.pv(st), WgmmaCommit(),
            WgmmaWait(0, (self.o.name, self.pa.name))]

    def overlap_block(self, masked: bool) -> List[Any]:
        """Block ``j >= 1`` of the overlapped schedule: K of j and V of j - 1 have landed; P of
        block j - 1 into registers, S of j and P V of j - 1 issued together; block j's softmax
        runs while P V (j - 1) is in flight; then O is rescaled."""
        bn = self.c.bn
        j = sym("j")
        st, prv = sympy.Mod(j, 2), sympy.Mod(j + 1, 2)
        return [
            Let("n0", j * bn),
            *self.sync_loads(0, "K of block j and V of block j - 1"),
            Comment("every wgmma of block j - 1 retired before the barrier: K stage of j - 1 "
                    "and V stage of j - 2 are free"),
            *self.kv_copy("K", sym("n0") + bn, prv, j + 1 < sym("n_blocks")),
            *self.kv_copy("V", sym("n0"), st),
            CpAsyncCommit(),
            *self.round_p(),
            *self.issue_scores(st),
            *self.pv(prv), WgmmaCommit(),
            Comment("S of block j done; P V of block j - 1 may still run"),
            WgmmaWait(1, (self.sc.name,)),
            *self.mask(masked), *self.softmax(rescale=False),
            WgmmaWait(0, (self.o.name, self.pa.name)),
            *self.rescale_half(0), *self.rescale_half(1)]

    def overlap_body(self) -> List[Any]:
        bn = self.c.bn
        first = [Comment("block 0: S and its softmax"),
                 *self.sync_loads(0, "Q and K of block 0"),
                 If(1 < sym("n_blocks"), self.copy("K", bn, 1)),
                 *self.copy("V", 0, 0), CpAsyncCommit(),
                 Let("n0", 0),
                 *self.issue_scores(0), WgmmaWait(0, (self.sc.name,))]
        if self.mask_block0_when_needed:
            # as the template's need_mask: only a block 0 some row does not see whole (a
            # ragged first block, or causal rows before key 127) is masked
            first += [If(_lt(sym("n_full"), 1), self.mask(True))] + self.softmax()
        else:
            # block 0 takes the masked form whether or not it needs it (once per query block)
            first += self.mask(True) + self.softmax()
        last = [Comment("the last block's P V"),
                *self.sync_loads(0, "V of the last block"),
                *self.round_p(),
                WgmmaFence(), *self.pv(sympy.Mod(sym("n_blocks") - 1, 2)), WgmmaCommit(),
                WgmmaWait(0, (self.o.name, self.pa.name))]
        return [*first, *self.key_loops(), *last]

    def key_loops(self) -> List[Any]:
        """Key blocks ``1 .. n_blocks - 1`` of the overlap schedule (:meth:`overlap_block`):
        the unmasked loop below ``n_full`` (blocks every row of the query block sees whole),
        then the masked one from ``max(1, n_full)`` (the ragged last block and, causal, the
        diagonal).  The warp-specialised builders' loops too."""
        return [Comment("key blocks visible to every row of the query block: no mask"),
                Loop("j", 1, sym("n_full"), self.overlap_block(False)),
                Comment("the ragged last block" + (" and the blocks on the diagonal"
                                                   if self.c.causal else "") + ": masked"),
                LetMinMax("j_mask", "max", 1, sym("n_full")),
                Loop("j", sym("j_mask"), sym("n_blocks"), self.overlap_block(True))]

    def block_lets(self) -> List[Any]:
        c = self.c
        bm, bn = c.bm, c.bn
        # one computing warpgroup (wgmma_flash_ir_supported): every thread's wg is 0, printed
        # as the constant (the compiler does not know tid < 128, and tid / 128 in the Q
        # descriptors and row0 cost a per-thread descriptor, rebuilt in the loop, per k step)
        wg = sympy.floor(self.tid / 128) if c.warpgroups > 1 else sympy.Integer(0)
        out: List[Any] = [Let("wg", wg), Let("t", sympy.Mod(self.tid, 128))]
        out += query_block_lets(bm, c.causal)
        out += [Comment("this thread's first accumulator row and column (wgmma layout_c)"),
                Let("row0", sym("m0") + 64 * sym("wg") + self.crow((self.t, 0))),
                Let("col0", self.ccol((self.t, 0)))] + self.copy_bases()
        return out + key_range_lets(bm, bn, c.causal)

    def epilogue(self) -> List[Any]:
        G = self.G["O"]
        d = self.c.head_dim
        out: List[Any] = [CpAsyncWait(0)]
        for hh in range(2):
            out += normalized_row_store(self.o, self.lse, G, self.row_of(2 * hh), f"r{hh}",
                                        [4 * jn + 2 * hh for jn in range(d // 8)])
        return out

    def build(self) -> AttnKernel:
        c = self.c
        body: List[Any] = self.block_lets()
        body += [Comment("Q and K block 0: group 0; V block 0 (serial schedule): group 1")]
        body += self.copy("Q", sym("m0"), 0) + self.copy("K", 0, 0) + [CpAsyncCommit()]
        for hh in range(2):
            # per-thread running max / sum of rows row0 + 8 hh ("m0" is the block's first row)
            body += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
        body.append(ZeroFrag(self.o))
        if c.overlap:
            body += self.overlap_body()
        else:
            body += self.copy("V", 0, 0) + [CpAsyncCommit()]
            body += [Comment("key blocks visible to every row of the query block: no mask"),
                     Loop("j", 0, sym("n_full"), self.serial_block(False)),
                     Comment("the ragged last block" + (" and the blocks on the diagonal"
                                                        if c.causal else "") + ": masked"),
                     Loop("j", sym("n_full"), sym("n_blocks"), self.serial_block(True))]
        body += self.epilogue()
        name = wgmma_flash_ir_name(c)
        d, bm, bn, dt = c.head_dim, c.bm, c.bn, c.dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("O", dt, const=False)]
        shared = [Shared("sQ", dt, self.elems["Q"]), Shared("sK", dt, 2 * self.elems["K"]),
                  Shared("sV", dt, 2 * self.elems["V"])]
        header = [f"flash-attention prefill (kernels/nvidia/wgmma_flash_ir.py): O = softmax("
                  f"scale Q K^T{' + causal mask' if c.causal else ''}) V, {dt}, head_dim {d}, "
                  f"{bm} query rows x {bn} keys, {c.warpgroups} warpgroup(s), wgmma m64n{bn}k16 "
                  f"(S) and m64n{d}k16 with P from registers (O), "
                  f"{'overlapped' if c.overlap else 'serial'} schedule; built as kernel IR and "
                  "verified",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()
                   if not any(w in k for w in ("banks", "coverage"))]
        frags = [self.stage, self.sc, self.pf, self.pa, self.o, self.lse]
        return AttnKernel(name, params, shared, frags, body, c.threads, (0, 0, 1),
                          grid_symbols=("block_q", "block_bh"), header=header,
                          # shared addresses and descriptors from the arrays' 32-bit
                          # bases, per-thread base apart from stage + constant: the copies
                          # address [R + imm] as the template's (CudaPrinter.saddr)
                          meta={"kind": "wgmma_flash_ir", "cfg": c, "plan": self.p,
                                "u32_shared": True, "split_shared_offsets": True},
                          scalars=[ScalarParam(n) for n in FLASH_IR_SCALARS] +
                          [ScalarParam("scale_log2", "float")], min_blocks=_blocks_per_sm(c),
                          spec=flash_ir_spec(name, c, flash_ir_instances))


def build_wgmma_flash_ir(cfg: WgmmaFlashConfig,
                         mask_block0_when_needed: Optional[bool] = None) -> AttnKernel:
    """The IR of ``cfg`` with its spec; :class:`~.attention.AttentionConfigError` where the
    template's plan refuses ``cfg`` or the IR form does not cover it.
    ``mask_block0_when_needed``: the overlapped schedule's block 0 masked only where some row
    does not see it whole (default :data:`MASK_BLOCK0_WHEN_NEEDED`)."""
    return WgmmaFlashBuilder(cfg, mask_block0_when_needed).build()


class IrWgmmaFlashAttention(IrFlashAttention):
    """The IR-built wgmma prefill of ``cfg``, verified (the IR and its printed CUDA; a passing
    verdict is remembered on disk by content) before anything is compiled: ``fa(q, k, v,
    out=None, scale=None) -> out`` with the template's arguments and checks, plus 32-bit
    element offsets (the launch of :class:`~.flash_ir.IrFlashAttention`; ``wide=True`` its
    64-bit form, :mod:`.prefill_wide`).
    ``mask_block0_when_needed``: as :func:`build_wgmma_flash_ir` (None: the module's switch;
    the benchmark times both forms side by side)."""

    def __init__(self, cfg: WgmmaFlashConfig = WgmmaFlashConfig(head_dim=64, warpgroups=1),
                 *, backend: str = "auto",
                 mask_block0_when_needed: Optional[bool] = None, wide: bool = False) -> None:
        self._load(build_wgmma_flash_ir(cfg, mask_block0_when_needed), plan_wgmma_flash(cfg),
                   backend, wide)
