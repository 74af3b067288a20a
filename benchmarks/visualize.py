"""Time the diagrams: SVG build, SVG size and PNG rasterization for large cases.

    python3 benchmarks/visualize.py            # prints a table; exit 1 if an SVG takes > 2 s

The target (issue 5): 128x128 TV layouts and the 32x32x8 MFMA render in under 2 s into readable
files.  Kept out of the test suite so timing noise never fails a test run.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import layoutalg as la  # noqa: E402
import visualize as viz  # noqa: E402


def cases():
    tv128 = la.make_layout_tv(la.parse("(16,16):(16,1)"), la.parse("(8,8):(8,1)"))
    yield "TV 128x128 (256 thr x 64 val), default", lambda: viz.draw_tv(tv128)
    yield "TV 128x128, every cell labelled", lambda: viz.draw_tv(tv128, max_cells=1 << 20)
    yield "layout (128,128):(128,1)", lambda: viz.draw_layout(la.parse("(128,128):(128,1)"))
    yield "TV 64x8 over 16x32", lambda: viz.draw_tv(
        la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)")))
    try:
        import mfma_specs
        for name in ("v_mfma_f32_16x16x16_f16", "v_mfma_f32_32x32x8_f16",
                     "v_mfma_f32_4x4x4_16b_f16"):
            spec = mfma_specs.lookup("gfx942", name)
            yield f"MFMA {name}", (lambda s=spec: viz.draw_mma(s, arch="gfx942"))
    except (ImportError, AttributeError) as e:
        print(f"(skipping MFMA: {e})")
    yield "swizzle Sw<3,3,3> on (8,64):(64,1)", lambda: viz.draw_swizzle(
        la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)"))
    yield "banks (64,8):(64,1) ds_read_b128", lambda: viz.draw_banks(la.parse("(64,8):(64,1)"))


def main() -> int:
    slow = False
    print(f"{'diagram':48s} {'svg s':>7s} {'KiB':>7s} {'px':>11s} {'png s':>7s} {'png KiB':>8s}")
    for name, build in cases():
        t0 = time.perf_counter()
        d = build()
        t_svg = time.perf_counter() - t0
        try:
            t1 = time.perf_counter()
            png = d.to_png()
            t_png, png_kib = time.perf_counter() - t1, len(png) / 1024
        except viz.RasterizerMissing:
            t_png, png_kib = float("nan"), float("nan")
        slow |= t_svg > 2.0
        print(f"{name:48s} {t_svg:7.3f} {len(d.svg) / 1024:7.0f} "
              f"{int(d.width):>5d}x{int(d.height):<5d} {t_png:7.2f} {png_kib:8.0f}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
