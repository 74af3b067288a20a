"""``layoutalg compile KERNEL`` and ``layoutalg check KERNEL`` (kernels from :mod:`kernels.registry`).

``compile`` builds the kernel (plan -> gate -> HIP), compiles it for ``--arch`` and writes
``kernel.hip``, ``kernel.co`` and ``report.json`` into ``--out``.  ``check --emulate`` runs the
kernel on the CPU emulator against torch and prints the max error last.

Exit codes: 0 ok, 1 a verification check failed or the results mismatch, 2 bad input,
3 a required tool is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .errors import KernelError

__all__ = ["register", "cmd_compile", "cmd_check"]


def _add_kernels(p: argparse.ArgumentParser, func, extra) -> None:
    from .amd.registry import REGISTRY
    sub = p.add_subparsers(dest="kernel", metavar="KERNEL")
    sub.required = True
    for name, entry in sorted(REGISTRY.items()):
        kp = sub.add_parser(name, help=entry.help, description=entry.help)
        extra(kp)
        entry.add_arguments(kp)
        kp.set_defaults(func=func)


def register(subparsers) -> None:
    def compile_opts(kp):
        kp.add_argument("--arch", default="gfx942", help="target (default gfx942)")
        kp.add_argument("--out", required=True, help="output directory")

    def check_opts(kp):
        kp.add_argument("--arch", default="gfx942", help="target the kernel is built for")
        kp.add_argument("--emulate", action="store_true",
                        help="run on the CPU emulator (the only runner on a machine without a "
                             "ROCm GPU)")
        kp.add_argument("--seed", type=int, default=0)
        kp.add_argument("--workers", type=int, default=None, help="emulator processes")

    pc = subparsers.add_parser("compile", help="emit, verify and compile a kernel",
                               description="Build a kernel, run the verification gate, compile "
                                           "it; writes kernel.hip, kernel.co, report.json.")
    _add_kernels(pc, cmd_compile, compile_opts)
    pk = subparsers.add_parser("check", help="run a kernel against torch (CPU emulator)",
                               description="Build a kernel (gated) and run it against torch; "
                                           "prints the max error last.")
    _add_kernels(pk, cmd_check, check_opts)


def _fail(args, e: Exception) -> int:
    code = getattr(e, "exit_code", 1)
    print(f"layoutalg {args.command} {args.kernel}: error: {e}", file=sys.stderr)
    return code


def cmd_compile(args: argparse.Namespace) -> int:
    from .amd.registry import get
    try:
        entry = get(args.kernel)
        cfg = entry.config(args)
        t0 = time.perf_counter()
        bk = entry.build(cfg)
        co = bk.compile(args.arch)
        t1 = time.perf_counter()
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.hip").write_text(bk.source)
        (out / "kernel.co").write_bytes(co.binary)
        rep = bk.report()
        rep["timings_s"]["python_to_code_object"] = t1 - t0
        (out / "report.json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    except KernelError as e:
        return _fail(args, e)
    v = rep["verification"]
    print(f"{bk.name} [{rep['arch']}]: VGPR {rep['vgpr']} AGPR {rep['agpr']} SGPR {rep['sgpr']} "
          f"| LDS {rep['lds_bytes']} B | scratch {rep['scratch_bytes']} B | spills "
          f"{rep['spills']} | waves/SIMD {rep['waves_per_simd']} | MFMA {rep['mfma_count']} "
          f"({rep['hot_loop_mfma']} in the hot loop)")
    print(f"verification: {sum(v.values())}/{len(v)} checks hold "
          f"({', '.join(k for k, ok in v.items() if ok)})")
    print(f"wrote {out / 'kernel.hip'}, {out / 'kernel.co'}, {out / 'report.json'} "
          f"({t1 - t0:.2f} s from Python objects to code object)")
    return 0 if all(v.values()) else 1


def cmd_check(args: argparse.Namespace) -> int:
    from .amd.registry import get
    if not args.emulate:
        print(f"layoutalg check {args.kernel}: error: no GPU runner here; pass --emulate to run "
              "on the CPU emulator", file=sys.stderr)
        return 2
    try:
        entry = get(args.kernel)
        cfg = entry.config(args)
        bk = entry.build(cfg)
        v = bk.verification.as_bools()
        print(f"{bk.name}: verification {sum(v.values())}/{len(v)} checks hold; grid "
              f"{bk.grid[0]}x{bk.grid[1]}, {bk.block} threads")
        inputs = entry.inputs(cfg, args.seed)
        t0 = time.perf_counter()
        res = bk.emulate(*inputs, workers=args.workers)
        t1 = time.perf_counter()
        out = entry.output(cfg, res.outputs)
        ref = entry.reference(cfg, inputs)
    except KernelError as e:
        return _fail(args, e)
    import torch
    atol, rtol = entry.tolerance(cfg)
    err = (out - ref).abs()
    bad = err > atol + rtol * ref.abs()
    nbad = int(bad.sum())
    print(f"emulated in {t1 - t0:.2f} s ({res.seconds:.2f} s running); tolerance "
          f"|out - ref| <= {atol:g} + {rtol:g}*|ref| vs float64 torch reference")
    if nbad:
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        print(f"MISMATCH: {nbad} of {bad.numel()} elements out of tolerance; first at {idx}: "
              f"got {float(out[idx]):.6g}, expected {float(ref[idx]):.6g}")
    print(f"max error: {float(err.max()):.6g}")
    return 1 if nbad else 0
