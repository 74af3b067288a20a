"""Split-aware dataflow for a runtime-size split-K GEMM on the every-block engine: the
``cp.async`` wgmma GEMM's split kernel (:mod:`kernels.nvidia.wgmma_rt_ir_split`), whose blocks
store fp32 partials ``W[s][m][n]`` that a second launch (its ``meta["reduce"]`` kernel) sums.

:class:`~kernels.verify.gate_dataflow.GemmDataflow` proves each stored value is the sum over
all of ``[0, K)``; a partial holds only its split's k range.  Composed with it (the MFMA,
operand, race and wgmma rules unchanged), :class:`SplitPartialsDataflow` changes what a store
to the workspace must hold and records what it held:

* ``lane_accumulator_writeback``: a value stored at ``W[s][m][n]`` is the accumulator of
  ``(m, n)`` (the base rule) holding exactly the k values of split ``s``:
  ``[s kt_per bk, min(K, (s + 1) kt_per bk))``, the template's partition of the k tiles
  (:func:`~kernels.nvidia.wgmma.split_ranges`; ``kt_per`` and ``bk`` from the kernel's
  ``meta["split"]``);
* every block of the instance is simulated (a grouped raster is no block translation), and
  each stored element's identity and k set go into a
  :class:`~kernels.verify.gate_tma_ticket.TicketLedger`, the workspace record the TMA split
  kernels fill;
* then the reduce kernel runs on that record (:func:`kernels.verify.gate_split_reduce
  .check_reduce`, unchanged: ``merge_reads_partials`` - every C element is ``0.f + W[0] + ...
  + W[splits - 1]`` in order, each partial written exactly once holding its element over one
  k range, the ranges ascending and partitioning ``[0, K)`` -; ``in_bounds``; coverage of C,
  each element exactly once).

``coverage`` of ``W`` (every element of all ``splits`` planes stored exactly once) is the
static pass's, over the workspace's origin layout ``(splits, M, N)``.
:func:`verify_split_at_instances` runs it all at each launch and checks the printed text:
the split kernel's part against its IR (:func:`~kernels.verify.printed.verify_printed`), the
reduce kernel's part by :func:`~kernels.verify.gate_split_reduce.check_printed_reduce`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.core import Access, c_eval
from .gate_common import Fail
from .gate_dataflow import GemmDataflow
from .gate_split_reduce import REDUCE_RULE, check_printed_reduce, check_reduce
from .gate_tma_data import SH0, SHT
from .gate_tma_ticket import TicketLedger
from .spec import SpecError

__all__ = ["SplitPartialsDataflow", "SplitPartialsRun", "verify_split_at_instances",
           "SPLIT_CHECKS"]

#: the checks the split program adds to the every-block engine's
SPLIT_CHECKS = (REDUCE_RULE,)
_C_ID = 1       # the identity tag of C in the ledger (one output tensor)


class SplitPartialsRun:
    """One instance of a split kernel: the dataflow factory the every-block engine calls per
    block (:meth:`__call__`), the workspace ledger they fill, and :meth:`finish`, the reduce
    kernel's proof once every block has run."""

    checks = SPLIT_CHECKS

    def __init__(self, k: Any, values: Dict[str, int]) -> None:
        split = k.meta.get("split")
        if not split or "reduce" not in k.meta:
            raise SpecError(f"{k.name}: a split kernel declares meta['split'] (bk, the k-tile "
                             "partition) and meta['reduce'] (the kernel that sums W)")
        self.k, self.values = k, dict(values)
        self.bk, self.ws = int(split["bk"]), str(split["workspace"])
        self.ledger = TicketLedger(self.values, self.values["splits"])
        self.ledger.c_tensor = _C_ID
        self.blocks: List[Tuple[int, ...]] = []

    def __call__(self, k: Any, spec: Any, fails: Fail, block: Tuple[int, ...],
                 span: int) -> "SplitPartialsDataflow":
        self.blocks.append(block)
        return SplitPartialsDataflow(k, spec, fails, block, span, self)

    def split_range(self, s: int) -> Tuple[int, int]:
        """The k values of split ``s`` (the template's partition)."""
        v = self.values
        step = v["kt_per"] * self.bk
        return min(v["K"], s * step), min(v["K"], (s + 1) * step)

    def record(self, el: np.ndarray, ids: np.ndarray, kbits: np.ndarray) -> None:
        """Workspace elements ``el`` (flat ``s M N + m N + n``) now hold C identities ``ids``
        with k sets ``kbits`` ([count, words] uint64)."""
        ld = self.ledger
        if not len(el):
            return
        rows, inv = np.unique(kbits, axis=0, return_inverse=True)
        idx = np.array([ld.kset(tuple(_bits(r))) for r in rows], np.int64)
        ld.w_id[el], ld.w_k[el] = ids, idx[np.asarray(inv).reshape(-1)]
        np.add.at(ld.w_count, el, 1)

    def finish(self, fails: Fail) -> str:
        """The reduce kernel on the recorded workspace (``merge_reads_partials``, its
        ``in_bounds``, C covered once); returns the domain words."""
        M, N = self.values["M"], self.values["N"]
        g = _ReduceView(fails, self.ledger, np.zeros((M, N), np.int64), {"C": _C_ID})
        where = f"splits={self.values['splits']}"
        n_fail = sum(fails.count.values())
        check_reduce(self.k, g, self.values, where)
        if sum(fails.count.values()) == n_fail and (g.cover != 1).any():
            r, c = (int(x) for x in np.argwhere(g.cover != 1)[0])
            fails.add("coverage", f"{where}: the reduce kernel stores C[{r}, {c}] "
                                  f"{int(g.cover[r, c])} times (once)")
        red = self.k.meta["reduce"]
        return (f"the reduce kernel {red.name}: every thread of its {-(-M * N // red.block)} "
                f"blocks at splits={self.values['splits']}, reading the workspace all "
                f"{len(self.blocks)} blocks of the split kernel wrote")


class _ReduceView:
    """What :func:`~kernels.verify.gate_split_reduce.check_reduce` reads of its gate."""

    def __init__(self, f: Fail, ledger: TicketLedger, cover: np.ndarray,
                 tensor_id: Dict[str, int]) -> None:
        self.f, self.ledger, self.cover, self.tensor_id = f, ledger, cover, tensor_id


def _bits(words: np.ndarray) -> List[int]:
    out: List[int] = []
    for w, x in enumerate(words.tolist()):
        while x:
            b = (x & -x).bit_length() - 1
            out.append(64 * w + b)
            x &= x - 1
    return out


class SplitPartialsDataflow(GemmDataflow):
    """:class:`GemmDataflow` whose stores to the workspace hold their split's k range and are
    recorded in the run's ledger (module docstring)."""

    def __init__(self, k: Any, spec: Any, fails: Fail, block: Tuple[int, ...], span: int,
                 run: SplitPartialsRun) -> None:
        super().__init__(k, spec, fails, block, span)
        self.run_ = run
        # W[s, m, n] is tracked by the output's (m, n): their positions among W's dimensions
        out = spec.contractions[0].out
        self.pos[run.ws] = tuple(spec.position(run.ws, d) for d in spec.tensor(out).dims)

    def k_range(self, a: Access, cc: List[np.ndarray], t_on: np.ndarray,
                env) -> Optional[Tuple[int, int]]:
        if a.buf != self.run_.ws:
            return super().k_range(a, cc, t_on, env)
        planes = np.unique(cc[0][t_on])
        if len(planes) > 1:
            self.f.add("lane_accumulator_writeback", f"{self.where(a.tag, env)}: one store "
                                                     f"writes workspace planes {planes[:4]}")
            return None
        return self.run_.split_range(int(planes[0])) if len(planes) else (0, 0)

    def store_out(self, a: Access, j: int, i: int, pred, env) -> None:
        before = sum(self.f.count.values())
        super().store_out(a, j, i, pred, env)
        if a.buf != self.run_.ws or sum(self.f.count.values()) != before:
            return
        cc = [np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64), (self.T,))
              for x in self._mode_coords(a)[j]]
        t_on = np.nonzero(pred)[0]
        s, m, n = (x[t_on] for x in cc)
        v = self.run_.values
        el = (s * v["M"] + m) * v["N"] + n
        ids = (np.int64(_C_ID) << SHT) | (m << SH0) | n
        self.run_.record(el, ids, self.kbits[a.regs.frag.name][:, t_on, i].T)


def verify_split_at_instances(k: Any, spec: Any, arch: str, source: Optional[str] = None,
                              instances: Optional[Sequence[Any]] = None) -> Any:
    """The split kernel at each launch on the every-block engine with
    :class:`SplitPartialsDataflow` on every block, then its reduce kernel
    (:class:`SplitPartialsRun`); with ``source`` (split kernel's text + the reduce kernel's)
    the printed checks of both."""
    from .concrete_instances import verify_at_instances
    text = None
    f = Fail()
    if source is not None:
        text = check_printed_reduce(f, k, source)
    report = verify_at_instances(k, spec, arch, text, instances,
                                 dataflow=lambda kc, inst: SplitPartialsRun(kc, inst.values))
    if source is not None:
        report.checks.update(f.results(("printed_source",), {
            "printed_source": "the printed text: split kernel, then its reduce kernel"})
            if f.first else {})
    return report

