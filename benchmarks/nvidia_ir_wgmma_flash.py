"""The wgmma prefill built as verified IR (kernels.nvidia.wgmma_flash_ir.IrWgmmaFlashAttention)
against its template (kernels.nvidia.wgmma_attention.WgmmaFlashAttention) at the configuration
choose_prefill returns for head_dim 64 (one warpgroup x 128 keys), one run:

    python3 benchmarks/nvidia_ir_wgmma_flash.py --out results.json [--rounds 11] [--aa] [--mask0-ab]

Per shape (B, H, Sq, Skv, causal), the kernels are timed in interleaved rounds (CUDA events,
mean of 10 calls per round, median over rounds; the order of the kernels rotates every round);
the outputs are compared with each other (max abs, and whether bitwise equal: the IR prints
the template's arithmetic, so they should be) and with a float32 torch reference on batch 0.
``--aa`` adds a second instance of the template to the rotation ("template_b"): its median
over the template's is the run's A/A spread, the noise a difference must exceed (with it, each
IR speed is also given against both template instances' rounds pooled, ``..._pooled``).
``--mask0-ab`` adds the IR built with ``MASK_BLOCK0_WHEN_NEEDED`` the other way ("ir_alt"; "ir"
is the module's switch, what the dispatch runs): the A/B of the block-0 mask in one rotation,
``ir_speed_vs_ir_alt`` = ir_alt time / ir time, and whether ir_alt is bitwise the template.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention import WgmmaFlashAttention
from kernels.nvidia import wgmma_flash_ir
from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention

from ab_rounds import prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

SHAPES = [(4, 16, 2048, 2048, False), (4, 16, 1000, 4097, False), (4, 16, 2048, 2048, True),
          (8, 32, 8192, 8192, False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--aa", action="store_true", help="time a second template instance too")
    ap.add_argument("--mask0-ab", action="store_true",
                    help="time the IR with MASK_BLOCK0_WHEN_NEEDED the other way too (ir_alt)")
    args = ap.parse_args()
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    mask0 = wgmma_flash_ir.MASK_BLOCK0_WHEN_NEEDED
    print(json.dumps({**run_header(), "ir_mask_block0_when_needed": mask0}), flush=True)
    rows = []
    for B, H, Sq, Skv, causal in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, H, Sq, 64, device="cuda", generator=g).to(dt)
        k, v = (torch.randn(B, H, Skv, 64, device="cuda", generator=g).to(dt) for _ in range(2))
        cfg = choose_prefill(args.dtype, 64, causal, "wgmma").config
        kinds = {"template": WgmmaFlashAttention(cfg), "ir": IrWgmmaFlashAttention(cfg)}
        if args.aa:
            kinds["template_b"] = WgmmaFlashAttention(cfg)
        if args.mask0_ab:
            kinds["ir_alt"] = IrWgmmaFlashAttention(cfg, mask_block0_when_needed=not mask0)
            assert kinds["ir_alt"].source != kinds["ir"].source
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds)
        pooled = statistics.median(ts["template"] + ts.get("template_b", []))
        irs = [n for n in ("ir", "ir_alt") if n in kinds]
        diff = (outs["ir"].float() - outs["template"].float()).abs().max().item()
        row = {"B": B, "H": H, "Sq": Sq, "Skv": Skv, "D": 64, "causal": causal,
               "dtype": args.dtype, "config": cfg.name,
               **{f"{n}_us": round(t, 1) for n, t in med.items()},
               "ir_speed_vs_template": round(med["template"] / med["ir"], 3),
               "ir_faster_rounds": sum(a < b for a, b in zip(ts["ir"], ts["template"])),
               **({"aa_template_b_vs_template": round(med["template"] / med["template_b"], 3),
                   **{f"{n}_speed_vs_template_pooled": round(pooled / med[n], 3) for n in irs}}
                  if args.aa else {}),
               **({"ir_mask_block0_when_needed": mask0,
                   "ir_alt_speed_vs_template": round(med["template"] / med["ir_alt"], 3),
                   "ir_speed_vs_ir_alt": round(med["ir_alt"] / med["ir"], 3),
                   "ir_faster_than_alt_rounds": sum(a < b for a, b in zip(ts["ir"],
                                                                          ts["ir_alt"])),
                   "ir_alt_bitwise_equal": bool(torch.equal(outs["ir_alt"], outs["template"]))}
                  if args.mask0_ab else {}),
               "max_abs_ir_vs_template": diff,
               "bitwise_equal": bool(torch.equal(outs["ir"], outs["template"])),
               **{f"max_abs_{n}_vs_f32_ref_b0": e for n, e in err.items()},
               "rounds_us": ts}
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
