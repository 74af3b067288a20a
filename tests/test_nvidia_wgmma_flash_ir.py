"""The wgmma prefill built as kernel IR (kernels/nvidia/wgmma_flash_ir.py): the one verifier
proves the IR and its printed CUDA for the head_dim 64 configuration choose_prefill runs (f16 /
bf16, causal or not, the overlapped and the serial schedule) and for two warpgroups at head_dim
128 (the warp-specialised kernel's consumer tile, 128 and 192 keys); what the IR form refuses; the
launcher verifies before it compiles.  The planted bugs are in
tests/test_mutation_catalogue_wgmma_flash_ir.py; the GPU comparison with the template in
tests/test_nvidia_wgmma_flash_ir_gpu.py."""

from __future__ import annotations

import pytest

from kernels.ir.core import walk
from kernels.ir.nvidia_wgmma import FenceProxyAsync, WgmmaMma
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention import WgmmaFlashConfig
from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention, build_wgmma_flash_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify


@pytest.mark.parametrize("cfg", [
    WgmmaFlashConfig(dtype="f16", head_dim=64, warpgroups=1, bn=128),
    WgmmaFlashConfig(dtype="bf16", head_dim=64, warpgroups=1, bn=128, causal=True),
    WgmmaFlashConfig(dtype="f16", head_dim=64, warpgroups=1, bn=128, overlap=False),
    WgmmaFlashConfig(dtype="f16", head_dim=64, warpgroups=1, bn=128, overlap=False,
                     causal=True),
], ids=["f16-overlap", "bf16-causal-overlap", "f16-serial", "f16-causal-serial"])
def test_wgmma_flash_ir_is_verified_ir_and_text(cfg):
    k = build_wgmma_flash_ir(cfg)
    src = emit_cuda_attention(k)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    for name in ("lds_races", "lane_mfma_operands", "online_softmax", "printed_source",
                 "masking_and_tile_skipping", "lane_accumulator_writeback", "in_bounds"):
        assert name in r.checks
    # both products are wgmmas: S from two descriptors, O with P from registers
    ms = [s for s in walk(k.body) if isinstance(s, WgmmaMma)]
    assert {m.a_in_regs for m in ms} == {False, True}
    assert any(isinstance(s, FenceProxyAsync) for s in walk(k.body))
    assert "lg_wgmma_m64n128_f16_t0(" in src or "lg_wgmma_m64n128_bf16_t0(" in src
    assert f"_rs_t1(&o_acc[0], &pa[" in src
    # the wgmma issues were simulated (not skipped): 4 S + 8 O per block of 128 keys
    dom = r.checks["lane_mfma_operands"].domain
    assert "wave-level MFMA issues" in dom and " 0 wave-level" not in dom
    assert f"__launch_bounds__(128, 3) {k.name}(" in src


def test_the_config_choose_prefill_returns_for_d64_is_built():
    for causal in (False, True):
        cfg = choose_prefill("f16", 64, causal, "wgmma").config
        assert build_wgmma_flash_ir(cfg).meta["cfg"] == cfg


@pytest.mark.parametrize("cfg", [
    WgmmaFlashConfig(dtype="bf16", head_dim=128, warpgroups=2, bn=128),
    WgmmaFlashConfig(dtype="f16", head_dim=128, warpgroups=2, bn=128, causal=True),
    WgmmaFlashConfig(dtype="bf16", head_dim=128, warpgroups=2, bn=192),
], ids=["d128-2wg", "d128-2wg-causal", "d128-2wg-192keys"])
def test_two_warpgroups_at_d128_are_verified(cfg):
    """The consumer tile of the warp-specialised d128 prefill (128 rows, 64 per warpgroup):
    verified IR and text; warpgroup 1's rows and Q descriptor start are 64 rows on."""
    k = build_wgmma_flash_ir(cfg)
    src = emit_cuda_attention(k)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert f"__launch_bounds__(256, 1) {k.name}(" in src
    starts = {str(m.a.start) for m in walk(k.body) if isinstance(m, WgmmaMma) and not m.a_in_regs}
    assert all("wg" in st for st in starts), starts


@pytest.mark.parametrize("kw,match", [
    (dict(head_dim=256, warpgroups=1, bn=64), "head_dim 256"),
    (dict(head_dim=256, warpgroups=2, bn=64), "head_dim 256"),
])
def test_what_the_ir_form_refuses(kw, match):
    with pytest.raises(AttentionConfigError, match=match):
        build_wgmma_flash_ir(WgmmaFlashConfig(**kw))


def test_the_launcher_verifies_before_compiling(monkeypatch):
    monkeypatch.setenv("LAYOUTALG_VERIFY_CACHE", "0")
    cfg = WgmmaFlashConfig(dtype="f16", head_dim=64, warpgroups=1, bn=128)
    fa = IrWgmmaFlashAttention(cfg)
    assert fa.report.holds and fa._module is None
    assert fa.source == emit_cuda_attention(build_wgmma_flash_ir(cfg))
    assert fa.kernel_name == fa.ir.name == "lg_wgflash_ir_f16_d64_64x128"


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_shared_addresses_and_descriptors_from_32_bit_bases(causal):
    """Each cp.async address is the array's 32-bit base plus the per-thread base plus the
    stage and constant (the template's ``[R + imm]``), each descriptor is built from the 32-bit
    base, and the one warpgroup's ``wg`` is the constant 0: no generic pointer converted per
    access, no per-thread Q descriptor rebuilt in the key loop (issue 20 item 1: 574 SASS
    instructions per unmasked key block against the template's 516, now 494; NVRTC 13.5)."""
    k = build_wgmma_flash_ir(WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128,
                                              causal=causal))
    src = emit_cuda_attention(k)
    body = src[src.index(f"{k.name}("):]
    assert "lg_smem_u32(sK + " not in body and "lg_gmma_desc(" not in body
    assert "const lg_u32 sK_u32 = lg_smem_u32(sK);" in body
    assert "lg_cp_async16((sK_u32 + 2 * (kvs0) + 2 * (8192*(((j + 1) % 2)) + 1024))" in body
    assert "lg_gmma_desc_u32(0x4000004000010000ull, sQ_u32, 4096*wg + 16)" in body
    assert "const int wg = 0;" in body


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_nvrtc_compiles_the_d64_prefill_without_spills(dt, causal):
    """NVRTC 13.5, sm_90a, three blocks per SM (``__launch_bounds__(128, 3)``: at most 168
    registers): 165-167 registers and no spills (before the 32-bit bases: 168 and, causal, 48
    bytes spilled); no wgmma serialised by ptxas."""
    import re
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    k = build_wgmma_flash_ir(WgmmaFlashConfig(dtype=dt, head_dim=64, warpgroups=1, bn=128,
                                              causal=causal))
    m = compile_cuda(emit_cuda_attention(k), "sm_90a", name=f"{k.name}.cu", backend="nvrtc",
                     options=("--ptxas-options=-v",), use_cache=False)
    assert m.kernels == (k.name,)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
    assert spills and not any(spills), m.log[-400:]
    assert "serialized" not in m.log, m.log[-400:]


@pytest.mark.parametrize("on", [False, True], ids=["shipped-rule", "rule-on"])
def test_wgmma_dispatch_runs_the_ir_kernel_where_measured_at_parity(monkeypatch, on):
    """choose_prefill's reason names the kernel that runs; compiled_flash builds the verified
    IR kernel for the wgmma tile of a (head_dim, mask) in IR_WGMMA_PREFILL_AT_PARITY (as
    shipped, and with the rule forced on for every d64 mask), the template otherwise (the
    serial schedule, another tile, or asked for); a call whose offsets reach 2^31, or whose
    batch x heads passes grid y, runs the wide IR form (the template with WIDE_PREFILL_ON_IR
    off)."""
    from types import SimpleNamespace
    from kernels.nvidia import dispatch, prefill_select
    from kernels.nvidia.wgmma_attention import WgmmaFlashAttention
    if on:
        monkeypatch.setattr(prefill_select, "IR_WGMMA_PREFILL_AT_PARITY",
                            frozenset({(64, False), (64, True)}))
    parity = prefill_select.IR_WGMMA_PREFILL_AT_PARITY
    monkeypatch.setattr(dispatch, "_FLASH", {})
    for causal in (False, True):
        c = choose_prefill("f16", 64, causal, "wgmma")
        on_ir = (64, causal) in parity
        assert prefill_select.wgmma_prefill_on_ir(c.config) == on_ir
        assert prefill_select.prefill_on_ir(c.config) == on_ir
        assert ("verified IR kernel" if on_ir else "the template") in c.reason
        fa = dispatch.compiled_flash(c.config)
        assert type(fa) is (IrWgmmaFlashAttention if on_ir else WgmmaFlashAttention)
        assert fa.cfg == c.config and dispatch.compiled_flash(c.config) is fa
        tpl = dispatch.compiled_flash(c.config, template=True)
        assert type(tpl) is WgmmaFlashAttention and tpl.cfg == c.config
        if on_ir:
            assert fa.report.holds and fa._module is None      # verified, not compiled
            small = SimpleNamespace(shape=(1, 1, 128, 64),
                                    stride=lambda d=None, s=(8192, 8192, 64, 1):
                                    s if d is None else s[d])
            big = SimpleNamespace(shape=(16, 32, 65537, 64),
                                  stride=lambda d=None, s=(32 * 65537 * 64, 65537 * 64, 64, 1):
                                  s if d is None else s[d])
            assert dispatch._within_offsets(fa, small, small, small, None) is fa
            # offsets past 2^31: the configuration's wide IR form (prefill_wide), or with
            # WIDE_PREFILL_ON_IR off the template
            wide_fa = dispatch.compiled_flash(c.config, wide=True)
            assert wide_fa.wide and wide_fa.kernel_name == fa.kernel_name + "_i64"
            assert dispatch._within_offsets(fa, big, small, small, None) is wide_fa
            # batch x heads past the IR's grid y: the wide form's grid (blocks, heads, batch)
            wide = SimpleNamespace(shape=(4096, 16, 64, 64),
                                   stride=lambda d=None, s=(16 * 64 * 64, 64 * 64, 64, 1):
                                   s if d is None else s[d])
            assert dispatch._within_offsets(fa, wide, wide, wide, None) is wide_fa
            from kernels.nvidia import prefill_ir
            monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", False)
            assert dispatch._within_offsets(fa, big, small, small, None) is tpl
            assert dispatch._within_offsets(fa, wide, wide, wide, None) is tpl
            monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", True)
        serial = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=causal,
                                  overlap=False)
        other = WgmmaFlashConfig(head_dim=64, warpgroups=2, bn=128, causal=causal)
        assert not prefill_select.wgmma_prefill_on_ir(serial)
        assert not prefill_select.wgmma_prefill_on_ir(other)
        assert type(dispatch.compiled_flash(serial)) is WgmmaFlashAttention


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_block0_masked_only_where_needed_is_verified(causal):
    """The switch MASK_BLOCK0_WHEN_NEEDED: block 0 of the overlapped schedule masked under
    ``n_full < 1`` (the template's need_mask) verifies, IR and text, and compiles without
    spills; the default build is the switch's form (off: the H100 A/B in docs/PERFORMANCE.md
    found it slower at the plain shapes) and the other form (block 0 always masked) prints no
    such branch."""
    import re
    from kernels.nvidia import wgmma_flash_ir
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    cfg = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=causal)
    on = wgmma_flash_ir.MASK_BLOCK0_WHEN_NEEDED
    assert isinstance(on, bool)
    default = emit_cuda_attention(build_wgmma_flash_ir(cfg))
    assert default.count("if (n_full < 1) {") == int(on)
    off = emit_cuda_attention(build_wgmma_flash_ir(cfg, mask_block0_when_needed=False))
    assert "if (n_full < 1) {" not in off
    k = build_wgmma_flash_ir(cfg, mask_block0_when_needed=True)
    src = emit_cuda_attention(k)
    assert src.count("if (n_full < 1) {") == 1
    assert default == (src if on else off)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    if nvrtc_available():
        m = compile_cuda(src, "sm_90a", name=f"{k.name}.cu", backend="nvrtc",
                         options=("--ptxas-options=-v",), use_cache=False)
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
        assert spills and not any(spills), m.log[-400:]
