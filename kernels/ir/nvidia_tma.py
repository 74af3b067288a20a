"""Hopper TMA, mbarrier and warpgroup-role statements of the kernel IR (issue 20 item 1): what
the TMA GEMM (:mod:`kernels.nvidia.wgmma_tma_ir`) is built from.

A kernel with these statements runs **different programs on different warpgroups**: its body
holds :class:`RoleBranch` statements (an ``if`` on the warpgroup index, uniform per warpgroup)
whose bodies are a role's program - one producer warpgroup (one thread issuing TMA boxes) and
one or more consumer warpgroups (wgmma).  The lockstep engines refuse that; the verifier runs
such kernels on its per-role phase model (:mod:`kernels.verify.gate_tma`): every warpgroup is
an agent executing its role's statements, the agents meet only at mbarriers, and
happens-before is tracked with vector clocks through the barriers' phases.

The rules (each reported under the named check in brackets; docs/VERIFY.md, "The TMA GEMM"):

* :class:`MbarrierInit` ``(bar, count)``: every barrier of the array ``bar`` expects ``count``
  arrivals per phase; initialised by thread 0 and published by :class:`MbarrierInitFence`
  (``fence.mbarrier_init`` + ``__syncthreads``) before any role uses it.  An arrive, wait or
  box on an uninitialised barrier, or an index outside the array, is refused
  [``mbarrier_protocol``].
* :class:`MbarrierExpectTx` ``(bar, index, bytes)``: ``mbarrier.arrive.expect_tx`` - one
  arrival, and the phase also waits for ``bytes`` transaction bytes.  The boxes completing on
  the phase must bring exactly those bytes: too many and a box lands in the next phase (its
  reader is not ordered after it), too few and the phase never completes [``mbarrier_protocol``,
  ``lds_races``].
* :class:`MbarrierArrive` ``(bar, index, per_warp)``: one arrival (``per_warp``: lane 0 of each
  warp after ``__syncwarp``, i.e. 4 per warpgroup).  More arrivals than the count in one phase,
  or a phase left part-arrived when the kernel ends, is refused [``mbarrier_protocol``].
* :class:`MbarrierWait` ``(bar, index, parity)``: ``mbarrier.try_wait.parity`` loop: returns once
  the barrier's current phase parity differs from ``parity`` (a fresh barrier passes parity 1).
  Every wait must complete on every schedule (no deadlock), and each wait must observe the next
  phase of that barrier after the one the agent saw last: a wait that observes a phase it
  already saw (parity not advanced) or skips one (parity two phases late) is refused
  [``mbarrier_protocol``].  What a wait orders: everything the arrivals of the observed phase
  had done before arriving, and the boxes that completed on it.
* :class:`TmaLoad` ``(tmap, c0, c1, dst, offset, bar, index)``: ``cp.async.bulk.tensor.2d``
  of the map's box at (``c0`` inner, ``c1`` outer) into ``dst`` at element ``offset`` (a
  multiple of the 1024-byte swizzle repeat), box element ``(r, c)`` at
  :func:`kernels.nvidia.tma.tma_tile_addresses` (the 128-byte swizzle model), elements outside
  the tensor zero-filled; completes the box's bytes on the barrier's current phase.  A box
  that overwrites an element some consumer's wgmma read, unless the producer has since waited
  on a phase that consumer arrived on after a ``wgmma.wait_group`` retired that read, is a race
  [``lds_races``]; a wgmma reading an element whose box completed on a phase the consumer has
  not waited on is a race [``lds_races``]; a wgmma's operand elements must be the rows / columns
  and k of its accumulator [``lane_mfma_operands``].
* :class:`TmaStore` ``(tmap, src, offset, c0, c1)``: ``cp.async.bulk.tensor.2d`` shared ->
  global (clipped at the tensor's edges) of one thread, in its bulk group closed by
  :class:`BulkCommit`; :class:`BulkWait` ``(read)`` waits for the committed groups (``read``:
  their shared reads only).  The shared source must have been written through the generic
  proxy, fenced (:class:`~kernels.ir.nvidia_wgmma.FenceProxyAsync`) and published by a
  barrier of the writers (:class:`NamedBarrier`) before the store; it may be rewritten only
  after a ``BulkWait`` and a barrier; the kernel must not end with stores unwaited
  [``lds_races``].  Each global element stored must be its own accumulator, summed over all of
  K once [``lane_accumulator_writeback``], and stored once over the grid [``coverage``].
* :class:`NamedBarrier` ``(id, threads)``: ``bar.sync id, threads`` among one warpgroup's
  threads (``threads`` = 128, ``id`` >= 1 and distinct per warpgroup).  Across warpgroups
  (``threads`` a multiple of 128 above it, or ``arrive``: ``bar.arrive id, threads``, which
  counts without waiting) it is a barrier of ``threads / 128`` warpgroup arrivals per phase,
  ids 1..15: each warpgroup arrives at most once per phase, a ``bar.sync`` returns once its
  phase completed and orders after every arrival of that phase, one id keeps one thread count
  and is never also a warpgroup's own; a phase left part-arrived at the end, or a sync that
  never completes, is refused [``mbarrier_protocol``].  (The warp-specialised prefill's
  ping-pong: each consumer ``bar.sync`` its turn's id and ``bar.arrive`` the other's.)
* :class:`Setmaxnreg` ``(inc, regs)``: ``setmaxnreg.{inc,dec}.sync.aligned``, the first
  statement of a role, warpgroup-wide: ``regs`` a multiple of 8 in 24..256, ``dec`` at most and
  ``inc`` at least the launch's per-thread budget, the roles' totals within the 64K-register
  file [``register_budget``].
* :class:`VarInit` / :class:`VarSet` ``(name, expr)``: a role's loop-carried scalar (the
  ring's stage, phase parity and previous stage, advanced once per k tile as the template's
  counters are).  The per-role model runs them as the rebindings they are, so every wait's
  parity and every box's stage above is checked at the values they produce; the lockstep
  engines refuse them (``SpecError``).
* :class:`RoleBranch` ``(role, first, count, body)``: ``if (first <= wg < first + count)``;
  :class:`LeaderOnly`: ``if (tid % 128 == 0)`` inside a role (the one thread that issues TMA and
  bulk operations).

The printer (:mod:`kernels.printer.cuda_tma`) prints them with the PTX helpers of
:data:`kernels.nvidia.tma.TMA_HELPERS` (one text with the string templates; the ``declarations``
check compares it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Tuple

import sympy

from .core import If, Let, sym

__all__ = ["TensorMap", "IntParam", "MbarrierInit", "MbarrierInitFence", "MbarrierExpectTx",
           "MbarrierArrive", "MbarrierWait", "TmaLoad", "TmaStore", "BulkCommit", "BulkWait",
           "NamedBarrier", "Setmaxnreg", "RoleBranch", "LeaderOnly", "TmaPrefetch",
           "VarInit", "VarSet", "TMA_STATEMENTS", "WARPGROUP"]

WARPGROUP = 128


@dataclass(frozen=True)
class TensorMap:
    """A 2-D tiled tensor map kernel parameter ``name`` (``const void*``, 64-byte aligned, the
    host's ``cuTensorMapEncodeTiled``) over the spec tensor ``tensor`` stored row-major with
    ``outer`` rows and ``inner`` contiguous columns (sympy expressions of the runtime sizes),
    read or written in boxes of ``box_inner x box_outer`` 16-bit elements with the 128-byte
    swizzle.  ``dims``: the spec dimension names of (inner, outer), e.g. ``("k", "m")``.

    A 4-D map (attention's ``(head_dim, seq, head, batch)``) adds ``planes``, the extents of
    the dimensions past the outer one (``dims`` then names all four); its boxes are one plane
    (one (head, batch)) deep, each dimension zero-filled past its own extent (rows past one
    (batch, head)'s sequence arrive as zeros, not as the next head's rows); loaded by
    ``lg_tma_load_4d``."""

    name: str
    tensor: str
    dims: Tuple[str, ...]
    inner: Any
    outer: Any
    box_inner: int
    box_outer: int
    dtype: str = "f16"
    planes: Tuple[Any, ...] = ()

    @property
    def box_bytes(self) -> int:
        return 2 * self.box_inner * self.box_outer

    def __post_init__(self) -> None:
        if len(self.dims) != 2 + len(self.planes) or len(self.planes) not in (0, 2):
            raise ValueError(f"tensor map {self.name}: dims {self.dims} must name (inner, "
                             f"outer) and one per plane extent {self.planes} (2-D or 4-D)")
        if self.box_inner * 2 != 128 or not (1 <= self.box_outer <= 256):
            raise ValueError(f"tensor map {self.name}: boxes of one 128-byte swizzle row "
                             f"(64 16-bit elements) by 1..256 rows are modelled, got "
                             f"({self.box_inner}, {self.box_outer})")


@dataclass(frozen=True)
class IntParam:
    """A by-value ``int`` kernel argument (a runtime size), the symbol ``name`` in the IR."""

    name: str
    dtype: str = "i32"
    ctype: str = "int"


@dataclass
class MbarrierInit:
    """Thread 0 initialises ``bar[0..n)`` to ``count`` arrivals per phase."""

    bar: str
    n: int
    count: int

    def __post_init__(self) -> None:
        if not (type(self.count) is int and self.count >= 1 and self.n >= 1):
            raise ValueError(f"mbarrier {self.bar}: n and count must be positive ints, got "
                             f"{self.n!r}, {self.count!r}")


@dataclass
class MbarrierInitFence:
    """``fence.mbarrier_init`` by thread 0, then ``__syncthreads()``: the initialised barriers
    are visible to every thread."""


@dataclass
class MbarrierExpectTx:
    """``mbarrier.arrive.expect_tx`` on ``bar[index]``: one arrival plus ``bytes``
    transaction bytes the phase waits for."""

    bar: str
    index: Any
    bytes: int


@dataclass
class MbarrierArrive:
    """``mbarrier.arrive`` on ``bar[index]``: one arrival by this thread, or (``per_warp``) by
    lane 0 of each warp after ``__syncwarp()``."""

    bar: str
    index: Any
    per_warp: bool = True


@dataclass
class MbarrierWait:
    """Spin on ``mbarrier.try_wait.parity`` of ``bar[index]`` until the phase of parity
    ``parity`` (an expression, 0 or 1) has completed."""

    bar: str
    index: Any
    parity: Any


@dataclass
class TmaPrefetch:
    """``prefetch.tensormap`` of a map parameter (a hint)."""

    tmap: TensorMap


@dataclass
class TmaLoad:
    """One box of ``tmap`` at (``c0`` inner, ``c1`` outer) -> shared ``dst`` at element
    ``offset``, completing its bytes on ``bar[index]``; ``coords``: a 4-D map's plane
    coordinates (one per ``tmap.planes``)."""

    tmap: TensorMap
    c0: Any
    c1: Any
    dst: str
    offset: Any
    bar: str
    index: Any
    tag: str = ""
    coords: Tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if len(self.coords) != len(self.tmap.planes):
            raise ValueError(f"{self.tag or 'TmaLoad'}: {len(self.coords)} plane coordinates "
                             f"for tensor map {self.tmap.name}'s {len(self.tmap.planes)} planes")


@dataclass
class TmaStore:
    """One box of shared ``src`` at element ``offset`` -> ``tmap`` at (``c0``, ``c1``),
    clipped at the tensor's edges; joins this thread's open bulk group."""

    tmap: TensorMap
    src: str
    offset: Any
    c0: Any
    c1: Any
    tag: str = ""

    def __post_init__(self) -> None:
        if self.tmap.planes:
            raise ValueError(f"{self.tag or 'TmaStore'}: stores through a 4-D tensor map "
                             f"({self.tmap.name}) are not modelled")


@dataclass
class BulkCommit:
    """``cp.async.bulk.commit_group``."""


@dataclass
class BulkWait:
    """``cp.async.bulk.wait_group[.read] 0``: every committed bulk group has read its shared
    source (``read``) or completed."""

    read: bool = True


@dataclass
class NamedBarrier:
    """``bar.sync id, threads``; ``arrive``: ``bar.arrive id, threads`` (count this
    warpgroup's threads, do not wait)."""

    id: Any
    threads: int
    arrive: bool = False


@dataclass
class Setmaxnreg:
    """``setmaxnreg.inc`` / ``.dec`` to ``regs`` registers per thread (warpgroup-wide)."""

    inc: bool
    regs: int

    def __post_init__(self) -> None:
        if not (type(self.regs) is int):
            raise ValueError(f"setmaxnreg: regs must be an int, got {self.regs!r}")


class RoleBranch(If):
    """``if (first <= wg && wg < first + count) { body }``: the program of role ``role``,
    run by warpgroups ``first .. first + count - 1`` (``wg = tid / 128``, uniform per
    warpgroup)."""

    def __init__(self, role: str, first: int, count: int, body: List[Any]) -> None:
        wg = sym("wg")
        cond = sympy.And(wg >= first, wg < first + count) if first else wg < count
        super().__init__(cond, list(body))
        self.role, self.first, self.count = role, first, count


class LeaderOnly(If):
    """``if (tid % 128 == 0) { body }``: statements of the warpgroup's first thread (TMA
    issue, bulk groups)."""

    def __init__(self, body: List[Any]) -> None:
        super().__init__(sympy.Eq(sympy.Mod(sym("tid"), WARPGROUP), 0), list(body))


class VarInit(Let):
    """``int name = expr;``: a role's loop-carried scalar (uniform per warpgroup), e.g. a
    ring's stage and phase, declared before the loops that update it with :class:`VarSet`.
    To every checker it is a :class:`~kernels.ir.core.Let` (the per-role model binds the value
    in the agent's environment, which the later statements read and ``VarSet`` rebinds);
    only the printed form differs."""


class VarSet(Let):
    """``name = expr;``: a new value of the :class:`VarInit` variable ``name`` (``expr`` may
    read the old one), e.g. a ring position advanced once per k tile.  The per-role model runs
    it as the rebinding it is, so the mbarrier rules check the stage / parity values it
    produces on every iteration; the lockstep engines refuse kernels holding it
    (:func:`kernels.verify.verify`: their closed forms assume a ``Let`` is a function of the
    loop indices)."""


TMA_STATEMENTS = (MbarrierInit, MbarrierInitFence, MbarrierExpectTx, MbarrierArrive,
                  MbarrierWait, TmaPrefetch, TmaLoad, TmaStore, BulkCommit, BulkWait,
                  NamedBarrier, Setmaxnreg)
