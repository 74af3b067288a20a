"""The smallest warp-specialised d128 prefill as kernel IR: a TMA producer warpgroup and two
consumer warpgroups on mbarrier rings, the consumers running the serial schedule of
:mod:`.wgmma_flash_ir` (``overlap=False``: per key block S, softmax, P V, each waited for) --
the first kernel of the engine of :mod:`.wgmma_ws_ir_plan` (piece 1).  Not the dispatched
kernels' IR form (the overlap schedule, stages, bn 192 and the deferred wait are
:mod:`.wgmma_ws_ir`'s, built on this module's :class:`WsRingBuilder`: the maps, boxes,
producer, barriers, ring waits / releases and the GEMM-turn hooks the ping-pong fills), not dispatched.  With ``pingpong`` the
consumers take turns to issue their GEMMs as the template's ping-pong does (the statements of
:mod:`.ws_pingpong` in the GEMM-turn hooks; the default output is the kernel without them).

The ring parts take either producer (:class:`WsRingBuilder`: ``loader="tma"`` the boxes below;
``loader="cp.async"`` the 128 copying threads of :class:`~.ws_cp_producer.CpProducer`, ``full``
counting 128 ``.noinc`` arrivals, and the consumers' ``fence.proxy.async`` after their ring
waits, :meth:`WsRingBuilder.acquired`): :class:`WsSerialBuilder` on a ``cp.async``
configuration is the d256 serial kernel of :mod:`.wgmma_ws_ir_cp`, and the overlap builder of
:mod:`.wgmma_ws_ir` builds the dispatched d256 configuration on the same parts.

* one block of 384 threads: warpgroup 0 the producer (``setmaxnreg.dec`` 24; thread 0 issues
  the boxes), warpgroups 1 and 2 the consumers (``setmaxnreg.inc`` 240; rows ``m0 + 64 (wg -
  1)``, Q's descriptor start stepping by ``wg - 1``);
* the 4-D boxes of :func:`~.ws_tma_loads.plan_tma_loads` (proved against the tile's
  descriptors): Q once on ``bQ``; K and V of block ``j`` into stage ``j % 2`` of their rings
  (``fullK`` / ``fullV`` count 1 with the stage's transaction bytes, ``emptyK`` / ``emptyV``
  count 8: lane 0 of each consumer warp, after the wgmma reading the stage retired), the
  producer waiting on the stage's ``empty`` (parity of the previous round) before each refill;
* consumers: ``S = Q K_j^T`` after ``fullK[j % 2]`` (parity ``(j / 2) & 1``), wait, release K,
  mask / softmax / round P, ``O += P V_j`` after ``fullV``, wait, release V; the epilogue of
  :mod:`.wgmma_flash_ir`.

:func:`build_ws_serial_ir` returns the kernel with its spec (the mma.sync IR prefill's
instances, ``warpgroup_roles`` producer / consumer), which :func:`kernels.verify.verifier
.verify` routes to the warp-specialised attention engine (:mod:`kernels.verify.attention_ring`:
the ring's protocol and the consumers' softmax dataflow in one run, the static pass on the
consumer view); with ``source`` (the attention printer's text,
:func:`kernels.printer.cuda_attention.emit_cuda_attention`) its printed text is read back
against the IR by :mod:`kernels.verify.printed_ws`.  Its host side (the 4-D tensor maps, the
launch) is :class:`~.wgmma_ws_ir_launch.IrWsSerialAttention`: on the H100 bitwise the template
of its configuration, not dispatched.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import sympy

from ..ir.attention import FVar, runtime_symbol as R
from ..ir.core import Comment, Let, Loop, Shared, ZeroFrag, sym
from ..ir.nvidia import CpAsyncWait
from ..ir.nvidia_tma import (IntParam, LeaderOnly, MbarrierArrive, MbarrierExpectTx,
                             MbarrierInit, MbarrierInitFence, MbarrierWait, RoleBranch,
                             Setmaxnreg, TensorMap, TmaLoad)
from ..ir.nvidia_wgmma import FenceProxyAsync, GmmaOperand, WgmmaCommit, WgmmaFence, WgmmaWait
from .attention import AttentionConfigError
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig, plan_ws_flash
from .wgmma_flash_ir import WgmmaFlashBuilder, wgmma_flash_ir_name
from .ws_cp_producer import CP_FULL_COUNT, CpProducer
from .ws_pingpong import pingpong_lets, pingpong_open, turn_begin, turn_end
from .ws_tma_loads import plan_tma_loads

__all__ = ["build_ws_serial_ir", "WS_STAGES", "WsRingBuilder", "WsSerialBuilder", "with_roles"]

WS_STAGES = 2


class WsRingBuilder(WgmmaFlashBuilder):
    """The parts every warp-specialised prefill IR shares, for one ``ws`` (a
    :class:`~.wgmma_attention_ws.WsFlashConfig`: its loader, head_dim, ``bn``, ``stages`` and
    ``causal``): the producer (:meth:`producer`: with ``loader="tma"`` the tensor maps and
    4-D boxes of :meth:`boxes`; with ``loader="cp.async"`` the 128 copying threads of
    :class:`~.ws_cp_producer.CpProducer`, ``self.cp``), the barriers (:meth:`barriers`: a
    ``full`` phase is one expect-tx arrival or 128 ``.noinc`` ones), the consumers' Q start and
    rows stepping by ``wg - 1`` (:meth:`scores`, :meth:`block_lets`), the ring's waits, the
    proxy fence after them (:meth:`acquired`: cp.async only) and releases
    (:meth:`wait_full`, :meth:`release`), the GEMM-turn hooks (:meth:`turn_begin`,
    :meth:`turn_end`: empty; the ping-pong's named barriers go there) and the kernel around a
    consumer body (:meth:`frame`).  The schedules are the subclasses' (``consumer``): the
    serial one here, the template's overlap in :mod:`.wgmma_ws_ir`.  ``overlap`` names the
    schedule in the header the wgmma prefill's :meth:`build` writes."""

    #: the cp.async producer copies whole key blocks unpredicated (a second, predicated copy
    #: of the loads for the ragged block): :class:`~.ws_cp_producer.CpProducer`'s
    #: ``whole_blocks``; the overlap schedule's builder turns it off (spills, its docstring)
    CP_WHOLE_BLOCKS = True

    def __init__(self, ws: WsFlashConfig, overlap: bool = False) -> None:
        # ws_consumer: the two consumer warpgroups also take head_dim 256 (the cp.async tile)
        super().__init__(WgmmaFlashConfig(dtype=ws.dtype, head_dim=ws.head_dim, warpgroups=2,
                                          bn=ws.bn, causal=ws.causal, overlap=overlap),
                         ws_consumer=True)
        self.ws = ws
        self.S = ws.stages
        #: the cp.async producer (None: the TMA producer of :meth:`boxes`)
        self.cp = (CpProducer(self, plan_ws_flash(ws), whole_blocks=self.CP_WHOLE_BLOCKS)
                   if ws.loader == "cp.async" else None)
        self.maps: Dict[str, TensorMap] = {}
        self.loads = None
        if self.cp is None:
            self.tma_maps()

    @property
    def producer_name(self) -> str:
        """``"TMA"`` or ``"cp.async"``: the producer, as headers name it."""
        return "TMA" if self.cp is None else "cp.async"

    def tma_maps(self) -> None:
        """The TMA producer's 4-D boxes (proved against the tile's descriptors) and maps."""
        ws = self.ws
        self.loads = plan_tma_loads(ws, self.p)
        d, bm, bn, dtype = ws.head_dim, self.c.bm, self.c.bn, ws.dtype
        self.maps = {
            "Q": TensorMap("tmQ", "Q", ("d", "row", "head", "batch"), d, R("seqlen_q"), 64, bm,
                           dtype, planes=(R("heads"), R("batch"))),
            "K": TensorMap("tmK", "K", ("d", "key", "kv_head", "batch"), d, R("seqlen_kv"), 64,
                           bn, dtype, planes=(R("kv_heads"), R("batch"))),
            "V": TensorMap("tmV", "V", ("d", "key", "kv_head", "batch"), d, R("seqlen_kv"), 64,
                           bn, dtype, planes=(R("kv_heads"), R("batch")))}

    # ---- the consumers' rows and Q start step by wg - 1 (warpgroup 0 is the producer) ------
    def scores(self, st: Any) -> List[Any]:
        out = super().scores(st)
        for s in out:
            s.a = GmmaOperand(s.a.buf, sympy.expand(s.a.start.subs(sym("wg"), sym("wg") - 1)),
                              s.a.desc, s.a.major, s.a.mn)
        return out

    def copy_bases(self) -> List[Any]:
        return []           # the consumers copy nothing (the cp.async producer's bases: self.cp)

    def block_lets(self) -> List[Any]:
        return [Let("row0", s.expr.subs(sym("wg"), sym("wg") - 1))
                if isinstance(s, Let) and s.name == "row0" else s
                for s in super().block_lets()]

    # ---- the producer -------------------------------------------------------------------
    def boxes(self, t: str, row: Any, stage: Any, bar: str, index: Any) -> List[Any]:
        ld = {"Q": self.loads.q, "K": self.loads.k, "V": self.loads.v}[t]
        head = sym("h") if t == "Q" else sym("hk")
        base = stage * self.elems[t] if t != "Q" else 0
        return [TmaLoad(self.maps[t], j * ld.box_inner, row, f"s{t}",
                        sympy.expand(base + j * ld.stride // 2), bar, index, tag=f"{t}.tma{j}",
                        coords=(head, sym("bat")))
                for j in range(ld.boxes)]

    def role_regs(self) -> Tuple[int, int]:
        """(producer, consumer) registers per thread after ``setmaxnreg``: the template's
        (:attr:`~.wgmma_attention_ws.WsFlashConfig.regs`) unless a schedule says otherwise (the
        overlap builder's ``cp.async`` producer, :attr:`.wgmma_ws_ir.WsOverlapBuilder.CP_REGS`)."""
        return self.ws.regs

    def producer(self) -> List[Any]:
        """The producer role: the cp.async copies (:meth:`.ws_cp_producer.CpProducer
        .statements`) or one thread's TMA boxes: Q once, K and V of block ``j`` into stage ``j %
        stages`` once its ``empty`` phase passed."""
        if self.cp is not None:
            return self.cp.statements(self.role_regs()[0], unroll=self.producer_unroll())
        j = sym("j")
        st = sympy.Mod(j, self.S)
        round_ = sympy.floor(j / self.S)
        body: List[Any] = [
            MbarrierExpectTx("bQ", 0, self.loads.q.stage_bytes),
            *self.boxes("Q", sym("m0"), 0, "bQ", 0)]
        ring: List[Any] = []
        for t in ("K", "V"):
            ring += [Comment(f"{t} of block j: stage j % {self.S} once the consumers "
                             "released it (parity of the previous round)"),
                     MbarrierWait(f"empty{t}", st, sympy.Mod(round_ + 1, 2)),
                     MbarrierExpectTx(f"full{t}", st, self.loads.k.stage_bytes),
                     *self.boxes(t, j * self.c.bn, st, f"full{t}", st)]
        body.append(Loop("j", 0, sym("n_blocks"), ring, unroll=self.producer_unroll()))
        return [Setmaxnreg(False, self.role_regs()[0]), LeaderOnly(body)]

    def producer_unroll(self) -> Optional[int]:
        """The producer's block loop's ``unroll`` (:class:`~kernels.ir.core.Loop`): None, the
        compiler's choice, unless a schedule keeps it a loop (the overlap builder's
        :meth:`.wgmma_ws_ir.WsOverlapBuilder.producer_unroll`)."""
        return None

    # ---- the ring seen from the consumers ---------------------------------------------------
    def stage_of(self, j: Any) -> Any:
        """The ring stage of key block ``j``."""
        return sympy.Mod(j, self.S)

    def wait_full(self, t: str, j: Any) -> Any:
        """Wait for block ``j`` of ``t`` (K or V) in its stage: parity ``(j / stages) & 1``."""
        return MbarrierWait(f"full{t}", self.stage_of(j), sympy.Mod(sympy.floor(j / self.S), 2))

    def acquired(self, note: bool = True) -> List[Any]:
        """After the ring waits of a consumer, before its wgmma reads the stages they acquired:
        ``fence.proxy.async`` where the producer copies with ``cp.async`` (its writes go
        through the generic proxy, wgmma reads through the async one; the per-role model
        refuses a read without it, :mod:`kernels.verify.gate_cp_ring`), nothing after TMA
        boxes (written through the async proxy).  ``note``: with the comment saying so."""
        if self.cp is None:
            return []
        why = Comment("the copies wrote through the generic proxy; wgmma reads the async one")
        return [why, FenceProxyAsync()] if note else [FenceProxyAsync()]

    def release(self, t: str, j: Any) -> Any:
        """Lane 0 of each consumer warp frees block ``j``'s stage of ``t`` (after the wgmma
        reading it retired)."""
        return MbarrierArrive(f"empty{t}", self.stage_of(j), per_warp=True)

    def turn_begin(self) -> List[Any]:
        """Before a consumer issues its GEMMs: the ping-pong's wait for its turn (named
        barrier, :func:`.ws_pingpong.turn_begin`); nothing without ping-pong.  With
        :meth:`turn_end`, the seam the ping-pong fills: both schedules (serial here, overlap in
        :mod:`.wgmma_ws_ir`) call the two around every GEMM issue of the consumers."""
        return turn_begin() if self.ws.pingpong else []

    def turn_end(self, last: Any = sympy.false) -> List[Any]:
        """After a consumer issued its GEMMs: the ping-pong hands the turn over; ``last``, a
        condition, holds at the consumer's final issue (the template's consumer 1 does not
        hand over after it); nothing without ping-pong."""
        return turn_end(last) if self.ws.pingpong else []

    def consumer_start(self) -> List[Any]:
        """The consumer role's first statements: ``setmaxnreg`` up, the ping-pong's ``cw``
        (with ping-pong), the wait for Q."""
        return [Setmaxnreg(True, self.role_regs()[1]),
                *(pingpong_lets() if self.ws.pingpong else []), MbarrierWait("bQ", 0, 0)]

    def open_turns(self) -> List[Any]:
        """Before the consumers' first GEMM: consumer 1 opens consumer 0's first turn (with
        ping-pong; nothing without)."""
        return pingpong_open() if self.ws.pingpong else []

    def barriers(self) -> List[Any]:
        """Q full (one phase); K and V full and empty (count 8: lane 0 of each consumer warp)
        per stage.  A full phase (and Q's) counts 1 (the TMA producer's expect-tx arrival) or
        128 (each copying thread's ``cp.async.mbarrier.arrive.noinc``)."""
        full = 1 if self.cp is None else CP_FULL_COUNT
        bars = [MbarrierInit("bQ", 1, full)]
        for t in ("K", "V"):
            bars += [MbarrierInit(f"full{t}", self.S, full),
                     MbarrierInit(f"empty{t}", self.S, 8)]
        return bars

    def consumer(self) -> List[Any]:
        """The consumer role's body (the schedule): the subclasses'."""
        raise NotImplementedError

    def epilogue_ws(self) -> List[Any]:
        """The wgmma prefill's write-back without its ``cp.async`` wait (no copies here)."""
        return [s for s in self.epilogue() if not isinstance(s, CpAsyncWait)]

    def frame(self, name: str, kind: str) -> Any:
        """The kernel: the wgmma prefill's spec, parameters and fragments (its :meth:`build`)
        around the lets, the barriers and the producer / consumer roles; ``name`` and
        ``meta["kind"]`` as given."""
        k = self.build()            # the cp.async kernel: its spec, params, frags
        k.body = [*self.block_lets(), *self.barriers(), MbarrierInitFence(),
                  RoleBranch("producer", 0, 1, self.producer()),
                  RoleBranch("consumer", 1, 2, self.consumer())]
        k.name = name
        k.block = 384
        k.min_blocks = 1
        k.shared = [Shared("sQ", self.c.dtype, self.elems["Q"]),
                    Shared("sK", self.c.dtype, self.S * self.elems["K"]),
                    Shared("sV", self.c.dtype, self.S * self.elems["V"])]
        k.spec = with_roles(k.spec)
        if self.cp is not None:     # the copies' pointers, strides and staging registers
            k.meta = dict(k.meta, kind=kind, ws_cfg=self.ws)
            return k
        k.frags = [f for f in k.frags if f.name != self.stage.name]
        k.params = [self.maps["Q"], self.maps["K"], self.maps["V"]] + \
            [p for p in k.params if p.name == "O"] + [IntParam("kv_heads"), IntParam("batch")]
        k.meta = dict(k.meta, kind=kind, ws_cfg=self.ws, loads=self.loads)
        return k


class WsSerialBuilder(WsRingBuilder):
    """The serial schedule: per key block S, softmax, P V, each waited for (each issue
    between the GEMM-turn hooks)."""

    def ws_block(self, masked: bool) -> List[Any]:
        j = sym("j")
        st = self.stage_of(j)
        return [
            Let("n0", j * self.c.bn),
            self.wait_full("K", j), *self.acquired(),
            *self.turn_begin(), *self.issue_scores(st), *self.turn_end(),
            WgmmaWait(0, (self.sc.name,)),
            Comment("S retired: K's stage is free"),
            self.release("K", j),
            *self.mask(masked), *self.softmax(), *self.round_p(),
            self.wait_full("V", j), *self.acquired(note=False),
            *self.turn_begin(), WgmmaFence(), *self.pv(st), WgmmaCommit(),
            *self.turn_end(sympy.Eq(j, sym("n_blocks") - 1)),
            WgmmaWait(0, (self.o.name, self.pa.name)),
            Comment("P V retired: V's stage is free"),
            self.release("V", j)]

    def consumer(self) -> List[Any]:
        body: List[Any] = self.consumer_start()
        for hh in range(2):
            body += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
        body += [ZeroFrag(self.o), *self.open_turns(),
                 Loop("j", 0, sym("n_full"), self.ws_block(False)),
                 Loop("j", sym("n_full"), sym("n_blocks"), self.ws_block(True))]
        return body + self.epilogue_ws()

    def build_ws(self) -> Any:
        cp = self.cp is not None
        name = wgmma_flash_ir_name(self.c).replace(
            "lg_wgflash_ir_", "lg_wsflash_ir_cp_" if cp else "lg_wsflash_ir_serial_") \
            + ("_pp" if self.ws.pingpong else "")
        return self.frame(name, "wgmma_ws_ir_cp" if cp else "wgmma_ws_ir_serial")


def with_roles(spec: Any) -> Any:
    """``spec`` with the warp-specialised roles (warpgroup 0 the producer, the others
    consumers): what routes it to the engine (:mod:`kernels.verify.attention_ring`)."""
    import dataclasses
    return dataclasses.replace(spec, warpgroup_roles=("producer", "consumer"))


def build_ws_serial_ir(causal: bool = False, dtype: str = "bf16",
                       pingpong: bool = False) -> Any:
    """The two-consumer, two-stage, serial-schedule warp-specialised d128 prefill as IR (the
    module docstring), with its spec; ``pingpong``: the consumers take turns to issue their
    GEMMs (:mod:`.ws_pingpong`: ``bar.sync 1 + cw, 256`` before each S and P V issue,
    ``bar.arrive 2 - cw, 256`` after, consumer 1 opening with an arrive on barrier 1; the
    name ends in ``_pp``).  :class:`~.attention.AttentionConfigError` where the tile's boxes
    do not prove out."""
    ws = WsFlashConfig(dtype=dtype, head_dim=128, bn=128, stages=WS_STAGES, causal=causal,
                       pingpong=pingpong, loader="tma")
    try:
        return WsSerialBuilder(ws).build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised serial IR: {e}") from None
