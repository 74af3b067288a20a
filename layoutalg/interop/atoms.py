"""Check an MMA atom's TV layouts from another tool against the instruction's real lane map.

FlyDSL (``fx.MmaAtomType``'s ``tv_layout_a/b/c``), CuTe DSL and CuTe C++ (``MMA_Traits<...>``
``ALayout/BLayout/CLayout``) describe an atom as ``(thread, value) -> tile index`` layouts in
CuTe's convention: ``A`` is ``M x K``, ``B`` is ``N x K``, ``C`` is ``M x N``, each indexed
column-major.  ``mfma_specs`` gives the instruction's contract (``spec.element(op, lane, item)
-> (row, col, block)`` with ``B`` as ``K x N``).  :func:`check_mma_atom` compares them at every
lane and register item and reports the first wrong ``(lane, item)`` of each operand.

Dependency direction: ``layoutalg`` must not import ``mfma_specs`` at import time (``mfma_specs``
builds on ``layoutalg``), so the instruction is looked up lazily inside
:func:`check_mma_atom` / :func:`check_flydsl_atom`, or passed in as ``spec=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..inttuple import idx2crd
from ..layout import Layout
from .errors import InteropError

__all__ = ["AtomMismatch", "AtomCheck", "check_mma_atom", "check_flydsl_atom",
           "flydsl_atom_layouts"]


@dataclass(frozen=True)
class AtomMismatch:
    """The first wrong entry of one operand: what the instruction puts at ``(lane, item)``
    versus what the atom says (``None``: the atom has no such entry)."""

    operand: str
    lane: int
    item: int
    expected: Tuple[int, int, int]            # (row, col, block) in mfma_specs' convention
    got: Optional[Tuple[int, int, int]]
    wrong: int                                # entries of this operand that differ
    total: int
    why: str = ""

    def __str__(self) -> str:
        got = "nothing" if self.got is None else f"{self.operand}{list(self.got[:2])}" + (
            f" block {self.got[2]}" if self.got[2] else "")
        exp = f"{self.operand}{list(self.expected[:2])}" + (
            f" block {self.expected[2]}" if self.expected[2] else "")
        why = f" ({self.why})" if self.why else ""
        return (f"{self.operand}: lane {self.lane} item {self.item} holds {exp} but the atom "
                f"says {got}; {self.wrong}/{self.total} entries wrong{why}")


@dataclass(frozen=True)
class AtomCheck:
    """``holds``: every entry equal.  ``k_relabelled``: only A and/or B differ, and only by
    one permutation of K shared by both - the product is unchanged, so an atom like that
    computes the right result although its lane maps are not the instruction's."""

    instruction: str
    holds: bool
    mismatches: Tuple[AtomMismatch, ...]
    k_relabelled: bool = False

    def summary(self) -> str:
        if self.holds:
            return f"{self.instruction}: the atom's A, B and C layouts equal the instruction's"
        note = (" - A and B differ only by the same permutation of K: the product is "
                "unchanged" if self.k_relabelled else "")
        return f"{self.instruction}: " + "; ".join(str(m) for m in self.mismatches) + note


def _as_layout(x: Any) -> Layout:
    if isinstance(x, Layout):
        return x
    from ..parse import parse
    v = parse(str(x))
    if not isinstance(v, Layout):
        raise InteropError(f"expected a TV layout, got {x!r}")
    return v


def _shape_of(layout: Layout) -> Tuple[int, int]:
    """(threads, values) of a rank-2 TV layout; a rank-1 layout has one value."""
    if layout.rank == 1:
        return layout.size(), 1
    if layout.rank != 2:
        raise InteropError(f"a TV layout has rank 2 (thread, value), got {layout}")
    return layout[0].size(), layout[1].size()


def check_mma_atom(tv_a: Any, tv_b: Any, tv_c: Any, *, arch: str = "gfx942",
                   instruction: Optional[str] = None, spec: Any = None,
                   convention: str = "cute") -> AtomCheck:
    """Compare an atom's TV layouts (Layouts or printed text in any dialect) with an
    instruction's lane maps at every lane and register item.

    ``spec`` (a ``mfma_specs.MatrixInstruction``) or ``arch`` + ``instruction`` names the
    instruction (looked up lazily in ``mfma_specs``).  ``convention="cute"`` reads B as ``N x K``
    (CuTe, CuTe DSL, FlyDSL); ``"amd"`` as ``K x N`` (mfma_specs, AMD's calculator).  The atom's
    tile is the instruction's ``M x N x K`` without blocks, as CuTe atoms have no block mode: a
    multi-block instruction's block-1 elements are then reported as mismatches.
    """
    if convention not in ("cute", "amd"):
        raise InteropError(f"convention must be 'cute' or 'amd', got {convention!r}")
    if spec is None:
        if instruction is None:
            raise InteropError("check_mma_atom needs spec= or instruction=")
        import mfma_specs                      # lazily: mfma_specs depends on layoutalg
        spec = mfma_specs.lookup(arch, instruction)
    from ..errors import ParseError
    out, layouts = [], {}
    for op, tv in (("A", tv_a), ("B", tv_b), ("C", tv_c)):
        try:
            layout: Any = _as_layout(tv)
        except ParseError as e:              # e.g. FlyDSL's extent-0 value modes
            layout = f"the atom's {op} layout is not a layout ({e})"
        layouts[op] = layout
        mm = _compare(spec, op, layout, convention)
        if mm is not None:
            out.append(mm)
    relabel = bool(out) and all(m.operand in "AB" for m in out) and _shared_k_permutation(
        spec, layouts, convention)
    return AtomCheck(spec.name, not out, tuple(out), relabel)


def _shared_k_permutation(spec: Any, layouts: dict, convention: str) -> bool:
    """Whether A and B equal the instruction's up to one bijection of K used by both."""
    perm: dict = {}
    for op, kpos in (("A", 1), ("B", 0)):
        tv = layouts[op]
        if isinstance(tv, str) or _shape_of(tv)[1] != spec.items(op):
            return False
        rows, cols, _ = spec.tile_shape(op)
        swap = op == "B" and convention == "cute"
        for lane in range(spec.wave_size):
            for item in range(spec.items(op)):
                r, c = idx2crd(tv(lane, item), (cols, rows) if swap else (rows, cols))
                got = (c, r) if swap else (r, c)
                exp = spec.element(op, lane, item)
                if got[1 - kpos] != exp[1 - kpos] or perm.setdefault(got[kpos], exp[kpos]) \
                        != exp[kpos]:
                    return False
    return len(set(perm.values())) == len(perm)


def _compare(spec: Any, op: str, tv: Any, convention: str) -> Optional[AtomMismatch]:
    """First wrong (lane, item) of one operand; ``tv`` is a Layout or why it is none."""
    rows, cols, _ = spec.tile_shape(op)
    lanes, items = spec.wave_size, spec.items(op)
    swap = op == "B" and convention == "cute"
    tile = (cols, rows) if swap else (rows, cols)
    if isinstance(tv, str):
        return AtomMismatch(op, 0, 0, tuple(spec.element(op, 0, 0)), None, lanes * items,
                            lanes * items, tv)
    nthr, nval = _shape_of(tv)
    first, wrong = None, 0
    for lane in range(lanes):
        for item in range(items):
            exp = spec.element(op, lane, item)
            got, why = None, ""
            if lane >= nthr:
                why = f"the atom has {nthr} threads"
            elif item >= nval:
                why = f"the atom has {nval} values per thread, the instruction {items}"
            else:
                idx = tv(lane, item) if tv.rank == 2 else tv(lane)
                if not 0 <= idx < rows * cols:
                    why = f"tile index {idx} is outside the {tile[0]}x{tile[1]} tile"
                else:
                    r, c = idx2crd(idx, tile)
                    got = (c, r, 0) if swap else (r, c, 0)
            if got != tuple(exp):
                wrong += 1
                if first is None:
                    first = (lane, item, tuple(exp), got, why)
    if first is None:
        return None
    return AtomMismatch(op, first[0], first[1], first[2], first[3], wrong, lanes * items,
                        first[4])


_FLY_MMA = re.compile(r"fly_rocdl\.(\w+)\.(mfma|wmma)<(\d+)x(\d+)x(\d+),\s*\(([^,]+),\s*"
                      r"([^)]+)\)\s*->\s*([^,>]+)")
_FLY_ARCH = {"gfx11": "gfx1100", "gfx120x": "gfx1200"}      # cdna3/cdna4: the caller's arch
_FLY_TYPES = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "i8": "i8",
              "f8E4M3FNUZ": "fp8e4m3fnuz", "f8E5M2FNUZ": "fp8e5m2fnuz",
              "f8E4M3FN": "fp8e4m3fn", "f8E5M2": "fp8e5m2"}


def flydsl_atom_layouts(atom: Any) -> Tuple[str, str, str, str]:
    """``(mma_op, tv_a, tv_b, tv_c)`` printed by a FlyDSL ``MmaAtomType`` (read at trace time)."""
    try:
        return (str(atom.mma_op), str(atom.tv_layout_a), str(atom.tv_layout_b),
                str(atom.tv_layout_c))
    except AttributeError as e:
        raise InteropError(f"not a FlyDSL MmaAtomType ({type(atom).__name__}): {e}") from None


def check_flydsl_atom(atom: Any, *, arch: str = "gfx942") -> AtomCheck:
    """Check a FlyDSL MMA atom (``fx.MmaAtomType.get(mma_op=MFMA(...))``, or the 4 strings of
    :func:`flydsl_atom_layouts`) against the ``mfma_specs`` instruction it names.  WMMA atoms
    name their target (``gfx11`` -> gfx1100, ``gfx120x`` -> gfx1200); MFMA atoms use ``arch``."""
    op, a, b, c = atom if isinstance(atom, (tuple, list)) else flydsl_atom_layouts(atom)
    spec = find_instruction(op, arch)
    return check_mma_atom(a, b, c, spec=spec, convention="cute")


def find_instruction(mma_op: str, arch: str = "gfx942") -> Any:
    """The mfma_specs instruction a FlyDSL ``!fly_rocdl.<target>.mfma|wmma<MxNxK, (a, b) ->
    acc ...>`` names."""
    m = _FLY_MMA.search(mma_op)
    if not m:
        raise InteropError(f"cannot read an MFMA/WMMA from {mma_op!r}; expected "
                           "'!fly_rocdl.<target>.mfma<MxNxK, (a, b) -> acc>'")
    kind = m.group(2)
    arch = _FLY_ARCH.get(m.group(1), arch) if kind == "wmma" else arch
    mm, nn, kk = (int(m.group(i)) for i in (3, 4, 5))
    ta, tb, tacc = (_FLY_TYPES.get(m.group(i).strip(), m.group(i).strip()) for i in (6, 7, 8))
    import mfma_specs                          # lazily: mfma_specs depends on layoutalg
    hits = [s for s in mfma_specs.instructions(arch)
            if s.kind == kind and (s.m, s.n, s.k) == (mm, nn, kk) and s.a_type == ta
            and s.b_type == tb and s.acc_type == tacc]
    if len(hits) != 1:
        raise InteropError(f"{mma_op!r} names {len(hits)} {arch} instructions "
                           f"({', '.join(s.name for s in hits) or 'none'})")
    return hits[0]
