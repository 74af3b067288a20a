"""The LDS bank model the verifier checks against.

An :class:`LdsModel` says how one LDS instruction is served: which lanes share an access phase
(only lanes of the same phase can conflict), how many banks there are and how wide each is.  It
holds no hardware facts itself: :func:`mfma_specs.arch.lds_model` builds the per-target tables
(gfx942, gfx950, ...) from public documentation, so ``layoutalg`` stays free of arch data.

Invariants: ``phases`` partition ``range(wave_size)``; every phase is a tuple of lane ids;
``bank(byte_addr) == (byte_addr // bank_bytes) % banks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

__all__ = ["LdsModel"]


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
            raise ValueError(f"LdsModel {self.arch}/{self.instruction}: phases must partition "
                             f"lanes 0..{self.wave_size - 1}")

    def bank(self, byte_addr: int) -> int:
        return (byte_addr // self.bank_bytes) % self.banks

    @property
    def is_write(self) -> bool:
        return self.instruction.startswith("ds_write")
