"""The tensor-core split-KV decode with both kernels from the verified IR
(kernels.nvidia.decode_ir.IrSplitMmaDecode) against the all-template one
(kernels.nvidia.decode_mma.MmaSplitKVDecode) on a real GPU (skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_split_gpu.py``.
The IR split kernel does the template's float operations in the same order (only unstored
rows and masked keys differ), so the outputs must be bitwise equal; the output is poisoned with
NaN first, and compared with a float32 torch reference."""

from __future__ import annotations

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.decode_ir import IrSplitMmaDecode  # noqa: E402
from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,hg,warps,ind,outd,splits", [
    (8, 32, 8, 32768, 128, 4, 4, "bf16", "f16", None),   # suite row, auto splits
    (4, 32, 8, 4096, 256, 4, 8, "bf16", "f16", None),    # d256 g4 w8
    (3, 24, 3, 3001, 128, 8, 4, "f16", "bf16", 5),       # GQA 8, ragged last split
    (2, 16, 2, 100_003, 128, 8, 8, "bf16", "f16", 7),    # ragged, 8 warps, hg 8
    (2, 8, 2, 37, 128, 4, 4, "f16", "f16", 4),           # splits shorter than one tile
    (16, 32, 8, 2048, 128, 4, 8, "bf16", "f16", 1),      # one split: the combine copies
    # odd heads per block (the padding head of decode_split_ir.padded_heads)
    (2, 16, 16, 1000, 128, 1, 4, "bf16", "f16", None),   # MHA: hg 1
    (3, 24, 8, 5001, 128, 3, 8, "f16", "bf16", 6),       # GQA 3, ragged, 8 warps
    (2, 40, 8, 4097, 256, 5, 8, "bf16", "f16", 7),       # GQA 5, d256 w8 (73 KiB shared)
    (1, 56, 8, 333, 64, 7, 4, "f16", "f16", 3),          # GQA 7, d64
    (2, 8, 8, 37, 256, 1, 4, "bf16", "f16", 4),          # MHA d256, splits shorter than a tile
])
def test_ir_split_kernel_equals_template(B, Hq, Hkv, Skv, D, hg, warps, ind, outd, splits):
    g = torch.Generator(device="cuda").manual_seed(22)
    q = torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(DT[ind])
    k = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    v = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    cfg = MmaDecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=D, hg=hg, warps=warps)
    outs = []
    for kind in (MmaSplitKVDecode, IrSplitMmaDecode):
        out = torch.full((B, Hq, 1, D), float("nan"), dtype=DT[outd], device="cuda")
        kind(cfg)(q, k, v, out=out, kv_splits=splits)
        torch.cuda.synchronize()
        outs.append(out)
    tpl, ir = outs
    assert torch.isfinite(ir).all()
    same = tpl.view(torch.int16) == ir.view(torch.int16)
    assert same.all(), f"{(~same).sum().item()} elements differ"
    ref = gqa_decode_reference(q, k, v)
    err = ((ir.float() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if outd == "bf16" else 2e-3), err
