"""NVIDIA atoms (mfma_specs.nvidia) against the PTX ISA fragment formulas, and the 32-bank model.

The formulas below are restated literally from the PTX ISA (section 9.7.14.5.8, "Matrix
Fragments for mma.m16n8k16 with floating point type", and 9.7.9.24, ldmatrix):
``groupID = laneid >> 2``, ``threadID_in_group = laneid % 4``.
"""

from __future__ import annotations

import pytest

import layoutalg as la
from layoutalg.verify import bank_conflicts, lane_correctness
from mfma_specs.errors import MfmaSpecError
from mfma_specs.nvidia import (MMA_M16N8K16_BF16, MMA_M16N8K16_F16, ldmatrix, mma_m16n8k16,
                               smem_model)


def ptx_a(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if i in (0, 1, 4, 5) else g + 8
    col = t * 2 + (i & 0x1) if i < 4 else t * 2 + (i & 0x1) + 8
    return row, col


def ptx_b(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 0x1) if i < 2 else t * 2 + (i & 0x1) + 8
    return row, g


def ptx_c(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if i < 2 else g + 8
    return row, t * 2 + (i & 0x1)


@pytest.mark.parametrize("spec", [MMA_M16N8K16_F16, MMA_M16N8K16_BF16])
def test_mma_m16n8k16_fragments_match_ptx(spec):
    for op, f, items in (("A", ptx_a, 8), ("B", ptx_b, 4), ("C", ptx_c, 4), ("D", ptx_c, 4)):
        assert spec.items(op) == items
        seen = set()
        for lane in range(32):
            for i in range(items):
                r, c, b = spec.element(op, lane, i)
                assert (r, c) == f(lane, i), (op, lane, i)
                assert b == 0
                seen.add((r, c))
        rows, cols, _ = spec.tile_shape(op)
        assert len(seen) == rows * cols          # each element held exactly once
    assert spec.gprs("A") == 4 and spec.gprs("B") == 2 and spec.gprs("C") == 4
    assert spec.wave_size == 32 and spec.flops == 2 * 16 * 8 * 16


def test_mma_layouts_match_cute_traits():
    # CuTe SM80_16x8x16_F32F16F16F32_TN: ALayout ((4,8),(2,2,2)):((32,1),(16,8,128)),
    # BLayout ((4,8),(2,2)):((16,1),(8,64)) over (N, K), CLayout SM80_16x8_Row ((4,8),(2,2)):((32,1),(16,8))
    s = MMA_M16N8K16_F16
    assert s.tv_layout("A") == la.parse("((4,8),(2,2,2)):((32,1),(16,8,128))")
    assert s.tv_layout("C") == la.parse("((4,8),(2,2)):((32,1),(16,8))")
    cute_b = la.parse("((4,8),(2,2)):((16,1),(8,64))")    # index n + 8*k
    for lane in range(32):
        for i in range(4):
            k, n, _ = s.element("B", lane, i)
            assert cute_b((lane, i)) == n + 8 * k


def test_mma_lookup_and_errors():
    assert mma_m16n8k16("bfloat16") is MMA_M16N8K16_BF16
    assert mma_m16n8k16("torch.float16") is MMA_M16N8K16_F16
    with pytest.raises(MfmaSpecError, match="f16 and bf16"):
        mma_m16n8k16("f32")
    with pytest.raises(Exception, match="out of range"):
        MMA_M16N8K16_F16.element("A", 32, 0)


def ptx_ldmatrix(lane, reg, half, trans):
    """Thread ``lane`` receives, in register ``reg`` (= matrix reg), half ``half``:
    non-trans row lane//4, column 2*(lane%4)+half; .trans the transpose."""
    if trans:
        return 2 * (lane % 4) + half, lane // 4, reg
    return lane // 4, 2 * (lane % 4) + half, reg


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragments_match_ptx(num, trans):
    ldm = ldmatrix(num, trans)
    assert ldm.name == f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"
    seen = set()
    for lane in range(32):
        for reg in range(num):
            for half in range(2):
                got = ldm.element(lane, 2 * reg + half)
                assert got == ptx_ldmatrix(lane, reg, half, trans), (lane, reg, half)
                seen.add(got)
    assert len(seen) == 64 * num
    # address side: lanes 8m..8m+7 give rows 0..7 of matrix m (16 contiguous bytes each)
    addr = ldm.address_layout()
    for lane in range(32):
        m, r = ldm.row_of_lane(lane)
        assert m == (lane % (8 * num)) // 8 and r == lane % 8
        assert [addr((lane, v)) for v in range(8)] == [r + 8 * v + 64 * m for v in range(8)]


def test_ldmatrix_bad_count():
    with pytest.raises(MfmaSpecError, match="1, 2 or 4"):
        ldmatrix(3)


def test_ldmatrix_x4_feeds_mma_a():
    # ldmatrix.x4 of the four 8x8 quadrants of a 16x16 row-major tile (matrix m at rows
    # 8*(m%2), cols 8*(m//2)) gives exactly the mma A fragment: a lane_correctness proof
    import numpy as np
    ldm = ldmatrix(4, False)
    arr = np.zeros((32, 8, 1), dtype=np.int64)
    for lane in range(32):
        for e in range(8):
            r8, c8, m = ldm.element(lane, e)
            arr[lane, e, 0] = (r8 + 8 * (m % 2)) * 16 + c8 + 8 * (m // 2)   # row-major offset
    mem = la.Layout((16, 16), (16, 1))
    assert lane_correctness(MMA_M16N8K16_F16, "A", arr, memory=mem).holds
    arr[5, 2, 0] += 1                                   # one wrong register half is caught
    bad = lane_correctness(MMA_M16N8K16_F16, "A", arr, memory=mem)
    assert not bad.holds and bad.mismatches == 1


def test_smem_model_phases():
    m4, m8, m16 = smem_model(4), smem_model("ld.shared.v2.b32"), smem_model("ldmatrix")
    assert (m4.banks, m4.bank_bytes, m4.wave_size) == (32, 4, 32)
    assert m4.phases == (tuple(range(32)),)
    assert len(m8.phases) == 2 and m8.access_bytes == 8
    assert len(m16.phases) == 4 and m16.phases[1] == tuple(range(8, 16))
    assert smem_model("cp.async.16").is_write and not m16.is_write
    with pytest.raises(MfmaSpecError):
        smem_model(2)
    with pytest.raises(MfmaSpecError):
        smem_model("tex.2d")


def test_smem_bank_verdicts():
    # 32 lanes reading one float each down a column of a 32x32 float tile: 32-way
    col = la.Layout((32, 1), (32, 1))
    r = bank_conflicts(col, model=smem_model(4), elem_bytes=4)
    assert r.max_ways == 32
    # padding the row by one word removes it
    assert bank_conflicts(la.Layout((32, 1), (33, 1)), model=smem_model(4), elem_bytes=4).holds
    # ldmatrix of 8 rows of a 64-element (128-byte) f16 row-major tile: 8-way, Swizzle<3,3,3> fixes
    read = la.Layout(((8, 4), 8), ((64, 8 * 64), 1))
    assert bank_conflicts(read, model=smem_model("ldmatrix"), elem_bytes=2).max_ways == 8
    sw = la.ComposedLayout(la.Swizzle(3, 3, 3), 0, la.Layout(64 * 32, 1))
    assert bank_conflicts(read, lds=sw, model=smem_model("ldmatrix"), elem_bytes=2).holds
