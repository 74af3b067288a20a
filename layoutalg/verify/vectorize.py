"""The widest legal per-lane vector of an access.

A lane can move ``w`` elements with one instruction when, for every lane and every group of
``w`` consecutive values (values ``g*w .. g*w+w-1``), the elements are contiguous and ascending
in memory and the first one is aligned to ``w`` elements (``w * elem_bytes`` bytes, assuming the
buffer base is at least ``max_bytes``-aligned).  Legality is monotone (a legal ``w`` makes
``w/2`` legal), so the answer is the largest legal power of two with ``w * elem_bytes <=
max_bytes`` (16 bytes: ``ds_read_b128`` / ``global_load_dwordx4``).

Methods: exhaustive over every lane, value and iteration; F2 for power-of-two/swizzled layouts
(value bit j must be element bit j, every other bit must leave the low bits 0), cross-checked
against the exhaustive answer; sympy for a symbolic stride (alignment becomes a congruence on
the symbol, returned as an exact :class:`~.symbolic.ParamSet` per width).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._access import as_access, has_symbols
from .f2proof import access_f2, cross_check, log2_exact, vector_misfit
from .result import CheckResult, VerifyError

__all__ = ["vector_width", "VectorResult", "VectorCounterexample"]

_LDS = {1: "ds_read_u8/ds_write_b8", 2: "ds_read_u16/ds_write_b16", 4: "ds_read_b32",
        8: "ds_read_b64", 16: "ds_read_b128"}
_GLOBAL = {1: "global_load_ubyte", 2: "global_load_ushort", 4: "global_load_dword",
           8: "global_load_dwordx2", 16: "global_load_dwordx4"}


@dataclass(frozen=True)
class VectorCounterexample:
    """Why the next wider vector is illegal."""

    width_elems: int
    thread: int
    values: Tuple[int, int]        # first and last value index of the group
    iteration: Tuple[int, ...]
    offsets: Tuple[int, ...]
    reason: str

    def __str__(self) -> str:
        it = f" at iteration {self.iteration}" if self.iteration else ""
        return (f"{self.width_elems}-element vectors fail: thread {self.thread} values "
                f"{self.values[0]}..{self.values[1]}{it} are at element offsets "
                f"{list(self.offsets)}: {self.reason}")


@dataclass(frozen=True, kw_only=True)
class VectorResult(CheckResult):
    """Widest legal per-lane vector (``width_elems`` elements, ``width_bytes`` bytes)."""

    width_elems: int
    width_bytes: int
    elem_bytes: int
    require_bytes: Optional[int] = None
    legal_for: Dict[int, Any] = field(default_factory=dict, repr=False)  # sympy: bytes -> ParamSet

    @property
    def lds_instruction(self) -> str:
        return _LDS.get(self.width_bytes, f"{self.width_bytes}-byte")

    @property
    def global_instruction(self) -> str:
        return _GLOBAL.get(self.width_bytes, f"{self.width_bytes}-byte")

    def summary(self) -> str:
        s = (f"widest per-lane vector: {self.width_elems} x {self.elem_bytes} B = "
             f"{self.width_bytes} B ({self.lds_instruction}, {self.global_instruction})")
        if self.require_bytes is not None:
            s += f"; required {self.require_bytes} B: {'HOLDS' if self.holds else 'FAILS'}"
        return s

    def details(self) -> Tuple[str, ...]:
        out = [f"{b}-byte vectors legal for {ps}" for b, ps in sorted(self.legal_for.items())]
        if self.holds and self.counterexample is not None:
            out.append(f"why not wider: {self.counterexample}")
        return tuple(out)


def _why(off: np.ndarray, w: int) -> Tuple[Tuple[int, int, int], str]:
    """First (thread, group, iteration) breaking width ``w`` and the reason."""
    t, v, it = off.shape
    g = off.reshape(t, v // w, w, it)
    steps = g - g[:, :, :1, :]
    contig = (steps == np.arange(w)[None, None, :, None]).all(axis=2)
    align = g[:, :, 0, :] % w == 0
    bad = ~(contig & align)
    th, gr, i = (int(x) for x in np.argwhere(bad)[0])
    if not contig[th, gr, i]:
        reason = "not contiguous ascending elements"
    else:
        reason = (f"contiguous, but the first element {int(g[th, gr, 0, i])} is not a multiple "
                  f"of {w} (misaligned)")
    return (th, gr, i), reason


def _legal(off: np.ndarray, w: int) -> bool:
    t, v, it = off.shape
    if v % w:
        return False
    g = off.reshape(t, v // w, w, it)
    return bool(((g - g[:, :, :1, :]) == np.arange(w)[None, None, :, None]).all()
                and (g[:, :, 0, :] % w == 0).all())


def _f2_width(layout: Any, lds: Any, threads: int, values: int, max_w: int) -> int:
    full, _, _ = access_f2(layout, lds)
    t_bits = log2_exact(threads, "threads")
    v_bits = log2_exact(values, "values")
    k = 0
    while (2 << k) <= min(max_w, values) and vector_misfit(full, t_bits, v_bits, k + 1) is None:
        k += 1
    return 1 << k


def vector_width(access: Any, *, elem_bytes: int = 2, lds: Any = None, max_bytes: int = 16,
                 require_bytes: Optional[int] = None, method: str = "auto",
                 domain: Any = None) -> VectorResult:
    """Widest legal per-lane vector of ``access`` (same forms as :func:`bank_conflicts`).

    ``require_bytes``: if given, ``holds`` says whether at least that many bytes per lane are
    legal (else ``holds`` is True: the result is the proved maximum).  Symbolic strides use
    sympy over ``domain=(lo, hi)`` (default ``(0, None)``): ``legal_for[bytes]`` is the exact
    set of parameter values for which that width is legal.
    """
    if type(elem_bytes) is not int or elem_bytes <= 0 or type(max_bytes) is not int \
            or max_bytes < elem_bytes or max_bytes & (max_bytes - 1) \
            or elem_bytes & (elem_bytes - 1):
        raise VerifyError(f"elem_bytes and max_bytes must be powers of two with max_bytes >= "
                          f"elem_bytes (a vector access moves 1, 2, 4, 8 or 16 bytes), got "
                          f"elem_bytes={elem_bytes!r}, max_bytes={max_bytes!r}")
    if method not in ("auto", "exhaustive", "f2", "sympy"):
        raise VerifyError(f"unknown method {method!r}")
    max_w = 1
    while max_w * 2 * elem_bytes <= max_bytes:
        max_w *= 2
    if has_symbols(access) or has_symbols(lds):
        return _symbolic(access, lds, elem_bytes, max_w, require_bytes, domain)
    acc = as_access(access, lds)
    off = acc.offsets
    w = 1
    while w * 2 <= max_w and _legal(off, w * 2):
        w *= 2
    cex = None
    if w < max_w:
        wn = w * 2
        if off.shape[1] % wn:
            cex = VectorCounterexample(wn, 0, (0, wn - 1), (), tuple(off[0, :wn, 0].tolist())
                                       if off.shape[1] >= wn else tuple(off[0, :, 0].tolist()),
                                       f"each thread has only {off.shape[1]} values, not a "
                                       f"multiple of {wn}")
        else:
            (th, g, i), reason = _why(off, wn)
            cex = VectorCounterexample(wn, th, (g * wn, g * wn + wn - 1), acc.iter_coord(i),
                                       tuple(int(x) for x in off[th, g * wn:(g + 1) * wn, i]),
                                       reason)
    meth, notes = cross_check(
        method, acc.layout, lambda: _f2_width(acc.layout, acc.lds, acc.threads, acc.values, max_w),
        w, "the widest vector (elements) is")
    holds = True if require_bytes is None else w * elem_bytes >= require_bytes
    dom = (f"every thread ({acc.threads}), value group and iteration ({acc.iterations}); "
           f"assuming the buffer base is {max_bytes}-byte aligned")
    if meth == "f2":
        dom += "; F2 view: value bits are the low element bits and no other bit touches them"
    return VectorResult(check="per-lane vectorization", holds=holds, method=meth, domain=dom,
                        counterexample=cex, notes=notes, width_elems=w,
                        width_bytes=w * elem_bytes, elem_bytes=elem_bytes,
                        require_bytes=require_bytes)


def _symbolic(access: Any, lds: Any, elem_bytes: int, max_w: int, require_bytes: Optional[int],
              domain: Any) -> VectorResult:
    from .symbolic import affine_offsets, free_symbols, make_param_set
    from ..errors import SymbolicError
    syms = free_symbols(access, lds)
    if len(syms) != 1:
        raise SymbolicError(f"need exactly one symbol, found {sorted(map(str, syms))}")
    sym = syms.pop()
    lo, hi = (0, None) if domain is None else domain
    alpha, beta, _ = affine_offsets(access, lds, sym)
    legal: Dict[int, Any] = {}
    best = 1
    w = 1
    while w * 2 <= max_w:
        wn = w * 2
        t, v, it = alpha.shape
        if v % wn:
            break
        a = alpha.reshape(t, v // wn, wn, it)
        b = beta.reshape(t, v // wn, wn, it)
        if not (((a - a[:, :, :1, :]) == np.arange(wn)[None, None, :, None]).all()
                and (b == b[:, :, :1, :]).all()):
            break   # contiguity does not depend on the symbol: no value makes it legal
        a0, b0 = a[:, :, 0, :].ravel(), b[:, :, 0, :].ravel()
        # (a0 + b0 * p) % wn == 0 for all lanes: periodic in p with period wn
        good = {r: bool(((a0 + b0 * r) % wn == 0).all()) for r in range(wn)}
        ps = make_param_set(sym, lo, hi, wn, {r: g for r, g in good.items()
                                              if hi is None or _hits(lo, hi, r, wn)}, {})
        legal[wn * elem_bytes] = ps
        if ps.is_everything() and best == w:
            best = wn
        w = wn
    holds = True if require_bytes is None else best * elem_bytes >= require_bytes
    cex = None
    if require_bytes is not None and not holds:
        ps = legal.get(require_bytes)
        bad = None
        if ps is not None:
            bad = next((p for p in range(lo, lo + 4 * require_bytes) if p not in ps
                        and (hi is None or p <= hi)), None)
        cex = (f"{require_bytes}-byte vectors are not legal for every {sym}"
               + (f" (e.g. {sym} = {bad})" if bad is not None else ": elements not contiguous"))
    dom = (f"every integer {sym} in [{lo}, {hi if hi is not None else 'oo'}], every thread, "
           f"value group and iteration: offsets are affine in {sym}, so alignment to w elements "
           f"depends only on {sym} mod w (each residue evaluated)")
    return VectorResult(check="per-lane vectorization", holds=holds, method="sympy", domain=dom,
                        counterexample=cex, width_elems=best, width_bytes=best * elem_bytes,
                        elem_bytes=elem_bytes, require_bytes=require_bytes, legal_for=legal)


def _hits(lo: int, hi: int, r: int, m: int) -> bool:
    p = lo + ((r - lo) % m)
    return p <= hi
