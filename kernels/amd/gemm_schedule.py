"""The pipelined k-tile schedule of the GEMM (``GemmConfig(schedule="pipelined")``).

The basic schedule issues, per k-group, the operand reads, ``s_waitcnt lgkmcnt(0)`` and that
group's MFMAs: each group's MFMAs wait for the whole LDS latency of its reads (issue 15: "the
loop waits on LDS reads four times per k-tile").  The pipelined one issues every operand read
of the k-tile first, then runs the MFMAs of k-group g after a *partial* wait,
``lgkmcnt(reads issued after group g)``: LDS operations of a wave complete in order, so that
count means "group g's reads have arrived" while the later groups' reads are still in flight,
and the MFMA run starts on the first fragments.  ``s_setprio 1`` over the MFMA run keeps the
matrix pipe with the wave whose operands are ready while the SIMD's other wave issues its loads
(as Triton's and hipBLASLt's loops do).  The priority goes up *after* the run's first MFMA, as in
Triton 3.9's compiled 128x128x64 loop: a wave that reaches its MFMAs while the SIMD's other wave
is inside its own run (already at priority 1) waits for that run to finish instead of taking
every other MFMA slot from it.  Raised before the first MFMA, the two runs interleave, both end
late, and the two work-groups of a CU fall into step (both in their LDS phase at once, the matrix
pipe idle): by the static model 93 % MFMA busy at 128x128x64 one stage instead of 100 %.  ``sched_group_barrier`` can pin the order (all reads,
then the MFMAs; ``pin=True``), but clang-19 already keeps it and the pinned code modelled slower
(see :func:`pipelined_k_tile`), so the default does not.  The global prefetch of the next k-tile stays first in the
iteration (GemmBuilder.iteration), ahead of all of this.

Nothing here changes what is computed: the waits only wait and the compiler still inserts any
wait a consumer needs (a wait it can prove is already satisfied it drops); the gate checks the
dataflow and the LDS races of the statements in this order, and the emulator runs them.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from ..ir.core import Access, Comment, Mfma, SchedGroupBarrier, SetPrio, WaitCnt

__all__ = ["pipelined_k_tile", "LGKM_MAX"]

LGKM_MAX = 15       # gfx9 (CDNA) lgkmcnt is 4 bits: a wait for more is a wait for 15


def _reads(stmts: Sequence[Any]) -> int:
    return sum(isinstance(s, Access) and s.space == "lds" and s.kind == "load" for s in stmts)


def pipelined_k_tile(reads_of: Sequence[List[Any]], mfmas_of: Sequence[List[Any]],
                     sync_id: int = 0, explicit_waits: bool = False,
                     pin: bool = False) -> List[Any]:
    """Statements of one k-tile's compute phase: ``reads_of[g]`` (group g's LDS operand reads)
    all first, then each group's ``mfmas_of[g]``; ``s_setprio 1`` right after the first MFMA
    (with no MFMA, an empty 1 ... 0 pair at the end), ``s_setprio 0`` after the last.

    ``explicit_waits``: a partial ``lgkmcnt`` wait before each group (off by default: the
    compiler's waitcnt pass places exact per-MFMA partial waits itself, and explicit ones were
    merged into one lgkmcnt(0) when the scheduler moved MFMAs past them).  ``pin``:
    ``sched_group_barrier`` statements that force reads-then-MFMAs (off by default: clang-19
    keeps the IR order here anyway, checked in the disassembly by tests/test_gemm_pipelined.py,
    and with the pin the model put 128x128x64 one-stage at 73% MFMA busy instead of 93%)."""
    if len(reads_of) != len(mfmas_of):
        raise ValueError("pipelined_k_tile: one list of reads per list of MFMAs")
    counts = [_reads(r) for r in reads_of]
    n_mfma = sum(sum(1 for s in m if not isinstance(s, Comment)) for m in mfmas_of)
    out: List[Any] = [Comment("pipelined k-tile: every operand read first, then each k-group's "
                              "MFMAs after a wait for its own reads only")]
    for r in reads_of:
        out += r
    raised = False
    after = sum(counts)
    for g, m in enumerate(mfmas_of):
        after -= counts[g]
        if explicit_waits:
            out.append(WaitCnt(lgkm=min(after, LGKM_MAX)))
        for s in m:
            out.append(s)
            if not raised and isinstance(s, Mfma):
                # after the first MFMA, not before it: see the module docstring
                out.append(SetPrio(1))
                raised = True
    if not raised:
        out.append(SetPrio(1))
    out.append(SetPrio(0))
    if not pin:
        return out
    # the order the scheduler must keep: the reads, then the MFMA run
    if sum(counts):
        out.append(SchedGroupBarrier("ds_read", sum(counts), sync_id))
    if n_mfma:
        out.append(SchedGroupBarrier("mfma", n_mfma, sync_id))
    return out
