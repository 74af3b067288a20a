"""Verify the printed kernel source, not only the IR it was printed from.

The gates (:mod:`kernels.gate`, :mod:`kernels.attention_gate`) prove properties of the IR.  This
module reads the **printed text** back and checks it against that IR, so that a bug in a printer
cannot hide behind a proof about the model:

* ``printed_source`` - the kernel body is parsed back (``const int`` bindings, loops, ``if``
  conditions, every global/LDS memory reference with its vector type and predicate, mask
  conditions, ``ds_bpermute`` addresses, ``ds_swizzle`` patterns) and paired, in order, with the
  IR statements that print them; every printed index expression is evaluated with C semantics
  (:mod:`kernels.verify.cexpr`) and must equal the IR expression (:func:`kernels.ir.c_eval`) at
  every thread of the sampled blocks and loop iterations.  A missing swizzle, a wrong constant, a
  dropped predicate or a vector type of the wrong width is refused with its source line.
* ``declarations`` - the signature (parameter names, element types, ``const``, by-value
  scalars), ``LAGEN_LAUNCH_BOUNDS`` / ``LAGEN_WAVES_PER_EU``, every ``LAGEN_SHARED`` array (element
  type and size: the gate's ``in_bounds`` and ``lds_capacity`` are about these sizes), every
  register array and every vector typedef equal what the IR declares.
* ``printed_source`` also reads the P conversions of the attention kernels: every
  ``p = conv(e_);`` of the text must be the conversion of the IR's P rounding
  (:mod:`kernels.ir.p_rounding`), as many times as the IR converts, and each bf16 helper called
  must be defined once, with exactly the table's text (a config that says rtne over a text that
  truncates is refused).
* ``index_ranges`` - every printed integer expression (and each of its subexpressions) fits its C
  type over the ranges of its symbols, by interval arithmetic: ``tid`` over the block,
  block ids over the grid, loop variables over their bounds, runtime arguments at their values
  (the gate's instances for attention), each ``const int`` over the interval of its expression.
  Interval arithmetic over-approximates, so a pass is a proof; a failure names the
  subexpression and its bound.

Entry point: :func:`verify_printed`.  It returns :class:`CheckResult` records that the builders
add to the gate's report, so ``report.json`` says the printed text was checked.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from layoutalg.verify.result import CheckResult

from .gate_common import BYTES, Fail
from ..ir import Access, Barrier, If, Kernel, Let, Loop, Mfma, c_eval, walk
from ..ir.p_rounding import BF16_HELPERS, p_conversion
from .cexpr import INT_MAX, INT_MIN, CExprError, bound, evaluate, text_of
from .source_decode import (DECODE_IR_KINDS, decode_ir_stmts, mixed_score_units,
                            read_decode_statement)
from .source_onepass import check_onepass_helpers
from .source_text import (SCALAR_DTYPE, ParsedSource, SourceStmt, ctype_of, read_cuda_source,
                          read_source, register_operand, param_decl)

__all__ = ["PRINTED_CHECKS", "verify_printed", "attach_printed_checks", "index_ranges_at"]

PRINTED_CHECKS = ("printed_source", "declarations", "index_ranges")

# ---------------------------------------------------------------------------- the IR side

def _ir_stmts(body: Sequence[Any], cuda: bool = False,
              scale: str = "scale_log2") -> List[SourceStmt]:
    """The IR statements that print index math, in printing order, as :class:`SourceStmt`
    (``scale``: an attention kernel's scale parameter, named by its CUDA softmax lines)."""
    out: List[SourceStmt] = []
    for s in body:
        kind = type(s).__name__
        dec = decode_ir_stmts(s, scale) if cuda and (kind in DECODE_IR_KINDS or
                                                     kind == "LaneXor") else None
        if dec is not None:             # the NVIDIA split decode's forms (source_decode)
            out += dec
        elif isinstance(s, Let):
            out.append(SourceStmt("let", name=s.name, exprs=(s.expr,)))
        elif kind == "LetMinMax":
            out.append(SourceStmt("let", name=s.name, exprs=(("min" if s.op == "min" else "max",
                                                               s.a, s.b),)))
        elif isinstance(s, Loop):
            out.append(SourceStmt("loop", name=s.var, exprs=(s.start, s.stop),
                                  body=_ir_stmts(s.body, cuda, scale)))
        elif isinstance(s, If):
            out.append(SourceStmt("if", exprs=(s.cond,), body=_ir_stmts(s.body, cuda, scale)))
        elif kind == "CpAsync":         # NVIDIA: the global read, then the shared write
            out += [SourceStmt("mem", name=a.buf, exprs=(a.offset,), store=a.kind == "store",
                               vtype=(None, a.width), pred=a.pred, text=s.tag)
                    for a in (s.load, s.store)]
        elif kind == "CpAsyncCommit":
            out.append(SourceStmt("commit"))
        elif kind == "CpAsyncWait":
            out.append(SourceStmt("wait", exprs=(s.pending,)))
        elif isinstance(s, Access) and getattr(s, "atom", None) is not None:    # ldmatrix
            out.append(SourceStmt("mem", name=s.buf, exprs=(s.offset,), store=False,
                                  vtype=(None, s.width), text=s.tag,
                                  regs=((s.regs.frag.name, s.regs.idx),
                                        "trans" if s.atom.trans else "")))
        elif isinstance(s, Access):
            offs = (s.offset,) if s.soffset is None else (s.offset, s.soffset)
            out.append(SourceStmt("mem", name=s.buf, exprs=offs, store=s.kind == "store",
                                  vtype=(None, s.width), pred=s.pred, text=s.tag,
                                  regs=(s.regs.frag.name, s.regs.idx)))
        elif isinstance(s, Barrier):
            out.append(SourceStmt("barrier"))
        elif kind in _WGMMA_KINDS:      # NVIDIA Hopper: kernels.ir.nvidia_wgmma
            out += _wgmma_stmts(s, kind)
        elif isinstance(s, Mfma):
            # an NVIDIA atom has no builtin: the CUDA prelude's helper of its input type
            fn = s.spec.builtin or f"lg_mma_{s.spec.a_type}"
            out.append(SourceStmt("mfma", text=s.tag, regs=(
                fn, *((r.frag.name, r.idx) for r in (
                    s.acc, *((s.b, s.a) if s.swap_ab else (s.a, s.b)), s.acc)))))
        elif kind in _LSE_KINDS:        # kernels.ir.lse_merge (the CUDA printer only)
            out.append(SourceStmt(_LSE_KINDS[kind], text=kind, regs=_lse_regs(s, kind)))
        elif kind == "MaskScores":
            out.extend(SourceStmt("mask", exprs=(c,)) for c in s.conds)
        elif kind == "LaneXor":
            if s.method == "bpermute":
                out.append(SourceStmt("bperm", exprs=(s.addr,)))
            elif s.method == "swizzle":
                out.append(SourceStmt("swz", exprs=(int(s.pattern),)))
    return out


_LSE_KINDS = {"LseMax": "lse_max", "LseMergeStep": "lse_merge", "LseNormalize": "lse_norm"}


def _lse_regs(s: Any, kind: str) -> tuple:
    """The variables and registers one LSE merge statement prints (as the reader returns)."""
    if kind == "LseMax":
        return (s.m, s.lse.name, s.item)
    if kind == "LseMergeStep":
        return (s.m, s.l, (s.o.name, tuple(s.o_items)), (s.x.name, tuple(s.x_items)),
                s.lse.name, s.lse_item)
    return ((s.o.name, tuple(s.items)), s.l)


_WGMMA_KINDS = {"WgmmaMma": "wgmma", "WgmmaFence": "wg_fence", "WgmmaCommit": "wg_commit",
                "WgmmaWait": "wg_wait", "FenceProxyAsync": "proxy_fence"}


def _wgmma_stmts(s: Any, kind: str) -> List[SourceStmt]:
    """What the CUDA printer prints for one wgmma statement: the wrapper of the atom, the
    accumulator's first register, each operand's array and descriptor constant with its start
    expression; a wait's count and the frags it pins."""
    from ..nvidia.wgmma_prelude import wgmma_fn, wgmma_key
    if kind == "WgmmaMma":
        shared = (s.b,) if s.a_in_regs else (s.a, s.b)
        a_regs = ((s.a.frag.name, tuple(s.a.idx)),) if s.a_in_regs else ()
        return [SourceStmt("wgmma", text=s.tag, exprs=tuple(op.start for op in shared), regs=(
            wgmma_fn(*wgmma_key(s)),
            (s.acc.frag.name, s.acc.idx[0]), *a_regs,
            *((op.buf, op.desc.constant_bits()) for op in shared), ("scale_d", int(s.accumulate))))]
    pins = [SourceStmt("pin", name=f) for f in getattr(s, "pins", ())]
    if kind == "WgmmaWait":     # pinned after a wait, before a fence
        return [SourceStmt("wg_wait", exprs=(s.pending,))] + pins
    return (pins if kind == "WgmmaFence" else []) + [SourceStmt(_WGMMA_KINDS[kind])]


def _ir_value(e: Any, env: Dict[str, Any]) -> Any:
    if isinstance(e, tuple):
        a, b = _ir_value(e[1], env), _ir_value(e[2], env)
        return np.minimum(a, b) if e[0] == "min" else np.maximum(a, b)
    e = sympy.sympify(e)
    senv = {s: env[s.name] for s in e.free_symbols if s.name in env}
    missing = [s.name for s in e.free_symbols if s.name not in env]
    if missing:
        raise CExprError(f"IR expression {e} uses unbound {missing}")
    return np.asarray(c_eval(e, senv), dtype=np.int64)


def _txt_value(e: Any, env: Dict[str, Any]) -> Any:
    return np.asarray(evaluate(e, env), dtype=np.int64)


# ---------------------------------------------------------------------------- the checks

@dataclass
class _Ctx:
    k: Kernel
    fails: Fail
    where: str
    tenv: Dict[str, Any]
    ienv: Dict[str, Any]
    points: int = 0
    cuda: bool = False


def _first_diff(a: Any, b: Any, env: Dict[str, Any]) -> str:
    names = ("tid",) + tuple(env.get("_grid_names", ())) + tuple(env.get("_loop_names", ()))
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), *(np.shape(env[n]) for n in names))
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    bad = np.argwhere(a != b)
    if not bad.size:
        return ""
    idx = tuple(bad[0])
    at = []
    for n in ("tid",) + tuple(env.get("_grid_names", ())):
        v = np.broadcast_to(np.asarray(env[n]), a.shape)
        at.append(f"{n}={int(v[idx])}")
    for n in env.get("_loop_names", ()):
        at.append(f"{n}={int(np.broadcast_to(np.asarray(env[n]), a.shape)[idx])}")
    return f"printed {int(a[idx])}, IR {int(b[idx])} at {', '.join(at)}"


def _compare(c: _Ctx, txt: List[SourceStmt], ir: List[SourceStmt]) -> None:
    for n, (t, s) in enumerate(itertools.zip_longest(txt, ir)):
        if t is None or s is None or t.kind != s.kind:
            tl = f"line {t.line} ({t.kind}: {t.text})" if t is not None else "nothing"
            sl = f"{s.kind} {s.name or s.text}".strip() if s is not None else "nothing"
            c.fails.add("printed_source", f"statement {n} of a block: the source has {tl}, "
                                          f"the IR prints {sl}{c.where}")
            return
        if t.kind in ("let", "loop", "pin") and t.name != s.name:
            c.fails.add("printed_source", f"line {t.line}: binds {t.name!r}, the IR "
                                          f"{s.name!r}{c.where}")
            return
        if t.kind == "warp":            # registers and names as printed, then every index
            if tuple(t.regs) != tuple(s.regs) or len(t.exprs) != len(s.exprs):   # expression
                c.fails.add("printed_source", f"line {t.line}: `{t.text}` reads {t.regs}, the "
                                              f"IR prints {s.regs}{c.where}")
            for te, se in zip(t.exprs, s.exprs):
                d = _first_diff(_txt_value(te, c.tenv), _ir_value(se, c.ienv), c.tenv)
                if d:
                    c.fails.add("printed_source", f"line {t.line}: `{t.text}`: {d}{c.where}")
            continue
        if t.kind == "swz":
            if t.exprs[0] != s.exprs[0]:
                c.fails.add("printed_source", f"line {t.line}: ds_swizzle pattern "
                                              f"{t.exprs[0]:#06x}, the IR {s.exprs[0]:#06x}")
            continue
        if t.kind == "mem":
            _compare_mem(c, t, s)
            if c.cuda:
                _compare_cuda_regs(c, t, s)
            else:
                _compare_regs(c, t, [s.regs], [t.regs[0] if t.regs else ""])
        if t.kind.startswith("lse_") and tuple(t.regs) != tuple(s.regs):
            c.fails.add("printed_source", f"line {t.line}: {t.text} reads {t.regs}, the IR's "
                                          f"{s.text} {s.regs}")
        if t.kind == "wgmma" and tuple(t.regs) != tuple(s.regs):
            c.fails.add("printed_source", f"line {t.line}: wgmma {t.regs}, the IR {s.regs} "
                                          f"({s.text}): wrapper, accumulator, operand arrays "
                                          "and descriptor constants must be the IR's")
        if t.kind == "mfma" and c.cuda:
            _compare_cuda_mma(c, t, s)
        elif t.kind == "mfma":
            if t.regs[0] != s.regs[0]:
                c.fails.add("printed_source", f"line {t.line}: calls {t.regs[0]}, the IR "
                                              f"{s.regs[0]} ({s.text})")
            tail = list(t.regs[2:])
            if tail[-3:] != ["0", "0", "0"]:
                c.fails.add("printed_source", f"line {t.line}: MFMA modifiers {tail[-3:]}, the "
                                              f"IR 0, 0, 0")
            _compare_regs(c, t, list(s.regs[1:]), [t.regs[1]] + tail[:3])
        pairs = list(zip(t.exprs, s.exprs))
        for te, se in pairs[: (2 if t.kind in ("loop", "mem", "wgmma") else 1)]:
            if t.kind in ("wait", "wg_wait"):
                if _txt_value(te, {}) != int(se):
                    what = "cp.async" if t.kind == "wait" else "wgmma"
                    c.fails.add("printed_source", f"line {t.line}: {what}.wait_group "
                                                  f"{int(_txt_value(te, {}))}, the IR {se}")
                continue
            tv, iv = _txt_value(te, c.tenv), _ir_value(se, c.ienv)
            if t.kind in ("if", "mask"):
                tv, iv = tv != 0, iv != 0
            c.points += int(np.broadcast(tv, iv).size)
            d = _first_diff(tv, iv, c.tenv)
            if d:
                c.fails.add("printed_source", f"line {t.line}: `{t.text}`: {d}{c.where}")
        if t.kind == "let":
            c.tenv[t.name] = _txt_value(t.exprs[0], c.tenv)
            c.ienv[s.name] = _ir_value(s.exprs[0], c.ienv)
        elif t.kind in ("if", "loop"):
            # a body is a C scope: its bindings (which may shadow outer ones) end with it
            outer_t, outer_i = dict(c.tenv), dict(c.ienv)
            if t.kind == "if":
                _compare(c, t.body, s.body)
            else:
                lo = int(np.min(_txt_value(t.exprs[0], c.tenv)))
                hi = int(np.max(_txt_value(t.exprs[1], c.tenv)))
                vals = sorted({v for v in (lo, lo + 1, (lo + hi) // 2, hi - 2, hi - 1)
                               if lo <= v < hi}) or [lo]
                loops = tuple(c.tenv.get("_loop_names", ())) + (t.name,)
                for v in vals:
                    c.tenv[t.name], c.ienv[s.name] = np.int64(v), np.int64(v)
                    c.tenv["_loop_names"] = loops
                    _compare(c, t.body, s.body)
            c.tenv.clear()
            c.tenv.update(outer_t)
            c.ienv.clear()
            c.ienv.update(outer_i)


# the CUDA printer's conversions of f32 accumulators to the output type (pair, single)
_CUDA_CONVERT = {"f16": ("lg_pack_f16x2", "lg_f32_to_f16"),
                 "bf16": ("lg_pack_bf16x2", "lg_f32_to_bf16")}


def _compare_cuda_regs(c: _Ctx, t: SourceStmt, s: SourceStmt) -> None:
    """CUDA memory statements: the registers an ldmatrix fills (and .trans), the accumulators a
    store converts (and the conversion to the output type); a cp.async moves none."""
    if not s.regs:
        return
    got, want = (t.regs[0] if t.regs else None), s.regs
    if isinstance(want[0], tuple):                     # ldmatrix: ((frag, idx), trans)
        if got != (want[0][0], tuple(want[0][1])) or t.regs[1] != want[1]:
            c.fails.add("printed_source", f"line {t.line}: ldmatrix{t.regs[1] and '.trans'} "
                                          f"into {got}, the IR ldmatrix{want[1] and '.trans'} "
                                          f"into {want[0][0]}{list(want[0][1])} ({s.text})")
        return
    if not s.store:                                    # an f32 load: the registers it fills
        if got != (want[0], tuple(want[1])):
            c.fails.add("printed_source", f"line {t.line}: loads into {got}, the IR into "
                                          f"{want[0]}{list(want[1])} ({s.text})")
        return
    if got != (want[0], tuple(want[1])):
        c.fails.add("printed_source", f"line {t.line}: stores {got}, the IR "
                                      f"{want[0]}{list(want[1])} ({s.text})")
    dt = {p.name: p.dtype for p in (*c.k.params, *c.k.shared)}.get(s.name)
    rdt = {f.name: f.dtype for f in c.k.frags}.get(want[0])
    fn = "" if dt in ("f32", rdt) else _CUDA_CONVERT.get(dt, ("?", "?"))[0 if len(want[1]) in (2, 4, 8)
                                                                  else 1]
    if t.regs[1] != fn:
        c.fails.add("printed_source", f"line {t.line}: converts with {t.regs[1]}, the output "
                                      f"{s.name} is {dt} ({fn})")


def _compare_cuda_mma(c: _Ctx, t: SourceStmt, s: SourceStmt) -> None:
    """``lg_mma_<type>(&acc[i], &a[w], &b[w])``: the helper of the atom's input type (the
    prelude's mma.sync m16n8k16 .row.col .f32) on the IR's accumulator, A and B registers."""
    want_fn = s.regs[0]
    if t.regs[0] != want_fn:
        c.fails.add("printed_source", f"line {t.line}: calls {t.regs[0]}, the IR's atom "
                                      f"needs {want_fn} ({s.text})")
    for got, want, what in zip(t.regs[1:], s.regs[1:4], ("accumulator", "A", "B")):
        if got != (want[0], tuple(want[1])):
            c.fails.add("printed_source", f"line {t.line}: {what} operand {got[0]}"
                                          f"{list(got[1])}, the IR {want[0]}{list(want[1])} "
                                          f"({s.text})")


def _compare_regs(c: _Ctx, t: SourceStmt, want: List[Any], got: List[str]) -> None:
    frags = {f.name: f for f in c.k.frags}
    for w, g in zip(want, got):
        op = register_operand(g, frags)
        if op != (w[0], tuple(w[1])):
            c.fails.add("printed_source", f"line {t.line}: register operand `{g}` is "
                                          f"{op[0] + str(list(op[1])) if op else 'unreadable'}, "
                                          f"the IR {w[0]}{list(w[1])} ({t.text})")


def _compare_mem(c: _Ctx, t: SourceStmt, s: SourceStmt) -> None:
    k = c.k
    dtype = {p.name: p.dtype for p in k.params}
    dtype.update({sh.name: sh.dtype for sh in k.shared})
    if t.name != s.name:
        c.fails.add("printed_source", f"line {t.line}: accesses {t.name}, the IR "
                                      f"{s.name} ({s.text})")
    if len(t.exprs) != len(s.exprs):
        kinds = {1: "a pointer access", 2: "a buffer load (voffset, soffset)"}
        c.fails.add("printed_source", f"line {t.line}: {kinds.get(len(t.exprs))}, the IR "
                                      f"{kinds.get(len(s.exprs))} ({s.text})")
    if t.store != s.store:
        c.fails.add("printed_source", f"line {t.line}: a {'store' if t.store else 'load'}, "
                                      f"the IR a {'store' if s.store else 'load'} ({s.text})")
    width = s.vtype[1]
    got = t.vtype if t.vtype is not None else (dtype.get(t.name), 1)
    if got != (dtype.get(s.name), width):
        c.fails.add("printed_source", f"line {t.line}: {t.name} accessed as {got[1]} x "
                                      f"{got[0]}, the IR as {width} x {dtype.get(s.name)} "
                                      f"({s.text})")
    if (t.pred is None) != (s.pred is None):
        has = "a" if t.pred is not None else "no"
        ir_has = "has one" if s.pred is not None else "has none"
        c.fails.add("printed_source", f"line {t.line}: {has} predicate, the IR {ir_has} "
                                      f"({s.text}){c.where}")
    elif t.pred is not None:
        tv = _txt_value(t.pred, c.tenv) != 0
        iv = _ir_value(s.pred, c.ienv) != 0
        d = _first_diff(tv, iv, c.tenv)
        if d:
            c.fails.add("printed_source", f"line {t.line}: predicate of `{t.text}`: {d}{c.where}")


def _check_params(src: ParsedSource, want: List[str], fails: Fail) -> None:
    """The printed kernel parameters against the IR's (HIP and CUDA text alike): the first
    that differs is named."""
    if src.params != want:
        bad = next((i for i, (a, b) in enumerate(itertools.zip_longest(src.params, want))
                    if a != b), 0)
        fails.add("declarations", f"parameter {bad}: printed "
                                  f"{src.params[bad] if bad < len(src.params) else 'nothing'!r}, "
                                  f"the IR {want[bad] if bad < len(want) else 'nothing'!r}")


def _check_ids(k: Kernel, src: ParsedSource, fails: Fail) -> None:
    """``tid`` bound to ``threadIdx.x`` and the grid symbols to ``blockIdx.x/y/z`` in order."""
    if src.ids.get("tid", ("",))[0] != "threadIdx.x":
        fails.add("declarations", "tid is not bound to threadIdx.x")
    for name, axis in zip(k.grid_symbols, "xyz"):
        if src.ids.get(name, ("",))[0] != f"blockIdx.{axis}":
            fails.add("declarations", f"grid symbol {name} is bound to "
                                      f"{src.ids.get(name, ('nothing',))[0]}, the IR "
                                      f"blockIdx.{axis}")


def _declarations(k: Kernel, src: ParsedSource, fails: Fail) -> None:
    from ..printer.hip import SCALAR
    if src.block != k.block:
        fails.add("declarations", f"LAGEN_LAUNCH_BOUNDS({src.block}), the IR launches "
                                  f"{k.block} threads per block")
    if src.waves_per_eu != int(getattr(k, "waves_per_eu", 0) or 0):
        fails.add("declarations", f"LAGEN_WAVES_PER_EU({src.waves_per_eu}), the IR asks for "
                                  f"{k.waves_per_eu}")
    want = [f"{'const ' if p.const else ''}{SCALAR[p.dtype]}* __restrict__ {p.name}"
            for p in k.params]
    want += [f"{p.ctype} {p.name}" for p in getattr(k, "scalars", ())]
    _check_params(src, want, fails)
    want_buf = {p.name: p.buffer_elems * BYTES[p.dtype] for p in k.params
                if getattr(p, "buffer", False)}
    got_buf = {n: (of, b) for n, (of, b, _) in src.buffers.items()}
    for name, nbytes in want_buf.items():
        if got_buf.get(name) != (name, nbytes):
            fails.add("declarations", f"buffer resource {name}_rsrc: printed "
                                      f"{got_buf.get(name, 'nothing')}, the IR "
                                      f"lagen_make_buffer({name}, {nbytes}u) (num_records "
                                      "bounds every buffer load the gate proved in range)")
    for name in set(got_buf) - set(want_buf):
        fails.add("declarations", f"buffer resource {name}_rsrc is not in the IR")
    _check_ids(k, src, fails)
    if len(src.shared) != len(k.shared):
        fails.add("declarations", f"{len(src.shared)} LAGEN_SHARED arrays printed, the IR has "
                                  f"{len(k.shared)}")
    for sh in k.shared:
        decl = src.shared.get(f"{sh.name}_v")
        al = src.alias.get(sh.name)
        if decl is None or al is None:
            fails.add("declarations", f"LDS array {sh.name} ({sh.count} x {sh.dtype}) is not "
                                      f"declared as printed (LAGEN_SHARED {sh.name}_v and its "
                                      f"alias)")
            continue
        ct = ctype_of(decl[0])
        elems = ct[1] * decl[1] if ct else -1
        if ct is None or ct[0] != sh.dtype or elems != sh.count:
            fails.add("declarations", f"line {decl[2]}: LAGEN_SHARED({decl[0]}, {sh.name}_v, "
                                      f"{decl[1]}) holds {elems} elements of "
                                      f"{ct[0] if ct else '?'}; the IR (and the gate's in_bounds "
                                      f"and lds_capacity) use {sh.count} x {sh.dtype}")
        if ctype_of(al[0]) != (sh.dtype, 1) or al[1] != f"{sh.name}_v":
            fails.add("declarations", f"line {al[2]}: {sh.name} is a {al[0]}* onto {al[1]}, the "
                                      f"IR a {sh.dtype} view of {sh.name}_v")
    for f in k.frags:
        d = src.frags.get(f.name)
        if d is None:
            fails.add("declarations", f"register array {f.name} is not declared")
        elif ctype_of(d[0]) != (f.dtype, f.width) or d[1] != f.count // f.width:
            fails.add("declarations", f"line {d[2]}: {d[0]} {f.name}[{d[1]}], the IR "
                                      f"{f.count // f.width} x {f.width} {f.dtype}")
    for scalar, n, name, ln in src.typedefs:
        ct = ctype_of(name)
        if ct is None or ct != (SCALAR_DTYPE.get(scalar), n):
            fails.add("declarations", f"line {ln}: typedef {name} is {n} x {scalar}")


def is_cuda_text(source: str) -> bool:
    """Printed by :mod:`kernels.printer.cuda` (an ``extern "C" __global__`` kernel with no
    ``LAGEN_KERNEL``)?"""
    return 'extern "C" __global__' in source and "LAGEN_KERNEL" not in source


def _lse_helpers(k: Kernel, source: str, fails: Fail) -> None:
    """A kernel with LSE merge statements defines their helpers (and the f32 load / 4-wide
    store it calls) once, with exactly :data:`kernels.printer.cuda_attention.HELPERS`."""
    from ..printer.cuda_attention import HELPERS
    if any(type(s).__name__ in _LSE_KINDS for s in walk(k.body)) and \
            source.count(HELPERS) != 1:
        fails.add("declarations", "the LSE merge helpers (lg_lse_merge, lg_lse_normalize, "
                                  "lg_ldg_f32x*, lg_st_u32x2) are not printed once with "
                                  "kernels.printer.cuda_attention's text")


def _wgmma_helpers(k: Kernel, source: str, fails: Fail) -> None:
    """Each wgmma wrapper the text calls is defined once, with exactly the text of the IR
    atom's instruction (shape, dtype, tnspB), and the fence / wait / pin / descriptor helpers
    once each (a wrapper printing another instruction would pass every other check)."""
    from ..ir.nvidia_wgmma import WgmmaMma
    from ..nvidia.wgmma_prelude import (HELPERS, PIN_WORDS, desc_helpers, wgmma_fn, wgmma_key,
                                        wgmma_wrapper)
    ms = [s for s in walk(k.body) if isinstance(s, WgmmaMma)]
    if not ms:
        return
    want = {wgmma_key(m) for m in ms}
    pins = [(PIN_WORDS, "lg_pin of a flat lg_u32 array")] if any(w[3] for w in want) else []
    # the descriptor helpers the calls use (from a 32-bit base or not, pinned or not)
    for text, what in ([(HELPERS, "the wgmma fence / wait / pin helpers"),
                        *desc_helpers(source)] + pins +
                       [(wgmma_wrapper(wgmma_fn(*w), *w), f"{wgmma_fn(*w)} ({w[0]} m64n{w[1]}k16"
                         f", tnspB {w[2]}, A from {'registers' if w[3] else 'shared memory'}"
                         f"{', write-only D' if w[4] else ''})") for w in sorted(want)]):
        if source.count(text) != 1:
            fails.add("declarations", f"{what}: the text must define it once, exactly as "
                                      f"kernels.nvidia.wgmma_prelude prints it; found "
                                      f"{source.count(text)} exact copies")


def _cuda_declarations(k: Kernel, src: ParsedSource, fails: Fail) -> None:
    """The CUDA text's launch bounds, signature, ids, the shared arrays carved from the dynamic
    buffer (type, 16-byte aligned, disjoint, inside the bytes a launch passes), the register
    arrays (16-bit frags as two elements per 32-bit word) and the zero fills."""
    from ..ir.nvidia import CpAsync
    from ..printer.cuda import smem_align, smem_bytes
    ctype = {"f16": "lg_u16", "bf16": "lg_u16", "f32": "float"}
    align = smem_align(k)
    if src.block != k.block:
        fails.add("declarations", f"__launch_bounds__({src.block}), the IR launches {k.block} "
                                  "threads per block")
    if src.min_blocks != int(getattr(k, "min_blocks", 0) or 0):
        fails.add("declarations", f"__launch_bounds__ asks for {src.min_blocks} blocks per SM, "
                                  f"the IR {k.min_blocks}")
    want = [param_decl(p, ctype) for p in k.params] + \
        [f"{p.ctype} {p.name}" for p in getattr(k, "scalars", ())]
    _check_params(src, want, fails)
    _check_ids(k, src, fails)
    launch = smem_bytes(k)
    if src.smem_align != align:
        fails.add("declarations", f"the shared arrays are carved from a base aligned to "
                                  f"{max(src.smem_align, 0)} bytes, the IR needs {align} (its "
                                  "wgmma descriptors swizzle absolute addresses)" if align > 128
                  else "the dynamic shared buffer is not declared as the printer declares it")
    if align > 128:
        launch -= align                 # the slack the base is rounded up with
    spans = []
    for sh in k.shared:
        d = src.shared.get(sh.name)
        ct = ctype.get(sh.dtype, "?")
        if d is None:
            fails.add("declarations", f"shared array {sh.name} ({sh.count} x {sh.dtype}) is not "
                                      "carved from the dynamic buffer")
            continue
        if d[0] != f"{ct}|{ct}":
            fails.add("declarations", f"line {d[2]}: {sh.name} is a {d[0].split('|')[0]}*, the "
                                      f"IR {sh.count} x {sh.dtype}")
        end = d[1] + sh.count * BYTES[sh.dtype]
        spans.append((d[1], end, sh.name, d[2]))
        if d[1] % (16 if align == 128 else align) or end > launch:
            fails.add("declarations", f"line {d[2]}: {sh.name} occupies bytes [{d[1]}, {end}) "
                                      f"of the {launch} the launch passes ("
                                      f"{16 if align == 128 else align}-byte aligned and inside: "
                                      "the gate's in_bounds and lds_capacity and the wgmma "
                                      "descriptor model assume it)")
    spans.sort()
    for (a0, a1, an, _), (b0, _, bn, ln) in zip(spans, spans[1:]):
        if b0 < a1:
            fails.add("declarations", f"line {ln}: {bn} starts at byte {b0}, inside {an} "
                                      f"[{a0}, {a1})")
    staging = {s.load.regs.frag.name for s in walk(k.body) if isinstance(s, CpAsync)}
    for f in k.frags:
        d = src.frags.get(f.name)
        if f.name in staging:
            if d is not None:
                fails.add("declarations", f"line {d[2]}: {f.name} is the cp.async staging frag "
                                          "(no registers), yet declared")
            continue
        want_d = ("float", f.count) if f.dtype == "f32" else ("lg_u32", f.count // 2)
        if d is None or (d[0], d[1]) != want_d:
            fails.add("declarations", f"register array {f.name}: printed "
                                      f"{d[:2] if d else 'nothing'}, the IR {f.count} x {f.dtype} "
                                      f"({want_d[0]} {f.name}[{want_d[1]}])")
    for _, n, name, ln in src.typedefs:           # the zero fills
        d = src.frags.get(name)
        if d is None or d[1] != n:
            fails.add("declarations", f"line {ln}: zeroes {n} elements of {name}, declared "
                                      f"{d[1] if d else 'nowhere'}")


# ---------------------------------------------------------------------------- index ranges

def _ranges(c: "_RangeCtx", body: List[SourceStmt]) -> None:
    for t in body:
        def report(node: Any, iv: Tuple[int, int], ctype: str, t: SourceStmt = t) -> None:
            lim = f"[{INT_MIN}, {INT_MAX}]" if ctype == "int" else "[-2^63, 2^63 - 1]"
            c.fails.add("index_ranges",
                        f"line {t.line}: the {ctype} expression `{text_of(node)}` reaches "
                        f"[{iv[0]}, {iv[1]}], outside the C {ctype}'s {lim} "
                        f"(over {c.describe(node)}){c.where}; the kernel would need 64-bit "
                        f"index arithmetic there, which this builder does not emit: use a "
                        f"smaller problem or split it")
        ivs = [bound(e, c.ranges, report, c.longs) for e in t.exprs if isinstance(e, tuple)]
        if t.pred is not None:
            bound(t.pred, c.ranges, report, c.longs)
        c.exprs += len(ivs)
        if t.kind in ("let", "loop"):       # `const int x = ...` / `int v = ...; v < ...`
            for e, (iv, ctype) in zip(t.exprs, ivs):
                if ctype != "int" and (iv[0] < INT_MIN or iv[1] > INT_MAX):
                    report(e, iv, "int")    # a long value narrowed to int
        if t.kind == "let":
            c.ranges[t.name] = ivs[0][0]
        elif t.kind in ("loop", "if"):
            outer = dict(c.ranges)          # a body is a C scope (its lets may shadow)
            if t.kind == "loop":
                lo, hi = ivs[0][0][0], ivs[1][0][1] - 1
                c.ranges[t.name] = (lo, max(lo, hi))
            _ranges(c, t.body)
            c.ranges = outer


@dataclass
class _RangeCtx:
    fails: Fail
    ranges: Dict[str, Tuple[int, int]]
    where: str
    exprs: int = 0
    longs: FrozenSet[str] = frozenset()     # the kernel's long long arguments

    def describe(self, node: Any) -> str:
        names: List[str] = []

        def walk(n: Any) -> None:
            if n[0] == "id" and n[1] not in names:
                names.append(n[1])
            for a in n[1:]:
                if isinstance(a, tuple):
                    walk(a)
                    if a and isinstance(a[0], tuple):
                        for b in a:
                            walk(b)
        walk(node)
        return ", ".join(f"{n} in [{self.ranges[n][0]}, {self.ranges[n][1]}]" for n in names
                         if n in self.ranges) or "constants"


# ---------------------------------------------------------------------------- entry point

_P_CONV = re.compile(r"=\s*([A-Za-z_][A-Za-z_0-9]*|\(_Float16\))?\s*\(\s*e_\s*\)\s*;")


def _p_rounding(k: Kernel, source: str, fails: Fail, cuda: bool = False) -> None:
    """The printed P conversions (``... = conv(e_);``) against the IR's ExpScores roundings."""
    want: Counter = Counter()
    for s in walk(k.body):
        # CUDA f32 P (the split decode) is rounded by SplitProbs, read back with its lines
        if type(s).__name__ == "ExpScores" and not (cuda and s.p.dtype == "f32"):
            want[p_conversion(s.p.dtype, s.rounding)] += len(s.p_items)
    if not want:
        return
    got = Counter(m.group(1) or "" for m in _P_CONV.finditer(source))
    if got != want:
        fails.add("printed_source", f"P conversions: the text has {dict(got)}, the IR's P "
                                    f"rounding needs {dict(want)}")
    for rounding, (name, text) in BF16_HELPERS.items():
        if name not in want:
            continue
        defs = len(re.findall(rf"\b{name}\s*\(\s*float\b", source))
        if defs != 1 or text not in source:
            fails.add("printed_source", f"P rounding {rounding}: the helper {name} must be "
                                        f"defined once with kernels.ir.p_rounding's text "
                                        f"({defs} definitions, text "
                                        f"{'found' if text in source else 'differs'})")


def _grid_samples(g: int) -> List[int]:
    return sorted({v for v in (0, 1, g // 2, g - 1) if 0 <= v < g}) or [0]


def verify_printed(k: Kernel, source: str, *,
                   instances: Optional[Sequence[Any]] = None) -> Dict[str, CheckResult]:
    """``printed_source``, ``declarations`` and ``index_ranges`` of ``source`` (the text that is
    compiled) against ``k`` (the IR the gate proved).

    ``instances``: the attention gate's instances (runtime argument values and grid); without
    them the kernel must have no runtime scalars and its grid is ``k.grid``.
    """
    fails = Fail()
    memory = [p.name for p in k.params] + [s.name for s in k.shared]
    cuda = is_cuda_text(source)
    try:
        if cuda:
            src = read_cuda_source(source, k.name, {**{p.name: p.dtype for p in k.params},
                                                    **{s.name: s.dtype for s in k.shared}},
                                   extra=read_decode_statement)
        else:
            src = read_source(source, k.name, memory)
    except CExprError as e:
        for name in PRINTED_CHECKS:
            fails.add(name, f"the printed source cannot be read back: {e}")
        return fails.results(PRINTED_CHECKS, {n: "the printed source" for n in PRINTED_CHECKS})
    if cuda:
        _cuda_declarations(k, src, fails)
        _wgmma_helpers(k, source, fails)
        _lse_helpers(k, source, fails)
        for msg in check_onepass_helpers(k, source):
            fails.add("declarations", msg)
    else:
        _declarations(k, src, fails)
    _p_rounding(k, source, fails, cuda)
    mixed = mixed_score_units(k)
    if mixed:
        fails.add("printed_source", mixed)
    ir_body = _ir_stmts(k.body, cuda, getattr(k, "scale_param", "scale_log2"))
    scalars = [p.name for p in getattr(k, "scalars", ()) if p.ctype in ("int", "long long")]
    longs = frozenset(p.name for p in getattr(k, "scalars", ()) if p.ctype == "long long")
    if instances is None:
        if scalars:
            raise ValueError(f"kernel {k.name} has runtime arguments {scalars}: pass instances")
        runs = [("", {}, tuple(k.grid))]
    else:
        runs = [(f" (instance {i.name})", {n: int(i.values[n]) for n in scalars}, tuple(i.grid))
                for i in instances]
    points = exprs = 0
    for where, values, grid in runs:
        names = tuple(k.grid_symbols[:3])
        gvals = [_grid_samples(int(g)) for g in grid[:len(names)]]
        combos = np.array(list(itertools.product(*gvals)), dtype=np.int64).reshape(-1, len(names))
        tid = np.arange(k.block, dtype=np.int64)[None, :]
        env: Dict[str, Any] = {"tid": tid, "_grid_names": names}
        for j, n in enumerate(names):
            env[n] = combos[:, j:j + 1]
        env.update({n: np.int64(v) for n, v in values.items()})
        ienv = {n: v for n, v in env.items() if not n.startswith("_")}
        ctx = _Ctx(k, fails, where, env, ienv, cuda=cuda)
        try:
            _compare(ctx, src.body, ir_body)
        except CExprError as e:
            fails.add("printed_source", f"{e}{where}")
        points += ctx.points
        ranges = {"tid": (0, k.block - 1)}
        ranges.update({n: (0, max(0, int(g) - 1)) for n, g in zip(names, grid)})
        ranges.update({n: (v, v) for n, v in values.items()})
        rc = _RangeCtx(fails, ranges, where, longs=longs)
        try:
            _ranges(rc, src.body)
        except CExprError as e:
            fails.add("index_ranges", f"{e}{where}")
        exprs += rc.exprs
    inst = ("the gate's instances [" + "; ".join(i.name for i in instances) + "]"
            if instances is not None else f"the {'x'.join(map(str, k.grid))} grid")
    doms = {
        "printed_source": (f"the source text read back and paired statement by statement with "
                           f"the IR; every printed index expression, predicate, mask and "
                           f"exchange address evaluated with C semantics equals the IR's at "
                           f"every thread of blocks at ids {{0, 1, mid, last}} per grid axis "
                           f"and loop variables at {{first, second, mid, last two}} iterations, "
                           f"over {inst} ({points} points)"),
        "declarations": (f"signature, launch bounds, {len(k.shared)} LDS arrays, "
                         f"{len(k.frags)} register arrays and the vector typedefs of the "
                         f"printed source against the IR"),
        "index_ranges": (f"{exprs} printed integer expressions and every subexpression, by "
                         f"interval arithmetic over tid in [0, {k.block - 1}], every block id "
                         f"of {inst}, every loop iteration"
                         + (" and the runtime arguments at the instances' values"
                            if instances is not None else "")),
    }
    return fails.results(PRINTED_CHECKS, doms)


def attach_printed_checks(report: Any, k: Kernel, source: str, *,
                          instances: Optional[Sequence[Any]] = None) -> Any:
    """Add :func:`verify_printed`'s results to a gate report (``report.checks``) and return it:
    the one hook each builder calls after printing, before ``raise_if_failed``."""
    report.checks.update(verify_printed(k, source, instances=instances))
    return report


_AT_CACHE: Dict[Any, CheckResult] = {}


def index_ranges_at(k: Kernel, source: str, values: Dict[str, int],
                    grid: Sequence[int]) -> CheckResult:
    """``index_ranges`` of the printed kernel at ONE launch: its runtime arguments ``values``
    (names of ``k.scalars``; extra names are ignored) and ``grid``.  Cached.

    Like :func:`verify_printed`'s check it ignores the predicates guarding an access, so it
    over-approximates: an address that C never evaluates (a predicated-off prefetch past the
    last tile) can make it fail.  A pass is a proof; a failure may be conservative."""
    scalars = [p.name for p in getattr(k, "scalars", ()) if p.ctype in ("int", "long long")]
    longs = frozenset(p.name for p in getattr(k, "scalars", ()) if p.ctype == "long long")
    vals = {n: int(values[n]) for n in scalars}
    key = (k.name, hash(source), tuple(sorted(vals.items())), tuple(int(g) for g in grid))
    hit = _AT_CACHE.get(key)
    if hit is not None:
        return hit
    fails = Fail()
    ranges = {"tid": (0, k.block - 1)}
    ranges.update({n: (0, max(0, int(g) - 1)) for n, g in zip(k.grid_symbols[:3], grid)})
    ranges.update({n: (v, v) for n, v in vals.items()})
    rc = _RangeCtx(fails, ranges, " (at this launch's arguments)", longs=longs)
    try:
        memory = [p.name for p in k.params] + [s.name for s in k.shared]
        _ranges(rc, read_source(source, k.name, memory).body)
    except CExprError as e:
        fails.add("index_ranges", str(e))
    dom = (f"{rc.exprs} printed integer expressions of {k.name} by interval arithmetic at the "
           f"launch's arguments, grid {tuple(grid)}, every thread and loop iteration")
    res = fails.results(("index_ranges",), {"index_ranges": dom})["index_ranges"]
    _AT_CACHE[key] = res
    return res
