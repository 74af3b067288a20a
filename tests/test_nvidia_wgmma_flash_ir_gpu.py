"""The wgmma prefill built as verified IR (kernels.nvidia.wgmma_flash_ir.IrWgmmaFlashAttention)
against its template (kernels.nvidia.wgmma_attention.WgmmaFlashAttention, same
WgmmaFlashConfig) on a real Hopper GPU (skipped without one).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_wgmma_flash_ir_gpu.py``.
The IR kernel prints the template's arithmetic (the raw-score softmax, the statements'
``raw=True``: the scale folded into one fma per exponent and into alpha, the row sum in pairs;
the same wgmma k order): its output must be bitwise the template's, besides each one's error
against a float32 torch reference; the output is poisoned with NaN first (every element must
be written); the overlapped schedule is also run with ``MASK_BLOCK0_WHEN_NEEDED`` the other
way.  The dispatch test runs ``flash_attention`` at d64 and checks it ran the kernel
:func:`~kernels.nvidia.prefill_select.wgmma_prefill_on_ir` names."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma_attention import WgmmaFlashAttention, WgmmaFlashConfig  # noqa: E402
from kernels.nvidia import wgmma_flash_ir  # noqa: E402
from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention  # noqa: E402
from _prefill_gpu import DT, check_against_template  # noqa: E402


def _hopper() -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


# (overlap, mask_block0_when_needed): both schedules as built by default, and the overlapped
# one with MASK_BLOCK0_WHEN_NEEDED the other way (the form the switch does not take: both must
# stay bitwise the template, whichever the switch says)
FORMS = [(True, None), (False, None), (True, not wgmma_flash_ir.MASK_BLOCK0_WHEN_NEEDED)]


@pytest.mark.parametrize("overlap,mask0", FORMS, ids=["overlap", "serial", "overlap-mask0-other"])
@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal,bshd", [
    (2, 4, 2, 77, 77, "f16", False, False),       # ragged GQA, one partial block
    (2, 8, 8, 1000, 1000, "f16", True, False),    # causal, several blocks
    (1, 4, 1, 300, 517, "bf16", True, False),     # causal, more keys than rows
    (1, 2, 2, 517, 200, "bf16", True, False),     # causal, more rows than keys
    (2, 6, 3, 263, 391, "bf16", False, True),     # BSHD strides, ragged both ways
    (1, 1, 1, 1, 1, "f16", False, False),         # one row, one key
    (1, 2, 2, 128, 1024, "f16", False, False),    # whole blocks only (no masked block)
])
def test_ir_wgmma_flash_matches_template(B, Hq, Hkv, Sq, Skv, dt, causal, bshd, overlap,
                                         mask0):
    if not _hopper():
        pytest.skip("wgmma needs sm_90a")
    D = 64
    g = torch.Generator(device="cuda").manual_seed(11)

    def make(H, S):
        t = torch.randn((B, S, H, D) if bshd else (B, H, S, D), device="cuda", generator=g)
        t = t.to(DT[dt])
        return t.transpose(1, 2) if bshd else t
    q, k, v = make(Hq, Sq), make(Hkv, Skv), make(Hkv, Skv)
    cfg = WgmmaFlashConfig(dtype=dt, head_dim=D, warpgroups=1, bn=128, causal=causal,
                           overlap=overlap)
    check_against_template(IrWgmmaFlashAttention(cfg, mask_block0_when_needed=mask0),
                           WgmmaFlashAttention(cfg), q, k, v, causal, dt)


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,dt,causal,bn", [
    (2, 4, 2, 77, 77, "bf16", False, 128),       # ragged GQA, one partial block
    (1, 4, 1, 300, 517, "f16", True, 128),       # causal, more keys than rows
    (2, 2, 2, 1000, 1000, "bf16", True, 128),    # causal, several blocks
    (1, 2, 2, 256, 1024, "f16", False, 128),     # whole blocks only
    (2, 4, 2, 300, 1000, "bf16", False, 192),    # 192-key blocks, ragged last one
])
def test_two_warpgroup_d128_ir_matches_template(B, Hq, Hkv, Sq, Skv, dt, causal, bn):
    """The warp-specialised kernel's consumer tile (2 warpgroups x 64 rows, head_dim 128) as
    IR: every element written, as close to the f32 reference as the template's output."""
    if not _hopper():
        pytest.skip("wgmma needs sm_90a")
    D = 128
    g = torch.Generator(device="cuda").manual_seed(13)
    q, k, v = (torch.randn((B, H, S, D), device="cuda", generator=g).to(DT[dt])
               for H, S in ((Hq, Sq), (Hkv, Skv), (Hkv, Skv)))
    cfg = WgmmaFlashConfig(dtype=dt, head_dim=D, warpgroups=2, bn=bn, causal=causal)
    # measured bitwise on the H100 too, but not a requirement of this tile (not dispatched)
    check_against_template(IrWgmmaFlashAttention(cfg), WgmmaFlashAttention(cfg), q, k, v,
                           causal, dt, bitwise=False)


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_wgmma_dispatch_runs_the_chosen_kernel(causal):
    if not _hopper():
        pytest.skip("wgmma needs sm_90a")
    from kernels.nvidia import dispatch
    from kernels.nvidia.prefill_select import choose_prefill, wgmma_prefill_on_ir
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(2, 4, 333, 64, device="cuda", generator=g).half() for _ in range(3))
    choice = choose_prefill("f16", 64, causal, "wgmma")
    on_ir = wgmma_prefill_on_ir(choice.config)
    assert ("verified IR kernel" in choice.reason) == on_ir
    out = dispatch.flash_attention(q, k, v, causal=causal, atom="wgmma")
    assert isinstance(dispatch.compiled_flash(choice.config), IrWgmmaFlashAttention) == on_ir
    want = WgmmaFlashAttention(choice.config)(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(out, want)       # the IR kernel is bitwise the template
