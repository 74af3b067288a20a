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

import re
from typing import List, Tuple

from ..runtime.launch_cache import PerStream
from .attention import AttentionConfigError
from .decode_splitkv import COMBINE_ELEMS, COMBINE_UNROLL, emit_combine
from .prelude import PACK

__all__ = ["FUSED_PARAM", "emit_fused_combine", "merge_ops", "check_same_merge", "SplitCounters"]

FUSED_PARAM = "int* __restrict__ CNT"     # the split kernel's extra trailing parameter


def _fused_merge(cfg) -> List[str]:
    """The last block's loop over its rows (items of :data:`COMBINE_ELEMS` elements)."""
    HG, D, E, U, T = cfg.hg, cfg.head_dim, COMBINE_ELEMS, COMBINE_UNROLL, cfg.threads
    pack = PACK[cfg.out_dtype]
    return [
        f"      for (int i = tid; i < {HG * D // E}; i += {T}) {{",
        f"        const int row = b * Hq + h0 + i / {D // E}, c = (i % {D // E}) * {E};",
        "        // the combine kernel's merge, operation for operation (bitwise the same)",
        "        float M = LG_NEG_INF;",
        f"        #pragma unroll {U}",
        "        for (int s = 0; s < nsplit; ++s) M = fmaxf(M, __ldcg(LSE + (size_t)s * rows + row));",
        "        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);",
        "        float Ls = 0.f;",
        f"        #pragma unroll {U}",
        "        for (int s = 0; s < nsplit; ++s) {",
        "          const float w = lg_exp2(__ldcg(LSE + (size_t)s * rows + row) - M);",
        "          Ls += w;",
        f"          const float4 a = __ldcg(reinterpret_cast<const float4*>(OP + ((size_t)s * rows + row) * {D} + c));",
        "          f.x = fmaf(w, a.x, f.x); f.y = fmaf(w, a.y, f.y);",
        "          f.z = fmaf(w, a.z, f.z); f.w = fmaf(w, a.w, f.w);",
        "        }",
        "        const float inv = 1.f / Ls;",
        "        lg_u32x2 r;",
        f"        r.x = {pack}(f.x * inv, f.y * inv); r.y = {pack}(f.z * inv, f.w * inv);",
        f"        *reinterpret_cast<lg_u32x2*>(O + b * o_sb + (h0 + i / {D // E}) * o_sh + c) = r;",
        "      }"]


_LDCG = re.compile(r"__ldcg\(((?:reinterpret_cast<const float4\*>\()?)(\w+ \+ [^;]*?)\)(\)?)")


def merge_ops(lines: List[str]) -> List[str]:
    """The floating-point statements of a merge, in order, with the loads written one way
    (``__ldcg(p)`` as ``*p`` / ``p[i]``) and index / address lines left out: what decides
    its bits."""
    ops = []
    for ln in "\n".join(lines).splitlines():
        t = ln.strip()
        if not t or t.startswith(("const int", "//", "if (", "for (int i", "*reinterpret_cast<lg_u32x2*>")):
            continue
        t = re.sub(r"__ldcg\(LSE \+ \(size_t\)s \* rows \+ row\)", "LSE[(size_t)s * rows + row]", t)
        t = re.sub(r"__ldcg\(reinterpret_cast<const float4\*>\((.*)\)\);", r"*reinterpret_cast<const float4*>(\1);", t)
        ops.append(t)
    return ops


def _merge_span(ops: List[str], what: str) -> List[str]:
    """From ``float M = LG_NEG_INF;`` to the packing ``r.x = ...`` statement."""
    first = "float M = LG_NEG_INF;"
    last = next((i for i, x in enumerate(ops) if x.startswith("r.x =")), None)
    if first not in ops or last is None:
        raise AttentionConfigError(f"the {what} merge (from {first!r} to 'r.x = ...') was not "
                                   "found in its source")
    return ops[ops.index(first):last + 1]


def check_same_merge(fused: List[str], combine: List[str]) -> None:
    """The fused merge's statements are the combine kernel's (:func:`merge_ops`, from the
    LSE max to the packed result), so the two give the same bits; refuse if not."""
    a = _merge_span(merge_ops(fused), "fused")
    b = _merge_span(merge_ops(combine), "combine kernel's")
    if a != b:
        x, y = next((x, y) for x, y in zip(a + [""] * len(b), b + [""] * len(a)) if x != y)
        raise AttentionConfigError(f"the fused merge differs from the combine kernel's: {x!r} "
                                   f"vs {y!r} (its output would not be bitwise the combine's)")


def emit_fused_combine(o, cfg) -> None:
    """The tail of a split kernel whose body is still open (``emit_row_merge(...,
    close=False)``; ``b``, ``h0``, ``tid``, ``rows``, ``Hq``, ``o_sb``, ``o_sh`` in scope):
    the ticket, and for the last block the merge of its ``cfg.hg`` rows (checked against the
    combine kernel's statements, :func:`check_same_merge`); closes the kernel."""
    merge = _fused_merge(cfg)
    combine: List[str] = []
    emit_combine(combine.append, cfg)
    check_same_merge(merge, combine)
    o("  if (gridDim.y > 1) {")
    o("    __shared__ int s_last;")
    o("    __threadfence();   // this thread's OP/LSE stores, visible before the ticket")
    o("    __syncthreads();")
    o("    if (tid == 0) s_last = atomicAdd(&CNT[blockIdx.x], 1) == (int)gridDim.y - 1;")
    o("    __syncthreads();")
    o("    if (s_last) {")
    o("      __threadfence();")
    o("      const int nsplit = gridDim.y;")
    for ln in merge:
        o(ln)
    o("      if (tid == 0) CNT[blockIdx.x] = 0;   // ready for the next launch on this stream")
    o("    }")
    o("  }")
    o("}")


class SplitCounters:
    """The ``CNT`` buffers of one bound call: ``blocks`` zeroed ints per (device, stream)
    (:class:`~kernels.runtime.launch_cache.PerStream`: made on a stream's first call and
    kept; the kernel leaves them zero)."""

    def __init__(self, blocks: int) -> None:
        import torch
        self.blocks = blocks
        self._buffers = PerStream(lambda device: torch.zeros(blocks, dtype=torch.int32,
                                                             device=device))

    def on(self, q) -> Tuple[List[object], int]:
        """``([CNT], stream)`` for a launch on q's device's current stream."""
        buf, stream = self._buffers.on(q.device)
        return [buf], stream
