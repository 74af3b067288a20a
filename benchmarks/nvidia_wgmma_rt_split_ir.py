"""The IR-built split-K of the cp.async wgmma GEMM (kernels.nvidia.wgmma_rt_ir_split
.IrWgmmaRtSplitGemm: split kernel + IR reduce kernel, verified together) against the string
template (kernels.nvidia.wgmma.WgmmaGemm with ``split_k=True``: split kernel + splitk reduce
kernel) on a GPU: the evidence for letting ``wgmma_gemm()`` run it (issue 20 item 1).

Per shape and split count: outputs NaN-poisoned, compared with the float32 reference and
bitwise between the two.  Device time per call = the sum of the call's kernels (split +
reduce) from the profiler (CUPTI), ``--reps`` calls per sample, interleaved rounds (IR,
template; then template, IR), median of all samples; the split and reduce kernels' own
medians beside it (``median_us_per_kernel``).

    python3 benchmarks/nvidia_wgmma_rt_split_ir.py --out DIR [--rounds 5] [--reps 10]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List

from ab_rounds import first_build, gemm_operands, gemm_outputs, medians, print_row, rotated_rounds
from gpu_timing import bench_parser, kernel_events, run_header

#: (dtype, M, N, K, b_major, lda pad, splits): edges and odd strides first (correctness),
#: then skinny long-K shapes where split-K is what fills the SMs (timing), on the default
#: 128x256 tile; then (splits None) what the selection itself makes a cp.async split-K:
#: skinny long-K problems whose rows are not 16-byte aligned (odd lda), with the selection's
#: configuration and split count (``choose_gemm``: 64x128 / 64x64 / 128x256 tiles)
SHAPES = (("f16", 253, 297, 1000, "n", 0, 3), ("bf16", 777, 333, 1030, "k", 1, 4),
          ("f16", 1, 1, 8, "n", 0, 1), ("f16", 256, 1024, 16384, "n", 0, 8),
          ("f16", 512, 2048, 8192, "n", 0, 4), ("bf16", 128, 4096, 12288, "k", 0, 6),
          ("f16", 64, 4096, 4096, "n", 3, None), ("f16", 16, 1024, 16384, "n", 1, None),
          ("bf16", 128, 2048, 8192, "n", 1, None), ("bf16", 64, 512, 8192, "k", 1, None))


def call_us(fn: Callable[[], Any], reps: int) -> Dict[str, float]:
    """Device microseconds per call of ``fn``: ``"call"`` all its kernels summed, and per
    kernel (``"split"``: the name not ending ``_reduce``; ``"reduce"``), so a gap can be
    put on the kernel that has it."""
    out = {"call": 0.0, "split": 0.0, "reduce": 0.0}
    for e in kernel_events(fn, reps):
        if e.device_time > 0:
            out["call"] += e.device_time / reps
            out["reduce" if e.name.endswith("_reduce") else "split"] += e.device_time / reps
    return out


def main() -> None:
    import torch
    from kernels.nvidia.dispatch import choose_gemm
    from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig
    from kernels.nvidia.wgmma_rt_ir_split import IrWgmmaRtSplitGemm
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    built: Dict[Any, Any] = {}
    for dtype, m, n, k, bmaj, pad, splits in SHAPES:
        _, a, b = gemm_operands(dtype, m, n, k, bmaj, pad)
        if splits is None:
            choice = choose_gemm(a, b, b_major=bmaj)
            cfg, splits = choice.config, choice.splits
            assert isinstance(cfg, WgmmaGemmConfig) and cfg.split_k, str(choice)
        else:
            cfg = WgmmaGemmConfig(dtype=dtype, b_major=bmaj, split_k=True)
        ir, tpl, first = first_build(built, cfg, IrWgmmaRtSplitGemm, WgmmaGemm)
        o_ir, o_tp, fns, err = gemm_outputs(ir, tpl, a, b, bmaj, splits)
        per_call = rotated_rounds(["ir", "template"], args.rounds,
                                  lambda nm: call_us(fns[nm], args.reps))
        samples = {nm: [us["call"] for us in v] for nm, v in per_call.items()}
        parts = {nm: {part: [us[part] for us in v] for part in ("split", "reduce")}
                 for nm, v in per_call.items()}
        med = medians(samples)
        part_med = {nm: medians(d) for nm, d in parts.items()}
        row = {"dtype": dtype, "m,n,k": [m, n, k], "b_major": bmaj, "lda": a.stride(0),
               "splits": splits, "config": cfg.name, "kernel": ir.kernel_name,
               "verified": bool(ir.report.holds), "first_call": first, "median_us": med,
               "median_us_per_kernel": part_med,
               "ir_over_template": med["template"] / med["ir"],
               "bitwise_equal": bool(torch.equal(o_ir, o_tp)),
               "all_written": bool(torch.isfinite(o_ir.float()).all()), "rel_err": err,
               "samples_us": samples}
        rows.append(row)
        print_row(row, "samples_us")
    res = {**run_header(), "rows": rows}
    (out_dir / "nvidia_wgmma_rt_split_ir.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
