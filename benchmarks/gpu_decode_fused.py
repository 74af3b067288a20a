"""The fused split-KV decode (the last split block merges; kernels/nvidia/decode_fused_combine.py)
against the split kernel + combine kernel, on the suite's split decode shapes (issue 20).

For each shape, ``--rounds`` rounds, the two variants in alternating order, each timed after
``gpu_suite.settle()`` by the suite's own clocks: profiler device time (all kernels of a call)
and CUDA-event wall time, medians of ``--reps``; ratios to the 1 GiB device copy of the run.
The outputs of the two are compared bit for bit on each shape.

    python3 benchmarks/gpu_decode_fused.py [--out DIR] [--rounds 3] [--reps 10]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, write_report  # noqa: E402

SHAPES = [(64, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (4, 32, 8, 4096, 256),
          (1, 32, 8, 100_000, 128), (1, 32, 8, 131_072, 128), (1, 64, 8, 131_072, 128),
          (1, 32, 8, 32_768, 256)]


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import dataclasses
    import torch
    import gpu_suite
    from gpu import bench
    from kernels.nvidia.decode_mma import MmaSplitKVDecode
    from kernels.nvidia.dispatch import choose_decode
    copy = gpu_suite.copy_device_gbps(args.reps)
    rows, lines = [], [f"copy {copy:.0f} GB/s (1 GiB, profiler device time)",
                       f"{'shape':<26}{'variant':<9}{'dev us':>8}{'of copy':>8}{'wall us':>9}"
                       f"{'of copy':>8}  rounds (of copy, device)"]
    for B, Hq, Hkv, Skv, D in SHAPES:
        q, k, v, out = gpu_suite.decode_tensors(B, Hq, Hkv, Skv, D)
        nbytes = (q.numel() + k.numel() + v.numel() + out.numel()) * 2
        cfg = choose_decode(q, k).config
        decs = {"combine": MmaSplitKVDecode(dataclasses.replace(cfg, fused=False)),
                "fused": MmaSplitKVDecode(dataclasses.replace(cfg, fused=True))}
        outs = {}
        for name, dec in decs.items():
            o = torch.full_like(out, float("nan"))
            dec(q, k, v, out=o)
            outs[name] = o
        torch.cuda.synchronize()
        same = torch.equal(outs["combine"].view(torch.int16), outs["fused"].view(torch.int16))
        calls = {n: (lambda dec=dec: dec(q, k, v, out=out)) for n, dec in decs.items()}
        meas = gpu_suite.interleaved_rounds(calls, args.rounds, args.reps, bench)
        shape = f"B{B} H{Hq}/{Hkv} {Skv} d{D}"
        for name, ms in meas.items():
            dev = statistics.median(m["device_s"] for m in ms)
            wall = statistics.median(m["wall_s"] for m in ms)
            row = dict(B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D, variant=name, config=decs[name].cfg.name,
                       bitwise_same=same, device_s=dev, wall_s=wall, bytes=nbytes,
                       of_copy_device=nbytes / dev / 1e9 / copy,
                       of_copy_wall=nbytes / wall / 1e9 / copy, rounds=ms)
            rows.append(row)
            per = " ".join(f"{nbytes / m['device_s'] / 1e9 / copy:.3f}" for m in ms)
            lines.append(f"{shape:<26}{name:<9}{dev * 1e6:>8.1f}{row['of_copy_device']:>8.3f}"
                         f"{wall * 1e6:>9.1f}{row['of_copy_wall']:>8.3f}  {per}"
                         f"{'' if same else '  OUTPUTS DIFFER'}")
        print("\n".join(lines[-2:]), flush=True)
        del q, k, v, out, outs
    write_report(args.out, "decode_fused", lines, dict(copy_GBps=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
