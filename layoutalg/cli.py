"""The ``layoutalg`` console script.

Each subcommand lives in the package that owns its feature and is imported only when used:

=============  =========================================
``show``       :mod:`visualize.cli`  (print / draw a layout)
``tv``         :mod:`visualize.cli`  (a TV layout from thread and value layouts)
``banks``      :mod:`visualize.cli`  (verify an LDS access and draw it)
``demo``       this module           (the README's end-to-end demo: algebra, diagrams, kernels)
``mfma``       :mod:`mfma_specs.cli` (``list`` / ``show`` instructions)
``compile``    :mod:`kernels.cli`    (emit, verify, compile a kernel)
``check``      :mod:`kernels.cli`    (run a kernel on the CPU emulator vs torch)
``perf``       :mod:`kernels.perf`   (static MI300X performance model of a code object)
=============  =========================================

A subcommand module exposes ``register(subparsers)`` which adds its parsers and sets
``func`` (a callable taking the parsed args and returning an exit code).

Exit codes: 0 success, 1 a check failed (conflict found, mismatch), 2 bad input (usage or a
malformed layout), 3 a required tool is missing (e.g. clang-19, torch, a GPU runner) or the
install is broken (a foreign ``kernels``/``visualize`` package, see :mod:`layoutalg.install`).

Steps that can take seconds report their stages on stderr (:mod:`layoutalg.progress`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from .errors import LayoutError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TOOL = 0, 1, 2, 3

_MODULES = ("visualize.cli", "mfma_specs.cli", "kernels.cli")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="layoutalg",
        description="CuTe-style layout algebra, AMD MFMA specs, layout verification, diagrams "
                    "and verified HIP kernels for MI300X (gfx942).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError as e:  # a feature package not present: its commands are absent
            if e.name and name.startswith(e.name):
                continue
            raise
        mod.register(sub)
    d = sub.add_parser(
        "demo", help="the end-to-end demo: algebra, verified diagrams, a gfx942 GEMM compiled "
        "and emulated; writes a folder with an index.html",
        description="The end-to-end demo: a tour of the algebra; a TV layout, the gfx942 MFMA "
                    "16x16x16 and 32x32x8 layouts, a swizzle, a conflicted and a fixed LDS "
                    "access (verified), drawn as SVG and PNG; a GEMM verified, compiled for "
                    "gfx942 (code-object report) and run on the CPU emulator against torch.")
    d.add_argument("--out", default="demo_out", help="output folder (default ./demo_out)")
    d.add_argument("--no-png", action="store_true", help="SVG only (no rasterizer needed)")
    d.add_argument("--no-kernels", action="store_true", help="skip the compile/emulate steps")
    d.set_defaults(func=_demo)
    return p


def _demo(args: argparse.Namespace) -> int:
    """Orchestrates packages that must not import each other (visualize, kernels)."""
    from visualize.demo import run_demo
    from .tour import run_tour
    steps = [("algebra", "Layout algebra tour", "CuTe's documented examples computed by "
              "layoutalg, and a composition CuTe accepts but that is not a layout.", run_tour)]
    if not args.no_kernels:
        from kernels.demo import demo_steps
        steps += demo_steps()
    return run_demo(args.out, png=not args.no_png, text_steps=steps)


def main(argv: Optional[List[str]] = None) -> int:
    from .install import package_clashes
    from .progress import enabled
    clashes = package_clashes()
    if clashes:  # a foreign kernels/visualize would drop or break commands: refuse plainly
        for msg in clashes:
            print(f"layoutalg: error: {msg}", file=sys.stderr)
        return EXIT_TOOL
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        with enabled():
            return int(args.func(args) or 0)
    except LayoutError as e:
        print(f"layoutalg {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
