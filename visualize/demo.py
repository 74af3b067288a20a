"""``layoutalg demo``: build example layouts, verify them, draw them, write an index page.

What it shows (each as SVG and PNG, linked from ``index.html``):

* a plain hierarchical layout and a TV layout (a 64-lane wave moving a 16x32 fp16 tile with
  128-bit vectors), once plain and once with lanes 0-3 highlighted;
* the gfx942 MFMA ``v_mfma_f32_16x16x16_f16`` and ``v_mfma_f32_32x32x8_f16`` operand layouts
  (from :mod:`mfma_specs`);
* a tiled copy (source and destination partitions of one tile);
* the swizzle ``Sw<3,3,3>`` on an 8x64 fp16 tile, before and after;
* an LDS read that is an 8-way bank conflict, and the same read through the swizzle, proved
  conflict-free by the verifier.

Exit code 0 when every diagram was written and every check came out as expected, 1 otherwise,
3 when PNGs were asked for and no rasterizer is installed (the SVGs are still written).
"""

from __future__ import annotations

import html
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

__all__ = ["run_demo", "Item"]


@dataclass
class Item:
    stem: str
    title: str
    description: str
    text: List[str] = field(default_factory=list)   # verifier output etc.
    ok: bool = True
    files: List[str] = field(default_factory=list)
    error: str = ""


def _layouts():
    import layoutalg as la
    from .layout_diagram import draw_layout
    L = la.parse("(8,(4,2)):(4,(1,32))")
    d = draw_layout(L, title=f"layout {L}")
    return d, [f"{L}: size {L.size()}, cosize {L.cosize()}"], True


def _tv(highlight: Optional[List[int]] = None):
    import layoutalg as la
    from .tv_diagram import draw_tv, tv_owners
    thr, val = la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)")
    tiler, tv = la.make_layout_tv(thr, val)
    owners, T, V, outside = tv_owners(tv, tuple(tiler))
    full = len(owners) == tiler[0] * tiler[1] and all(len(w) == 1 for w in owners.values())
    text = [f"make_layout_tv({thr}, {val}) -> tile {tiler[0]}x{tiler[1]}, layout_tv {tv}",
            f"covers every tile cell exactly once: {full}"]
    title = ("TV layout: 64 lanes x 8 fp16 (128-bit vectors), 16x32 tile"
             + (", lanes 0-3 highlighted" if highlight else ""))
    return draw_tv((tiler, tv), highlight=highlight, title=title), text, full


def _mfma(name: str):
    import mfma_specs
    from .mma_diagram import draw_mma
    spec = mfma_specs.lookup("gfx942", name)
    d = draw_mma(spec, arch="gfx942")
    text = [f"{name}: M={spec.m if hasattr(spec, 'm') else spec.M} "
            f"N={spec.n if hasattr(spec, 'n') else spec.N} "
            f"K={spec.k if hasattr(spec, 'k') else spec.K}, blocks={spec.blocks}",
            f"A {spec.tv_layout('A')}", f"B {spec.tv_layout('B')}", f"C {spec.tv_layout('C')}"]
    return d, text, True


def _copy():
    import layoutalg as la
    from .copy_diagram import draw_copy
    src = la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))
    dst = la.make_layout_tv(la.parse("(4,16):(16,1)"), la.parse("(4,2):(2,1)"))
    d = draw_copy(src, dst, title="tiled copy: 128-bit row vectors -> 4x2 register blocks",
                  src_title="source (1x8 per lane)", dst_title="destination (4x2 per lane)")
    return d, [f"source TV {src[1]} over {src[0]}", f"destination TV {dst[1]} over {dst[0]}"], \
        src[0] == dst[0]


def _swizzle():
    import numpy as np
    import layoutalg as la
    from .swizzle_diagram import draw_swizzle
    S = la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)")
    before = np.sort(S.inner.values())
    after = np.sort(S.values())
    perm = bool((before == after).all())
    d = draw_swizzle(S, title="swizzle Sw<3,3,3> on an 8x64 fp16 tile (row-major)")
    return d, [f"{S}: a permutation of the tile's offsets: {perm}"], perm


def _banks(access: str, expect_conflict: bool):
    import layoutalg as la
    from layoutalg.verify import bank_conflicts
    from .bank_diagram import draw_banks
    A = la.parse(access)
    rep = bank_conflicts(A, arch="gfx942", instruction="ds_read_b128", elem_bytes=2)
    kind = "conflicted" if expect_conflict else "fixed"
    title = (f"LDS ds_read_b128, {kind}: lane l reads 8 fp16 of row l of a 64x64 tile"
             + ("" if expect_conflict else ", through Sw<3,3,3>"))
    d = draw_banks(A, report=rep, title=title)
    ok = (not rep.holds) if expect_conflict else rep.holds
    return d, [f"access {A}"] + str(rep).splitlines(), ok


def _steps() -> List[Tuple[Item, Callable]]:
    return [
        (Item("tv_layout", "TV layout", "A wave of 64 lanes, each moving 8 fp16 (one 128-bit "
              "vector) of a 16x32 tile: cell = T<lane> over V<value>, one colour per lane."),
         lambda: _tv()),
        (Item("tv_layout_highlight", "TV layout, lanes 0-3 highlighted",
              "The same layout with lanes 0-3 highlighted: together they read row 0."),
         lambda: _tv([0, 1, 2, 3])),
        (Item("mfma_16x16x16_f16", "MFMA v_mfma_f32_16x16x16_f16 (gfx942)",
              "C at the origin, A to its left, B above: which lane and register item holds "
              "each element."), lambda: _mfma("v_mfma_f32_16x16x16_f16")),
        (Item("mfma_32x32x8_f16", "MFMA v_mfma_f32_32x32x8_f16 (gfx942)",
              "The 32x32x8 instruction: 16 accumulator items per lane."),
         lambda: _mfma("v_mfma_f32_32x32x8_f16")),
        (Item("swizzle", "Swizzle Sw<3,3,3>", "Offsets of an 8x64 fp16 tile before and after "
              "the swizzle, coloured by 16-byte vector slot: the XOR moves each row's slots."),
         _swizzle),
        (Item("banks_conflicted", "LDS bank conflict (ds_read_b128)",
              "Each lane reads 16 bytes of its own row of a row-major 64x64 fp16 tile: every "
              "lane of a phase hits banks 0-3, an 8-way conflict."),
         lambda: _banks("(64,8):(64,1)", True)),
        (Item("banks_fixed", "The same read through Sw<3,3,3>: conflict-free",
              "The swizzle spreads the 8 lanes of each phase over all 32 banks; the verifier "
              "proves it for every lane."),
         lambda: _banks("Sw<3,3,3> o 0 o (64,8):(64,1)", False)),
        (Item("copy", "Tiled copy", "Source and destination partitions of one 16x32 tile side "
              "by side: T<t>V<v> moves from its source cell to its destination cell."), _copy),
        (Item("layout", "Plain layout", "A hierarchical layout: offset in each cell, shaded by "
              "offset."), _layouts),
    ]


def run_demo(out: str = "demo_out", png: bool = True, quiet: bool = False,
             text_steps: Sequence[Tuple[str, str, str, Callable]] = ()) -> int:
    """Write every diagram and ``index.html`` into ``out``; returns the exit code.

    ``text_steps`` adds steps that produce no diagram (the CLI passes the algebra tour and the
    kernel build/emulation from packages ``visualize`` must not import): each is
    ``(stem, title, description, run)`` with ``run(out) -> (text_lines, files, ok)``; their text
    and files appear on the index page before the diagrams.
    """
    from .raster import RasterizerMissing
    log = (lambda *a: None) if quiet else (lambda *a: print(*a))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        print(f"layoutalg demo: cannot create {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    items: List[Item] = []
    for stem, title, description, run in text_steps:
        item = Item(stem, title, description)
        t0 = time.perf_counter()
        try:
            item.text, item.files, item.ok = run(out)
        except Exception as e:  # one failed step must not hide the others
            item.ok, item.error = False, f"{type(e).__name__}: {e}"
        items.append(item)
        state = "ok     " if item.ok else "FAILED "
        log(f"  {state}  {stem:22s} {', '.join(item.files)}  ({time.perf_counter() - t0:.2f} s)"
            + (f": {item.error}" if item.error else ""))
        for line in item.text[:12] if not quiet else ():
            log(f"             {line}")
    no_raster = False
    for item, build in _steps():
        t0 = time.perf_counter()
        try:
            diagram, text, ok = build()
        except Exception as e:  # one failed step must not hide the others
            item.ok, item.error = False, f"{type(e).__name__}: {e}"
            items.append(item)
            log(f"  FAILED  {item.stem}: {item.error}")
            continue
        item.text, item.ok = text, ok
        svg_path = os.path.join(out, item.stem + ".svg")
        diagram.save(svg_path)
        item.files.append(item.stem + ".svg")
        if png and not no_raster:
            try:
                diagram.save(os.path.join(out, item.stem + ".png"))
                item.files.append(item.stem + ".png")
            except RasterizerMissing as e:
                no_raster = True
                log(f"  no PNGs: {e}")
        dt = time.perf_counter() - t0
        log(f"  {'ok     ' if ok else 'CHECK FAILED'}  {item.stem:22s} "
            f"{', '.join(item.files)}  ({dt:.2f} s)")
        items.append(item)
    index = os.path.join(out, "index.html")
    with open(index, "w", encoding="utf-8") as f:
        f.write(_index_html(items))
    log(f"wrote {len(items)} items ({sum(1 for i in items if i.stem + '.svg' in i.files)} "
        f"diagrams) and {index}")
    log(f"open {os.path.abspath(index)}")
    if not all(i.ok for i in items):
        return 1
    return 3 if no_raster else 0


def _index_html(items: List[Item]) -> str:
    e = html.escape
    cards = []
    for it in items:
        links = " · ".join(f'<a href="{e(f)}">{e(f)}</a>' for f in it.files)
        img = (f'<a href="{e(it.stem)}.svg"><img src="{e(it.stem)}.svg" alt="{e(it.title)}">'
               f'</a>' if f"{it.stem}.svg" in it.files else "")
        status = ("" if it.ok else
                  f'<p class="bad">{"step failed: " + e(it.error) if it.error else "check failed"}</p>')
        text = f"<pre>{e(chr(10).join(it.text))}</pre>" if it.text else ""
        cards.append(f'<section id="{e(it.stem)}"><h2>{e(it.title)}</h2><p>{e(it.description)}'
                     f'</p>{status}{text}<p class="files">{links}</p>{img}</section>')
    toc = "".join(f'<li><a href="#{e(i.stem)}">{e(i.title)}</a>{"" if i.ok else " (failed)"}</li>'
                  for i in items)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>layoutalg demo</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1400px; margin: 2em auto; padding: 0 1em;
       color: #222; }}
section {{ border-top: 1px solid #ddd; padding: 1em 0; }}
img {{ max-width: 100%; height: auto; border: 1px solid #eee; }}
pre {{ background: #f6f8fa; padding: .6em; overflow-x: auto; font-size: 12px; }}
.bad {{ color: #b00020; font-weight: bold; }}
.files {{ font-size: 13px; }}
</style></head><body>
<h1>layoutalg demo</h1>
<p>Example layouts for AMD MI300X (gfx942), checked by <code>layoutalg.verify</code> and drawn by
<code>visualize</code>. Each diagram is an SVG (click to open full size) with a PNG beside it.
Kernel steps compile for gfx942 offline and run on the CPU emulator: nothing here ran on an
MI300X.</p>
<ul>{toc}</ul>
{''.join(cards)}
</body></html>
"""
