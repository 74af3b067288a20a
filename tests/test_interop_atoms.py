"""MMA atoms from FlyDSL and CuTe C++ checked against mfma_specs / mfma_specs.nvidia.

tests/fixtures/flydsl_atoms.json holds what FlyDSL 0.5.0 prints for every gfx942 MFMA atom it
builds (scripts/flydsl_atoms_fixture.py); dialect_strings.json holds CuTe's SM80 traits.
"""

from __future__ import annotations

import json
import os

import pytest

import layoutalg as la
import mfma_specs as ms
from layoutalg.interop import InteropError
from layoutalg.interop.atoms import check_flydsl_atom, check_mma_atom, find_instruction
from mfma_specs.nvidia import MMA_M16N8K16_F16

HERE = os.path.dirname(__file__)
FLY = json.load(open(os.path.join(HERE, "fixtures", "flydsl_atoms.json")))
STRINGS = json.load(open(os.path.join(HERE, "fixtures", "dialect_strings.json")))


def _strings(a):
    return (a["mma_op"], a["tv_a"], a["tv_b"], a["tv_c"])


MFMA_ATOMS = [a for a in FLY["atoms"] if "arch" not in a]
WMMA_ATOMS = [a for a in FLY["atoms"] if "arch" in a]


@pytest.mark.parametrize("a", MFMA_ATOMS, ids=lambda a: a["instruction"])
def test_flydsl_atoms_right_exactly_when_single_block(a):
    r = check_flydsl_atom(_strings(a))
    multi = ms.lookup("gfx942", a["instruction"]).blocks > 1
    assert r.instruction == a["instruction"]
    assert r.holds is (not multi), r.summary()


@pytest.mark.parametrize("a", WMMA_ATOMS, ids=lambda a: f"{a['arch']}-{a['instruction']}")
def test_flydsl_wmma_atoms(a):
    """gfx11: equal.  gfx120x: A and B hold K contiguously where mfma_specs (IREE's note)
    interleaves K by 4 - the same permutation on both, so the product is unchanged (Triton's
    kWidth-8 encodings do the same; which register order the hardware uses is not settled
    here)."""
    r = check_flydsl_atom(_strings(a))
    assert r.instruction == a["instruction"]
    if a["arch"] == "gfx1100":
        assert r.holds, r.summary()
    else:
        assert not r.holds and r.k_relabelled
        assert [m.operand for m in r.mismatches] == ["A", "B"]
        assert (r.mismatches[0].lane, r.mismatches[0].item) == (0, 4)


def test_k_relabelling_needs_the_same_permutation_on_both_operands():
    s = ms.lookup("gfx1200", "v_wmma_f32_16x16x16_f16")
    contiguous = "((16,2),8):((1,128),16)"          # FlyDSL's / Triton kWidth-8 A (and B)
    r = check_mma_atom(contiguous, contiguous, s.tv_layout("C"), spec=s)
    assert r.k_relabelled
    # A relabelled, B the instruction's own (N x K in CuTe's convention): a wrong product
    b_own = la.Layout(((16, 2), (4, 2)), ((1, 64), (16, 128)))
    r = check_mma_atom(contiguous, b_own, s.tv_layout("C"), spec=s)
    assert not r.holds and not r.k_relabelled


def test_flydsl_multi_block_witnesses():
    by = {a["instruction"]: a for a in MFMA_ATOMS}
    # MFMA(32,32,1,f32): A has value extent 0 (the defect named in the issue)
    r = check_flydsl_atom(_strings(by["v_mfma_f32_32x32x1_2b_f32"]))
    a = r.mismatches[0]
    assert (a.operand, a.lane, a.item, a.got) == ("A", 0, 0, None)
    assert "got 0" in a.why and a.wrong == a.total == 64
    # MFMA(32,32,4,f16) 2 blocks: A has 2 values a lane, the instruction 4 -> item 2 missing;
    # C covers one 32x32 block, so block 1 (item 16 of lane 0) is missing
    r = check_flydsl_atom(_strings(by["v_mfma_f32_32x32x4_2b_f16"]))
    first = {m.operand: m for m in r.mismatches}
    assert (first["A"].lane, first["A"].item, first["A"].expected) == (0, 2, (0, 2, 0))
    assert (first["C"].lane, first["C"].item, first["C"].expected) == (0, 16, (0, 0, 1))
    assert "lane 0 item 2 holds A[0, 2] but the atom says nothing" in r.summary()


def test_every_flydsl_multi_block_atom_is_caught():
    multi = [a for a in MFMA_ATOMS if ms.lookup("gfx942", a["instruction"]).blocks > 1]
    assert len(multi) == 12
    assert not any(check_flydsl_atom(_strings(a)).holds for a in multi)


def test_planted_single_entry_error_is_found_at_its_lane_and_item():
    s = ms.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    good = s.tv_layout("A")
    assert check_mma_atom(good, s.tv_layout("B"), s.tv_layout("C"), spec=s,
                          convention="amd").holds
    planted = la.Layout(((16, 4), 4), ((1, 32), 16))    # lane-group stride 64 -> 32
    r = check_mma_atom(planted, s.tv_layout("B"), s.tv_layout("C"), spec=s, convention="amd")
    m = r.mismatches[0]
    assert not r.holds and len(r.mismatches) == 1
    assert (m.operand, m.lane, m.item) == ("A", 16, 0)
    assert m.expected == (0, 4, 0) and m.got == (0, 2, 0)


def test_cute_convention_reads_b_as_n_by_k():
    s = ms.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    b_amd = s.tv_layout("B")
    # the same element map written N x K (CuTe/FlyDSL) is FlyDSL's printed B
    assert check_mma_atom(s.tv_layout("A"), "((16,4),4):((1,64),16)", s.tv_layout("C"),
                          spec=s, convention="cute").holds
    assert not check_mma_atom(s.tv_layout("A"), b_amd, s.tv_layout("C"), spec=s,
                              convention="cute").holds


def test_cute_cpp_sm80_atom_equals_our_nvidia_spec():
    t = STRINGS["cute-c++-sm80"]
    r = check_mma_atom(t["tv_a"], t["tv_b"], t["tv_c"], spec=MMA_M16N8K16_F16,
                       convention="cute")
    assert r.holds, r.summary()
    # planted: CuTe's C with two value strides swapped is caught
    bad = t["tv_c"].replace("(_16,_8)", "(_8,_16)")
    r = check_mma_atom(t["tv_a"], t["tv_b"], bad, spec=MMA_M16N8K16_F16, convention="cute")
    assert not r.holds and r.mismatches[0].operand == "C"


def test_cute_dsl_sm80_atom_equals_our_nvidia_spec():
    t = STRINGS["cute-dsl"]["sm80_atom"]       # printed by CuTe DSL 4.8.1 (no GPU)
    assert check_mma_atom(t["tv_a"], t["tv_b"], t["tv_c"], spec=MMA_M16N8K16_F16).holds
    assert t == {k: STRINGS["cute-c++-sm80"][k].replace("_", "") for k in t}


def test_live_flydsl_atom_if_installed():
    fx = pytest.importorskip("flydsl.expr")
    from flydsl._mlir import ir
    from flydsl.expr.rocdl import universal as U
    with ir.Context(), ir.Location.unknown():
        at = fx.MmaAtomType.get(mma_op=U.MFMA(32, 32, 1, ir.F32Type.get()))
        r = check_flydsl_atom(at)
        ok = check_flydsl_atom(fx.MmaAtomType.get(mma_op=U.MFMA(16, 16, 16, ir.F16Type.get())))
    assert not r.holds and r.mismatches[0].item == 0
    assert ok.holds


def test_bad_inputs_are_refused():
    with pytest.raises(InteropError, match="cannot read an MFMA"):
        find_instruction("!fly_rocdl.cdna3.wmma<16x16x16>")
    with pytest.raises(InteropError, match="names 0 gfx942 instructions"):
        find_instruction("!fly_rocdl.cdna3.mfma<64x64x64, (f16, f16) -> f32>")
    with pytest.raises(InteropError, match="not a FlyDSL MmaAtomType"):
        check_flydsl_atom(object())
    with pytest.raises(InteropError, match="spec= or instruction="):
        check_mma_atom("1:0", "1:0", "1:0")
    with pytest.raises(InteropError, match="convention"):
        check_mma_atom("1:0", "1:0", "1:0", instruction="v_mfma_f32_16x16x16_f16",
                       convention="nvidia")
