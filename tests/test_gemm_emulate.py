"""GEMM kernels run on the CPU emulator against torch: odd shapes, every layout option, dtypes."""

import argparse

import pytest
import torch

from kernels.registry import get

ENTRY = get("gemm")
BASE = dict(m=200, n=136, k=72, dtype="f16", out_dtype=None, layout="NN", c_major="row",
            block="128x128x32", waves="2x2", mfma=None, vec=None, arch="gfx942")

CASES = {
    "NN": {}, "NT": {"layout": "NT"}, "TN": {"layout": "TN"}, "TT": {"layout": "TT"},
    "bf16-f32-16x16x16": {"dtype": "bf16", "out_dtype": "f32", "mfma": "16x16x16"},
    "bf16-TN-bf16": {"dtype": "bf16", "layout": "TN"},
    # 64x64 tile, 16x16x16, column-major fp32 C, narrower B loads (too few elements per thread)
    "small-tile-colC": {"m": 64, "n": 96, "k": 40, "out_dtype": "f32", "block": "64x64x32",
                        "mfma": "16x16x16", "c_major": "col"},
    # K < block_k (no loop), one wave per block
    "tiny-one-wave": {"m": 40, "n": 48, "k": 24, "block": "32x32x32", "waves": "1x1"},
    # contiguous extents not multiples of 8: 32-bit global loads, all edges partial
    "unaligned-70": {"m": 130, "n": 70, "k": 70, "layout": "NT"},
    # odd K: scalar global loads packed into 32-bit LDS writes; M far below the block tile
    "odd-k-tiny-m": {"m": 5, "n": 141, "k": 17, "dtype": "bf16", "out_dtype": "f32",
                     "c_major": "col", "block": "64x64x32"},
}


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
