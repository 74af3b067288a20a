"""The interleaved k-loop of the GEMM (``GemmConfig(schedule="interleaved")``).

For a work-group of one wave per SIMD (``waves_per_eu=1``: 512 registers a lane, e.g. the
224x256 tile with 2x2 waves of 112x128, 224 accumulators each), no other wave hides the LDS
and global latencies: the wave must hide them itself behind its own MFMAs.  Each k-tile here is
one run of MFMAs with every other instruction of the iteration issued *between* them:

* ``kpack = 1`` (``gemm_plan``): one LDS read feeds one MFMA k-step, so k-group ``g + 1``'s
  operand reads go out behind k-group ``g``'s MFMAs into registers of their own;
* in the last k-group: a few MFMAs, the barrier (every wave has read the single LDS stage),
  the LDS stores of k-tile ``t + 1`` (loaded one iteration earlier) and the global prefetch of
  k-tile ``t + 2``, each behind an MFMA; a barrier; then k-group 0's reads of k-tile ``t + 1``
  behind the last MFMAs, so the next iteration starts on fragments already in flight;
* ``sched_group_barrier`` pins fix that interleave (the compiler would otherwise bunch the
  memory instructions), ``sched_barrier`` fences keep the phases apart;
* the loop is not unrolled (one k-tile an iteration: with one LDS stage every address is
  loop-invariant already; clang-19 rotated the 224 accumulators through copies when it was
  unrolled by two - seen in the disassembly, 0.77 MFMA busy by the model instead of 0.95);
* a predicated global load is a raw buffer load (``Access.soffset``): an off predicate moves
  its offset out of the buffer and the hardware returns zeros, the IR's meaning of an off
  load, with no branch in the loop (a branch around each load split the MFMA run into basic
  blocks and the accumulators again went through copies: 0.68 busy).

What is computed is unchanged: the gate checks the dataflow and LDS races of the statements in
this order (the reads of k-tile ``t + 1`` come after the barrier that follows its stores; the
stores after the barrier that follows every read of k-tile ``t``), the emulator runs them.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from .gemm_plan import DTYPE_BYTES, ConfigError
from ..ir.core import (Access, Barrier, Comment, Loop, Mfma, Param, SchedBarrier,
                       SchedGroupBarrier, SetPrio, WaitCnt, sym)

__all__ = ["interleaved_k_loop", "operand_params", "HEAD_MFMAS"]

BUFFER_BYTES_MAX = 0x7ffffff0   # LAGEN_BUFFER_OOB (lagen_hip.h): an off lane's byte offset
HEAD_MFMAS = 8      # MFMAs of the last k-group issued before its barrier (the reads of the
                    # k-group before it have arrived by then, so the barrier does not stall)


def _count(stmts: Sequence[Any], cls: type, **attrs: Any) -> int:
    return sum(isinstance(s, cls) and all(getattr(s, k) == v for k, v in attrs.items())
               for s in stmts)


def _split(mfmas: Sequence[Any], n: int):
    """The first ``n`` MFMA statements of ``mfmas`` (comments kept in front) and the rest."""
    seen, i = 0, 0
    while i < len(mfmas) and seen < n:
        seen += isinstance(mfmas[i], Mfma)
        i += 1
    return list(mfmas[:i]), list(mfmas[i:])


def _pins(kinds: Sequence[str], mfma_per: int, sync_id: int) -> List[Any]:
    """One (``mfma_per`` MFMAs, one instruction of class ``kind``) pair per entry of ``kinds``."""
    out: List[Any] = []
    for kind in kinds:
        out += [SchedGroupBarrier("mfma", mfma_per, sync_id), SchedGroupBarrier(kind, 1, sync_id)]
    return out


def _k_tile(b: Any, kt: Any, has_next: bool, has_next2: bool) -> List[Any]:
    """k-tile ``kt``: its MFMAs (k-group 0's fragments already read), with k-group g+1's reads
    behind k-group g's MFMAs; then, if there is a next k-tile, the stores of k-tile kt+1, the
    prefetch of kt+2 (``has_next2``) and k-group 0's reads of kt+1 behind the last MFMAs."""
    p = b.p
    reads_of, mfmas_of = b.k_groups(0)
    out: List[Any] = [Comment(f"k-tile {kt}: interleaved (reads of the next k-group, LDS stores "
                              "and global prefetch between the MFMAs)"), SetPrio(1)]
    for g in range(p.kgroups - 1):
        rd = reads_of[g + 1]
        n_rd = _count(rd, Access, space="lds")
        out += rd + mfmas_of[g]
        out += _pins(["ds_read"] * n_rd, 2, 1) + [SchedBarrier()]
    last = mfmas_of[-1]
    if not has_next:
        return out + last + [SetPrio(0)]
    head, rest = _split(last, HEAD_MFMAS)
    out += head + [SchedBarrier(),
                   Comment("single LDS stage: every wave has read k-tile before it is rewritten"),
                   Barrier(), WaitCnt(vm=0)]
    stores: List[Any] = []
    for op in (p.a, p.b):
        stores += b.store_tile(op, 0)
    pref: List[Any] = []
    if has_next2:
        for op in (p.a, p.b):
            pref += b.load_tile(op, kt + 2)
    n_st = _count(stores, Access, space="lds")
    n_pf = _count(pref, Access, space="global")
    mid, rest = _split(rest, n_st + n_pf)
    out += stores + pref + mid
    out += _pins(["ds_write"] * n_st + ["vmem_read"] * n_pf, 1, 2) + [SchedBarrier(), Barrier()]
    nxt, _ = b.k_groups(0)
    n_rd = _count(nxt[0], Access, space="lds")
    out += [Comment(f"k-group 0 of k-tile {kt + 1}: reads behind the last MFMAs")]
    out += nxt[0] + rest + _pins(["ds_read"] * n_rd, 1, 3) + [SchedBarrier(), SetPrio(0)]
    return out


def interleaved_k_loop(b: Any) -> List[Any]:
    """Everything after the prologue (k-tile 0 stored in LDS, barrier passed): the prefetch of
    k-tile 1 and k-group 0's reads, the loop over k-tiles 0 .. KT-3, the last two k-tiles."""
    p = b.p
    KT = p.k_tiles
    out: List[Any] = []
    if KT > 1:
        out.append(Comment("k-tile 1 -> registers; k-group 0 of k-tile 0 -> registers"))
        for op in (p.a, p.b):
            out += b.load_tile(op, 1)
    reads_of, _ = b.k_groups(0)
    out += reads_of[0]
    if KT > 2:
        loop = Loop("kt", 0, KT - 2)
        loop.body += _k_tile(b, sym("kt"), True, True)
        out.append(loop)
    if KT > 1:
        out += _k_tile(b, KT - 2, True, False)
    out += _k_tile(b, KT - 1, False, False)
    return out


def operand_params(plan: Any, edge_buffers: bool) -> List[Param]:
    """The A and B parameters; with ``edge_buffers`` an operand whose tiles have a partial edge
    (so predicated loads) also gets a raw buffer resource over its whole storage layout
    (num_records = the tensor's bytes: an off load's out-of-range offset reads zeros)."""
    c = plan.cfg
    eb = DTYPE_BYTES[c.dtype]
    partial = {"A": bool(c.m % c.block_m or c.k % c.block_k),
               "B": bool(c.n % c.block_n or c.k % c.block_k)}
    out = []
    for op in (plan.a, plan.b):
        buf = edge_buffers and partial[op.name]
        if buf and int(op.glob.cosize()) * eb > BUFFER_BYTES_MAX:
            raise ConfigError(f"{op.name} has {int(op.glob.cosize()) * eb} bytes: its predicated "
                              f"loads are buffer loads, which need < {BUFFER_BYTES_MAX} bytes "
                              "(32-bit offsets; an off lane reads past that); use another "
                              "schedule")
        out.append(Param(op.name, c.dtype, layout=op.glob if buf else None, buffer=buf))
    return out
