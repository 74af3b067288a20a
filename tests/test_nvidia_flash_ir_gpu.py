"""The mma.sync prefill built as verified IR (kernels.nvidia.flash_ir.IrFlashAttention)
against its template (kernels.nvidia.attention.FlashAttention, same FlashConfig) on a real GPU
(skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_flash_ir_gpu.py``.
The IR kernel prints the template's softmax arithmetic operation for operation (the scale
folded into one fma, the row sum in pairs: the statements' ``raw=True``), so the outputs must be
bitwise equal; each one's error against a float32 torch reference is bounded too; the output
is poisoned with NaN first (every element must be written).  ``flash_attention(atom="mma")``
runs the kernel :func:`~kernels.nvidia.prefill_select.choose_prefill` names."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.attention import FLASH_DEFAULTS, FlashAttention, FlashConfig  # noqa: E402
from kernels.nvidia.flash_ir import IrFlashAttention  # noqa: E402
from _prefill_gpu import DT, check_against_template  # noqa: E402

@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,D,dt,causal,bshd", [
    (2, 4, 2, 77, 77, 64, "f16", False, False),       # ragged GQA, one partial block
    (2, 8, 8, 1000, 1000, 64, "f16", True, False),    # causal, several blocks
    (1, 4, 1, 300, 517, 128, "bf16", True, False),    # causal, more keys than rows
    (1, 2, 2, 517, 200, 128, "bf16", True, False),    # causal, more rows than keys
    (2, 6, 3, 263, 391, 64, "bf16", False, True),     # BSHD strides, ragged both ways
    (1, 1, 1, 1, 1, 64, "f16", False, False),         # one row, one key
    (2, 4, 2, 333, 333, 256, "f16", False, False),    # d256 (64 x 32 tile), ragged GQA
    (1, 2, 1, 300, 517, 256, "bf16", True, False),    # d256 causal, more keys than rows
    (1, 2, 2, 517, 200, 256, "f16", True, True),      # d256 causal, more rows, BSHD
])
def test_ir_flash_matches_template(B, Hq, Hkv, Sq, Skv, D, dt, causal, bshd):
    g = torch.Generator(device="cuda").manual_seed(11)

    def make(H, S):
        t = torch.randn((B, S, H, D) if bshd else (B, H, S, D), device="cuda", generator=g)
        t = t.to(DT[dt])
        return t.transpose(1, 2) if bshd else t
    q, k, v = make(Hq, Sq), make(Hkv, Skv), make(Hkv, Skv)
    cfg = FlashConfig(dtype=dt, head_dim=D, causal=causal, **FLASH_DEFAULTS[D])
    ir, tpl = IrFlashAttention(cfg), FlashAttention(cfg)
    check_against_template(ir, tpl, q, k, v, causal, dt)


@pytest.mark.parametrize("split", [True, False], ids=["split", "one-loop"])
@pytest.mark.parametrize("v_early", [False, True], ids=["v-late", "v-early"])
@pytest.mark.parametrize("D,causal,Sq,Skv", [(128, True, 300, 517), (128, True, 517, 200),
                                             (256, False, 333, 333), (256, True, 300, 517)])
def test_every_ir_loop_form_is_bitwise_the_template(D, causal, Sq, Skv, v_early, split):
    """Both key-loop forms (``split``: unmasked + masked loops; one masked loop) and both V
    waits, the forms benchmarks/nvidia_ir_flash.py times, are bitwise the template."""
    g = torch.Generator(device="cuda").manual_seed(13)
    q = torch.randn(1, 4, Sq, D, device="cuda", generator=g).half()
    k, v = (torch.randn(1, 2, Skv, D, device="cuda", generator=g).half() for _ in range(2))
    cfg = FlashConfig(dtype="f16", head_dim=D, causal=causal, **FLASH_DEFAULTS[D])
    check_against_template(IrFlashAttention(cfg, v_early=v_early, split=split), FlashAttention(cfg),
                   q, k, v, causal, "f16")


@pytest.mark.parametrize("D,causal", [(64, False), (64, True), (128, False), (128, True),
                                      (256, False), (256, True)])
def test_mma_dispatch_runs_the_chosen_kernel(D, causal):
    from kernels.nvidia import dispatch
    from kernels.nvidia.prefill_select import choose_prefill, mma_prefill_on_ir
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(2, 4, 333, D, device="cuda", generator=g).half() for _ in range(3))
    choice = choose_prefill("f16", D, causal, "mma")
    on_ir = mma_prefill_on_ir(choice.config)
    assert ("verified IR kernel" in choice.reason) == on_ir
    out = dispatch.flash_attention(q, k, v, causal=causal, atom="mma")
    assert isinstance(dispatch.compiled_flash(choice.config), IrFlashAttention) == on_ir
    want = FlashAttention(choice.config)(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(out, want)       # the IR kernel is bitwise the template
