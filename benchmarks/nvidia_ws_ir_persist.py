"""The persistent warp-specialised d128 prefill built as verified IR
(kernels.nvidia.wgmma_ws_ir_persist_launch.IrWsPersistAttention) timed against the template of
the same configuration (the dispatched causal <= 1024-row kernel,
``lg_wsflash_*_d128_128x128_s3_pp_causal_tma_pt_uh4``), one run:

    python3 benchmarks/nvidia_ws_ir_persist.py --out results.json [--rounds 9] [--one-loop]

``--one-loop`` adds the IR built with ``one_loop=True`` (blocks 1.. as one loop, the mask
guarded at run time) as a third kind, ``ir1``, timed and compared bitwise with the others.

Per shape: interleaved rounds (CUDA events, mean of 20 calls per round, median over rounds;
the order rotates every round); outputs compared bitwise and each with a float32 reference on
batch 0 (benchmarks/ab_rounds.py)."""

from __future__ import annotations

import argparse
import json

import torch

from kernels.nvidia.wgmma_attention_ws import WsFlashAttention, WsFlashConfig
from kernels.nvidia.wgmma_ws_ir_persist_launch import IrWsPersistAttention

from ab_rounds import prefill_ab_fields, prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

CFG = WsFlashConfig(head_dim=128, bn=128, stages=3, causal=True, pingpong=True, loader="tma",
                    persistent=True, unit_heads=4)
SHAPES = [(16, 32, 32, 512, 512), (16, 32, 8, 512, 512), (8, 16, 16, 1024, 1024)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--one-loop", action="store_true")
    args = ap.parse_args()
    print(json.dumps(run_header()), flush=True)
    kinds = {"ir": IrWsPersistAttention(CFG), "template": WsFlashAttention(CFG)}
    if args.one_loop:
        kinds["ir1"] = IrWsPersistAttention(CFG, one_loop=True)
    rows = []
    for B, Hq, Hkv, Sq, Skv in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, Hq, Sq, 128, device="cuda", generator=g).to(torch.bfloat16)
        k, v = (torch.randn(B, Hkv, Skv, 128, device="cuda", generator=g).to(torch.bfloat16)
                for _ in range(2))
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, True, args.rounds, poison=True,
                                            calls_per_round=20)
        row = {"B": B, "Hq": Hq, "Hkv": Hkv, "Sq": Sq, "Skv": Skv, "causal": True,
               "ir": kinds["ir"].kernel_name, "template": CFG.name,
               **prefill_ab_fields(outs, ts, med, err),
               **({"ir1_speed_vs_template": round(med["template"] / med["ir1"], 3),
                   "ir1_bitwise_equal": bool(torch.equal(outs["ir1"], outs["template"])),
                   "ir1_nan": bool(outs["ir1"].isnan().any())} if "ir1" in kinds else {})}
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
