"""The log-sum-exp merge of *normalised* split partials (the NVIDIA split-KV decode's combine
kernel, :mod:`kernels.nvidia.decode_mma_ir`).

The AMD split kernel stores each split's unnormalised O with its (max, sum) and merges them
with :class:`~kernels.ir.attention.MergeStep`.  The NVIDIA split kernel stores each split's
*normalised* partial ``O_s`` and its base-2 log-sum-exp ``lse_s = m_s + log2(l_s)``; the exact
merge is then two passes over the splits::

    M = max_s lse_s                       (LseMax, once per split)
    w_s = exp2(lse_s - M);  L += w_s;  o += w_s O_s     (LseMergeStep, once per split)
    o *= 1 / L                            (LseNormalize)

``O = sum_s 2^(lse_s - M) O_s / sum_s 2^(lse_s - M)`` for ANY common ``M``; taking the maximum
keeps every weight in ``(0, 1]`` (no overflow).  The rules the verifier applies
(:mod:`kernels.verify.lse_merge_rules`, reported as ``reduction_reads_partials`` /
``online_softmax``):

* every operand register was loaded, from the spec's partials ``(O, LSE)`` in that order;
* :class:`LseMax`: the LSE belongs to the (batch, head) the running maximum already holds (the
  first one fixes it), and its split is not yet in the maximum;
* :class:`LseMergeStep`: ``O_s`` and ``lse_s`` are the same (batch, head) and split, ``O_s`` at
  the accumulator's head dims, the split not yet merged; the maximum it subtracts covers every
  one of the ``n_splits`` splits (so it is their maximum: weights <= 1) and is never raised
  again after a merge step used it (one common ``M`` for all weights: a later raise would mix
  weights taken against different maxima);
* :class:`LseNormalize`: the accumulator and the sum merged the same (batch, head) and splits.

The float arithmetic (exp2, fma, the reciprocal) is checked numerically against the template
kernel on the GPU (``tests/test_nvidia_ir_decode_gpu.py``), as every softmax's is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from .core import Frag

__all__ = ["LseMax", "LseMergeStep", "LseNormalize"]


def _consecutive(items: Tuple[int, ...], what: str) -> None:
    if not items or list(items) != list(range(items[0], items[0] + len(items))):
        raise ValueError(f"{what}: the items must be consecutive registers, got {list(items)}")


@dataclass
class LseMax:
    """``m = max(m, lse[item])`` (pass 1: the splits' maximum log-sum-exp)."""

    m: str
    lse: Frag
    item: int = 0


@dataclass
class LseMergeStep:
    """``w = exp2(lse[lse_item] - m); l += w; o[o_items[j]] = fma(w, x[x_items[j]], o[...])``."""

    o: Frag
    o_items: Tuple[int, ...]
    x: Frag
    x_items: Tuple[int, ...]
    lse: Frag
    lse_item: int
    m: str
    l: str

    def __post_init__(self) -> None:
        if len(self.o_items) != len(self.x_items):
            raise ValueError(f"lse merge into {self.o.name}: {len(self.o_items)} accumulator "
                             f"items but {len(self.x_items)} partial items")
        _consecutive(self.o_items, f"lse merge into {self.o.name}")
        _consecutive(self.x_items, f"lse merge from {self.x.name}")


@dataclass
class LseNormalize:
    """``o[items] *= 1 / l`` (the merged output divided by the merged sum)."""

    o: Frag
    items: Tuple[int, ...]
    l: str

    def __post_init__(self) -> None:
        _consecutive(self.items, f"lse normalise {self.o.name}")
