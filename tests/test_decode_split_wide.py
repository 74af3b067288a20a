"""The split-KV decode's split kernel in the prefills' wide form (issue 20 item 1;
kernels.nvidia.decode_split_ir ``wide=True``, kernels.nvidia.decode_ir.WIDE_SPLIT_ON_IR):
batch / head strides ``long long``, verified at a launch past 2^31; a planted ``int`` stride
refused; with the switch on a call the 32-bit kernel cannot take runs it (proved at the
launch) instead of the template split kernel, on a pretend H100."""

from __future__ import annotations

import pytest

from kernels.ir.attention import ScalarParam
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.nvidia.decode_split_ir import build_decode_split_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify

CFG = MmaDecodeConfig(head_dim=128, hg=4, warps=4)


def test_the_wide_split_kernel_is_verified_past_2_31():
    k32 = build_decode_split_ir(CFG)
    k = build_decode_split_ir(CFG, wide=True)
    assert k.name == k32.name + "_i64" and "wide" not in k32.meta
    src = emit_cuda_attention(k)
    for t in "qkv":
        assert f"long long {t}_sb, long long {t}_sh" in src
    assert "int k_ss" in src and "long long" not in emit_cuda_attention(k32).split(k32.name)[1] \
        .split(")")[0]
    r = verify(k, arch="sm_90", source=src)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    assert "past-2^31" in r.checks["index_ranges"].domain


@pytest.mark.parametrize("stride", ["k_sb", "v_sh", "q_sb"])
def test_a_stride_printed_int_is_refused(stride):
    """Planted bug: one batch / head stride of the wide split kernel an ``int``: its product
    passes 2^31 at the past-2^31 instance and index_ranges refuses it."""
    k = build_decode_split_ir(CFG, wide=True)
    k.scalars = [ScalarParam(p.name) if p.name == stride else p for p in k.scalars]
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert failed == {"index_ranges"}, failed


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("on", [False, True, None], ids=["switch-off", "switch-on", "default"])
def test_a_cache_past_2_31_runs_the_wide_split_kernel(monkeypatch, on):
    """The dispatched one-launch decode handed K / V whose batches lie 2^31 + 128 elements
    apart: with WIDE_SPLIT_ON_IR the wide IR split kernel (i64 batch / head strides) and the IR
    combine, else the template split kernel and the IR combine; by default (``on`` None: the
    switch on since its H100 timing, 2026-11-25) the wide IR split kernel."""
    import _fake_cuda as fc
    from kernels.nvidia import decode_ir
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    fake = fc.install(monkeypatch)
    if on is None:
        on = decode_ir.WIDE_SPLIT_ON_IR
        assert on
    monkeypatch.setattr(decode_ir, "WIDE_SPLIT_ON_IR", on)
    try:
        dec = IrFusedMmaDecode(CFG)
        q = fc.FakeCudaTensor((2, 16, 1, 128), torch.bfloat16)
        kv = fc.FakeCudaTensor((2, 4, 1000, 128), torch.bfloat16,
                               (2 ** 31 + 128, 1000 * 128, 128, 1))
        dec(q, kv, kv, out=fc.FakeCudaTensor(q.shape, torch.float16))
        split, combine = fake.launches[-2:]
        assert combine.kernel == dec.combine_ir.name
        if on:
            assert split.kernel == dec.split_ir.name + "_i64"
            sig = fake.signatures[split.kernel]
            # batch, heads, kv_heads, group, seqlen_kv, kv_chunk, then q_sb q_sh k_sb k_sh
            # k_ss v_sb v_sh v_ss
            assert sig[5:11] == ("i32",) * 6
            assert sig[11:19] == ("i64", "i64", "i64", "i64", "i32", "i64", "i64", "i32")
            assert split.args[13] == 2 ** 31 + 128
        else:
            assert not split.kernel.startswith("lg_decode_split_ir")
    finally:
        fc.clear_caches()
