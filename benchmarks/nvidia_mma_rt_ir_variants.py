"""Diagnostic (issue 20 item 1): text variants of the IR-built mma.sync GEMM's printed source
(kernels.nvidia.gemm_rt_ir; the variants are NOT verified, timing only) against the template
CudaGemm and the built IR form: edge-free N-major shapes (where the IR form measured
0.96-0.97x), B K-major and edge shapes; interleaved rounds, profiler device time, medians;
outputs compared bitwise with the template's.  Variants: "u<S>", the k loop ``#pragma unroll
<stages>`` (each copy of the body then has a constant stage: every stage offset an immediate);
"ring", the stage kept in a ring counter (``rs = rs + 1 == S ? 0 : rs + 1``) as the template
keeps it; "u<S>_noguard", unrolled and the next tile's first fragments loaded unconditionally
as the template does (an earlier run measured the unconditional load the same as the guarded
one, docs/PERFORMANCE.md).

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


#: (M, N, K, dtype, B major): edge-free N-major first, then B K-major, then edges
SHAPES = [(4096, 4096, 4096, "f16", "n"), (2048, 2048, 2048, "bf16", "n"),
          (1024, 1024, 16384, "bf16", "n"), (128, 4096, 14336, "bf16", "n"),
          (4096, 14336, 4096, "bf16", "n"), (8192, 8192, 8192, "bf16", "n"),
          (4096, 4096, 4096, "f16", "k"), (2048, 2048, 2048, "bf16", "k"),
          (4000, 3000, 1000, "f16", "n"), (4097, 4097, 4097, "f16", "n"),
          (777, 333, 130, "f16", "n")]

LOOP = "  for (int kt = 0; kt < KT; ++kt) {\n    const int rs = ((kt) % {S});\n" \
       "    const int rn = ((kt + 1) % {S});"


def variants(S: int):
    """``(name, [(old, new), ...])``: text edits of the built source (``S`` stages)."""
    head = LOOP.replace("{S}", str(S))
    pragma = f"  #pragma unroll {S}\n"
    ring = ("  int rs_r = 0;\n  for (int kt = 0; kt < KT; ++kt, rs_r = (rs_r + 1 == {S} ? 0 : "
            "rs_r + 1)) {\n    const int rs = rs_r;\n    const int rn = (rs_r + 1 == {S} ? 0 : "
            "rs_r + 1);").replace("{S}", str(S))
    noguard = ("    if (kt + 1 < KT) {\n      lg_ldmatrix_x4(af[0]", "    {\n      lg_ldmatrix_x4(af[0]")
    return [(f"u{S}", [(head, pragma + head)]),
            ("ring", [(head, ring)]),
            (f"u{S}_noguard", [(head, pragma + head), noguard])]


def main() -> None:
    import torch
    from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    rows = []
    for m, n, k, dt, bmaj in SHAPES:
        cfg = CudaGemmConfig(dtype=dt, b_major=bmaj)
        ir = IrMmaRtGemm(cfg)
        kinds = {"template": (CudaGemm(cfg), cfg.name), "ir": (ir, ir.kernel_name)}
        for name, edits in variants(cfg.stages):
            v = variant(ir, name, edits)
            kinds[name] = (v, v.kernel_name)
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
        a = torch.randn((m, k), device="cuda").to(tdt)
        b = torch.randn((k, n) if bmaj == "n" else (n, k), device="cuda").to(tdt)
        outs = {}
        runs = {}
        for nm, (g, kn) in kinds.items():
            outs[nm] = torch.full((m, n), float("nan"), dtype=tdt, device="cuda")
            runs[nm] = g.bound(a, b, outs[nm])
            runs[nm](a, b, outs[nm])
        torch.cuda.synchronize()
        same = {nm: bool(torch.equal(outs[nm], outs["template"])) for nm in kinds}
        samples = {nm: [] for nm in kinds}
        reps = 2 if m * n * k > 2 ** 38 else 4 if m * n * k > 2 ** 36 else 10
        order = list(kinds)
        for r in range(4):
            for nm in (order if r % 2 == 0 else order[::-1]):
                ev = [e.device_time for e in kernel_events(lambda: runs[nm](a, b, outs[nm]), reps)
                      if e.name == kinds[nm][1] and e.device_time > 0]
                samples[nm] += ev
        med = {nm: statistics.median(v) for nm, v in samples.items()}
        row = {"shape": [m, n, k, dt, bmaj], "median_us": med, "bitwise_vs_template": same,
               "speed_vs_template": {nm: med["template"] / v for nm, v in med.items()}}
        rows.append(row)
        print(json.dumps({"shape": row["shape"], "bitwise": all(same.values()),
                          "speed": {nm: round(x, 3) for nm, x in
                                    row["speed_vs_template"].items()}}), flush=True)
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "variants.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
