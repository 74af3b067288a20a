"""MFMA/WMMA instructions: which lane and item holds each element of A, B and C/D.

Drawn the way CuTe prints an MMA atom: C (M x N) at the origin, A (M x K) to its left with its
rows aligned to C's rows, B (K x N, i.e. CuTe's N x K transposed) above with its columns aligned
to C's columns.  Each cell reads ``T<lane>`` over ``V<item>``; colour = lane.  Instructions with
several blocks (e.g. ``v_mfma_f32_4x4x4_16b_f16``) get one A/B/C group per block.

The spec is duck-typed (``mfma_specs.MatrixInstruction`` owns it): ``name``, ``m n k`` (or
``M N K``), ``blocks``, ``element(operand, lane, item) -> (row, col, block)`` and
``tv_layout(operand)`` whose first mode is the lane and whose second is the item.  Sparse
(SMFMAC) A operands hold 4 candidate k positions per register slot: each candidate cell is
drawn with ``S<slot>`` (and ``spec.candidates`` gives them).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .colors import thread_color
from .grid import FONT_SIZE, LINE_H, PAD, Grid, HStack, Legend, Text, VStack, render
from .svg import Diagram, Svg, char_width
from .tv_diagram import holder_labels, tv_cell_fn

__all__ = ["draw_mma", "mma_owners"]

Owners = Dict[Tuple[int, int], List[Tuple[int, int]]]


def mnk(spec: Any) -> Tuple[int, int, int]:
    """``(M, N, K)`` of a spec (``mfma_specs`` spells them ``m n k``)."""
    get = lambda a: getattr(spec, a, None) if getattr(spec, a, None) is not None \
        else getattr(spec, a.lower())  # noqa: E731
    return int(get("M")), int(get("N")), int(get("K"))


def _sparse_a(spec: Any, operand: str) -> bool:
    return bool(getattr(spec, "sparse", False)) and operand == "A"


def _lanes_items(spec: Any, operand: str) -> Tuple[int, int]:
    tv = spec.tv_layout(operand)
    lanes = int(tv[0].size())
    if hasattr(spec, "items"):
        return lanes, int(spec.items(operand))
    return lanes, int(tv.size()) // lanes


def mma_owners(spec: Any, operand: str) -> Tuple[Dict[int, Owners], int]:
    """``{block: {(row, col): [(lane, item), ...]}}`` for one operand, and the lane count.

    For a sparse A operand ``item`` is the slot and every candidate position is listed.
    """
    lanes, items = _lanes_items(spec, operand)
    out: Dict[int, Owners] = {}
    for lane in range(lanes):
        for item in range(items):
            if _sparse_a(spec, operand):
                places = spec.candidates(operand, lane, item)
            else:
                places = [spec.element(operand, lane, item)]
            for r, c, b in places:
                out.setdefault(int(b), {}).setdefault((int(r), int(c)), []).append((lane, item))
    return out, lanes


class _MmaBlock:
    """One block: B above C, A left of C, with shared cell size so rows/columns line up."""

    def __init__(self, spec: Any, owners: Dict[str, Dict[int, Owners]], block: int, lanes: int,
                 highlight: Optional[Sequence[int]], label: str, corner: Any = None) -> None:
        M, N, K = mnk(spec)
        a_dims = _operand_dims(spec, "A")
        b_dims = _operand_dims(spec, "B")
        longest = len(f"T{lanes - 1}")
        for own in (owners["A"], owners["B"], owners["C"]):
            for w in own.get(block, {}).values():
                longest = max(longest, *(len(x) for x in holder_labels(w)))
        cw = max(22.0, longest * char_width(FONT_SIZE) + PAD + 3)
        ch = 2 * LINE_H + PAD + 1
        hw = len(str(max(M, N, K) - 1)) * char_width(FONT_SIZE - 1) + 6
        kw = dict(cell_w=cw, cell_h=ch, row_header_w=hw)

        def grid(op: str, rows: int, cols: int, title: str) -> Grid:
            cell = tv_cell_fn(owners[op].get(block, {}), lanes, highlight,
                              value_prefix="S" if _sparse_a(spec, op) else "V")
            return Grid([[cell(i, j) for j in range(cols)] for i in range(rows)], title=title,
                        **kw)

        self.A = grid("A", *a_dims, f"A  {a_dims[0]}x{a_dims[1]} (M x K)")
        self.B = grid("B", *b_dims, f"B  {b_dims[0]}x{b_dims[1]} (K x N)")
        self.C = grid("C", M, N, f"C/D  {M}x{N} (M x N)")
        self.label = Text([label], size=12, bold_first=True) if label else None
        gap = 14.0
        self.top = self.label.height + 4 if self.label else 0.0
        self.xc = self.A.width + gap
        self.yc = self.top + self.B.height + gap
        # align C's cell (0,0) under B's and beside A's: same header width and cell size
        self.width = self.xc + max(self.B.width, self.C.width)
        self.height = self.yc + max(self.A.height, self.C.height)
        # the empty top-left quadrant (left of B, above A) holds the legend when it fits
        fits = corner is not None and corner.width <= self.xc - gap and \
            corner.height <= self.yc - self.top - gap
        self.corner = corner if fits else None

    def draw(self, svg: Svg, x: float, y: float) -> None:
        if self.label:
            self.label.draw(svg, x, y)
        self.B.draw(svg, x + self.xc, y + self.top)
        # A's title row sits level with C's so their cell rows coincide
        self.A.draw(svg, x, y + self.yc)
        self.C.draw(svg, x + self.xc, y + self.yc)
        if self.corner is not None:
            self.corner.draw(svg, x, y + self.top + 8)


def _operand_dims(spec: Any, op: str) -> Tuple[int, int]:
    M, N, K = mnk(spec)
    return {"A": (M, K), "B": (K, N), "C": (M, N), "D": (M, N)}[op]


def draw_mma(spec: Any, *, highlight: Optional[Sequence[int]] = None, title: str = "",
             arch: str = "", blocks_per_row: int = 4, legend: bool = True) -> Diagram:
    """Draw an MFMA/WMMA spec: C at the origin, A to its left, B above; every cell T<lane>/V<item>.

    ``highlight``: lanes drawn in colour with a border, others faded.  ``arch`` (e.g.
    ``"gfx942"``) goes into the title.
    """
    owners = {}
    lanes = 64
    for op in ("A", "B", "C"):
        owners[op], lanes = mma_owners(spec, op)
    nblocks = int(getattr(spec, "blocks", 1) or 1)
    entries = [(thread_color(t, lanes), f"T{t}") for t in range(lanes)]
    corner = Legend(entries, title="lane colours", per_row=8) if legend and nblocks == 1 \
        else None
    groups = [_MmaBlock(spec, owners, b, lanes, highlight,
                        f"block {b}" if nblocks > 1 else "", corner) for b in range(nblocks)]
    rows = [HStack(groups[i:i + blocks_per_row], gap=40)
            for i in range(0, nblocks, blocks_per_row)]
    body = VStack(rows, gap=24)
    if legend and (nblocks > 1 or groups[0].corner is None):
        body = VStack([body, Legend(entries, title="lane colours", per_row=16)])
    name = getattr(spec, "name", "mma")
    arch = arch or getattr(spec, "arch", "") or getattr(spec, "family", "")
    items = {op: _lanes_items(spec, op)[1] for op in ("A", "B", "C")}
    M, N, K = mnk(spec)
    sub = [f"{M}x{N}x{K}"
           + (f", {nblocks} blocks" if nblocks > 1 else "")
           + f", {lanes} lanes; items per lane: A {items['A']}, B {items['B']}, C/D {items['C']}",
           "cell = T<lane> over V<item> (the item-th register element of that lane); "
           "colour = lane"]
    notes = []
    if _sparse_a(spec, "A"):
        notes.append("Sparse A (4:2): register slot S<s> of a lane holds 2 of the 4 k positions "
                     "drawn for it, chosen at run time by the compression index (operand K).")
    for op in ("A", "B", "C"):
        d = sum(1 for blk in owners[op].values() for w in blk.values() if len(w) > 1)
        if d:
            notes.append(f"{op}: {d} elements are held by several lanes (T0,16 = lanes 0 and "
                         "16, +k = k more; hover a cell for all).")
    full = f"{name}" + (f" ({arch})" if arch else "")
    return render(body, title=title or full, subtitle=sub, notes=notes)
