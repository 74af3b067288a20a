"""The verification gate: prove a kernel's IR correct before it is compiled, or stop the build.

Everything is evaluated from the IR, i.e. from the exact sympy objects the emitter prints, with
C semantics (:func:`kernels.ir.c_eval`).  Two passes:

1. **Static** over every block x every loop iteration x every thread (numpy broadcasting),
   access by access.  When the block-translation lemma's symbolic conditions hold
   (:func:`affine_plan`: every offset, coordinate and predicate atom is its value at block
   (0, 0) plus an integer slope times the block id), block (0, 0) is evaluated at every point
   and the verdict carried to every block exactly (:class:`AffineStaticChecks`); otherwise every
   block is enumerated (``verify_kernel(..., translation=False)`` forces that):

   * ``emitted_index_math`` - each printed offset equals its layoutalg origin (global layout, or
     the swizzled LDS layout) at the access's coordinates, element by element (this also proves
     each vector's elements are consecutive);
   * ``in_bounds`` - predicated-on elements lie inside their tensor (coordinates within the
     extents), LDS elements inside their array and tile; a predicated load is on exactly when
     its whole vector is in range (so zero-filled registers are exactly the out-of-range ones);
   * ``vector_widths`` - every vector access is aligned to its width in bytes;
   * ``bank_conflicts_lds_read`` / ``bank_conflicts_lds_write`` - every LDS access of every wave
     and loop iteration by :func:`layoutalg.verify.bank_conflicts` under the target's
     per-instruction phase model (max ways must be 1);
   * ``coverage`` - every element of each output is stored exactly once over the whole grid;
   * ``lds_capacity`` - the LDS arrays fit the target.

2. **Dataflow**, per simulated block, every loop iteration, every thread: registers and LDS hold
   element identities (tensor, coordinates, zero-filled?) instead of values:

   * ``lane_mfma_operands`` - for every MFMA issue and every lane/item, the A and B registers
     hold the elements the instruction's spec (``spec.tv_layout``) says they must: each row of
     A from one row of the A tensor, each column of B from one column of B, and A's k equal to
     B's k at every reduction slot;
   * ``lane_accumulator_writeback`` - each stored accumulator element holds C[m][n] for the
     (m, n) it is stored to, summed over every k in [0, K) exactly once;
   * ``lds_races`` - no LDS element is read and written (or written twice) by different
     threads without a barrier in between; no LDS read of a never-written element.

A failed check raises :class:`VerificationError` carrying the counterexample; the results
(``CheckResult`` records: holds, method, domain, counterexample) travel with the kernel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg.verify.result import CheckResult

from ..errors import KernelError
from ..ir.core import Access, Kernel, Let, Loop, sym
from .gate_common import Fail, check_lds_capacity, mode_coords
from .gate_dataflow import GemmDataflow
from .rules import checks_for
from .spec import KernelSpec, SpecError, gemm_spec_from_params
from .gate_static import (AffineStaticChecks, NeedFullEnumeration, StaticChecks, affine_plan,
                          affine_slopes, is_compact)

__all__ = ["GateReport", "VerificationError", "verify_kernel", "verify_every_block", "CHECKS"]

CHECKS = ("emitted_index_math", "in_bounds", "vector_widths", "bank_conflicts_lds_read",
          "bank_conflicts_lds_write", "coverage", "lds_capacity", "lane_mfma_operands",
          "lane_accumulator_writeback", "lds_races")


class VerificationError(KernelError):
    """A gate check failed; ``report`` holds every result, ``failed`` the failing ones."""

    exit_code = 1

    def __init__(self, report: "GateReport") -> None:
        self.report = report
        self.failed = {k: r for k, r in report.checks.items() if not r.holds}
        lines = [f"verification failed for kernel {report.kernel}:"]
        for k, r in self.failed.items():
            lines.append(f"[{k}] {r}")
        super().__init__("\n".join(lines))


@dataclass
class GateReport:
    kernel: str
    checks: Dict[str, CheckResult]
    details: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        return all(r.holds for r in self.checks.values())

    def as_bools(self) -> Dict[str, bool]:
        return {k: bool(r.holds) for k, r in self.checks.items()}

    def to_json(self) -> Dict[str, Any]:
        return {k: {"holds": bool(r.holds), "method": r.method, "domain": r.domain,
                    "counterexample": None if r.holds else str(r.counterexample)}
                for k, r in self.checks.items()}

    def raise_if_failed(self) -> "GateReport":
        if not self.holds:
            raise VerificationError(self)
        return self


def _translation_lemma(k: Kernel, spec: Optional[KernelSpec] = None) -> Tuple[bool, str]:
    """Do blocks differ only by a translation of the global coordinates?

    Holds when (1) no ``Let`` depends on a grid symbol, (2) every coordinate of every global
    access is ``c * block + (block-free terms)`` with an integer ``c`` per (buffer, coordinate
    position, grid symbol), the same for every access of that buffer, and (3) the shifts agree
    where the dataflow check compares coordinates, as the spec's contractions say: each free
    dimension of an operand with the same dimension of the result, the reduced dimension of
    the left operand with the right's, and the reduced dimension does not move at all (the
    reduction is checked against its whole extent).  Then a block's dataflow is its
    representative's, translated, whenever the two have the same predicate values everywhere.
    """
    import sympy
    from ..ir.core import walk
    spec = spec if spec is not None else gemm_spec_of(k)
    grid = [sym(g) for g in k.grid_symbols]
    tainted = set(grid)
    shifts: Dict[Tuple[str, int], Tuple[int, ...]] = {}
    cache: Dict[Any, Any] = {}
    for s in walk(k.body):
        if isinstance(s, Let) and sympy.sympify(s.expr).free_symbols & tainted:
            return False, f"index {s.name} depends on the block index"
        if isinstance(s, Access) and s.space == "lds":
            if sympy.sympify(s.offset).free_symbols & tainted:
                return False, f"{s.tag}: LDS offset depends on the block index"
        if isinstance(s, Access) and s.space == "global":
            for coords in s.coords:
                for p, c in enumerate(mode_coords(s.origin, coords)):
                    sh = affine_slopes(c, grid, cache)
                    if sh is None:
                        c = sympy.expand(sympy.sympify(c))
                        sh = []
                        for g in grid:
                            d = sympy.diff(c, g)
                            if not d.is_Integer:
                                return False, f"{s.tag}: coordinate {c} is not affine in {g}"
                            sh.append(int(d))
                    if shifts.setdefault((s.buf, p), tuple(sh)) != tuple(sh):
                        return False, f"{s.tag}: {s.buf} coordinate {p} shifts differently"
    fixed, pairs = _lemma_constraints(spec)
    for key, dim in fixed:   # the reduction index must not move with the block
        if any(shifts.get(key, ())):
            return False, f"{key[0]}'s {dim} coordinate shifts with the block ({shifts[key]})"
    for x, y in pairs:
        if x in shifts and y in shifts and shifts[x] != shifts[y]:
            return False, f"{x[0]} coordinate {x[1]} and {y[0]} coordinate {y[1]} shift " \
                          f"differently with the block ({shifts[x]} vs {shifts[y]})"
    return True, "blocks are translations of one another"


def _lemma_constraints(spec: KernelSpec):
    """From the spec's contractions of tensors: the (tensor, position) pairs of reduced
    dimensions that must not shift with the block, and the pairs of (tensor, position) that
    must shift alike (operand free dimensions with the result's, left with right reduced)."""
    fixed: List[Tuple[Tuple[str, int], str]] = []
    pairs: List[Tuple[Tuple[str, int], Tuple[str, int]]] = []
    for c in spec.contractions:
        if not all(spec.has_tensor(t) for t in (c.lhs, c.rhs)):
            continue
        for d in c.over:
            fixed += [((t, spec.position(t, d)), d) for t in (c.lhs, c.rhs)]
        if spec.has_tensor(c.out):
            for t in (c.lhs, c.rhs):
                pairs += [((t, spec.position(t, d)), (c.out, spec.position(c.out, d)))
                          for d in spec.free_dims(c, t)]
        pairs += [((c.lhs, spec.position(c.lhs, d)), (c.rhs, spec.position(c.rhs, d)))
                  for d in c.over]
    return fixed, pairs


def _representatives(sig: List[List[int]]) -> List[Tuple[int, int]]:
    seen: Dict[int, Tuple[int, int]] = {}
    for j in range(len(sig[0])):
        for i in range(len(sig)):
            seen.setdefault(sig[i][j], (i, j))
    return sorted(seen.values())


def _blocks_to_simulate(grid: Tuple[int, ...], limit: int = 4) -> List[Tuple[int, int]]:
    gm, gn = grid[0], grid[1]
    if gm * gn <= limit:
        return [(i, j) for j in range(gn) for i in range(gm)]
    return sorted({(0, 0), (gm - 1, 0), (0, gn - 1), (gm - 1, gn - 1)})


# ---------------------------------------------------------------------------- entry point

def verify_kernel(k: Kernel, *, arch: Optional[str] = None, k_span: Optional[int] = None,
                  blocks: Optional[List[Tuple[int, int]]] = None,
                  translation: bool = True) -> GateReport:
    """Run every check on ``k``; returns the report (use ``raise_if_failed``).

    The GEMM entry point, kept for its callers: :func:`kernels.verify.verifier.verify` with
    the kernel's spec (``k.spec``; a kernel built without one is read as a plain GEMM,
    :func:`~kernels.verify.spec.gemm_spec_from_params`).  ``k_span`` overrides the
    contraction's reduction span.

    ``translation=True`` (default) runs the static pass at one block and extends it to every
    block by the block-translation lemma when its symbolic conditions hold (falling back to the
    exhaustive enumeration of every block otherwise); ``False`` always enumerates every block.
    ``arch``: as :func:`kernels.verify.verifier.verify` takes it (default the kernel's own,
    else gfx942; NVIDIA statements at an AMD arch refused).
    """
    from .target_arch import resolve_arch
    return verify_every_block(k, gemm_spec_of(k), arch=resolve_arch(k, arch), k_span=k_span, blocks=blocks,
                              translation=translation)


def gemm_spec_of(k: Kernel) -> KernelSpec:
    """The kernel's spec; a kernel built without one is read as a plain GEMM."""
    return k.spec if k.spec is not None else gemm_spec_from_params(k)


def verify_every_block(k: Kernel, spec: KernelSpec, *, arch: str = "gfx942",
                       k_span: Optional[int] = None,
                       blocks: Optional[List[Tuple[int, int]]] = None,
                       translation: bool = True, dataflow: Any = None) -> GateReport:
    """The engine of the ``every_block`` domain: the checks :func:`checks_for` ``spec`` over
    every block of the compile-time grid (static pass by translation or enumeration, dataflow
    on representative blocks).  ``dataflow``: the per-block dataflow factory (default
    :class:`GemmDataflow`); one with ``finish(fails) -> domain`` and ``checks`` (a split
    kernel's run, :mod:`.gate_split_partials`) proves its extra checks after the blocks."""
    extra = [c for c in checks_for(spec) if c not in CHECKS]
    if extra:
        raise SpecError(f"spec {spec.name}: the every-block engine proves {', '.join(CHECKS)}; "
                        f"the spec also calls for {', '.join(extra)}, which only the instance "
                        "engine proves (give the spec an instances domain)")
    t0 = time.perf_counter()
    fails = Fail()
    info, affine_why = affine_plan(k) if translation else (None, "not requested")
    st: Any = None
    if info is not None:
        st = AffineStaticChecks(k, arch, fails, info)
        try:
            st.run()
            st.coverage()
        except NeedFullEnumeration as e:
            info, affine_why, st, fails = None, str(e), None, Fail()
    if st is None:
        st = StaticChecks(k, arch, fails)
        st.run()
    for buf, sels in st.counts.items():
        origin = st.origins[buf]
        cnt = np.bincount(np.concatenate(sels), minlength=int(origin.cosize()))
        del sels
        if is_compact(origin):
            want = np.ones_like(cnt)
        else:
            want = np.zeros_like(cnt)
            want[np.asarray(origin.values()).reshape(-1)] = 1
        bad = cnt != want
        if bad.any():
            o = int(np.argmax(bad))
            fails.add("coverage", f"{buf} element at offset {o} is stored {int(cnt[o])} times "
                                  f"(expected {int(want[o])}) over the grid")
    lds_total, cap = check_lds_capacity(k, arch, fails)
    lemma, why = _translation_lemma(k, spec)
    if blocks is not None:
        blist, how = blocks, "blocks chosen by the caller"
    elif lemma and info is not None:
        blist = st.representatives()
        how = (f"one block per class of blocks that agree on every predicate; every other block "
               f"is a translation of its representative ({why}: affine coordinates with uniform "
               f"shifts, block-free LDS and register indexing, checked symbolically) with "
               f"identical predicates (predicate intervals computed exactly in the static pass)")
    elif lemma:
        blist = _representatives(st.block_sig)
        how = (f"one block per predicate pattern; every other block is a translation of its "
               f"representative ({why}: affine coordinates with uniform shifts, block-free LDS "
               f"and register indexing, checked symbolically) with identical predicates "
               f"(checked in the static pass)")
    else:
        blist = [(i, j) for j in range(k.grid[1]) for i in range(k.grid[0])]
        how = f"every block ({why})"
    span = k_span if k_span is not None else _span(spec)
    issues = stores = 0
    make = dataflow if dataflow is not None else GemmDataflow
    for b in blist:
        fl = make(k, spec, fails, b, span)
        fl.run()
        issues += fl.mfma_issues
        stores += fl.stores_checked
    t1 = time.perf_counter()
    grid = f"{k.grid[0]}x{k.grid[1]} blocks"
    T = k.block
    loops = ", ".join(f"{s.var} in [{s.start}, {s.stop})" for s in _loops(k.body)) or "no loop"
    static_dom = f"all {grid} x all loop iterations ({loops}) x all {T} threads, every element " \
                 f"of every access ({st.points} points)"
    if info is not None:
        static_dom = (
            f"all {grid} x all loop iterations ({loops}) x all {T} threads, every element of "
            f"every access, by the block-translation lemma: every offset, coordinate and "
            f"predicate atom was shown symbolically to be (its value at block (0, 0)) + "
            f"(integer slope) x (block id), so block (0, 0) is evaluated at every point "
            f"({st.points} points) and the result carried to every block exactly: index math by "
            f"equal slopes of printed offset and layout, bounds and predicates as exact "
            f"intervals of blocks per point, alignment by slopes that are multiples of the "
            f"vector")
    elif translation:
        static_dom += f" (block-translation lemma not applicable: {affine_why})"
    flow_dom = f"blocks {blist} of {grid} ({how}), all loop iterations, all {T} threads " \
               f"({issues} wave-level MFMA issues, {stores} accumulator stores)"
    doms = {
        "emitted_index_math": static_dom,
        "in_bounds": static_dom,
        "vector_widths": static_dom + "; widths: " + ", ".join(
            f"{t} {w}-bit" for t, w in sorted(st.widths.items())),
        "bank_conflicts_lds_read": f"{st.bank_n['read']} (access, wave-set, iteration) issues "
                                   f"under the {arch} phase model; worst {st.bank_worst['read']}-way",
        "bank_conflicts_lds_write": f"{st.bank_n['write']} (access, wave-set, iteration) issues "
                                    f"under the {arch} phase model; worst "
                                    f"{st.bank_worst['write']}-way",
        "coverage": (f"every element of {', '.join(sorted(st.counts)) or 'no output'} over {grid}"
                     if info is None else
                     f"every element of {', '.join(sorted(st.stores)) or 'no output'} over {grid}: "
                     f"each block stores only inside its own output tile (the slopes move "
                     f"one coordinate per grid axis by the tile extent; checked at every point), "
                     f"the tiles cover the output, and within a tile every element is stored "
                     f"exactly once, checked at one block per class of blocks that agree on "
                     f"every store predicate and on the clipping of the tile: "
                     f"{len(st.representatives())} block(s) {st.representatives()}"),
        "lds_capacity": f"{lds_total} bytes of LDS vs {cap} on {arch}",
        "lane_mfma_operands": flow_dom,
        "lane_accumulator_writeback": flow_dom,
        "lds_races": flow_dom,
    }
    names = checks_for(spec)
    if hasattr(make, "finish"):
        extra_dom = make.finish(fails)
        names += tuple(c for c in make.checks if c not in names)
        doms.update({c: extra_dom for c in make.checks})
        doms["coverage"] += f"; C by {extra_dom}"
    checks = fails.results(names, doms)
    details = {"bank_worst_ways": dict(st.bank_worst), "access_bits": dict(st.widths),
               "simulated_blocks": blist, "lds_bytes": lds_total,
               "bank_methods": sorted(st.bank_methods)}
    return GateReport(k.name, checks, details, t1 - t0)


def _span(spec: KernelSpec) -> int:
    """How many reduction indices the dataflow tracks: the span of the spec's contraction (or
    the reduced dimension's extent; 64 without a contraction)."""
    for c in spec.contractions:
        if c.span is not None:
            return int(c.span)
        ext = [spec.extent(d) for d in c.over]
        if all(isinstance(e, int) for e in ext):
            return max(1, int(np.prod(ext)))
    return 64


def _loops(body):
    from ..ir.core import walk
    return [s for s in walk(body) if isinstance(s, Loop)]
