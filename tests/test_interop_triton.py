"""Triton linear layouts <-> layoutalg: round trips against mfma_specs, shared layouts, errors.

The fixture tests/fixtures/triton_bases.json holds the bases Triton 3.9 builds (made by
scripts/triton_bases_fixture.py); these tests need no Triton.  With Triton installed,
``test_fixture_matches_live_triton`` re-asks Triton so the fixture cannot drift.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import layoutalg as la
import mfma_specs as ms
from layoutalg.interop import InteropError
from layoutalg.interop.triton import (TritonBases, bases_of, from_linear_layout,
                                      to_linear_layout, to_triton)
from layoutalg.verify import LdsModel, bank_conflicts, swizzle_from_triton

HERE = os.path.dirname(__file__)
FIXTURE = json.load(open(os.path.join(HERE, "fixtures", "triton_bases.json")))
ENCODINGS = [e for e in FIXTURE["encodings"] if "tile" not in e]     # one instruction tile
BLOCKED = [e for e in FIXTURE["encodings"] if "tile" in e]          # 16-block 4x4 MFMAs


def _natural(e):
    s = ms.lookup(e["arch"], e["instruction"])
    return e["k_width"] == [s.items("A"), s.items("B")]


def _entries(tv, ref):
    lanes, items = ref[0].size(), ref[1].size()
    assert tv.layout_tv[0].size() == lanes and tv.layout_tv[1].size() == items
    return [(l, i, tv.layout_tv(l, i), ref(l, i)) for l in range(lanes) for i in range(items)]


def _id(e):
    return f"{e['arch']}-{e['instruction']}-kw{e['k_width'][0]}"


def test_fixture_covers_the_targets_of_the_issue():
    archs = {e["arch"] for e in ENCODINGS}
    assert archs == {"gfx942", "gfx950", "gfx1100", "gfx1200"}
    dense = [s for a in ("gfx942", "gfx950", "gfx1100", "gfx1200")
             for s in ms.instructions(a) if s.kind != "smfmac" and s.blocks == 1]
    built = {(e["arch"], e["instruction"]) for e in ENCODINGS}
    assert {(a, s.name) for a in ("gfx942", "gfx950", "gfx1100", "gfx1200")
            for s in ms.instructions(a) if s.kind != "smfmac" and s.blocks == 1} == built
    assert len(dense) == len(built) == 61


@pytest.mark.parametrize("e", [e for e in ENCODINGS if e["arch"] != "gfx1200" or
                               e["k_width"] == [4, 4]], ids=_id)
def test_triton_encoding_equals_mfma_specs_at_every_entry(e):
    s = ms.lookup(e["arch"], e["instruction"])
    for op in "ABC":
        tv = from_linear_layout(e["layouts"][op], wave_size=s.wave_size)
        assert tv.tile_shape == s.tile_shape(op)[:2]
        bad = [x for x in _entries(tv, s.tv_layout(op)) if x[2] != x[3]]
        assert not bad, f"{op}: first (lane, item, triton, ours) = {bad[0]}"


@pytest.mark.parametrize("e", BLOCKED, ids=lambda e: f"{_id(e)}-{e['tile'][0]}x{e['tile'][1]}")
def test_sixteen_block_mfma_tiles_equal_mfma_specs(e):
    """Triton lays the 16 4x4 blocks side by side: a 4x64 tile (blocks along N: column
    ``n = col + 4 * block``, A shared by every block) or, transposed (Triton computes C^T =
    B^T A^T, so its A feeds the instruction's B), a 64x4 tile (blocks along M).  Registers
    beyond the instruction's items are copies (stride 0) of the first ones."""
    s = ms.lookup(e["arch"], e["instruction"])
    trans = e["transposed"]
    for op in "ABC":
        tv = from_linear_layout(e["layouts"][op], wave_size=64)
        inst = {"A": "B", "B": "A", "C": "C"}[op] if trans else op
        items = s.items(inst)
        for lane in range(64):
            for item in range(tv.layout_tv[1].size()):
                got = tv.coord(lane, item)
                if item >= items:        # a copy of an instruction item
                    assert got == tv.coord(lane, item % items)
                    continue
                r, c, blk = s.element(inst, lane, item)
                if op == "C":            # C[r][c] of block blk; transposed: its transpose
                    exp = (c + 4 * blk, r) if trans else (r, c + 4 * blk)
                elif not trans:          # 4x64: A shared, B's columns side by side
                    exp = (r, c) if op == "A" else (r, c + 4 * blk)
                else:                    # 64x4: Triton A = instruction B^T, B = A^T (shared)
                    exp = (c + 4 * blk, r) if op == "A" else (c, r)
                assert got == exp, (op, lane, item, got, exp)


@pytest.mark.parametrize("e", [e for e in ENCODINGS if e["arch"] == "gfx1200" and
                               e["k_width"] == [8, 8]], ids=_id)
def test_gfx12_kwidth8_is_a_shared_k_relabelling(e):
    """With kWidth = 8 Triton's gfx12 operands hold K contiguously; the instruction interleaves
    K in groups of 4 (mfma_specs.wmma).  Witness: lane 0 item 4 holds A[0][4] in Triton's
    encoding and A[0][8] in the instruction's.  A and B differ by the SAME permutation of K, so
    the dot product is unchanged: a relabelling, not a wrong result."""
    s = ms.lookup(e["arch"], e["instruction"])
    a = from_linear_layout(e["layouts"]["A"], wave_size=32)
    b = from_linear_layout(e["layouts"]["B"], wave_size=32)
    assert a.coord(0, 4) == (0, 4) and s.element("A", 0, 4)[:2] == (0, 8)
    perm = {}
    for l in range(32):
        for i in range(s.items("A")):
            (m, kt), (m2, ks, _) = a.coord(l, i), s.element("A", l, i)
            assert m == m2
            assert perm.setdefault(kt, ks) == ks
            (kt, n), (ks, n2, _) = b.coord(l, i), s.element("B", l, i)
            assert n == n2 and perm.setdefault(kt, ks) == ks
    assert sorted(perm) == sorted(perm.values()) == list(range(16))
    assert perm != {k: k for k in range(16)}
    c = from_linear_layout(e["layouts"]["C"], wave_size=32)
    assert all(x[2] == x[3] for x in _entries(c, s.tv_layout("C")))


@pytest.mark.parametrize("e", ENCODINGS[::7], ids=_id)
def test_to_linear_layout_inverts_from_linear_layout(e):
    for op in "ABC":
        b = bases_of(e["layouts"][op])
        tv = from_linear_layout(b)
        wave = 2 ** len(b.bases["lane"])
        back = to_linear_layout(tv, wave_size=wave)
        assert back.shape == b.shape
        for dim in ("register", "lane", "warp"):
            assert back.bases[dim] == b.bases.get(dim, ()), dim


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(7)), st.integers(0, 2))
def test_to_from_round_trip_on_random_power_of_two_layouts(perm, nzero):
    # 64 lanes x 2 values over a 16x8 tile: random bit permutation, some broadcast registers
    strides = [1 << p for p in perm]
    tv = la.Layout(((2,) * 6, (2,) * (1 + nzero)),
                   (tuple(strides[:6]), tuple(strides[6:]) + (0,) * nzero))
    b = to_linear_layout(tv, (16, 8))
    got = from_linear_layout(b)
    assert got.tile_shape == (16, 8)
    for t in range(64):
        for v in range(2 ** (1 + nzero)):
            assert got.layout_tv(t, v) == tv(t, v)


def _triton_swizzled_offset(r, c, vec, pp, mp, ncols):
    phase = (r // pp) % mp
    return r * ncols + (((c // vec) ^ phase) * vec) + c % vec


@pytest.mark.parametrize("sw", FIXTURE["shared"]["swizzled"], ids=lambda s: str(s["vec"]))
def test_swizzled_shared_is_triton_formula_everywhere(sw):
    lds = from_linear_layout({"offset": sw["offset"], "shape": sw["shape"]})
    m, n = sw["shape"]
    if sw["order"] == [1, 0]:   # row-major: dim1 fastest
        for r in range(m):
            for c in range(n):
                assert lds(r + m * c) == _triton_swizzled_offset(r, c, sw["vec"],
                                                                 sw["per_phase"],
                                                                 sw["max_phase"], n)
        if sw["max_phase"] > 1:
            assert isinstance(lds, la.ComposedLayout)
            assert lds.outer == swizzle_from_triton(sw["vec"], sw["per_phase"],
                                                    sw["max_phase"], n)
    else:                       # column-major: dim0 fastest, the roles swap
        for r in range(m):
            for c in range(n):
                assert lds(r + m * c) == _triton_swizzled_offset(c, r, sw["vec"],
                                                                 sw["per_phase"],
                                                                 sw["max_phase"], m)


@pytest.mark.parametrize("pd", FIXTURE["shared"]["padded"], ids=lambda p: str(p["padding"]))
def test_padded_shared_adds_pad_per_interval(pd):
    lds = from_linear_layout(pd)
    m, n = pd["shape"]
    assert isinstance(lds, la.Layout)
    for r in range(m):
        for c in range(n):
            o = r * n + c
            assert lds(r + m * c) == o + sum((o // i) * p for i, p in pd["padding"])


def test_general_xor_shared_layout_is_an_f2_map():
    # offset bit 0 -> (1, 1): both coordinates at once, no swizzle splits it
    b = {"offset": [[1, 1], [0, 1], [2, 0]], "shape": [4, 2]}
    lds = from_linear_layout(b)
    assert isinstance(lds, la.F2Map)
    fwd = la.F2Map([1 + 4, 4, 2], 3)
    for x in range(8):
        assert lds(fwd(x)) == x


@pytest.mark.parametrize("bad, msg", [
    ({"register": [[1, 0]], "lane": [[3, 0]], "shape": [4, 2]}, "several bits"),
    ({"register": [[1, 0]], "lane": [[1, 0]], "shape": [4, 2]}, "same tile position"),
    ({"register": [[1, 0]], "shape": [6, 2]}, "not a power of two"),
    ({"register": [[1, 0, 0]], "shape": [4, 2]}, "rank 2"),
    ({"register": [[4, 0]], "shape": [4, 2]}, "outside 0..3"),
    ({"offset": [[1, 0], [1, 0], [0, 1]], "shape": [4, 2]}, "one-to-one"),
    ({"thread": [[1, 0]], "shape": [4, 2]}, "unknown Triton input dimension"),
    ({"register": [[1, 0]]}, "'shape' entry"),
])
def test_unrepresentable_layouts_are_refused_with_the_reason(bad, msg):
    with pytest.raises(InteropError, match=msg):
        from_linear_layout(bad)


def test_non_layout_objects_are_refused():
    with pytest.raises(InteropError, match="call to_linear_layout on it first"):
        bases_of(object())
    with pytest.raises(InteropError, match="power of two"):
        to_linear_layout(la.Layout((64, 3), (1, 64)), (64, 3))
    with pytest.raises(InteropError, match="has no Triton linear layout"):
        to_linear_layout(la.Layout((64, 2), (3, 64)), (256, 1))


# ---- bank verdicts: our measured phases vs Triton's model -------------------------------------

def _triton_b128_model() -> LdsModel:
    """Triton's get_shared_bank_conflicts model of ds_read_b128: contiguous 8-lane groups."""
    return LdsModel("gfx942", "ds_read_b128", 16, 32, 4,
                    tuple(tuple(range(8 * g, 8 * g + 8)) for g in range(8)), 64,
                    source="Triton 3.9 get_shared_bank_conflicts (contiguous 8-lane groups)")


def _lds(sw):
    return from_linear_layout({"offset": sw["offset"], "shape": sw["shape"]})


def test_bank_verdicts_on_triton_swizzled_layouts_and_the_witness():
    """A row-major 64x64 f16 tile swizzled vec 8 / perPhase 1 / maxPhase 8: each lane reads 8
    consecutive f16 of one row (16 bytes) - the row-wise ds_read_b128 of a dot operand."""
    sh = FIXTURE["shared"]["swizzled"][1]           # vec 8, per_phase 1, max_phase 8, 128x64
    assert (sh["vec"], sh["per_phase"], sh["max_phase"]) == (8, 1, 8)
    lds = _lds(sh)
    m, n = sh["shape"]
    # lane l reads row l, columns 0..7 (values)
    reads = la.Layout((64, 8), (1, m))
    ours = bank_conflicts(reads, lds=lds, instruction="ds_read_b128", elem_bytes=2)
    theirs = bank_conflicts(reads, lds=lds, model=_triton_b128_model(), elem_bytes=2)
    assert ours.holds and ours.max_ways == 1
    assert theirs.holds and theirs.max_ways == 1
    # unswizzled: both models find the conflict
    plain = la.Layout((m, n), (n, 1))
    assert not bank_conflicts(reads, lds=plain, instruction="ds_read_b128", elem_bytes=2).holds


def test_where_triton_model_and_measured_phases_disagree():
    """Witness that Triton's contiguous-8-lane model of ds_read_b128 is not the hardware's.
    Lane l reads the 16-byte slot ``l % 4 + 4 * ((l // 16) % 2) + 8 * (l // 4)`` (f16: 8
    elements a slot).  Measured gfx942 phases pair lanes 0-3 with 20-23 (slots 0-3 and 44-47:
    bank groups 0-3 and 4-7, conflict-free); Triton's model serves lanes 0-7 together (slots
    0-3 and 8-11: bank groups 0-3 twice, 2-way).  Triton would pay for a conflict that the
    hardware does not have."""
    import numpy as np
    slot = [l % 4 + 4 * ((l // 16) % 2) + 8 * (l // 4) for l in range(64)]
    acc = np.array([[8 * slot[l] + v for v in range(8)] for l in range(64)], dtype=np.int64)
    ours = bank_conflicts(acc, instruction="ds_read_b128", elem_bytes=2)
    theirs = bank_conflicts(acc, model=_triton_b128_model(), elem_bytes=2)
    assert ours.holds and ours.max_ways == 1
    assert not theirs.holds and theirs.max_ways == 2
    measured = ours.model.lane_phase()
    assert measured[0] == measured[20] and measured[0] != measured[4]
    assert _triton_b128_model().lane_phase()[0] == _triton_b128_model().lane_phase()[4]


# ---- with and without Triton --------------------------------------------------------------------

def test_module_imports_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import layoutalg.interop.triton as t\n"
            "tv = t.from_linear_layout({'register': [[1, 0]], 'lane': [[0, 1]], "
            "'shape': [2, 2]})\n"
            "assert tv.layout_tv(1, 1) == 3\n"
            "try:\n    t.to_triton(t.to_linear_layout(tv, wave_size=2))\n"
            "except t.InteropError as e:\n    print('refused:', e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "refused: to_triton needs Triton installed" in p.stdout


def test_fixture_matches_live_triton():
    pytest.importorskip("triton")
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
    try:
        import triton_bases_fixture as gen
    finally:
        sys.path.pop(0)
    everything = FIXTURE["encodings"]
    jobs = [(e["arch"], e["version"], e["kind"],
             {"mnk": [ms.lookup(e["arch"], e["instruction"]).m,
                      ms.lookup(e["arch"], e["instruction"]).n,
                      ms.lookup(e["arch"], e["instruction"]).k],
              "kA": e["k_width"][0], "kB": e["k_width"][1],
              **({"tile": e["tile"], "trans": e["transposed"]} if "tile" in e else {}),
              **({"bits": 64} if ms.lookup(e["arch"], e["instruction"]).a_type == "f64"
                 else {})})
            for e in everything]
    live = gen._run_jobs(jobs)
    for e, got in zip(everything, live):
        assert got.get("ok") == e["layouts"], _id(e)


def test_to_triton_builds_the_binding():
    pytest.importorskip("triton")
    e = ENCODINGS[0]
    ll = to_triton(e["layouts"]["C"])
    assert bases_of(ll).bases["lane"] == bases_of(e["layouts"]["C"]).bases["lane"]
    assert from_linear_layout(ll).layout_tv == from_linear_layout(e["layouts"]["C"]).layout_tv


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 5), st.integers(2, 5), st.data())
def test_any_cute_swizzle_round_trips_through_triton_bases(lm, ln, data):
    """Sw<B,M,S> o 0 o (rows, cols):(cols, 1) -> Triton offset bases -> the same swizzle."""
    m, n = 1 << lm, 1 << ln
    bits = lm + ln
    b = data.draw(st.integers(1, bits // 2))
    base = data.draw(st.integers(0, bits - 2 * b))
    shift = data.draw(st.integers(b, bits - base - b))
    lds = la.ComposedLayout(la.Swizzle(b, base, shift), 0, la.Layout((m, n), (n, 1)))
    where = {lds(i): i for i in range(m * n)}
    offset = [[where[1 << j] % m, where[1 << j] // m] for j in range(bits)]
    got = from_linear_layout({"offset": offset, "shape": [m, n]})
    assert got == lds
