"""The LDS bank model the verifier checks against.

An :class:`LdsModel` says how one LDS instruction is served: which lanes share an access phase
(only lanes of the same phase can conflict), how many banks there are and how wide each is.  It
holds no hardware facts itself: :func:`mfma_specs.arch.lds_model` builds the per-target tables
(gfx942, gfx950, ...) from public documentation, so ``layoutalg`` stays free of arch data.
``mfma_specs`` registers that function here when it is imported (:func:`register_lds_models`):
``layoutalg`` never imports the package above it.

Invariants: ``phases`` partition ``range(wave_size)``; every phase is a tuple of lane ids;
``bank(byte_addr) == (byte_addr // bank_bytes) % banks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

from ..errors import LayoutError

__all__ = ["LdsModel", "register_lds_models", "registered_lds_models"]

# the function (arch, instruction) -> LdsModel that resolves ``arch=``/``instruction=`` strings;
# ``mfma_specs`` registers ``mfma_specs.arch.lds_model`` on import
_PROVIDER: List[Callable[[str, str], "LdsModel"]] = []


def register_lds_models(provider: Callable[[str, str], "LdsModel"]) -> None:
    """Make ``provider(arch, instruction) -> LdsModel`` the resolver of ``arch=`` strings
    (``mfma_specs`` does this on import; a later registration replaces an earlier one)."""
    if not callable(provider):
        raise TypeError(f"register_lds_models needs a callable, got {type(provider).__name__}")
    _PROVIDER[:] = [provider]


def registered_lds_models() -> Optional[Callable[[str, str], "LdsModel"]]:
    """The registered resolver, or None when no package has registered one."""
    return _PROVIDER[0] if _PROVIDER else None


@dataclass(frozen=True)
class LdsModel:
    """Phase/bank model of one LDS instruction on one target."""

    arch: str
    instruction: str
    access_bytes: int            # bytes each lane moves (4, 8, 16)
    banks: int                   # number of banks
    bank_bytes: int              # width of a bank in bytes
    phases: Tuple[Tuple[int, ...], ...]   # lane groups served together
    wave_size: int = 64
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        lanes = sorted(l for p in self.phases for l in p)
        if lanes != list(range(self.wave_size)):
            # LayoutError is a ValueError: callers catching ValueError keep working
            raise LayoutError(f"LdsModel {self.arch}/{self.instruction}: phases must partition "
                              f"lanes 0..{self.wave_size - 1}")

    def bank(self, byte_addr: int) -> int:
        return (byte_addr // self.bank_bytes) % self.banks

    @property
    def is_write(self) -> bool:
        return self.instruction.startswith("ds_write")

    # ---- derived views (used by the verifier; pure functions of the fields) -------------------
    def lane_phase(self) -> Tuple[int, ...]:
        """``lane_phase()[l]`` is the index in ``phases`` of the phase serving lane ``l``."""
        out = [0] * self.wave_size
        for i, ph in enumerate(self.phases):
            for lane in ph:
                out[lane] = i
        return tuple(out)

    @property
    def period_bytes(self) -> int:
        """Bytes after which the bank pattern repeats (``banks * bank_bytes``)."""
        return self.banks * self.bank_bytes

    def phase_subspace(self) -> Optional[Tuple[int, ...]]:
        """A GF(2) basis of the phase holding lane 0, if every phase is a coset of it.

        Lane ids are vectors of ``log2(wave_size)`` bits.  The gfx942 ``ds_read_b128`` phase
        {0-3, 20-23} is span(1, 2, 20) and the other phases are its cosets (Triton PR 11365
        uses the same view).  Returns None when the phases are not of that form (then only the
        exhaustive method applies).
        """
        n = self.wave_size
        if n & (n - 1):
            return None
        first = next(p for p in self.phases if 0 in p)
        group = set(first)
        if len(group) & (len(group) - 1) or any((a ^ b) not in group for a in group for b in group):
            return None
        for p in self.phases:
            lead = p[0]
            if {lead ^ q for q in group} != set(p):
                return None
        basis: list = []
        span = {0}
        for lane in sorted(group):
            if lane not in span:
                basis.append(lane)
                span |= {s ^ lane for s in span}
        return tuple(basis)
