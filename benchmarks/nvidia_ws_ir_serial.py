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
import statistics

import torch

from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention
from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention, IrWsSerialAttention

from gpu_timing import event_round_us, run_header, write_rows_json

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
        outs = {n: torch.full_like(q, float("nan")) for n in kinds}
        calls = {n: (lambda f=f, o=outs[n]: f(q, k, v, out=o)) for n, f in kinds.items()}
        for f in calls.values():
            f()
        torch.cuda.synchronize()
        ts = {n: [] for n in kinds}
        names = list(calls)
        for r in range(args.rounds):
            s = r % len(names)
            for n in names[s:] + names[:s]:
                ts[n].append(event_round_us(calls[n], 10))
        med = {n: statistics.median(x) for n, x in ts.items()}
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[:1].float(), k[:1].float(), v[:1].float(), is_causal=causal,
            enable_gqa=Hkv != H)
        err = {n: (o[:1].float() - ref).abs().max().item() for n, o in outs.items()}
        row = {"B": B, "H": H, "Hkv": Hkv, "Sq": Sq, "Skv": Skv, "D": 128, "causal": causal,
               "dtype": args.dtype, "ir": ir.kernel_name, "template": ir.ws_cfg.name,
               "ws_config": ws.name,
               **{f"{n}_us": round(t, 1) for n, t in med.items()},
               "ir_speed_vs_template": round(med["template"] / med["ir"], 3),
               "ir_speed_vs_ws": round(med["ws"] / med["ir"], 3),
               "bitwise_equal": bool(torch.equal(outs["ir"], outs["template"])),
               "max_abs_ir_vs_template": (outs["ir"].float() - outs["template"].float())
               .abs().max().item(),
               "bitwise_equal_ws": bool(torch.equal(outs["ir"], outs["ws"])),
               "ir_nan": bool(outs["ir"].isnan().any()),
               **{f"max_abs_{n}_vs_f32_ref_b0": e for n, e in err.items()},
               "rounds_us": ts}
        rows.append(row)
        print(json.dumps({k_: v_ for k_, v_ in row.items() if k_ != "rounds_us"}), flush=True)
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
