"""The warp-specialised prefill's cp.async producer as IR (kernels.ir.nvidia_cp_ring.CpAsyncArrive,
kernels.nvidia.ws_cp_producer) in the d256 serial kernel (kernels.nvidia.wgmma_ws_ir_cp),
verified by the WS attention engine with the per-role model's cp.async rules
(kernels.verify.gate_cp_ring) and by the printed-text checks (kernels.verify.printed_ws):
the kernel passes; each planted bug is refused by its rule."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import pytest

from kernels.ir.core import Comment, If, Loop, walk
from kernels.ir.nvidia import CpAsync
from kernels.ir.nvidia_cp_ring import CpAsyncArrive
from kernels.ir.nvidia_tma import MbarrierInit, RoleBranch
from kernels.ir.nvidia_wgmma import FenceProxyAsync
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.wgmma_attention import WgmmaFlashConfig
from kernels.nvidia.wgmma_flash_ir import WgmmaFlashBuilder
from kernels.nvidia.wgmma_ws_ir_cp import build_ws_cp_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.printed_ws import verify_printed_ws

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow

ONE_ROW, RAGGED = 1, 0          # default_instances: one row / one key; B2 H4/2 S77


@lru_cache(maxsize=None)
def _instances():
    return default_instances(build_ws_cp_ir(False))


def _failed(k, inst=ONE_ROW):
    r = verify_ws_attention(k, instances=[_instances()[inst]])
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def _drop(body, hit):
    out = []
    for s in body:
        if hit(s):
            continue
        if isinstance(s, (If, Loop)):
            s.body = _drop(s.body, hit)
        out.append(s)
    return out


@pytest.mark.parametrize("causal,pingpong,inst", [(False, False, ONE_ROW),
                                                  (True, False, ONE_ROW),
                                                  (False, True, ONE_ROW),
                                                  (False, False, RAGGED)])
def test_the_d256_cp_kernel_verifies(causal, pingpong, inst):
    k = build_ws_cp_ir(causal, pingpong=pingpong)
    assert k.block == 384 and k.name.startswith("lg_wsflash_ir_cp_bf16_d256_128x64")
    assert _failed(k, inst) == {}


def test_the_producer_is_128_copying_threads_with_noinc_arrivals():
    k = build_ws_cp_ir(False)
    prod = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "producer")
    arrives = [s for s in walk(prod.body) if isinstance(s, CpAsyncArrive)]
    assert [a.bar for a in arrives] == ["bQ", "fullK", "fullV"]
    counts = {s.bar: s.count for s in k.body if isinstance(s, MbarrierInit)}
    assert counts == {"bQ": 128, "fullK": 128, "fullV": 128, "emptyK": 8, "emptyV": 8}
    assert any(isinstance(s, CpAsync) for s in walk(prod.body))


def test_head_dim_256_consumers_only_for_the_ws_kernel():
    cfg = WgmmaFlashConfig(head_dim=256, warpgroups=2, bn=64)
    with pytest.raises(AttentionConfigError, match="head_dim 256"):
        WgmmaFlashBuilder(cfg)
    WgmmaFlashBuilder(cfg, ws_consumer=True)
    with pytest.raises(AttentionConfigError, match="head_dim 128"):
        build_ws_cp_ir(head_dim=128)


# ---- planted bugs: the engine ------------------------------------------------------------
def _count(bar, n):
    def mut(k):
        k.body = [MbarrierInit(s.bar, s.n, n) if isinstance(s, MbarrierInit) and s.bar == bar
                  else s for s in k.body]
    return mut


def _no_fence_after(bar):
    """Drop the fence.proxy.async right after the consumers' wait on ``bar``."""
    def mut(k):
        def go(body):
            out = []
            for s in body:
                prev = next((x for x in reversed(out) if not isinstance(x, Comment)), None)
                if isinstance(s, FenceProxyAsync) and getattr(prev, "bar", "") == bar:
                    continue
                if isinstance(s, (If, Loop)):
                    s.body = go(s.body)
                out.append(s)
            return out
        k.body = go(k.body)
    return mut


def _no_arrive(bar):
    def mut(k):
        k.body = _drop(k.body, lambda s: isinstance(s, CpAsyncArrive) and s.bar == bar)
    return mut


def _k_row_off_by_one(k):
    """One unpredicated K copy of each producer thread reads the next row (address and
    coordinates agree: the index math is consistent, the data is not the tile's)."""
    for s in walk(k.body):
        if isinstance(s, CpAsync) and s.load.buf == "K" and s.load.pred is None:
            ld = s.load
            cs = tuple((c[0] + 1,) + tuple(c[1:]) for c in ld.coords)
            s.load = dataclasses.replace(ld, offset=ld.origin(cs[0]), coords=cs)
            return
    raise AssertionError("no unpredicated K copy")


@pytest.mark.parametrize("mutate,inst,check,words", [
    (_count("fullK", 1), ONE_ROW, "mbarrier_protocol", "arrival(s) more than the count 1"),
    (_count("fullK", 256), ONE_ROW, "mbarrier_protocol", "deadlock"),
    (_count("bQ", 1), ONE_ROW, "mbarrier_protocol", "more than the count 1"),
    (_no_fence_after("fullK"), ONE_ROW, "lds_races", "no fence.proxy.async"),
    (_no_fence_after("fullV"), RAGGED, "lds_races", "no fence.proxy.async"),
    (_no_arrive("fullK"), ONE_ROW, "mbarrier_protocol", "deadlock"),
    (_k_row_off_by_one, RAGGED, "lane_mfma_operands", "key"),
], ids=["full-count-1", "full-count-256", "bQ-count-1", "fence-K-dropped", "fence-V-dropped",
        "noinc-arrive-missing", "copy-at-wrong-row"])
def test_planted_bugs_are_refused_by_the_engine(mutate, inst, check, words):
    k = build_ws_cp_ir(False)
    mutate(k)
    failed = _failed(k, inst)
    assert check in failed, failed
    assert words in failed[check]


def test_copies_no_arrival_covers_are_refused_at_the_end():
    """A K block copied into the stage nobody reads (one key block) after the producer's last
    arrive: nothing signals it when the producer ends."""
    from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, plan_ws_flash
    from kernels.nvidia.ws_cp_producer import CpProducer
    k = build_ws_cp_ir(False)
    flash = WgmmaFlashBuilder(WgmmaFlashConfig(head_dim=256, warpgroups=2, bn=64,
                                               overlap=False), ws_consumer=True)
    prod = CpProducer(flash, plan_ws_flash(WsFlashConfig(head_dim=256, bn=64, stages=2)))
    role = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "producer")
    role.body = role.body + prod.copy("K", 64, 1)
    failed = _failed(k)
    assert "no cp.async.mbarrier.arrive covers" in failed["mbarrier_protocol"]


# ---- planted bugs: the printed text ----------------------------------------------------------
@lru_cache(maxsize=None)
def _printed():
    k = build_ws_cp_ir(False)
    return k, emit_cuda_attention(k)


def test_the_printed_text_reads_back():
    k, src = _printed()
    assert "lg_cp_mbar_arrive((lg_bar_fullK_u32 + 8 * (((j) % 2))));" in src
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in src
    r = verify_printed_ws(k, src, instances=[_instances()[ONE_ROW]])
    assert all(c.holds for c in r.values()), {n: c.counterexample for n, c in r.items()}


@pytest.mark.parametrize("old,new,check", [
    ("+ 4*q_ss + 8*(((tid) % 32))), (m0", "+ 5*q_ss + 8*(((tid) % 32))), (m0",
     "printed_source"),
    ("lg_cp_mbar_arrive((lg_bar_fullK_u32 + 8 * (((j) % 2))));",
     "lg_cp_mbar_arrive((lg_bar_fullK_u32 + 8 * (((j + 1) % 2))));", "printed_source"),
    ("lg_cp_mbar_arrive((lg_bar_fullK_u32 + 8 * (((j) % 2))));", "", "printed_source"),
    ("lg_fence_proxy_async();", "", "printed_source"),
    ("lg_mbar_init((lg_bar_fullK_u32 + 8 * (i)), 128)",
     "lg_mbar_init((lg_bar_fullK_u32 + 8 * (i)), 1)", "declarations"),
    ("cp.async.mbarrier.arrive.noinc.shared", "cp.async.mbarrier.arrive.shared", "declarations"),
], ids=["copy-row", "arrive-stage", "arrive-missing", "fence-missing", "init-count",
        "arrive-not-noinc"])
def test_misprinted_producer_lines_are_refused(old, new, check):
    k, src = _printed()
    assert old in src
    r = verify_printed_ws(k, src.replace(old, new, 1), instances=[_instances()[ONE_ROW]])
    assert not r[check].holds
