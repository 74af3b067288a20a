"""Measured speed of the generated NVIDIA kernels against torch on the same GPU, in one run.

    python3 benchmarks/gpu.py [--out DIR] [--sweep] [--only gemm,prefill,decode] [--quick]
    python3 benchmarks/gpu.py --suite [--out DIR] [--reps N]     (the shape suite, gpu_suite.py)

Prints one table (last) and writes ``gpu_bench.json`` (every number, the environment) to
``--out`` (default ``$OUT`` if set, else ``./out``):

* GEMM f16/bf16 4096^3 and 8192^3, ``C = A @ B`` (A, B row-major): TFLOP/s of the
  mma.sync kernel (:mod:`kernels.cuda_gemm`), on H100/H200 also of the wgmma kernel
  (:mod:`kernels.cuda_wgmma`, what ``gemm()`` runs there), and of ``torch.matmul`` (cuBLAS)
  on the same inputs; ratio.
* Prefill attention B=8, H=32, D=128, S in {2K, 8K, 16K}, causal and not (causal counts half
  the FLOPs: 2*B*H*S*S*D instead of 4*B*H*S*S*D): :mod:`kernels.cuda_attention` vs
  ``scaled_dot_product_attention`` with the flash backend (FlashAttention-2 inside torch) and
  with the cuDNN backend where available.
* Decode: batch 30720, seqlen_q 1, seqlen_kv in {1, 2, 4, 8, 16}, head_dim {128, 256}, heads
  {16, 32}, bf16 in, fp16 out: bytes moved (q, k, v read once, out written once) / time, and
  that as a fraction of a device-to-device copy (bytes read + written) measured in this run.

Timing: CUDA events around each call, 3 warm-up calls, median of ``--reps`` (default 10);
inputs are random normal (never zeros).  ``--sweep`` also times a list of kernel variants
(tile shapes, stages, warps) to choose the defaults.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bench(fn, reps=10, warmup=3):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    evs = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        evs.append((s, e))
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) for s, e in evs]
    return statistics.median(ts) / 1e3, ts


def rel(out, ref):
    out, ref = out.float(), ref.float()
    if not bool(__import__("torch").isfinite(out).all()):
        return float("nan")
    return ((out - ref).norm() / ref.norm()).item()


def env_info():
    import torch
    p = torch.cuda.get_device_properties(0)
    info = {"device": p.name, "sms": p.multi_processor_count,
            "memory_gib": round(p.total_memory / 2 ** 30, 1), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv)}
    try:
        info["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:  # pragma: no cover
        info["driver"] = f"nvidia-smi failed: {e}"
    try:
        from cuda.bindings import nvrtc
        _, a, b = nvrtc.nvrtcVersion()
        info["nvrtc"] = f"{a}.{b}"
    except Exception as e:  # pragma: no cover
        info["nvrtc"] = f"unavailable: {e}"
    return info


# ------------------------------------------------------------------------------------ parts

def copy_bandwidth(reps):
    import torch
    n = 2 ** 31                                   # 2 GiB
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t, _ = bench(lambda: dst.copy_(src), reps=reps)
    del src, dst
    return {"bytes": 2 * n, "seconds": t, "GBps": 2 * n / t / 1e9}


def gemm_variants(sweep: bool, hopper: bool):
    """The kernels timed: the mma.sync default, and on H100/H200 the wgmma default (what
    ``kernels.cuda_gemm.gemm`` runs there); ``--sweep`` adds tile/stage variants of both."""
    from kernels.cuda_gemm import CudaGemmConfig
    from kernels.cuda_wgmma import WgmmaGemmConfig
    out = [CudaGemmConfig()]
    if sweep:
        out += [CudaGemmConfig(mma_order="serp"), CudaGemmConfig(stages=5),
                CudaGemmConfig(bk=64, stages=3, mma_order="serp"),
                CudaGemmConfig(bm=256, bn=128, warps_m=4, warps_n=2, mma_order="serp")]
    if hopper:
        out.append(WgmmaGemmConfig())
        if sweep:
            out += [WgmmaGemmConfig(group_m=16), WgmmaGemmConfig(bk=32, stages=8),
                    WgmmaGemmConfig(bm=256, bn=128), WgmmaGemmConfig(bn=128, stages=6),
                    WgmmaGemmConfig(stages=3)]
    return out


def run_gemm(results, reps, sizes, sweep=False):
    import dataclasses
    import torch
    from kernels.cuda_gemm import compiled_gemm
    torch.backends.cuda.matmul.allow_tf32 = False
    variants = gemm_variants(sweep, torch.cuda.get_device_capability(0) == (9, 0))
    for dtype in (torch.float16, torch.bfloat16):
        dn = "f16" if dtype == torch.float16 else "bf16"
        for n in sizes:
            a = torch.randn(n, n, dtype=dtype, device="cuda")
            b = torch.randn(n, n, dtype=dtype, device="cuda")
            flops = 2 * n ** 3
            t_ref, _ = bench(lambda: torch.matmul(a, b), reps=reps)
            ref = None
            for variant in variants:
                cfg = dataclasses.replace(variant, dtype=dn)
                row = {"part": "gemm", "dtype": dn, "n": n, "config": cfg.name,
                       "cublas_tflops": flops / t_ref / 1e12}
                try:
                    g = compiled_gemm(cfg)
                    out = torch.full((n, n), float("nan"), dtype=dtype, device="cuda")
                    g(a, b, out)
                    torch.cuda.synchronize()
                    if ref is None:
                        ref = a.float() @ b.float()
                    if cfg.b_major == "k":     # the kernel reads b as k-contiguous (B = b^T)
                        row["rel_err"] = rel(out, a.float() @ b.float().T)
                    else:
                        row["rel_err"] = rel(out, ref)
                    row["rel_err_cublas"] = rel(torch.matmul(a, b), ref)
                    t, ts = bench(lambda: g(a, b, out), reps=reps)
                    row.update(seconds=t, tflops=flops / t / 1e12,
                               ratio=(flops / t) / (flops / t_ref),
                               spread=(min(ts) / 1e3, max(ts) / 1e3))
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:2000]
                    traceback.print_exc()
                results.append(row)
                print(json.dumps(row), flush=True)
            del a, b, ref
            torch.cuda.empty_cache()


def sdpa_flops(B, H, S, D, causal):
    return 4 * B * H * S * S * D / (2 if causal else 1)


def prefill_variants(sweep: bool, hopper: bool, D: int):
    """The prefill kernels timed (bf16, non-causal; the run sets causal): the mma.sync default,
    and on H100/H200 the wgmma default (what ``flash_attention`` runs there); ``--sweep`` adds
    tile/schedule variants of both."""
    from kernels.cuda_attention import FLASH_DEFAULTS, FlashConfig
    from kernels.cuda_wgmma_attention import WGMMA_FLASH_DEFAULTS, WgmmaFlashConfig
    kws = [FLASH_DEFAULTS[D]] + ([dict(bm=128, bn=32, warps=4)] if sweep else [])
    out = [FlashConfig(dtype="bf16", head_dim=D, **kw) for kw in kws]
    if hopper and D in WGMMA_FLASH_DEFAULTS:
        kws = [WGMMA_FLASH_DEFAULTS[D]]
        if sweep:
            kws += [dict(warpgroups=2, bn=128, overlap=False), dict(warpgroups=2, bn=64),
                    dict(warpgroups=1, bn=128), dict(warpgroups=1, bn=192),
                    dict(warpgroups=1, bn=64)]
        out += [WgmmaFlashConfig(dtype="bf16", head_dim=D, **kw) for kw in kws]
    return out


def run_prefill(results, reps, seqs, sweep=False, B=8, H=32, D=128):
    import dataclasses
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from kernels.cuda_attention import compiled_flash
    dtype = torch.bfloat16
    variants = prefill_variants(sweep, torch.cuda.get_device_capability(0) == (9, 0), D)
    for S in seqs:
        q = torch.randn(B, H, S, D, dtype=dtype, device="cuda")
        k = torch.randn(B, H, S, D, dtype=dtype, device="cuda")
        v = torch.randn(B, H, S, D, dtype=dtype, device="cuda")
        for causal in (False, True):
            flops = sdpa_flops(B, H, S, D, causal)
            torch_t = {}
            ref = None
            for name, be in (("flash", SDPBackend.FLASH_ATTENTION),
                             ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel([be]):
                        f = lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal)
                        o = f()
                        if name == "flash":
                            ref = o
                        torch_t[name] = bench(f, reps=reps)[0]
                except Exception as e:
                    torch_t[name] = None
                    print(f"sdpa {name} backend unavailable: {type(e).__name__}: {e}"[:300])
            for variant in variants:          # (v is the value tensor)
                cfg = dataclasses.replace(variant, causal=causal)
                row = {"part": "prefill", "B": B, "H": H, "S": S, "D": D, "causal": causal,
                       "config": cfg.name}
                for name, t in torch_t.items():
                    row[f"sdpa_{name}_tflops"] = flops / t / 1e12 if t else None
                try:
                    fa = compiled_flash(cfg)
                    out = torch.full_like(q, float("nan"))
                    fa(q, k, v, out)
                    if ref is not None:
                        row["rel_err_vs_sdpa_flash"] = rel(out, ref)
                    t, ts = bench(lambda: fa(q, k, v, out), reps=reps)
                    row.update(seconds=t, tflops=flops / t / 1e12,
                               spread=(min(ts) / 1e3, max(ts) / 1e3))
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:2000]
                    traceback.print_exc()
                results.append(row)
                print(json.dumps(row), flush=True)
            del ref
        del q, k, v
        torch.cuda.empty_cache()


def run_decode(results, reps, copy_gbps, quick=False):
    import torch
    from kernels.cuda_attention import decode_attention
    B = 30720
    heads = (32,) if quick else (16, 32)
    for H in heads:
        for D in (128, 256):
            for skv in (1, 2, 4, 8, 16):
                q = torch.randn(B, H, 1, D, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(B, H, skv, D, dtype=torch.bfloat16, device="cuda")
                v = torch.randn(B, H, skv, D, dtype=torch.bfloat16, device="cuda")
                out = torch.full((B, H, 1, D), float("nan"), dtype=torch.float16, device="cuda")
                nbytes = (q.numel() + k.numel() + v.numel()) * 2 + out.numel() * 2
                row = {"part": "decode", "B": B, "H": H, "D": D, "skv": skv, "bytes": nbytes}
                try:
                    decode_attention(q, k, v, out=out)
                    idx = torch.randperm(B, device="cuda")[:512]
                    s = torch.einsum("bhd,bhsd->bhs", q[idx, :, 0].float(),
                                     k[idx].float()) / math.sqrt(D)
                    ref = torch.einsum("bhs,bhsd->bhd", s.softmax(-1), v[idx].float())
                    row["rel_err"] = rel(out[idx, :, 0], ref)
                    row["all_finite"] = bool(torch.isfinite(out).all())
                    t, ts = bench(lambda: decode_attention(q, k, v, out=out), reps=reps)
                    row.update(seconds=t, GBps=nbytes / t / 1e9,
                               frac_of_copy=nbytes / t / 1e9 / copy_gbps)
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:2000]
                    traceback.print_exc()
                results.append(row)
                print(json.dumps(row), flush=True)
                del q, k, v, out
            torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------ table

def table(results, info, copy):
    lines = [f"device: {info['device']} ({info['sms']} SMs), driver {info.get('driver')}, "
             f"torch {info['torch']} (CUDA {info['cuda']}), NVRTC {info.get('nvrtc')}, "
             f"{info['date']}", f"command: {info['command']}"]
    if copy:
        lines.append(f"device-to-device copy: {copy['GBps']:.0f} GB/s (read + write, 2 GiB)")
    g = [r for r in results if r["part"] == "gemm"]
    if g:
        lines.append("")
        lines.append(f"{'GEMM':<8}{'size':>7} {'config':<42}{'ours TF/s':>10}{'cuBLAS':>9}"
                     f"{'ratio':>7}{'rel err':>10}")
        for r in g:
            if "error" in r:
                lines.append(f"{r['dtype']:<8}{r['n']:>7} {r['config']:<42} ERROR "
                             f"{r['error'][:60]}")
                continue
            lines.append(f"{r['dtype']:<8}{r['n']:>7} {r['config']:<42}{r['tflops']:>10.1f}"
                         f"{r['cublas_tflops']:>9.1f}{r['ratio']:>7.2f}{r['rel_err']:>10.1e}")
    p = [r for r in results if r["part"] == "prefill"]
    if p:
        lines.append("")
        lines.append(f"{'prefill':<8}{'S':>6} {'causal':<7}{'config':<36}{'ours TF/s':>10}"
                     f"{'SDPA-FA2':>9}{'cuDNN':>8}{'err vs FA2':>11}")
        for r in p:
            fa2 = r.get("sdpa_flash_tflops")
            cud = r.get("sdpa_cudnn_tflops")
            f2 = f"{fa2:9.1f}" if fa2 else f"{'n/a':>9}"
            cd = f"{cud:8.1f}" if cud else f"{'n/a':>8}"
            if "error" in r:
                lines.append(f"{'bf16':<8}{r['S']:>6} {str(r['causal']):<7}{r['config']:<36} "
                             f"ERROR {r['error'][:60]}")
                continue
            lines.append(f"{'bf16':<8}{r['S']:>6} {str(r['causal']):<7}{r['config']:<36}"
                         f"{r['tflops']:>10.1f}{f2}{cd}{r.get('rel_err_vs_sdpa_flash', 0):>11.1e}")
    d = [r for r in results if r["part"] == "decode"]
    if d:
        lines.append("")
        lines.append(f"{'decode':<8}{'H':>4}{'D':>5}{'skv':>5}{'MB moved':>10}{'us':>9}"
                     f"{'GB/s':>8}{'of copy':>9}{'rel err':>10}")
        for r in d:
            if "error" in r:
                lines.append(f"{'':<8}{r['H']:>4}{r['D']:>5}{r['skv']:>5} ERROR {r['error'][:60]}")
                continue
            lines.append(f"{'':<8}{r['H']:>4}{r['D']:>5}{r['skv']:>5}{r['bytes'] / 1e6:>10.0f}"
                         f"{r['seconds'] * 1e6:>9.0f}{r['GBps']:>8.0f}{r['frac_of_copy']:>9.2f}"
                         f"{r['rel_err']:>10.1e}")
    return "\n".join(lines)


def profile_targets():
    import torch
    from kernels.cuda_attention import flash_attention
    from kernels.cuda_gemm import gemm
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(2):
        gemm(a, b)
        torch.matmul(a, b)
    q, k, v = (torch.randn(8, 32, 8192, 128, dtype=torch.bfloat16, device="cuda")
               for _ in range(3))
    for _ in range(2):
        flash_attention(q, k, v)
    torch.cuda.synchronize()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--sweep", action="store_true", help="also time kernel variants")
    ap.add_argument("--only", default="gemm,prefill,decode")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    ap.add_argument("--suite", action="store_true",
                    help="the shape suite instead (benchmarks/gpu_suite.py: 14 GEMM, 8 prefill, "
                         "9 decode shapes; --only picks its parts)")
    ap.add_argument("--gemm-rounds", type=int, default=None,
                    help="--suite: rounds of each GEMM row's ours / cuBLAS pair, alternating "
                         "(default gpu_suite.GEMM_ROUNDS, 3; medians reported)")
    ap.add_argument("--profile", action="store_true",
                    help="only launch each kernel twice (GEMM 8192 bf16, prefill S=8K, cuBLAS), "
                         "for running under ncu")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    if args.profile:
        return profile_targets()
    info = env_info()
    print(json.dumps(info), flush=True)
    parts = set(args.only.split(","))
    if args.suite:
        return suite_main(args, info, parts)
    results, copy = [], None
    t0 = time.time()
    copy = copy_bandwidth(args.reps)
    print(json.dumps({"copy": copy}), flush=True)
    if "gemm" in parts:
        run_gemm(results, args.reps, (4096,) if args.quick else (4096, 8192), args.sweep)
    if "prefill" in parts:
        run_prefill(results, args.reps, (2048,) if args.quick else (2048, 8192, 16384),
                    args.sweep)
    if "decode" in parts:
        run_decode(results, args.reps, copy["GBps"], args.quick)
    info["seconds"] = round(time.time() - t0, 1)
    text = table(results, info, copy)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_bench.json").write_text(json.dumps({"env": info, "copy": copy,
                                                    "results": results}, indent=1))
    (out / "gpu_bench.txt").write_text(text + "\n")
    print()
    print(text)
    return 0


def suite_main(args, info, parts) -> int:
    """``--suite``: benchmarks/gpu_suite.py's shapes; writes gpu_suite.json / gpu_suite.txt."""
    from benchmarks.gpu_suite import run_suite
    t0 = time.time()
    results = []
    text = run_suite(results, args.reps, bench, parts, gemm_rounds=args.gemm_rounds)
    info["seconds"] = round(time.time() - t0, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_suite.json").write_text(json.dumps({"env": info, "results": results}, indent=1))
    head = (f"device: {info['device']} ({info['sms']} SMs), driver {info.get('driver')}, torch "
            f"{info['torch']} (CUDA {info['cuda']}), {info['date']}\ncommand: {info['command']}")
    (out / "gpu_suite.txt").write_text(head + "\n" + text + "\n")
    print()
    print(head)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
