"""The GEMM layout plan (kernels.gemm_plan): layouts checked against the MFMA spec directly."""

import numpy as np
import pytest

from layoutalg import Layout
from kernels.gemm_plan import ConfigError, GemmConfig, plan_gemm, split_tv


def _vals(lay, T):
    return lay.values().reshape((T, -1), order="F")


@pytest.mark.parametrize("mfma", ["32x32x8", "16x16x16"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_fragments_follow_the_spec(mfma, dtype):
    """frag coordinates == spec.element(lane, item) + wave/rep offsets, and A and B put the same
    k in every reduction slot of every MFMA step (the k-permutation is shared)."""
    p = plan_gemm(GemmConfig(256, 256, 256, dtype=dtype, mfma=mfma))
    sp, T = p.spec, p.cfg.threads
    am, ak = _vals(p.a.frag_mn, T), _vals(p.a.frag_k, T)
    bn, bk = _vals(p.b.frag_mn, T), _vals(p.b.frag_k, T)
    wtm, wtn = p.cfg.block_m // p.cfg.waves_m, p.cfg.block_n // p.cfg.waves_n
    it, kp = p.items, p.kpack
    for tid in (0, 1, 31, 37, 63, 64, 130, 255):
        lane, wave = tid % 64, tid // 64
        wm, wn = wave % p.cfg.waves_m, wave // p.cfg.waves_m
        for g in range(p.kgroups):
            for s in range(kp):
                for r in range(p.reps_m):
                    for e in range(it):
                        v = e + it * (s + kp * (r + p.reps_m * g))
                        i, q, _ = sp.element("A", lane, e)
                        assert am[tid, v] == wm * wtm + r * sp.m + i
                        ka = ak[tid, v]
                        # B: same (lane, item) -> slot q must carry the same k
                        vb = e + it * (s + kp * (0 + p.reps_n * g))
                        q2, j, _ = sp.element("B", lane, e)
                        assert q2 == q
                        assert bk[tid, vb] == ka
                        assert bn[tid, vb] == wn * wtn + j
                        assert g * sp.k * kp <= ka < (g + 1) * sp.k * kp


def test_every_k_once_per_row():
    """Over all (g, s) steps, each MFMA row gets every k of the block tile exactly once."""
    p = plan_gemm(GemmConfig(256, 256, 256))
    T = p.cfg.threads
    ak = _vals(p.a.frag_k, T)
    per_rep = p.items * p.kpack
    for tid in range(64):
        ks = sorted(int(ak[tid, e + per_rep * (0 + p.reps_m * g)])
                    for g in range(p.kgroups) for e in range(per_rep))
        others = sorted(int(ak[tid ^ 32, e + per_rep * p.reps_m * g])
                        for g in range(p.kgroups) for e in range(per_rep))
        assert sorted(ks + others) == list(range(p.cfg.block_k))


def test_copy_is_a_bijection_onto_the_tile():
    for layout in ("NN", "NT", "TN", "TT"):
        c = GemmConfig(200, 136, 72, a_major="row" if layout[0] == "N" else "col",
                       b_major="row" if layout[1] == "N" else "col")
        p = plan_gemm(c)
        for op in (p.a, p.b):
            v = np.sort(op.copy.values().reshape(-1))
            assert (v == np.arange(op.tile[0] * op.tile[1])).all(), (layout, op.name, op.copy)


def test_split_tv():
    r, c = split_tv(Layout((4, 8), (1, 4)), 4)
    assert (r.values() + 4 * c.values() == np.arange(32)).all()
    with pytest.raises(Exception):
        split_tv(Layout(8, 1), 4)   # one mode crossing rows: not splittable mode by mode


def test_clear_errors():
    with pytest.raises(ConfigError, match=r"128-bit.*K=70.*multiples of 8"):
        plan_gemm(GemmConfig(64, 64, 70, vec=8))
    with pytest.raises(ConfigError, match="does not split"):
        plan_gemm(GemmConfig(64, 64, 64, block_m=128, waves_m=3, block_n=64, waves_n=1))
    with pytest.raises(ConfigError, match="dtype"):
        plan_gemm(GemmConfig(64, 64, 64, dtype="f8"))
    with pytest.raises(ConfigError, match="MFMA"):
        plan_gemm(GemmConfig(64, 64, 64, block_k=4))
    # auto vector width falls back to narrower loads and says so
    p = plan_gemm(GemmConfig(64, 64, 70))
    assert p.a.vec == 2 and any("32-bit" in n for n in p.notes)


@pytest.mark.parametrize("cfg", [
    GemmConfig(4096, 4096, 4096),
    GemmConfig(4096, 4096, 4096, block_k=64, stages=1),
    GemmConfig(512, 512, 512, block_m=64, block_n=64),
    GemmConfig(512, 512, 512, b_major="col", a_major="col", mfma="16x16x16"),
    GemmConfig(512, 512, 512, dtype="bf16", block_k=64, stages=1, block_n=64, waves_n=1),
])
def test_swizzle_screen_picks_what_suggest_swizzle_picks(cfg):
    """The fast screen in choose_lds_layouts returns, for every copy arrangement, the same
    verdict, swizzle and candidate index as layoutalg.verify.suggest_swizzle."""
    from layoutalg.verify import suggest_swizzle
    from mfma_specs.arch import lds_model
    from kernels.gemm import _tile_index_arrays, screen_swizzles
    from kernels.gemm_plan import operand_plan
    p = plan_gemm(cfg)
    for name in ("A", "B"):
        op = p.a if name == "A" else p.b
        tmn = op.tile[0] // op.vmn
        arrangements = [None] if op.k_contig else \
            [a for a in (tmn, 16, 8, 4, 2, 1) if a <= tmn and tmn % a == 0]
        for a in dict.fromkeys(arrangements):
            cand = op if a is None else operand_plan(p, name, a)
            arrays = _tile_index_arrays(p, cand)
            if arrays is None:
                continue
            wi, wa, ri, ra = arrays
            ref = suggest_swizzle(cand.tile, write=wa, read=ra, elem_bytes=2, arch="gfx942",
                                  write_instruction=wi, read_instruction=ri)
            found, tried = screen_swizzles(cand, [(wa, lds_model("gfx942", wi)),
                                                  (ra, lds_model("gfx942", ri))], 2)
            assert (found is not None) == ref.holds, (name, a)
            if ref.holds:
                assert tried == ref.tried
                sw = ref.swizzle
                assert found == ((0, found[1], 0) if sw is None else
                                 (sw.bits, sw.base, sw.shift)), (name, a, found, sw)
