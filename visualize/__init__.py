"""visualize: diagrams of layouts, TV layouts, MFMA/WMMA instructions, copies, swizzles and LDS
bank conflicts, as standalone SVG (and PNG), inline in Jupyter.

Every ``draw_*`` returns a :class:`Diagram` (``_repr_svg_`` for Jupyter, ``save("x.svg")`` or
``save("x.png")``).  Conventions follow CuTe's ``print_latex``: rows downward, columns
rightward, cells labelled ``T<thread>`` over ``V<value>`` and coloured by thread.

>>> import layoutalg as la, visualize as viz
>>> d = viz.draw_layout(la.parse("(4,8):(8,1)"))
>>> d.save("row_major.svg")                                     # doctest: +SKIP

See docs/DIAGRAMS.md for every diagram and its options.
"""

from .svg import Diagram
from .layout_diagram import draw_layout, offset_table
from .tv_diagram import draw_tv
from .mma_diagram import draw_mma
from .copy_diagram import draw_copy
from .swizzle_diagram import draw_swizzle
from .preshuffle_diagram import draw_preshuffle
from .raster import RasterizerMissing, svg_to_png

__all__ = ["Diagram", "draw_layout", "offset_table", "draw_tv", "draw_mma", "draw_copy",
           "draw_swizzle", "draw_preshuffle", "draw_banks", "RasterizerMissing", "svg_to_png"]


def draw_banks(*args, **kwargs):
    """See :func:`visualize.bank_diagram.draw_banks` (imported lazily: it needs the verifier)."""
    from .bank_diagram import draw_banks as _draw_banks
    return _draw_banks(*args, **kwargs)
