"""The CUDA forms of the tensor-core split kernel's remaining statements
(:func:`kernels.nvidia.decode_split_ir.build_decode_split_ir`), for
:class:`kernels.printer.cuda_attention.CudaAttnPrinter`.  The arithmetic follows the template
(:func:`kernels.nvidia.decode_mma.emit_mma_decode`, :func:`kernels.nvidia.decode_splitkv
.emit_row_merge`) operation for operation, so the two kernels' results are bitwise equal (the
GPU tests compare them); the scores are in base-2 units from the mask on (``s * scale_log2``),
so the running maximum needs no further scale:

* ``MaskScores`` -> ``sc[i] = (cond) ? sc[i] * scale_log2 : LG_NEG_INF;``
* ``RowMax`` -> ``float mx = fmaxf(fmaxf(sc[a], sc[b]), fmaxf(sc[c], sc[d]));`` (a balanced
  tree in item order: max is exact, so any order gives the same value; the tree halves the
  dependent chain);
* ``SoftmaxUpdate`` -> ``const float mc = fmaxf(m, mx);`` ``const float alpha = mc == m ? 1.f
  : lg_exp2(m - mc);`` ``m = mc;`` (``mc == m`` also covers no key yet: both -inf);
* ``ExpScores`` -> ``l *= alpha;`` then per item ``p[k] = sc[i] == LG_NEG_INF ? 0.f :
  lg_exp2(sc[i] - mc); l += p[k];`` (``row_guard``: ``const float mc_g = mc == LG_NEG_INF ?
  0.f : mc;`` once, then ``p[k] = lg_exp2(sc[i] - mc_g); l += p[k];``: the same values)
* ``Rescale`` -> ``o[i] *= alpha;`` per item;
* the raw-score form (the statements' ``raw=True``: both prefills, :mod:`kernels.nvidia.flash_ir`
  and :mod:`kernels.nvidia.wgmma_flash_ir`, printed as their templates compute the softmax,
  operation for operation): the scores stay raw and the scale is folded into one ``fmaf`` per
  score: ``MaskScores`` -> ``sc[i] = (cond) ? sc[i] : LG_NEG_INF;``; ``SoftmaxUpdate`` ->
  ``const float mc_n = fmaxf(m, mx);`` ``const float mc = mc_n == LG_NEG_INF ? 0.f : mc_n *
  scale_log2;`` ``const float alpha = lg_exp2(fmaf(m, scale_log2, -mc));`` (``alpha = ...``
  where ``alpha_declared``: a variable declared before the loop) ``m = mc_n;`` (``m``
  stays raw, ``mc`` is the guarded maximum in base-2 units); ``ExpScores`` (an even number of
  items, summed in pairs; no ``row_guard``: ``mc`` is guarded) -> per item ``p[k] =
  lg_exp2(fmaf(sc[i], scale_log2, -mc));``, then ``float l_s = p[a] + p[b];`` ``l_s += p[c] +
  p[d];`` ... ``l = fmaf(l, alpha, l_s);``; ``FinalNormalize``'s lse -> ``(m * scale_log2 +
  log2f(l)) * ln 2`` (``m`` raw, scaled there);
* ``FinalNormalize`` (the prefill, :mod:`kernels.nvidia.flash_ir`) -> one line ``{ const float
  lg_inv = l > 0.f ? 1.f / l : 0.f; o[i] *= lg_inv; ... lse[0] = l > 0.f ? (mc + log2f(l)) *
  0.6931471805599453f : LG_NEG_INF; }`` (the template's ``inv``: a row with no key stores zeros);
* a 16-bit global load of 8 elements -> ``lg_ldg16x8(&frag[word], buf + (offset)[, pred]);``
  (``ld.global.nc.L1::no_allocate``; zeros where the predicate is off);
* an f32 global store of 4 / 1 registers -> ``*reinterpret_cast<float4*>(buf + (offset)) =
  make_float4(...)`` / ``buf[offset] = r;``; an LDS store of 2 f32 registers ->
  ``*reinterpret_cast<float2*>(buf + (offset)) = make_float2(a, b);``; an LDS load of one f32
  -> ``r = buf[offset];`` (each under ``if (pred)`` where predicated);
* ``StoreVar`` -> ``if (pred) buf[offset] = var;``; ``WarpStats`` -> ``if (tid < rows)
  lg_warp_stats<warps, rows>(s_m, s_l, s_w, s_inv, s_lse, tid);``; ``WarpCombine`` -> ``if
  (pred) LG_WARP_COMBINE(n, warps, f, s_w, r * rows + j, s_acc, x_offset, s_inv, j);`` (a
  macro: zero ``f``, the weighted sum over the warps ``r`` and elements ``e`` at the printed
  offsets, the scale by ``s_inv[j]``; one line, which the read-back expands).
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from layoutalg.symbolic import to_c

from ..ir.attention import LN2, ExpScores, FinalNormalize, MaskScores, Rescale, RowMax, SoftmaxUpdate
from ..ir.core import Access, walk
from ..ir.warp_merge import StoreVar, WarpCombine, WarpStats

__all__ = ["decode_stmt", "decode_helpers", "normalize_line", "DECODE_HELPERS"]

DECODE_HELPERS = r"""LG_DEV void lg_ldg16x8(lg_u32* r, const lg_u16* p) {
  lg_u32x4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
LG_DEV void lg_ldg16x8(lg_u32* r, const lg_u16* p, bool ok) {
  if (ok) lg_ldg16x8(r, p); else r[0] = r[1] = r[2] = r[3] = 0u;
}
template <int W, int HG> LG_DEV void lg_warp_stats(const float* s_m, const float* s_l,
                                                    float* s_w, float* s_inv, float* s_lse,
                                                    int j) {
  float M = LG_NEG_INF;
  for (int r = 0; r < W; ++r) M = fmaxf(M, s_m[r * HG + j]);
  float Ls = 0.f;
  for (int r = 0; r < W; ++r) {
    const float w = s_m[r * HG + j] == LG_NEG_INF ? 0.f : lg_exp2(s_m[r * HG + j] - M);
    s_w[r * HG + j] = w; Ls += w * s_l[r * HG + j];
  }
  s_inv[j] = 1.f / Ls; s_lse[j] = M + log2f(Ls);
}
#define LG_WARP_COMBINE(N, W, f, s_w, w_at, s_acc, x_at, s_inv, j) do {                 \
  _Pragma("unroll") for (int e = 0; e < N; ++e) f[e] = 0.f;                             \
  for (int r = 0; r < W; ++r) {                                                         \
    const float w = s_w[w_at];                                                          \
    _Pragma("unroll") for (int e = 0; e < N; ++e) f[e] = fmaf(w, s_acc[x_at], f[e]);    \
  }                                                                                     \
  _Pragma("unroll") for (int e = 0; e < N; ++e) f[e] *= s_inv[j];                       \
} while (0)
"""


def decode_helpers(k: Any) -> str:
    """:data:`DECODE_HELPERS` where the kernel uses them (16-bit loads or the warp merge)."""
    for s in walk(k.body):
        if isinstance(s, WarpStats) or (isinstance(s, Access) and s.kind == "load" and
                                        s.space == "global" and s.width == 8):
            return DECODE_HELPERS
    return ""


def _if(pred: Any, line: str) -> str:
    return f"if ({to_c(pred)}) {line}" if pred is not None else line


def _access(out: Callable[[int, str], None], a: Access, d: int, dtypes: Dict[str, str]) -> bool:
    f, bt, ft = a.regs.frag.name, dtypes[a.buf], a.regs.frag.dtype
    idx = list(a.regs.idx)
    if a.kind == "load" and a.space == "global" and a.width == 8 and bt in ("f16", "bf16"):
        if ft != bt or idx != list(range(idx[0], idx[0] + 8)) or idx[0] % 2:
            raise ValueError(f"cuda printer: load {a.tag}: 8 consecutive {bt} elements from an "
                             "even one")
        ok = "" if a.pred is None else f", {to_c(a.pred)}"
        out(d, f"lg_ldg16x8(&{f}[{idx[0] // 2}], {a.buf} + ({to_c(a.offset)}){ok});")
        return True
    if bt != "f32" or ft != "f32":
        return False
    regs = [f"{f}[{i}]" for i in idx]
    at = f"{a.buf} + ({to_c(a.offset)})"
    if a.kind == "store" and a.space == "global" and a.width == 4:
        out(d, _if(a.pred, f"*reinterpret_cast<float4*>({at}) = make_float4({', '.join(regs)});"))
    elif a.kind == "store" and a.width == 1:
        out(d, _if(a.pred, f"{a.buf}[{to_c(a.offset)}] = {regs[0]};"))
    elif a.kind == "store" and a.space == "lds" and a.width == 2:
        out(d, _if(a.pred, f"*reinterpret_cast<float2*>({at}) = make_float2({', '.join(regs)});"))
    elif a.kind == "load" and a.space == "lds" and a.width == 1:
        out(d, _if(a.pred, f"{regs[0]} = {a.buf}[{to_c(a.offset)}];"))
    else:
        return False
    return True


def _max_tree(es: list) -> str:
    """``fmaxf`` over ``es`` as a balanced tree, the operands in order."""
    if len(es) == 1:
        return es[0]
    h = len(es) // 2
    return f"fmaxf({_max_tree(es[:h])}, {_max_tree(es[h:])})"


def _warp_combine(out: Callable[[int, str], None], s: WarpCombine, d: int) -> None:
    j = to_c(s.j)
    out(d, _if(s.pred, f"LG_WARP_COMBINE({s.n}, {s.warps}, {s.f.name}, {s.s_w}, "
                       f"r * {s.rows} + {j}, {s.s_acc}, {to_c(s.x_offset)}, {s.s_inv}, {j});"))


def normalize_line(s: FinalNormalize, scale_param: str = "scale_log2") -> str:
    """The one line of a :class:`~kernels.ir.attention.FinalNormalize` (``mc``: the running
    maximum in base-2 units, as the mask prints the scores; raw: in score units, scaled)."""
    scale = " ".join(f"{s.o.name}[{i}] *= lg_inv;" for i in s.items)
    mc = f"{s.mc} * {scale_param}" if s.raw else s.mc
    return (f"{{ const float lg_inv = {s.l} > 0.f ? 1.f / {s.l} : 0.f; {scale} "
            f"{s.lse.name}[0] = {s.l} > 0.f ? ({mc} + log2f({s.l})) * {LN2!r}f : LG_NEG_INF; }}")


def _raw(out: Callable[[int, str], None], s: Any, d: int, c: str) -> None:
    """The raw-score form of a mask, update or exponent (module docstring)."""
    if isinstance(s, MaskScores):
        for i, cond in zip(s.items, s.conds):
            e = f"{s.frag.name}[{i}]"
            out(d, f"{e} = ({to_c(cond)}) ? {e} : LG_NEG_INF;")
    elif isinstance(s, SoftmaxUpdate):
        out(d, f"const float {s.mc}_n = fmaxf({s.m}, {s.m_tile});")
        out(d, f"const float {s.mc} = {s.mc}_n == LG_NEG_INF ? 0.f : {s.mc}_n * {c};")
        decl = "" if s.alpha_declared else "const float "
        out(d, f"{decl}{s.alpha} = lg_exp2(fmaf({s.m}, {c}, -{s.mc}));")
        out(d, f"{s.m} = {s.mc}_n;")
    else:
        if s.p.dtype != "f32" or len(s.p_items) % 2:
            raise ValueError(f"cuda printer: raw exp into {s.p.name}: an even number of f32 "
                             f"probabilities (summed in pairs), got {len(s.p_items)} "
                             f"{s.p.dtype}")
        ps = [f"{s.p.name}[{k}]" for k in s.p_items]
        for p, i in zip(ps, s.s_items):
            out(d, f"{p} = lg_exp2(fmaf({s.s.name}[{i}], {c}, -{s.mc}));")
        for j in range(0, len(ps), 2):
            op = f"float {s.l}_s =" if j == 0 else f"{s.l}_s +="
            out(d, f"{op} {ps[j]} + {ps[j + 1]};")
        out(d, f"{s.l} = fmaf({s.l}, {s.alpha}, {s.l}_s);")


def decode_stmt(out: Callable[[int, str], None], s: Any, d: int, dtypes: Dict[str, str],
                scale: str) -> bool:
    """Print ``s`` through ``out(depth, line)`` if it is one of this module's forms (a
    statement with ``raw=True``: the raw-score form of the module docstring)."""
    if isinstance(s, Access):
        return _access(out, s, d, dtypes)
    if isinstance(s, (MaskScores, SoftmaxUpdate, ExpScores)) and s.raw:
        _raw(out, s, d, scale)
        return True
    if isinstance(s, MaskScores):
        for i, cond in zip(s.items, s.conds):
            e = f"{s.frag.name}[{i}]"
            out(d, f"{e} = ({to_c(cond)}) ? {e} * {scale} : LG_NEG_INF;")
    elif isinstance(s, RowMax):
        out(d, f"float {s.dst} = {_max_tree([f'{s.frag.name}[{i}]' for i in s.items])};")
    elif isinstance(s, SoftmaxUpdate):
        out(d, f"const float {s.mc} = fmaxf({s.m}, {s.m_tile});")
        out(d, f"const float {s.alpha} = {s.mc} == {s.m} ? 1.f : lg_exp2({s.m} - {s.mc});")
        out(d, f"{s.m} = {s.mc};")
    elif isinstance(s, ExpScores):
        if s.p.dtype != "f32":
            raise ValueError(f"cuda printer: exp into {s.p.name}: f32 probabilities (split "
                             "them with SplitProbs)")
        out(d, f"{s.l} *= {s.alpha};")
        if s.row_guard:
            out(d, f"const float {s.mc}_g = {s.mc} == LG_NEG_INF ? 0.f : {s.mc};")
        for k, i in zip(s.p_items, s.s_items):
            p, x = f"{s.p.name}[{k}]", f"{s.s.name}[{i}]"
            if s.row_guard:
                out(d, f"{p} = lg_exp2({x} - {s.mc}_g); {s.l} += {p};")
            else:
                out(d, f"{p} = {x} == LG_NEG_INF ? 0.f : lg_exp2({x} - {s.mc}); {s.l} += {p};")
    elif isinstance(s, Rescale):
        out(d, " ".join(f"{s.frag.name}[{i}] *= {s.alpha};" for i in s.items))
    elif isinstance(s, FinalNormalize):
        out(d, normalize_line(s, scale))
    elif isinstance(s, StoreVar):
        out(d, _if(s.pred, f"{s.buf}[{to_c(s.offset)}] = {s.var};"))
    elif isinstance(s, WarpStats):
        out(d, f"if (tid < {s.rows}) lg_warp_stats<{s.warps}, {s.rows}>({s.s_m}, {s.s_l}, "
               f"{s.s_w}, {s.s_inv}, {s.s_lse}, tid);")
    elif isinstance(s, WarpCombine):
        _warp_combine(out, s, d)
    else:
        return False
    return True
