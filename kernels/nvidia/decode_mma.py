"""Split-KV GQA decode on tensor cores (issue 20 item 3): all ``hg <= 8`` query heads of a KV
head share one K/V read, and their dot products run as ``mma.sync.m16n8k16`` instead of fp32
FMAs and shuffles (the FMA kernel, :mod:`.decode_splitkv`, is compute-bound at 8 heads).

Each warp walks its own 16-key tiles of the split (``W`` warps, ``chunk`` tiles in flight):

* scores ``S = Q K^T``: A = Q (16 rows = the ``hg`` heads, zero rows after them), B = K^T
  (16 of D x 8 keys), two mmas per k-step for the tile's keys 0-7 and 8-15.  The D axis is
  permuted the same way for Q and K (a dot product does not care): lane ``(g, t)`` (``g =
  lane / 4``, ``t = lane % 4``) owns the 16-byte vectors ``t, t + 4, t + 8, ...`` of a row
  (the 4 lanes of a row read 64 contiguous bytes per load); k-step ``s`` uses its words
  ``2s, 2s+1``.
* the C fragment of those two mmas (head ``g``, keys ``2t, 2t+1, 8+2t, 9+2t``) is exactly the
  B fragment of ``O^T = V^T P^T`` (k = keys, n = heads), so P never leaves registers; the A
  fragment (V^T, m = D rows) needs lane ``(g, t)`` to hold keys ``2t, 2t+1, 8+2t, 9+2t`` at
  the D rows of word ``j`` of its V vectors ``g, g + 8, ...`` (the 8 lanes of a key read 128
  contiguous bytes per load) and ``prmt`` to pair two keys per register.  The output O^T
  lands as (head ``2t``/``2t+1``, element pairs of those vectors).
* P is split ``P = P_hi + P_lo`` (both 16-bit, ``P_lo = P - P_hi`` rounded), two mmas, so the
  P V product keeps ~16 mantissa bits (the FMA kernel's fp32 P; a single 16-bit P would lose
  to 8 bits with bf16).  Q and K are the inputs' own 16-bit values, products exact in fp32.
* the online softmax is per head in base 2 (``scale_log2``); alpha for the O rows of heads
  ``2t, 2t+1`` comes from the lanes that own heads ``2t``/``2t+1`` by one shuffle each.

The warps' partials merge through shared memory and the splits through the combine kernel,
the same code as the FMA kernel (:func:`.decode_splitkv.emit_row_merge`,
:func:`.decode_splitkv.emit_combine`).  :func:`fragment_maps` states the index maps the source
is printed from; the tests check them against the PTX fragment rules by emulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, Tuple

from .attention import AttentionConfigError
from .builder import CompiledKernel
from .decode_splitkv import (SPLIT_DECODE_PARAMS, SplitDecodeShape, SplitKVDecode,
                             check_decode_dtypes, choose_splits, emit_combine,
                             emit_decode_helpers, emit_row_merge)
from .decode_fused_combine import FUSED_PARAM, SplitCounters, emit_fused_combine
from .decode_padded import policy_head_dim
from .prelude import MMA, PACK, source_head

__all__ = ["MmaDecodeConfig", "MmaSplitKVDecode", "emit_mma_decode", "fragment_maps",
           "MMA_MAX_HEADS", "MMA_BLOCKS_PER_SM", "MAX_STATIC_SMEM", "merge_smem_bytes", "validate",
           "heads_per_mma_block", "mma_warps", "mma_blocks_per_sm", "wave_fill", "WAVE_FILL_SLACK"]

MMA_MAX_HEADS = 8          # the mma's n = 8 heads of one KV head per block
MAX_STATIC_SMEM = 48 * 1024   # a kernel's static __shared__ arrays
MMA_BLOCKS_PER_SM = 2      # H100 sweep (benchmarks/gpu_decode_sweep.py), chunk 1, warps 4: B1
                           # H64/8 Skv 128K 33 splits 0.92 of a copy, 66 splits (4 per SM) 0.83


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise AttentionConfigError(msg)


@dataclass(frozen=True)
class MmaDecodeConfig(SplitDecodeShape):
    KERNEL: ClassVar[str] = "lg_decode_mma"
    hg: int = 8                 # query heads per block (rows of the score mma; <= 8)
    chunk: int = 1              # 16-key tiles in flight per warp (H100: 1 beat 2 and 4 at
                                # every swept shape, e.g. B8 H32/8 Skv 32K 0.97 vs 0.88, 0.89)
    warps: int = 4              # 8 when the batch alone fills the GPU: :func:`mma_warps`
    fused: bool = False         # the last split block merges the splits (no combine kernel;
                                # :mod:`.decode_fused_combine`)

    @property
    def row_groups(self) -> int:
        return self.warps

    @property
    def name(self) -> str:
        return super().name + ("_fc" if self.fused else "")


def validate(cfg: MmaDecodeConfig) -> None:
    check_decode_dtypes(cfg)
    _need(cfg.head_dim in (64, 128, 256), f"head_dim {cfg.head_dim}: the tensor-core decode "
          "takes 64, 128 or 256")
    _need(1 <= cfg.hg <= MMA_MAX_HEADS, f"hg={cfg.hg}: 1 to {MMA_MAX_HEADS} query heads per block")
    _need(cfg.chunk in (1, 2, 4), f"chunk={cfg.chunk}: 1, 2 or 4 tiles of 16 keys in flight")
    _need(cfg.warps in (1, 2, 4, 8), f"warps={cfg.warps}: 1, 2, 4 or 8")
    smem = merge_smem_bytes(cfg)
    _need(smem <= MAX_STATIC_SMEM, f"hg={cfg.hg} x warps={cfg.warps} x head_dim={cfg.head_dim}: "
          f"{smem} bytes of static shared memory for the warps' merge, at most {MAX_STATIC_SMEM}: "
          "fewer warps or heads per block")
    # 16 K/V rows of D/4 resp. D/8 elements per lane and tile in flight: chunk 1 at d256 is
    # 236 registers (NVRTC 13, no spills); more tiles in flight would spill
    _need(cfg.head_dim < 256 or cfg.chunk == 1, f"chunk={cfg.chunk} at head_dim 256: 1 (the "
          "K/V registers of more tiles in flight do not fit a lane's 255)")


def merge_smem_bytes(cfg: MmaDecodeConfig) -> int:
    """Static shared memory of the split kernel: the warps' partial O (fp32) and their
    max / sum / weight per head."""
    return 4 * cfg.warps * cfg.hg * (cfg.head_dim + 3) + 8 * cfg.hg


# Where a lane's 16-byte vectors sit in a row (elements): Q/K vector i of lane (g, t) at
# QK_LANE t + QK_VEC i, V vector i at V_LANE g + V_VEC i.  Interleaved, so the 4 t-lanes of a
# K row (the 8 g-lanes of a V row) read 64 (128) contiguous bytes per load instruction: whole
# 32-byte sectors.  (Each lane owning a contiguous D/4 resp. D/8 range made every instruction
# read half sectors, the other half fetched again by the next one past L1::no_allocate.)
QK_LANE, QK_VEC = 8, 32
V_LANE, V_VEC = 8, 64


def fragment_maps(D: int) -> Dict[str, object]:
    """The index maps the kernel is printed from (lane = 4 g + t), derived from the vector
    placement the loads print (:data:`QK_LANE`, :data:`QK_VEC`, :data:`V_LANE`, :data:`V_VEC`):

    * ``qk_d(t, s, i)``: the D element of logical k index ``2t + (i & 1) + 8 (i >> 1)`` of
      k-step ``s`` (i = 0..3; words ``2s, 2s+1`` of the lane's vectors): Q and K use the same
      map;
    * ``v_key(t, i)``: the tile key of the i-th key a lane loads (i = 0..3);
    * ``o_d(g, j, h)``: the D element of O^T row ``g + 8 h`` of m-tile ``j`` (word ``j`` of
      the lane's V vectors, element ``h`` of the pair)."""
    return {
        "qk_d": lambda t, s, i: QK_LANE * t + QK_VEC * (s // 2) + 4 * (s % 2) + i,
        "v_key": lambda t, i: (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)[i],
        "o_d": lambda g, j, h: V_LANE * g + V_VEC * (j // 4) + 2 * (j % 4) + h,
    }


def check_lane_maps(D: int) -> None:
    """The Q/K map is a permutation of the D axis (every element in exactly one (lane t,
    k-step, index)), and so is the O map over (g, m-tile, pair): a dot product over a
    permuted axis is the dot product; a map that dropped or repeated an element is refused."""
    mp = fragment_maps(D)
    qk = sorted(mp["qk_d"](t, s, i) for t in range(4) for s in range(D // 16) for i in range(4))
    od = sorted(mp["o_d"](g, j, h) for g in range(8) for j in range(D // 16) for h in range(2))
    _need(qk == list(range(D)), f"head_dim {D}: the Q/K lane map is not a permutation of D")
    _need(od == list(range(D)), f"head_dim {D}: the V/O lane map is not a permutation of D")


def _word(arr: str, w: int) -> str:
    """Word ``w`` of an array of 16-byte vectors."""
    return f"{arr}[{w // 4}].{'xyzw'[w % 4]}"


def emit_mma_decode(cfg: MmaDecodeConfig) -> str:
    """The CUDA source of one configuration: the split kernel and its combine kernel, or
    (``cfg.fused``) the split kernel whose last block per group merges the splits."""
    validate(cfg)
    check_lane_maps(cfg.head_dim)
    HG, D, C, W, T = cfg.hg, cfg.head_dim, cfg.chunk, cfg.warps, cfg.threads
    KS, MT = D // 16, D // 16          # k-steps of S = Q K^T, m-tiles of O^T = V^T P^T
    KV, VV = D // 32, D // 64          # 16-byte loads per K row (D/4 elems), per V row (D/8)
    mma, pack = MMA[cfg.in_dtype], PACK[cfg.in_dtype]
    lo, hi = ("lg_bf16_lo", "lg_bf16_hi") if cfg.in_dtype == "bf16" else ("lg_f16_lo", "lg_f16_hi")
    L = source_head("kernels/nvidia/decode_mma.py", cfg.name,
                    [f"{HG} query heads share each K/V row; S = Q K^T and O^T = V^T P^T on "
                     f"mma.sync m16n8k16; {C} tiles of 16 keys in flight per warp"])
    o = L.append
    emit_decode_helpers(o, cfg)
    # minBlocksPerSM 1: without it ptxas spilled 4 bytes at 72 registers (d64, hg 8)
    o(f'extern "C" __global__ void __launch_bounds__({T}, 1)')
    params = SPLIT_DECODE_PARAMS + (f", {FUSED_PARAM}" if cfg.fused else "")
    o(f"{cfg.name}({params}) {{")
    o(f"  __shared__ __align__(16) float s_acc[{W}][{HG}][{D}];")
    o(f"  __shared__ float s_m[{W}][{HG}], s_l[{W}][{HG}], s_w[{W}][{HG}], s_inv[{HG}], "
      f"s_lse[{HG}];")
    o("  const int tid = threadIdx.x, lane = tid & 31, rg = tid >> 5;")
    o("  const int g = lane >> 2, t = lane & 3;")
    o(f"  const int hcs = group / {HG};")
    o("  int bid = blockIdx.x;")
    o("  const int hc = bid % hcs; bid /= hcs;")
    o("  const int hk = bid % Hkv, b = bid / Hkv;")
    o(f"  const int h0 = hk * group + hc * {HG};")
    o("  const int s0 = blockIdx.y * kv_chunk, s1 = min(Skv, s0 + kv_chunk);")
    o(f"  // Q as the A fragment: head g (zero rows from {HG}), vector i at element "
      f"{QK_LANE} t + {QK_VEC} i")
    o(f"  lg_u32x4 qv[{KV}];")
    o(f"  #pragma unroll\n  for (int i = 0; i < {KV}; ++i)")
    o(f"    if (g < {HG}) qv[i] = lg_ld_nc(Q + b * q_sb + (h0 + g) * q_sh + t * {QK_LANE} + {QK_VEC} * i);"
      "\n    else qv[i].x = qv[i].y = qv[i].z = qv[i].w = 0u;")
    o(f"  float acc[{MT}][4], m = LG_NEG_INF, l = 0.f;")
    o(f"  #pragma unroll\n  for (int j = 0; j < {MT}; ++j) "
      "acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;")
    o(f"  const lg_u16* Kp = K + b * k_sb + hk * k_sh + t * {QK_LANE};")
    o(f"  const lg_u16* Vp = V + b * v_sb + hk * v_sh + g * {V_LANE};")
    o("  // a warp's tiles: [base, base + 16 C); keys past the split are masked, their loads")
    o("  // clamped to the split's last key")
    o(f"  for (int base = s0 + rg * {16 * C}; base < s1; base += {16 * C * W}) {{")
    o(f"    lg_u32x4 kr[{C}][2][{KV}], vr[{C}][4][{VV}];")
    o(f"    #pragma unroll\n    for (int c = 0; c < {C}; ++c) {{")
    o("      const int kb = base + 16 * c;")
    o("      #pragma unroll\n      for (int r = 0; r < 2; ++r) {")
    o("        const int key = min(kb + g + 8 * r, s1 - 1);")
    o(f"        #pragma unroll\n        for (int i = 0; i < {KV}; ++i) "
      f"kr[c][r][i] = lg_ld_nc(Kp + key * k_ss + {QK_VEC} * i);\n      }}")
    o("      #pragma unroll\n      for (int r = 0; r < 4; ++r) {")
    o("        const int key = min(kb + 2 * t + (r & 1) + 8 * (r >> 1), s1 - 1);")
    o(f"        #pragma unroll\n        for (int i = 0; i < {VV}; ++i) "
      f"vr[c][r][i] = lg_ld_nc(Vp + key * v_ss + {V_VEC} * i);\n      }}\n    }}")
    o(f"    #pragma unroll\n    for (int c = 0; c < {C}; ++c) {{")
    o("      const int kb = base + 16 * c;")
    o("      float s0f[4] = {0.f, 0.f, 0.f, 0.f}, s1f[4] = {0.f, 0.f, 0.f, 0.f};")
    for s in range(KS):
        a = f"{{{_word('qv', 2 * s)}, 0u, {_word('qv', 2 * s + 1)}, 0u}}"
        o(f"      {{ const lg_u32 a[4] = {a};")
        o(f"        const lg_u32 b0[2] = {{{_word('kr[c][0]', 2 * s)}, {_word('kr[c][0]', 2 * s + 1)}}};")
        o(f"        const lg_u32 b1[2] = {{{_word('kr[c][1]', 2 * s)}, {_word('kr[c][1]', 2 * s + 1)}}};")
        o(f"        {mma}(s0f, a, b0); {mma}(s1f, a, b1); }}")
    o("      // head g's scores of keys 2t, 2t+1 (s0f) and 8+2t, 9+2t (s1f)")
    o("      float p[4] = {s0f[0], s0f[1], s1f[0], s1f[1]};")
    o("      float mx = m;")
    o("      #pragma unroll\n      for (int i = 0; i < 4; ++i) {")
    o("        const bool ok = kb + 2 * t + (i & 1) + 8 * (i >> 1) < s1;")
    o("        p[i] = ok ? p[i] * scale_log2 : LG_NEG_INF;")
    o("        mx = fmaxf(mx, p[i]);\n      }")
    o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));")
    o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));")
    o("      // mx == m also covers no key yet (both -inf): no rescale")
    o("      const float alpha = mx == m ? 1.f : lg_exp2(m - mx);")
    o("      m = mx; l *= alpha;")
    o("      #pragma unroll\n      for (int i = 0; i < 4; ++i) {")
    o("        p[i] = p[i] == LG_NEG_INF ? 0.f : lg_exp2(p[i] - m); l += p[i];\n      }")
    o("      // the O^T columns of this lane are heads 2t, 2t+1: their alphas from lanes 8t, 8t+4")
    o("      const float a_lo = __shfl_sync(0xffffffffu, alpha, 8 * t);")
    o("      const float a_hi = __shfl_sync(0xffffffffu, alpha, 8 * t + 4);")
    o(f"      #pragma unroll\n      for (int j = 0; j < {MT}; ++j) {{")
    o("        acc[j][0] *= a_lo; acc[j][1] *= a_hi; acc[j][2] *= a_lo; acc[j][3] *= a_hi;\n      }")
    o(f"      const lg_u32 ph[2] = {{{pack}(p[0], p[1]), {pack}(p[2], p[3])}};")
    o(f"      const lg_u32 pl[2] = {{{pack}(p[0] - {lo}(ph[0]), p[1] - {hi}(ph[0])), "
      f"{pack}(p[2] - {lo}(ph[1]), p[3] - {hi}(ph[1]))}};")
    for j in range(MT):
        w = [_word(f"vr[c][{r}]", j) for r in range(4)]
        o(f"      {{ const lg_u32 a[4] = {{__byte_perm({w[0]}, {w[1]}, 0x5410), "
          f"__byte_perm({w[0]}, {w[1]}, 0x7632), __byte_perm({w[2]}, {w[3]}, 0x5410), "
          f"__byte_perm({w[2]}, {w[3]}, 0x7632)}};")
        o(f"        {mma}(acc[{j}], a, ph); {mma}(acc[{j}], a, pl); }}")
    o("    }\n  }")
    o("  l += __shfl_xor_sync(0xffffffffu, l, 1);")
    o("  l += __shfl_xor_sync(0xffffffffu, l, 2);")
    o(f"  if (t == 0 && g < {HG}) {{ s_m[rg][g] = m; s_l[rg][g] = l; }}")
    o(f"  #pragma unroll\n  for (int j = 0; j < {MT}; ++j) {{")
    o(f"    const int d = g * {V_LANE} + {V_VEC} * (j / 4) + 2 * (j % 4);")
    o(f"    if (2 * t < {HG}) *reinterpret_cast<float2*>(&s_acc[rg][2 * t][d]) = "
      "make_float2(acc[j][0], acc[j][2]);")
    o(f"    if (2 * t + 1 < {HG}) *reinterpret_cast<float2*>(&s_acc[rg][2 * t + 1][d]) = "
      "make_float2(acc[j][1], acc[j][3]);\n  }")
    emit_row_merge(o, HG, W, D, T, close=not cfg.fused)
    if cfg.fused:
        emit_fused_combine(o, cfg)
    else:
        emit_combine(o, cfg)
    return "\n".join(L) + "\n"


def mma_blocks_per_sm(cfg: MmaDecodeConfig) -> int:
    """Blocks per SM the split count aims for.  At head_dim 256 a lane holds 236 registers
    (NVRTC 13; 240 allocated), so exactly ``8 // warps`` blocks fit an SM's 64K registers and
    the count is rounded to whole waves of them (:func:`.decode_splitkv.choose_splits`'s
    ``whole_waves``); at 64/128 (<= 148 registers) :data:`MMA_BLOCKS_PER_SM`.  Other head
    dims (the IR kernel's) as their :func:`.decode_padded.policy_head_dim`."""
    return max(1, 8 // cfg.warps) if policy_head_dim(cfg.head_dim) == 256 else MMA_BLOCKS_PER_SM


class MmaSplitKVDecode(SplitKVDecode):
    """:class:`~.decode_splitkv.SplitKVDecode`'s launch (same arguments, split choice and
    combine) with the tensor-core split kernel."""

    def __init__(self, cfg: MmaDecodeConfig = MmaDecodeConfig(), *, backend: str = "auto"):
        CompiledKernel.__init__(self, cfg, self.split_template_source(cfg), backend)
        # head_dim 256: a split count a few blocks past a wave pays a whole tail wave (H100,
        # B4 H32/8 Skv 4096, 4 warps: 8 splits, 256 blocks, 0.82 of a copy; 9 splits 0.62).
        # At 64/128 a third block fits and absorbs the overshoot.
        self.whole_waves = policy_head_dim(cfg.head_dim) == 256
        self.blocks_per_sm = mma_blocks_per_sm(cfg)

    def split_template_source(self, cfg: MmaDecodeConfig) -> str:
        """The source this object compiles: the template split kernel (and its combine)."""
        return emit_mma_decode(cfg)

    def fused_combine_args(self, blocks: int):
        """``cfg.fused``: the counter buffer per stream (:class:`.decode_fused_combine
        .SplitCounters`) as the split kernel's last argument."""
        if not self.cfg.fused:
            return None
        from ..runtime.rocm import TensorSpec
        return ("ptr",), [TensorSpec(strides=())], SplitCounters(blocks).on


WAVE_FILL_SLACK = 0.05     # the SM share 8 warps may leave idle beyond 4 warps' and still win


def wave_fill(blocks: int, seqlen_kv: int, sms: int, warps: int) -> Tuple[int, float]:
    """``(waves, fill)`` of a head_dim 256 launch of ``warps`` warps per block with the split
    count it would get (whole waves of :func:`mma_blocks_per_sm` blocks per SM): how many
    waves of SM slots it takes and the share of those slots its blocks keep busy."""
    slots = sms * mma_blocks_per_sm(MmaDecodeConfig(head_dim=256, warps=warps))
    n = choose_splits(blocks, seqlen_kv, sms, None, slots // sms, True)[0]
    waves = -(-blocks * n // slots)
    return waves, blocks * n / (waves * slots)


def mma_warps(blocks: int, sms: int, head_dim: int = 128, hg: int = MMA_MAX_HEADS,
              seqlen_kv: int = 1 << 20) -> int:
    """Warps per block for ``blocks`` (batch x KV heads x head chunks) of ``hg`` heads.

    head_dim 64/128: 8 when the blocks alone give :data:`MMA_BLOCKS_PER_SM` per SM (one
    split), else 4.  H100 (suite, device time, chunk 1): B64 H32/8 Skv 8K (512 blocks) 0.98
    of a copy at 8 warps, 0.90-0.92 at 4; B1 H32/8 Skv 100K (8 blocks, 33 splits) 0.88 at 4
    warps, 0.78 at 8 (the 8 warps' 128-key steps leave a ragged tail in each 3031-key split).

    head_dim 256 (one 8-warp block or two 4-warp blocks per SM): 8 when the 8-warp merge
    buffers fit and the 8-warp launch, KV split, is one wave that keeps at most
    :data:`WAVE_FILL_SLACK` fewer SMs busy than 4 warps' would (the regime measured), else 4.  H100, 5 interleaved
    rounds (benchmarks/gpu_decode_spread.py): B4 H32/8 Skv 4096 8 warps x 4 splits 0.83-0.88
    of a copy (median 0.86) against 4 x 8 0.81-0.86 (0.85); B1 H32/8 Skv 32K 8 x 16 0.90
    against 4 x 32 0.86: half the splits, half the partials for the combine to merge."""
    if policy_head_dim(head_dim) != 256:      # other head dims as their policy head dim
        return 8 if blocks >= MMA_BLOCKS_PER_SM * sms else 4
    wide = MmaDecodeConfig(head_dim=256, hg=hg, warps=8)
    if merge_smem_bytes(wide) > MAX_STATIC_SMEM:
        return 4
    (waves8, fill8), (_, fill4) = (wave_fill(blocks, seqlen_kv, sms, w) for w in (8, 4))
    return 8 if waves8 == 1 and fill8 >= fill4 - WAVE_FILL_SLACK else 4


def heads_per_mma_block(group: int) -> int:
    """Query heads per block for the tensor-core kernel: the largest divisor of ``group``
    up to :data:`MMA_MAX_HEADS`."""
    return max(d for d in range(1, min(group, MMA_MAX_HEADS) + 1) if group % d == 0)

