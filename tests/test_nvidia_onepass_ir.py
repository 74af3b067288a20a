"""The one-pass decode built as kernel IR (kernels/nvidia/decode_onepass_ir.py): verified with its
printed CUDA at every dtype pair, head_dim and a spread of steps; the printed arithmetic is the
template's (kernels/nvidia/attention.py emit_decode) operation for operation; the runtime class
falls back to the template past 2^31 offsets and binds once per argument key.  Planted bugs:
tests/test_mutation_catalogue_onepass_ir.py; the GPU comparison: test_nvidia_onepass_ir_gpu.py."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from kernels.nvidia.attention import AttentionConfigError, DecodeConfig, emit_decode
from kernels.nvidia.decode_onepass_ir import (build_onepass_ir, int_offsets_fit,
                                              onepass_ir_name)
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify


@pytest.mark.parametrize("ind,outd,D,chunk", [
    ("bf16", "f16", 128, 1), ("bf16", "f16", 128, 16), ("f16", "f16", 64, 8),
    ("f16", "bf16", 64, 2), ("bf16", "bf16", 256, 16), ("f16", "f16", 256, 4),
    ("bf16", "f16", 64, 32)])
def test_onepass_ir_verifies_with_its_text(ind, outd, D, chunk):
    cfg = DecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=D, chunk=chunk)
    k = build_onepass_ir(cfg)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    for n in ("printed_source", "declarations", "index_ranges", "coverage", "in_bounds",
              "cross_lane_reductions", "online_softmax", "masking_and_tile_skipping"):
        assert n in r.checks
    # the instances reach every edge the brief names: one key, ragged GQA, whole steps only,
    # strided tensors over several blocks, a partial last block of rows
    names = [i.split(":")[0] for i in r.details["instances"]]
    assert names == ["one-key-mqa", "ragged-gqa", "whole-steps", "strided-many-blocks"]


def test_onepass_ir_refuses_what_the_template_refuses():
    with pytest.raises(AttentionConfigError):
        build_onepass_ir(DecodeConfig(head_dim=96))
    with pytest.raises(AttentionConfigError):
        build_onepass_ir(DecodeConfig(chunk=3))


def test_printed_arithmetic_is_the_templates():
    """The dot product: fmaf from 0.f over the 8 elements low half first (the template's
    lg_unpack8 + fmaf loop); the mask scales the reduced dot (`d * scale_log2`); the xor
    shuffles 1, 2, .., G/2 in that order; the store packs o[0..7] as the template's r.x..r.w."""
    cfg = DecodeConfig(in_dtype="bf16", head_dim=128, chunk=4)
    src = emit_cuda_attention(build_onepass_ir(cfg))
    tpl = emit_decode(cfg)
    dot = src[src.index("LG_DEV float lg_dot8_bf16"):]
    dot = dot[:dot.index("}\n") + 2]
    fm = re.findall(r"d = fmaf\((lg_bf16_(?:lo|hi))\(a\[(\d)\]\), \1\(b\[\2\]\), d\);", dot)
    assert [(f, int(w)) for f, w in fm] == [(("lg_bf16_lo", "lg_bf16_hi")[e % 2], e // 2)
                                            for e in range(8)]
    assert "float d = 0.f;" in dot and "float d = 0.f;" in tpl
    assert "d = fmaf(q[e], kf[e], d);" in tpl
    assert [int(x) for x in re.findall(r"s_fr\[0\], (\d+)\);", src)][:4] == [1, 2, 4, 8]
    assert "? s_fr[0] * scale_log2 : LG_NEG_INF;" in src and "d * scale_log2" in tpl
    assert "lg_pack_f16x2(o_acc[0], o_acc[1]), lg_pack_f16x2(o_acc[2], o_acc[3])" in src


def test_only_the_last_step_predicates_its_loads():
    src = emit_cuda_attention(build_onepass_ir(DecodeConfig(chunk=8)))
    loops = src.split("for (int it = ")
    assert len(loops) == 3
    assert "lg_ldg16x8z" not in loops[1] and "lg_ldg16x8(&k_ld[0]" in loops[1]
    assert loops[2].count("lg_ldg16x8z(") == 16
    one = emit_cuda_attention(build_onepass_ir(DecodeConfig(chunk=1)))
    assert one.count("for (int it = ") == 1 and "lg_ldg16x8z(&" not in one


def test_name_and_sources_other_kernels_unchanged():
    """The one-pass forms print only into one-pass kernels: the split kernel's text has none
    of their helpers."""
    from kernels.nvidia.decode_mma import MmaDecodeConfig
    from kernels.nvidia.decode_split_ir import build_decode_split_ir
    split = emit_cuda_attention(build_decode_split_ir(MmaDecodeConfig(head_dim=64, hg=4)))
    for fn in ("lg_dot8", "lg_axpy8", "lg_ldg16x8z", "lg_st_u32x4"):
        assert fn not in split
    assert onepass_ir_name(DecodeConfig()) == "lg_decode_ir_bf16_f16_d128_c16_w8"


class _T:
    def __init__(self, shape, stride):
        self.shape, self._s = shape, stride

    def stride(self, i=None):
        return self._s if i is None else self._s[i]


def test_int_offsets_fit_at_the_boundary():
    ok = _T((1, 1, 2 ** 31 // 128, 128), (2 ** 31 - 8, 2 ** 31 - 8, 128, 1))
    assert int_offsets_fit(ok)
    past = _T((1, 1, 2 ** 31 // 128 + 1, 128), (0, 0, 128, 1))
    assert not int_offsets_fit(past)
    # regression: a stride of 2^31 on a dimension of extent 1 adds no offset, but it is an
    # int argument (the launch refused it: "does not fit a i32 parameter")
    assert not int_offsets_fit(_T((1, 2, 8, 128), (2 ** 31, 2 ** 10, 128, 1)))


def test_launches_bind_once_and_fall_back_past_int_offsets(monkeypatch):
    """On a pretend H100 (tests/_fake_cuda.py, nothing compiled): a call launches the IR
    kernel with the int arguments; a second call with the same argument keys launches again
    without binding again; a cache whose offsets reach 2^31 launches the template (its long
    long strides) with WIDE_FALLBACK_ON_IR off."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia import decode_onepass_ir as op
    from kernels.nvidia.decode_onepass_ir import IrOnePassDecode
    fake = fc.install(monkeypatch)
    monkeypatch.setattr(op, "WIDE_FALLBACK_ON_IR", False)
    try:
        bf, D = torch.bfloat16, 128
        dec = IrOnePassDecode(DecodeConfig(head_dim=D, chunk=8))
        q, k = fc.FakeCudaTensor((2, 8, 1, D), bf), fc.FakeCudaTensor((2, 2, 8, D), bf)
        out = fc.FakeCudaTensor((2, 8, 1, D), torch.float16)
        binds = []
        real_bind = dec.bind
        monkeypatch.setattr(dec, "bind", lambda *a: binds.append(1) or real_bind(*a))
        dec(q, k, k, out=out)
        dec(q, k, k, out=out)
        names = [L.kernel for L in fake.launches]
        assert names == ["lg_decode_ir_bf16_f16_d128_c8_w8"] * 2 and len(binds) == 1
        big = fc.FakeCudaTensor((1, 2, 8, D), bf, stride=(2 ** 31, 2 ** 30, D, 1))
        dec(fc.FakeCudaTensor((1, 8, 1, D), bf), big, big,
            out=fc.FakeCudaTensor((1, 8, 1, D), torch.float16))
        assert fake.launches[-1].kernel.startswith("lg_decode_bf16_f16_d128_c8_w8")
    finally:
        fc.clear_caches()


@given(st.data())
@settings(max_examples=25, deadline=None)
def test_onepass_ir_verifies_at_any_launch(data):
    """Any (batch, heads, GQA group, seqlen_kv, layout) launch of a configuration: the verifier
    (IR and printed text) holds on it - not only on the spec's four instances."""
    from kernels.nvidia.decode_onepass_ir import onepass_instance
    D = data.draw(st.sampled_from([64, 128, 256]), "D")
    chunk = data.draw(st.sampled_from([1, 2, 4, 8, 16]), "chunk")
    hk = data.draw(st.integers(1, 3), "kv heads")
    group = data.draw(st.integers(1, 5), "group")
    B = data.draw(st.integers(1, 3), "batch")
    skv = data.draw(st.integers(1, 3 * chunk + 2), "seqlen_kv")
    layout = data.draw(st.sampled_from(["bhsd", "strided"]), "layout")
    cfg = DecodeConfig(head_dim=D, chunk=chunk)
    k = build_onepass_ir(cfg)
    inst = onepass_instance(cfg, "drawn", B, hk * group, hk, skv, layout=layout)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k), instances=[inst])
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad


@pytest.mark.parametrize("D,chunk", [(128, 8), (64, 1), (256, 16)])
def test_wide_form_verifies_past_2_31(D, chunk):
    """The wide form (long long strides) verifies, text included, on the four launches and one
    whose batches lie 2^31 to 2^32 elements apart (index_ranges proves its 64-bit offsets)."""
    k = build_onepass_ir(DecodeConfig(head_dim=D, chunk=chunk), wide=True)
    src = emit_cuda_attention(k)
    assert "long long k_sb" in src and k.name.endswith("_i64")
    r = verify(k, arch="sm_90", source=src)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    assert "offsets-past-2^31" in r.checks["index_ranges"].domain


def test_wide_fallback_launches_the_wide_ir_form(monkeypatch):
    """By default (WIDE_FALLBACK_ON_IR on since its H100 run, 2026-11-25), a cache whose
    offsets reach 2^31 launches the wide IR form with 64-bit stride arguments, not the template
    (pretend H100, nothing compiled)."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia import decode_onepass_ir as op
    fake = fc.install(monkeypatch)
    assert op.WIDE_FALLBACK_ON_IR
    try:
        bf, D = torch.bfloat16, 128
        dec = op.IrOnePassDecode(DecodeConfig(head_dim=D, chunk=8))
        big = fc.FakeCudaTensor((2, 2, 8, D), bf, stride=(2 ** 31 + 128, 8 * D, D, 1))
        dec(fc.FakeCudaTensor((2, 8, 1, D), bf), big, big,
            out=fc.FakeCudaTensor((2, 8, 1, D), torch.float16))
        assert fake.launches[-1].kernel == "lg_decode_ir_bf16_f16_d128_c8_w8_i64"
        sig = fake.signatures["lg_decode_ir_bf16_f16_d128_c8_w8_i64"]
        assert sig[4:8] == ("i32",) * 4 and sig[8:18] == ("i64",) * 10
    finally:
        fc.clear_caches()
