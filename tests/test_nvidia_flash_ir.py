"""The mma.sync prefill built as kernel IR (kernels/nvidia/flash_ir.py): the one verifier proves
the IR and its printed CUDA for the configurations the mma.sync dispatch runs (f16 / bf16, head
dims 64 and 128, causal or not, 16 or 32 rows per warp); what the IR form refuses; the
launcher's 32-bit offset rule.  The planted bugs are in tests/test_mutation_catalogue_flash_ir.py;
the GPU comparison with the template in tests/test_nvidia_flash_ir_gpu.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import sympy

from kernels.nvidia.attention import AttentionConfigError, FlashConfig
from kernels.nvidia.flash_ir import (IrFlashAttention, build_flash_ir, flash_ir_instances,
                                     int_offsets_fit)
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify


@pytest.mark.parametrize("cfg", [
    FlashConfig(dtype="f16", head_dim=64, bm=128, bn=64, warps=4),
    FlashConfig(dtype="bf16", head_dim=128, bm=128, bn=64, warps=4, causal=True),
    FlashConfig(dtype="f16", head_dim=64, bm=64, bn=32, warps=4, causal=True),
], ids=["f16-d64", "bf16-d128-causal", "f16-d64-mt1-causal"])
def test_flash_ir_is_verified_ir_and_text(cfg):
    k = build_flash_ir(cfg)
    src = emit_cuda_attention(k)
    r = verify(k, arch="sm_90", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    for name in ("lds_races", "lane_mfma_operands", "online_softmax", "printed_source",
                 "masking_and_tile_skipping", "bank_conflicts_lds_read"):
        assert name in r.checks
    # the instances are the edges the docstring names; causal adds the two diagonal shapes
    names = [i.name for i in flash_ir_instances(k)]
    assert ("q-longer" in names) == cfg.causal and "one-row-one-key" in names
    assert f"void __launch_bounds__({cfg.threads}, 1) {k.name}(" in src
    assert "long long" not in src.split("__global__")[1]


@pytest.mark.parametrize("cfg", [
    FlashConfig(dtype="f16", head_dim=128, bm=128, bn=64, warps=4, causal=True),
    FlashConfig(dtype="bf16", head_dim=256, bm=64, bn=32, warps=4),
    FlashConfig(dtype="f16", head_dim=256, bm=64, bn=32, warps=4, causal=True),
], ids=["f16-d128-causal", "bf16-d256", "f16-d256-causal"])
@pytest.mark.parametrize("split", [True, False], ids=["split", "one-loop"])
def test_both_key_loop_forms_are_verified(cfg, split):
    """The key loop split (an unmasked loop over the blocks every row sees whole, then a masked
    one) or one masked loop over every block, at the head dims and masks whose form is chosen
    by measurement (:data:`~kernels.nvidia.flash_ir.ONE_MASKED_LOOP`), d256 included."""
    k = build_flash_ir(cfg, split=split)
    loops = [s for s in k.body if type(s).__name__ == "Loop"]
    assert len(loops) == (2 if split else 1)
    src = emit_cuda_attention(k)
    r = verify(k, arch="sm_90", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "masking_and_tile_skipping" in r.checks and "printed_source" in r.checks


def _mask_in_one_loop(cfg, mutate):
    from kernels.ir.attention import MaskScores
    from kernels.ir.core import walk
    k = build_flash_ir(cfg, split=False)
    m = next(s for s in walk(k.body) if isinstance(s, MaskScores))
    bad = tuple(mutate(c) for c in m.conds)
    assert bad != m.conds, "the mutation changed nothing"
    m.conds = bad
    return k


def _strict(c):
    return sympy.And(*[sympy.StrictLessThan(a.lhs, a.rhs, evaluate=False)
                       if isinstance(a, sympy.Le) else a for a in c.args])


@pytest.mark.parametrize("cfg,mutate", [
    (FlashConfig(dtype="f16", head_dim=128, bm=128, bn=64, warps=4, causal=True), _strict),
    (FlashConfig(dtype="f16", head_dim=256, bm=64, bn=32, warps=4), lambda c: sympy.true),
], ids=["d128-causal-off-by-one", "d256-ragged-mask-dropped"])
def test_one_loop_form_mask_bug_is_refused(cfg, mutate):
    """Planted bugs in the one-loop form's mask (the diagonal off by one; the ragged block's
    keys left visible): refused by the masking check."""
    k = _mask_in_one_loop(cfg, mutate)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    assert not r.checks["masking_and_tile_skipping"].holds
    assert r.checks["masking_and_tile_skipping"].counterexample


def test_q_in_registers_is_not_in_the_ir_form():
    with pytest.raises(AttentionConfigError, match="q_in_regs"):
        build_flash_ir(FlashConfig(head_dim=64, bm=64, bn=64, warps=4, q_in_regs=True))


def test_the_launcher_verifies_before_compiling(monkeypatch):
    monkeypatch.setenv("LAYOUTALG_VERIFY_CACHE", "0")
    cfg = FlashConfig(dtype="f16", head_dim=64, bm=128, bn=64, warps=4)
    fa = IrFlashAttention(cfg)
    assert fa.report.holds and fa._module is None
    assert fa.source == emit_cuda_attention(build_flash_ir(cfg))
    assert fa.kernel_name == fa.ir.name


def _t(shape, stride):
    return SimpleNamespace(shape=shape, stride=lambda d=None: stride if d is None else stride[d])


def test_int_offsets_fit_is_the_last_element():
    D = 128
    ok = _t((8, 32, 8191, D), (32 * 8191 * D, 8191 * D, D, 1))
    assert int_offsets_fit(ok)
    edge = _t((8, 32, 65536, D), (32 * 65536 * D, 65536 * D, D, 1))  # last offset 2^31 - 1
    assert int_offsets_fit(ok, edge)
    big = _t((8, 32, 65537, D), (32 * 65537 * D, 65537 * D, D, 1))
    assert not int_offsets_fit(ok, big)


def test_mma_dispatch_runs_the_ir_kernel_where_measured_at_parity(monkeypatch):
    """choose_prefill's reason names the kernel that runs; compiled_flash builds the verified IR
    kernel for the defaults of a measured (head_dim, mask) - every default since d128 causal
    and d256 measured at parity (H100 run v6) - the template otherwise (another tile, the
    template's copy form, or asked for), and a call whose offsets reach 2^31 runs the wide IR
    form (the template with WIDE_PREFILL_ON_IR off)."""
    from kernels.nvidia import dispatch
    from kernels.nvidia.attention import FLASH_DEFAULTS, FlashAttention
    from kernels.nvidia.prefill_select import (IR_PREFILL_AT_PARITY, choose_prefill,
                                               mma_prefill_on_ir)
    monkeypatch.setattr(dispatch, "_FLASH", {})
    for (d, causal) in [(64, False), (64, True), (128, False), (128, True), (256, False),
                        (256, True)]:
        c = choose_prefill("f16", d, causal, "mma")
        assert (d, causal) in IR_PREFILL_AT_PARITY and mma_prefill_on_ir(c.config)
        assert "verified IR kernel" in c.reason
    monkeypatch.setattr("kernels.nvidia.prefill_select.IR_PREFILL_AT_PARITY",
                        IR_PREFILL_AT_PARITY - {(128, True)})
    c = choose_prefill("f16", 128, True, "mma")      # a (head_dim, mask) not measured: template
    assert not mma_prefill_on_ir(c.config) and "the template" in c.reason
    assert type(dispatch.compiled_flash(c.config)) is FlashAttention
    monkeypatch.undo()
    monkeypatch.setattr(dispatch, "_FLASH", {})
    cfg = FlashConfig(dtype="f16", head_dim=64, causal=True, **FLASH_DEFAULTS[64])
    d256 = dispatch.compiled_flash(FlashConfig(dtype="bf16", head_dim=256, causal=True,
                                               **FLASH_DEFAULTS[256]))
    assert isinstance(d256, IrFlashAttention) and d256.report.holds
    assert len([s for s in d256.ir.body if type(s).__name__ == "Loop"]) == 1    # one loop
    fa = dispatch.compiled_flash(cfg)
    assert isinstance(fa, IrFlashAttention) and fa.report.holds
    assert dispatch.compiled_flash(cfg) is fa
    tpl = dispatch.compiled_flash(cfg, template=True)
    assert type(tpl) is FlashAttention and tpl.cfg == cfg
    other = FlashConfig(dtype="f16", head_dim=64, bm=64, bn=64, warps=4, causal=True)
    assert not mma_prefill_on_ir(other) and type(dispatch.compiled_flash(other)) is FlashAttention
    assert not mma_prefill_on_ir(FlashConfig(dtype="f16", head_dim=64, fast_copy=False,
                                             causal=True, **FLASH_DEFAULTS[64]))
    D = 64
    small = _t((1, 1, 128, D), (128 * D, 128 * D, D, 1))
    big = _t((16, 32, 65537, D), (32 * 65537 * D, 65537 * D, D, 1))     # last offset > 2^31
    assert dispatch._within_offsets(fa, small, small, small, None) is fa
    wide = dispatch.compiled_flash(cfg, wide=True)      # prefill_wide: 64-bit batch strides
    assert wide.wide and wide.kernel_name == fa.kernel_name + "_i64" and wide.report.holds
    assert dispatch._within_offsets(fa, small, small, small, big) is wide
    assert dispatch._within_offsets(fa, big, small, small, None) is wide
    assert dispatch._within_offsets(tpl, big, big, big, None) is tpl
    from kernels.nvidia import prefill_ir
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", False)
    assert dispatch._within_offsets(fa, small, small, small, big) is tpl
    assert dispatch._within_offsets(fa, big, small, small, None) is tpl


def test_ir_launch_fits_batch_times_heads_in_grid_y(monkeypatch):
    """Regression: the IR prefills launch (query blocks, batch x heads): at 65536 (batch x
    heads) the launcher refuses, so the dispatch must run the wide IR form or the template,
    which launch (blocks, heads, batch) (flash_attention raised LaunchError there for the
    dispatched IR kernel)."""
    from kernels.nvidia.flash_ir import IR_MAX_BATCH_HEADS, ir_launch_fits
    D = 64

    def t(B, H):
        return _t((B, H, 64, D), (H * 64 * D, 64 * D, D, 1))
    assert IR_MAX_BATCH_HEADS == 65535
    assert ir_launch_fits(t(4095, 16), t(4095, 16), t(4095, 16))
    assert ir_launch_fits(t(65535, 1), t(65535, 1), t(65535, 1))
    assert not ir_launch_fits(t(4096, 16), t(4096, 16), t(4096, 16))
    assert not ir_launch_fits(t(1, 65536), t(1, 1), t(1, 1))
    big = _t((16, 32, 65537, D), (32 * 65537 * D, 65537 * D, D, 1))
    assert not ir_launch_fits(t(1, 1), t(1, 1), t(1, 1), big)
    from kernels.nvidia import dispatch
    from kernels.nvidia.attention import FLASH_DEFAULTS, FlashAttention
    cfg = FlashConfig(dtype="f16", head_dim=64, **FLASH_DEFAULTS[64])
    fa = dispatch.compiled_flash(cfg)
    assert isinstance(fa, IrFlashAttention)
    wide = t(4096, 16)
    w = dispatch._within_offsets(fa, wide, wide, wide, None)
    assert isinstance(w, IrFlashAttention) and w.wide
    from kernels.nvidia import prefill_ir
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", False)
    assert type(dispatch._within_offsets(fa, wide, wide, wide, None)) is FlashAttention


def test_raw_exp_scores_take_no_row_guard():
    """The raw-score ExpScores subtracts the raw SoftmaxUpdate's guarded maximum: a row guard
    on top is a second mechanism for the same guard, refused where the statement is made."""
    from kernels.ir.attention import ExpScores
    from kernels.ir.core import Frag
    f = Frag("sc", "f32", 4)
    with pytest.raises(ValueError, match="no row_guard"):
        ExpScores(f, (0, 1), f, (0, 1), "mc", "l", "alpha", row_guard=True, raw=True)
    assert ExpScores(f, (0, 1), f, (0, 1), "mc", "l", "alpha", raw=True).raw
