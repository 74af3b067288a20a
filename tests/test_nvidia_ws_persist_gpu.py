"""The persistent warp-specialised d128 prefill built as verified IR
(kernels.nvidia.wgmma_ws_ir_persist_launch.IrWsPersistAttention: one CTA per SM walking the
work units, the ring counter carried over units, Q a one-stage ring) against the template of
the same configuration (WsFlashAttention, the dispatched
``lg_wsflash_*_d128_128x128_s3_pp_causal_tma_pt_uh4`` for causal problems up to 1024 rows) and
a float32 torch reference, on a real Hopper GPU (skipped without one).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ws_persist_gpu.py``.
Outputs NaN-poisoned first (every element written once the walks end); bitwise the template's
output (the same arithmetic, the same unit order).  Timing: benchmarks/nvidia_ws_ir_persist.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma_attention_ws import WsFlashAttention, WsFlashConfig  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_persist_launch import IrWsPersistAttention  # noqa: E402
from _prefill_gpu import check_against_template, qkv  # noqa: E402

DISPATCHED = WsFlashConfig(head_dim=128, bn=128, stages=3, causal=True, pingpong=True,
                           loader="tma", persistent=True, unit_heads=4)
_KERNELS = {}


def _pair(cfg, one_loop=False):
    if (cfg, one_loop) not in _KERNELS:
        _KERNELS[cfg, one_loop] = (IrWsPersistAttention(cfg, one_loop=one_loop),
                                   WsFlashAttention(cfg))
    return _KERNELS[cfg, one_loop]


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,causal", [
    (16, 32, 32, 512, 512, True),       # the short causal suite shape
    (16, 32, 8, 512, 512, True),        # GQA 4
    (2, 4, 2, 77, 77, True),            # fewer units than SMs, a partial block
    (3, 5, 5, 1000, 1000, True),        # a short last chunk of unit_heads, ragged rows
], ids=["B16H32S512-causal", "B16H32-8S512-causal", "B2H4S77-gqa", "B3H5S1000"])
def test_ws_persist_ir_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv, causal):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, "bf16", 29)
    ir, tpl = _pair(DISPATCHED)
    check_against_template(ir, tpl, q, k, v, causal, "bf16")


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv", [
    (16, 32, 8, 512, 512),              # GQA 4, units of 1..4 blocks
    (3, 5, 5, 1000, 1000),              # ragged rows and keys: the last block masked
], ids=["B16H32-8S512-causal", "B3H5S1000"])
def test_ws_persist_ir_one_loop_is_bitwise_the_template(B, Hq, Hkv, Sq, Skv):
    """``one_loop=True``: blocks 1.. as one loop, the mask under ``j >= n_full``."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    q, k, v = qkv(B, Hq, Hkv, Sq, Skv, 128, "bf16", 31)
    ir, tpl = _pair(DISPATCHED, one_loop=True)
    check_against_template(ir, tpl, q, k, v, True, "bf16")


@pytest.mark.parametrize("B,Hq,Hkv,Sq,causal", [
    (4, 16, 4, 512, True),              # GQA 4, the short causal selection
    (2, 3, 3, 700, True),               # a partial query block, a short last chunk
], ids=["B4H16-4S512", "B2H3S700"])
def test_flash_attention_runs_the_persistent_ir_kernel_as_shipped(B, Hq, Hkv, Sq, causal):
    """kernels.nvidia.dispatch.flash_attention as shipped (IR_WS_PERSIST_AT_PARITY holds the
    short causal configuration): the kernel it runs is IrWsPersistAttention of choose_prefill's
    configuration, and its output is bitwise that configuration's template."""
    from kernels.nvidia import dispatch, prefill_select
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma and TMA need sm_90a")
    q, k, v = qkv(B, Hq, Hkv, Sq, Sq, 128, "bf16", 37)
    out = dispatch.flash_attention(q, k, v, causal=causal)
    c = prefill_select.choose_prefill("bf16", 128, causal, "wgmma", True, Sq, Sq)
    assert c.config.persistent and "verified IR kernel" in c.reason, c.reason
    fa = dispatch.compiled_flash(c.config)
    assert type(fa) is IrWsPersistAttention and fa.ws_cfg == c.config
    ref = dispatch.compiled_flash(c.config, template=True)(q, k, v)
    assert torch.equal(out, ref)
