"""Why is the suite's first timing of B4 H32/8 Skv 4096 d256 after another shape slow? (issue 20)

``gpu_decode_context.py`` showed it (H100, s6): the row reads 0.89 of a device copy alone and
0.76 as the first ``suite_decode`` timing after another shape, over ALL its 10 timed calls
(58 us against 49.5), and the next timing of the same shape is fast again.  This script puts
each candidate cause on its own, on one set of d256 tensors allocated once, and prints the
per-call series (profiler device time, in launch order) of the decode call and of a
device-to-device copy of the same bytes after the same condition (each series on its own: a
copy between decode calls would leave them dirty L2 lines), so a slowdown that fades shows
when it fades:

* ``fresh``: nothing before but the warm-up;
* ``free``: 8 GiB allocated, written, then released by ``torch.cuda.empty_cache()`` (what the
  suite does after each row) right before the timing;
* ``free+sleep``: the same, then 0.3 s idle;
* ``del-cached``: 8 GiB allocated and written, ``del`` only (the allocator keeps it);
* ``big-kernels``: the B8 H32/8 Skv 32K d128 decode 20 times on tensors allocated long before
  (L2 contents, clocks, power after 1 GB-a-call work), no allocation or free;
* ``suite``: ``gpu_suite.suite_decode`` itself over [B8 H32/8 32K d128, the d256 row, the d256
  row] (the slow pattern, by the suite's own code).

    python3 benchmarks/gpu_decode_firstcall.py [--out DIR] [--reps 200]

Writes ``decode_firstcall.txt`` / ``.json``; clocks (nvidia-smi) after each condition.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, gpu_clocks, write_report  # noqa: E402

ROW = (4, 32, 8, 4096, 256)
BIG = (8, 32, 8, 32768, 128)
WINDOWS = ((0, 10), (10, 20), (20, 50), (50, 100), (100, 200), (200, 400), (400, 1000))


def clocks() -> str:
    return gpu_clocks(timeout=20)


def tensors(shape):
    import torch
    B, Hq, Hkv, Skv, D = shape
    q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(B, Hq, 1, D, dtype=torch.float16, device="cuda")
    nbytes = (q.numel() + k.numel() + v.numel() + out.numel()) * 2
    return q, k, v, out, nbytes


def series(fn, reps):
    """Per-call device microseconds of ``fn`` (all its kernels of one call summed; a call
    starts at each kernel named like the first), ``reps`` calls in one profile, and the GPU
    time span of the profile in ms."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    evs = sorted((e.time_range.start, e.time_range.end, e.name, e.device_time)
                 for e in prof.events() if e.device_type.name == "CUDA" and e.device_time > 0)
    calls = []
    for _, _, name, us in evs:
        if name == evs[0][2] or not calls:
            calls.append(0.0)
        calls[-1] += us
    span = (evs[-1][1] - evs[0][0]) / 1e3 if evs else 0.0
    return calls, span


def summarise(tag, d, c, span, nbytes, copy_gbps):
    win = []
    for a, b in WINDOWS:
        if len(d) > a and len(c) > a:
            md, mc = statistics.median(d[a:b]), statistics.median(c[a:b])
            win.append(dict(calls=f"{a}-{min(b, len(d))}", dec_us=md, copy_us=mc,
                            of_copy_same=mc / md, of_copy_ref=nbytes / md / 1e3 / copy_gbps))
    return dict(condition=tag, span_ms=span, windows=win, dec_us=d, copy_us=c)


def main() -> int:
    ap = bench_parser(reps=200)
    args = ap.parse_args()
    import torch
    import gpu_suite
    from gpu import bench
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    copy_gbps = gpu_suite.copy_device_gbps(10)
    q, k, v, out, nbytes = tensors(ROW)
    # the copy side moves the same bytes: read nbytes / 2, write nbytes / 2
    src = torch.randint(0, 255, (nbytes // 2,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dec = lambda: decode_attention(q, k, v, out=out)
    cp = lambda: dst.copy_(src)
    bq, bk, bv, bout, _ = tensors(BIG)
    big = lambda: decode_attention(bq, bk, bv, out=bout)
    for f in (dec, cp, big):
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    res = dict(copy_GBps_1GiB=copy_gbps, choice=str(choose_decode(q, k)), bytes=nbytes,
               conditions=[])

    def big_alloc():
        x = torch.empty(8 * 2 ** 30, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        return x

    def cond_fresh():
        time.sleep(0.3)

    def cond_free():
        x = big_alloc()
        del x
        torch.cuda.empty_cache()

    def cond_free_sleep():
        cond_free()
        torch.cuda.synchronize()
        time.sleep(0.3)

    def cond_del_cached():
        x = big_alloc()
        del x

    def cond_big_kernels():
        for _ in range(20):
            big()

    conds = [("fresh", cond_fresh), ("free", cond_free), ("free+sleep", cond_free_sleep),
             ("del-cached", cond_del_cached), ("big-kernels", cond_big_kernels),
             ("free again", cond_free), ("fresh again", cond_fresh)]
    lines = [f"copy (1 GiB, profiler) {copy_gbps:.0f} GB/s; {res['choice']}",
             f"{'condition':<13}{'calls':>9}{'dec us':>8}{'copy us':>8}{'of copy (same calls)':>22}"
             f"{'of 1GiB copy':>14}"]
    for tag, setup in conds:
        setup()
        d, span = series(dec, args.reps)
        setup()                 # the copy under the same condition, on its own (a copy
        c, _ = series(cp, args.reps)    # between decode calls would leave dirty L2 lines)
        s = summarise(tag, d, c, span, nbytes, copy_gbps)
        s["clocks_after"] = clocks()
        res["conditions"].append(s)
        for w in s["windows"]:
            lines.append(f"{tag:<13}{w['calls']:>9}{w['dec_us']:>8.1f}{w['copy_us']:>8.1f}"
                         f"{w['of_copy_same']:>22.3f}{w['of_copy_ref']:>14.3f}")
        lines.append(f"{'':<13} span {span:.1f} ms; clocks after: {s['clocks_after']}")
        print("\n".join(lines[-len(s['windows']) - 1:]), flush=True)
    del bq, bk, bv, bout
    # the suite's own code path: the slow pattern, then the same rows with a settle
    saved = list(gpu_suite.DECODE_SHAPES)
    try:
        gpu_suite.DECODE_SHAPES[:] = [BIG, ROW, ROW]
        rows = []
        gpu_suite.suite_decode(rows, 10, bench, copy_gbps)
    finally:
        gpu_suite.DECODE_SHAPES[:] = saved
    res["suite_rows"] = rows
    for r in rows:
        lines.append(f"suite_decode B{r['B']} H{r['Hq']}/{r['Hkv']} {r['Skv']} d{r['D']}: "
                     f"{r.get('of_copy_device', float('nan')):.3f} of copy, "
                     f"{r.get('ours_device_s', float('nan')) * 1e6:.1f} us {r.get('error', '')}")
    write_report(args.out, "decode_firstcall", lines, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
