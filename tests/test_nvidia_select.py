"""Issue 20 on the CPU: the GEMM selection (one entry for both vendors, tiles against the SM
count, small-M tiles, split-K), the split-K k ranges, the split-KV decode's split choice and
its algorithm (a numpy model of the kernel's loop order, masks and exact merges), the edge
copy's semantics, and NVRTC compiles of every new kernel form without spills."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernels.errors import LaunchError
from kernels.select import main as select_main, select_gemm
from kernels.selection import H100, MI300X, GemmProblem, Target, nvidia_target
from kernels.nvidia.decode_splitkv import (MAX_SPLITS, MIN_KEYS_PER_SPLIT, SplitKVDecodeConfig,
                                           choose_splits, emit_splitkv_decode, heads_per_block)
from kernels.nvidia.gemm import CudaGemmConfig, emit_gemm
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.gemm_select import WGMMA_TILES, resident
from kernels.nvidia.wgmma import WgmmaGemmConfig, emit_wgmma_gemm, split_ranges
from kernels.toolchain.nvrtc import kernel_names, nvcc_path, nvrtc_available

HAVE_COMPILER = nvrtc_available() or nvcc_path() is not None


# ------------------------------------------------------------------ GEMM selection

@pytest.mark.parametrize("mnk, bm, bn, splits, a_rows", [
    ((16, 4096, 4096), 64, 64, 2, 16),   # decode-time linear layer: 64x64, 16-row A boxes
    ((1, 4096, 4096), 64, 64, 2, 8), ((32, 4096, 4096), 64, 64, 2, 32),
    ((64, 4096, 4096), 64, 64, 2, 0), ((8, 8192, 8192), 64, 64, 1, 8),
    ((128, 4096, 14336), 64, 64, 1, 0), ((1024, 1024, 16384), 128, 128, 2, 0),
    ((16, 14336, 4096), 64, 128, 1, 16)])
def test_h100_split_choices(mnk, bm, bn, splits, a_rows):
    """Skinny / long-K problems: the split-K TMA kernel, units filling the SMs at most once,
    A boxes of only the rows M has (the H100 figures of
    benchmarks/results/gpu_gemm_low_h100_2026-11-24_1240Z.txt: each of these was the fastest
    one-CTA-per-SM candidate of its row, or within 0.1 us of it)."""
    c = select_gemm(GemmProblem(*mnk, dtype="bf16"), H100)
    assert (c.kind, c.config.bm, c.config.bn, c.splits) == ("wgmma_tma", bm, bn, splits)
    assert c.config.a_rows == a_rows and c.config.ctas_per_sm == 1
    assert c.config.split_k and c.config.store == "direct" and c.ctas <= 132
    assert str(c).startswith("wgmma_tma lg_wgmma_tma_bf16") and "est." in c.reason
    assert ("A boxes of" in c.reason) == bool(a_rows)


@pytest.mark.parametrize("m, bm, rows", [(1, 64, 8), (8, 64, 8), (9, 64, 16), (16, 64, 16),
                                         (17, 64, 32), (32, 64, 32), (33, 64, 0), (64, 64, 0),
                                         (16, 128, 0)])
def test_a_box_rows_hold_m(m, bm, rows):
    from kernels.nvidia.gemm_select import a_box_rows
    assert a_box_rows(GemmProblem(m, 4096, 4096, dtype="bf16"), bm) == rows


@pytest.mark.parametrize("mnk, dtype, b_major, pad", [
    ((4000, 3000, 1000), "f16", "n", (128, "b")),     # 6000-byte B rows straddle lines
    ((2048, 3000, 2048), "bf16", "n", (128, "b")),
    ((4000, 3000, 1000), "f16", "k", (0, "ab")),      # K-major B: rows of K, measured little
    ((4096, 4096, 4096), "f16", "n", (0, "ab")),      # on lines already
    ((4000, 3000, 64), "f16", "n", (0, "ab"))])       # the copy would cost more than it saves
def test_straddling_b_rows_are_copied_when_it_pays(mnk, dtype, b_major, pad):
    c = select_gemm(GemmProblem(*mnk, dtype=dtype, b_major=b_major), H100)
    assert c.kind == "wgmma_tma" and (c.pad_rows, c.pad_operands) == pad
    assert ("straddle" in c.reason) == bool(pad[0])


@pytest.mark.parametrize("mnk, bn, stages, store", [
    ((4000, 3000, 1000), 256, 3, "tma"),        # N = 3000: 6000-byte C rows, 16-byte aligned
    ((8192, 8192, 8192), 256, 3, "tma"), ((4096, 14336, 4096), 256, 3, "tma"),
    ((2048, 2048, 2048), 256, 3, "tma")])
def test_h100_big_choices(mnk, bn, stages, store):
    c = select_gemm(GemmProblem(*mnk, dtype="bf16"), H100)
    assert c.kind == "wgmma_tma" and c.splits == 1 and not c.config.split_k
    assert (c.config.bm, c.config.bn, c.config.stages, c.config.store) == (128, bn, stages, store)
    assert c.ctas == min(132, -(-mnk[0] // 128) * -(-mnk[1] // bn)) and "persistent" in c.reason
    # 16-byte aligned rows are copied only for a B whose rows straddle 128-byte lines
    # (4000x3000x1000, test_straddling_b_rows_are_copied_when_it_pays)
    assert c.pad_rows == (128 if mnk == (4000, 3000, 1000) else 0)


@pytest.mark.parametrize("mnk, bm", [((777, 333, 130), 64), ((1, 1, 8), 64)])
def test_h100_odd_rows_keep_the_cp_async_kernel(mnk, bm):
    """Rows that are not 16-byte aligned on small problems: the padding copy would cost more
    than it saves, the cp.async kernel's edge copy runs them."""
    c = select_gemm(GemmProblem(*mnk, dtype="bf16", vec=1), H100)
    assert (c.kind, c.config.bm, c.splits) == ("wgmma", bm, 1)
    assert "132 SMs" in c.reason and str(c).startswith("wgmma lg_wgmma_bf16")


def test_the_sm_count_changes_the_choice():
    p = GemmProblem(16, 4096, 4096, "bf16")
    few = select_gemm(p, replace(H100, sms=16))
    many = select_gemm(p, H100)
    assert few.splits < many.splits and few.ctas == 16 and "16 persistent CTAs" in few.reason


def test_narrow_rows():
    # 8-byte rows of a big problem: copied into aligned buffers for the TMA kernel, said so
    c = select_gemm(GemmProblem(4096, 4096, 4100, vec=4), H100)
    assert c.kind == "wgmma_tma" and "padded buffers" in c.reason
    c = select_gemm(GemmProblem(4097, 4097, 4097, vec=1), H100)
    assert c.kind == "wgmma_tma" and "padded buffers" in c.reason and c.config.store == "direct"
    assert c.pad_rows == 128
    # a small one with 8-byte rows keeps wgmma's edge copy (the pad would not pay)
    c = select_gemm(GemmProblem(300, 300, 300, vec=1), H100)
    assert c.kind == "wgmma" and "edge copy" in c.reason
    # no wgmma off sm_90a
    c = select_gemm(GemmProblem(777, 333, 130, vec=1), nvidia_target((8, 0), 108))
    assert c.kind == "mma" and c.config.vec == 8 and "sm_80" in c.reason


def test_amd_target_answers_in_the_same_shape():
    c = select_gemm(GemmProblem(777, 333, 130), MI300X)
    assert c.kind == "amd" and (c.config.m, c.config.n, c.config.k) == (777, 333, 130)
    assert "gfx942" in c.reason and c.splits == 1


def test_amd_target_uses_the_amd_tile_choice():
    """Regression: the one selection entry answered MI300X with GemmConfig's fixed default
    ("no shape-aware choice yet") while `compile gemm` used kernels.amd.gemm_select."""
    from kernels.amd.gemm_select import select_gemm as select_amd_gemm
    for shape in ((4096, 4096, 4096), (16, 4096, 4096)):
        c = select_gemm(GemmProblem(*shape), MI300X)
        amd = select_amd_gemm(*shape, arch="gfx942").config
        assert (c.config.block_m, c.config.block_n, c.config.block_k, c.config.stages,
                c.config.schedule) == (amd.block_m, amd.block_n, amd.block_k, amd.stages,
                                       amd.schedule)
        assert "chosen " in c.reason and "shape-aware" not in c.reason
        assert c.ctas == -(-shape[0] // amd.block_m) * -(-shape[1] // amd.block_n)


@pytest.mark.parametrize("kw, match", [
    (dict(m=0, n=1, k=1), "m=0"), (dict(m=1, n=1, k=1, dtype="f32"), "dtype"),
    (dict(m=1, n=1, k=1, b_major="t"), "b_major"), (dict(m=1, n=1, k=1, vec=3), "vec")])
def test_problem_validation(kw, match):
    with pytest.raises(LaunchError, match=match):
        GemmProblem(**kw)


def test_selection_errors():
    with pytest.raises(LaunchError, match="vendor"):
        select_gemm(GemmProblem(8, 8, 8), Target("intel", "xe", 64))
    with pytest.raises(LaunchError, match="sm_90a"):
        select_gemm(GemmProblem(8, 8, 8), nvidia_target((8, 9), 128), atom="wgmma")
    with pytest.raises(LaunchError, match="atom"):
        select_gemm(GemmProblem(8, 8, 8), H100, atom="tcgen05")


def test_select_cli(capsys):
    assert select_main(["16,4096,4096", "--dtype", "bf16"]) == 0
    assert "64x64x64_s12_ds_ski_a16, split-K 2" in capsys.readouterr().out
    assert select_main(["16,4096"]) == 2
    assert "error" in capsys.readouterr().err


def test_candidate_tiles_fit_the_residency_they_assume():
    for bm, bn, stages in WGMMA_TILES:
        cfg = WgmmaGemmConfig(bm=bm, bn=bn, stages=stages)
        assert resident(cfg) == (2 if bm == 64 else 1), cfg.name


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100_000), st.sampled_from([16, 32, 64]), st.integers(1, 300))
def test_split_ranges_cover_every_k_tile_once(K, bk, splits):
    kt_per, n = split_ranges(K, bk, splits)
    kt = -(-K // bk)
    ranges = [(s * kt_per, min(kt, (s + 1) * kt_per)) for s in range(n)]   # the kernel's kt0/KTn
    assert n <= splits and all(lo < hi for lo, hi in ranges)                # none empty
    assert [t for lo, hi in ranges for t in range(lo, hi)] == list(range(kt))


def test_split_ranges_refuse_bad_counts():
    with pytest.raises(LaunchError, match="positive"):
        split_ranges(64, 64, 0)


# ------------------------------------------------------------------ generated GEMM sources

def test_edge_copy_in_every_gemm_source():
    for src in (emit_gemm(CudaGemmConfig()), emit_gemm(CudaGemmConfig(vec=2)),
                emit_wgmma_gemm(WgmmaGemmConfig())):
        assert "lg_copy_edge<" in src and "rows must hold" not in src
        # the fast path needs aligned leading dimensions and a whole k tile
        assert "((lda | ldb) & " in src and "if (full && k0 + " in src


def test_split_k_source_has_both_kernels():
    cfg = WgmmaGemmConfig(bm=64, bn=128, stages=4, split_k=True)
    src = emit_wgmma_gemm(cfg)
    assert kernel_names(src) == (cfg.name, cfg.reduce_name)
    assert "blockIdx.y * kt_per" in src and "float* __restrict__ C" in src


@pytest.mark.skipif(not HAVE_COMPILER, reason="needs NVRTC (cuda-python) or nvcc")
def test_new_kernel_forms_compile_without_spills(tmp_path):
    from kernels.cache import Cache
    from kernels.toolchain.nvrtc import compile_cuda
    cfgs = [WgmmaGemmConfig(bm=bm, bn=bn, stages=s, split_k=sk, dtype="bf16")
            for bm, bn, s in WGMMA_TILES for sk in (False, True)]
    srcs = [(c.arch, c.name, emit_wgmma_gemm(c)) for c in cfgs]
    srcs.append(("sm_90", "gemm_v8", emit_gemm(CudaGemmConfig())))   # (vec=2 spilled before too)
    for d, hg in ((64, 8), (128, 4), (128, 1), (256, 8), (256, 3)):
        c = SplitKVDecodeConfig(head_dim=d, hg=hg, chunk=4 if hg <= 4 else 2)
        srcs.append((c.arch, c.name, emit_splitkv_decode(c)))
    for arch, name, src in srcs:
        m = compile_cuda(src, arch, ["--ptxas-options=-v"], name=f"{name}.cu",
                         cache=Cache(tmp_path))
        if m.backend == "nvrtc":
            assert " 0 bytes spill stores" in m.log and "serialized" not in m.log, (name, m.log)


def edge_copy_model(row: np.ndarray, start: int, n: int, vec: int = 8) -> np.ndarray:
    """What lg_copy_edge<2*vec> stores: the first n (clamped to 0..vec) elements, zeros after."""
    out = np.zeros(vec, row.dtype)
    m = max(0, min(n, vec))
    out[:m] = row[start:start + m]
    return out


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 70), st.integers(0, 69))
def test_edge_copy_reads_nothing_past_the_row(K, c):
    """The kernel's valid count K - col never lets a vector read past the row end, and a whole
    row is reassembled exactly from its vectors (zero-filled tail)."""
    row = np.arange(1, K + 1, dtype=np.int64)
    got = np.concatenate([edge_copy_model(row, s, K - s) for s in range(0, K + 7, 8)])
    assert np.array_equal(got[:K], row) and not got[K:].any()
    vec = edge_copy_model(row, min(c, K), K - min(c, K))
    assert (vec[max(0, K - min(c, K)):] == 0).all()


# ------------------------------------------------------------------ split-KV decode

@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 300_000), st.integers(1, 200))
def test_choose_splits_never_leaves_a_split_empty(blocks, skv, sms):
    n, chunk, why = choose_splits(blocks, skv, sms)
    assert 1 <= n <= MAX_SPLITS and (n - 1) * chunk < skv <= n * chunk
    assert n == 1 or chunk >= MIN_KEYS_PER_SPLIT
    assert f"{n} split(s)" in why


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 300_000), st.integers(1, 200), st.integers(1, 4))
def test_whole_waves_never_start_a_partial_wave(blocks, skv, sms, bps):
    """whole_waves: blocks x splits fills whole waves of sms x bps blocks (at most the
    waves the plain count rounds to), no split empty; one split when one block row is
    already more than a wave."""
    slots = sms * bps
    n0 = choose_splits(blocks, skv, sms, blocks_per_sm=bps)[0]
    n, chunk, why = choose_splits(blocks, skv, sms, blocks_per_sm=bps, whole_waves=True)
    assert 1 <= n <= MAX_SPLITS and (n - 1) * chunk < skv <= n * chunk
    assert n == 1 or blocks * n <= max(1, round(blocks * n0 / slots)) * slots
    assert "whole wave" in why


def test_whole_waves_at_the_d256_suite_shapes():
    """H100 sweep (docs/PERFORMANCE.md): 8 splits of 32 blocks (one wave of 264) 0.82 of a
    copy where the plain count's 9 (288 blocks) measured 0.62; 16 of 16 blocks 0.84 vs 0.61."""
    assert choose_splits(32, 4096, 132, blocks_per_sm=2)[0] == 9
    assert choose_splits(32, 4096, 132, blocks_per_sm=2, whole_waves=True)[0] == 8
    assert choose_splits(16, 16384, 132, blocks_per_sm=2)[0] == 17
    assert choose_splits(16, 16384, 132, blocks_per_sm=2, whole_waves=True)[0] == 16


def test_choose_splits_fills_the_gpu_when_batch_is_small():
    n, _, _ = choose_splits(8, 100_000, 132)      # B1, 8 KV heads, 100K keys
    assert n * 8 >= 4 * 132
    assert choose_splits(983040, 16, 132)[0] == 1  # the seed configs: enough rows already
    assert choose_splits(8, 1000, 132, kv_splits=5000)[0] == 1000   # clamped to one key each
    with pytest.raises(LaunchError, match="kv_splits"):
        choose_splits(8, 1000, 132, kv_splits=0)


@pytest.mark.parametrize("group, hg", [(1, 1), (4, 4), (8, 4), (16, 4), (32, 4), (6, 3), (12, 4),
                                       (9, 3), (7, 1), (11, 1), (2, 2)])
def test_heads_per_block(group, hg):
    assert heads_per_block(group) == hg


def test_decode_config_errors():
    for kw, match in ((dict(head_dim=96), "head_dim"), (dict(hg=9), "hg=9"),
                      (dict(chunk=3), "chunk"), (dict(warps=8, hg=8, head_dim=64), "48 KiB")):
        with pytest.raises(AttentionConfigError, match=match):
            emit_splitkv_decode(SplitKVDecodeConfig(**kw))


def splitkv_model(q, k, v, cfg: SplitKVDecodeConfig, n_splits: int, kv_chunk: int,
                  scale: float) -> np.ndarray:
    """The kernel's algorithm in numpy, in its order: per split, row group rg takes keys
    base + rg + R*s (masked past the split), online softmax in base 2 per chunk, the row groups
    merged by 2^(m_r - M), the splits merged by their LSE.  q (Hq, D); k/v (Hkv, Skv, D)."""
    Hq, D = q.shape
    Hkv, Skv, _ = k.shape
    group, R, C = Hq // Hkv, cfg.row_groups, cfg.chunk
    sl2 = scale * math.log2(math.e)
    out = np.zeros((Hq, D))
    for h in range(Hq):
        hk = h // group
        parts = []
        for sp in range(n_splits):
            s0, s1 = sp * kv_chunk, min(Skv, (sp + 1) * kv_chunk)
            ms, ls, accs = [], [], []
            for rg in range(R):
                m, l, acc = -np.inf, 0.0, np.zeros(D)
                for base in range(s0, s1, R * C):
                    ts = [base + rg + R * s for s in range(C)]
                    sc = np.array([q[h] @ k[hk, t] * sl2 if t < s1 else -np.inf for t in ts])
                    mx = max(m, sc.max())
                    alpha = 1.0 if mx == m else 2.0 ** (m - mx)
                    m, l, acc = mx, l * alpha, acc * alpha
                    for s, t in enumerate(ts):
                        if sc[s] != -np.inf:
                            p = 2.0 ** (sc[s] - m)
                            l, acc = l + p, acc + p * v[hk, t]
                ms.append(m), ls.append(l), accs.append(acc)
            M = max(ms)
            w = [0.0 if mm == -np.inf else 2.0 ** (mm - M) for mm in ms]
            L = sum(wi * li for wi, li in zip(w, ls))
            parts.append((M + math.log2(L), sum(wi * ai for wi, ai in zip(w, accs)) / L))
        lmax = max(p[0] for p in parts)
        ws = [2.0 ** (p[0] - lmax) for p in parts]
        out[h] = sum(wi * p[1] for wi, p in zip(ws, parts)) / sum(ws)
    return out


@pytest.mark.parametrize("Hq, Hkv, Skv, D, n", [(4, 2, 37, 64, 1), (4, 2, 37, 64, 3),
                                                (6, 2, 100, 64, 7), (2, 2, 5, 128, 5)])
def test_splitkv_algorithm_is_exact_softmax(Hq, Hkv, Skv, D, n):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(Hq, D)), rng.normal(size=(Hkv, Skv, D)), rng.normal(size=(Hkv, Skv, D))
    cfg = SplitKVDecodeConfig(head_dim=D, hg=heads_per_block(Hq // Hkv), chunk=2)
    chunk = -(-Skv // n)
    n = -(-Skv // chunk)
    got = splitkv_model(q, k, v, cfg, n, chunk, 1 / math.sqrt(D))
    g = Hq // Hkv
    s = np.einsum("hd,hsd->hs", q, np.repeat(k, g, 0)) / math.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("hs,hsd->hd", p / p.sum(-1, keepdims=True), np.repeat(v, g, 0))
    assert np.allclose(got, ref, atol=1e-12)


def test_splitkv_source_shape():
    cfg = SplitKVDecodeConfig(head_dim=128, hg=4)
    src = emit_splitkv_decode(cfg)
    assert kernel_names(src) == (cfg.name, cfg.combine_name)
    # the loop every lane runs the same number of times (shuffles need the whole warp)
    assert "for (int base = s0; base < s1; base +=" in src
    assert src.count("__shfl_xor_sync") == int(math.log2(cfg.lanes_per_row))


# ------------------------------------------------------------------------ prefill selection

from kernels.nvidia.prefill_select import (WGMMA_PREFILL_TILES, WS_PREFILL_TILES,  # noqa: E402
                                           choose_prefill)
from kernels.nvidia.wgmma_attention import WgmmaFlashConfig, plan_wgmma_flash  # noqa: E402
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, plan_ws_flash  # noqa: E402


@pytest.mark.parametrize("key", sorted(WGMMA_PREFILL_TILES) +
                         [(d, c) for d in sorted(WS_PREFILL_TILES) for c in (False, True)])
def test_every_prefill_tile_is_a_proved_configuration(key):
    d, causal = key
    choice = choose_prefill("bf16", d, causal, "wgmma")
    assert choice.atom == "wgmma" and choice.config.causal == causal
    assert choice.config.head_dim == d
    plan = (plan_ws_flash if isinstance(choice.config, WsFlashConfig) else plan_wgmma_flash)
    assert all(r.holds for r in plan(choice.config).checks.values())
    assert "H100 sweep" in str(choice)


@pytest.mark.parametrize("d, causal, kind, tile", [
    (256, False, WsFlashConfig, (128, 64)), (256, True, WsFlashConfig, (128, 64)),
    (64, False, WgmmaFlashConfig, (64, 128)), (64, True, WgmmaFlashConfig, (64, 128)),
    (128, True, WsFlashConfig, (128, 128)), (128, False, WsFlashConfig, (128, 192))])
def test_prefill_tiles_follow_the_measurements(d, causal, kind, tile):
    cfg = choose_prefill("f16", d, causal, "wgmma").config
    assert type(cfg) is kind and (cfg.bm, cfg.bn) == tile


@pytest.mark.parametrize("seq, causal, tma_ok, bn, stages", [
    (8192, False, True, 192, 2), (4097, False, True, 192, 2), (0, False, True, 192, 2),
    (1025, False, True, 192, 2), (1024, False, True, 128, 3), (512, False, True, 128, 3),
    (8192, True, True, 128, 2),          # causal keeps FA3's 128 (the diagonal blocks),
    (4096, True, True, 128, 2),          # 2 stages with the deferred P V wait (CAUSAL_LONG)
    (512, True, True, 128, 3),           # short causal: the persistent kernel, 3 stages
    (8192, False, False, 128, 2)])       # the cp.async producer was not measured at 192
def test_d128_key_block_follows_the_sequence_length(seq, causal, tma_ok, bn, stages):
    from kernels.nvidia.prefill_select import WIDE_KEYS_MIN_SEQ
    cfg = choose_prefill("bf16", 128, causal, "wgmma", tma_ok=tma_ok, seq=seq).config
    assert (cfg.bn, cfg.stages) == (bn, stages), (seq, causal, tma_ok)
    assert (bn == 192) == (not causal and tma_ok and not 0 < seq <= WIDE_KEYS_MIN_SEQ)
    assert cfg.defer_pv_wait == (causal and tma_ok and not 0 < seq <= 1024)
    assert all(r.holds for r in plan_ws_flash(cfg).checks.values())


def _fake_flash_builds(monkeypatch, dispatch):
    """flash_attention on a pretend compute capability 9.0 device, with the kernels it would
    build recorded instead of compiled: the returned list gets each configuration.  The
    choices are cached per key: start clean, and leave none made with the fakes."""
    built = []
    dispatch.clear_plans()
    monkeypatch.setattr(dispatch, "_FLASH_PLANS", type(dispatch._FLASH_PLANS)())
    monkeypatch.setattr(dispatch, "capability_of", lambda t: (9, 0))
    monkeypatch.setattr(dispatch, "require_gpu_tensors", lambda where, **tensors: None)
    monkeypatch.setattr(dispatch, "compiled_flash",
                        lambda cfg: (lambda q, k, v, out=None, scale=None: built.append(cfg)))
    return built


@pytest.mark.parametrize("sq, skv, bn", [(8192, 512, 128), (512, 8192, 192), (1000, 4097, 192)])
def test_d128_key_block_reads_the_key_length_through_flash_attention(monkeypatch, sq, skv, bn):
    """The key loop decides: long queries over 512 keys keep 128-key blocks (3 blocks of 192
    measured 0.69x against 0.75x at S512), a short query block over 8K keys takes 192."""
    import torch
    from kernels.nvidia import dispatch
    assert choose_prefill("bf16", 128, False, "wgmma", seq=max(sq, skv), seq_kv=skv).config.bn == bn
    built = _fake_flash_builds(monkeypatch, dispatch)
    q = torch.zeros(1, 2, sq, 128, dtype=torch.bfloat16)
    kv = torch.zeros(1, 2, skv, 128, dtype=torch.bfloat16)
    dispatch.flash_attention(q, kv, kv)
    assert built[-1].bn == bn and built[-1].loader == "tma"


def test_prefill_choice_off_hopper_and_errors():
    c = choose_prefill("f16", 256, True, "mma")
    assert c.atom == "mma" and type(c.config).__name__ == "FlashConfig" and c.config.causal
    with pytest.raises(LaunchError, match="head_dim 96"):
        choose_prefill("f16", 96, False, "wgmma")
    with pytest.raises(LaunchError, match="atom"):
        choose_prefill("f16", 128, False, "auto")


def test_flash_attention_dispatch_on_a_hopper_device(monkeypatch):
    """Without a GPU: flash_attention on a (pretend) compute capability 9.0 device builds the
    choose_prefill configuration per head_dim, and mma.sync when asked."""
    import torch
    from kernels.nvidia import dispatch
    built = _fake_flash_builds(monkeypatch, dispatch)
    for d, kind in ((128, "WsFlashConfig"), (64, "WgmmaFlashConfig"), (256, "WsFlashConfig")):
        q = torch.zeros(1, 2, 8, d, dtype=torch.bfloat16)
        dispatch.flash_attention(q, q, q, causal=True)
        assert type(built[-1]).__name__ == kind and built[-1].causal and built[-1].dtype == "bf16"
    dispatch.flash_attention(q, q, q, atom="mma")
    assert type(built[-1]).__name__ == "FlashConfig"
    with pytest.raises(LaunchError, match="head_dim 96"):
        dispatch.flash_attention(q[..., :96], q[..., :96], q[..., :96], atom="wgmma")


def test_d128_prefill_takes_tma_unless_the_tensors_forbid_it(monkeypatch):
    """d128: the TMA producer with 3 stages (H100 sweep); a tensor TMA cannot address (here a
    broadcast head stride of 0) gets the cp.async producer, chosen by flash_attention."""
    import torch
    from kernels.nvidia import dispatch
    assert choose_prefill("bf16", 128, False, "wgmma").config.loader == "tma"
    fb = choose_prefill("bf16", 128, True, "wgmma", tma_ok=False)
    assert fb.config.loader == "cp.async" and "TMA cannot address" in str(fb)
    built = _fake_flash_builds(monkeypatch, dispatch)
    q = torch.zeros(1, 4, 8, 128, dtype=torch.bfloat16)
    dispatch.flash_attention(q, q, q)
    assert (built[-1].loader, built[-1].stages) == ("tma", 3)
    assert not built[-1].persistent                  # not causal
    kv = torch.zeros(1, 1, 8, 128, dtype=torch.bfloat16).expand(1, 4, 8, 128)
    dispatch.flash_attention(q, kv, kv)
    assert (built[-1].loader, built[-1].stages) == ("cp.async", 2)
    dispatch.flash_attention(q, q, q, causal=True)    # short causal: persistent (S512 0.91x)
    assert built[-1].persistent and built[-1].loader == "tma"
    assert built[-1].unit_heads == 4                 # chunks of 4 heads (0.85x in one chunk)
    long_q = torch.zeros(1, 1, 2048, 128, dtype=torch.bfloat16)
    dispatch.flash_attention(long_q, long_q, long_q, causal=True)
    assert not built[-1].persistent                  # S8K causal measured 0.61x persistent
    assert built[-1].unit_heads == 0                 # and 0.86-0.93x in chunks of 1-8 heads
    # longer causal: 2 stages with the P V wait deferred (CAUSAL_LONG); d256 defers it too
    assert (built[-1].stages, built[-1].defer_pv_wait, built[-1].loader) == (2, True, "tma")
    q256 = torch.zeros(1, 1, 64, 256, dtype=torch.bfloat16)
    for causal in (False, True):
        dispatch.flash_attention(q256, q256, q256, causal=causal)
        assert built[-1].head_dim == 256 and built[-1].defer_pv_wait
