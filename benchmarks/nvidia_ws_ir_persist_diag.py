"""Diagnostic A/B of the persistent warp-specialised d128 IR prefill (docs/PERFORMANCE.md, "The
persistent d128 IR's unit start as the template's"), one run:

    python3 benchmarks/nvidia_ws_ir_persist_diag.py OUT.json [--prev OLD.cu]
        [--variant NAME=FILE.cu ...] [--kinds ir,template,...]

Kinds, interleaved in rotated rounds (benchmarks/ab_rounds.py): ``ir`` (the verified IR,
IrWsPersistAttention), ``ir1`` (its verified one-loop form), ``template``, and two source
variants compiled from their text **without verification**, for attribution only (never
dispatched): ``prev`` (an earlier printed source of the same kernel, ``--prev``: its text, the
same kernel name and signature) and ``mbarC`` (the IR's source with the template's C-loop
mbarrier wait instead of the asm loop); ``--variant NAME=FILE`` adds more such texts (the
same kernel name and signature), and ``--kinds`` keeps only the kinds it lists (``ir`` and
``template`` always run).  Every output compared bitwise with the template's."""

from __future__ import annotations

import argparse
import copy
import json
import pathlib

import torch
from kernels.nvidia.wgmma_attention_ws import WsFlashAttention
from kernels.nvidia.wgmma_ws_ir_persist_launch import IrWsPersistAttention
from ab_rounds import prefill_ab_fields, prefill_rounds, print_row
from gpu_timing import run_header, write_rows_json
from nvidia_ws_ir_persist import CFG, SHAPES

OLD = '''LG_DEV void lg_mbar_wait(lg_u32 bar, lg_u32 parity) {
  asm volatile("{\\n.reg .pred p;\\nLG_MBAR_WAIT:\\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n"
               "@!p bra LG_MBAR_WAIT;\\n}\\n" :: "r"(bar), "r"(parity) : "memory");
}'''
NEW = '''LG_DEV void lg_mbar_wait(lg_u32 bar, lg_u32 parity) {
  lg_u32 ok;
  do {
    asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"
                 "selp.u32 %0, 1, 0, p;\\n}\\n" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  } while (ok == 0);
}'''


def variant(fa, source):
    """``fa`` with ``source`` compiled instead of its verified text (diagnostic only)."""
    v = copy.copy(fa)
    v.source, v._module = source, None
    v._calls = type(fa._calls)(64)
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--prev", default=None)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--kinds", default=None)
    args = ap.parse_args()
    print(json.dumps(run_header()), flush=True)
    ir = IrWsPersistAttention(CFG)
    if OLD not in ir.source:
        raise SystemExit("the IR's mbarrier wait is not the asm loop this script replaces")
    want = None if args.kinds is None else {"ir", "template", *args.kinds.split(",")}
    kinds = {"ir": ir, "template": WsFlashAttention(CFG)}
    if want is None or "ir1" in want:   # built (and verified) only when timed
        kinds["ir1"] = IrWsPersistAttention(CFG, one_loop=True)
    kinds["mbarC"] = variant(ir, ir.source.replace(OLD, NEW))
    if args.prev:
        kinds["prev"] = variant(ir, pathlib.Path(args.prev).read_text())
    for v in args.variant:
        name, path = v.split("=", 1)
        kinds[name] = variant(ir, pathlib.Path(path).read_text())
    if want is not None:
        kinds = {n: fa for n, fa in kinds.items() if n in want}
    extra = [n for n in kinds if n not in ("ir", "template")]
    rows = []
    for B, Hq, Hkv, Sq, Skv in SHAPES + [(2, 16, 16, 4096, 4096)]:
        g = torch.Generator(device="cuda").manual_seed(5)
        q = torch.randn(B, Hq, Sq, 128, device="cuda", generator=g).to(torch.bfloat16)
        k, v = (torch.randn(B, Hkv, Skv, 128, device="cuda", generator=g).to(torch.bfloat16)
                for _ in range(2))
        outs, ts, med, err = prefill_rounds(kinds, q, k, v, True, args.rounds, poison=True,
                                            calls_per_round=20)
        row = {"B": B, "Hq": Hq, "Hkv": Hkv, "Sq": Sq, "Skv": Skv, "causal": True,
               **prefill_ab_fields(outs, ts, med, err),
               **{f"{n}_speed_vs_template": round(med["template"] / med[n], 3)
                  for n in extra},
               **{f"{n}_bitwise": bool(torch.equal(outs[n], outs["template"]))
                  for n in extra}}
        rows.append(row)
        print_row(row, "rounds_us")
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
