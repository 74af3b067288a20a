"""The serial warp-specialised d256 prefill with the cp.async producer built as verified IR
(kernels.nvidia.wgmma_ws_ir_cp_launch.IrWsCpAttention: 128 producer threads copying into a
two-stage ring with cp.async.mbarrier.arrive.noinc, two consumer warpgroups, bn 64) against the
template warp-specialised kernel of the same tile, stages and loader
(kernels.nvidia.wgmma_attention_ws.WsFlashAttention(ir.ws_cfg): 128 x 64, two stages,
cp.async) and a float32 torch reference, on a real Hopper GPU (skipped without one); and the
dispatched d256 configuration (prefill_select.WS_PREFILL_TILES[256]: ping-pong, deferred P V
wait) built by the overlap builder (kernels.nvidia.wgmma_ws_ir.build_ws_ir, launched by
IrWsCpAttention(cfg=...)) against its template, at the same shapes; and the d128 cp.async
fallback (prefill_select.WS_PREFILL_FALLBACK[128], what runs where TMA cannot address the
tensors) on K / V broadcast over the heads.

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ws_ir_cp_gpu.py``.
The output is poisoned with NaN first (every element must be written); the IR's error against
the reference within the tolerance or 1.5x the template's; bitwise the template's output (the
IR prints the template's arithmetic; only the schedule differs).  The timing is
benchmarks/nvidia_ws_ir_cp.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.prefill_select import choose_prefill  # noqa: E402
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_cp_launch import IrWsCpAttention  # noqa: E402
from _prefill_gpu import check_against_template, qkv  # noqa: E402

_KERNELS = {}


def _pair(causal, dt, pingpong=False):
    key = (causal, dt, pingpong)
    if key not in _KERNELS:
        ir = IrWsCpAttention(causal, dt, pingpong=pingpong)
        _KERNELS[key] = (ir, WsFlashAttention(ir.ws_cfg))
    return _KERNELS[key]


SHAPES = pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal", [
    (2, 16, 16, 4096, 4096, "bf16", False),         # the d256 suite's S4K
    (4, 8, 1, 513, 513, "bf16", True),              # GQA 8/1, a ragged block, causal
    (2, 4, 4, 77, 77, "bf16", False),               # one partial key block
], ids=["B2H16S4K", "B4H8-1S513-causal", "B2H4S77"])


def _inputs(B, Hq, Hkv, Sq, Skv, dt):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and setmaxnreg need sm_90a")
    return qkv(B, Hq, Hkv, Sq, Skv, 256, dt, 29)


@pytest.mark.parametrize("pingpong", [False, True], ids=["serial", "pingpong"])
@SHAPES
def test_ws_cp_ir_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv, dt, causal, pingpong):
    q, k, v = _inputs(B, Hq, Hkv, Sq, Skv, dt)
    ir, tpl = _pair(causal, dt, pingpong)
    assert ir.ws_cfg.loader == "cp.async" and ir.ws_cfg.head_dim == 256
    assert ir.ws_cfg.pingpong == pingpong
    check_against_template(ir, tpl, q, k, v, causal, dt)


@SHAPES
def test_the_dispatched_d256_ir_is_bitwise_its_template(B, Hq, Hkv, Sq, Skv, dt, causal):
    q, k, v = _inputs(B, Hq, Hkv, Sq, Skv, dt)
    cfg = choose_prefill(dt, 256, causal, "wgmma", True, max(Sq, Skv), Skv).config
    key = ("dispatched", cfg)
    if key not in _KERNELS:
        _KERNELS[key] = (IrWsCpAttention(cfg=cfg), WsFlashAttention(cfg))
    ir, tpl = _KERNELS[key]
    assert ir.ws_cfg == cfg and cfg.loader == "cp.async" and cfg.defer_pv_wait
    assert ir.kernel_name.startswith("lg_wsflash_ir_") and "_dw" in ir.kernel_name
    check_against_template(ir, tpl, q, k, v, causal, dt)


@pytest.mark.parametrize("B,Hq,Sq,Skv,causal", [
    (2, 8, 1000, 1000, False),                     # ragged last key block
    (2, 8, 1000, 1000, True),
    (1, 4, 77, 77, False),                         # one partial key block
], ids=["B2H8S1000", "B2H8S1000-causal", "B1H4S77"])
def test_the_dispatched_d128_fallback_ir_is_bitwise_its_template(B, Hq, Sq, Skv, causal):
    """K and V one head broadcast over the heads (head stride 0: no tensor map takes it)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and setmaxnreg need sm_90a")
    q, k, v = qkv(B, Hq, 1, Sq, Skv, 128, "bf16", 31)
    k, v = (t.expand(B, Hq, Skv, 128) for t in (k, v))
    cfg = choose_prefill("bf16", 128, causal, "wgmma", False, max(Sq, Skv), Skv).config
    assert cfg.loader == "cp.async" and (cfg.bn, cfg.stages) == (128, 2) and k.stride(1) == 0
    key = ("fallback", cfg)
    if key not in _KERNELS:
        _KERNELS[key] = (IrWsCpAttention(cfg=cfg), WsFlashAttention(cfg))
    ir, tpl = _KERNELS[key]
    assert ir.kernel_name == "lg_wsflash_ir_" + cfg.name[len("lg_wsflash_"):]
    check_against_template(ir, tpl, q, k, v, causal, "bf16")
