"""Which decode kernel ``decode_attention()`` runs, and that its reason says so (issue 20 item
1): every tensor-core configuration the dispatch makes, odd heads per block (MHA, GQA 3/5/7)
included, is one the verified IR kernels are built for; short caches run the IR kernel with
one split where it measured faster than the one-pass template (Skv 17-64, d64/d128, few
blocks) and the one-pass kernel elsewhere - built as IR and verified
(kernels/nvidia/decode_onepass_ir.py) while dispatch.ONE_PASS_IR holds, else the template - and
the reason names which."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernels.nvidia.decode_ir import ir_split_supported  # noqa: E402
from kernels.nvidia.decode_mma import MmaDecodeConfig  # noqa: E402
from kernels.nvidia.dispatch import SHORT_IR_KEYS, SHORT_KV, choose_decode  # noqa: E402


def _qk(B, Hq, Hkv, S, D):
    q = torch.empty(B, Hq, 1, D, dtype=torch.bfloat16)
    k = torch.empty(B, Hkv, 1, D, dtype=torch.bfloat16).expand(B, Hkv, S, D)
    return q, k


@pytest.mark.parametrize("shape,hg", [((8, 32, 32, 4096, 128), 1), ((4, 40, 8, 8192, 128), 5),
                                      ((8, 24, 8, 8192, 64), 3), ((2, 56, 8, 16384, 256), 7),
                                      ((4, 40, 8, 4096, 256), 5), ((4, 16, 16, 4096, 256), 1),
                                      ((64, 32, 8, 8192, 128), 4)])
def test_every_long_cache_runs_the_verified_ir(shape, hg):
    c = choose_decode(*_qk(*shape))
    assert c.kind == "split_kv" and isinstance(c.config, MmaDecodeConfig)
    assert c.config.hg == hg and ir_split_supported(c.config)
    assert "IrFusedMmaDecode" in c.reason and "verified" in c.reason


@pytest.mark.parametrize("shape", [(1, 32, 8, 17, 64), (8, 32, 8, 64, 128), (32, 32, 8, 40, 128),
                                   (8, 32, 32, 17, 64), (1, 32, 32, 64, 128)])
def test_short_caches_measured_faster_on_the_ir_run_it(shape):
    c = choose_decode(*_qk(*shape))
    assert c.kind == "split_kv" and ir_split_supported(c.config), str(c)
    assert c.config.warps == 4 and "verified" in c.reason


@pytest.mark.parametrize("shape", [(8, 32, 8, 1, 128), (8, 32, 8, SHORT_IR_KEYS - 1, 64),
                                   (32, 32, 32, 64, 128), (30720, 32, 32, 16, 128),
                                   (8, 32, 8, 64, 256), (256, 32, 32, 16, 128)])
def test_short_caches_measured_slower_on_the_tensor_core_ir_run_the_one_pass_ir(shape):
    c = choose_decode(*_qk(*shape))
    assert c.kind == "one_pass" and c.config is None
    assert "IrOnePassDecode" in c.reason and "verified" in c.reason and "TEMPLATE" not in c.reason


def test_one_pass_ir_switched_off_names_the_template(monkeypatch):
    from kernels.nvidia import dispatch
    monkeypatch.setattr(dispatch, "ONE_PASS_IR", False)
    c = choose_decode(*_qk(8, 32, 8, 1, 128))
    assert c.kind == "one_pass" and "TEMPLATE" in c.reason and "not verified" in c.reason


def test_the_short_cache_bounds():
    assert choose_decode(*_qk(8, 32, 8, SHORT_KV, 128)).kind == "split_kv"
    assert choose_decode(*_qk(8, 32, 8, SHORT_IR_KEYS, 128)).kind == "split_kv"
    assert choose_decode(*_qk(8, 32, 8, SHORT_IR_KEYS - 1, 128)).kind == "one_pass"


def test_decode_attention_launches_what_choose_decode_names(monkeypatch):
    """Through decode_attention on a pretend H100 (tests/_fake_cuda.py, nothing compiled): an
    odd group (hg 3) and a 48-key cache each launch the one-launch IR kernel, once; a 10-key
    cache launches the one-pass IR kernel."""
    import _fake_cuda as fc
    from kernels.nvidia import dispatch
    fake = fc.install(monkeypatch)
    try:
        bf = torch.bfloat16
        for (B, Hq, Hkv, S, D), want in (((2, 24, 8, 3000, 64), "lg_decode_fused_ir_bf16_d64_g3"),
                                         ((1, 8, 2, 48, 128), "lg_decode_fused_ir_bf16_d128_g4"),
                                         ((1, 8, 2, 10, 128), "lg_decode_ir_bf16_f16_d128")):
            n = len(fake.launches)
            q, k = fc.FakeCudaTensor((B, Hq, 1, D), bf), fc.FakeCudaTensor((B, Hkv, S, D), bf)
            dispatch.decode_attention(q, k, k, out=fc.FakeCudaTensor((B, Hq, 1, D),
                                                                     torch.float16))
            names = [L.kernel for L in fake.launches[n:]]
            assert len(names) == 1 and names[0].startswith(want), names
    finally:
        fc.clear_caches()


@pytest.mark.parametrize("shape,hg,warps", [((2, 32, 8, 4096, 32), 4, 4),
                                            ((2, 32, 8, 4096, 80), 4, 4),
                                            ((4, 40, 8, 8192, 96), 5, 4),
                                            ((2, 56, 8, 16384, 160), 7, 4),
                                            ((8, 32, 32, 20, 80), 1, 4),
                                            ((1, 8, 8, 1, 48), 1, 4),
                                            ((64, 32, 8, 8192, 112), 4, 8)])
def test_padded_head_dims_run_the_verified_ir_at_every_cache_length(shape, hg, warps):
    """Head dims other than 64/128/256 (multiples of 16): the IR kernel over padded widths
    for every cache length (no template decode kernel takes them, the one-pass one neither),
    warps by the rule of the policy head dim (112 -> 128's: 8 warps with 512 blocks)."""
    c = choose_decode(*_qk(*shape))
    D = shape[-1]
    assert c.kind == "split_kv" and isinstance(c.config, MmaDecodeConfig), str(c)
    assert c.config.head_dim == D and c.config.hg == hg and c.config.warps == warps, str(c)
    assert ir_split_supported(c.config)
    assert "IrFusedMmaDecode" in c.reason and "verified" in c.reason
    assert f"head_dim {D}" in c.reason and "TEMPLATE" not in c.reason


@pytest.mark.parametrize("D", [32, 80, 96, 160])
def test_the_padded_rule_switched_off_refuses_by_name(D, monkeypatch):
    """The one switch the lead turns off if a GPU run disagrees: these head dims are then
    refused by choose_decode, naming the switch (no template decode kernel takes them:
    before this rule choose_decode named the FMA split template, which refused them when
    built)."""
    import kernels.nvidia.decode_padded as dp
    from kernels.errors import LaunchError
    monkeypatch.setattr(dp, "PADDED_HEAD_DIMS_ON_IR", False)
    for skv in (4096, 20):
        with pytest.raises(LaunchError, match=f"head_dim {D}: .*PADDED_HEAD_DIMS_ON_IR, is "
                                              "switched off"):
            choose_decode(*_qk(2, 32, 8, skv, D))


@pytest.mark.parametrize("D", [8, 40, 72, 264, 320])
def test_head_dims_no_kernel_takes_are_refused_by_choose_decode(D):
    """Regression: choose_decode used to name the FMA split template for every other head_dim
    (and decode_attention then failed inside its build); now a LaunchError says which are
    taken, and the IR is never dispatched for them."""
    from kernels.errors import LaunchError
    from kernels.nvidia.decode_padded import padded_decode_on_ir
    assert not padded_decode_on_ir(D)
    with pytest.raises(LaunchError, match="take 64, 128 and 256, and on the verified IR kernel "
                                          "every other multiple of 16 from 16 to 256$"):
        choose_decode(*_qk(2, 32, 8, 4096, D))
