"""The Hopper wgmma statements (:mod:`kernels.ir.nvidia_wgmma`) in the attention dataflow: the
wgmma prefill built as IR (:mod:`kernels.nvidia.wgmma_flash_ir`).

One mechanism with the GEMM: the asynchronous rules are :class:`kernels.verify.gate_wgmma
.WgmmaRules` itself (groups in flight, ``wgmma.fence`` before a wgmma whose accumulator or
register A another instruction wrote, ``wgmma.wait_group`` pinning what it retires, the
generic-to-async proxy fence and the barrier after it, the descriptor model of every shared
operand read, its start uniform over the warpgroup and inside the array).  What differs is what
the operands *are*: the GEMM pairs rows of A with columns of B; here a wgmma is one of the two
products of attention, paired by the rules the ``mma.sync`` prefill already uses
(:mod:`kernels.verify.warp_register_rules`):

* ``S = Q K^T`` (A and B from shared memory): A row ``i`` is one query row of Q, B row ``j``
  one key of K of the query's (batch, kv head), equal head dims in every slot
  (:meth:`~kernels.verify.warp_register_rules.WarpRegisterRules.mma_scores_qk`);
* ``O += P V`` (A from registers, the ``.rs`` form; V MN-major in shared memory): register
  item ``e`` of thread ``t`` is ``P[row, key]`` of :meth:`~mfma_specs.nvidia_wgmma.Wgmma
  .layout_a`, every A row one query row under one maximum version, every slot's key V's
  (:meth:`~kernels.verify.warp_register_rules.WarpRegisterRules.pv_pair`).

The accumulator layout is :meth:`~mfma_specs.nvidia_wgmma.Wgmma.layout_c` over the 128 threads
of each warpgroup (:class:`WgmmaTables`), so the accumulator records are the ones the softmax
rules already check (row max over the lanes sharing a row, rescales, normalisation, masking).

The softmax statements read and write accumulators in registers: each such access is checked
against the wgmma groups in flight (``lane_accumulator_writeback``: an accumulator read or
rewritten before the wait retiring its wgmma; ``lane_mfma_operands``: P overwritten while a
wgmma reading it runs), and a write means the next wgmma on those registers needs a
``wgmma.fence`` first (:func:`frag_effects` says which frags each statement reads / writes).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Tuple

import numpy as np

from ..ir.attention import ExpScores, FinalNormalize, MaskScores, Rescale, RowMax
from ..ir.core import Access, ZeroFrag
from ..ir.nvidia_wgmma import WgmmaMma
from ..ir.warp_registers import RoundProbs
from .attention_ids import PROBS
from .gate_wgmma import WgmmaRules
from .wgmma_tables import WgmmaTables, wgmma_tables

__all__ = ["WgmmaTables", "AttentionWgmmaRules", "AttentionWgmma", "frag_effects"]

_WG = 128


def frag_effects(s: Any) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(frags read, frags written) by a non-wgmma attention statement, register-wise."""
    if isinstance(s, MaskScores):
        return (s.frag.name,), (s.frag.name,)
    if isinstance(s, RowMax):
        return (s.frag.name,), ()
    if isinstance(s, ExpScores):
        return (s.s.name,), (s.p.name,)
    if isinstance(s, Rescale):
        return (s.frag.name,), (s.frag.name,)
    if isinstance(s, FinalNormalize):
        return (s.o.name,), (s.o.name, s.lse.name)
    if isinstance(s, RoundProbs):
        return (s.p.name,), (s.dst.name,)
    if isinstance(s, Access):
        fr = s.regs.frag.name
        return ((fr,), ()) if s.kind == "store" else ((), (fr,))
    if isinstance(s, ZeroFrag):
        return (), (s.frag.name,)
    return (), ()


class _Host:
    """The attention dataflow seen through the interface :class:`WgmmaRules` reads of the GEMM
    dataflow (``f.add``, ``where``, ``lds_touch``, ``in_flight``, ``regs``, ``lds``, ``T``,
    ``k``): one set of wgmma rules for both engines."""

    def __init__(self, df: Any) -> None:
        self.df = df
        self.f = SimpleNamespace(add=df.fail)
        self.regs, self.lds, self.T, self.k = df.regs, df.lds, df.T, df.k

    def where(self, tag: str, env) -> str:
        return tag

    def lds_touch(self, a: Any, addr, th, write: bool, env=None) -> None:
        self.df.lds_touch(a, addr, th, write)

    def in_flight(self, a: Any, addr, thr, what: str, env=None) -> None:
        self.df.in_flight(a.buf, addr, thr, what, a.tag)


class AttentionWgmmaRules(WgmmaRules):
    """:class:`WgmmaRules` whose operands are paired as attention's products: each warpgroup's
    operand identities are collected, then the whole block's wgmma is paired at once by the
    attention rules (``acc_update`` over every warpgroup, as an ``mma.sync`` over every
    warp)."""

    def __init__(self, df: Any) -> None:
        super().__init__(_Host(df))
        self.attn = df
        self.pending: List[Tuple[int, Any, Any]] = []

    def overwritten(self, frag: str, idx: np.ndarray) -> None:
        """scale-d 0: the accumulator starts over (as after a zero fill) from this product."""
        if len(idx) != self.attn.frags[frag].count:
            self.attn.fail("lane_mfma_operands", f"scale-d 0 on part of {frag}: the attention "
                                                 "engine overwrites whole accumulators only")
            return
        self.attn.zero(frag)

    def _register_a(self, s: WgmmaMma, g: int, where: str) -> Any:
        """The register A of a P V product: P's records at (thread, item) of ``layout_a``."""
        P = self.attn.acc.get(s.a.frag.name)
        if P is None or P.kind != PROBS:
            self.attn.fail("lane_mfma_operands", f"{where}: A registers {s.a.frag.name} hold no "
                                                 "probabilities (a register A must be P)")
            return None
        return None, P

    def _multiply(self, s: WgmmaMma, g: int, A: Any, B: np.ndarray, acc_idx, ci, cj,
                  where: str) -> None:
        self.pending.append((g, A, B))

    def wgmma(self, s: WgmmaMma, env) -> None:
        self.pending = []
        super().wgmma(s, env)
        W = self.attn.T // _WG
        if len(self.pending) != W:
            return          # an operand was refused (reported)
        sp = wgmma_tables(s.atom)
        where = f"wgmma {s.tag}"
        self.attn.mfma_issues += W
        B = np.stack([np.swapaxes(b, 0, 1) for _, _, b in self.pending])       # [W, 16, N]
        if s.a_in_regs:
            self.attn.pv_pair(s, sp, self.pending[0][1], np.array(s.a.idx), B, where)
        else:
            A = np.stack([a for _, a, _ in self.pending])                      # [W, 64, 16]
            self.attn.mma_scores_qk(s, sp, A, B, where)


class AttentionWgmma:
    """Mixin of :class:`~kernels.verify.attention_dataflow.AttentionDataflow`: the wgmma
    statements and the hooks every other statement calls (:meth:`wg_effects`)."""

    def uses_wgmma(self) -> bool:
        return getattr(self, "_wg", None) is not None

    def wgmma_stmt(self, s: Any, env) -> None:
        self._wg.stmt(s, env)

    def wg_effects(self, s: Any, env) -> None:
        """A non-wgmma statement's register reads and writes against the wgmma groups in
        flight; its writes need a ``wgmma.fence`` before a wgmma touches those registers."""
        if not self.uses_wgmma():
            return
        reads, writes = frag_effects(s)
        wg = self._wg
        for fr in reads:
            wg.acc_read(fr, range(10 ** 9), env)
        for fr in writes:
            wg.acc_read(fr, range(10 ** 9), env, "rewrites")
            wg.regs_written(fr, range(self.frags[fr].count), env, type(s).__name__)

    def wg_barrier(self) -> None:
        if self.uses_wgmma():
            self._wg.barrier()

    def wg_shared_write(self, buf: str, addr: np.ndarray, tag: str, env,
                        landed: bool) -> None:
        if self.uses_wgmma():
            self._wg.shared_write(buf, addr, tag, env, landed)

    def wg_landed(self, buf: str, addr: np.ndarray) -> None:
        if self.uses_wgmma():
            self._wg.landed(buf, addr)
