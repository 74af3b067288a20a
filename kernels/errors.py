"""The `KernelError` family: every refusal of the HIP backend is one of these.

Each class carries ``exit_code``, the status the ``layoutalg`` console script should return for it
(0 success, 1 a check failed, 2 bad input, 3 a required tool is missing); ``kernels.cli`` maps an
uncaught error with ``sys.exit(err.exit_code)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from layoutalg.errors import LayoutError


class KernelError(LayoutError):
    """Base class of every error raised by :mod:`kernels`."""

    exit_code = 1


class ToolchainError(KernelError):
    """A required tool (clang / lld / llvm-objdump / a host C++ compiler) is missing or too old.

    The message says what to install.
    """

    exit_code = 3


@dataclass
class Diagnostic:
    """One ``file:line:col: severity: message`` line of a compiler's output."""

    file: str
    line: int
    col: int
    severity: str              # "error", "warning", "note", "fatal error"
    message: str
    source_line: Optional[str] = None   # the quoted line of ``file`` (None when not readable)

    def format(self) -> str:
        head = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
        if self.source_line is None:
            return head
        gutter = f"{self.line:5d} | "
        caret = " " * (len(gutter) - 2) + "| " + _caret_pad(self.source_line, self.col) + "^"
        return f"{head}\n{gutter}{self.source_line}\n{caret}"


def _caret_pad(text: str, col: int) -> str:
    # keep tabs so the caret lines up under the offending column
    return "".join(c if c == "\t" else " " for c in text[: max(col - 1, 0)])


class CompileError(KernelError):
    """The compiler rejected a source; ``diagnostics`` quote the offending source lines."""

    exit_code = 1

    def __init__(self, summary: str, diagnostics: Sequence[Diagnostic] = (), log: str = "",
                 command: Sequence[str] = ()):
        self.summary = summary
        self.diagnostics: List[Diagnostic] = list(diagnostics)
        self.log = log
        self.command = list(command)
        shown = [d for d in self.diagnostics if d.severity in ("error", "fatal error")][:8]
        body = "\n".join(d.format() for d in shown) if shown else log.strip()[-4000:]
        super().__init__(f"{summary}\n{body}" if body else summary)


class EmulatorError(KernelError):
    """The CPU emulator stopped a kernel: deadlock, divergent barrier or wave collective,
    out-of-bounds access, LDS overflow, timeout, or an unsupported builtin argument."""

    exit_code = 1


class NoDeviceError(ToolchainError):
    """No ROCm runtime (libamdhip64) or no AMD GPU: the kernel can only run on the emulator."""


class LaunchError(KernelError):
    """Launch arguments do not fit the kernel (shape, dtype, stride, device, alignment, grid)."""

    exit_code = 2
