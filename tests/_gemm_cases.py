"""The GEMM configurations that tests/test_gemm_emulate.py runs on the emulator, as CLI options
(the registry's argument mapping).  One table: tools/golden_sources.py hashes the sources of
these same cases, so a case added here is covered by the golden-hash test too."""

BASE = dict(m=200, n=136, k=72, dtype="f16", out_dtype=None, layout="NN", c_major="row",
            block="128x128x32", waves="2x2", mfma=None, vec=None, stages=2, schedule=None,
            arch="gfx942")

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
    # gfx942 FNUZ fp8 (per-tensor scales by default, bf16 out) and bf8, both MFMA shapes;
    # K = 72 leaves a partial k-tile of the 64-deep block
    "fp8-NT-scaled": {"dtype": "fp8", "layout": "NT", "block": "128x128x64"},
    "bf8-NN-f32-16x16x32": {"dtype": "bf8", "out_dtype": "f32", "mfma": "16x16x32",
                            "block": "64x64x64"},
    # the pipelined schedule (issue 15): ragged, and the tile choice (no --block) end to end
    "pipelined-ragged": {"schedule": "pipelined"},
    "pipelined-1stage-bk64-TN": {"layout": "TN", "block": "128x128x64", "stages": 1,
                                 "schedule": "pipelined"},
    "chosen-tile": {"block": None, "waves": None, "stages": None},
    "chosen-tile-small-m": {"m": 16, "n": 200, "k": 136, "dtype": "bf16", "block": None,
                            "waves": None, "stages": None},
}


def emulate_against_reference(cfg, seed=0):
    """Build ``cfg`` (a GemmConfig), assert the verifier holds, run it on the CPU emulator on the
    registry's inputs and assert every element within the registry's tolerance of its torch
    reference; returns (built kernel, inputs, output, reference).  One copy for the GEMM tests
    (emulate, pipelined, fp8, preshuffled B)."""
    from kernels.registry import get
    entry = get("gemm")
    bk = entry.build(cfg)          # build_gemm, or build_gemm_preshuffled for preshuffled B
    assert bk.verification.holds, bk.verification.as_bools()
    args = entry.inputs(cfg, seed=seed)
    res = bk.emulate(*args)
    out, ref = entry.output(cfg, res.outputs), entry.reference(cfg, args)
    atol, rtol = entry.tolerance(cfg)
    err = (out - ref).abs()
    assert out.shape == (cfg.m, cfg.n)
    assert bool((err <= atol + rtol * ref.abs()).all()), f"max error {float(err.max())}"
    return bk, args, out, ref
