"""The tensor-core decode's IR kernel at head dims other than 64/128/256 (kernels/nvidia/
decode_padded.py) on a real GPU (skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_padded_gpu.py``.

No template decode kernel takes these head dims (the FMA split and one-pass templates refuse
them), so the comparisons are:

* with the float32 torch reference (tests/_gqa_reference.py), output poisoned with NaN first;
* BITWISE with the same kernel at the template head dim whose rules it takes
  (``policy_head_dim``: 64, 128 or 256; that kernel is bitwise the template split kernel,
  tests/test_nvidia_ir_split_gpu.py) on q / k / v zero-padded to that head dim, the same
  scale, heads per block, warps and splits: the lane maps place every head dim below D in the
  same mma slot and O^T row at both widths, the extra k-steps add exact zeros and O^T rows
  are independent, so the stored values must be the same bits;
* allclose with the FMA split TEMPLATE + IR combine (IrSplitKVDecode) on the same padded inputs
  (different arithmetic: not bitwise);
* through ``decode_attention()`` (what the dispatch rule ``padded_decode_on_ir`` runs), at
  short and long caches, GQA and odd heads per block, twice on the same counters.
"""

from __future__ import annotations

import math

import pytest

from _gqa_reference import gqa_decode_reference

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode  # noqa: E402
from kernels.nvidia.decode_mma import MmaDecodeConfig  # noqa: E402
from kernels.nvidia.decode_padded import policy_head_dim  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def _qkv(B, Hq, Hkv, Skv, D, dt, seed=23):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn((B, Hq, 1, D), device="cuda", generator=g).to(DT[dt]),
            torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[dt]),
            torch.randn((B, Hkv, Skv, D), device="cuda", generator=g).to(DT[dt]))


def _pad(x, Dp):
    return torch.nn.functional.pad(x, (0, Dp - x.shape[-1])).contiguous()


def _err(out, q, k, v):
    ref = gqa_decode_reference(q, k, v)
    return ((out.float() - ref).norm() / ref.norm()).item()


def _tol(outd):
    return 1e-2 if outd == "bf16" else 2e-3


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,hg,warps,ind,outd,splits", [
    (4, 32, 8, 4096, 32, 4, 4, "bf16", "f16", None),      # d32, GQA 4, auto splits
    (3, 24, 3, 3001, 80, 8, 4, "f16", "bf16", 5),         # d80, GQA 8, ragged last split
    (2, 24, 8, 5001, 80, 3, 8, "bf16", "f16", 6),         # d80, odd hg 3, 8 warps
    (2, 16, 16, 1000, 96, 1, 4, "bf16", "f16", None),     # d96, MHA (hg 1)
    (2, 40, 8, 4097, 96, 5, 8, "f16", "f16", 7),          # d96, odd hg 5
    (2, 56, 8, 333, 160, 7, 4, "bf16", "f16", 3),         # d160, odd hg 7
    (2, 8, 2, 37, 160, 4, 4, "f16", "f16", 4),            # d160, splits shorter than a tile
    (1, 16, 2, 100_003, 112, 8, 8, "bf16", "bf16", 9),    # d112, long ragged cache
])
def test_padded_head_dim_equals_its_policy_width_on_padded_inputs(B, Hq, Hkv, Skv, D, hg, warps,
                                                                  ind, outd, splits):
    from kernels.nvidia.decode_mma_ir import IrSplitKVDecode
    from kernels.nvidia.decode_splitkv import SplitKVDecodeConfig, heads_per_block
    q, k, v = _qkv(B, Hq, Hkv, Skv, D, ind)
    Dp = policy_head_dim(D)
    scale = 1.0 / math.sqrt(D)
    outs = []
    for d, (qq, kk, vv) in ((D, (q, k, v)), (Dp, (_pad(q, Dp), _pad(k, Dp), _pad(v, Dp)))):
        cfg = MmaDecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=d, hg=hg, warps=warps)
        out = torch.full((B, Hq, 1, d), float("nan"), dtype=DT[outd], device="cuda")
        IrFusedMmaDecode(cfg)(qq, kk, vv, out=out, scale=scale, kv_splits=splits)
        torch.cuda.synchronize()
        outs.append(out)
    ir, wide = outs[0], outs[1][..., :D]
    assert torch.isfinite(ir).all()
    same = ir.contiguous().view(torch.int16) == wide.contiguous().view(torch.int16)
    assert same.all(), f"{(~same).sum().item()} elements differ from the d{Dp} kernel"
    assert _err(ir, q, k, v) < _tol(outd)
    fma = IrSplitKVDecode(SplitKVDecodeConfig(in_dtype=ind, out_dtype=outd, head_dim=Dp,
                                              hg=heads_per_block(Hq // Hkv), chunk=4))
    tpl = fma(_pad(q, Dp), _pad(k, Dp), _pad(v, Dp), scale=scale)[..., :D]
    torch.cuda.synchronize()
    assert torch.allclose(ir.float(), tpl.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("B,Hq,Hkv,Skv,D,ind,outd", [
    (8, 32, 8, 4096, 32, "bf16", "f16"),
    (4, 32, 8, 8192, 80, "bf16", "bf16"),
    (2, 24, 8, 2048, 80, "f16", "f16"),       # GQA 3: odd hg
    (16, 40, 8, 1024, 96, "bf16", "f16"),     # GQA 5
    (1, 56, 8, 32768, 160, "bf16", "f16"),    # GQA 7, d160 (d256's rules)
    (4, 16, 16, 20, 80, "f16", "f16"),        # short cache: still the IR kernel (one split)
    (2, 8, 8, 1, 48, "bf16", "f16"),          # one key
])
def test_decode_attention_at_padded_head_dims(B, Hq, Hkv, Skv, D, ind, outd):
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    q, k, v = _qkv(B, Hq, Hkv, Skv, D, ind, seed=29)
    c = choose_decode(q, k, out_dtype=outd)
    assert isinstance(c.config, MmaDecodeConfig) and "IrFusedMmaDecode" in c.reason, str(c)
    runs = []
    for _ in range(2):                        # the second launch reuses the zeroed counters
        out = torch.full((B, Hq, 1, D), float("nan"), dtype=DT[outd], device="cuda")
        decode_attention(q, k, v, out_dtype=outd, out=out)
        torch.cuda.synchronize()
        runs.append(out)
    assert torch.isfinite(runs[0]).all()
    assert (runs[0].view(torch.int16) == runs[1].view(torch.int16)).all()
    assert _err(runs[0], q, k, v) < _tol(outd)
