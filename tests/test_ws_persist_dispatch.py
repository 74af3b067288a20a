"""The persistent short causal d128 prefill through the dispatch
(kernels.nvidia.prefill_select.IR_WS_PERSIST_AT_PARITY / ws_prefill_on_ir,
kernels.nvidia.prefill_ir), on the CPU with a pretend H100 (``_fake_cuda``): as shipped the
verified IR kernel (IrWsPersistAttention) runs (measured at parity on an H100, and the reason
says so); with the rule emptied the template does; the IR kernel launches on
``min(units, SMs)`` CTAs and gives way to its configuration's template on tensors it cannot
launch."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
from kernels.nvidia import dispatch, prefill_select  # noqa: E402
from kernels.nvidia.prefill_ir import ir_prefill_launches, prefill_config  # noqa: E402
from kernels.nvidia.prefill_select import choose_prefill, prefill_on_ir, ws_prefill_on_ir  # noqa: E402,E501
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_persist_launch import IrWsPersistAttention  # noqa: E402

BF16 = torch.bfloat16
#: the persistent configuration the dispatch picks for causal problems up to 1024 rows
SHORT_CAUSAL = frozenset({(128, 3, True, False, 4)})


from _fake_cuda import fake_flash as fake  # noqa: E402,F401  (the fixture)


def T(shape, stride=None, ptr=None):
    return fc.FakeCudaTensor(shape, BF16, stride, ptr)


def _short():
    return choose_prefill("bf16", 128, True, "wgmma", True, 512, 512)


def test_as_shipped_the_short_causal_problem_runs_the_persistent_ir(fake):
    c = _short()
    assert c.config.persistent and c.config.unit_heads == 4
    assert prefill_select.IR_WS_PERSIST_AT_PARITY == SHORT_CAUSAL
    assert ws_prefill_on_ir(c.config) and prefill_on_ir(c.config)
    assert "verified IR kernel (kernels.nvidia.wgmma_ws_ir_persist," in c.reason, c.reason
    s = T((2, 8, 512, 128))
    dispatch.flash_attention(s, s, s, causal=True, out=T(s.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d128_128x128_s3_pp_causal_tma_pt_uh4"


def test_with_the_rule_emptied_the_template_runs_and_the_reason_says_why(fake, monkeypatch):
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", frozenset())
    c = _short()
    assert not ws_prefill_on_ir(c.config) and not prefill_on_ir(c.config)
    assert "the template" in c.reason and "no persistent IR form measured at parity" in c.reason
    s = T((2, 8, 512, 128))
    dispatch.flash_attention(s, s, s, causal=True, out=T(s.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_bf16_d128_128x128_s3_pp_causal_tma_pt_uh4"


def test_the_rule_reads_the_persistent_set(monkeypatch):
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", SHORT_CAUSAL)
    c = _short()
    assert ws_prefill_on_ir(c.config) and prefill_on_ir(c.config)
    assert "verified IR kernel (kernels.nvidia.wgmma_ws_ir_persist," in c.reason, c.reason
    # the one-block-per-unit set does not take persistent configurations, nor this set other
    # persistent ones
    monkeypatch.setattr(prefill_select, "IR_WS_PREFILL_AT_PARITY",
                        frozenset({(128, 3, True, False)}))
    for kw in (dict(unit_heads=2), dict(stages=2), dict(rescale_vote=True),
               dict(pingpong=False), dict(loader="cp.async")):
        assert not ws_prefill_on_ir(dataclasses.replace(c.config, **kw)), kw
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", frozenset())
    assert not ws_prefill_on_ir(c.config)


def test_the_rule_on_launches_the_persistent_ir_kernel_and_falls_back(fake, monkeypatch):
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", SHORT_CAUSAL)
    s = T((2, 8, 512, 128))
    dispatch.flash_attention(s, s, s, causal=True, out=T(s.shape))
    launch = fake.launches[-1]
    assert launch.kernel == "lg_wsflash_ir_bf16_d128_128x128_s3_pp_causal_tma_pt_uh4"
    assert launch.grid == (min(4 * 8 * 2, 132), 1, 1)        # units = query blocks x H x B
    fa = dispatch.compiled_flash(_short().config)
    assert type(fa) is IrWsPersistAttention and fa.report.holds
    assert prefill_config(fa) == fa.ws_cfg == _short().config
    big = T((16, 32, 1024, 128))                    # 4096 units: one CTA per SM
    dispatch.flash_attention(big, big, big, causal=True, out=T(big.shape))
    assert fake.launches[-1].grid == (132, 1, 1)
    # K / V broadcast over the heads (head stride 0): no tensor map addresses them
    q3, odd = T((1, 2, 300, 128)), T((1, 2, 300, 128), stride=(300 * 128, 0, 128, 1))
    tpl = dispatch.compiled_flash(fa.ws_cfg, template=True)
    assert type(tpl) is WsFlashAttention and tpl.cfg == fa.ws_cfg
    assert ir_prefill_launches(fa, s, s, s, None)
    assert not ir_prefill_launches(fa, q3, odd, odd, None)
    assert dispatch._within_offsets(fa, q3, odd, odd, None) is tpl


def test_the_persistent_ir_kernel_has_no_wide_form_so_big_tensors_run_its_template(
        fake, monkeypatch):
    """Regression (merge of the wide prefill form with the persistent IR): with both rules on,
    a call whose offsets pass 2^31 must not ask for a wide persistent kernel (none exists):
    the dispatch gives it the template, and ir_prefill refuses wide=True by name."""
    from kernels.errors import LaunchError
    from kernels.nvidia.prefill_ir import ir_prefill, wide_prefill_launches
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", SHORT_CAUSAL)
    fa = dispatch.compiled_flash(_short().config)
    assert type(fa) is IrWsPersistAttention
    # batches 2^31 + 8192 elements apart: the 32-bit IR cannot launch it
    huge = T((2, 8, 512, 128), stride=(2 ** 31 + 8192, 512 * 128, 128, 1))
    assert not ir_prefill_launches(fa, huge, huge, huge, None)
    assert not wide_prefill_launches(fa, huge, huge, huge)
    tpl = dispatch.compiled_flash(fa.ws_cfg, template=True)
    assert dispatch._within_offsets(fa, huge, huge, huge, None) is tpl
    with pytest.raises(LaunchError, match="no wide"):
        ir_prefill(fa.ws_cfg, wide=True)


def test_the_cp_async_ir_prefill_has_no_wide_form_either():
    """Regression (merge of the wide form with the cp.async IR prefill): ir_prefill refuses a
    wide cp.async kernel by name rather than building the 32-bit one under a wide key."""
    from kernels.errors import LaunchError
    from kernels.nvidia.prefill_ir import ir_prefill
    cp = choose_prefill("bf16", 256, False, "wgmma", True, 4096, 4096).config
    assert cp.loader == "cp.async"
    with pytest.raises(LaunchError, match="no wide"):
        ir_prefill(cp, wide=True)
