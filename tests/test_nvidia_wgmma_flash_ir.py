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
