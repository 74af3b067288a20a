"""Architecture model: gfx targets, their ISA family and the LDS access-phase tables.

Facts come from public sources (see ../shared/docs/REFERENCE.md at development time; each table
names its source).  ``lds_model(arch, instruction)`` returns the
:class:`layoutalg.verify.model.LdsModel` the bank-conflict verifier uses.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Dict, Tuple

from layoutalg.errors import LayoutError
from layoutalg.verify.model import LdsModel

__all__ = ["Target", "UnknownTargetError", "target", "targets", "lds_model"]


class UnknownTargetError(LayoutError):
    """An arch name or LDS instruction this model does not know."""


@dataclass(frozen=True)
class Target:
    name: str
    family: str            # "CDNA1", "CDNA2", "CDNA3", "CDNA4", "RDNA3", "RDNA4", "GFX1250"
    wave_size: int
    lds_bytes: int
    lds_banks: int
    lds_bank_bytes: int


_TARGETS: Dict[str, Target] = {
    t.name: t for t in [
        Target("gfx908", "CDNA1", 64, 65536, 32, 4),
        Target("gfx90a", "CDNA2", 64, 65536, 32, 4),
        Target("gfx940", "CDNA3", 64, 65536, 32, 4),
        Target("gfx941", "CDNA3", 64, 65536, 32, 4),
        Target("gfx942", "CDNA3", 64, 65536, 32, 4),
        Target("gfx950", "CDNA4", 64, 163840, 64, 4),
    ]
}


def targets() -> Tuple[str, ...]:
    return tuple(sorted(_TARGETS))


def target(arch: str) -> Target:
    try:
        return _TARGETS[arch]
    except KeyError:
        close = difflib.get_close_matches(str(arch), _TARGETS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownTargetError(f"unknown target {arch!r}{hint}; known targets: "
                                 f"{', '.join(targets())}") from None


def _halves(groups):
    return tuple(tuple(g) for g in groups) + tuple(tuple(l + 32 for l in g) for g in groups)


# CDNA3 (gfx942) phases, measured/documented for MI300 (nod-ai AMDGPU optimization guide,
# ROCm LDS bank-conflict blog, CK-Tile docs).
_CDNA3_PHASES = {
    "ds_read_b32": (tuple(range(0, 32)), tuple(range(32, 64))),
    "ds_write_b32": (tuple(range(0, 32)), tuple(range(32, 64))),
    "ds_read_b64": tuple(tuple(range(i, i + 16)) for i in range(0, 64, 16)),
    "ds_write_b64": tuple(tuple(range(i, i + 16)) for i in range(0, 64, 16)),
    "ds_read_b128": _halves([
        (0, 1, 2, 3, 20, 21, 22, 23), (4, 5, 6, 7, 16, 17, 18, 19),
        (8, 9, 10, 11, 28, 29, 30, 31), (12, 13, 14, 15, 24, 25, 26, 27)]),
    "ds_write_b128": tuple(tuple(range(i, i + 8)) for i in range(0, 64, 8)),
}
_ACCESS_BYTES = {"b32": 4, "b64": 8, "b128": 16}


def lds_model(arch: str, instruction: str) -> LdsModel:
    """The phase model of ``instruction`` (e.g. ``"ds_read_b128"``) on ``arch``."""
    t = target(arch)
    if t.family in ("CDNA1", "CDNA2", "CDNA3"):
        table = _CDNA3_PHASES
        source = "CDNA3 LDS phases (nod-ai AMDGPU kernel optimization guide; ROCm LDS blog)"
    else:
        raise UnknownTargetError(f"no LDS phase table for {arch} ({t.family}) yet")
    if instruction not in table:
        close = difflib.get_close_matches(instruction, table, n=3)
        raise UnknownTargetError(f"no LDS phase model for {instruction!r} on {arch}; known: "
                                 f"{', '.join(sorted(table))}" + (f" (close: {close})" if close else ""))
    width = _ACCESS_BYTES[instruction.rsplit("_", 1)[1]]
    return LdsModel(arch, instruction, width, t.lds_banks, t.lds_bank_bytes, table[instruction],
                    t.wave_size, source)
