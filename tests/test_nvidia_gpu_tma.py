"""The TMA / warp-specialised / persistent wgmma GEMM on an H100/H200 (skipped elsewhere):
every form against a float32 torch reference, outputs poisoned with NaN first.

    python3 -m pytest -m gpu tests/test_nvidia_gpu_tma.py -q
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernels.cuda.launch import cuda_available  # noqa: E402

HOPPER = cuda_available() and torch.cuda.get_device_capability(0) == (9, 0)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not HOPPER, reason="needs an H100/H200 (sm_90a), torch with "
                                 "CUDA and cuda-python")]

TOL = {torch.float16: 1e-3, torch.bfloat16: 6e-3}
DT = {torch.float16: "f16", torch.bfloat16: "bf16"}


def rel(out, ref):
    out, ref = out.float(), ref.float()
    assert torch.isfinite(out).all(), "non-finite output (unwritten or NaN)"
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def case(M, N, K, dtype, b_major):
    a = torch.randn(M, K, dtype=dtype, device="cuda")
    b = torch.randn((K, N) if b_major == "n" else (N, K), dtype=dtype, device="cuda")
    ref = a.float() @ (b.float() if b_major == "n" else b.float().T)
    return a, b, ref


@pytest.mark.parametrize("form", [dict(bn=256, stages=3), dict(bn=128, stages=6),
                                  dict(bn=256, stages=3, store="direct"),
                                  dict(bn=192, stages=3)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("b_major", ["n", "k"])
def test_tma_gemm_forms(form, dtype, b_major):
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    g = compiled_gemm(TmaGemmConfig(dtype=DT[dtype], b_major=b_major, **form))
    # partial tiles in M, N and K; several tiles per persistent CTA; one tiny problem
    for M, N, K in ((1000, 1032, 520), (4096, 4096, 256), (8, 8, 8), (129, 264, 4104)):
        a, b, ref = case(M, N, K, dtype, b_major)
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        g(a, b, out)
        assert rel(out, ref) < TOL[dtype], (g.cfg.name, M, N, K)


@pytest.mark.parametrize("splits", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("tile", [(64, 128, 8), (64, 256, 5), (128, 128, 6), (64, 64, 12)])
def test_tma_split_k(splits, tile):
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    bm, bn, st = tile
    for dtype in (torch.float16, torch.bfloat16):
        for b_major in ("n", "k"):
            g = compiled_gemm(TmaGemmConfig(dtype=DT[dtype], b_major=b_major, bm=bm, bn=bn,
                                            stages=st, store="direct", split_k=True))
            for M, N, K in ((16, 4096, 4096), (200, 304, 1000), (1, 8, 8)):
                a, b, ref = case(M, N, K, dtype, b_major)
                out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
                g(a, b, out, splits=splits)
                assert rel(out, ref) < TOL[dtype], (g.cfg.name, M, N, K, splits)


@pytest.mark.parametrize("M, N, K", [(1025, 1031, 1027), (4097, 4097, 4097)])
def test_unaligned_operands_are_padded_for_tma(M, N, K):
    """Odd leading dimensions: dispatch copies A and B into aligned buffers (the selection
    says so), C takes the direct stores."""
    from kernels.nvidia.dispatch import choose_gemm, gemm
    a, b, ref = case(M, N, K, torch.float16, "n")
    c = choose_gemm(a, b)
    assert c.kind == "wgmma_tma" and "padded" in c.reason and c.config.store == "direct"
    assert c.pad_rows == 128
    assert rel(gemm(a, b), ref) < TOL[torch.float16]


def test_unaligned_out_takes_direct_stores():
    from kernels.nvidia.dispatch import choose_gemm, gemm
    a, b, ref = case(2048, 2048, 512, torch.bfloat16, "n")
    assert choose_gemm(a, b).config.store == "tma"
    buf = torch.full((2048, 2052), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = buf[:, 2:2050]                     # rows start 4 bytes off 16
    gemm(a, b, out)
    assert rel(out, ref) < TOL[torch.bfloat16]
    assert torch.isnan(buf[:, :2]).all() and torch.isnan(buf[:, 2050:]).all()


def test_skinny_choices_run_and_match():
    from kernels.nvidia.dispatch import choose_gemm, gemm
    for M, N, K in ((1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 14336)):
        a, b, ref = case(M, N, K, torch.bfloat16, "n")
        c = choose_gemm(a, b)
        # one split (128x4096x14336) runs the non-split direct store (the IR kernel)
        assert c.kind == "wgmma_tma" and (c.config.split_k or "one split" in c.reason), str(c)
        assert rel(gemm(a, b), ref) < TOL[torch.bfloat16], str(c)


def test_refusals():
    from kernels.errors import LaunchError
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    g = compiled_gemm(TmaGemmConfig())
    a = torch.randn(64, 130, dtype=torch.float16, device="cuda")[:, :129]
    b = torch.randn(129, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(LaunchError, match="16-byte aligned"):
        g(a, b)
    x = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(LaunchError, match="split-K"):
        g(x, x, splits=2)
    with pytest.raises(LaunchError, match="CUDA tensors"):
        g(x.cpu(), x.cpu())


@pytest.mark.parametrize("tile", [(64, 128, 8), (128, 128, 6)])
def test_inline_split_k_is_bitwise_the_reduce_kernel(tile):
    """The one-launch split-K (the last split CTA of each tile reduces) against the two-launch
    form at edge shapes and several split counts, twice in a row (the counters the first call
    left at zero are re-used) and on a second stream (its own workspace)."""
    from dataclasses import replace
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    bm, bn, st = tile
    side = torch.cuda.Stream()
    for dtype in (torch.float16, torch.bfloat16):
        base = TmaGemmConfig(dtype=DT[dtype], bm=bm, bn=bn, stages=st, store="direct",
                             split_k=True)
        two, one = compiled_gemm(base), compiled_gemm(replace(base, reduce="inline"))
        for M, N, K in ((16, 4096, 4096), (200, 304, 1000), (1, 8, 8), (77, 1000, 3000)):
            a, b, ref = case(M, N, K, dtype, "n")
            for splits in (1, 3, 16):
                want = two(a, b, splits=splits)
                got = [one(a, b, splits=splits), one(a, b, splits=splits)]
                with torch.cuda.stream(side):
                    got.append(one(a, b, splits=splits))
                torch.cuda.synchronize()
                for g in got:
                    assert torch.equal(want.view(torch.int16), g.view(torch.int16)), \
                        (one.cfg.name, M, N, K, splits)
                assert rel(got[0], ref) < TOL[dtype]


@pytest.mark.parametrize("a_rows", [8, 16, 32])
@pytest.mark.parametrize("bn, stages", [(64, 12), (128, 8)])
def test_short_a_box_is_bitwise_the_whole_box(a_rows, bn, stages):
    """``a_rows``: A's TMA box carries only ``a_rows`` rows and the wgmma reads stale shared
    memory in the rest, which feeds only C rows past M: the output is bitwise the whole box's
    (same k order) at edge shapes and split counts, and no element past M or N is written."""
    from dataclasses import replace
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    for dtype in (torch.float16, torch.bfloat16):
        for b_major in ("n", "k"):
            whole = TmaGemmConfig(dtype=DT[dtype], b_major=b_major, bm=64, bn=bn, stages=stages,
                                  store="direct", split_k=True, reduce="inline")
            g0, g1 = compiled_gemm(whole), compiled_gemm(replace(whole, a_rows=a_rows))
            for M in sorted({1, 5, a_rows}):
                for N, K in ((4096, 4096), (1000, 3000), (8, 8)):
                    a, b, ref = case(M, N, K, dtype, b_major)
                    for splits in (1, 3):
                        want = g0(a, b, splits=splits)
                        buf = torch.full((M + 1, N + 8), float("nan"), dtype=dtype, device="cuda")
                        got = g1(a, b, buf[:M, :N], splits=splits)
                        torch.cuda.synchronize()
                        assert torch.equal(want.view(torch.int16), got.view(torch.int16)), \
                            (g1.cfg.name, M, N, K, splits)
                        assert torch.isnan(buf[M]).all() and torch.isnan(buf[:, N:]).all()
                        assert rel(got, ref) < TOL[dtype]


def test_short_a_box_refuses_more_rows():
    from kernels.errors import LaunchError
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    g = compiled_gemm(TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=12, store="direct",
                                    split_k=True, reduce="inline", a_rows=16))
    a, b, _ = case(17, 256, 256, torch.bfloat16, "n")
    with pytest.raises(LaunchError, match="a_rows"):
        g(a, b)


@pytest.mark.parametrize("bn, stages", [(64, 6), (128, 4)])
def test_two_ctas_per_sm_is_bitwise_one(bn, stages):
    """``ctas_per_sm=2`` (half the register file each, grid up to 2 x SMs): bitwise the
    one-CTA kernel of the same tile at edge shapes and split counts."""
    from dataclasses import replace
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    for dtype in (torch.float16, torch.bfloat16):
        two = TmaGemmConfig(dtype=DT[dtype], bm=64, bn=bn, stages=stages, store="direct",
                            split_k=True, reduce="inline", ctas_per_sm=2)
        g2, g1 = compiled_gemm(two), compiled_gemm(replace(two, ctas_per_sm=1))
        for M, N, K in ((64, 4096, 4096), (200, 304, 1000), (1, 8, 8), (129, 1000, 4104)):
            a, b, ref = case(M, N, K, dtype, "n")
            for splits in (1, 2, 7):
                want, got = g1(a, b, splits=splits), g2(a, b, splits=splits)
                torch.cuda.synchronize()
                assert torch.equal(want.view(torch.int16), got.view(torch.int16)), \
                    (g2.cfg.name, M, N, K, splits)
                assert rel(got, ref) < TOL[dtype]


def test_straddling_b_is_copied_onto_lines():
    """4000x3000x1000 (6000-byte B rows): the selection copies B alone onto 128-byte lines;
    A runs as it is; the result matches, and a B whose rows already sit on lines is not
    copied (the runner is the kernel's bound call)."""
    from kernels.nvidia.dispatch import choose_gemm, gemm
    a, b, ref = case(4000, 3000, 1000, torch.float16, "n")
    c = choose_gemm(a, b)
    assert (c.pad_rows, c.pad_operands) == (128, "b") and "straddle" in c.reason
    assert rel(gemm(a, b), ref) < TOL[torch.float16]
    lines = torch.empty(1000, 3008, dtype=torch.float16, device="cuda")[:, :3000]
    lines.copy_(b)
    assert rel(gemm(a, lines), ref) < TOL[torch.float16]


def test_wide_padding_copy_is_bitwise():
    from kernels.nvidia.wgmma_tma import tma_padded, wide_copy_dtype
    t = torch.randn(1000, 3000, device="cuda").to(torch.bfloat16)
    t.view(torch.int16)[0, :4] = torch.tensor([0x7fc1, -1, 0x7f81, 0xff], dtype=torch.int16)
    assert wide_copy_dtype(t) is torch.int64
    for x in (t, t[:, 2:], t[:, 1:], t[3:]):
        p = tma_padded(x, 128)
        assert p.stride(0) * 2 % 128 == 0 and torch.equal(p.view(torch.int16), x.view(torch.int16))


def test_padded_call_copies_the_callers_b_every_call():
    """The padded runner's copier (element width and wide view decided once, issue 20) copies
    the caller's current B on every call: B rewritten in place, or another B of the same key,
    gives that B's product; on a second stream too (its own buffer)."""
    from kernels.nvidia.dispatch import gemm
    a, b, ref = case(4000, 3000, 1000, torch.float16, "n")
    c = torch.empty(4000, 3000, dtype=torch.float16, device="cuda")
    assert rel(gemm(a, b, c), ref) < TOL[torch.float16]
    b.neg_()
    gemm(a, b, c)
    assert rel(c, -ref) < TOL[torch.float16]
    b2 = torch.randn_like(b)
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        got = gemm(a, b2, c).clone()
    s.synchronize()
    assert rel(got, a.float() @ b2.float()) < TOL[torch.float16]
