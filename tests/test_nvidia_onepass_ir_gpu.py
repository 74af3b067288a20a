"""The one-pass decode built as kernel IR (kernels.nvidia.decode_onepass_ir.IrOnePassDecode)
against the template it replaces (kernels.nvidia.attention.DecodeAttention) on a real GPU
(skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_onepass_ir_gpu.py``.
The IR kernel does the template's float operations in the same order (only masked keys and
rows past batch x heads are loaded differently: zeros instead of clamped rows, never stored and
weighted 0), so the outputs must be bitwise equal; outputs are poisoned with NaN first and
compared with a float32 reference; strided q / k / v / out are views of wider or permuted
buffers."""

from __future__ import annotations

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.attention import DecodeAttention  # noqa: E402
from kernels.nvidia.decode_onepass_ir import IrOnePassDecode, onepass_config  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def _inputs(B, Hq, Hkv, Skv, D, dt, strided, seed=7):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape):
        return torch.randn(shape, device="cuda", generator=g).to(DT[dt])
    if not strided:
        return rnd(B, Hq, 1, D), rnd(B, Hkv, Skv, D), rnd(B, Hkv, Skv, D)
    q = rnd(B, Hq, 1, D + 8)[..., :D]                       # padded head rows
    k = rnd(B, Skv, Hkv, D).transpose(1, 2)                 # BSHD storage
    v = rnd(B, Skv, Hkv, D + 16)[..., :D].transpose(1, 2)   # BSHD, padded rows
    return q, k, v


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,ind,outd,strided", [
    (2, 5, 1, 1, 128, "bf16", "f16", False),       # one key, MQA
    (3, 12, 4, 37, 64, "f16", "f16", False),       # ragged GQA, partial last step
    (1, 7, 7, 8, 256, "bf16", "bf16", False),      # d256, bf16 out, one whole step
    (4, 32, 8, 16, 128, "bf16", "f16", True),      # strided q / k / v / out
    (2, 16, 2, 64, 64, "f16", "bf16", True),       # 4 steps of 16, strided
    (33, 8, 8, 5, 128, "bf16", "f16", False),      # partial last block of rows
    (1, 32, 8, 3, 256, "f16", "f16", True),        # d256 strided, 3 keys (chunk 4)
])
def test_onepass_ir_equals_template(B, Hq, Hkv, Skv, D, ind, outd, strided):
    q, k, v = _inputs(B, Hq, Hkv, Skv, D, ind, strided)
    cfg = onepass_config(q, k, outd)
    outs = []
    for kind in (DecodeAttention, IrOnePassDecode):
        buf = torch.full((B, Hq, 1, D + (8 if strided else 0)), float("nan"), dtype=DT[outd],
                         device="cuda")
        out = buf[..., :D]
        kind(cfg)(q, k, v, out=out)
        torch.cuda.synchronize()
        outs.append(buf)
    tpl, ir = outs
    assert torch.isfinite(ir[..., :D]).all()
    same = tpl.view(torch.int16) == ir.view(torch.int16)     # the padding stays NaN in both
    assert same.all(), f"{(~same).sum().item()} elements differ"
    ref = gqa_decode_reference(q, k, v)
    err = ((ir[..., :D].float() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if outd == "bf16" else 2e-3), err


def test_dispatch_runs_the_ir_one_pass_bitwise():
    """decode_attention() on a short cache runs the IR one-pass kernel (choose_decode names it)
    and returns the template's bits."""
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v = _inputs(2, 32, 8, 8, 128, "bf16", False)
    choice = choose_decode(q, k)
    assert choice.kind == "one_pass" and "IrOnePassDecode" in choice.reason
    got = decode_attention(q, k, v)
    want = DecodeAttention(onepass_config(q, k))(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_wide_form_past_2_31_equals_template():
    """The wide IR form (long long strides) against the template on K / V whose batches lie
    2^31 + 128 elements apart in one 4 GiB buffer (the 32-bit form cannot address them), and
    at an ordinary launch; bitwise."""
    from kernels.nvidia.decode_onepass_ir import int_offsets_fit
    B, Hq, Hkv, Skv, D = 2, 8, 2, 12, 128
    stride_b = 2 ** 31 + 128
    g = torch.Generator(device="cuda").manual_seed(3)
    # k from element 0, v from 64 D: each batch's rows are whole inside the buffer
    buf = torch.randn(stride_b + 64 * D + Hkv * Skv * D, device="cuda",
                      generator=g).to(torch.bfloat16)
    k = buf.as_strided((B, Hkv, Skv, D), (stride_b, Skv * D, D, 1))
    v = buf[64 * D:].as_strided((B, Hkv, Skv, D), (stride_b, Skv * D, D, 1))
    q = torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(torch.bfloat16)
    assert not int_offsets_fit(k)
    cfg = onepass_config(q, k, "f16")
    want = DecodeAttention(cfg)(q, k, v)
    got = IrOnePassDecode(cfg, wide=True)(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    q2, k2, v2 = _inputs(3, 12, 4, 37, 64, "f16", True)
    cfg2 = onepass_config(q2, k2, "f16")
    a, b = DecodeAttention(cfg2)(q2, k2, v2), IrOnePassDecode(cfg2, wide=True)(q2, k2, v2)
    torch.cuda.synchronize()
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
