"""A 224-row GEMM tile (4096 = 18 x 224 + 64: the tile count that fills 304 CUs at 4096^3):
its A tile (224 x block_k) is not a power of two, so the LDS swizzle search keeps only swizzles
that XOR within a row (kernels.gemm.screen_swizzles), which stay inside the tile."""

import pytest

from kernels.gemm import build_gemm, screen_swizzles
from kernels.gemm_plan import GemmConfig
from kernels.registry import get

ENTRY = get("gemm")


def _cfg(**kw):
    base = dict(block_m=224, block_n=128, block_k=64, waves_m=1, waves_n=4, stages=1,
                schedule="pipelined")
    return GemmConfig(**{**base, **kw})


def test_224_row_tile_is_conflict_free_and_in_the_tile():
    """Regression: the screen gave up on a non-power-of-two tile and the gate failed the build
    with an 8-way bank conflict on A's fragment reads."""
    bk = build_gemm(_cfg(m=4096, n=4096, k=4096))
    assert bk.verification.holds
    sw = bk.plan.a.swizzle
    assert sw.bits > 0
    # the swizzle's target bits lie inside a row of 64 elements: every offset stays in its row
    assert sw.base + sw.bits <= 6


@pytest.mark.parametrize("m,n,k", [(224, 128, 64), (300, 200, 136)])
def test_224_row_tile_emulates_against_torch(m, n, k):
    cfg = _cfg(m=m, n=n, k=k)
    bk = build_gemm(cfg)
    args = ENTRY.inputs(cfg, seed=3)
    res = bk.emulate(*args)
    out, ref = ENTRY.output(cfg, res.outputs), ENTRY.reference(cfg, args)
    atol, rtol = ENTRY.tolerance(cfg)
    err = (out - ref).abs()
    assert bool((err <= atol + rtol * ref.abs()).all()), f"max error {float(err.max())}"


def test_screen_refuses_a_non_power_of_two_row_length():
    """A row of 48 elements: no XOR of the column bits keeps offsets below 48, so the screen
    does not apply (None: the caller runs suggest_swizzle, which says why)."""
    import numpy as np
    from types import SimpleNamespace
    op = SimpleNamespace(tile=(224, 48))
    assert screen_swizzles(op, [(np.zeros((64, 8), dtype=np.int64), None)], 2) is None
