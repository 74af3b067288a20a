"""The tensors an attention-style kernel's checks talk about, read from its spec.

The instance engine's rules (:mod:`~kernels.verify.attention_static`,
:mod:`~kernels.verify.attention_dataflow`, :mod:`~kernels.verify.attention_softmax`) never name
a tensor; they ask :class:`Roles`: the query / key operands of the contraction that produces
the softmax's scores, the value operand of the one that consumes its probabilities, the
written output, LSE, split statistics, merged partials, the head anchor and the tensors indexed
by the kv head (GQA).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple

from .spec import KernelSpec, SpecError

__all__ = ["Roles"]


@dataclass(frozen=True)
class Roles:
    """What each tensor is for, in the rules' words (None: the kernel has no such tensor)."""

    query: Optional[str]            # scores = query x key^T
    key: Optional[str]
    value: Optional[str]            # out = probs x value
    out: Optional[str]              # the P V product's destination (an output or partial)
    lse: Optional[str]
    stats: Optional[Tuple[str, str]]          # split kernel: (max, sum) workspace
    partials: Optional[Tuple[str, ...]]  # combine kernel: (O, max, sum) or (O, LSE) read
    merged: bool                    # the kernel merges partials (combine)
    partitioned: bool               # the kernel's partials partition the keys (split)
    stat_frags: Tuple[str, ...]
    anchor: Optional[str]
    kv_tensors: FrozenSet[str]
    head_dim: int
    key_tile: int

    @staticmethod
    def from_spec(spec: KernelSpec) -> "Roles":
        sm, mg = spec.softmax, spec.split_merge
        if sm is None and mg is None:
            raise SpecError(f"spec {spec.name}: the instance engine checks attention-style "
                            "kernels (an online softmax or a split merge); the spec has neither")
        query = key = value = out = None
        if sm is not None:
            sc, pv = spec.producer(sm.scores), spec.consumer(sm.probs)
            query, key, value, out = sc.lhs, sc.rhs, pv.rhs, pv.out
            hd, tile = sm.head_dim, sm.key_tile
        else:
            out, hd, tile = mg.out, mg.head_dim, mg.key_tile
        head_dim = spec.extent(hd)
        if not isinstance(head_dim, int):
            raise SpecError(f"spec {spec.name}: the head dimension {hd} needs a compile-time "
                            "extent")
        sp = spec.split_partition
        return Roles(query=query, key=key, value=value, out=out,
                     lse=(sm.lse if sm is not None else mg.lse),
                     stats=sm.stats if sm is not None else None,
                     partials=mg.partials if mg is not None else None, merged=mg is not None,
                     partitioned=sp is not None, stat_frags=sp.stat_frags if sp else (),
                     anchor=spec.head_anchor, kv_tensors=spec.with_dim(spec.kv_head),
                     head_dim=head_dim, key_tile=tile)
