"""Split-KV decode with GQA packing for NVIDIA GPUs (issue 20 item 3), the design of the AMD
side's :mod:`kernels.amd.decode_splitkv`: exact LSE merge of per-split partials.

One thread block owns one (batch, KV head, head chunk) and one KV split: the ``hg`` query
heads of the chunk (``hg`` the largest divisor of ``Hq / Hkv`` up to 4, measured) share
every K/V row the block loads, so K/V are read from DRAM once per KV head, not once per query
head (the head chunks of one KV head run side by side and mostly meet in L2).  Inside the block
``R = threads / (D / 8)`` row groups of ``D / 8`` lanes walk the split's keys ``R`` apart,
``chunk`` keys in flight per row group (16-byte ``ld.global.nc`` loads); each lane holds 8
elements of every query head, dot products reduce over the row group with ``shfl.xor``, and
the softmax is online per head (in base 2: scores are ``q.k * scale * log2(e)``).  The row
groups' partials (max, sum, unnormalised output) merge through shared memory, exactly:
``O = sum_r 2^(m_r - M) acc_r / sum_r 2^(m_r - M) l_r``.

With one split the block writes the output; with ``n > 1`` it writes its normalised fp32
partial ``O_s`` and ``lse_s = M + log2(L)`` and the combine kernel (same module) merges the
splits exactly: ``O = sum_s 2^(lse_s - lse_max) O_s / sum_s 2^(lse_s - lse_max)``.

:func:`choose_splits` picks the split count against the SM count (a model: blocks per SM
aimed for, :data:`BLOCKS_PER_SM`), so ``B * Hkv`` too small to fill the GPU still does.
The lane partition is a ``layoutalg`` layout printed by ``to_c`` and checked at every lane,
and proved to cover the (row group, element) tile once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Dict, Optional, Tuple

from layoutalg import Layout
from layoutalg.verify import coverage

from . import layout_c as lc
from .attention import AttentionConfigError, DecodeAttention
from .builder import CompiledKernel
from .gemm import c_layout
from .prelude import PACK, source_head
from ..errors import LaunchError
from ..runtime.rocm import TensorSpec

__all__ = ["SPLIT_DECODE_PARAMS", "SplitDecodeShape", "check_decode_dtypes", "SplitKVDecodeConfig", "SplitKVDecode", "emit_splitkv_decode", "choose_splits",
           "heads_per_block", "combine_grid", "MAX_HEADS_PER_BLOCK", "BLOCKS_PER_SM", "MIN_KEYS_PER_SPLIT",
           "MAX_SPLITS"]

BLOCKS_PER_SM = 4          # blocks per SM the split count aims for (measured on an H100, d128
                           # GQA 4: 64 splits of B1 Skv 100K 2550 GB/s, 32 splits 2181 GB/s)
MIN_KEYS_PER_SPLIT = 256
MAX_KEYS_PER_SPLIT = 2048  # when the blocks do not fill the SMs: more splits beat long ones
                           # (H100, B8 H32/8 Skv 32K: 9 splits 1857 GB/s, 16 splits 2881 GB/s)
MAX_SPLITS = 256
COMBINE_THREADS = 128       # the combine kernel's block: 128 spreads a few rows over more SMs
COMBINE_ELEMS = 4           # output elements per combine thread (one float4 of each partial)
COMBINE_UNROLL = 8          # splits whose loads one combine thread has in flight


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise AttentionConfigError(msg)


@dataclass(frozen=True)
class SplitDecodeShape:
    """What the configurations of both split-KV decode kernels (this FMA one and the
    tensor-core one of :mod:`kernels.nvidia.decode_mma`) share: dtypes, head_dim, query heads
    per block, keys in flight, warps, and the kernel names derived from them (``KERNEL`` is
    the name's prefix)."""

    KERNEL: ClassVar[str] = "lg_decode_splitkv"
    in_dtype: str = "bf16"
    out_dtype: str = "f16"
    head_dim: int = 128
    hg: int = 4                 # query heads per block (sharing each K/V row)
    chunk: int = 4              # keys in flight per row group
    warps: int = 4
    arch: str = "sm_90"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def name(self) -> str:
        return (f"{self.KERNEL}_{self.in_dtype}_{self.out_dtype}_d{self.head_dim}_g{self.hg}"
                f"_c{self.chunk}_w{self.warps}")

    @property
    def combine_name(self) -> str:
        return self.name + "_combine"


def check_decode_dtypes(cfg: SplitDecodeShape) -> None:
    """Refuse input or output types other than f16 / bf16 (both split decode kernels)."""
    _need(cfg.in_dtype in ("f16", "bf16") and cfg.out_dtype in ("f16", "bf16"),
          "decode dtypes must be f16 or bf16")


@dataclass(frozen=True)
class SplitKVDecodeConfig(SplitDecodeShape):
    @property
    def lanes_per_row(self) -> int:
        return self.head_dim // 8

    @property
    def row_groups(self) -> int:
        return self.threads // self.lanes_per_row


def validate(cfg: SplitKVDecodeConfig) -> None:
    check_decode_dtypes(cfg)
    _need(cfg.head_dim in (64, 128, 256), f"head_dim must be 64, 128 or 256, got {cfg.head_dim}")
    _need(cfg.hg in (1, 2, 3, 4, 5, 6, 7, 8), f"hg={cfg.hg}: 1 to 8 query heads per block")
    _need(cfg.chunk in (1, 2, 4, 8), f"chunk={cfg.chunk}: 1, 2, 4 or 8 keys in flight")
    _need(cfg.warps in (1, 2, 4, 8), f"warps={cfg.warps}: 1, 2, 4 or 8")
    smem = 4 * cfg.row_groups * cfg.hg * (cfg.head_dim + 3)
    _need(smem <= 48 * 1024, f"{smem} bytes of static shared memory for the row-group merge; "
          "at most 48 KiB: fewer warps or heads per block")


# the split kernel's parameters, the same for the FMA and the tensor-core decode (one launch
# argument list, SplitKVDecode's)
SPLIT_DECODE_PARAMS = (
    "const lg_u16* __restrict__ Q, const lg_u16* __restrict__ K, "
    "const lg_u16* __restrict__ V, lg_u16* __restrict__ O, float* __restrict__ OP, "
    "float* __restrict__ LSE, int rows, int Hq, int Hkv, int group, int Skv, int kv_chunk, "
    "long long q_sb, long long q_sh, long long k_sb, long long k_sh, long long k_ss, "
    "long long v_sb, long long v_sh, long long v_ss, long long o_sb, long long o_sh, "
    "float scale_log2")


def emit_decode_helpers(o, cfg: SplitKVDecodeConfig) -> None:
    """The device helpers both split kernels use: -inf, the 16-byte non-caching load, 8
    elements unpacked to fp32 and 8 floats scaled and packed to the output type."""
    lo, hi = ("lg_bf16_lo", "lg_bf16_hi") if cfg.in_dtype == "bf16" else ("lg_f16_lo", "lg_f16_hi")
    pack = PACK[cfg.out_dtype]
    o("#define LG_NEG_INF (-__int_as_float(0x7f800000))")
    o("LG_DEV lg_u32x4 lg_ld_nc(const lg_u16* p) {")
    o("  lg_u32x4 r;")
    o('  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\\n"')
    o('               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));')
    o("  return r;\n}")
    o("LG_DEV void lg_unpack8(const lg_u32x4& v, float* f) {")
    o(f"  f[0] = {lo}(v.x); f[1] = {hi}(v.x); f[2] = {lo}(v.y); f[3] = {hi}(v.y);")
    o(f"  f[4] = {lo}(v.z); f[5] = {hi}(v.z); f[6] = {lo}(v.w); f[7] = {hi}(v.w);\n}}")
    o("LG_DEV void lg_store8(lg_u16* dst, const float* f, float s) {")
    o("  lg_u32x4 r;")
    o(f"  r.x = {pack}(f[0] * s, f[1] * s); r.y = {pack}(f[2] * s, f[3] * s);")
    o(f"  r.z = {pack}(f[4] * s, f[5] * s); r.w = {pack}(f[6] * s, f[7] * s);")
    o("  *reinterpret_cast<lg_u32x4*>(dst) = r;\n}")


def emit_row_merge(o, HG: int, R: int, D: int, T: int, close: bool = True) -> None:
    """The end of a split kernel: ``R`` partials (``s_m``, ``s_l``, ``s_acc[R][HG][D]``
    already in shared memory, before a barrier) merged exactly, then the output (one split)
    or the normalised fp32 partial and its LSE (several splits) written.  ``close=False``
    leaves the kernel's body open for a tail (:mod:`.decode_fused_combine`)."""
    o("  __syncthreads();")
    o(f"  if (tid < {HG}) {{")
    o("    float M = LG_NEG_INF;")
    o(f"    for (int r = 0; r < {R}; ++r) M = fmaxf(M, s_m[r][tid]);")
    o("    float Ls = 0.f;")
    o(f"    for (int r = 0; r < {R}; ++r) {{")
    o("      const float w = s_m[r][tid] == LG_NEG_INF ? 0.f : lg_exp2(s_m[r][tid] - M);")
    o("      s_w[r][tid] = w; Ls += w * s_l[r][tid];\n    }")
    o("    s_inv[tid] = 1.f / Ls; s_lse[tid] = M + log2f(Ls);\n  }")
    o("  __syncthreads();")
    o(f"  for (int i = tid; i < {HG * D // 8}; i += {T}) {{")
    o(f"    const int j = i / {D // 8}, c = (i % {D // 8}) * 8;")
    o("    float f[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};")
    o(f"    for (int r = 0; r < {R}; ++r) {{")
    o("      const float w = s_w[r][j];")
    o("      #pragma unroll\n      for (int e = 0; e < 8; ++e) f[e] = fmaf(w, s_acc[r][j][c + e], f[e]);\n    }")
    o("    if (gridDim.y == 1) {")
    o("      lg_store8(O + b * o_sb + (h0 + j) * o_sh + c, f, s_inv[j]);")
    o("    } else {")
    o("      const size_t row = (size_t)blockIdx.y * rows + (size_t)b * Hq + h0 + j;")
    o(f"      float4* dst = reinterpret_cast<float4*>(OP + row * {D} + c);")
    o("      const float s = s_inv[j];")
    o("      dst[0] = make_float4(f[0] * s, f[1] * s, f[2] * s, f[3] * s);")
    o("      dst[1] = make_float4(f[4] * s, f[5] * s, f[6] * s, f[7] * s);")
    o("      if (c == 0) LSE[row] = s_lse[j];\n    }\n  }" + ("\n}" if close else ""))


def combine_grid(rows: int, head_dim: int) -> int:
    """Blocks of :data:`COMBINE_THREADS` the combine kernel launches: one thread per (row,
    :data:`COMBINE_ELEMS` elements), every one of ``rows * head_dim`` elements covered."""
    return -(-(rows * head_dim // COMBINE_ELEMS) // COMBINE_THREADS)


def emit_combine(o, cfg) -> None:
    """The combine kernel: one thread per (row, :data:`COMBINE_ELEMS` elements) merges the
    splits exactly.  The split loops are unrolled by :data:`COMBINE_UNROLL` so that many
    splits' loads are in flight at once: the partials were just written and sit in L2, and
    a loop that waits for each split's load in turn is latency-bound (H100, B4 H32/8 Skv 4096
    d256: 3.1 us of a 52 us call at 8 splits, 8.3 us at 32)."""
    D, E, U = cfg.head_dim, COMBINE_ELEMS, COMBINE_UNROLL
    pack = PACK[cfg.out_dtype]
    o(f'extern "C" __global__ void __launch_bounds__({COMBINE_THREADS})')
    o(f"{cfg.combine_name}(const float* __restrict__ OP, const float* __restrict__ LSE, "
      "lg_u16* __restrict__ O, int rows, int Hq, int nsplit, long long o_sb, long long o_sh) {")
    o(f"  const long long i = (long long)blockIdx.x * {COMBINE_THREADS} + threadIdx.x;")
    o(f"  if (i >= (long long)rows * {D // E}) return;")
    o(f"  const int row = (int)(i / {D // E}), c = (int)(i % {D // E}) * {E};")
    o("  float M = LG_NEG_INF;")
    o(f"  #pragma unroll {U}")
    o("  for (int s = 0; s < nsplit; ++s) M = fmaxf(M, LSE[(size_t)s * rows + row]);")
    o("  float4 f = make_float4(0.f, 0.f, 0.f, 0.f);")
    o("  float Ls = 0.f;")
    o(f"  #pragma unroll {U}")
    o("  for (int s = 0; s < nsplit; ++s) {")
    o("    const float w = lg_exp2(LSE[(size_t)s * rows + row] - M);")
    o("    Ls += w;")
    o(f"    const float4 a = *reinterpret_cast<const float4*>(OP + ((size_t)s * rows + row) * {D} + c);")
    o("    f.x = fmaf(w, a.x, f.x); f.y = fmaf(w, a.y, f.y);")
    o("    f.z = fmaf(w, a.z, f.z); f.w = fmaf(w, a.w, f.w);\n  }")
    o("  const int b = row / Hq, h = row - b * Hq;")
    o("  const float inv = 1.f / Ls;")
    o("  lg_u32x2 r;")
    o(f"  r.x = {pack}(f.x * inv, f.y * inv); r.y = {pack}(f.z * inv, f.w * inv);")
    o("  *reinterpret_cast<lg_u32x2*>(O + b * o_sb + h * o_sh + c) = r;")
    o("}")


def emit_splitkv_decode(cfg: SplitKVDecodeConfig) -> str:
    """The CUDA source of one configuration: the split kernel and its combine kernel."""
    validate(cfg)
    G, R, HG, D, C, T = (cfg.lanes_per_row, cfg.row_groups, cfg.hg, cfg.head_dim, cfg.chunk,
                         cfg.threads)
    lane_row = Layout((G, R), (0, 1))
    lane_col = Layout((G, R), (8, 0))
    _need(coverage(Layout(((G, R), 8), ((8, D), 1)), R * D).holds, "lane partition coverage")
    tid = lc.sym("tid")
    rr = c_layout(lane_row, tid, {tid: T}, "row group")
    cc = c_layout(lane_col, tid, {tid: T}, "element")
    L = source_head("kernels/nvidia/decode_splitkv.py", cfg.name,
                    [f"lane -> row group {lane_row}, lane -> element {lane_col} (+0..7); {HG} "
                     f"query heads share each K/V row; {C} keys in flight per row group"])
    o = L.append
    emit_decode_helpers(o, cfg)
    o(f'extern "C" __global__ void __launch_bounds__({T})')
    o(f"{cfg.name}({SPLIT_DECODE_PARAMS}) {{")
    o(f"  __shared__ __align__(16) float s_acc[{R}][{HG}][{D}];")
    o(f"  __shared__ float s_m[{R}][{HG}], s_l[{R}][{HG}], s_w[{R}][{HG}], s_inv[{HG}], "
      f"s_lse[{HG}];")
    o("  const int tid = threadIdx.x;")
    o(f"  const int rg = {rr}, col = {cc};")
    o(f"  const int hcs = group / {HG};")
    o("  int bid = blockIdx.x;")
    o("  const int hc = bid % hcs; bid /= hcs;")
    o("  const int hk = bid % Hkv, b = bid / Hkv;")
    o(f"  const int h0 = hk * group + hc * {HG};")
    o("  const int s0 = blockIdx.y * kv_chunk, s1 = min(Skv, s0 + kv_chunk);")
    o(f"  float q[{HG}][8], acc[{HG}][8], m[{HG}], l[{HG}];")
    o(f"  #pragma unroll\n  for (int j = 0; j < {HG}; ++j) {{")
    o("    lg_unpack8(lg_ld_nc(Q + b * q_sb + (h0 + j) * q_sh + col), q[j]);")
    o("    m[j] = LG_NEG_INF; l[j] = 0.f;")
    o("    #pragma unroll\n    for (int e = 0; e < 8; ++e) acc[j][e] = 0.f;\n  }")
    o("  const lg_u16* Kp = K + b * k_sb + hk * k_sh + col;")
    o("  const lg_u16* Vp = V + b * v_sb + hk * v_sh + col;")
    o("  // every lane runs the same iterations (the shuffles need the whole warp); keys past")
    o("  // the split are masked, their loads clamped to the split's last key")
    o(f"  for (int base = s0; base < s1; base += {R * C}) {{")
    o(f"    lg_u32x4 kv[{C}], vv[{C}];")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o(f"      const int t = min(base + rg + {R} * s, s1 - 1);")
    o("      kv[s] = lg_ld_nc(Kp + t * k_ss);")
    o("      vv[s] = lg_ld_nc(Vp + t * v_ss);\n    }")
    o(f"    float sc[{C}][{HG}];")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o("      float kf[8]; lg_unpack8(kv[s], kf);")
    o(f"      const bool ok = base + rg + {R} * s < s1;")
    o(f"      #pragma unroll\n      for (int j = 0; j < {HG}; ++j) {{")
    o("        float d = 0.f;")
    o("        #pragma unroll\n        for (int e = 0; e < 8; ++e) d = fmaf(q[j][e], kf[e], d);")
    for sh in [1 << i for i in range(int(math.log2(G)))]:
        o(f"        d += __shfl_xor_sync(0xffffffffu, d, {sh});")
    o("        sc[s][j] = ok ? d * scale_log2 : LG_NEG_INF;\n      }\n    }")
    o(f"    #pragma unroll\n    for (int j = 0; j < {HG}; ++j) {{")
    o("      float mx = m[j];")
    o(f"      #pragma unroll\n      for (int s = 0; s < {C}; ++s) mx = fmaxf(mx, sc[s][j]);")
    o("      // mx == m[j] also covers a row group with no key yet (both -inf): no rescale")
    o("      const float alpha = mx == m[j] ? 1.f : lg_exp2(m[j] - mx);")
    o("      m[j] = mx; l[j] *= alpha;")
    o("      #pragma unroll\n      for (int e = 0; e < 8; ++e) acc[j][e] *= alpha;\n    }")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o("      float vf[8]; lg_unpack8(vv[s], vf);")
    o(f"      #pragma unroll\n      for (int j = 0; j < {HG}; ++j) {{")
    o("        const float p = sc[s][j] == LG_NEG_INF ? 0.f : lg_exp2(sc[s][j] - m[j]);")
    o("        l[j] += p;")
    o("        #pragma unroll\n        for (int e = 0; e < 8; ++e) acc[j][e] = fmaf(p, vf[e], acc[j][e]);")
    o("      }\n    }\n  }")
    o("  // ---- merge the row groups (exact: rescale each by 2^(m_r - M))")
    o(f"  #pragma unroll\n  for (int j = 0; j < {HG}; ++j) {{")
    o("    if (col == 0) { s_m[rg][j] = m[j]; s_l[rg][j] = l[j]; }")
    o("    float4* dst = reinterpret_cast<float4*>(&s_acc[rg][j][col]);")
    o("    dst[0] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);")
    o("    dst[1] = make_float4(acc[j][4], acc[j][5], acc[j][6], acc[j][7]);\n  }")
    emit_row_merge(o, HG, R, D, T)
    emit_combine(o, cfg)
    return "\n".join(L) + "\n"


MAX_HEADS_PER_BLOCK = 4    # H100, B1 H64/8 Skv 128K d128 (group 8): 8 heads per block 0.47-0.58
                           # of a device copy (the FP32 dot products and shuffles of 8 heads per
                           # 16-byte load bind), 4 heads x 2 head chunks 0.62-0.64 (the chunks'
                           # second K/V read of a split mostly hits L2); 2 heads 0.53


def heads_per_block(group: int) -> int:
    """Query heads per block: the largest divisor of ``group`` (= Hq / Hkv) up to
    :data:`MAX_HEADS_PER_BLOCK`."""
    return max(d for d in range(1, min(group, MAX_HEADS_PER_BLOCK) + 1) if group % d == 0)


def choose_splits(blocks: int, seqlen_kv: int, sms: int, kv_splits: Optional[int] = None,
                  blocks_per_sm: int = BLOCKS_PER_SM,
                  whole_waves: bool = False) -> Tuple[int, int, str]:
    """``(n_splits, kv_chunk, reason)`` for ``blocks`` (batch x KV heads x head chunks) over
    ``seqlen_kv`` keys on ``sms`` SMs.

    Automatic: enough splits for ``sms * blocks_per_sm`` blocks (and, when the blocks alone
    fill at most half of them, at most :data:`MAX_KEYS_PER_SPLIT` keys per split), at least
    :data:`MIN_KEYS_PER_SPLIT` keys per split, at most :data:`MAX_SPLITS`.  ``whole_waves``
    (a kernel of which exactly ``blocks_per_sm`` blocks fit an SM) rounds the count to the
    nearest number of whole waves of ``sms * blocks_per_sm`` blocks, at least one, never
    past one wave by a few blocks (whose tail wave costs a whole block's time).
    ``kv_chunk`` is the keys per split; the count is recomputed from it, so no split is
    empty."""
    if seqlen_kv < 1:
        raise LaunchError("seqlen_kv must be at least 1")
    slots = sms * blocks_per_sm
    if kv_splits is not None:
        if not isinstance(kv_splits, int) or kv_splits < 1:
            raise LaunchError(f"kv_splits {kv_splits!r} must be a positive int")
        n, why = min(kv_splits, seqlen_kv), f"kv_splits={kv_splits} asked for"
    else:
        want = -(-slots // blocks)
        if 2 * blocks <= slots:
            want = max(want, -(-seqlen_kv // MAX_KEYS_PER_SPLIT))
        cap = min(seqlen_kv // MIN_KEYS_PER_SPLIT, MAX_SPLITS)
        n = max(1, min(want, cap))
        waves = ""
        if whole_waves:
            k = max(1, round(blocks * n / slots))
            n = max(1, min(k * slots // blocks, cap))
            waves = f" ({k} whole wave(s))"
        why = (f"{blocks} blocks of (batch, KV head, head chunk), {sms} SMs x {blocks_per_sm} "
               f"blocks wanted: {n} split(s){waves}")
    chunk = -(-seqlen_kv // n)
    n = -(-seqlen_kv // chunk)
    return n, chunk, f"{why}; {chunk} keys per split"


class SplitKVDecode(DecodeAttention):
    """``dec(q, k, v, out=None, scale=None, kv_splits=None, sms=None)``: q (B, Hq, 1, D) or
    (B, Hq, D), k/v (B, Hkv, Skv, D); ``Hq / Hkv`` a multiple of ``cfg.hg``."""

    blocks_per_sm = BLOCKS_PER_SM     # what the automatic split count aims for
    whole_waves = False               # round the split count to whole waves (choose_splits)

    def __init__(self, cfg: SplitKVDecodeConfig = SplitKVDecodeConfig(), *,
                 backend: str = "auto"):
        CompiledKernel.__init__(self, cfg, emit_splitkv_decode(cfg), backend)

    def plan(self, q, k, v, out=None, kv_splits: Optional[int] = None,
             sms: Optional[int] = None) -> Dict[str, int]:
        """Validated sizes and the split choice (no launch)."""
        B, Hq, Hkv, Skv = self.check_args(q, k, v, out)
        group = Hq // Hkv
        if group % self.cfg.hg:
            raise LaunchError(f"{self.cfg.name}: {group} query heads per KV head is not a "
                              f"multiple of hg={self.cfg.hg}; use heads_per_block({group})")
        blocks = B * Hkv * (group // self.cfg.hg)
        if sms is None:
            import torch
            from ..runtime.cuda import device_info
            idx = q.device.index if q.device.index is not None else torch.cuda.current_device()
            sms = device_info(idx)["sms"]
        n, chunk, why = choose_splits(blocks, Skv, sms, kv_splits, self.blocks_per_sm,
                                      self.whole_waves)
        if blocks >= 2 ** 31:
            raise LaunchError(f"{blocks} blocks: batch x KV heads x head chunks must fit in 31 bits")
        if n >= 65536:
            raise LaunchError(f"{n} splits: at most 65535")
        return dict(B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, group=group, blocks=blocks, splits=n,
                    kv_chunk=chunk, reason=why)

    def fused_combine_args(self, blocks: int):
        """``None``: the splits are merged by the combine kernel.  A kernel whose last split
        block merges them (:mod:`.decode_fused_combine`) returns ``(signature, specs,
        args_of)``: its extra trailing parameters and ``args_of(q) -> (args, stream)``, the
        values for one call on the current stream."""
        return None

    def __call__(self, q, k, v, out=None, scale: Optional[float] = None,
                 kv_splits: Optional[int] = None, sms: Optional[int] = None):
        return self.bound(q, k, v, out, scale, kv_splits, sms)(q, k, v, out)

    def bind(self, q, k, v, out=None, scale: Optional[float] = None,
             kv_splits: Optional[int] = None, sms: Optional[int] = None):
        """Check the arguments and choose the split; ``run(q, k, v, out)`` for every call
        with their ``call_key``."""
        import torch
        from ..runtime.cuda import LaunchSite
        p = self.plan(q, k, v, out, kv_splits, sms)
        cfg = self.cfg
        out_dt = torch.float16 if cfg.out_dtype == "f16" else torch.bfloat16
        scale = 1.0 / math.sqrt(cfg.head_dim) if scale is None else float(scale)
        rows, n = p["B"] * p["Hq"], p["splits"]
        fused = self.fused_combine_args(p["blocks"])
        sig = ("ptr",) * 6 + ("i32",) * 6 + ("i64",) * 10 + ("f32",)
        specs = [TensorSpec(strides=())] * 6 + [None] * 17
        if fused is not None:
            sig, specs = sig + fused[0], specs + fused[1]
        main = LaunchSite(self.module, cfg.name, (p["blocks"], n), cfg.threads,
                          signature=sig, specs=specs)
        combine = self.combine_site(rows, p) if n > 1 and fused is None else None
        sizes = [rows, p["Hq"], p["Hkv"], p["group"], p["Skv"], p["kv_chunk"], q.stride(0),
                 q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
                 v.stride(2)]
        log2_scale = scale * math.log2(math.e)

        def run(q, k, v, out):
            if out is None:
                out = torch.empty(q.shape, dtype=out_dt, device=q.device)
            if n > 1:
                op = torch.empty((n, rows, cfg.head_dim), dtype=torch.float32, device=q.device)
                lse = torch.empty((n, rows), dtype=torch.float32, device=q.device)
            else:
                op = lse = None
            args = [q, k, v, out, op, lse, *sizes, out.stride(0), out.stride(1), log2_scale]
            if fused is None:
                main(args)
            else:
                extra, stream = fused[2](q)
                main(args + extra, stream)
            if combine is not None:
                combine(op, lse, out)
            return out
        return run

    def combine_site(self, rows: int, p: Dict[str, int]):
        """The combine kernel's launch for ``rows`` = batch x query heads and the plan ``p``:
        ``run(op, lse, out)`` (a subclass may launch another combine kernel,
        :class:`~.decode_mma_ir.IrMmaSplitKVDecode`)."""
        from ..runtime.cuda import LaunchSite
        cfg = self.cfg
        site = LaunchSite(self.module, cfg.combine_name, combine_grid(rows, cfg.head_dim),
                          COMBINE_THREADS, signature=("ptr",) * 3 + ("i32",) * 3 + ("i64",) * 2,
                          specs=[TensorSpec(strides=())] * 3 + [None] * 5)
        hq, n = p["Hq"], p["splits"]

        def run(op, lse, out):
            site([op, lse, out, rows, hq, n, out.stride(0), out.stride(1)])
        return run
