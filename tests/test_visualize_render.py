"""Rendering: PNGs decode with the right size and show the thread colours; Chromium draws the SVG."""
import io
import os
import sys

import pytest

import layoutalg as la
import visualize as viz
from visualize import raster
from visualize.colors import thread_color

sys.path.insert(0, os.path.dirname(__file__))
from _viz_helpers import parse_svg  # noqa: E402

Image = pytest.importorskip("PIL.Image", reason="pillow decodes the PNGs (pip install pillow)")


def _tv_diagram():
    tv = la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))
    return viz.draw_tv(tv)


def _hex(rgb):
    return "#%02x%02x%02x" % tuple(rgb[:3])


def _colours(img):
    return {_hex(c) for _, c in img.convert("RGB").getcolors(maxcolors=1 << 24)}


@pytest.mark.skipif(not raster.available(), reason="no SVG rasterizer (cairosvg, rsvg-convert "
                    "or chromium) installed")
def test_png_size_and_thread_colours(tmp_path):
    d = _tv_diagram()
    path = d.save(tmp_path / "tv.png", scale=1.0)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = Image.open(io.BytesIO(data))
    assert abs(img.width - d.width) <= 2 and abs(img.height - d.height) <= 2
    present = _colours(img)
    wanted = {thread_color(t, 64) for t in range(64)}
    assert wanted <= present, f"missing {len(wanted - present)} thread colours"


@pytest.mark.skipif(not raster.available(), reason="no SVG rasterizer installed")
def test_png_default_scale_is_2x_and_capped_for_huge():
    d = viz.draw_layout(la.parse("(4,4):(4,1)"))
    img = Image.open(io.BytesIO(d.to_png()))
    assert abs(img.width - 2 * d.width) <= 2
    assert raster._default_scale(20000, 20000) < 1.0     # huge diagrams are scaled down


def test_missing_rasterizer_is_a_clear_error(monkeypatch):
    for name in ("_try_cairosvg", "_try_rsvg", "_try_chromium"):
        monkeypatch.setattr(raster, name, lambda *a, **k: None)
    with pytest.raises(raster.RasterizerMissing, match="cairosvg"):
        raster.svg_to_png('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')


@pytest.mark.skipif(raster.chromium_binary() is None,
                    reason="Chromium is not installed (Debian: apt-get install chromium; "
                           "scripts/dev.sh installs it)")
def test_svg_renders_in_headless_chromium(tmp_path):
    d = _tv_diagram()
    svg = tmp_path / "tv.svg"
    d.save(svg)
    parse_svg(svg.read_text())
    shot = tmp_path / "shot.png"
    raster.chromium_screenshot(str(svg), str(shot), int(d.width), int(d.height))
    img = Image.open(shot).convert("RGB")
    assert img.width >= int(d.width) - 2
    colours = _colours(img)
    # not blank: many colours, most of the palette, and plenty of non-white pixels
    assert len(colours) > 100
    wanted = {thread_color(t, 64) for t in range(64)}
    assert len(wanted & colours) >= 60
    import numpy as np
    px = np.asarray(img)
    nonwhite = (px != 255).any(axis=2).mean()
    assert nonwhite > 0.3, f"only {nonwhite:.0%} of the screenshot is drawn"


@pytest.mark.skipif(not raster.available(), reason="no SVG rasterizer installed")
def test_large_overview_pixels_match_thread_colours():
    # the overview merges equal-colour cells into rectangles: every cell must still show
    # its own thread's colour once rasterized
    import re
    import numpy as np
    from visualize.tv_diagram import tv_owners
    tiler, tv = la.make_layout_tv(la.parse("(16,16):(16,1)"), la.parse("(8,8):(8,1)"))
    d = viz.draw_tv((tiler, tv))
    img = np.asarray(Image.open(io.BytesIO(d.to_png(scale=1.0))).convert("RGB"))
    start = d.svg.index('class="cells overview"')
    m = re.search(r'<rect x="([\d.]+)" y="([\d.]+)"', d.svg[start:])
    x0, y0 = float(m.group(1)), float(m.group(2))
    size = 8.0
    owners, T, _, _ = tv_owners(tv, tiler)
    wrong = [(i, j) for i in range(0, 128, 3) for j in range(0, 128, 3)
             if _hex(img[int(y0 + (i + .5) * size), int(x0 + (j + .5) * size)])
             != thread_color(owners[(i, j)][0][0], T)]
    assert not wrong, wrong[:5]
