"""Diagnostic (issue 20 item 1): text variants of the IR-built mma.sync GEMM's printed source
(kernels.nvidia.gemm_rt_ir; the variants are NOT verified, timing only) against the template
CudaGemm at four compute-bound shapes: interleaved rounds, profiler device time, medians;
outputs compared bitwise with the template's.  Variant "noguard": the next tile's first
fragments loaded unconditionally, as the template does (it measured the same as the guarded
load, docs/PERFORMANCE.md).

    python3 benchmarks/nvidia_mma_rt_ir_variants.py      (writes $OUT/variants.json)
"""
from __future__ import annotations

import copy
import json
import os
import statistics

from gpu_timing import kernel_events


def variant(g, name, edits):
    v = copy.copy(g)
    src = g.source
    for old, new in edits:
        assert old in src, (name, old)
        src = src.replace(old, new)
    v.source = src.replace(g.kernel_name, g.kernel_name + "_" + name)
    v.kernel_name = g.kernel_name + "_" + name
    v._module = None
    v._calls = type(g._calls)(64)
    return v


SHAPES = [(4096, 4096, 4096, "f16"), (2048, 2048, 2048, "bf16"), (1024, 1024, 16384, "bf16"),
          (8192, 8192, 8192, "bf16")]


def main() -> None:
    import torch
    from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    rows = []
    for m, n, k, dt in SHAPES:
        cfg = CudaGemmConfig(dtype=dt)
        ir = IrMmaRtGemm(cfg)
        kinds = {"template": (CudaGemm(cfg), cfg.name), "ir": (ir, ir.kernel_name)}
        for name, edits in (("noguard", [("if (kt + 1 < KT) {", "{")]),):
            v = variant(ir, name, edits)
            kinds[name] = (v, v.kernel_name)
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
        a = torch.randn((m, k), device="cuda").to(tdt)
        b = torch.randn((k, n), device="cuda").to(tdt)
        outs = {}
        runs = {}
        for nm, (g, kn) in kinds.items():
            outs[nm] = torch.full((m, n), float("nan"), dtype=tdt, device="cuda")
            runs[nm] = g.bound(a, b, outs[nm])
            runs[nm](a, b, outs[nm])
        torch.cuda.synchronize()
        same = {nm: bool(torch.equal(outs[nm], outs["template"])) for nm in kinds}
        samples = {nm: [] for nm in kinds}
        reps = 4 if m * n * k > 2 ** 36 else 10
        order = list(kinds)
        for r in range(4):
            for nm in (order if r % 2 == 0 else order[::-1]):
                ev = [e.device_time for e in kernel_events(lambda: runs[nm](a, b, outs[nm]), reps)
                      if e.name == kinds[nm][1] and e.device_time > 0]
                samples[nm] += ev
        med = {nm: statistics.median(v) for nm, v in samples.items()}
        row = {"shape": [m, n, k, dt], "median_us": med, "bitwise_vs_template": same,
               "speed_vs_template": {nm: med["template"] / v for nm, v in med.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "variants.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
