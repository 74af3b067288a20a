"""The tensor-core split-KV decode with the IR-built, verified combine kernel
(kernels.nvidia.decode_mma_ir.IrMmaSplitKVDecode) against the all-template one
(kernels.nvidia.decode_mma.MmaSplitKVDecode) at the suite's split decode shapes, one run.

    python3 benchmarks/nvidia_ir_decode.py --out results.json [--all | --only-more] [--kernels]

The configuration and split count are dispatch's (choose_decode); both kernels are timed in
interleaved rounds (CUDA events, median per round of 50 calls, median of 7 rounds), and the
IR kernel's output is compared bitwise with the template's.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from kernels.nvidia.decode_mma import MmaSplitKVDecode
from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
from kernels.nvidia.dispatch import choose_decode

from gpu_timing import event_round_us, write_rows_json, kernel_events

# (B, Hq, Hkv, Skv, D): the suite's decode shapes (benchmarks/gpu_suite.py) that split the KV
SHAPES = [(8, 32, 8, 32768, 128), (4, 32, 8, 4096, 256), (1, 32, 8, 100_000, 128)]
MORE = [(1, 32, 8, 131_072, 128), (1, 64, 8, 131_072, 128)]     # --all: the suite's other two


def kernel_times(fn, reps: int = 100) -> dict:
    """Median device time (us, CUPTI through torch.profiler) of each kernel ``fn`` launches."""
    out: dict = {}
    for e in kernel_events(fn, reps):
        if e.name.startswith("lg_"):
            out.setdefault(e.name, []).append(getattr(e, "device_time", None) or e.cuda_time)
    return {n: round(statistics.median(ts), 2) for n, ts in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--all", action="store_true", help="also the suite's two 128K-key shapes")
    ap.add_argument("--only-more", action="store_true", help="only those two")
    ap.add_argument("--kernels", action="store_true", help="also each kernel's device time "
                                                          "(profiler)")
    args = ap.parse_args()
    rows = []
    shapes = MORE if args.only_more else SHAPES + (MORE if args.all else [])
    for B, Hq, Hkv, Skv, D in shapes:
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        cfg = choose_decode(q, k).config
        tpl, ir = MmaSplitKVDecode(cfg), IrMmaSplitKVDecode(cfg)
        o_t = torch.empty(B, Hq, 1, D, dtype=torch.float16, device="cuda")
        o_i = torch.empty_like(o_t)
        tpl(q, k, v, out=o_t)
        ir(q, k, v, out=o_i)
        torch.cuda.synchronize()
        ts = {"template": [], "ir": []}
        for _ in range(args.rounds):
            ts["template"].append(event_round_us(lambda: tpl(q, k, v, out=o_t), 50))
            ts["ir"].append(event_round_us(lambda: ir(q, k, v, out=o_i), 50))
        t_us, i_us = (statistics.median(ts[x]) for x in ("template", "ir"))
        row = {"B": B, "Hq": Hq, "Hkv": Hkv, "Skv": Skv, "D": D, "config": cfg.name,
               "splits": tpl.plan(q, k, v)["splits"], "template_us": round(t_us, 2),
               "ir_us": round(i_us, 2), "ir_speed_vs_template": round(t_us / i_us, 3),
               "rounds_us": ts, "bitwise_equal": bool(torch.equal(o_t.view(torch.int16),
                                                                  o_i.view(torch.int16)))}
        if args.kernels:
            row["kernel_us"] = {"template": kernel_times(lambda: tpl(q, k, v, out=o_t)),
                                "ir": kernel_times(lambda: ir(q, k, v, out=o_i))}
        rows.append(row)
        print(json.dumps({k_: v_ for k_, v_ in row.items() if k_ != "rounds_us"}), flush=True)
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
