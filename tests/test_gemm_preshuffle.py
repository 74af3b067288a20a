"""The GEMM with preshuffled B (kernels.amd.gemm_preshuffle): built, verified by the GEMM gate,
emulated against numpy with B preshuffled by the same function, compiled for gfx942."""

import argparse
import subprocess
import sys

import numpy as np
import pytest
import torch

import kernels
from kernels.amd.gemm import build_gemm
from kernels.amd.gemm_plan import ConfigError, GemmConfig
from kernels.amd.gemm_preshuffle import build_gemm_preshuffled
from kernels.amd.preshuffle import preshuffle
from kernels.ir import Access, walk

CASES = {
    # square, both instructions
    "f16-32x32x8": GemmConfig(128, 128, 96),
    "bf16-16x16x16-f32out": GemmConfig(64, 96, 96, dtype="bf16", out_dtype="f32", block_m=64,
                                       block_n=64, mfma="16x16x16"),
    # ragged everywhere: N not a multiple of the MFMA tile, K not of the k block, M tiny
    "ragged-f16": GemmConfig(37, 100, 70, block_m=64, block_n=64, mfma="16x16x16"),
    "ragged-bf16-32x32": GemmConfig(130, 72, 40, dtype="bf16"),
    # block_k = 64 over a k padded to 96: the last k-tile's second k block is past the buffer,
    # its loads predicated off (zero-filled registers, never an out-of-range load)
    "k-block-predicated": GemmConfig(64, 48, 70, block_m=64, block_n=64, block_k=64,
                                     mfma="16x16x16"),
    # column-major A (transposed LDS writes) with preshuffled B, K below one block
    "colA-tiny-k": GemmConfig(96, 64, 24, a_major="col", block_m=64, block_n=64,
                              block_k=32, mfma="16x16x16"),
}


def _emulate(cfg):
    bk = build_gemm_preshuffled(cfg)
    c = bk.plan.cfg
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[c.dtype]
    g = torch.Generator().manual_seed(3)
    a = torch.randn(c.m, c.k, generator=g).to(tdt)
    b = torch.randn(c.k, c.n, generator=g).to(tdt)
    a_st = a if c.a_major == "row" else a.t().contiguous()
    bs = preshuffle(b, bk.plan.spec.name, c.dtype)
    odt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[c.out_dtype]
    out = torch.zeros(c.m, c.n, dtype=odt)
    res = bk.emulate(a_st, bs, out)
    got = torch.as_tensor(np.asarray(res.outputs[2]))
    if c.out_dtype == "bf16" and got.dtype != torch.bfloat16:
        got = got.view(torch.bfloat16)
    ref = np.asarray(a.double().numpy() @ b.double().numpy())     # numpy reference
    return bk, got.float().reshape(c.m, c.n).numpy(), ref


@pytest.mark.parametrize("name", list(CASES))
def test_emulated_preshuffled_gemm_matches_numpy(name):
    bk, got, ref = _emulate(CASES[name])
    assert bk.verification.holds and len(bk.verification.checks) >= 13
    tol = {"f16": 2e-3, "bf16": 1e-2, "f32": 1e-4}[bk.plan.cfg.out_dtype]
    err = np.abs(got - ref)
    assert (err <= tol + tol * np.abs(ref)).all(), float(err.max())
    assert np.abs(got).min() > 0 or np.abs(ref).min() == 0


def test_reference_is_sensitive_to_the_shuffle():
    """B passed unshuffled (row-major) gives a wrong product: the test above is not vacuous."""
    cfg = CASES["f16-32x32x8"]
    bk = build_gemm_preshuffled(cfg)
    g = torch.Generator().manual_seed(3)
    a = torch.randn(cfg.m, cfg.k, generator=g).half()
    b = torch.randn(cfg.k, cfg.n, generator=g).half()
    res = bk.emulate(a, b.contiguous().reshape(-1), torch.zeros(cfg.m, cfg.n).half())
    got = np.asarray(res.outputs[2]).astype(np.float32)
    assert not np.allclose(got, (a.float() @ b.float()).numpy(), atol=1e-1, rtol=1e-2)


def test_b_has_no_lds_and_is_loaded_by_buffer_loads():
    bk = build_gemm_preshuffled(GemmConfig(256, 256, 256))
    assert [s.name for s in bk.ir.shared] == ["sA"]
    loads = [s for s in walk(bk.ir.body) if isinstance(s, Access) and s.buf == "B"]
    assert loads and all(s.soffset is not None and s.width * 2 == 16 for s in loads)
    assert not any(s.space == "lds" and s.buf == "sB" for s in walk(bk.ir.body)
                   if isinstance(s, Access))
    assert "lagen_buffer_load_b128<lagen_f16x8>(B_rsrc" in bk.source
    assert "const lagen_buffer B_rsrc = lagen_make_buffer(B, 131072u);" in bk.source
    prm = bk.ir.params[1]
    assert prm.buffer and prm.buffer_elems == 256 * 256


def test_compiled_hot_loop_has_the_verified_buffer_loads():
    kernels.find_toolchain()
    bk = build_gemm_preshuffled(GemmConfig(512, 512, 512, dtype="bf16"))
    bk.compile()
    r = bk.report()
    hl = r["hot_loop_instructions"]
    assert hl["match"] is True, hl
    assert hl["expected_per_iteration"]["buffer_load_dwordx4"] == 8
    assert "ds_write_b32" not in hl["hot_loop"]               # no transposed B stores any more
    assert r["lds_bytes"] == 16384 and r["spills"] == 0


def test_build_gemm_refuses_a_preshuffled_config():
    with pytest.raises(ConfigError, match="build_gemm_preshuffled"):
        build_gemm(GemmConfig(128, 128, 64, b_layout="preshuffled"))
    with pytest.raises(ConfigError, match="b_layout must be"):
        GemmConfig(128, 128, 64, b_layout="shuffled").normalized()


@pytest.mark.parametrize("cfg,match", [
    (GemmConfig(128, 128, 64, stages=1), "stages=2"),
    (GemmConfig(64, 64, 64, block_m=32, block_n=32, block_k=16, waves_m=1, waves_n=1,
                mfma="16x16x16"),
     "multiple of 32"),
])
def test_bad_configs_are_refused(cfg, match):
    with pytest.raises(ConfigError, match=match):
        build_gemm_preshuffled(cfg)


def test_4096_cube_verifies():
    bk = build_gemm_preshuffled(GemmConfig(4096, 4096, 4096, dtype="bf16"))
    assert bk.verification.holds
    dom = bk.verification.checks["lane_mfma_operands"].domain
    assert "translation" in dom


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "layoutalg.cli", *argv], capture_output=True,
                          text=True, timeout=300)


def test_cli_check_emulate_preshuffled():
    p = _cli("check", "gemm", "--emulate", "--m", "70", "--n", "40", "--k", "50",
             "--b-layout", "preshuffled", "--block", "64x64x32", "--mfma", "16x16x16")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout and "la_gemm_ps_" in p.stdout


def test_registry_reference_unshuffles_the_input():
    from kernels.registry import get
    e = get("gemm")
    ns = argparse.Namespace(m=64, n=48, k=40, dtype="f16", out_dtype=None, layout="NN",
                            c_major="row", block="64x64x32", waves="2x2", mfma="16x16x16",
                            vec=None, stages=2, arch="gfx942", b_layout="preshuffled")
    cfg = e.config(ns)
    args = e.inputs(cfg, seed=2)
    assert args[1].dim() == 1
    g = torch.Generator().manual_seed(2)
    a = torch.randn(64, 40, generator=g).half()
    b = torch.randn(40, 48, generator=g).half()
    assert torch.equal(args[0], a)
    assert torch.allclose(e.reference(cfg, args), (a.double() @ b.double()).float())


def test_k_block_predicate_is_emitted():
    bk = build_gemm_preshuffled(CASES["k-block-predicated"])
    preds = [s.pred for s in walk(bk.ir.body) if isinstance(s, Access) and s.buf == "B"]
    assert any(p is not None for p in preds)
    # k blocks: Kp = 96 = 3 blocks of 32; n tiles: Np = 48 = 3 tiles of 16
    assert "if (b_ps_kb + 1 < 3 && b_ps_nt + 4*block_n < 3)" in bk.source


from hypothesis import given, settings, strategies as st   # noqa: E402


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 200),
       small=st.booleans(), bf16=st.booleans())
def test_gate_accepts_preshuffled_kernels_at_any_shape(m, n, k, small, bf16):
    """Ragged shapes of every extent: the builder's kernel passes every check (a gate that
    refused correct kernels would make the form unusable; the planted bugs show it refuses
    wrong ones)."""
    kw = dict(block_m=64, block_n=64, mfma="16x16x16") if small else {}
    bk = build_gemm_preshuffled(GemmConfig(m, n, k, dtype="bf16" if bf16 else "f16", **kw))
    assert bk.verification.holds


# ---- fp8 / bf8 with preshuffled B (issue 15: the fp8 default's B out of LDS) -------------------

FP8_CASES = {
    # the 4096^3 preshuffled fp8 choice's form (224x128x64, 1x4 waves, 32x32x16, the
    # 256-register hint) on a ragged problem: a full and a predicated tile along M and N, a
    # partial last k-tile; per-tensor scales, bf16 C (the fp8 defaults)
    "fp8-224-ragged": GemmConfig(300, 136, 264, dtype="fp8", block_m=224, block_n=128,
                                 block_k=64, waves_m=1, waves_n=4, schedule="pipelined",
                                 waves_per_eu=2),
    # bf8 (E5M2 FNUZ) on the 16x16x32 MFMA, per-row/column scales, f32 C
    "bf8-16x16x32-rowcol": GemmConfig(48, 80, 200, dtype="bf8", block_m=32, block_n=64,
                                      block_k=128, waves_m=1, waves_n=4, mfma="16x16x32",
                                      scales="rowcol", out_dtype="f32"),
}


@pytest.mark.parametrize("name", list(FP8_CASES))
def test_emulated_preshuffled_fp8_gemm_matches_torch(name):
    """Built through the registry (inputs: B preshuffled by the same layout; reference: torch
    on the same fp8 values, B unshuffled by the layout's inverse), verified, emulated."""
    from dataclasses import replace
    from _gemm_cases import emulate_against_reference
    cfg = replace(FP8_CASES[name], b_layout="preshuffled")
    bk, args, out, ref = emulate_against_reference(cfg)
    assert bk.ir.meta["b_layout"] == "preshuffled" and [s.name for s in bk.ir.shared] == ["sA"]
    assert "lagen_buffer_load_b128<la_" in bk.source and "x16>(B_rsrc" in bk.source
    assert float(ref.abs().max()) > 0
    # not vacuous: the buffer's first K*N bytes taken as a plain row-major B (same scales)
    # give another reference, far from what the kernel computed
    from kernels.registry import get
    plain = replace(cfg, b_layout="plain")
    as_plain = args[1][:cfg.k * cfg.n].reshape(cfg.k, cfg.n)
    wrong = get("gemm").reference(plain, [args[0], as_plain, *args[2:]])
    assert not torch.allclose(out, wrong, atol=1e-1, rtol=1e-2)


def test_fp8_preshuffled_block_k_must_cover_one_16_byte_vector():
    """32x32x16 fp8: a lane's 16 bytes feed two MFMAs, so block_k must be a multiple of 32."""
    with pytest.raises(ConfigError, match="multiple of 32"):
        build_gemm_preshuffled(GemmConfig(64, 64, 64, dtype="fp8", block_m=64, block_n=64,
                                          block_k=16))


def test_ragged_n_buffer_loads_are_not_waterfalled():
    """Regression: with N ragged the soffset is computed under the n-tile predicate, clang
    could not prove it uniform and wrapped every B load in a readfirstlane loop (an 8-
    instruction loop per load; at 4000x3000x1000 the model found that loop, with no MFMA, as
    the hot loop).  lagen_buffer_load_b128 now passes the soffset through readfirstlane (it
    is wave-uniform: the gate proves it), so the kernel's one loop is the k loop, with the B
    loads and the MFMAs (before: 14 loops, 13 of them around single loads)."""
    from kernels.toolchain.codeobject import find_loops
    kernels.find_toolchain()
    cfg = GemmConfig(400, 300, 1000, dtype="fp8", block_m=128, block_n=128, block_k=64,
                     b_layout="preshuffled", schedule="pipelined")
    bk = build_gemm_preshuffled(cfg)
    co = bk.compile()
    insns = co.disassembly()[bk.name]
    loops = [[i for i in insns if lo <= i.addr <= hi] for lo, hi in find_loops(insns)]
    assert len(loops) == 1, [len(b) for b in loops]        # the k loop, nothing else
    assert any(i.mnemonic == "buffer_load_dwordx4" for i in loops[0])
    assert any(i.mnemonic.startswith("v_mfma") for i in loops[0])
