"""The IR-built mma.sync GEMM (kernels.nvidia.gemm_ir, verified) against the string-template
one (kernels.nvidia.gemm.CudaGemm) and torch (cuBLAS) on the same inputs, one run; with
``--wgmma`` the IR-built cp.async + wgmma GEMM (kernels.nvidia.wgmma_ir) against the template
of kernels.nvidia.wgmma instead; with ``--tma`` the IR-built TMA GEMM (kernels.nvidia.
wgmma_tma_ir) against the template of kernels.nvidia.wgmma_tma (the default NVIDIA GEMM).

    python3 benchmarks/nvidia_ir_gemm.py --out results.json
    python3 benchmarks/nvidia_ir_gemm.py --wgmma --out results.json
    python3 benchmarks/nvidia_ir_gemm.py --tma --out results.json

Best of 3 interleaved rounds of the median of 20 timed launches after 3 warm-ups (CUDA events);
also reports whether the IR kernel's output is bitwise equal to the template's.
"""

from __future__ import annotations

import argparse
import json

import torch

from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig
from kernels.nvidia.gemm_ir import IrMmaGemm
from kernels.nvidia.wgmma import WgmmaGemm, WgmmaGemmConfig
from kernels.nvidia.wgmma_ir import IrWgmmaGemm
from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import IrTmaGemm

from gpu_timing import write_rows_json

# (dtype, m, n, k) per kernel family (the wgmma sizes keep the verification of every k tile on
# the device's CPU short)
SHAPES = {"mma": (("f16", 2048, 2048, 2048), ("f16", 4096, 4096, 4096),
                  ("bf16", 4096, 4096, 4096)),
          "wgmma": (("f16", 4096, 4096, 1024), ("bf16", 4096, 4096, 1024)),
          "tma": (("f16", 4096, 4096, 4096), ("bf16", 4096, 4096, 4096),
                  ("f16", 8192, 8192, 8192), ("bf16", 8192, 8192, 8192))}


def _time(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--wgmma", action="store_true", help="the IR-built wgmma GEMM")
    ap.add_argument("--tma", action="store_true", help="the IR-built TMA GEMM")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    rows = []
    fam = "tma" if args.tma else "wgmma" if args.wgmma else "mma"
    for dtype, m, n, k in SHAPES[fam]:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        a = torch.randn((m, k), device="cuda").to(dt)
        b = torch.randn((k, n), device="cuda").to(dt)
        if args.tma:        # the selection's tile at these shapes (kernels.nvidia.gemm_select)
            cfg = TmaGemmConfig(dtype=dtype)
            ir, tpl = IrTmaGemm(cfg), TmaGemm(cfg)
        elif args.wgmma:
            cfg = WgmmaGemmConfig(dtype=dtype)
            ir, tpl = IrWgmmaGemm(cfg, m, n, k), WgmmaGemm(cfg)
        else:
            cfg = CudaGemmConfig(dtype=dtype)
            ir, tpl = IrMmaGemm(cfg, m, n, k), CudaGemm(cfg)
        o1 = torch.empty((m, n), dtype=dt, device="cuda")
        o2 = torch.empty_like(o1)
        # interleaved IR / template / cuBLAS rounds so clock drift hits all three alike
        t_ir, t_tpl, t_cublas = [], [], []
        for _ in range(3):
            t_ir.append(_time(lambda: ir(a, b, o1), args.reps))
            t_tpl.append(_time(lambda: tpl(a, b, o2), args.reps))
            t_cublas.append(_time(lambda: a @ b, args.reps))
        t_ir, t_tpl, t_cublas = min(t_ir), min(t_tpl), min(t_cublas)
        fl = 2 * m * n * k
        rows.append({"dtype": dtype, "m,n,k": [m, n, k], "config": cfg.name, "ir": ir.ir.name,
                     "verified": bool(ir.report.holds),
                     "ir_ms": t_ir, "template_ms": t_tpl, "cublas_ms": t_cublas,
                     "ir_tflops": fl / t_ir / 1e9, "template_tflops": fl / t_tpl / 1e9,
                     "cublas_tflops": fl / t_cublas / 1e9,
                     "ir_over_template": t_tpl / t_ir, "bitwise_equal": bool(torch.equal(o1, o2))})
        print(json.dumps(rows[-1]))
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
