"""The one-launch IR split-KV decode (kernels.nvidia.decode_fused_ir.IrFusedMmaDecode, what
decode_attention() runs) against the two-kernel IR form (decode_ir.IrSplitMmaDecode) on a real
GPU (skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_fused_gpu.py``.
The last block merges with the combine kernel's statements in split order, so the outputs
must be bitwise equal; the output is poisoned with NaN first; the fused form is called again
(on the counters the first launch left) and on a second stream (its own counters)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode  # noqa: E402
from kernels.nvidia.decode_ir import IrSplitMmaDecode  # noqa: E402
from kernels.nvidia.decode_mma import MmaDecodeConfig  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,hg,warps,ind,outd,splits", [
    (4, 32, 8, 4096, 256, 4, 8, "bf16", "f16", None),    # d256 g4 w8, the suite row
    (3, 24, 3, 3001, 128, 8, 4, "f16", "bf16", 5),       # GQA 8, ragged last split
    (2, 16, 2, 100_003, 128, 8, 8, "bf16", "f16", 7),    # ragged, 8 warps, hg 8
    (2, 8, 2, 37, 128, 4, 4, "f16", "f16", 4),           # splits shorter than one tile
    (16, 32, 8, 2048, 128, 4, 8, "bf16", "f16", 1),      # one split: the last block is it
    (1, 16, 4, 999, 64, 4, 2, "f16", "bf16", 3),         # d64
    (2, 16, 16, 1000, 128, 1, 4, "bf16", "f16", None),   # MHA: hg 1
    (3, 24, 8, 5001, 128, 3, 8, "f16", "bf16", 6),       # GQA 3, ragged, 8 warps
    (2, 40, 8, 4097, 256, 5, 8, "bf16", "f16", 7),       # GQA 5, d256 w8 (73 KiB shared)
    (1, 56, 8, 333, 64, 7, 4, "f16", "f16", 1),          # GQA 7, d64, one split
])
def test_fused_ir_decode_equals_two_kernel_form(B, Hq, Hkv, Skv, D, hg, warps, ind, outd,
                                                splits):
    g = torch.Generator(device="cuda").manual_seed(20)
    q = torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(DT[ind])
    k = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    v = torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[ind])
    cfg = MmaDecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=D, hg=hg, warps=warps)
    two, fused = IrSplitMmaDecode(cfg), IrFusedMmaDecode(cfg)

    def run(dec):
        out = torch.full((B, Hq, 1, D), float("nan"), dtype=DT[outd], device="cuda")
        dec(q, k, v, out=out, kv_splits=splits)
        torch.cuda.synchronize()
        return out.view(torch.int16)
    ref = run(two)
    assert torch.equal(run(fused), ref)
    assert torch.equal(run(fused), ref)            # the counters the first launch left
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = run(fused)                            # a second stream: its own counters
    assert torch.equal(got, ref)
