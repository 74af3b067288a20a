"""Why the head_dim 256 decode's ratio to a device copy varies between runs (issue 20): the
tensor-core split kernel at the d256 decode shapes, every (warps, split count) candidate,
measured in several interleaved rounds (a fresh random order per round, so a drift of the
machine hits every candidate alike), with the split kernel's and the combine kernel's device
time apart, the per-round device copy and the SM clock beside each round.

    python3 benchmarks/gpu_decode_spread.py [--out DIR] [--rounds 5] [--reps 20] [--short]

Writes ``decode_spread.json`` (every measurement) and ``decode_spread.txt`` (per candidate:
median, min and max of the per-round ratios; the combine's share).  ``flush`` rows write a
256 MiB buffer before every call, so the call finds nothing of its own inputs in L2.
"""
from __future__ import annotations

import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, gpu_clocks, kernel_events, write_report  # noqa: E402

# (B, Hq, Hkv, Skv, D): the suite's d256 row, a group-8 long one and a batch-1 one
SHAPES = {"B4 H32/8 4096": (4, 32, 8, 4096, 256),
          "B2 H64/8 16384": (2, 64, 8, 16_384, 256),
          "B1 H32/8 32768": (1, 32, 8, 32_768, 256)}
CANDIDATES = {"B4 H32/8 4096": [(w, n) for w in (2, 4, 8) for n in (4, 6, 8, 12, 16, 24, 32)],
              "B2 H64/8 16384": [(4, 8), (4, 16), (4, 32), (4, 48), (2, 16), (2, 32)],
              "B1 H32/8 32768": [(4, 16), (4, 32), (4, 64), (8, 16), (8, 32)]}
SHORT = {"B4 H32/8 4096": [(4, 8), (8, 4), (4, 6)], "B2 H64/8 16384": [(4, 16)],
         "B1 H32/8 32768": [(8, 16), (4, 32)]}        # --short: the choices before and after
FLUSHED = {"B4 H32/8 4096": [(4, 8), (4, 16), (8, 4), (8, 8)]}


def kernel_times(fn, reps):
    """Per-kernel lists of device microseconds (CUPTI) over ``reps`` calls, lg_* kernels only."""
    per = {}
    for e in kernel_events(fn, reps):
        if e.device_time > 0 and e.name.startswith("lg_"):
            per.setdefault(e.name, []).append(e.device_time)
    return per


def clocks() -> str:
    return gpu_clocks(timeout=10)


def main() -> int:
    ap = bench_parser(reps=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--short", action="store_true", help="only the SHORT candidates, no flush")
    args = ap.parse_args()
    import torch
    from gpu_suite import copy_device_gbps, rel
    from kernels.nvidia.decode_mma import MmaDecodeConfig, MmaSplitKVDecode, heads_per_mma_block
    from kernels.nvidia.dispatch import choose_decode

    data, kernels, jobs = {}, {}, []
    for label, (B, Hq, Hkv, Skv, D) in SHAPES.items():
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        g = Hq // Hkv
        kf, vf = k[:1].float().repeat_interleave(g, 1), v[:1].float().repeat_interleave(g, 1)
        ref = ((q[:1].float() @ kf.transpose(-1, -2)) / math.sqrt(D)).softmax(-1) @ vf
        del kf, vf
        choice = choose_decode(q, k, out_dtype="f16")
        auto_dec = MmaSplitKVDecode(choice.config)
        auto = (choice.config.warps, auto_dec.plan(q, k, v)["splits"])
        data[label] = dict(q=q, k=k, v=v, ref=ref, nbytes=(2 * q.numel() + k.numel() + v.numel()) * 2,
                           auto=auto, choice=str(choice.config.name))
        for w, n in (SHORT if args.short else CANDIDATES)[label]:
            cfg = MmaDecodeConfig(head_dim=D, hg=heads_per_mma_block(g), warps=w)
            if cfg not in kernels:
                kernels[cfg] = MmaSplitKVDecode(cfg)
            jobs += [(label, cfg, n, False)]
            if (w, n) in FLUSHED.get(label, []) and not args.short:
                jobs += [(label, cfg, n, True)]
    errs = {}
    for label, cfg, n, _ in jobs:
        d = data[label]
        key = f"{label}|w{cfg.warps}|{n}"
        if key not in errs:
            out = kernels[cfg](d["q"], d["k"], d["v"], kv_splits=n)
            errs[key] = rel(out[:1], d["ref"])
    flush = torch.empty(256 * 2 ** 20, dtype=torch.uint8, device="cuda")
    rng = random.Random(20)
    rows, rounds = [], []
    for r in range(args.rounds):
        rounds.append(dict(round=r, copy_GBps=copy_device_gbps(10), clocks_before=clocks()))
        order = jobs[:]
        rng.shuffle(order)
        for label, cfg, n, flushed in order:
            d = data[label]
            dec = kernels[cfg]
            out = torch.empty(d["q"].shape, dtype=torch.float16, device="cuda")

            def call():
                if flushed:
                    flush.fill_(r + 1)
                dec(d["q"], d["k"], d["v"], out=out, kv_splits=n)
            per = kernel_times(call, args.reps)
            main_us = per.get(cfg.name, [])
            comb_us = per.get(cfg.combine_name, [])
            tot = [a + (comb_us[i] if i < len(comb_us) else 0.0) for i, a in enumerate(main_us)]
            rows.append(dict(round=r, shape=label, warps=cfg.warps, splits=n, flushed=flushed,
                             auto=(cfg.warps, n) == d["auto"], main_us=statistics.median(main_us),
                             combine_us=statistics.median(comb_us) if comb_us else 0.0,
                             total_us=statistics.median(tot), rep_min_us=min(tot),
                             rep_max_us=max(tot), nbytes=d["nbytes"],
                             copy_GBps=rounds[-1]["copy_GBps"]))
        rounds[-1]["clocks_after"] = clocks()
        print(json.dumps(rounds[-1]), flush=True)
    for row in rows:
        row["of_copy"] = row["nbytes"] / (row["total_us"] * 1e-6) / 1e9 / row["copy_GBps"]
    lines = [f"{torch.cuda.get_device_name()}; {args.rounds} rounds x {args.reps} calls; "
             "of_copy per round = bytes / median total device time / that round's copy"]
    for r in rounds:
        lines.append(f"round {r['round']}: copy {r['copy_GBps']:.0f} GB/s; before "
                     f"{r['clocks_before']}; after {r['clocks_after']}")
    lines.append(f"{'shape':<16}{'w':>3}{'spl':>5}{'fl':>3}{'auto':>5}{'med':>7}{'min':>7}{'max':>7}"
                 f"{'main us':>9}{'comb us':>9}{'rel err':>9}")
    groups = {}
    for row in rows:
        groups.setdefault((row["shape"], row["warps"], row["splits"], row["flushed"]), []).append(row)
    for (label, w, n, fl), rs in groups.items():
        fr = [x["of_copy"] for x in rs]
        lines.append(f"{label:<16}{w:>3}{n:>5}{'F' if fl else '':>3}{'*' if rs[0]['auto'] else '':>5}"
                     f"{statistics.median(fr):>7.3f}{min(fr):>7.3f}{max(fr):>7.3f}"
                     f"{statistics.median(x['main_us'] for x in rs):>9.1f}"
                     f"{statistics.median(x['combine_us'] for x in rs):>9.1f}"
                     f"{errs[f'{label}|w{w}|{n}']:>9.1e}")
    write_report(args.out, "decode_spread", lines, dict(
        device=torch.cuda.get_device_name(), rounds=rounds, rows=rows, rel_err=errs,
        auto={k: list(d["auto"]) for k, d in data.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
