"""The serial warp-specialised d128 prefill built as verified IR
(kernels.nvidia.wgmma_ws_ir_launch.IrWsSerialAttention) timed against the template
warp-specialised kernel of the same configuration (WsFlashAttention(ir.ws_cfg): 128 x 128, two
stages, TMA, no ping-pong, S of block j beside P V of block j - 1) and the one choose_prefill
runs at each shape (the dispatched configuration), one run:

    python3 benchmarks/nvidia_ws_ir_serial.py --out results.json [--rounds 7]

Per shape (B, H, Sq, Skv, causal): interleaved rounds (CUDA events, mean of 10 calls per round,
median over rounds; the kernels' order rotates every round); the IR output compared with both
templates' (max abs, bitwise) and each with a float32 torch reference on batch 0.  The serial
schedule is the baseline the dispatched warp-specialised IR builder improves on, not a
candidate for dispatch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention
from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention, IrWsSerialAttention

from ab_rounds import prefill_ab_fields, prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

# (B, Hq, Sq, Skv, causal[, Hkv]): the dispatched configurations' shapes, and (--dispatched)
# the causal-long configuration's at GQA and a ragged length
SHAPES = [(8, 32, 8192, 8192, False), (8, 32, 8192, 8192, True), (4, 16, 1000, 4097, False),
          (16, 32, 512, 512, True), (2, 4, 77, 77, False), (16, 32, 512, 512, False),
          (2, 32, 4096, 4096, True, 8),
          (3, 8, 1500, 1500, True)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--pingpong", action="store_true",
                    help="the ping-pong form of the IR kernel (and of its same-config template)")
    ap.add_argument("--dispatched", action="store_true",
                    help="the builder's IR (wgmma_ws_ir.build_ws_ir) of the dispatched "
                         "configuration, persistence off, instead of the serial kernel")
    args = ap.parse_args()
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    print(json.dumps(run_header()), flush=True)
    rows = []
    for B, H, Sq, Skv, causal, *hkv in SHAPES:
        Hkv = hkv[0] if hkv else H
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, H, Sq, 128, device="cuda", generator=g).to(dt)
        k, v = (torch.randn(B, Hkv, Skv, 128, device="cuda", generator=g).to(dt)
                for _ in range(2))
        ws = choose_prefill(args.dtype, 128, causal, "wgmma", True, max(Sq, Skv), Skv).config
        if args.dispatched:
            ir = IrWsAttention(dataclasses.replace(ws, persistent=False, unit_heads=0))
        else:
            ir = IrWsSerialAttention(causal, args.dtype, pingpong=args.pingpong)
        kinds = {"ir": ir, "template": WsFlashAttention(ir.ws_cfg), "ws": WsFlashAttention(ws)}
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds, poison=True)
        row = {"B": B, "H": H, "Hkv": Hkv, "Sq": Sq, "Skv": Skv, "D": 128, "causal": causal,
               "dtype": args.dtype, "ir": ir.kernel_name, "template": ir.ws_cfg.name,
               "ws_config": ws.name,
               **prefill_ab_fields(outs, ts, med, err)}
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
