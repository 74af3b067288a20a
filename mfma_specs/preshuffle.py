"""Preshuffled operand storage: B in MFMA fragment order, defined as a layout.

``preshuffle_layout(K, N, instruction, dtype)`` is a :class:`layoutalg.Layout` from the logical
coordinate ``(k, n)`` of ``B[K, N]`` to the element offset in a preshuffled buffer, built from
the instruction's B lane map (checked on ``spec.tv_layout("B")``, not assumed).  For the
instruction's ``IN`` columns and ``G = 64 / IN`` lane groups along k, with ``V = 16 / element
bytes`` elements per lane (one 16-byte load)::

    k mode: (V, G, Kp / (V*G)) : (1, IN*V, 64*V)        element, lane group, k block
    n mode: (IN, Np / IN)      : (V, IN*Kp)              column in tile, n tile

so lane ``l = n_in + IN * g`` of a wave finds its V consecutive k (the k values it feeds to
``V / items`` consecutive MFMAs when a kernel permutes the reduction order that way) as 16
contiguous bytes at ``V * l`` of one (n tile, k block) chunk, and a wave's load is 1024
contiguous bytes.  The order is FlyDSL's / aiter's ``shuffle_weight`` (16-bit types: V = 8;
the 8-bit FNUZ floats of gfx942's fp8/bf8 MFMAs: V = 16, two MFMAs per load).  K and
N are padded to ``Kp`` (a multiple of ``V*G``) and ``Np`` (of ``IN``).  The host-side shuffle
and the GEMM that reads it are in :mod:`kernels.amd.preshuffle` / ``kernels.amd.gemm_preshuffle``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from layoutalg import Layout

from .errors import OperandError

__all__ = ["PreshuffleGeometry", "preshuffle_geometry", "preshuffle_layout", "SHAPES"]

# short instruction names accepted with a dtype (the dense CDNA3 MFMAs a GEMM uses: 16-bit
# and, with twice the k, the 8-bit float ones)
SHAPES = ("16x16x16", "32x32x8", "16x16x32", "32x32x16")
_BYTES = {"f16": 2, "bf16": 2, "fp8e4m3fnuz": 1, "fp8e5m2fnuz": 1}
# the 8-bit formats' instruction-name suffix (A and B of one format)
_F8_SUFFIX = {"fp8e4m3fnuz": "fp8_fp8", "fp8e5m2fnuz": "bf8_bf8"}
_SUPPORTED = "f16, bf16, fp8 (fp8e4m3fnuz) or bf8 (fp8e5m2fnuz)"


@dataclass(frozen=True)
class PreshuffleGeometry:
    """The numbers that define the order (see the module docstring)."""

    instruction: str      # full MFMA name
    k: int                # logical K, N
    n: int
    elem_bytes: int
    tile_n: int           # IN: MFMA columns
    lane_groups: int      # G = 64 / IN
    vec: int              # V: elements per lane per 16-byte load
    items: int            # B elements per lane per MFMA
    k_block: int          # V * G: k per (n tile, k block) chunk
    k_padded: int         # Kp
    n_padded: int         # Np

    @property
    def kpack(self) -> int:
        """MFMAs fed by one lane's 16-byte vector."""
        return self.vec // self.items


def _spec(instr: str, dtype: str, arch: str) -> Any:
    from . import lookup
    name = str(instr)
    if not name.startswith("v_"):
        if name not in SHAPES:
            raise OperandError(f"preshuffle: instruction {instr!r} is not supported; use one of "
                               f"{', '.join(SHAPES)} or a full v_mfma_f32_* name")
        name = f"v_mfma_f32_{name}_{_F8_SUFFIX.get(dtype, dtype)}"
    return lookup(arch, name)


def _canonical(dtype: str) -> str:
    """The canonical element type; the target-relative ``fp8`` / ``bf8`` name the FNUZ formats
    (the only 8-bit floats of the CDNA3 MFMAs this order is defined for: a gfx950 spec's OCP
    operands are then refused by the ``b_type`` check, never silently reinterpreted)."""
    from .dtypes import canonical_dtype
    try:
        return canonical_dtype(dtype, native_fp8="fnuz")
    except Exception:  # noqa: BLE001 - the dtype module's own error: say what is supported
        raise OperandError(f"preshuffle: dtype {dtype!r} is not supported ({_SUPPORTED})") \
            from None


def preshuffle_geometry(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                        arch: str = "gfx942") -> PreshuffleGeometry:
    """Check the instruction's B lane map is the one the order assumes, and size the buffer.

    The assumption (checked on ``spec.tv_layout("B")``): lane ``l``, item ``e`` holds
    ``B[items * (l // IN) + e][l % IN]``.
    """
    dtype = _canonical(dtype)
    if dtype not in _BYTES:
        raise OperandError(f"preshuffle: dtype {dtype} is not supported ({_SUPPORTED})")
    for name, v in (("K", k), ("N", n)):
        if type(v) is not int or v < 1:
            raise OperandError(f"preshuffle: {name} must be a positive integer, got {v!r}")
    spec = _spec(instr, dtype, arch)
    if spec.b_type != dtype:
        raise OperandError(f"preshuffle: {spec.name} takes {spec.b_type} B operands, not "
                           f"{dtype}")
    if getattr(spec, "blocks", 1) != 1 or spec.wave_size != 64:
        raise OperandError(f"preshuffle: {spec.name} is not a single-block wave64 MFMA")
    IN, IK = spec.n, spec.k
    tv = spec.tv_layout("B")                      # (lane, item) -> k + IK * n
    items = tv[1].size()
    if 64 % IN or IK != items * (64 // IN):
        raise OperandError(f"preshuffle: {spec.name}'s B operand is not {64 // IN} lane groups "
                           f"of {items} k each")
    vals = tv.values().reshape(64, items, order="F")
    lane, item = np.meshgrid(np.arange(64), np.arange(items), indexing="ij")
    want = items * (lane // IN) + item + IK * (lane % IN)
    if not np.array_equal(vals, want):
        raise OperandError(f"preshuffle: {spec.name}'s B lane map is not lane l -> "
                           f"B[{items}*(l//{IN}) + e][l % {IN}]")
    eb = _BYTES[dtype]
    V = 16 // eb
    if V % items:
        raise OperandError(f"preshuffle: {items} items per lane do not divide a 16-byte vector")
    G = 64 // IN
    kb = V * G
    return PreshuffleGeometry(spec.name, k, n, eb, IN, G, V, items, kb,
                              -(-k // kb) * kb, -(-n // IN) * IN)


def preshuffle_layout(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                      arch: str = "gfx942") -> Layout:
    """``(k, n) -> element offset`` of the preshuffled buffer (padded extents ``(Kp, Np)``)."""
    g = preshuffle_geometry(k, n, instr, dtype, arch)
    IN, G, V = g.tile_n, g.lane_groups, g.vec
    return Layout(((V, G, g.k_padded // g.k_block), (IN, g.n_padded // IN)),
                  ((1, IN * V, 64 * V), (V, IN * g.k_padded)))
