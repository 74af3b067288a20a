"""Symbolic (sympy) bank-conflict proofs: exact sets of paddings / strides, checked point-wise."""

import pytest
import sympy
from hypothesis import assume, given, settings, strategies as st

import layoutalg as la
from layoutalg.errors import SymbolicError
from layoutalg.symbolic import index_symbol
from layoutalg.verify import AccessError, SymbolicBankResult, bank_conflicts

P = index_symbol("p")


def b_read(ld):
    return la.Layout(((16, 4), 4), ((ld, 4), 1))


def test_padding_set_for_the_b_operand_b64_read():
    r = bank_conflicts(b_read(128 + P), instruction="ds_read_b64")
    assert isinstance(r, SymbolicBankResult) and r.method == "sympy"
    assert not r.holds
    cf = r.conflict_free
    assert (cf.modulus, set(cf.residues)) == (8, {4})      # pad = 4 (mod 8)
    assert cf.min() == 4 and 132 - 128 in cf and 2 not in cf
    assert r.ways(0) == 16 and r.ways(2) == 2 and r.ways(4) == 1
    assert set(r.aligned.residues) == {0} and r.aligned.modulus == 4
    assert r.counterexample.value == 0 and r.counterexample.result.max_ways == 16
    assert sympy.simplify(cf.condition().subs(P, 12)) == sympy.true
    assert sympy.simplify(cf.condition().subs(P, 10)) == sympy.false
    assert "4 (mod 8)" in str(r)


def test_condition_on_a_runtime_leading_dimension():
    ld = index_symbol("ld")
    r = bank_conflicts(b_read(ld), instruction="ds_read_b64", domain=(16, None))
    assert r.conflict_free.modulus == 8 and set(r.conflict_free.residues) == {4}
    assert r.conflict_free.values(16, 40) == [20, 28, 36]


def test_lds_layout_with_symbolic_padding():
    tile = la.Layout((64, 64), (64 + P, 1))
    read = la.Layout((64, 8), (1, 64))
    r = bank_conflicts(read, lds=tile, instruction="ds_read_b128", domain=(0, 64))
    assert r.conflict_free.min() == 8
    assert [x for x in range(0, 65) if x in r.conflict_free and x in r.aligned] == [8, 24, 40, 56]


def test_exception_points_where_lanes_alias():
    # lane l reads 2 f16 at row l of stride p: p = 0 is a broadcast (free) although p = 128
    # (same residue) is 32-way; p = 1 is misaligned and 2-way
    r = bank_conflicts(la.Layout((64, 2), (P, 1)), instruction="ds_read_b32", domain=(0, 300))
    assert 0 in r.exceptions and r.ways(0) == 1 and r.ways(128) == 32
    assert 0 in r.conflict_free and 128 not in r.conflict_free
    for p in range(0, 300, 7):
        assert r.ways(p) == r.at(p).max_ways, p


def test_pointwise_agreement_with_concrete_checks():
    r = bank_conflicts(b_read(100 + P), instruction="ds_read_b64", domain=(0, None))
    for p in range(0, 260):
        c = r.at(p)
        assert r.ways(p) == c.max_ways, p
        assert (p in r.conflict_free) == c.holds
        assert (p in r.aligned) == c.aligned


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=6, max_size=6),
       st.sampled_from(["ds_read_b32", "ds_read_b64", "ds_read_b128", "ds_write_b128"]),
       st.lists(st.integers(0, 400), min_size=4, max_size=4))
def test_lemma_on_random_affine_accesses(lane_terms, instr, probes):
    assume(any(b for _, b in lane_terms))
    vec = {"ds_read_b32": 2, "ds_read_b64": 4}.get(instr, 8)
    strides = tuple(vec * (a + 1) + b * P for a, b in lane_terms)
    acc = la.Layout(((2,) * 6, vec), (strides, 1))
    r = bank_conflicts(acc, instruction=instr, domain=(0, None))
    for p in probes:
        assert r.ways(p) == r.at(p).max_ways


def test_symbolic_errors():
    q = index_symbol("q")
    with pytest.raises(SymbolicError, match="exactly one symbol"):
        bank_conflicts(la.Layout((64, 8), (P + q, 1)))
    with pytest.raises(SymbolicError, match="affine"):
        bank_conflicts(la.Layout((64, 8), (P * P, 1)))
    with pytest.raises(SymbolicError, match="swizzle"):
        bank_conflicts(la.Layout((64, 8), (1, 64)),
                       lds=la.ComposedLayout(la.Swizzle(3, 3, 3), 0, la.Layout((64, 64), (P, 1))))
    with pytest.raises(AccessError, match="negative"):
        bank_conflicts(la.Layout((64, 8), (P - 100, 1)))
    with pytest.raises(AccessError, match="bounded"):
        bank_conflicts(la.Layout((64, 8), (1000 - P, 1)))
    with pytest.raises(SymbolicError, match="extent"):
        bank_conflicts(la.Layout((P, 8), (8, 1)))
    r = bank_conflicts(b_read(128 + P), instruction="ds_read_b64", domain=(0, 10))
    with pytest.raises(Exception, match="outside"):
        r.ways(11)


def test_symbolic_lds_refuses_tile_indices_outside_the_tile():
    """With a symbolic lds, a partition reaching past the tile (or below index 0) is an
    AccessError, as with a concrete lds (it used to fail with a bare ValueError)."""
    p = index_symbol("p")
    lds = la.Layout((64, 64), (64 + p, 1))
    with pytest.raises(AccessError, match="only 4096 elements"):
        bank_conflicts(la.Layout((64, 8, 2), (1, 64, 4096)), lds=lds)
    with pytest.raises(AccessError, match="negative"):
        bank_conflicts(la.Layout((64, 8), (1, -64)), lds=lds)
