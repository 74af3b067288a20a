"""The warp-specialised prefill's ``cp.async`` producer as IR statements
(:mod:`.wgmma_attention_ws`, ``loader="cp.async"``: what the H100 runs at head_dim 256 and
where TMA cannot address the tensors): warpgroup 0's 128 threads copy Q once and then K and V
block by block into the ring, each thread signalling a stage's ``full`` barrier with
``cp.async.mbarrier.arrive.noinc`` (:class:`~kernels.ir.nvidia_cp_ring.CpAsyncArrive`; the
barrier counts 128 arrivals, one per thread, each when that thread's copies landed)::

    setmaxnreg.dec <regs>
    Q tile (rows past seqlen_q zero-filled);          arrive.noinc bQ
    for j in 0 .. n_blocks:
        wait emptyK[j % S] (parity of the previous round);  K block j;  arrive.noinc fullK[j % S]
        wait emptyV[j % S];                                 V block j;  arrive.noinc fullV[j % S]

The copies are the template's (:func:`~.wgmma_attention_ws.plan_ws_flash`: the 128-thread
``cp.async`` partitions of Q, K and V into the tile's proved swizzled layouts, each thread's
swizzled shared bases computed once, a vector at a proved constant from its base; whole K / V
blocks unpredicated, the ragged one predicated per row, as ``emit_kv_loaders`` prints them).
The consumers must ``fence.proxy.async`` after each ``full`` wait before a wgmma reads the
stage (the copies write through the generic proxy); the verifier's per-role model refuses a
read without it (:mod:`kernels.verify.gate_cp_ring`).

:class:`CpProducer` is the ``cp.async`` producer of the ring builder
(:class:`~.wgmma_ws_ir_serial.WsRingBuilder`: the d256 serial kernel of :mod:`.wgmma_ws_ir_cp`
and the overlap kernel of the dispatched d256 configuration, :mod:`.wgmma_ws_ir`); the copies'
global side (layouts, index math, the (batch, head) of each tile) is the flash builder's
(:class:`~.wgmma_flash_ir.WgmmaFlashBuilder`: ``G``, ``origin``, ``elems``, the staging frag).
"""

from __future__ import annotations

from typing import Any, List, Optional

import sympy

from layoutalg import composition

from ..ir.attention import runtime_symbol as R
from ..ir.core import Access, Comment, If, Let, Loop, swizzle_expr, sym
from ..ir.nvidia import CpAsync
from ..ir.nvidia_cp_ring import CpAsyncArrive
from ..ir.nvidia_tma import MbarrierWait, Setmaxnreg
from .wgmma_attention_ws import WsFlashPlan

__all__ = ["CpProducer", "CP_FULL_COUNT"]

#: arrivals a ``full`` barrier (and ``bQ``) expects: one ``.noinc`` arrival per producer thread
CP_FULL_COUNT = 128


def _lt(a: Any, b: Any) -> Any:
    return sympy.StrictLessThan(a, b, evaluate=False)


class CpProducer:
    """The producer role's statements for the tile of ``flash`` (a
    :class:`~.wgmma_flash_ir.WgmmaFlashBuilder`: its global layouts and shared arrays) with the
    128-thread copies of ``plan`` (:func:`~.wgmma_attention_ws.plan_ws_flash`, same shared
    layouts: the plan proves them equal to the tile's).  ``whole_blocks``: a K / V block inside
    the sequence copied unpredicated, the ragged one predicated per row (two copies of the
    loads); False: every block predicated per row, one copy, as the warp-specialised template
    prints it (:meth:`kv_block` says why the overlap kernel takes that)."""

    def __init__(self, flash: Any, plan: WsFlashPlan, whole_blocks: bool = True) -> None:
        self.f, self.plan = flash, plan
        self.whole_blocks = whole_blocks
        self.stages, self.bn = plan.cfg.stages, plan.cfg.bn
        self.ops = {"Q": plan.q, "K": plan.k, "V": plan.v}

    def bases(self) -> List[Any]:
        """Each producer thread's swizzled shared bases (``pq<b>`` for Q, ``pkv<b>`` shared by
        K and V), one per base iteration of the plan's proved ``copy_consts``."""
        out: List[Any] = [Comment("swizzled shared bases of this producer thread's copy "
                                  "vectors")]
        for nm, op in (("pq", self.plan.q), ("pkv", self.plan.k)):
            pre = composition(op.smem.inner, op.copy.off)
            for b, it in enumerate(op.copy_bases):
                out.append(Let(f"{nm}{b}", swizzle_expr(op.smem.outer,
                                                        pre((sym("tid"), 0, it)))))
        return out

    def copy(self, t: str, row0: Any, stage: Any, predicated: bool = True) -> List[Any]:
        """The tile of ``t`` from row ``row0`` into ``stage``: one 16-byte ``cp.async`` per
        copy vector of the thread, predicated on its row unless ``predicated`` is False."""
        op = self.ops[t]
        fl = self.f
        G = fl.G[t]
        rows = R("seqlen_q") if t == "Q" else R("seqlen_kv")
        head = sym("h") if t == "Q" else sym("hk")
        pre = composition(op.smem.inner, op.copy.off)
        base = "pq" if t == "Q" else "pkv"
        tid = sym("tid")
        out: List[Any] = []
        for i, (_, _, ds, b) in enumerate(op.copy_consts):
            row = sympy.expand(row0 + op.copy.row((tid, i)))
            col = sympy.expand(op.copy.col((tid, i)))
            cs = tuple((row, col + j, head, sym("bat")) for j in range(8))
            regs = fl.stage.regs(range(8))
            load = Access("load", "global", t, sympy.expand(G(cs[0])), 8, regs,
                          _lt(row, rows) if predicated else None, tag=f"{t}.producer.load",
                          origin=G, coords=cs)
            off = sympy.expand(pre((tid, 0, i)))
            soff = sym(f"{base}{b}") + ds + (stage * fl.elems[t] if t != "Q" else 0)
            coords = tuple((off + j,) if t == "Q" else (off + j, stage) for j in range(8))
            store = Access("store", "lds", f"s{t}", soff, 8, regs, tag=f"{t}.producer.store",
                           origin=fl.origin(t), coords=coords)
            out.append(CpAsync(load, store, tag=f"{t}.producer"))
        return out

    def kv_block(self, t: str, row0: Any, stage: Any) -> List[Any]:
        """K or V block at ``row0``: unpredicated where the whole block lies inside the
        sequence (block-uniform test), else predicated per row (the template's two paths);
        without ``whole_blocks`` predicated per row always.  Why both: with sources printed
        as int indices the two paths double the loop-invariant row offsets ptxas hoists out
        of the producer's loop, which spilled 164 bytes in the d256 overlap kernel (NVRTC
        13.5, sm_90a; 16 with one path); printed as chained pointers
        (:mod:`kernels.printer.cuda_cp_chain`) the two paths compile without spills and are
        the faster form on the H100 (:attr:`.wgmma_ws_ir.WsOverlapBuilder.CP_SRC_CHAIN`)."""
        if not self.whole_blocks:
            return self.copy(t, row0, stage)
        whole = sympy.Le(row0 + self.bn, R("seqlen_kv"), evaluate=False)
        part = sympy.StrictGreaterThan(row0 + self.bn, R("seqlen_kv"), evaluate=False)
        return [If(whole, self.copy(t, row0, stage, predicated=False)),
                If(part, self.copy(t, row0, stage))]

    def statements(self, regs: int, unroll: Optional[int] = None) -> List[Any]:
        """The producer role: ``setmaxnreg.dec regs``, the bases, Q, then the ring loop
        (``unroll``: the loop's, :class:`~kernels.ir.core.Loop`; 1 keeps it a loop)."""
        S = self.stages
        j = sym("j")
        st = sympy.Mod(j, S)
        round_ = sympy.floor(j / S)
        ring: List[Any] = []
        for t in ("K", "V"):
            ring += [Comment(f"{t} of block j: stage j % {S} once the consumers released it "
                             "(parity of the previous round; a fresh barrier passes parity 1)"),
                     MbarrierWait(f"empty{t}", st, sympy.Mod(round_ + 1, 2)),
                     *self.kv_block(t, j * self.bn, st),
                     Comment(f"each thread arrives on full{t} when its copies landed"),
                     CpAsyncArrive(f"full{t}", st)]
        return [Setmaxnreg(False, regs), *self.bases(),
                *self.copy("Q", sym("m0"), 0), CpAsyncArrive("bQ", 0),
                Loop("j", 0, sym("n_blocks"), ring, unroll=unroll)]
