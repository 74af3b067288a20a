"""The smallest warp-specialised d128 prefill as kernel IR: a TMA producer warpgroup and two
consumer warpgroups on mbarrier rings, the consumers running the serial schedule of
:mod:`.wgmma_flash_ir` (``overlap=False``: per key block S, softmax, P V, each waited for) --
the first kernel of the engine of :mod:`.wgmma_ws_ir_plan` (piece 1).  Not the dispatched
kernel's IR form (no overlap, no deferred wait, no persistence: the plan's pieces 6-7 and
the dispatched builder), not dispatched.  With ``pingpong`` the
consumers take turns to issue their GEMMs as the template's ping-pong does (the statements of
:mod:`.ws_pingpong`; the default output is the kernel without them).

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

from typing import Any, List

import sympy

from ..ir.attention import FVar, runtime_symbol as R
from ..ir.core import Comment, Let, Loop, Shared, ZeroFrag, sym
from ..ir.nvidia import CpAsyncWait
from ..ir.nvidia_tma import (IntParam, LeaderOnly, MbarrierArrive, MbarrierExpectTx,
                             MbarrierInit, MbarrierInitFence, MbarrierWait, RoleBranch,
                             Setmaxnreg, TensorMap, TmaLoad)
from ..ir.nvidia_wgmma import GmmaOperand, WgmmaCommit, WgmmaFence, WgmmaWait
from .attention import AttentionConfigError
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig
from .wgmma_flash_ir import WgmmaFlashBuilder
from .ws_pingpong import pingpong_lets, pingpong_open, pingpong_turn
from .ws_tma_loads import TMA_CONSUMER_REGS, TMA_PRODUCER_REGS, plan_tma_loads

__all__ = ["build_ws_serial_ir", "WS_STAGES"]

WS_STAGES = 2


class _WsBuilder(WgmmaFlashBuilder):
    def __init__(self, causal: bool, dtype: str = "bf16", pingpong: bool = False) -> None:
        super().__init__(WgmmaFlashConfig(dtype=dtype, head_dim=128, warpgroups=2,
                                          causal=causal, overlap=False))
        self.ws = WsFlashConfig(dtype=dtype, head_dim=128, bn=128, stages=WS_STAGES,
                                causal=causal, pingpong=pingpong, loader="tma")
        self.loads = plan_tma_loads(self.ws, self.p)
        d, bm, bn = 128, self.c.bm, self.c.bn
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

    def block_lets(self) -> List[Any]:
        out = []
        for s in super().block_lets():
            if isinstance(s, Let) and s.name == "row0":
                s = Let("row0", s.expr.subs(sym("wg"), sym("wg") - 1))
            if isinstance(s, Let) and s.name.startswith(("qs", "kvs")):
                continue            # the cp.async bases: no cp.async here
            if isinstance(s, Comment) and "copy vectors" in s.text:
                continue
            out.append(s)
        return out

    # ---- the producer -------------------------------------------------------------------
    def boxes(self, t: str, row: Any, stage: Any, bar: str, index: Any) -> List[Any]:
        ld = {"Q": self.loads.q, "K": self.loads.k, "V": self.loads.v}[t]
        head = sym("h") if t == "Q" else sym("hk")
        base = stage * self.elems[t] if t != "Q" else 0
        return [TmaLoad(self.maps[t], j * ld.box_inner, row, f"s{t}",
                        sympy.expand(base + j * ld.stride // 2), bar, index, tag=f"{t}.tma{j}",
                        coords=(head, sym("bat")))
                for j in range(ld.boxes)]

    def producer(self) -> List[Any]:
        j = sym("j")
        st = sympy.Mod(j, WS_STAGES)
        round_ = sympy.floor(j / WS_STAGES)
        body: List[Any] = [
            MbarrierExpectTx("bQ", 0, self.loads.q.stage_bytes),
            *self.boxes("Q", sym("m0"), 0, "bQ", 0)]
        ring: List[Any] = []
        for t in ("K", "V"):
            ring += [Comment(f"{t} of block j: stage j % {WS_STAGES} once the consumers "
                             "released it (parity of the previous round)"),
                     MbarrierWait(f"empty{t}", st, sympy.Mod(round_ + 1, 2)),
                     MbarrierExpectTx(f"full{t}", st, self.loads.k.stage_bytes),
                     *self.boxes(t, j * self.c.bn, st, f"full{t}", st)]
        body.append(Loop("j", 0, sym("n_blocks"), ring))
        return [Setmaxnreg(False, TMA_PRODUCER_REGS), LeaderOnly(body)]

    # ---- the consumers -------------------------------------------------------------------
    def ws_block(self, masked: bool) -> List[Any]:
        j = sym("j")
        st = sympy.Mod(j, WS_STAGES)
        par = sympy.Mod(sympy.floor(j / WS_STAGES), 2)
        qk: List[Any] = self.issue_scores(st)
        pv: List[Any] = [WgmmaFence(), *self.pv(st), WgmmaCommit()]
        if self.ws.pingpong:    # consumer 1's last GEMM is the last block's P V
            qk = pingpong_turn(qk)
            pv = pingpong_turn(pv, sympy.Eq(j, sym("n_blocks") - 1))
        return [
            Let("n0", j * self.c.bn),
            MbarrierWait("fullK", st, par),
            *qk,
            WgmmaWait(0, (self.sc.name,)),
            Comment("S retired: K's stage is free"),
            MbarrierArrive("emptyK", st, per_warp=True),
            *self.mask(masked), *self.softmax(), *self.round_p(),
            MbarrierWait("fullV", st, par),
            *pv,
            WgmmaWait(0, (self.o.name, self.pa.name)),
            Comment("P V retired: V's stage is free"),
            MbarrierArrive("emptyV", st, per_warp=True)]

    def consumer(self) -> List[Any]:
        pp = self.ws.pingpong
        body: List[Any] = [Setmaxnreg(True, TMA_CONSUMER_REGS), *(pingpong_lets() if pp else []),
                           MbarrierWait("bQ", 0, 0)]
        for hh in range(2):
            body += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
        body += [ZeroFrag(self.o), *(pingpong_open() if pp else []),
                 Loop("j", 0, sym("n_full"), self.ws_block(False)),
                 Loop("j", sym("n_full"), sym("n_blocks"), self.ws_block(True))]
        body += [s for s in self.epilogue() if not isinstance(s, CpAsyncWait)]
        return body

    def build_ws(self) -> Any:
        k = self.build()            # the serial cp.async kernel: its spec, params, frags
        bars = [MbarrierInit("bQ", 1, 1)]
        for t in ("K", "V"):
            bars += [MbarrierInit(f"full{t}", WS_STAGES, 1), MbarrierInit(f"empty{t}", WS_STAGES, 8)]
        k.body = [*self.block_lets(), *bars, MbarrierInitFence(),
                  RoleBranch("producer", 0, 1, self.producer()),
                  RoleBranch("consumer", 1, 2, self.consumer())]
        k.name = k.name.replace("lg_wgflash_ir_", "lg_wsflash_ir_serial_") + \
            ("_pp" if self.ws.pingpong else "")
        k.block = 384
        k.min_blocks = 1
        k.frags = [f for f in k.frags if f.name != self.stage.name]
        k.shared = [Shared("sQ", self.c.dtype, self.elems["Q"]),
                    Shared("sK", self.c.dtype, WS_STAGES * self.elems["K"]),
                    Shared("sV", self.c.dtype, WS_STAGES * self.elems["V"])]
        k.params = [self.maps["Q"], self.maps["K"], self.maps["V"]] + \
            [p for p in k.params if p.name == "O"] + [IntParam("kv_heads"), IntParam("batch")]
        k.spec = _with_roles(k.spec)
        k.meta = dict(k.meta, kind="wgmma_ws_ir_serial", ws_cfg=self.ws, loads=self.loads)
        return k


def _with_roles(spec: Any) -> Any:
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
    try:
        return _WsBuilder(causal, dtype, pingpong).build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised serial IR: {e}") from None
