"""The IR-built TMA GEMM (kernels.nvidia.wgmma_tma_ir.IrTmaGemm, verified) against the string
template (kernels.nvidia.wgmma_tma.TmaGemm) of the same configuration, and cuBLAS, on a GPU
(issue 20 item 1: the evidence for letting gemm() dispatch to the IR kernel).

At each shape the configuration is the selection's (kernels.select.select_gemm on this device)
where that is a non-split-K TMA-store one, else the default 128x256x64 s3 tile.  Rotated order
per round (IR, template, cuBLAS; then template, cuBLAS, IR; ...), each sample the mean of 10
launches after 3 warm-ups (CUDA events), median of the rounds; outputs compared bitwise.  Also
the first-call cost of IrTmaGemm: building + verifying (IR and printed text) and compiling.

    python3 benchmarks/nvidia_tma_ir_speed.py --out speed.json [--rounds 7] [--short-a]

``--short-a``: the short-A-box configurations of :data:`SHORT_A` (``a_rows``, TMA store, no
split-K: the IR form; gemm() selects a_rows only with split-K today) at their skinny shapes.
"""

from __future__ import annotations

import argparse
import json

import torch

from kernels.nvidia.dispatch import choose_gemm
from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import IrTmaGemm

from ab_rounds import first_build, medians, print_row, rotated_rounds

SHAPES = (("bf16", 4096, 4096, 4096), ("f16", 4096, 4096, 4096), ("bf16", 8192, 8192, 8192),
          ("f16", 8192, 8192, 8192), ("bf16", 4096, 14336, 4096), ("f16", 4000, 3000, 1000))
#: (configuration, (dtype, M, N, K)) with short A boxes: M <= a_rows, one 64-row tile row
SHORT_A = ((dict(bm=64, bn=64, stages=6, a_rows=16), ("bf16", 16, 4096, 4096)),
           (dict(bm=64, bn=64, stages=6, a_rows=8), ("bf16", 1, 4096, 4096)),
           (dict(bm=64, bn=128, stages=8, a_rows=32), ("bf16", 32, 4096, 4096)),
           (dict(bm=64, bn=128, stages=8, a_rows=8, b_major="k"), ("f16", 5, 4104, 1000)))


def _sample(fn) -> float:
    for _ in range(3):
        fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 10


def config_for(a, b) -> TmaGemmConfig:
    c = choose_gemm(a, b).config
    if isinstance(c, TmaGemmConfig) and c.store == "tma" and not c.split_k:
        return c
    return TmaGemmConfig(dtype="bf16" if a.dtype == torch.bfloat16 else "f16")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--short-a", action="store_true", help="the SHORT_A configurations")
    args = ap.parse_args()
    rows, built = [], {}
    cases = ([(dict(kw, dtype=s[0]), s) for kw, s in SHORT_A] if args.short_a else
             [(None, s) for s in SHAPES])
    for kw, (dtype, m, n, k) in cases:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        cfg0 = TmaGemmConfig(**kw) if kw else None
        a = torch.randn((m, k), device="cuda").to(dt)
        b = torch.randn((k, n) if cfg0 is None or cfg0.b_major == "n" else (n, k),
                        device="cuda").to(dt)
        cfg = cfg0 or config_for(a, b)
        ir, tpl, first = first_build(built, cfg, IrTmaGemm, TmaGemm)
        o_ir = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        o_tpl = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        fns = {"ir": lambda: ir(a, b, o_ir), "template": lambda: tpl(a, b, o_tpl),
               "cublas": lambda: a @ (b if cfg.b_major == "n" else b.T)}
        times = rotated_rounds(list(fns), args.rounds, lambda nm: _sample(fns[nm]))
        med = medians(times)
        fl = 2 * m * n * k
        row = {"dtype": dtype, "m,n,k": [m, n, k], "config": cfg.name, "kernel": ir.kernel_name,
               "verified": bool(ir.report.holds), "first_call": first, "median_ms": med,
               "tflops": {nm: fl / t / 1e9 for nm, t in med.items()},
               "ir_over_template": med["template"] / med["ir"],
               "ir_over_cublas": med["cublas"] / med["ir"],
               "bitwise_equal": bool(torch.equal(o_ir, o_tpl)), "samples_ms": times}
        rows.append(row)
        print_row(row, "samples_ms")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
