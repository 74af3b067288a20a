"""The warp-specialised d128 prefill on its verified IR kernel through the dispatch
(kernels.nvidia.prefill_select.ws_prefill_on_ir, kernels.nvidia.prefill_ir, issue 20 item 1),
on the CPU with a pretend H100 (``_fake_cuda``): which kernel each problem launches with the
shipped rule and with the rule on for every configuration the IR builds, and the fallbacks to
the template (persistent short causal problems, tensors TMA cannot address) and to the wide IR
form (offsets past 2^31, batch x heads past grid y)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
from kernels.nvidia import dispatch, prefill_ir, prefill_select  # noqa: E402
from kernels.nvidia.prefill_ir import ir_prefill_launches, prefill_config  # noqa: E402
from kernels.nvidia.prefill_select import choose_prefill, ws_prefill_on_ir  # noqa: E402
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention, WsFlashConfig  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention  # noqa: E402

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow

BF16 = torch.bfloat16
#: every (bn, stages, causal, defer_pv_wait) the dispatch picks without persistence
ALL = frozenset({(192, 2, False, False), (128, 2, True, True), (128, 3, False, False)})


from _fake_cuda import fake_flash as fake  # noqa: E402,F401  (the fixture)


def T(shape, stride=None, ptr=None):
    return fc.FakeCudaTensor(shape, BF16, stride, ptr)


def _key(cfg):
    return (cfg.bn, cfg.stages, bool(cfg.causal), bool(cfg.defer_pv_wait))


@pytest.mark.parametrize("causal,seq,seq_kv,tma_ok", [
    (False, 8192, 8192, True), (True, 8192, 8192, True), (False, 4097, 4097, True),
    (False, 512, 512, True), (True, 512, 512, True), (True, 1500, 1500, True),
    (False, 8192, 8192, False)])
def test_the_rule_reads_the_measured_set(monkeypatch, causal, seq, seq_kv, tma_ok):
    """As shipped and with every configuration in the set: on IR exactly where the set holds
    the configuration and it is a one-block-per-unit TMA one, or where the persistent set
    (IR_WS_PERSIST_AT_PARITY, tests/test_ws_persist_dispatch.py) holds a persistent one; the
    reason names the kernel."""
    persist = prefill_select.IR_WS_PERSIST_AT_PARITY
    for parity in (prefill_select.IR_WS_PREFILL_AT_PARITY, ALL):
        monkeypatch.setattr(prefill_select, "IR_WS_PREFILL_AT_PARITY", parity)
        c = choose_prefill("bf16", 128, causal, "wgmma", tma_ok, seq, seq_kv)
        want = tma_ok and ((_key(c.config) in parity and not c.config.persistent) or
                           (c.config.persistent and
                            (*_key(c.config), c.config.unit_heads) in persist))
        assert ws_prefill_on_ir(c.config) == want == prefill_select.prefill_on_ir(c.config)
        assert ("verified IR kernel" if want else "the template") in c.reason, c.reason
        if parity is ALL:     # what the one-block rule can never take: the persistent one
            assert want == (tma_ok and (not (causal and seq <= 1024) or bool(persist)))


def test_other_configurations_stay_on_the_template(monkeypatch):
    monkeypatch.setattr(prefill_select, "IR_WS_PREFILL_AT_PARITY", ALL)
    # the one-block set never takes a persistent configuration (its own set emptied here)
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", frozenset())
    base = WsFlashConfig(dtype="bf16", head_dim=128, loader="tma", pingpong=True, bn=192,
                         stages=2)
    assert ws_prefill_on_ir(base)
    for kw in (dict(pingpong=False), dict(loader="cp.async"), dict(stages=3),
               dict(persistent=True, unit_heads=4, causal=True, bn=128, stages=3),
               dict(rescale_vote=True)):
        import dataclasses
        assert not ws_prefill_on_ir(dataclasses.replace(base, **kw)), kw
    assert not ws_prefill_on_ir(SimpleNamespace(bn=192, stages=2, causal=False,
                                                defer_pv_wait=False))


def test_flash_attention_launches_the_ir_kernel_and_falls_back(fake, monkeypatch):
    """With the rule on: the 192-key problem launches the IR kernel (verified, compiled by
    NVRTC, its maps encoded); the short causal one the persistent template where the
    persistent set does not hold it (emptied here; tests/test_ws_persist_dispatch.py has it
    on); tensors TMA cannot
    address the cp.async template; an IR kernel handed tensors it cannot launch gives way to
    its configuration's template."""
    monkeypatch.setattr(prefill_select, "IR_WS_PREFILL_AT_PARITY", ALL)
    monkeypatch.setattr(prefill_select, "IR_WS_PERSIST_AT_PARITY", frozenset())
    q = T((2, 8, 2048, 128))
    dispatch.flash_attention(q, q, q, out=T(q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d128_128x192_s2_pp_tma"
    fa = dispatch.compiled_flash(choose_prefill("bf16", 128, False, "wgmma", True, 2048,
                                                2048).config)
    assert type(fa) is IrWsAttention and fa.report.holds
    assert prefill_config(fa) == fa.ws_cfg and type(fa.cfg) is not WsFlashConfig
    s = T((2, 8, 512, 128))
    dispatch.flash_attention(s, s, s, causal=True, out=T(s.shape))
    assert fake.launches[-1].kernel.startswith("lg_wsflash_bf16_d128_128x128_s3_pp_causal_tma_pt")
    # K / V broadcast over the heads (head stride 0): no tensor map addresses them
    q3, odd = T((1, 2, 300, 128)), T((1, 2, 300, 128), stride=(300 * 128, 0, 128, 1))
    dispatch.flash_attention(q3, odd, odd, out=T(q3.shape))
    assert "_tma" not in fake.launches[-1].kernel and "_ir_" not in fake.launches[-1].kernel
    # the IR kernel itself on those tensors, offsets past 2^31, batch x heads past grid y
    tpl = dispatch.compiled_flash(fa.ws_cfg, template=True)
    assert type(tpl) is WsFlashAttention and tpl.cfg == fa.ws_cfg
    assert ir_prefill_launches(fa, q, q, q, None)
    assert not ir_prefill_launches(fa, q3, odd, odd, None)
    assert dispatch._within_offsets(fa, q, q, q, None) is fa
    assert dispatch._within_offsets(fa, q3, odd, odd, None) is tpl
    # offsets past 2^31, batch x heads past grid y: the wide IR form (the template with
    # WIDE_PREFILL_ON_IR off); tensors TMA cannot address stay on the template either way
    wide_fa = dispatch.compiled_flash(fa.ws_cfg, wide=True)
    assert wide_fa.wide and wide_fa.kernel_name == fa.kernel_name + "_i64"
    big = T((16, 32, 65537, 128))
    assert dispatch._within_offsets(fa, big, big, big, None) is wide_fa
    wide = T((4096, 17, 64, 128))
    assert dispatch._within_offsets(fa, wide, wide, wide, None) is wide_fa
    assert dispatch._within_offsets(wide_fa, q3, odd, odd, None) is tpl
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", False)
    assert dispatch._within_offsets(fa, big, big, big, None) is tpl
    assert dispatch._within_offsets(fa, wide, wide, wide, None) is tpl


def test_the_shipped_rule_launches_the_kernel_it_names(fake):
    """As shipped: the IR kernel where the measured set holds the configuration, else its
    template."""
    q = T((2, 8, 2048, 128))
    dispatch.flash_attention(q, q, q, out=T(q.shape))
    c = choose_prefill("bf16", 128, False, "wgmma", True, 2048, 2048).config
    on = ws_prefill_on_ir(c)
    assert fake.launches[-1].kernel == ("lg_wsflash_ir_" if on else "lg_wsflash_") + \
        "bf16_d128_128x192_s2_pp_tma"
