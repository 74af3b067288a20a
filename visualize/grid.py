"""Building blocks shared by every diagram: a labelled cell grid, text, legends, stacking.

Every block has ``width``, ``height`` and ``draw(svg, x, y)``; diagrams are trees of blocks
turned into a :class:`~visualize.svg.Diagram` by :func:`render`.  Grids put row indices down
the left and column indices along the top (rows downward, columns rightward, as CuTe prints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from .colors import EMPTY, GRID_LINE, MUTED, text_color
from .svg import Diagram, Svg, char_width

__all__ = ["Cell", "Grid", "Text", "HStack", "VStack", "Legend", "Spacer", "render",
           "grid_or_overview"]

FONT_SIZE = 11.0
LINE_H = 12.5          # line pitch inside a cell
PAD = 5.0              # cell padding, total per axis


@dataclass
class Cell:
    """One grid cell: background, up to a few text lines, optional emphasis border."""
    fill: str = EMPTY
    lines: Tuple[str, ...] = ()
    ink: str = ""        # text colour ('' = black or white, whichever reads on ``fill``)
    mark: str = ""       # colour of a thick border drawn inside the cell (highlight, conflict)
    tip: str = ""        # hover tooltip (<title>), for information that does not fit


class Grid:
    """An R x C grid of :class:`Cell` (``None`` = empty cell) with index headers and a title.

    ``labels=False`` draws an overview: small unlabelled cells (runs of equal colour merged into
    one rectangle, which keeps 128x128 grids small and fast).
    """

    def __init__(self, cells: Sequence[Sequence[Optional[Cell]]], title: str = "",
                 row_labels: Optional[Sequence[str]] = None,
                 col_labels: Optional[Sequence[str]] = None, labels: bool = True,
                 cell_w: Optional[float] = None, cell_h: Optional[float] = None,
                 font_size: float = FONT_SIZE, header_every: Optional[int] = None,
                 row_header_w: Optional[float] = None,
                 outline: Optional[Tuple[int, int, int, int]] = None) -> None:
        self.cells = cells
        #: (row0, col0, rows, cols) drawn as a dashed box: the region a detail view shows
        self.outline = outline
        self.rows = len(cells)
        self.cols = len(cells[0]) if self.rows else 0
        self.title = title
        self.labels = labels
        self.font_size = font_size
        self.row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(self.rows)]
        self.col_labels = list(col_labels) if col_labels is not None else [str(j) for j in range(self.cols)]
        cw = char_width(font_size)
        if labels:
            longest, nlines = 1, 1
            for row in cells:
                for c in row:
                    if c is not None and c.lines:
                        nlines = max(nlines, len(c.lines))
                        longest = max(longest, max(len(s) for s in c.lines))
            self.cell_w = cell_w or max(22.0, longest * cw + PAD + 3)
            self.cell_h = cell_h or max(18.0, nlines * LINE_H + PAD + 1)
        else:
            self.cell_w = cell_w or 7.0
            self.cell_h = cell_h or 7.0
        hfont = self.header_font
        # headers: label every k-th row/column so header text never overlaps
        self.row_every = header_every or _pow2_at_least(
            (hfont + 1) / self.cell_h if labels else 2 * hfont / self.cell_h)
        longest_col = max((len(s) for s in self.col_labels), default=1)
        self.col_every = header_every or _pow2_at_least(
            (longest_col * char_width(hfont) + 3) / self.cell_w)
        self.header_w = row_header_w if row_header_w is not None else (
            max((len(s) for s in self.row_labels), default=1) * char_width(hfont) + 6)
        self.header_h = hfont + 5
        self.title_h = (font_size + 7) if title else 0.0

    @property
    def header_font(self) -> float:
        return self.font_size - 1 if self.labels else 9.0

    @property
    def width(self) -> float:
        return self.header_w + self.cols * self.cell_w + 1

    @property
    def height(self) -> float:
        return self.title_h + self.header_h + self.rows * self.cell_h + 1

    def origin(self, x: float, y: float) -> Tuple[float, float]:
        """Top-left corner of cell (0, 0) when the grid is drawn at (x, y)."""
        return x + self.header_w, y + self.title_h + self.header_h

    def draw(self, svg: Svg, x: float, y: float) -> None:
        if self.title:
            svg.text(x, y + self.font_size + 1, self.title, size=self.font_size + 1,
                     weight="bold")
        gx, gy = self.origin(x, y)
        cw, ch = self.cell_w, self.cell_h
        self._draw_headers(svg, gx, gy)
        if self.labels:
            self._draw_labelled(svg, gx, gy)
        else:
            self._draw_overview(svg, gx, gy)
        # outer frame
        svg.rect(gx, gy, self.cols * cw, self.rows * ch, stroke="#000000", stroke_width=1)
        if self.outline:
            r0, c0, nr, nc = self.outline
            svg.raw(f'<rect x="{gx + c0 * cw:g}" y="{gy + r0 * ch:g}" width="{nc * cw:g}" '
                    f'height="{nr * ch:g}" fill="none" stroke="#000000" stroke-width="2" '
                    f'stroke-dasharray="6 3"/>')

    def _draw_headers(self, svg: Svg, gx: float, gy: float) -> None:
        hf = self.header_font
        svg.open_group(font_size=hf, fill=MUTED)
        svg.open_group(text_anchor="end")
        for i in range(0, self.rows, self.row_every):
            svg.text(gx - 3, gy + (i + 0.5) * self.cell_h + 0.35 * hf, self.row_labels[i])
        svg.close_group()
        svg.open_group(text_anchor="middle")
        for j in range(0, self.cols, self.col_every):
            svg.text(gx + (j + 0.5) * self.cell_w, gy - 4, self.col_labels[j])
        svg.close_group()
        svg.close_group()

    def _draw_labelled(self, svg: Svg, gx: float, gy: float) -> None:
        cw, ch, fs = self.cell_w, self.cell_h, self.font_size
        rects: List[str] = []
        texts: List[str] = []
        marks: List[str] = []
        for i, row in enumerate(self.cells):
            y0 = gy + i * ch
            for j, c in enumerate(row):
                x0 = gx + j * cw
                fill = c.fill if c is not None else EMPTY
                tip = f"<title>{_esc(c.tip)}</title>" if c is not None and c.tip else ""
                if tip:
                    rects.append(f'<rect x="{x0:g}" y="{y0:g}" width="{cw:g}" height="{ch:g}" '
                                 f'fill="{fill}">{tip}</rect>')
                else:
                    rects.append(f'<rect x="{x0:g}" y="{y0:g}" width="{cw:g}" height="{ch:g}" '
                                 f'fill="{fill}"/>')
                if c is None:
                    continue
                if c.mark:
                    marks.append(f'<rect x="{x0 + 1.5:g}" y="{y0 + 1.5:g}" width="{cw - 3:g}" '
                                 f'height="{ch - 3:g}" fill="none" stroke="{c.mark}"/>')
                if c.lines:
                    ink = c.ink or text_color(fill)
                    fill_attr = "" if ink == "#000000" else f' fill="{ink}"'
                    n = len(c.lines)
                    top = y0 + ch / 2 - (n - 1) * LINE_H / 2 + 0.36 * fs
                    xc = x0 + cw / 2
                    for k, s in enumerate(c.lines):
                        texts.append(f'<text x="{xc:.1f}" y="{top + k * LINE_H:.1f}"{fill_attr}>'
                                     f'{_esc(s)}</text>')
        # class/data-* attributes make the structure checkable by tests and tools (no CSS)
        svg.group(rects, class_="cells", data_rows=self.rows, data_cols=self.cols,
                  data_title=self.title, stroke=GRID_LINE, stroke_width=0.6)
        if marks:
            svg.group(marks, class_="marks", stroke_width=2.5)
        svg.group(texts, class_="labels", font_size=_g(fs), text_anchor="middle")

    def _draw_overview(self, svg: Svg, gx: float, gy: float) -> None:
        cw, ch = self.cell_w, self.cell_h
        rects: List[str] = []
        marks: List[str] = []
        # merge equal-colour runs along rows, then identical runs down columns: a thread's
        # 8x8 block becomes one rectangle (far fewer elements to write, parse and rasterize)
        open_runs: dict = {}   # (j, k, fill) -> [first row, last row]
        done: List[Tuple[int, int, int, int, str]] = []
        for i, row in enumerate(self.cells):
            runs = {}
            j = 0
            while j < self.cols:
                c = row[j]
                fill = c.fill if c is not None else EMPTY
                k = j + 1
                while k < self.cols and (row[k].fill if row[k] is not None else EMPTY) == fill:
                    k += 1
                key = (j, k, fill)
                prev = open_runs.get(key)
                runs[key] = [prev[0], i] if prev is not None and prev[1] == i - 1 else [i, i]
                for m in range(j, k):
                    if row[m] is not None and row[m].mark:
                        marks.append(f'<rect x="{gx + m * cw + 0.75:g}" y="{gy + i * ch + 0.75:g}" '
                                     f'width="{cw - 1.5:g}" height="{ch - 1.5:g}" fill="none" '
                                     f'stroke="{row[m].mark}"/>')
                j = k
            for key, (r0, r1) in open_runs.items():
                if runs.get(key, [None])[0] != r0:
                    done.append((r0, r1) + key)
            open_runs = runs
        done += [(r0, r1) + key for key, (r0, r1) in open_runs.items()]
        for r0, r1, j, k, fill in sorted(done):
            rects.append(f'<rect x="{gx + j * cw:g}" y="{gy + r0 * ch:g}" width="{(k - j) * cw:g}" '
                         f'height="{(r1 - r0 + 1) * ch:g}" fill="{fill}"/>')
        svg.group(rects, class_="cells overview", data_rows=self.rows, data_cols=self.cols,
                  data_title=self.title)
        if marks:
            svg.group(marks, class_="marks", stroke_width=1.5)


def _pow2_at_least(x: float) -> int:
    """Header label step: a power of two (layouts are mostly powers of two, so 0, 8, 16, ...)."""
    k = 1
    while k < x:
        k *= 2
    return k


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _g(v: float) -> str:
    return f"{v:g}"


class Text:
    """Lines of text (first line optionally bold) as a block."""

    def __init__(self, lines: Iterable[str], size: float = FONT_SIZE, bold_first: bool = False,
                 color: str = "#000000") -> None:
        self.lines = [s for s in lines]
        self.size = size
        self.bold_first = bold_first
        self.color = color
        self.pitch = size * 1.35
        self.width = max((len(s) for s in self.lines), default=0) * char_width(size) + 2
        self.height = len(self.lines) * self.pitch + 2

    def draw(self, svg: Svg, x: float, y: float) -> None:
        for k, s in enumerate(self.lines):
            svg.text(x, y + (k + 1) * self.pitch - 0.3 * self.size, s, size=self.size,
                     fill=self.color if self.color != "#000000" else "",
                     weight="bold" if (k == 0 and self.bold_first) else "")


class Spacer:
    def __init__(self, width: float = 0, height: float = 0) -> None:
        self.width, self.height = width, height

    def draw(self, svg: Svg, x: float, y: float) -> None:
        pass


class HStack:
    """Blocks side by side, top-aligned."""

    def __init__(self, items: Sequence, gap: float = 28) -> None:
        self.items = [b for b in items if b is not None]
        self.gap = gap
        self.width = sum(b.width for b in self.items) + gap * max(0, len(self.items) - 1)
        self.height = max((b.height for b in self.items), default=0)

    def draw(self, svg: Svg, x: float, y: float) -> None:
        for b in self.items:
            b.draw(svg, x, y)
            x += b.width + self.gap


class VStack:
    """Blocks one under another, left-aligned."""

    def __init__(self, items: Sequence, gap: float = 18) -> None:
        self.items = [b for b in items if b is not None]
        self.gap = gap
        self.width = max((b.width for b in self.items), default=0)
        self.height = sum(b.height for b in self.items) + gap * max(0, len(self.items) - 1)

    def draw(self, svg: Svg, x: float, y: float) -> None:
        for b in self.items:
            b.draw(svg, x, y)
            y += b.height + self.gap


class Legend:
    """Colour swatches with labels, wrapped into rows of ``per_row`` entries."""

    def __init__(self, entries: Sequence[Tuple[str, str]], title: str = "", per_row: int = 16,
                 size: float = 10.0, swatch_mark: Sequence[str] = ()) -> None:
        self.entries = list(entries)
        self.title = title
        self.per_row = max(1, per_row)
        self.size = size
        self.marks = list(swatch_mark) + [""] * (len(self.entries) - len(swatch_mark))
        longest = max((len(lbl) for _, lbl in self.entries), default=1)
        self.item_w = 16 + longest * char_width(size) + 10
        self.row_h = size + 8
        nrows = -(-len(self.entries) // self.per_row)
        self.title_h = size + 7 if title else 0
        ncols = min(self.per_row, len(self.entries))
        self.width = max(ncols * self.item_w, len(title) * char_width(size) + 4)
        self.height = self.title_h + nrows * self.row_h

    def draw(self, svg: Svg, x: float, y: float) -> None:
        if self.title:
            svg.text(x, y + self.size, self.title, size=self.size, weight="bold")
        y0 = y + self.title_h
        svg.open_group(font_size=_g(self.size))
        for n, (color, label) in enumerate(self.entries):
            r, c = divmod(n, self.per_row)
            sx, sy = x + c * self.item_w, y0 + r * self.row_h
            mark = self.marks[n]
            svg.rect(sx, sy + 1, 12, 12, fill=color, stroke=mark or GRID_LINE,
                     stroke_width=2 if mark else 0.6)
            svg.text(sx + 16, sy + 11, label)
        svg.close_group()


def render(body, title: str = "", subtitle: Sequence[str] = (), notes: Sequence[str] = (),
           margin: float = 16) -> Diagram:
    """Wrap ``body`` with a title, subtitle lines and footnotes into a standalone Diagram."""
    parts: List = []
    if title:
        parts.append(Text([title], size=14, bold_first=True))
    if subtitle:
        parts.append(Text(list(subtitle), size=11, color="#333333"))
    parts.append(body)
    if notes:
        parts.append(Text(list(notes), size=10.5, color="#444444"))
    stack = VStack(parts, gap=10)
    w, h = stack.width + 2 * margin, stack.height + 2 * margin
    svg = Svg(w, h)
    stack.draw(svg, margin, margin)
    return Diagram(svg.to_string(title), w, h, title=title, notes=list(notes))


def grid_or_overview(rows: int, cols: int, cell, title: str, max_cells: int = 4096,
                     detail: Tuple[int, int] = (32, 32), **grid_kw) -> Tuple[object, List[str]]:
    """A labelled grid, or for more than ``max_cells`` cells an overview plus a labelled detail.

    ``cell(i, j)`` returns the :class:`Cell` at row i, column j.  The overview shows every cell
    as a small unlabelled square in its colour (the whole pattern at a glance); the detail is
    the top-left ``detail`` corner with full labels, outlined on the overview.  Returns the
    block and notes saying what was elided.
    """
    if rows * cols <= max_cells:
        return Grid([[cell(i, j) for j in range(cols)] for i in range(rows)], title=title,
                    **grid_kw), []
    dr, dc = min(rows, detail[0]), min(cols, detail[1])
    size = max(3.0, min(8.0, 1024.0 / max(rows, cols)))
    over = Grid([[cell(i, j) for j in range(cols)] for i in range(rows)],
                title=(f"{title}: " if title else "") + f"overview (all {rows}x{cols} cells, unlabelled)",
                labels=False,
                cell_w=size, cell_h=size, outline=(0, 0, dr, dc))
    det = Grid([[cell(i, j) for j in range(dc)] for i in range(dr)],
               title=f"detail: rows 0-{dr - 1}, columns 0-{dc - 1}", **grid_kw)
    note = (f"Large layout ({rows}x{cols} = {rows * cols} cells > {max_cells}): the overview "
            f"shows every cell by colour only; the dashed box is the labelled detail "
            f"(pass max_cells= to label everything).")
    return HStack([over, det], gap=36), [note]
