"""The serial warp-specialised d128 prefill built as verified IR
(kernels.nvidia.wgmma_ws_ir_launch.IrWsSerialAttention: a TMA producer warpgroup, two consumer
warpgroups, 4-D tensor maps encoded by the host from the IR's TensorMaps) against the template
warp-specialised kernel of the same tile, stages and loader
(kernels.nvidia.wgmma_attention_ws.WsFlashAttention(ir.ws_cfg): 128 x 128, two stages, TMA, no
ping-pong) and a float32 torch reference, on a real Hopper GPU (skipped without one).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ws_ir_gpu.py``.  The
output is poisoned with NaN first (every element must be written); the IR's error against the
reference (batch 0 at S8K) within the tolerance or 1.5x the template's; bitwise the template's
output (the IR prints the template's arithmetic; only the schedule differs: serial here, S of
block j beside P V of block j - 1 there).  The timing against the template is
benchmarks/nvidia_ws_ir_serial.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma_attention_ws import WsFlashAttention  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_launch import IrWsSerialAttention  # noqa: E402
from _prefill_gpu import check_against_template, qkv  # noqa: E402

_KERNELS = {}


def _pair(causal, dt, pingpong=False):
    """The IR kernel and its template, built once per (causal, dtype, pingpong) for the
    file."""
    key = (causal, dt, pingpong)
    if key not in _KERNELS:
        ir = IrWsSerialAttention(causal, dt, pingpong=pingpong)
        _KERNELS[key] = (ir, WsFlashAttention(ir.ws_cfg))
    return _KERNELS[key]


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal,bshd", [
    (8, 32, 32, 8192, 8192, "bf16", False, False),     # the suite's S8K
    (8, 32, 32, 8192, 8192, "bf16", True, False),
    (4, 16, 16, 1000, 4097, "bf16", False, False),     # ragged rows and keys
    (2, 4, 2, 77, 77, "bf16", False, False),           # GQA, one partial block
    (2, 4, 2, 77, 77, "f16", True, True),              # f16, BSHD strides
    (16, 32, 32, 512, 512, "bf16", True, False),       # the short causal suite shape
], ids=["B8H32S8K", "B8H32S8K-causal", "B4H16-1000-4097", "B2H4S77-gqa", "B2H4S77-f16-bshd",
        "B16H32S512-causal"])
def test_ws_serial_ir_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv, dt, causal, bshd):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, dt, 17, bshd)
    ir, tpl = _pair(causal, dt)
    check_against_template(ir, tpl, q, k, v, causal, dt,
                           ref_batches=1 if Sq * Skv > 2 ** 24 else None)


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal,bshd", [
    (8, 32, 32, 8192, 8192, "bf16", True, False),
    (4, 16, 16, 1000, 4097, "bf16", False, False),
    (2, 4, 2, 77, 77, "f16", True, True),
], ids=["B8H32S8K-causal", "B4H16-1000-4097", "B2H4S77-f16-bshd"])
def test_ws_serial_ir_pingpong_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv, dt, causal, bshd):
    """The ping-pong form (the consumers' GEMM turns on named barriers 1 and 2, verified by
    the engine's three-agent replay) against the template's 128 x 128 two-stage ping-pong."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, dt, 23, bshd)
    ir, tpl = _pair(causal, dt, pingpong=True)
    assert ir.ws_cfg.pingpong and ir.kernel_name.endswith("_pp")
    check_against_template(ir, tpl, q, k, v, causal, dt,
                           ref_batches=1 if Sq * Skv > 2 ** 24 else None)


_BUILT = {}


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal,bshd", [
    (8, 32, 32, 8192, 8192, "bf16", False, False),     # 128x192 s2 pp
    (8, 32, 32, 8192, 8192, "bf16", True, False),      # 128x128 s2 pp causal dw
    (4, 16, 16, 1000, 4097, "bf16", False, False),     # 128x192 s2 pp, ragged
    (2, 4, 2, 77, 77, "f16", False, True),             # 128x128 s3 pp, GQA, BSHD
    (16, 32, 32, 512, 512, "bf16", True, False),       # s3 pp causal (persistence off)
    (3, 8, 8, 1500, 1500, "bf16", True, False),        # s2 pp causal dw, ragged rows
], ids=["B8H32S8K", "B8H32S8K-causal", "B4H16-1000-4097", "B2H4S77-f16-gqa-bshd",
        "B16H32S512-causal", "B3H8S1500-causal"])
def test_ws_ir_of_the_dispatched_config_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv, dt, causal,
                                                                bshd):
    """The builder's IR (kernels.nvidia.wgmma_ws_ir: the overlap schedule, stages, bn 192,
    ping-pong, deferred P V wait) of the configuration choose_prefill runs, persistence off,
    against the template of that same configuration."""
    import dataclasses
    from kernels.nvidia.prefill_select import choose_prefill
    from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    ws = choose_prefill(dt, 128, causal, "wgmma", True, max(Sq, Skv), Skv).config
    cfg = dataclasses.replace(ws, persistent=False, unit_heads=0)
    if cfg not in _BUILT:
        _BUILT[cfg] = (IrWsAttention(cfg), WsFlashAttention(cfg))
    ir, tpl = _BUILT[cfg]
    assert ir.ws_cfg == cfg
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, dt, 29, bshd)
    check_against_template(ir, tpl, q, k, v, causal, dt,
                           ref_batches=1 if Sq * Skv > 2 ** 24 else None)


#: every warp-specialised configuration the IR rule can take (the rule forced on for all)
_ALL_WS_KEYS = frozenset({(192, 2, False, False), (128, 2, True, True), (128, 3, False, False)})


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,causal,bshd", [
    (2, 8, 8, 2048, 2048, False, False),     # 128x192 s2 pp
    (2, 8, 2, 1500, 1500, True, True),       # 128x128 s2 pp causal dw, GQA, BSHD views
    (2, 4, 4, 300, 700, False, False),       # 128x128 s3 pp, cross lengths
], ids=["S2K", "S1500-causal-gqa-bshd", "300-700"])
def test_flash_attention_runs_the_ws_ir_kernel_where_the_rule_says(monkeypatch, B, Hq, Hkv, Sq,
                                                                   Skv, causal, bshd):
    """kernels.nvidia.dispatch.flash_attention with the WS IR rule on for every configuration
    it can take: the kernel it runs is IrWsAttention of choose_prefill's configuration, and its
    output is bitwise that configuration's template (compiled_flash(template=True))."""
    from kernels.nvidia import dispatch, prefill_select
    from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    monkeypatch.setattr(prefill_select, "IR_WS_PREFILL_AT_PARITY", _ALL_WS_KEYS)
    monkeypatch.setattr(dispatch, "_FLASH", {})     # kernels built under the shipped rule
    dispatch._FLASH_PLANS.clear()
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, "bf16", 31, bshd)
    out = dispatch.flash_attention(q, k, v, causal=causal)
    c = prefill_select.choose_prefill("bf16", 128, causal, "wgmma", True, max(Sq, Skv), Skv)
    assert "verified IR kernel" in c.reason, c.reason
    fa = dispatch.compiled_flash(c.config)
    assert type(fa) is IrWsAttention and fa.ws_cfg == c.config
    ref = dispatch.compiled_flash(c.config, template=True)(q, k, v)
    assert torch.equal(out, ref)
    dispatch._FLASH_PLANS.clear()
