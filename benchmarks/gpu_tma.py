"""The TMA / warp-specialised / persistent wgmma GEMM (:mod:`kernels.nvidia.wgmma_tma`) on an
H100/H200: correctness against torch at small, odd and suite shapes, then device time against
the cp.async wgmma kernel and cuBLAS (``torch.matmul``) in the same run.

    python3 benchmarks/gpu_tma.py [--out DIR] [--reps N] [--quick]

Writes ``gpu_tma.json`` (every row) to ``--out`` and prints a table.  Device time is the CUDA
profiler's (``benchmarks/gpu_suite.device_time``); each output is compared with a float32
reference (relative Frobenius error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHECK_SHAPES = [  # (M, N, K, dtype, b_major, bn, stages, ldc_pad, store)
    (128, 256, 64, "f16", "n", 256, 3, 0, "tma"), (300, 504, 130, "bf16", "n", 256, 3, 0, "tma"),
    (1000, 777, 333, "f16", "k", 256, 4, 1, "direct"), (513, 1025, 4096, "bf16", "n", 128, 6, 0,
                                                         "direct"),
    (2048, 2048, 2048, "f16", "n", 256, 3, 8, "tma"), (257, 4096, 1000, "bf16", "k", 128, 6, 3,
                                                      "direct"),
    (1000, 1000, 1000, "bf16", "k", 128, 6, 0, "tma"), (520, 776, 72, "f16", "n", 256, 3, 0, "tma")]
SPLIT_CHECKS = [(16, 1000, 4104, "bf16", "n", 64, 128, 8, 5), (200, 777, 3000, "f16", "k", 128, 256, 4, 3)]

PERF_SHAPES = [(8192, 8192, 8192, "bf16"), (4096, 14336, 4096, "bf16"),
               (4096, 4096, 4096, "f16"), (4000, 3000, 1000, "f16"),
               (2048, 2048, 2048, "bf16"), (4097, 4097, 4097, "f16")]


def check_one(rows, row, cfg, M, N, K, dt, bmaj, pad=0, splits=1) -> bool:
    """Run ``cfg`` on random operands (padded for TMA where needed) into a NaN-poisoned C
    (rows ``pad`` elements wider than N) and compare with float32 torch; appends ``row``."""
    import torch
    from benchmarks.gpu_suite import rel
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma import tma_padded, tma_ready
    try:
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
        a = torch.randn(M, K, dtype=dtype, device="cuda")
        b = torch.randn((K, N) if bmaj == "n" else (N, K), dtype=dtype, device="cuda")
        out = torch.full((M, N + pad), float("nan"), dtype=dtype, device="cuda")[:, :N]
        compiled_gemm(cfg)(a if tma_ready(a) else tma_padded(a),
                           b if tma_ready(b) else tma_padded(b), out, splits=splits)
        ref = a.float() @ (b.float() if bmaj == "n" else b.float().T)
        row["rel_err"] = rel(out, ref)
        row["ok"] = bool(torch.isfinite(out).all()) and row["rel_err"] < 1e-2
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:800]
        row["ok"] = False
        traceback.print_exc()
    rows.append(row)
    print(json.dumps(row), flush=True)
    return row["ok"]


def check(rows) -> bool:
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    ok = True
    for M, N, K, dt, bmaj, bn, st, pad, store in CHECK_SHAPES:
        row = {"part": "check", "M": M, "N": N, "K": K, "dtype": dt, "b_major": bmaj, "bn": bn,
               "store": store, "ldc_pad": pad}
        cfg = TmaGemmConfig(dtype=dt, b_major=bmaj, bn=bn, stages=st, store=store)
        ok &= check_one(rows, row, cfg, M, N, K, dt, bmaj, pad=pad)
    for M, N, K, dt, bmaj, bm, bn, st, sp in SPLIT_CHECKS:
        row = {"part": "check", "M": M, "N": N, "K": K, "dtype": dt, "b_major": bmaj, "bm": bm,
               "bn": bn, "splits": sp}
        cfg = TmaGemmConfig(dtype=dt, b_major=bmaj, bm=bm, bn=bn, stages=st, store="direct",
                            split_k=True)
        ok &= check_one(rows, row, cfg, M, N, K, dt, bmaj, splits=sp)
    return ok


def perf(rows, reps: int, variants: bool) -> None:
    import torch
    from benchmarks.gpu_suite import device_time
    from kernels.nvidia.dispatch import choose_gemm, compiled_gemm, gemm
    from kernels.nvidia.gemm_select import cp_async_choice
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    from kernels.selection import GemmProblem, H100
    for M, N, K, dt in PERF_SHAPES:
        row = {"part": "perf", "M": M, "N": N, "K": K, "dtype": dt}
        try:
            dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
            a = torch.randn(M, K, dtype=dtype, device="cuda")
            b = torch.randn(K, N, dtype=dtype, device="cuda")
            out = torch.empty(M, N, dtype=dtype, device="cuda")
            row["choice"] = str(choose_gemm(a, b))
            gemm(a, b, out)
            ref = torch.matmul(a, b)
            row["rel_err_vs_cublas"] = rel(out, ref)
            fl = 2 * M * N * K
            t = {"ours": device_time(lambda: gemm(a, b, out), reps),
                 "cublas": device_time(lambda: torch.matmul(a, b), reps)}
            if variants:
                base = cp_async_choice(GemmProblem(M, N, K, dt), H100).config
                if M % 8 == 0 and K % 8 == 0 and N % 8 == 0:
                    g = compiled_gemm(base)
                    t["cp.async " + base.name] = device_time(lambda: g(a, b, out), reps)
                    for cfg in (TmaGemmConfig(dtype=dt, bn=128, stages=6),
                                TmaGemmConfig(dtype=dt, stages=3, group_m=16),
                                TmaGemmConfig(dtype=dt, stages=3, store="direct"),
                                TmaGemmConfig(dtype=dt, stages=4, store="direct")):
                        g2 = compiled_gemm(cfg)
                        g2(a, b, out)
                        t[cfg.name] = device_time(lambda: g2(a, b, out), reps)
                        row[f"rel_err {cfg.name}"] = rel(out, ref)
            if variants and (K % 64 or N % 64) and N % 8 == 0:
                # experiment: operands whose rows start on 128-byte lines (TMA rows then fetch
                # whole lines), the kernel alone
                def pad128(x):
                    buf = torch.empty(x.shape[0], -(-x.shape[1] // 64) * 64, dtype=x.dtype,
                                      device=x.device)
                    buf[:, :x.shape[1]] = x
                    return buf[:, :x.shape[1]]
                ap, bp = pad128(a), pad128(b)
                g3 = compiled_gemm(TmaGemmConfig(dtype=dt))
                t["tma on 128-byte rows (kernel only)"] = device_time(lambda: g3(ap, bp, out),
                                                                      reps)
            row["us"] = {k: v * 1e6 for k, v in t.items()}
            row["tflops"] = {k: fl / v / 1e12 for k, v in t.items()}
            row["ratio_vs_cublas"] = t["cublas"] / t["ours"]
            del a, b, out, ref
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:800]
            traceback.print_exc()
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()


SKINNY_SHAPES = [(64, 4096, 4096, "bf16"), (16, 4096, 4096, "bf16"), (1, 4096, 4096, "bf16"),
                 (16, 14336, 4096, "bf16"), (128, 4096, 14336, "bf16"),
                 (1024, 1024, 16384, "bf16")]


def skinny(rows, reps: int) -> None:
    """Split-K problems: the cp.async split-K choice against TMA split-K variants."""
    import torch
    from benchmarks.gpu_suite import device_time
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.gemm_select import cp_async_choice
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    from kernels.selection import GemmProblem, H100
    for M, N, K, dt in SKINNY_SHAPES:
        row = {"part": "skinny", "M": M, "N": N, "K": K, "dtype": dt, "us": {}, "rel_err": {}}
        try:
            dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
            a = torch.randn(M, K, dtype=dtype, device="cuda")
            b = torch.randn(K, N, dtype=dtype, device="cuda")
            out = torch.empty(M, N, dtype=dtype, device="cuda")
            ref = a.float() @ b.float()
            base = cp_async_choice(GemmProblem(M, N, K, dt), H100)
            cands = [(f"cp.async {base.config.name} split {base.splits}", base.config, base.splits)]
            for bm, bn, st in ((64, 128, 8), (64, 256, 5), (128, 256, 4), (128, 128, 6)):
                if bm == 128 and M <= 64:
                    continue
                cfg = TmaGemmConfig(dtype=dt, bm=bm, bn=bn, stages=st, store="direct",
                                    split_k=True)
                tiles = -(-M // bm) * -(-N // bn)
                for sp in sorted({max(1, 132 // tiles), max(1, 264 // tiles), base.splits}):
                    sp = min(sp, K // 256)
                    cands.append((f"{cfg.name} split {sp}", cfg, sp))
            for name, cfg, sp in cands:
                g = compiled_gemm(cfg)
                g(a, b, out, splits=sp)
                row["rel_err"][name] = rel(out, ref)
                row["us"][name] = device_time(lambda: g(a, b, out, splits=sp), reps) * 1e6
            row["us"]["cublas"] = device_time(lambda: torch.matmul(a, b), reps) * 1e6
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:800]
            traceback.print_exc()
        rows.append(row)
        print(json.dumps(row), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="correctness only")
    ap.add_argument("--no-variants", action="store_true")
    ap.add_argument("--skinny", action="store_true", help="only the split-K comparison")
    args = ap.parse_args()
    import torch
    rows = [{"device": torch.cuda.get_device_name(), "torch": torch.__version__}]
    ok = check(rows)
    if ok and args.skinny:
        skinny(rows, args.reps)
    elif ok and not args.quick:
        perf(rows, args.reps, not args.no_variants)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_tma.json").write_text(json.dumps(rows, indent=1))
    for r in rows:
        if r.get("part") == "perf" and "us" in r:
            print(f"{r['M']}x{r['N']}x{r['K']} {r['dtype']}: x{r['ratio_vs_cublas']:.2f} cuBLAS; "
                  + ", ".join(f"{k} {v:.0f} TF" for k, v in r["tflops"].items()))
        if r.get("part") == "skinny" and r.get("us"):
            print(f"{r['M']}x{r['N']}x{r['K']}: " + ", ".join(
                f"{k} {v:.1f} us (err {r['rel_err'].get(k, 0):.1e})" for k, v in r["us"].items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
