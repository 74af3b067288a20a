"""A short printed tour of the algebra: CuTe's documented examples, computed here.

Used by ``layoutalg demo`` (the README's main job).  Every line is computed, not typed: if the
algebra changed, the tour would show it.
"""

from __future__ import annotations

from typing import List

__all__ = ["algebra_tour"]

# (operation, arguments) pairs from CuTe's 02_layout_algebra.md, in CuTe's own syntax
_EXAMPLES = [
    ("composition", "(6,2):(8,2)", "(4,3):(3,1)"),
    ("composition", "(10,2):(16,4)", "(5,4):(1,5)"),
    ("complement", "(2,4):(1,6)", "24"),
    ("logical_divide", "(4,2,3):(2,1,8)", "4:2"),
    ("zipped_divide", "(9,(4,8)):(59,(13,1))", "<3:3, (2,4):(1,8)>"),
    ("logical_product", "(2,2):(4,1)", "6:1"),
    ("blocked_product", "(2,5):(5,1)", "(3,4):(1,3)"),
    ("raked_product", "(2,5):(5,1)", "(3,4):(1,3)"),
    ("right_inverse", "(4,8):(8,1)"),
]


def algebra_tour() -> List[str]:
    """Lines ``op(args) = result``, then one refusal CuTe would have let through."""
    import layoutalg as la
    lines = []
    for op, *args in _EXAMPLES:
        parsed = [la.parse(a) for a in args]
        lines.append(f"{op}({', '.join(args)}) = {getattr(la, op)(*parsed)}")
    try:
        la.composition(la.parse("(6,4):(1,10)"), la.parse("4:4"))
        lines.append("composition((6,4):(1,10), 4:4) was accepted (unexpected)")
    except la.LayoutError as e:
        lines.append(f"composition((6,4):(1,10), 4:4) refused: {e}")
    return lines


def run_tour(out: str):
    """Demo step: (text, files, ok)."""
    lines = algebra_tour()
    return lines, [], "accepted (unexpected)" not in lines[-1]
