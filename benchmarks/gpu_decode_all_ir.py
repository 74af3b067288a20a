"""Every tensor-core decode configuration on the verified IR (issue 20 item 1): the odd heads
per block (hg 1, 3, 5, 7: every MHA model and odd GQA groups) that ran the TEMPLATE split
kernel, and the short caches (seqlen_kv <= 64) that run the one-pass TEMPLATE kernel.

1. Bitwise, odd hg: the one-launch IR kernel (``decode_fused_ir.IrFusedMmaDecode``, what
   ``decode_attention()`` runs now) and the two-kernel IR form (``decode_ir.IrSplitMmaDecode``)
   against what ran before (``decode_mma_ir.IrMmaSplitKVDecode``: the template split kernel +
   the IR combine) and the template alone (``decode_mma.MmaSplitKVDecode``), at ragged last
   splits, one split, d64/d128/d256, f16 and bf16; the fused form called twice (the second
   launch on the counters the first left).
2. Time, odd hg: before (template split + IR combine) against the fused IR kernel, same
   configuration, ``--rounds`` interleaved rounds (``gpu_suite.interleaved_rounds``: settled,
   profiler device time + CUDA-event wall, medians of ``--reps``) and back-to-back wall per
   call (``--calls`` calls, one synchronize).
3. Short caches: the one-pass template (``attention.decode_attention``, what the dispatch runs
   for seqlen_kv <= 64) against the fused IR kernel with the split count its plan gives (one
   split at these lengths), B 1/8/32 x H32 (Hkv 8 and 32) x Skv 1/17/64 x d64/d128 and the
   suite's B30720 rows; both checked against a float64 reference.

    python3 benchmarks/gpu_decode_all_ir.py [--out DIR] [--rounds 2] [--reps 10] [--parts 123]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, run_header, write_report  # noqa: E402

# (B, Hq, Hkv, Skv, D, dtype, kv_splits)
BITWISE = [(2, 16, 16, 1000, 128, "bf16", None), (1, 32, 32, 777, 64, "f16", 1),
           (3, 24, 8, 5001, 128, "bf16", None), (2, 40, 8, 4097, 256, "bf16", 7),
           (1, 56, 8, 333, 64, "f16", 3), (2, 20, 4, 20_000, 128, "bf16", 13),
           (1, 12, 12, 3000, 256, "bf16", None), (4, 40, 8, 4096, 256, "f16", None),
           (64, 32, 32, 2048, 64, "bf16", None), (64, 24, 8, 3000, 128, "f16", None)]
ODD = [(8, 32, 32, 4096, 128), (1, 32, 32, 32_768, 128), (32, 32, 32, 2048, 64),
       (4, 40, 8, 8192, 128), (8, 24, 8, 8192, 64), (2, 56, 8, 16_384, 256),
       (4, 40, 8, 4096, 256), (4, 16, 16, 4096, 256)]
SHORT = [(B, 32, hkv, s, d) for d in (64, 128) for hkv in (8, 32) for B in (1, 8, 32)
         for s in (1, 17, 64)] + [(30720, 32, 32, 1, 128), (30720, 32, 32, 16, 128),
                                  (30720, 16, 16, 16, 256)]
TD = {"f16": "float16", "bf16": "bfloat16"}


def tensors(B, Hq, Hkv, Skv, D, dt="bf16"):
    import torch
    t = getattr(torch, TD[dt])
    return (torch.randn(B, Hq, 1, D, dtype=t, device="cuda"),
            torch.randn(B, Hkv, Skv, D, dtype=t, device="cuda"),
            torch.randn(B, Hkv, Skv, D, dtype=t, device="cuda"))


def reference(q, k, v):
    import torch
    g = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b0 in range(0, q.shape[0], 256):            # the B30720 rows in slices
        sl = slice(b0, b0 + 256)
        kk = k[sl].double().repeat_interleave(g, 1)
        vv = v[sl].double().repeat_interleave(g, 1)
        out[sl] = torch.softmax(q[sl].double() @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5,
                                -1) @ vv
    return out


def same(a, b) -> bool:
    import torch
    return bool(torch.equal(a.view(torch.int16), b.view(torch.int16)))


def bitwise(lines, checks):
    import torch
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.decode_ir import IrSplitMmaDecode
    from kernels.nvidia.decode_mma import MmaSplitKVDecode
    from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
    from kernels.nvidia.dispatch import decode_attention, mma_decode_config
    for B, Hq, Hkv, Skv, D, dt, ns in BITWISE:
        q, k, v = tensors(B, Hq, Hkv, Skv, D, dt)
        cfg = mma_decode_config(q, k)
        t0 = time.perf_counter()
        fused, two = IrFusedMmaDecode(cfg), IrSplitMmaDecode(cfg)
        build_s = time.perf_counter() - t0
        before, tmpl = IrMmaSplitKVDecode(cfg), MmaSplitKVDecode(cfg)
        o = {"before": before(q, k, v, kv_splits=ns), "template": tmpl(q, k, v, kv_splits=ns),
             "two": two(q, k, v, kv_splits=ns), "fused": fused(q, k, v, kv_splits=ns),
             "fused2": fused(q, k, v, kv_splits=ns),
             "dispatch": decode_attention(q, k, v, kv_splits=ns)}
        torch.cuda.synchronize()
        ref = reference(q, k, v)
        row = dict(B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D, dtype=dt, config=cfg.name, hg=cfg.hg,
                   warps=cfg.warps, splits=fused.plan(q, k, v, None, ns, None)["splits"],
                   build_and_verify_s=build_s,
                   **{f"{n}_eq_before": same(o[n], o["before"]) for n in
                      ("template", "two", "fused", "fused2", "dispatch")},
                   max_err_vs_f64=float((o["fused"].double() - ref).abs().max()))
        checks.append(row)
        ok = all(row[f"{n}_eq_before"] for n in ("template", "two", "fused", "fused2",
                                                  "dispatch"))
        lines.append(f"bitwise {cfg.name} B{B} H{Hq}/{Hkv} {Skv} d{D} {dt} splits "
                     f"{row['splits']}: {'ALL EQUAL' if ok else 'DIFFER ' + str(row)} max err "
                     f"{row['max_err_vs_f64']:.2e} (build+verify {build_s:.1f} s)")
        print(lines[-1], flush=True)


def timing(lines, rows, shapes, make_forms, args, tag, copy):
    import torch
    import gpu_suite
    from gpu import bench
    lines.append(f"{'shape':<26}{'form':<9}{'dev us':>9}{'wall us':>9}{'b2b us':>9}"
                 f"{'err':>10}  config")
    for B, Hq, Hkv, Skv, D in shapes:
        q, k, v, out = gpu_suite.decode_tensors(B, Hq, Hkv, Skv, D)
        nbytes = (q.numel() + k.numel() + v.numel() + out.numel()) * 2
        cfg, forms = make_forms(q, k)
        ref = reference(q, k, v)
        errs = {}
        for n, f in forms.items():
            o = f(q, k, v, out)
            torch.cuda.synchronize()
            errs[n] = float((o.double() - ref).abs().max())
        del ref
        b2b = {n: [] for n in forms}

        def back_to_back(name, f):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                f()
            torch.cuda.synchronize()
            b2b[name].append((time.perf_counter() - t0) / args.calls)

        calls = {n: (lambda f=f: f(q, k, v, out)) for n, f in forms.items()}
        meas = gpu_suite.interleaved_rounds(calls, args.rounds, args.reps, bench,
                                            after=back_to_back)
        shape = f"B{B} H{Hq}/{Hkv} {Skv} d{D}"
        for name, ms in meas.items():
            dev = statistics.median(m["device_s"] for m in ms)
            wall = statistics.median(m["wall_s"] for m in ms)
            bb = statistics.median(b2b[name])
            rows.append(dict(part=tag, B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D, form=name,
                             config=cfg.name, device_s=dev, wall_s=wall, b2b_s=bb,
                             bytes=nbytes, of_copy_device=nbytes / dev / 1e9 / copy,
                             max_err_vs_f64=errs[name], rounds=ms, b2b_rounds=b2b[name]))
            lines.append(f"{shape:<26}{name:<9}{dev * 1e6:>9.2f}{wall * 1e6:>9.2f}"
                         f"{bb * 1e6:>9.2f}{errs[name]:>10.2e}  {cfg.name}")
        print("\n".join(lines[-len(meas):]), flush=True)
        del q, k, v, out


def odd_forms(q, k):
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
    from kernels.nvidia.dispatch import mma_decode_config
    cfg = mma_decode_config(q, k)
    before, fused = IrMmaSplitKVDecode(cfg), IrFusedMmaDecode(cfg)
    return cfg, {"before": lambda q, k, v, out: before(q, k, v, out=out),
                 "fused_ir": lambda q, k, v, out: fused(q, k, v, out=out)}


def short_forms(q, k):
    from kernels.nvidia.attention import decode_attention as one_pass
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.dispatch import mma_decode_config
    cfg = mma_decode_config(q, k)
    fused = IrFusedMmaDecode(cfg)
    return cfg, {"one_pass": lambda q, k, v, out: one_pass(q, k, v, out_dtype="f16", out=out),
                 "fused_ir": lambda q, k, v, out: fused(q, k, v, out=out)}


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--parts", default="123")
    args = ap.parse_args()
    import gpu_suite
    lines, checks, rows = [], [], []
    lines.append(str(run_header()))
    if "1" in args.parts:
        bitwise(lines, checks)
    copy = gpu_suite.copy_device_gbps(args.reps)
    lines.append(f"copy {copy:.0f} GB/s (1 GiB, profiler device time)")
    if "2" in args.parts:
        timing(lines, rows, ODD, odd_forms, args, "odd_hg", copy)
    if "3" in args.parts:
        timing(lines, rows, SHORT, short_forms, args, "short_kv", copy)
    write_report(args.out, "decode_all_ir", lines, dict(header=run_header(), copy_GBps=copy,
                                                         checks=checks, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
