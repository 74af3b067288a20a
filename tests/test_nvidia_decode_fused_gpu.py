"""The fused split-KV decode (the last split block merges, kernels/nvidia/decode_fused_combine.py)
on a real GPU (skipped without one): bitwise equal to the split kernel + combine kernel, close to
torch, counters reset between calls, two streams, and a planted missing reset caught.

    python3 -m pytest -m gpu tests/test_nvidia_decode_fused_gpu.py -q
"""
from __future__ import annotations

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU


def case(B, Hq, Hkv, Skv, D, dtype=torch.bfloat16, cache=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = cache or Skv
    q = torch.randn(B, Hq, 1, D, dtype=dtype, device="cuda", generator=g)
    k = torch.randn(B, Hkv, n, D, dtype=dtype, device="cuda", generator=g)[:, :, :Skv]
    v = torch.randn(B, Hkv, n, D, dtype=dtype, device="cuda", generator=g)[:, :, :Skv]
    return q, k, v, gqa_decode_reference(q, k, v)


def pair(**kw):
    from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode
    return (MmaSplitKVDecode(MmaDecodeConfig(**kw)),
            MmaSplitKVDecode(MmaDecodeConfig(fused=True, **kw)))


def run(dec, q, k, v, splits, od=torch.float16):
    out = torch.full(q.shape, float("nan"), dtype=od, device="cuda")
    dec(q, k, v, out=out, kv_splits=splits)
    torch.cuda.synchronize()
    return out


CASES = [  # (config, shape (B, Hq, Hkv, Skv, D), splits, cache)
    (dict(head_dim=256, hg=4, warps=8), (4, 32, 8, 4096, 256), None, None),   # the suite row
    (dict(head_dim=256, hg=4, warps=4), (2, 16, 2, 1999, 256), 7, 2048),
    (dict(head_dim=128, hg=4, warps=4), (1, 32, 8, 100_000, 128), None, None),
    (dict(head_dim=128, hg=8, warps=4), (1, 64, 8, 30_001, 128), 33, None),
    (dict(head_dim=64, hg=8, warps=8), (3, 16, 2, 4097, 64), 300, None),
    (dict(head_dim=128, hg=3, warps=2, out_dtype="bf16"), (2, 6, 2, 777, 128), 5, 1024),
    (dict(head_dim=128, hg=4, warps=4), (2, 8, 2, 513, 128), 1, None),        # one split
]


@pytest.mark.parametrize("kw,shape,splits,cache", CASES, ids=lambda x: str(x))
def test_fused_is_bitwise_the_combine_kernel(kw, shape, splits, cache):
    unfused, fused = pair(**kw)
    od = torch.bfloat16 if kw.get("out_dtype") == "bf16" else torch.float16
    for seed in range(3):       # the counters must be back at zero after every call
        q, k, v, ref = case(*shape, cache=cache, seed=seed)
        a = run(unfused, q, k, v, splits, od)
        b = run(fused, q, k, v, splits, od)
        assert torch.isfinite(b).all(), f"seed {seed}: fused left outputs unwritten"
        assert torch.equal(a.view(torch.int16), b.view(torch.int16)), f"seed {seed}"
        err = ((b.float() - ref).norm() / ref.norm()).item()
        assert err < (1e-2 if od == torch.bfloat16 else 2e-3), err


def test_two_streams_get_their_own_counters():
    _, fused = pair(head_dim=256, hg=4, warps=8)
    unfused, _ = pair(head_dim=256, hg=4, warps=8)
    q, k, v, _ = case(4, 32, 8, 4096, 256)
    want = run(unfused, q, k, v, None)
    side = torch.cuda.Stream()
    outs = []
    for i in range(4):
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            outs.append(run(fused, q, k, v, None))
    torch.cuda.synchronize()
    assert all(torch.equal(o, want) for o in outs)


def test_dispatch_output_is_the_combine_kernels():
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v, _ = case(4, 32, 8, 4096, 256)
    cfg = choose_decode(q, k).config
    assert not cfg.fused           # the dispatch keeps the verified IR combine kernel
    unfused, fused = pair(head_dim=256, hg=cfg.hg, warps=cfg.warps)
    got = decode_attention(q, k, v)
    assert torch.equal(got, run(unfused, q, k, v, None))
    assert torch.equal(got, run(fused, q, k, v, None))


def test_planted_missing_counter_reset_is_caught():
    """A fused kernel that never resets its counter merges on the first call only: the
    second call's tickets never reach n - 1 and its output stays unwritten (NaN)."""
    from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode
    bad = MmaSplitKVDecode(MmaDecodeConfig(head_dim=128, hg=4, fused=True))
    assert "if (tid == 0) CNT[blockIdx.x] = 0;" in bad.source
    bad.source = bad.source.replace("if (tid == 0) CNT[blockIdx.x] = 0;", "")
    q, k, v, _ = case(1, 8, 2, 4096, 128)
    assert torch.isfinite(run(bad, q, k, v, 8)).all()
    assert not torch.isfinite(run(bad, q, k, v, 8)).all()
