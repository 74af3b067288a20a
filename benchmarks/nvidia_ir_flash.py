"""The mma.sync prefill built as verified IR (kernels.nvidia.flash_ir.IrFlashAttention) against
its template (kernels.nvidia.attention.FlashAttention) at the same FlashConfig, one run:

    python3 benchmarks/nvidia_ir_flash.py --out results.json [--rounds 7] [--head-dim D]
        [--causal 0|1] [--seq S] [--variants v_early,one_loop,v_early+one_loop]

Per shape (B, H, S, D, causal; the mma.sync defaults FLASH_DEFAULTS of the head_dim), the
kernels are timed in rotated interleaved rounds (round r starts with the r-th kernel; CUDA
events, mean of 10 calls per round, median over rounds); the outputs are compared with the
template's (bitwise, and max abs) and with a float32 torch reference.  Since the IR prints the
template's softmax arithmetic operation for operation (the scale folded into one fma, the row
sum in pairs), every IR form is expected to be bitwise the template.  The shapes: B8 H32 S2K /
S8K, d64 / d128 / d256, causal and not, f16, and S2K bf16; ``--head-dim``, ``--causal`` and
``--seq`` keep a subset.  ``ir`` is the default IR form; ``--variants`` adds others, each a
``+``-joined set of ``v_early`` / ``v_late`` (wait for V before / after the softmax:
``build_flash_ir(cfg, v_early=...)``) and ``one_loop`` / ``split`` (one masked key loop, or an
unmasked loop and a masked one: ``split=...``), timed as ``ir_<variant>``.
"""

from __future__ import annotations

import argparse
import json
from typing import Dict, Optional

import torch

from kernels.nvidia.attention import FLASH_DEFAULTS, FlashAttention, FlashConfig
from kernels.nvidia.flash_ir import IrFlashAttention

from ab_rounds import prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

# (B, H, S, D, causal, dtype): B8 H32 S2K / S8K, d64 / d128 / d256, causal and not, f16; bf16
# at S2K
SHAPES = [(8, 32, S, D, c, "f16") for D in (64, 128, 256) for S in (2048, 8192)
          for c in (False, True)]
SHAPES += [(8, 32, 2048, D, c, "bf16") for D in (64, 128, 256) for c in (False, True)]

_FLAGS = {"v_early": ("v_early", True), "v_late": ("v_early", False),
          "one_loop": ("split", False), "split": ("split", True)}


def variant_kwargs(name: str) -> Dict[str, Optional[bool]]:
    """``IrFlashAttention`` keyword arguments of a ``+``-joined variant name."""
    kw: Dict[str, Optional[bool]] = {}
    for flag in name.split("+"):
        if flag not in _FLAGS:
            raise SystemExit(f"unknown variant flag {flag!r} (one of {sorted(_FLAGS)})")
        k, v = _FLAGS[flag]
        kw[k] = v
    return kw


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--head-dim", type=int, default=0, help="only this head_dim (0: all)")
    ap.add_argument("--causal", type=int, default=-1, help="only this mask (0 / 1; -1: both)")
    ap.add_argument("--seq", type=int, default=0, help="only this sequence length (0: all)")
    ap.add_argument("--dtype", default="", help="only this dtype (f16 / bf16; '': both)")
    ap.add_argument("--variants", default="",
                    help="comma-separated IR forms to time beside the default one")
    ap.add_argument("--v-early", action="store_true", help="the same as --variants v_early")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v] + (["v_early"] if args.v_early else [])
    print(json.dumps(run_header()), flush=True)
    rows = []
    for B, H, S, D, causal, dtype in SHAPES:
        if ((args.head_dim and D != args.head_dim)
                or (args.causal >= 0 and causal != bool(args.causal))
                or (args.seq and S != args.seq) or (args.dtype and dtype != args.dtype)):
            continue
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(5)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", generator=g).to(dt) for _ in range(3))
        cfg = FlashConfig(dtype=dtype, head_dim=D, causal=causal, **FLASH_DEFAULTS[D])
        kinds = {"template": FlashAttention(cfg), "ir": IrFlashAttention(cfg)}
        for name in variants:
            kinds[f"ir_{name}"] = IrFlashAttention(cfg, **variant_kwargs(name))
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds)
        diff = (outs["ir"].float() - outs["template"].float()).abs().max().item()
        row = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "dtype": dtype,
               "config": cfg.name, **{f"{n}_us": round(t, 1) for n, t in med.items()},
               **{f"{n}_speed_vs_template": round(med["template"] / med[n], 3)
                  for n in kinds if n != "template"},
               "bitwise_equal": all(torch.equal(o, outs["template"]) for o in outs.values()),
               **{f"{n}_bitwise": torch.equal(o, outs["template"]) for n, o in outs.items()
                  if n != "template"},
               "max_abs_ir_vs_template": diff,
               **{f"max_abs_{n}_vs_f32_ref_b0": e for n, e in err.items()},
               "rounds_us": ts}
        rows.append(row)
        print_row(row, "rounds_us")
        del q, k, v, outs
        torch.cuda.empty_cache()
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
