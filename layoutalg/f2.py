"""The F2 (binary-matrix) view of power-of-two layouts and XOR swizzles.

For a layout whose extents and strides are powers of two (strides may be 0) and whose input bits
land on distinct output bits, ``L(i)`` is *linear over F2*: each input bit ``j`` contributes a
fixed output bit pattern ``col[j]`` and ``L(i) = XOR of col[j] for the set bits j of i``.  A
swizzle ``Sw<B,M,S>`` is linear too, so ``Sw o c o L`` is affine (``c`` a constant XOR when its
bits avoid L's image).  This is the basis for proofs that hold for every tile position:
conflict-freedom and bijectivity become rank statements about these matrices (the idea behind
Triton's linear layouts).

Invariants of :class:`F2Map`: ``cols[j]`` is the image of input bit ``j`` as an int bitmask;
``const`` is XORed into every output; ``n_in`` input bits, ``n_out`` output bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

from .errors import LayoutError

if TYPE_CHECKING:      # for the annotation only: from_f2 imports Layout when it runs
    from .layout import Layout

__all__ = ["F2Map", "to_f2", "from_f2", "f2_rank", "F2Error", "swizzle_f2", "add_offset"]


class F2Error(LayoutError):
    """The layout is not linear over F2 (non power-of-two extent/stride or overlapping bits)."""


def log2_exact(x: int, what: str) -> int:
    """``log2(x)`` for a power of two ``x``; F2Error naming ``what`` otherwise."""
    if type(x) is not int or x <= 0 or x & (x - 1):
        raise F2Error(f"{what} {x} is not a power of two; the F2 view needs powers of two")
    return x.bit_length() - 1


class F2Map:
    """An affine map over F2: ``x -> XOR(cols[j] for set bits j of x) ^ const``."""

    __slots__ = ("cols", "const", "n_in", "n_out")

    def __init__(self, cols: Sequence[int], n_out: Optional[int] = None, const: int = 0) -> None:
        from .checks import require_int
        if not isinstance(cols, (list, tuple)):
            raise F2Error(f"F2Map: cols must be a list of ints (one output bit mask per input "
                          f"bit), got {type(cols).__name__}")
        cols = [require_int(c, "F2Map", "a column", lo=0) for c in cols]
        const = require_int(const, "F2Map", "const", lo=0)
        if n_out is not None:
            n_out = require_int(n_out, "F2Map", "n_out", lo=0)
        self.cols = tuple(cols)
        self.n_in = len(self.cols)
        hi = max([c.bit_length() for c in self.cols] + [int(const).bit_length()])
        self.n_out = max(hi, n_out or 0)
        self.const = int(const)

    def __call__(self, x: int) -> int:
        out = self.const
        j = 0
        while x:
            if x & 1:
                if j >= self.n_in:
                    raise F2Error(f"input {bin(x << j)} has bits beyond the map's {self.n_in} "
                                  "input bits")
                out ^= self.cols[j]
            x >>= 1
            j += 1
        return out

    def matrix(self) -> np.ndarray:
        """``n_out x n_in`` 0/1 matrix: entry (r, j) is bit r of the image of input bit j."""
        m = np.zeros((self.n_out, self.n_in), dtype=np.uint8)
        for j, c in enumerate(self.cols):
            for r in range(self.n_out):
                m[r, j] = (c >> r) & 1
        return m

    def rank(self) -> int:
        return f2_rank(self.cols)

    def is_injective(self) -> bool:
        return self.rank() == self.n_in

    def compose(self, inner: "F2Map") -> "F2Map":
        """``self o inner``."""
        lin = F2Map(self.cols, self.n_out)
        cols = [lin(c) for c in inner.cols]
        return F2Map(cols, self.n_out, lin(inner.const) ^ self.const)

    def restrict(self, bits: Sequence[int]) -> "F2Map":
        """The linear map on the input bits listed (in that order)."""
        return F2Map([self.cols[b] for b in bits], self.n_out)

    def inverse(self) -> "F2Map":
        """Inverse of a bijective map (``n_in == n_out == rank``)."""
        n = self.n_in
        if self.n_out > n or self.rank() != n:
            raise F2Error(f"F2 map with {n} input bits and rank {self.rank()} onto {self.n_out} "
                          "bits is not invertible")
        # Solve M * X = I column by column with Gaussian elimination on augmented rows.
        rows = []
        for r in range(n):
            row = 0
            for j, c in enumerate(self.cols):
                if (c >> r) & 1:
                    row |= 1 << j
            rows.append([row, 1 << r])
        for j in range(n):
            piv = next(i for i in range(j, n) if (rows[i][0] >> j) & 1)
            rows[j], rows[piv] = rows[piv], rows[j]
            for i in range(n):
                if i != j and (rows[i][0] >> j) & 1:
                    rows[i][0] ^= rows[j][0]
                    rows[i][1] ^= rows[j][1]
        # rows[j] now says: input bit j = XOR of output bits in rows[j][1]
        inv_cols = [0] * n
        for j in range(n):
            for r in range(n):
                if (rows[j][1] >> r) & 1:
                    inv_cols[r] |= 1 << j
        inv = F2Map(inv_cols, n)
        return F2Map(inv_cols, n, inv(self.const))

    def kernel(self) -> List[int]:
        """A basis of the input vectors mapped to 0 by the linear part."""
        basis: List[tuple] = []  # (image, combination)
        ker: List[int] = []
        for j, c in enumerate(self.cols):
            v, comb = c, 1 << j
            for (b, bc) in basis:
                if v ^ b < v:
                    v ^= b
                    comb ^= bc
            if v == 0:
                ker.append(comb)
            else:
                basis.append((v, comb))
                basis.sort(reverse=True)
        return ker

    def __eq__(self, other: object) -> bool:
        return isinstance(other, F2Map) and self.cols == other.cols and self.const == other.const

    def __repr__(self) -> str:
        cols = ",".join(bin(c) for c in self.cols)
        return f"F2Map(cols=[{cols}], const={bin(self.const)})"


def f2_rank(vectors: Sequence[int]) -> int:
    """Rank over F2 of int bitmask vectors."""
    basis: List[int] = []
    for v in vectors:
        for b in basis:
            v = min(v, v ^ b)
        if v:
            basis.append(v)
            basis.sort(reverse=True)
    return len(basis)


def _layout_cols(layout: Any) -> List[int]:
    fs, fd = layout.flat()
    cols: List[int] = []
    for s, d in zip(fs, fd):
        nb = log2_exact(s, "extent")
        if nb == 0:  # an extent-1 mode contributes no input bit, whatever its stride
            continue
        if type(d) is not int:
            raise F2Error(f"symbolic stride {d} has no F2 view")
        if d == 0:
            cols.extend([0] * nb)
            continue
        if d < 0:
            raise F2Error(f"negative stride {d} has no F2 view")
        sb = log2_exact(d, "stride")
        cols.extend(1 << (sb + k) for k in range(nb))
    seen = 0
    for c in cols:
        if c & seen:
            raise F2Error(f"layout {layout} is not F2-linear: two input bits land on the same "
                          "output bit, so the sum carries")
        seen |= c
    return cols


def to_f2(obj: Any) -> F2Map:
    """F2 view of a Layout, Swizzle or ``Swizzle o c o Layout`` (affine in the last case).

    The view is built from the structure (stride bits, the swizzle's XOR, the offset's bits);
    where that is refused (an offset whose addition carries, a negative or overlapping stride)
    but the map is still affine over F2 on its domain, the view is read off the values
    (``f(0)`` and ``f(2^j) ^ f(0)``) and checked on every point of the domain
    (at most ``2**MAX_F2_DOMAIN_BITS`` points).
    """
    from .layout import Layout
    from .swizzle import ComposedLayout, Swizzle
    if isinstance(obj, Swizzle):
        return swizzle_f2(obj)
    if not isinstance(obj, (Layout, ComposedLayout)):
        raise F2Error(f"no F2 view for {obj!r}; expected a Layout, a Swizzle or a ComposedLayout")
    try:
        return _structural_f2(obj)
    except F2Error as err:
        fallback = _f2_from_values(obj)
        if fallback is None:
            raise err
        return fallback


MAX_F2_DOMAIN_BITS = 20


def _structural_f2(obj: Any) -> F2Map:
    from .layout import Layout
    from .swizzle import Swizzle
    if isinstance(obj, Layout):
        return F2Map(_layout_cols(obj))
    shifted = add_offset(to_f2(obj.inner), obj.offset)
    outer = obj.outer
    if isinstance(outer, Swizzle):
        return swizzle_f2(outer, shifted.n_out).compose(shifted)
    return to_f2(outer).compose(shifted)


def _f2_from_values(obj: Any) -> Optional[F2Map]:
    """The affine F2 map that agrees with ``obj`` on its whole domain, or None."""
    n = obj.size()
    if type(n) is not int or n & (n - 1) or n.bit_length() - 1 > MAX_F2_DOMAIN_BITS:
        return None
    vals = obj.values()
    if len(vals) and int(vals.min()) < 0:
        return None
    nb = n.bit_length() - 1
    const = int(vals[0])
    cols = [int(vals[1 << j]) ^ const for j in range(nb)]
    m = F2Map(cols, const=const)
    idx = np.arange(n, dtype=np.int64)
    pred = np.full(n, const, dtype=np.int64)
    for j, c in enumerate(cols):
        pred ^= ((idx >> j) & 1) * c
    return m if np.array_equal(pred, np.asarray(vals, dtype=np.int64)) else None


def add_offset(m: F2Map, off: Any) -> F2Map:
    """``x -> m(x) + off`` as an F2 map: the XOR ``m(x) ^ off`` when ``off`` has no bit that
    ``m`` can set (then the addition never carries), else :class:`F2Error`."""
    if type(off) is not int or off < 0:
        raise F2Error(f"offset {off!r} has no F2 view")
    image = m.const
    for c in m.cols:
        image |= c
    if off & image:
        raise F2Error(f"offset {off} overlaps the bits of the layout it is added to; the sum "
                      "carries")
    return F2Map(m.cols, m.n_out, m.const | off)


def swizzle_f2(sw: Any, n_bits: int = 0) -> F2Map:
    """F2 view of a swizzle on ``max(n_bits, bits it touches)`` bits (identity above them)."""
    n = max(n_bits, sw.base + max(0, sw.shift) + sw.bits, sw.base - min(0, sw.shift) + sw.bits)
    return F2Map([sw(1 << j) for j in range(n)], n)


def from_f2(m: F2Map) -> Layout:
    """The Layout with F2 view ``m`` when each input bit maps to one output bit (or none)."""
    from .layout import Layout
    if not isinstance(m, F2Map):
        raise F2Error(f"from_f2: expected an F2Map, got {m!r} ({type(m).__name__}); make one "
                      "with to_f2(layout)")
    if m.const:
        raise F2Error("an affine F2 map (nonzero constant) is not a plain Layout")
    shape, stride = [], []
    for c in m.cols:
        if c & (c - 1):
            raise F2Error(f"input bit maps to several output bits ({bin(c)}): that is a swizzle, "
                          "not a plain layout")
        shape.append(2)
        stride.append(c)
    if not shape:
        return Layout._make(1, 0)
    from .layout import coalesce
    return coalesce(Layout._make(tuple(shape), tuple(stride)))
