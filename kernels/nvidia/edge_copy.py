"""Global -> shared copies of 16-bit matrices of any size and alignment (issue 20 item 2).

The GEMM builders copy each tile as ``VB``-byte vectors (``cp.async``).  A vector that the
matrix edge cuts (K or N not a multiple of the vector) or whose source is not ``VB``-byte
aligned (an odd leading dimension) cannot be a ``cp.async``: :data:`EDGE_COPY` is the device
helper ``lg_copy_edge<VB>(dst, src, n)`` that copies the ``n`` valid elements of the vector
with 2-byte loads, zero-fills the rest, and stores the ``VB`` bytes to the same shared address
the ``cp.async`` would have written (so the plans' coverage and bank-conflict proofs, which
are about the shared addresses, hold unchanged).  Whole, aligned vectors still go through
``cp.async``.

Kernels take this path only in edge tiles (:func:`fast_condition` prints when the fast path,
unpredicated ``cp.async``, is safe), so interior tiles of aligned matrices run as before.
"""

from __future__ import annotations

__all__ = ["EDGE_COPY", "fast_condition", "edge_copy_call"]

EDGE_COPY = r"""
// One VB-byte vector of 16-bit elements, global -> shared, of which the first n are inside
// the matrix (n <= 0: none).  Whole and VB-aligned: cp.async.  Otherwise 2-byte loads of the
// valid elements, zeros for the rest, and one VB-byte shared store to the same address
// (visible to the other threads after the pipeline's __syncthreads, as a cp.async would be).
template <int VB> LG_DEV void lg_copy_edge(lg_u32 dst, const lg_u16* src, int n) {
  constexpr int E = VB / 2;
  if (n >= E && ((unsigned long long)src & (VB - 1)) == 0) {
    if (VB == 16) lg_cp_async16(dst, src, 16);
    else if (VB == 8) lg_cp_async8(dst, src, 8);
    else lg_cp_async4(dst, src, 4);
    return;
  }
  lg_u32 w[E / 2];
  #pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const lg_u32 lo = 2 * i < n ? (lg_u32)src[2 * i] : 0u;
    const lg_u32 hi = 2 * i + 1 < n ? (lg_u32)src[2 * i + 1] : 0u;
    w[i] = lo | (hi << 16);
  }
  if (VB == 16)
    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" :: "r"(dst), "r"(w[0]), "r"(w[E / 2 > 1 ? 1 : 0]),
                 "r"(w[E / 2 > 2 ? 2 : 0]), "r"(w[E / 2 > 3 ? 3 : 0]) : "memory");
  else if (VB == 8)
    asm volatile("st.shared.v2.u32 [%0], {%1,%2};\n" :: "r"(dst), "r"(w[0]), "r"(w[E / 2 > 1 ? 1 : 0]) : "memory");
  else
    asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(dst), "r"(w[0]) : "memory");
}
"""


def fast_condition(bm: int, bn: int, vec: int) -> str:
    """C text of ``full``: the block's tile lies inside M x N and both matrices' rows start
    ``2 * vec``-byte aligned (leading dimensions multiples of ``vec``, aligned pointers), so its
    copies of whole k tiles need no predicate and no alignment check."""
    return (f"m0 + {bm} <= M && n0 + {bn} <= N && ((lda | ldb) & {vec - 1}) == 0 && "
            f"(((unsigned long long)A | (unsigned long long)B) & {2 * vec - 1}) == 0")


def edge_copy_call(vbytes: int, dst: str, src: str, row_ok: str, valid: str) -> str:
    """One predicated vector copy: ``valid`` elements when ``row_ok``, else none."""
    return f"lg_copy_edge<{vbytes}>({dst}, {src}, {row_ok} ? {valid} : 0);"
