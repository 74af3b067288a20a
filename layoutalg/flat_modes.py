"""Algorithms on flat mode lists (``shapes``, ``strides``): the all-int fast paths of
``coalesce`` and ``filter``, and the small tests the algebra shares with them.

They take and return plain lists or tuples (no Layout), so they sit below
:mod:`layoutalg.layout` and every module of the algebra; :mod:`layoutalg.layout` builds the
Layouts from their results.
"""

from __future__ import annotations

from typing import Any, Sequence

from .inttuple import flatten

__all__ = ["coalesce_lists", "filter_lists", "same_value", "int_leaves"]


def coalesce_lists(fs: Sequence[int], fd: Sequence[int], last_s: int, last_d: int) -> tuple:
    """CuTe ``bw_coalesce`` on all-int flat modes ``fs[:-1]`` followed by ``last_s:last_d``;
    returns (shapes, strides) lists in order (``[1], [0]`` when every extent is 1).

    CuTe walks from the back, skipping extent-1 modes and merging a mode ``s:d`` into the next
    kept one when ``s*d`` equals its stride.  Merging adjacent kept modes is associative, so
    the same result comes from one forward pass (no reversal).  Post: no extent-1 mode (unless
    the result is 1:0), no adjacent pair with ``s_i * d_i == d_{i+1}``, ``L(i)`` unchanged for
    ``i < size``.
    """
    shapes: list = []
    strides: list = []
    cs = 0  # current (last kept) mode; cs == 0: none yet
    cd = 0
    n = len(fs) - 1
    for i in range(n + 1):
        if i < n:
            s = fs[i]
            d = fd[i]
        else:
            s = last_s
            d = last_d
        if s == 1:
            continue
        if cs and cs * cd == d:
            cs *= s
            shapes[-1] = cs
        else:
            shapes.append(s)
            strides.append(d)
            cs = s
            cd = d
    if not shapes:
        return [1], [0]
    return shapes, strides


def filter_lists(fs: Sequence[int], fd: Sequence[int]) -> tuple:
    """Flat (shapes, strides) of ``filter`` for all-int modes: drop stride-0 and extent-1 modes,
    then coalesce (``[1], [0]`` when nothing is left); one forward pass."""
    shapes: list = []
    strides: list = []
    cs = 0
    cd = 0
    for s, d in zip(fs, fd):
        if s == 1 or d == 0:
            continue
        if cs and cs * cd == d:
            cs *= s
            shapes[-1] = cs
        else:
            shapes.append(s)
            strides.append(d)
            cs = s
            cd = d
    if not shapes:
        return [1], [0]
    return shapes, strides


def same_value(a: Any, b: Any) -> bool:
    """``a == b`` for ints; for symbolic values, whether ``a - b`` simplifies to 0 (False when
    they cannot be subtracted)."""
    if type(a) is int and type(b) is int:
        return a == b
    try:
        return bool((a - b) == 0)
    except TypeError:
        return False


def int_leaves(shape: Any, stride: Any) -> Any:
    """(flat extents, flat strides) when both trees hold only ints, else False."""
    a = flatten(shape)
    b = flatten(stride)
    for x in a:
        if type(x) is not int:
            return False
    for x in b:
        if type(x) is not int:
            return False
    return a, b
