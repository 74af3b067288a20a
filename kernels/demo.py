"""The kernel steps of ``layoutalg demo``: compile a verified GEMM for gfx942 and run it on the
CPU emulator against torch.

Each step runs the very command a user would type (``layoutalg compile gemm ...`` and
``layoutalg check gemm --emulate ...``) through the CLI's own parser, so the demo shows exactly
what the commands print.  Nothing here runs on an AMD GPU: the code object is compiled offline
and executed functionally by :mod:`kernels.emulator`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from typing import Callable, List, Sequence, Tuple

__all__ = ["demo_steps", "run_cli"]


def run_cli(argv: Sequence[str]) -> Tuple[int, List[str]]:
    """Run ``layoutalg <argv>`` for the kernel commands in-process; (exit code, output lines)."""
    from .cli import register
    parser = argparse.ArgumentParser(prog="layoutalg")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = int(args.func(args) or 0)
    return code, [line for line in buf.getvalue().splitlines() if line.strip()]


def _step(argv: Sequence[str], out_sub: str = "") -> Callable:
    def run(out: str):
        argv2 = list(argv)
        files: List[str] = []
        if out_sub:
            folder = os.path.join(out, out_sub)
            argv2 += ["--out", folder]
            files = [f"{out_sub}/{f}" for f in ("kernel.hip", "kernel.co", "report.json")]
        code, lines = run_cli(argv2)
        return [f"$ layoutalg {' '.join(argv)}"] + lines, files if code == 0 else [], code == 0
    return run


def demo_steps() -> List[Tuple[str, str, str, Callable]]:
    """``(stem, title, description, run)`` steps for :func:`visualize.demo.run_demo`."""
    return [
        ("gemm_gfx942", "GEMM compiled for gfx942",
         "A 256x256x256 fp16 GEMM (128x128x32 block tile, 2x2 waves, MFMA chosen by "
         "choose_mfma, swizzled double-buffered LDS): the verification gate proves every lane "
         "map, bank-conflict freedom, coverage and vector widths before clang-19 compiles it; "
         "the code-object report is read from the ELF.",
         _step(["compile", "gemm", "--arch", "gfx942", "--m", "256", "--n", "256", "--k", "256"],
               "gemm_gfx942")),
        ("gemm_emulated", "GEMM on the CPU emulator vs torch",
         "The same emitted HIP source compiled for the host and run with wave64 lockstep, LDS "
         "and MFMA semantics generated from mfma_specs, on an odd 200x136x72 problem "
         "(predicated edges), compared with a float64 torch matmul.",
         _step(["check", "gemm", "--emulate", "--m", "200", "--n", "136", "--k", "72"])),
    ]
