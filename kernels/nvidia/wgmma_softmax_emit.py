"""The C emitters both wgmma flash-attention kernels print the same way.

:mod:`.wgmma_attention` (every warpgroup loads and computes) and :mod:`.wgmma_attention_ws`
(a producer warpgroup loads, consumer warpgroups compute) differ in who copies and how the
copies are awaited; what a computing warpgroup does with a key block is the same: ``S = Q K^T``
on wgmma, the online softmax on the S accumulator registers, ``P`` packed into the register-A
fragment, the accumulator's rescale, ``O += P V`` and the normalised store of ``O``.  One
printer for all of it means a fix to the softmax reaches both kernels.

The loads are shared too (:func:`emit_q_copy`, :func:`emit_kv_loaders`): the same proved copy
constants, printed at the caller's indentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from . import layout_c as lc
from .attention import AttentionConfigError
from .gemm import c_layout
from .prelude import PACK
from .wgmma import Operand, accumulator_rows_cols, copy_base_name

__all__ = ["p_item", "emit_q_copy", "emit_kv_loaders", "WgmmaFlashEmitter", "INF"]

INF = "__int_as_float(0x7f800000)"


def p_item(s: int, e: int) -> int:
    """The S accumulator register (of ``wgmma m64n{bn}``) packed into A item ``e`` of k step
    ``s`` of the ``P V`` product: items ``4j .. 4j+3`` are columns ``8j ..`` of rows g, g+8."""
    return 4 * (2 * s + (e >> 2)) + (e & 3)


def emit_q_copy(o: Callable[[str], None], q: Operand, ind: str) -> None:
    """The Q tile's predicated ``cp.async`` copies (rows past ``Sq`` zero-filled); each
    iteration adds its proved constant to its per-thread base (``qs``, ``qs1``, ...)."""
    for dr, dc, ds, b in q.copy_consts:
        o(f"{ind}{{ const int r = m0 + qr + {dr}; const bool ok = r < Sq;")
        o(f"{ind}  lg_cp_async16(sQ + {copy_base_name('qs', b)} + {2 * ds}, ok ? (const void*)"
          f"(Qb + r * q_ss + qc + {dc}) : (const void*)Q, ok ? 16 : 0); }}")


def emit_kv_loaders(o: Callable[[str], None], k: Operand, bn: int, kv_bytes: int, ind: str,
                    whole_note: str = "") -> None:
    """The ``load_k`` / ``load_v`` lambdas: one K (or V) block of ``bn`` keys into buffer
    ``buf``; unpredicated when the block lies inside the sequence. K and V share ``k``'s copy
    (the plans prove it); ``whole_note`` is the comment printed after the no-predicate test."""
    for nm, base, ss in (("k", "Kb", "k_ss"), ("v", "Vb", "v_ss")):
        o(f"{ind}auto load_{nm} = [&](int buf, int n0) {{")
        o(f"{ind}  const lg_u32 dst = s{nm.upper()} + buf * {kv_bytes} + kvs;")
        for b in range(1, len(k.copy_bases)):
            o(f"{ind}  const lg_u32 {copy_base_name('dst', b)} = s{nm.upper()} + buf * "
              f"{kv_bytes} + {copy_base_name('kvs', b)};")
        o(f"{ind}  if (n0 + {bn} <= Skv) {{{whole_note}")
        o(f"{ind}    const lg_u16* src = {base} + (long long)(n0 + kvr) * {ss} + kvc;")
        for dr, dc, ds, b in k.copy_consts:
            o(f"{ind}    lg_cp_async16_i<{2 * ds}>({copy_base_name('dst', b)}, src + {dr} * {ss} "
              f"+ {dc});")
        o(f"{ind}    return;\n{ind}  }}")
        for dr, dc, ds, b in k.copy_consts:
            o(f"{ind}  {{ const int r = n0 + kvr + {dr}; const bool ok = r < Skv;")
            o(f"{ind}    lg_cp_async16({copy_base_name('dst', b)} + {2 * ds}, ok ? (const void*)"
              f"({base} + r * {ss} + kvc + {dc}) : (const void*){base[0]}, ok ? 16 : 0); }}")
        o(f"{ind}}};")


@dataclass(frozen=True)
class WgmmaFlashEmitter:
    """Prints one computing warpgroup's part of a wgmma flash kernel into ``o``.

    ``wg``: the C name of the warpgroup's index among the computing ones (its 64 query rows
    start at ``m0 + wg * 64``). ``causal_rows``: None without a causal mask, else the C
    expression of the first query row the block-level mask test compares keys against.
    ``max_note``: the comment printed after the row max's initialisation."""

    o: Callable[[str], None]
    dtype: str
    head_dim: int
    bn: int
    kv_bytes: int
    q: Operand
    k: Operand
    v: Operand
    wg: str
    causal_rows: Optional[str]
    max_note: str = ""

    def __post_init__(self) -> None:
        if not all(p_item(st, e) == 8 * st + p_item(0, e)
                   for st in range(self.bn // 16) for e in range(8)):
            raise AttentionConfigError("P packing: the printed item offsets do not follow p_item")

    def registers(self) -> None:
        """This thread's C rows/columns (from ``layout_c``), the O accumulator, the row max and
        sum, the S registers and the packed P."""
        o, d, bn = self.o, self.head_dim, self.bn
        crow, ccol = accumulator_rows_cols(d)
        tt = lc.sym("t")
        o(f"  const int row0 = m0 + {self.wg} * 64 + {c_layout(crow, (tt, 0), {tt: 128}, 'C row')};")
        o(f"  const int col0 = {c_layout(ccol, (tt, 0), {tt: 128}, 'C col')};")
        accumulator_rows_cols(bn)   # S is read with the same (row, col) pattern over bn columns
        o(f"  float acc[{d // 2}], m_i[2] = {{-{INF}, -{INF}}}, l_i[2] = {{0.f, 0.f}};")
        o(f"  #pragma unroll\n  for (int i = 0; i < {d // 2}; ++i) acc[i] = 0.f;")
        o(f"  float s[{bn // 2}], alpha[2];")
        o(f"  lg_u32 pa[{bn // 16}][4];")

    def issue_qk(self, buf: str) -> None:
        """S = Q K_buf^T (s overwritten); ``buf``: a C expression of the K buffer."""
        for st, (qs, ks) in enumerate(zip(self.q.k_starts, self.k.k_starts)):
            self.o(f"    lg_wgmma_qk(s, qdesc + {qs >> 4}, kdesc + ((({buf}) * {self.kv_bytes} + "
                   f"{ks}) >> 4), {0 if st == 0 else 1});")

    def issue_pv(self, buf: str) -> None:
        """acc += P V_buf."""
        for st, vs in enumerate(self.v.k_starts):
            self.o(f"    lg_wgmma_pv(acc, pa[{st}], vdesc + ((({buf}) * {self.kv_bytes} + {vs}) "
                   ">> 4));")

    def softmax(self, n0: str) -> None:
        """Mask S (key block at n0), new row max, P = exp2 in place, l update; the
        accumulator's rescale factor is left in alpha[hh] (applied by rescale())."""
        o, bn, inf = self.o, self.bn, INF
        causal = self.causal_rows is not None
        o(f"    const bool need_mask = {n0} + {bn} > Skv" +
          (f" || {n0} + {bn - 1} > {self.causal_rows}" if causal else "") + ";")
        o("    if (need_mask) {")
        o(f"      #pragma unroll\n      for (int i = 0; i < {bn // 2}; ++i) {{")
        o(f"        const int r = row0 + 8 * ((i >> 1) & 1), c = {n0} + col0 + 8 * (i >> 2) + (i & 1);")
        cond = "c >= Skv" + (" || c > r" if causal else "")
        o(f"        if ({cond}) s[i] = -{inf};")
        o("      }\n    }")
        o("    #pragma unroll\n    for (int hh = 0; hh < 2; ++hh) {")
        o(f"      float mx = m_i[hh];{self.max_note}")
        o(f"      #pragma unroll\n      for (int jj = 0; jj < {bn // 8}; ++jj)")
        o("        mx = fmaxf(mx, fmaxf(s[4 * jj + 2 * hh], s[4 * jj + 2 * hh + 1]));")
        o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));")
        o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));")
        o(f"      const float base = mx == -{inf} ? 0.f : mx * scale_log2;")
        o("      alpha[hh] = lg_exp2(m_i[hh] * scale_log2 - base);")
        o("      m_i[hh] = mx;")
        o("      float rs = 0.f;")
        o(f"      #pragma unroll\n      for (int jj = 0; jj < {bn // 8}; ++jj) {{")
        o("        const float p0 = lg_exp2(fmaf(s[4 * jj + 2 * hh], scale_log2, -base));")
        o("        const float p1 = lg_exp2(fmaf(s[4 * jj + 2 * hh + 1], scale_log2, -base));")
        o("        s[4 * jj + 2 * hh] = p0; s[4 * jj + 2 * hh + 1] = p1; rs += p0 + p1;\n      }")
        o("      l_i[hh] = l_i[hh] * alpha[hh] + rs;")
        o("    }")

    def rescale(self, vote: bool = False) -> None:
        """acc *= alpha, per row half; ``vote``: only when some row max of the warp changed
        (a warp-uniform branch skipping multiplications by exactly 1.0f: the same result)."""
        if vote:
            self.o("    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {")
        self.o("    #pragma unroll\n    for (int hh = 0; hh < 2; ++hh)")
        self.o(f"    #pragma unroll\n    for (int jj = 0; jj < {self.head_dim // 8}; ++jj) "
               "{ acc[4 * jj + 2 * hh] *= alpha[hh]; acc[4 * jj + 2 * hh + 1] *= alpha[hh]; }")
        if vote:
            self.o("    }")

    def pack_p(self) -> None:
        """P (in s) converted to 16 bits into the register-A fragment ``pa``."""
        # register r of k step st holds A items 2r, 2r+1 = S items p_item(st, 2r), p_item(st, 2r+1)
        pack = PACK[self.dtype]
        self.o(f"    #pragma unroll\n    for (int st = 0; st < {self.bn // 16}; ++st) {{")
        for r in range(4):
            lo, hi = p_item(0, 2 * r), p_item(0, 2 * r + 1)
            self.o(f"      pa[st][{r}] = {pack}(s[8 * st + {lo}], s[8 * st + {hi}]);")
        self.o("    }")

    def store_output(self, close: bool = True) -> None:
        """O / l (row sums reduced over the quad) stored as 16 bits; rows past Sq skipped.
        ``close``: the kernel's closing brace follows (False inside a persistent tile loop)."""
        o, pack = self.o, PACK[self.dtype]
        o("  #pragma unroll\n  for (int hh = 0; hh < 2; ++hh) {")
        o("    float l = l_i[hh];")
        o("    l += __shfl_xor_sync(0xffffffffu, l, 1);")
        o("    l += __shfl_xor_sync(0xffffffffu, l, 2);")
        o("    const float inv = l > 0.f ? 1.f / l : 0.f;")
        o("    const int r = row0 + 8 * hh;")
        o("    if (r < Sq) {")
        o("      lg_u16* dst = Ob + r * o_ss + col0;")
        o(f"      #pragma unroll\n      for (int jj = 0; jj < {self.head_dim // 8}; ++jj)")
        o(f"        *reinterpret_cast<lg_u32*>(dst + 8 * jj) = {pack}(acc[4 * jj + 2 * hh] * inv, "
          "acc[4 * jj + 2 * hh + 1] * inv);")
        o("    }\n  }" + ("\n}" if close else ""))
