"""The tensor-core split-KV decode with the IR-built, verified combine kernel
(kernels.nvidia.decode_mma_ir.IrMmaSplitKVDecode) against the all-template one
(kernels.nvidia.decode_mma.MmaSplitKVDecode) on a real GPU (skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_decode_gpu.py``.
Both run the same split kernel; the combine kernels do the same float operations in the same
order (max over the LSEs, weights exp2(lse - M), fma into the sum, one reciprocal, cvt.rn
pairs), so the outputs must be bitwise equal.  Both are also compared with a float32 torch
reference, and the output is poisoned with NaN first, so an element never written fails.
"""

from __future__ import annotations

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.decode_mma import (MmaDecodeConfig, MmaSplitKVDecode,  # noqa: E402
                                       heads_per_mma_block)
from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,ind,outd,splits", [
    (2, 16, 4, 5000, 64, "bf16", "f16", 7),            # d64, GQA 4, forced 7 splits
    (1, 32, 4, 100_000, 128, "bf16", "f16", None),     # d128, GQA 8, long KV, auto splits
    (4, 32, 8, 4096, 256, "f16", "bf16", None),        # d256, GQA 4, auto splits
    (3, 24, 3, 3001, 128, "f16", "f16", 5),            # GQA 8, ragged last split
])
def test_ir_combine_equals_template(B, Hq, Hkv, Skv, D, ind, outd, splits):
    g = torch.Generator(device="cuda").manual_seed(20)
    q = torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(DT[ind])
    k = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    v = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    cfg = MmaDecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=D,
                          hg=heads_per_mma_block(Hq // Hkv), warps=4)
    outs = []
    for kind in (MmaSplitKVDecode, IrMmaSplitKVDecode):
        dec = kind(cfg)
        plan = dec.plan(q, k, v, kv_splits=splits)
        assert plan["splits"] > 1          # the combine kernel runs
        out = torch.full((B, Hq, 1, D), float("nan"), dtype=DT[outd], device="cuda")
        dec(q, k, v, out=out, kv_splits=splits)
        torch.cuda.synchronize()
        outs.append(out)
    tpl, ir = outs
    assert torch.isfinite(ir).all()
    assert torch.equal(tpl.view(torch.int16), ir.view(torch.int16))
    ref = gqa_decode_reference(q, k, v)
    err = ((ir.float() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if outd == "bf16" else 2e-3), err


def test_ir_combine_equals_template_after_the_fma_split_kernel():
    """The FMA split kernel (decode_splitkv.py) writes the same workspace: IrSplitKVDecode's
    output is bitwise the template SplitKVDecode's."""
    from kernels.nvidia.decode_mma_ir import IrSplitKVDecode
    from kernels.nvidia.decode_splitkv import SplitKVDecode, SplitKVDecodeConfig
    g = torch.Generator(device="cuda").manual_seed(21)
    B, Hq, Hkv, Skv, D = 2, 16, 4, 2000, 128
    q = torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(torch.bfloat16)
    cfg = SplitKVDecodeConfig(head_dim=D, hg=4, chunk=4)
    outs = []
    for kind in (SplitKVDecode, IrSplitKVDecode):
        out = torch.full((B, Hq, 1, D), float("nan"), dtype=torch.float16, device="cuda")
        kind(cfg)(q, k, v, out=out, kv_splits=6)
        torch.cuda.synchronize()
        outs.append(out)
    assert torch.isfinite(outs[1]).all()
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
    ref = gqa_decode_reference(q, k, v)
    assert ((outs[1].float() - ref).norm() / ref.norm()).item() < 2e-3
