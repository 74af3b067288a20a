"""Attention kernels (prefill and decode) on the CPU emulator vs torch SDPA in fp32.

Thresholds: max |out - ref| <= 4e-3 (f16 out) / 2e-2 (bf16 out) and cosine similarity >=
0.9999 over all elements; logsumexp within 1e-4.  The only approximation in the kernels is
rounding P to 16 bits before P V and the output rounding.
"""

import math

import pytest
import torch

import kernels.flash_attention as attn
from kernels.attention_registry import reference

TOL = {torch.float16: 4e-3, torch.bfloat16: 2e-2}


def _inputs(b, h, hk, sq, skv, d, dt, layout="bhsd", seed=0):
    g = torch.Generator().manual_seed(seed)
    if layout == "bshd":
        mk = lambda hh, s: torch.randn(b, s, hh, d, generator=g).to(dt)  # noqa: E731
    else:
        mk = lambda hh, s: torch.randn(b, hh, s, d, generator=g).to(dt)  # noqa: E731
    return mk(h, sq), mk(hk, skv), mk(hk, skv)


def _check(out, lse, q, k, v, causal, align, layout="bhsd"):
    if layout == "bshd":
        q, k, v, out = (x.transpose(1, 2) for x in (q, k, v, out))
    ref, lref = reference(q, k, v, causal=causal, causal_align=align)
    o = out.float()
    err = float((o - ref).abs().max())
    cos = float(torch.nn.functional.cosine_similarity(o.reshape(1, -1), ref.reshape(1, -1)))
    assert err <= TOL[out.dtype], f"max error {err}"
    if float(ref.abs().max()) > 0:
        assert cos >= 0.9999, f"cosine {cos}"
    fin = torch.isfinite(lref)
    assert torch.equal(fin, torch.isfinite(lse)), "rows with no visible key must give lse -inf"
    assert float((lse[fin] - lref[fin]).abs().max()) <= 1e-4
    return err, cos


CASES = {
    # name: (B, H, HK, Sq, Skv, D, dtype, out dtype, causal, align, layout)
    "f16-gqa-77": (1, 2, 1, 77, 77, 64, torch.float16, None, False, "top_left", "bhsd"),
    "bf16-causal-q77-kv130": (1, 2, 2, 77, 130, 64, torch.bfloat16, None, True, "top_left",
                              "bhsd"),
    "f16-causal-bottom-right-q130-kv77": (1, 1, 1, 130, 77, 64, torch.float16, None, True,
                                          "bottom_right", "bhsd"),
    "bf16-in-f16-out-bshd-mqa": (2, 2, 1, 33, 70, 64, torch.bfloat16, torch.float16, False,
                                 "top_left", "bshd"),
    "seqlen-1-prefill": (1, 2, 2, 1, 1, 64, torch.float16, None, True, "top_left", "bhsd"),
    "f16-d128-q65-kv100": (1, 1, 1, 65, 100, 128, torch.float16, None, False, "top_left",
                           "bhsd"),
    # several full KV tiles: the unpredicated-prefetch loop runs more than once
    "f16-d64-q40-kv265": (1, 2, 1, 40, 265, 64, torch.float16, None, False, "top_left", "bhsd"),
    "bf16-d128-causal-bottom-right-q40-kv270": (1, 1, 1, 40, 270, 128, torch.bfloat16, None,
                                                True, "bottom_right", "bhsd"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_prefill_matches_sdpa(name):
    b, h, hk, sq, skv, d, dt, odt, causal, align, layout = CASES[name]
    q, k, v = _inputs(b, h, hk, sq, skv, d, dt, layout)
    out, lse = attn.attention(q, k, v, causal=causal, causal_align=align, out_dtype=odt,
                              return_lse=True, layout=layout, backend="emulator", decode=False)
    assert out.dtype == (odt or dt)
    _check(out, lse, q, k, v, causal, align, layout)


@pytest.mark.parametrize("d,skv,hk", [(128, 1, 2), (128, 13, 2), (256, 16, 4)])
def test_decode_matches_sdpa(d, skv, hk):
    q, k, v = _inputs(3, 4, hk, 1, skv, d, torch.bfloat16)
    out, lse = attn.attention(q, k, v, out_dtype=torch.float16, return_lse=True,
                              backend="emulator")
    assert out.dtype == torch.float16
    assert attn.get_kernel(__import__("kernels.decode", fromlist=["x"]).DecodeConfig(
        head_dim=d, dtype="bf16", out_dtype="f16")).kind == "decode"
    _check(out, lse, q, k, v, False, "top_left")


def test_package_function_and_reference_is_sensitive():
    import kernels
    from kernels import attention
    assert attention is attn.attention and kernels.attention is attn.attention
    assert callable(attention) and type(attention).__name__ == "function"
    q, k, v = _inputs(1, 2, 1, 40, 50, 64, torch.float16)
    out = kernels.attention(q, k, v, scale=0.5 / math.sqrt(64), backend="emulator")
    ref, _ = reference(q, k, v)   # default scale: a different answer
    assert float((out.float() - ref).abs().max()) > 1e-2
    ref2 = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float().repeat_interleave(2, 1), v.float().repeat_interleave(2, 1),
        scale=0.5 / math.sqrt(64))
    assert float((out.float() - ref2).abs().max()) <= TOL[torch.float16]


def test_cpu_tensors_without_emulator_are_refused():
    from kernels.errors import NoDeviceError
    q, k, v = _inputs(1, 1, 1, 4, 4, 64, torch.float16)
    with pytest.raises(NoDeviceError):
        attn.attention(q, k, v)


# issue 16: the one-stage LDS form (the head_dim <= 128 default) and the double-buffered one,
# explicitly, on ragged / causal / GQA shapes with several KV tiles (the store over the tile
# every wave has just read runs more than once)
STAGE_CASES = {
    "two-stage-f16-d64-gqa-q40-kv265": (2, (1, 2, 1, 40, 265, 64, torch.float16, None, False,
                                            "top_left", "bhsd")),
    "two-stage-bf16-d128-causal-q77-kv200": (2, (1, 2, 2, 77, 200, 128, torch.bfloat16, None,
                                                 True, "top_left", "bhsd")),
    "one-stage-bf16-d128-causal-gqa-q140-kv140": (1, (1, 4, 2, 140, 140, 128, torch.bfloat16,
                                                      None, True, "top_left", "bhsd")),
    "one-stage-f16-d128-bshd-q33-kv300": (1, (2, 2, 1, 33, 300, 128, torch.float16,
                                              torch.bfloat16, False, "top_left", "bshd")),
}


@pytest.mark.parametrize("name", list(STAGE_CASES))
def test_prefill_lds_stages_match_sdpa(name):
    stages, (b, h, hk, sq, skv, d, dt, odt, causal, align, layout) = STAGE_CASES[name]
    q, k, v = _inputs(b, h, hk, sq, skv, d, dt, layout, seed=3)
    out, lse = attn.attention(q, k, v, causal=causal, causal_align=align, out_dtype=odt,
                              return_lse=True, layout=layout, backend="emulator", decode=False,
                              lds_stages=stages)
    _check(out, lse, q, k, v, causal, align, layout)


def test_default_prefill_is_one_stage_two_waves_per_simd():
    """The default head_dim <= 128 kernels keep 32 KiB of LDS per work-group (two work-groups of
    4 waves per CU); head_dim 256 stays double-buffered (its registers allow one wave per SIMD
    whatever the LDS)."""
    for d, stages in ((64, 1), (128, 1), (256, 2)):
        cfg = attn.AttnConfig(head_dim=d).normalized()
        assert cfg.lds_stages == stages
        assert cfg.lds_bytes == 2 * 2 * stages * cfg.block_n * d
    assert attn.AttnConfig(head_dim=128).normalized().lds_bytes == 32 * 1024
    with pytest.raises(attn.ConfigError, match="lds_stages 3: use 1 or 2"):
        attn.AttnConfig(lds_stages=3).normalized()
