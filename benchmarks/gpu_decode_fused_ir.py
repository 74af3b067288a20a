"""The one-launch IR split-KV decode (kernels/nvidia/decode_fused_ir.py: the IR split kernel
whose last block per group merges, verified) against the two-kernel IR form it would replace
(decode_ir.IrSplitMmaDecode: IR split kernel + IR combine kernel), issue 20.

1. Bitwise: both forms at configurations with head_dim 128 and 256, ragged last splits, one
   split, GQA; the fused form called twice (the second launch runs on the counters the first
   left) and compared with a float64 reference.
2. Time, on the suite's split decode rows: ``--rounds`` rounds, the two forms in alternating
   order, each after ``gpu_suite.settle()``: profiler device time and CUDA-event wall time
   (``gpu_suite.timed``, medians of ``--reps``) and the back-to-back wall time per call
   (``--calls`` calls, one synchronize), as ratios to the run's 1 GiB device copy.

    python3 benchmarks/gpu_decode_fused_ir.py [--out DIR] [--rounds 2] [--reps 10]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, write_report  # noqa: E402

SHAPES = [(64, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (4, 32, 8, 4096, 256),
          (1, 32, 8, 100_000, 128), (1, 32, 8, 131_072, 128), (1, 32, 8, 32_768, 256)]
# (B, Hq, Hkv, Skv, D, kv_splits): ragged last splits, one split, d128 / d256, GQA
BITWISE = [(2, 16, 2, 1000, 128, None), (1, 32, 8, 777, 128, 1), (3, 32, 8, 5001, 256, None),
           (2, 8, 1, 4097, 256, 7), (1, 16, 2, 333, 64, 3), (2, 32, 8, 20_000, 128, 13)]


def forms(q, k):
    import dataclasses
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.decode_ir import IrSplitMmaDecode
    from kernels.nvidia.decode_mma import MmaDecodeConfig
    from kernels.nvidia.dispatch import choose_decode
    from kernels.nvidia.decode_mma import heads_per_mma_block
    cfg = choose_decode(q, k).config
    if not isinstance(cfg, MmaDecodeConfig):
        cfg = MmaDecodeConfig(head_dim=q.shape[-1], hg=heads_per_mma_block(q.shape[1] //
                                                                             k.shape[1]))
    cfg = dataclasses.replace(cfg, fused=False)
    return cfg, {"two": IrSplitMmaDecode(cfg), "fused": IrFusedMmaDecode(cfg)}


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    import torch
    import gpu_suite
    from gpu import bench
    lines, checks, rows = [], [], []
    for B, Hq, Hkv, Skv, D, ns in BITWISE:
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        cfg, decs = forms(q, k)
        o2 = decs["two"](q, k, v, kv_splits=ns)
        f1 = decs["fused"](q, k, v, kv_splits=ns)
        f2 = decs["fused"](q, k, v, kv_splits=ns)
        torch.cuda.synchronize()
        kk = k.double().repeat_interleave(Hq // Hkv, 1)
        vv = v.double().repeat_interleave(Hq // Hkv, 1)
        ref = torch.softmax(q.double() @ kk.transpose(-1, -2) / D ** 0.5, -1) @ vv
        splits = decs["fused"].plan(q, k, v, None, ns, None)["splits"]
        row = dict(B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D, splits=splits, config=cfg.name,
                   bitwise_two_vs_fused=bool(torch.equal(o2.view(torch.int16), f1.view(torch.int16))),
                   bitwise_second_launch=bool(torch.equal(f1.view(torch.int16), f2.view(torch.int16))),
                   max_err_vs_f64=float((f1.double() - ref).abs().max()))
        checks.append(row)
        lines.append(f"bitwise B{B} H{Hq}/{Hkv} {Skv} d{D} splits {splits}: two==fused "
                     f"{row['bitwise_two_vs_fused']}, launch2==launch1 "
                     f"{row['bitwise_second_launch']}, max err {row['max_err_vs_f64']:.2e}")
        print(lines[-1], flush=True)
    copy = gpu_suite.copy_device_gbps(args.reps)
    lines += [f"copy {copy:.0f} GB/s (1 GiB, profiler device time)",
              f"{'shape':<24}{'form':<7}{'dev us':>8}{'ofcopy':>7}{'wall us':>9}{'ofcopy':>7}"
              f"{'b2b us':>8}{'ofcopy':>7}"]
    for B, Hq, Hkv, Skv, D in SHAPES:
        q, k, v, out = gpu_suite.decode_tensors(B, Hq, Hkv, Skv, D)
        nbytes = (q.numel() + k.numel() + v.numel() + out.numel()) * 2
        cfg, decs = forms(q, k)
        outs = {n: d(q, k, v).clone() for n, d in decs.items()}
        torch.cuda.synchronize()
        same = torch.equal(outs["two"].view(torch.int16), outs["fused"].view(torch.int16))
        b2b = {n: [] for n in decs}

        def back_to_back(name, f):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                f()
            torch.cuda.synchronize()
            b2b[name].append((time.perf_counter() - t0) / args.calls)

        calls = {n: (lambda dec=dec: dec(q, k, v, out=out)) for n, dec in decs.items()}
        meas = gpu_suite.interleaved_rounds(calls, args.rounds, args.reps, bench,
                                            after=back_to_back)
        shape = f"B{B} H{Hq}/{Hkv} {Skv} d{D}"
        for name, ms in meas.items():
            dev = statistics.median(m["device_s"] for m in ms)
            wall = statistics.median(m["wall_s"] for m in ms)
            bb = statistics.median(b2b[name])
            row = dict(B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D, form=name, config=cfg.name,
                       bitwise_same=same, device_s=dev, wall_s=wall, b2b_s=bb, bytes=nbytes,
                       of_copy_device=nbytes / dev / 1e9 / copy,
                       of_copy_wall=nbytes / wall / 1e9 / copy,
                       of_copy_b2b=nbytes / bb / 1e9 / copy, rounds=ms, b2b_rounds=b2b[name])
            rows.append(row)
            lines.append(f"{shape:<24}{name:<7}{dev * 1e6:>8.1f}{row['of_copy_device']:>7.3f}"
                         f"{wall * 1e6:>9.1f}{row['of_copy_wall']:>7.3f}{bb * 1e6:>8.1f}"
                         f"{row['of_copy_b2b']:>7.3f}{'' if same else '  OUTPUTS DIFFER'}")
        print("\n".join(lines[-2:]), flush=True)
        del q, k, v, out, outs
    write_report(args.out, "decode_fused_ir", lines, dict(copy_GBps=copy, checks=checks,
                                                           rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
