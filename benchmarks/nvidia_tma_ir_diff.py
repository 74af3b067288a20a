"""Offline (no GPU): the IR-built TMA GEMM against the string template, instruction by
instruction (issue 20 item 1).

Both sources of one configuration are compiled for ``sm_90a`` (``nvcc -cubin``; the kernels
include no header) and disassembled (``cuobjdump -sass``: the CUDA toolkit's or the one Triton
ships).  For each kernel the SASS is cut into regions and the instructions of each region are
counted per opcode (the mnemonic before its first ``.``):

* ``consumer k loop``: the innermost backward branch whose body holds an ``HGMMA``, per k tile
  (its count divided by the k tiles one trip of the unrolled loop covers: HGMMAs / steps);
* ``producer k loop``: the innermost backward branch (not a ``BRA.U.ANY`` retry) whose body
  holds a ``UTMALDG``, per k tile likewise;
* ``epilogue``: from ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` to the last ``UTMASTG``;
* ``kernel``: everything.

    python3 benchmarks/nvidia_tma_ir_diff.py [--dtype f16] [--bm 128 --bn 256 --stages 3]
        [--variant hoist|count] [--json out.json]

``--variant`` compares a text variant of :mod:`benchmarks.nvidia_tma_ir_variants` instead of the
IR's printed text.  Prints, per region, the opcodes whose counts differ, then the totals.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

Instr = Tuple[int, str, str]        # (address, opcode, operands)

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)\s*([^;]*);")


def tool(name: str) -> Optional[str]:
    """``name`` from the PATH, the CUDA toolkit or a Python package that ships it (Triton)."""
    hit = shutil.which(name) or shutil.which(name, path="/usr/local/cuda/bin")
    if hit:
        return hit
    for p in sys.path:
        for c in glob.glob(os.path.join(p, "triton", "backends", "nvidia", "bin", name)):
            return c
    return None


def sass(source: str, name: str) -> List[Instr]:
    nvcc, objdump = tool("nvcc"), tool("cuobjdump")
    if not nvcc or not objdump:
        raise SystemExit("needs nvcc and cuobjdump (CUDA toolkit, or Triton's cuobjdump)")
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, f"{name}.cu"), os.path.join(d, f"{name}.cubin")
        with open(cu, "w") as f:
            f.write(source)
        subprocess.run([nvcc, "-cubin", "-arch=sm_90a", "-O3", "-std=c++17", cu, "-o", cubin],
                       check=True, capture_output=True)
        text = subprocess.run([objdump, "-sass", cubin], check=True, capture_output=True,
                              text=True).stdout
    return [(int(m.group(1), 16), m.group(3), m.group(4).strip())
            for m in _LINE.finditer(text)]


def _loop(ins: List[Instr], marker: str) -> Tuple[List[Instr], int]:
    """The innermost backward-branch loop body holding ``marker`` (and how many times)."""
    best = None
    for i, (addr, op, args) in enumerate(ins):
        if not op.startswith("BRA") or op.startswith("BRA.U"):
            continue
        m = re.match(r"(?:`\()?\s*(0x[0-9a-f]+)", args)
        if not m or int(m.group(1), 16) >= addr:
            continue
        tgt = int(m.group(1), 16)
        body = [x for x in ins if tgt <= x[0] <= addr]
        n = sum(x[1].startswith(marker) for x in body)
        if n and (best is None or len(body) < len(best[0])):
            best = (body, n)
    return best if best else ([], 0)


def regions(ins: List[Instr], steps: int, boxes: int) -> Dict[str, Tuple[List[Instr], int]]:
    """Region name -> (instructions, k tiles they cover)."""
    out = {"kernel": (ins, 1)}
    body, n = _loop(ins, "HGMMA")
    out["consumer k loop"] = (body, max(1, n // steps))
    body, n = _loop(ins, "UTMALDG")
    out["producer k loop"] = (body, max(1, n // boxes))
    start = next((i for i, x in enumerate(ins)
                  if x[1] == "WARPGROUP.DEPBAR.LE" and x[2].endswith("0x0")), 0)
    end = max((i for i, x in enumerate(ins) if x[1].startswith("UTMASTG")), default=start)
    out["epilogue"] = (ins[start:end + 1], 1)
    return out


def counts(ins: List[Instr], per: int) -> Dict[str, float]:
    c = collections.Counter(op.split(".")[0] for _, op, _ in ins)
    return {k: v / per for k, v in sorted(c.items())}


def compare(cfg, variant: Optional[str] = None) -> Dict[str, Dict[str, Dict[str, float]]]:
    from kernels.nvidia.wgmma_tma import emit_tma_gemm, plan_tma_gemm
    from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
    from kernels.printer.cuda import emit_cuda
    p = plan_tma_gemm(cfg)
    ir_src = emit_cuda(build_tma_gemm_ir(cfg))
    if variant:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from nvidia_tma_ir_variants import VARIANTS
        ir_src = VARIANTS[variant](ir_src)
    steps, boxes = cfg.bk // 16, 1 + p.b_load.boxes
    res: Dict[str, Dict[str, Dict[str, float]]] = {}
    for who, src in (("template", emit_tma_gemm(cfg)), ("ir", ir_src)):
        for reg, (body, per) in regions(sass(src, who), steps, boxes).items():
            res.setdefault(reg, {})[who] = counts(body, per)
    return res


def report(res: Dict[str, Dict[str, Dict[str, float]]]) -> str:
    out = []
    for reg, both in res.items():
        t, i = both["template"], both["ir"]
        out.append(f"== {reg}: template {sum(t.values()):.1f}, IR {sum(i.values()):.1f} "
                   "instructions" + (" per k tile" if "loop" in reg else ""))
        for op in sorted(set(t) | set(i)):
            a, b = t.get(op, 0), i.get(op, 0)
            if a != b:
                out.append(f"   {op:<12} template {a:7.1f}   IR {b:7.1f}   {b - a:+7.1f}")
    return "\n".join(out)


def main() -> None:
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--b-major", default="n")
    ap.add_argument("--bm", type=int, default=128)
    ap.add_argument("--bn", type=int, default=256)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    cfg = TmaGemmConfig(dtype=a.dtype, b_major=a.b_major, bm=a.bm, bn=a.bn, stages=a.stages)
    res = compare(cfg, a.variant)
    print(f"{cfg.name}" + (f" (IR text variant {a.variant})" if a.variant else ""))
    print(report(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
