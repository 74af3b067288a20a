"""The two-warpgroup head_dim 128 wgmma prefill built as verified IR
(kernels.nvidia.wgmma_flash_ir.IrWgmmaFlashAttention, 128 rows x 128 keys: the consumer tile of
the warp-specialised kernel) against its template (kernels.nvidia.wgmma_attention
.WgmmaFlashAttention, same WgmmaFlashConfig), with the warp-specialised kernel
choose_prefill runs at each shape timed beside them for scale, one run:

    python3 benchmarks/nvidia_ir_wgmma_flash_d128.py --out results.json [--rounds 7]
        [--bn 192 --non-causal-only]

Per shape (B, H, Sq, Skv, causal): interleaved rounds (CUDA events, mean of 10 calls per round,
median over rounds; the kernels' order rotates every round); the IR output compared with the
template's and the warp-specialised kernel's (max abs, bitwise) and each with a float32 torch reference on batch 0.
"""

from __future__ import annotations

import argparse
import json

import torch

from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention import WgmmaFlashAttention, WgmmaFlashConfig
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention
from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention

from ab_rounds import prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

SHAPES = [(8, 32, 8192, 8192, False), (8, 32, 8192, 8192, True), (4, 16, 1000, 4097, False),
          (16, 32, 512, 512, True), (2, 4, 77, 77, False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--bn", type=int, default=128, help="keys per block of the IR tile "
                    "(192: the warp-specialised kernel's non-causal long-sequence block)")
    ap.add_argument("--non-causal-only", action="store_true")
    args = ap.parse_args()
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    print(json.dumps(run_header()), flush=True)
    rows = []
    for B, H, Sq, Skv, causal in SHAPES:
        if causal and args.non_causal_only:
            continue
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, H, Sq, 128, device="cuda", generator=g).to(dt)
        k, v = (torch.randn(B, H, Skv, 128, device="cuda", generator=g).to(dt) for _ in range(2))
        cfg = WgmmaFlashConfig(dtype=args.dtype, head_dim=128, warpgroups=2, bn=args.bn,
                               causal=causal)
        ws = choose_prefill(args.dtype, 128, causal, "wgmma", True, max(Sq, Skv), Skv).config
        kinds = {"template": WgmmaFlashAttention(cfg), "ir": IrWgmmaFlashAttention(cfg),
                 "ws": WsFlashAttention(ws)}
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds, poison=True)
        diff = (outs["ir"].float() - outs["template"].float()).abs().max().item()
        row = {"B": B, "H": H, "Sq": Sq, "Skv": Skv, "D": 128, "causal": causal,
               "dtype": args.dtype, "config": cfg.name, "ws_config": ws.name,
               **{f"{n}_us": round(t, 1) for n, t in med.items()},
               "ir_speed_vs_template": round(med["template"] / med["ir"], 3),
               "ir_speed_vs_ws": round(med["ws"] / med["ir"], 3),
               "ir_faster_rounds": sum(a < b for a, b in zip(ts["ir"], ts["template"])),
               "max_abs_ir_vs_template": diff,
               "bitwise_equal": bool(torch.equal(outs["ir"], outs["template"])),
               "bitwise_equal_ws": bool(torch.equal(outs["ir"], outs["ws"])),
               "max_abs_ir_vs_ws": (outs["ir"].float() - outs["ws"].float()).abs().max().item(),
               "ir_nan": bool(outs["ir"].isnan().any()),
               **{f"max_abs_{n}_vs_f32_ref_b0": e for n, e in err.items()},
               "rounds_us": ts}
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
