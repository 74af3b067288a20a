"""The overlap builder (kernels/nvidia/wgmma_ws_ir.py) on the cp.async producer: the dispatched
d256 configuration (prefill_select.WS_PREFILL_TILES[256]: cp.async, bn 64, two stages,
ping-pong, the deferred P V wait) built by the same ring builder as the d128 TMA kernels
(WsRingBuilder.cp, its acquired(): the consumers' fence.proxy.async after the ring waits),
verified -- IR and printed text -- by the one verifier; the planted bugs of the producer seam
(the proxy fence dropped in the overlap schedule, the deferred V release on the cp.async ring)
refused by their rules; the configurations the builder does not take refused by name."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import pytest
import sympy

from kernels.ir.core import If, Loop, sym
from kernels.ir.nvidia_cp_ring import CpAsyncArrive
from kernels.ir.nvidia_tma import MbarrierArrive, MbarrierInit, RoleBranch, TmaLoad
from kernels.ir.nvidia_wgmma import FenceProxyAsync, WgmmaWait
from kernels.ir.core import walk
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_ws_ir import build_ws_ir, ws_ir_supported
from kernels.nvidia.wgmma_ws_ir_cp import build_ws_cp_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.printed_ws import verify_printed_ws

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow


def _dispatched(causal: bool):
    return choose_prefill("bf16", 256, causal, "wgmma", True, 4096, 4096).config


@lru_cache(maxsize=None)
def _instances(causal: bool):
    return {i.name: i for i in default_instances(build_ws_ir(_dispatched(causal)))}


def _failed(k, names, causal=False):
    r = verify_ws_attention(k, instances=[_instances(causal)[n] for n in names])
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_the_dispatched_d256_configuration_is_the_cp_async_overlap_one():
    for causal in (False, True):
        cfg = _dispatched(causal)
        assert (cfg.loader, cfg.head_dim, cfg.bn, cfg.stages) == ("cp.async", 256, 64, 2)
        assert cfg.pingpong and cfg.defer_pv_wait and not cfg.persistent
        assert ws_ir_supported(cfg) is None


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_dispatched_d256_ir_verifies(causal):
    """Every instance (the ring-wrap one wraps the two-stage ring several times)."""
    k = build_ws_ir(_dispatched(causal))
    assert k.name == "lg_wsflash_ir_" + _dispatched(causal).name[len("lg_wsflash_"):]
    assert k.block == 384 and "cp.async producer, 2-stage rings" in k.header[0]
    assert not any(isinstance(s, TmaLoad) for s in walk(k.body))
    inits = {s.bar: s.count for s in k.body if isinstance(s, MbarrierInit)}
    assert inits == {"bQ": 128, "fullK": 128, "emptyK": 8, "fullV": 128, "emptyV": 8}
    r = verify_ws_attention(k)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_the_printed_text_reads_back_and_fences_once_per_acquire():
    """One fence.proxy.async per consumer step that acquires stages: block 0, the two loops
    (after both ring waits and the deferred P V wait, as the template), the last P V."""
    k = build_ws_ir(_dispatched(False))
    src = emit_cuda_attention(k)
    assert src.count("lg_fence_proxy_async();") == 4
    assert "lg_cp_mbar_arrive((lg_bar_fullV_u32 + 8 * (((j) % 2))));" in src
    r = verify_printed_ws(k, src, instances=[_instances(False)["ragged-gqa2"]])
    assert all(c.holds for c in r.values()), {n: c.counterexample for n, c in r.items()}


def test_the_tma_kernels_fence_nothing():
    """The seam adds the fence only where the producer copies (TMA boxes are written through
    the async proxy): the d128 TMA kernels keep their statements."""
    k = build_ws_ir(choose_prefill("bf16", 128, False, "wgmma", True, 4096, 4096).config)
    assert not any(isinstance(s, FenceProxyAsync) for s in walk(k.body))
    serial = build_ws_cp_ir(False)
    assert sum(isinstance(s, FenceProxyAsync) for s in walk(serial.body)) == 4  # K, V x 2 loops


@pytest.mark.parametrize("change,msg", [
    (dict(head_dim=128, bn=192), "head_dim 128, bn 192"),
    (dict(bn=128), "bn 128"),
    (dict(stages=3), "stages 3"),
    (dict(rescale_vote=True), "rescale_vote"),
    (dict(persistent=True), "persistent_units"),
])
def test_other_cp_async_configurations_are_refused(change, msg):
    with pytest.raises(AttentionConfigError, match=msg):
        build_ws_ir(dataclasses.replace(_dispatched(False), **change))


def test_the_tma_launcher_refuses_a_cp_async_configuration():
    from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention
    with pytest.raises(AttentionConfigError, match="IrWsCpAttention"):
        IrWsAttention(_dispatched(False))


# ---- planted bugs at the producer seam ------------------------------------------------------

def _consumer(k):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")


def _edit_loops(k, fn):
    for s in _consumer(k).body:
        if isinstance(s, Loop) and s.var == "j":
            s.body = fn(s.body)


def _no_fence_in_loops(k):
    _edit_loops(k, lambda b: [s for s in b if not isinstance(s, FenceProxyAsync)])


def _no_fence_at_last_block(k):
    c = _consumer(k)
    i = max(i for i, s in enumerate(c.body) if isinstance(s, Loop))
    j = next(j for j in range(i, len(c.body)) if isinstance(c.body[j], FenceProxyAsync))
    del c.body[j]


def _v_release_before_pv_retired(k):
    """The deferred V release (``if (j > 1)``) moved above the deferred P V wait."""
    def f(b):
        rel = [s for s in b if isinstance(s, If) and
               any(isinstance(x, MbarrierArrive) and x.bar == "emptyV" for x in s.body)]
        b = [s for s in b if not any(s is r for r in rel)]
        i = next(i for i, s in enumerate(b) if isinstance(s, WgmmaWait) and s.pending == 0)
        return b[:i] + rel + b[i:]
    _edit_loops(k, f)


def _v_release_of_the_block_in_flight(k):
    """The deferred release names V of j - 1, whose P V this block issues (under ``j > 0``:
    every block), instead of j - 2: the producer refills a stage a wgmma may still read."""
    def f(b):
        return [If(sympy.StrictGreaterThan(sym("j"), 0, evaluate=False),
                   [dataclasses.replace(x, index=sympy.Mod(sym("jp"), 2))
                            if isinstance(x, MbarrierArrive) else x for x in s.body])
                if isinstance(s, If) and any(isinstance(x, MbarrierArrive) and x.bar == "emptyV"
                                             for x in s.body) else s for s in b]
    _edit_loops(k, f)


def _v_release_two_blocks_late(k):
    """V of j - 3 (under j > 2) instead of j - 2: more lag than a two-stage ring absorbs."""
    def f(b):
        return [If(sympy.StrictGreaterThan(sym("j"), 2, evaluate=False),
                   [dataclasses.replace(x, index=sympy.Mod(sym("jp") - 2, 2))
                    if isinstance(x, MbarrierArrive) else x for x in s.body])
                if isinstance(s, If) and any(isinstance(x, MbarrierArrive) and x.bar == "emptyV"
                                             for x in s.body) else s for s in b]
    _edit_loops(k, f)


def _no_v_arrive(k):
    role = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "producer")

    def go(body):
        return [dataclasses.replace(s, body=go(s.body)) if isinstance(s, (If, Loop)) else s
                for s in body if not (isinstance(s, CpAsyncArrive) and s.bar == "fullV")]
    role.body = go(role.body)


#: (name, plant, instances, the check refusing it, a phrase of its counterexample)
BUGS = [
    ("the proxy fence dropped in the overlap loops", _no_fence_in_loops, ["ragged-gqa2"],
     "lds_races", "no fence.proxy.async"),
    ("the proxy fence dropped before the last P V", _no_fence_at_last_block,
     ["one-row-one-key"], "lds_races", "no fence.proxy.async"),
    ("the deferred V release above the deferred P V wait", _v_release_before_pv_retired,
     ["ring-wrap"], "lds_races", "overwrites"),
    ("the deferred V release of the block still in flight", _v_release_of_the_block_in_flight,
     ["ring-wrap"], "lds_races", "overwrites"),
    ("the deferred V release two blocks late", _v_release_two_blocks_late, ["ring-wrap"],
     "mbarrier_protocol", "deadlock"),
    ("the producer's V arrive dropped", _no_v_arrive, ["one-row-one-key"],
     "mbarrier_protocol", "deadlock"),
]


@lru_cache(maxsize=None)
def _unplanted_failures(insts: tuple) -> tuple:
    """The unplanted kernel's failures on ``insts``: verified once per instance set, not once
    per bug (three bugs share ring-wrap, two one-row-one-key)."""
    return tuple(sorted(_failed(build_ws_ir(_dispatched(False)), list(insts)).items()))


@pytest.mark.parametrize("name,plant,insts,check,msg", BUGS, ids=[b[0] for b in BUGS])
def test_planted_bugs_are_refused(name, plant, insts, check, msg):
    k = build_ws_ir(_dispatched(False))
    assert _unplanted_failures(tuple(insts)) == ()   # the unplanted kernel passes on these
    plant(k)
    bad = _failed(k, insts)
    assert check in bad, (name, bad)
    assert msg in bad[check], (name, bad[check])
