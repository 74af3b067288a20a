"""Diagram structure: every SVG parsed with a real XML parser; cells, labels and colours."""
import re
import sys
import os

import pytest

import layoutalg as la
import visualize as viz
from visualize.colors import contrast, thread_color, thread_palette

sys.path.insert(0, os.path.dirname(__file__))
from _viz_helpers import all_text, grids, parse_svg, thread_fills  # noqa: E402
import _fake_mfma  # noqa: E402


# ---- palette -------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [8, 32, 64, 128, 256, 1024])
def test_thread_palette_distinct_and_readable(n):
    pal = thread_palette(n)
    assert len(set(pal)) == n
    # black labels stay readable on every thread colour (WCAG AA for normal text is 4.5)
    assert min(contrast("#000000", c) for c in pal) >= 4.5


def test_lanes_16_apart_share_hue_family_but_differ():
    assert thread_color(0) != thread_color(16) != thread_color(32)


# ---- plain layouts ---------------------------------------------------------------------------

def test_layout_grid_offsets_and_shading():
    L = la.parse("(4,(2,3)):(1,(8,16))")
    d = viz.draw_layout(L)
    [g] = grids(d.svg)
    assert (g.rows, g.cols) == (4, 6)
    offsets = [int(t) for t in g.texts]
    want = [L(i, j) for i in range(4) for j in range(6)]  # rows down, columns right
    assert offsets == want
    assert len(set(g.fills)) == 24   # one shade per distinct offset
    assert L.__class__._repr_svg_(L) == d.svg  # Layout renders itself in Jupyter


def test_rank1_and_rank3_layouts():
    [g] = grids(viz.draw_layout(la.parse("8:2")).svg)
    assert (g.rows, g.cols) == (1, 8) and g.texts == [str(2 * i) for i in range(8)]
    d = viz.draw_layout(la.parse("(2,3,4):(1,2,6)"))
    [g] = grids(d.svg)
    assert (g.rows, g.cols) == (2, 12)
    assert any("rank 3" in n for n in d.notes)


def test_non_injective_layout_is_marked():
    d = viz.draw_layout(la.parse("(4,4):(1,1)"))
    [g] = grids(d.svg)
    assert g.marks > 0 and "not injective" in all_text(d.svg)


def test_composed_layout_renders_itself():
    S = la.parse("Sw<2,0,2> o 0 o (4,4):(4,1)")
    svg = S._repr_svg_()
    [g] = grids(svg)
    assert sorted(int(t) for t in g.texts) == list(range(16))
    assert [int(t) for t in g.texts] == [S(i, j) for i in range(4) for j in range(4)]


def test_symbolic_layout_is_refused_clearly():
    with pytest.raises(la.LayoutError, match="symbolic"):
        viz.draw_layout(la.parse("(4,n):(1,4)"))


def test_large_layout_gets_overview_and_detail():
    d = viz.draw_layout(la.parse("(128,128):(128,1)"))
    gs = grids(d.svg)
    assert [(g.rows, g.cols) for g in gs] == [(128, 128), (32, 32)]
    assert any("overview" in n for n in d.notes)
    assert [int(t) for t in gs[1].texts][:3] == [0, 1, 2]


# ---- TV layouts ------------------------------------------------------------------------------

def _tv64():
    return la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))


def test_tv_cells_labels_and_one_colour_per_thread():
    tiler, tv = _tv64()
    d = viz.draw_tv((tiler, tv))
    [g] = grids(d.svg)
    assert (g.rows, g.cols) == (16, 32)
    fills = thread_fills(g)
    assert sorted(fills) == list(range(64))
    assert all(len(f) == 1 for f in fills.values())             # one colour per thread
    assert len({next(iter(f)) for f in fills.values()}) == 64   # distinct across threads
    # labels: T<t> over V<v> where layout_tv(t, v) is the cell's column-major index
    for n in range(g.rows * g.cols):
        i, j = divmod(n, g.cols)
        t = int(g.texts[2 * n][1:])
        v = int(g.texts[2 * n + 1][1:])
        assert tv(t, v) == i + tiler[0] * j


def test_tv_highlight_and_isolate():
    tiler, tv = _tv64()
    [g] = grids(viz.draw_tv((tiler, tv), highlight=[0, 5]).svg)
    assert g.marks == 16                         # 8 values each for T0 and T5
    fills = thread_fills(g)
    assert fills[0] == {thread_color(0, 64)} and fills[5] == {thread_color(5, 64)}
    assert fills[1] != {thread_color(1, 64)}     # others faded
    d = viz.draw_tv((tiler, tv), isolate=[3])
    [g] = grids(d.svg)
    assert set(g.texts) == {"T3"} | {f"V{v}" for v in range(8)}


def test_tv_accepts_tvlayout_and_layout_with_tile():
    tiler, tv = _tv64()
    a = viz.draw_tv(la.TVLayout(tv, tiler)).svg
    b = viz.draw_tv(tv, tile_shape=tiler).svg
    assert grids(a)[0].texts == grids(b)[0].texts
    with pytest.raises(la.LayoutError, match="tile"):
        viz.draw_tv(tv)


def test_tv_broadcast_is_shown():
    # stride-0 thread mode: threads 0 and 1 hold the same values
    d = viz.draw_tv(la.parse("(2,4):(0,1)"), tile_shape=(4, 1))
    [g] = grids(d.svg)
    assert g.texts[:4] == ["T0,1", "V0", "T0,1", "V1"] and "several" in all_text(d.svg)
    [g] = grids(viz.draw_tv(la.parse("(2,4):(0,1)"), tile_shape=(4, 1), highlight=[1]).svg)
    assert g.texts[0] == "T1,0" and g.marks == 4


def test_large_tv_overview_detail_and_legend():
    tiler, tv = la.make_layout_tv(la.parse("(16,16):(16,1)"), la.parse("(8,8):(8,1)"))
    assert tiler == (128, 128)
    d = viz.draw_tv((tiler, tv))
    gs = grids(d.svg)
    # overview, labelled detail, and (256 threads = 4 waves) the wave map
    assert [(g.rows, g.cols) for g in gs] == [(128, 128), (32, 32), (128, 128)]
    fills = thread_fills(gs[1])
    assert all(len(f) == 1 for f in fills.values())
    text = all_text(d.svg)
    assert "T255" in text and "overview" in text   # legend lists every thread
    # issue 19: thread ranges per wave are labelled past 64 threads
    assert "wave 3 = T192-T255" in text and "thread colours, wave 1 = T64-T127" in text


def test_wave_map_marks_each_wave_and_waves_get_distinct_colours():
    from visualize.colors import thread_color
    tiler, tv = la.make_layout_tv(la.parse("(32,4):(4,1)"), la.parse("(1,4):(1,1)"))
    d = viz.draw_tv((tiler, tv))
    assert "2 waves of 64: wave 0 = T0-T63, wave 1 = T64-T127" in all_text(d.svg)
    # T0 and T64 (same lane, next wave) must not look alike: they now differ in lightness band
    a, b = thread_color(0, 128), thread_color(64, 128)
    lum = lambda c: sum(int(c[i:i + 2], 16) for i in (1, 3, 5))  # noqa: E731
    assert abs(lum(a) - lum(b)) > 40
    # a single wave draws no wave map
    assert "wave map" not in all_text(viz.draw_tv(la.make_layout_tv(
        la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))).svg)


# ---- MFMA ------------------------------------------------------------------------------------

def _mma_grids(spec):
    d = viz.draw_mma(spec)
    return d, grids(d.svg)


def _check_mma(spec):
    d, gs = _mma_grids(spec)
    M, N, K = (getattr(spec, "m", None) or spec.M, getattr(spec, "n", None) or spec.N,
               getattr(spec, "k", None) or spec.K)
    blocks = spec.blocks
    assert len(gs) == 3 * blocks
    for b in range(blocks):
        B, A, C = gs[3 * b: 3 * b + 3]  # drawn B, then A, then C
        assert (A.rows, A.cols) == (M, K) and (B.rows, B.cols) == (K, N) and (C.rows, C.cols) == (M, N)
        for view, op in ((A, "A"), (B, "B"), (C, "C")):
            for n in range(view.rows * view.cols):
                r, c = divmod(n, view.cols)
                lane = int(view.texts[2 * n][1:])
                item = int(view.texts[2 * n + 1][1:].split("+")[0])
                assert tuple(spec.element(op, lane, item)) == (r, c, b), (op, r, c, b)
        # one colour per lane within each operand
        for view in (A, B, C):
            assert all(len(f) == 1 for f in thread_fills(view).values())
    return d


@pytest.mark.parametrize("make", [_fake_mfma.mfma_16x16x16, _fake_mfma.mfma_32x32x8,
                                  _fake_mfma.mfma_4x4x4_16b])
def test_mma_diagram_fake_specs(make):
    d = _check_mma(make())
    assert "T63" in all_text(d.svg)


def _real_spec(name):
    mfma_specs = pytest.importorskip("mfma_specs")
    if not hasattr(mfma_specs, "lookup"):
        pytest.skip("mfma_specs.lookup is not available yet")
    return mfma_specs.lookup("gfx942", name)


@pytest.mark.parametrize("name", ["v_mfma_f32_16x16x16_f16", "v_mfma_f32_32x32x8_f16",
                                  "v_mfma_f32_4x4x4_16b_f16"])
def test_mma_diagram_real_specs(name):
    _check_mma(_real_spec(name))


# ---- swizzle, copy, banks --------------------------------------------------------------------

def test_swizzle_before_after():
    S = la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)")
    d = viz.draw_swizzle(S)
    before, after = grids(d.svg)
    assert (before.rows, before.cols) == (after.rows, after.cols) == (8, 64)
    b = [int(t) for t in before.texts]
    a = [int(t) for t in after.texts]
    assert sorted(a) == sorted(b) == list(range(512))
    assert a == [S(i, j) for i in range(8) for j in range(64)]
    # chunk colouring: before, a column has one colour; after, row r's chunk c has colour c^r
    assert len(set(before.fills[0::64])) == 1 and len(set(after.fills[0::64])) == 8
    d2 = viz.draw_swizzle(S.inner, la.Swizzle(3, 3, 3), color_by="bank")
    assert grids(d2.svg)[1].texts == after.texts
    with pytest.raises(la.LayoutError):
        viz.draw_swizzle(S.inner)


def test_copy_side_by_side_same_thread_colours():
    src = la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))
    dst = la.make_layout_tv(la.parse("(4,16):(16,1)"), la.parse("(4,2):(2,1)"))
    s, t = grids(viz.draw_copy(src, dst).svg)
    fs, ft = thread_fills(s), thread_fills(t)
    assert fs == ft and len(fs) == 64


def _banks(access):
    pytest.importorskip("layoutalg.verify.banks")
    from layoutalg.verify import bank_conflicts
    A = la.parse(access)
    rep = bank_conflicts(A, arch="gfx942", instruction="ds_read_b128", elem_bytes=2)
    return rep, viz.draw_banks(A, report=rep)


def test_bank_conflict_picture_marks_conflicting_lanes():
    rep, d = _banks("(64,8):(64,1)")
    lanes, banks = grids(d.svg)
    assert (lanes.rows, lanes.cols) == (8, 9) and (banks.rows, banks.cols) == (8, 32)
    assert rep.max_ways == 8
    assert lanes.marks == 64 and set(lanes.mark_colors) == {"#d7191c"}
    assert lanes.texts.count("8-way") == 8
    assert banks.texts.count("x8") == 8 * 4          # banks 0-3 of every phase
    assert not d.notes                                # picture agrees with the verifier


def test_bank_fixed_picture_is_clean():
    rep, d = _banks("Sw<3,3,3> o 0 o (64,8):(64,1)")
    lanes, banks = grids(d.svg)
    assert rep.holds and lanes.marks == 0 and lanes.texts.count("1-way") == 8
    # every lane appears once, every bank of every phase used exactly once
    assert sorted(int(t[1:]) for t in lanes.texts if re.fullmatch(r"T\d+", t)) == list(range(64))
    assert all(f != "#ffffff" for f in banks.fills)
    assert "conflict-free" in all_text(d.svg)


def test_diagram_repr_and_save(tmp_path):
    d = viz.draw_layout(la.parse("(2,2):(1,2)"))
    assert d._repr_svg_() == d.svg and "Diagram" in repr(d)
    p = d.save(tmp_path / "x.svg")
    parse_svg(p.read_text())
    with pytest.raises(ValueError, match="suffix"):
        d.save(tmp_path / "x.jpg")
