"""Element types of the generated kernels: one table that every layer reads.

A kernel dtype is a short name (``f16``, ``bf16``, ``f32``, ``fp8``, ``bf8``).  The table says
how many bytes an element takes (vector widths, LDS banks, global vectors), which C type the
printer declares it as, which torch dtype holds it, which :mod:`mfma_specs` operand type it is,
and whether an 8-bit float GEMM carries per-tensor scales by default.  Adding a dtype is one row
here, not an ``if`` in each builder.

The two 8-bit floats are gfx942's (CDNA3) FNUZ formats, which differ from the OCP FP8 formats
of gfx950 / NVIDIA (``float8_e4m3fn`` / ``float8_e5m2``):

* ``fp8`` = E4M3 FNUZ (torch ``float8_e4m3fnuz``): 1 sign, 4 exponent bits with bias 8, 3
  mantissa bits; largest finite value 240; no infinities; one NaN, the code 0x80 ("negative
  zero"); no negative zero.
* ``bf8`` = E5M2 FNUZ (torch ``float8_e5m2fnuz``): 1 sign, 5 exponent bits with bias 16, 2
  mantissa bits; largest finite value 57344; no infinities; one NaN, 0x80; no negative zero.

Both are carried as raw bytes (``lagen_fp8`` / ``lagen_bf8`` are ``unsigned char``): the MFMA
builtins take eight of them packed in a 64-bit integer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

__all__ = ["ElemType", "ELEM_TYPES", "DTYPE_ALIASES", "FP8_ARCH_NOTE", "elem_bytes", "lookup_dtype"]


@dataclass(frozen=True)
class ElemType:
    """One kernel element type."""

    name: str              # the kernel's name for it (``GemmConfig.dtype``)
    bytes: int             # size of one element
    c_scalar: str          # the printed C type (raw bits for bf16 / fp8 / bf8)
    torch: str             # torch dtype attribute name (``torch.<torch>``)
    spec: str              # the mfma_specs operand type it feeds
    label: str             # for messages and docs
    operand_only: bool = False   # an MFMA input, never a kernel output
    scaled: bool = False         # GEMMs on it take per-tensor scales by default
    max_finite: Optional[float] = None


ELEM_TYPES: Dict[str, ElemType] = {t.name: t for t in (
    ElemType("f16", 2, "_Float16", "float16", "f16", "FP16 (IEEE half)"),
    ElemType("bf16", 2, "short", "bfloat16", "bf16", "BF16 (raw bits in a short)"),
    ElemType("f32", 4, "float", "float32", "f32", "FP32"),
    ElemType("fp8", 1, "lagen_fp8", "float8_e4m3fnuz", "fp8e4m3fnuz",
             "FP8 E4M3 FNUZ (gfx942: bias 8, max 240, no inf, NaN = 0x80)",
             operand_only=True, scaled=True, max_finite=240.0),
    ElemType("bf8", 1, "lagen_bf8", "float8_e5m2fnuz", "fp8e5m2fnuz",
             "BF8 E5M2 FNUZ (gfx942: bias 16, max 57344, no inf, NaN = 0x80)",
             operand_only=True, scaled=True, max_finite=57344.0),
)}

DTYPE_ALIASES: Dict[str, str] = {
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16", "f32": "f32", "fp32": "f32", "float32": "f32",
    "float": "f32",
    "fp8": "fp8", "e4m3fnuz": "fp8", "fp8e4m3fnuz": "fp8", "float8_e4m3fnuz": "fp8",
    "bf8": "bf8", "e5m2fnuz": "bf8", "fp8e5m2fnuz": "bf8", "float8_e5m2fnuz": "bf8",
}

# the OCP formats: named so that the refusal can say why (gfx942's MFMAs decode FNUZ bytes)
_OCP = ("e4m3fn", "fp8e4m3fn", "float8_e4m3fn", "e5m2", "fp8e5m2", "float8_e5m2", "e4m3",
        "fp8e4m3")

FP8_ARCH_NOTE = ("fp8/bf8 MFMAs (v_mfma_f32_16x16x32_fp8_fp8, v_mfma_f32_32x32x16_fp8_fp8 and "
                 "their bf8 forms) exist on CDNA3: gfx940, gfx941, gfx942 (MI300); gfx950 "
                 "(CDNA4) uses the OCP formats instead and is not a target of this builder")


def lookup_dtype(name: object) -> Optional[ElemType]:
    """The element type ``name`` names (case-insensitive, aliases and ``torch.`` prefix
    accepted), or None."""
    key = str(name).strip().lower().replace("torch.", "")
    canon = DTYPE_ALIASES.get(key)
    return ELEM_TYPES[canon] if canon else None


def is_ocp_fp8(name: object) -> bool:
    """True for the OCP FP8 names (not gfx942's FNUZ formats)."""
    return str(name).strip().lower().replace("torch.", "") in _OCP


def elem_bytes(dtype: str) -> int:
    return ELEM_TYPES[dtype].bytes
