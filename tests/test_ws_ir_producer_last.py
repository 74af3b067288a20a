"""The overlap builder's producer printed as the template's (kernels/nvidia/wgmma_ws_ir.py,
``WsOverlapBuilder.PRODUCER_AS_TEMPLATE``, the persistent kernel's fix): for the TMA and the
cp.async producer (shipped on for cp.async only) its role branch is the kernel's last
statement (``producer_last``) and its block loop is kept a loop (``#pragma unroll 1``); with
the switch off the builder's old layout;
a producer's wait dropped at its new place still refused by the verifier."""

from __future__ import annotations

import pytest

from kernels.ir.core import Loop, walk
from kernels.ir.nvidia_tma import MbarrierWait, RoleBranch
from kernels.nvidia.prefill_select import WS_PREFILL_FALLBACK, WS_PREFILL_TILES
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia import wgmma_ws_ir as W
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from _planted import producer_without_waits

CFGS = {
    "tma 128x128 s3": WsFlashConfig(head_dim=128, bn=128, stages=3, pingpong=True, loader="tma"),
    "tma 128x192 s2": WsFlashConfig(head_dim=128, bn=192, stages=2, pingpong=True, loader="tma"),
    "cp d256": WsFlashConfig(head_dim=256, causal=True, loader="cp.async",
                             **WS_PREFILL_TILES[256]),
    "cp d128 fallback": WsFlashConfig(head_dim=128, loader="cp.async",
                                      **WS_PREFILL_FALLBACK[128]),
}


def _roles(k):
    return [s for s in k.body if isinstance(s, RoleBranch)]


def _block_loop(role):
    return next(s for s in walk(role.body) if isinstance(s, Loop) and s.var == "j")


def test_the_shipped_switch_is_the_cp_async_producer():
    """Measured (docs/PERFORMANCE.md, H100 03:55Z): the cp.async kernels not slower, the TMA
    set under its 0.98 bar at two shapes in that run: TMA keeps the builder's old layout."""
    assert W.WsOverlapBuilder.PRODUCER_AS_TEMPLATE == frozenset({"cp.async"})
    assert _roles(W.build_ws_ir(CFGS["tma 128x128 s3"]))[0].role == "producer"
    assert _roles(W.build_ws_ir(CFGS["cp d128 fallback"]))[-1].role == "producer"


@pytest.fixture
def both(monkeypatch):
    monkeypatch.setattr(W.WsOverlapBuilder, "PRODUCER_AS_TEMPLATE",
                        frozenset({"tma", "cp.async"}))


@pytest.mark.parametrize("name", sorted(CFGS))
def test_the_producer_is_last_and_its_block_loop_rolled(name, both):
    k = W.build_ws_ir(CFGS[name])
    assert [r.role for r in _roles(k)] == ["consumer", "producer"]
    assert k.body[-1] is _roles(k)[-1]
    assert _block_loop(_roles(k)[-1]).unroll == 1
    assert all(s.unroll is None for s in walk(_roles(k)[0].body) if isinstance(s, Loop))
    src = emit_cuda_attention(k)
    assert src.index("lg_setmaxnreg_inc<") < src.index("lg_setmaxnreg_dec<")
    lines = [ln.strip() for ln in src.split("\n")]
    at = [i for i, ln in enumerate(lines) if ln == "#pragma unroll 1"]
    assert len(at) == 1 and lines[at[0] + 1] == "for (int j = 0; j < n_blocks; ++j) {"


@pytest.mark.parametrize("name", ["tma 128x128 s3", "cp d256"])
def test_the_switch_off_keeps_the_builders_old_layout(name, monkeypatch):
    monkeypatch.setattr(W.WsOverlapBuilder, "PRODUCER_AS_TEMPLATE", frozenset())
    k = W.build_ws_ir(CFGS[name])
    assert [r.role for r in _roles(k)] == ["producer", "consumer"]
    assert _block_loop(_roles(k)[0]).unroll is None
    assert "#pragma unroll 1" not in emit_cuda_attention(k)


def test_the_switch_is_per_loader(monkeypatch):
    monkeypatch.setattr(W.WsOverlapBuilder, "PRODUCER_AS_TEMPLATE", frozenset({"tma"}))
    assert _roles(W.build_ws_ir(CFGS["tma 128x128 s3"]))[-1].role == "producer"
    assert _roles(W.build_ws_ir(CFGS["cp d256"]))[0].role == "producer"


def test_a_producer_wait_dropped_is_still_refused_with_the_producer_last(both):
    """The TMA producer's wait for a released V stage dropped at its new place: a later
    block's V box overwrites a stage a P V still reads (the verifier reads the moved branch)."""
    k = W.build_ws_ir(CFGS["tma 128x128 s3"])

    bad = producer_without_waits(k, "emptyV", _roles)
    assert sum(isinstance(s, MbarrierWait) and s.bar == "emptyV" for s in walk(bad.body)) == 0
    r = verify_ws_attention(bad, instances=[i for i in default_instances(k)
                                            if i.name == "ring-wrap"])
    assert not r.checks["lds_races"].holds, r.checks["lds_races"]


def test_producer_last_is_one_function_for_both_builders():
    from kernels.nvidia import wgmma_ws_ir_persist as P
    assert P.producer_last is W.producer_last
