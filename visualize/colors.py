"""Palettes: one distinct colour per thread (64+), a sequential ramp for offsets, text contrast.

Thread colours are built in OKLCH (a perceptual space) so equal steps look equal:

* 16 hues, visited in the order ``(5 * t) % 16`` so lanes t, t+1 and t+2 are >= 110 degrees
  apart on the wheel (neighbouring cells are neighbouring lanes in most layouts);
* 4 lightness bands, one per group of 16 lanes: lane ``t`` and ``t + 16`` share a hue and differ
  in shade, which mirrors how MFMA operands spread K over lane groups of 16;
* beyond 64 threads (a workgroup) each wave rotates the lightness bands by one (lane 0 of wave 1
  has the shade of lane 16 of wave 0, so T0 and T64 differ in lightness, not only by a small
  hue shift) and shifts the hues by a fraction of a hue step, so every thread still gets its
  own colour; the TV diagram also draws a wave map and labels thread ranges per wave.

All colours are light enough for black text (checked by :func:`text_color`, WCAG contrast).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import List, Sequence, Tuple

__all__ = ["thread_color", "thread_palette", "category_color", "offset_color", "text_color", "contrast",
           "fade", "CONFLICT", "EMPTY", "GRID_LINE", "MUTED"]

RGB = Tuple[float, float, float]

CONFLICT = "#d7191c"   # red marks (conflicting lanes, over-subscribed banks)
EMPTY = "#f2f2f2"      # a cell no thread/value maps to
GRID_LINE = "#5a5a5a"  # cell borders
MUTED = "#8a8a8a"      # headers, notes

_HUES = 16
_BANDS = ((0.92, 0.075), (0.84, 0.105), (0.76, 0.125), (0.68, 0.13))  # (L, C) per 16 lanes
_HUE0 = 25.0  # start at a warm red-orange rather than magenta


def _oklch_to_srgb(L: float, C: float, h_deg: float) -> RGB:
    """OKLCH -> gamma-encoded sRGB in [0, 1]; reduces chroma until the colour is in gamut."""
    for _ in range(30):
        a = C * math.cos(math.radians(h_deg))
        b = C * math.sin(math.radians(h_deg))
        l_ = (L + 0.3963377774 * a + 0.2158037573 * b) ** 3
        m_ = (L - 0.1055613458 * a - 0.0638541728 * b) ** 3
        s_ = (L - 0.0894841775 * a - 1.2914855480 * b) ** 3
        lin = (4.0767416621 * l_ - 3.3077115913 * m_ + 0.2309699292 * s_,
               -1.2684380046 * l_ + 2.6097574011 * m_ - 0.3413193965 * s_,
               -0.0041960863 * l_ - 0.7034186147 * m_ + 1.7076147010 * s_)
        if all(-1e-4 <= x <= 1.0001 for x in lin):
            break
        C *= 0.9
    return tuple(_gamma(min(1.0, max(0.0, x))) for x in lin)  # type: ignore[return-value]


def _gamma(x: float) -> float:
    return 12.92 * x if x <= 0.0031308 else 1.055 * x ** (1 / 2.4) - 0.055


def _hex(rgb: RGB) -> str:
    return "#" + "".join(f"{int(round(c * 255)):02x}" for c in rgb)


def _rgb(hex_color: str) -> RGB:
    h = hex_color.lstrip("#")
    return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


@lru_cache(maxsize=None)
def thread_color(t: int, num_threads: int = 64) -> str:
    """The colour of thread ``t`` (distinct for every ``t < num_threads``)."""
    lane, wave = t % 64, t // 64
    waves = max(1, -(-num_threads // 64))
    hue_step = 360.0 / _HUES
    hue = _HUE0 + ((5 * lane) % _HUES) * hue_step + (wave / waves) * hue_step
    L, C = _BANDS[(lane // _HUES + wave) % len(_BANDS)]
    # a second axis, so 16 waves of 64 still give 1024 distinct colours
    L -= 0.04 * (((wave * 5) % waves) / waves)
    return _hex(_oklch_to_srgb(L, C, hue))


def thread_palette(n: int) -> List[str]:
    return [thread_color(t, n) for t in range(n)]


@lru_cache(maxsize=None)
def category_color(k: int, n: int) -> str:
    """Colour of category ``k`` of ``n`` (swizzle slots, banks): more saturated than threads.

    Up to 12 categories get evenly spaced hues (a readable rainbow, so an XOR pattern shows as
    diagonals); more reuse the thread palette without its palest band.
    """
    if n <= 12:
        L = 0.82 if k % 2 == 0 else 0.74
        return _hex(_oklch_to_srgb(L, 0.12, _HUE0 + k * 360.0 / n))
    return thread_color(k + _HUES, n + _HUES)


# Sequential ramp for offsets: pale yellow -> teal -> deep blue (ColorBrewer YlGnBu anchors);
# interpolated in OKLab-ish linear RGB so the middle is not muddy.
_RAMP = ("#ffffd9", "#c7e9b4", "#7fcdbb", "#41b6c4", "#1d91c0", "#225ea8")


def offset_color(x: float) -> str:
    """Colour for ``x`` in [0, 1] on the offset ramp (darkest end keeps black text readable
    only up to ~0.7; :func:`text_color` switches to white beyond)."""
    x = min(1.0, max(0.0, float(x)))
    pos = x * (len(_RAMP) - 1)
    i = min(int(pos), len(_RAMP) - 2)
    f = pos - i
    a, b = _rgb(_RAMP[i]), _rgb(_RAMP[i + 1])
    return _hex(tuple(a[k] + (b[k] - a[k]) * f for k in range(3)))  # type: ignore[arg-type]


def _luminance(rgb: RGB) -> float:
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio between two hex colours (1..21)."""
    a, b = _luminance(_rgb(fg)), _luminance(_rgb(bg))
    hi, lo = max(a, b), min(a, b)
    return (hi + 0.05) / (lo + 0.05)


@lru_cache(maxsize=None)
def text_color(bg: str) -> str:
    """Black or white, whichever reads better on ``bg``."""
    return "#000000" if contrast("#000000", bg) >= contrast("#ffffff", bg) else "#ffffff"


@lru_cache(maxsize=None)
def fade(color: str, amount: float = 0.8) -> str:
    """Blend ``color`` towards white (for threads that are not highlighted)."""
    c = _rgb(color)
    return _hex(tuple(x + (1 - x) * amount for x in c))  # type: ignore[arg-type]


def distinct(colors: Sequence[str]) -> bool:
    return len(set(colors)) == len(colors)
