"""LDS accesses: which bank each lane hits, phase by phase, and which lanes conflict.

Two panels, both with one row per access phase of the instruction (only lanes of one phase can
conflict; the phase tables come from :func:`mfma_specs.lds_model`):

* **lanes**: the lanes of the phase, each cell ``T<lane>`` over the banks it touches, coloured by
  its first bank; lanes that take part in a conflict get a red border; the last column is the
  phase's conflict degree (``1-way`` = conflict-free);
* **banks**: the 32 (64) banks; a cell names the lane using that bank, or ``xN`` in red when N
  different addresses meet there (an N-way conflict: N serialized cycles).

The conflict verdict comes from the verifier (``layoutalg.verify.bank_conflicts``) when it is
available; the per-bank picture is recomputed here from the same model and the two are checked
against each other, so a diagram never contradicts the report printed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout
from layoutalg.errors import ShapeError
from layoutalg.inttuple import flatten
from layoutalg.tv import TVLayout

from .colors import CONFLICT, category_color
from .grid import Cell, Grid, HStack, VStack, render
from .svg import Diagram

__all__ = ["draw_banks", "bank_picture", "BankPicture", "access_offsets"]

OK_FILL = "#dff3e0"      # a bank used by exactly one address
UNUSED = "#ffffff"


def access_offsets(access: Any, lds: Any = None) -> np.ndarray:
    """Element offsets ``[lanes, values, iterations]`` of an access (the verifier's forms)."""
    if isinstance(access, TVLayout):
        access = access.layout_tv
    if isinstance(access, (Layout, ComposedLayout)):
        inner = access.inner if isinstance(access, ComposedLayout) else access
        shp = inner.shape if isinstance(inner.shape, tuple) else (inner.shape,)
        sizes = [int(np.prod([int(x) for x in flatten(s)])) for s in shp]
        if len(sizes) == 1:
            sizes.append(1)
        vals = np.asarray(access.values(), dtype=np.int64)
        t, v = sizes[0], sizes[1]
        it = vals.size // (t * v)
        out = vals.reshape(it, v, t).transpose(2, 1, 0)  # colex: lane fastest
    else:
        out = np.asarray(access)
        if out.dtype == object or not np.issubdtype(out.dtype, np.integer):
            raise ShapeError("an access is a TV layout (lane mode first) or an int array "
                             f"[lanes, values]; got {type(access).__name__}")
        out = out.astype(np.int64)
        while out.ndim < 3:
            out = out[..., None] if out.ndim == 2 else out[:, None]
    if lds is not None:
        out = np.vectorize(lambda k: int(lds(int(k))), otypes=[np.int64])(out)
    return out


@dataclass
class BankPicture:
    """Per-phase bank usage of one instruction issue (what the two panels draw)."""
    phases: Tuple[Tuple[int, ...], ...]
    banks: int
    lane_banks: Dict[int, List[int]]                 # lane -> banks its vector touches
    bank_users: List[Dict[int, Dict[int, Set[int]]]]  # phase -> bank -> dword -> lanes
    ways: List[int]                                  # phase -> conflict degree
    conflicting: Set[int]                            # lanes in a conflict

    @property
    def max_ways(self) -> int:
        return max(self.ways) if self.ways else 1


def bank_picture(lane_addresses: Sequence[int], model: Any) -> BankPicture:
    """Banks per lane and per phase, from each lane's vector byte address (one issue)."""
    nb, bb, ab = int(model.banks), int(model.bank_bytes), int(model.access_bytes)
    addrs = [int(a) for a in lane_addresses]
    lane_dwords = {lane: list(range(a // bb, (a + ab - 1) // bb + 1))
                   for lane, a in enumerate(addrs)}
    users: List[Dict[int, Dict[int, Set[int]]]] = []
    ways: List[int] = []
    conflicting: Set[int] = set()
    for ph in model.phases:
        per_bank: Dict[int, Dict[int, Set[int]]] = {}
        for lane in ph:
            for w in lane_dwords.get(lane, []):
                per_bank.setdefault(w % nb, {}).setdefault(w, set()).add(lane)
        users.append(per_bank)
        ways.append(max((len(d) for d in per_bank.values()), default=1))
        for d in per_bank.values():
            if len(d) > 1:
                for ls in d.values():
                    conflicting |= ls
    lane_banks = {lane: [w % nb for w in ws] for lane, ws in lane_dwords.items()}
    return BankPicture(tuple(tuple(p) for p in model.phases), nb, lane_banks, users, ways,
                       conflicting)


def _lane_addresses(offsets: np.ndarray, model: Any, elem_bytes: int) -> np.ndarray:
    """Fallback without the verifier: one vector per lane, values contiguous (else refuse)."""
    lanes, vals = offsets.shape
    if vals * elem_bytes != model.access_bytes:
        raise ShapeError(f"each lane has {vals} values of {elem_bytes} bytes but "
                         f"{model.instruction} moves {model.access_bytes} bytes; without "
                         "layoutalg.verify only single-issue accesses can be drawn")
    if not (np.diff(offsets, axis=1) == 1).all():
        raise ShapeError("each lane's values must be contiguous elements (one vector)")
    return offsets[:, 0] * elem_bytes


def _bank_span(banks: Sequence[int]) -> str:
    """'b4-7' for a contiguous run, else a short list."""
    if not banks:
        return ""
    if list(banks) == list(range(banks[0], banks[0] + len(banks))) and len(banks) > 1:
        return f"b{banks[0]}-{banks[-1]}"
    if len(banks) == 1:
        return f"b{banks[0]}"
    return "b" + ",".join(str(b) for b in banks[:2]) + ("…" if len(banks) > 2 else "")


def _run_verifier(access: Any, arch: str, instruction: str, elem_bytes: int, lds: Any):
    try:
        from layoutalg.verify import bank_conflicts  # type: ignore[attr-defined]
    except ImportError:
        return None
    kw: Dict[str, Any] = dict(arch=arch, instruction=instruction, elem_bytes=elem_bytes)
    if lds is not None:
        kw["lds"] = lds
    return bank_conflicts(access, **kw)


def draw_banks(access: Any = None, *, arch: str = "gfx942", instruction: str = "ds_read_b128",
               elem_bytes: int = 2, lds: Any = None, report: Any = None,
               title: str = "") -> Diagram:
    """Draw an LDS access under ``instruction``'s phases, from the verifier's report.

    ``access``: what :func:`layoutalg.verify.bank_conflicts` takes (a TV layout, lane mode
    first, to element offsets; or an int array ``[lanes, values]``), with ``lds=`` an optional
    LDS layout applied to it.  ``report``: an existing ``BankResult`` (then ``access`` may be
    omitted).  With several issues (values beyond one vector, iteration modes) the issue the
    verifier reports - the worst one - is drawn.
    """
    if report is None:
        if access is None:
            raise ShapeError("draw_banks needs an access or a report")
        report = _run_verifier(access, arch, instruction, elem_bytes, lds)
    notes: List[str] = []
    if report is not None and getattr(report, "lane_addresses", None) is not None:
        model = report.model
        elem_bytes = int(report.elem_bytes)
        pic = bank_picture(report.lane_addresses, model)
        ways_rep = [int(w) for w in report.phase_ways]
        if ways_rep != pic.ways:  # the picture must never contradict the verdict
            notes.append(f"WARNING: verifier ways per phase {ways_rep} differ from this "
                         f"picture's {pic.ways}; please report this.")
        pic.conflicting = {int(l) for l in np.flatnonzero(report.conflict_lanes)}
        if int(getattr(report, "n_issues", 1)) > 1:
            notes.append(f"{report.n_issues} instruction issues; drawn: "
                         f"{report.reported_issue} (the worst).")
    elif report is not None:
        raise ShapeError(f"this report has no per-lane addresses to draw ({type(report).__name__}"
                         "); substitute concrete values for symbolic strides first")
    else:
        from mfma_specs import lds_model
        model = lds_model(arch, instruction)
        offs = access_offsets(access, lds)
        if offs.shape[2] != 1:
            raise ShapeError("without layoutalg.verify only single-issue accesses can be drawn")
        pic = bank_picture(_lane_addresses(offs[:, :, 0], model, elem_bytes), model)
        notes.append("layoutalg.verify not available: conflicts counted by the diagram itself.")

    lane_grid = _lane_grid(pic)
    bank_grid = _bank_grid(pic)
    body = HStack([lane_grid, bank_grid], gap=40)
    if body.width > 1800:
        body = VStack([lane_grid, bank_grid], gap=24)
    verdict = "conflict-free" if pic.max_ways == 1 else f"{pic.max_ways}-way bank conflict"
    sub = [f"{model.arch} {model.instruction}, {elem_bytes}-byte elements, {model.banks} banks x "
           f"{model.bank_bytes} B, {len(model.phases)} phases of {len(model.phases[0])} lanes: "
           f"{verdict}"]
    if pic.conflicting:
        sub.append(f"{len(pic.conflicting)} lanes take part in conflicts (red borders); "
                   f"a red bank cell xN = N addresses in one bank = N cycles")
    if report is not None:
        sub.append(f"verifier: {report.summary()}" if hasattr(report, "summary")
                   else f"verifier: {str(report).splitlines()[0]}")
    if access is None:
        name = f"LDS banks: {model.instruction}"
    else:
        what = "offsets" if isinstance(access, np.ndarray) else str(access)
        name = f"LDS banks: {what}" + (f" in {lds}" if lds is not None else "")
    name = title or name
    return render(body, title=name, subtitle=sub, notes=notes)


def _lane_grid(pic: BankPicture) -> Grid:
    width = max(len(p) for p in pic.phases)
    rows = []
    for p, ph in enumerate(pic.phases):
        row: List[Optional[Cell]] = []
        for lane in ph:
            banks = pic.lane_banks.get(lane, [])
            if not banks:
                row.append(Cell(fill=UNUSED, lines=(f"T{lane}", "-")))
                continue
            bad = lane in pic.conflicting
            row.append(Cell(fill=category_color(banks[0], pic.banks),
                            lines=(f"T{lane}", _bank_span(banks)),
                            mark=CONFLICT if bad else "",
                            tip=f"lane {lane}: banks {banks}"))
        row += [None] * (width - len(ph))
        w = pic.ways[p]
        row.append(Cell(fill=CONFLICT if w > 1 else OK_FILL, lines=(f"{w}-way",),
                        ink="#ffffff" if w > 1 else ""))
        rows.append(row)
    return Grid(rows, title="lanes of each phase (colour = first bank)",
                row_labels=[f"phase {p}" for p in range(len(pic.phases))],
                col_labels=[str(j) for j in range(width)] + ["ways"])


def _bank_grid(pic: BankPicture) -> Grid:
    rows = []
    for p, per_bank in enumerate(pic.bank_users):
        row: List[Cell] = []
        for b in range(pic.banks):
            words = per_bank.get(b, {})
            if not words:
                row.append(Cell(fill=UNUSED, lines=()))
                continue
            lanes = sorted(set().union(*words.values()))
            tip = f"bank {b}: " + "; ".join(
                f"dword {w}: lanes {sorted(ls)}" for w, ls in sorted(words.items()))
            if len(words) == 1:
                extra = f"+{len(lanes) - 1}" if len(lanes) > 1 else ""  # broadcast, no conflict
                row.append(Cell(fill=OK_FILL, lines=(f"T{lanes[0]}{extra}",), tip=tip))
            else:
                row.append(Cell(fill=CONFLICT, lines=(f"x{len(words)}",), ink="#ffffff",
                                tip=tip))
        rows.append(row)
    return Grid(rows, title="banks of each phase (xN = N-way conflict)",
                row_labels=[f"phase {p}" for p in range(len(pic.bank_users))],
                col_labels=[str(b) for b in range(pic.banks)])
