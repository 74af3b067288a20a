"""Preshuffled B (kernels.amd.preshuffle): the storage order is a layout, and every property
the GEMM relies on is checked on it, for every supported instruction and dtype."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import kernels
from layoutalg import composition, right_inverse
from kernels.amd.gemm_plan import ConfigError
from kernels.amd.preshuffle import (SUPPORTED, kernel_view, preshuffle, preshuffle_geometry,
                                    preshuffle_layout, preshuffled_size, unshuffle)

# the 16-bit shapes with f16/bf16, the 8-bit float shapes (twice the k) with gfx942's fp8/bf8
_EIGHT_BIT = ("16x16x32", "32x32x16")
INSTRS = ([(i, d) for i in SUPPORTED if i not in _EIGHT_BIT for d in ("f16", "bf16")]
          + [(i, d) for i in _EIGHT_BIT for d in ("fp8", "bf8")])
dims = st.integers(min_value=1, max_value=200)


@pytest.mark.parametrize("instr,dtype", INSTRS)
@settings(max_examples=15, deadline=None)
@given(k=dims, n=dims)
def test_layout_is_a_bijection_with_its_right_inverse(instr, dtype, k, n):
    L = preshuffle_layout(k, n, instr, dtype)
    vals = np.sort(np.asarray(L.values()).reshape(-1))
    assert np.array_equal(vals, np.arange(L.size()))          # onto [0, Kp*Np), once each
    R = right_inverse(L)
    assert R.size() == L.size()
    LR = composition(L, R)                                     # shuffle o unshuffle = id
    assert np.array_equal(np.asarray(LR.values()).reshape(-1), np.arange(L.size()))


@pytest.mark.parametrize("instr,dtype", INSTRS)
@settings(max_examples=10, deadline=None)
@given(k=dims, n=dims)
def test_each_lane_fragment_is_16_contiguous_aligned_bytes(instr, dtype, k, n):
    """Lane l of a wave, MFMA k-step s, item e holds B[k][n] with the instruction's lane map and
    the GEMM plan's k-permutation (k = e + items*s + V*(l // IN) within a k block): the V
    elements of one lane are consecutive in storage, start 16-byte aligned, and the 64 lanes of
    one (n tile, k block) read 1024 contiguous bytes in lane order."""
    g = preshuffle_geometry(k, n, instr, dtype)
    L = preshuffle_layout(k, n, instr, dtype)
    IN, V = g.tile_n, g.vec
    lane = np.arange(64)
    for nt in range(g.n_padded // IN):
        for kb in range(g.k_padded // g.k_block):
            offs = np.array([[L((kb * g.k_block + V * (l // IN) + j, nt * IN + l % IN))
                              for j in range(V)] for l in lane])
            assert (np.diff(offs, axis=1) == 1).all()
            assert (offs[:, 0] * g.elem_bytes % 16 == 0).all()
            assert np.array_equal(offs[:, 0] - offs[0, 0], V * lane)


@pytest.mark.parametrize("instr,dtype", INSTRS)
def test_lane_map_agrees_with_mfma_specs(instr, dtype):
    """The order's assumption (lane l item e holds B[items*(l//IN) + e][l % IN]) is read from
    the spec; a spec with another B map is refused (not silently shuffled wrongly)."""
    import mfma_specs
    g = preshuffle_geometry(64, 64, instr, dtype)
    spec = mfma_specs.lookup("gfx942", g.instruction)
    for lane in (0, 1, 17, 33, 63):
        for e in range(g.items):
            kk, nn = spec.element("B", lane=lane, item=e)[:2]
            assert (kk, nn) == (g.items * (lane // g.tile_n) + e, lane % g.tile_n)


@settings(max_examples=25, deadline=None)
@given(k=dims, n=dims, which=st.sampled_from(INSTRS))
def test_numpy_round_trip_and_padding(k, n, which):
    instr, dtype = which
    rng = np.random.default_rng(k * 1000 + n)
    b = rng.standard_normal((k, n)).astype(np.float16 if dtype == "f16" else np.int16)
    if dtype in ("fp8", "bf8"):             # 8-bit floats travel as their bytes
        b = (rng.integers(0, 256, (k, n)) * (rng.random((k, n)) < 0.9)).astype(np.uint8)
    s = preshuffle(b, instr, dtype)
    assert s.shape == (preshuffled_size(k, n, instr, dtype),) and s.dtype == b.dtype
    assert np.array_equal(unshuffle(s, k, n, instr, dtype), b)
    # the padding is zeros and every element of B appears once
    assert np.count_nonzero(s) == np.count_nonzero(b)


def test_torch_round_trip_keeps_dtype_and_values():
    b = torch.randn(70, 33).to(torch.bfloat16)
    s = kernels.preshuffle(b, "16x16x16")
    assert s.dtype == torch.bfloat16 and s.dim() == 1
    assert torch.equal(kernels.unshuffle(s, 70, 33, "16x16x16"), b)


def test_torch_fp8_round_trip_keeps_the_bytes():
    """torch's 8-bit floats are gathered as their bytes (torch indexes no float8 tensor): the
    buffer keeps the dtype, and unshuffle gives back every byte (NaN's 0x80 included)."""
    g = torch.Generator().manual_seed(1)
    for tdt, instr in ((torch.float8_e4m3fnuz, "32x32x16"), (torch.float8_e5m2fnuz, "16x16x32")):
        raw = torch.randint(0, 256, (70, 33), generator=g, dtype=torch.uint8)
        b = raw.view(tdt)
        s = kernels.preshuffle(b, instr)
        assert s.dtype == tdt and s.dim() == 1
        assert torch.equal(kernels.unshuffle(s, 70, 33, instr).view(torch.uint8), raw)


def test_fp8_storage_order_is_fragment_order():
    """Independent of the layout code: in 32x32x16 fp8 (8 k per lane, 2 lane groups, V = 16),
    lane 0's 16 bytes are B[0:16, 0], lane 1's B[0:16, 1], lane 32's B[16:32, 0], and the next
    k block of column 0 starts at 64 lanes x 16 bytes."""
    b = (np.arange(64 * 32) % 251).astype(np.uint8).reshape(64, 32)
    s = preshuffle(b, "32x32x16", "fp8")
    assert np.array_equal(s[:16], b[0:16, 0]) and np.array_equal(s[16:32], b[0:16, 1])
    assert np.array_equal(s[32 * 16:32 * 16 + 16], b[16:32, 0])
    assert np.array_equal(s[1024:1040], b[32:48, 0])


def test_storage_order_is_fragment_order():
    """A concrete check, independent of the layout code: in 16x16x16 f16, the first 16 bytes
    are B[0:8, 0], the next B[0:8, 1], ..., lane 16 starts B[8:16, 0]."""
    b = np.arange(64 * 32, dtype=np.float32).reshape(64, 32).astype(np.float16)
    s = preshuffle(b, "16x16x16", "f16")
    assert np.array_equal(s[:8], b[0:8, 0]) and np.array_equal(s[8:16], b[0:8, 1])
    assert np.array_equal(s[16 * 8:16 * 8 + 8], b[8:16, 0])
    assert np.array_equal(s[512:520], b[32:40, 0])          # next k block of the same n tile


def test_kernel_view_swaps_modes():
    L = preshuffle_layout(64, 48)
    V = kernel_view(L)
    assert V((5, 9)) == L((9, 5))


@pytest.mark.parametrize("bad,match", [
    (dict(instr="4x4x4"), "not supported"), (dict(dtype="f32"), "f16, bf16, fp8"),
    (dict(dtype="fp8e4m3fn"), "OCP FP8"),      # not the FNUZ operand of gfx942's MFMAs
    (dict(instr="16x16x16", dtype="fp8"), "not found|unknown|no instruction|not supported"),
    (dict(k=0), "positive"), (dict(instr="v_mfma_f32_32x32x2_f32"), "takes f32 B operands"),
])
def test_bad_input_is_refused_with_its_reason(bad, match):
    args = dict(k=64, n=64, instr="16x16x16", dtype="f16", **{})
    args.update(bad)
    with pytest.raises(ConfigError, match=match):
        preshuffle_geometry(args["k"], args["n"], args["instr"], args["dtype"])


def test_unshuffle_refuses_wrong_size():
    with pytest.raises(ConfigError, match="1-D buffer of 4096"):
        unshuffle(np.zeros(100, np.float16), 64, 64)


def test_cli_prints_and_draws_the_layout(tmp_path):
    import subprocess
    import sys
    svg = tmp_path / "ps.svg"
    p = subprocess.run([sys.executable, "-m", "layoutalg.cli", "mfma", "preshuffle",
                        "16x16x16", "--k", "40", "--n", "20", "--svg", str(svg)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert str(preshuffle_layout(40, 20, "16x16x16", "f16")) in p.stdout
    assert "padded to [64, 32]" in p.stdout and "1024 contiguous bytes" in p.stdout
    assert "contiguous in storage" in p.stdout and svg.stat().st_size > 0
    bad = subprocess.run([sys.executable, "-m", "layoutalg.cli", "mfma", "preshuffle", "4x4x4"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not supported" in bad.stderr


def test_diagram_colours_each_lane_vector_once():
    import visualize as viz
    L = preshuffle_layout(32, 16, "16x16x16", "f16")
    d = viz.draw_preshuffle(L, 8)
    svg = d.svg if hasattr(d, "svg") else str(d._repr_svg_())
    assert "L63" in svg and "L64" not in svg          # lanes of one wave load
    assert any("contiguous in storage" in n for n in d.notes)
    # a non-fragment order (plain row-major B) is flagged as not contiguous per lane
    from layoutalg import Layout
    d2 = viz.draw_preshuffle(Layout((32, 16), (16, 1)), 8)
    assert any("NOT contiguous" in n for n in d2.notes)
