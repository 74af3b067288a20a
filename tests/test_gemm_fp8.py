"""fp8 / bf8 (gfx942 FNUZ) GEMM: plan, gate, printed source, emulator against torch, errors.

The reference is computed from the SAME 8-bit values the kernel reads (torch's
float8_e4m3fnuz / float8_e5m2fnuz views of the bytes), so a wrong decode, a wrong operand
packing or a missing scale shows up as a mismatch, not as "fp8 rounding"."""

import argparse

import pytest
import torch

from kernels.errors import KernelError
from kernels.gemm import build_gemm
from kernels.gemm_plan import ConfigError, GemmConfig, plan_gemm
from kernels.ir import Scale, walk
from kernels.ir.dtypes import ELEM_TYPES, lookup_dtype
from kernels.registry import get

from _gemm_cases import emulate_against_reference

ENTRY = get("gemm")
FMT = {"fp8": torch.float8_e4m3fnuz, "bf8": torch.float8_e5m2fnuz}


_check = emulate_against_reference


# ---- the format table ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fp8", "bf8"])
def test_format_facts_match_torch(name):
    """Max finite value, the single NaN 0x80, no infinities, no negative zero: the table's
    facts are torch's decode of all 256 codes."""
    vals = torch.arange(256, dtype=torch.uint8).view(FMT[name]).double()
    nan = torch.isnan(vals)
    assert nan.sum() == 1 and bool(nan[0x80])
    assert not bool(torch.isinf(vals).any())
    assert float(vals[~nan].max()) == ELEM_TYPES[name].max_finite
    assert int((vals == 0).sum()) == 1                 # 0x00 only: 0x80 is NaN, not -0
    assert ELEM_TYPES[name].torch == str(FMT[name]).replace("torch.", "")


@pytest.mark.parametrize("alias,want", [("fp8", "fp8"), ("e4m3fnuz", "fp8"),
                                        ("torch.float8_e4m3fnuz", "fp8"), ("BF8", "bf8"),
                                        ("fp8e5m2fnuz", "bf8")])
def test_dtype_aliases(alias, want):
    assert lookup_dtype(alias).name == want
    assert GemmConfig(64, 64, 64, dtype=alias).normalized().dtype == want


# ---- plan: instruction, vectors, LDS ----------------------------------------------------------

@pytest.mark.parametrize("dtype,mfma,shape", [("fp8", None, "v_mfma_f32_32x32x16_fp8_fp8"),
                                              ("bf8", "16x16x32", "v_mfma_f32_16x16x32_bf8_bf8")])
def test_plan_picks_the_fp8_mfma_and_16_byte_vectors(dtype, mfma, shape):
    p = plan_gemm(GemmConfig(256, 256, 256, dtype=dtype, b_major="col", block_k=64, mfma=mfma))
    assert p.spec.name == shape
    assert p.items == 8                    # 8 fp8 per lane per MFMA operand (one long)
    assert p.kpack == 2                    # one 16-byte LDS read feeds two MFMAs
    assert p.a.vec == 16 and p.b.vec == 16  # 16 fp8 = 128-bit global loads


def test_default_out_dtype_and_scales():
    c = GemmConfig(64, 64, 64, dtype="fp8").normalized()
    assert c.out_dtype == "bf16" and c.scales == "tensor"
    c = GemmConfig(64, 64, 64, dtype="f16").normalized()
    assert c.out_dtype == "f16" and c.scales == "none"


def test_compiled_source_packs_operands_into_long_and_scales():
    bk = build_gemm(GemmConfig(128, 128, 128, dtype="fp8", b_major="col", block_k=64))
    src = bk.source
    assert "__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(LAGEN_BITCAST(long, " in src
    assert "const float* __restrict__ scale_a, const float* __restrict__ scale_b" in src
    assert "acc[0] *= sc[0] * sc[1];" in src
    assert sum(isinstance(s, Scale) for s in walk(bk.ir.body)) == 1
    assert bk.verification.as_bools()["printed_source"]
    assert bk.verification.as_bools()["bank_conflicts_lds_read"]


def test_compiles_for_gfx942():
    pytest.importorskip("shutil").which("clang-19") or pytest.skip("clang-19 missing")
    bk = build_gemm(GemmConfig(256, 256, 2048, dtype="bf8", b_major="col", block_k=64))
    rep = bk.report()
    assert rep["hot_loop_instructions"]["match"], rep["hot_loop_instructions"]
    hot = rep["hot_loop_instructions"]["hot_loop"]
    assert hot.get("v_mfma_f32_32x32x16_bf8_bf8", 0) > 0
    assert hot.get("ds_read_b128", 0) > 0 and hot.get("global_load_dwordx4", 0) > 0


# ---- emulator against torch ---------------------------------------------------------------

CASES = {
    "fp8-NT-bf16-square": GemmConfig(128, 128, 128, dtype="fp8", b_major="col", block_k=64,
                                     block_m=64, block_n=64),
    "fp8-NN-ragged": GemmConfig(100, 72, 200, dtype="fp8", block_k=64, block_m=64,
                                block_n=64),
    "bf8-TT-f32-out": GemmConfig(96, 80, 128, dtype="bf8", a_major="col", b_major="col",
                                 out_dtype="f32", block_k=64, block_m=64, block_n=64),
    "bf8-NT-16x16x32-ragged": GemmConfig(130, 66, 136, dtype="bf8", b_major="col", block_k=64,
                                         block_m=64, block_n=64, mfma="16x16x32"),
    "fp8-TN-f16-bk32-no-scales": GemmConfig(64, 64, 96, dtype="fp8", a_major="col",
                                            out_dtype="f16", block_m=32, block_n=32,
                                            block_k=32, scales=False),
    "fp8-one-stage-bk128": GemmConfig(96, 128, 300, dtype="fp8", b_major="col", block_k=128,
                                      stages=1, block_m=64, block_n=64),
    # per-row/column scales, ragged M and N (predicated scale loads), both MFMA shapes
    "fp8-rowcol-ragged": GemmConfig(130, 70, 136, dtype="fp8", b_major="col", block_k=64,
                                    block_m=64, block_n=64, scales="rowcol"),
    "bf8-rowcol-16x16x32-NN": GemmConfig(100, 72, 200, dtype="bf8", block_k=64, block_m=64,
                                         block_n=64, mfma="16x16x32", scales="rowcol",
                                         out_dtype="f32"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_emulated_fp8_gemm_matches_torch(name):
    _check(CASES[name])


def test_missing_scale_would_be_caught():
    """The scales are not powers of two and not 1: dropping them changes the result beyond the
    tolerance (the comparison is not vacuous)."""
    cfg = CASES["fp8-NT-bf16-square"]
    bk, args, out, ref = _check(cfg)
    unscaled = ref / (args[3][0] * args[4][0])
    atol, rtol = ENTRY.tolerance(cfg)
    assert not bool(((out - unscaled).abs() <= atol + rtol * unscaled.abs()).all())


@pytest.mark.parametrize("fmt", ["fp8", "bf8"])
def test_every_code_decodes_exactly(fmt):
    """C = I @ B with B holding all 256 codes, fp32 out, no scales: each output is the exact
    decode of one code (0x80 -> NaN), through loads, LDS, the MFMA's operand packing and the
    emulator's decode."""
    cfg = GemmConfig(32, 256, 32, dtype=fmt, b_major="col", out_dtype="f32", block_m=32,
                     block_n=64, block_k=32, waves_m=1, waves_n=1, scales=False)
    bk = build_gemm(cfg)
    one = torch.tensor([1.0]).to(FMT[fmt]).view(torch.uint8)[0]
    a = torch.zeros(32, 32, dtype=torch.uint8)
    a[torch.arange(32), torch.arange(32)] = one
    codes = torch.arange(256, dtype=torch.uint8)
    b_t = torch.zeros(256, 32, dtype=torch.uint8)          # B^T (column-major B): [n][k]
    b_t[:, 5] = codes                                       # row 5 of C = all 256 codes
    c = torch.zeros(32, 256, dtype=torch.float32)
    res = bk.emulate(a, b_t.contiguous(), c)
    got = torch.as_tensor(res.outputs[2]).reshape(32, 256)[5]
    want = codes.view(FMT[fmt]).float()
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    assert torch.equal(got[~nan], want[~nan])


def test_rowcol_scales_are_per_row_and_column():
    """A per-tensor reading of rowcol scales (scale_a[0] * scale_b[0]) would not match: the
    kernel really applies scale_a[m] * scale_b[n]."""
    cfg = CASES["fp8-rowcol-ragged"]
    bk, args, out, ref = _check(cfg)
    assert args[3].shape == (cfg.m,) and args[4].shape == (cfg.n,)
    as_tensor = ref / (args[3][:, None] * args[4][None, :]) * (args[3][0] * args[4][0])
    atol, rtol = ENTRY.tolerance(cfg)
    assert not bool(((out - as_tensor).abs() <= atol + rtol * as_tensor.abs()).all())
    assert "sa[1] = scale_a[" in bk.source and "*= sa[" in bk.source


def test_scaled_f16_is_available():
    """Scales are a config option, not an fp8 special case."""
    _check(GemmConfig(64, 64, 64, dtype="f16", block_m=64, block_n=64, scales=True))


# ---- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,msg", [
    ({"dtype": "fp8", "arch": "gfx90a"}, "gfx942"),
    ({"dtype": "e4m3fn"}, "OCP"),
    ({"dtype": "float8_e5m2"}, "FNUZ"),
    ({"dtype": "fp8", "out_dtype": "bf8"}, "input type only"),
    ({"dtype": "fp8", "scales": "yes"}, "scales must be"),
    ({"dtype": "fp8", "scales": "row"}, "rowcol"),
    ({"dtype": "fp8", "vec": 32}, "16 elements"),
    ({"dtype": "fp4"}, "unknown dtype"),
])
def test_bad_fp8_options_are_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        plan_gemm(GemmConfig(256, 256, 256, **kw))


def test_fp8_error_is_a_kernel_error_with_exit_code_2():
    with pytest.raises(KernelError) as e:
        plan_gemm(GemmConfig(256, 256, 256, dtype="fp8", arch="gfx90a"))
    assert e.value.exit_code == 2


def test_cli_default_block_keeps_the_bytes_of_k():
    """Without --block the tile choice (kernels.amd.gemm_select) picks the tile: fp8 gets the
    bf16 choice's tile with twice the k elements (the same bytes per LDS row).  Regression: this
    test still passed --waves/--stages without --block, which the CLI has refused since the
    tile choice landed."""
    ns = argparse.Namespace(m=256, n=256, k=256, dtype="fp8", out_dtype=None, layout="NT",
                            c_major="row", block=None, waves=None, mfma=None, vec=None,
                            stages=None, arch="gfx942", scales=None)
    f8 = ENTRY.config(ns)
    ns.dtype = "bf16"
    b16 = ENTRY.config(ns)
    assert (f8.block_m, f8.block_n, f8.stages) == (b16.block_m, b16.block_n, b16.stages)
    assert f8.block_k == 2 * b16.block_k
    ns.dtype, ns.scales = "fp8", "none"
    assert ENTRY.config(ns).normalized().scales == "none"
    ns.waves = "2x2"
    with pytest.raises(ConfigError, match="--waves without --block"):
        ENTRY.config(ns)


# ---- planted bugs: the fp8 kernel's specifics are checked, not assumed ------------------------

import copy                                          # noqa: E402

from layoutalg import Swizzle                        # noqa: E402
from kernels.emulator import run                     # noqa: E402
from kernels.gate import verify_kernel               # noqa: E402
from kernels.gemm import GemmBuilder, choose_lds_layouts   # noqa: E402
from kernels.ir import Mfma                          # noqa: E402
from kernels.verify.printed import verify_printed    # noqa: E402

PB_CFG = GemmConfig(200, 136, 200, dtype="fp8", b_major="col", block_k=64)


@pytest.fixture(scope="module")
def fp8_built():
    return build_gemm(PB_CFG)


@pytest.fixture(scope="module")
def fp8_plan():
    p = plan_gemm(PB_CFG)
    choose_lds_layouts(p)
    return p


def _failed(k):
    r = verify_kernel(k, arch="gfx942")
    return {n for n, c in r.checks.items() if not c.holds}, r


@pytest.mark.parametrize("old,new,check", [
    # the second MFMA step's operand bytes 8..15 replaced by the first step's 0..7
    ("__builtin_shufflevector(a_fr[0], a_fr[0], 8, 9, 10, 11, 12, 13, 14, 15)",
     "__builtin_shufflevector(a_fr[0], a_fr[0], 0, 1, 2, 3, 4, 5, 6, 7)", "printed_source"),
    ("sc[1] = scale_b[0];", "sc[1] = scale_b[1];", "printed_source"),
    ("const lagen_fp8* __restrict__ A", "const lagen_bf8* __restrict__ A", "declarations"),
    ("LAGEN_SHARED(la_fp8x16, sA_v, 1024)", "LAGEN_SHARED(la_fp8x16, sA_v, 512)", "declarations"),
])
def test_printed_fp8_mutation_is_refused(fp8_built, old, new, check):
    src = fp8_built.source
    assert old in src, old
    r = verify_printed(fp8_built.ir, src.replace(old, new, 1))
    assert not r[check].holds and r[check].counterexample


@pytest.fixture(scope="module")
def rowcol_built():
    return build_gemm(GemmConfig(200, 136, 200, dtype="fp8", b_major="col", block_k=64,
                                 scales="rowcol"))


@pytest.mark.parametrize("old,new,check", [
    ("sa[1] = scale_a[128*block_m + c_m + 1];", "sa[1] = scale_a[128*block_m + c_m + 2];",
     "printed_source"),
    # row 200 (block 1, c_m = 64) would be read: the predicate differs there
    ("if (128*block_m + c_m + 8 < 200) sa[4]", "if (128*block_m + c_m + 8 < 201) sa[4]",
     "printed_source"),
])
def test_printed_rowcol_mutation_is_refused(rowcol_built, old, new, check):
    src = rowcol_built.source
    assert old in src, old
    r = verify_printed(rowcol_built.ir, src.replace(old, new, 1))
    assert not r[check].holds and r[check].counterexample


def test_rowcol_scale_load_without_predicate_is_out_of_bounds():
    """M = 200 is not a multiple of the 128-row block: an unpredicated row-scale load reads
    past scale_a's 200 floats, and the gate says so."""
    from kernels.ir import Access
    p = plan_gemm(GemmConfig(200, 136, 200, dtype="fp8", b_major="col", block_k=64,
                             scales="rowcol"))
    choose_lds_layouts(p)
    k = GemmBuilder(p).build()
    loads = [s for s in walk(k.body) if isinstance(s, Access) and s.tag == "scale_a.load"]
    assert loads and all(a.pred is not None for a in loads)
    for a in loads:
        a.pred = None
    fails, r = _failed(k)
    assert "in_bounds" in fails
    assert "scale_a" in str(r.checks["in_bounds"].counterexample)


def test_fp8_b_with_another_k_permutation_is_refused(fp8_plan):
    """Feed B's second 8-byte half to the first MFMA step: A and B disagree on k."""
    k = GemmBuilder(copy.deepcopy(fp8_plan)).build()
    it = fp8_plan.items
    for m in (s for s in walk(k.body) if isinstance(s, Mfma)):
        m.b = m.b.frag.regs([i + it if (i // it) % 2 == 0 else i - it for i in m.b.idx])
    fails, r = _failed(k)
    assert "lane_mfma_operands" in fails
    assert "disagree on k" in str(r.checks["lane_mfma_operands"].counterexample)


def test_fp8_tile_without_its_swizzle_conflicts(fp8_plan):
    """The chosen swizzle is needed for 1-byte elements too: without it the 16-byte reads
    conflict under the ds_read_b128 phase model."""
    assert fp8_plan.a.swizzle.bits > 0
    p = copy.deepcopy(fp8_plan)
    p.a.swizzle = Swizzle(0, 0, 0)
    fails, r = _failed(GemmBuilder(p).build())
    assert "bank_conflicts_lds_read" in fails
    assert "ds_read_b128" in str(r.checks["bank_conflicts_lds_read"].counterexample)


def test_dropped_scale_line_is_caught_by_the_emulator(fp8_built):
    """The gate does not check epilogue arithmetic (docs/VERIFY.md); the emulator comparison
    does: a source that forgets to scale one accumulator vector mismatches."""
    src = fp8_built.source
    line = "  acc[1] *= sc[0] * sc[1];\n"
    assert line in src
    args = ENTRY.inputs(PB_CFG, seed=2)
    res = run(src.replace(line, "", 1), fp8_built.name, fp8_built.grid, fp8_built.block,
              [a.clone() for a in args])
    out, ref = ENTRY.output(PB_CFG, res.outputs), ENTRY.reference(PB_CFG, args)
    atol, rtol = ENTRY.tolerance(PB_CFG)
    assert not bool(((out - ref).abs() <= atol + rtol * ref.abs()).all())
