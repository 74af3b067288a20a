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
from typing import List, NoReturn, Optional

from .errors import LayoutError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TOOL = 0, 1, 2, 3

_MODULES = ("visualize.cli", "mfma_specs.cli", "kernels.cli")


class _OneLineParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``layoutalg show: error: ...; see --help``), exit 2.

    Subcommand parsers are made by ``add_subparsers`` with the same class."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        line = " ".join(message.split())
        self.exit(EXIT_USAGE, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
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
        return _usage(args.command, str(e))
    except BrokenPipeError:
        # the reader went away (``| head``): stop writing, say so once on stderr
        _silence_stdout()
        return _usage(args.command, "standard output was closed before the output was written")
    except MemoryError:
        return _usage(args.command, "out of memory: the input is too large for this command; "
                      "give a smaller layout")
    except OSError as e:
        # a path that cannot be written (--out naming a file, a missing folder, no permission)
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        return _usage(args.command, f"cannot write{where}: {e.strerror or e}")
    except KeyboardInterrupt:  # pragma: no cover
        return 130


def _usage(command: str, message: str) -> int:
    """Print one line (the first line of ``message``) to stderr; the exit code for bad input."""
    line = " ".join(message.split("\n")[0].split()) or "bad input"
    try:
        print(f"layoutalg {command}: error: {line}", file=sys.stderr)
    except (BrokenPipeError, OSError):  # pragma: no cover - stderr closed too
        pass
    return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - no real stdout file descriptor
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
