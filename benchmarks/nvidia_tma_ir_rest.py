"""The last template forms of the TMA GEMM on the IR (issue 20 item 1): the two-launch split-K
(``reduce="kernel"``: the IR split kernel + the IR reduce kernel) and two CTAs per SM
(``ctas_per_sm=2``), each against the string template (kernels.nvidia.wgmma_tma.TmaGemm) at
the same configuration and split count on a GPU: bitwise check (outputs poisoned with NaN,
each kernel run twice: the IR keeps its workspace per stream), then alternating rounds of
CUDA-event means (10 calls after 3 warm-ups) and of CUPTI device time per call (the sum of the
call's lg_ kernels: split + reduce for the two-launch form), medians.

Cases: the one shape of the selection's grid that picks the 64x256 two-launch tile
(192x3072x32768, 3 splits), the same tile by ``config=`` on two skinny shapes, and the
two-CTA forms of benchmarks/gpu_gemm_low.py (64x64 one-launch split-K, a short A box) and a
direct-store / TMA-store one.

    python3 benchmarks/nvidia_tma_ir_rest.py --out rest.json [--rounds 7]
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

RED = TmaGemmConfig(dtype="bf16", bm=64, bn=256, stages=5, store="direct", split_k=True,
                    reduce="kernel")
C2 = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=6, store="direct", split_k=True,
                   reduce="inline", ctas_per_sm=2)
#: (name, config, splits, (dtype, M, N, K), C row stride or None)
CASES = (
    ("192x3072x32768 bf16 64x256 split 3 (selection)", RED, 3, ("bf16", 192, 3072, 32768),
     None),
    ("64x8192x8192 bf16 64x256 split 2 (config=)", RED, 2, ("bf16", 64, 8192, 8192), None),
    ("128x4096x14336 bf16 64x256 split 4 (config=)", RED, 4, ("bf16", 128, 4096, 14336),
     None),
    ("128x4096x14336 bf16 64x64 c2 inline split 2", C2, 2, ("bf16", 128, 4096, 14336), None),
    ("16x4096x4096 bf16 64x64 c2 a16 inline split 2", dataclasses.replace(C2, a_rows=16), 2,
     ("bf16", 16, 4096, 4096), None),
    ("1000x3001x1000 bf16 64x128 c2 direct, ldc 3010",
     dataclasses.replace(C2, split_k=False, reduce="kernel", bn=128, stages=4), 1,
     ("bf16", 1000, 3001, 1000), 3010),
    ("1024x4096x1000 bf16 64x128 c2 TMA store",
     dataclasses.replace(C2, split_k=False, reduce="kernel", store="tma", bn=128, stages=3), 1,
     ("bf16", 1024, 4096, 1000), None),
)


def _sample(fn) -> float:
    for _ in range(3):
        fn()
    return event_round_us(fn, 10)


def _device_us_per_call(fn, reps: int = 20) -> float:
    ev = [e for e in kernel_events(fn, reps) if e.device_time > 0 and "lg_" in e.name]
    return sum(e.device_time for e in ev) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rows = []
    for name, cfg, splits, (dtype, m, n, k), ldc in CASES:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(20)
        a = torch.randn((m, k), device="cuda", generator=g).to(dt)
        b = torch.randn((k, n), device="cuda", generator=g).to(dt)
        a, b = tma_padded(a), tma_padded(b)
        t0 = time.perf_counter()
        ir = IrTmaGemm(cfg)
        build = time.perf_counter() - t0
        tpl = TmaGemm(cfg)

        def out():
            full = torch.full((m, ldc or n), float("nan"), dtype=dt, device="cuda")
            return full[:, :n]
        o_ir, o_tpl = out(), out()
        fns = {"ir": lambda: ir(a, b, o_ir, splits), "template": lambda: tpl(a, b, o_tpl, splits)}
        for _ in range(2):
            fns["ir"]()
        fns["template"]()
        torch.cuda.synchronize()
        equal = bool(torch.equal(o_ir, o_tpl))
        finite = bool(torch.isfinite(o_ir.float()).all())
        ref = a.float() @ b.float()
        err = ((o_ir.float() - ref).norm() / ref.norm()).item()
        names = list(fns)
        ev = {nm: [] for nm in names}
        dev = {nm: [] for nm in names}
        for r in range(args.rounds):
            for nm in names[r % 2:] + names[:r % 2]:
                ev[nm].append(_sample(fns[nm]))
        for r in range(4):
            for nm in names[r % 2:] + names[:r % 2]:
                dev[nm].append(_device_us_per_call(fns[nm]))
        med = {nm: statistics.median(v) for nm, v in ev.items()}
        dmed = {nm: statistics.median(v) for nm, v in dev.items()}
        row = {"case": name, "m,n,k": [m, n, k], "ldc": ldc or n, "splits": splits,
               "ir_kernel": ir.kernel_name, "template_kernel": cfg.name,
               "verified": bool(ir.report.holds), "build_verify_s": round(build, 2),
               "bitwise_equal": equal, "finite": finite, "rel_err_vs_fp32": err,
               "event_us": med, "ir_speed_vs_template_event": med["template"] / med["ir"],
               "device_us_cupti": dmed,
               "ir_speed_vs_template_device": dmed["template"] / dmed["ir"],
               "samples_event_us": ev, "samples_device_us": dev}
        rows.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if not k_.startswith("samples")}),
              flush=True)
    res = dict(run_header(), rows=rows)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
