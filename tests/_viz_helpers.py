"""Helpers for the visualize tests: parse diagrams with a real XML parser, read their grids."""
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import List

NS = "{http://www.w3.org/2000/svg}"


def parse_svg(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises on malformed XML
    assert root.tag == NS + "svg"
    float(root.get("width")), float(root.get("height"))
    return root


@dataclass
class GridView:
    title: str
    rows: int
    cols: int
    fills: List[str]          # row-major cell fills
    texts: List[str]          # label texts in drawing order
    marks: int                # emphasis borders
    mark_colors: List[str]


def grids(svg: str) -> List[GridView]:
    """Every labelled (or overview) grid, in drawing order."""
    root = parse_svg(svg)
    out: List[GridView] = []
    groups = list(root.iter(NS + "g"))
    for k, g in enumerate(groups):
        cls = (g.get("class") or "").split()
        if "cells" not in cls:
            continue
        rects = g.findall(NS + "rect")
        view = GridView(g.get("data-title"), int(g.get("data-rows")), int(g.get("data-cols")),
                        [r.get("fill") for r in rects], [], 0, [])
        # the marks and labels groups follow their cells group, before the next cells group
        for h in groups[k + 1:]:
            hc = (h.get("class") or "").split()
            if "cells" in hc:
                break
            if "marks" in hc:
                ms = h.findall(NS + "rect")
                view.marks = len(ms)
                view.mark_colors = [m.get("stroke") for m in ms]
            if "labels" in hc:
                view.texts = [t.text for t in h.findall(NS + "text")]
        if "overview" not in cls:
            assert len(rects) == view.rows * view.cols, (view.title, len(rects))
        out.append(view)
    return out


def all_text(svg: str) -> str:
    root = parse_svg(svg)
    return "\n".join(t.text or "" for t in root.iter(NS + "text"))


def thread_fills(view: GridView) -> dict:
    """{thread: set of fills} for a grid whose every cell is 'T<t>' over 'V<v>'."""
    out: dict = {}
    assert len(view.texts) == 2 * len(view.fills)
    for n, fill in enumerate(view.fills):
        t = view.texts[2 * n]
        m = re.fullmatch(r"T(\d+)", t)
        assert m, t
        out.setdefault(int(m.group(1)), set()).add(fill)
    return out
