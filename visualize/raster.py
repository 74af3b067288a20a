"""SVG -> PNG, with whatever well-kept rasterizer the machine has.

Tried in order:

1. ``cairosvg`` (pip; needs the system ``libcairo2``, which graphviz already pulls in);
2. ``rsvg-convert`` (Debian ``librsvg2-bin``);
3. headless Chromium (Debian ``chromium``), which screenshots the SVG page.

All three render the same SVG the browser shows, so the PNG and the SVG never disagree.
:class:`RasterizerMissing` (exit code 3 in the CLI) says what to install when none works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional

__all__ = ["svg_to_png", "RasterizerMissing", "available", "chromium_binary",
           "chromium_screenshot", "CHROMIUM_FLAGS"]

#: Enough for a 128x128 overview plus detail at 1x without producing 100 MB files.
MAX_PIXELS = 40_000_000

#: Flags that let Chromium run headless as root in a container with no network or GPU.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--force-device-scale-factor=1",
                  # finish every raster stage before the screenshot frame (a fully loaded
                  # machine once captured a TV diagram with 6 of 64 thread colours missing,
                  # as if some tiles were not rasterised yet; not reproduced since)
                  "--run-all-compositor-stages-before-draw")


class RasterizerMissing(RuntimeError):
    """No SVG rasterizer is installed."""


def _default_scale(width: float, height: float) -> float:
    # 2x for crisp text in design docs; 1.5x for big diagrams (still sharp at 11px labels,
    # ~25% faster to rasterize and smaller files); less still to stay under MAX_PIXELS
    scale = 2.0 if width * height <= 2_000_000 else 1.5
    while scale > 0.5 and width * height * scale * scale > MAX_PIXELS:
        scale /= 1.25
    return scale


def _try_cairosvg(svg: str, scale: float) -> Optional[bytes]:
    try:
        import cairosvg  # type: ignore
    except (ImportError, OSError):  # OSError: the python module is there, libcairo is not
        return None
    return cairosvg.svg2png(bytestring=svg.encode("utf-8"), scale=scale,
                            background_color="white")


def _try_rsvg(svg: str, scale: float) -> Optional[bytes]:
    exe = shutil.which("rsvg-convert")
    if not exe:
        return None
    r = subprocess.run([exe, "-z", f"{scale}", "-b", "white", "-f", "png"],
                       input=svg.encode("utf-8"), capture_output=True, timeout=120)
    return r.stdout if r.returncode == 0 and r.stdout else None


def chromium_binary() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def chromium_screenshot(url_or_path: str, out_png: str, width: int, height: int,
                        timeout: float = 60) -> None:
    """Screenshot a file or URL with headless Chromium into ``out_png`` (fresh profile)."""
    exe = chromium_binary()
    if not exe:
        raise RasterizerMissing("chromium not found (Debian: apt-get install chromium)")
    url = url_or_path if "://" in url_or_path else "file://" + os.path.abspath(url_or_path)
    with tempfile.TemporaryDirectory(prefix="layoutalg-chromium-") as profile:
        cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--window-size={int(width)},{int(height)}", f"--screenshot={out_png}", url]
        r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if r.returncode != 0 or not os.path.exists(out_png):
        raise RuntimeError(f"chromium screenshot failed (exit {r.returncode}): "
                           f"{r.stderr.decode(errors='replace')[-400:]}")


def _try_chromium(svg: str, scale: float, width: float, height: float) -> Optional[bytes]:
    if not chromium_binary():
        return None
    with tempfile.TemporaryDirectory(prefix="layoutalg-raster-") as d:
        # an HTML page with the SVG scaled and no margin: the screenshot is exactly the SVG
        w, h = int(round(width * scale)), int(round(height * scale))
        page = os.path.join(d, "page.html")
        with open(page, "w", encoding="utf-8") as f:
            f.write(f'<!doctype html><html><body style="margin:0;background:#fff">'
                    f'<div style="width:{w}px;height:{h}px">'
                    f'{_scaled(svg, w, h)}</div></body></html>')
        out = os.path.join(d, "shot.png")
        chromium_screenshot(page, out, w, h)
        with open(out, "rb") as f:
            return f.read()


def _scaled(svg: str, w: int, h: int) -> str:
    """Replace the root width/height so the viewBox scales the drawing to w x h pixels."""
    import re
    return re.sub(r'^<svg([^>]*?) width="[^"]*" height="[^"]*"',
                  lambda m: f'<svg{m.group(1)} width="{w}" height="{h}"', svg, count=1)


def available() -> list:
    """Names of the rasterizers that can run here (in the order they are tried)."""
    names = []
    try:
        import cairosvg  # type: ignore  # noqa: F401
        names.append("cairosvg")
    except (ImportError, OSError):
        pass
    if shutil.which("rsvg-convert"):
        names.append("rsvg-convert")
    if chromium_binary():
        names.append("chromium")
    return names


def svg_to_png(svg: str, scale: Optional[float] = None, width: float = 0,
               height: float = 0) -> bytes:
    """PNG bytes of ``svg``.  ``scale`` defaults to 2x (less for very large diagrams)."""
    if not width or not height:
        import re
        m = re.search(r'width="([\d.]+)" height="([\d.]+)"', svg)
        width, height = (float(m.group(1)), float(m.group(2))) if m else (800.0, 600.0)
    scale = scale or _default_scale(width, height)
    for attempt in (lambda: _try_cairosvg(svg, scale), lambda: _try_rsvg(svg, scale),
                    lambda: _try_chromium(svg, scale, width, height)):
        png = attempt()
        if png:
            return png
    raise RasterizerMissing(
        "no SVG rasterizer found for PNG output: pip install cairosvg (needs libcairo2), or "
        "apt-get install librsvg2-bin or chromium; SVG output needs none of them")
