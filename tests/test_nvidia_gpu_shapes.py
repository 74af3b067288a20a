"""Issue 20 on a real GPU (skipped without one): GEMMs of any M/N/K and leading dimension, the
shape-aware choice (small-M tiles, split-K), and the split-KV GQA decode, against torch.

    python3 -m pytest -m gpu tests/test_nvidia_gpu_shapes.py -q

Outputs are poisoned with NaN before the launch (an unwritten element fails).  Tolerances are
test_nvidia_gpu.py's: relative Frobenius error against a float32 reference on the same inputs.
"""

from __future__ import annotations

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (9, 0)
TOL_GEMM = {torch.float16: 1e-3, torch.bfloat16: 6e-3}
DT = {torch.float16: "f16", torch.bfloat16: "bf16"}


@pytest.fixture(autouse=True, scope="module")
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


def rel(out, ref):
    out, ref = out.float(), ref.float()
    assert torch.isfinite(out).all(), "non-finite output (unwritten or NaN)"
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def operands(M, N, K, dtype, b_major, lda=None, ldb=None):
    """a (M, K) and b ((K, N) or (N, K)) as views of wider buffers when lda / ldb are given
    (odd leading dimensions, misaligned rows), and the float32 reference."""
    def mat(r, c, ld):
        if ld is None:
            return torch.randn(r, c, dtype=dtype, device="cuda")
        return torch.randn(r, ld, dtype=dtype, device="cuda")[:, :c]
    a = mat(M, K, lda)
    b = mat(K, N, ldb) if b_major == "n" else mat(N, K, ldb)
    ref = a.float() @ (b.float() if b_major == "n" else b.float().T)
    return a, b, ref


GEMM_SHAPES = [(777, 333, 130), (1, 1, 8), (1, 1, 1), (3, 5, 7), (4000, 3000, 1000),
               (16, 4096, 4096), (1, 4096, 4096), (64, 4096, 4096), (100, 1000, 10000),
               (129, 257, 1031), (1024, 1024, 16384)]


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("b_major", ["n", "k"])
def test_gemm_any_shape(shape, dtype, b_major):
    from kernels.nvidia.dispatch import choose_gemm, gemm
    a, b, ref = operands(*shape, dtype, b_major)
    out = torch.full(shape[:2], float("nan"), dtype=dtype, device="cuda")
    choice = choose_gemm(a, b, b_major=b_major)
    gemm(a, b, out, b_major=b_major)
    assert rel(out, ref) < TOL_GEMM[dtype], str(choice)


@pytest.mark.parametrize("lda, ldb", [(131, 335), (133, 341), (136, 339)])
@pytest.mark.parametrize("atom", ["auto", "mma"])
def test_gemm_odd_leading_dimensions(lda, ldb, atom):
    """Rows that start misaligned (odd or 2-mod-4 leading dimensions): every vector through
    the edge copy, interior tiles included."""
    from kernels.nvidia.dispatch import gemm
    for b_major in ("n", "k"):
        a, b, ref = operands(300, 333, 130, torch.float16, b_major, lda, ldb)
        assert rel(gemm(a, b, b_major=b_major, atom=atom), ref) < 1e-3, b_major


@pytest.mark.skipif(not HOPPER, reason="wgmma (sm_90a) runs on compute capability 9.0 only")
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("tile", [(64, 64, 8), (64, 128, 8), (128, 256, 4)])
def test_split_k_configs(splits, tile):
    """Every split count (including more splits than k tiles, and a last split shorter than
    the others) on each candidate tile, with K tails."""
    from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig
    bm, bn, st = tile
    for dtype in (torch.float16, torch.bfloat16):
        for b_major in ("n", "k"):
            g = WgmmaGemm(WgmmaGemmConfig(dtype=DT[dtype], b_major=b_major, bm=bm, bn=bn,
                                          stages=st, split_k=True))
            for M, N, K in ((16, 4096, 4096), (200, 300, 1000), (1, 1, 8)):
                a, b, ref = operands(M, N, K, dtype, b_major)
                out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
                g(a, b, out, splits=splits)
                assert rel(out, ref) < TOL_GEMM[dtype], (g.cfg.name, M, N, K, splits)


@pytest.mark.skipif(not HOPPER, reason="the tile choice is for H100/H200")
def test_choice_uses_the_device_sm_count():
    from kernels.nvidia.dispatch import choose_gemm
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    c = choose_gemm(a, b)
    assert c.kind == "wgmma_tma" and c.config.bm == 64 and c.splits > 1, str(c)
    assert c.ctas <= sms and f"on {c.ctas} persistent CTAs" in c.reason


def test_split_k_refused_on_a_one_pass_config():
    from kernels.errors import LaunchError
    from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig
    a = torch.randn(8, 8, dtype=torch.float16, device="cuda")
    with pytest.raises(LaunchError, match="split-K"):
        WgmmaGemm(WgmmaGemmConfig())(a, a, splits=2)


# ------------------------------------------------------------------------------- decode

def decode_case(B, Hq, Hkv, Skv, D, dtype=torch.bfloat16, cache=None):
    """q (B, Hq, 1, D), k/v (B, Hkv, Skv, D) (views of a longer cache when ``cache`` is
    given) and the float32 reference (GQA: query head h reads KV head h // (Hq / Hkv))."""
    q = torch.randn(B, Hq, 1, D, dtype=dtype, device="cuda")
    n = cache or Skv
    k = torch.randn(B, Hkv, n, D, dtype=dtype, device="cuda")[:, :, :Skv]
    v = torch.randn(B, Hkv, n, D, dtype=dtype, device="cuda")[:, :, :Skv]
    return q, k, v, gqa_decode_reference(q, k, v)


DECODE_SHAPES = [(1, 32, 8, 100_000, 128), (64, 32, 8, 8192, 128), (2, 8, 1, 4097, 64),
                 (3, 12, 4, 1000, 256), (1, 6, 2, 513, 128), (2, 4, 4, 300, 128),
                 (1, 32, 2, 65, 64), (1, 32, 1, 131_072, 128), (4, 16, 16, 2049, 256),
                 (4, 32, 8, 4096, 256), (1, 64, 8, 5003, 256), (2, 10, 2, 777, 256)]


@pytest.mark.parametrize("shape", DECODE_SHAPES, ids=lambda s: "B{}H{}/{}S{}d{}".format(*s))
def test_decode_splitkv_gqa(shape):
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v, ref = decode_case(*shape)
    out = torch.full(q.shape, float("nan"), dtype=torch.float16, device="cuda")
    choice = choose_decode(q, k)
    assert choice.kind == "split_kv", str(choice)
    decode_attention(q, k, v, out=out)
    assert rel(out, ref) < 2e-3, str(choice)


@pytest.mark.parametrize("splits", [1, 2, 7, 300, 5000])
def test_decode_forced_split_counts(splits):
    """Any split count (more splits than keys clamps; short last split), a strided cache
    view, bf16 out."""
    from kernels.nvidia.dispatch import decode_attention
    q, k, v, ref = decode_case(2, 8, 2, 3001, 128, cache=4096)
    out = decode_attention(q, k, v, kv_splits=splits, out_dtype="bf16")
    assert out.dtype == torch.bfloat16 and rel(out, ref) < 1e-2


@pytest.mark.parametrize("hg,warps,splits", [(4, 4, None), (8, 2, 3), (3, 1, 1), (4, 8, 5000),
                                             (8, 4, 2)])
def test_decode_mma_d256_configs(hg, warps, splits):
    """The tensor-core decode at head_dim 256, every warp count it accepts, GQA groups of
    8 (hg 8 or two chunks of 4) and 3, ragged split tails, a strided cache view, bf16 out."""
    from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode
    group = 3 if hg == 3 else 8
    q, k, v, ref = decode_case(2, 2 * group, 2, 1999, 256, cache=2048)
    cfg = MmaDecodeConfig(out_dtype="bf16", head_dim=256, hg=hg, warps=warps)
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    MmaSplitKVDecode(cfg)(q, k, v, out=out, kv_splits=splits)
    assert rel(out, ref) < 1e-2, cfg.name


def test_decode_f16_inputs_and_scale():
    from kernels.nvidia.dispatch import decode_attention
    q, k, v, _ = decode_case(1, 8, 2, 777, 64, dtype=torch.float16)
    g = 4
    s = (q.float() @ k.float().repeat_interleave(g, 1).transpose(-1, -2)) * 0.3
    ref = torch.softmax(s, -1) @ v.float().repeat_interleave(g, 1)
    assert rel(decode_attention(q, k, v, scale=0.3), ref) < 2e-3


@pytest.mark.parametrize("shape", [(8, 32, 8, 17, 128), (1, 32, 32, 64, 64), (3, 24, 8, 33, 64)])
def test_decode_short_kv_on_the_ir_kernel(shape):
    """Skv 17-64 with few blocks: the verified IR kernel with one split (dispatch
    SHORT_IR_KEYS), odd hg included."""
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v, ref = decode_case(*shape)
    choice = choose_decode(q, k)
    assert choice.kind == "split_kv" and "verified" in choice.reason, str(choice)
    out = torch.full(q.shape, float("nan"), dtype=torch.float16, device="cuda")
    decode_attention(q, k, v, out=out)
    assert rel(out, ref) < 2e-3, str(choice)


def test_decode_short_kv_keeps_the_one_pass_kernel():
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v, ref = decode_case(256, 32, 32, 16, 128)
    assert choose_decode(q, k).kind == "one_pass"
    assert rel(decode_attention(q, k, v), ref) < 2e-3
