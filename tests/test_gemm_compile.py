"""gfx942 code objects of the GEMM: resource report assertions (compiled offline with clang)."""

import pytest

from kernels.errors import ToolchainError
from kernels.gemm import build_gemm
from kernels.gemm_plan import GemmConfig

CONFIGS = {
    "nn-f16-32x32x8": GemmConfig(512, 512, 512),
    "tn-bf16-16x16x16-f32out": GemmConfig(512, 256, 256, dtype="bf16", out_dtype="f32",
                                          a_major="col", mfma="16x16x16"),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def report(request):
    bk = build_gemm(CONFIGS[request.param])
    try:
        bk.compile("gfx942")
    except ToolchainError as e:  # pragma: no cover - CI installs clang-19 (scripts/dev.sh)
        pytest.skip(str(e))
    return bk, bk.report()


def test_report_keys(report):
    _, r = report
    for key in ("vgpr", "agpr", "sgpr", "lds_bytes", "scratch_bytes", "spills",
                "waves_per_simd", "mfma_count", "hot_loop_mfma", "verification"):
        assert key in r, key


def test_no_spills_no_scratch(report):
    _, r = report
    assert r["spills"] == 0 and r["scratch_bytes"] == 0


def test_mfma_present_and_in_the_hot_loop(report):
    bk, r = report
    assert r["mfma_count"] > 0
    assert r["hot_loop_mfma"] >= 2 * bk.plan.kgroups * bk.plan.kpack * bk.plan.reps_m * \
        bk.plan.reps_n    # both halves of the unrolled loop


def test_lds_and_occupancy(report):
    bk, r = report
    assert 0 < r["lds_bytes"] <= 64 * 1024
    assert r["lds_bytes"] == sum(s.count * 2 for s in bk.ir.shared)
    assert r["waves_per_simd"] >= 2


def test_every_check_true(report):
    _, r = report
    assert r["verification"] and all(r["verification"].values())


def test_compiled_hot_loop_is_the_verified_one(report):
    """The LDS instructions in the hot loop are exactly those whose bank conflicts were proven
    (no ds_read_b128 split into b64, no ds_write2 fusion), with 128-bit global loads."""
    _, r = report
    m = r["hot_loop_instructions"]
    assert m["match"] is True, m
    assert m["hot_loop"].get("global_load_dwordx4", 0) > 0
