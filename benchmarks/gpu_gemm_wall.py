"""Why the suite's GEMM wall ratio moves between runs (issue 20; session 11 read 0.49x at
4000x3000x1000 and 0.57x at 128x4096x14336 by wall, 0.90x / 1.20x by device time).

    python3 benchmarks/gpu_gemm_wall.py [--out DIR] [--rounds 6]

For five suite shapes, ``dispatch.gemm(a, b, out)`` (ours) and ``torch.matmul(a, b)``
(cuBLAS), every tensor allocated once and kept (so :func:`gpu_suite.settle` releases nothing
and waits only for a quiet probe), in ``--rounds`` rounds; each round, per shape:

* the suite's own pair, in the suite's order: :func:`gpu_suite.settle`, then
  :func:`gpu_suite.timed` of the first call, then of the second (device time by CUPTI, then
  ``gpu.bench``: CUDA events around each call, median of 10) -- ours first in even rounds,
  cuBLAS first in odd ones, so an order effect shows as a first/second difference;
* then, per call: ``host_us`` (mean host time of 300 back-to-back calls, no sync inside),
  ``wall100_us`` (the suite's wall with 100 calls), ``b2b_us`` (300 calls back to back
  between two CUDA events: the GPU's time per call when the host runs ahead).

The call's wall by events around ONE call is the host time up to its last launch plus the
last kernel whenever the host time per call exceeds the device time (the GPU has no queue);
``b2b`` drops to the device time when the host keeps up.  A cProfile of 300 calls of ours at
the two low shapes says where the host time goes.  Writes ``gemm_wall.json`` / ``.txt`` and
``gemm_wall_profile.txt`` to ``--out``.  ``--root TREE`` imports ``kernels`` (and the suite's
helpers) from another checkout (a baseline, in the same call).  ``--copy-experiment``: the
padded call's B copy (torch ``copy_`` on the wide views, what ``row_copier`` does) against
the driver's ``cuMemcpy2DAsync`` of the same rows, host and back-to-back time, result checked.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, event_round_us, gpu_clocks, host_seconds, write_report  # noqa: E402

SHAPES = [(4000, 3000, 1000, "f16"), (128, 4096, 14336, "bf16"), (2048, 2048, 2048, "bf16"),
          (16, 4096, 4096, "bf16"), (1024, 1024, 16384, "bf16")]


def main(argv=None) -> int:
    ap = bench_parser(10, __doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--root", default=None)
    ap.add_argument("--copy-experiment", action="store_true")
    args = ap.parse_args(argv)
    if args.root:
        sys.path.insert(0, str(Path(args.root).resolve()))
    import torch
    from benchmarks.gpu import bench, env_info
    from benchmarks.gpu_suite import settle, timed
    from kernels.nvidia import dispatch as D
    torch.backends.cuda.matmul.allow_tf32 = False
    info = env_info()
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}
    calls, checks = {}, {}
    for M, N, K, d in SHAPES:
        a = torch.randn(M, K, dtype=dt[d], device="cuda")
        b = torch.randn(K, N, dtype=dt[d], device="cuda")
        c = torch.full((M, N), float("nan"), dtype=dt[d], device="cuda")
        name = f"{M}x{N}x{K}"
        D.gemm(a, b, c)
        ref = a.float() @ b.float()
        checks[name] = {"rel_err": ((c.float() - ref).norm() / ref.norm()).item(),
                        "choice": str(D.choose_gemm(a, b)).split(":")[0]}
        del ref
        calls[name] = {"ours": (lambda a=a, b=b, c=c: D.gemm(a, b, c)),
                       "cublas": (lambda a=a, b=b: torch.matmul(a, b))}
        print(name, checks[name], flush=True)
    torch.cuda.synchronize()
    meas = []
    for r in range(args.rounds):
        clocks = gpu_clocks(10)
        names = list(calls) if r % 2 == 0 else list(calls)[::-1]
        for name in names:
            order = ("ours", "cublas") if r % 2 == 0 else ("cublas", "ours")
            row = {"round": r, "shape": name, "first": order[0], "clocks": clocks}
            settle(row)
            for pos, impl in enumerate(order):
                t = timed(calls[name][impl], args.reps, bench)
                row[f"{impl}_device_us"] = t["device_s"] * 1e6
                row[f"{impl}_wall10_us"] = t["wall_s"] * 1e6
                row[f"{impl}_pos"] = pos
            for impl in order:
                fn = calls[name][impl]
                row[f"{impl}_host_us"] = host_seconds(fn, 300) * 1e6
                row[f"{impl}_wall100_us"] = bench(fn, reps=100)[0] * 1e6
                fn()
                torch.cuda.synchronize()
                row[f"{impl}_b2b_us"] = event_round_us(fn, 300)
            meas.append(row)
            print(row, flush=True)
    prof_text = []
    for name in ("4000x3000x1000", "128x4096x14336"):
        fn = calls[name]["ours"]
        fn()
        torch.cuda.synchronize()
        p = cProfile.Profile()
        p.enable()
        for _ in range(300):
            fn()
        p.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(p, stream=s).sort_stats("tottime").print_stats(18)
        prof_text.append(f"cProfile, 300 calls of gemm(a, b, c) {name}\n{s.getvalue()}")
    copy = copy_experiment(torch, args.reps) if args.copy_experiment else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_wall_profile.txt").write_text("\n".join(prof_text))
    keys = ("device_us", "wall10_us", "wall100_us", "host_us", "b2b_us")
    lines = [f"device: {info['device']}, driver {info.get('driver')}, torch {info['torch']}, "
             f"{info['date']}", f"command: {info['command']}",
             f"medians over {args.rounds} rounds (us); x = cuBLAS / ours; wall10 = the suite's "
             "wall (events around one call, median of 10), first/second = ours timed first / "
             "second after settle()", "",
             f"{'shape':<16}{'impl':<7}" + "".join(f"{k[:-3]:>9}" for k in keys)
             + f"{'w10 1st':>9}{'w10 2nd':>9}"]
    summary = {}
    for name in calls:
        rows = [m for m in meas if m["shape"] == name]
        med = {impl: {k: statistics.median(m[f"{impl}_{k}"] for m in rows) for k in keys}
               for impl in ("ours", "cublas")}
        for impl in ("ours", "cublas"):
            by_pos = [[m[f"{impl}_wall10_us"] for m in rows if m[f"{impl}_pos"] == p]
                      for p in (0, 1)]
            med[impl]["wall10_first"], med[impl]["wall10_second"] = (
                statistics.median(v) if v else float("nan") for v in by_pos)
            lines.append(f"{name:<16}{impl:<7}" + "".join(f"{med[impl][k]:>9.1f}" for k in keys)
                         + f"{med[impl]['wall10_first']:>9.1f}{med[impl]['wall10_second']:>9.1f}")
        ratio = {k: med["cublas"][k] / med["ours"][k] for k in keys}
        lines.append(f"{'':<16}{'x':<7}" + "".join(f"{ratio[k]:>9.2f}" for k in keys))
        summary[name] = {"median": med, "ratio": ratio, **checks[name],
                         "wall10_ours_all": [m["ours_wall10_us"] for m in rows],
                         "wall10_cublas_all": [m["cublas_wall10_us"] for m in rows]}
    if copy:
        lines += ["", "B copy of 4000x3000x1000 (1000 rows of 6000 bytes onto 6016-byte rows), "
                  "us per call, medians of 5:"] + [
            f"  {k:<10} host {v['host_us']:6.1f}  back-to-back {v['b2b_us']:6.1f}  "
            f"equal {v['equal']}" for k, v in copy.items()]
    write_report(out, "gemm_wall", lines, {"env": info, "summary": summary, "rows": meas,
                                           "copy": copy, "root": args.root})
    return 0


def copy_experiment(torch, reps: int) -> dict:
    """torch's wide-view ``copy_`` (``wgmma_tma.row_copier``) against ``cuMemcpy2DAsync`` for
    the padded B of 4000x3000x1000 f16: host us per call (300 back to back), back-to-back us
    per call (events around 300), and whether the buffer equals B afterwards."""
    from cuda.bindings import driver as drv
    from kernels.nvidia.wgmma_tma import padded_empty, row_copier
    b = torch.randn(1000, 3000, dtype=torch.float16, device="cuda")
    res = {}
    for name in ("torch", "memcpy2d", "torch 2", "memcpy2d 2"):
        pb = padded_empty(b, 128)
        pb.zero_()
        if name.split()[0] == "torch":
            cp = row_copier(pb, b)
            fn = (lambda cp=cp: cp(b))
        else:
            p = drv.CUDA_MEMCPY2D()
            p.srcMemoryType = p.dstMemoryType = drv.CUmemorytype.CU_MEMORYTYPE_DEVICE
            p.srcDevice, p.srcPitch = b.data_ptr(), b.stride(0) * 2
            p.dstDevice, p.dstPitch = pb.data_ptr(), pb.stride(0) * 2
            p.WidthInBytes, p.Height = b.shape[1] * 2, b.shape[0]
            st = drv.CUstream(torch.cuda.current_stream().cuda_stream)

            def fn(p=p, st=st):
                (err,) = drv.cuMemcpy2DAsync(p, st)
                if int(err):
                    raise RuntimeError(f"cuMemcpy2DAsync: {err}")
        hosts, b2bs = [], []
        for _ in range(5):
            hosts.append(host_seconds(fn, 300) * 1e6)
            fn()
            torch.cuda.synchronize()
            b2bs.append(event_round_us(fn, 300))
        res[name] = {"host_us": statistics.median(hosts), "b2b_us": statistics.median(b2bs),
                     "equal": bool(torch.equal(pb[:, :b.shape[1]], b))}
        print(name, res[name], flush=True)
    return res


if __name__ == "__main__":
    sys.exit(main())
