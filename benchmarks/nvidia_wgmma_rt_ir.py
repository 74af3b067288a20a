"""The IR-built cp.async wgmma GEMM at runtime sizes (kernels.nvidia.wgmma_rt_ir.IrWgmmaRtGemm,
verified) against the string template (kernels.nvidia.wgmma.WgmmaGemm) of the same
configuration on a GPU (issue 20 item 1: the evidence for letting gemm() dispatch to it).

Per shape: the configuration is the cp.async kernel's own choice (gemm_select.cp_async_choice
on this device) without split-K; outputs NaN-poisoned, compared with the float32 reference and
bitwise between the two kernels.  Device time per kernel launch from the profiler (CUPTI),
``--reps`` launches per sample, interleaved rounds (IR, template; then template, IR), median
of all samples.  Controls at 4096^3: gemm() with atom="mma" and atom="wgmma" (what the
selection runs with each atom), device time of their kernels.

    python3 benchmarks/nvidia_wgmma_rt_ir.py --out DIR [--rounds 5] [--reps 10]
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List

from ab_rounds import first_build, gemm_operands, gemm_outputs, medians, print_row, rotated_rounds
from gpu_timing import bench_parser, kernel_events, run_header

#: (dtype, M, N, K, b_major, lda pad): lda = K + pad (an odd pad: rows not 16-byte aligned)
SHAPES = (("f16", 777, 333, 130, "n", 0), ("bf16", 777, 333, 130, "k", 0),
          ("f16", 1, 1, 8, "n", 0), ("f16", 4000, 3000, 1000, "n", 1),
          ("f16", 1000, 1000, 1000, "n", 0), ("f16", 4096, 4096, 4096, "n", 0))


def device_us(fn: Callable[[], Any], reps: int) -> Dict[str, List[float]]:
    """Device microseconds of each GPU kernel ``fn`` launches, per launch."""
    per: Dict[str, List[float]] = {}
    for e in kernel_events(fn, reps):
        if e.device_time > 0:
            per.setdefault(e.name, []).append(e.device_time)
    return per


def main() -> None:
    import torch
    from kernels.nvidia.dispatch import device_target, gemm, row_vector
    from kernels.nvidia.gemm_select import cp_async_choice
    from kernels.nvidia.wgmma import WgmmaGemm
    from kernels.nvidia.wgmma_rt_ir import IrWgmmaRtGemm
    from kernels.selection import GemmProblem
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    built: Dict[Any, Any] = {}
    for dtype, m, n, k, bmaj, pad in SHAPES:
        dt, a, b = gemm_operands(dtype, m, n, k, bmaj, pad)
        prob = GemmProblem(m, n, k, dtype, bmaj, row_vector(a, b))
        cfg = replace(cp_async_choice(prob, device_target(a)).config, split_k=False)
        ir, tpl, first = first_build(built, cfg, IrWgmmaRtGemm, WgmmaGemm)
        o_ir, o_tp, fns, err = gemm_outputs(ir, tpl, a, b, bmaj)
        names = {"ir": ir.kernel_name, "template": cfg.name}
        rounds = rotated_rounds(["ir", "template"], args.rounds,
                                lambda nm: device_us(fns[nm], args.reps).get(names[nm], []))
        samples = {nm: [x for per_round in v for x in per_round] for nm, v in rounds.items()}
        med = medians(samples)
        row = {"dtype": dtype, "m,n,k": [m, n, k], "b_major": bmaj, "lda": a.stride(0),
               "config": cfg.name, "kernel": ir.kernel_name, "verified": bool(ir.report.holds),
               "first_call": first, "median_us": med, "ir_over_template": med["template"] /
               med["ir"], "bitwise_equal": bool(torch.equal(o_ir, o_tp)),
               "all_written": bool(torch.isfinite(o_ir.float()).all()), "rel_err": err,
               "samples_us": samples}
        if (m, n, k) == (4096, 4096, 4096):
            for atom in ("mma", "wgmma"):
                o = torch.empty((m, n), dtype=dt, device="cuda")
                per: Dict[str, List[float]] = {}
                for _ in range(args.rounds):
                    for kn, v in device_us(lambda: gemm(a, b, o, atom=atom), args.reps).items():
                        per.setdefault(kn, []).append(statistics.median(v))
                row[f"control_atom_{atom}_us"] = {kn: statistics.median(v)
                                                  for kn, v in per.items()}
        rows.append(row)
        print_row(row, "samples_us")
    res = {**run_header(), "rows": rows}
    (out_dir / "nvidia_wgmma_rt_ir.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
