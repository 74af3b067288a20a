"""Where the host time of the padded-operand GEMM call goes (issue 20, 4000x3000x1000 f16):
per-call host time of each piece (no sync between calls), the suite's wall and device times,
and whether any piece synchronises (torch's sync debug mode).

    python3 benchmarks/gpu_padwall.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def host_us(fn, n=300):
    """Median over 5 batches of the host microseconds per call of ``fn`` (no sync inside a
    batch: the GPU queue absorbs the work while it is shorter than the launch queue)."""
    import torch
    out = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def main() -> None:
    import torch
    from gpu import bench
    from gpu_suite import device_time
    from kernels.nvidia import dispatch, wgmma_tma
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", default="4000x3000x1000,2048x2048x2048")
    args = ap.parse_args()
    rows = []
    for shp in args.shapes.split(","):
        M, N, K = map(int, shp.split("x"))
        a = torch.randn(M, K, dtype=torch.float16, device="cuda")
        b = torch.randn(K, N, dtype=torch.float16, device="cuda")
        c = torch.empty(M, N, dtype=torch.float16, device="cuda")
        dispatch.gemm(a, b, c)
        torch.cuda.synchronize()
        ref = torch.matmul(a, b)
        row = {"shape": shp, "choice": str(dispatch.choose_gemm(a, b)),
               "max_err": (c.float() - ref.float()).abs().max().item()}
        row["host_us_gemm"] = host_us(lambda: dispatch.gemm(a, b, c))
        row["host_us_matmul"] = host_us(lambda: torch.matmul(a, b))
        pb = wgmma_tma.padded_empty(b, 128)
        row["host_us_copy_rows"] = host_us(lambda: wgmma_tma.copy_rows(pb, b))
        row["host_us_torch_copy"] = host_us(lambda: pb.copy_(b))
        row["host_us_current_stream"] = host_us(lambda: torch.cuda.current_stream(a.device))
        from kernels.runtime.launch_cache import stream_handle
        row["host_us_stream_handle"] = host_us(lambda: stream_handle(a.device))
        row["host_us_wide_dtype"] = host_us(lambda: wgmma_tma.wide_copy_dtype(b, pb))
        torch.cuda.set_sync_debug_mode("error")
        try:
            dispatch.gemm(a, b, c)
            row["syncs"] = "none"
        except Exception as e:      # noqa: BLE001
            row["syncs"] = f"{type(e).__name__}: {e}"[:300]
        torch.cuda.set_sync_debug_mode("default")
        row["wall_us_gemm"] = bench(lambda: dispatch.gemm(a, b, c), reps=30)[0] * 1e6
        row["wall_us_matmul"] = bench(lambda: torch.matmul(a, b), reps=30)[0] * 1e6
        row["device_us_gemm"] = device_time(lambda: dispatch.gemm(a, b, c), 10) * 1e6
        row["device_us_matmul"] = device_time(lambda: torch.matmul(a, b), 10) * 1e6
        print(json.dumps(row), flush=True)
        rows.append(row)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "padwall.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
