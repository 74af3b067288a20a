"""The persistent warp-specialised d128 prefill as kernel IR (the plan's piece
``persistent_units``, :mod:`.wgmma_ws_ir_plan`): the overlap schedule of
:class:`~.wgmma_ws_ir.WsOverlapBuilder` run over work units, as the template's
``persistent=True`` (``lg_wsflash_*_pt[_uhG]``, :mod:`.wgmma_attention_ws`) does.

* one CTA per SM (``ctas``, a kernel argument the host sets to the grid's size) walks the units
  ``u = block_q + iu * ctas`` below ``tiles`` (:func:`~.ws_units_ir.cta_walk_lets`); each unit
  decodes into (query block, head, batch) by IR lets (:func:`~.ws_units_ir.unit_decode_lets`),
  the template's order, and the plan's proof that every (query block, head, batch) is one
  unit exactly once reads these lets (:func:`build_ws_persist_ir`);
* the rings run on over the units: ``g0`` (a ``VarInit`` / ``VarSet`` counter in each role:
  the key blocks of the CTA's earlier units) is added to every block index, so the stage of
  block ``j`` is ``(g0 + j) % stages`` and its parity ``((g0 + j) / stages) & 1``;
* Q is a ring of one stage: ``bQ`` (full) and ``bQe`` (empty, count 8: lane 0 of each
  consumer warp): the consumers wait ``bQ`` at parity ``iu & 1`` and release ``bQe`` once the
  unit's last ``S = Q K^T`` retired (in block 0 when the unit has one key block); the producer
  waits ``bQe`` at parity ``(iu - 1) & 1`` before loading the next unit's Q;
* the last V stage of each unit is released after its P V (the next unit's blocks reuse it);
  O and the softmax state start afresh per unit; with ping-pong consumer 1 keeps its turn
  after its final GEMM of its last unit only.

Verified (IR and printed text) by the warp-specialised engine on instances whose grid is
smaller than the units (:func:`persist_instances`: several units per CTA with rings wrapping
across units, a CTA with no unit, GQA, BSHD strides), where the static pass's coverage proves
every output element stored exactly once over the CTAs' walks.

NVRTC 13 sm_90a: 168 registers, no spills (the template: the same).  On the H100
(:class:`~.wgmma_ws_ir_persist_launch.IrWsPersistAttention`,
``tests/test_nvidia_ws_persist_gpu.py``) bitwise the template of the same configuration at
B16 H32 S512 causal, H32/8, B2 H4/2 S77, B3 H5 S1000; with the producer as the template's
(below) 0.99-1.04x its speed (docs/PERFORMANCE.md, H100 2026-11-25 03:20Z; 0.957-0.998
before), and dispatched for the short causal problems
(:data:`~.prefill_select.IR_WS_PERSIST_AT_PARITY`).

The unit's start and the blocks outside the key loop:

* the producer prefetches the three tensor maps once per CTA before its walk (``TmaPrefetch``,
  the template's ``prefetch.tensormap``);
* the producer's role branch is the kernel's last statement (:func:`producer_last`) and its
  key-block loop is kept a loop (``#pragma unroll 1``), the template's form: its walk on the
  uniform datapath, one copy of the loop (NVRTC 13 sm_90a: 269 producer instructions, 127
  uniform, against 634 with 4 unrolled copies mostly in vector registers; 2888 in all against
  3320);
* block 0 does not rescale O (the unit's zero fill: the engine's ``online_softmax`` takes a
  zero-filled O at any maximum version, :func:`kernels.verify.attention_dataflow
  .zero_fill_version`); with the prefetch 1.5-2 % faster at S512 / S1024 than without both;
* block 0 is masked only where ``n_full < 1`` (:meth:`WsPersistBuilder.first_mask`; measured:
  no change in speed);
* blocks 1.. run an unmasked loop below ``n_full`` and a masked one from there; one loop with
  the mask under ``j >= n_full`` (``one_loop``, :meth:`WsPersistBuilder.key_loops`: 2816 SASS
  instructions against 3320, verified) measured 1-3 % slower on the H100 and stays off.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List

import sympy

from ..ir.attention import FVar, LetMinMax, MaskScores, ScalarParam, runtime_symbol as R
from ..ir.core import Comment, If, Let, Loop, ZeroFrag, sym
from ..ir.nvidia_tma import (LeaderOnly, MbarrierArrive, MbarrierExpectTx, MbarrierInit,
                             MbarrierWait, Setmaxnreg, TmaPrefetch, VarInit,
                             VarSet)
from ..ir.nvidia_wgmma import WgmmaWait
from .attention import AttentionConfigError
from .flash_ir import flash_instance, key_range_lets
from .wgmma_attention_ws import WsFlashConfig, plan_ws_flash
from .wgmma_ws_ir import WsOverlapBuilder, producer_last, ws_ir_name
from .ws_tma_loads import TMA_PRODUCER_REGS, check_unit_decode
from .ws_units_ir import cta_walk_lets, ir_unit_order, unit_decode_lets

__all__ = ["WsPersistBuilder", "build_ws_persist_ir", "persist_instances", "producer_last",
           "ws_persist_supported"]

G0, IU = sym("g0"), sym("iu")


def ws_persist_supported(cfg: WsFlashConfig) -> Any:
    """None if :func:`build_ws_persist_ir` builds ``cfg`` (the overlap builder's
    configurations with ``persistent=True``), else why not."""
    from .wgmma_ws_ir import ws_ir_supported
    if not cfg.persistent:
        return "persistent=False: the non-persistent kernel is wgmma_ws_ir.build_ws_ir's"
    return ws_ir_supported(dataclasses.replace(cfg, persistent=False, unit_heads=0))


def persist_instances(k: Any) -> List[Any]:
    """Launches with fewer CTAs than units (``ctas`` the grid): GQA over one query block (8
    units on 3 CTAs); three query blocks of three heads on 4 CTAs (causal: units of 1..3 key
    blocks, the rings wrapping across units); one unit on 2 CTAs (CTA 1 has none); strided
    BSHD with a partial tile on 2 CTAs."""
    c = k.meta["cfg"]
    bm = c.bm
    out = []
    for name, B, H, HK, sq, skv, ctas, bshd in (
            ("units-gqa2", 2, 4, 2, 77, 77, 3, False),
            ("units-wrap", 1, 3, 1, 2 * bm + 9, 2 * bm + 9, 4, False),
            ("units-idle-cta", 1, 1, 1, 1, 1, 2, False),
            ("units-bshd", 1, 2, 1, bm + 9, 2 * c.bn + 5, 2, True)):
        i = flash_instance(c, name, B, H, HK, sq, skv, bshd=bshd)
        i.values["ctas"] = ctas
        i.grid = (ctas, 1, 1)
        out.append(i)
    return out


class WsPersistBuilder(WsOverlapBuilder):
    """The overlap schedule over work units (module docstring)."""

    def __init__(self, cfg: WsFlashConfig, one_loop: bool = False) -> None:
        super().__init__(cfg)
        self.one_loop = one_loop
        self.cta, self.ctas = sym("block_q"), R("ctas")

    # ---- the rings run on over the units: block j of the unit is block g0 + j ------------
    def stage_of(self, j: Any) -> Any:
        return sympy.Mod(G0 + j, self.S)

    def parity_of(self, j: Any) -> Any:
        return sympy.Mod(sympy.floor((G0 + j) / self.S), 2)

    def wait_full(self, t: str, j: Any) -> Any:
        return MbarrierWait(f"full{t}", self.stage_of(j), self.parity_of(j))

    def turn_end(self, last: Any = sympy.false) -> List[Any]:
        """Consumer 1 keeps its turn after its last GEMM of its last unit only."""
        if sympy.sympify(last) is sympy.false:
            return super().turn_end(last)
        return super().turn_end(sympy.And(last, sympy.Eq(IU, sym("nloc") - 1)))

    def barriers(self) -> List[Any]:
        return super().barriers() + [MbarrierInit("bQe", 1, 8)]

    # ---- the unit ---------------------------------------------------------------------------
    def block_lets(self) -> List[Any]:
        """The CTA-wide lets (``wg``, ``t``, ``col0``) and the walk; the rest are the unit's."""
        keep = [s for s in super().block_lets()
                if isinstance(s, Let) and s.name in ("wg", "t", "col0")]
        return keep + cta_walk_lets(self.c.bm, self.cta, self.ctas)

    def decode_lets(self) -> List[Any]:
        """Unit ``u`` of the walk's ``iu``: its (query block, head, batch) only."""
        # clamped to the last unit: the same u for every iteration of the walk (u < tiles),
        # and every let in range for the iterations past it that the printed-text reader
        # samples (C's / and % there are the IR's floor only for non-negative operands)
        return [LetMinMax("u", "min", self.cta + IU * self.ctas, sym("tiles") - 1),
                *unit_decode_lets(self.c.bm, self.c.causal, self.ws.unit_heads, sym("u"))]

    def unit_lets(self) -> List[Any]:
        """:meth:`decode_lets`, the thread's first row and the unit's key range."""
        row0 = [s for s in super().block_lets() if isinstance(s, Let) and s.name == "row0"]
        return [*self.decode_lets(), *row0,
                *key_range_lets(self.c.bm, self.c.bn, self.c.causal)]

    def q_release(self, when: Any) -> Any:
        """The unit's last ``S = Q K^T`` retired (``when``): Q's one stage is free."""
        return If(when, [MbarrierArrive("bQe", 0, per_warp=True)])

    def producer(self) -> List[Any]:
        j = sym("j")
        ring: List[Any] = []
        for t in ("K", "V"):
            ring += [Comment(f"{t} of block g0 + j: its stage once the consumers released it "
                             "(parity of the previous round)"),
                     MbarrierWait(f"empty{t}", self.stage_of(j),
                                  sympy.Mod(self.parity_of(j) + 1, 2)),
                     MbarrierExpectTx(f"full{t}", self.stage_of(j), self.loads.k.stage_bytes),
                     *self.boxes(t, j * self.c.bn, self.stage_of(j), f"full{t}",
                                 self.stage_of(j))]
        unit: List[Any] = [
            *self.unit_lets(),
            Comment("Q's one stage: the previous unit's released"),
            If(sympy.StrictGreaterThan(IU, 0, evaluate=False),
               [MbarrierWait("bQe", 0, sympy.Mod(IU - 1, 2))]),
            MbarrierExpectTx("bQ", 0, self.loads.q.stage_bytes),
            *self.boxes("Q", sym("m0"), 0, "bQ", 0),
            # kept a loop (the template's): unrolled 4x by NVVM, the stage / parity arithmetic
            # of each copy landed in vector registers (634 SASS instructions against 264)
            Loop("j", 0, sym("n_blocks"), ring, unroll=1),
            VarSet("g0", G0 + sym("n_blocks"))]
        # the three maps' descriptors fetched once per CTA ahead of its first boxes (the
        # template's prefetch.tensormap): otherwise the CTA's first Q, K and V loads each wait
        # on a descriptor fetch from global memory
        return [Setmaxnreg(False, TMA_PRODUCER_REGS),
                LeaderOnly([*(TmaPrefetch(self.maps[t]) for t in ("Q", "K", "V")),
                            VarInit("g0", 0), Loop("iu", 0, sym("nloc"), unit)])]

    def first_block(self) -> List[Any]:
        zero = sympy.Integer(0)
        return [Comment("block 0: S and its softmax"),
                Let("n0", 0),
                self.wait_full("K", zero),
                *self.issue(scores_stage=self.stage_of(zero)),
                WgmmaWait(0, (self.sc.name,)),
                Comment("S retired: K's stage is free (and Q's when the unit has one block)"),
                self.release("K", zero),
                self.q_release(sympy.Eq(sym("n_blocks"), 1)),
                # no rescale of O in block 0: O is the unit's zero fill there (the engine
                # accepts a zero-filled O under any maximum: the rescale is the identity);
                # the template skips it too, and it cost 64 multiplies per unit
                *self.first_mask(), *self.softmax(rescale=False)]

    def first_mask(self) -> List[Any]:
        """Block 0's mask only where some row of the unit does not see all of it
        (``n_full < 1``: the template's run-time ``need_mask``).  Most units of a short
        causal problem sit below the diagonal; masking their block 0 anyway cost the
        compares and selects of a diagonal block per unit."""
        return [If(sympy.StrictLessThan(sym("n_full"), 1, evaluate=False), self.mask(True))]

    def overlap_block(self, masked: bool) -> List[Any]:
        out = super().overlap_block(masked)
        at = next(i for i, s in enumerate(out)
                  if isinstance(s, MbarrierArrive) and s.bar == "emptyK")
        last_s = sympy.Eq(sym("j"), sym("n_blocks") - 1)
        return out[:at + 1] + [self.q_release(last_s)] + out[at + 1:]

    def last_block(self) -> List[Any]:
        return super().last_block() + [
            Comment("the unit's last V stage: released (the next unit's blocks reuse it)"),
            self.release("V", sym("j_last"))]

    def consumer(self) -> List[Any]:
        start = [s for s in self.consumer_start()
                 if not (isinstance(s, MbarrierWait) and s.bar == "bQ")]
        unit: List[Any] = [*self.unit_lets(), MbarrierWait("bQ", 0, sympy.Mod(IU, 2))]
        for hh in range(2):
            unit += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
            if self.dw:
                unit.append(FVar(f"alpha{hh}", "0"))
        unit += [ZeroFrag(self.o), *self.first_block(), *self.key_loops(),
                 *self.last_block(), *self.epilogue_ws(),
                 VarSet("g0", G0 + sym("n_blocks"))]
        # the ping-pong's opening arrive only where the CTA has a unit: a CTA without one
        # would leave named barrier 1 part-way (the host launches no such CTA; the proof
        # runs one)
        opening = self.open_turns()
        return start + [VarInit("g0", 0),
                        *([If(sympy.StrictGreaterThan(sym("nloc"), 0, evaluate=False),
                              opening)] if opening else []),
                        Loop("iu", 0, sym("nloc"), unit)]

    def key_loops(self) -> List[Any]:
        """Blocks ``1 .. n_blocks - 1``: with ``one_loop`` one loop, the mask under ``j >=
        n_full`` (the template's run-time ``need_mask``); else the unmasked loop below
        ``n_full`` and the masked one from there.  Why one loop: units of a short causal
        problem run a few blocks each and walk every copy every unit, and the second copy is
        about 550 SASS instructions (9 KB) each unit fetches again.  Measured on the H100
        1-3 % slower than the two copies at S512 / S1024 causal (docs/PERFORMANCE.md), so off
        by default (``build_ws_persist_ir(cfg, one_loop=True)``)."""
        if self.one_loop:
            body = [If(sympy.GreaterThan(sym("j"), sym("n_full"), evaluate=False), [s])
                    if isinstance(s, MaskScores) else s for s in self.overlap_block(True)]
            return [Comment("blocks 1..: masked where some row does not see all of the block "
                            "(j >= n_full: the ragged last block" +
                            (", the diagonal" if self.c.causal else "") + ")"),
                    Loop("j", 1, sym("n_blocks"), body)]
        return super().key_loops()

    def g0_range(self, values: Any, grid: Any) -> Any:
        """``g0``'s range at a launch: 0 up to the key blocks of the most units a CTA walks,
        each of the most blocks a unit has (the engine checks every value against it; the
        printed-text reader reads the text over it)."""
        bm, bn = self.c.bm, self.c.bn
        tiles = -(-values["seqlen_q"] // bm) * values["heads"] * values["batch"]
        per = -(-tiles // max(1, values["ctas"]))
        return {"g0": (0, per * -(-values["seqlen_kv"] // bn))}

    def build_ws(self) -> Any:
        from ..verify.spec import Domain
        k = super().build_ws()
        k.spec = dataclasses.replace(k.spec, domain=Domain.on_instances(persist_instances))
        # batch and ctas: read by the walk's lets (the printed text binds scalars; the
        # non-persistent kernel takes batch as an unread int parameter)
        k.params = [p for p in k.params if getattr(p, "name", None) != "batch"]
        k.scalars = list(k.scalars) + [ScalarParam("batch"), ScalarParam("ctas")]
        k.header = [h.replace("kernels/nvidia/wgmma_ws_ir.py",
                              "kernels/nvidia/wgmma_ws_ir_persist.py")
                    .replace("overlapped schedule", "overlapped schedule, persistent over "
                             "work units" + (f" in chunks of {self.ws.unit_heads} (batch, head)"
                                             if self.ws.unit_heads else ""), 1)
                    for h in k.header]
        k.meta = dict(k.meta, kind="wgmma_ws_ir_persist", carried_ranges=self.g0_range)
        k.body = producer_last(k.body)
        return k


def build_ws_persist_ir(cfg: WsFlashConfig, *, one_loop: bool = False) -> Any:
    """The persistent IR of ``cfg`` (module docstring) with its spec; the template's plan
    checks run first (:func:`~.wgmma_attention_ws.plan_ws_flash`: its ring, the persistent
    protocol model, the template's decode) and then the proof that the IR's own decode lets
    compute each (query block, head, batch) exactly once (:func:`~.ws_tma_loads
    .check_unit_decode` on :func:`~.ws_units_ir.ir_unit_order`).  ``one_loop``: blocks 1.. as
    one loop with the mask guarded at run time (:meth:`WsPersistBuilder.key_loops`).
    :class:`~.attention.AttentionConfigError` where it is not built or a proof fails."""
    why = ws_persist_supported(cfg)
    if why is not None:
        raise AttentionConfigError(f"{ws_ir_name(cfg)}: {why}")
    plan_ws_flash(cfg)
    try:
        b = WsPersistBuilder(cfg, one_loop)
        k = b.build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised IR {ws_ir_name(cfg)}: {e}") from None
    decode = [s for s in b.decode_lets() if getattr(s, "name", None) != "u"]
    k.meta["unit_decode"] = check_unit_decode(cfg, order=ir_unit_order(decode, b.c.bm))
    return k
