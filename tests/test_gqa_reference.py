"""tests/_gqa_reference.py, the float32 decode reference the GPU decode tests compare with,
checked on the CPU against a per-head loop (query head h reads KV head h // group)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from _gqa_reference import gqa_decode_reference  # noqa: E402


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D", [(2, 8, 2, 37, 64), (1, 6, 6, 5, 128), (3, 4, 1, 9, 32)])
def test_gqa_decode_reference_matches_a_per_head_loop(B, Hq, Hkv, Skv, D):
    g = torch.Generator().manual_seed(7)
    q = torch.randn(B, Hq, 1, D, generator=g).to(torch.bfloat16)
    k = torch.randn(B, Hkv, Skv, D, generator=g).to(torch.bfloat16)
    v = torch.randn(B, Hkv, Skv, D, generator=g).to(torch.bfloat16)
    got = gqa_decode_reference(q, k, v)
    assert got.dtype == torch.float32 and got.shape == (B, Hq, 1, D)
    for b in range(B):
        for h in range(Hq):
            kh, vh = k[b, h // (Hq // Hkv)].double(), v[b, h // (Hq // Hkv)].double()
            w = torch.softmax(q[b, h].double() @ kh.T / math.sqrt(D), -1)
            torch.testing.assert_close(got[b, h].double(), w @ vh, rtol=1e-5, atol=1e-5)
