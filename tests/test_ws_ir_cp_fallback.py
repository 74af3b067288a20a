"""The d128 cp.async fallback (prefill_select.WS_PREFILL_FALLBACK[128]: bn 128, two stages,
ping-pong; what choose_prefill runs where TMA cannot address q / k / v) built by the overlap
builder on the cp.async producer (kernels/nvidia/wgmma_ws_ir.py, CP_TILES) and verified -- IR
and printed text -- on the IR prefills' instances plus K / V broadcast over the heads (head
stride 0, kv_broadcast_instance: the layout that sends a problem to this fallback)."""

from __future__ import annotations

import pytest

from kernels.ir.core import walk
from kernels.ir.nvidia import CpAsync
from kernels.ir.nvidia_tma import TmaLoad
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_ws_ir import build_ws_ir, ws_ir_supported
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.verifier import verify


def _fallback(causal):
    return choose_prefill("bf16", 128, causal, "wgmma", False, 8192, 8192).config


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_fallback_builds_with_the_cp_producer_and_a_broadcast_instance(causal):
    cfg = _fallback(causal)
    assert (cfg.loader, cfg.head_dim, cfg.bn, cfg.stages, cfg.pingpong) == \
        ("cp.async", 128, 128, 2, True)
    assert ws_ir_supported(cfg) is None
    k = build_ws_ir(cfg)
    assert k.name == "lg_wsflash_ir_" + cfg.name[len("lg_wsflash_"):]
    assert not any(isinstance(s, TmaLoad) for s in walk(k.body))
    # Q once (16 copies), K and V per block: 16 each, whole-block and ragged paths
    assert sum(isinstance(s, CpAsync) for s in walk(k.body)) == 16 + 2 * 2 * 16
    inst = {i.name: i for i in default_instances(k)}
    b = inst["kv-broadcast"].values
    assert b["k_sh"] == b["v_sh"] == 0 and b["heads"] == b["kv_heads"] == 3
    assert "lg_src" in emit_cuda_attention(k) and k.meta["cp_src_chain"] == 2


def test_the_fallback_verifies_ir_and_text():
    """Every instance of the non-causal kernel; the causal one on the broadcast and
    ring-wrap instances (its engines' time)."""
    for causal in (False, True):
        k = build_ws_ir(_fallback(causal))
        insts = default_instances(k)
        if causal:
            insts = [i for i in insts if i.name in ("kv-broadcast", "ring-wrap")]
        r = verify(k, arch="sm_90a", source=emit_cuda_attention(k), instances=insts)
        assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
