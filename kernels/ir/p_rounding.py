"""How the attention kernels round P (the softmax probabilities, f32) to the 16-bit type of the
P V MFMA: one table that the IR names, the printer prints and the printed-source check reads.

* ``rtne`` - round to nearest, ties to even (the default; IEEE, what torch's ``.to(bf16)`` does).
* ``rtna`` - round to nearest, ties away from zero (one integer add fewer than ``rtne``).
* ``rtz``  - truncation (round toward zero: keep the top 16 bits; no add at all).

None of them spends instructions on NaN (a select per element: a sixth of the bf16 d128 hot
loop, see docs/PERFORMANCE.md): a NaN P may come out as any 16-bit pattern, because the kernels
never need P's own bits to carry it.  P is exp2 of a finite or -inf argument unless the row's
scores are NaN or +inf, and then the row sum ``l`` (accumulated from the f32 P, before the
rounding) is NaN, which FinalNormalize turns into a NaN output row and a NaN logsumexp
(kernels/printer/attention.py), as torch's softmax gives.  For f16 P only ``rtne`` (the
hardware ``v_cvt_f16_f32``) is offered.

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
// f32 -> bf16 bits of P, round to nearest even; NaN not kept (a NaN P makes the row sum NaN)
__device__ __forceinline__ short la_bf16(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  return (short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
"""),
    "rtna": ("la_bf16_rtna", """\
// f32 -> bf16 bits of P, round to nearest, ties away from zero; NaN not kept (see la_bf16)
__device__ __forceinline__ short la_bf16_rtna(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  return (short)((u + 0x8000u) >> 16);
}
"""),
    "rtz": ("la_bf16_rtz", """\
// f32 -> bf16 bits of P, truncation (round toward zero); NaN not kept (see la_bf16)
__device__ __forceinline__ short la_bf16_rtz(float f) {
  const unsigned u = __builtin_bit_cast(unsigned, f);
  return (short)(u >> 16);
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
    r = r & 0xFFFF
    return (r.astype(np.uint32) << 16).view(np.float32)
