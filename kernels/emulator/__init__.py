"""Functional execution of kernel sources on the CPU (no GPU needed).

See :func:`run` and ``hip_emu.h`` for the execution model.
"""

from .runner import ArgType, EmuLibrary, RunResult, build, kernel_names, run

__all__ = ["run", "build", "kernel_names", "RunResult", "EmuLibrary", "ArgType"]
