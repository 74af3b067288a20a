"""The one-pass decode built as kernel IR (``decode_onepass_ir.IrOnePassDecode``) against the
one-pass TEMPLATE (``attention.DecodeAttention``) it replaces, at the short-cache rows where
``dispatch.choose_decode`` runs the one-pass kernel (issue 20 item 1): Skv 1 / 8 / 16 at B1 and
B32 x H32 (Hkv 8 and 32) x d64 / d128, d256 at Skv 32, the suite's B30720 rows, and the
many-block rows of Skv 17 / 64 (B32 H32/32) where the template won against the tensor-core IR
kernel.  Same configuration (``onepass_config``), bf16 in, f16 out, ``--rounds`` interleaved
rounds (``gpu_suite.interleaved_rounds``: settled, profiler device time + CUDA-event wall,
medians of ``--reps``) and back-to-back wall per call; both outputs checked bitwise against
each other and against a float64 reference.

Part 2 (``--parts 2``): the IR one-pass kernel against the tensor-core IR kernel with one split
(``IrFusedMmaDecode``, what ``dispatch.short_cache_on_ir`` runs for Skv 17-64 at d64 / d128 and
few blocks) at B1 / 8 / 32 x H32/8 x Skv 17 / 32 / 64 x d64 / d128: the measurement the
``SHORT_IR_KEYS`` boundary was taken from, against the template.

    python3 benchmarks/gpu_decode_onepass_ir.py [--out DIR] [--rounds 3] [--reps 10] [--parts 12]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, run_header, write_report  # noqa: E402

SHORT = [(B, 32, hkv, s, d) for d in (64, 128) for B in (1, 32) for hkv in (8, 32)
         for s in (1, 8, 16)]
SHORT += [(1, 32, 8, 32, 256), (32, 32, 8, 32, 256), (8, 32, 32, 32, 256),
          (32, 32, 32, 17, 128), (32, 32, 32, 64, 128), (32, 32, 32, 64, 64),
          (30720, 32, 32, 1, 128), (30720, 32, 32, 16, 128), (30720, 16, 16, 16, 256)]


_KERNELS = {}


def forms(q, k):
    from kernels.nvidia.attention import DecodeAttention
    from kernels.nvidia.decode_onepass_ir import IrOnePassDecode, onepass_config
    cfg = onepass_config(q, k, "f16")
    tpl, ir = _KERNELS.get(cfg) or _KERNELS.setdefault(cfg, (DecodeAttention(cfg),
                                                             IrOnePassDecode(cfg)))
    return cfg, {"template": lambda q, k, v, out: tpl(q, k, v, out=out),
                 "onepass_ir": lambda q, k, v, out: ir(q, k, v, out=out)}


BOUNDARY = [(B, 32, 8, s, d) for d in (64, 128) for B in (1, 8, 32) for s in (17, 32, 64)]


def boundary_forms(q, k):
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    from kernels.nvidia.decode_onepass_ir import IrOnePassDecode, onepass_config
    from kernels.nvidia.dispatch import mma_decode_config
    cfg = mma_decode_config(q, k)
    fused, ir = IrFusedMmaDecode(cfg), IrOnePassDecode(onepass_config(q, k, "f16"))
    return cfg, {"fused_ir": lambda q, k, v, out: fused(q, k, v, out=out),
                 "onepass_ir": lambda q, k, v, out: ir(q, k, v, out=out)}


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--parts", default="1")
    args = ap.parse_args()
    import torch
    import gpu_suite
    from gpu_decode_all_ir import timing
    lines, rows = [str(run_header())], []
    copy = gpu_suite.copy_device_gbps(args.reps)
    lines.append(f"copy {copy:.0f} GB/s (1 GiB, profiler device time)")
    if "2" in args.parts:
        timing(lines, rows, BOUNDARY, boundary_forms, args, "boundary", copy)
    if "1" not in args.parts:
        write_report(args.out, "decode_onepass_ir", lines,
                     dict(header=run_header(), copy_GBps=copy, rows=rows))
        return 0
    timing(lines, rows, SHORT, forms, args, "onepass", copy)
    # bitwise: the two outputs of every row, on fresh buffers poisoned with NaN
    lines.append("bitwise (template vs onepass_ir, same inputs):")
    for B, Hq, Hkv, Skv, D in SHORT:
        q, k, v, _ = gpu_suite.decode_tensors(B, Hq, Hkv, Skv, D)
        cfg, f = forms(q, k)
        outs = []
        for name in ("template", "onepass_ir"):
            out = torch.full(q.shape, float("nan"), dtype=torch.float16, device="cuda")
            outs.append(f[name](q, k, v, out))
        torch.cuda.synchronize()
        eq = bool(torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)))
        lines.append(f"  B{B} H{Hq}/{Hkv} {Skv} d{D} {cfg.name}: "
                     f"{'EQUAL' if eq else 'DIFFER'}")
        for r in rows:
            if (r["B"], r["Hq"], r["Hkv"], r["Skv"], r["D"]) == (B, Hq, Hkv, Skv, D):
                r["bitwise_equal"] = eq
        del q, k, v, outs
    lines.append("ratio template / onepass_ir device time (>= 1: the IR kernel is as fast):")
    by = {}
    for r in rows:
        if r["part"] != "onepass":
            continue
        by.setdefault((r["B"], r["Hq"], r["Hkv"], r["Skv"], r["D"]), {})[r["form"]] = r
    for key, fs in by.items():
        t, i = fs["template"], fs["onepass_ir"]
        lines.append(f"  B{key[0]} H{key[1]}/{key[2]} {key[3]} d{key[4]}: device "
                     f"{t['device_s'] / i['device_s']:.3f}  wall {t['wall_s'] / i['wall_s']:.3f}"
                     f"  b2b {t['b2b_s'] / i['b2b_s']:.3f}")
    write_report(args.out, "decode_onepass_ir", lines,
                 dict(header=run_header(), copy_GBps=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
