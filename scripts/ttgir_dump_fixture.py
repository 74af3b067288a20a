"""Regenerate tests/fixtures/ttgir_attributes.json: the layout attribute lines of the TTGIR that
Triton's own compiler produces for a small f16 matmul on gfx942, gfx950, gfx1100 and gfx1200.

    PYTHONPATH=. python scripts/ttgir_dump_fixture.py [--out tests/fixtures/ttgir_attributes.json]

Needs Triton (3.9.0 made the committed file); compiles for the AMD target without a GPU (the
TTGIR stage runs before any device code is needed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, 4):
            a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :] + k * BM * BK)
            b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :] + k * BK * BN)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    return mm


def main(argv=None) -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "ttgir_attributes.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    mm = _kernel()
    doc = {"triton": triton.__version__, "command": "PYTHONPATH=. python "
           "scripts/ttgir_dump_fixture.py", "kernel": "f16 matmul 128x128x64, num_warps=4",
           "dumps": {}}
    for arch in ("gfx942", "gfx950", "gfx1100", "gfx1200"):
        src = triton.compiler.ASTSource(
            fn=mm, signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32",
                              "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
            constexprs={"BM": 128, "BN": 128, "BK": 64})
        wave = 64 if arch.startswith("gfx9") else 32
        ttgir = triton.compile(src, target=GPUTarget("hip", arch, wave),
                               options={"num_warps": 4}).asm["ttgir"]
        lines = [ln for ln in ttgir.splitlines() if re.match(r"#\w+ = #ttg\.", ln)]
        dots = sorted(set(re.findall(r"#ttg\.dot_op<\{[^}]*\}>", ttgir)))
        doc["dumps"][arch] = {"aliases": lines, "dot_ops": dots}
        print(arch, len(lines), "aliases", dots)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
