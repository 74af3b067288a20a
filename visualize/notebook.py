"""HTML for Jupyter: diagrams that fit the cell, verdicts with their diagram.

Jupyter prefers ``text/html`` to ``image/svg+xml``, so objects that define ``_repr_html_`` are
shown through these helpers:

* :func:`diagram_html` - the SVG inline, scaled down to the cell width (``max-width: 100%``,
  aspect kept by its ``viewBox``); a click switches to full size inside a horizontally scrolling
  box and back.  The click uses an ``onclick`` attribute: an untrusted notebook strips it, and
  the diagram then simply stays fitted (nothing breaks).
* :func:`result_html` - a verdict (or any text) as a monospace block with a green/red/grey bar,
  followed by a diagram when there is one (a bank-conflict result shows its banks).
"""

from __future__ import annotations

import html
from typing import Any, Optional

__all__ = ["diagram_html", "result_html", "FIT_STYLE"]

#: CSS put on the ``<svg>`` root so it never overflows the cell.
FIT_STYLE = "max-width:100%;height:auto"

_TOGGLE = ("var s=this.querySelector('svg').style;"
           "if(s.maxWidth){s.maxWidth='';this.title='click: fit to the cell'}"
           "else{s.maxWidth='100%';this.title='click: full size'}")


def diagram_html(svg: str, width: float, height: float) -> str:
    """``svg`` fitted to the cell width, full size (scrolling) on click."""
    i = svg.find("<svg")
    if i < 0:
        raise ValueError("not an SVG document")
    fitted = svg[:i] + f'<svg style="{FIT_STYLE}"' + svg[i + 4:]
    note = (f"{int(width)}x{int(height)} px, scaled to the cell; click for full size"
            if width > 600 else "")
    cap = (f"<div style='font:11px monospace;color:#8a8a8a'>{html.escape(note)}</div>"
           if note else "")
    return (f"<div class='layoutalg-diagram' style='max-width:100%;overflow-x:auto;"
            f"cursor:zoom-in' title='click: full size' onclick=\"{_TOGGLE}\">{fitted}</div>"
            + cap)


def result_html(text: str, ok: Optional[bool] = None, diagram: Any = None) -> str:
    """``text`` in a monospace block (bar green for ``ok``, red for not ok, grey for None),
    then ``diagram`` (anything with ``_repr_html_`` or ``_repr_svg_``) when given."""
    color = {True: "#1a7f37", False: "#cf222e", None: "#8a8a8a"}[ok]
    body = html.escape(text)
    out = (f"<div style='font-family:monospace;white-space:pre-wrap;border-left:4px solid "
           f"{color};padding-left:6px'>{body}</div>")
    if diagram is not None:
        rep = getattr(diagram, "_repr_html_", None)
        out += rep() if rep else diagram._repr_svg_()
    return out
