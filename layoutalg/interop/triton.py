"""Triton linear layouts <-> layoutalg layouts.

A Triton ``LinearLayout`` maps each *input dimension* (``register``, ``lane``, ``warp``,
``block`` for distributed layouts; ``offset``, ``block`` for shared ones) to tensor coordinates
``(dim0, dim1, ...)`` by a list of *bases*: bit ``j`` of the input index contributes basis ``j``
and the contributions are XORed per output dimension.  Power-of-two tensor shapes make the
column-major tile index ``dim0 + size0 * (dim1 + size1 * ...)`` a bit concatenation, so each
basis is one F2 column over the tile index (see :mod:`layoutalg.f2`).

Conventions (those of :func:`layoutalg.make_layout_tv` and ``mfma_specs``):

* distributed -> :class:`~layoutalg.TVLayout` ``(thread, value) -> tile index`` with
  ``thread = lane + wave_size * (warp + warps * block)``, ``value = register``, the tile indexed
  column-major with dim0 fastest.  A basis that is zero is a broadcast (stride 0).
* shared -> the LDS layout ``tile index -> element offset`` (the inverse of Triton's
  ``offset -> coordinates``): a :class:`~layoutalg.Layout` when every coordinate bit lands on one
  offset bit, ``Swizzle o 0 o Layout`` when the rest is a CuTe swizzle, else the
  :class:`~layoutalg.F2Map` (a general XOR basis).  Padded shared encodings compose the padding
  (``interval -> pad``) as a Layout after a plain linear part.

The Triton package is optional: :func:`bases_of` reads Triton's ``LinearLayout`` binding and
Gluon's ``DistributedLinearLayout`` / ``SharedLinearLayout`` / ``PaddedSharedLayout`` by their
attributes, so everything here also works on plain bases (e.g. the committed fixture).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..f2 import F2Map
from ..layout import Layout, coalesce, make_layout
from ..swizzle import ComposedLayout, Swizzle
from ..tv import TVLayout
from .errors import InteropError

__all__ = ["TritonBases", "bases_of", "from_linear_layout", "to_linear_layout", "to_triton",
           "DISTRIBUTED_DIMS", "SHARED_DIMS"]

DISTRIBUTED_DIMS = ("register", "lane", "warp", "block")
SHARED_DIMS = ("offset", "block")
_GLUON_ATTRS = {"reg_bases": "register", "lane_bases": "lane", "warp_bases": "warp",
                "block_bases": "block", "offset_bases": "offset"}

Basis = Tuple[int, ...]


@dataclass(frozen=True)
class TritonBases:
    """A Triton linear layout as plain data: ``bases[in_dim]`` lists one output vector per input
    bit; ``shape`` gives the output (tensor) dimension sizes; ``padding`` holds a padded shared
    encoding's ``(interval, pad)`` pairs (elements)."""

    bases: Mapping[str, Tuple[Basis, ...]]
    shape: Tuple[int, ...]
    padding: Tuple[Tuple[int, int], ...] = ()

    @property
    def kind(self) -> str:
        """``"shared"`` when the layout has an ``offset`` input, else ``"distributed"``."""
        return "shared" if "offset" in self.bases else "distributed"

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready form (the fixture format)."""
        out: Dict[str, Any] = {k: [list(b) for b in v] for k, v in self.bases.items()}
        out["shape"] = list(self.shape)
        if self.padding:
            out["padding"] = [list(p) for p in self.padding]
        return out


def _pow2(x: Any, what: str) -> int:
    if type(x) is not int or x <= 0 or x & (x - 1):
        raise InteropError(f"{what} = {x!r} is not a power of two; Triton linear layouts need "
                           "power-of-two tensor shapes")
    return x.bit_length() - 1


def _make_bases(bases: Mapping[str, Sequence[Sequence[int]]], shape: Sequence[int],
                padding: Sequence[Sequence[int]] = ()) -> TritonBases:
    shape_t = tuple(int(s) for s in shape)
    for i, s in enumerate(shape_t):
        _pow2(s, f"shape[{i}]")
    clean: Dict[str, Tuple[Basis, ...]] = {}
    for dim, vecs in bases.items():
        if dim not in DISTRIBUTED_DIMS + SHARED_DIMS:
            raise InteropError(f"unknown Triton input dimension {dim!r}; expected one of "
                               f"{DISTRIBUTED_DIMS + SHARED_DIMS}")
        out = []
        for j, v in enumerate(vecs):
            v = tuple(int(x) for x in v)
            if len(v) != len(shape_t):
                raise InteropError(f"{dim} basis {j} = {list(v)} has {len(v)} coordinates but "
                                   f"the tensor has rank {len(shape_t)} (shape {list(shape_t)})")
            for d, (x, s) in enumerate(zip(v, shape_t)):
                if not 0 <= x < s:
                    raise InteropError(f"{dim} basis {j} = {list(v)}: coordinate {d} is outside "
                                       f"0..{s - 1}")
            out.append(v)
        clean[dim] = tuple(out)
    if "offset" in clean and any(d in clean for d in ("register", "lane", "warp")):
        raise InteropError("a linear layout has either an 'offset' input (shared) or "
                           "register/lane/warp inputs (distributed), not both")
    pads = tuple((int(i), int(p)) for i, p in padding)
    return TritonBases(clean, shape_t, pads)


def bases_of(obj: Any, shape: Optional[Sequence[int]] = None) -> TritonBases:
    """Read the bases of a Triton or Gluon layout object (or pass a :class:`TritonBases` or a
    fixture dict through).

    Accepted: Triton's ``LinearLayout`` binding (``.bases`` and ``.out_dims``), Gluon's
    ``DistributedLinearLayout`` / ``SharedLinearLayout`` / ``PaddedSharedLayout`` (their
    ``*_bases`` fields), a dict ``{"register": [...], ..., "shape": [...]}``.  ``shape`` is
    needed only where the object does not carry it (a ``SharedLinearLayout``; otherwise the
    size of each dimension is inferred as the smallest power of two covering its bases).
    """
    if isinstance(obj, TritonBases):
        return obj
    if isinstance(obj, Mapping):
        d = dict(obj)
        shp = d.pop("shape", shape)
        pads = d.pop("padding", ())
        if shp is None:
            raise InteropError("bases given as a dict need a 'shape' entry")
        return _make_bases(d, shp, pads)
    if hasattr(obj, "out_dims") and hasattr(obj, "get_in_dim_names"):   # C++ binding
        out_dims = list(obj.out_dims)
        return _make_bases(dict(obj.bases), shape or [n for _, n in out_dims])
    found = {dim: getattr(obj, attr) for attr, dim in _GLUON_ATTRS.items()
             if getattr(obj, attr, None) is not None}
    if found:
        shp = getattr(obj, "shape", None) or shape
        if shp is None:
            shp = _covering_shape(found)
        pads = getattr(obj, "interval_padding_pairs", ()) or ()
        return _make_bases(found, shp, pads)
    raise InteropError(f"not a Triton linear layout: {type(obj).__name__} has neither "
                       "LinearLayout's bases/out_dims nor Gluon's reg_bases/offset_bases; for "
                       "an encoding (AMDMFMALayout, ...) call to_linear_layout on it first "
                       "(see docs/INTEROP.md)")


def _covering_shape(found: Mapping[str, Sequence[Sequence[int]]]) -> List[int]:
    rank = max((len(v) for vecs in found.values() for v in vecs), default=1)
    shp = [1] * rank
    for vecs in found.values():
        for v in vecs:
            for d, x in enumerate(v):
                while shp[d] <= x:
                    shp[d] *= 2
    return shp


def _index_cols(b: TritonBases, dim: str) -> List[int]:
    """The tile index (column-major, dim0 fastest) of each basis of ``dim``."""
    cols = []
    for v in b.bases.get(dim, ()):
        idx, mul = 0, 1
        for x, s in zip(v, b.shape):
            idx += x * mul
            mul *= s
        cols.append(idx)
    return cols


def _plain_mode(cols: Sequence[int], what: str) -> Layout:
    """A layout whose bit j has stride ``cols[j]`` (each a power of two or 0), coalesced."""
    for j, c in enumerate(cols):
        if c & (c - 1):
            raise InteropError(f"{what} bit {j} maps to tile index {c}, which sets several "
                               "bits: an XOR (swizzled) distribution, not representable as a "
                               "Layout; use the F2 view (layoutalg.F2Map) instead")
    if not cols:
        return Layout._make(1, 0)
    return coalesce(Layout._make(tuple(2 for _ in cols), tuple(cols)))


def from_linear_layout(ll: Any, *, wave_size: Optional[int] = None,
                       shape: Optional[Sequence[int]] = None) -> Any:
    """Translate a Triton linear layout (see :func:`bases_of` for what is accepted).

    Distributed (register/lane/warp/block inputs): returns a :class:`~layoutalg.TVLayout`
    ``(thread, value) -> tile index`` with ``tile_shape`` the tensor shape.  ``wave_size``
    defaults to ``2 ** len(lane bases)`` (64 on CDNA, 32 on RDNA wave32).

    Shared (offset input): returns the LDS layout ``tile index -> element offset``: a Layout,
    ``ComposedLayout(Swizzle, 0, Layout)`` or an :class:`~layoutalg.F2Map`.

    Raises :class:`InteropError` when the layout is not representable (two bits on the same
    tile bit, an XOR distribution of threads, a shared layout that is not a bijection).
    """
    b = bases_of(ll, shape)
    if b.kind == "shared":
        return _shared_layout(b)
    return _tv_layout(b, wave_size)


def _tv_layout(b: TritonBases, wave_size: Optional[int]) -> TVLayout:
    lanes = _index_cols(b, "lane")
    if wave_size is not None:
        nb = _pow2(wave_size, "wave_size")
        if nb < len(lanes):
            raise InteropError(f"the layout has {len(lanes)} lane bases ({2 ** len(lanes)} "
                               f"lanes) but wave_size is {wave_size}")
        lanes = lanes + [0] * (nb - len(lanes))   # lanes beyond the bases hold copies
    thr = lanes + _index_cols(b, "warp") + _index_cols(b, "block")
    reg = _index_cols(b, "register")
    nonzero = [c for c in thr + reg if c]
    if len(set(nonzero)) != len(nonzero):
        raise InteropError("two input bits map to the same tile position; Triton XORs them "
                           "(they cancel) while a Layout would add them: not representable")
    tv = make_layout(_plain_mode(thr, "thread"), _plain_mode(reg, "register"))
    return TVLayout(tv, b.shape)


def _shared_layout(b: TritonBases) -> Any:
    n = sum(s.bit_length() - 1 for s in b.shape)
    cols = _index_cols(b, "offset")
    if b.bases.get("block"):
        raise InteropError("shared layouts spread over several CTAs (block bases) are not "
                           "supported: take one CTA's layout")
    fwd = F2Map(cols, n)
    if len(cols) != n or not fwd.is_injective():
        raise InteropError(f"the shared layout's {len(cols)} offset bits do not map one-to-one "
                           f"onto the {n} bits of the {list(b.shape)} tile (rank "
                           f"{fwd.rank()}): not an LDS layout of the whole tile")
    inv = fwd.inverse()             # tile index bit -> offset bits
    lds = _split_swizzle(inv, b.shape)
    if b.padding:
        return _pad(lds, b.padding, 1 << n)
    return lds


def _shaped(cols: Sequence[int], shape: Sequence[int]) -> Layout:
    """Layout over the tile ``shape`` whose index bit j has stride ``cols[j]``."""
    modes, j = [], 0
    for s in shape:
        k = s.bit_length() - 1
        modes.append(_plain_mode(cols[j:j + k], "tile"))
        j += k
    return make_layout(*modes) if len(modes) > 1 else modes[0]


def _split_swizzle(inv: F2Map, shape: Sequence[int]) -> Any:
    """``inv`` as a Layout, or ``Swizzle o 0 o Layout``, or itself (general XOR)."""
    if all(c & (c - 1) == 0 for c in inv.cols):
        return _shaped(inv.cols, shape)
    plain = [1 << (c.bit_length() - 1) for c in inv.cols]       # each column's top bit
    if len(set(plain)) == len(plain):
        want = {p: c for p, c in zip(plain, inv.cols)}          # F(top bit) = column
        n = inv.n_out
        for bits in range(1, n + 1):
            for base in range(0, n):
                for shift in range(bits, n - base - bits + 1):
                    sw = Swizzle(bits, base, shift)
                    if all(sw(p) == c for p, c in want.items()):
                        return ComposedLayout(sw, 0, _shaped(plain, shape))
    return inv


def _pad(lds: Any, padding: Sequence[Tuple[int, int]], total: int) -> Layout:
    """Triton's padded shared encoding: ``offset + sum((offset // interval) * pad)`` after the
    linear part, as a Layout over the unpadded offset composed after ``lds``."""
    from ..algebra import composition
    if not isinstance(lds, Layout):
        raise InteropError("a padded shared encoding whose linear part is swizzled has no "
                           "Layout form (padding after a swizzle is not a composition of "
                           "layoutalg layouts)")
    pads = sorted(padding)
    for i, p in pads:
        _pow2(i, "padding interval")
        if type(p) is not int or p < 0:
            raise InteropError(f"padding {p!r} must be a non-negative int")
    bounds = [1] + [i for i, _ in pads if i < total] + [total]
    shape, stride = [], []
    for lo, hi in zip(bounds, bounds[1:]):
        if hi == lo:
            continue
        shape.append(hi // lo)
        stride.append(lo + sum((lo // i) * p for i, p in pads))
    padl = Layout._make(tuple(shape), tuple(stride)) if len(shape) > 1 else \
        Layout._make(shape[0], stride[0])
    return composition(padl, lds)


# ---- the inverse -------------------------------------------------------------------------------

def to_linear_layout(layout_tv: Any, tile_shape: Optional[Sequence[int]] = None, *,
                     wave_size: int = 64) -> TritonBases:
    """The Triton bases of a power-of-two TV layout (the inverse of :func:`from_linear_layout`).

    ``layout_tv`` maps ``(thread, value)`` to the column-major index of ``tile_shape`` (a
    :class:`~layoutalg.TVLayout` carries its tile shape).  Thread bits below ``wave_size`` are
    lanes, the rest warps.  Raises :class:`InteropError` unless every extent and stride is a
    power of two (or a zero stride).
    """
    from ..f2 import F2Error, to_f2
    if isinstance(layout_tv, TVLayout):
        tile_shape = tile_shape or layout_tv.tile_shape
        layout_tv = layout_tv.layout_tv
    if tile_shape is None:
        raise InteropError("to_linear_layout needs the tile shape (or a TVLayout)")
    if not isinstance(layout_tv, Layout) or layout_tv.rank != 2:
        raise InteropError(f"expected a rank-2 (thread, value) Layout, got {layout_tv!r}")
    shape = tuple(tile_shape)
    for i, s in enumerate(shape):
        _pow2(s, f"tile_shape[{i}]")
    try:
        thr = to_f2(layout_tv[0]).cols
        val = to_f2(layout_tv[1]).cols
    except F2Error as e:
        raise InteropError(f"{layout_tv} has no Triton linear layout: {e}") from None
    nlane = _pow2(wave_size, "wave_size")

    def vec(idx: int) -> Basis:
        out = []
        for s in shape:
            out.append(idx % s)
            idx //= s
        if idx:
            raise InteropError(f"tile index beyond the {list(shape)} tile")
        return tuple(out)

    lanes = [vec(c) for c in thr[:nlane]]
    lanes += [tuple(0 for _ in shape)] * (nlane - len(lanes))
    bases = {"register": tuple(vec(c) for c in val), "lane": tuple(lanes),
             "warp": tuple(vec(c) for c in thr[nlane:]), "block": ()}
    return TritonBases(bases, shape)


def to_triton(b: Union[TritonBases, Mapping[str, Any]]) -> Any:
    """Build Triton's ``LinearLayout`` binding from bases (needs the ``triton`` package)."""
    try:
        from triton._C.libtriton.linear_layout import LinearLayout
    except ImportError as e:
        raise InteropError(f"to_triton needs Triton installed ({e})") from None
    b = bases_of(b)
    names = [f"dim{i}" for i in range(len(b.shape))]
    ins = [(k, [list(v) for v in b.bases[k]]) for k in DISTRIBUTED_DIMS + SHARED_DIMS
           if k in b.bases]
    return LinearLayout.from_bases(ins, names, list(b.shape), False)
