"""``layoutalg perf CODE_OBJECT``: the static MI300X performance model on a code object.

Exit codes: 0 ok, 2 bad input (not a code object, another arch, no loop, a bad problem size),
3 a required tool (llvm-objdump) is missing.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import KernelError

__all__ = ["register", "cmd_perf"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "perf", help="static MI300X performance model of a gfx942 code object",
        description="Find the hot loop of a gfx942 code object, simulate one MI300X compute "
                    "unit over it (a model, not a measurement) and name the bottleneck; with a "
                    "problem size, simulate every MFMA loop, weight each by its trip count "
                    "from the problem and the tile, and estimate the whole kernel as a "
                    "fraction of MFMA peak.")
    p.add_argument("code_object", metavar="CODE_OBJECT", help="an AMDGPU ELF (.co / .hsaco)")
    p.add_argument("--kernel", default=None, help="kernel name (when the code object has several)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gemm", metavar="M,N,K", default=None, help="GEMM problem size")
    g.add_argument("--attention", metavar="B,H,S,D[,causal]", default=None,
                   help="attention forward problem size")
    p.add_argument("--tile", default=None,
                   help="work-group tile: BMxBN or BMxBNxBK for --gemm (with BK the model checks "
                        "that a loop iteration does whole BK-steps), BM (query rows) for "
                        "--attention")
    p.add_argument("--block-threads", type=int, default=None,
                   help="threads per work-group (default: from the code object's metadata)")
    p.add_argument("--lds", type=int, default=0, metavar="BYTES",
                   help="dynamic LDS per work-group given at launch (e.g. Triton's 'shared')")
    p.add_argument("--branches", choices=("all", "skip"), default="all",
                   help="forward branches inside the hot loop: 'all' runs every instruction "
                        "(default), 'skip' leaves the guarded blocks (masks, tails) out")
    p.add_argument("--roles", choices=("auto", "on", "off"), default="auto",
                   help="wave-specialised kernel: split the waves of a work-group over its "
                        "innermost loops with MFMAs (consecutive waves share a loop); auto "
                        "(default): when the code branches on the wave id")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_perf)


def cmd_perf(args: argparse.Namespace) -> int:
    from . import analyze
    try:
        r = analyze(args.code_object, args.kernel, gemm=args.gemm, attention=args.attention,
                    tile=args.tile, block_threads=args.block_threads,
                    dynamic_lds_bytes=args.lds, branches=args.branches,
                    roles={"auto": None, "on": True, "off": False}[args.roles])
    except KernelError as e:
        print(f"layoutalg perf: error: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 2)
    print(r.to_json() if args.json else r.summary())
    return 0
