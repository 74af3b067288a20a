"""Read-back of the tensor-core split kernel's printed CUDA (:mod:`kernels.printer.cuda_warp`,
:mod:`kernels.printer.cuda_decode`) for the ``printed_source`` check
(:mod:`kernels.verify.printed`).

Both sides become :class:`~kernels.verify.source_text.SourceStmt` records paired in order:
memory statements (16-byte loads, f32 stores, the LDS pair stores and loads) as ``mem`` records
(the existing comparison of buffer, offset, width, predicate and registers), mask conditions as
``mask`` records, and every other statement as a ``warp`` record whose ``regs`` are a canonical
tuple of what the line names (which registers, variables, selectors, helper, shuffle mask,
warps and rows) and whose ``exprs`` are its index expressions (a shuffle's source lane, a
variable store's offset and predicate, the merge's guard and every shared offset it reads, for
every warp ``r`` and element ``e``), compared by value at every thread of the sampled blocks
and loop iterations.  What the text check does not read: the float operators of a line beyond
its operands (``fmaxf`` / ``lg_exp2`` / ``fmaf`` are matched as written by the printer's
forms; a changed operator is a different line and is refused as unreadable).  A mask line is
read as its condition (a ``mask`` record, compared by value) and a ``warp`` record of its
score register and the scale it applies (none: the raw-score form); the softmax statements of
one kernel must share one form, raw or base-2 (:func:`mixed_score_units`).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import sympy

from ..ir.attention import (ExpScores, FinalNormalize, LaneXor, MaskScores, Rescale, RowMax,
                            SoftmaxUpdate)
from ..ir.core import sym
from ..ir.warp_merge import StoreVar, WarpCombine, WarpStats
from ..ir.warp_registers import PackWord, RoundProbs, ShflBroadcast, SplitProbs, word_form
from ..nvidia.prelude import PACK
from .cexpr import CExprError, parse
from .source_onepass import ONEPASS_IR_KINDS, onepass_ir_stmts, read_onepass_statement
from .source_text import SourceStmt, split_args

__all__ = ["read_decode_statement", "decode_ir_stmts", "DECODE_IR_KINDS", "mixed_score_units"]

_R = r"(\w+)\[(\d+)\]"
_LDG16 = re.compile(r"^lg_ldg16x8\(&(\w+)\[(\d+)\], (\w+) \+ \((.*)\)(?:, (.*))?\);$")
_ST4 = re.compile(r"^\*reinterpret_cast<float4\*>\((\w+) \+ \((.*)\)\) = make_float4\((.*)\);$")
_ST2 = re.compile(r"^\*reinterpret_cast<float2\*>\((\w+) \+ \((.*)\)\) = make_float2\((.*)\);$")
_ASSIGN = re.compile(r"^(\w+)\[(.*)\] = (\w+)(?:\[(.*)\])?;$")
_ZERO = re.compile(rf"^{_R} = 0u;$")
_PERM = re.compile(rf"^{_R} = __byte_perm\({_R}, {_R}, 0x([0-9a-f]{{4}})\);$")
_SHFL = re.compile(r"^const float (\w+) = __shfl_sync\(0xffffffffu, (\w+), (.*)\);$")
_XMAX = re.compile(r"^(\w+) = fmaxf\(\1, __shfl_xor_sync\(0xffffffffu, \1, (\d+)\)\);$")
_XSUM = re.compile(r"^(\w+) \+= __shfl_xor_sync\(0xffffffffu, \1, (\d+)\);$")
_MASK = re.compile(rf"^{_R} = \((.*)\) \? \1\[\2\](?: \* (\w+))? : LG_NEG_INF;$")
_ROWMAX = re.compile(r"^float (\w+) = (fmaxf\(.*\)|\w+\[\d+\]);$")    # (one item: a copy)
_MC = re.compile(r"^const float (\w+) = fmaxf\((\w+), (\w+)\);$")
_ALPHA = re.compile(r"^const float (\w+) = (\w+) == (\w+) \? 1\.f : lg_exp2\(\3 - \2\);$")
_SETM = re.compile(r"^(\w+) = (\w+);$")
_SCALE_L = re.compile(r"^(\w+) \*= (\w+);$")
_EXP = re.compile(rf"^{_R} = {_R} == LG_NEG_INF \? 0\.f : lg_exp2\(\3\[\4\] - (\w+)\); "
                  r"(\w+) \+= \1\[\2\];$")
_GUARD = re.compile(r"^const float (\w+)_g = \1 == LG_NEG_INF \? 0\.f : \1;$")
_EXPG = re.compile(rf"^{_R} = lg_exp2\({_R} - (\w+)_g\); (\w+) \+= \1\[\2\];$")
# the raw-score softmax (kernels.printer.cuda_decode: the statements' raw=True, the prefills)
_MCS = re.compile(r"^const float (\w+) = (\w+) == LG_NEG_INF \? 0\.f : \2 \* (\w+);$")
_ALPHA_F = re.compile(r"^(const float )?(\w+) = lg_exp2\(fmaf\((\w+), (\w+), -(\w+)\)\);$")
_EXP_F = re.compile(rf"^{_R} = lg_exp2\(fmaf\({_R}, (\w+), -(\w+)\)\);$")
_LSUM = re.compile(rf"^(float )?(\w+)_s (=|\+=) {_R} \+ {_R};$")
_LFOLD = re.compile(r"^(\w+) = fmaf\(\1, (\w+), \1_s\);$")
_RESCALE = re.compile(rf"^(?:{_R} \*= (\w+);\s*)+$")
_PHI = re.compile(rf"^{_R} = (lg_pack_\w+)\({_R}, {_R}\);$")
_PLO = re.compile(rf"^{_R} = (lg_pack_\w+)\({_R} - (lg_\w+_lo)\({_R}\), {_R} - "
                  rf"(lg_\w+_hi)\({_R}\)\);$")
_NORM = re.compile(r"^\{ const float lg_inv = (\w+) > 0\.f \? 1\.f / \1 : 0\.f; "
                   rf"((?:{_R} \*= lg_inv; )+)(\w+)\[0\] = \1 > 0\.f \? \((\w+)(?: \* (\w+))? \+ "
                   r"log2f\(\1\)\) \* 0\.6931471805599453f : LG_NEG_INF; \}$")
_STATS = re.compile(r"^lg_warp_stats<(\d+), (\d+)>\((\w+), (\w+), (\w+), (\w+), (\w+), tid\);$")
_COMBINE = re.compile(r"^LG_WARP_COMBINE\((.*)\);$")


def _regs(frag: str, first: int, n: int) -> Tuple[str, Tuple[int, ...]]:
    return frag, tuple(range(first, first + n))


def _mem_read(s: str, ln: int, dt: Dict[str, str], pred: Any) -> Optional[SourceStmt]:
    m = _LDG16.match(s)
    if m and pred is None:
        p = parse(m.group(5)) if m.group(5) else None
        return SourceStmt("mem", ln, m.group(3), (parse(m.group(4)),), store=False,
                          vtype=(dt.get(m.group(3)), 8), pred=p, text=s,
                          regs=(_regs(m.group(1), 2 * int(m.group(2)), 8), ""))
    for rx, n in ((_ST4, 4), (_ST2, 2)):
        m = rx.match(s)
        if m:
            regs = [re.match(rf"^{_R}$", a) for a in split_args(m.group(3))]
            if len(regs) != n or not all(regs) or len({r.group(1) for r in regs}) != 1:
                raise CExprError(f"line {ln}: unreadable {n}-float store: {s}")
            return SourceStmt("mem", ln, m.group(1), (parse(m.group(2)),), store=True,
                              vtype=(dt.get(m.group(1)), n), pred=pred, text=s,
                              regs=((regs[0].group(1), tuple(int(r.group(2)) for r in regs)),
                                    ""))
    m = _ASSIGN.match(s)
    if m and m.group(4) is not None:
        dst, src = m.group(1), m.group(3)
        if src in dt and dst not in dt:          # register <- buffer: a one-float load
            return SourceStmt("mem", ln, src, (parse(m.group(4)),), store=False,
                              vtype=(dt[src], 1), pred=pred, text=s,
                              regs=((dst, (int(m.group(2)),)), ""))
        if dst in dt and src not in dt:          # buffer <- register: a one-float store
            return SourceStmt("mem", ln, dst, (parse(m.group(2)),), store=True,
                              vtype=(dt[dst], 1), pred=pred, text=s,
                              regs=((src, (int(m.group(4)),)), ""))
    if m and m.group(4) is None and m.group(1) in dt:   # a variable to shared memory
        return SourceStmt("warp", ln, text=s, regs=("store_var", m.group(1), m.group(3)),
                          exprs=(parse(m.group(2)), pred if pred is not None else parse("1")))
    return None


def _combine_read(s: str, ln: int, pred: Any) -> SourceStmt:
    a = split_args(_COMBINE.match(s).group(1))
    if len(a) != 9 or pred is None:
        raise CExprError(f"line {ln}: unreadable warp combine (9 arguments, under its guard): "
                         f"{s}")
    n, w = int(a[0]), int(a[1])
    exprs: List[Any] = [pred, parse(a[8])]
    for r in range(w):
        exprs.append(parse(re.sub(r"\br\b", str(r), a[4])))
        for e in range(n):
            exprs.append(parse(re.sub(r"\be\b", str(e), re.sub(r"\br\b", str(r), a[6]))))
    return SourceStmt("warp", ln, text=s, exprs=tuple(exprs),
                      regs=("combine", n, w, a[2], a[3], a[5], a[7]))


def read_decode_statement(s: str, ln: int, dt: Dict[str, str],
                          pred: Any) -> Optional[List[SourceStmt]]:
    """The records of one printed line of the split kernel (``pred``: its leading ``if``
    condition, already parsed; ``dt``: the element type of every buffer), or None if it is
    not one of its forms."""
    if s == "#pragma unroll":
        return []
    onepass = read_onepass_statement(s, ln, dt, pred)     # the one-pass decode's forms
    if onepass is not None:
        return onepass
    mem = _mem_read(s, ln, dt, pred)
    if mem is not None:
        return [mem]
    if _COMBINE.match(s):
        return [_combine_read(s, ln, pred)]
    m = _MASK.match(s)
    if m:       # the condition, then which register it masks and the scale it applies
        return [SourceStmt("mask", ln, exprs=(parse(m.group(3)),), text=s),
                SourceStmt("warp", ln, text=s, regs=("mask", m.group(1), int(m.group(2)),
                                                     m.group(4) or ""))]
    m = _STATS.match(s)
    if m and pred is not None:
        return [SourceStmt("warp", ln, text=s, exprs=(pred,),
                           regs=("stats", int(m.group(1)), int(m.group(2)), *m.groups()[2:]))]
    w = _warp_regs(s)
    if w is None:
        return None
    regs, exprs = w
    return [SourceStmt("warp", ln, text=s, regs=regs, exprs=exprs)]


def _warp_regs(s: str) -> Optional[Tuple[tuple, tuple]]:
    m = _ZERO.match(s)
    if m:
        return ("pack", m.group(1), int(m.group(2)), "zero"), ()
    m = _PERM.match(s)
    if m:
        g = m.groups()
        return ("pack", g[0], int(g[1]), "perm", g[2], int(g[3]), g[4], int(g[5]),
                int(g[6], 16)), ()
    m = re.match(rf"^{_R} = {_R};$", s)
    if m:
        return ("pack", m.group(1), int(m.group(2)), "copy", m.group(3), int(m.group(4))), ()
    m = _SHFL.match(s)
    if m:
        return ("shfl", m.group(1), m.group(2)), (parse(m.group(3)),)
    m = _XMAX.match(s) or _XSUM.match(s)
    if m:
        op = "max" if "fmaxf" in s else "sum"
        return ("shfl_xor", m.group(1), op, int(m.group(2))), ()
    m = _ROWMAX.match(s)
    if m:
        return ("rowmax", m.group(1), tuple(re.findall(_R, m.group(2)))), ()
    m = _MC.match(s)
    if m:
        return ("update_mc", *m.groups()), ()
    m = _ALPHA.match(s)
    if m:
        return ("update_alpha", *m.groups()), ()
    m = _EXP.match(s)
    if m:
        g = m.groups()
        return ("exp", g[0], int(g[1]), g[2], int(g[3]), g[4], g[5]), ()
    m = _GUARD.match(s)
    if m:
        return ("exp_guard", m.group(1)), ()
    m = _EXPG.match(s)
    if m:
        g = m.groups()
        return ("exp_g", g[0], int(g[1]), g[2], int(g[3]), g[4], g[5]), ()
    raw = _raw_regs(s)
    if raw is not None:
        return raw, ()
    m = _RESCALE.match(s)
    if m:
        parts = re.findall(rf"{_R} \*= (\w+);", s)
        return ("rescale", tuple((f, int(i), a) for f, i, a in parts)), ()
    m = _PHI.match(s)
    if m:
        g = m.groups()
        return ("p_hi", g[0], int(g[1]), g[2], g[3], int(g[4]), g[5], int(g[6])), ()
    m = _PLO.match(s)
    if m:
        g = m.groups()
        return ("p_lo", g[0], int(g[1]), g[2], g[3], int(g[4]), g[5], g[6], int(g[7]), g[8],
                int(g[9]), g[10], g[11], int(g[12])), ()
    m = _NORM.match(s)
    if m:
        items = tuple((f, int(i)) for f, i in re.findall(rf"{_R} \*= lg_inv;", m.group(2)))
        return ("normalize", m.group(1), items, m.group(5), m.group(6), m.group(7) or ""), ()
    m = _SCALE_L.match(s)
    if m:
        return ("scale_l", m.group(1), m.group(2)), ()
    m = _SETM.match(s)
    if m:
        return ("update_m", m.group(1), m.group(2)), ()
    return None


def _raw_regs(s: str) -> Optional[tuple]:
    """The raw-score softmax's lines (module :mod:`kernels.printer.cuda_decode`), or None."""
    m = _MCS.match(s)
    if m:
        return ("update_mcs", *m.groups())
    m = _ALPHA_F.match(s)
    if m:
        g = m.groups()      # declared here, or assigned (SoftmaxUpdate.alpha_declared)
        return ("update_alpha_f", "declared" if g[0] else "assigned", *g[1:])
    m = _EXP_F.match(s)
    if m:
        g = m.groups()
        return ("exp_f", g[0], int(g[1]), g[2], int(g[3]), g[4], g[5])
    m = _LSUM.match(s)
    if m and bool(m.group(1)) == (m.group(3) == "="):
        g = m.groups()
        return ("l_pair", g[1], g[2], g[3], int(g[4]), g[5], int(g[6]))
    m = _LFOLD.match(s)
    if m:
        return ("l_fold", m.group(1), m.group(2))
    return None


# ---------------------------------------------------------------------------- the IR side

DECODE_IR_KINDS = ("MaskScores", "PackWord", "ShflBroadcast", "SplitProbs", "StoreVar",
                   "WarpStats", "WarpCombine", "RowMax", "SoftmaxUpdate", "ExpScores", "Rescale",
                   "RoundProbs", "FinalNormalize") + ONEPASS_IR_KINDS


def _w(regs: tuple, exprs: tuple = ()) -> SourceStmt:
    return SourceStmt("warp", regs=regs, exprs=exprs, text=str(regs[0]))


def _raw_ir(s: Any, c: str) -> List[SourceStmt]:
    """The records of the raw-score form of a mask, update or exponent (scale parameter
    ``c``)."""
    if isinstance(s, MaskScores):
        return _mask_ir(s, "")
    if isinstance(s, SoftmaxUpdate):
        n = f"{s.mc}_n"
        decl = "assigned" if s.alpha_declared else "declared"
        return [_w(("update_mc", n, s.m, s.m_tile)), _w(("update_mcs", s.mc, n, c)),
                _w(("update_alpha_f", decl, s.alpha, s.m, c, s.mc)), _w(("update_m", s.m, n))]
    p, k = s.p.name, s.p_items
    out = [_w(("exp_f", p, pk, s.s.name, si, c, s.mc)) for pk, si in zip(k, s.s_items)]
    out += [_w(("l_pair", s.l, "=" if j == 0 else "+=", p, k[j], p, k[j + 1]))
            for j in range(0, len(k) - 1, 2)]
    return out + [_w(("l_fold", s.l, s.alpha))]


def _mask_ir(s: Any, scale: str) -> List[SourceStmt]:
    out: List[SourceStmt] = []
    for i, cond in zip(s.items, s.conds):
        out += [SourceStmt("mask", exprs=(cond,)), _w(("mask", s.frag.name, i, scale))]
    return out


def decode_ir_stmts(s: Any, scale: str = "scale_log2") -> Optional[List[SourceStmt]]:
    """What the CUDA printer prints for one split-kernel statement, as records equal to what
    :func:`read_decode_statement` reads from the text; None for a statement it does not
    cover.  ``scale``: the kernel's scale parameter (``AttnKernel.scale_param``); a
    statement with ``raw=True`` prints the raw-score form."""
    if isinstance(s, (MaskScores, SoftmaxUpdate, ExpScores)) and s.raw:
        return _raw_ir(s, scale)
    onepass = onepass_ir_stmts(s)
    if onepass is not None:
        return onepass
    if isinstance(s, MaskScores):
        return _mask_ir(s, scale)
    if isinstance(s, PackWord):
        kind, how = word_form(s.lo, s.hi)
        head = ("pack", s.dst.name, s.word)
        if kind == "zero":
            return [_w(head + ("zero",))]
        if kind == "copy":
            return [_w(head + ("copy", how[0].name, how[1]))]
        a, u, b, v, sel = how
        return [_w(head + ("perm", a.name, u, b.name, v, sel))]
    if isinstance(s, ShflBroadcast):
        return [_w(("shfl", s.dst, s.src), (s.lane,))]
    if isinstance(s, LaneXor) and s.method == "shfl_xor":
        return [_w(("shfl_xor", s.var, s.op, int(s.pattern)))]
    if isinstance(s, RowMax):
        return [_w(("rowmax", s.dst, tuple((s.frag.name, str(i)) for i in s.items)))]
    if isinstance(s, SoftmaxUpdate):
        return [_w(("update_mc", s.mc, s.m, s.m_tile)), _w(("update_alpha", s.alpha, s.mc, s.m)),
                _w(("update_m", s.m, s.mc))]
    if isinstance(s, ExpScores) and s.row_guard:
        return [_w(("scale_l", s.l, s.alpha)), _w(("exp_guard", s.mc))] + [
            _w(("exp_g", s.p.name, k, s.s.name, i, s.mc, s.l)) for k, i in zip(s.p_items,
                                                                             s.s_items)]
    if isinstance(s, ExpScores):
        return [_w(("scale_l", s.l, s.alpha))] + [
            _w(("exp", s.p.name, k, s.s.name, i, s.mc, s.l)) for k, i in zip(s.p_items, s.s_items)]
    if isinstance(s, Rescale):
        return [_w(("rescale", tuple((s.frag.name, i, s.alpha) for i in s.items)))]
    if isinstance(s, SplitProbs):
        pack = PACK[s.hi.dtype]
        lo, hi = (f"lg_{s.hi.dtype}_lo", f"lg_{s.hi.dtype}_hi")
        out = []
        for i in s.items[::2]:
            w, p = i // 2, s.p.name
            out += [_w(("p_hi", s.hi.name, w, pack, p, i, p, i + 1)),
                    _w(("p_lo", s.lo.name, w, pack, p, i, lo, s.hi.name, w, p, i + 1, hi,
                        s.hi.name, w))]
        return out
    if isinstance(s, RoundProbs):
        pack, p = PACK[s.dst.dtype], s.p.name
        return [_w(("p_hi", s.dst.name, i // 2, pack, p, i, p, i + 1)) for i in s.items[::2]]
    if isinstance(s, FinalNormalize):
        return [_w(("normalize", s.l, tuple((s.o.name, i) for i in s.items), s.lse.name,
                    s.mc, scale if s.raw else ""))]
    if isinstance(s, StoreVar):
        return [_w(("store_var", s.buf, s.var), (s.offset, s.pred if s.pred is not None
                                                 else sympy.true))]
    if isinstance(s, WarpStats):
        return [_w(("stats", s.warps, s.rows, s.s_m, s.s_l, s.s_w, s.s_inv, s.s_lse),
                   (sym("tid") < s.rows,))]
    if isinstance(s, WarpCombine):
        exprs: List[Any] = [s.pred, s.j]
        for r in range(s.warps):
            exprs.append(r * s.rows + s.j)
            for e in range(s.n):
                exprs.append(s.x_offset.subs({sym("r"): r, sym("e"): e}))
        return [_w(("combine", s.n, s.warps, s.f.name, s.s_w, s.s_acc, s.s_inv), tuple(exprs))]
    return None


def mixed_score_units(k: Any) -> Optional[str]:
    """Why ``k``'s softmax statements do not print in one unit (None: they do): raw scores
    everywhere (``raw=True``: the scale in each exponent) or base-2 scores from the mask on;
    a mix computes another function whatever the dataflow proves."""
    from ..ir.core import walk
    forms = {bool(s.raw) for s in walk(k.body)
             if isinstance(s, (MaskScores, SoftmaxUpdate, ExpScores, FinalNormalize))}
    if len(forms) > 1:
        return (f"{k.name}: the softmax statements mix raw and base-2 score units (the raw "
                "flags of MaskScores / SoftmaxUpdate / ExpScores / FinalNormalize differ)")
    return None
