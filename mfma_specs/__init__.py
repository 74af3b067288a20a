"""mfma_specs: AMD matrix-core instructions as closed-form TV layouts, the arch model, selection.

>>> import mfma_specs as ms
>>> s = ms.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
>>> s.tv_layout("A")                 # (lane, item) -> A[i][k] as a column-major index
Layout(((16,4),4):((1,64),16))
>>> s.element("A", 17, 2)            # lane 17, item 2 holds A[1][6]
(1, 6, 0)

Operand tiles are ``(rows, cols, blocks)`` indexed column-major (``row + rows*col +
rows*cols*block``); see :mod:`mfma_specs.spec`.  Instruction tables: :mod:`mfma_specs.cdna`
(CDNA1-3, verified against AMD's calculator by the tests), :mod:`mfma_specs.cdna4` (gfx950,
from public LLVM/ISA facts), :mod:`mfma_specs.wmma` (RDNA3/RDNA4).  Selection like Triton's
AMD backend: :mod:`mfma_specs.select`.  Architecture model: :mod:`mfma_specs.arch`.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from layoutalg.verify.model import register_lds_models

from .arch import (Target, lds_instructions, lds_model, lds_phase_entries, occupancy, target,
                   targets, waves_per_simd)
from .dtypes import canonical_dtype
from .errors import (LaneItemError, MfmaSpecError, NotModelledError, OperandError,
                     ResourceError, SelectionError, UnknownInstructionError,
                     UnknownTargetError, UnsupportedDtypeError, close_matches)
from .spec import MatrixInstruction, Param

# layoutalg.verify resolves arch=/instruction= strings through these tables (it never imports
# this package: the dependency points up, so the package registers itself)
register_lds_models(lds_model)

__all__ = [
    "Target", "UnknownTargetError", "lds_model", "lds_instructions", "lds_phase_entries",
    "target", "targets", "waves_per_simd", "occupancy", "lookup", "instructions",
    "MatrixInstruction", "Param", "canonical_dtype", "MfmaSpecError", "UnknownInstructionError",
    "OperandError", "LaneItemError", "UnsupportedDtypeError", "NotModelledError",
    "SelectionError", "ResourceError", "choose_mfma", "warps_per_tile", "k_width",
    "MfmaChoice", "FmaFallback",
]

_CACHE: Dict[Tuple[str, int], Dict[str, MatrixInstruction]] = {}


def _table(arch: str, wave_size: Optional[int] = None) -> Dict[str, MatrixInstruction]:
    t = target(arch)
    wave = t.wave_size if wave_size is None else wave_size
    if type(wave) is not int:
        raise UnknownTargetError(f"wave_size must be an int ({', '.join(map(str, t.wave_sizes))} "
                                 f"on {t.name}), got {wave!r} ({type(wave).__name__})")
    if wave not in t.wave_sizes:
        raise UnknownTargetError(f"{t.name} does not run wave{wave}; wave sizes: "
                                 f"{', '.join(map(str, t.wave_sizes))}")
    key = (t.family, wave)
    if key not in _CACHE:
        if t.family in ("CDNA1", "CDNA2", "CDNA3"):
            from .cdna import INSTRUCTIONS as table
            _CACHE[key] = table[t.family]
        elif t.family == "CDNA4":
            from .cdna4 import INSTRUCTIONS as table
            _CACHE[key] = table[t.family]
        elif t.family in ("RDNA3", "RDNA4"):
            from .wmma import INSTRUCTIONS as wtable
            if key not in wtable:
                raise NotModelledError(
                    f"{t.family} wave{wave} WMMA lane layouts are not modelled (no public lane "
                    f"map we could confirm); modelled: "
                    + ", ".join(f"{f} wave{w}" for f, w in sorted(wtable)))
            _CACHE[key] = wtable[key]
        else:
            raise NotModelledError(
                f"{t.name} ({t.family}) matrix instructions are not modelled yet: their lane "
                "layouts are not public in a form we could verify; modelled targets: "
                + ", ".join(n for n in targets() if target(n).family != t.family))
    return _CACHE[key]


def instructions(arch: str, wave_size: Optional[int] = None) -> Tuple[MatrixInstruction, ...]:
    """Every matrix instruction of ``arch`` (wave32 by default on RDNA)."""
    return tuple(_table(arch, wave_size).values())


def lookup(arch: str, name: str, wave_size: Optional[int] = None) -> MatrixInstruction:
    """The :class:`MatrixInstruction` ``name`` (ISA mnemonic, case-insensitive) on ``arch``."""
    table = _table(arch, wave_size)
    key = str(name).strip().lower()
    if key in table:
        return table[key]
    t = target(arch)
    hint = close_matches(key, table, n=5, cutoff=0.75)
    if not hint:
        hint = close_matches(key, table, n=5, cutoff=0.5)
    raise UnknownInstructionError(
        f"{t.name} ({t.family}) has no instruction {name!r}{hint}; "
        f"`layoutalg mfma list --arch {t.name}` lists its {len(table)} instructions")


from .select import FmaFallback, MfmaChoice, choose_mfma, k_width, warps_per_tile  # noqa: E402
from . import nvidia  # noqa: E402,F401  (NVIDIA mma.sync / ldmatrix atoms, 32-bank smem model)
