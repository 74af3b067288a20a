"""GEMM kernels run on the CPU emulator against torch: odd shapes, every layout option, dtypes."""

import argparse

import pytest
import torch

from kernels.registry import get

from _gemm_cases import BASE, CASES, emulate_against_reference

ENTRY = get("gemm")


def _run(opts):
    ns = argparse.Namespace(**{**BASE, **opts})
    cfg = ENTRY.config(ns)
    bk = ENTRY.build(cfg)
    assert bk.verification.holds
    args = ENTRY.inputs(cfg, seed=1)
    res = bk.emulate(*args)
    out, ref = ENTRY.output(cfg, res.outputs), ENTRY.reference(cfg, args)
    return cfg, out, ref


@pytest.mark.parametrize("name", list(CASES))
def test_emulated_gemm_matches_torch(name):
    cfg, out, ref = _run(CASES[name])
    atol, rtol = ENTRY.tolerance(cfg)
    err = (out - ref).abs()
    assert out.shape == (cfg.m, cfg.n)
    assert bool((err <= atol + rtol * ref.abs()).all()), f"max error {float(err.max())}"
    # the result is not trivially zero anywhere (every element was written with real data)
    assert float(out.abs().min()) > 0 or float(ref.abs().min()) == 0


def test_torch_reference_is_sensitive():
    """Guard against a vacuous comparison: a transposed operand is detected."""
    cfg, out, ref = _run({"m": 64, "n": 64, "k": 32, "block": "64x64x32"})
    atol, rtol = ENTRY.tolerance(cfg)
    wrong = torch.matmul(ref.t().contiguous(), torch.eye(64))
    assert not bool(((out - wrong).abs() <= atol + rtol * wrong.abs()).all())


# ---- one LDS stage, block_k = 64 (64-bit transposed LDS writes), explicit waits ---------------

from kernels.gemm import build_gemm            # noqa: E402
from kernels.gemm_plan import GemmConfig       # noqa: E402
from kernels.ir import Barrier, Loop, WaitCnt, walk   # noqa: E402

CASES_1STAGE = {
    # odd shapes with partial tiles in M, N and K; KT = 3 (loop + peel) and KT = 2 (loop only)
    "NN-bk64-1stage": GemmConfig(150, 140, 136, block_k=64, stages=1),
    "NT-bk64-1stage-bf16": GemmConfig(130, 72, 100, dtype="bf16", out_dtype="f32",
                                      b_major="col", block_k=64, stages=1),
    "TN-bk32-1stage-16x16": GemmConfig(96, 80, 70, a_major="col", block_m=64, block_n=64,
                                       mfma="16x16x16", stages=1),
    "NN-bk64-2stage-no-waits": GemmConfig(72, 200, 130, block_k=64, explicit_waits=False),
    # operand reads issued one k-group ahead of their MFMAs (IR order; the gate checks it)
    "NN-bk64-1stage-read-ahead": GemmConfig(100, 90, 140, block_k=64, stages=1, read_ahead=1),
}


@pytest.mark.parametrize("name", list(CASES_1STAGE))
def test_emulated_new_pipelines_match_torch(name):
    cfg = CASES_1STAGE[name]
    emulate_against_reference(cfg, seed=3)


def test_one_stage_pipeline_shape():
    """One LDS stage: half the LDS, a barrier before the stores (the gate's race check needs it),
    64-bit transposed writes of row-major B at block_k = 64, and explicit waits in the IR."""
    bk = build_gemm(GemmConfig(256, 256, 256, block_k=64, stages=1))
    assert sum(s.count for s in bk.ir.shared) == 128 * 64 * 2
    loop = next(s for s in bk.ir.body if isinstance(s, Loop))
    assert sum(isinstance(s, Barrier) for s in loop.body) == 2      # 2 per k-tile, one k-tile
    assert {a.width for a in walk(loop.body) if getattr(a, "tag", "") == "B.copy.store"} == {4}
    waits = [s for s in walk(loop.body) if isinstance(s, WaitCnt)]
    assert any(w.vm == 0 for w in waits) and any(w.lgkm == 0 for w in waits)
    assert "__builtin_amdgcn_s_waitcnt(0xf70);  // vmcnt(0)" in bk.source
    assert "__builtin_amdgcn_s_waitcnt(0xc07f);  // lgkmcnt(0)" in bk.source


def test_one_stage_without_the_first_barrier_is_a_race():
    """Dropping the barrier between the MFMAs' LDS reads and the next stores must be caught."""
    import copy
    from kernels.gate import verify_kernel
    from kernels.gemm import GemmBuilder, choose_lds_layouts
    from kernels.gemm_plan import plan_gemm
    p = plan_gemm(GemmConfig(200, 136, 200, block_k=64, stages=1))
    choose_lds_layouts(p)
    k = GemmBuilder(copy.deepcopy(p)).build()
    assert verify_kernel(k).holds
    loop = next(s for s in k.body if isinstance(s, Loop))
    first = next(i for i, s in enumerate(loop.body) if isinstance(s, Barrier))
    del loop.body[first]
    r = verify_kernel(k)
    assert not r.checks["lds_races"].holds
    assert "since the last barrier" in str(r.checks["lds_races"].counterexample)


def test_one_stage_without_the_last_barrier_is_a_loop_carried_race():
    """The one-stage loop runs one k-tile per iteration: the race between its LDS stores and
    the next iteration's operand reads crosses the back edge, and must still be caught."""
    import copy
    from kernels.gate import verify_kernel
    from kernels.gemm import GemmBuilder, choose_lds_layouts
    from kernels.gemm_plan import plan_gemm
    p = plan_gemm(GemmConfig(200, 136, 200, block_k=64, stages=1))
    choose_lds_layouts(p)
    k = GemmBuilder(copy.deepcopy(p)).build()
    loop = next(s for s in k.body if isinstance(s, Loop))
    last = max(i for i, s in enumerate(loop.body) if isinstance(s, Barrier))
    assert last == len(loop.body) - 1          # the barrier that ends the iteration
    del loop.body[last]
    r = verify_kernel(k)
    assert not r.checks["lds_races"].holds
    assert "without a barrier between" in str(r.checks["lds_races"].counterexample)
