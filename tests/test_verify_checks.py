"""Vectorization, coverage, bounds and padding/swizzle search."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

import layoutalg as la
from layoutalg.errors import LayoutError
from layoutalg.symbolic import index_symbol
from layoutalg.verify import (AccessError, VerifyError, coverage, in_bounds, suggest_padding,
                              suggest_swizzle, vector_width)

# ---- vectorization ---------------------------------------------------------------------------------


def test_vector_width_row_major_rows():
    r = vector_width(la.Layout((64, 8), (8, 1)))
    assert r.holds and r.width_elems == 8 and r.width_bytes == 16 and r.method == "f2"
    assert r.lds_instruction == "ds_read_b128" and r.global_instruction == "global_load_dwordx4"


def test_vector_width_padded_rows_lose_alignment():
    r = vector_width(la.Layout(((16, 4), 4), ((130, 4), 1)), require_bytes=8)
    assert not r.holds and r.width_bytes == 4 and r.method == "exhaustive"
    cex = r.counterexample
    assert cex.thread == 1 and cex.offsets == (130, 131, 132, 133) and "misaligned" in cex.reason
    assert vector_width(la.Layout(((16, 4), 4), ((132, 4), 1))).width_bytes == 8


def test_vector_width_swizzle_that_splits_vectors():
    ok = vector_width(la.ComposedLayout(la.Swizzle(3, 3, 3), 0, la.Layout((64, 8), (64, 1))))
    assert ok.width_elems == 8
    split = vector_width(la.ComposedLayout(la.Swizzle(3, 2, 4), 0, la.Layout((64, 8), (64, 1))))
    assert split.width_elems == 4 and split.method == "f2"
    assert "not contiguous" in split.counterexample.reason
    assert "why not wider" in str(split)


def test_vector_width_fp8_and_noncontiguous():
    assert vector_width(la.Layout((64, 16), (16, 1)), elem_bytes=1).width_bytes == 16
    r = vector_width(la.Layout((64, 8), (1, 64)))
    assert r.width_elems == 1 and "not contiguous" in r.counterexample.reason


def test_vector_width_symbolic_stride():
    ld = index_symbol("ld")
    r = vector_width(la.Layout(((16, 4), 8), ((ld, 8), 1)), require_bytes=16)
    assert r.method == "sympy" and not r.holds and r.width_bytes == 2
    ps = r.legal_for[16]
    assert ps.modulus == 8 and set(ps.residues) == {0} and 64 in ps and 66 not in ps
    assert r.legal_for[8].modulus == 4
    ld8 = index_symbol("m")
    assert vector_width(la.Layout(((16, 4), 8), ((8 * ld8, 8), 1))).width_bytes == 16


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(range(9))), st.integers(0, 3), st.integers(0, 3), st.integers(0, 4))
def test_vector_width_f2_agrees_with_exhaustive(perm, vbits, b, mm):
    """vector_width raises VerifierBug when the F2 width and the enumeration disagree."""
    strides = tuple(1 << x for x in perm[:6])
    vstrides = tuple(1 << x for x in perm[6:6 + vbits]) or (1,)
    inner = la.Layout(((2,) * 6, (2,) * vbits or (1,)), (strides, vstrides))
    sw = la.Swizzle(b, mm, max(b, 2))
    r = vector_width(la.ComposedLayout(sw, 0, inner), max_bytes=32)
    assert r.method == "f2"


# ---- coverage --------------------------------------------------------------------------------------


def test_coverage_of_a_raked_tv_layout():
    tiler, tv = la.make_layout_tv(la.Layout((32, 8), (8, 1)), la.Layout((1, 8), (1, 1)))
    r = coverage(tv, tiler)
    assert r.holds and r.method == "f2" and r.tile_shape == (32, 64)
    assert coverage(la.TVLayout(tv, tiler)).holds


def test_coverage_counterexamples():
    dup = coverage(la.Layout((64, 8), (1, 32)), (64, 8))
    assert not dup.holds and dup.counterexample.kind == "duplicate"
    assert dup.counterexample.element == 32 and len(dup.counterexample.touched_by) == 2
    oor = coverage(la.Layout((64, 8), (1, 128)), (64, 8))
    assert oor.counterexample.kind == "out of range" and oor.out_of_range == 256
    miss = coverage(la.Layout((64, 4), (1, 128)), (64, 8))
    assert miss.counterexample.kind == "missing" and miss.counterexample.coord == (0, 1)
    gap = coverage(np.arange(0, 1024, 2).reshape(64, 8), 1024)
    assert not gap.holds and gap.missing == 512
    gap2 = coverage(np.arange(511).reshape(511, 1), (512,))
    assert gap2.counterexample.kind == "missing" and gap2.counterexample.element == 511


def test_bounds_symbolic_sizes():
    tiler, tv = la.make_layout_tv(la.Layout((32, 8), (8, 1)), la.Layout((1, 8), (1, 1)))
    M = sympy.Symbol("M", integer=True, positive=True)
    m = sympy.Symbol("m", integer=True, positive=True)
    K = sympy.Symbol("K", integer=True, positive=True)
    r = in_bounds(tv, tiler, (M, 64))
    assert not r.holds and not r.decided
    assert r.requires == sympy.Eq(sympy.Mod(M, 32), 0)
    assert "touches coordinate" in r.counterexample
    assert in_bounds(tv, tiler, (32 * m, 64)).holds
    assert in_bounds(tv, tiler, (M, K), predicate="element").holds
    v = in_bounds(tv, tiler, (32 * m, K), predicate="vector", vector=8, vector_dim=1)
    assert not v.holds and v.requires == sympy.Eq(sympy.Mod(K, 8), 0)
    assert "the vector reaches" in v.counterexample
    assert in_bounds(tv, tiler, (32 * m, 8 * K), predicate="vector", vector=8, vector_dim=1).holds


def test_bounds_concrete_and_errors():
    tiler, tv = la.make_layout_tv(la.Layout((32, 8), (8, 1)), la.Layout((1, 8), (1, 1)))
    r = in_bounds(tv, tiler, (100, 64))
    assert not r.holds and r.decided and "127 >= 100" in r.counterexample
    assert in_bounds(tv, tiler, (96, 128)).holds
    with pytest.raises(VerifyError, match="same rank"):
        in_bounds(tv, tiler, (96,))
    with pytest.raises(VerifyError, match="predicate"):
        in_bounds(tv, tiler, (96, 64), predicate="maybe")
    with pytest.raises(AccessError, match="consecutive"):
        in_bounds(tv, tiler, (96, 64), predicate="vector", vector=8, vector_dim=0)
    # a vector_dim outside the tile used to skip the vector guard (and vector=) unnoticed
    for dim in (2, -1, None):
        with pytest.raises(VerifyError, match="vector_dim"):
            in_bounds(tv, tiler, (96, 64), predicate="vector", vector=8, vector_dim=dim)


# ---- search ----------------------------------------------------------------------------------------

READ64 = la.Layout((64, 8), (1, 64))                       # lane l: row l, 8 f16 (col-major index)
WRITE64 = la.Layout(((8, 8), 8), ((64 * 8, 1), 64))        # lane l: row l//8, 16-byte chunk l%8


def test_suggest_swizzle_finds_sw333_for_the_64_row_tile():
    r = suggest_swizzle((64, 64), WRITE64, READ64)
    assert r.holds and (r.swizzle.bits, r.swizzle.base, r.swizzle.shift) == (3, 3, 3)
    assert r.method == "f2" and all(x.holds for x in r.results)
    assert r.tried > 1


def test_suggest_swizzle_none_needed():
    rows = la.Layout((64, 8), (8, 1))                      # already conflict-free (1-D)
    r = suggest_swizzle((64, 8), None, la.Layout((64, 8), (1, 64)),
                        read_instruction="ds_read_b128")
    assert r.holds and r.swizzle is None and r.tried == 1


def test_suggest_padding_b_operand_b64():
    read = la.Layout(((16, 4), 4), ((1, 64), 16))          # B^T tile (16 n x 128 k) col-major
    r = suggest_padding((16, 128), read=read, read_instruction="ds_read_b64")
    assert r.holds and r.pad == 4 and r.lds == la.Layout((16, 128), (132, 1))
    assert r.ways_unpadded == (16,) and r.method == "sympy"
    assert r.results[0].holds


def test_suggest_padding_write_read_pair():
    r = suggest_padding((64, 64), WRITE64, READ64)
    assert r.holds and r.pad == 8
    none = suggest_padding((64, 64), WRITE64, READ64, max_pad=7)
    assert not none.holds and none.pad is None and "best pad" in none.counterexample


def test_search_errors():
    with pytest.raises(LayoutError, match="tile_shape"):
        suggest_padding((64,), read=READ64)
    with pytest.raises(LayoutError, match="at least one"):
        suggest_swizzle((64, 64))
    with pytest.raises(LayoutError, match="power of two"):
        suggest_swizzle((48, 64), read=la.Layout((48, 8), (1, 48)))


def test_f2_disagreeing_with_the_enumeration_is_a_verifier_bug(monkeypatch):
    """coverage and vector_width share verify.f2proof.cross_check: an F2 answer that differs
    from the exhaustive one raises VerifierBug rather than returning either."""
    import sys
    from layoutalg.verify import VerifierBug
    cov_mod = sys.modules["layoutalg.verify.coverage"]
    vec_mod = sys.modules["layoutalg.verify.vectorize"]
    tiler, tv = la.make_layout_tv(la.Layout((32, 8), (8, 1)), la.Layout((1, 8), (1, 1)))
    monkeypatch.setattr(cov_mod, "_f2_bijective", lambda layout, n: False)
    with pytest.raises(VerifierBug, match="bijective"):
        coverage(tv, tiler)
    monkeypatch.setattr(vec_mod, "_f2_width", lambda *a: 1)
    with pytest.raises(VerifierBug, match="widest vector"):
        vector_width(la.Layout((64, 8), (8, 1)))
    with pytest.raises(VerifyError, match="needs a layout"):
        vector_width(np.zeros((64, 8), dtype=np.int64), method="f2")
    assert coverage(np.arange(64).reshape(64, 1)).method == "exhaustive"
