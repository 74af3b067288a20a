"""Resolve ``arch=``/``instruction=`` strings to an :class:`LdsModel` (through the resolver
``mfma_specs`` registers: :func:`layoutalg.verify.model.register_lds_models`)."""

from __future__ import annotations

from typing import Optional

from .model import LdsModel, registered_lds_models
from .result import VerifyError

__all__ = ["resolve_model", "vector_elems"]


def resolve_model(arch: object, instruction: object, model: Optional[LdsModel]) -> LdsModel:
    """``model`` if given, else the registered resolver's ``lds_model(arch, instruction)``
    (``mfma_specs.arch.lds_model`` once ``mfma_specs`` is imported).

    layoutalg never imports mfma_specs (the package above it): importing mfma_specs registers
    its tables; without it, hand-made models work and ``arch=`` strings are refused.
    """
    if model is not None:
        if not isinstance(model, LdsModel):
            raise VerifyError(f"model must be an LdsModel, got {type(model).__name__}")
        return model
    if isinstance(arch, LdsModel):
        return arch
    if not isinstance(arch, str) or not isinstance(instruction, str):
        raise VerifyError(f"arch and instruction must be strings (e.g. 'gfx942', "
                          f"'ds_read_b128'), got {arch!r}, {instruction!r}")
    lds_model = registered_lds_models()
    if lds_model is None:
        raise VerifyError(f"arch={arch!r}, instruction={instruction!r}: no LDS phase model is "
                          "registered; `import mfma_specs` (it registers the gfx9 tables) or "
                          "pass model=LdsModel(...)")
    m = lds_model(arch, instruction)
    _validate(m)
    return m


def _validate(m: LdsModel) -> None:
    for name in ("access_bytes", "banks", "bank_bytes"):
        v = getattr(m, name)
        if type(v) is not int or v <= 0:
            raise VerifyError(f"LdsModel {m.arch}/{m.instruction}: {name} must be a positive int")


def vector_elems(m: LdsModel, elem_bytes: int) -> int:
    """Elements one lane moves per instruction (``access_bytes // elem_bytes``)."""
    _validate(m)
    if type(elem_bytes) is not int or elem_bytes <= 0:
        raise VerifyError(f"elem_bytes must be a positive int (1 fp8, 2 f16/bf16, 4 f32), got "
                          f"{elem_bytes!r}")
    if m.access_bytes % elem_bytes:
        raise VerifyError(f"{m.instruction} moves {m.access_bytes} bytes per lane, not a multiple "
                          f"of elem_bytes={elem_bytes}")
    return m.access_bytes // elem_bytes
