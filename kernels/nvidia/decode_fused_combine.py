"""The split-KV decode's combine folded into the split kernel (issue 20): the last block of a
(batch, KV head, head chunk) to finish merges every split's partial, so a call is one launch.

Protocol (the CUDA threadFenceReduction pattern), printed after the block's partial ``OP`` /
``LSE`` rows are written (several splits only):

1. every thread ``__threadfence()`` (its partial stores visible GPU-wide), ``__syncthreads()``;
2. thread 0 takes a ticket, ``atomicAdd(&CNT[blockIdx.x], 1)``; the block that draws
   ``gridDim.y - 1`` is the last of its group: every other split's partial is then visible;
3. that block (after a fence) merges its group's ``hg`` rows exactly as the combine kernel of
   :func:`.decode_splitkv.emit_combine` does, element for element: the max of the splits'
   LSEs, then ``w = 2^(lse_s - max)``, ``Ls += w``, ``f = fma(w, O_s, f)`` over ``s = 0 ..
   n - 1`` in that fixed order, ``O = f * (1 / Ls)`` packed; the same operations in the same
   order, so the output is bitwise the combine kernel's (``tests/test_nvidia_decode_fused_gpu
   .py``).  It reads the partials with ``ld.global.cg`` (L2; L1 is not coherent);
4. it sets ``CNT[blockIdx.x] = 0`` again, so the buffer is ready for the next launch.

``CNT`` (one int per group) is zeroed once per stream (:class:`SplitCounters`) and kept: two
launches on one stream run in order, so they never share a counter; two streams get two
buffers (a shared buffer would let blocks of concurrent launches take each other's tickets).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .decode_splitkv import COMBINE_ELEMS, COMBINE_UNROLL
from .prelude import PACK

__all__ = ["FUSED_PARAM", "emit_fused_combine", "SplitCounters"]

FUSED_PARAM = "int* __restrict__ CNT"     # the split kernel's extra trailing parameter


def emit_fused_combine(o, cfg) -> None:
    """The tail of a split kernel whose body is still open (``emit_row_merge(...,
    close=False)``; ``b``, ``h0``, ``tid``, ``rows``, ``Hq``, ``o_sb``, ``o_sh`` in scope):
    the ticket, and for the last block the merge of its ``cfg.hg`` rows; closes the kernel."""
    HG, D, E, U, T = cfg.hg, cfg.head_dim, COMBINE_ELEMS, COMBINE_UNROLL, cfg.threads
    pack = PACK[cfg.out_dtype]
    o("  if (gridDim.y > 1) {")
    o("    __shared__ int s_last;")
    o("    __threadfence();   // this thread's OP/LSE stores, visible before the ticket")
    o("    __syncthreads();")
    o("    if (tid == 0) s_last = atomicAdd(&CNT[blockIdx.x], 1) == (int)gridDim.y - 1;")
    o("    __syncthreads();")
    o("    if (s_last) {")
    o("      __threadfence();")
    o("      const int nsplit = gridDim.y;")
    o(f"      for (int i = tid; i < {HG * D // E}; i += {T}) {{")
    o(f"        const int row = b * Hq + h0 + i / {D // E}, c = (i % {D // E}) * {E};")
    o("        // the combine kernel's merge, operation for operation (bitwise the same)")
    o("        float M = LG_NEG_INF;")
    o(f"        #pragma unroll {U}")
    o("        for (int s = 0; s < nsplit; ++s) M = fmaxf(M, __ldcg(LSE + (size_t)s * rows + row));")
    o("        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);")
    o("        float Ls = 0.f;")
    o(f"        #pragma unroll {U}")
    o("        for (int s = 0; s < nsplit; ++s) {")
    o("          const float w = lg_exp2(__ldcg(LSE + (size_t)s * rows + row) - M);")
    o("          Ls += w;")
    o(f"          const float4 a = __ldcg(reinterpret_cast<const float4*>(OP + ((size_t)s * rows + row) * {D} + c));")
    o("          f.x = fmaf(w, a.x, f.x); f.y = fmaf(w, a.y, f.y);")
    o("          f.z = fmaf(w, a.z, f.z); f.w = fmaf(w, a.w, f.w);\n        }")
    o("        const float inv = 1.f / Ls;")
    o("        lg_u32x2 r;")
    o(f"        r.x = {pack}(f.x * inv, f.y * inv); r.y = {pack}(f.z * inv, f.w * inv);")
    o(f"        *reinterpret_cast<lg_u32x2*>(O + b * o_sb + (h0 + i / {D // E}) * o_sh + c) = r;")
    o("      }")
    o("      if (tid == 0) CNT[blockIdx.x] = 0;   // ready for the next launch on this stream")
    o("    }")
    o("  }")
    o("}")


class SplitCounters:
    """The ``CNT`` buffers of one bound call: ``blocks`` zeroed ints per (device, stream),
    made on a stream's first call and kept (the kernel leaves them zero)."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self._by_stream: Dict[Tuple[int, int], object] = {}

    def on(self, q) -> Tuple[List[object], int]:
        """``([CNT], stream)`` for a launch on q's device's current stream."""
        import torch
        stream = torch.cuda.current_stream(q.device).cuda_stream
        key = (q.device.index, stream)
        buf = self._by_stream.get(key)
        if buf is None:
            buf = self._by_stream[key] = torch.zeros(self.blocks, dtype=torch.int32,
                                                     device=q.device)
        return [buf], stream
