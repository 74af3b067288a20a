"""A small kernel IR: statements whose index math is sympy, printed by :mod:`kernels.emit`.

A :class:`Kernel` is a list of statements.  Every address, lane mapping, swizzle and predicate
is a sympy expression built by evaluating ``layoutalg`` layouts on index symbols (``tid``,
``block_m``, ``kt``, ...); the emitter prints those exact objects with
:func:`layoutalg.symbolic.to_c`, and the verification gate (:mod:`kernels.gate`) evaluates the
same objects with :func:`c_eval`, which follows the printed C's semantics (floor ``/`` and
``%``: ``to_c`` prints C's truncating operators only where they agree with floor, ``^``), so
what is checked is what is printed.

Registers live in :class:`Frag` arrays of short vectors (``half8 a_ld[2]``); a :class:`Regs`
names some elements of one.  Memory traffic is :class:`Access` (global or LDS, load or store, a
vector of ``width`` consecutive elements at ``offset``, optionally predicated); MFMAs are
:class:`Mfma`.  Control flow is :class:`Loop` (a counted loop over a symbol) and :class:`If`
(a block-uniform condition).  That is the whole language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from layoutalg.symbolic import Xor, index_symbol

__all__ = ["Frag", "Regs", "Param", "Shared", "Let", "LetThreadId", "THREAD_ID_AGAIN", "Comment",
           "Loop", "If", "Barrier",
           "SchedBarrier", "SchedGroupBarrier", "SetPrio", "WaitCnt", "SCHED_MASKS",
           "Access", "Mfma", "Scale", "ZeroFrag", "Kernel", "sym", "c_eval", "NonIntegerExpr",
           "walk", "swizzle_expr", "group_barrier", "is_group_barrier"]


def sym(name: str) -> sympy.Symbol:
    """A non-negative integer index symbol (printed as its name)."""
    return index_symbol(name)


def swizzle_expr(sw: Any, x: Any) -> Any:
    """``Swizzle(B, M, S)`` applied to ``x`` as ``x ^ (((x >> (M+S)) & (2^B-1)) << M)``.

    Same function as ``sw(x)`` (layoutalg's XOR swizzle) for S >= 0, written with one Xor so the
    printed C is short; the gate checks the printed form against the layout point by point.
    """
    if sw.bits == 0:
        return x
    if sw.shift < 0:
        return sw(x)  # rare direction: use layoutalg's own symbolic form
    if isinstance(x, sympy.Symbol):
        # the same tree as below, built without sympy's evaluation (nothing would simplify for
        # a bare symbol; 30x faster)
        fl = sympy.floor(sympy.Mul(x, sympy.Rational(1, 2 ** (sw.base + sw.shift))),
                         evaluate=False)
        hi = sympy.Mod(fl, sympy.Integer(2 ** sw.bits), evaluate=False)
        return Xor(x, sympy.Mul(sympy.Integer(2 ** sw.base), hi, evaluate=False),
                   evaluate=False)
    hi = sympy.Mod(sympy.floor(x / 2 ** (sw.base + sw.shift)), 2 ** sw.bits)
    return Xor(x, 2 ** sw.base * hi)


# ---- registers and declarations ------------------------------------------------------------

@dataclass(frozen=True)
class Frag:
    """A per-thread register array: ``count`` elements of ``dtype`` stored as vectors of
    ``width`` (``half8 a_ld[count/width]``)."""

    name: str
    dtype: str       # "f16", "bf16", "f32"
    count: int
    width: int = 1

    def __post_init__(self) -> None:
        if self.count % self.width:
            raise ValueError(f"frag {self.name}: {self.count} elements are not a whole number "
                             f"of {self.width}-wide vectors")

    def regs(self, idx: Sequence[int]) -> "Regs":
        return Regs(self, tuple(int(i) for i in idx))


@dataclass(frozen=True)
class Regs:
    """Elements ``idx`` (in order) of a frag: one vector operand of an access or an MFMA."""

    frag: Frag
    idx: Tuple[int, ...]


@dataclass(frozen=True)
class Param:
    """A pointer parameter.  ``layout``: the tensor's storage layout (logical coordinates ->
    element offset) when the kernel declares one, a contract with the host (e.g. a preshuffled
    B): every global access of the tensor must use it as its origin (the gate checks).
    ``buffer``: the tensor is also read through a raw buffer resource ``<name>_rsrc`` whose
    num_records is ``layout.cosize()`` elements (needs ``layout``)."""

    name: str
    dtype: str          # element dtype of the pointer
    const: bool = True
    layout: Any = field(default=None, compare=False, hash=False)
    buffer: bool = False

    @property
    def buffer_elems(self) -> int:
        """num_records of the buffer resource, in elements (0: no buffer resource)."""
        return int(self.layout.cosize()) if self.buffer and self.layout is not None else 0


@dataclass(frozen=True)
class Shared:
    """An LDS array of ``count`` elements."""

    name: str
    dtype: str
    count: int


# ---- statements ------------------------------------------------------------------------------

@dataclass
class Comment:
    text: str


@dataclass
class Let:
    """``const int name = expr;`` binds an index symbol for the statements that follow."""

    name: str
    expr: Any

    @property
    def symbol(self) -> sympy.Symbol:
        return sym(self.name)


# the printed form of LetThreadId's value: lane + 64 wave, both helpers of every header
THREAD_ID_AGAIN = "(int)(lagen_lane_id() + 64u * lagen_wave_id())"


class LetThreadId(Let):
    """``const int name = <the thread index, recomputed>;``: the value of ``tid``
    (``threadIdx.x`` of a one-dimensional block of whole waves), printed as
    :data:`THREAD_ID_AGAIN` (the lane from ``mbcnt`` plus 64 times the wave index from
    ``readfirstlane``).  The compiler cannot prove it equal to ``threadIdx.x``, so values
    computed from it after a loop are computed there instead of being kept in registers (or
    spilled) across the loop; every checker treats it as ``Let(name, tid)``."""

    def __init__(self, name: str) -> None:
        super().__init__(name, sym("tid"))


@dataclass
class Loop:
    """``for (int var = start; var < stop; ++var) body`` (start/stop are block-uniform)."""

    var: str
    start: Any
    stop: Any
    body: List[Any] = field(default_factory=list)
    unroll: Optional[int] = None     # 1: ``#pragma unroll 1`` (kept a loop); None: the compiler's
    #                                  choice.  Scheduling only: no effect on what is computed


@dataclass
class If:
    """``if (cond) body``; the condition must be uniform across the block."""

    cond: Any
    body: List[Any] = field(default_factory=list)


@dataclass
class Barrier:
    pass


def group_barrier(cond: Any) -> If:
    """``if (cond) __syncthreads();`` with a wave-uniform, block-varying ``cond`` (a function of
    ``tid // 64``): a barrier only some waves pass, which offsets them by one phase from the
    others (the ping-pong kernels' stagger; ``s_barrier`` matches the k-th barrier of every
    wave, wherever it stands).  The lockstep engines take it for no barrier at all (no element
    moves; fewer barriers only make their race check stricter); the per-wave phase model
    (:mod:`kernels.verify.wave_phases`, for specs naming ``wave_roles``) counts it per wave."""
    return If(cond, [Barrier()])


def is_group_barrier(s: Any) -> bool:
    """Is ``s`` an ``if`` whose whole body is one barrier (see :func:`group_barrier`)?"""
    return isinstance(s, If) and len(s.body) == 1 and isinstance(s.body[0], Barrier)


@dataclass
class SchedBarrier:
    """``__builtin_amdgcn_sched_barrier(0)``: the compiler may not move instructions across it
    (keeps prefetch loads ahead of the MFMAs).  No effect on semantics."""


# __builtin_amdgcn_sched_group_barrier instruction classes (LLVM AMDGPU's SchedGroupMask)
SCHED_MASKS = {"valu": 0x002, "salu": 0x004, "mfma": 0x008, "vmem": 0x010, "vmem_read": 0x020,
               "vmem_write": 0x040, "ds": 0x080, "ds_read": 0x100, "ds_write": 0x200}


@dataclass
class SchedGroupBarrier:
    """``__builtin_amdgcn_sched_group_barrier(mask, size, sync_id)``: the compiler's scheduler
    places ``size`` instructions of class ``what`` (a key of :data:`SCHED_MASKS`) here, in the
    order of the barriers with the same ``sync_id``.  Fixes the interleave of MFMA / LDS / global
    instructions that the scheduler would otherwise choose; no effect on semantics (the gate,
    the emulator and the CUDA flavour ignore it)."""

    what: str
    size: int
    sync_id: int = 0

    def __post_init__(self) -> None:
        if self.what not in SCHED_MASKS:
            raise ValueError(f"sched_group_barrier: unknown class {self.what!r}; use one of "
                             f"{', '.join(SCHED_MASKS)}")
        if not (type(self.size) is int and self.size >= 1):
            raise ValueError(f"sched_group_barrier: size must be a positive int, got "
                             f"{self.size!r}")

    @property
    def mask(self) -> int:
        return SCHED_MASKS[self.what]


@dataclass
class SetPrio:
    """``s_setprio``: the wave's issue priority (0-3) among the SIMD's waves.  Raised around a
    wave's MFMA run so that, once its operands have arrived, it keeps the matrix pipe while the
    other waves issue their loads; a scheduling hint only (no effect on results)."""

    prio: int

    def __post_init__(self) -> None:
        if self.prio not in (0, 1, 2, 3):
            raise ValueError(f"s_setprio {self.prio!r}: the priority must be 0, 1, 2 or 3")


@dataclass
class WaitCnt:
    """``s_waitcnt``: wait until at most ``vm`` vector-memory (global) and ``lgkm`` LDS/scalar
    operations of this wave are outstanding (None: do not wait on that counter).  A scheduling
    statement: it only waits, so it cannot change results; the compiler still inserts every wait
    correctness needs, and one explicit wait lets it drop the finer-grained ones it would emit
    before each consumer."""

    vm: Any = None
    lgkm: Any = None

    def immediate(self) -> int:
        """The gfx9 (CDNA) SIMM16: vmcnt in bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8."""
        vm = 63 if self.vm is None else int(self.vm)
        lg = 15 if self.lgkm is None else int(self.lgkm)
        if not (0 <= vm <= 63 and 0 <= lg <= 15):
            raise ValueError(f"s_waitcnt vmcnt({vm}) lgkmcnt({lg}) out of range")
        return (vm & 15) | ((vm >> 4) << 14) | (7 << 4) | (lg << 8)


@dataclass
class ZeroFrag:
    frag: Frag


@dataclass
class Access:
    """Load or store of ``width`` consecutive elements of ``buf`` at ``offset``.

    ``regs`` are the register elements moved (element j <-> ``buf[offset + j]``).  A predicated
    load that is off reads zeros; a predicated store that is off does nothing.  ``tag`` says what
    the access is for (``"A.copy"``, ``"A.frag"``, ``"C.store"``) so reports can name it;
    ``origin`` is the layoutalg object the offset was evaluated from (shown in comments and used
    by the gate's fidelity check).
    """

    kind: str                    # "load" | "store"
    space: str                   # "global" | "lds"
    buf: str
    offset: Any
    width: int
    regs: Regs
    pred: Any = None
    tag: str = ""
    origin: Any = None
    coords: Tuple[Any, ...] = ()  # logical coordinates whose image under origin is offset
    # a buffer load (global, load, 16 bytes): the wave-uniform part of the offset, an SGPR
    # soffset; ``offset`` is then the per-lane VGPR voffset and the element read is at
    # offset + soffset (both unsigned on the hardware: the gate proves each >= 0)
    soffset: Any = None

    @property
    def total_offset(self) -> Any:
        """The element offset the access reads or writes (voffset + soffset for a buffer
        load)."""
        return self.offset if self.soffset is None else self.offset + self.soffset

    def __post_init__(self) -> None:
        if len(self.regs.idx) != self.width:
            raise ValueError(f"access {self.tag}: {len(self.regs.idx)} registers for a "
                             f"{self.width}-wide vector")
        if self.soffset is not None and (self.space, self.kind) != ("global", "load"):
            raise ValueError(f"access {self.tag}: a scalar offset (buffer load) needs a global "
                             "load")


@dataclass
class Mfma:
    """``acc = mfma(a, b, acc)`` with the instruction of ``spec``.

    ``swap_ab``: the instruction takes ``b`` as its srcA and ``a`` as its srcB, so it computes
    the tile transposed, ``D^T = B^T A^T`` (a square MFMA's A and B operand layouts are each
    other's transpose, so the same registers serve): accumulator element (lane, item) then
    holds ``C[j][i]`` where the spec's C layout says ``(i, j)``.  A GEMM uses it to put each
    lane's accumulator values along N, next to each other in a row-major C (wide stores)."""

    spec: Any
    acc: Regs
    a: Regs
    b: Regs
    tag: str = ""
    swap_ab: bool = False


@dataclass
class Scale:
    """``frag[i] *= product of factors`` for every element of ``frag`` (epilogue scaling, e.g.
    an fp8 GEMM's per-tensor ``scale_a * scale_b``).  A factor of one register multiplies every
    element; a factor of ``frag.count`` registers is element-wise (per-row/column scales).  Index-free: it changes values, never
    which element goes where, so the gate's dataflow is unchanged by it; the emulator checks
    the values."""

    frag: Frag
    factors: Tuple["Regs", ...]


@dataclass
class Kernel:
    name: str
    params: List[Param]
    shared: List[Shared]
    frags: List[Frag]
    body: List[Any]
    block: int                                 # threads per block (1-D)
    grid: Tuple[int, int, int]                 # blocks (x, y, z)
    grid_symbols: Tuple[str, ...] = ("block_m", "block_n")
    header: List[str] = field(default_factory=list)   # comment lines printed above the kernel
    meta: Dict[str, Any] = field(default_factory=dict)
    # > 0: LAGEN_WAVES_PER_EU(n) on the kernel (amdgpu_waves_per_eu: a budget of 512 / n
    # registers per lane on gfx942; nothing in the emulator and the CUDA flavour)
    waves_per_eu: int = 0
    # > 0: CUDA __launch_bounds__(block, min_blocks) (ptxas may then use up to 64K / (block x
    # min_blocks) registers per thread instead of its occupancy-driven guess)
    min_blocks: int = 0
    # what the kernel must compute (a kernels.verify.spec.KernelSpec): tensors with named
    # dimensions and roles, contractions, softmax / split features, symbols, verification domain
    spec: Any = None


def walk(stmts: Sequence[Any]):
    """Every statement, depth first (loop and if bodies included; a compound statement's
    accesses, e.g. the load and store of a ``cp.async``, right after it)."""
    for s in stmts:
        yield s
        if isinstance(s, (Loop, If)):
            yield from walk(s.body)
        elif hasattr(s, "accesses"):
            yield from s.accesses()


# ---- evaluation with the printed C's semantics -------------------------------------------------

class NonIntegerExpr(ValueError):
    """An expression whose printed C would not be integer arithmetic (e.g. a rational factor)."""


def _cdiv(a: Any, b: Any) -> Any:
    """Integer division as the printed C computes it: ``floor(a / b)``.

    :func:`layoutalg.symbolic.to_c` prints ``floor(n/d)`` as C's truncating ``(n) / d`` only
    where ``n >= 0`` and ``d > 0`` are proven (where the two agree) and as a floor-corrected
    form elsewhere, so the printed C always has sympy's floor semantics.
    """
    if type(a) is int and type(b) is int:
        return a // b
    return np.floor_divide(np.asarray(a, dtype=np.int64), b)


def _cmod(a: Any, b: Any) -> Any:
    """Remainder as the printed C computes it: sympy's ``Mod`` (the sign of the divisor)."""
    if type(a) is int and type(b) is int:
        return a % b
    return np.remainder(np.asarray(a, dtype=np.int64), b)


def _fold(fn: Any, xs: Any) -> Any:
    """``fn`` applied left to right over ``xs`` (elementwise numpy binary ops of n-ary sympy
    And / Or / Min / Max)."""
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


def _and(*xs: Any) -> Any:
    return _fold(np.logical_and, xs)


def _or(*xs: Any) -> Any:
    return _fold(np.logical_or, xs)


_COMPILED: Dict[Any, Any] = {}
_RELOPS = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


def c_compile(expr: Any):
    """A Python function ``env -> value`` computing ``expr`` as its printed C does (cached).

    Same semantics as :func:`c_eval` (which calls it); raises :class:`NonIntegerExpr` at
    compile time for anything that would not print as integer C.
    """
    e = sympy.sympify(expr)
    fn = _COMPILED.get(e)
    if fn is not None:
        return fn
    syms: List[Any] = []

    def g(e: Any) -> str:
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            if e not in syms:
                syms.append(e)
            return f"env[_s[{syms.index(e)}]]"
        if isinstance(e, sympy.logic.boolalg.BooleanTrue):
            return "True"
        if isinstance(e, sympy.logic.boolalg.BooleanFalse):
            return "False"
        if e.is_Rational or e.is_Float:
            raise NonIntegerExpr(f"non-integer constant {e} in index expression")
        if e.is_Add:
            return "(" + " + ".join(g(a) for a in e.args) + ")"
        if e.is_Mul:
            return "(" + " * ".join(g(a) for a in e.args) + ")"
        if isinstance(e, sympy.floor):
            num, den = e.args[0].as_numer_denom()
            return g(num) if den == 1 else f"_cdiv({g(num)}, {g(den)})"
        if isinstance(e, sympy.Mod):
            return f"_cmod({g(e.args[0])}, {g(e.args[1])})"
        if isinstance(e, Xor):
            return f"_xor({g(e.args[0])}, {g(e.args[1])})"
        if isinstance(e, (sympy.Min, sympy.Max)):
            fn = "_min" if isinstance(e, sympy.Min) else "_max"
            return f"{fn}(" + ", ".join(g(a) for a in e.args) + ")"
        if isinstance(e, sympy.And):
            return "_and(" + ", ".join(g(a) for a in e.args) + ")"
        if isinstance(e, sympy.Or):
            return "_or(" + ", ".join(g(a) for a in e.args) + ")"
        if isinstance(e, sympy.Not):
            return f"_not({g(e.args[0])})"
        if isinstance(e, sympy.core.relational.Relational):
            return f"({g(e.lhs)} {_RELOPS[e.rel_op]} {g(e.rhs)})"
        raise NonIntegerExpr(f"cannot evaluate {type(e).__name__} in index expression {e}")

    body = g(e)
    ns = {"_cdiv": _cdiv, "_cmod": _cmod, "_xor": np.bitwise_xor, "_and": _and, "_or": _or,
          "_min": lambda *x: _fold(np.minimum, x), "_max": lambda *x: _fold(np.maximum, x),
          "_not": np.logical_not, "_s": syms}
    fn = eval(f"lambda env: {body}", ns)  # noqa: S307 - generated from a sympy tree above
    _COMPILED[e] = fn
    return fn


def c_eval(expr: Any, env: Dict[sympy.Symbol, Any]) -> Any:
    """Evaluate ``expr`` as the C that :func:`layoutalg.symbolic.to_c` prints for it.

    ``env`` maps symbols to ints or int64 numpy arrays (broadcast together): ``floor(n/d)``
    and ``Mod`` have floor semantics (as the printed C has: C's ``/``, ``%`` where the
    dividend is proven >= 0, a corrected form elsewhere), :class:`Xor` is ``^``.  Raises
    :class:`NonIntegerExpr` for anything that would not print as integer C (a rational or
    float coefficient, a power, an unknown function) and ``KeyError`` for an unbound symbol.
    """
    return c_compile(expr)(env)
