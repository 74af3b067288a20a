"""Read-back of the one-pass decode's printed CUDA (:mod:`kernels.printer.cuda_onepass`) for
the ``printed_source`` check, in the records of :mod:`kernels.verify.source_decode` (whose
reader and IR side call this module's first):

* ``lg_ldg16x8z(&r[w], buf + (offset), pred);`` (a predicated 16-byte load, zeros where
  ``pred`` is off) -> a ``mem`` record like ``lg_ldg16x8``'s;
* ``s[i] = lg_dot8_<t>(&a[w], &b[v]);`` -> a ``warp`` record ``("dot", s, i, fn, a, w, b,
  v)``;
* ``lg_axpy8_<t>(&o[i], p[j], &x[v]);`` -> ``("axpy", fn, o, i, p, j, x, v)``;
* ``s[i] += __shfl_xor_sync(0xffffffffu, s[i], P);`` -> ``("shfl_xor_item", s, i, "sum",
  P)``;
* ``[if (pred)] lg_st_u32x4(buf + (offset), lg_pack_*x2(o[a], o[b]), ...);`` -> a ``mem``
  record (buffer, offset, 8 elements, predicate, the 8 registers and the conversion), compared
  like every other store.

The helpers' names carry the 16-bit type the IR's frags have (a ``bf16`` dot on ``f16``
registers is a different record); the helpers' bodies are the printer's one text, compared by
the ``declarations`` check (:func:`check_onepass_helpers`).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..ir.attention import LaneXor, VecAxpy, VecDot
from .cexpr import CExprError, parse
from .source_text import SourceStmt, split_args

__all__ = ["read_onepass_statement", "onepass_ir_stmts", "ONEPASS_IR_KINDS",
           "check_onepass_helpers"]

ONEPASS_IR_KINDS = ("VecDot", "VecAxpy")

_R = r"(\w+)\[(\d+)\]"
_DOT = re.compile(rf"^{_R} = (lg_dot8_\w+)\(&{_R}, &{_R}\);$")
_AXPY = re.compile(rf"^(lg_axpy8_\w+)\(&{_R}, {_R}, &{_R}\);$")
_XITEM = re.compile(rf"^{_R} \+= __shfl_xor_sync\(0xffffffffu, \1\[\2\], (\d+)\);$")
_ST16 = re.compile(r"^lg_st_u32x4\((.*)\);$")
_LDZ = re.compile(r"^lg_ldg16x8z\(&(\w+)\[(\d+)\], (\w+) \+ \((.*)\), (.*)\);$")
_PACK = re.compile(rf"^(lg_pack_\w+)\({_R}, {_R}\)$")


def _w(regs: tuple, ln: int = 0, text: str = "") -> SourceStmt:
    return SourceStmt("warp", ln, text=text or str(regs[0]), regs=regs, exprs=())


def _store16(s: str, ln: int, dt: Dict[str, str], pred: Any) -> SourceStmt:
    args = split_args(_ST16.match(s).group(1))
    gm = re.match(r"^(\w+) \+ \((.*)\)$", args[0]) if len(args) == 5 else None
    packs = [_PACK.match(a) for a in args[1:]] if gm else []
    if not gm or not all(packs) or len({p.group(1) for p in packs}) != 1 or \
            len({p.group(i) for p in packs for i in (2, 4)}) != 1:
        raise CExprError(f"line {ln}: unreadable 16-byte store (a buffer + (offset), then four "
                         f"lg_pack_*x2 of one register array): {s}")
    buf = gm.group(1)
    if buf not in dt:
        raise CExprError(f"line {ln}: {buf} is no parameter: {s}")
    regs = tuple(int(p.group(i)) for p in packs for i in (3, 5))
    return SourceStmt("mem", ln, buf, (parse(gm.group(2)),), store=True, vtype=(dt[buf], 8),
                      pred=pred, text=s, regs=((packs[0].group(2), regs), packs[0].group(1)))


def read_onepass_statement(s: str, ln: int, dt: Dict[str, str],
                           pred: Any) -> Optional[List[SourceStmt]]:
    """The records of one printed line of the one-pass decode (``pred``: its leading ``if``
    condition, parsed), or None if it is not one of its forms."""
    if _ST16.match(s):
        return [_store16(s, ln, dt, pred)]
    if pred is not None:
        return None
    m = _LDZ.match(s)
    if m:
        w = int(m.group(2))
        return [SourceStmt("mem", ln, m.group(3), (parse(m.group(4)),), store=False,
                           vtype=(dt.get(m.group(3)), 8), pred=parse(m.group(5)), text=s,
                           regs=((m.group(1), tuple(range(2 * w, 2 * w + 8))), ""))]
    m = _DOT.match(s)
    if m:
        g = m.groups()
        return [_w(("dot", g[0], int(g[1]), g[2], g[3], int(g[4]), g[5], int(g[6])), ln, s)]
    m = _AXPY.match(s)
    if m:
        g = m.groups()
        return [_w(("axpy", g[0], g[1], int(g[2]), g[3], int(g[4]), g[5], int(g[6])), ln, s)]
    m = _XITEM.match(s)
    if m:
        return [_w(("shfl_xor_item", m.group(1), int(m.group(2)), "sum", int(m.group(3))),
                   ln, s)]
    return None


def onepass_ir_stmts(s: Any) -> Optional[List[SourceStmt]]:
    """What the CUDA printer prints for one of the one-pass statements, as the records
    :func:`read_onepass_statement` reads; None for any other statement."""
    from ..printer.cuda_onepass import axpy_fn, dot_fn
    if isinstance(s, VecDot):
        return [_w(("dot", s.dst.name, s.item, dot_fn(s.a.dtype), s.a.name, s.a_items[0] // 2,
                    s.b.name, s.b_items[0] // 2))]
    if isinstance(s, VecAxpy):
        return [_w(("axpy", axpy_fn(s.x.dtype), s.acc.name, s.acc_items[0], s.p.name, s.p_item,
                    s.x.name, s.x_items[0] // 2))]
    if isinstance(s, LaneXor) and s.method == "shfl_xor" and s.frag is not None:
        return [_w(("shfl_xor_item", s.frag.name, s.item, s.op, int(s.pattern)))]
    return None


def check_onepass_helpers(k: Any, source: str) -> List[str]:
    """Problems with the one-pass helpers in ``source``: each helper the kernel calls printed
    exactly once with the printer's text (a changed ``fmaf`` order or unpacking would compute
    another dot product than the template's)."""
    from ..printer.cuda_onepass import onepass_helpers
    want = onepass_helpers(k)
    out = []
    for block in re.split(r"(?=LG_DEV )", want):
        if block.strip() and source.count(block) != 1:
            name = block.split("(")[0].split()[-1]
            out.append(f"helper {name} is not printed once with the printer's text")
    return out
