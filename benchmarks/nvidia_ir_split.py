"""The tensor-core split-KV decode with BOTH kernels from the verified IR
(kernels.nvidia.decode_ir.IrSplitMmaDecode) against the template split kernel at the suite's
split-KV decode shapes, one run:

    python3 benchmarks/nvidia_ir_split.py --out results.json [--rounds 7]

Three callables per shape, with dispatch's configuration (choose_decode) and split count:
``template`` (decode_mma.MmaSplitKVDecode: template split + template combine), ``dispatch``
(decode_mma_ir.IrMmaSplitKVDecode: template split + IR combine, what decode_attention() runs
today) and ``ir`` (both kernels IR).  Timed in interleaved rounds (CUDA events, mean of 30
calls per round, median over rounds); the IR output is compared bitwise with the template's.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from kernels.nvidia.decode_ir import IrSplitMmaDecode
from kernels.nvidia.decode_mma import MmaSplitKVDecode
from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
from kernels.nvidia.dispatch import choose_decode

from gpu_timing import event_round_us, write_rows_json

# (B, Hq, Hkv, Skv, D): the suite's decode rows whose choice is split_kv
# (benchmarks/results/gpu_suite_h100_2026-11-24_s7_final.txt)
SHAPES = [(64, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (4, 32, 8, 4096, 256),
          (1, 32, 8, 100_000, 128), (1, 32, 8, 131_072, 128), (1, 64, 8, 131_072, 128)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rows = []
    for B, Hq, Hkv, Skv, D in SHAPES:
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        cfg = choose_decode(q, k).config
        kinds = {"template": MmaSplitKVDecode(cfg), "dispatch": IrMmaSplitKVDecode(cfg),
                 "ir": IrSplitMmaDecode(cfg)}
        outs = {n: torch.empty(B, Hq, 1, D, dtype=torch.float16, device="cuda") for n in kinds}
        calls = {n: (lambda d=d, o=outs[n]: d(q, k, v, out=o)) for n, d in kinds.items()}
        for f in calls.values():
            f()
        torch.cuda.synchronize()
        ts = {n: [] for n in kinds}
        for _ in range(args.rounds):
            for n, f in calls.items():
                ts[n].append(event_round_us(f, 30))
        med = {n: statistics.median(x) for n, x in ts.items()}
        eq = bool(torch.equal(outs["template"].view(torch.int16), outs["ir"].view(torch.int16)))
        row = {"B": B, "Hq": Hq, "Hkv": Hkv, "Skv": Skv, "D": D, "config": cfg.name,
               "splits": kinds["template"].plan(q, k, v)["splits"],
               **{f"{n}_us": round(t, 2) for n, t in med.items()},
               "ir_speed_vs_template": round(med["template"] / med["ir"], 3),
               "ir_speed_vs_dispatch": round(med["dispatch"] / med["ir"], 3),
               "bitwise_equal_template": eq, "rounds_us": ts}
        rows.append(row)
        print(json.dumps({k_: v_ for k_, v_ in row.items() if k_ != "rounds_us"}), flush=True)
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
