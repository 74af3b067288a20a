"""Element types of matrix-core operands: canonical names, aliases, bit widths, C types.

Canonical names are short and unambiguous: ``f64 f32 xf32 f16 bf16 i8 i32 iu8 iu4``, the
FP8 flavours ``fp8e4m3fnuz fp8e5m2fnuz`` (AMD's, CDNA3) and ``fp8e4m3fn fp8e5m2`` (OCP,
CDNA4/RDNA4), and ``f8f6f4`` for gfx950's format-selected operands (FP8/BF8/FP6/BF6/FP4,
chosen by the CBSZ/BLGP fields).  ``"fp8"``/``"bf8"`` name whichever FP8 the target
implements natively, so they are resolved per target by :func:`canonical_dtype`.
"""

from __future__ import annotations

from typing import Dict, Optional

from .errors import UnsupportedDtypeError, close_matches

__all__ = ["DTYPE_BITS", "canonical_dtype", "dtype_bits", "is_float", "is_int", "DTYPE_LABELS"]

DTYPE_BITS: Dict[str, int] = {
    "f64": 64, "f32": 32, "xf32": 32, "f16": 16, "bf16": 16, "i32": 32, "i8": 8, "iu8": 8,
    "iu4": 4, "fp8e4m3fnuz": 8, "fp8e5m2fnuz": 8, "fp8e4m3fn": 8, "fp8e5m2": 8,
    "fp6e2m3": 6, "fp6e3m2": 6, "fp4e2m1": 4, "f8f6f4": 8,
}

DTYPE_LABELS: Dict[str, str] = {
    "f64": "FP64", "f32": "FP32", "xf32": "XF32 (TF32-like, CDNA3)", "f16": "FP16",
    "bf16": "BF16", "i32": "INT32", "i8": "INT8", "iu8": "IU8 (signed/unsigned by modifier)",
    "iu4": "IU4 (signed/unsigned by modifier)", "fp8e4m3fnuz": "FP8 E4M3 FNUZ (AMD)",
    "fp8e5m2fnuz": "BF8 E5M2 FNUZ (AMD)", "fp8e4m3fn": "FP8 E4M3 (OCP)",
    "fp8e5m2": "BF8 E5M2 (OCP)", "fp6e2m3": "FP6 E2M3", "fp6e3m2": "BF6 E3M2",
    "fp4e2m1": "FP4 E2M1", "f8f6f4": "FP8/BF8/FP6/BF6/FP4 selected by CBSZ/BLGP",
}

_ALIASES: Dict[str, str] = {
    "float64": "f64", "fp64": "f64", "double": "f64",
    "float32": "f32", "fp32": "f32", "float": "f32",
    "tf32": "xf32", "float16": "f16", "fp16": "f16", "half": "f16",
    "bfloat16": "bf16", "int8": "i8", "s8": "i8", "int32": "i32", "s32": "i32",
    "float8_e4m3fnuz": "fp8e4m3fnuz", "amd_fp8": "fp8e4m3fnuz", "e4m3fnuz": "fp8e4m3fnuz",
    "float8_e5m2fnuz": "fp8e5m2fnuz", "amd_bf8": "fp8e5m2fnuz", "e5m2fnuz": "fp8e5m2fnuz",
    "bf8e5m2fnuz": "fp8e5m2fnuz",
    "float8_e4m3fn": "fp8e4m3fn", "e4m3": "fp8e4m3fn", "fp8e4m3": "fp8e4m3fn",
    "float8_e5m2": "fp8e5m2", "e5m2": "fp8e5m2", "bf8e5m2": "fp8e5m2",
    "fp6": "fp6e2m3", "bf6": "fp6e3m2", "fp4": "fp4e2m1", "mxfp4": "fp4e2m1",
}


def canonical_dtype(name: object, native_fp8: Optional[str] = None) -> str:
    """The canonical name of ``name`` (case-insensitive; torch/numpy-style names accepted).

    ``native_fp8`` is ``"fnuz"`` (CDNA3) or ``"ocp"`` (CDNA4, RDNA4) and resolves the
    target-relative names ``"fp8"`` and ``"bf8"``; without it those names are refused.
    """
    key = str(name).strip().lower().replace("torch.", "")
    if key in DTYPE_BITS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if key in ("fp8", "bf8"):
        if native_fp8 == "fnuz":
            return "fp8e4m3fnuz" if key == "fp8" else "fp8e5m2fnuz"
        if native_fp8 == "ocp":
            return "fp8e4m3fn" if key == "fp8" else "fp8e5m2"
        raise UnsupportedDtypeError(
            f"dtype {name!r} is ambiguous here (the target has no native FP8); name it "
            "explicitly: fp8e4m3fnuz, fp8e5m2fnuz (AMD) or fp8e4m3fn, fp8e5m2 (OCP)")
    known = sorted(set(DTYPE_BITS) | set(_ALIASES) | {"fp8", "bf8"})
    raise UnsupportedDtypeError(f"unknown dtype {name!r}{close_matches(key, known)}; known: "
                                f"{', '.join(sorted(DTYPE_BITS))} (and aliases such as "
                                "float16, bfloat16, int8, fp8)")


def dtype_bits(name: str) -> int:
    return DTYPE_BITS[canonical_dtype(name)]


def is_int(name: str) -> bool:
    return canonical_dtype(name) in ("i8", "i32", "iu8", "iu4")


def is_float(name: str) -> bool:
    return not is_int(name)
