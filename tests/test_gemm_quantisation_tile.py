"""The 224-row GEMM tile against CU quantisation (issue 15 item 3): 224x128x32, 1x4 waves, one
LDS stage, pipelined, with a 256-register hint (GemmConfig.waves_per_eu = 2) that keeps two
waves per SIMD.  At 4096^2 it gives 19 x 32 = 608 tiles, one full round of 2 work-groups on each
of the 304 CUs.  Checked: the copy plan (A's vector narrows so 224 rows tile), the hint in the
source, the verifier, the emulator against torch, and the compiled gfx942 loop (0 spills, 2
waves/SIMD, the pipelined order)."""

import re

import pytest

from kernels.gemm import build_gemm
from kernels.gemm_plan import ConfigError, GemmConfig, plan_gemm
from _gemm_cases import emulate_against_reference

TILE = dict(block_m=224, block_n=128, block_k=32, waves_m=1, waves_n=4, stages=1,
            schedule="pipelined", waves_per_eu=2)


def test_a_vector_narrows_so_224_rows_tile():
    """128-bit A loads (8 k) put 4 threads on a k-row and 64 rows per pass, which does not tile
    224; 64-bit ones (8 threads, 32 rows) do.  B (n-contiguous, 128 wide) keeps 128-bit loads."""
    p = plan_gemm(GemmConfig(4096, 4096, 4096, dtype="bf16", **TILE))
    assert (p.a.vec, p.b.vec) == (4, 8)
    assert p.a.copy_mn.values().max() == 223
    # a 128-row tile keeps its widest vector (the narrowing only applies where it must)
    assert plan_gemm(GemmConfig(4096, 4096, 4096)).a.vec == 8


def test_explicit_wide_vector_is_still_refused_with_the_reason():
    with pytest.raises(ConfigError, match="do not tile 224 rows"):
        plan_gemm(GemmConfig(4096, 4096, 4096, vec=8, **TILE))


def test_waves_per_eu_prints_the_hint_and_is_validated():
    src = build_gemm(GemmConfig(300, 200, 96, **TILE)).source
    assert "LAGEN_WAVES_PER_EU(2)" in src
    assert "LAGEN_WAVES_PER_EU(" not in build_gemm(GemmConfig(128, 128, 64)).source.replace(
        "#define LAGEN_WAVES_PER_EU(", "")
    for bad in (-1, 9, 2.0, "2"):
        with pytest.raises(ConfigError, match="waves_per_eu must be 0"):
            plan_gemm(GemmConfig(128, 128, 64, waves_per_eu=bad))


@pytest.mark.parametrize("dtype,shape", [("bf16", (300, 200, 96)), ("f16", (224, 128, 40))])
def test_emulated_224_tile_matches_torch(dtype, shape):
    """Ragged (a partial last row of tiles and a partial k-tile) and exact-M shapes."""
    bk, _, out, _ = emulate_against_reference(GemmConfig(*shape, dtype=dtype, **TILE), seed=3)
    assert float(out.abs().max()) > 0
    assert bk.plan.grid[:2] == (-(-shape[0] // 224), -(-shape[1] // 128))


def test_compiled_224_tile_keeps_two_waves_per_simd_and_the_pipelined_order():
    """gfx942 code object at 4096^3: no spills, 2 waves/SIMD (<= 256 registers), and in each
    k-tile of the hot loop: 16 ds_reads (7 A + 1 B fragments x 2 k-groups) before the first
    MFMA, s_setprio 1 right after it, then the other 27 MFMAs (7 x 4 k-steps in all) with no
    LDS access, waiting on partial lgkmcnt."""
    from kernels.errors import KernelError
    from test_gemm_pipelined import _hot_loop_text
    bk = build_gemm(GemmConfig(4096, 4096, 4096, dtype="bf16", **TILE))
    try:
        ins = _hot_loop_text(bk)
    except KernelError as e:   # no clang-19 / llvm-objdump here (ToolchainError)
        pytest.skip(f"no gfx942 toolchain: {e}")
    rep = bk.report()
    assert rep["spills"] == 0 and rep["waves_per_simd"] == 2
    ups = [i for i, s in enumerate(ins) if s.startswith("s_setprio 1")]
    downs = [i for i, s in enumerate(ins) if s.startswith("s_setprio 0")]
    assert len(ups) == len(downs) >= 1
    for up, down in zip(ups, downs):
        assert ins[up - 1].startswith("v_mfma")      # the first MFMA runs at priority 0
        run = ins[up - 1:down]
        assert sum(s.startswith("v_mfma") for s in run) == 28
        assert not any(s.startswith("ds_") for s in run)
        prev = max([d for d in downs if d < up], default=0)
        assert sum(s.startswith("ds_read") for s in ins[prev:up]) == 16
        partial = [int(m.group(1)) for s in ins[up - 3:down]
                   for m in [re.search(r"lgkmcnt\((\d+)\)", s)] if m]
        assert partial and max(partial) > 0 and partial == sorted(partial, reverse=True)
