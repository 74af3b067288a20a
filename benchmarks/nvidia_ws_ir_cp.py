"""The serial warp-specialised d256 prefill with the cp.async producer built as verified IR
(kernels.nvidia.wgmma_ws_ir_cp_launch.IrWsCpAttention) timed against the template
warp-specialised kernel of the same configuration (WsFlashAttention(ir.ws_cfg): 128 x 64, two
stages, cp.async, S of block j beside P V of block j - 1) and the one choose_prefill runs at
each shape (the dispatched d256 configuration: ping-pong, deferred P V wait), one run:

    python3 benchmarks/nvidia_ws_ir_cp.py --out results.json [--rounds 7] [--dispatched]

``--dispatched``: the IR is the overlap builder's kernel of the dispatched configuration
itself (kernels.nvidia.wgmma_ws_ir.build_ws_ir of choose_prefill's d256 config), so "template"
and "ws" are the same kernel, timed twice in the rotation (an A/A of the template).
``--fallback128``: instead, the d128 ``cp.async`` fallback (the configuration choose_prefill
runs where TMA cannot address q / k / v) at B8 H32 S8K with K and V broadcast over the heads,
non-causal and causal: its IR (IrWsCpAttention(cfg=...)) against its template, timed twice;
``--control-regs 40,232``: with it, one more IR kind ``ir_regs<p>_<c>`` in the rotation, the
same kernel built at that (producer, consumer) split (``WsOverlapBuilder.CP_REGS``; the one the
d128 fallback had before 56 / 224), verified as any IR kernel is.
``--variants w0d2,w1d4``: with ``--dispatched``, more IR kinds in the same rotation, each the
overlap builder's kernel with its producer's copy form changed (diagnostic: ``w1`` the whole
blocks copied unpredicated beside the predicated ragged one, ``WsOverlapBuilder
.CP_WHOLE_BLOCKS``; ``d<n>`` the sources chained ``n`` deep, ``CP_SRC_CHAIN``; each verified
as any IR kernel is); every kind's printed source's sha256 goes into the row.

Per shape (B, H, Sq, Skv, causal): interleaved rounds (CUDA events, mean of 10 calls per round,
median over rounds; the kernels' order rotates every round); the IR output compared with both
templates' (max abs, bitwise) and each with a float32 torch reference on batch 0.  The serial
schedule is the baseline the dispatched warp-specialised IR builder improves on, not a
candidate for dispatch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re

import torch

from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention
from kernels.nvidia.wgmma_ws_ir import WsOverlapBuilder
from kernels.nvidia.wgmma_ws_ir_cp_launch import IrWsCpAttention

from ab_rounds import prefill_ab_fields, prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json

# (B, H, Hkv, Sq, Skv, causal): the d256 suite's shapes (docs/PERFORMANCE.md)
SHAPES = [(2, 16, 16, 4096, 4096, False), (2, 16, 16, 4096, 4096, True),
          (4, 8, 1, 513, 513, True), (2, 4, 4, 77, 77, False)]
# --fallback128: the d128 cp.async fallback (prefill_select.WS_PREFILL_FALLBACK[128]) where
# TMA cannot address K / V: one K / V head broadcast over the H heads (head stride 0)
FALLBACK_SHAPES = [(8, 32, 8192, 8192, False), (8, 32, 8192, 8192, True)]


def variant(cfg, tag: str) -> IrWsCpAttention:
    """The overlap builder's kernel of ``cfg`` with the producer's copy form ``tag``
    (``w<0|1>d<depth>``), the builder's defaults restored after."""
    m = re.fullmatch(r"w([01])d(\d+)", tag)
    if not m:
        raise SystemExit(f"--variants: {tag!r} is not w<0|1>d<depth>")
    saved = WsOverlapBuilder.CP_WHOLE_BLOCKS, WsOverlapBuilder.CP_SRC_CHAIN
    WsOverlapBuilder.CP_WHOLE_BLOCKS, WsOverlapBuilder.CP_SRC_CHAIN = m.group(1) == "1", \
        int(m.group(2))
    try:
        return IrWsCpAttention(cfg=cfg)
    finally:
        WsOverlapBuilder.CP_WHOLE_BLOCKS, WsOverlapBuilder.CP_SRC_CHAIN = saved


def at_regs(cfg, regs: str) -> IrWsCpAttention:
    """The overlap builder's kernel of ``cfg`` at the (producer, consumer) register split
    ``regs`` (``"40,232"``), the builder's splits restored after."""
    m = re.fullmatch(r"(\d+),(\d+)", regs)
    if not m:
        raise SystemExit(f"--control-regs: {regs!r} is not <producer>,<consumer>")
    saved = WsOverlapBuilder.CP_REGS
    WsOverlapBuilder.CP_REGS = {**saved, cfg.head_dim: (int(m.group(1)), int(m.group(2)))}
    try:
        return IrWsCpAttention(cfg=cfg)
    finally:
        WsOverlapBuilder.CP_REGS = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--pingpong", action="store_true",
                    help="the ping-pong form of the IR kernel (and of its same-config template)")
    ap.add_argument("--dispatched", action="store_true",
                    help="time the overlap builder's IR of the dispatched d256 configuration")
    ap.add_argument("--variants", default="",
                    help="with --dispatched: more IR kinds, e.g. w0d2,w1d4 (module docstring)")
    ap.add_argument("--fallback128", action="store_true",
                    help="the d128 cp.async fallback on K / V broadcast over the heads")
    ap.add_argument("--control-regs", default="",
                    help="with --fallback128: one more IR kind at this split, e.g. 40,232")
    args = ap.parse_args()
    tags = [t for t in args.variants.split(",") if t]
    if args.fallback128:
        return fallback128(args)
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    print(json.dumps(run_header()), flush=True)
    rows = []
    for B, H, Hkv, Sq, Skv, causal in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, H, Sq, 256, device="cuda", generator=g).to(dt)
        k, v = (torch.randn(B, Hkv, Skv, 256, device="cuda", generator=g).to(dt)
                for _ in range(2))
        ws = choose_prefill(args.dtype, 256, causal, "wgmma", True, max(Sq, Skv), Skv).config
        ir = (IrWsCpAttention(cfg=ws) if args.dispatched
              else IrWsCpAttention(causal, args.dtype, pingpong=args.pingpong))
        kinds = {"ir": ir, "template": WsFlashAttention(ir.ws_cfg), "ws": WsFlashAttention(ws)}
        kinds.update({f"ir_{t}": variant(ws, t) for t in (tags if args.dispatched else [])})
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds, poison=True)
        row = {"B": B, "H": H, "Hkv": Hkv, "Sq": Sq, "Skv": Skv, "D": 256, "causal": causal,
               "dtype": args.dtype, "ir": ir.kernel_name, "template": ir.ws_cfg.name,
               "ws_config": ws.name,
               **prefill_ab_fields(outs, ts, med, err),
               "source_sha256": {n: hashlib.sha256(f.source.encode()).hexdigest()[:16]
                                 for n, f in kinds.items()}}
        for t in tags if args.dispatched else []:
            row[f"ir_{t}_speed_vs_template"] = round(med["template"] / med[f"ir_{t}"], 3)
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


def fallback128(args) -> None:
    """The d128 cp.async fallback's IR against its template (module docstring)."""
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    print(json.dumps(run_header()), flush=True)
    rows = []
    for B, H, Sq, Skv, causal in FALLBACK_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, H, Sq, 128, device="cuda", generator=g).to(dt)
        k, v = (torch.randn(B, 1, Skv, 128, device="cuda", generator=g).to(dt)
                .expand(B, H, Skv, 128) for _ in range(2))
        choice = choose_prefill(args.dtype, 128, causal, "wgmma", False, max(Sq, Skv), Skv)
        cfg = choice.config
        assert cfg.loader == "cp.async", choice
        ir = IrWsCpAttention(cfg=cfg)
        kinds = {"ir": ir, "template": WsFlashAttention(cfg), "ws": WsFlashAttention(cfg)}
        ctl = f"ir_regs{args.control_regs.replace(',', '_')}" if args.control_regs else ""
        if ctl:
            kinds[ctl] = at_regs(cfg, args.control_regs)
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, causal, args.rounds, poison=True)
        row = {"B": B, "H": H, "Hkv": "1 broadcast (head stride 0)", "Sq": Sq, "Skv": Skv,
               "D": 128, "causal": causal, "dtype": args.dtype, "ir": ir.kernel_name,
               "template": cfg.name, "k_stride": list(k.stride()),
               "setmaxnreg": {n: re.findall(r"lg_setmaxnreg_(?:dec|inc)<(\d+)>", f.source)
                              for n, f in kinds.items() if n.startswith("ir")},
               **prefill_ab_fields(outs, ts, med, err),
               "source_sha256": {n: hashlib.sha256(f.source.encode()).hexdigest()[:16]
                                 for n, f in kinds.items()}}
        if ctl:
            row[f"{ctl}_speed_vs_template"] = round(med["template"] / med[ctl], 3)
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
