"""The IR-built TMA GEMM's direct-store form (kernels.nvidia.wgmma_tma_ir.IrTmaGemm with
``store="direct"``, verified) against the string template (kernels.nvidia.wgmma_tma.TmaGemm)
on a GPU: bitwise equality and device time (issue 20 item 1: the evidence for dispatching it);
``--split``: the IR one-launch split-K (``reduce="inline"``) against the template at the same
split counts.

Cases: the suite's shape that selects the non-split direct store (4097^3 f16, 128x256), an
odd-N shape with a padded C (odd row stride: the 2-byte store path), the suite's skinny shapes
whose selection is an inline split-K configuration that runs ONE split (16x14336x4096,
128x4096x14336: the template's inline form then stores 0.f + acc straight to C, which the IR
direct store computes bitwise; compared against that template call), and the TMA-store
4096x14336x4096 as the control (IR vs template, the form dispatched since s8).  Rotated order
per round, each sample the mean of 10 launches after 3 warm-ups (CUDA events), median of the
rounds; outputs poisoned with NaN first and compared bitwise.

    python3 benchmarks/nvidia_tma_ir_direct.py --out direct.json [--rounds 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import torch
from gpu_timing import event_round_us, kernel_events, run_header

from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig, tma_padded
from kernels.nvidia.wgmma_tma_ir import IrTmaGemm

SPLIT64 = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=12, store="direct", split_k=True,
                        reduce="inline")
#: (name, IR config, template config, template splits, (dtype, M, N, K), C row stride or None)
CASES = (
    ("4097^3 f16 direct", TmaGemmConfig(store="direct"), None, 1, ("f16", 4097, 4097, 4097),
     None),
    ("4000x3001x1000 f16 direct, ldc 3003", TmaGemmConfig(store="direct"), None, 1,
     ("f16", 4000, 3001, 1000), 3003),
    ("16x14336x4096 bf16 (split cfg, 1 split)",
     TmaGemmConfig(dtype="bf16", bm=64, bn=128, stages=8, store="direct", a_rows=16),
     dataclasses.replace(SPLIT64, bn=128, stages=8, a_rows=16), 1, ("bf16", 16, 14336, 4096),
     None),
    ("128x4096x14336 bf16 (split cfg, 1 split)",
     TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=12, store="direct"), SPLIT64, 1,
     ("bf16", 128, 4096, 14336), None),
    ("4096x14336x4096 bf16 TMA store (control)", TmaGemmConfig(dtype="bf16"), None, 1,
     ("bf16", 4096, 14336, 4096), None),
)


A16 = dataclasses.replace(SPLIT64, a_rows=16)
#: --split: the IR one-launch split-K (reduce="inline") against the template at the same
#: splits: the suite's skinny shapes and their selections, odd N (the 4-byte paths), 3 splits
SPLIT_CASES = (
    ("16x4096x4096 bf16 split 2", A16, None, 2, ("bf16", 16, 4096, 4096), None),
    ("1x4096x4096 bf16 split 2", dataclasses.replace(SPLIT64, a_rows=8), None, 2,
     ("bf16", 1, 4096, 4096), None),
    ("64x4096x4096 bf16 split 2", SPLIT64, None, 2, ("bf16", 64, 4096, 4096), None),
    ("1024x1024x16384 bf16 split 2 (128x128)",
     dataclasses.replace(SPLIT64, bm=128, bn=128, stages=6), None, 2,
     ("bf16", 1024, 1024, 16384), None),
    ("100x3001x4096 f16 split 3 (odd N, padded C)",
     dataclasses.replace(SPLIT64, dtype="f16", bn=128, stages=8), None, 3,
     ("f16", 100, 3001, 4096), 3005),
)


def _sample(fn) -> float:
    """Milliseconds per call: 3 warm-ups, then one 10-call event round (gpu_timing)."""
    for _ in range(3):
        fn()
    return event_round_us(fn, 10) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--split", action="store_true", help="the split-K cases (SPLIT_CASES)")
    args = ap.parse_args()
    rows = []
    for name, cfg, tcfg, splits, (dtype, m, n, k), ldc in (SPLIT_CASES if args.split
                                                           else CASES):
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(20)
        a = torch.randn((m, k), device="cuda", generator=g).to(dt)
        b = torch.randn((k, n), device="cuda", generator=g).to(dt)
        a, b = tma_padded(a), tma_padded(b)     # rows on 16 bytes, as gemm() pads them
        t0 = time.perf_counter()
        ir = IrTmaGemm(cfg)
        build = time.perf_counter() - t0
        tpl = TmaGemm(tcfg or cfg)

        def out():
            if ldc is None:
                return torch.full((m, n), float("nan"), dtype=dt, device="cuda")
            return torch.full((m, ldc), float("nan"), dtype=dt, device="cuda")[:, :n]
        o_ir, o_tpl = out(), out()
        fns = {"ir": lambda: ir(a, b, o_ir, splits), "template": lambda: tpl(a, b, o_tpl, splits)}
        fns["ir"]()
        fns["template"]()
        torch.cuda.synchronize()
        equal = bool(torch.equal(o_ir, o_tpl))
        ref = a.float() @ b.float()
        err = ((o_ir.float() - ref).norm() / ref.norm()).item()
        names = list(fns)
        times = {nm: [] for nm in names}
        for r in range(args.rounds):
            for nm in names[r % 2:] + names[:r % 2]:
                times[nm].append(_sample(fns[nm]))
        med = {nm: statistics.median(v) for nm, v in times.items()}
        # device time alone (CUPTI kernel durations, launch gaps excluded), alternating
        kern = {nm: [] for nm in names}
        for r in range(4):
            for nm in names[r % 2:] + names[:r % 2]:
                kern[nm] += [e.device_time for e in kernel_events(fns[nm], 25)
                             if e.device_time > 0 and "lg_" in e.name]
        kmed = {nm: statistics.median(v) if v else None for nm, v in kern.items()}
        row = {"case": name, "dtype": dtype, "m,n,k": [m, n, k], "ldc": ldc or n,
               "ir_kernel": ir.kernel_name, "template_kernel": (tcfg or cfg).name,
               "template_splits": splits, "verified": bool(ir.report.holds),
               "build_verify_s": build, "median_ms": med,
               "ir_over_template": med["template"] / med["ir"], "bitwise_equal": equal,
               "kernel_us_cupti": kmed,
               "ir_over_template_cupti": (kmed["template"] / kmed["ir"]
                                          if kmed["ir"] and kmed["template"] else None),
               "rel_err_vs_fp32": err, "samples_ms": times}
        rows.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "samples_ms"}), flush=True)
    res = dict(run_header(), rows=rows)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
