"""Objects render themselves inline in Jupyter (``_repr_svg_``) as their diagrams."""

import xml.etree.ElementTree as ET

import mfma_specs
import layoutalg as la

SVG = "{http://www.w3.org/2000/svg}svg"


def _root(svg: str):
    root = ET.fromstring(svg)
    assert root.tag == SVG
    return root


def test_layout_composed_tv_and_spec_render_as_svg():
    text = lambda root: " ".join(t.text or "" for t in root.iter() if t.text)  # noqa: E731
    lay = _root(la.parse("(4,8):(8,1)")._repr_svg_())
    assert "31" in text(lay)                        # the largest offset is labelled
    _root(la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)")._repr_svg_())
    tv = _root(la.TVLayout.raked(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))._repr_svg_())
    assert "T63" in text(tv)
    spec = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    mma = _root(spec._repr_svg_())
    assert "T63" in text(mma) and not spec.sparse   # _repr_svg_ did not disturb the properties


# ---- issue 19: notebook views that finish the job ----------------------------------------------

def _pretty(obj) -> str:
    from IPython.lib.pretty import pretty
    return pretty(obj)


def test_make_layout_tv_draws_the_tv_picture_in_one_call():
    r = la.make_layout_tv(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))
    tiler, tv = r                                   # still unpacks as CuTe's pair
    assert tiler == (16, 32) and r == (tiler, tv)
    svg = _root(r._repr_svg_())
    texts = [t.text for t in svg.iter() if t.text]
    assert "T63" in texts and "V7" in texts         # the TV picture, not an offset grid
    assert isinstance(r.tv, la.TVLayout) and r.tv.tile_shape == (16, 32)
    assert _pretty(r) == "(tiler (16, 32), layout_tv ((4,16),8):((128,1),16))"


def test_tvlayout_has_a_readable_repr():
    tv = la.TVLayout.raked(la.parse("(16,4):(4,1)"), la.parse("(1,8):(1,1)"))
    assert repr(tv) == ("TVLayout(64 threads x 8 values over a 16x32 tile: "
                        "((4,16),8):((128,1),16))")
    assert "object at 0x" not in _pretty(tv)


def test_diagram_html_fits_the_cell_and_toggles_full_size():
    import visualize as viz
    d = viz.draw_swizzle(la.parse("Sw<3,3,3> o 0 o (8,64):(64,1)"))
    assert d.width > 1000                           # the 1,845 px example
    h = d._repr_html_()
    assert '<svg style="max-width:100%;height:auto"' in h and "onclick=" in h
    assert "click for full size" in h and h.count("<svg") == 1   # the SVG once, not twice
    _root(h[h.index("<svg"):h.index("</svg>") + 6])  # still a well-formed SVG


def test_spec_choice_and_bank_result_show_text_and_diagram():
    from layoutalg.verify import bank_conflicts
    spec = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    assert _pretty(spec).startswith("v_mfma_f32_16x16x16_f16 (CDNA3, mfma, wave64)")
    assert "lane |" not in _pretty(spec) and "MatrixInstruction(" not in _pretty(spec)
    assert "D[16x16] += A[16x16] * B[16x16]" in spec._repr_html_() and "<svg" in \
        spec._repr_html_()
    choice = mfma_specs.choose_mfma("gfx942", 128, 128, 64, "f16", "f16", "f32")
    assert _pretty(choice) == "choose_mfma -> " + str(choice)
    assert "choose_mfma -&gt; v_mfma" in choice._repr_html_() and "<svg" in choice._repr_html_()
    fma = mfma_specs.choose_mfma("gfx942", 4, 4, 64, "f16", "f16", "f32")
    assert _pretty(fma).startswith("choose_mfma -> FMA fallback") and "<svg" not in \
        fma._repr_html_()
    r = bank_conflicts(la.parse("(64,8):(64,1)"), arch="gfx942", instruction="ds_read_b128",
                       elem_bytes=2)
    assert _pretty(r).startswith("bank conflicts (gfx942 ds_read_b128") and "array(" not in \
        _pretty(r)
    h = r._repr_html_()
    assert "8-way bank conflict" in h and "LDS banks" in h and "<svg" in h   # the diagram too
