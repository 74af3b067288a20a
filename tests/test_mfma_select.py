"""Instruction selection like Triton 3.9's AMD backend: one case per rule and per fallback."""

from __future__ import annotations

import pytest

import mfma_specs as ms
from mfma_specs.select import supported_dtype_pairs

# (rule, arch, M, N, K, a, b, acc, kwargs, expected instruction | ("fma", rule), (mDim, nDim))
CASES = [
    ("32x32 when min(M,N) >= 32", "gfx942", 128, 128, 64, "f16", "f16", "f32", {},
     "v_mfma_f32_32x32x8_f16", (32, 32)),
    ("16x16 when 16 <= min < 32", "gfx942", 16, 128, 64, "f16", "f16", "f32", {},
     "v_mfma_f32_16x16x16_f16", (16, 16)),
    ("16x16 bf16", "gfx942", 64, 16, 32, "bf16", "bf16", "f32", {},
     "v_mfma_f32_16x16x16_bf16", (16, 16)),
    ("4x64 when 4 <= M < 16, N >= 64", "gfx942", 8, 64, 64, "f16", "f16", "f32", {},
     "v_mfma_f32_4x4x4_16b_f16", (4, 64)),
    ("64x4 when 4 <= N < 16, M >= 64", "gfx942", 128, 4, 64, "i8", "i8", "i32", {},
     "v_mfma_i32_4x4x4_16b_i8", (64, 4)),
    ("FMA: min < 16 and no 4x64 fits", "gfx942", 8, 8, 64, "f16", "f16", "f32", {},
     ("fma", "tile"), None),
    ("FMA: min < 4", "gfx942", 2, 128, 64, "f16", "f16", "f32", {}, ("fma", "tile"), None),
    ("FMA: M < 16 but N < 64", "gfx942", 8, 32, 64, "f16", "f16", "f32", {},
     ("fma", "tile"), None),
    ("f64 32x32 -> 16x16x4", "gfx942", 64, 64, 16, "f64", "f64", "f64", {},
     "v_mfma_f64_16x16x4_f64", (16, 16)),
    ("f64 on CDNA2", "gfx90a", 32, 32, 8, "float64", "float64", "float64", {},
     "v_mfma_f64_16x16x4f64", (16, 16)),
    ("FMA: no 4x64 f64", "gfx942", 8, 64, 64, "f64", "f64", "f64", {}, ("fma", "type"), None),
    ("FMA: K not a multiple of kDim", "gfx942", 128, 128, 4, "f16", "f16", "f32", {},
     ("fma", "k"), None),
    ("FMA: K rule holds with forced nonkdim", "gfx942", 128, 128, 8, "f16", "f16", "f32",
     {"nonkdim": 16}, ("fma", "k"), None),
    ("forced nonkdim=16", "gfx942", 128, 128, 64, "f16", "f16", "f32", {"nonkdim": 16},
     "v_mfma_f32_16x16x16_f16", (16, 16)),
    ("forced nonkdim=32 on a 16-wide tile", "gfx942", 32, 16, 64, "bf16", "bf16", "f32",
     {"nonkdim": 32}, "v_mfma_f32_32x32x8_bf16", (32, 32)),
    ("gfx950 prefers the K-doubled f16", "gfx950", 128, 128, 64, "f16", "f16", "f32", {},
     "v_mfma_f32_32x32x16_f16", (32, 32)),
    ("gfx950 K < 32 takes the 16x16x16", "gfx950", 16, 16, 16, "f16", "f16", "f32", {},
     "v_mfma_f32_16x16x16_f16", (16, 16)),
    ("gfx950 bf16 K-doubled", "gfx950", 64, 64, 64, "bf16", "bf16", "f32", {},
     "v_mfma_f32_32x32x16_bf16", (32, 32)),
    ("gfx950 i8 K-doubled", "gfx950", 64, 64, 64, "i8", "i8", "i32", {},
     "v_mfma_i32_32x32x32_i8", (32, 32)),
    ("xf32 with tf32 precision", "gfx942", 64, 64, 32, "f32", "f32", "f32",
     {"allow_xf32": True}, "v_mfma_f32_32x32x4_xf32", (32, 32)),
    ("ieee fp32", "gfx942", 64, 64, 32, "f32", "f32", "f32", {}, "v_mfma_f32_32x32x2_f32",
     (32, 32)),
    ("xf32 ignored on gfx950", "gfx950", 16, 16, 32, "f32", "f32", "f32", {"allow_xf32": True},
     "v_mfma_f32_16x16x4_f32", (16, 16)),
    ("gfx942 native fp8 (FNUZ)", "gfx942", 64, 64, 64, "fp8", "bf8", "f32", {},
     "v_mfma_f32_32x32x16_fp8_bf8", (32, 32)),
    ("OCP fp8 before gfx950: f16 emulation", "gfx942", 64, 64, 64, "fp8e4m3fn", "fp8e4m3fn",
     "f32", {}, "v_mfma_f32_32x32x8_f16", (32, 32)),
    ("gfx950 fp8: block-scaled f8f6f4 first", "gfx950", 64, 64, 128, "fp8", "fp8", "f32", {},
     "v_mfma_scale_f32_32x32x64_f8f6f4", (32, 32)),
    ("gfx950 fp8: plain fp8 when K % 64", "gfx950", 16, 16, 32, "fp8", "fp8", "f32", {},
     "v_mfma_f32_16x16x32_fp8_fp8", (16, 16)),
    ("gfx950 fp4: f8f6f4 only", "gfx950", 32, 32, 128, "fp4", "fp4", "f32", {},
     "v_mfma_scale_f32_32x32x64_f8f6f4", (32, 32)),
    ("FMA: gfx950 fp4 with K % 64", "gfx950", 32, 32, 32, "fp4", "fp6", "f32", {},
     ("fma", "k"), None),
    ("CDNA1 original bf16", "gfx908", 64, 64, 64, "bf16", "bf16", "f32", {},
     "v_mfma_f32_32x32x4bf16", (32, 32)),
    ("CDNA2 bf16_1k", "gfx90a", 64, 64, 64, "bf16", "bf16", "f32", {},
     "v_mfma_f32_32x32x8bf16_1k", (32, 32)),
    ("CDNA2 bf16 small K", "gfx90a", 64, 64, 4, "bf16", "bf16", "f32", {},
     "v_mfma_f32_32x32x4bf16_1k", (32, 32)),
    ("CDNA1 i8", "gfx908", 16, 16, 16, "int8", "int8", "int32", {}, "v_mfma_i32_16x16x16i8",
     (16, 16)),
    ("f16 accumulator converted", "gfx942", 32, 32, 16, "float16", "float16", "float16", {},
     "v_mfma_f32_32x32x8_f16", (32, 32)),
]


@pytest.mark.parametrize("rule,arch,M,N,K,a,b,acc,kw,want,tile", CASES,
                         ids=[c[0] for c in CASES])
def test_selection_rules(rule, arch, M, N, K, a, b, acc, kw, want, tile):
    got = ms.choose_mfma(arch, M, N, K, a, b, acc, **kw)
    if isinstance(want, tuple):
        assert got.is_fma and isinstance(got, ms.FmaFallback), got
        assert got.rule == want[1] and got.reason, got
        return
    assert not got.is_fma, got
    assert got.name == want and (got.m_dim, got.n_dim) == tile, str(got)
    assert got.instruction is ms.lookup(arch, want)
    assert K % got.k_dim == 0


def test_choice_details():
    c = ms.choose_mfma("gfx942", 128, 128, 64, "f16", "f16", "f32")
    assert (c.k_dim, c.k_base, c.m, c.n, c.k) == (8, 4, 32, 32, 8)   # delegates to the spec
    c = ms.choose_mfma("gfx942", 64, 64, 16, "f64", "f64", "f64")
    assert any("16x16x4" in n for n in c.notes)
    c = ms.choose_mfma("gfx942", 64, 64, 64, "fp8e4m3fn", "fp8e4m3fn", "f32")
    assert any("emulated with fp16" in n for n in c.notes)
    c = ms.choose_mfma("gfx942", 32, 32, 16, "f16", "f16", "f16")
    assert any("converted" in n for n in c.notes) and c.acc_dtype == "f16"
    c = ms.choose_mfma("gfx950", 16, 16, 16, "f32", "f32", "f32", allow_xf32=True)
    assert any("ignored" in n for n in c.notes)
    f = ms.choose_mfma("gfx942", 8, 8, 64, "f16", "f16", "f32")
    assert "min(M, N) = 8" in f.reason and "FMA" in str(f)
    with pytest.raises(ms.SelectionError) as e:   # reading an instruction off a fallback
        f.m
    assert "no MFMA" in str(e.value) and not hasattr(f, "builtin")


def test_selection_bad_input():
    with pytest.raises(ms.UnsupportedDtypeError) as e:        # no instruction mixes these
        ms.choose_mfma("gfx942", 64, 64, 64, "f16", "bf16", "f32")
    assert "supported (A, B) pairs" in str(e.value) and "f16xf16" in str(e.value)
    with pytest.raises(ms.UnsupportedDtypeError):
        ms.choose_mfma("gfx942", 64, 64, 64, "i8", "f16", "f32")
    with pytest.raises(ms.UnsupportedDtypeError):            # no f64 MFMA on CDNA1
        ms.choose_mfma("gfx908", 64, 64, 64, "f64", "f64", "f64")
    with pytest.raises(ms.UnsupportedDtypeError):            # gfx950 has OCP fp8 only
        ms.choose_mfma("gfx950", 64, 64, 64, "fp8e4m3fnuz", "fp8e4m3fnuz", "f32")
    with pytest.raises(ms.UnsupportedDtypeError):            # fp6 before gfx950
        ms.choose_mfma("gfx942", 64, 64, 64, "fp6", "fp6", "f32")
    with pytest.raises(ms.UnsupportedDtypeError) as e:
        ms.choose_mfma("gfx942", 64, 64, 64, "f16", "f16", "i32")
    assert "accumulator" in str(e.value)
    with pytest.raises(ms.UnsupportedDtypeError) as e:
        ms.choose_mfma("gfx942", 64, 64, 64, "float17", "f16", "f32")
    assert "unknown dtype" in str(e.value)
    with pytest.raises(ms.UnsupportedDtypeError) as e:       # fp8 without a native FP8
        ms.choose_mfma("gfx90a", 64, 64, 64, "fp8", "fp8", "f32")
    assert "ambiguous" in str(e.value)
    for bad in (dict(M=48), dict(M=0), dict(K=-16), dict(N=True), dict(N=32.0)):
        args = dict(M=64, N=64, K=64)
        args.update(bad)
        with pytest.raises(ms.SelectionError):
            ms.choose_mfma("gfx942", args["M"], args["N"], args["K"], "f16", "f16", "f32")
    with pytest.raises(ms.SelectionError):
        ms.choose_mfma("gfx942", 64, 64, 64, "f16", "f16", "f32", nonkdim=8)
    with pytest.raises(ms.NotModelledError):
        ms.choose_mfma("gfx1100", 64, 64, 64, "f16", "f16", "f32")
    with pytest.raises(ms.UnknownTargetError):
        ms.choose_mfma("gfx943", 64, 64, 64, "f16", "f16", "f32")


def test_supported_pairs():
    assert ("fp8e4m3fnuz", "fp8e5m2fnuz") in supported_dtype_pairs("gfx942")
    assert ("fp4e2m1", "fp6e3m2") in supported_dtype_pairs("gfx950")
    assert ("f64", "f64") not in supported_dtype_pairs("gfx908")


# (shape, num_warps, instr, chain, expected)  -- Triton's warpsPerTile
WARPS = [
    ((128, 128), 4, (32, 32), None, (2, 2)),
    ((256, 128), 8, (32, 32), None, (4, 2)),
    ((32, 256), 4, (32, 32), None, (1, 4)),
    ((256, 32), 4, (32, 32), None, (4, 1)),
    ((128, 128), 8, (16, 16), None, (2, 4)),
    ((32, 32), 8, (32, 32), None, (8, 1)),       # more warps than tiles: swapped to dim 0
    ((16, 16), 4, (16, 16), None, (4, 1)),
    ((4, 128, 128), 4, (32, 32), None, (4, 1, 1)),   # batched
    ((128, 64), 4, (32, 32), "head", (4, 1)),        # attention: first dot
    ((128, 128), 4, (32, 32), "tail", (4, 1)),       # second dot: along M first
    ((16, 128), 4, (16, 16), "tail", (1, 4)),        # decode: M = 16 -> 1 warp along M
    ((64, 128), 8, (32, 32), "tail", (2, 4)),
]


@pytest.mark.parametrize("shape,nw,instr,chain,want", WARPS)
def test_warps_per_tile(shape, nw, instr, chain, want):
    assert ms.warps_per_tile(shape, nw, instr, chain) == want


def test_warps_per_tile_bad_input():
    for args in (((128,), 4), ((128, 128), 3), ((128, 128), 4, (32,)), ((0, 128), 4),
                 ((128, 128), 4, (32, 32), "middle")):
        with pytest.raises(ms.SelectionError):
            ms.warps_per_tile(*args)


def test_k_width_and_kpack():
    c = ms.choose_mfma("gfx942", 128, 128, 64, "f16", "f16", "f32")
    assert ms.k_width(c) == 4 and ms.k_width(c, kpack=2) == 8
    assert ms.k_width(c, kpack=2, chain_tail=True) == 4
    c = ms.choose_mfma("gfx950", 128, 128, 64, "bf16", "bf16", "f32")   # kBase 8
    assert ms.k_width(c) == 8 and ms.k_width(c, 2) == 16
    assert ms.k_width(c, chain_tail=True) == 4      # 16-bit: forced to 4 on the second dot
    c = ms.choose_mfma("gfx942", 64, 64, 64, "fp8", "fp8", "f32")
    assert ms.k_width(c) == 8 and ms.k_width(c, chain_tail=True) == 8
    c = ms.choose_mfma("gfx942", 8, 64, 64, "f16", "f16", "f32")         # 4x64: kWidth = kDim
    assert ms.k_width(c) == 64
    with pytest.raises(ms.SelectionError):
        ms.k_width(c, kpack=4)
    with pytest.raises(ms.SelectionError):
        ms.k_width(ms.choose_mfma("gfx942", 8, 8, 64, "f16", "f16", "f32"))
