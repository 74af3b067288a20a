"""Bank-conflict verifier: the known cases of issue 4, the phase model, proofs and counterexamples."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import layoutalg as la
from layoutalg.errors import LayoutError
from layoutalg.verify import (AccessError, BankResult, LdsModel, VerificationFailed, VerifyError,
                              bank_conflicts, swizzle_from_triton)

SW333 = la.Swizzle(3, 3, 3)


def naive_ways(offsets, model, elem_bytes, base=0):
    """Independent slow reference: max over phases of distinct dwords per bank (one issue)."""
    vec = model.access_bytes // elem_bytes
    worst = 1
    for g in range(offsets.shape[1] // vec):
        for phase in model.phases:
            banks = {}
            for lane in phase:
                a = base + elem_bytes * int(offsets[lane, g * vec])
                for byte in range(a, a + model.access_bytes):
                    dw = byte // model.bank_bytes
                    banks.setdefault(dw % model.banks, set()).add(dw)
            worst = max(worst, max(len(s) for s in banks.values()))
    return worst


def model(instr, arch="gfx942"):
    from mfma_specs.arch import lds_model
    return lds_model(arch, instr)


def b_operand_read(ld):
    """MFMA 16x16x16 f16 B operand: lane l reads B[4*(l//16)+e][l%16], e<4, K contiguous per
    column n (a row-major [N][K] tile with row stride ld): one ds_read_b64 per lane."""
    return la.Layout(((16, 4), 4), ((ld, 4), 1))


# ---- issue 4 known cases -------------------------------------------------------------------------

def test_b_operand_b64_row_stride_128_is_16_way():
    r = bank_conflicts(b_operand_read(128), instruction="ds_read_b64")
    assert not r.holds and r.max_ways == 16
    assert r.method == "f2" and r.proof.ways == 16
    cex = r.counterexample
    assert cex.phase == 0 and cex.ways == 16 and len(cex.lanes) == 16
    assert all(d % 32 == cex.bank for d in cex.dwords)
    assert len(set(cex.dwords)) == 16


def test_b_operand_b64_pad_2_is_still_2_way():
    r = bank_conflicts(b_operand_read(130), instruction="ds_read_b64")
    assert not r.holds and r.max_ways == 2
    assert r.method == "exhaustive"          # 130 is not a power of two: no F2 view
    assert any("F2 proof not applicable" in n for n in r.notes)
    assert not r.aligned                     # 260-byte rows: 8-byte vectors only 4-aligned
    cex = r.counterexample
    # lanes n and n+1 of one phase share bank n+1 (dword 65n+1 vs 65(n+1))
    assert cex.ways == 2 and len(cex.lanes) == 2
    assert r.total_cycles == 8 and r.total_ideal_cycles == 4


def test_b_operand_b64_pad_4_is_conflict_free():
    r = bank_conflicts(b_operand_read(132), instruction="ds_read_b64")
    assert r.holds and r.max_ways == 1 and r.counterexample is None
    assert r.aligned and r.base_alignment == 8


def test_pad_of_2_is_the_4_byte_rule():
    # what the pad-of-2 rule is about: each lane reads one 4-byte f16 pair of its own row
    # (a column of a row-major tile) with ds_read_b32, 32 lanes per phase
    assert bank_conflicts(la.Layout((64, 2), (128, 1)), instruction="ds_read_b32").max_ways == 32
    assert bank_conflicts(la.Layout((64, 2), (130, 1)), instruction="ds_read_b32").holds


def test_64_row_f16_tile_b128_unswizzled_8_way_and_sw333_free():
    tile = la.Layout((64, 64), (64, 1))                   # row-major, 128-byte rows
    read = la.Layout((64, 8), (1, 64))                    # lane l: row l, cols 0..7 (col-major index)
    r = bank_conflicts(read, lds=tile, instruction="ds_read_b128")
    assert r.max_ways == 8 and r.method == "f2"
    assert set(r.counterexample.lanes) == {0, 1, 2, 3, 20, 21, 22, 23}
    r = bank_conflicts(read, lds=la.ComposedLayout(SW333, 0, tile), instruction="ds_read_b128")
    assert r.holds and r.method == "f2" and r.proof.rank_bank == 3
    # ... and for every k chunk and row block: iteration modes (8 chunks x 2 row blocks of 32)
    it = la.Layout((64, 8, 8), (1, 64, 512))
    r = bank_conflicts(it, lds=la.ComposedLayout(SW333, 0, la.Layout((64, 64), (64, 1))))
    assert r.holds and r.n_issues == 8


def test_phase_model_matters_noncontiguous_free_contiguous_not():
    # lane bit -> 16-byte chunk: b0->1, b1->2, b2->8, b3->16, b4->4, b5->32 (f16: chunk = 8 elems)
    acc = la.Layout(((2, 2, 2, 2, 2, 2), 8), ((8, 16, 64, 128, 32, 256), 1))
    read = bank_conflicts(acc, instruction="ds_read_b128")
    write = bank_conflicts(acc, instruction="ds_write_b128")
    assert read.holds and read.method == "f2"
    assert write.max_ways == 2 and write.method == "f2"
    # same offsets, contiguous-groups model built by hand (e.g. a model of another target)
    contig = LdsModel("test", "ds_read_b128", 16, 32, 4,
                      tuple(tuple(range(i, i + 8)) for i in range(0, 64, 8)))
    assert bank_conflicts(acc, model=contig).max_ways == 2


def test_phase_model_matters_contiguous_free_noncontiguous_not():
    # lane bit -> chunk: b0->1, b1->2, b2->4, b3->16, b4->12, b5->32 (XOR-combined), so
    # lane 20 = b2^b4 -> chunk 8, bank group 0 like lane 0.  Not a CuTe Layout: an int array.
    offs = np.zeros((64, 8), dtype=np.int64)
    cols = [1, 2, 4, 16, 12, 32]
    for lane in range(64):
        c = 0
        for b in range(6):
            if lane >> b & 1:
                c ^= cols[b]
        offs[lane] = 8 * c + np.arange(8)
    w = bank_conflicts(offs, instruction="ds_write_b128")
    r = bank_conflicts(offs, instruction="ds_read_b128")
    assert w.holds
    assert r.max_ways == 2 and r.method == "exhaustive"
    assert naive_ways(offs, model("ds_read_b128"), 2) == 2


def test_flydsl_preshuffle_f16_sw333_tile():
    # A tile 128 x 64 f16 (128-byte rows), Swizzle<3,3,3>.  Writes: 256 threads x 16 B,
    # thread t -> row t//8, 16-byte chunk t%8, 4 iterations of 32 rows.  Reads (ds_read_b128,
    # two k16 MFMA steps per load): lane l -> row l%16 (+16 i), chunk l//16 (+4 j).
    lds = la.ComposedLayout(SW333, 0, la.Layout((128, 64), (64, 1)))
    write = la.Layout(((8, 32), 8, 4), ((128 * 8, 1), 128, 32))
    read = la.Layout(((16, 4), 8, 8, 2), ((1, 128 * 8), 128, 16, 128 * 32))
    w = bank_conflicts(write, lds=lds, instruction="ds_write_b128")
    r = bank_conflicts(read, lds=lds, instruction="ds_read_b128")
    assert w.holds and w.method == "f2" and w.n_issues == 4 * 4
    assert r.holds and r.method == "f2" and r.n_issues == 16
    plain = bank_conflicts(read, lds=la.Layout((128, 64), (64, 1)))
    assert plain.max_ways == 4


def test_flydsl_preshuffle_fp8_sw343_tile():
    # fp8 A tile 128 x 128 (128-byte rows), Swizzle<3,4,3> (= FlyDSL's XOR16 on 16-byte
    # column blocks with row % 8).  16 elements per 16-byte vector.
    lds = la.ComposedLayout(la.Swizzle(3, 4, 3), 0, la.Layout((128, 128), (128, 1)))
    write = la.Layout(((8, 32), 16, 4), ((128 * 16, 1), 128, 32))
    read = la.Layout(((16, 4), 16, 8, 2), ((1, 128 * 16), 128, 16, 128 * 64))
    w = bank_conflicts(write, lds=lds, instruction="ds_write_b128", elem_bytes=1)
    r = bank_conflicts(read, lds=lds, instruction="ds_read_b128", elem_bytes=1)
    assert w.holds and r.holds and r.method == "f2"
    assert bank_conflicts(read, lds=la.Layout((128, 128), (128, 1)), elem_bytes=1).max_ways == 4
    # the same fp8 tile with the f16 swizzle <3,3,3> splits the 16-byte vectors
    with pytest.raises(AccessError, match="contiguous"):
        bank_conflicts(read, elem_bytes=1,
                       lds=la.ComposedLayout(SW333, 0, la.Layout((128, 128), (128, 1))))


def test_triton_swizzled_mfma_operand():
    # Triton's AMD MFMA K-contiguous operand encoding for f16, K = 64, kWidth = 4:
    # vec = 4, perPhase = max(1, 64 / 64) = 1, maxPhase = min(16 / 1, 64 / 4) = 16
    sw = swizzle_from_triton(vec=4, per_phase=1, max_phase=16, row_elems=64)
    assert (sw.bits, sw.base, sw.shift) == (4, 2, 4)
    lds = la.ComposedLayout(sw, 0, la.Layout((64, 64), (64, 1)))
    # A operand of 16x16x16 f16: lane l reads A[l%16][4*(l//16)+e] -> ds_read_b64; 4 row
    # blocks of 16 and 4 k steps
    read = la.Layout(((16, 4), 4, 4, 4), ((1, 64 * 4), 64, 16, 64 * 16))
    r = bank_conflicts(read, lds=lds, instruction="ds_read_b64")
    assert r.holds and r.method == "f2" and r.n_issues == 16
    assert bank_conflicts(read, lds=la.Layout((64, 64), (64, 1)),
                          instruction="ds_read_b64").max_ways == 16
    # K = 32: perPhase 2, maxPhase 8
    sw32 = swizzle_from_triton(vec=4, per_phase=2, max_phase=8, row_elems=32)
    lds32 = la.ComposedLayout(sw32, 0, la.Layout((64, 32), (32, 1)))
    read32 = la.Layout(((16, 4), 4, 2, 4), ((1, 64 * 4), 64, 64 * 16, 16))
    assert bank_conflicts(read32, lds=lds32, instruction="ds_read_b64").holds


# ---- result structure ------------------------------------------------------------------------------

def test_result_arrays_for_diagrams():
    tile = la.Layout((64, 64), (64, 1))
    r = bank_conflicts(la.Layout((64, 8), (1, 64)), lds=tile)
    assert isinstance(r, BankResult)
    assert r.lane_addresses.shape == (64,) and r.lane_addresses[1] == 128
    assert r.lane_banks.shape == (64, 4) and list(r.lane_banks[1]) == [0, 1, 2, 3]
    assert r.lane_phase[20] == 0 and r.lane_phase[4] == 1
    assert r.conflict_lanes.all()
    v = r.phase_view(0)
    assert list(v["lanes"]) == [0, 1, 2, 3, 20, 21, 22, 23] and v["ways"] == 8
    assert list(r.phase_cycles) == [8] * 8 and list(r.ideal_cycles) == [1] * 8
    s = str(r)
    assert "8-way" in s and "counterexample" in s and "method: f2" in s
    assert "<div" in r._repr_html_()


def test_truth_value_is_refused():
    r = bank_conflicts(b_operand_read(132), instruction="ds_read_b64")
    with pytest.raises(TypeError, match="holds"):
        bool(r)
    assert r.assert_holds() is r
    with pytest.raises(VerificationFailed, match="16-way"):
        bank_conflicts(b_operand_read(128), instruction="ds_read_b64").assert_holds()


def test_broadcast_is_not_a_conflict():
    r = bank_conflicts(la.Layout((64, 8), (0, 1)))       # every lane reads the same vector
    assert r.holds and r.method == "f2"
    offs = np.tile(np.arange(4), (64, 1))
    assert bank_conflicts(offs, instruction="ds_read_b64").holds


def test_multiple_waves_and_value_groups_are_separate_issues():
    acc = la.Layout((256, 16), (16, 1))                 # 4 waves, 2 b128 groups per lane
    r = bank_conflicts(acc, instruction="ds_read_b128")
    assert r.n_issues == 8
    bad = np.zeros((128, 8), dtype=np.int64)
    bad[:64] = np.arange(64)[:, None] * 8 + np.arange(8)     # wave 0 fine
    bad[64:] = np.arange(64)[:, None] * 64 + np.arange(8)    # wave 1 hits bank 0 only
    r = bank_conflicts(bad)
    assert r.max_ways == 8 and "wave 1" in r.reported_issue


def test_base_offset_shift_lemma():
    acc = b_operand_read(130)
    ref = bank_conflicts(acc, instruction="ds_read_b64").max_ways
    for base in (4, 8, 12, 1024):
        assert bank_conflicts(acc, instruction="ds_read_b64", base=base).max_ways == ref
    # a 2-byte shift changes which dwords are covered: the lemma does not apply
    r = bank_conflicts(b_operand_read(132), instruction="ds_read_b64", base=2)
    assert not r.aligned


def test_user_supplied_model_and_gfx950():
    m950 = LdsModel("gfx950", "ds_read_b128", 16, 64, 4, (
        (0, 1, 2, 3, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 26, 27),
        (4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 28, 29, 30, 31),
        tuple(range(32, 36)) + tuple(range(44, 48)) + tuple(range(52, 60)),
        tuple(range(36, 44)) + tuple(range(48, 52)) + tuple(range(60, 64))))
    assert m950.phase_subspace() == (1, 2, 12, 20)
    tile = la.Layout((64, 128), (128, 1))               # 256-byte rows = one 64-bank period
    read = la.Layout((64, 8), (1, 64))
    r = bank_conflicts(read, lds=tile, model=m950)
    assert r.max_ways == 16 and r.method == "f2"
    sw = la.ComposedLayout(la.Swizzle(4, 3, 4), 0, tile)
    assert bank_conflicts(read, lds=sw, model=m950).holds
    # the same access on gfx942 (32 banks) with that swizzle
    assert bank_conflicts(read, lds=sw, instruction="ds_read_b128").holds


def test_gfx950_from_mfma_specs_if_available():
    try:
        m = model("ds_read_b128", "gfx950")
    except LayoutError:
        pytest.skip("mfma_specs has no gfx950 LDS table yet")
    assert m.banks == 64 and m.phase_subspace() is not None


# ---- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(access=la.Layout((32, 8), (8, 1))), "wave has 64 lanes"),
    (dict(access=la.Layout((64, 6), (8, 1))), "multiple of 8"),
    (dict(access=la.Layout((64, 8), (1, 64))), "not 8 contiguous"),
    (dict(access="x"), "expected a TV Layout"),
    (dict(access=np.zeros((64, 8, 2, 2), dtype=int)), "must be"),
    (dict(access=-np.ones((64, 8), dtype=int)), "negative"),
    (dict(access=la.Layout((64, 8), (8, 1)), instruction="ds_read_b96"), "ds_read_b96"),
    (dict(access=la.Layout((64, 8), (8, 1)), arch="gfx9999"), "gfx9999"),
    (dict(access=la.Layout((64, 8), (8, 1)), elem_bytes=3), "elem_bytes"),
    (dict(access=la.Layout((64, 8), (8, 1)), method="magic"), "method"),
    (dict(access=la.Layout((64, 8), (8, 1)), model="gfx942"), "LdsModel"),
    (dict(access=la.Layout((64, 8), (8, 1)), base=-4), "base"),
])
def test_bad_input_gives_specific_layout_errors(kwargs, match):
    access = kwargs.pop("access")
    with pytest.raises(LayoutError, match=match):
        bank_conflicts(access, **kwargs)


def test_forcing_f2_on_a_non_f2_access_is_an_error():
    with pytest.raises(VerifyError, match="F2 method does not apply"):
        bank_conflicts(b_operand_read(130), instruction="ds_read_b64", method="f2")
    r = bank_conflicts(b_operand_read(128), instruction="ds_read_b64", method="exhaustive")
    assert r.method == "exhaustive" and r.max_ways == 16 and r.proof is None


# ---- properties ------------------------------------------------------------------------------------

INSTRS = ["ds_read_b32", "ds_read_b64", "ds_read_b128", "ds_write_b128"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(INSTRS), st.sampled_from([1, 2, 4]),
       st.lists(st.integers(0, 300), min_size=6, max_size=6), st.integers(0, 3))
def test_vectorised_kernel_matches_naive_reference(instr, eb, strides, seed):
    m = model(instr)
    if m.access_bytes < eb:
        return
    vec = m.access_bytes // eb
    rng = np.random.default_rng(seed)
    lanes = np.arange(64)
    offs = sum(((lanes >> b) & 1) * s for b, s in enumerate(strides)) * vec
    offs = offs + rng.integers(0, 3) * vec
    arr = offs[:, None] + np.arange(vec)
    r = bank_conflicts(arr, instruction=instr, elem_bytes=eb)
    assert r.max_ways == naive_ways(arr, m, eb)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INSTRS), st.permutations(list(range(11))), st.integers(0, 3),
       st.integers(0, 4), st.integers(0, 4), st.booleans())
def test_f2_proof_agrees_with_exhaustive_on_random_swizzled_layouts(instr, perm, b, mm, s, rep):
    """bank_conflicts raises VerifierBug if the F2 rank and the enumeration ever disagree."""
    m = model(instr)
    vec = m.access_bytes // 2
    vb = vec.bit_length() - 1
    # lane bits and one extra iteration bit go to distinct element bits above the vector
    bits = [x + vb for x in perm[:7]]
    lane_strides = tuple(1 << x for x in bits[:6])
    if rep:
        lane_strides = lane_strides[:5] + (0,)           # replicated lanes (broadcast)
    inner = la.Layout(((2,) * 6, vec, 2), (lane_strides, 1, 1 << bits[6]))
    s = max(s, b)
    sw = la.Swizzle(b, vb + mm, s)
    r = bank_conflicts(la.ComposedLayout(sw, 0, inner), instruction=instr)
    assert r.method == "f2" and r.max_ways == r.proof.ways


def test_overlapping_writes_are_flagged_as_races():
    r = bank_conflicts(la.Layout((64, 8), (0, 1)), instruction="ds_write_b128")
    assert r.holds                                   # one dword per bank: no conflict ...
    assert any("WRITE RACE" in n for n in r.notes)   # ... but 64 lanes store the same bytes
    ok = bank_conflicts(la.Layout((64, 8), (8, 1)), instruction="ds_write_b128")
    assert not any("RACE" in n for n in ok.notes)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(INSTRS), st.permutations(list(range(6))), st.integers(1, 3),
       st.integers(0, 3), st.sampled_from([32, 64, 128]))
def test_f2_proof_through_a_swizzled_lds_tile(instr, rows_perm, b, s_extra, cols):
    """TV partition of a (64 x cols) tile composed with a swizzled row-major LDS layout: the
    F2 certificate (lds o tv) must match the enumeration of every issue (else VerifierBug)."""
    m = model(instr)
    vec = m.access_bytes // 2
    vb = vec.bit_length() - 1
    # lane bits pick rows (a permutation of the 6 row bits); values run along the row;
    # iterations walk the vector chunks of the row
    row_strides = tuple(1 << p for p in rows_perm)
    chunks = cols // vec
    tv = la.Layout(((2,) * 6, vec, chunks), (row_strides, 64, 64 * vec))
    sw = la.Swizzle(b, vb, max(b, (cols.bit_length() - 1) - vb + s_extra))
    lds = la.ComposedLayout(sw, 0, la.Layout((64, cols), (cols, 1)))
    r = bank_conflicts(tv, lds=lds, instruction=instr)
    assert r.method == "f2" and r.n_issues == chunks


def test_partition_reaching_outside_the_lds_tile_is_refused():
    with pytest.raises(AccessError, match="only 4096 elements"):
        bank_conflicts(la.Layout((64, 8, 2), (1, 64, 4096)), lds=la.Layout((64, 64), (64, 1)))
    with pytest.raises(LayoutError, match="partition"):
        LdsModel("x", "ds_read_b128", 16, 32, 4, ((0,),))


def test_f2_domain_never_covers_constants_the_swizzle_moves_into_the_vector_bits():
    """Sw<1,0,9> XORs element bit 9 into bit 0.  The one issue evaluated is a valid,
    conflict-free ds_read_b128, but an issue constant with bit 9 set (a multiple of 8 elements
    outside the lanes' bits) would split every lane's vector: the F2 extension to "every issue
    constant" must not be claimed (it used to be, with method 'f2')."""
    read = la.Layout((64, 8), (8, 1))
    lds = la.ComposedLayout(la.Swizzle(1, 0, 9), 0, la.Layout(4096, 1))
    r = bank_conflicts(read, lds=lds)
    assert r.holds and r.method == "exhaustive"
    assert any("F2 proof not applicable" in n and "swizzle" in n for n in r.notes)
    with pytest.raises(VerifyError, match="F2 method does not apply"):
        bank_conflicts(read, lds=lds, method="f2")
    # the constant the old domain text covered really is not one ds_read_b128
    with pytest.raises(AccessError, match="not 8 contiguous"):
        bank_conflicts(read, lds=la.ComposedLayout(la.Swizzle(1, 0, 9), 512, la.Layout(4096, 1)))


def test_negative_tile_indices_through_an_lds_layout_are_refused():
    """Tile index -511 is no element of the lds tile, yet CuTe-style evaluation of
    (64,64):(64,1) at it gives offset 56 (floor division into the unbounded last mode): the
    check used to accept such a partition and report a verdict about addresses it made up."""
    lane, val = np.arange(64)[:, None], np.arange(8)[None, :]
    arr = lane % 63 + 1 - 512 + 64 * val
    with pytest.raises(AccessError, match="negative"):
        bank_conflicts(arr, lds=la.Layout((64, 64), (64, 1)))
    with pytest.raises(AccessError, match="negative"):
        bank_conflicts(la.Layout((64, 8), (1, -64)), lds=la.Layout((64, 64), (64, 1)))


def test_offsets_past_int64_are_refused_not_wrapped():
    """Lane 63 of (64,8):(2^57,1) sits at element 63 * 2^57 < 2^63 but byte 63 * 2^58, which
    wrapped to a negative int64 address; the check used to return a verdict on those."""
    for stride in (1 << 57, 1 << 62):
        with pytest.raises(AccessError, match="int64"):
            bank_conflicts(la.Layout((64, 8), (stride, 1)))
    assert bank_conflicts(la.Layout((64, 8), (1 << 50, 1))).max_ways == 8
