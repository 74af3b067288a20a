"""One-launch (inline-reduce) split-K against the two-launch path (kernel + reduce), on an
H100/H200 (issue 20).

    python3 benchmarks/gpu_splitk_inline.py [--out DIR] [--quick]

1. bitwise: for each split-K tile of ``gemm_select.SPLIT_TILES``, f16 and bf16, b_major n/k,
   problems with edge tiles (and the suite's skinny shapes), splits 1, 2, 3, 7 and 16: the
   inline configuration's output is bitwise equal to the two-launch one's, on two calls in a
   row (the second re-uses the arrival counters the first left at zero) and on a second
   stream;
2. timing at the suite's split-K shapes, each tile and split count the selection considers:
   device time (CUPTI), wall (CUDA events around one call, as ``gpu.py --suite``) and host
   time per call (300 calls back to back) of both forms, and cuBLAS;
3. a cProfile of 300 ``dispatch.gemm`` calls at 16x4096x4096 bf16 (the host path).

Writes ``splitk_inline.json`` and ``splitk_inline_profile.txt`` to ``--out`` (default
``$OUT``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import host_seconds, run_header  # noqa: E402

SUITE_SPLIT = [(16, 4096, 4096), (1, 4096, 4096), (64, 4096, 4096), (16, 14336, 4096),
               (128, 4096, 14336), (1024, 1024, 16384)]
EDGE = [(200, 304, 1000), (1, 8, 8), (129, 1000, 4104), (77, 264, 3000)]


def host_us(fn, n=300):
    return host_seconds(fn, n) * 1e6


def configs():
    """Every TMA split-K configuration this script runs (both reduce forms)."""
    from kernels.nvidia.gemm_select import SPLIT_TILES
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    return [TmaGemmConfig(dtype=d, b_major=bmaj, bm=bm, bn=bn, stages=st, store="direct",
                          split_k=True, reduce=red)
            for bm, bn, st in SPLIT_TILES for d in ("f16", "bf16") for bmaj in ("n", "k")
            for red in ("kernel", "inline") if red == "kernel" or bn <= 128]


def _compile(cfg) -> str:
    from kernels.nvidia.wgmma_tma import TmaGemm
    TmaGemm(cfg).module
    return cfg.name


def precompile() -> None:
    """Compile every configuration in parallel processes into the on-disk cache (NVRTC is
    single-threaded; the timed process then loads cubins)."""
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as ex:
        list(ex.map(_compile, configs()))


def bitwise(torch, quick: bool) -> list:
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.gemm_select import SPLIT_TILES
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    rows = []
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    shapes = EDGE + SUITE_SPLIT[:3] + ([] if quick else SUITE_SPLIT[3:])
    side = torch.cuda.Stream()
    for bm, bn, st in SPLIT_TILES:
        if bn > 128:            # no inline form (see TmaGemmConfig's validation)
            continue
        for d, dtype in dts.items():
            for bmaj in ("n", "k"):
                base = TmaGemmConfig(dtype=d, b_major=bmaj, bm=bm, bn=bn, stages=st,
                                     store="direct", split_k=True)
                two = compiled_gemm(base)
                one = compiled_gemm(TmaGemmConfig(**{**base.__dict__, "reduce": "inline"}))
                for M, N, K in shapes:
                    a = torch.randn(M, K, dtype=dtype, device="cuda")
                    b = torch.randn((K, N) if bmaj == "n" else (N, K), dtype=dtype, device="cuda")
                    for s in (1, 2, 3, 7, 16):
                        ref = two(a, b, splits=s)
                        o1 = one(a, b, splits=s)
                        o2 = one(a, b, splits=s)
                        with torch.cuda.stream(side):
                            o3 = one(a, b, splits=s)
                        torch.cuda.synchronize()
                        eq = [bool(torch.equal(ref.view(torch.int16), o.view(torch.int16)))
                              for o in (o1, o2, o3)]
                        rows.append({"cfg": one.cfg.name, "M": M, "N": N, "K": K, "splits": s,
                                     "equal": eq})
                        if not all(eq):
                            print("MISMATCH", json.dumps(rows[-1]), flush=True)
    bad = [r for r in rows if not all(r["equal"])]
    print(json.dumps({"bitwise_cases": len(rows), "mismatches": len(bad)}), flush=True)
    return rows


def timing(torch, reps: int) -> list:
    from gpu import bench
    from gpu_suite import device_time
    from kernels.nvidia.dispatch import choose_gemm, compiled_gemm
    from kernels.nvidia.gemm_select import SPLIT_TILES, split_estimate
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    from kernels.selection import GemmProblem
    rows = []
    for M, N, K in SUITE_SPLIT + [(16, 4000, 4096)]:     # + edge tiles in N
        a = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(K, N, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
        choice = choose_gemm(a, b)
        target = __import__("kernels.nvidia.dispatch", fromlist=["x"]).device_target(a)
        p = GemmProblem(M, N, K, "bf16", "n", 8)
        cub = {"dev": device_time(lambda: torch.matmul(a, b), reps),
               "wall": bench(lambda: torch.matmul(a, b), reps=reps)[0],
               "host": host_us(lambda: torch.matmul(a, b))}
        from kernels.nvidia.dispatch import gemm
        fn = lambda: gemm(a, b, out)                             # noqa: E731
        r = {"M": M, "N": N, "K": K, "cfg": "dispatch.gemm", "splits": choice.splits,
             "reduce": choice.config.reduce, "dev_us": device_time(fn, reps) * 1e6,
             "wall_us": bench(fn, reps=reps)[0] * 1e6, "host_us": host_us(fn),
             "cublas_dev_us": cub["dev"] * 1e6, "cublas_wall_us": cub["wall"] * 1e6,
             "cublas_host_us": cub["host"], "choice": str(choice), "est_us": None}
        rows.append(r)
        print(json.dumps(r), flush=True)
        for bm, bn, st in SPLIT_TILES:
            est, s0, _ = split_estimate(p, target, bm, bn)
            for s in sorted({1, s0, max(1, s0 // 2)}):
                for red in ("kernel", "inline")[:2 if bn <= 128 else 1]:
                    g = compiled_gemm(TmaGemmConfig(dtype="bf16", bm=bm, bn=bn, stages=st,
                                                    store="direct", split_k=True, reduce=red))
                    fn = lambda: g(a, b, out, splits=s)          # noqa: E731
                    r = {"M": M, "N": N, "K": K, "cfg": g.cfg.name, "splits": s,
                         "reduce": red, "est_us": est * 1e6 if s == s0 else None,
                         "dev_us": device_time(fn, reps) * 1e6,
                         "wall_us": bench(fn, reps=reps)[0] * 1e6, "host_us": host_us(fn),
                         "cublas_dev_us": cub["dev"] * 1e6, "cublas_wall_us": cub["wall"] * 1e6,
                         "cublas_host_us": cub["host"], "choice": str(choice)}
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    return rows


def profile(torch, out_dir: Path) -> None:
    from kernels.nvidia import dispatch as D
    a = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(16, 4096, dtype=torch.bfloat16, device="cuda")
    for _ in range(5):
        D.gemm(a, b, c)
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(300):
        D.gemm(a, b, c)
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
    (out_dir / "splitk_inline_profile.txt").write_text(s.getvalue())
    print(s.getvalue()[:6000], flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--skip", default="", help="comma list of parts to skip: bitwise,timing,profile")
    args = ap.parse_args(argv)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    res = run_header()
    t0 = time.time()
    precompile()
    print("precompile s", time.time() - t0, flush=True)
    if "bitwise" not in skip:
        res["bitwise"] = bitwise(torch, args.quick)
    print("bitwise s", time.time() - t0, flush=True)
    if "timing" not in skip:
        res["timing"] = timing(torch, args.reps)
    print("timing s", time.time() - t0, flush=True)
    if "profile" not in skip:
        profile(torch, out_dir)
    (out_dir / "splitk_inline.json").write_text(json.dumps(res, indent=1))
    return 0 if all(all(r["equal"]) for r in res.get("bitwise", [])) else 1


if __name__ == "__main__":
    raise SystemExit(main())
