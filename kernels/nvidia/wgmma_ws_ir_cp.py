"""The warp-specialised head_dim 256 prefill as kernel IR with the ``cp.async`` producer: the
first d256 piece of :mod:`.wgmma_ws_ir_plan` (the template the H100 runs at d256 is
:mod:`.wgmma_attention_ws` with ``loader="cp.async"``, bn 64, two stages, ping-pong and the
deferred P V wait: ``prefill_select.WS_PREFILL_TILES[256]``).  This kernel is its serial-
schedule form: not the dispatched kernel's schedule (no overlap, no deferred wait), not
dispatched.

* one block of 384 threads: warpgroup 0 the producer (:class:`~.ws_cp_producer.CpProducer`:
  ``setmaxnreg.dec`` 24, its 128 threads copying Q, then K and V of block ``j`` into stage ``j
  % 2``, each thread arriving on ``full`` with ``cp.async.mbarrier.arrive.noinc``: ``bQ`` /
  ``fullK`` / ``fullV`` count 128), warpgroups 1 and 2 the consumers (``setmaxnreg.inc`` 240;
  rows ``m0 + 64 (wg - 1)``, Q's descriptor start stepping by ``wg - 1``);
* consumers, per key block: wait ``fullK`` (parity ``(j / 2) & 1``), ``fence.proxy.async``
  (the copies wrote through the generic proxy, wgmma reads through the async one), ``S = Q
  K_j^T``, wait, release K (``emptyK`` counts 8: lane 0 of each consumer warp), mask /
  softmax / round P, wait ``fullV``, fence, ``O += P V_j``, wait, release V; the epilogue of
  :mod:`.wgmma_flash_ir` (O's 128 f32 registers a thread: head_dim 256);
* ``pingpong``: the consumers take turns to issue their GEMMs (:mod:`.ws_pingpong`).

The consumer statements are those of :mod:`.wgmma_ws_ir_serial`'s consumers (the same
products, softmax and ring waits, plus the proxy fences); written here rather than taken from
that module's private builder while it is being refactored into the shared ring parts.
:func:`build_ws_cp_ir` returns the kernel with its spec (``warpgroup_roles`` producer /
consumer), which :func:`kernels.verify.verifier.verify` runs on the warp-specialised attention
engine (:mod:`kernels.verify.attention_ring`, the producer's copies on the per-role model's
``cp.async`` rules, :mod:`kernels.verify.gate_cp_ring`) and, with its printed text, on
:mod:`kernels.verify.printed_ws`.  The launcher is
:class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List

import sympy

from ..ir.attention import FVar
from ..ir.core import Comment, Let, Loop, Shared, ZeroFrag, sym
from ..ir.nvidia import CpAsyncWait
from ..ir.nvidia_tma import (MbarrierArrive, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             RoleBranch, Setmaxnreg)
from ..ir.nvidia_wgmma import FenceProxyAsync, GmmaOperand, WgmmaCommit, WgmmaFence, WgmmaWait
from .attention import AttentionConfigError
from .wgmma_attention import WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashConfig, plan_ws_flash
from .wgmma_flash_ir import WgmmaFlashBuilder
from .ws_cp_producer import CP_FULL_COUNT, CpProducer
from .ws_pingpong import pingpong_lets, pingpong_open, pingpong_turn

__all__ = ["build_ws_cp_ir", "WS_CP_STAGES", "WS_CP_BN"]

WS_CP_STAGES = 2
WS_CP_BN = 64
#: consumer warps arriving on an ``empty`` barrier (lane 0 of each, after its wgmma retired)
_EMPTY_COUNT = 8


class _CpBuilder(WgmmaFlashBuilder):
    def __init__(self, causal: bool, dtype: str, pingpong: bool, head_dim: int) -> None:
        super().__init__(WgmmaFlashConfig(dtype=dtype, head_dim=head_dim, warpgroups=2,
                                          bn=WS_CP_BN, causal=causal, overlap=False),
                         ws_consumer=True)
        self.ws = WsFlashConfig(dtype=dtype, head_dim=head_dim, bn=WS_CP_BN,
                                stages=WS_CP_STAGES, causal=causal, pingpong=pingpong,
                                loader="cp.async")
        self.producer = CpProducer(self, plan_ws_flash(self.ws))
        self.regs = self.ws.regs

    # ---- the consumers' rows and Q start step by wg - 1 (warpgroup 0 is the producer) ------
    def scores(self, st: Any) -> List[Any]:
        out = super().scores(st)
        for s in out:
            s.a = GmmaOperand(s.a.buf, sympy.expand(s.a.start.subs(sym("wg"), sym("wg") - 1)),
                              s.a.desc, s.a.major, s.a.mn)
        return out

    def copy_bases(self) -> List[Any]:
        return []           # the consumers copy nothing (the producer's bases: CpProducer)

    def block_lets(self) -> List[Any]:
        return [Let("row0", s.expr.subs(sym("wg"), sym("wg") - 1))
                if isinstance(s, Let) and s.name == "row0" else s
                for s in super().block_lets()]

    # ---- the consumers -------------------------------------------------------------------
    def ws_block(self, masked: bool) -> List[Any]:
        j = sym("j")
        st = sympy.Mod(j, WS_CP_STAGES)
        par = sympy.Mod(sympy.floor(j / WS_CP_STAGES), 2)
        qk: List[Any] = self.issue_scores(st)
        pv: List[Any] = [WgmmaFence(), *self.pv(st), WgmmaCommit()]
        if self.ws.pingpong:    # consumer 1's last GEMM is the last block's P V
            qk = pingpong_turn(qk)
            pv = pingpong_turn(pv, sympy.Eq(j, sym("n_blocks") - 1))
        fence = Comment("the copies wrote through the generic proxy; wgmma reads the async one")
        return [
            Let("n0", j * self.c.bn),
            MbarrierWait("fullK", st, par), fence, FenceProxyAsync(),
            *qk,
            WgmmaWait(0, (self.sc.name,)),
            Comment("S retired: K's stage is free"),
            MbarrierArrive("emptyK", st, per_warp=True),
            *self.mask(masked), *self.softmax(), *self.round_p(),
            MbarrierWait("fullV", st, par), FenceProxyAsync(),
            *pv,
            WgmmaWait(0, (self.o.name, self.pa.name)),
            Comment("P V retired: V's stage is free"),
            MbarrierArrive("emptyV", st, per_warp=True)]

    def consumer(self) -> List[Any]:
        pp = self.ws.pingpong
        body: List[Any] = [Setmaxnreg(True, self.regs[1]), *(pingpong_lets() if pp else []),
                           MbarrierWait("bQ", 0, 0)]
        for hh in range(2):
            body += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
        body += [ZeroFrag(self.o), *(pingpong_open() if pp else []),
                 Loop("j", 0, sym("n_full"), self.ws_block(False)),
                 Loop("j", sym("n_full"), sym("n_blocks"), self.ws_block(True))]
        body += [s for s in self.epilogue() if not isinstance(s, CpAsyncWait)]
        return body

    def build_ws(self) -> Any:
        k = self.build()            # the flash kernel: its spec, params, scalars, frags
        S = WS_CP_STAGES
        bars = [MbarrierInit("bQ", 1, CP_FULL_COUNT)]
        for t in ("K", "V"):
            bars += [MbarrierInit(f"full{t}", S, CP_FULL_COUNT),
                     MbarrierInit(f"empty{t}", S, _EMPTY_COUNT)]
        k.body = [*self.block_lets(), *bars, MbarrierInitFence(),
                  RoleBranch("producer", 0, 1, self.producer.statements(self.regs[0])),
                  RoleBranch("consumer", 1, 2, self.consumer())]
        k.name = k.name.replace("lg_wgflash_ir_", "lg_wsflash_ir_cp_") + \
            ("_pp" if self.ws.pingpong else "")
        k.block = 384
        k.min_blocks = 1
        k.shared = [Shared("sQ", self.c.dtype, self.elems["Q"]),
                    Shared("sK", self.c.dtype, S * self.elems["K"]),
                    Shared("sV", self.c.dtype, S * self.elems["V"])]
        k.spec = dataclasses.replace(k.spec, warpgroup_roles=("producer", "consumer"))
        k.meta = dict(k.meta, kind="wgmma_ws_ir_cp", ws_cfg=self.ws)
        return k


def build_ws_cp_ir(causal: bool = False, dtype: str = "bf16", pingpong: bool = False,
                   head_dim: int = 256) -> Any:
    """The two-consumer, two-stage (bn 64), serial-schedule warp-specialised prefill with the
    ``cp.async`` producer as IR (the module docstring), with its spec; ``pingpong``: the
    consumers take turns to issue their GEMMs (name ends in ``_pp``).
    :class:`~.attention.AttentionConfigError` where the tile does not build or prove out."""
    if head_dim != 256:
        raise AttentionConfigError(f"head_dim {head_dim}: the cp.async warp-specialised IR is "
                                   "built at 256 (the configuration the H100 runs with the "
                                   "cp.async producer)")
    try:
        return _CpBuilder(causal, dtype, pingpong, head_dim).build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised cp.async IR: {e}") from None
