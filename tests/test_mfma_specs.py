"""mfma_specs: closed-form TV layouts vs AMD's Matrix Instruction Calculator, arch model, errors.

The oracle (``fixtures/mfma_ground_truth.json.gz``) holds every (lane, item) -> element entry
of every CDNA1-3 instruction; each must equal ``spec.element`` (computed from the layout).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import mfma_specs as ms
from layoutalg import Layout
from layoutalg.errors import LayoutError
from layoutalg.verify.model import LdsModel

from _mfma_oracle import ARCH_OF, TYPE_OF, cases, entries, oracle

# --------------------------------------------------------------------------- oracle: layouts


@pytest.mark.parametrize("calc_arch", ["cdna1", "cdna2", "cdna3"])
def test_instruction_sets_match_the_calculator(calc_arch):
    names = {s.name for s in ms.instructions(ARCH_OF[calc_arch])}
    assert names == set(oracle()[calc_arch])
    assert len(names) == {"cdna1": 20, "cdna2": 27, "cdna3": 46}[calc_arch]


@pytest.mark.parametrize("calc_arch,name", cases())
def test_every_entry_matches_element(calc_arch, name):
    rec = oracle()[calc_arch][name]
    spec = ms.lookup(ARCH_OF[calc_arch], name)
    checked = 0
    for op in ("A", "B", "C", "D"):
        if op not in rec:                      # SMFMAC: no C input
            assert spec.sparse and op == "C"
            assert spec.tv_layout("C") == spec.tv_layout("D")
            continue
        if spec.sparse and op == "A":
            continue
        seen = set()
        for lane, item, r, c, b in entries(rec[op]):
            assert spec.element(op, lane, item) == (r, c, b), (op, lane, item)
            seen.add((lane, item))
            checked += 1
        # the oracle covers every (lane, item) of the layout, no more, no less
        assert seen == {(l, e) for l in range(64) for e in range(spec.items(op))}, op
    if spec.sparse:
        for op in ("A", "K"):
            slots = {}
            for lane, item, r, c, b in entries(rec[op]):
                slots.setdefault((lane, item), set()).add((r, c, b))
            assert len(slots) == 64 * spec.items(op), op
            for (lane, slot), cands in slots.items():
                assert set(spec.candidates(op, lane, slot)) == cands, (op, lane, slot)
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("calc_arch,name", cases())
def test_properties_match_the_calculator(calc_arch, name):
    rec = oracle()[calc_arch][name]
    p = rec["props"]
    s = ms.lookup(ARCH_OF[calc_arch], name)
    assert (s.m, s.n, s.k, s.blocks) == (p["M"], p["N"], p["K"], p["blocks"])
    assert (s.a_type, s.b_type) == (TYPE_OF[p["in_type"]], TYPE_OF[p["in_type_src1"]])
    assert s.acc_type == s.out_type == TYPE_OF[p["out_type"]]
    assert (s.cycles, s.passes, s.flops) == (p["cycles"], p["passes"], p["flops"])
    assert s.sparse == p["sparse"]
    for op, n in p["gprs"].items():
        if n is not None:
            assert s.gprs(op) == n, op
    assert s.builtin == p["builtin"]
    assert [q.type_str() for q in s.builtin_params] == rec["builtin_params"]
    assert s.builtin_return.type_str() == rec["builtin_return"]
    assert s.status == "verified"


def test_doc_example_layout():
    s = ms.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    assert s.tv_layout("A") == Layout(((16, 4), 4), ((1, 64), 16))
    for lane in range(64):
        for e in range(4):
            assert s.element("A", lane, e) == (lane % 16, 4 * (lane // 16) + e, 0)
            assert s.element("B", lane, e) == (4 * (lane // 16) + e, lane % 16, 0)
            assert s.element("C", lane, e) == (4 * (lane // 16) + e, lane % 16, 0)


def _all_specs():
    out = []
    for arch in ("gfx908", "gfx90a", "gfx942", "gfx950"):
        out += [(arch, 64, s) for s in ms.instructions(arch)]
    out += [("gfx1100", 32, s) for s in ms.instructions("gfx1100")]
    out += [("gfx1100", 64, s) for s in ms.instructions("gfx1100", wave_size=64)]
    out += [("gfx1201", 32, s) for s in ms.instructions("gfx1201")]
    return out


def test_every_layout_is_a_layout_onto_its_tile():
    """Each operand's TV layout covers its tile exactly (once, or once per replica)."""
    n = 0
    for arch, wave, s in _all_specs():
        for op in s.operands:
            lay = s.tv_layout(op)
            assert isinstance(lay, Layout)
            assert lay[0].size() == wave == s.wave_size, (s.name, op)
            rows, cols, blocks = s.tile_shape(op)
            vals = np.sort(lay.values().reshape(-1))
            reps = lay.size() // (rows * cols * blocks)
            assert reps * rows * cols * blocks == lay.size(), (s.name, op)
            assert np.array_equal(vals, np.repeat(np.arange(rows * cols * blocks), reps)), \
                (arch, s.name, op)
            assert reps == (2 if (s.family == "RDNA3" and op in "AB" and wave == 32) else
                            4 if (s.family == "RDNA3" and op in "AB") else 1)
            n += 1
    assert n > 500


def test_registry_counts():
    assert len(ms.instructions("gfx908")) == 20
    assert len(ms.instructions("gfx90a")) == 27
    for arch in ("gfx940", "gfx941", "gfx942"):
        assert len(ms.instructions(arch)) == 46
    assert len(ms.instructions("gfx950")) == 68
    assert len(ms.instructions("gfx1100")) == 6 == len(ms.instructions("gfx1151", 64))
    assert len(ms.instructions("gfx1201")) == 9


# --------------------------------------------------------------------------- CDNA4, WMMA


def test_cdna4_set_and_provenance():
    names = {s.name for s in ms.instructions("gfx950")}
    cdna3 = {s.name for s in ms.instructions("gfx942")}
    assert not any("xf32" in n for n in names)                 # removed on gfx950
    assert cdna3 - names == {"v_mfma_f32_16x16x8_xf32", "v_mfma_f32_32x32x4_xf32"}
    new = names - cdna3
    assert {"v_mfma_f32_16x16x32_f16", "v_mfma_f32_32x32x16_bf16", "v_mfma_i32_16x16x64_i8",
            "v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_f32_32x32x64_f8f6f4",
            "v_smfmac_f32_16x16x64_f16", "v_smfmac_i32_32x32x64_i8",
            "v_smfmac_f32_16x16x128_fp8_bf8"} <= new
    for s in ms.instructions("gfx950"):
        assert s.status in ("documented", "inferred") and s.source
        assert (s.status == "inferred") == (s.sparse and s.name in new)
        if s.name in cdna3:   # inherited: same layouts as the verified CDNA3 instruction
            old = ms.lookup("gfx942", s.name)
            assert all(s.tv_layout(op) == old.tv_layout(op) for op in s.operands)
    # OCP fp8 on gfx950, FNUZ on gfx942; FP64 at half rate
    assert ms.lookup("gfx950", "v_mfma_f32_16x16x32_fp8_fp8").a_type == "fp8e4m3fn"
    assert ms.lookup("gfx942", "v_mfma_f32_16x16x32_fp8_fp8").a_type == "fp8e4m3fnuz"
    assert ms.lookup("gfx950", "v_mfma_f64_16x16x4_f64").cycles == 64


def test_cdna4_new_layout_rule():
    s = ms.lookup("gfx950", "v_mfma_f32_16x16x32_f16")
    assert s.tv_layout("A") == Layout(((16, 4), 8), ((1, 128), 16))
    assert [s.element("A", 17, e) for e in (0, 7)] == [(1, 8, 0), (1, 15, 0)]
    assert s.builtin_signature() == ("float x4 __builtin_amdgcn_mfma_f32_16x16x32_f16"
                                     "(__fp16 x8, __fp16 x8, float x4, int, int, int)")
    f = ms.lookup("gfx950", "v_mfma_scale_f32_32x32x64_f8f6f4")
    assert f.items("A") == 32 and f.gprs("A") == 8 and f.element("A", 40, 31) == (8, 63, 0)
    assert ms.lookup("gfx950", "v_mfma_f32_32x32x64_f8f6f4").builtin is None
    sp = ms.lookup("gfx950", "v_smfmac_f32_16x16x64_f16")
    assert sp.items("A") == 4 and sp.gprs("A") == 4 and sp.gprs("B") == 8
    assert sp.candidates("A", 16, 3) == [(0, 16 + 12 + c, 0) for c in range(4)]


def test_rdna3_wmma_layouts():
    s = ms.lookup("gfx1100", "v_wmma_f32_16x16x16_f16")
    assert s.wave_size == 32 and s.builtin == "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32"
    for lane in range(32):
        for e in range(16):     # A/B replicated across the half-waves
            assert s.element("A", lane, e) == (lane % 16, e, 0)
            assert s.element("B", lane, e) == (e, lane % 16, 0)
        for v in range(8):
            assert s.element("C", lane, v) == (2 * v + lane // 16, lane % 16, 0)
    assert s.holders("A", 3, 5) == [(3, 5), (19, 5)]
    w64 = ms.lookup("gfx1100", "v_wmma_f32_16x16x16_f16", wave_size=64)
    assert w64.builtin.endswith("_w64") and w64.items("C") == 4
    assert w64.element("C", 37, 1) == (4 * 1 + 2, 5, 0)
    h = ms.lookup("gfx1100", "v_wmma_f16_16x16x16_f16")
    assert h.acc_halfword and h.gprs("D") == 8 and h.builtin_return.width == 16


def test_rdna4_wmma_layouts():
    s = ms.lookup("gfx1201", "v_wmma_f32_16x16x16_f16")
    assert s.builtin == "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12"
    assert s.element("A", 16, 0) == (0, 4, 0)         # "A[0, 4] comes out of lane 16"
    assert [s.element("A", 0, e)[1] for e in range(8)] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert [s.element("B", 21, e)[0] for e in range(8)] == [4, 5, 6, 7, 12, 13, 14, 15]
    assert s.element("C", 20, 3) == (8 + 3, 4, 0)
    assert ms.lookup("gfx1201", "v_wmma_f16_16x16x16_f16").gprs("D") == 4


# --------------------------------------------------------------------------- bad input


def test_unknown_arch_lists_close_and_known():
    with pytest.raises(ms.UnknownTargetError) as e:
        ms.lookup("gfx9420", "v_mfma_f32_16x16x16_f16")
    msg = str(e.value)
    assert "gfx942" in msg and "did you mean" in msg and "known targets" in msg
    assert "gfx1201" in msg
    with pytest.raises(ms.UnknownTargetError):
        ms.instructions("MI300X")
    with pytest.raises(ms.UnknownTargetError):
        ms.target(None)


def test_unknown_instruction_lists_close_matches():
    with pytest.raises(ms.UnknownInstructionError) as e:
        ms.lookup("gfx942", "v_mfma_f32_32x32x8f16")      # CDNA1/2 spelling
    assert "v_mfma_f32_32x32x8_f16" in str(e.value)
    with pytest.raises(ms.UnknownInstructionError) as e:
        ms.lookup("gfx908", "v_mfma_f32_16x16x16_f16")
    assert "v_mfma_f32_16x16x16f16" in str(e.value)
    assert ms.lookup("gfx942", "V_MFMA_F32_16X16X16_F16").name == "v_mfma_f32_16x16x16_f16"


def test_bad_operand_lane_item():
    s = ms.lookup("gfx942", "v_mfma_f32_32x32x8_f16")
    for bad in ("E", "a_", None, 3):
        with pytest.raises(ms.OperandError) as e:
            s.element(bad, 0, 0)
        assert "valid operands" in str(e.value)
    with pytest.raises(ms.OperandError):
        s.tv_layout("K")                                   # dense: no compression index
    for lane, item in ((64, 0), (-1, 0), (0, 4), (0, -1), (True, 0), (0, 1.0), ("3", 0)):
        with pytest.raises(ms.LaneItemError) as e:
            s.element("A", lane, item)
        assert "0.." in str(e.value) or "must be an int" in str(e.value)
    assert s.element("a", 63, 3) == (31, 7, 0)            # operand names are case-insensitive
    sp = ms.lookup("gfx942", "v_smfmac_f32_16x16x32_f16")
    with pytest.raises(ms.OperandError) as e:
        sp.element("A", 0, 0)
    assert "candidates" in str(e.value)
    with pytest.raises(ms.LaneItemError):
        sp.candidates("A", 0, 2)
    with pytest.raises(ms.OperandError):
        s.candidates("A", 0, 0)
    with pytest.raises(ms.LaneItemError):
        s.holders("A", 32, 0)


def test_not_modelled_is_explicit():
    with pytest.raises(ms.NotModelledError):
        ms.instructions("gfx1250")
    with pytest.raises(ms.NotModelledError):
        ms.instructions("gfx1201", wave_size=64)
    with pytest.raises(ms.UnknownTargetError):
        ms.instructions("gfx942", wave_size=32)


def test_errors_are_layout_errors():
    for cls in (ms.UnknownTargetError, ms.UnknownInstructionError, ms.OperandError,
                ms.LaneItemError, ms.UnsupportedDtypeError, ms.NotModelledError,
                ms.SelectionError, ms.ResourceError):
        assert issubclass(cls, LayoutError)


# --------------------------------------------------------------------------- arch model


def test_targets_and_families():
    assert set(ms.targets()) >= {"gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950",
                                 "gfx1100", "gfx1151", "gfx1201", "gfx1250"}
    t = ms.target("gfx942")
    assert (t.family, t.wave_size, t.lds_bytes, t.lds_banks, t.lds_bank_bytes) == \
        ("CDNA3", 64, 65536, 32, 4)
    assert (t.matrix_isa, t.matrix_version, t.vgpr_file, t.vgpr_granule,
            t.max_waves_per_simd, t.agprs_max) == ("mfma", 3, 512, 8, 8, 256)
    t = ms.target("gfx950")
    assert (t.family, t.lds_bytes, t.lds_banks, t.lds_alloc_granule) == \
        ("CDNA4", 163840, 64, 1280)
    assert ms.target("gfx1100").wave_size == 32 and ms.target("gfx1201").family == "RDNA4"
    assert ms.target("gfx1250").family == "GFX1250"


def test_lds_models():
    m = ms.lds_model("gfx942", "ds_read_b128")
    assert isinstance(m, LdsModel) and m.access_bytes == 16 and m.banks == 32
    assert m.phases[0] == (0, 1, 2, 3, 20, 21, 22, 23)
    assert m.phases[1] == (4, 5, 6, 7, 16, 17, 18, 19)
    assert m.phases[4] == tuple(range(32, 36)) + tuple(range(52, 56))
    assert ms.lds_model("gfx942", "ds_write_b128").phases == \
        tuple(tuple(range(i, i + 8)) for i in range(0, 64, 8))
    m = ms.lds_model("gfx950", "ds_read_b128")
    assert m.banks == 64 and len(m.phases) == 4 and all(len(p) == 16 for p in m.phases)
    assert m.phases[0] == (0, 1, 2, 3, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 26, 27)
    assert not m.source.startswith("INFERRED")
    assert ms.lds_model("gfx950", "ds_write_b128").source.startswith("INFERRED")
    assert ms.lds_model("gfx908", "ds_read_b64").source.startswith("INFERRED")
    assert ms.lds_model("gfx1100", "ds_load_b128").wave_size == 32
    for arch in ms.targets():
        if arch == "gfx1250":
            with pytest.raises(ms.NotModelledError):
                ms.lds_model(arch, "ds_read_b128")
            continue
        for ins in ms.lds_instructions(arch):
            m = ms.lds_model(arch, ins)     # LdsModel checks the phases partition the wave
            assert m.wave_size == ms.target(arch).wave_size
    with pytest.raises(ms.UnknownTargetError) as e:
        ms.lds_model("gfx942", "ds_read_b96")
    assert "known:" in str(e.value)


def test_waves_per_simd_gfx942_rules():
    w = ms.waves_per_simd
    assert [w("gfx942", v) for v in (64, 65, 128, 129, 168, 169, 256)] == [8, 7, 4, 3, 3, 2, 2]
    assert w("gfx942", 256, 19) == 1                       # Triton FA fwd: 256 VGPR + 19 AGPR
    assert w("gfx942", 160, lds_bytes=32768) == 2          # LDS-bound (REFERENCE GEMM)
    assert w("gfx942", 126, lds_bytes=32768, workgroup_size=512) == 4
    assert w("gfx942", 154, lds_bytes=32768) == 2
    assert w("gfx942", 124, 4) == 4                        # 124 + 4 AGPRs = 128
    assert w("gfx942", 126, 2) == 3                        # align(126, 4) + 2 = 130 -> 136
    assert w("gfx908", 128, 128) == 2 and w("gfx908", 24) == 10
    assert w("gfx950", 128, lds_bytes=81920) == 2          # 160 KiB: 2 x 80 KiB
    assert w("gfx1100", 96) == 16 and w("gfx1102", 96) == 10
    occ = ms.occupancy("gfx942", vgpr_unified=160, sgpr=90, lds_bytes=32768, block_threads=256)
    assert occ["waves_per_simd"] == 2 and occ["limiter"] == "lds" and occ["limits"]["sgpr"] == 8
    occ = ms.occupancy("gfx942", vgpr_unified=512, block_threads=1024)
    assert occ["waves_per_simd"] == 0 and "needs 4 waves" in occ["reason"]


def test_waves_per_simd_bad_input():
    for kw in (dict(vgprs=257), dict(vgprs=-1), dict(vgprs=64, agprs=300),
               dict(vgprs=64, lds_bytes=65537), dict(vgprs=64, workgroup_size=2048),
               dict(vgprs=1.5)):
        with pytest.raises(ms.ResourceError):
            ms.waves_per_simd("gfx942", **kw)
    with pytest.raises(ms.NotModelledError):
        ms.waves_per_simd("gfx1250", 64)
    with pytest.raises(ms.UnknownTargetError):
        ms.waves_per_simd("gfx9999", 64)


# --------------------------------------------------------------------------- CLI


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "layoutalg.cli", "mfma", *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_list_and_show():
    r = _cli("list", "--arch", "gfx942")
    assert r.returncode == 0, r.stderr
    assert all(s.name in r.stdout for s in ms.instructions("gfx942"))
    assert "46 matrix instructions" in r.stdout
    r = _cli("show", "v_mfma_f32_16x16x16_f16", "--arch", "gfx942")
    assert r.returncode == 0, r.stderr
    assert "((16,4),4):((1,64),16)" in r.stdout
    lines = [l for l in r.stdout.splitlines() if l.strip().startswith("17 |")]
    assert lines and lines[0].split("|")[1].split() == ["1,4", "1,5", "1,6", "1,7"]
    r = _cli("show", "v_smfmac_f32_16x16x32_f16", "--arch", "gfx942", "--operand", "A",
             "--json")
    assert r.returncode == 0 and '"lane_maps"' in r.stdout


def test_cli_errors_exit_2():
    r = _cli("list", "--arch", "gfx9000")
    assert r.returncode == 2 and "known targets" in r.stderr
    r = _cli("show", "v_mfma_nope", "--arch", "gfx942")
    assert r.returncode == 2 and "no instruction" in r.stderr
    r = _cli("show", "v_mfma_f32_16x16x16_f16", "--arch", "gfx942", "--operand", "Q")
    assert r.returncode == 2 and "valid operands" in r.stderr


def test_docstring_examples():
    import doctest

    import mfma_specs.arch
    for mod in (ms, mfma_specs.arch):
        assert doctest.testmod(mod).failed == 0
