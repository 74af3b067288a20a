"""Re-measure kernels.amd.gemm_select's candidate table with the static MI300X model.

For every candidate (``--dtype fp8``: ``FP8_CANDIDATES``, block_k already doubled), build the
NN kernel at 4096^3 and at 4000x3000x1000 (every edge predicated), compile it with clang-19 and
print the model's hot-loop MFMA busy, waves/SIMD and instructions outside the hot loop (the
model's prologue / epilogue, less its two memory latencies, at one instruction per 4 clocks):
the six figures a table row carries.  ``--b-layout preshuffled`` (fp8/bf8): the table of the
kernels whose B is preshuffled (``PRESHUFFLED_FP8_CANDIDATES``, built with
``build_gemm_preshuffled``).  A model, not a measurement (no AMD GPU).  ~3 minutes on a 2-core
box.

    PYTHONPATH=. python tools/measure_gemm_candidates.py [--dtype f16|fp8] [--b-layout preshuffled]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = ((4096, 4096, 4096), (4000, 3000, 1000))


def measure(c, dtype: str, m: int, n: int, k: int, b_layout: str = "plain") -> str:
    """``busy/waves-per-SIMD/instructions outside the loop`` of candidate ``c`` on an M x N x K NN kernel, or why not."""
    from kernels.amd.gemm_preshuffle import build_gemm_preshuffled
    from kernels.errors import KernelError
    from kernels.gemm import build_gemm
    from kernels.gemm_plan import GemmConfig
    from kernels.perf import PerfError, analyze
    extra = {"scales": "none", "out_dtype": "f16"} if dtype in ("fp8", "bf8") else {}
    cfg = GemmConfig(m, n, k, dtype=dtype, block_m=c.block_m, block_n=c.block_n,
                     block_k=c.block_k, waves_m=c.waves_m, waves_n=c.waves_n, stages=c.stages,
                     mfma=c.mfma, schedule=c.schedule, waves_per_eu=c.waves_per_eu,
                     b_layout=b_layout, swap_ab=c.swap_ab, **extra)
    try:
        bk = (build_gemm_preshuffled if b_layout == "preshuffled" else build_gemm)(cfg)
        co = bk.compile("gfx942", use_cache=False)
        r = analyze(co.binary, block_threads=bk.block, gemm=f"{m},{n},{k}",
                    tile=f"{c.block_m}x{c.block_n}x{c.block_k}")
    except (KernelError, PerfError) as e:
        return f"- ({str(e)[:70]})"
    outside = (r.whole_kernel or {}).get("prologue_epilogue_cycles")
    outside = "" if outside is None else f"/{(outside - 2 * 700) // 4}"
    return f"{r.mfma_busy:.3f}/{r.occupancy['waves_per_simd']}{outside}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16", "fp8", "bf8"))
    ap.add_argument("--b-layout", default="plain", choices=("plain", "preshuffled"))
    ap.add_argument("--only", default=None, metavar="BMxBNxBK",
                    help="measure only the candidates whose tile is this (e.g. 224x256x32)")
    args = ap.parse_args(argv)
    from kernels.amd.gemm_select import candidate_table
    table = candidate_table(args.dtype, args.b_layout)
    print("| candidate | table busy/wps/outside | model 4096^3 | table ragged | "
          "model 4000x3000x1000 |")
    print("|---|---|---|---|---|")
    for c in table:
        if args.only and f"{c.block_m}x{c.block_n}x{c.block_k}" != args.only:
            continue
        got = [measure(c, args.dtype, *s, b_layout=args.b_layout) for s in SHAPES]
        print(f"| {c.label()} | {c.busy:.3f}/{c.waves_per_simd}/{c.outside} | {got[0]} | "
              f"{c.busy_ragged}/{c.waves_per_simd_ragged}/{c.outside_ragged} | {got[1]} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
