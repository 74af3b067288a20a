"""Host time of a steady-state call of the NVIDIA entry points (issue 20), on a GPU.

    python3 benchmarks/gpu_host.py --label after [--root TREE] [--out DIR] [--check]

For each problem (the suite's small GEMMs, two prefill and two decode shapes):

* ``host_us``: the mean host time of one call, 300 calls back to back (``time.perf_counter``
  around the loop, before the synchronisation: the kernels are microseconds, so the GPU keeps
  up and the loop measures the Python + driver path);
* ``wall_us``: CUDA events around one call, median of 30 (what ``benchmarks/gpu.py --suite``
  calls wall);
* the same two figures for torch's own call (``torch.matmul`` = cuBLAS, SDPA), in the same run.

Also a cProfile of 300 calls of ``gemm`` at 16x4096x4096 bf16 (where the host time goes), the
cost of the few per-call driver/torch queries, and with ``--check`` the cached path against
the uncached one (outputs bitwise equal; a new pointer of the same shape; a new input against
a float32 reference).  ``--root`` picks the source tree whose ``kernels`` is imported (to
time a baseline checkout with this script).  Writes ``gpu_host_LABEL.json`` and
``gpu_host_LABEL_profile.txt`` to ``--out`` (default ``$OUT``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

from gpu_timing import host_seconds

GEMMS = [(16, 4096, 4096, "bf16"), (1, 4096, 4096, "bf16"), (64, 4096, 4096, "bf16"),
         (777, 333, 130, "f16"), (1, 1, 8, "f16"), (2048, 2048, 2048, "bf16"),
         (4000, 3000, 1000, "f16"), (128, 4096, 14336, "bf16"), (1024, 1024, 16384, "bf16")]
PREFILL = [(4, 8, 1, 513, 513, 256, True), (1, 16, 16, 1000, 4097, 64, False)]
DECODE = [(4, 32, 8, 4096, 256), (1, 32, 8, 100_000, 128)]


def host_and_wall(fn, n=300, reps=30):
    import torch
    host = host_seconds(fn, n)
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return {"host_us": host * 1e6, "wall_us": statistics.median(ts)}


def rel(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def attn_ref(q, k, v, causal):
    import torch
    g = q.shape[1] // k.shape[1]
    kf, vf = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = q.float() @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        r = torch.arange(q.shape[2], device=q.device)[:, None]
        c = torch.arange(k.shape[2], device=q.device)[None, :]
        s = s.masked_fill(c > r, float("-inf"))
    return s.softmax(-1) @ vf


def check(D, torch) -> list:
    """The cached path against the uncached one, a new pointer and new data (after only)."""
    rows = []
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}
    for M, N, K, d in GEMMS[:7]:
        a = torch.randn(M, K, dtype=dt[d], device="cuda")
        b = torch.randn(K, N, dtype=dt[d], device="cuda")
        D.clear_plans()
        c1 = D.gemm(a, b)
        c2 = D.gemm(a, b)
        c3 = D.gemm(a.clone(), b)
        a3 = torch.randn_like(a)
        c4 = D.gemm(a3, b)
        rows.append({"case": f"gemm {M}x{N}x{K} {d}", "cached_equal": bool(torch.equal(c1, c2)),
                     "new_pointer_equal": bool(torch.equal(c1, c3)),
                     "new_data_rel": rel(c4, a3.float() @ b.float()),
                     "first_rel": rel(c1, a.float() @ b.float())})
    for B, H, Hk, Sq, Skv, Dh, causal in PREFILL:
        q = torch.randn(B, H, Sq, Dh, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hk, Skv, Dh, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        D.clear_plans()
        o1 = D.flash_attention(q, k, v, causal=causal)
        o2 = D.flash_attention(q, k, v, causal=causal)
        o3 = D.flash_attention(q.clone(), k, v, causal=causal)
        q3 = torch.randn_like(q)
        o4 = D.flash_attention(q3, k, v, causal=causal)
        rows.append({"case": f"prefill B{B} H{H}/{Hk} {Sq}/{Skv} d{Dh}{' c' if causal else ''}",
                     "cached_equal": bool(torch.equal(o1, o2)),
                     "new_pointer_equal": bool(torch.equal(o1, o3)),
                     "new_data_rel": rel(o4, attn_ref(q3, k, v, causal)),
                     "first_rel": rel(o1, attn_ref(q, k, v, causal))})
    for B, H, Hk, Skv, Dh in DECODE:
        q = torch.randn(B, H, 1, Dh, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hk, Skv, Dh, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        D.clear_plans()
        o1 = D.decode_attention(q, k, v)
        o2 = D.decode_attention(q, k, v)
        o3 = D.decode_attention(q.clone(), k, v)
        q3 = torch.randn_like(q)
        o4 = D.decode_attention(q3, k, v)
        rows.append({"case": f"decode B{B} H{H}/{Hk} {Skv} d{Dh}",
                     "cached_equal": bool(torch.equal(o1, o2)),
                     "new_pointer_equal": bool(torch.equal(o1, o3)),
                     "new_data_rel": rel(o4, attn_ref(q3, k, v, False)),
                     "first_rel": rel(o1, attn_ref(q, k, v, False))})
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def micro(torch) -> dict:
    """Per-call cost of the queries a launch may make (us, 2000 calls)."""
    from cuda.bindings import driver as drv
    out = {}
    cases = {"torch.cuda.current_stream(0).cuda_stream":
             lambda: torch.cuda.current_stream(0).cuda_stream,
             "drv.cuCtxGetCurrent()": drv.cuCtxGetCurrent,
             "drv.CUstream(0)": lambda: drv.CUstream(0),
             "torch.empty((16, 4096), bf16, cuda)":
             lambda: torch.empty((16, 4096), dtype=torch.bfloat16, device="cuda"),
             "torch.cuda.get_device_capability(0)": lambda: torch.cuda.get_device_capability(0),
             "torch.cuda.is_available()": torch.cuda.is_available}
    for name, f in cases.items():
        f()
        t0 = time.perf_counter()
        for _ in range(2000):
            f()
        out[name] = (time.perf_counter() - t0) / 2000 * 1e6
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(args.root).resolve()))
    import torch
    import torch.nn.functional as F
    from kernels.nvidia import dispatch as D
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {"label": args.label, "root": args.root, "device": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join(sys.argv), "rows": []}
    if args.check:
        try:
            res["check"] = check(D, torch)
        except Exception as e:         # recorded, and the timings still run
            import traceback
            traceback.print_exc()
            res["check_error"] = f"{type(e).__name__}: {e}"
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}
    for M, N, K, d in GEMMS:
        a = torch.randn(M, K, dtype=dt[d], device="cuda")
        b = torch.randn(K, N, dtype=dt[d], device="cuda")
        c = torch.empty(M, N, dtype=dt[d], device="cuda")
        row = {"case": f"gemm {M}x{N}x{K} {d}",
               "ours": host_and_wall(lambda: D.gemm(a, b)),
               "ours_out": host_and_wall(lambda: D.gemm(a, b, c)),
               "torch": host_and_wall(lambda: torch.matmul(a, b))}
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
    for B, H, Hk, Sq, Skv, Dh, causal in PREFILL:
        q = torch.randn(B, H, Sq, Dh, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hk, Skv, Dh, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        row = {"case": f"prefill B{B} H{H}/{Hk} {Sq}/{Skv} d{Dh}{' c' if causal else ''}",
               "ours": host_and_wall(lambda: D.flash_attention(q, k, v, causal=causal)),
               "torch": host_and_wall(lambda: F.scaled_dot_product_attention(
                   q, k, v, is_causal=causal, enable_gqa=H != Hk))}
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
    for B, H, Hk, Skv, Dh in DECODE:
        q = torch.randn(B, H, 1, Dh, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hk, Skv, Dh, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        row = {"case": f"decode B{B} H{H}/{Hk} {Skv} d{Dh}",
               "ours": host_and_wall(lambda: D.decode_attention(q, k, v)),
               "torch": host_and_wall(lambda: F.scaled_dot_product_attention(
                   q, k, v, enable_gqa=H != Hk))}
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
    res["micro_us"] = micro(torch)
    print(json.dumps(res["micro_us"]), flush=True)
    a = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(16, 4096, dtype=torch.bfloat16, device="cuda")
    D.gemm(a, b, c)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        D.gemm(a, b, c)
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gpu_host_{args.label}.json").write_text(json.dumps(res, indent=1))
    (out / f"gpu_host_{args.label}_profile.txt").write_text(
        f"cProfile, 300 calls of gemm(a, b, c) 16x4096x4096 bf16, {args.label} ({args.root})\n"
        + s.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
