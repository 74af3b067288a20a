"""The IR-built mma.sync GEMM (kernels.nvidia.gemm_ir, verified) against the string-template
one (kernels.nvidia.gemm.CudaGemm) and torch (cuBLAS) on the same inputs, one run.

    python3 benchmarks/nvidia_ir_gemm.py --out results.json

Median of 20 timed launches after 3 warm-ups (CUDA events); also reports whether the IR
kernel's output is bitwise equal to the template's.
"""

from __future__ import annotations

import argparse
import json

import torch

from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig
from kernels.nvidia.gemm_ir import IrMmaGemm


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
    args = ap.parse_args()
    rows = []
    for dtype, n in (("f16", 2048), ("f16", 4096), ("bf16", 4096)):
        cfg = CudaGemmConfig(dtype=dtype)
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        a = torch.randn((n, n), device="cuda").to(dt)
        b = torch.randn((n, n), device="cuda").to(dt)
        ir, tpl = IrMmaGemm(cfg, n, n, n), CudaGemm(cfg)
        o1, o2 = torch.empty((n, n), dtype=dt, device="cuda"), torch.empty_like(a)
        t_ir = _time(lambda: ir(a, b, o1))
        t_tpl = _time(lambda: tpl(a, b, o2))
        t_cublas = _time(lambda: a @ b)
        fl = 2 * n ** 3
        rows.append({"dtype": dtype, "m=n=k": n, "config": cfg.name,
                     "ir_ms": t_ir, "template_ms": t_tpl, "cublas_ms": t_cublas,
                     "ir_tflops": fl / t_ir / 1e9, "template_tflops": fl / t_tpl / 1e9,
                     "cublas_tflops": fl / t_cublas / 1e9,
                     "ir_over_template": t_tpl / t_ir, "bitwise_equal": bool(torch.equal(o1, o2))})
        print(json.dumps(rows[-1]))
    res = {"device": torch.cuda.get_device_name(0), "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
