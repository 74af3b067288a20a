"""The decode at head dims other than 64/128/256 on the verified IR kernel
(kernels/nvidia/decode_padded.py): what ``decode_attention()`` runs at d32 / d80 / d96 / d160
against the only other way to run them on this library, padding q / k / v with zeros to the
template head dim (``policy_head_dim``: 64 / 128 / 256) and running the d64 / d128 / d256
kernel (the padding copy NOT timed: the best case for that alternative).  Both forms checked
against a float64 reference; ``--rounds`` interleaved rounds (``gpu_suite.interleaved_rounds``:
profiler device time + CUDA-event wall, medians of ``--reps``) and back-to-back wall per call;
``of_copy_device``: the bytes the D form reads and writes over the copy rate.

    python3 benchmarks/gpu_decode_padded.py [--out DIR] [--rounds 2] [--reps 10]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_timing import bench_parser, run_header, write_report  # noqa: E402

# (B, Hq, Hkv, Skv, D): GQA 4 / 8 and odd groups, short and long caches
SHAPES = [(8, 32, 8, 4096, 32), (4, 32, 8, 8192, 80), (8, 24, 8, 8192, 80),
          (16, 40, 8, 2048, 96), (1, 32, 8, 32_768, 96), (2, 56, 8, 16_384, 160),
          (4, 16, 16, 4096, 160), (32, 32, 8, 48, 80)]


def padded_forms(q, k):
    """``(config, {form: call})``: the IR kernel at D, and the kernel at its policy head dim
    on zero-padded copies made once (outside the timing)."""
    import math
    import torch
    from kernels.nvidia.decode_padded import policy_head_dim
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    D = q.shape[-1]
    Dp = policy_head_dim(D)
    cfg = choose_decode(q, k).config
    pads = {}

    def wide(q, k, v, out):
        if not pads:
            pads.update(q=torch.nn.functional.pad(q, (0, Dp - D)).contiguous(),
                        k=torch.nn.functional.pad(k, (0, Dp - D)).contiguous(),
                        v=torch.nn.functional.pad(v, (0, Dp - D)).contiguous())
        return decode_attention(pads["q"], pads["k"], pads["v"],
                                scale=1 / math.sqrt(D))[..., :D]
    return cfg, {"ir_at_D": lambda q, k, v, out: decode_attention(q, k, v, out=out),
                 f"pad_{Dp}": wide}


def main() -> int:
    ap = bench_parser(reps=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    import gpu_suite
    from gpu_decode_all_ir import timing
    lines, rows = [str(run_header())], []
    copy = gpu_suite.copy_device_gbps(args.reps)
    lines.append(f"copy {copy:.0f} GB/s (1 GiB, profiler device time)")
    timing(lines, rows, SHAPES, padded_forms, args, "padded_head_dim", copy)
    write_report(args.out, "decode_padded", lines, dict(header=run_header(), copy_GBps=copy,
                                                        rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
