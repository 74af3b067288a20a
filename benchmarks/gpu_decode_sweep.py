"""Decode variant sweep on an NVIDIA GPU (issue 20): the tensor-core split kernel
(kernels/nvidia/decode_mma.py) and the FMA split kernel (decode_splitkv.py) at the suite's
weakest decode shapes, several configurations and split counts each, by the profiler's
device time, as fractions of a 1 GiB device copy.

    python3 benchmarks/gpu_decode_sweep.py [--out DIR] [--reps N] [--head-dim D]

``--head-dim 256`` runs only the head_dim 256 shapes (the suite's B4 H32/8 Skv 4096, a group-8
and an odd-length GQA shape).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = [(64, 32, 8, 8192, 128), (1, 64, 8, 131_072, 128), (4, 32, 8, 4096, 256),
          (2, 64, 8, 16_384, 256), (3, 24, 8, 1000, 256)]


def variants(B, Hq, Hkv, Skv, D):
    from kernels.nvidia.decode_mma import MmaDecodeConfig, heads_per_mma_block
    from kernels.nvidia.decode_splitkv import SplitKVDecodeConfig, heads_per_block
    g = Hq // Hkv
    if D in (64, 128):
        for c, w in ((1, 4), (1, 8), (1, 2)):
            yield MmaDecodeConfig(head_dim=D, hg=heads_per_mma_block(g), chunk=c, warps=w)
    if D == 256:                # chunk 1 only (registers); 8 warps x 8 heads is over 48 KiB
        for hg, w in ((heads_per_mma_block(g), 4), (heads_per_mma_block(g), 2),
                      (heads_per_mma_block(g), 8), (min(g, 4), 4)):
            try:
                from kernels.nvidia.decode_mma import validate as mma_validate
                cfg = MmaDecodeConfig(head_dim=D, hg=hg, chunk=1, warps=w)
                mma_validate(cfg)
                yield cfg
            except Exception:
                pass
    fma = ((heads_per_block(g), 4, 4),)     # the FMA kernel's default, as the baseline
    for hg, c, w in fma:
        try:
            cfg = SplitKVDecodeConfig(head_dim=D, hg=hg, chunk=c, warps=w)
            from kernels.nvidia.decode_splitkv import validate
            validate(cfg)
            yield cfg
        except Exception:
            pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--head-dim", type=int, default=None)
    args = ap.parse_args()
    import torch
    from gpu_suite import copy_device_gbps, device_time, rel
    from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode
    from kernels.nvidia.decode_splitkv import SplitKVDecode
    copy = copy_device_gbps(args.reps)
    rows = []
    for B, Hq, Hkv, Skv, D in SHAPES:
        if args.head_dim is not None and D != args.head_dim:
            continue
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        g = Hq // Hkv
        kf = k[:1].float().repeat_interleave(g, 1)
        vf = v[:1].float().repeat_interleave(g, 1)
        ref = ((q[:1].float() @ kf.transpose(-1, -2)) / math.sqrt(D)).softmax(-1) @ vf
        del kf, vf
        nbytes = (q.numel() + k.numel() + v.numel() + q.numel()) * 2
        seen = set()
        for cfg in variants(B, Hq, Hkv, Skv, D):
            if cfg in seen:
                continue
            seen.add(cfg)
            dec = (MmaSplitKVDecode if isinstance(cfg, MmaDecodeConfig) else SplitKVDecode)(cfg)
            auto = dec.plan(q, k, v)["splits"]
            # auto - 1 too: the automatic count can overshoot one wave by a few blocks
            for n in sorted({auto, max(1, auto // 2), max(1, auto - 1), auto * 2}):
                row = dict(shape=[B, Hq, Hkv, Skv, D], cfg=cfg.name, splits=n, auto=n == auto)
                try:
                    out = dec(q, k, v, kv_splits=n)
                    row["rel_err"] = rel(out[:1], ref)
                    t = device_time(lambda: dec(q, k, v, out=out, kv_splits=n), args.reps)
                    row.update(us=t * 1e6, of_copy=nbytes / t / 1e9 / copy)
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                rows.append(row)
                print(json.dumps(row), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_sweep.json").write_text(json.dumps({"copy_GBps": copy, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
