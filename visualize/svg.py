"""A tiny SVG builder and the :class:`Diagram` every ``draw_*`` function returns.

Why not a drawing library: the diagrams are grids of labelled rectangles, the output must be
plain standalone SVG that browsers, Jupyter, cairo and design-doc tools all read the same way,
and building strings directly keeps a 16k-cell diagram well under a second.

Conventions kept for every renderer (cairosvg, rsvg, Chromium): no CSS, no external fonts; text
attributes are set on ``<g>`` groups and inherited; text is vertically centred by an explicit
baseline offset (``dominant-baseline`` is not honoured everywhere).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Union
from xml.sax.saxutils import escape, quoteattr

__all__ = ["Svg", "Diagram", "FONT", "char_width"]

#: Monospace stack: DejaVu Sans Mono is what Debian (and so CI) has; the rest cover macOS/Windows.
FONT = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"


def char_width(font_size: float) -> float:
    """Advance width of one monospace glyph (DejaVu Sans Mono is 0.602 em)."""
    return 0.61 * font_size


def _num(v: float) -> str:
    """Short number formatting: SVG size matters for 10^4-cell diagrams."""
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.1f}"


class Svg:
    """Append-only SVG document: call the element methods, then :meth:`to_string`."""

    def __init__(self, width: float, height: float, background: str = "#ffffff") -> None:
        self.width = width
        self.height = height
        self.parts: List[str] = []
        if background:
            self.rect(0, 0, width, height, fill=background)

    # -- elements ------------------------------------------------------------------------------
    def rect(self, x: float, y: float, w: float, h: float, fill: str = "none", stroke: str = "",
             stroke_width: float = 0, extra: str = "") -> None:
        s = (f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
             f'fill="{fill}"')
        if stroke:
            s += f' stroke="{stroke}" stroke-width="{_num(stroke_width)}"'
        self.parts.append(s + extra + "/>")

    def text(self, x: float, y: float, text: str, size: Optional[float] = None, fill: str = "",
             anchor: str = "", weight: str = "", extra: str = "") -> None:
        """``y`` is the baseline."""
        s = f'<text x="{_num(x)}" y="{_num(y)}"'
        if size:
            s += f' font-size="{_num(size)}"'
        if fill:
            s += f' fill="{fill}"'
        if anchor:
            s += f' text-anchor="{anchor}"'
        if weight:
            s += f' font-weight="{weight}"'
        self.parts.append(s + extra + ">" + escape(text) + "</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#000",
             width: float = 1, dash: str = "") -> None:
        s = (f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
             f'stroke="{stroke}" stroke-width="{_num(width)}"')
        if dash:
            s += f' stroke-dasharray="{dash}"'
        self.parts.append(s + "/>")

    def open_group(self, **attrs: Union[str, float]) -> None:
        """``<g>`` with presentation attributes (``font_size`` -> ``font-size``) inherited."""
        # trailing underscore for Python keywords: class_ -> class
        a = "".join(f" {k.rstrip('_').replace('_', '-')}={quoteattr(str(v))}"
                    for k, v in attrs.items())
        self.parts.append(f"<g{a}>")

    def close_group(self) -> None:
        self.parts.append("</g>")

    def raw(self, fragment: str) -> None:
        self.parts.append(fragment)

    def group(self, elements: Sequence[str], **attrs: Union[str, float]) -> None:
        """``elements`` (SVG text, one per line) in one ``<g>`` with ``attrs`` as in
        :meth:`open_group`."""
        self.open_group(**attrs)
        self.raw("\n".join(elements))
        self.close_group()

    # -- output --------------------------------------------------------------------------------
    def to_string(self, title: str = "") -> str:
        w, h = _num(self.width), _num(self.height)
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
                f'viewBox="0 0 {w} {h}" font-family={quoteattr(FONT)}>')
        t = f"<title>{escape(title)}</title>" if title else ""
        return head + t + "\n".join(self.parts) + "</svg>\n"


class Diagram:
    """A finished diagram: SVG text plus size; renders inline in Jupyter via ``_repr_svg_``.

    ``save("x.svg")`` / ``save("x.png")`` pick the format from the suffix; PNG goes through
    :mod:`visualize.raster` (cairosvg, else rsvg-convert, else headless Chromium).
    """

    def __init__(self, svg: str, width: float, height: float, title: str = "",
                 notes: Optional[List[str]] = None) -> None:
        self.svg = svg
        self.width = width
        self.height = height
        self.title = title
        #: Plain-text remarks about what was drawn (e.g. "large layout: overview + detail").
        self.notes = list(notes or [])

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        """Jupyter: fitted to the cell width, full size on click (:mod:`visualize.notebook`)."""
        from .notebook import diagram_html
        return diagram_html(self.svg, self.width, self.height)

    def __repr__(self) -> str:
        return f"<Diagram {self.title!r} {int(self.width)}x{int(self.height)}px>"

    def to_png(self, scale: Optional[float] = None) -> bytes:
        from .raster import svg_to_png
        return svg_to_png(self.svg, scale=scale, width=self.width, height=self.height)

    def save(self, path: Union[str, os.PathLike], scale: Optional[float] = None) -> Path:
        """Write SVG or PNG (by suffix); returns the path written."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".svg":
            p.write_text(self.svg, encoding="utf-8")
        elif suffix == ".png":
            p.write_bytes(self.to_png(scale))
        else:
            raise ValueError(f"cannot save a diagram as {p.name!r}: use a .svg or .png suffix")
        return p
