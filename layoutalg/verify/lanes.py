"""MFMA lane correctness: every lane's register item holds the element the instruction expects.

The instruction's contract comes from its spec (``mfma_specs.lookup(arch, name)``):
``spec.element(operand, lane, item) -> (row, col, block)`` says which element of the operand
tile (``A[i][k]``, ``B[k][j]``, ``C/D[i][j]``) lane ``lane`` must supply (or owns) in register
item ``item``.  The kernel's side is its *load path*: a TV partition ``(lane, item[, step])``
giving, through an optional LDS layout (padding, swizzle, offset), the memory offset each
register item is loaded from (or, for the accumulator ``C``/``D``, written to).

The check compares, for every lane, item and k step, the offset the kernel uses with the offset
where the expected element is stored (``memory(row, col, block)``): equal offsets in an
injective memory layout mean the same element.  Exhaustive over the whole (finite) register
file of the instruction; the first mismatch is reported with the element that *is* there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple

import numpy as np

from ..layout import Layout
from ..swizzle import ComposedLayout
from ..tv import TVLayout
from ._access import as_access, check_in_domain, eval_at
from .result import AccessError, CheckResult, VerifyError

__all__ = ["lane_correctness", "LaneResult", "LaneMismatch"]


@dataclass(frozen=True)
class LaneMismatch:
    lane: int
    item: int
    step: int
    expected: Tuple[int, int, int]              # (row, col, block) the instruction expects
    expected_offset: int
    actual_offset: int
    actual: Optional[Tuple[int, int, int]]      # element stored at actual_offset (None: none)
    operand: str

    def __str__(self) -> str:
        got = (f"{self.operand}{list(self.actual[:2])}" + (f" block {self.actual[2]}"
               if self.actual[2] else "")) if self.actual is not None else "no operand element"
        exp = f"{self.operand}{list(self.expected[:2])}" + (
            f" block {self.expected[2]}" if self.expected[2] else "")
        st = f", k step {self.step}" if self.step else ""
        return (f"lane {self.lane} item {self.item}{st}: expects {exp} (offset "
                f"{self.expected_offset}) but the load path uses offset {self.actual_offset}, "
                f"which holds {got}")


@dataclass(frozen=True, kw_only=True)
class LaneResult(CheckResult):
    instruction: str
    operand: str
    checked: int                                  # register items compared
    mismatches: int
    mismatch: np.ndarray = field(repr=False)      # bool [lanes, items, steps]

    def summary(self) -> str:
        if self.holds:
            return (f"lane correctness of {self.instruction} operand {self.operand}: every lane "
                    f"item holds the expected element ({self.checked} checked)")
        return (f"lane correctness of {self.instruction} operand {self.operand}: "
                f"{self.mismatches} of {self.checked} register items hold the wrong element")


def _spec_dims(spec: Any, op: str) -> Tuple[int, int, int]:
    if hasattr(spec, "tile_shape"):
        r, c, b = spec.tile_shape(op)
        return int(r), int(c), int(b)
    m = getattr(spec, "M", getattr(spec, "m", None))
    n = getattr(spec, "N", getattr(spec, "n", None))
    k = getattr(spec, "K", getattr(spec, "k", None))
    b = getattr(spec, "blocks", 1)
    if None in (m, n, k):
        raise VerifyError("spec must provide tile_shape(operand) or M, N, K, blocks")
    return {"A": (m, k, b), "B": (k, n, b)}.get(op, (m, n, b))


def _items(spec: Any, op: str) -> int:
    tv = spec.tv_layout(op)
    return int(tv[1].size()) if isinstance(tv, Layout) else int(tv.layout_tv[1].size())


def lane_correctness(spec: Any, operand: str, partition: Any, *, lds: Any = None,
                     memory: Any = None, steps: int = 1,
                     step: Optional[Callable[[int], Tuple[int, int]]] = None) -> LaneResult:
    """Prove the load (or write-back) path of ``operand`` matches ``spec`` for every register.

    ``partition``: TV layout / TVLayout / int array ``(lane, item[, step]) -> index``; with
    ``lds`` the index is mapped through ``lds`` (the LDS layout, e.g. ``Sw o 0 o tile``) to a
    memory offset.  ``memory``: where operand element ``(row, col[, block])`` is stored: a
    Layout/ComposedLayout over the operand tile of shape ``(rows_total, cols_total[, blocks])``
    (default: ``lds``; with neither, the column-major index of that tile).  ``steps`` k steps
    (A: step s covers columns ``s*K..``, B: rows ``s*K..``); ``step(s) -> (drow, dcol)``
    overrides that (e.g. M/N repeats or the accumulator tiles).
    """
    op = operand.upper() if isinstance(operand, str) else operand
    if op not in ("A", "B", "C", "D"):
        raise VerifyError(f"operand must be 'A', 'B', 'C' or 'D', got {operand!r}")
    name = getattr(spec, "name", type(spec).__name__)
    if getattr(spec, "sparse", False) and op == "A":
        raise VerifyError(f"{name} is sparse (SMFMAC): A items hold 2 of 4 candidates chosen by "
                          "data; lane correctness of A is not a static property")
    rows, cols, blocks = _spec_dims(spec, op)
    kdim = cols if op == "A" else rows
    if type(steps) is not int or steps < 1:
        raise VerifyError(f"steps must be a positive int, got {steps!r}")
    if step is None:
        if op in ("C", "D") and steps > 1:
            raise VerifyError("the accumulator has no k steps; give step=lambda s: (drow, dcol) "
                              "for repeated accumulator tiles")
        step = (lambda s: (0, s * kdim)) if op == "A" else (lambda s: (s * kdim, 0))
    deltas = [tuple(int(x) for x in step(s)) for s in range(steps)]
    wave = int(getattr(spec, "wave_size", 64))
    items = _items(spec, op)

    acc = as_access(partition, None, "partition")
    lanes, nv, nit = acc.offsets.shape
    if lanes != wave or nv != items or nit != steps:
        raise AccessError(f"partition has shape (lanes={lanes}, items={nv}, steps={nit}); "
                          f"{name} operand {op} needs ({wave}, {items}, {steps})")
    if lds is not None:
        check_in_domain(lds, acc.offsets)
    actual = acc.offsets if lds is None else eval_at(lds, acc.offsets, "lds")

    # expected coordinates from the spec, shifted per step
    exp = np.zeros((wave, items, 3), dtype=np.int64)
    for lane in range(wave):
        for it in range(items):
            r, c, b = spec.element(op, lane, it)
            exp[lane, it] = (r, c, b)
    rows_t = rows + max(d[0] for d in deltas)
    cols_t = cols + max(d[1] for d in deltas)
    er = exp[:, :, 0, None] + np.array([d[0] for d in deltas])[None, None, :]
    ec = exp[:, :, 1, None] + np.array([d[1] for d in deltas])[None, None, :]
    eb = np.broadcast_to(exp[:, :, 2, None], er.shape)
    mem = memory if memory is not None else lds
    mshape = _memory_shape(mem, rows_t, cols_t, blocks)
    idx = er + mshape[0] * ec + mshape[0] * mshape[1] * eb
    expected = idx if mem is None else eval_at(mem, idx, "memory")

    # memory must be injective on the operand tile, or "same offset" would not mean "same element"
    rr, cc, bb = np.meshgrid(np.arange(mshape[0]), np.arange(mshape[1]), np.arange(mshape[2]),
                             indexing="ij")
    all_idx = (rr + mshape[0] * cc + mshape[0] * mshape[1] * bb).reshape(-1)
    all_off = all_idx if mem is None else eval_at(mem, all_idx, "memory")
    uniq, first, cnt = np.unique(all_off, return_index=True, return_counts=True)
    if (cnt > 1).any():
        o = uniq[np.argmax(cnt > 1)]
        a, b = all_idx[np.flatnonzero(all_off == o)[:2]]
        raise VerifyError(f"memory layout is not injective on the {mshape} operand tile: "
                          f"elements {_crd(a, mshape)} and {_crd(b, mshape)} both live at "
                          f"offset {int(o)}")
    where = dict(zip(uniq.tolist(), all_idx[first].tolist()))   # offset -> column-major index

    bad = actual != expected
    n_bad = int(bad.sum())
    cex = None
    if n_bad:
        lane, it, s = (int(x) for x in np.argwhere(bad)[0])
        ao = int(actual[lane, it, s])
        hit = where.get(ao)
        cex = LaneMismatch(lane, it, s, (int(er[lane, it, s]), int(ec[lane, it, s]),
                                         int(eb[lane, it, s])),
                           int(expected[lane, it, s]), ao,
                           _crd(hit, mshape) if hit is not None else None, op)
    dom = (f"all {wave} lanes x {items} register items x {steps} step(s) of {name} operand {op} "
           f"({blocks} block(s)), against memory tile {mshape} (exhaustive)")
    return LaneResult(check="MFMA lane correctness", holds=n_bad == 0, method="exhaustive",
                      domain=dom, counterexample=cex, instruction=name, operand=op,
                      checked=int(bad.size), mismatches=n_bad, mismatch=bad)


def _crd(i: int, shape: Tuple[int, int, int]) -> Tuple[int, int, int]:
    i = int(i)
    return (i % shape[0], (i // shape[0]) % shape[1], i // (shape[0] * shape[1]))


def _memory_shape(mem: Any, rows: int, cols: int, blocks: int) -> Tuple[int, int, int]:
    """``(rows, cols, blocks)`` of the memory's tile; checks it holds the operand tile."""
    if mem is None:
        return (rows, cols, blocks)
    base = mem.inner if isinstance(mem, ComposedLayout) else mem
    if isinstance(base, TVLayout) or not isinstance(base, Layout):
        raise VerifyError("memory/lds must be a Layout or ComposedLayout over the operand tile")
    r = base.rank
    sizes = [int(base[i].size()) for i in range(r)] if r > 1 else [int(base.size())]
    if len(sizes) == 2:
        sizes.append(1)
    if len(sizes) != 3:
        raise VerifyError(f"memory layout {mem} must have modes (rows, cols[, blocks])")
    if sizes[0] < rows or sizes[1] < cols or sizes[2] < blocks:
        raise VerifyError(f"memory tile {tuple(sizes)} is smaller than the operand tile "
                          f"({rows}, {cols}, {blocks}) including all steps")
    return tuple(sizes)  # type: ignore[return-value]



