"""The warp-specialised cp.async prefill on its verified IR kernel through the dispatch
(kernels.nvidia.prefill_select.IR_WS_CP_PREFILL_AT_PARITY / ws_prefill_on_ir,
kernels.nvidia.prefill_ir: IrWsCpAttention), on the CPU with a pretend H100 (``_fake_cuda``):
as shipped the set holds the d256 tile's two keys (measured at parity on an H100) and not the
d128 fallback's (0.96-0.97x), so d256 launches the IR kernel (TMA-addressable or not: the
producer copies through pointers and strides) and the d128 fallback its template; with the
d128 keys added it launches its IR kernel too; the IR kernel gives way to its configuration's
template where it cannot launch (offsets past 2^31, batch x heads past grid y)."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
from kernels.nvidia import dispatch, prefill_select  # noqa: E402
from kernels.nvidia.prefill_ir import ir_prefill_launches, prefill_config  # noqa: E402
from kernels.nvidia.prefill_select import choose_prefill, ws_prefill_on_ir  # noqa: E402
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_cp_launch import IrWsCpAttention  # noqa: E402

BF16 = torch.bfloat16
#: the d128 fallback's (head_dim, bn, stages, causal, defer_pv_wait), both masks
D128 = frozenset({(128, 128, 2, False, False), (128, 128, 2, True, False)})
#: the d256 tile's (WS_PREFILL_TILES[256]: the P V wait deferred), both masks
D256 = frozenset({(256, 64, 2, False, True), (256, 64, 2, True, True)})


@pytest.fixture
def rule_on(monkeypatch):
    monkeypatch.setattr(prefill_select, "IR_WS_CP_PREFILL_AT_PARITY", D128 | D256)


from _fake_cuda import fake_flash as fake  # noqa: E402,F401  (the fixture)


def T(shape, stride=None, ptr=None):
    return fc.FakeCudaTensor(shape, BF16, stride, ptr)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tma_ok", [True, False])
def test_the_rule_reads_the_measured_set(monkeypatch, causal, tma_ok):
    """As shipped and with each tile's keys in the set: on IR exactly where the set holds the
    configuration's key; the reason names the kernel."""
    cfg = choose_prefill("bf16", 256, causal, "wgmma", tma_ok, 4096, 4096).config
    fb = choose_prefill("bf16", 128, causal, "wgmma", False, 8192, 8192).config
    assert cfg.loader == fb.loader == "cp.async" and (fb.bn, fb.stages) == (128, 2)
    assert prefill_select.IR_WS_CP_PREFILL_AT_PARITY == D256       # as shipped
    for parity in (prefill_select.IR_WS_CP_PREFILL_AT_PARITY, frozenset(), D128, D128 | D256):
        monkeypatch.setattr(prefill_select, "IR_WS_CP_PREFILL_AT_PARITY", parity)
        for c, keys in ((cfg, D256), (fb, D128)):
            want = bool(keys & parity)
            assert ws_prefill_on_ir(c) == want == prefill_select.prefill_on_ir(c)
            why = choose_prefill("bf16", c.head_dim, causal, "wgmma",
                                 tma_ok if c is cfg else False, 8192, 8192).reason
            assert ("verified IR kernel" if want else "the template") in why, why


def test_other_cp_async_configurations_stay_on_the_template(rule_on):
    d256 = choose_prefill("bf16", 256, False, "wgmma", True, 4096, 4096).config
    assert ws_prefill_on_ir(d256)
    for kw in (dict(pingpong=False), dict(stages=3), dict(bn=128), dict(defer_pv_wait=False),
               dict(rescale_vote=True), dict(v_behind_k=True)):
        assert not ws_prefill_on_ir(dataclasses.replace(d256, **kw)), kw


def test_the_shipped_rule_launches_the_d256_ir_and_the_d128_template(fake):
    q = T((2, 4, 300, 256))
    dispatch.flash_attention(q, q, q, out=T(q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d256_128x64_s2_pp_dw"
    dispatch.flash_attention(q, q, q, causal=True, out=T(q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d256_128x64_s2_pp_causal_dw"
    q128 = T((1, 2, 300, 128))
    kv = T((1, 2, 300, 128), stride=(300 * 128, 0, 128, 1))    # no tensor map: cp.async
    dispatch.flash_attention(q128, kv, kv, out=T(q128.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_bf16_d128_128x128_s2_pp"


def test_flash_attention_launches_the_d256_ir_kernel_and_falls_back(fake, rule_on):
    """The d256 problem launches the IR kernel (verified, compiled by NVRTC), also with K / V
    broadcast over the heads; offsets past 2^31 and batch x heads past grid y give way to the
    configuration's template."""
    q = T((2, 4, 300, 256))
    dispatch.flash_attention(q, q, q, out=T(q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d256_128x64_s2_pp_dw"
    cfg = choose_prefill("bf16", 256, False, "wgmma", True, 300, 300).config
    fa = dispatch.compiled_flash(cfg)
    assert type(fa) is IrWsCpAttention and fa.report.holds and fa.ws_cfg == cfg
    assert prefill_config(fa) == cfg
    odd = T((2, 4, 300, 256), stride=(300 * 256, 0, 256, 1))     # one K / V head, broadcast
    n = len(fake.launches)
    dispatch.flash_attention(q, odd, odd, out=T(q.shape))
    assert len(fake.launches) == n + 1
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d256_128x64_s2_pp_dw"
    assert ir_prefill_launches(fa, q, odd, odd, None)
    tpl = dispatch.compiled_flash(cfg, template=True)
    assert type(tpl) is WsFlashAttention and tpl.cfg == cfg
    big = T((8, 16, 65537, 256))     # 2^31 + 2^21 elements
    assert not ir_prefill_launches(fa, big, big, big, None)
    assert dispatch._within_offsets(fa, big, big, big, None) is tpl
    wide = T((4096, 17, 64, 256))
    assert dispatch._within_offsets(fa, wide, wide, wide, None) is tpl


def test_the_d128_fallback_launches_the_ir_kernel_with_the_rule_on(fake, monkeypatch):
    odd_q = T((1, 2, 300, 128))
    odd = T((1, 2, 300, 128), stride=(300 * 128, 0, 128, 1))
    dispatch.flash_attention(odd_q, odd, odd, out=T(odd_q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_bf16_d128_128x128_s2_pp"     # as shipped
    monkeypatch.setattr(prefill_select, "IR_WS_CP_PREFILL_AT_PARITY", D128)
    monkeypatch.setattr(dispatch, "_FLASH", {})
    fc.clear_caches()
    dispatch.flash_attention(odd_q, odd, odd, causal=True, out=T(odd_q.shape))
    assert fake.launches[-1].kernel == "lg_wsflash_ir_bf16_d128_128x128_s2_pp_causal"
