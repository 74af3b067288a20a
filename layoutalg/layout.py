"""`Layout`: a function from coordinates to offsets, given by a shape and a congruent stride.

Invariants (checked by the public constructor, assumed by ``Layout._make``):
  * ``shape`` and ``stride`` are congruent IntTuples (see :mod:`layoutalg.inttuple`);
  * every static shape leaf is >= 1; strides are any integers (negative and 0 allowed);
  * a Layout is immutable and hashable; equality is structural (same shape and stride).

Semantics follow CuTe C++ with static integers: ``L(i)`` for an integer ``i`` walks the flattened
modes column-major, and the last mode is unbounded, so ``L(i)`` is defined for every ``i >= 0``
(CuTe relies on that extension when composing).  ``size(L)`` is the domain size and
``cosize(L) = 1 + sum((s - 1) * |d|)`` the codomain extent.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

from .checks import (check_depth, register_layout_type, require_any_layout, require_int,
                     require_layout)
from .enumerate import layout_values
from .errors import LayoutError, ShapeError
from .flat_modes import coalesce_lists, filter_lists, same_value
from .inttuple import (IntTuple, compact_col_major, compact_row_major, congruent, crd2idx,
                       depth as _depth, flatten, fmt, normalize, product,
                       rank as _rank)

__all__ = [
    "Layout", "make_layout", "make_ordered_layout", "make_identity_layout", "size", "cosize",
    "rank", "depth", "shape", "stride", "coalesce", "filter", "filter_zeros", "append",
    "prepend", "slice_and_offset", "is_layout", "mode", "flatten_layout", "group",
]


class ModeError(ShapeError, IndexError):
    """A mode index outside ``[-rank, rank)`` (also an IndexError, so iteration idioms work)."""


def _check_shape_leaf(s: Any) -> None:
    if type(s) is int:
        if s <= 0:
            raise ShapeError(f"shape extents must be >= 1, got {s}")
    elif getattr(s, "is_positive", None) is False:
        raise ShapeError(f"symbolic shape extent {s} is not positive; declare the symbol "
                         "with positive=True")


class Layout:
    """A CuTe layout ``shape:stride``.

    >>> L = Layout((4, (2, 3)), (1, (8, 16)))
    >>> str(L), L(5), L((1, (1, 2)))
    ('(4,(2,3)):(1,(8,16))', 9, 41)

    Calling with an int or a (nested) coordinate gives the offset; a coordinate containing
    ``None`` (CuTe's ``_``) slices and returns the layout of the ``None`` modes.
    """

    __slots__ = ("shape", "stride", "_flat", "_hash", "_ints")

    def __init__(self, shape: IntTuple, stride: Optional[IntTuple] = None) -> None:
        self._hash = None
        if stride is not None:
            # fast path: plain ints and tuples, congruent, extents >= 1.  The validation walk
            # also collects the flat modes, so the algebra never has to flatten this layout.
            if type(shape) is int:
                if type(stride) is int and shape >= 1:
                    self.shape = shape
                    self.stride = stride
                    self._flat = self._ints = ((shape,), (stride,))
                    return
            elif type(shape) is tuple and type(stride) is tuple:
                fs: list = []
                fd: list = []
                if _collect_valid(shape, stride, fs, fd, 0):
                    self.shape = shape
                    self.stride = stride
                    self._flat = self._ints = (tuple(fs), tuple(fd))
                    return
        self._flat = None
        self._ints = None
        check_depth(shape, "shape")
        check_depth(stride, "stride")
        shape = normalize(shape, "shape")
        for s in flatten(shape):
            _check_shape_leaf(s)
        if stride is None:
            stride = compact_col_major(shape)
        else:
            stride = normalize(stride, "stride")
            if not congruent(shape, stride):
                raise ShapeError(f"shape {fmt(shape)} and stride {fmt(stride)} are not congruent "
                                 "(they must have the same nesting, mode for mode)")
        self.shape = shape
        self.stride = stride

    @classmethod
    def _make(cls, shape: IntTuple, stride: IntTuple) -> "Layout":
        """Trusted constructor: no validation (internal use, inputs already valid)."""
        obj = _new(cls)
        obj.shape = shape
        obj.stride = stride
        obj._flat = None
        obj._hash = None
        obj._ints = None
        return obj

    # ---- structure -------------------------------------------------------------------------
    def flat(self) -> tuple:
        """(flat_shape, flat_stride) tuples, cached."""
        f = self._flat
        if f is None:
            s = self.shape
            if type(s) is int:
                f = ((s,), (self.stride,))
            else:
                f = (flatten(s), flatten(self.stride))
            self._flat = f
        return f

    def size(self) -> Any:
        s = self.shape
        if type(s) is int:
            return s
        p = 1
        for x in self.flat()[0]:
            p = p * x
        return p

    def cosize(self) -> Any:
        fs, fd = self.flat()
        total = 1
        for s, d in zip(fs, fd):
            total = total + (s - 1) * abs(d)
        return total

    @property
    def rank(self) -> int:
        return _rank(self.shape)

    @property
    def depth(self) -> int:
        return _depth(self.shape)

    def __len__(self) -> int:
        return _rank(self.shape)

    def __getitem__(self, i: int) -> "Layout":
        """Mode ``i`` as a layout (CuTe ``layout<i>``)."""
        s = self.shape
        if type(s) is not tuple:
            if i in (0, -1):
                return self
            raise ModeError(f"layout {self} has rank 1; mode {i} does not exist")
        if type(i) is not int or not -len(s) <= i < len(s):
            raise ModeError(f"layout {self} has rank {len(s)}; mode {i!r} does not exist")
        return Layout._make(s[i], self.stride[i])

    def __iter__(self) -> Iterator["Layout"]:
        for i in range(len(self)):
            yield self[i]

    # ---- evaluation ------------------------------------------------------------------------
    def __call__(self, *coord: Any) -> Any:
        if len(coord) == 1:
            c = coord[0]
        else:
            c = tuple(coord)
        if type(c) is int:
            if c < 0:
                raise ShapeError(f"negative index {c} for layout {self}")
            fs, fd = self.flat()
            total = 0
            last = len(fs) - 1
            for k in range(last):
                s = fs[k]
                total += (c % s) * fd[k]
                c //= s
            return total + c * fd[last]
        if c is None or (type(c) is tuple and has_none(c)):
            return slice_and_offset(c, self)[0]
        if type(c) is tuple:
            if not _weakly_congruent_coord(c, self.shape):
                raise ShapeError(f"coordinate {fmt_coord(c)} does not match shape {fmt(self.shape)}")
            c = normalize(c, "coordinate")
            for x in flatten(c):
                if type(x) is int and x < 0:
                    raise ShapeError(f"negative coordinate {fmt(c)} for layout {self}")
            return crd2idx(c, self.shape, self.stride)
        c = normalize(c, "coordinate")  # numpy / sympy index
        if type(c) is int:
            return self(c)
        if getattr(c, "is_negative", None):
            raise ShapeError(f"negative index {c} for layout {self}")
        return crd2idx(c, self.shape, self.stride)

    def values(self):
        """All offsets ``L(0..size-1)`` as a numpy int64 array (vectorised)."""
        return layout_values(self)

    def with_shape(self, *new_shape: Any) -> "Layout":
        """``composition(self, make_layout(new_shape))`` (CuTe ``with_shape``)."""
        from .compose import composition
        shp = new_shape[0] if len(new_shape) == 1 else tuple(new_shape)
        return composition(self, Layout(shp))

    # ---- identity --------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Layout) and self.shape == other.shape
                and self.stride == other.stride)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.stride))
        return h

    def __str__(self) -> str:
        return f"{fmt(self.shape)}:{fmt(self.stride)}"

    def __repr__(self) -> str:
        return f"Layout({fmt(self.shape)}:{fmt(self.stride)})"

    def _repr_svg_(self) -> str:  # pragma: no cover - exercised by visualize tests
        from visualize import draw_layout
        return draw_layout(self)._repr_svg_()

    def _repr_html_(self) -> Optional[str]:
        """The same diagram fitted to the notebook cell (full size on click); None (IPython
        falls back to the text) for a layout that cannot be drawn, e.g. a symbolic one."""
        from visualize import draw_layout
        try:
            return draw_layout(self)._repr_html_()
        except LayoutError:
            return None

    def __reduce__(self):
        return (Layout, (self.shape, self.stride))


_new = object.__new__
_MAX_DEPTH = 64     # layoutalg.checks.MAX_DEPTH (the fast path hands deeper input to the checks)

# The all-int fast path's constructors and flat view (public seams for the algebra's modules,
# not user API: they trust their arguments and check nothing).


def int_layout(shape: IntTuple, stride: IntTuple, fs: tuple, fd: tuple) -> Layout:
    """Trusted constructor for all-int layouts whose flat modes ``fs``, ``fd`` are already
    known (no check: the caller guarantees congruence and extents >= 1)."""
    obj = _new(Layout)
    obj.shape = shape
    obj.stride = stride
    f = (fs, fd)
    obj._flat = f
    obj._ints = f
    obj._hash = None
    return obj


def int_layout_from_flat(shapes: list, strides: list) -> Layout:
    """All-int layout from flat lists: a single mode is a leaf (CuTe prints ``4:1``)."""
    if len(shapes) == 1:
        s = shapes[0]
        d = strides[0]
        return int_layout(s, d, (s,), (d,))
    fs = tuple(shapes)
    fd = tuple(strides)
    return int_layout(fs, fd, fs, fd)


def int_flat(layout: Layout) -> Optional[tuple]:
    """``layout.flat()`` when every extent and stride is a Python int, else None (cached in
    ``_ints``; also fills the ``flat()`` cache in the same pass)."""
    r = layout._ints
    if r is None:
        s = layout.shape
        d = layout.stride
        if type(s) is int:
            r = ((s,), (d,)) if type(d) is int else False
        elif type(s) is tuple:
            fs: list = []
            fd: list = []
            r = (tuple(fs), tuple(fd)) if _collect_ints(s, d, fs, fd) else False
        else:  # a symbolic extent
            r = False
        if r:
            layout._flat = r
        layout._ints = r
    return r or None


def _collect_ints(s: tuple, d: tuple, fs: list, fd: list) -> bool:
    """Append the leaves of congruent trees s, d to fs, fd; False at the first non-int leaf."""
    for a, b in zip(s, d):
        ta = type(a)
        if ta is int:
            if type(b) is not int:
                return False
            fs.append(a)
            fd.append(b)
        elif ta is tuple:
            if not _collect_ints(a, b, fs, fd):
                return False
        else:
            return False
    return True


def _collect_valid(s: tuple, d: tuple, fs: list, fd: list, depth: int) -> bool:
    """Like :func:`_collect_ints`, for unvalidated input: also False on a rank mismatch, an
    extent < 1 or nesting deeper than MAX_DEPTH (the general constructor path then reports the
    precise error)."""
    if len(s) != len(d) or depth >= _MAX_DEPTH:
        return False
    for a, b in zip(s, d):
        ta = type(a)
        if ta is int:
            if type(b) is not int or a < 1:
                return False
            fs.append(a)
            fd.append(b)
        elif ta is tuple:
            if type(b) is not tuple or not _collect_valid(a, b, fs, fd, depth + 1):
                return False
        else:
            return False
    return True


def _int_tree_ok(shape: Any, stride: Any) -> bool:
    """True when shape/stride are congruent trees of plain ints with extents >= 1.

    Returns False (use the general, normalizing path) on any other leaf type or on a mismatch;
    the general path then produces the precise error.
    """
    if type(shape) is int:
        return type(stride) is int and shape >= 1
    if type(shape) is not tuple or type(stride) is not tuple or len(shape) != len(stride):
        return False
    for a, b in zip(shape, stride):
        if type(a) is int:
            if type(b) is not int or a < 1:
                return False
        elif not _int_tree_ok(a, b):
            return False
    return True


def fmt_coord(c: Any) -> str:
    if c is None:
        return "_"
    if type(c) is tuple:
        return "(" + ",".join(fmt_coord(x) for x in c) + ")"
    return str(c)


def _normalize_slice(c: Any) -> Any:
    """A slice coordinate with leaves checked (ints, sympy integers or ``None``)."""
    if c is None:
        return None
    if isinstance(c, (tuple, list)):
        check_depth(c, "slice coordinate")
        return tuple(_normalize_slice(x) for x in c)
    return normalize(c, "slice coordinate")


def has_none(c: Any) -> bool:
    """True when the coordinate ``c`` holds a ``None`` (CuTe's ``_``: a slice) at any depth."""
    if c is None:
        return True
    if type(c) is tuple:
        return any(has_none(x) for x in c)
    return False


def _weakly_congruent_coord(c: Any, s: Any) -> bool:
    if type(c) is not tuple:
        return True
    if type(s) is not tuple or len(s) != len(c):
        return False
    return all(_weakly_congruent_coord(x, y) for x, y in zip(c, s))


def is_layout(x: Any) -> bool:
    return isinstance(x, Layout)


# ---- constructors --------------------------------------------------------------------------

def make_layout(*args: Any, stride: Optional[IntTuple] = None, major: str = "col") -> Layout:
    """``make_layout(shape[, stride])`` or ``make_layout(L0, L1, ...)`` (concatenation).

    With a shape and no stride the layout is compact: ``major="col"`` (CuTe LayoutLeft, default)
    or ``major="row"`` (LayoutRight).  With layouts, the result has one mode per argument.
    """
    if args and all(isinstance(a, Layout) for a in args):
        if stride is not None:
            raise ShapeError("make_layout(L0, L1, ...) concatenates layouts and takes no stride")
        return Layout._make(tuple(a.shape for a in args), tuple(a.stride for a in args))
    if len(args) == 2 and stride is None:
        return Layout(args[0], args[1])
    if len(args) != 1:
        raise ShapeError("make_layout takes a shape (and optional stride) or layouts to concatenate")
    shp = normalize(args[0], "shape")
    if stride is not None:
        return Layout(shp, stride)
    if major == "col":
        return Layout(shp, compact_col_major(shp))
    if major == "row":
        return Layout(shp, compact_row_major(shp))
    raise ShapeError(f"major must be 'col' or 'row', got {major!r}")


def make_ordered_layout(shape: IntTuple, order: IntTuple) -> Layout:
    """Compact layout whose modes are laid out in the order given by ``order`` (CuTe semantics).

    ``make_ordered_layout((2,2,2,2), (0,2,3,1))`` -> ``(2,2,2,2):(1,4,8,2)``.
    """
    shape = normalize(shape, "shape")
    order = normalize(order, "order")
    if not _weak_profile(order, shape):
        raise ShapeError(f"order {fmt(order)} must have the profile of shape {fmt(shape)}")
    ref_shape = flatten(_product_like(shape, order))
    ref_order = flatten(order)

    def build(s: Any, o: Any) -> Any:
        if type(o) is tuple:
            return tuple(build(x, y) for x, y in zip(s, o))
        start = 1
        for rs, ro in zip(ref_shape, ref_order):
            if ro < o:
                start = start * rs
        return compact_col_major(s, start)

    return Layout._make(shape, build(shape, order))


def _weak_profile(order: Any, shape: Any) -> bool:
    if type(order) is not tuple:
        return True
    return type(shape) is tuple and len(shape) == len(order) and all(
        _weak_profile(o, s) for o, s in zip(order, shape))


def _product_like(shape: Any, guide: Any) -> Any:
    if type(guide) is tuple:
        return tuple(_product_like(s, g) for s, g in zip(shape, guide))
    return product(shape)


def make_identity_layout(shape: IntTuple) -> Layout:
    """Compact column-major layout of ``shape`` (the identity on its index space)."""
    return make_layout(shape)


# ---- free-function accessors (CuTe names) ---------------------------------------------------

def size(x: Any, mode: Optional[int] = None) -> Any:
    """Domain size of a layout (or product of a shape IntTuple, extents >= 1); ``size(L, i)``
    for mode i."""
    from .swizzle import ComposedLayout
    if mode is not None:
        require_int(mode, "size", "mode", lo=-(1 << 62))
    if isinstance(x, (Layout, ComposedLayout)):
        return x.size() if mode is None else x[mode].size()
    check_depth(x, "size: shape")
    x = normalize(x, "size: shape")
    for s in flatten(x):
        _check_shape_leaf(s)
    if mode is not None:
        if type(x) is not tuple:
            x = (x,)
        if not -len(x) <= mode < len(x):
            raise ModeError(f"size: shape {fmt(x)} has rank {len(x)}; mode {mode} does not exist")
        x = x[mode]
    return product(x)


def cosize(x: Any) -> Any:
    """Codomain extent ``1 + max offset`` of a Layout or ComposedLayout."""
    require_any_layout(x, "cosize")
    return x.cosize()


def rank(x: Any) -> int:
    if isinstance(x, Layout):
        return x.rank
    if hasattr(x, "rank") and not callable(x.rank):
        return x.rank
    return _rank(normalize(x))


def depth(x: Any) -> int:
    if isinstance(x, Layout):
        return x.depth
    if hasattr(x, "depth") and not callable(x.depth):
        return x.depth
    return _depth(normalize(x))


def shape(x: Any) -> IntTuple:
    return x.shape if hasattr(x, "shape") else normalize(x)


def stride(x: Layout) -> IntTuple:
    require_layout(x, "stride")
    return x.stride


def mode(layout: Layout, *idx: int) -> Layout:
    """Nested mode access: ``mode(L, 1, 0)`` is CuTe's ``layout<1,0>(L)``."""
    require_any_layout(layout, "mode")
    out = layout
    for i in idx:
        out = out[require_int(i, "mode", "mode index", lo=-(1 << 62))]
    return out


# ---- coalesce / filter ------------------------------------------------------------------------

def _bw_coalesce(fs: Sequence[Any], fd: Sequence[Any], ns: Any, nd: Any) -> Layout:
    """CuTe's back-to-front merge of flat modes (see layout.hpp ``bw_coalesce``)."""
    shapes = [ns]
    strides = [nd]
    for i in range(len(fs) - 1, -1, -1):
        s, d = fs[i], fd[i]
        if type(s) is int and s == 1:
            continue
        f = shapes[0]
        if type(f) is int and f == 1 and len(shapes) == 1:
            shapes[0], strides[0] = s, d
        elif same_value(s * d, strides[0]):   # holds for symbolic extents too (pycute merges them)
            shapes[0] = s * f
            strides[0] = d
        else:
            shapes.insert(0, s)
            strides.insert(0, d)
    if len(shapes) == 1:
        if type(shapes[0]) is int and shapes[0] == 1:
            return Layout._make(1, 0)
        return Layout._make(shapes[0], strides[0])
    return Layout._make(tuple(shapes), tuple(strides))


def coalesce(layout: Layout, profile: Any = None) -> Layout:
    """Merge modes while keeping ``L(i)`` for all ``0 <= i < size(L)``.

    Post: ``size(result) == size(layout)``, ``depth(result) <= 1``, and with ``profile`` (an
    IntTuple), coalescing happens separately inside each mode named by the profile's leaves.
    """
    if type(layout) is not Layout:
        return _not_plain(layout, coalesce, "coalesce", profile)
    if profile is not None and type(profile) is tuple:
        return _transform_layout(layout, profile, coalesce, "coalesce")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        fs, fd = f
        if len(fs) == 1:
            s = fs[0]
            return layout if type(layout.shape) is int and s != 1 else (
                int_layout(1, 0, (1,), (0,)) if s == 1 else int_layout(s, fd[0], fs, fd))
        shapes, strides = coalesce_lists(fs, fd, fs[-1], fd[-1])
        return int_layout_from_flat(shapes, strides)
    fs, fd = layout.flat()
    return _bw_coalesce(fs[:-1], fd[:-1], fs[-1], fd[-1])


def coalesce_x(layout: Layout) -> Layout:
    """Like :func:`coalesce` but also preserves ``L(i)`` for ``i >= size(L)`` (CuTe coalesce_x)."""
    require_layout(layout, "coalesce_x")
    fs, fd = layout.flat()
    last = fs[-1]
    if type(last) is int and last == 1:
        return _bw_coalesce(fs[:-1], fd[:-1], 2, fd[-1])
    return _bw_coalesce(fs[:-1], fd[:-1], last, fd[-1])


def filter_zeros(layout: Layout) -> Layout:
    """Replace the extent of every stride-0 mode by 1."""
    require_layout(layout, "filter_zeros")
    def fz(s: Any, d: Any) -> Any:
        if type(s) is tuple:
            return tuple(fz(x, y) for x, y in zip(s, d))
        return 1 if (type(d) is int and d == 0) else s
    return Layout._make(fz(layout.shape, layout.stride), layout.stride)


def filter(layout: Layout, profile: Any = None) -> Layout:  # noqa: A001 - CuTe's name
    """Remove stride-0 and extent-1 modes, then coalesce (CuTe ``filter``)."""
    if type(layout) is not Layout:
        return _not_plain(layout, filter, "filter", profile)
    if profile is not None and type(profile) is tuple:
        return _transform_layout(layout, profile, filter, "filter")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        shapes, strides = filter_lists(*f)
        return int_layout_from_flat(shapes, strides)
    return coalesce(filter_zeros(layout))


def _not_plain(layout: Any, fn: Any, name: str, profile: Any) -> Any:
    """``fn`` on a subclass of Layout, on a ComposedLayout (its inner layout, as CuTe does), or
    an ArgumentError."""
    if isinstance(layout, Layout):
        return fn(Layout._make(layout.shape, layout.stride), profile)
    require_any_layout(layout, name)
    from .swizzle import on_inner
    return on_inner(layout, fn, profile)


def _transform_layout(layout: Layout, profile: tuple, fn: Any, name: str) -> Layout:
    r = len(layout)
    if len(profile) > r:
        raise ShapeError(f"{name}: profile {fmt(profile)} has more modes than layout {layout} "
                         f"(rank {r})")
    parts = [fn(layout[i], profile[i]) for i in range(len(profile))]
    parts += [layout[i] for i in range(len(profile), r)]
    return make_layout(*parts)


# ---- append / prepend / group / flatten -----------------------------------------------------

def append(layout: Layout, x: Optional[Layout] = None, n: Optional[int] = None) -> Layout:
    """Append mode ``x`` (default ``1:0``); with ``n``, pad up to rank ``n`` (CuTe append<N>)."""
    require_layout(layout, "append")
    if x is not None:
        require_layout(x, "append", "x")
    if n is not None:
        n = require_int(n, "append", "n")
    x = x if x is not None else Layout._make(1, 0)
    s, d = layout.shape, layout.stride
    if n is None:
        if type(s) is tuple:
            return Layout._make(s + (x.shape,), d + (x.stride,))
        return Layout._make((s, x.shape), (d, x.stride))
    r = _rank(s)
    if type(s) is tuple:
        if n == len(s):
            return layout
        if n < len(s):
            raise ShapeError(f"append: layout {layout} already has rank {len(s)} > {n}")
        k = n - len(s)
        return Layout._make(s + (x.shape,) * k, d + (x.stride,) * k)
    if n == 1:
        return layout
    del r
    return Layout._make((s,) + (x.shape,) * (n - 1), (d,) + (x.stride,) * (n - 1))


def prepend(layout: Layout, x: Optional[Layout] = None) -> Layout:
    """Prepend mode ``x`` (default ``1:0``)."""
    require_layout(layout, "prepend")
    if x is not None:
        require_layout(x, "prepend", "x")
    x = x if x is not None else Layout._make(1, 0)
    s, d = layout.shape, layout.stride
    if type(s) is tuple:
        return Layout._make((x.shape,) + s, (x.stride,) + d)
    return Layout._make((x.shape, s), (x.stride, d))


def group(layout: Layout, begin: int, end: int) -> Layout:
    """Group modes ``[begin, end)`` into one nested mode."""
    require_layout(layout, "group")
    begin = require_int(begin, "group", "begin", lo=-(1 << 62))
    end = require_int(end, "group", "end", lo=-(1 << 62))
    s, d = layout.shape, layout.stride
    if type(s) is not tuple:
        s, d = (s,), (d,)
    return Layout._make(s[:begin] + (s[begin:end],) + s[end:], d[:begin] + (d[begin:end],) + d[end:])


def flatten_layout(layout: Layout) -> Layout:
    """The layout with every nested mode flattened to the top level."""
    require_layout(layout, "flatten_layout")
    fs, fd = layout.flat()
    if type(layout.shape) is not tuple:
        return layout
    return Layout._make(fs, fd)


# ---- slicing ------------------------------------------------------------------------------

def _lift_slice(c: Any, s: Any) -> tuple:
    if type(c) is tuple:
        if type(s) is not tuple or len(s) != len(c):
            raise ShapeError(f"slice coordinate {fmt_coord(c)} does not match {fmt(s)}")
        out: tuple = ()
        for x, y in zip(c, s):
            out += _lift_slice(x, y)
        return out
    if c is None:
        return (s,)
    return ()


def _slice(c: Any, s: Any) -> Any:
    if type(c) is tuple:
        return _lift_slice(c, s)
    if c is None:
        return s
    return ()


def _dice_offset(c: Any, s: Any, d: Any) -> Any:
    """Offset contributed by the non-None parts of coordinate c."""
    if c is None:
        return 0
    if type(c) is tuple:
        if type(s) is not tuple or len(s) != len(c):
            raise ShapeError(f"slice coordinate {fmt_coord(c)} does not match {fmt(s)}")
        return sum((_dice_offset(x, y, z) for x, y, z in zip(c, s, d)), 0)
    return crd2idx(c, s, d)


def slice_and_offset(crd: Any, layout: Layout) -> tuple:
    """CuTe ``slice_and_offset``: the layout of the ``None`` modes and the fixed offset."""
    require_layout(layout, "slice_and_offset")
    crd = _normalize_slice(crd)
    sub_s = _slice(crd, layout.shape)
    sub_d = _slice(crd, layout.stride)
    off = _dice_offset(crd, layout.shape, layout.stride)
    # a coordinate without None slices nothing: CuTe returns the empty layout ():() and the
    # offset, and so do we
    return Layout._make(sub_s, sub_d), off


register_layout_type("Layout", Layout)   # for the argument checks (layoutalg.checks)
