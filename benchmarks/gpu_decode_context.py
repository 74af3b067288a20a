"""Is the suite's slow head_dim 256 decode row a property of its context? (issue 20)

The same kernel read 0.75 of a device copy in ``gpu.py --suite --only decode`` and 0.84-0.87
in every round of ``gpu_decode_spread.py`` in one session (docs/PERFORMANCE.md, "Why the d256
decode ratio varies").  This times the suite's own decode rows by ``gpu_suite.suite_decode``
(the suite's code path and timing, unchanged) in one process, ``--repeat`` times each:

1. ``alone-first``: the B4 H32/8 Skv 4096 d256 row before anything else;
2. ``suite``: the whole decode list in the suite's order (the row after the 8.5 GB rows);
3. ``alone-after``: the row alone again, after them.

    python3 benchmarks/gpu_decode_context.py [--out DIR] [--reps 10] [--repeat 3]

About a minute on an H100 (the suite list three times).  Run by the lead (H100, 2026-11-24
s6): slow only as the first timing after another shape; ``gpu_decode_firstcall.py`` found why
(the suite's ``empty_cache()`` release before it), and ``suite_decode`` now settles first.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, write_report  # noqa: E402

ROW = (4, 32, 8, 4096, 256)


def run_rows(shapes, tag, reps, bench, copy):
    """``suite_decode`` over ``shapes`` (its module list swapped for the call)."""
    import gpu_suite
    saved = list(gpu_suite.DECODE_SHAPES)
    gpu_suite.DECODE_SHAPES[:] = shapes
    try:
        res = []
        gpu_suite.suite_decode(res, reps, bench, copy)
    finally:
        gpu_suite.DECODE_SHAPES[:] = saved
    for r in res:
        r["context"] = tag
    return res


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import gpu_suite
    from gpu import bench
    copy = gpu_suite.copy_device_gbps(args.reps)
    rows = []
    for i in range(args.repeat):
        rows += run_rows([ROW], f"alone-first {i}", args.reps, bench, copy)
    for i in range(args.repeat):
        rows += run_rows(list(gpu_suite.DECODE_SHAPES), f"suite {i}", args.reps, bench, copy)
    for i in range(args.repeat):
        rows += run_rows([ROW], f"alone-after {i}", args.reps, bench, copy)
    lines = [f"copy {copy:.0f} GB/s"]
    for r in rows:
        if (r["B"], r["Hq"], r["Hkv"], r["Skv"], r["D"]) == ROW or r["context"].startswith("suite"):
            lines.append(f"{r['context']:<14} B{r['B']} H{r['Hq']}/{r['Hkv']} {r['Skv']} d{r['D']}: "
                         f"{r.get('of_copy_device', float('nan')):.3f} of copy, "
                         f"{r.get('ours_device_s', float('nan')) * 1e6:.1f} us {r.get('error', '')}")
    write_report(args.out, "decode_context", lines, dict(copy_GBps=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
