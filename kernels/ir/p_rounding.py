"""How the attention kernels round P (the softmax probabilities, f32) to the 16-bit type of the
P V MFMA: one table that the IR names, the printer prints and the printed-source check reads.

* ``rtne`` - round to nearest, ties to even (the default; IEEE, what torch's ``.to(bf16)`` does).
* ``rtna`` - round to nearest, ties away from zero (one integer add fewer than ``rtne``).
* ``rtz``  - truncation (round toward zero: keep the top 16 bits; no add at all).

All three keep NaN a quiet NaN (truncating a NaN whose payload is in the low 16 bits would
otherwise give infinity).  For f16 P only ``rtne`` (the hardware ``v_cvt_f16_f32``) is offered.

:func:`round_to_bf16` is the same arithmetic in numpy, for the tests' error measurements.
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

__all__ = ["P_ROUNDINGS", "BF16_HELPERS", "bf16_helper", "p_conversion", "round_to_bf16"]

P_ROUNDINGS: Tuple[str, ...] = ("rtne", "rtna", "rtz")

# rounding -> (helper name, its C definition).  The rtne text is the prelude's own la_bf16
# (printed in every attention source); the others are printed only by kernels that use them.
BF16_HELPERS: Dict[str, Tuple[str, str]] = {
    "rtne": ("la_bf16", """\
// f32 -> bf16 bits, round to nearest even, quiet NaN: lagen_f32_to_bf16 without a branch
__device__ __forceinline__ short la_bf16(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  const unsigned r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (short)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}
"""),
    "rtna": ("la_bf16_rtna", """\
// f32 -> bf16 bits, round to nearest, ties away from zero, quiet NaN
__device__ __forceinline__ short la_bf16_rtna(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  const unsigned r = (u + 0x8000u) >> 16;
  return (short)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}
"""),
    "rtz": ("la_bf16_rtz", """\
// f32 -> bf16 bits, truncation (round toward zero), quiet NaN
__device__ __forceinline__ short la_bf16_rtz(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  return (short)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : (u >> 16));
}
"""),
}


def bf16_helper(rounding: str) -> Tuple[str, str]:
    """(name, C definition) of the f32 -> bf16 helper of ``rounding``."""
    if rounding not in BF16_HELPERS:
        raise ValueError(f"P rounding {rounding!r}: use one of {', '.join(P_ROUNDINGS)}")
    return BF16_HELPERS[rounding]


def p_conversion(dtype: str, rounding: str) -> str:
    """What the source prints around ``e_`` to store it as a P element of ``dtype``."""
    if dtype == "bf16":
        return bf16_helper(rounding)[0]
    if rounding != "rtne":
        raise ValueError(f"P rounding {rounding!r} of {dtype} P: only bf16 P has a choice "
                         "(f16 P is converted by v_cvt_f16_f32, round to nearest even)")
    return {"f16": "(_Float16)", "f32": ""}[dtype]


def round_to_bf16(x: np.ndarray, rounding: str) -> np.ndarray:
    """``x`` (float32) rounded to bf16 by ``rounding``, returned as float32 (the helpers'
    arithmetic on the bit pattern)."""
    bf16_helper(rounding)
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if rounding == "rtne":
        r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    elif rounding == "rtna":
        r = (u + 0x8000) >> 16
    else:
        r = u >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = np.where(nan, (u >> 16) | 0x40, r) & 0xFFFF
    return (r.astype(np.uint32) << 16).view(np.float32)
