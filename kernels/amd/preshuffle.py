"""Preshuffled B: the GEMM's B operand stored in MFMA fragment order, defined as a layout.

``preshuffle_layout(K, N, instr, dtype)`` is a :class:`layoutalg.Layout` from the logical
coordinate ``(k, n)`` of ``B[K, N]`` to the element offset in the preshuffled buffer.  Every
direction comes from it (nothing is a hand-written permutation):

* :func:`preshuffle` gathers ``B`` through ``right_inverse(layout)`` (storage offset -> logical
  index), :func:`unshuffle` gathers the buffer through the layout itself;
* the GEMM kernel (:mod:`kernels.amd.gemm_preshuffle`) evaluates the same layout (its ``(n, k)``
  view, :func:`kernel_view`) on its index symbols, and the verifier checks that what the kernel
  reads at each lane is the MFMA's B fragment;
* ``visualize`` draws it (``layoutalg draw preshuffle``).

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

from dataclasses import dataclass
from typing import Any, Tuple

import numpy as np

from layoutalg import Layout, right_inverse

from .gemm_plan import DTYPE_BYTES, ConfigError, norm_dtype

__all__ = ["PreshuffleGeometry", "preshuffle_geometry", "preshuffle_layout", "kernel_view",
           "preshuffle", "unshuffle", "preshuffled_size", "SUPPORTED"]

# instruction shape -> (IN, IK, items per lane) of the dense CDNA3 f16/bf16 MFMAs the GEMM uses
SUPPORTED = ("16x16x16", "32x32x8")


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
    import mfma_specs
    name = str(instr)
    if not name.startswith("v_"):
        if name not in SUPPORTED:
            raise ConfigError(f"preshuffle: instruction {instr!r} is not supported; use one of "
                              f"{', '.join(SUPPORTED)} or a full v_mfma_f32_* f16/bf16 name")
        name = f"v_mfma_f32_{name}_{dtype}"
    try:
        return mfma_specs.lookup(arch, name)
    except Exception as e:  # noqa: BLE001 - the specs' own error, re-raised as a config error
        raise ConfigError(f"preshuffle: no MFMA {name!r} on {arch}: {e}") from None


def preshuffle_geometry(k: int, n: int, instr: str = "16x16x16", dtype: str = "f16",
                        arch: str = "gfx942") -> PreshuffleGeometry:
    """Check the instruction's B lane map is the one the order assumes, and size the buffer.

    The assumption (checked on ``spec.tv_layout("B")``, not taken on faith): lane ``l``, item
    ``e`` holds ``B[items * (l // IN) + e][l % IN]``.
    """
    dtype = norm_dtype(dtype)
    if dtype not in ("f16", "bf16"):
        raise ConfigError(f"preshuffle: dtype {dtype} is not supported (f16 or bf16)")
    for name, v in (("K", k), ("N", n)):
        if type(v) is not int or v < 1:
            raise ConfigError(f"preshuffle: {name} must be a positive integer, got {v!r}")
    spec = _spec(instr, dtype, arch)
    if getattr(spec, "b_type", dtype) != dtype:
        raise ConfigError(f"preshuffle: {spec.name} takes {spec.b_type} B operands, not "
                          f"{dtype}")
    if getattr(spec, "blocks", 1) != 1:
        raise ConfigError(f"preshuffle: {spec.name} is a multi-block MFMA (not supported)")
    IN, IK = spec.n, spec.k
    tv = spec.tv_layout("B")                      # (lane, item) -> k + IK * n
    items = tv[1].size()
    if 64 % IN or IK != items * (64 // IN):
        raise ConfigError(f"preshuffle: {spec.name}'s B operand is not {64 // IN} lane groups "
                          f"of {items} k each")
    vals = tv.values().reshape(64, items, order="F")
    lane, item = np.meshgrid(np.arange(64), np.arange(items), indexing="ij")
    want = items * (lane // IN) + item + IK * (lane % IN)
    if not np.array_equal(vals, want):
        raise ConfigError(f"preshuffle: {spec.name}'s B lane map is not lane l -> "
                          f"B[{items}*(l//{IN}) + e][l % {IN}]")
    eb = DTYPE_BYTES[dtype]
    V = 16 // eb
    if V % items:
        raise ConfigError(f"preshuffle: {items} items per lane do not divide a 16-byte vector")
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
    raise ConfigError(f"preshuffle: element type {name} is not f16/bf16; pass dtype= to say "
                      "how to read it")
