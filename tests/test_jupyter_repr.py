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
