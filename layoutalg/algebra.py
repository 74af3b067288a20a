"""The layout algebra: composition, complement, inverses, divides and products.

Every function follows CuTe C++ (include/cute/layout.hpp) with static integers: same result
shape, same value at every index.  Where CuTe's own check is weaker than the condition the
operation needs (CuTe accepts ``(6,4):(1,10) o 4:4`` and returns ``(2,2):(4,10)``, which is not
the composition), we raise a :class:`~layoutalg.errors.LayoutError` subclass that says which
condition failed.  Each function states its post-condition.
"""

from __future__ import annotations

from typing import Any, Optional

from .checks import require_any_layout, require_int, require_layout
from .errors import (ComplementError, CompositionError, InverseError, LayoutError, ShapeError,
                     DivisibilityError)
from .flat_modes import coalesce_lists, filter_lists, int_leaves, same_value
from .inttuple import (ceil_div, compact_col_major, exact_div, flatten, fmt, is_static, product,
                       product_each, rank as _rank, sym_ok, unwrap)
from .layout import (Layout, append, coalesce, filter as _filter, int_flat, int_layout,
                     int_layout_from_flat, make_layout, make_ordered_layout)
from .tilers import as_layout, by_mode, int_tile, tile_unzip, tiler_str, unpack_modes

__all__ = [
    "composition", "complement", "right_inverse", "left_inverse", "nullspace",
    "max_common_layout", "max_common_vector", "logical_divide", "zipped_divide",
    "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "upcast", "downcast",
    "zip_layouts", "tiler_str",
]


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------
#
# CuTe computes ``A o B`` mode by mode of B (right-distributivity) and, inside one mode ``n:e``
# of B, walks the coalesced modes ("digits") of A: a digit of extent s either is skipped
# (e % s == 0, e >= s) or receives a sub-mode of ``min(ceil(s/e), n)`` elements.  CuTe's checks
# (the "weak" stride and shape divisibility conditions) accept some inputs whose result is not
# ``A o B``.  The result is exactly ``A o B`` iff, in addition:
#   (1) inside one mode, a walk that leaves a digit leaves it exactly at its end (e | s), so the
#       next element starts the next digit at 0 instead of wrapping mid-digit;
#   (2) across the modes of B, the digit values never carry: for every digit j of A except the
#       last (unbounded) one, the largest digit-j contributions of all modes sum to at most s_j-1
#       (a carry changes A's value by d_{j+1} - s_j*d_j, which is nonzero after coalescing, so a
#       carry makes the result differ from A o B at the coordinate that causes it);
#   (3) a mode with a negative stride only touches A's last digit: A extends to negative indices
#       along its last mode only (A(x + t*P) == A(x) + t*d_last for P the product of the other
#       extents), so any other negative offset would borrow across digits.
# We compute CuTe's result and raise CompositionError when (1)-(3) fail, so a returned layout R
# always satisfies R(c) == A(B(c)) for every coordinate c of B.


def _coalesce_x_flat(layout: Layout) -> tuple:
    """Flat (shapes, strides) lists of CuTe's ``coalesce_x(layout)`` (value-preserving for all i).

    Post: adjacent kept digits never satisfy ``s_j * d_j == d_{j+1}`` (static), and every digit
    but possibly a lone one has extent >= 2.
    """
    fs, fd = layout.flat()
    n = len(fs)
    last_s = fs[n - 1]
    if type(last_s) is int and last_s == 1:
        last_s = 2
    shapes = [last_s]
    strides = [fd[n - 1]]
    for i in range(n - 2, -1, -1):
        s = fs[i]
        if type(s) is int:
            if s == 1:
                continue
            d = fd[i]
            f = shapes[-1]
            if type(f) is int:
                if f == 1 and len(shapes) == 1:
                    shapes[-1] = s
                    strides[-1] = d
                    continue
                sd = strides[-1]
                if type(d) is int and type(sd) is int:
                    if s * d == sd:
                        shapes[-1] = s * f
                        strides[-1] = d
                        continue
                elif same_value(s * d, sd):
                    shapes[-1] = s * f
                    strides[-1] = d
                    continue
            shapes.append(s)
            strides.append(d)
            continue
        d = fd[i]
        f = shapes[-1]
        if type(f) is int and f == 1 and len(shapes) == 1:
            shapes[-1] = s
            strides[-1] = d
        elif type(f) is int and same_value(s * d, strides[-1]):
            shapes[-1] = s * f
            strides[-1] = d
        else:
            shapes.append(s)
            strides.append(d)
    shapes.reverse()
    strides.reverse()
    if len(shapes) == 1 and type(shapes[0]) is int and shapes[0] == 1:
        return [1], [0]
    return shapes, strides


def _compose_leaf_static(ls: list, ld: list, rs: int, rd: int, usage: list, ctx: tuple) -> tuple:
    """One static mode ``rs:rd`` of B through the static coalesced digits of A (rank >= 2).

    Returns CuTe's (shape, stride) for this mode and adds the largest value this mode puts in
    each non-last digit to ``usage`` (for condition (2)).  Raises on CuTe's refusals and on (1), (3).
    """
    if rd == 0:
        return rs, 0
    neg = rd < 0
    ad = -rd if neg else rd
    last = len(ls) - 1
    res_s: list = []
    res_d: list = []
    rest_s = rs
    for i in range(last):
        cs = ls[i]
        if ad >= cs:
            if ad % cs:
                _fail_stride(ctx, rs, rd, ad, cs)
            ad //= cs
            continue
        # ad < cs: the walk enters digit i
        if rest_s == 1:
            ad = 1
            continue
        next_s = -(-cs // ad)
        new_s = next_s if next_s < rest_s else rest_s
        if rest_s % new_s:
            _fail_shape(ctx, rs, rd, i, cs, new_s, rest_s)
        if new_s < rest_s and cs % ad:
            ctx[2].append((
                f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)} is not a layout: stride {ad} "
                f"does not divide the extent {cs} of A's coalesced mode {i}, so after {new_s} "
                "elements the walk would wrap in the middle of that mode (CuTe accepts this and "
                "returns a layout that is not A o B)", ld[i] != 0))
        if neg:
            ctx[2].append((
                f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)} is not a layout: a negative "
                f"stride reaches A's coalesced mode {i} (extent {cs}); A only extends to negative "
                "indices along its last mode, so these offsets would borrow across modes",
                i == last - 1 and ld[i] != 0))
        usage[i] += (new_s - 1) * ad
        res_s.append(new_s)
        res_d.append((-ad if neg else ad) * ld[i])
        rest_s //= new_s
        ad = 1
    rest_d = -ad if neg else ad
    if not res_s:
        return rest_s, rest_d * ld[last]
    if rest_s == 1:
        if len(res_s) == 1:
            return res_s[0], res_d[0]
        return tuple(res_s), tuple(res_d)
    res_s.append(rest_s)
    res_d.append(rest_d * ld[last])
    return tuple(res_s), tuple(res_d)


def _mode_str(ctx: tuple, rs: Any, rd: Any) -> str:
    whole = _whole_str(ctx)
    mode = f"{fmt(rs)}:{fmt(rd)}"
    return whole if whole == mode else f"{whole} (mode {mode})"


def _whole_str(ctx: tuple) -> str:
    """The rhs of a composition as text (built only when an error is reported)."""
    return f"{fmt(ctx[1][0])}:{fmt(ctx[1][1])}"


def _fail_stride(ctx: tuple, rs: Any, rd: Any, ad: Any, cs: Any) -> None:
    raise CompositionError(
        f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)}: stride divisibility condition fails: "
        f"the remaining stride {ad} must be a multiple of A's coalesced mode extent {cs} or "
        "smaller than it (CuTe refuses this too)")


def _fail_shape(ctx: tuple, rs: Any, rd: Any, i: int, cs: Any, new_s: Any, rest_s: Any) -> None:
    raise CompositionError(
        f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)}: shape divisibility condition fails: "
        f"{new_s} elements fit in A's coalesced mode {i} (extent {cs}) but {rest_s} remain, "
        f"which is not a multiple of {new_s} (CuTe refuses this too)")


def _compose_leaf_general(ls: list, ld: list, rs: Any, rd: Any, usage: list, ctx: tuple) -> tuple:
    """Like :func:`_compose_leaf_static` for symbolic extents or strides (CuTe's dynamic rules,
    with every condition decided by sympy or refused with SymbolicError)."""
    if type(rd) is int and rd == 0:
        return rs, rd
    sign_pos = sym_ok(rd > 0, "the sign of a symbolic stride")
    ad = rd if sign_pos else -rd
    last = len(ls) - 1
    res_s: list = []
    res_d: list = []
    rest_s = rs
    for i in range(last):
        cs = ls[i]
        if sym_ok(ad >= cs, "whether a stride passes a mode"):
            if not sym_ok(_mod(ad, cs) == 0, "stride divisibility"):
                _fail_stride(ctx, rs, rd, ad, cs)
            ad = exact_div(ad, cs)
            continue
        if _is_one(rest_s):
            ad = 1
            continue
        next_s = ceil_div(cs, ad)
        new_s = next_s if sym_ok(next_s <= rest_s, "min of extents") else rest_s
        if not sym_ok(_mod(rest_s, new_s) == 0, "shape divisibility"):
            _fail_shape(ctx, rs, rd, i, cs, new_s, rest_s)
        more = not _is_one(exact_div(rest_s, new_s))
        if more and not sym_ok(_mod(cs, ad) == 0, "stride divides extent"):
            raise CompositionError(
                f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)} is not a layout: stride {ad} "
                f"does not divide the extent {cs} of A's coalesced mode {i}")
        if not sign_pos:
            raise CompositionError(
                f"composition {ctx[0]} o {_mode_str(ctx, rs, rd)} is not a layout: a negative "
                f"stride reaches A's coalesced mode {i}")
        usage[i] = usage[i] + (new_s - 1) * ad
        res_s.append(new_s)
        res_d.append((ad if sign_pos else -ad) * ld[i])
        rest_s = exact_div(rest_s, new_s)
        ad = 1
    rest_d = ad if sign_pos else -ad
    if not res_s:
        return rest_s, rest_d * ld[last]
    if _is_one(rest_s):
        if len(res_s) == 1:
            return res_s[0], res_d[0]
        return tuple(res_s), tuple(res_d)
    res_s.append(rest_s)
    res_d.append(rest_d * ld[last])
    return tuple(res_s), tuple(res_d)


def _is_one(x: Any) -> bool:
    return (type(x) is int and x == 1) or (type(x) is not int and sym_ok(x == 1, "extent == 1"))


def _mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return a % b
    from .symbolic import imod
    return imod(a, b)


def _compose_tree(ls: list, ld: list, rs: Any, rd: Any, usage: list, ctx: tuple,
                  static: bool) -> tuple:
    """Right-distributivity over the (nested) modes of B; returns (shape, stride) trees."""
    if type(rs) is tuple:
        out_s = []
        out_d = []
        for s, d in zip(rs, rd):
            a, b = _compose_tree(ls, ld, s, d, usage, ctx, static)
            out_s.append(a)
            out_d.append(b)
        return tuple(out_s), tuple(out_d)
    if static:
        return _compose_leaf_static(ls, ld, rs, rd, usage, ctx)
    return _compose_leaf_general(ls, ld, rs, rd, usage, ctx)


def _scale_tree(t: Any, k: Any) -> Any:
    if type(t) is tuple:
        return tuple(_scale_tree(x, k) for x in t)
    return t * k


def _compose_layout(lhs: Layout, rs: Any, rd: Any, rflat: Any = None, strict: bool = True) -> Layout:
    """``lhs o (rs:rd)``; Post: ``result(c) == lhs(rhs(c))`` for every coordinate c of rs.

    ``rflat`` is ``(flat extents, flat strides)`` of rs:rd when all are ints (or None: unknown).
    """
    f = lhs._ints
    if f is None:
        f = int_flat(lhs)
    if f:
        fs, fd = f
        last = fs[-1]
        ls, ld = coalesce_lists(fs, fd, 2 if last == 1 else last, fd[-1])  # coalesce_x
        if len(ls) == 1:
            # A is a single (unbounded) linear mode: A o B scales B's strides (always exact)
            d0 = ld[0]
            if type(rd) is int:
                return Layout._make(rs, rd * d0)
            return Layout._make(rs, _scale_tree(rd, d0))
        if type(rs) is int:
            if type(rd) is int:
                ctx = (lhs, (rs, rd), [])
                s, d = _compose_leaf_static(ls, ld, rs, rd, [0] * (len(ls) - 1), ctx)
                if ctx[2] and strict:  # one mode of B cannot carry: only (1)/(3) can fail
                    _resolve_violations(ctx[2], ls, ld, rs, rd, s, d)
                return Layout._make(s, d)
        elif type(rs) is tuple:
            if rflat is None:
                rflat = int_leaves(rs, rd)
            if rflat:
                usage = [0] * (len(ls) - 1)
                ctx = (lhs, (rs, rd), [])
                for x in rs:
                    if type(x) is tuple:
                        s, d = _compose_tree(ls, ld, rs, rd, usage, ctx, True)
                        break
                else:  # flat B: one leaf per mode
                    out_s = []
                    out_d = []
                    for a, b in zip(rs, rd):
                        x, y = _compose_leaf_static(ls, ld, a, b, usage, ctx)
                        out_s.append(x)
                        out_d.append(y)
                    s = tuple(out_s)
                    d = tuple(out_d)
                _check_usage(ctx, ls, usage)
                if ctx[2] and strict:
                    _resolve_violations(ctx[2], ls, ld, rs, rd, s, d)
                return Layout._make(s, d)
    return _compose_general(lhs, rs, rd, strict)


def _check_usage(ctx: tuple, ls: list, usage: list) -> None:
    """Condition (2): record a violation where the modes of B together overflow a digit."""
    for j in range(len(usage)):
        u = usage[j]
        if u >= ls[j]:
            _usage_violation(ctx, ls, j, u)


def _usage_violation(ctx: tuple, ls: list, j: int, u: Any) -> None:
    viol = ctx[2]
    viol.append((
        f"composition {ctx[0]} o {_whole_str(ctx)} is not a layout: the modes of B together "
        f"reach offset {u} inside A's coalesced mode {j} of extent {ls[j]}, so their sum "
        "carries into the next mode and A(B(c)) differs from the combination of the "
        "per-mode results (CuTe does not check this)",
        # the witness (every mode at its largest digit-j value) is only certain when no mode
        # wrapped inside a lower stride-0 digit
        all(p for _, p in viol)))


def _compose_general(lhs: Layout, rs: Any, rd: Any, strict: bool = True) -> Layout:
    """Composition with symbolic extents or strides somewhere (CuTe's dynamic-int rules, every
    condition decided by sympy or refused with SymbolicError)."""
    ls, ld = _coalesce_x_flat(lhs)
    if len(ls) == 1:
        d0 = ld[0]
        if type(rd) is int:
            return Layout._make(rs, rd * d0)
        return Layout._make(rs, _scale_tree(rd, d0))
    static = (all(type(x) is int for x in ls) and all(type(x) is int for x in ld)
              and bool(int_leaves(rs, rd)))
    usage = [0] * (len(ls) - 1)
    ctx = (lhs, (rs, rd), [])
    s, d = _compose_tree(ls, ld, rs, rd, usage, ctx, static)
    for j in range(len(usage)):
        u = usage[j]
        cap = ls[j] - 1
        if type(u) is int and type(cap) is int:
            ok = u <= cap
        else:
            ok = sym_ok(u <= cap, "whether modes of B overlap in a mode of A")
        if not ok:
            _usage_violation(ctx, ls, j, u)
    if ctx[2] and strict:
        if not static:
            raise CompositionError(ctx[2][0][0])
        _resolve_violations(ctx[2], ls, ld, rs, rd, s, d)
    return Layout._make(s, d)


def _composition_as_cute(lhs: Layout, rhs: Layout) -> Layout:
    """CuTe's ``composition(lhs, rhs)`` for two Layouts *without* our soundness refusals (CuTe's
    own refusals still raise).  Internal: only for operations whose result is then checked
    against their own post-condition (max_common_vector / max_common_layout)."""
    return _compose_layout(lhs, rhs.shape, rhs.stride, int_flat(rhs), strict=False)


# Largest size(B) for which a composition that fails the structural conditions only in an
# exotic way (a stride-0 mode of A, a negative stride) is settled by checking every index.
_EXHAUSTIVE_LIMIT = 1 << 16


def _resolve_violations(viol: list, ls: list, ld: list, rs: Any, rd: Any, s: Any, d: Any) -> None:
    """Raise CompositionError unless CuTe's result ``s:d`` is ``A o B`` after all.

    Each violation carries whether it provably makes the result differ from ``A o B`` (see the
    conditions above).  The others (a walk wrapping inside a stride-0 mode of A, or a negative
    stride whose borrow happens to cancel) are decided by comparing every index, for
    ``size(B) <= _EXHAUSTIVE_LIMIT``.
    """
    n = product(rs)
    for msg, provable in viol:
        if provable:
            raise CompositionError(msg + _cute_answer(ls, ld, rs, rd, s, d, n))
    if n > _EXHAUSTIVE_LIMIT:
        raise CompositionError(viol[0][0] + f" (size(B) = {n} is too large to rule out an "
                               "exceptional cancellation by checking every index)")
    got, truth = _cute_and_truth(ls, ld, rs, rd, s, d)
    if (got != truth).any():
        raise CompositionError(viol[0][0] + _cute_answer(ls, ld, rs, rd, s, d, n))


def _cute_and_truth(ls: list, ld: list, rs: Any, rd: Any, s: Any, d: Any):
    """Every value of CuTe's result ``s:d`` and of the true ``A(B(c))`` (A's coalesced digits)."""
    from .enumerate import flat_values
    bvals = flat_values(flatten(rs), flatten(rd))
    truth = bvals * 0
    x = bvals
    for j in range(len(ls) - 1):  # floor semantics: A extends along its last mode only
        truth += (x % ls[j]) * ld[j]
        x = x // ls[j]
    truth += x * ld[-1]
    return flat_values(flatten(s), flatten(d)), truth


def _cute_answer(ls: list, ld: list, rs: Any, rd: Any, s: Any, d: Any, n: Any) -> str:
    """What CuTe returns, and the first index where it is not ``A(B(c))`` (for people porting
    CuTe code, who will meet this refusal where CuTe answered)."""
    cute = Layout._make(s, d)
    if type(n) is not int or n > _EXHAUSTIVE_LIMIT:
        return f"; CuTe returns {cute}"
    got, truth = _cute_and_truth(ls, ld, rs, rd, s, d)
    bad = (got != truth).nonzero()[0]
    if not len(bad):
        return f"; CuTe returns {cute}"
    c = int(bad[0])
    return (f"; CuTe returns {cute}, which at index {c} gives {int(got[c])} where A(B({c})) = "
            f"{int(truth[c])}")


def composition(lhs: Any, rhs: Any) -> Any:
    """``lhs o rhs``: the layout ``R`` with ``R(c) == lhs(rhs(c))`` for every c in rhs's domain.

    ``rhs`` may be a Layout, an int ``n`` (meaning ``n:1``), ``None`` (identity) or a by-mode
    tiler tuple whose entries are any of those (modes of lhs beyond the tiler are dropped, as in
    CuTe).  ``lhs`` may be a Layout, a Swizzle or a ComposedLayout.
    Post: ``shape(result)`` is compatible with ``shape(rhs)`` and ``result(c) == lhs(rhs(c))``
    (``rhs(c)`` may be negative only where lhs extends linearly: along its last mode).
    Raises CompositionError where CuTe refuses, and where CuTe's result would not be ``lhs o rhs``.
    """
    if type(lhs) is Layout:
        if type(rhs) is Layout:
            rf = rhs._ints
            if rf is None:
                rf = int_flat(rhs)
            return _compose_layout(lhs, rhs.shape, rhs.stride, rf)
        if type(rhs) is int:
            if rhs <= 0:
                raise ShapeError(f"composition: tiler extent must be >= 1, got {rhs}")
            return _compose_layout(lhs, rhs, 1, None)
    from .swizzle import ComposedLayout, Swizzle
    if isinstance(lhs, Swizzle):
        inner = rhs if isinstance(rhs, Layout) else as_layout(rhs, "composition rhs")
        if lhs.bits == 0:
            return inner  # Sw<0,M,S> is the identity; CuTe returns the layout itself
        return ComposedLayout(lhs, 0, inner)
    if isinstance(lhs, ComposedLayout):
        return lhs.compose(rhs)
    if not isinstance(lhs, Layout):
        raise ShapeError(f"composition: lhs must be a Layout, Swizzle or ComposedLayout, got {lhs!r}")
    if isinstance(rhs, Layout):
        return _compose_layout(lhs, rhs.shape, rhs.stride, int_flat(rhs))
    if rhs is None:
        return lhs
    if type(rhs) is tuple:
        if len(rhs) > len(lhs):
            raise ShapeError(f"composition: tiler {tiler_str(rhs)} has {len(rhs)} modes but "
                             f"{lhs} has rank {len(lhs)}")
        parts = [composition(lhs[i], t) for i, t in enumerate(rhs)]
        return make_layout(*parts)
    if isinstance(rhs, (Swizzle, ComposedLayout)):
        raise ShapeError("composition Layout o Swizzle is not supported; compose the swizzle on "
                         "the left (Swizzle o Layout)")
    from .inttuple import normalize
    n = normalize(rhs, "composition rhs")
    if type(n) is tuple:  # pragma: no cover - tuples handled above
        raise ShapeError("unreachable")
    _check_extent(n, "composition tiler")
    return _compose_layout(lhs, n, 1, None)


def _check_extent(n: Any, what: str) -> None:
    if type(n) is int and n <= 0:
        raise ShapeError(f"{what}: extent must be >= 1, got {n}")


# ---------------------------------------------------------------------------------------------
# Complement
# ---------------------------------------------------------------------------------------------

def _coalesce_shape(shape: Any) -> Any:
    """CuTe ``coalesce(Shape)``: multiply adjacent static (or adjacent dynamic) extents."""
    if type(shape) is not tuple:
        return shape
    out: list = []
    for x in flatten(shape):
        if out and (type(out[-1]) is int) == (type(x) is int):
            out[-1] = out[-1] * x
        else:
            out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


def complement(layout: Layout, cotarget: Any = None) -> Layout:
    """The layout ``C`` that fills the gaps of ``layout`` up to ``cotarget`` (default cosize).

    Computed exactly as CuTe's ``complement`` (sort the filtered modes by stride, fill each gap
    below a mode, then repeat up to the cotarget).  Post (CuTe's, with ``F = filter(layout)``):
      * ``C`` is strictly increasing: ``C(i-1) < C(i)``;
      * ``C(i) != layout(j)`` for ``i >= 1`` and every j (disjoint images);
      * ``size(C) * size(F) >= product(cotarget)`` (the pair covers the cotarget).
    When the sorted modes nest (each stride a multiple of the span of the modes below it),
    ``make_layout(layout, C)`` is moreover a bijection onto ``[0, size(F) * size(C))``.
    Raises ComplementError where CuTe refuses (a non-injective layout), for negative strides
    (CuTe returns a meaningless layout), and where CuTe's result violates the size
    post-condition (modes that do not nest, e.g. ``(2,2):(1,3)`` up to 24).
    """
    if type(layout) is not Layout:
        if not isinstance(layout, Layout):
            raise ShapeError(f"complement: expected a Layout, got {layout!r}")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        if cotarget is None or type(cotarget) is int:
            return _complement_int(layout, f[0], f[1], cotarget)
        if type(cotarget) is tuple and int_leaves(cotarget, cotarget):
            return _complement_int(layout, f[0], f[1], cotarget)
    fl = _filter(layout)
    if cotarget is None:
        cot = fl.cosize()
    elif isinstance(cotarget, Layout):
        cot = cotarget.shape
    elif type(cotarget) is int:
        cot = cotarget
    else:
        from .inttuple import normalize
        cot = normalize(cotarget, "complement cotarget")
    for x in flatten(cot):
        if type(x) is int and x <= 0:
            raise ShapeError(f"complement: cotarget {fmt(cot)} must have extents >= 1")
    s, d = fl.shape, fl.stride
    if type(d) is int and d == 0:
        # irreducible rank-1 stride-0 layout (filter() found nothing): fill the whole cotarget
        n = _coalesce_shape(cot)
        return Layout._make(n, compact_col_major(n))
    shapes = list(s) if type(s) is tuple else [s]
    strides = list(d) if type(d) is tuple else [d]
    r = len(shapes)
    if r > 1 and not all(type(x) is int for x in strides):
        raise ComplementError(f"complement of {layout}: dynamic strides are only supported for "
                              "rank-1 layouts (as in CuTe)")
    for x in strides:
        if type(x) is int and x < 0:
            raise ComplementError(f"complement of {layout}: negative stride {x} is not supported "
                                  "(CuTe's complement assumes positive strides and returns a "
                                  "meaningless layout)")
    res_s: list = []
    res_d: list = [1]
    nests = True
    for i in range(r):
        if i < r - 1:
            k = min(range(len(strides)), key=strides.__getitem__)  # first minimum, as cute::find
        else:
            k = 0
        ms = strides[k]
        below = res_d[i]
        if type(ms) is int and type(below) is int:
            gap = ms // below
            if gap == 0:
                raise ComplementError(
                    f"complement of {layout}: the layout is not injective: a mode of stride {ms} "
                    f"starts inside the span {below} of the smaller-stride modes (CuTe: "
                    "'Non-injective Layout detected in complement')")
            if ms % below:
                nests = False
        else:
            gap = exact_div(ms, below)
        res_s.append(gap)
        if i < r - 1:
            res_d.append(ms * shapes[k])
            del shapes[k]
            del strides[k]
    new_stride = strides[0] * shapes[0]
    rest_s = _coalesce_shape(ceil_div(cot, new_stride))
    rest_d = compact_col_major(rest_s, new_stride)
    out = coalesce(Layout._make((tuple(res_s), rest_s), (tuple(res_d), rest_d)))
    if not nests or type(cot) is tuple:
        # see _complement_int: CuTe's result may be too small
        total = out.size() * fl.size()
        need = product(cot)
        if sym_ok(total < need, "complement's size post-condition"):
            _too_small(layout, cot, out, total, need, nests)
    return out


def _complement_int(layout: Layout, fs: tuple, fd: tuple, cot: Any) -> Layout:
    """:func:`complement` for all-int layouts and cotargets (same algorithm, flat lists)."""
    shapes, strides = filter_lists(fs, fd)
    if cot is None:
        n = 1
        for x, y in zip(shapes, strides):
            n += (x - 1) * (y if y >= 0 else -y)
        cot = n
    elif type(cot) is int:
        if cot <= 0:
            raise ShapeError(f"complement: cotarget {cot} must have extents >= 1")
        n = cot
    else:
        n = 1
        for x in flatten(cot):
            if x <= 0:
                raise ShapeError(f"complement: cotarget {fmt(cot)} must have extents >= 1")
            n *= x
    if strides[0] == 0:  # filter left nothing (1:0): fill the whole cotarget
        return int_layout(n, 1, (n,), (1,)) if n != 1 else int_layout(1, 0, (1,), (0,))
    r = len(shapes)
    # CuTe repeatedly takes the first minimum stride: a stable ascending sort
    if r == 1:
        order: Any = (0,)
    elif r == 2:
        order = (0, 1) if strides[0] <= strides[1] else (1, 0)
    else:
        order = sorted(range(r), key=strides.__getitem__)
    res_s = []
    res_d = [1]
    below = 1
    nests = True
    for k in order:
        ms = strides[k]
        if ms < 0:
            raise ComplementError(f"complement of {layout}: negative stride {ms} is not "
                                  "supported (CuTe's complement assumes positive strides and "
                                  "returns a meaningless layout)")
        gap = ms // below
        if gap == 0:
            _non_injective(layout, ms, below)
        if nests and ms % below:
            nests = False
        res_s.append(gap)
        below = ms * shapes[k]
        res_d.append(below)
    # res_d's last entry is new_stride; rest = coalesce(ceil_div(cotarget, new_stride)), a
    # single product for static cotargets
    if type(cot) is int:
        rest = (cot + below - 1) // below
    else:
        rest = 1
        q = below
        for x in flatten(cot):
            rest *= (x + q - 1) // q
            q = (q + x - 1) // x
    res_s.append(rest)
    # CuTe coalesces (gaps..., rest):(1, spans...).  No two of these modes can merge (each gap
    # extent times its stride stays below the next stride, which is below the next span), so
    # coalescing just drops the extent-1 modes.
    out_s = []
    out_d = []
    for x, y in zip(res_s, res_d):
        if x != 1:
            out_s.append(x)
            out_d.append(y)
    if not out_s:
        out_s = [1]
        out_d = [0]
    out = int_layout_from_flat(out_s, out_d)
    # Post: size(C) * size(filter(A)) >= size(cotarget).  CuTe's result is always increasing and
    # disjoint from the layout (each gap mode stays below the next stride) but may be too small:
    # when the modes do not nest (CuTe truncates the gaps), or for a shape cotarget, whose
    # mode-by-mode ceil_div can fall short of size(cotarget) / new_stride.
    if not nests or type(cot) is not int:
        size = 1
        for x in out_s:
            size *= x
        for x in shapes:
            size *= x  # times size(filter(A))
        if size < n:
            _too_small(layout, cot, out, size, n, nests)
    return out


def _non_injective(layout: Layout, ms: Any, below: Any) -> None:
    raise ComplementError(
        f"complement of {layout}: the layout is not injective: a mode of stride {ms} starts "
        f"inside the span {below} of the smaller-stride modes (CuTe: 'Non-injective Layout "
        "detected in complement')")


def _too_small(layout: Layout, cot: Any, out: Layout, total: Any, need: Any,
               nests: bool = False) -> None:
    why = ("the modes do not nest (sorted, each stride must be a multiple of the span of the "
           "smaller modes), so the gaps cannot be filled by a layout" if not nests else
           f"the cotarget shape {fmt(cot)} divided mode by mode by the layout's span leaves too "
           "few repetitions")
    raise ComplementError(
        f"complement of {layout} up to {fmt(cot)}: {why}; CuTe returns {out}, and "
        f"size({out}) * size(filter(A)) = {total} < {need} = size(cotarget), violating "
        "complement's size post-condition")


# ---------------------------------------------------------------------------------------------
# Inverses, nullspace, common layouts
# ---------------------------------------------------------------------------------------------

def _wrapped_coalesce(layout: Layout) -> tuple:
    """Flat (shapes, strides, prefix products) of ``coalesce(layout)`` (CuTe wraps a leaf)."""
    c = coalesce(layout)
    s = c.shape if type(c.shape) is tuple else (c.shape,)
    d = c.stride if type(c.stride) is tuple else (c.stride,)
    pre = [1]
    for x in s:
        pre.append(pre[-1] * x)
    return s, d, pre


def _exchange_order(keys: Any, vals: Any) -> list:
    """``vals`` reordered by ``keys`` with CuTe's ``exchange_sort`` (not stable: equal strides
    come out in CuTe's order, which decides which of two equal-stride modes an inverse uses)."""
    k = list(keys)
    v = list(vals)
    n = len(k)
    for i in range(n):
        ki = k[i]
        for j in range(i + 1, n):
            kj = k[j]
            if kj < ki:
                k[i] = kj
                k[j] = ki
                v[i], v[j] = v[j], v[i]
                ki = kj
    return v


def right_inverse(layout: Any) -> Any:
    """CuTe's ``right_inverse``: ``R`` with ``layout(R(i)) == i`` for all ``i < size(R)``.

    Starting from offset 1, it chains the modes whose stride equals the span reached so far (a
    mode of stride 0, a negative or a dynamic stride never matches; unlike pycute it does not
    stop at the first mode that does not chain).
    Post: ``composition(layout, R)`` equals ``make_layout(shape(R))`` on R's domain.
    """
    require_layout(layout, "right_inverse")
    f = layout._ints
    if f is None:
        f = int_flat(layout)
    if f:
        return _right_inverse_int(*f)
    s, d, pre = _wrapped_coalesce(layout)
    idx = [i for i in range(len(d)) if type(d[i]) is int]
    order = _exchange_order([d[i] for i in idx], idx)
    rs: list = [1]
    rd: list = [0]
    curr: Any = 1
    for i in order:
        if type(curr) is int and d[i] == curr:
            rs.append(s[i])
            rd.append(pre[i])
            curr = s[i] * d[i]
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


def _right_inverse_int(fs: tuple, fd: tuple) -> Layout:
    """:func:`right_inverse` for all-int layouts (same algorithm on flat lists).

    CuTe walks the modes in (exchange-)sorted stride order and takes each mode whose stride is
    the span reached so far.  The span only grows, so with distinct strides this is a chain of
    dictionary look-ups; with equal strides the exchange-sort order decides which one is taken.
    """
    s, d = coalesce_lists(fs, fd, fs[-1], fd[-1])
    n = len(s)
    if n == 1:
        x = s[0]
        return int_layout(x, 1, (x,), (1,)) if d[0] == 1 and x != 1 else int_layout(1, 0, (1,), (0,))
    pos = {}
    for i in range(n):
        pos[d[i]] = i
    rs = [1]
    rd = [0]
    if len(pos) == n:
        curr = 1
        while curr in pos:
            i = pos[curr]
            x = s[i]
            rs.append(x)
            p = 1
            for y in s[:i]:
                p *= y
            rd.append(p)
            curr = x * curr
    else:
        pres = []
        p = 1
        for x in s:
            pres.append(p)
            p *= x
        curr = 1
        for i in _exchange_order(d, range(n)):
            if d[i] == curr:
                rs.append(s[i])
                rd.append(pres[i])
                curr = s[i] * d[i]
    if len(rs) == 1:
        return int_layout(1, 0, (1,), (0,))
    out_s, out_d = coalesce_lists(rs, rd, rs[-1], rd[-1])
    return int_layout_from_flat(out_s, out_d)


def left_inverse(layout: Any) -> Any:
    """CuTe's ``left_inverse``: a quasi-inverse ``R`` with ``layout(R(layout(i))) == layout(i)``
    for all ``i < size(layout)``; for an injective layout ``R(layout(i)) == i``.

    Raises InverseError where CuTe refuses (dynamic strides; a sorted stride that is not a
    multiple of the size already covered: CuTe's left inverse divisibility condition) and for
    negative strides (CuTe returns a meaningless layout).
    """
    require_layout(layout, "left_inverse")
    s, d, pre = _wrapped_coalesce(layout)
    if not all(type(x) is int for x in d):
        raise InverseError(f"left_inverse of {layout}: requires static strides (as in CuTe)")
    for x in d:
        if x < 0:
            raise InverseError(f"left_inverse of {layout}: negative stride {x} is not supported "
                               "(CuTe returns a meaningless layout)")
    order = _exchange_order(list(d), list(range(len(d))))
    rs: list = []
    rd: list = [0]
    sz: Any = 1
    for i in order:
        if d[i] == 0:
            continue
        if type(sz) is not int:
            raise InverseError(f"left_inverse of {layout}: requires static shapes below the "
                               "largest stride")
        if d[i] % sz != 0:
            raise InverseError(f"left_inverse of {layout}: stride {d[i]} is not a multiple of "
                               f"{sz}, the size already covered (CuTe's left inverse "
                               "divisibility condition)")
        rs.append(d[i] // sz)
        rd.append(pre[i])
        sz = d[i]
    rs.append(s[order[-1]])
    out = coalesce(Layout._make(tuple(rs), tuple(rd)))
    # With the divisibility condition, the positive-stride modes are injective iff each sorted
    # stride is at least the span of the previous one; then R reads the coordinates back
    # digit by digit and the post-condition holds.  Otherwise CuTe's result is often not a
    # quasi-inverse (e.g. (6,4):(16,8)), so check it on every index.
    prev = None
    injective = True
    for i in order:
        if d[i] == 0:
            continue
        if prev is not None and d[i] < s[prev] * d[prev]:
            injective = False
            break
        prev = i
    if not injective:
        _check_quasi_inverse(layout, out)
    return out


def _check_quasi_inverse(layout: Layout, inv: Layout) -> None:
    """Raise InverseError unless ``layout(inv(layout(i))) == layout(i)`` for all i < size."""
    n = layout.size()
    if type(n) is not int or n > _EXHAUSTIVE_LIMIT:
        raise InverseError(f"left_inverse of {layout}: the layout is not injective and too large "
                           "to check CuTe's quasi-inverse on every index")
    import numpy as np
    from .enumerate import eval_int_array, layout_values
    y = layout_values(layout)
    back = eval_int_array(layout, eval_int_array(inv, y))
    if not np.array_equal(back, y):
        i = int(np.nonzero(back != y)[0][0])
        raise InverseError(
            f"left_inverse of {layout}: the layout is not injective and CuTe's result {inv} is "
            f"not a quasi-inverse: layout(R(layout({i}))) = {int(back[i])} != layout({i}) = "
            f"{int(y[i])}")


def nullspace(layout: Layout) -> Layout:
    """Layout of the indices that ``layout`` maps to 0 (its stride-0 modes).

    Post: ``layout(result(i)) == 0`` and ``size(result) == size(layout) / size(filter(layout))``.
    """
    require_layout(layout, "nullspace")
    fs, fd = layout.flat()
    pre = compact_col_major(fs)
    idx = [i for i in range(len(fd)) if type(fd[i]) is int and fd[i] == 0]
    if not idx:
        return Layout._make(1, 0)
    return Layout._make(unwrap(tuple(fs[i] for i in idx)), unwrap(tuple(pre[i] for i in idx)))


def _common_prefix(a: Layout, inv_b: Layout) -> tuple:
    """CuTe's ``coalesce(composition(a, inv_b))`` and whether it is exactly ``a o inv_b``."""
    try:
        return coalesce(composition(a, inv_b)), True
    except CompositionError:
        # CuTe returns a layout that is not a o inv_b; its leading stride-1 mode may still be
        # right, which the callers check against their post-conditions
        return coalesce(_composition_as_cute(a, inv_b)), False


def _leading_unit_mode(common: Layout) -> Any:
    s0 = common.shape[0] if type(common.shape) is tuple else common.shape
    d0 = common.stride[0] if type(common.stride) is tuple else common.stride
    if type(s0) is int and type(d0) is int and d0 == 1:
        return s0
    return None


def _check_identity(fn: Any, n: int, what: str) -> None:
    """Raise CompositionError unless ``fn(i) == i`` for all ``i < n``."""
    if n > _EXHAUSTIVE_LIMIT:
        raise CompositionError(f"{what}: CuTe's intermediate composition is not exact and the "
                               f"claimed common prefix ({n} elements) is too long to check")
    for i in range(n):
        if fn(i) != i:
            raise CompositionError(f"{what}: CuTe's intermediate composition is not exact and "
                                   f"its claimed common prefix of {n} elements fails at {i}")


def max_common_layout(a: Layout, b: Layout) -> Layout:
    """CuTe's ``max_common_layout``: ``R`` with ``a(R(i)) == i`` and ``b(R(i)) == i`` for all
    ``i < size(R)`` (the largest contiguous prefix CuTe finds).

    When CuTe's intermediate composition is not exact, its answer is returned only after
    checking that post-condition on every index (else CompositionError).  With a
    ComposedLayout argument see :func:`layoutalg.composed_ops.max_common_layout_composed`.
    """
    if type(a) is not Layout or type(b) is not Layout:
        require_any_layout(a, "max_common_layout", "a")
        require_any_layout(b, "max_common_layout", "b")
        if not (isinstance(a, Layout) and isinstance(b, Layout)):
            from .composed_ops import max_common_layout_composed
            return max_common_layout_composed(a, b)
    inv_b = right_inverse(b)
    common, exact = _common_prefix(a, inv_b)
    s0 = _leading_unit_mode(common)
    if s0 is None:
        return Layout._make(1, 0)
    tile = Layout._make(s0, 1)
    try:
        out = composition(inv_b, tile)
        ok = exact
    except CompositionError:
        out = _composition_as_cute(inv_b, tile)
        ok = False
    if not ok:
        n = out.size()
        _check_identity(lambda i: a(out(i)), n, f"max_common_layout({a}, {b})")
        _check_identity(lambda i: b(out(i)), n, f"max_common_layout({a}, {b})")
    return out


def max_common_vector(a: Layout, b: Layout) -> int:
    """CuTe's ``max_common_vector``: the largest N (found by CuTe) such that
    ``a(b.get_1d_coord(n)) == n`` for ``n < N``, i.e. ``a(right_inverse(b)(n)) == n``.

    When CuTe's intermediate composition is not exact, its answer is returned only after
    checking that post-condition on every index (else CompositionError).  With a
    ComposedLayout argument: ``size(max_common_layout(a, b))``.
    """
    if type(a) is not Layout or type(b) is not Layout:
        require_any_layout(a, "max_common_vector", "a")
        require_any_layout(b, "max_common_vector", "b")
        if not (isinstance(a, Layout) and isinstance(b, Layout)):
            return max_common_layout(a, b).size()
    inv_b = right_inverse(b)
    common, exact = _common_prefix(a, inv_b)
    s0 = _leading_unit_mode(common)
    if s0 is None:
        return 1
    if not exact:
        _check_identity(lambda i: a(inv_b(i)), s0, f"max_common_vector({a}, {b})")
    return s0


# ---------------------------------------------------------------------------------------------
# Divides
# ---------------------------------------------------------------------------------------------

def logical_divide(layout: Layout, tiler: Any) -> Any:
    """``layout o (tiler, complement(tiler, shape(coalesce(layout))))``: rank-2 (tile, rest).

    ``tiler`` is a Layout, an int, ``None`` or a by-mode tuple of those.  A tiler that does not
    divide the layout pads the rest mode (CuTe semantics: ``12:1 / 5`` is ``(5,3):(1,5)``, of
    size 15).  Post: ``result(i) == layout(B(i))`` for ``B = (tiler, complement)`` and
    ``size(result) >= size(layout)``; raises where CuTe's result is not that (e.g.
    ``(3,4):(1,5) / 2:1``: CuTe returns ``(2,(2,4)):(1,(2,5))``, whose value at 3 is 3, not 5).
    """
    if type(layout) is Layout:
        tt = type(tiler)
        if tt is Layout or tt is int:
            t = tiler if tt is Layout else int_tile(tiler, "logical_divide tiler")
            lf = layout._ints
            if lf is None:
                lf = int_flat(layout)
            tf = t._ints
            if tf is None:
                tf = int_flat(t)
            if lf and tf:
                fs, fd = lf
                cs = coalesce_lists(fs, fd, fs[-1], fd[-1])[0]
                c = _complement_int(t, tf[0], tf[1], cs[0] if len(cs) == 1 else tuple(cs))
                cf = c._flat
                return _compose_layout(layout, (t.shape, c.shape), (t.stride, c.stride),
                                       (tf[0] + cf[0], tf[1] + cf[1]))
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, logical_divide)
    if not isinstance(layout, Layout):
        raise ShapeError(f"logical_divide: expected a Layout, got {layout!r}")
    if tiler is None:
        return layout
    if type(tiler) is tuple:
        return by_mode(layout, tiler, logical_divide, "logical_divide")
    t = as_layout(tiler, "logical_divide tiler")
    c = complement(t, coalesce(layout).shape)
    return composition(layout, make_layout(t, c))


def zipped_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), (rest modes...))``: all tile modes first."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, zipped_divide)
    return tile_unzip(logical_divide(layout, tiler), tiler, "zipped_divide")


def tiled_divide(layout: Layout, tiler: Any) -> Layout:
    """``((tile modes...), rest0, rest1, ...)``."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, tiled_divide)
    return unpack_modes(zipped_divide(layout, tiler), (False, True))


def flat_divide(layout: Layout, tiler: Any) -> Layout:
    """``(tile0, tile1, ..., rest0, rest1, ...)``."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.divide(tiler, flat_divide)
    return unpack_modes(zipped_divide(layout, tiler), (True, True))


# ---------------------------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------------------------

def logical_product(block: Layout, tiler: Any) -> Layout:
    """``(block, complement(block, size(block)*cosize(tiler)) o tiler)``: rank-2 (block, tiles).

    Post: ``size(result) == size(block) * size(tiler)``; mode 0 is ``block`` unchanged.
    """
    if type(block) is Layout:
        tt = type(tiler)
        if tt is Layout or tt is int:
            t = tiler if tt is Layout else int_tile(tiler, "logical_product tiler")
            bf = block._ints
            if bf is None:
                bf = int_flat(block)
            tf = t._ints
            if tf is None:
                tf = int_flat(t)
            if bf and tf:
                n = 1
                for x in bf[0]:
                    n *= x
                cos = 1
                for x, y in zip(tf[0], tf[1]):
                    cos += (x - 1) * (y if y >= 0 else -y)
                c = _complement_int(block, bf[0], bf[1], n * cos)
                r = _compose_layout(c, t.shape, t.stride, tf)
                return Layout._make((block.shape, r.shape), (block.stride, r.stride))
    elif not isinstance(block, Layout):
        raise ShapeError(f"logical_product: expected a Layout block, got {block!r}")
    if tiler is None:
        return block
    if type(tiler) is tuple:
        return by_mode(block, tiler, logical_product, "logical_product")
    t = as_layout(tiler, "logical_product tiler")
    c = complement(block, block.size() * t.cosize())
    return make_layout(block, composition(c, t))


def zipped_product(block: Layout, tiler: Any) -> Layout:
    return tile_unzip(logical_product(block, tiler), tiler, "zipped_product")


def tiled_product(block: Layout, tiler: Any) -> Layout:
    return unpack_modes(zipped_product(block, tiler), (False, True))


def flat_product(block: Layout, tiler: Any) -> Layout:
    return unpack_modes(zipped_product(block, tiler), (True, True))


def zip_layouts(a: Layout, b: Layout) -> Layout:
    """CuTe ``zip(layoutA, layoutB)``: pair up corresponding modes.

    ``((a0,a1,...),(b0,b1,...)) -> ((a0,b0),(a1,b1),...)``; when ``a`` is a single mode (not a
    tuple) the result is the single mode ``((a,b))``.  Raises ShapeError when a is a tuple and
    b is not one of the same rank (CuTe: "Mismatched Ranks" / incomplete tuple_size).
    """
    require_layout(a, "zip_layouts", "a")
    require_layout(b, "zip_layouts", "b")
    return Layout._make(_zip2(a.shape, b.shape), _zip2(a.stride, b.stride))


def _zip2(x: Any, y: Any) -> Any:
    if type(x) is not tuple:
        return ((x, y),)
    if type(y) is not tuple or len(y) != len(x):
        raise ShapeError(f"zip: mismatched ranks: {fmt(x)} and {fmt(y)} (both must be tuples of "
                         "the same rank, or the first a single mode)")
    return tuple(zip(x, y))


def _rank_product(block: Layout, tiler: Any, raked: bool) -> Layout:
    name = "raked_product" if raked else "blocked_product"
    if not isinstance(block, Layout) or not isinstance(tiler, Layout):
        raise ShapeError(f"{name} takes two Layouts (as in CuTe); got {block!r} and {tiler!r}: "
                         "wrap an int or a shape with make_layout(...)")
    r = max(block.rank, tiler.rank)
    res = logical_product(append(block, n=r), append(tiler, n=r))
    m0, m1 = res[0], res[1]
    try:
        return zip_layouts(m1, m0) if raked else zip_layouts(m0, m1)
    except ShapeError:
        raise ShapeError(
            f"{name}({block}, {tiler}): the modes {m0} and {m1} of the logical product cannot "
            "be zipped mode by mode (a rank-1 layout whose single mode is a tuple is combined "
            "with a plain mode; CuTe refuses this too): give both layouts the same mode "
            "structure") from None


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Repeat ``block`` over ``tiler`` (block-major): mode i is ``(block_i, tiler_i)``.

    Post: ``rank(result) == max(rank(block), rank(tiler))`` and
    ``size(result) == size(block) * size(tiler)``.
    """
    return _rank_product(block, tiler, raked=False)


def raked_product(block: Layout, tiler: Layout) -> Layout:
    """Interleave copies of ``block`` over ``tiler``: mode i is ``(tiler_i, block_i)``.

    Post: ``rank(result) == max(rank(block), rank(tiler))`` and
    ``size(result) == size(block) * size(tiler)``.
    """
    return _rank_product(block, tiler, raked=True)


def tile_to_shape(block: Layout, trg_shape: Any, order: Any = None) -> Layout:
    """Repeat ``block`` (blocked) until it has shape ``trg_shape``; ``order`` picks the mode order.

    Refused when the block's per-mode sizes do not divide the target's.  On a ComposedLayout
    it tiles the inner layout (CuTe).
    """
    from .inttuple import normalize
    if not isinstance(block, Layout):
        require_any_layout(block, "tile_to_shape", "block")
        from .composed_ops import on_inner
        return on_inner(block, tile_to_shape, trg_shape, order)
    trg_shape = normalize(trg_shape, "tile_to_shape target")
    r = _rank(trg_shape)
    if block.rank > r:
        raise ShapeError(f"tile_to_shape: block {block} has rank {block.rank} > rank of target "
                         f"{fmt(trg_shape)}")
    padded = append(block, n=r)
    bs = product_each(padded.shape)
    ts = product_each(trg_shape)
    for b_, t_ in zip(bs, ts):
        if type(b_) is int and type(t_) is int and t_ % b_ != 0:
            raise DivisibilityError(f"tile_to_shape: block shape {fmt(bs)} does not divide the "
                                    f"target shape {fmt(ts)}")
    prod_shape = ceil_div(ts, bs)
    if order is None:
        tl = make_layout(prod_shape)
    else:
        tl = make_ordered_layout(prod_shape, order)
    return blocked_product(padded, tl)


# ---------------------------------------------------------------------------------------------
# Upcast / downcast (reinterpret element width)
# ---------------------------------------------------------------------------------------------

def _check_factor(n: Any, name: str) -> None:
    require_int(n, name, "the factor n")


def upcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times wider: stride-1 modes shrink, other strides divide.
    A ComposedLayout is cast whole (swizzle base, offset and inner; CuTe's ``upcast<N>``)."""
    _check_factor(n, "upcast")
    n = int(n)
    if not isinstance(layout, Layout):
        require_any_layout(layout, "upcast")
        from .composed_ops import upcast_composed
        return upcast_composed(layout, n)
    def up(s: Any, d: Any) -> tuple:
        if type(s) is tuple:
            parts = [up(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if type(d) is int and d == 0:
            return s, d
        if type(d) is int:
            ad = abs(d)
            if ad % n != 0 and n % ad != 0:
                raise DivisibilityError(f"upcast<{n}> of {layout}: stride {d} and {n} do not "
                                        "divide one another")
            return ceil_div(s, -(-n // ad)), (1 if d > 0 else -1) * (-(-ad // n))
        return s, d / n
    s, d = up(layout.shape, layout.stride)
    return Layout._make(s, d)


def downcast(layout: Layout, n: int) -> Layout:
    """View ``layout`` in units ``n`` times narrower: stride-1 modes grow, other strides scale.
    A ComposedLayout is cast whole (swizzle base, offset and inner; CuTe's ``downcast<N>``)."""
    _check_factor(n, "downcast")
    n = int(n)
    if not isinstance(layout, Layout):
        require_any_layout(layout, "downcast")
        from .composed_ops import downcast_composed
        return downcast_composed(layout, n)
    fd = layout.flat()[1]
    if not any(type(x) is int and x == 1 for x in fd):
        raise DivisibilityError(f"downcast<{n}> of {layout}: needs a stride-1 mode (adjacent "
                                "elements)")

    def down(s: Any, d: Any) -> tuple:
        if type(s) is tuple:
            parts = [down(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if type(d) is int and abs(d) == 1:
            return s * n, d
        return s, d * n
    s, d = down(layout.shape, layout.stride)
    return Layout._make(s, d)
