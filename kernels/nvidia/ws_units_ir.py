"""The persistent warp-specialised prefill's work units as kernel IR (the plan's piece
``persistent_units``, :mod:`.wgmma_ws_ir_plan`): the decode of a unit ``u`` into (query block,
head, batch) as IR lets, and the proof of :func:`~.ws_tma_loads.check_unit_decode` run on
those lets themselves (:func:`ir_unit_order` evaluates them with the C semantics the printer
gives them), so what is proved is what the IR kernel computes, not the template's text.

The order is the template's (:func:`~.ws_tma_loads.emit_tile_decode`): with ``unit_heads`` =
G the units run in chunks of G (batch, head) pairs (the last one possibly short), the query
block the slow index inside a chunk; causal problems take the longest query block (the last)
first.  A CTA ``bx`` of ``ctas`` walks units ``bx, bx + ctas, ...`` below ``tiles``
(:func:`cta_walk_lets`: ``nloc`` units, the ``iu``-th is ``u = bx + iu * ctas``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import sympy

from ..ir.attention import LetMinMax, runtime_symbol as R
from ..ir.core import Comment, Let, c_eval, sym

__all__ = ["unit_decode_lets", "cta_walk_lets", "ir_unit_order", "eval_lets"]


def cta_walk_lets(bm: int, cta: Any, ctas: Any) -> List[Any]:
    """The CTA's walk over the units: ``n_qb`` query blocks, ``tiles`` units, and ``nloc``,
    the number of units ``cta, cta + ctas, ...`` below ``tiles`` (0 when ``cta >= tiles``)."""
    return [Comment("work units: (query block, head, batch); this CTA takes units cta, cta + "
                    "ctas, ... below tiles"),
            Let("n_qb", sympy.floor((R("seqlen_q") + bm - 1) / bm)),
            Let("tiles", sym("n_qb") * R("heads") * R("batch")),
            LetMinMax("u_room", "max", 0, sym("tiles") - cta),
            Let("nloc", sympy.floor((sym("u_room") + ctas - 1) / ctas))]


def unit_decode_lets(bm: int, causal: bool, unit_heads: int, u: Any) -> List[Any]:
    """Unit ``u`` -> ``qb``, ``h``, ``bat``, ``hk`` and ``m0`` (the template's order, module
    docstring), reading ``n_qb`` (:func:`cta_walk_lets`) and the runtime ``heads``, ``batch``,
    ``group``."""
    hbn = R("heads") * R("batch")
    out: List[Any] = [Comment("unit u -> (query block, head, batch)"
                              + (f": chunks of {unit_heads} (batch, head) pairs, the query "
                                 "block the slow index inside a chunk" if unit_heads else ""))]
    if unit_heads:
        G = unit_heads
        out += [Let("chunk", sympy.floor(u / (sym("n_qb") * G))),
                Let("ur", u - sym("chunk") * (sym("n_qb") * G)),
                LetMinMax("gsz", "min", G, hbn - sym("chunk") * G),
                Let("rank", sympy.floor(sym("ur") / sym("gsz"))),
                Let("hb", sym("chunk") * G + sympy.Mod(sym("ur"), sym("gsz")))]
    else:
        out += [Let("rank", sympy.floor(u / hbn)), Let("hb", sympy.Mod(u, hbn))]
    out += [Let("qb", sym("n_qb") - 1 - sym("rank") if causal else sym("rank")),
            Let("h", sympy.Mod(sym("hb"), R("heads"))),
            Let("bat", sympy.floor(sym("hb") / R("heads"))),
            Let("hk", sympy.floor(sym("h") / R("group"))),
            Let("m0", bm * sym("qb"))]
    return out


def eval_lets(lets: List[Any], env: Dict[Any, Any]) -> Dict[Any, Any]:
    """Run ``lets`` (``Let`` / ``LetMinMax``; comments skipped) in order on ``env`` (symbols
    -> ints), with the printed C's semantics (:func:`~kernels.ir.core.c_eval`)."""
    env = dict(env)
    for s in lets:
        if isinstance(s, LetMinMax):
            a, b = int(c_eval(s.a, env)), int(c_eval(s.b, env))
            env[sym(s.name)] = min(a, b) if s.op == "min" else max(a, b)
        elif isinstance(s, Let):
            env[sym(s.name)] = int(c_eval(s.expr, env))
    return env


def _runtime(values: Dict[str, int]) -> Dict[Any, int]:
    out: Dict[Any, int] = {}
    for k, v in values.items():
        out[R(k)] = v
        out[R(k, signed=True)] = v
    return out


def ir_unit_order(lets: List[Any], bm: int) -> Callable[..., Tuple[int, int, int]]:
    """The unit order the IR ``lets`` (:func:`unit_decode_lets` of a kernel, as built)
    compute, in the signature :func:`~.ws_tma_loads.check_unit_decode` takes: ``(u, nqb,
    heads, batch, ...) -> (qb, h, bat)``."""
    def order(u: int, nqb: int, n_heads: int, n_batch: int, *_: Any) -> Tuple[int, int, int]:
        env = _runtime(dict(seqlen_q=nqb * bm, heads=n_heads, batch=n_batch, group=1))
        env[sym("u")] = u
        env[sym("n_qb")] = nqb
        env = eval_lets(lets, env)
        return env[sym("qb")], env[sym("h")], env[sym("bat")]
    return order
