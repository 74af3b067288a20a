"""Which architecture :func:`kernels.verify.verifier.verify` checks a kernel for.

The verifier's rules depend on the target: the shared-memory / LDS capacity, the bank model
(AMD's LDS phases or NVIDIA's 32 four-byte banks), the lane count, the register file.  A
kernel built for one vendor and checked under the other's model is not verified for what runs,
so:

* no ``arch`` given: the kernel's own (``meta["arch"]``, else its builder's configuration's
  ``meta["cfg"].arch``); a kernel with NVIDIA statements and no recorded arch is refused (the
  caller must name its ``sm_*`` target); any other kernel takes ``gfx942``, the AMD target the
  project is built for;
* ``arch`` given: a kernel built for NVIDIA -- holding NVIDIA statements (those of
  :mod:`kernels.ir.nvidia`, :mod:`~kernels.ir.nvidia_tma`, :mod:`~kernels.ir.nvidia_wgmma`:
  mma.sync, ldmatrix, cp.async, mbarriers, TMA, wgmma) or recording an ``sm_*`` arch -- is
  refused at an AMD arch.  Other kernels (the AMD kernels, which the AMD-flavoured runs on
  NVIDIA print as CUDA) may be checked for either vendor.
"""

from __future__ import annotations

from typing import Any, Optional

from ..ir.core import walk
from .gate_common import is_nvidia
from .spec import SpecError

__all__ = ["DEFAULT_ARCH", "kernel_arch", "nvidia_statement", "resolve_arch"]

#: the target a kernel with no recorded arch and no vendor statements is checked for
DEFAULT_ARCH = "gfx942"

_NVIDIA_IR = ("kernels.ir.nvidia",)     # the module and its siblings nvidia_tma, nvidia_wgmma


def kernel_arch(kernel_ir: Any) -> Optional[str]:
    """The arch the kernel's builder recorded (``meta["arch"]`` or ``meta["cfg"].arch``),
    else None."""
    meta = getattr(kernel_ir, "meta", None) or {}
    own = meta.get("arch") or getattr(meta.get("cfg"), "arch", None)
    return str(own) if own else None


def nvidia_statement(kernel_ir: Any) -> Optional[Any]:
    """The first statement of the kernel's body from the NVIDIA IR modules, else None."""
    return next((s for s in walk(getattr(kernel_ir, "body", []) or [])
                 if type(s).__module__.startswith(_NVIDIA_IR)), None)


def resolve_arch(kernel_ir: Any, arch: Optional[str]) -> str:
    """The arch to verify ``kernel_ir`` for (module docstring); raises
    :class:`~kernels.verify.spec.SpecError` where the choice would check it under the other
    vendor's model."""
    name = getattr(kernel_ir, "name", kernel_ir)
    hit = nvidia_statement(kernel_ir)
    if arch is None:
        own = kernel_arch(kernel_ir)
        if own is not None:
            arch = own
        elif hit is not None:
            raise SpecError(f"kernel {name!r}: it holds NVIDIA statements ({type(hit).__name__}) "
                            "and records no arch (meta['arch'] or meta['cfg'].arch): pass the "
                            "sm_* target it is built for, e.g. verify(k, arch='sm_90a')")
        else:
            return DEFAULT_ARCH
    own = kernel_arch(kernel_ir)
    if is_nvidia(arch):
        return arch
    if hit is not None:
        want = f"its own {own!r}" if own else "an sm_* target, e.g. 'sm_90a'"
        raise SpecError(f"kernel {name!r}: it holds NVIDIA statements ({type(hit).__name__}), "
                        f"which {arch!r} does not run; verify it for {want}")
    if own is not None and is_nvidia(own):
        raise SpecError(f"kernel {name!r}: built for {own!r} (meta['cfg'].arch), not verified "
                        f"under {arch!r}'s model; verify it for its own arch")
    return arch
