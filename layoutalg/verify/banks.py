"""LDS bank conflicts under the per-instruction phase model.

Model (see :class:`~layoutalg.verify.model.LdsModel`): an LDS instruction serves the 64 lanes
of a wave in *phases* (gfx942: ``ds_read_b32`` 2 x 32 lanes, ``ds_read_b64`` 4 x 16,
``ds_write_b128`` 8 x 8 contiguous, ``ds_read_b128`` 8 x 8 non-contiguous lanes
{0-3, 20-23}, ...).  Within a phase each lane touches the 4-byte words ("dwords") covered by its
vector; dword ``d`` lives in bank ``d % banks``.  A phase takes as many cycles as the largest
number of *distinct* dwords any one bank must deliver (lanes reading the same dword broadcast).
``ways`` is that number; ``1`` means conflict-free.  Lanes of different phases never conflict.

:func:`bank_conflicts` evaluates every lane of every instruction issue (exhaustive) and, when the
access is F2-linear, also proves the verdict by GF(2) rank (:mod:`.f2proof`), which extends it to
every issue constant; the two must agree or :class:`~.result.VerifierBug` is raised.
Symbolic strides/padding go to :mod:`.symbolic`.

Shift lemma (used in every ``domain``): adding the same multiple of ``bank_bytes`` to every
address of an issue maps distinct dwords to distinct dwords and rotates the banks, so the ways
of every phase are unchanged; a multiple of ``access_bytes`` also keeps the vectors aligned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import lcm
from typing import Any, Optional, Tuple

import numpy as np

from ..f2 import F2Error
from .f2proof import F2BankProof, prove_banks_f2
from ._access import MAX_OFFSET, Access, as_access, has_symbols
from ._model import resolve_model, vector_elems
from .model import LdsModel
from .result import AccessError, CheckResult, VerifierBug, VerifyError

__all__ = ["bank_conflicts", "BankResult", "BankCounterexample", "lane_starts", "phase_ways"]


@dataclass(frozen=True)
class BankCounterexample:
    """One over-subscribed bank in one phase of one instruction issue."""

    issue: str                    # which wave / value group / iteration
    phase: int                    # index into model.phases
    phase_lanes: Tuple[int, ...]
    bank: int
    ways: int
    lanes: Tuple[int, ...]        # one lane per distinct dword hitting ``bank``
    addresses: Tuple[int, ...]    # byte address of each such lane's vector
    dwords: Tuple[int, ...]       # the distinct dword indices (byte_addr // bank_bytes)

    def __str__(self) -> str:
        hits = "; ".join(f"lane {l} (vector at byte {a}) needs dword {d}"
                         for l, a, d in zip(self.lanes, self.addresses, self.dwords))
        return (f"{self.issue}, phase {self.phase} (lanes {_ranges(self.phase_lanes)}): "
                f"bank {self.bank} must deliver {self.ways} different dwords\n{hits}")


def _ranges(lanes: Tuple[int, ...]) -> str:
    out, s = [], sorted(lanes)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True, kw_only=True)
class BankResult(CheckResult):
    """Verdict of :func:`bank_conflicts`.

    Per-lane arrays describe the *reported issue* (the worst one, or the first when all are
    conflict-free) so a diagram can color lanes by bank and mark the conflicting ones.
    """

    model: LdsModel = field(repr=False)
    elem_bytes: int
    max_ways: int                                 # worst phase of all issues (1 = no conflict)
    n_issues: int
    reported_issue: str
    phase_ways: np.ndarray = field(repr=False)    # [n_phases] ways of the reported issue
    ideal_cycles: np.ndarray = field(repr=False)  # [n_phases] ceil(distinct dwords / banks)
    total_cycles: int                             # sum of ways over all phases of all issues
    total_ideal_cycles: int
    lane_addresses: np.ndarray = field(repr=False)  # [wave] byte address of each lane's vector
    lane_banks: np.ndarray = field(repr=False)      # [wave, dwords/lane] banks (-1 = none)
    lane_phase: np.ndarray = field(repr=False)      # [wave] phase index of each lane
    conflict_lanes: np.ndarray = field(repr=False)  # [wave] lane shares a bank with another dword
    aligned: bool                                 # every vector aligned to access_bytes
    base_alignment: int                           # verdict unchanged for bases = 0 mod this
    proof: Optional[F2BankProof] = field(default=None, repr=False)

    def _diagram(self) -> Any:
        """The banks of the reported issue (notebooks show it under the verdict)."""
        from visualize import draw_banks  # first use only: visualize reads this package
        return draw_banks(report=self)

    @property
    def phase_cycles(self) -> np.ndarray:
        """Cycles per phase of the reported issue (= ways: one pass per distinct dword)."""
        return self.phase_ways

    def phase_view(self, phase: int) -> dict:
        """Lanes, byte addresses and banks of one phase of the reported issue (for diagrams)."""
        lanes = np.array(self.model.phases[phase])
        return {"lanes": lanes, "addresses": self.lane_addresses[lanes],
                "banks": self.lane_banks[lanes], "conflict": self.conflict_lanes[lanes],
                "ways": int(self.phase_ways[phase])}

    def summary(self) -> str:
        m = self.model
        verdict = "conflict-free" if self.holds else f"{self.max_ways}-way bank conflict"
        return (f"bank conflicts ({m.arch} {m.instruction}, {self.elem_bytes}-byte elements): "
                f"{verdict}; {self.total_cycles} cycles for {self.n_issues} issue(s), ideal "
                f"{self.total_ideal_cycles}")

    def details(self) -> Tuple[str, ...]:
        out = [f"reported issue: {self.reported_issue}; ways per phase "
               f"{self.phase_ways.tolist()} vs ideal {self.ideal_cycles.tolist()}"]
        if self.proof is not None:
            out.append(f"F2 certificate: {self.proof}")
        if not self.aligned:
            out.append(f"WARNING: some lane vectors are not {self.model.access_bytes}-byte "
                       "aligned: "
                       f"{self.model.instruction} then needs unaligned-DS mode (or is split by "
                       "the compiler); the count above is for the dwords actually covered")
        return tuple(out)


# ---- the exhaustive kernel -----------------------------------------------------------------

def lane_starts(acc: Access, model: LdsModel, elem_bytes: int,
                base: int) -> Tuple[np.ndarray, list]:
    """Byte address of every lane's vector for every issue: ``[n_issues, wave]`` + issue names.

    Checks that each lane's values, taken ``vec`` at a time, are contiguous ascending elements
    (that is what one ``ds_read/ds_write_bN`` moves) and raises :class:`AccessError` if not.
    """
    vec = vector_elems(model, elem_bytes)
    t, v, it = acc.offsets.shape
    w = model.wave_size
    if t % w:
        raise AccessError(f"the access has {t} threads; a {model.arch} wave has {w} lanes and "
                          f"every lane of an instruction must be described (give whole waves)")
    if v % vec:
        raise AccessError(f"each lane has {v} values, but {model.instruction} moves {vec} "
                          f"elements of {elem_bytes} bytes ({model.access_bytes} bytes) per "
                          f"lane; the values mode must be a multiple of {vec}")
    if base + elem_bytes * int(acc.offsets.max()) + model.access_bytes >= MAX_OFFSET:
        raise AccessError(f"byte addresses reach {base + elem_bytes * int(acc.offsets.max())}, "
                          "past the verifier's exact int64 range (< 2^62)")
    groups = v // vec
    off = acc.offsets.reshape(t, groups, vec, it)
    step = off - off[:, :, :1, :]
    bad = step != np.arange(vec, dtype=np.int64)[None, None, :, None]
    if bad.any():
        th, g, j, i = (int(x) for x in np.argwhere(bad)[0])
        got = off[th, g, :, i].tolist()
        raise AccessError(
            f"thread {th}'s values {g * vec}..{g * vec + vec - 1}"
            + (f" at iteration {acc.iter_coord(i)}" if acc.iter_shape else "")
            + f" are at element offsets {got}: not {vec} contiguous ascending elements, so they "
            f"are not one {model.instruction} (see layoutalg.verify.vector_width)")
    starts = base + elem_bytes * off[:, :, 0, :]                 # [t, groups, it]
    waves = t // w
    starts = starts.reshape(waves, w, groups, it).transpose(0, 2, 3, 1).reshape(-1, w)
    names = []
    for wv in range(waves):
        for g in range(groups):
            for i in range(it):
                parts = []
                if waves > 1:
                    parts.append(f"wave {wv}")
                if groups > 1:
                    parts.append(f"values {g * vec}..{g * vec + vec - 1}")
                if acc.iter_shape:
                    parts.append(f"iteration {acc.iter_coord(i)}")
                names.append(", ".join(parts) or "the access")
    return starts, names


def _dwords(starts: np.ndarray, model: LdsModel) -> np.ndarray:
    """``[..., wave, k]``: the dwords each lane's vector covers (repeats pad short lanes)."""
    bb = model.bank_bytes
    first = starts // bb
    last = (starts + model.access_bytes - 1) // bb
    k = int((last - first).max()) + 1
    d = first[..., None] + np.arange(k, dtype=np.int64)
    return np.minimum(d, last[..., None])


def _phase_index(model: LdsModel) -> np.ndarray:
    s = max(len(p) for p in model.phases)
    # padding a short phase with its own first lane adds only duplicate dwords: no effect
    return np.array([list(p) + [p[0]] * (s - len(p)) for p in model.phases], dtype=np.int64)


def phase_ways(starts: np.ndarray, model: LdsModel) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exhaustive kernel: ``ways[issue, phase]``, ``distinct[issue, phase]``, ``counts``.

    ``counts[issue, phase, bank]`` is the number of distinct dwords the phase needs from the
    bank; ``ways`` is its maximum over banks.  Fully vectorised: sort each phase's dwords, mark
    the first of each run of equal dwords, and histogram those per bank.
    """
    n = starts.shape[0]
    d = _dwords(starts, model)                                 # [n, wave, k]
    idx = _phase_index(model)                                  # [P, s]
    p, s = idx.shape
    g = np.sort(d[:, idx, :].reshape(n, p, -1), axis=-1)       # [n, P, s*k]
    first = np.ones(g.shape, dtype=bool)
    first[..., 1:] = g[..., 1:] != g[..., :-1]
    rows = np.arange(n * p, dtype=np.int64)[:, None] * model.banks
    flat = (rows + (g % model.banks).reshape(n * p, -1)).ravel()
    counts = np.bincount(flat, weights=first.reshape(-1).astype(np.float64),
                         minlength=n * p * model.banks).astype(np.int64)
    counts = counts.reshape(n, p, model.banks)
    return counts.max(axis=-1), first.sum(axis=-1), counts


# ---- public entry point ----------------------------------------------------------------------

def bank_conflicts(access: Any, *, arch: Any = "gfx942", instruction: str = "ds_read_b128",
                   elem_bytes: int = 2, lds: Any = None, base: int = 0,
                   model: Optional[LdsModel] = None, method: str = "auto",
                   domain: Any = None) -> CheckResult:
    """Prove or refute bank-conflict freedom of one LDS access pattern.

    ``access``: a TV layout ``(lanes, values[, iterations...]) -> element offset`` (or tile
    index, with ``lds=`` the LDS layout: padding, swizzle, offset), a :class:`TVLayout`, or an
    int array ``[lanes, values]`` / ``[lanes, values, iterations]`` of element offsets.  Each
    lane's values are taken ``access_bytes / elem_bytes`` at a time, one instruction per group;
    threads beyond 64 are further waves.  ``base`` is a byte offset added to every address.

    ``model`` (an :class:`LdsModel`) replaces ``arch``/``instruction``.  ``method``: ``"auto"``
    (exhaustive, plus the F2 proof when it applies), ``"exhaustive"``, ``"f2"`` (fail if the
    F2 argument does not apply) or ``"sympy"`` (symbolic strides; ``domain=(lo, hi)`` bounds
    the parameter, ``hi=None`` for unbounded).  Symbolic accesses always use sympy.

    Returns a :class:`BankResult` (or :class:`~.symbolic.SymbolicBankResult`).
    """
    m = resolve_model(arch, instruction, model)
    if method not in ("auto", "exhaustive", "f2", "sympy"):
        raise VerifyError(f"method must be 'auto', 'exhaustive', 'f2' or 'sympy', got {method!r}")
    if has_symbols(access) or has_symbols(lds) or method == "sympy":
        from .symbolic import bank_conflicts_symbolic
        return bank_conflicts_symbolic(access, model=m, elem_bytes=elem_bytes, lds=lds,
                                       base=base, domain=domain)
    if domain is not None:
        raise VerifyError("domain= is for symbolic parameters; this access has none")
    if type(base) is not int or base < 0:
        raise VerifyError(f"base must be a non-negative int (bytes), got {base!r}")
    acc = as_access(access, lds)
    vec = vector_elems(m, elem_bytes)
    starts, names = lane_starts(acc, m, elem_bytes, base)
    ways, distinct, counts = phase_ways(starts, m)
    ideal = -(-distinct // m.banks)
    max_ways = int(ways.max())

    proof, why_not = None, None
    if method in ("auto", "f2"):
        if acc.layout is None:
            why_not = "the access is an offset array, not a layout"
        elif base % m.bank_bytes:
            why_not = f"base {base} is not a multiple of {m.bank_bytes} bytes"
        else:
            try:
                proof = prove_banks_f2(acc.layout, acc.lds, m, elem_bytes, acc.threads,
                                       acc.values, vec)
            except F2Error as e:
                why_not = str(e)
        if proof is not None and not (ways == proof.ways).all():
            i, p = (int(x) for x in np.argwhere(ways != proof.ways)[0])
            raise VerifierBug(f"F2 proof says {proof.ways}-way for every phase but exhaustive "
                              f"evaluation of {names[i]} phase {p} gives {ways[i, p]}-way "
                              f"({m.arch} {m.instruction}, access {acc.layout}, lds {acc.lds})")
        if method == "f2" and proof is None:
            raise VerifyError(f"the F2 method does not apply: {why_not}")

    worst = int(np.argmax(ways.max(axis=1)))
    rep = worst if max_ways > 1 else 0
    cex = _counterexample(starts[rep], ways[rep], counts[rep], m, names[rep]) if max_ways > 1 \
        else None
    lane_banks, conflict = _lane_views(starts[rep], counts[rep], m)
    aligned = bool((starts % m.access_bytes == 0).all())
    align = lcm(m.bank_bytes, m.access_bytes) if aligned else m.bank_bytes
    shift = (f"any LDS base that is a multiple of {align} bytes gives the same verdict "
             "(shift lemma)")
    n = len(names)
    lanes_desc = f"all {m.wave_size} lanes x {vec}-element vectors of {n} issue(s)"
    if proof is not None:
        meth = "f2"
        vmask = proof.varying_mask
        where = "pre-swizzle offset" if proof.swizzle is not None else "element offset"
        dom = (f"{lanes_desc}, and, by GF(2) rank, every issue whose constant {where} "
               f"(tile position, k step, stage) is a multiple of {vec} elements with no bits in "
               f"{bin(vmask)}; {shift}")
    else:
        meth = "exhaustive"
        dom = f"{lanes_desc} (exhaustive); {shift}"
    notes = () if why_not is None or method == "exhaustive" else (
        f"F2 proof not applicable: {why_not}",)
    if m.is_write:
        notes += _write_races(starts, m, names)
    return BankResult(
        check="LDS bank-conflict freedom", holds=max_ways == 1, method=meth, domain=dom,
        counterexample=cex, notes=notes, model=m, elem_bytes=elem_bytes, max_ways=max_ways,
        n_issues=n, reported_issue=names[rep], phase_ways=ways[rep].copy(),
        ideal_cycles=ideal[rep].copy(), total_cycles=int(ways.sum()),
        total_ideal_cycles=int(ideal.sum()), lane_addresses=starts[rep].copy(),
        lane_banks=lane_banks, lane_phase=np.array(m.lane_phase()), conflict_lanes=conflict,
        aligned=aligned, base_alignment=align, proof=proof)


def _write_races(starts: np.ndarray, m: LdsModel, names: list) -> Tuple[str, ...]:
    """Lanes of one write issue whose byte ranges overlap: a race, whatever the banks say."""
    order = np.argsort(starts, axis=1, kind="stable")
    s = np.take_along_axis(starts, order, axis=1)
    hit = (s[:, 1:] - s[:, :-1]) < m.access_bytes
    if not hit.any():
        return ()
    i, j = (int(x) for x in np.argwhere(hit)[0])
    a, b = int(order[i, j]), int(order[i, j + 1])
    return (f"WRITE RACE: in {int(hit.any(axis=1).sum())} issue(s) two lanes write overlapping "
            f"bytes (e.g. {names[i]}: lanes {min(a, b)} and {max(a, b)} at bytes "
            f"{int(starts[i, a])} and {int(starts[i, b])}); not a bank conflict, but the stored "
            "value is undefined",)



def _lane_views(starts: np.ndarray, counts: np.ndarray, m: LdsModel):
    d = _dwords(starts, m)                                  # [wave, k]
    banks = d % m.banks
    dup = np.zeros(d.shape, dtype=bool)
    dup[:, 1:] = d[:, 1:] == d[:, :-1]
    banks = np.where(dup, -1, banks)
    phase = np.array(m.lane_phase())
    over = counts[phase[:, None], np.maximum(banks, 0)] > 1   # bank over-subscribed in phase
    conflict = (over & (banks >= 0)).any(axis=1)
    return banks, conflict


def _counterexample(starts: np.ndarray, ways: np.ndarray, counts: np.ndarray, m: LdsModel,
                    issue: str) -> BankCounterexample:
    p = int(np.argmax(ways))
    bank = int(np.argmax(counts[p]))
    d = _dwords(starts, m)
    seen = {}
    for lane in m.phases[p]:
        for dw in d[lane]:
            dw = int(dw)
            if dw % m.banks == bank and dw not in seen:
                seen[dw] = lane
    dws = tuple(sorted(seen))
    lanes = tuple(seen[x] for x in dws)
    return BankCounterexample(issue=issue, phase=p, phase_lanes=tuple(m.phases[p]), bank=bank,
                              ways=int(ways[p]), lanes=lanes,
                              addresses=tuple(int(starts[l]) for l in lanes), dwords=dws)
