"""The ``layoutalg`` console script.

Each subcommand lives in the package that owns its feature and is imported only when used:

=============  =========================================
``show``       :mod:`visualize.cli`  (print / draw a layout)
``tv``         :mod:`visualize.cli`  (a TV layout from thread and value layouts)
``banks``      :mod:`visualize.cli`  (verify an LDS access and draw it)
``demo``       :mod:`visualize.cli`  (the README's end-to-end demo)
``mfma``       :mod:`mfma_specs.cli` (``list`` / ``show`` instructions)
``compile``    :mod:`kernels.cli`    (emit, verify, compile a kernel)
``check``      :mod:`kernels.cli`    (run a kernel on the CPU emulator vs torch)
=============  =========================================

A subcommand module exposes ``register(subparsers)`` which adds its parsers and sets
``func`` (a callable taking the parsed args and returning an exit code).

Exit codes: 0 success, 1 a check failed (conflict found, mismatch), 2 bad input (usage or a
malformed layout), 3 a required tool is missing (e.g. clang-19).
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
    return p


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except LayoutError as e:
        print(f"layoutalg {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
