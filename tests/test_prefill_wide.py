"""The wide (64-bit) form of the IR prefills (kernels.nvidia.prefill_wide, issue 20 item 1):
``long long`` strides and the (query blocks, heads, batch) grid, verified at launches whose
offsets pass 2^31; a planted ``int`` stride refused; each launch proved at its own values; the
dispatch runs it (switch on) where the 32-bit form cannot launch, on a pretend H100."""

from __future__ import annotations

import pytest

from kernels.errors import LaunchError
from kernels.ir.attention import ScalarParam
from kernels.nvidia.attention import FlashConfig
from kernels.nvidia.flash_ir import build_flash_ir
from kernels.nvidia.prefill_wide import (WIDE_GRID, past_2_31_instances, prove_launch,
                                         widen_prefill)
from kernels.nvidia.wgmma_attention import WgmmaFlashConfig
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia.wgmma_flash_ir import build_wgmma_flash_ir
from kernels.nvidia.wgmma_ws_ir import build_ws_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_static import grid_blocks
from kernels.verify.verifier import verify

WS = dict(head_dim=128, pingpong=True, loader="tma", dtype="bf16")
BUILDS = {
    "mma-d64": lambda: build_flash_ir(FlashConfig(head_dim=64)),
    "mma-d128-causal": lambda: build_flash_ir(FlashConfig(head_dim=128, causal=True)),
    "wgmma-d64-causal": lambda: build_wgmma_flash_ir(
        WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=True)),
    "ws-d128-s3": lambda: build_ws_ir(WsFlashConfig(stages=3, **WS)),
}


@pytest.mark.parametrize("which", sorted(BUILDS))
def test_the_wide_form_is_verified_past_2_31(which):
    """Every check passes on the 32-bit form's instances (3-D grid) and two launches past
    2^31; the printed source takes long long strides and binds h / bat to blockIdx.y / z; the
    32-bit build is left as it was."""
    k32 = BUILDS[which]()
    src32 = emit_cuda_attention(k32)
    k = widen_prefill(k32)
    assert emit_cuda_attention(k32) == src32 and k32.grid_symbols == ("block_q", "block_bh")
    assert k.name == k32.name + "_i64" and k.grid_symbols == WIDE_GRID and k.meta["wide"]
    src = emit_cuda_attention(k)
    for t in ("q", "k", "v", "o"):
        assert f"long long {t}_sb, long long {t}_sh, int {t}_ss" in src
    assert "int seqlen_q" in src and "const int h = blockIdx.y;" in src
    assert "const int bat = blockIdx.z;" in src and "block_bh" not in src
    names = [i.name for i in k.spec.domain.instances(k)]
    assert names[-2:] == ["batch-past-2^31", "head-past-2^31"]
    r = verify(k, arch="sm_90", source=src)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    assert "batch-past-2^31" in r.checks["index_ranges"].domain


@pytest.mark.parametrize("stride", ["k_sh", "o_sb", "q_sh"])
def test_a_stride_printed_int_is_refused(stride):
    """Planted bug: the wide form with one batch or head stride an ``int`` argument: its
    product with the batch or head index passes 2^31 at an instance, and index_ranges refuses
    it."""
    k = widen_prefill(build_flash_ir(FlashConfig(head_dim=64)))
    k.scalars = [ScalarParam(p.name) if p.name == stride else p for p in k.scalars]
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert failed == {"index_ranges"}, failed
    assert f"* {stride})" in str(r.checks["index_ranges"].counterexample)


def test_the_past_2_31_instances_pass_2_31_and_do_not_alias():
    """Each instance's tensors reach past 2^31 and no two elements of one tensor share an
    offset (distinct (row, d, head, batch) -> distinct offsets)."""
    import itertools
    c = FlashConfig(head_dim=64)
    for inst in past_2_31_instances(c):
        v = inst.values
        assert inst.grid == (-(-v["seqlen_q"] // c.bm), v["heads"], v["batch"])
        top = 0
        for t, rows, heads in (("q", "seqlen_q", "heads"), ("k", "seqlen_kv", "kv_heads"),
                               ("v", "seqlen_kv", "kv_heads"), ("o", "seqlen_q", "heads")):
            ext = (v[rows], 64, v[heads], v["batch"])
            st = (v[f"{t}_ss"], 1, v[f"{t}_sh"], v[f"{t}_sb"])
            offs = {sum(i * s for i, s in zip(ix, st))
                    for ix in itertools.product(*(range(n) for n in ext))}
            assert len(offs) == ext[0] * ext[1] * ext[2] * ext[3], (inst.name, t)
            top = max(top, max(offs))
        assert top >= 2 ** 31, inst.name


def test_widen_refuses_what_is_not_a_32_bit_prefill():
    k = widen_prefill(build_flash_ir(FlashConfig(head_dim=64)))
    with pytest.raises(ValueError, match="not a 32-bit prefill"):
        widen_prefill(k)


def test_grid_blocks_three_axes():
    assert grid_blocks((2, 1, 1)) == [(0, 0), (1, 0)]
    assert grid_blocks((1, 2, 2), 3) == [(0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)]
    from kernels.errors import KernelError
    with pytest.raises(KernelError, match="z extent"):
        grid_blocks((1, 1, 2), 2)


def test_each_launch_is_proved_at_its_own_values():
    """prove_launch: B2048 H40 S64 (past grid y) and batch strides past 2^32 pass; a sequence
    so long that the key-block count's int arithmetic overflows is refused, and so is a row
    stride whose product with the last row passes 2^31 (one batch past 2^31 elements)."""
    k = widen_prefill(build_flash_ir(FlashConfig(head_dim=64)))
    src = emit_cuda_attention(k)
    D, S, H, B = 64, 64, 40, 2048
    vals = dict(seqlen_q=S, seqlen_kv=S, heads=H, group=1)
    for t in "qkvo":
        vals.update({f"{t}_sb": H * S * D, f"{t}_sh": S * D, f"{t}_ss": D})
    prove_launch(k, src, vals, (1, H, B))
    prove_launch(k, src, dict(vals, q_sb=2 ** 33, k_sb=2 ** 34, o_sb=2 ** 35), (1, H, 2))
    huge = 2 ** 31 - 1
    with pytest.raises(LaunchError, match="does not fit this launch"):
        prove_launch(k, src, dict(vals, seqlen_q=huge, seqlen_kv=huge), (huge // 128 + 1, 1, 1))
    with pytest.raises(LaunchError, match="k_ss"):
        prove_launch(k, src, dict(vals, k_ss=2 ** 26), (1, H, 2))


# ---------------------------------------------------------------------------- dispatch

torch = pytest.importorskip("torch")


@pytest.fixture
def fake(monkeypatch):
    import _fake_cuda as fc
    from kernels.nvidia import dispatch
    f = fc.install(monkeypatch)
    fc.install_tma_encoder(monkeypatch)
    monkeypatch.setattr(dispatch, "_FLASH", {})
    yield f
    fc.clear_caches()


def _t(shape, stride=None, dtype=None):
    import _fake_cuda as fc
    return fc.FakeCudaTensor(shape, dtype or torch.float16, stride)


@pytest.mark.parametrize("on", [False, True], ids=["switch-off", "switch-on"])
def test_dispatch_runs_the_wide_ir_where_the_32_bit_form_cannot(fake, monkeypatch, on):
    """The d64 wgmma prefill (what flash_attention runs on an H100): a batch stride past 2^31
    and batch x heads past grid y launch the wide IR kernel (long long strides, grid (query
    blocks, heads, batch)) with WIDE_PREFILL_ON_IR, the template without; small tensors the
    32-bit IR kernel; heads past 65535 the template (its grid's limit too)."""
    from kernels.nvidia import dispatch, prefill_ir
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", on)
    small = _t((2, 4, 300, 64))
    dispatch.flash_attention(small, small, small, out=_t(small.shape))
    assert fake.launches[-1].kernel == "lg_wgflash_ir_f16_d64_64x128"
    S, D = 300, 64
    big = _t((2, 4, S, D), (2 ** 31 + 4096, S * D, D, 1))
    many = _t((2048, 40, 64, D))
    for q, grid in ((big, (5, 4, 2)), (many, (1, 40, 2048))):
        dispatch.flash_attention(q, q, q, out=_t(q.shape))
        L = fake.launches[-1]
        if on:
            assert L.kernel == "lg_wgflash_ir_f16_d64_64x128_i64" and L.grid == grid
            sig = fake.signatures[L.kernel]
            assert sig[4:8] == ("i32",) * 4 and sig[8:20] == ("i64", "i64", "i32") * 4
            assert L.args[8] == q.stride(0)
        else:
            assert L.kernel.startswith("lg_wgflash_f16_d64") and "_ir_" not in L.kernel
    if on:
        from kernels.nvidia.prefill_ir import wide_prefill_launches
        fa = dispatch.compiled_flash(dispatch.prefill_config(dispatch._FLASH[next(
            k for k in dispatch._FLASH if isinstance(k, tuple) and k[0] == "wide")]),
            wide=True)
        assert fa.wide and fa.report.holds
        assert not wide_prefill_launches(fa, _t((1, 65536, 64, D)), None, None)


def test_dispatch_ws_wide_form(fake, monkeypatch):
    """The warp-specialised d128 kernel: its wide form where offsets pass 2^31 (TMA maps
    address them), the template where TMA cannot address the tensors."""
    from kernels.nvidia import dispatch, prefill_ir
    monkeypatch.setattr(prefill_ir, "WIDE_PREFILL_ON_IR", True)
    S, D = 300, 128
    q = _t((2, 4, S, D), (2 ** 31 + 4096, S * D, D, 1), torch.bfloat16)
    dispatch.flash_attention(q, q, q, out=_t(q.shape, dtype=torch.bfloat16))
    L = fake.launches[-1]
    assert L.kernel.startswith("lg_wsflash_ir_bf16_d128") and L.kernel.endswith("_i64")
    assert L.grid == (3, 4, 2)


def test_a_swapped_wide_grid_is_refused():
    """Planted bug: the wide grid with batch and head swapped (``bat`` on blockIdx.y, ``h`` on
    z): on the 3-D grid of the instances (heads on y, batch on z) blocks read and write other
    (batch, head) pairs' rows, which the verifier's static pass over every block refuses."""
    k = widen_prefill(build_flash_ir(FlashConfig(head_dim=64)))
    k.grid_symbols = ("block_q", "bat", "h")
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert {"in_bounds", "coverage"} <= failed, failed
