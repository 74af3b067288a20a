"""MFMA lane correctness: load paths and accumulator write-back against instruction specs."""

import numpy as np
import pytest

import layoutalg as la
from layoutalg.verify import AccessError, VerifyError, lane_correctness


class Formula16:
    """v_mfma_f32_16x16x16_f16 from the documented closed form (independent of mfma_specs):
    lane l supplies A[l%16][4*(l//16)+e], B[4*(l//16)+e][l%16], owns C[4*(l//16)+e][l%16]."""

    name = "16x16x16 (formula)"
    m = n = k = 16
    blocks = 1
    wave_size = 64

    def tile_shape(self, op):
        return (16, 16, 1)

    def element(self, op, lane, e):
        if op == "A":
            return (lane % 16, 4 * (lane // 16) + e, 0)
        return (4 * (lane // 16) + e, lane % 16, 0)

    def tv_layout(self, op):
        return la.Layout(((16, 4), 4), ((1, 64), 16) if op == "A" else ((16, 4), 1))


def spec(name="v_mfma_f32_16x16x16_f16"):
    ms = pytest.importorskip("mfma_specs")
    return ms.lookup("gfx942", name)


# A tile in LDS: 16 rows x 64 k, row-major, swizzled; the TV partition indexes it column-major
A_TILE = la.Layout((16, 64), (64, 1))
A_LDS = la.ComposedLayout(la.Swizzle(2, 2, 4), 0, A_TILE)
A_PART = la.Layout(((16, 4), 4, 4), ((1, 64), 16, 256))       # (lane, item, k step)


@pytest.mark.parametrize("s", [Formula16(), "real"])
def test_a_operand_through_swizzled_lds_all_k_steps(s):
    s = spec() if s == "real" else s
    r = lane_correctness(s, "A", A_PART, lds=A_LDS, steps=4)
    assert r.holds and r.checked == 64 * 4 * 4 and r.method == "exhaustive"
    assert "64 lanes x 4 register items x 4 step(s)" in r.domain


def test_first_mismatch_is_reported_with_the_element_found():
    s = spec()
    wrong = la.Layout(((16, 4), 4, 4), ((1, 64), 16, 16 * 8))    # k step advances 8, not 16
    r = lane_correctness(s, "A", wrong, lds=A_LDS, steps=4)
    assert not r.holds and r.mismatches == 768
    c = r.counterexample
    assert (c.lane, c.item, c.step) == (0, 0, 1)
    assert c.expected == (0, 16, 0) and c.actual == (0, 8, 0)
    assert "expects A[0, 16]" in str(c)
    assert r.mismatch.shape == (64, 4, 4) and not r.mismatch[:, :, 0].any()


def test_load_path_disagreeing_with_the_store_swizzle():
    # the store path used Swizzle(2,2,4) but the reads index the unswizzled tile
    r = lane_correctness(spec(), "A", A_PART, lds=A_TILE, memory=A_LDS, steps=4)
    assert not r.holds
    c = r.counterexample
    assert c.actual_offset != c.expected_offset and c.actual is not None


def test_transposed_partition_is_caught():
    r = lane_correctness(spec(), "B", la.Layout(((16, 4), 4), ((1, 64), 16)))
    assert not r.holds and (r.counterexample.lane, r.counterexample.item) == (0, 1)
    assert r.counterexample.expected == (1, 0, 0) and r.counterexample.actual == (0, 1, 0)


def test_b_operand_and_accumulator_write_back():
    s = spec()
    assert lane_correctness(s, "B", s.tv_layout("B")).holds
    # accumulator stored to a row-major 16 x 16 C tile in memory (ld = 16) by the
    # partition the kernel uses: lane l, item e -> C[4*(l//16)+e][l%16]
    c_mem = la.Layout((16, 16), (16, 1))
    store = la.Layout(((16, 4), 4), ((1, 64), 16))                # offsets in c_mem
    assert lane_correctness(s, "D", store, memory=c_mem).holds
    bad = la.Layout(((16, 4), 4), ((16, 4), 1))                   # stores C^T
    r = lane_correctness(s, "D", bad, memory=c_mem)
    assert not r.holds and r.operand == "D"


def test_32x32x8_and_multi_block_instructions():
    s = spec("v_mfma_f32_32x32x8_f16")
    assert lane_correctness(s, "A", s.tv_layout("A")).holds
    assert lane_correctness(s, "C", s.tv_layout("C")).holds
    s4 = spec("v_mfma_f32_4x4x4_16b_f16")
    mem = la.Layout((4, 4, 16), (4, 1, 16))                      # row-major blocks
    part = la.ComposedLayout(la.Layout((4, 4, 16), (4, 1, 16)), 0, s4.tv_layout("A"))
    r = lane_correctness(s4, "A", part, memory=mem)
    assert r.holds and "16 block(s)" in r.domain


def test_partition_from_make_layout_tv_matches_spec_16x16():
    # building the A partition "by hand" with the algebra: 16 lanes down M, 4 lane groups
    # along K each holding 4 consecutive k
    tiler, tv = la.make_layout_tv(la.Layout((16, 4), (1, 16)), la.Layout((1, 4), (1, 1)))
    assert tiler == (16, 16)
    assert lane_correctness(Formula16(), "A", tv).holds


def test_lane_errors():
    s = spec()
    with pytest.raises(AccessError, match="needs \\(64, 4, 4\\)"):
        lane_correctness(s, "A", la.Layout(((16, 4), 4), ((1, 64), 16)), lds=A_LDS, steps=4)
    with pytest.raises(VerifyError, match="operand"):
        lane_correctness(s, "Q", A_PART)
    with pytest.raises(VerifyError, match="not injective"):
        lane_correctness(s, "A", A_PART, lds=la.Layout((16, 64), (0, 1)), steps=4)
    with pytest.raises(VerifyError, match="only 512 elements"):
        lane_correctness(s, "A", A_PART, lds=la.Layout((16, 32), (32, 1)), steps=4)
    with pytest.raises(VerifyError, match="accumulator has no k steps"):
        lane_correctness(s, "C", np.zeros((64, 4, 2), dtype=int), steps=2)
