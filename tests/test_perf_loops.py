"""The performance model weights every MFMA loop by its trip count (kernels/perf/trips.py).

Regression: the model used to simulate only the loop with the most MFMA work, on a tie the
longest one, and ran every work unit at its rate.  In our flash-attention prefill that is the
masked boundary loop (583 instructions per KV tile), which a non-causal row block at S = 8K
never runs and a causal one runs twice; the full-tile loop (407) runs the rest.
"""

from __future__ import annotations

import json
import math

import pytest

from kernels.perf import GFX942, PerfError, analyze, parse_attention, whole_kernel
from kernels.perf.trips import LoopCost, attention_units, gemm_units, loop_classes
from layoutalg.cli import main as cli_main
from test_perf_model import build, mfmas, pytestmark  # noqa: F401  (the same skip)

EXIT = "  s_sub_u32 s0, s0, 1\n  s_cmp_lg_u32 s0, 0\n  s_cbranch_scc1 {label}\n"
MASK = "  v_add_f32 v20, v21, v20\n" * 40      # a boundary loop's extra VALU (the mask)


def two_loops(first: str, second: str) -> str:
    """Two innermost loops one after the other (a full-tile loop, then a boundary loop)."""
    return ("  s_mov_b32 s0, 100\n.La:\n" + first + EXIT.format(label=".La")
            + "  s_mov_b32 s0, 100\n.Lb:\n" + second + EXIT.format(label=".Lb"))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("perfloops")


@pytest.fixture(scope="module")
def masked_second(tmp):
    """4 MFMAs per iteration in both loops; the second adds 40 VALU ops (issue-bound)."""
    return build(tmp, "two", two_loops(mfmas(4), mfmas(4) + MASK), agprs=64, loop=False)


# ------------------------------------------------------------------ the unit counts by hand

def test_attention_units_by_hand():
    # causal, BM 16, 64 keys per iteration: block q sees [0, 16q + 1) with its first row and
    # [0, 16q + 16) with its last: full floor((16q+1)/64), total ceil((16q+16)/64)
    got = [attention_units(256, 16, q, 64, True) for q in range(16)]
    assert got[:4] == [(0, 1)] * 4 and got[4:8] == [(1, 1)] * 4
    assert got[8:12] == [(2, 1)] * 4 and got[12:] == [(3, 1)] * 4
    # BM 128 over BN 64 (our prefill): 2q full tiles, 2 on the diagonal
    assert [attention_units(8192, 128, q, 64, True) for q in (0, 1, 63)] == \
        [(0, 2), (2, 2), (126, 2)]
    # non-causal: all full unless the keys are ragged
    assert attention_units(8192, 128, 5, 64, False) == (128, 0)
    assert attention_units(250, 16, 3, 64, False) == (3, 1)
    assert gemm_units(4096, 64) == (64, 0) and gemm_units(1000, 64) == (15, 1)


def test_loop_classes_rules():
    a = LoopCost(0, 8, 100, 1e6, 500.0, 0.5)
    b = LoopCost(16, 24, 150, 1e6, 400.0, 0.6)
    classes, why = loop_classes([a, b])
    assert classes == [("full",), ("boundary",)] and "shorter" in why
    assert loop_classes([b, a])[0] == [("boundary",), ("full",)]
    assert loop_classes([a])[0] == [("full", "boundary")]
    for bad, msg in (([a, LoopCost(16, 24, 150, 2e6, 1.0, 1.0)], "different work"),
                     ([a, LoopCost(16, 24, 100, 1e6, 1.0, 1.0)], "same length"),
                     ([a, b, b], "3 innermost")):
        c, why = loop_classes(bad)
        assert c is None and msg in why


# ------------------------------------------------------------ two loops, the masked one longer

def _by_hand(r, shape_units, overhead):
    """Makespan of one work-group per CU (fewer work-groups than CUs): the longest block."""
    loops = r.whole_kernel["loops"]
    full_c = next(x for x in loops if x["units"] == "full")["cycles_per_iteration"]
    bnd_c = next(x for x in loops if x["units"] == "boundary")["cycles_per_iteration"]
    return max(f * full_c + b * bnd_c + overhead for f, b in shape_units)


def test_two_loops_weighted_by_trip_count(masked_second):
    r = analyze(masked_second, attention="1,1,256,64,causal", tile="16")
    w = r.whole_kernel
    assert w["kv_per_iteration"] == 64 and w["workgroups"] == 16
    short, long_ = w["loops"]
    assert (short["instructions"], long_["instructions"]) == (7, 47)
    assert (short["units"], long_["units"]) == ("full", "boundary")
    # the full-tile loop keeps the pipe busy (128 clocks), the masked one is issue-bound
    assert short["cycles_per_iteration"] == pytest.approx(128, abs=0.5)
    assert long_["cycles_per_iteration"] > 1.4 * short["cycles_per_iteration"]
    # trips over the grid: 24 full tiles and 16 diagonal ones (test_attention_units_by_hand)
    assert (short["trips"], long_["trips"]) == (24, 16)
    units = [attention_units(256, 16, q, 64, True) for q in range(16)]
    overhead = w["prologue_epilogue_cycles"]
    assert w["cycles"] == round(_by_hand(r, units, overhead))
    # every clock is a loop's or the prologue/epilogue's
    assert sum(x["share"] for x in w["loops"]) + w["prologue_epilogue_share"] == \
        pytest.approx(1, abs=1e-3)
    # the old method ran all 40 tiles at the longest loop's rate: slower than the weighted one
    old = 4 * long_["cycles_per_iteration"] + overhead
    assert w["cycles"] < old
    # the report's hot loop is where the clocks go; the old pick is named in a note
    top = max(w["loops"], key=lambda x: x["share"])
    assert r.loop["start"] == top["start"] and r.loop["instructions"] == top["instructions"]
    assert any("trip count" in ln for ln in r.summary().splitlines())


def test_non_causal_never_runs_the_boundary_loop(masked_second):
    r = analyze(masked_second, attention="1,1,256,64", tile="16")
    w = r.whole_kernel
    short, long_ = w["loops"]
    assert (short["trips"], long_["trips"]) == (64, 0) and long_["share"] == 0
    assert r.loop["instructions"] == 7          # the hot loop is the full-tile loop
    assert any("largest share" in n for n in r.notes)
    assert r.mfma_busy == pytest.approx(1.0, abs=1e-6)
    overhead = w["prologue_epilogue_cycles"]
    assert w["cycles"] == round(4 * short["cycles_per_iteration"] + overhead)
    # ragged keys (S = 250): one boundary tile per block
    rag = analyze(masked_second, attention="1,1,250,64", tile="16").whole_kernel
    assert [x["trips"] for x in rag["loops"]] == [16 * 3, 16]


def test_loops_without_a_trip_model_fall_back_to_the_hot_loop(tmp):
    # different MFMA work per iteration: not a full / boundary pair
    co = build(tmp, "uneq", two_loops(mfmas(4), mfmas(2) + MASK), agprs=64, loop=False)
    r = analyze(co, attention="1,1,256,64,causal", tile="16")
    w = r.whole_kernel
    assert w["trip_model"].startswith("hot loop only") and "different work" in w["trip_model"]
    assert len(w["loops"]) == 1 and w["loops"][0]["instructions"] == 7
    assert w["loops"][0]["trips"] == 40
    assert any(n.startswith("trip model: hot loop only") for n in r.notes)
    # two loops of the same length: which is masked cannot be told
    same = build(tmp, "same", two_loops(mfmas(4), mfmas(4)), agprs=64, loop=False)
    assert "same length" in analyze(same, gemm="4096,4096,4096",
                                    tile="128x128").whole_kernel["trip_model"]


def test_json_and_text_list_every_loop(masked_second, capsys):
    assert cli_main(["perf", masked_second, "--attention", "1,1,256,64,causal", "--tile", "16",
                     "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = d["whole_kernel"]["loops"]
    assert len(rows) == 2
    for key in ("instructions", "cycles_per_iteration", "mfma_busy", "binding", "trips",
                "share", "units", "start", "end"):
        assert all(key in row for row in rows), key
    assert 0 < d["whole_kernel"]["mfma_busy_weighted"] <= 1
    assert cli_main(["perf", masked_second, "--attention", "1,1,256,64,causal",
                     "--tile", "16"]) == 0
    out = capsys.readouterr().out
    assert "weighted by trip count" in out and "boundary" in out and "prologue/epilogue" in out
    # issue 16: the report shows waves/SIMD and the binding resource
    assert "waves/SIMD" in out and "binding:" in out
    assert d["occupancy"]["waves_per_simd"] >= 1 and d["binding"]


# ------------------------------------------------------------ single-loop kernels: unchanged

def test_one_loop_is_the_old_arithmetic(tmp):
    """A kernel with one MFMA loop: iterations x clocks + overhead per work-group, exactly the
    estimate before the trip model (whole_kernel without loops is that formula)."""
    co = build(tmp, "one", mfmas(4), agprs=64)
    for kw in (dict(gemm="4096,4096,4096", tile="128x128"),
               dict(gemm="4000,3000,1000", tile="128x128"),
               dict(attention="2,4,2048,128,causal", tile="64")):
        r = analyze(co, **kw)
        w = r.whole_kernel
        assert len(w["loops"]) == 1 and w["loops"][0]["units"] == "full+boundary"
        problem = (parse_attention(kw["attention"], kw["tile"]) if "attention" in kw else
                   __import__("kernels.perf", fromlist=["parse_gemm"]).parse_gemm(
                       kw["gemm"], kw["tile"]))
        bare = whole_kernel(problem, loop_flops_per_wg=4 * 4 * 16384,
                            cycles_per_iteration=r.cycles_per_iteration,
                            workgroups_per_cu=r.loop["workgroups_per_cu"],
                            outside_instructions=2, peak_flops_per_clk_simd=512.0,
                            output_elements_per_wg=4 * 64 * 64)
        for key in ("peak_fraction", "cycles", "tflops"):
            assert w[key] == bare[key], key
        if "gemm" in kw:
            m, n, k = (int(x) for x in kw["gemm"].split(","))
            tiles = math.ceil(m / 128) * math.ceil(n / 128)
            per = math.ceil(k / w["k_per_iteration"]) * r.cycles_per_iteration \
                + w["prologue_epilogue_cycles"]
            assert w["cycles"] == round(math.ceil(tiles / w["slots"]) * per)


def test_roles_keep_the_hot_loop_method(tmp):
    from test_perf_model import ROLES
    co = build(tmp, "roles", ROLES, agprs=64, loop=False)
    r = analyze(co, gemm="4096,4096,4096", tile="128x128")
    assert "wave-specialised" in r.whole_kernel["trip_model"]
    with pytest.raises(PerfError, match="--tile"):
        analyze(co, gemm="4096,4096,4096")
    assert GFX942.issue_period == 4


# ------------------------------------------------------------ the compiled kernels (regression)

@pytest.mark.slow
def test_our_prefill_weights_its_full_tile_loop():
    """Regression: the model simulated our prefill's masked boundary loop (the longest of two
    loops with 64 MFMAs) for every KV tile; at S = 8K non-causal that loop never runs."""
    from kernels.flash_attention import AttnConfig, build_attention
    bk = build_attention(AttnConfig(head_dim=128, dtype="bf16", causal=False))
    co = bk.compile("gfx942")
    r = analyze(co.binary, attention="16,16,8192,128", tile=str(bk.plan.cfg.block_m))
    w = r.whole_kernel
    full, bnd = w["loops"]
    assert full["units"] == "full" and bnd["units"] == "boundary"
    assert full["instructions"] < bnd["instructions"]
    assert bnd["trips"] == 0 and full["trips"] == 16 * 16 * 64 * 128
    assert r.loop["start"] == full["start"]          # the report's loop is the one that runs
    assert full["share"] > 0.95 and bnd["share"] == 0


def test_triton_two_stage_fa_gets_the_same_treatment():
    """Triton's tutorial FA (unmasked off-diagonal loop, then the masked diagonal loop): the
    same trip model as ours; causal B16 H16 S8K, BM 128, BN 64: 2q full + 2 diagonal tiles."""
    pytest.importorskip("triton")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from gfx942_static_attention import triton_compile
    t = triton_compile(128, True, "bf16", staged=True)
    r = analyze(t["binary"], attention="16,16,8192,128,causal", tile="128",
                block_threads=t["threads"], dynamic_lds_bytes=t["lds_dynamic"])
    w = r.whole_kernel
    assert [x["units"] for x in w["loops"]] == ["full", "boundary"]
    assert [x["trips"] for x in w["loops"]] == [256 * 64 * 63, 256 * 64 * 2]
    assert "shorter runs the full units" in w["trip_model"]


def test_a_backward_branch_to_the_exit_is_not_a_loop(tmp):
    """Regression: Triton 3.9's 32x64x128 GEMM ends its pipeline drain (8 MFMAs) with a
    backward branch to the kernel's s_endpgm; the loop finder took it for a second MFMA loop
    and the trip model ran the K-steps through the drain instead of the main loop."""
    code = ("  s_mov_b32 s0, 100\n.Lloop:\n" + mfmas(4) + EXIT.format(label=".Lloop")
            + "  s_branch .Ldrain\n.Lexit:\n  s_endpgm\n.Ldrain:\n" + mfmas(2)
            + "  s_cmp_lg_u32 s2, 0\n  s_cbranch_scc1 .Lexit\n")
    co = build(tmp, "drain", code, agprs=64, loop=False)
    r = analyze(co, gemm="4096,4096,4096", tile="128x128")
    w = r.whole_kernel
    assert len(w["loops"]) == 1 and w["loops"][0]["instructions"] == 7
    assert w["trip_model"].startswith("one MFMA loop")
