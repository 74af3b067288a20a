"""The vocabulary of kernel selection, shared by both vendors (issue 20 item 2): a problem, the
device it runs on, and the choice made for it with the reason in words.

:func:`kernels.select.select_gemm` ``(problem, target) -> GemmChoice`` is the one GEMM entry;
each vendor's rule lives with its kernels (:mod:`kernels.nvidia.gemm_select`,
:mod:`kernels.amd.gemm_select`); the AMD attention selection
(:func:`kernels.amd.attention_api.select_kernel`) returns the same kind of answer (a
configuration and, for split-KV, the split count).  This module imports no vendor code, so both
sides can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["GemmProblem", "Target", "GemmChoice", "H100", "H200", "MI300X", "nvidia_target",
           "cdiv"]


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ``b``."""
    return -(-a // b)


@dataclass(frozen=True)
class GemmProblem:
    """``C (m x n) = A (m x k) @ B``; ``b_major`` "n": B is (k, n) row-major, "k": (n, k).
    ``vec``: the widest copy, in elements, that every row start allows (8 = 16 bytes; 1 when
    a leading dimension or pointer is odd)."""

    m: int
    n: int
    k: int
    dtype: str = "f16"
    b_major: str = "n"
    vec: int = 8

    def __post_init__(self) -> None:
        from .errors import LaunchError
        for f in ("m", "n", "k"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise LaunchError(f"GEMM {f}={v!r}: must be a positive int")
        if self.dtype not in ("f16", "bf16"):
            raise LaunchError(f"GEMM dtype {self.dtype!r}: f16 or bf16")
        if self.b_major not in ("n", "k"):
            raise LaunchError(f"b_major {self.b_major!r}: 'n' (B is k x n) or 'k' (B is n x k)")
        if self.vec not in (1, 2, 4, 8):
            raise LaunchError(f"vec {self.vec!r}: 1, 2, 4 or 8 elements")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class Target:
    """A device as the selection sees it: vendor, the code target (``sm_90a`` where wgmma
    runs, ``sm_80``, ``gfx942``) and its SM (CU) count, which sets wave quantisation."""

    vendor: str
    arch: str
    sms: int
    name: str = ""


H100 = Target("nvidia", "sm_90a", 132, "H100 SXM")
H200 = Target("nvidia", "sm_90a", 132, "H200")
MI300X = Target("amd", "gfx942", 304, "MI300X")


def nvidia_target(capability: Tuple[int, int], sms: int, name: str = "") -> Target:
    """The target of an NVIDIA device of compute ``capability`` with ``sms`` SMs (read from
    the device at run time: ``torch.cuda.get_device_properties(i).multi_processor_count``)."""
    major, minor = capability
    arch = "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"
    return Target("nvidia", arch, int(sms), name)


@dataclass(frozen=True)
class GemmChoice:
    """The kernel for one GEMM: ``kind`` ("wgmma", "wgmma_tma", "mma" or "amd"), its
    ``config``, the split-K count (1: none), the launch's CTA count and the reason in words;
    ``pad_rows``: the caller first copies the operands named in ``pad_operands`` ("ab", "a" or
    "b") into buffers whose rows start on multiples of this many bytes (0: the operands run as
    they are; an operand not named is copied only when the kernel cannot address it);
    ``kernel``: the name of the kernel that runs when it is not ``config.name`` (a vendor's
    dispatch may run another build of the same plan, e.g. the NVIDIA IR-built TMA GEMM)."""

    kind: str
    config: Any
    splits: int
    ctas: int
    reason: str
    score: Optional[float] = None
    pad_rows: int = 0
    pad_operands: str = "ab"
    kernel: str = ""

    def __str__(self) -> str:
        name = self.kernel or getattr(self.config, "name", type(self.config).__name__)
        sk = f", split-K {self.splits}" if self.splits > 1 else ""
        return f"{self.kind} {name}{sk} ({self.ctas} CTAs): {self.reason}"
