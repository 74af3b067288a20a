"""Loop-carried variables (:class:`~kernels.ir.nvidia_tma.VarInit` / ``VarSet``) in the
warp-specialised attention engine's lockstep walks (:mod:`.attention_ring`): the persistent
kernel's ring counter ``g0`` (:mod:`kernels.nvidia.wgmma_ws_ir_persist`) runs on over the
work units.

The attention dataflow and the static pass walk a ``Loop`` with a copy of the environment per
iteration (a ``Let`` is a function of the loop indices there), so a ``VarSet`` in the body
would be lost at the iteration's end: the next unit would read the counter's value before
the loop.  Here the walk of a loop (or branch) whose body assigns a carried variable copies
each carried variable the iteration assigned back into the enclosing environment, so every
iteration reads the value the previous one left: what the printed ``int g0 = 0; ... g0 = g0 +
n_blocks;`` computes.  In the static pass (every block at once, ``[blocks, 1]`` arrays) a
``VarSet`` changes the blocks the statement is active in only.

A kernel holding carried variables declares each one's range at a launch
(``k.meta["carried_ranges"](values, grid) -> {name: (lo, hi)}``): the engine checks every value
the consumers' walk gives them against it (:func:`out_of_range`, ``in_bounds``), and the
printed-text reader, which does not run the loop, reads the printed expressions over it
(:mod:`.printed_ws`).

The per-role model (the producer's coroutine, :mod:`.gate_tma`) already runs them as
rebindings of one environment.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Optional, Tuple

import numpy as np

from ..ir.core import If, Loop, sym, walk
from ..ir.nvidia_tma import VarInit, VarSet

__all__ = ["carried_names", "assigns_carried", "carry_back", "masked_set", "declared_ranges",
           "out_of_range"]


def carried_names(body: Any) -> FrozenSet[str]:
    """The names ``body`` declares with ``VarInit``."""
    return frozenset(s.name for s in walk(body) if isinstance(s, VarInit))


def assigns_carried(s: Any) -> bool:
    """Does the loop or branch ``s`` assign a carried variable somewhere in its body?"""
    return isinstance(s, (Loop, If)) and any(isinstance(x, VarSet) for x in walk(s.body))


def carry_back(outer: Dict[Any, Any], inner: Dict[Any, Any], names: FrozenSet[str]) -> None:
    """The carried variables of ``names`` an iteration's environment ``inner`` holds, copied
    into the enclosing ``outer`` (the next iteration, and the statements after the loop, read
    them)."""
    for n in names:
        k = sym(n)
        if k in inner:
            outer[k] = inner[k]


def masked_set(env: Dict[Any, Any], name: str, value: Any, active: np.ndarray) -> None:
    """A ``VarSet`` in the static pass: ``name`` takes ``value`` in the active blocks only."""
    k = sym(name)
    old = env.get(k)
    if old is None:
        env[k] = value
        return
    shape = np.broadcast_shapes(np.shape(old), np.shape(value), np.shape(active))
    env[k] = np.where(np.broadcast_to(active, shape), np.broadcast_to(value, shape),
                      np.broadcast_to(old, shape))


def declared_ranges(k: Any, values: Dict[str, int], grid: Any) -> Dict[str, Tuple[int, int]]:
    """The ranges ``k`` declares for its carried variables at a launch (``values``: the
    runtime sizes, ``grid``); empty where it declares none."""
    fn = getattr(k, "meta", {}).get("carried_ranges")
    return dict(fn(values, tuple(grid))) if fn is not None else {}


def out_of_range(env: Dict[Any, Any], names: FrozenSet[str],
                 ranges: Dict[str, Tuple[int, int]]) -> Optional[str]:
    """Why a carried variable of ``names`` in ``env`` is outside its declared range (or has
    none); None when every one is inside."""
    for n in sorted(names):
        v = env.get(sym(n))
        if v is None:
            continue
        if n not in ranges:
            return f"loop-carried {n} has no declared range (kernel meta carried_ranges)"
        lo, hi = ranges[n]
        a = np.asarray(v)
        if (a < lo).any() or (a > hi).any():
            return (f"loop-carried {n} reaches {int(a.min())}..{int(a.max())}, outside its "
                    f"declared range [{lo}, {hi}] (the printed-text reader reads it there)")
    return None
