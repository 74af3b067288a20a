"""Preshuffled B: the GEMM's B operand stored in MFMA fragment order, defined as a layout.

``preshuffle_layout(K, N, instr, dtype)`` (defined in :mod:`mfma_specs.preshuffle`: it is a
fact about the MFMA's lane map) is a :class:`layoutalg.Layout` from the logical coordinate
``(k, n)`` of ``B[K, N]`` to the element offset in the preshuffled buffer.  Every direction
comes from it (nothing is a hand-written permutation):

* :func:`preshuffle` gathers ``B`` through ``right_inverse(layout)`` (storage offset -> logical
  index), :func:`unshuffle` gathers the buffer through the layout itself;
* the GEMM kernel (:mod:`kernels.amd.gemm_preshuffle`) evaluates the same layout (its ``(n, k)``
  view, :func:`kernel_view`) on its index symbols, and the verifier checks that what the kernel
  reads at each lane is the MFMA's B fragment;
* ``visualize.draw_preshuffle`` draws it (``layoutalg mfma preshuffle NAME --k K --n N --svg F``).

The order (as in FlyDSL's / aiter's ``shuffle_weight``): for the instruction's ``IN`` columns
(``n`` tile) and ``G = 64 / IN`` lane groups along k, with ``V = 16 / element bytes`` elements
per lane (one 16-byte ``buffer_load_dwordx4``)::

    k mode: (V, G, Kp / (V*G)) : (1, IN*V, 64*V)        e, lane group, k block
    n mode: (IN, Np / IN)      : (V, IN*Kp)              column in tile, n tile

so lane ``l = n_in + IN * g`` of a wave reads the 16 contiguous bytes at ``V * l`` of one
(n tile, k block) chunk, and a wave reads 1024 contiguous bytes per load.  Lane ``l``'s
``V`` consecutive k are the k values it feeds to ``V / items`` consecutive MFMAs under the GEMM
plan's k-permutation (``kernels.amd.gemm_plan``: ``kpack`` MFMAs per 16-byte read).
``K`` and ``N`` are padded with zeros to ``Kp`` (a multiple of ``V*G``) and ``Np`` (of ``IN``).
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from layoutalg import Layout, right_inverse
from mfma_specs import preshuffle as _ms
from mfma_specs.errors import MfmaSpecError
from mfma_specs.preshuffle import SHAPES, PreshuffleGeometry

from .gemm_plan import ConfigError, norm_dtype

__all__ = ["PreshuffleGeometry", "preshuffle_geometry", "preshuffle_layout", "kernel_view",
           "preshuffle", "unshuffle", "preshuffled_size", "SUPPORTED"]

SUPPORTED = SHAPES


def preshuffle_geometry(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                        arch: str = "gfx942") -> PreshuffleGeometry:
    """:func:`mfma_specs.preshuffle.preshuffle_geometry`, its errors as :class:`ConfigError`."""
    try:
        return _ms.preshuffle_geometry(k, n, instr, norm_dtype(dtype), arch)
    except MfmaSpecError as e:
        raise ConfigError(str(e)) from None


def preshuffle_layout(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                      arch: str = "gfx942") -> Layout:
    """``(k, n) -> element offset`` of the preshuffled buffer (padded extents ``(Kp, Np)``);
    :func:`mfma_specs.preshuffle.preshuffle_layout` with kernels' :class:`ConfigError`."""
    preshuffle_geometry(k, n, instr, dtype, arch)          # the checks, as ConfigError
    return _ms.preshuffle_layout(k, n, instr, norm_dtype(dtype), arch)


def kernel_view(layout: Layout) -> Layout:
    """The same layout with its modes in the GEMM's operand order ``(n, k)`` (B^T view)."""
    return Layout((layout.shape[1], layout.shape[0]), (layout.stride[1], layout.stride[0]))


def preshuffled_size(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                     arch: str = "gfx942") -> int:
    """Elements of the preshuffled buffer (``Kp * Np``)."""
    g = preshuffle_geometry(k, n, instr, dtype, arch)
    return g.k_padded * g.n_padded


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _gather_index(layout: Layout) -> np.ndarray:
    """``right_inverse(layout)`` as an array: storage offset -> logical index ``k + Kp * n``."""
    inv = right_inverse(layout)
    if inv.size() != layout.size():
        raise ConfigError(f"preshuffle: {layout} is not a bijection (right inverse {inv})")
    return np.asarray(inv.values()).reshape(-1)


def preshuffle(b: Any, instr: str = "16x16x16", dtype: str = None, arch: str = "gfx942") -> Any:
    """``B[K, N]`` (numpy array or torch tensor) -> the 1-D preshuffled buffer (same type,
    dtype and device), zero padded to ``Kp * Np`` elements."""
    K, N = _shape2(b)
    dt = dtype or _dtype_name(b)
    lay = preshuffle_layout(K, N, instr, dt, arch)
    Kp, Np = lay.shape[0][0] * lay.shape[0][1] * lay.shape[0][2], lay.shape[1][0] * lay.shape[1][1]
    gather = _gather_index(lay)                     # offset -> k + Kp * n
    if _is_torch(b):
        import torch
        if b.element_size() == 1 and b.dtype != torch.uint8:   # torch's 8-bit floats: gather
            return preshuffle(b.view(torch.uint8), instr, dt, arch).view(b.dtype)  # their bytes
        pad = torch.zeros((Np, Kp), dtype=b.dtype, device=b.device)
        pad[:N, :K] = b.t()
        return pad.reshape(-1)[torch.as_tensor(gather, device=b.device)]
    arr = np.asarray(b)
    pad = np.zeros((Np, Kp), dtype=arr.dtype)
    pad[:N, :K] = arr.T
    return pad.reshape(-1)[gather]


def unshuffle(buf: Any, k: int, n: int, instr: str = "16x16x16", dtype: str = None,
              arch: str = "gfx942") -> Any:
    """The inverse of :func:`preshuffle`: the 1-D buffer -> ``B[K, N]``."""
    dt = dtype or _dtype_name(buf)
    lay = preshuffle_layout(k, n, instr, dt, arch)
    if int(buf.shape[0]) != lay.size() or len(buf.shape) != 1:
        raise ConfigError(f"unshuffle: expected a 1-D buffer of {lay.size()} elements for "
                          f"B[{k}, {n}] ({instr}, {dt}), got shape {tuple(buf.shape)}")
    Kp = lay.shape[0][0] * lay.shape[0][1] * lay.shape[0][2]
    offs = np.asarray(lay.values()).reshape(-1)     # logical index k + Kp * n -> offset
    if _is_torch(buf):
        import torch
        if buf.element_size() == 1 and buf.dtype != torch.uint8:    # as in preshuffle
            return unshuffle(buf.view(torch.uint8), k, n, instr, dt, arch).view(buf.dtype)
        full = buf[torch.as_tensor(offs, device=buf.device)]
        return full.reshape(-1, Kp)[:n, :k].t().contiguous()
    full = np.asarray(buf)[offs]
    return np.ascontiguousarray(full.reshape(-1, Kp)[:n, :k].T)


def _shape2(b: Any) -> Tuple[int, int]:
    shp = tuple(int(x) for x in b.shape)
    if len(shp) != 2:
        raise ConfigError(f"preshuffle: B must be 2-D [K, N], got shape {shp}")
    return shp


def _dtype_name(x: Any) -> str:
    name = str(x.dtype).replace("torch.", "")
    if name in ("float16", "half"):
        return "f16"
    if name in ("bfloat16",):
        return "bf16"
    if name in ("int16", "uint16"):      # bf16 bits carried as 16-bit integers (numpy)
        return "bf16"
    if name in ("float8_e4m3fnuz", "float8_e5m2fnuz"):   # gfx942's fp8 / bf8
        return "fp8" if "e4m3" in name else "bf8"
    raise ConfigError(f"preshuffle: element type {name} is not f16/bf16/float8_e4m3fnuz/"
                      "float8_e5m2fnuz; pass dtype= to say how to read it (e.g. dtype='fp8' "
                      "for uint8 bytes of E4M3 FNUZ)")
