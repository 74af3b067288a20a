"""Hypothesis strategies for property-testing code that builds CuTe layouts.

Import this module explicitly (``from layoutalg import strategies as las``); ``import layoutalg``
never imports hypothesis.  Every strategy is *bounded*: ``max_size`` caps the product of the
extents (so enumerating a drawn layout is cheap), ``max_rank`` caps the number of modes at every
level and ``max_depth`` the nesting (0: a single integer mode, 1: a flat tuple, ...).

    >>> from hypothesis import given
    >>> from layoutalg import strategies as las
    >>> @given(las.compact_layouts(max_size=64))
    ... def test_bijective(L):
    ...     assert sorted(L.values()) == list(range(L.size()))

Strategies (all return hypothesis ``SearchStrategy`` objects):

``int_tuples``          nested positive integers (values, not extents: no size budget)
``shapes``              nested extents >= 1 whose product is <= max_size
``layouts``             any shape with congruent strides (0 and negative strides optional)
``injective_layouts``   layouts with distinct offsets (sorted strides dominate the span below)
``compact_layouts``     bijections onto ``[0, size)`` (permuted column-major strides)
``tilers``              tilers for divides/products/composition: a Layout, an int, or a by-mode
                        tuple of those with ``None`` (CuTe's ``_``); with ``for_layout=L`` the
                        tilers divide L's modes so every divide is admissible
``swizzles``            ``Swizzle(B, M, S)`` with ``|S| >= B``
``swizzled_layouts``    ``Swizzle o offset o Layout`` (power-of-two compact inner layouts)
``tv_layouts``          ``(thr, val, tiler_mn, layout_tv)`` through :func:`make_layout_tv`
"""

from __future__ import annotations

from typing import Any, List, Optional

from hypothesis import strategies as st

from .inttuple import flatten
from .layout import Layout, make_layout
from .swizzle import ComposedLayout, Swizzle

__all__ = ["int_tuples", "shapes", "layouts", "injective_layouts", "compact_layouts", "tilers",
           "swizzles", "swizzled_layouts", "tv_layouts"]

_POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def _check_knobs(max_size: int, max_rank: int, max_depth: int) -> None:
    if max_size < 1 or max_rank < 1 or max_depth < 0:
        raise ValueError(f"need max_size >= 1, max_rank >= 1, max_depth >= 0; got {max_size}, "
                         f"{max_rank}, {max_depth}")


def _extent(draw: Any, budget: int, power_of_two: bool, max_extent: int) -> int:
    """One extent in ``[1, min(budget, max_extent)]``; small values are favoured by shrinking."""
    hi = max(1, min(budget, max_extent))
    if power_of_two:
        return draw(st.sampled_from([p for p in _POW2 if p <= hi]))
    return draw(st.integers(1, hi))


def _tree(draw: Any, depth: int, max_rank: int, leaf: Any, budget: List[int]) -> Any:
    """A random tree of depth <= ``depth``; ``leaf(budget)`` draws a leaf and the shared
    ``budget[0]`` shrinks by each leaf's extent so the product stays bounded."""
    if depth == 0 or draw(st.booleans()):
        return leaf(budget)
    r = draw(st.integers(1, max_rank))
    return tuple(_tree(draw, depth - 1, max_rank, leaf, budget) for _ in range(r))


@st.composite
def int_tuples(draw: Any, max_rank: int = 3, max_depth: int = 2, min_value: int = 1,
               max_value: int = 16, power_of_two: bool = False) -> Any:
    """Nested integers in ``[min_value, max_value]`` (an int or tuples of depth <= max_depth);
    with ``power_of_two`` only the powers of two in that range (at least 1 is always allowed).
    """
    _check_knobs(1, max_rank, max_depth)
    if power_of_two:
        pool = [p for p in _POW2 if min_value <= p <= max_value] or [1]
        leaf = st.sampled_from(pool)
    else:
        leaf = st.integers(min_value, max_value)
    return _tree(draw, max_depth, max_rank, lambda b: draw(leaf), [0])


@st.composite
def shapes(draw: Any, max_size: int = 256, max_rank: int = 3, max_depth: int = 2,
           power_of_two: bool = False, max_extent: int = 16) -> Any:
    """A shape (nested extents >= 1) with ``product(shape) <= max_size``.

    Post: ``depth(shape) <= max_depth``, every tuple level has at most ``max_rank`` modes, every
    extent is a power of two when ``power_of_two``.
    """
    _check_knobs(max_size, max_rank, max_depth)

    def leaf(budget: List[int]) -> int:
        e = _extent(draw, budget[0], power_of_two, max_extent)
        budget[0] //= e
        return e
    return _tree(draw, max_depth, max_rank, leaf, [max_size])


def _unflatten(flat: list, profile: Any) -> Any:
    it = iter(flat)

    def go(p: Any) -> Any:
        if type(p) is tuple:
            return tuple(go(x) for x in p)
        return next(it)
    return go(profile)


@st.composite
def layouts(draw: Any, max_size: int = 256, max_rank: int = 3, max_depth: int = 2,
            power_of_two: bool = False, zero_strides: bool = True,
            negative_strides: bool = False, max_stride: int = 64) -> Layout:
    """Any layout: a shape from :func:`shapes` and an arbitrary congruent stride.

    Strides lie in ``[-max_stride, max_stride]`` (negative ones only with
    ``negative_strides``, 0 only with ``zero_strides``); with ``power_of_two`` every nonzero
    stride is +-2^k.  Post: ``size(L) <= max_size``.
    """
    shp = draw(shapes(max_size=max_size, max_rank=max_rank, max_depth=max_depth,
                      power_of_two=power_of_two))
    n = len(flatten(shp))
    lo = -max_stride if negative_strides else (0 if zero_strides else 1)
    if power_of_two:
        mags = [p for p in _POW2 if p <= max(1, max_stride)]
        opts = list(mags) + ([-m for m in mags] if negative_strides else [])
        if zero_strides:
            opts.append(0)
        d = st.sampled_from(opts)
    else:
        d = st.integers(lo, max_stride)
        if not zero_strides:
            d = d.filter(lambda x: x != 0)
    strides = [draw(d) for _ in range(n)]
    return Layout(shp, _unflatten(strides, shp))


@st.composite
def injective_layouts(draw: Any, max_size: int = 256, max_rank: int = 3, max_depth: int = 2,
                      power_of_two: bool = False, max_gap: int = 3, nested: bool = False) -> Layout:
    """Layouts with pairwise distinct offsets on ``[0, size)``.

    Built by visiting the flat modes in a random order and giving each a stride at least the
    span of the modes already placed (so the offsets are a mixed-radix number system).  With
    ``nested`` each stride is a multiple of that span (the layout then has a complement and
    ``make_layout(L, complement(L))`` is a bijection); with ``power_of_two`` strides are powers
    of two.  Extent-1 modes get an arbitrary small stride (they never move).
    Post: ``len(set(L.values())) == size(L)``, all strides >= 0.
    """
    shp = draw(shapes(max_size=max_size, max_rank=max_rank, max_depth=max_depth,
                      power_of_two=power_of_two))
    fs = flatten(shp)
    order = draw(st.permutations(range(len(fs))))
    strides = [0] * len(fs)
    span = 1
    for i in order:
        if fs[i] == 1:
            strides[i] = draw(st.integers(0, 4))
            continue
        if power_of_two:
            d = span * draw(st.sampled_from([p for p in _POW2 if p <= max(1, max_gap)]))
        elif nested:
            d = span * draw(st.integers(1, max(1, max_gap)))
        else:
            d = span + draw(st.integers(0, max(0, (max_gap - 1) * span)))
        strides[i] = d
        span = d * fs[i]
    return Layout(shp, _unflatten(strides, shp))


@st.composite
def compact_layouts(draw: Any, max_size: int = 256, max_rank: int = 3, max_depth: int = 2,
                    power_of_two: bool = False) -> Layout:
    """Bijections onto ``[0, size)``: column-major strides over a random order of the modes.

    Post: ``sorted(L.values()) == list(range(size(L)))``.  Extent-1 modes get stride 0, as in
    CuTe's compact layouts.
    """
    shp = draw(shapes(max_size=max_size, max_rank=max_rank, max_depth=max_depth,
                      power_of_two=power_of_two))
    fs = flatten(shp)
    order = draw(st.permutations(range(len(fs))))
    strides = [0] * len(fs)
    span = 1
    for i in order:
        if fs[i] != 1:
            strides[i] = span
            span *= fs[i]
    return Layout(shp, _unflatten(strides, shp))


def _divisors(n: int) -> list:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def _dividing_tile(draw: Any, mode: Layout, power_of_two: bool) -> Any:
    """A tiler entry for one mode that makes divides admissible: ``n`` or a compact ``n``-element
    layout with ``n = s0*...*s_{k-1}*g`` for the mode's flat extents and ``g | s_k`` (split as
    ``(a, n/a)`` only with ``a`` of that form too)."""
    fs = flatten(mode.shape)
    sizes = []  # every s0*...*s_{k-1}*g with g | s_k
    pre = 1
    for s in fs:
        sizes += [pre * g for g in _divisors(s)
                  if not power_of_two or g & (g - 1) == 0]
        pre *= s
    sizes = sorted(set(sizes))
    n = draw(st.sampled_from(sizes))
    kind = draw(st.sampled_from(["none", "int", "layout", "split"]))
    if kind == "none":
        return None
    if kind == "int":
        return n
    if kind == "split":
        # (a, n/a) col-major is admissible when a is itself such a prefix size
        a = draw(st.sampled_from([x for x in sizes if n % x == 0]))
        return make_layout((a, n // a))
    return make_layout(n)


@st.composite
def tilers(draw: Any, for_layout: Optional[Layout] = None, max_size: int = 64,
           max_rank: int = 2, power_of_two: bool = False) -> Any:
    """A tiler: a Layout, an int, or a by-mode tuple of Layouts / ints / ``None``.

    Without ``for_layout``: any small injective layout, a positive int, or a tuple of up to
    ``max_rank`` such entries (``None`` allowed).  With ``for_layout=L``: a by-mode tuple with at
    most ``rank(L)`` entries, each dividing its mode in the admissible way (a compact tile of
    ``n`` elements, ``n`` a prefix product of the mode's extents times a divisor of the next), or
    a single such tile for mode 0 when L has rank 1; every divide of L by it is admissible.
    """
    if for_layout is not None:
        L = for_layout
        r = L.rank
        if r == 1 and type(L.shape) is not tuple and draw(st.booleans()):
            t = draw(_dividing_tile(L, power_of_two))
            return t if t is not None else make_layout(1)
        m = draw(st.integers(1, r))
        return tuple(draw(_dividing_tile(L[i], power_of_two)) for i in range(m))
    entry = st.one_of(
        st.none(),
        st.integers(1, max_size),
        injective_layouts(max_size=max_size, max_rank=2, max_depth=1, power_of_two=power_of_two))
    single = st.one_of(
        st.integers(1, max_size),
        injective_layouts(max_size=max_size, max_rank=max_rank, max_depth=2,
                          power_of_two=power_of_two))
    return draw(st.one_of(single, st.lists(entry, min_size=1, max_size=max_rank).map(tuple)))


@st.composite
def swizzles(draw: Any, max_bits: int = 3, max_base: int = 4, max_shift: int = 6,
             negative_shift: bool = False) -> Swizzle:
    """``Swizzle(B, M, S)`` with ``0 <= B <= max_bits``, ``0 <= M <= max_base`` and
    ``B <= |S| <= max(B, max_shift)`` (S < 0 only with ``negative_shift``).

    Post: the swizzle is a bijection (an involution) on ``[0, 2^(M + |S| + B))``.
    """
    b = draw(st.integers(0, max_bits))
    m = draw(st.integers(0, max_base))
    s = draw(st.integers(b, max(b, max_shift)))
    if negative_shift and s and draw(st.booleans()):
        s = -s
    return Swizzle(b, m, s)


@st.composite
def swizzled_layouts(draw: Any, max_size: int = 1024, max_rank: int = 2, max_depth: int = 2,
                     offset: bool = False) -> ComposedLayout:
    """``Swizzle o c o L`` with L a power-of-two compact layout (the shared-memory pattern).

    ``c`` is 0 unless ``offset``, then a multiple of ``size(L)`` (a tile further down the
    buffer).  Post: the composed layout is a bijection onto ``c + [0, size(L))`` whenever the
    swizzle's bits lie below ``size(L)``.
    """
    inner = draw(compact_layouts(max_size=max_size, max_rank=max_rank, max_depth=max_depth,
                                 power_of_two=True))
    sw = draw(swizzles())
    c = inner.size() * draw(st.integers(0, 3)) if offset else 0
    return ComposedLayout(sw, c, inner)


@st.composite
def tv_layouts(draw: Any, max_threads: int = 64, max_values: int = 16,
               power_of_two: bool = False) -> tuple:
    """``(thr, val, tiler_mn, layout_tv)`` from :func:`layoutalg.make_layout_tv`.

    ``thr`` and ``val`` are rank-2 compact layouts (column- or row-major) of at most
    ``max_threads`` / ``max_values`` elements.  Post: ``layout_tv`` is a bijection from
    ``(thread, value)`` onto ``[0, size(thr) * size(val))``.
    """
    from .tv import make_layout_tv

    def rank2(limit: int) -> Layout:
        a = _extent(draw, limit, power_of_two, limit)
        b = _extent(draw, limit // a, power_of_two, limit)
        return make_layout((a, b), major=draw(st.sampled_from(["col", "row"])))
    thr = rank2(max_threads)
    val = rank2(max_values)
    tiler, tv = make_layout_tv(thr, val)
    return thr, val, tiler, tv
