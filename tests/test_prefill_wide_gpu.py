"""The wide IR prefills (kernels.nvidia.prefill_wide) on a GPU: bitwise their templates at
tensors the 32-bit IR form cannot launch (offsets past 2^31; batch x heads past grid y), and
flash_attention() launching them with WIDE_PREFILL_ON_IR.  Skipped without a CUDA GPU
(benchmarks/gpu_prefill_wide.py times them)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SB = 2 ** 31 + 8192


def _past_2_31(D, dtype, S=300, H=2):
    """q / k / v views of one buffer, batches SB elements apart (B2), and a poisoned out."""
    n = H * S * D
    buf = torch.empty(SB + 3 * n, device="cuda", dtype=dtype)
    buf[:3 * n].normal_()
    buf[SB:].normal_()
    st = (SB, S * D, D, 1)
    q, k, v = (buf.as_strided((2, H, S, D), st, i * n) for i in range(3))

    def out():
        return torch.full((SB + n,), float("nan"), device="cuda",
                          dtype=dtype).as_strided((2, H, S, D), st, 0)
    return q, k, v, out


def _grid_y(D, dtype):
    q, k, v = (torch.randn(2048, 40, 64, D, device="cuda", dtype=dtype) for _ in range(3))
    return q, k, v, lambda: torch.full_like(q, float("nan"))


def _cases():
    from kernels.nvidia.attention import FlashAttention, FlashConfig
    from kernels.nvidia.flash_ir import IrFlashAttention
    from kernels.nvidia.wgmma_attention import WgmmaFlashAttention, WgmmaFlashConfig
    from kernels.nvidia.wgmma_attention_ws import WsFlashAttention, WsFlashConfig
    from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention
    from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention
    return {
        "mma-d64": (FlashConfig(head_dim=64), IrFlashAttention, FlashAttention),
        "wgmma-d64-causal": (WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=True),
                             IrWgmmaFlashAttention, WgmmaFlashAttention),
        "ws-d128": (WsFlashConfig(head_dim=128, pingpong=True, loader="tma", dtype="bf16",
                                  stages=3), IrWsAttention, WsFlashAttention)}


@pytest.mark.parametrize("shape", ["past-2^31", "grid-y"])
@pytest.mark.parametrize("case", ["mma-d64", "wgmma-d64-causal", "ws-d128"])
def test_wide_ir_equals_template(case, shape):
    cfg, ir_cls, tpl_cls = _cases()[case]
    ir = ir_cls(cfg, wide=True)
    tpl = tpl_cls(getattr(ir, "ws_cfg", cfg))
    dt = torch.bfloat16 if cfg.dtype == "bf16" else torch.float16
    q, k, v, out = (_past_2_31 if shape == "past-2^31" else _grid_y)(cfg.head_dim, dt)
    a, b = out(), out()
    ir(q, k, v, out=a)
    tpl(q, k, v, out=b)
    torch.cuda.synchronize()
    assert not a.isnan().any()
    assert torch.equal(a, b)


@pytest.mark.parametrize("D, dtype", [(64, "f16"), (128, "bf16")])
def test_flash_attention_runs_the_wide_ir(monkeypatch, D, dtype):
    from kernels.nvidia import dispatch, prefill_ir
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", True)
    dt = getattr(torch, {"f16": "float16", "bf16": "bfloat16"}[dtype])
    q, k, v, out = _past_2_31(D, dt)
    cfg = dispatch.choose_prefill(dtype, D, False, "wgmma", True, 300, 300).config
    fa = dispatch._within_offsets(dispatch.compiled_flash(cfg), q, k, v, None)
    assert fa.wide and fa.kernel_name.endswith("_i64")
    o, t = out(), out()
    dispatch.flash_attention(q, k, v, out=o)
    dispatch.compiled_flash(cfg, template=True)(q, k, v, out=t)
    torch.cuda.synchronize()
    assert torch.equal(o, t)


def test_split_decode_past_2_31_wide_split_kernel_equals_template(monkeypatch):
    """The one-launch IR decode on K / V whose batches lie 2^31 + 128 elements apart: the wide
    IR split kernel + the IR combine (kernels.nvidia.decode_ir.WIDE_SPLIT_ON_IR) against the
    template split kernel + the IR combine; bitwise."""
    from kernels.nvidia import decode_ir
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.decode_mma import MmaDecodeConfig
    B, Hq, Hkv, Skv, D = 2, 16, 4, 1000, 128
    sb = 2 ** 31 + 128
    buf = torch.empty(sb + 2 * Hkv * Skv * D, device="cuda", dtype=torch.bfloat16)
    buf[:2 * Hkv * Skv * D].normal_()
    buf[sb:].normal_()
    st = (sb, Skv * D, D, 1)
    k = buf.as_strided((B, Hkv, Skv, D), st, 0)
    v = buf.as_strided((B, Hkv, Skv, D), st, Hkv * Skv * D)
    q = torch.randn(B, Hq, 1, D, device="cuda", dtype=torch.bfloat16)
    dec = IrFusedMmaDecode(MmaDecodeConfig(head_dim=D, hg=4, warps=4))
    monkeypatch.setattr(decode_ir, "WIDE_SPLIT_ON_IR", True)
    got = dec(q, k, v)
    assert dec.wide_split_call(q, k, v, None, 1.0, None, None) is not None
    monkeypatch.setattr(decode_ir, "WIDE_SPLIT_ON_IR", False)
    want = IrFusedMmaDecode(MmaDecodeConfig(head_dim=D, hg=4, warps=4))(q, k, v)
    torch.cuda.synchronize()
    assert not got.isnan().any()
    assert torch.equal(got, want)
