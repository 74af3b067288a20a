"""The ping-pong prefill (issue 16 item 2; kernels/amd/flash_attention_pingpong.py): verified by
every rule (the wave-role ones included), emulated against torch, compiled without spills at two
waves per SIMD, reachable from the API / CLI / AMD-on-NVIDIA harness.  The planted bugs in its
IR and printed source are in tests/test_mutation_catalogue.py ("ping-pong waves")."""

from __future__ import annotations

import copy

import pytest
import torch

import kernels.flash_attention as attn
from kernels.amd.attention_plan import AttnConfig, ConfigError
from kernels.amd.flash_attention_pingpong import WAVE_ROLES, build_pingpong_ir
from kernels.attention_registry import reference
from kernels.verify.attention_static import default_instances
from kernels.verify.verifier import verify

WAVE_RULES = ("barrier_balance", "wave_role_schedule", "wave_row_ownership", "lds_phase_races")


@pytest.fixture(scope="module")
def ir_causal():
    return build_pingpong_ir(AttnConfig(head_dim=128, dtype="bf16", causal=True, pingpong=True))


def test_config_is_eight_waves_two_stages_head_dim_128():
    c = AttnConfig(head_dim=128, pingpong=True).normalized()
    assert (c.waves, c.block_m, c.lds_stages, c.lds_bytes) == (8, 256, 2, 65536)
    with pytest.raises(ConfigError, match="head_dim 64"):
        AttnConfig(head_dim=64, pingpong=True).normalized()
    with pytest.raises(ConfigError, match="lds_stages 1"):
        AttnConfig(head_dim=128, pingpong=True, lds_stages=1).normalized()
    with pytest.raises(ConfigError, match="pingpong=True"):
        AttnConfig(head_dim=128, waves=8).normalized()


def test_every_check_holds_and_the_roles_alternate(ir_causal):
    rep = verify(ir_causal)
    assert ir_causal.spec.wave_roles == WAVE_ROLES
    bad = {n: c.counterexample for n, c in rep.checks.items() if not c.holds}
    assert not bad, bad
    assert set(WAVE_RULES) <= set(rep.checks)
    dom = rep.checks["wave_role_schedule"].domain
    assert "ping (waves 0-3): -MSMS" in dom and "pong (waves 4-7): --MSMS" in dom, dom


def test_a_group_barrier_needs_a_spec_with_roles(ir_causal):
    import dataclasses
    k = copy.deepcopy(ir_causal)
    k.spec = dataclasses.replace(k.spec, wave_roles=())
    rep = verify(k, instances=default_instances(k)[:1])
    assert not rep.checks["lds_races"].holds
    assert "depends on the thread" in rep.checks["lds_races"].counterexample


CASES = {
    # (B, H, HK, Sq, Skv, causal, align, p_rounding): rows that see no key (bottom-right with
    # Sq > Skv) must give O = 0 and lse = -inf, as in the default form
    "bf16-gqa-q77-kv200": (1, 2, 1, 77, 200, False, "top_left", "rtne"),
    "bf16-causal-bottom-right-q300-kv270": (1, 1, 1, 300, 270, True, "bottom_right", "rtne"),
    "bf16-causal-q260-kv260-rtz": (1, 1, 1, 260, 260, True, "top_left", "rtz"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_emulated_against_torch(name):
    b, h, hk, sq, skv, causal, align, pr = CASES[name]
    g = torch.Generator().manual_seed(1)
    q = torch.randn(b, h, sq, 128, generator=g).bfloat16()
    k = torch.randn(b, hk, skv, 128, generator=g).bfloat16()
    v = torch.randn(b, hk, skv, 128, generator=g).bfloat16()
    out, lse = attn.attention(q, k, v, causal=causal, causal_align=align, return_lse=True,
                              backend="emulator", pingpong=True, p_rounding=pr)
    ref, lref = reference(q, k, v, causal=causal, causal_align=align)
    err = float((out.float() - ref).abs().max())
    assert err <= 2e-2, err
    fin = torch.isfinite(lref)
    assert torch.equal(fin, torch.isfinite(lse))
    assert float((lse[fin] - lref[fin]).abs().max()) <= 1e-4
    if align == "bottom_right":
        assert (~fin).any() and float(out[~fin].float().abs().max()) == 0.0


@pytest.mark.parametrize("causal", [False, True])
def test_compiles_without_spills_at_two_waves_per_simd(causal):
    bk = attn.get_kernel(AttnConfig(head_dim=128, dtype="bf16", causal=causal, pingpong=True))
    rep = bk.report()
    assert all(rep["verification"].values()) and len(rep["verification"]) == 21
    assert rep["spills"] == 0 and rep["scratch_bytes"] == 0 and rep["vgpr_unified"] <= 256
    assert rep["waves_per_simd"] == 2 and rep["lds_bytes"] == 65536
    assert rep["hot_loop_instructions"]["match"] is True
    # the group barriers and the priorities reach the printed source
    assert bk.source.count("LAGEN_STAGGERED_BARRIERS();") == 1
    assert "if (tid >= 256) {" in bk.source and "__builtin_amdgcn_s_setprio(1);" in bk.source


def test_reachable_from_the_cli_registry_and_the_nvidia_harness():
    from kernels.amd.attention_registry import attention_case
    from kernels.cuda import amd_flavour as af
    c = attention_case(batch=1, heads=2, kv_heads=None, seqlen_q=300, seqlen_kv=300,
                       head_dim=128, dtype="bf16", causal=True, pingpong=True)
    assert c.kernel.pingpong and c.kernel.waves == 8
    e, cfg, shaped = af.attention_case(1, 2, 300, 128, True, "bf16", pingpong=True)
    assert shaped.name.endswith("_pp")
    scalars, grid = shaped.case_args()
    assert grid[1] == 2              # causal grid: (batch x heads, query tiles of 256 rows)
    offs, total = af.lds_layout(shaped.source)
    assert total == 65536
    tu = af.translate(shaped.source)
    assert "LAGEN_STAGGERED_BARRIERS();" in tu
