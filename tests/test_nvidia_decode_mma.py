"""The tensor-core split-KV decode (kernels/nvidia/decode_mma.py): its fragment index maps
against the PTX m16n8k16 fragment rules by emulation, the P hi + lo split, the config errors,
the kernel choice, and NVRTC compiles (offline; the GPU tests are in test_nvidia_gpu_shapes)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.decode_mma import (MAX_STATIC_SMEM, MMA_BLOCKS_PER_SM, WAVE_FILL_SLACK,
                                       MmaDecodeConfig, emit_mma_decode, fragment_maps,
                                       heads_per_mma_block, merge_smem_bytes, mma_blocks_per_sm,
                                       mma_warps, wave_fill)
from kernels.nvidia.decode_splitkv import COMBINE_THREADS, choose_splits, combine_grid


# ---- the PTX ISA's m16n8k16 fragments (16-bit A/B, f32 C): lane = 4 g + t
def a_rc(lane, i):
    g, t = divmod(lane, 4)
    return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)


def b_kn(lane, i):
    g, t = divmod(lane, 4)
    return 2 * t + i % 2 + 8 * (i // 2), g


def c_rc(lane, i):
    g, t = divmod(lane, 4)
    return g + 8 * (i // 2), 2 * t + i % 2


def mma(afr, bfr, cfr):
    """Emulated mma.sync: per-lane fragments in, per-lane fragments out."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        for i in range(8):
            A[a_rc(lane, i)] = afr[lane][i]
        for i in range(4):
            B[b_kn(lane, i)] = bfr[lane][i]
    C = A @ B
    return [[cfr[lane][i] + C[c_rc(lane, i)] for i in range(4)] for lane in range(32)]


def emulate_tile(q, k, v, D):
    """One 16-key tile as the kernel computes it, from :func:`fragment_maps`: returns the
    scores (head, key) and O (head, D) = P V that the kernel writes to shared memory."""
    mp = fragment_maps(D)
    qk_d, v_key, o_d = mp["qk_d"], mp["v_key"], mp["o_d"]
    hg = q.shape[0]
    S = np.zeros((8, 16))
    cs = []
    for r in range(2):                                  # keys 0-7, 8-15
        c = [[0.0] * 4 for _ in range(32)]
        for s in range(D // 16):
            afr = [[0.0] * 8 for _ in range(32)]
            bfr = [[0.0] * 4 for _ in range(32)]
            for lane in range(32):
                g, t = divmod(lane, 4)
                for i, idx in ((0, 0), (1, 1), (4, 2), (5, 3)):   # a0 a1 a4 a5: head g
                    afr[lane][i] = q[g, qk_d(t, s, idx)] if g < hg else 0.0
                for i in range(4):
                    bfr[lane][i] = k[g + 8 * r, qk_d(t, s, i)]
            c = mma(afr, bfr, c)
        cs.append(c)
        for lane in range(32):
            g, t = divmod(lane, 4)
            S[g, 8 * r + 2 * t] = c[lane][0]
            S[g, 8 * r + 2 * t + 1] = c[lane][1]
    P = S                                              # the test checks P V with P = S
    O = np.zeros((8, D))
    for j in range(D // 16):
        afr = [[0.0] * 8 for _ in range(32)]
        bfr = []
        for lane in range(32):
            g, t = divmod(lane, 4)
            for i in range(8):   # a_i: D row o_d(g, j, h), key v_key(t, i % 2 + 2 (i // 4))
                afr[lane][i] = v[v_key(t, i % 2 + 2 * (i // 4)), o_d(g, j, (i // 2) % 2)]
            bfr.append([cs[0][lane][0], cs[0][lane][1], cs[1][lane][0], cs[1][lane][1]])
        c = mma(afr, bfr, [[0.0] * 4 for _ in range(32)])
        for lane in range(32):
            g, t = divmod(lane, 4)
            d = o_d(g, j, 0)
            O[2 * t, d], O[2 * t, d + 1] = c[lane][0], c[lane][2]
            O[2 * t + 1, d], O[2 * t + 1, d + 1] = c[lane][1], c[lane][3]
    return S[:hg], P[:hg] @ v, O[:hg]


@pytest.mark.parametrize("D,hg", [(64, 8), (128, 8), (128, 3), (256, 8), (256, 4)])
def test_fragment_maps_compute_scores_and_pv(D, hg):
    rng = np.random.default_rng(D + hg)
    q, k, v = rng.standard_normal((hg, D)), rng.standard_normal((16, D)), rng.standard_normal((16, D))
    S, ref_o, O = emulate_tile(q, k, v, D)
    assert np.allclose(S, q @ k.T)
    assert np.allclose(O, ref_o)


def test_a_wrong_fragment_map_is_caught(monkeypatch):
    """Planted bug: V's keys paired the wrong way (2t+1 first) must fail the emulation."""
    good = fragment_maps

    def bad(D):
        m = dict(good(D))
        m["v_key"] = lambda t, i: (2 * t + 1, 2 * t, 2 * t + 8, 2 * t + 9)[i]
        return m
    monkeypatch.setitem(globals(), "fragment_maps", bad)
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((8, 64)), rng.standard_normal((16, 64)), rng.standard_normal((16, 64))
    _, ref_o, O = emulate_tile(q, k, v, 64)
    assert not np.allclose(O, ref_o)


def test_source_prints_the_maps():
    """The printed source uses the maps the emulation checks: lane (g, t) loads K at element
    t D/4, V at g D/8 for keys 2t + (r & 1) + 8 (r >> 1), and writes O rows 2t, 2t+1."""
    for D in (64, 128, 256):
        src = emit_mma_decode(MmaDecodeConfig(head_dim=D))
        mp = fragment_maps(D)
        # the printed vector addresses, evaluated, are the maps: Q/K vector i of lane t at
        # 8 t + 32 i (words 2s, 2s+1 of vector s // 2), V vector i of lane g at 8 g + 64 i
        assert "hk * k_sh + t * 8;" in src and "Kp + key * k_ss + 32 * i" in src
        assert "(h0 + g) * q_sh + t * 8 + 32 * i" in src
        assert "hk * v_sh + g * 8;" in src and "Vp + key * v_ss + 64 * i" in src
        assert "const int d = g * 8 + 64 * (j / 4) + 2 * (j % 4);" in src
        for t in range(4):
            for s_ in range(D // 16):
                assert mp["qk_d"](t, s_, 0) == 8 * t + 32 * (s_ // 2) + 4 * (s_ % 2)
        for g in range(8):
            for j in range(D // 16):
                assert mp["o_d"](g, j, 0) == g * 8 + 64 * (j // 4) + 2 * (j % 4)
        assert "kb + 2 * t + (r & 1) + 8 * (r >> 1)" in src
        assert "s_acc[rg][2 * t][d]) = make_float2(acc[j][0], acc[j][2])" in src
        assert src.count("lg_mma_bf16(acc[") == 2 * (D // 16)      # hi and lo per m-tile


@pytest.mark.parametrize("D", [64, 128, 256])
def test_each_load_instruction_reads_whole_sectors(D):
    """Per 16-byte load instruction, the lanes that share a K row (4) read 64 contiguous
    bytes and those sharing a V key (8) 128: whole 32-byte sectors, none fetched twice."""
    mp = fragment_maps(D)
    for s_ in range(0, D // 16, 2):           # vector s // 2 holds k-steps s, s + 1
        elems = sorted(mp["qk_d"](t, s_, 0) for t in range(4))
        assert elems[0] % 32 == 0 and elems == list(range(elems[0], elems[0] + 32, 8))
    for j in range(0, D // 16, 4):            # vector j // 4 holds m-tiles j .. j + 3
        elems = sorted(mp["o_d"](g, j, 0) for g in range(8))
        assert elems[0] % 64 == 0 and elems == list(range(elems[0], elems[0] + 64, 8))


@pytest.mark.parametrize("const,value", [("QK_VEC", 16), ("V_VEC", 32), ("QK_LANE", 4)])
def test_a_lane_map_that_is_no_permutation_is_refused(monkeypatch, const, value):
    """Planted bug: vectors that overlap (a stride too small) repeat some D elements and drop
    others; the emitter's permutation check refuses the configuration."""
    import kernels.nvidia.decode_mma as dm
    monkeypatch.setattr(dm, const, value)
    with pytest.raises(AttentionConfigError, match="not a permutation"):
        emit_mma_decode(MmaDecodeConfig(head_dim=128))


def bf16(x):
    b = np.asarray(x, np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000                   # round to nearest even
    return b.view(np.float32)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-30, 1.0, allow_nan=False))
def test_p_hi_lo_split_keeps_16_bits(p):
    """P = P_hi + P_lo (both bf16) is within 2^-16 of P (one bf16 P: 2^-9)."""
    hi = bf16(np.float32(p))
    lo = bf16(np.float32(p) - hi)
    assert abs(float(hi) + float(lo) - float(np.float32(p))) <= 2 ** -16 * p


@pytest.mark.parametrize("kw,msg", [(dict(head_dim=512), "head_dim 512"), (dict(hg=9), "hg=9"),
                                    (dict(head_dim=256, hg=8, warps=8), "66368 bytes of static"),
                                    (dict(head_dim=256, chunk=2), "chunk=2 at head_dim 256"),
                                    (dict(hg=0), "hg=0"), (dict(chunk=3), "chunk=3"),
                                    (dict(warps=3), "warps=3"), (dict(in_dtype="f32"), "dtypes")])
def test_config_errors(kw, msg):
    with pytest.raises(AttentionConfigError, match=msg):
        emit_mma_decode(MmaDecodeConfig(**kw))


def test_warps_and_heads_choice():
    assert heads_per_mma_block(8) == 8 and heads_per_mma_block(4) == 4
    assert heads_per_mma_block(12) == 6 and heads_per_mma_block(7) == 7
    assert mma_warps(512, 132) == 8 and mma_warps(8, 132) == 4
    assert mma_warps(MMA_BLOCKS_PER_SM * 132 - 1, 132) == 4
    assert mma_warps(512, 132, head_dim=256) == 4


@pytest.mark.parametrize("B,H,Hk,S,warps,splits", [
    (4, 32, 8, 4096, 8, 4),       # the suite row: 8 x 4 median 0.86 of a copy, 4 x 8 0.85
    (1, 32, 8, 32768, 8, 16),     # 8 x 16 0.90, 4 x 32 0.86 (H100 spread run a)
    (2, 64, 8, 16384, 4, 16),     # hg 8: 8 warps' merge buffers pass 48 KiB
    (6, 32, 8, 4096, 4, 5),       # 8 warps x 2 splits would leave 36 of 132 SMs idle
    (16, 32, 8, 4096, 4, 2),      # 8 warps would take two waves (not measured): 4
    (1, 32, 8, 100_000, 4, 33),   # 2048 keys per split at most: 49 splits, 3 waves at 8
    (64, 32, 8, 8192, 4, 1)])     # the batch fills the GPU: no split
def test_d256_warps_and_splits(B, H, Hk, S, warps, splits):
    """head_dim 256: 8 warps (one block per SM) where their split count is one wave that
    fills the SMs about as well as 4 warps' two blocks per SM; 4 warps otherwise."""
    g = H // Hk
    hg = heads_per_mma_block(g)
    blocks = B * Hk * (g // hg)
    w = mma_warps(blocks, 132, 256, hg, S)
    cfg = MmaDecodeConfig(head_dim=256, hg=hg, warps=w)
    n = choose_splits(blocks, S, 132, None, mma_blocks_per_sm(cfg), True)[0]
    assert (w, n) == (warps, splits)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 600), st.integers(65, 200_000), st.integers(1, 200), st.integers(1, 8))
def test_d256_eight_warps_only_in_one_full_wave(blocks, skv, sms, hg):
    """Whenever 8 warps are chosen at head_dim 256: their merge buffers fit, the split
    launch is one wave of one block per SM, and it keeps within WAVE_FILL_SLACK of the SMs
    4 warps would keep busy."""
    w = mma_warps(blocks, sms, 256, hg, skv)
    assert w in (4, 8)
    if w == 8:
        assert merge_smem_bytes(MmaDecodeConfig(head_dim=256, hg=hg, warps=8)) <= MAX_STATIC_SMEM
        n = choose_splits(blocks, skv, sms, None, 1, True)[0]
        assert blocks * n <= sms
        assert wave_fill(blocks, skv, sms, 8)[1] >= wave_fill(blocks, skv, sms, 4)[1] - WAVE_FILL_SLACK


def test_blocks_per_sm_follows_the_registers():
    """236 registers a lane at head_dim 256: 8 // warps blocks of 4 warps fit 64K registers."""
    for w, bps in ((1, 8), (2, 4), (4, 2), (8, 1)):
        assert mma_blocks_per_sm(MmaDecodeConfig(head_dim=256, hg=4, warps=w)) == bps
        assert 240 * 32 * w * bps <= 65536 < 240 * 32 * w * (bps + 1)
    assert mma_blocks_per_sm(MmaDecodeConfig(head_dim=128, warps=8)) == MMA_BLOCKS_PER_SM


@pytest.mark.parametrize("D", [64, 128, 256])
def test_combine_launch_covers_what_the_kernel_indexes(D):
    """The combine's grid (combine_grid x COMBINE_THREADS threads) reaches every (row,
    element group) the printed kernel indexes, and no more than one block past it: a kernel
    printing one width and a launch assuming another would leave outputs unwritten."""
    import re
    src = emit_mma_decode(MmaDecodeConfig(head_dim=D, hg=4))
    per_row = int(re.search(r"if \(i >= \(long long\)rows \* (\d+)\) return;", src).group(1))
    width = int(re.search(r"c = \(int\)\(i % \d+\) \* (\d+);", src).group(1))
    assert per_row * width == D
    assert re.search(rf"__launch_bounds__\({COMBINE_THREADS}\)\n\w+_combine", src)
    for rows in (1, 3, 32, 128, 4097):
        blocks = combine_grid(rows, D)
        assert blocks * COMBINE_THREADS >= rows * per_row > (blocks - 1) * COMBINE_THREADS


def test_every_accepted_config_fits_static_shared_memory():
    """validate() refuses exactly the configurations whose merge buffers pass 48 KiB: the
    printed s_acc/s_m/s_l/s_w/s_inv/s_lse declarations, summed, against the limit."""
    import re
    for D in (64, 128, 256):
        for hg in range(1, 9):
            for w in (1, 2, 4, 8):
                cfg = MmaDecodeConfig(head_dim=D, hg=hg, warps=w)
                printed = (4 * w * hg * D + 4 * 3 * w * hg + 4 * 2 * hg)
                if printed > MAX_STATIC_SMEM:
                    with pytest.raises(AttentionConfigError, match="static shared memory"):
                        emit_mma_decode(cfg)
                    continue
                src = emit_mma_decode(cfg)
                assert re.search(rf"float s_acc\[{w}\]\[{hg}\]\[{D}\];", src)
                assert merge_smem_bytes(cfg) >= printed


def test_dispatch_picks_the_tensor_core_kernel():
    torch = pytest.importorskip("torch")
    from kernels.nvidia.dispatch import choose_decode
    for (B, H, Hk, S, D), name in (((64, 32, 8, 8192, 128), "lg_decode_mma_bf16_f16_d128_g4_c1_w8"),
                                   ((1, 64, 8, 131072, 128), "lg_decode_mma_bf16_f16_d128_g8_c1_w4"),
                                   ((4, 32, 8, 4096, 256), "lg_decode_mma_bf16_f16_d256_g4_c1_w8"),
                                   ((64, 32, 8, 8192, 256), "lg_decode_mma_bf16_f16_d256_g4_c1_w4")):
        q = torch.empty(B, H, 1, D, dtype=torch.bfloat16)
        k = torch.empty(B, Hk, 1, D, dtype=torch.bfloat16).expand(B, Hk, S, D)
        assert choose_decode(q, k).config.name.startswith(name)


def test_nvrtc_compiles_without_spills_at_4_warps(tmp_path):
    from kernels.toolchain.nvrtc import nvrtc_available
    if not nvrtc_available():
        pytest.skip("needs NVRTC (cuda-python)")
    from kernels.cache import Cache
    from kernels.toolchain.nvrtc import compile_cuda
    for kw in (dict(), dict(head_dim=64), dict(head_dim=64, hg=4, warps=8),
               dict(hg=4, in_dtype="f16", out_dtype="bf16"),
               dict(head_dim=256, hg=4), dict(head_dim=256, hg=8, in_dtype="f16"),
               dict(head_dim=256, hg=4, warps=8)):
        c = MmaDecodeConfig(**kw)
        m = compile_cuda(emit_mma_decode(c), c.arch, ["--ptxas-options=-v"], name=f"{c.name}.cu",
                         cache=Cache(tmp_path))
        # every kernel's line (split and combine): one " 0 bytes spill stores" anywhere in
        # the log passed while the split kernel of d64 spilled 4 bytes
        spills = [ln for ln in m.log.splitlines() if "spill stores" in ln]
        assert len(spills) == 2 and all(" 0 bytes spill stores" in ln for ln in spills), \
            (c.name, m.log)
        assert "serialized" not in m.log, (c.name, m.log)
