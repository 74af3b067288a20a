"""A typed kernel specification: what a kernel must compute, over which tensors and domain.

A :class:`KernelSpec` is what the verifier (:func:`kernels.verify.verify`) reads to know *what*
to prove about a kernel's IR; the IR says *how* the kernel does it.  The checks never name a
tensor: they ask the spec for "the left operand of the contraction that produces the scores",
"the tensors indexed by the kv head", "the outputs".  Adding a kernel family therefore needs a
builder and a spec, not a verifier.

Invariants (checked when a spec is made; a violation raises :class:`SpecError` naming what was
wrong and what would be valid):

* every tensor has a unique name and one of the roles ``input`` (read only), ``output``
  (written, what the caller receives), ``workspace`` (written by one kernel of a program and
  read by another, e.g. split-KV partials); its ``dims`` name, in order, the dimensions of the
  **coordinates** the IR's accesses of it carry (``Access.coords``), so position ``p`` of a
  coordinate tuple is dimension ``dims[p]``;
* every dimension a tensor names is declared in ``dims`` (with an extent: an int, the name of
  a runtime symbol, or ``None`` when only the layouts know it); dimension names are unique;
* a :class:`Contraction` ``out[free_l, free_r] = sum_over lhs[...] rhs[...]`` names two operands
  that are tensors or results of earlier contractions / the softmax (intermediates), reduces
  over dims both operands carry, and (when ``out`` is a tensor) ``out`` carries exactly the
  operands' free dims;
* an :class:`OnlineSoftmax` turns a contraction's result (``scores``) into ``probs`` consumed by
  a later contraction, over the key dimension ``keys``; ``lse`` / ``stats`` are written tensors;
* a :class:`SplitPartition` (split kernel) needs an online softmax that writes ``stats``; a
  :class:`SplitMerge` (combine kernel) reads its ``partials`` (workspace or input tensors) and
  writes outputs;
* runtime symbols have ``lo <= hi``; the domain is ``every_block`` (the block-translation lemma
  carries one block's verdict to all; the kernel's sizes are compile-time) or ``instances`` (a
  function of the IR returning the launches the verifier enumerates), never both.

Room for kernels being added in parallel: a tensor's ``dtype`` is checked against the known
element types (any name starting ``fp8`` / ``f8`` / ``bf8`` is an 8-bit float variant),
``via_lds=False`` says a tensor goes global -> registers without LDS (preshuffled B), and
``wave_roles`` names the wave groups of a ping-pong kernel, in wave order (equal runs of
consecutive waves): it calls for the ``wave_roles`` rules (:mod:`kernels.verify.wave_phases`:
barrier balance, role schedule, row ownership, per-wave-phase LDS races).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Optional, Sequence, Tuple, Union

from ..errors import KernelError

__all__ = ["SpecError", "Dim", "TensorSpec", "Contraction", "OnlineSoftmax", "SplitPartition",
           "SplitMerge", "TicketProtocol", "Symbol", "Domain", "KernelSpec", "ROLES", "DTYPES", "MFMA_OPERANDS",
           "gemm_spec_from_params"]

ROLES = ("input", "output", "workspace")
DTYPES = ("f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "i8",
          "i32")
# the operand names of an MFMA *instruction* (mfma_specs' ``tv_layout("A")``), not tensors
MFMA_OPERANDS = ("A", "B", "C")


class SpecError(KernelError):
    """An ill-formed kernel spec (unknown dimension, role, tensor or feature)."""

    exit_code = 2


@dataclass(frozen=True)
class Dim:
    """A named dimension; ``extent`` is an int, a runtime symbol's name, or None (unknown
    here: the tensor's layout bounds it)."""

    name: str
    extent: Union[int, str, None] = None


@dataclass(frozen=True)
class TensorSpec:
    """A tensor the kernel reads or writes (a pointer parameter of the same name)."""

    name: str
    dims: Tuple[str, ...]
    role: str
    dtype: str
    via_lds: bool = True          # False: global -> registers directly (e.g. preshuffled B)


@dataclass(frozen=True)
class Contraction:
    """``out = sum over `over` of lhs * rhs`` (an MFMA-computed product).

    ``span`` is how many values of the reduced index the kernel's loops visit (the reduction
    extent rounded up to its tiles), which bounds the dataflow check's per-element index sets;
    None: the extent of the reduced dimension."""

    out: str
    lhs: str
    rhs: str
    over: Tuple[str, ...]
    span: Optional[int] = None


@dataclass(frozen=True)
class OnlineSoftmax:
    """``probs = softmax(scores)`` row by row over the ``keys`` dimension, computed online
    (running max, rescaled accumulators), with masking of keys past the sequence (and the
    causal diagonal); ``lse`` (optional) is the written log-sum-exp tensor; ``stats`` (split
    kernel) the written (max, sum) workspace tensors, and then the product is stored
    unnormalised.  ``key_tile`` is the keys per loop step; ``head_dim`` the dimension of the
    output's columns."""

    scores: str
    probs: str
    keys: str
    head_dim: str
    key_tile: int
    lse: Optional[str] = None
    stats: Optional[Tuple[str, str]] = None


@dataclass(frozen=True)
class SplitPartition:
    """Split kernel: the partials over ``over`` (the split dimension) partition the keys of each
    (batch, head); ``stat_frags`` are the registers whose stored stats carry each partial's key
    set."""

    over: str
    stat_frags: Tuple[str, ...] = ()


@dataclass(frozen=True)
class SplitMerge:
    """Combine kernel: ``out`` (and ``lse``) merge the ``partials`` of every split of ``over``
    by log-sum-exp: ``(O, max, sum)`` (unnormalised O, merged by ``MergeStep``) or ``(O,
    LSE)`` (normalised O and its base-2 log-sum-exp, merged by :mod:`kernels.ir.lse_merge`);
    ``key_tile`` is the split kernel's keys per step (the key sets the partials carry are
    tracked in whole tiles)."""

    partials: Tuple[str, ...]
    out: str
    over: str
    head_dim: str
    lse: Optional[str] = None
    key_tile: int = 64


@dataclass(frozen=True)
class TicketProtocol:
    """An inter-block ticket (:mod:`kernels.ir.ticket`): the blocks of a group store their
    ``partials``, take a ticket on ``counter``, and the last arrival merges them into
    ``output``.  The kernel is the composition of ``parts(kernel_ir)`` - ``(name, IR, printed
    text)`` of the kernels whose verified statements it runs (each proved by the one verifier
    against its own spec; the callable raises :class:`~kernels.errors.KernelError` when the
    kernel does not hold their statements) - and the ticket, proved by the ticket rules
    (:mod:`kernels.verify.ticket_rules`) at the spec's instances; ``printed(kernel_ir,
    source)`` reads the printed ticket lines back (raises KernelError on a mismatch)."""

    counter: str
    partials: Tuple[str, ...]
    output: str
    parts: Callable[[Any], Sequence[Tuple[str, Any, str]]]
    printed: Callable[[Any, str], None]


@dataclass(frozen=True)
class Symbol:
    """A runtime symbol (a scalar argument) and the range of values the kernel accepts."""

    name: str
    lo: int
    hi: int


@dataclass(frozen=True)
class Domain:
    """Where the verdicts hold: ``every_block`` (every block of the compile-time grid, by the
    block-translation lemma where its symbolic conditions hold, else by enumeration) or
    ``instances`` (the launches ``instances(kernel_ir)`` returns, each enumerated) or
    ``launches`` (each of those launches substituted into the IR and proved by the every-block
    engine: :meth:`at_launches`)."""

    kind: str
    instances: Optional[Callable[[Any], Sequence[Any]]] = None

    @staticmethod
    def every_block() -> "Domain":
        return Domain("every_block")

    @staticmethod
    def on_instances(make: Callable[[Any], Sequence[Any]]) -> "Domain":
        return Domain("instances", make)

    @staticmethod
    def at_launches(make: Callable[[Any], Sequence[Any]]) -> "Domain":
        """The launches ``make(kernel_ir)`` returns
        (:class:`~kernels.verify.concrete_instances.RuntimeInstance`), each checked by the
        every-block engine on the kernel with the launch's values substituted
        (:mod:`kernels.verify.concrete_instances`)."""
        return Domain("launches", make)


@dataclass(frozen=True)
class KernelSpec:
    """What one kernel computes; see the module docstring for the invariants.

    ``head_anchor`` (attention kernels): the input whose (batch, head) coordinates fix the
    (batch, head) every other access of the thread must use (GQA: the tensors carrying the
    ``kv_head`` dimension are read at head // group); ``head_symbols`` the IR symbols that carry
    the (batch, head) of a block (the grid symbol and the lets computed from it), which
    ``block_independence`` requires to enter global coordinates only."""

    name: str
    dims: Tuple[Dim, ...]
    tensors: Tuple[TensorSpec, ...]
    contractions: Tuple[Contraction, ...] = ()
    softmax: Optional[OnlineSoftmax] = None
    split_partition: Optional[SplitPartition] = None
    split_merge: Optional[SplitMerge] = None
    symbols: Tuple[Symbol, ...] = ()
    domain: Domain = field(default_factory=Domain.every_block)
    head_anchor: Optional[str] = None
    kv_head: Optional[str] = None
    head_symbols: Tuple[str, ...] = ()
    wave_roles: Tuple[str, ...] = ()
    # warpgroup-specialised kernels (TMA producer / wgmma consumers): the role names of the IR's
    # RoleBranch statements; verified on the per-role phase model (kernels.verify.gate_tma)
    warpgroup_roles: Tuple[str, ...] = ()
    # which (batch, head) a thread may write, given the head its anchor read: "own" (that one)
    # or "kv_group" (any query head of its (batch, kv head): a block of several heads merging
    # its warps through shared memory; the dataflow proves the row each stored element holds)
    store_heads: str = "own"
    # a kernel holding ticket statements (AtomicTicket ...) declares its protocol here: the
    # verifier then runs the ticket rules and refuses ticket statements without it
    ticket: Optional[TicketProtocol] = None

    def __post_init__(self) -> None:
        _validate(self)

    # ---- look-ups ---------------------------------------------------------------------------
    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise SpecError(f"spec {self.name}: no tensor {name!r} (tensors: "
                        f"{', '.join(t.name for t in self.tensors)})")

    def has_tensor(self, name: str) -> bool:
        return any(t.name == name for t in self.tensors)

    def dim(self, name: str) -> Dim:
        for d in self.dims:
            if d.name == name:
                return d
        raise SpecError(f"spec {self.name}: no dimension {name!r} (dimensions: "
                        f"{', '.join(d.name for d in self.dims)})")

    def by_role(self, role: str) -> Tuple[TensorSpec, ...]:
        if role not in ROLES:
            raise SpecError(f"spec {self.name}: unknown role {role!r} (valid: {', '.join(ROLES)})")
        return tuple(t for t in self.tensors if t.role == role)

    def with_dim(self, dim: Optional[str]) -> FrozenSet[str]:
        """The names of the tensors that carry dimension ``dim`` (none for None)."""
        return frozenset(t.name for t in self.tensors if dim is not None and dim in t.dims)

    def position(self, tensor: str, dim: str) -> int:
        """The coordinate position of ``dim`` in ``tensor``'s accesses."""
        t = self.tensor(tensor)
        if dim not in t.dims:
            raise SpecError(f"spec {self.name}: tensor {tensor} has no dimension {dim!r} "
                            f"(its dimensions: {t.dims})")
        return t.dims.index(dim)

    def producer(self, name: str) -> Contraction:
        """The contraction whose result is ``name``."""
        for c in self.contractions:
            if c.out == name:
                return c
        raise SpecError(f"spec {self.name}: no contraction produces {name!r}")

    def consumer(self, name: str) -> Contraction:
        """The contraction that multiplies ``name`` as its left operand."""
        for c in self.contractions:
            if c.lhs == name:
                return c
        raise SpecError(f"spec {self.name}: no contraction consumes {name!r}")

    def free_dims(self, c: Contraction, operand: str) -> Tuple[str, ...]:
        """The dimensions of a tensor operand of ``c`` that ``c`` does not reduce."""
        return tuple(d for d in self.tensor(operand).dims if d not in c.over)

    def extent(self, dim: str, values: Optional[Dict[str, int]] = None) -> Optional[int]:
        """``dim``'s extent: its int, or its symbol's value in ``values`` (None if unknown)."""
        e = self.dim(dim).extent
        if isinstance(e, str):
            return None if values is None else int(values[e])
        return e

    def elements(self, tensor: str, values: Dict[str, int]) -> Optional[int]:
        """How many elements ``tensor`` has at the symbol ``values`` (None if an extent is
        unknown)."""
        n = 1
        for d in self.tensor(tensor).dims:
            e = self.extent(d, values)
            if e is None:
                return None
            n *= e
        return n

    def features(self) -> FrozenSet[str]:
        """What the spec asks the verifier to prove beyond what every kernel gets: the keys of
        :data:`kernels.verify.rules.RULES`' ``needs``."""
        out = set()
        if self.contractions:
            out.add("contraction")
        if self.softmax is not None:
            out.add("online_softmax")
        if self.split_partition is not None:
            out.add("split_partition")
        if self.split_merge is not None:
            out.add("split_merge")
        if self.head_anchor is not None:
            out.add("heads")
        if self.wave_roles:
            out.add("wave_roles")
        if self.warpgroup_roles:
            out.add("warpgroup_roles")
        if self.ticket is not None:
            out.add("ticket")
        out.add(self.domain.kind)
        return frozenset(out)


# ---------------------------------------------------------------------------- validation

def _validate(s: KernelSpec) -> None:
    where = f"spec {s.name}"
    dnames = [d.name for d in s.dims]
    if len(set(dnames)) != len(dnames):
        raise SpecError(f"{where}: dimension names repeat ({dnames})")
    for d in s.dims:
        if isinstance(d.extent, int) and d.extent < 0:
            raise SpecError(f"{where}: dimension {d.name} has a negative extent {d.extent}")
    tnames = [t.name for t in s.tensors]
    if len(set(tnames)) != len(tnames):
        raise SpecError(f"{where}: tensor names repeat ({tnames})")
    for t in s.tensors:
        if t.role not in ROLES:
            raise SpecError(f"{where}: tensor {t.name} has unknown role {t.role!r} (valid: "
                            f"{', '.join(ROLES)})")
        if not isinstance(t.dtype, str) or (t.dtype not in DTYPES and
                                            not t.dtype.startswith(("fp8", "f8", "bf8"))):
            raise SpecError(f"{where}: tensor {t.name} has unknown dtype {t.dtype!r} (valid: "
                            f"{', '.join(DTYPES)})")
        for d in t.dims:
            if d not in dnames:
                raise SpecError(f"{where}: tensor {t.name} names unknown dimension {d!r} "
                                f"(declared: {', '.join(dnames)})")
        if len(set(t.dims)) != len(t.dims):
            raise SpecError(f"{where}: tensor {t.name} repeats a dimension ({t.dims})")
    for y in s.symbols:
        if y.lo > y.hi:
            raise SpecError(f"{where}: symbol {y.name} has an empty range [{y.lo}, {y.hi}]")
    known = set(tnames)
    if s.softmax is not None:
        known.add(s.softmax.probs)
    for c in s.contractions:
        for op in (c.lhs, c.rhs):
            if op not in known:
                raise SpecError(f"{where}: contraction {c.out} multiplies unknown operand "
                                f"{op!r} (tensors and earlier results: {sorted(known)})")
        for d in c.over:
            if d not in dnames:
                raise SpecError(f"{where}: contraction {c.out} reduces unknown dimension {d!r}")
            for op in (c.lhs, c.rhs):
                if op in tnames and d not in s.tensor(op).dims:
                    raise SpecError(f"{where}: contraction {c.out} reduces {d!r}, which its "
                                    f"operand {op} does not carry ({s.tensor(op).dims})")
        if c.out in tnames and c.lhs in tnames and c.rhs in tnames:
            free = set(s.free_dims(c, c.lhs)) | set(s.free_dims(c, c.rhs))
            if set(s.tensor(c.out).dims) != free:
                raise SpecError(f"{where}: contraction {c.out} has dimensions "
                                f"{s.tensor(c.out).dims}, but its operands leave {sorted(free)}")
        known.add(c.out)
    if s.softmax is not None:
        sm = s.softmax
        s.producer(sm.scores)
        s.consumer(sm.probs)
        for d in (sm.keys, sm.head_dim):
            if d not in dnames:
                raise SpecError(f"{where}: the softmax names unknown dimension {d!r}")
        for t in (sm.lse,) + tuple(sm.stats or ()):
            if t is not None and s.tensor(t).role == "input":
                raise SpecError(f"{where}: the softmax writes {t}, declared an input")
    if s.split_partition is not None:
        # the partial of a split: unnormalised O with its (max, sum), or normalised O with
        # its log-sum-exp (the (O, LSE) form a SplitMerge of two partials reads)
        if s.softmax is None or (s.softmax.stats is None and s.softmax.lse is None):
            raise SpecError(f"{where}: a split partition needs an online softmax that writes "
                            "its (max, sum) stats or its log-sum-exp")
        s.dim(s.split_partition.over)
    if s.ticket is not None and s.domain.kind != "instances":
        raise SpecError(f"{where}: a ticket protocol is proved on launch instances (every "
                        "block of a group, every arrival order): give Domain.on_instances")
    if s.split_merge is not None:
        m = s.split_merge
        if len(m.partials) not in (2, 3):
            raise SpecError(f"{where}: the merge reads {m.partials}; partials are (O, max, sum) "
                            "or (O, LSE)")
        for t in m.partials:
            if s.tensor(t).role == "output":
                raise SpecError(f"{where}: the merge reads {t}, declared an output")
        for t in (m.out, m.lse):
            if t is not None and s.tensor(t).role != "output":
                raise SpecError(f"{where}: the merge writes {t}, which is not an output")
        s.dim(m.over)
        s.dim(m.head_dim)
    if s.head_anchor is not None and s.tensor(s.head_anchor).role == "output":
        raise SpecError(f"{where}: the head anchor {s.head_anchor} must be read, not written")
    if s.kv_head is not None:
        s.dim(s.kv_head)
    if s.head_anchor is not None and not s.head_symbols:
        raise SpecError(f"{where}: a head anchor needs the head_symbols that carry the block's "
                        "(batch, head)")
    if s.wave_roles and (len(set(s.wave_roles)) != len(s.wave_roles) or len(s.wave_roles) < 2
                         or not all(isinstance(r, str) and r for r in s.wave_roles)):
        raise SpecError(f"{where}: wave_roles {s.wave_roles!r}: name two or more distinct wave "
                        "groups, in wave order (e.g. ('ping', 'pong'))")
    if s.store_heads not in ("own", "kv_group"):
        raise SpecError(f"{where}: store_heads {s.store_heads!r} (valid: own, kv_group)")
    if s.domain.kind not in ("every_block", "instances", "launches"):
        raise SpecError(f"{where}: unknown domain {s.domain.kind!r} (valid: every_block, "
                        "instances, launches)")
    if (s.domain.kind != "every_block") != (s.domain.instances is not None):
        raise SpecError(f"{where}: an 'instances' or 'launches' domain needs its instances "
                        "function, 'every_block' takes none")


# ---------------------------------------------------------------------------- constructors

def gemm_spec_from_params(k: Any, *, span: Optional[int] = None) -> KernelSpec:
    """The spec of a plain GEMM kernel IR that carries none (kernels built before specs, e.g.
    by a branch that predates them): the first two read-only pointer parameters are the left
    (m, k) and right (n, k) operands, the written one the (m, n) output, over every block.
    ``span`` defaults to the IR's ``meta["k_span"]`` (64 if absent)."""
    ins = [p for p in k.params if p.const]
    outs = [p for p in k.params if not p.const]
    if len(ins) != 2 or len(outs) != 1:
        raise SpecError(f"kernel {k.name}: carries no spec and its parameters "
                        f"({', '.join(p.name for p in k.params)}) are not two inputs and one "
                        "output; build it with a KernelSpec (kernels.verify.spec)")
    lhs, rhs, out = ins[0].name, ins[1].name, outs[0].name
    span = span if span is not None else int(k.meta.get("k_span", 64))
    return KernelSpec(
        name=k.name, dims=(Dim("m"), Dim("n"), Dim("k")),
        tensors=(TensorSpec(lhs, ("m", "k"), "input", ins[0].dtype),
                 TensorSpec(rhs, ("n", "k"), "input", ins[1].dtype),
                 TensorSpec(out, ("m", "n"), "output", outs[0].dtype)),
        contractions=(Contraction(out, lhs, rhs, ("k",), span),))
