"""The GEMM suite's rows furthest below cuBLAS by device time, with candidate kernels timed beside
cuBLAS in one run (issue 20; H100/H200).

    python3 benchmarks/gpu_gemm_low.py [--out DIR] [--reps 10] [--skip bitwise,timing]

1. bitwise: each short-A-box configuration (``TmaGemmConfig(a_rows=8/16/32)``) against the
   same tile with the whole 64-row box, on problems of at most ``a_rows`` rows with edge tiles
   (odd N, K not a multiple of 64) and the suite's skinny shapes, splits 1, 2, 3, 7 and 16:
   ``torch.equal`` (same k order, so the bits must be), and the relative error against a
   float32 ``torch.matmul`` (the first run of 2026-11-24 12:31Z did the same for
   ``ctas_per_sm=2`` against one CTA per SM: 280 cases, 0 mismatches);
2. timing: per weak row (64/32/16/1x4096x4096 and 8x8192x8192, 4000x3000x1000 and two more
   problems whose B rows straddle 128-byte lines, 777x333x130, and the two split-K rows that
   must not get slower), the dispatched kernel beside candidate tiles, split counts, CTAs per
   SM and A box rows, and for straddling rows the kernel on copies of B (or A and B) on
   128-byte lines, with and without the copy; device time = CUPTI medians of ``--reps``
   calls, cuBLAS (``torch.matmul``) in the same process.

Writes ``gemm_low.json`` / ``gemm_low.txt`` to ``--out`` (default ``$OUT``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, run_header, write_report  # noqa: E402


def _tma(dtype="bf16", bm=64, bn=128, stages=8, c=1, store="direct", split=True, bmaj="n",
         a_rows=0):
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    return TmaGemmConfig(dtype=dtype, b_major=bmaj, bm=bm, bn=bn, stages=stages, store=store,
                         split_k=split, reduce="inline" if split else "kernel", ctas_per_sm=c,
                         a_rows=a_rows)


# (tile and stages, CTAs per SM): the skinny candidates.  64x128 with two CTAs holds 4 stages
# each (2 x 97 KiB); 64x64 6 (2 x 97 KiB) or 12 with one CTA
SKINNY = [(64, 128, 8, 1), (64, 128, 4, 2), (64, 64, 12, 1), (64, 64, 6, 2)]


A_ROWS = (8, 16, 32)


def configs():
    cf = [_tma(bm=bm, bn=bn, stages=st, c=c, a_rows=ar) for bm, bn, st, c in SKINNY
          for ar in (0,) + A_ROWS]
    cf += [_tma(d, 64, bn, st, bmaj=bmaj, a_rows=ar) for d in ("f16", "bf16")
           for bmaj in ("n", "k") for bn, st in ((64, 12), (128, 8)) for ar in (0,) + A_ROWS]
    cf += [_tma(bm=128, bn=128, stages=6)]
    cf += [_tma("f16", 128, 256, 3, store="tma", split=False),
           _tma("f16", 128, 192, 4, store="tma", split=False),
           _tma("f16", 128, 128, 6, store="tma", split=False),
           _tma("f16", 128, 256, 4, store="direct", split=False),
           _tma("f16", 64, 64, 12), _tma("f16", 64, 64, 6, c=2), _tma("f16", 64, 128, 8)]
    for bmaj in ("n", "k"):
        for d in ("f16", "bf16"):
            cf += [_tma(d, 64, 128, 4, c=2, bmaj=bmaj), _tma(d, 64, 64, 6, c=2, bmaj=bmaj),
                   _tma(d, 64, 128, 8, bmaj=bmaj), _tma(d, 64, 64, 12, bmaj=bmaj)]
    return list(dict.fromkeys(cf))


def _compile(cfg) -> str:
    from kernels.nvidia.wgmma_tma import TmaGemm
    TmaGemm(cfg).module
    return cfg.name


def precompile() -> None:
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as ex:
        list(ex.map(_compile, configs()))


EDGE = [(200, 304, 1000), (1, 8, 8), (129, 1000, 4104), (5, 264, 3000), (64, 4096, 4096),
        (16, 4000, 4096), (1, 4096, 4096)]


def bitwise(torch) -> list:
    from kernels.nvidia.dispatch import compiled_gemm
    from dataclasses import replace
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    rows = []
    for cfg in configs():
        if cfg.ctas_per_sm != 1 or not cfg.a_rows:
            continue
        two = compiled_gemm(cfg)
        one = compiled_gemm(replace(cfg, a_rows=0))
        for M, N, K in EDGE:
            M = min(M, cfg.a_rows)
            a = torch.randn(M, K, dtype=dts[cfg.dtype], device="cuda")
            b = torch.randn((K, N) if cfg.b_major == "n" else (N, K), dtype=dts[cfg.dtype],
                            device="cuda")
            ref32 = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
            for s in (1, 2, 3, 7, 16):
                o1 = one(a, b, splits=s)
                o2 = two(a, b, splits=s)
                o3 = two(a, b, splits=s)
                torch.cuda.synchronize()
                eq = [bool(torch.equal(o1.view(torch.int16), o.view(torch.int16)))
                      for o in (o2, o3)]
                err = ((o2.float() - ref32).norm() / ref32.norm().clamp_min(1e-30)).item()
                rows.append({"cfg": cfg.name, "ref": one.cfg.name, "M": M, "N": N, "K": K,
                             "splits": s, "equal": eq, "rel_err": err})
                if not all(eq) or not err < 1e-2:
                    print("MISMATCH", json.dumps(rows[-1]), flush=True)
    bad = [r for r in rows if not all(r["equal"]) or not r["rel_err"] < 1e-2]
    print(json.dumps({"bitwise_cases": len(rows), "mismatches": len(bad)}), flush=True)
    return rows


def _cands(M, N, K, dtype):
    """(label, config or None for dispatch, splits, pad) of one row."""
    from kernels.selection import cdiv
    out = [("dispatch", None, 0, "")]
    kt = cdiv(K, 64)
    if M <= 128 or K >= 8 * max(M, N) // 2:
        ar = next((r for r in A_ROWS if M <= r), 0)
        for bm, bn, st, c in SKINNY + [(128, 128, 6, 1)]:
            if bm == 128 and M <= 64:
                continue
            tiles = cdiv(M, bm) * cdiv(N, bn)
            for s in (1, 2, 4, 8):
                if s > max(1, kt // 4) or tiles * s > 2 * 132 * c:
                    continue
                for a in sorted({0, ar if bm == 64 else 0}):
                    out.append((f"{bm}x{bn} s{st} c{c} a{a} split {s}",
                                _tma(dtype, bm, bn, st, c=c, a_rows=a), s, ""))
    elif N % 8 == 0:
        cfg = _tma(dtype, 128, 256, 3, store="tma", split=False)
        for pad in ("", "b", "ab"):
            out.append(("128x256 s3 tma" + (f" pad {pad}" if pad else ""), cfg, 1, pad))
    if (M, N, K) == (777, 333, 130):
        out.append(("TMA 64x64 c1 on padded rows", _tma(dtype, 64, 64, 12), 1, "ab"))
    return out


SHAPES = [(64, 4096, 4096, "bf16"), (32, 4096, 4096, "bf16"), (16, 4096, 4096, "bf16"),
          (1, 4096, 4096, "bf16"), (4000, 3000, 1000, "f16"), (2048, 3000, 2048, "bf16"),
          (2000, 1000, 3000, "f16"), (777, 333, 130, "f16"), (16, 14336, 4096, "bf16"),
          (128, 4096, 14336, "bf16"), (8, 8192, 8192, "bf16")]


def timing(torch, reps: int) -> list:
    from gpu_suite import device_time, settle
    from kernels.nvidia.dispatch import choose_gemm, compiled_gemm, gemm
    from kernels.nvidia.wgmma_tma import tma_padded, tma_ready
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    rows = []
    for M, N, K, d in SHAPES:
        a = torch.randn(M, K, dtype=dts[d], device="cuda")
        b = torch.randn(K, N, dtype=dts[d], device="cuda")
        out = torch.empty(M, N, dtype=dts[d], device="cuda")
        ref = (a.float() @ b.float())
        settle()
        cub = device_time(lambda: torch.matmul(a, b), reps) * 1e6
        base = {"M": M, "N": N, "K": K, "dtype": d, "cublas_us": cub,
                "choice": str(choose_gemm(a, b))}
        pads = {"": (a, b)}
        for label, cfg, s, pad in _cands(M, N, K, d):
            row = dict(base, cand=label)
            try:
                if cfg is None:
                    fn = lambda: gemm(a, b, out)                      # noqa: E731
                elif cfg == "mma":
                    fn = lambda: gemm(a, b, out, atom="mma")          # noqa: E731
                else:
                    g = compiled_gemm(cfg)
                    if pad not in pads:
                        pads[pad] = (tma_padded(a, 128) if "a" in pad or not tma_ready(a) else a,
                                     tma_padded(b, 128) if "b" in pad or not tma_ready(b) else b)
                    pa, pb = pads[pad]
                    o = out if cfg.store == "direct" or N % 8 == 0 else None
                    fn = (lambda g=g, pa=pa, pb=pb, s=s, o=o: g(pa, pb, o, splits=s))
                    if pad:     # the copy too: the kernel plus what dispatch would pay first
                        def fn_copy(g=g, s=s, o=o, pad=pad):
                            ca = tma_padded(a, 128) if "a" in pad or not tma_ready(a) else a
                            cb = tma_padded(b, 128) if "b" in pad or not tma_ready(b) else b
                            return g(ca, cb, o, splits=s)
                        row["with_copy_us"] = device_time(fn_copy, reps) * 1e6
                res = fn()
                torch.cuda.synchronize()
                row["rel_err"] = ((res.float() - ref).norm() / ref.norm()).item()
                row["dev_us"] = device_time(fn, reps) * 1e6
                row["x_cublas"] = cub / row["dev_us"]
            except Exception as e:      # a candidate that fails is a result, not the end
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv=None) -> int:
    ap = bench_parser(10, __doc__.split("\n")[0])
    ap.add_argument("--skip", default="", help="comma list: bitwise,timing")
    args = ap.parse_args(argv)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    skip = set(filter(None, args.skip.split(",")))
    res = run_header()
    t0 = time.time()
    precompile()
    print("precompile s", round(time.time() - t0, 1), flush=True)
    if "bitwise" not in skip:
        res["bitwise"] = bitwise(torch)
    print("bitwise s", round(time.time() - t0, 1), flush=True)
    if "timing" not in skip:
        res["timing"] = timing(torch, args.reps)
    print("timing s", round(time.time() - t0, 1), flush=True)
    lines = [f"device: {res['device']}, torch {res['torch']}, {res['date']}",
             f"command: {res['command']}", ""]
    for r in res.get("timing", []):
        lines.append(f"{r['M']}x{r['N']}x{r['K']} {r['dtype']:5s} {r['cand']:34s} "
                     + (f"{r['dev_us']:8.1f} us  {r['x_cublas']:.2f}x  "
                        f"(cuBLAS {r['cublas_us']:.1f})" if "dev_us" in r
                        else r.get("error", "?"))
                     + (f"  with copy {r['with_copy_us']:.1f}" if "with_copy_us" in r else ""))
    write_report(args.out, "gemm_low", lines, res)
    bad = [r for r in res.get("bitwise", []) if not all(r["equal"]) or not r["rel_err"] < 1e-2]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
