"""Composition ``A o B``: the layout ``R`` with ``R(c) == A(B(c))`` for every coordinate c of B.

Computed as CuTe's ``composition`` (include/cute/layout.hpp), with the conditions under which
CuTe's result is really ``A o B`` checked (below); :func:`composition` also dispatches a Swizzle
or a ComposedLayout on the left.  :func:`compose_modes` and :func:`composition_as_cute` are the
seams the divides, products and common-layout searches use.
"""

from __future__ import annotations

from typing import Any

from .enumerate import flat_values
from .errors import CompositionError, ShapeError
from .flat_modes import coalesce_lists, int_leaves, same_value
from .inttuple import ceil_div, exact_div, flatten, fmt, normalize, product, sym_ok
from .layout import Layout, int_flat, make_layout
from .tilers import as_layout, tiler_str

__all__ = ["composition"]


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


def compose_modes(lhs: Layout, rs: Any, rd: Any, rflat: Any = None, strict: bool = True) -> Layout:
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


def composition_as_cute(lhs: Layout, rhs: Layout) -> Layout:
    """CuTe's ``composition(lhs, rhs)`` for two Layouts *without* our soundness refusals (CuTe's
    own refusals still raise).  Internal: only for operations whose result is then checked
    against their own post-condition (max_common_vector / max_common_layout)."""
    return compose_modes(lhs, rhs.shape, rhs.stride, int_flat(rhs), strict=False)


# Largest size(B) for which a composition that fails the structural conditions only in an
# exotic way (a stride-0 mode of A, a negative stride) is settled by checking every index.
EXHAUSTIVE_LIMIT = 1 << 16


def _resolve_violations(viol: list, ls: list, ld: list, rs: Any, rd: Any, s: Any, d: Any) -> None:
    """Raise CompositionError unless CuTe's result ``s:d`` is ``A o B`` after all.

    Each violation carries whether it provably makes the result differ from ``A o B`` (see the
    conditions above).  The others (a walk wrapping inside a stride-0 mode of A, or a negative
    stride whose borrow happens to cancel) are decided by comparing every index, for
    ``size(B) <= EXHAUSTIVE_LIMIT``.
    """
    n = product(rs)
    for msg, provable in viol:
        if provable:
            raise CompositionError(msg + _cute_answer(ls, ld, rs, rd, s, d, n))
    if n > EXHAUSTIVE_LIMIT:
        raise CompositionError(viol[0][0] + f" (size(B) = {n} is too large to rule out an "
                               "exceptional cancellation by checking every index)")
    got, truth = _cute_and_truth(ls, ld, rs, rd, s, d)
    if (got != truth).any():
        raise CompositionError(viol[0][0] + _cute_answer(ls, ld, rs, rd, s, d, n))


def _cute_and_truth(ls: list, ld: list, rs: Any, rd: Any, s: Any, d: Any):
    """Every value of CuTe's result ``s:d`` and of the true ``A(B(c))`` (A's coalesced digits)."""
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
    if type(n) is not int or n > EXHAUSTIVE_LIMIT:
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
            return compose_modes(lhs, rhs.shape, rhs.stride, rf)
        if type(rhs) is int:
            if rhs <= 0:
                raise ShapeError(f"composition: tiler extent must be >= 1, got {rhs}")
            return compose_modes(lhs, rhs, 1, None)
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
        return compose_modes(lhs, rhs.shape, rhs.stride, int_flat(rhs))
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
    n = normalize(rhs, "composition rhs")
    if type(n) is tuple:  # pragma: no cover - tuples handled above
        raise ShapeError("unreachable")
    _check_extent(n, "composition tiler")
    return compose_modes(lhs, n, 1, None)


def _check_extent(n: Any, what: str) -> None:
    if type(n) is int and n <= 0:
        raise ShapeError(f"{what}: extent must be >= 1, got {n}")
