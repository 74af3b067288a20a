"""``layoutalg compile KERNEL`` and ``layoutalg check KERNEL`` (kernels from :mod:`kernels.registry`);
``layoutalg perf CODE_OBJECT`` (the static MI300X model, :mod:`kernels.perf.cli`).

``compile`` builds the kernel (plan -> gate -> HIP), compiles it for ``--arch`` and writes
``kernel.hip``, ``kernel.co`` and ``report.json`` (with the static performance model's
``perf_model`` fields) into ``--out``.  ``check --emulate`` runs the kernel on the CPU emulator
against torch.  Both end on one ``PASS ...`` or ``FAIL ...`` line; their stages are reported on
stderr (:mod:`layoutalg.progress`), and options the chosen kernel does not use are warned about
there.

Exit codes: 0 ok, 1 a verification check failed or the results mismatch, 2 bad input,
3 a required tool is missing (clang-19; torch for ``check``; ``check`` without ``--emulate``:
there is no GPU runner).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import NamedTuple
from pathlib import Path

from layoutalg.progress import stage

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
        kp.set_defaults(func=func, _parser=kp)


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
    from .perf.cli import register as register_perf
    register_perf(subparsers)


def _fail(args, e: Exception) -> int:
    code = getattr(e, "exit_code", 1)
    print(f"layoutalg {args.command} {args.kernel}: error: {e}", file=sys.stderr)
    if code == 1:  # a check failed (gate, compiler, emulator): the verdict line still comes last
        print(f"FAIL: {type(e).__name__} (details on stderr)")
    return code


def _warn_ignored(args: argparse.Namespace, entry, cfg) -> None:
    """Options the user set that this kernel/command does not use: say so, never silently."""
    parser = getattr(args, "_parser", None)

    def given(dest: str) -> bool:
        return parser is not None and getattr(args, dest, None) != parser.get_default(dest)
    hook = getattr(entry, "ignored_options", None)
    for msg in (hook(args, cfg, args.command, given) if hook else []):
        print(f"layoutalg {args.command} {args.kernel}: warning: {msg}", file=sys.stderr)


def _print_choice(cfg) -> None:
    """The tile selection's decision, when the tile was chosen for the user."""
    sel = getattr(cfg, "selection", None)
    if sel:
        print(f"tile choice (no --block given): {sel}")


def _kernel_lines(rep: dict) -> list:
    """One summary line per kernel in the code object (split-KV decode has two)."""
    per = rep.get("kernels") or {rep.get("kind", "kernel"): rep}
    lines = []
    for role, k in per.items():
        name = k.get("kernel", rep.get("kernel"))
        tag = f"{role}: " if len(per) > 1 else ""
        hot = k.get("hot_loop_mfma", (k.get("hot_loop") or {}).get("mfma", 0))
        lines.append(f"{tag}{name} [{rep['arch']}]: VGPR {k['vgpr']} AGPR {k['agpr']} SGPR "
                     f"{k['sgpr']} | LDS {k['lds_bytes']} B | scratch {k['scratch_bytes']} B | "
                     f"spills {k['spills']} | waves/SIMD {k['waves_per_simd']} | MFMA "
                     f"{k['mfma_count']} ({hot} in the hot loop)")
    return lines


def cmd_compile(args: argparse.Namespace) -> int:
    from .amd.registry import get
    try:
        entry = get(args.kernel)
        cfg = entry.config(args)
        _warn_ignored(args, entry, cfg)
        t0 = time.perf_counter()
        with stage(f"building and verifying {args.kernel}"):
            bk = entry.build(cfg)
        with stage(f"compiling {bk.name} for {args.arch} (clang-19)"):
            co = bk.compile(args.arch)
        t1 = time.perf_counter()
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.hip").write_text(bk.source)
        (out / "kernel.co").write_bytes(co.binary)
        rep = bk.report()
        rep["timings_s"]["python_to_code_object"] = t1 - t0
        from .perf import report_fields
        rep["perf_model"] = report_fields(co.binary, bk.name, block_threads=bk.block)
        (out / "report.json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    except KernelError as e:
        return _fail(args, e)
    v = rep["verification"]
    _print_choice(cfg)
    for line in _kernel_lines(rep):
        print(line)
    print(f"verification: {sum(v.values())}/{len(v)} checks hold "
          f"({', '.join(k for k, ok in v.items() if ok)})")
    pm = rep["perf_model"]
    if "mfma_busy" in pm:
        print(f"perf model (not a measurement, +-{100 * pm['error_bar']:.0f}%): MFMA pipes busy "
              f"{100 * pm['mfma_busy']:.0f}% of the hot loop, binding: {pm['binding']}")
    print(f"wrote {out / 'kernel.hip'}, {out / 'kernel.co'}, {out / 'report.json'} "
          f"({t1 - t0:.2f} s from Python objects to code object)")
    failed = [k for k, ok in v.items() if not ok]
    if failed:
        print(f"FAIL: {len(failed)} verification check(s) fail: {', '.join(failed)}")
        return 1
    names = " + ".join(k.get("kernel", bk.name) for k in (rep.get("kernels") or {"": {}}).values())
    print(f"PASS: {names} verified ({len(v)} checks) and compiled for {rep['arch']}")
    return 0


def _torch_missing(args: argparse.Namespace) -> bool:
    try:  # check needs it anyway; importing also catches a torch that is present but broken
        import torch  # noqa: F401
        return False
    except ImportError:
        pass
    print(f"layoutalg {args.command} {args.kernel}: error: torch is needed for the inputs and "
          "the reference of check --emulate and is not installed; install it with\n"
          "  pip install 'layoutalg[torch]'\n"
          "or, for the CPU build only (no CUDA download),\n"
          "  pip install torch --index-url https://download.pytorch.org/whl/cpu", file=sys.stderr)
    return True


def cmd_check(args: argparse.Namespace) -> int:
    from .amd.registry import get
    if not args.emulate:
        print(f"layoutalg check {args.kernel}: error: no GPU runner here (this is a tool that is "
              "missing, exit 3); pass --emulate to run on the CPU emulator", file=sys.stderr)
        return 3
    if _torch_missing(args):
        return 3
    try:
        entry = get(args.kernel)
        cfg = entry.config(args)
        _warn_ignored(args, entry, cfg)
        with stage(f"building and verifying {args.kernel}"):
            bk = entry.build(cfg)
        v = bk.verification.as_bools()
        _print_choice(cfg)
        print(f"{bk.name}: verification {sum(v.values())}/{len(v)} checks hold; grid "
              f"{bk.grid[0]}x{bk.grid[1]}, {bk.block} threads")
        inputs = entry.inputs(cfg, args.seed)
        nblocks = 1
        for g in bk.grid:
            nblocks *= int(g)
        t0 = time.perf_counter()
        # the first run of a kernel also host-compiles it (cached afterwards)
        with stage(f"emulating {nblocks} block(s) x {bk.block} threads on the CPU"):
            res = bk.emulate(*inputs, workers=args.workers)
        t1 = time.perf_counter()
        out = entry.output(cfg, res.outputs)
        ref = entry.reference(cfg, inputs)
    except KernelError as e:
        return _fail(args, e)
    atol, rtol = entry.tolerance(cfg)
    print(f"emulated in {t1 - t0:.2f} s ({res.seconds:.2f} s running)")
    # every output is compared: the main one first, then the entry's others (attention: the LSE)
    extra = getattr(entry, "extra_comparisons", None)
    comparisons = [("output", out, ref, atol, rtol)]
    comparisons += list(extra(cfg, inputs, res.outputs) if extra else [])
    nbad = 0
    worst = 0.0
    parts = []
    for name, got, want, a_tol, r_tol in comparisons:
        c = _compare(name, got, want, a_tol, r_tol)
        label = "max error:" if name == "output" else f"{name}: max error"
        print(f"{label} {c.max_error:.6g} (absolute, vs a float64/fp32 torch reference)")
        what = "elements" if name == "output" else f"{name} elements"
        parts.append(f"{c.total - c.bad} of {c.total} {what} within |out - ref| <= "
                     f"{a_tol:g} + {r_tol:g}*|ref|")
        nbad, worst = nbad + c.bad, max(worst, c.worst)
    failed = [k for k, ok in v.items() if not ok]
    verdict = "FAIL" if nbad or failed else "PASS"
    print(f"{verdict}: {'; '.join(parts)} (worst at {100 * worst:.0f} % of its bound)"
          + (f"; failed checks: {', '.join(failed)}" if failed
             else f"; {len(v)} verification checks hold"))
    return 1 if verdict == "FAIL" else 0


class _Comparison(NamedTuple):
    bad: int            # elements out of tolerance
    total: int
    max_error: float    # absolute
    worst: float        # max of |got - want| / bound; 1.0 = exactly at the tolerance


def _compare(name: str, got, want, atol: float, rtol: float) -> _Comparison:
    """Compare ``got`` with ``want`` element-wise; infinities must match exactly (-inf LSE of a
    row without visible keys), NaN is always out of tolerance; prints the first mismatch."""
    import torch
    same_inf = torch.isinf(want) & (got == want)
    err = torch.where(same_inf, torch.zeros_like(want), (got - want).abs())
    err = torch.nan_to_num(err, nan=float("inf"))
    bound = atol + rtol * torch.where(same_inf, torch.zeros_like(want), want.abs())
    bad = err > bound
    nbad = int(bad.sum())
    if nbad:
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        print(f"MISMATCH ({name}): {nbad} of {bad.numel()} elements out of tolerance; first at "
              f"{idx}: got {float(got[idx]):.6g}, expected {float(want[idx]):.6g}")
    if not err.numel():
        return _Comparison(0, 0, 0.0, 0.0)
    return _Comparison(nbad, bad.numel(), float(err.max()), float((err / bound).max()))
