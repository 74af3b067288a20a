"""Attention for NVIDIA GPUs (sm_80 / sm_90): flash-attention prefill and a decode kernel.

Prefill (:class:`FlashAttention`): FlashAttention-2 forward.  One thread block owns ``bm``
query rows of one (batch, head); each warp owns ``16 * mt`` of them.  Key/value blocks of
``bn`` rows stream through double-buffered shared memory (``cp.async``, zero-filled past the
sequence end); ``S = Q K^T`` and ``O += P V`` run on ``mma.sync`` m16n8k16 with operands
from ``ldmatrix`` (``.trans`` for V); the softmax is online in registers (row max and sum over
the four lanes that share a row), ``P`` goes from the S accumulators to the A operand of the
second product without leaving registers.  Causal masking is top-left aligned like
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``; blocks past the
diagonal are skipped, and the grid runs the longest query blocks first.  GQA: ``Hq`` a
multiple of ``Hkv``, query head ``h`` reads key/value head ``h // (Hq // Hkv)``.

Decode (:class:`DecodeAttention`): one query row per (batch, head) against a short cache
(``seqlen_kv`` of 1 to a few hundred).  ``D / 8`` lanes own one (batch, head) row, each lane 8
elements (16-byte loads); every key and value row of a chunk is loaded before the first use
(all loads in flight), dot products reduce over the lane group with ``shfl.xor``, the softmax
is exact per chunk and online across chunks.  bf16 or f16 in, f16 (or the input type) out.

As in :mod:`kernels.cuda_gemm`, the shared-memory tiles are swizzles found and proved
conflict-free by :mod:`layoutalg.verify` under :func:`mfma_specs.nvidia.smem_model`, the
copy partitions are proved to cover their tiles, the ``ldmatrix`` paths are proved against the
``mma`` fragment layouts, and every printed address is a ``layoutalg`` layout printed by
``to_c`` and checked point by point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg import ComposedLayout, Layout
from layoutalg.verify import coverage, lane_correctness
from mfma_specs.nvidia import ldmatrix, mma_m16n8k16

from . import layout_c as lc
from .builder import TORCH_DT as _TORCH_DT, CompiledKernel, dtype_name as _dt_name
from .builder import short_dtype
from .prelude import MMA, PACK, source_head
from .gemm import (GemmConfigError, c_layout, copy_plan, lane_bases, ldm_partition,
                        search_swizzle, swz_fn, swz_split, swz_step)
from ..errors import LaunchError
from ..runtime.rocm import TensorSpec

__all__ = ["FlashConfig", "FlashAttention", "FLASH_DEFAULTS", "DecodeConfig",
           "DecodeAttention", "decode_attention", "AttentionConfigError", "plan_flash",
           "emit_flash", "emit_decode"]


class AttentionConfigError(GemmConfigError):
    """A configuration the attention builders cannot build."""


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise AttentionConfigError(msg)


# =========================================================================== prefill

@dataclass(frozen=True)
class FlashConfig:
    dtype: str = "f16"        # "f16" or "bf16" (q, k, v and out)
    head_dim: int = 128
    bm: int = 128             # query rows per block
    bn: int = 64              # key rows per iteration
    warps: int = 4
    causal: bool = False
    q_in_regs: bool = False   # keep Q fragments in registers (mt == 1 only, costs 2*D/4 regs)
    fast_copy: bool = True    # predicate-free K/V copies for blocks inside the sequence
    min_blocks: int = 1
    arch: str = "sm_90"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def rpw(self) -> int:
        return self.bm // self.warps

    @property
    def mt(self) -> int:
        return self.rpw // 16

    @property
    def smem_bytes(self) -> int:
        return (self.bm + 4 * self.bn) * self.head_dim * 2

    @property
    def name(self) -> str:
        return (f"lg_flash_{self.dtype}_d{self.head_dim}_{self.bm}x{self.bn}_w{self.warps}"
                f"{'_causal' if self.causal else ''}{'_qreg' if self.q_in_regs else ''}"
                f"{'_fc' if self.fast_copy else ''}")


@dataclass
class FlashPlan:
    cfg: FlashConfig
    q_copy: Any
    kv_copy: Any
    q_read: Layout
    k_read: Layout
    v_read: Layout
    sw_q: Any
    sw_k: Any
    sw_v: Any
    checks: Dict[str, Any] = field(default_factory=dict)

    def describe(self) -> Dict[str, str]:
        d = self.cfg.head_dim
        out = {}
        for n, sw, rows in (("Q", self.sw_q, self.cfg.bm), ("K", self.sw_k, self.cfg.bn),
                            ("V", self.sw_v, self.cfg.bn)):
            out[f"{n} smem"] = f"{sw} o 0 o ({rows},{d}):({d},1)"
        out.update({"Q ldmatrix": str(self.q_read), "K ldmatrix": str(self.k_read),
                    "V ldmatrix.trans": str(self.v_read)})
        out.update({k: v.summary() for k, v in self.checks.items()})
        return out


def _flat(sw, size):
    flat = Layout(size, 1)
    return ComposedLayout(sw, 0, flat) if sw is not None else flat


def _tile(sw, rows, cols, row_major=True):
    t = Layout((rows, cols), (cols, 1) if row_major else (1, rows))
    return ComposedLayout(sw, 0, t) if sw is not None else t


@lru_cache(maxsize=64)
def plan_flash(cfg: FlashConfig) -> FlashPlan:
    d, bm, bn = cfg.head_dim, cfg.bm, cfg.bn
    _need(cfg.dtype in ("f16", "bf16"), f"dtype must be f16 or bf16, got {cfg.dtype!r}")
    _need(d in (64, 128, 256), f"head_dim must be 64, 128 or 256, got {d}")
    _need(cfg.rpw in (16, 32), f"bm / warps = {cfg.rpw} rows per warp; must be 16 or 32")
    _need(bn % 16 == 0 and bn & (bn - 1) == 0, f"bn={bn} must be a power of two >= 16")
    _need(not cfg.q_in_regs or cfg.mt == 1, "q_in_regs needs 16 rows per warp")
    _need(cfg.smem_bytes <= 227 * 1024, f"{cfg.smem_bytes} bytes of shared memory > 227 KiB")
    T = cfg.threads
    for rows in (bm, bn):
        _need(rows * d // 8 % T == 0, f"a {rows}x{d} tile is not a whole number of 16-byte "
              f"vectors per thread ({T} threads)")
    q_copy = copy_plan(bm, d, T, 8)
    kv_copy = copy_plan(bn, d, T, 8)
    kd = d // 16
    q_read = Layout(((8, 2, 2), 8, (kd, cfg.mt, cfg.warps)),
                    ((d, 8 * d, 8), 1, (16, 16 * d, cfg.rpw * d)))
    k_read = Layout(((8, 2, 2), 8, (kd, bn // 16)), ((d, 8, 8 * d), 1, (16, 16 * d)))
    v_read = Layout(((8, 2, 2), 8, (bn // 16, kd)), ((d, 8 * d, 8), 1, (16 * d, 16)))
    sw_q, wq, rq = search_swizzle(bm, d, q_copy.off, q_read, 8)
    sw_k, wk, rk = search_swizzle(bn, d, kv_copy.off, k_read, 8)
    sw_v, wv, rv = search_swizzle(bn, d, kv_copy.off, v_read, 8)
    p = FlashPlan(cfg, q_copy, kv_copy, q_read, k_read, v_read, sw_q, sw_k, sw_v)
    ch = p.checks
    ch.update({"Q cp.async banks": wq, "Q ldmatrix banks": rq, "K cp.async banks": wk,
               "K ldmatrix banks": rk, "V cp.async banks": wv, "V ldmatrix.trans banks": rv,
               "Q copy coverage": coverage(q_copy.off, bm * d),
               "K/V copy coverage": coverage(kv_copy.off, bn * d)})
    spec = mma_m16n8k16(cfg.dtype)
    part = ldm_partition(q_read, ldmatrix(4, False), (0, 0, 0), range(8), kd, 0)
    ch["Q lanes (A of QK^T)"] = lane_correctness(spec, "A", part, lds=_flat(sw_q, bm * d),
                                                 memory=_tile(sw_q, bm, d), steps=kd)
    # K as B of S = Q K^T: B[k = d][n = key] lives at key*d + d_idx
    for half, items in ((0, range(4)), (1, range(4, 8))):
        part = ldm_partition(k_read, ldmatrix(4, False), (0, 0), items, kd, 0)
        ch[f"K lanes (B of QK^T, n8 tile {half})"] = lane_correctness(
            spec, "B", part, lds=_flat(sw_k, bn * d), memory=_tile(sw_k, d, bn, False),
            steps=kd, step=lambda s, h=half: (16 * s, 8 * h))
        # V as B of O = P V: B[k = key][n = d] at key*d + d_idx; k steps are key blocks
        part = ldm_partition(v_read, ldmatrix(4, True), (0, 0), items, bn // 16, 0)
        ch[f"V lanes (B of PV, n8 tile {half})"] = lane_correctness(
            spec, "B", part, lds=_flat(sw_v, bn * d), memory=_tile(sw_v, bn, d),
            steps=bn // 16, step=lambda s, h=half: (16 * s, 8 * h))
    # P: the accumulators of two n8 tiles are the A operand of the next mma, register for
    # register (A item e = C item e & 3 of n8 tile e >> 2); proved on the spec layouts
    ok = all(spec.element("A", l, e) == tuple(np.add(spec.element("C", l, e & 3),
                                                     (0, 8 * (e >> 2), 0)))
             for l in range(32) for e in range(8))
    _need(ok, "mma C fragments of two n8 tiles are not the A fragment (P reuse)")
    for name, r in ch.items():
        if not r.holds:
            raise AttentionConfigError(f"{cfg.name}: {name} does not hold:\n{r}")
    return p


#: the prefill kernels' parameters (both flash kernels take the same arguments)
FLASH_PARAMS = ("const lg_u16* __restrict__ Q, const lg_u16* __restrict__ K, "
                "const lg_u16* __restrict__ V, lg_u16* __restrict__ O, int Sq, int Skv, int group, "
                "long long q_sb, long long q_sh, long long q_ss, long long k_sb, long long k_sh, "
                "long long k_ss, long long v_sb, long long v_sh, long long v_ss, long long o_sb, "
                "long long o_sh, long long o_ss, float scale_log2")


def emit_flash_block(o, cfg: Any) -> None:
    """Print the block's work: query block ``qb`` (longest first when causal), head ``h``,
    batch ``b``, key/value head ``hk`` (GQA), first row ``m0``, the (batch, head) base
    pointers, and ``NB`` key blocks of ``cfg.bn`` (stopping at the diagonal when causal)."""
    if cfg.causal:
        o("  const int qb = gridDim.x - 1 - blockIdx.x;   // longest rows first")
    else:
        o("  const int qb = blockIdx.x;")
    o("  const int h = blockIdx.y, b = blockIdx.z, hk = h / group;")
    o(f"  const int m0 = qb * {cfg.bm};")
    o("  const lg_u16* Qb = Q + b * q_sb + h * q_sh;")
    o("  const lg_u16* Kb = K + b * k_sb + hk * k_sh;")
    o("  const lg_u16* Vb = V + b * v_sb + hk * v_sh;")
    o("  lg_u16* Ob = O + b * o_sb + h * o_sh;")
    if cfg.causal:
        o(f"  const int n_end = min(Skv, m0 + {cfg.bm});")
    else:
        o("  const int n_end = Skv;")
    o(f"  const int NB = (n_end + {cfg.bn - 1}) / {cfg.bn};")


def emit_flash(cfg: FlashConfig) -> str:
    p = plan_flash(cfg)
    d, bm, bn, T, mt = cfg.head_dim, cfg.bm, cfg.bn, cfg.threads, cfg.mt
    kd, nt, dt = d // 16, bn // 8, d // 8
    tid, lane, w = lc.sym("tid"), lc.sym("lane"), lc.sym("warp")
    mma, pack = MMA[cfg.dtype], PACK[cfg.dtype]
    q_bytes, kv_bytes = bm * d * 2, bn * d * 2
    L = source_head("kernels/cuda_attention.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    o = L.append
    o(swz_fn("lg_swz_q", p.sw_q, bm * d))
    o(swz_fn("lg_swz_k", p.sw_k, bn * d))
    o(swz_fn("lg_swz_v", p.sw_v, bn * d))
    o(f'extern "C" __global__ void __launch_bounds__({T}, {cfg.min_blocks})')
    o(f"{cfg.name}({FLASH_PARAMS}) {{")
    o("  extern __shared__ __align__(128) unsigned char lg_smem[];")
    o("  const lg_u32 sQ = lg_smem_u32(lg_smem);")
    o(f"  const lg_u32 sK = sQ + {q_bytes}, sV = sK + {2 * kv_bytes};")
    o("  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;")
    emit_flash_block(o, cfg)
    # copies: one base row/col/smem offset per thread from the copy layouts, plus per-iteration
    # constants where the swizzle is proved translation-invariant over the iterations
    from .gemm import copy_steps
    for nm, cpl, sw, swz in (("q", p.q_copy, p.sw_q, "lg_swz_q"), ("kv", p.kv_copy, p.sw_k, "lg_swz_k"),
                             ("vv", p.kv_copy, p.sw_v, "lg_swz_v")):
        if nm != "vv":
            o(f"  const int {nm}r = {c_layout(cpl.row, (tid, 0), {tid: T}, nm + ' copy row')};")
            o(f"  const int {nm}c = {c_layout(cpl.col, (tid, 0), {tid: T}, nm + ' copy col')};")
        so = c_layout(cpl.off, (tid, 0, 0), {tid: T}, f"{nm} copy smem")
        o(f"  const lg_u32 {nm}s = 2u * {swz}({so});")
    for i, (dr, dc, ds) in enumerate(copy_steps(p.q_copy, _flat(p.sw_q, bm * d))):
        so = f"qs + {2 * ds}" if ds is not None else \
            f"2u * lg_swz_q({c_layout(p.q_copy.off, (tid, 0, i), {tid: T}, 'Q copy smem')})"
        o(f"  {{ const int r = m0 + qr + {dr}; const bool ok = r < Sq;")
        o(f"    lg_cp_async16(sQ + {so}, ok ? (const void*)(Qb + r * q_ss + qc + {dc}) "
          ": (const void*)Q, ok ? 16 : 0); }")
    for nm, sw, swz, base, ss, sb in (("k", p.sw_k, "lg_swz_k", "Kb", "k_ss", "kvs"),
                                      ("v", p.sw_v, "lg_swz_v", "Vb", "v_ss", "vvs")):
        o(f"  auto load_{nm} = [&](int buf, int n0) {{")
        o(f"    const lg_u32 dst = s{nm.upper()} + buf * {kv_bytes};")
        steps = copy_steps(p.kv_copy, _flat(sw, bn * d))
        if cfg.fast_copy and all(st[2] is not None for st in steps):
            # whole block inside the sequence: no predicates, one running pointer
            o(f"    if (n0 + {bn} <= Skv) {{")
            o(f"      const lg_u16* q = {base} + (long long)(n0 + kvr) * {ss} + kvc;")
            prev = (0, 0)
            for (dr, dc, ds) in steps:
                if (dr, dc) != prev:
                    o(f"      q += {dr - prev[0]} * {ss} + {dc - prev[1]};")
                prev = (dr, dc)
                o(f"      lg_cp_async16_i<{2 * ds}>(dst + {sb}, q);")
            o("      return;\n    }")
        for i, (dr, dc, ds) in enumerate(steps):
            so = f"{sb} + {2 * ds}" if ds is not None else \
                f"2u * {swz}({c_layout(p.kv_copy.off, (tid, 0, i), {tid: T}, 'KV copy smem')})"
            o(f"    {{ const int r = n0 + kvr + {dr}; const bool ok = r < Skv;")
            o(f"      lg_cp_async16(dst + {so}, ok ? (const void*)({base} + r * {ss} + kvc + {dc}) : "
              f"(const void*){base[0]}, ok ? 16 : 0); }}")
        o("  };")
    o("  load_k(0, 0);")
    o("  lg_cp_async_commit();")
    o("  load_v(0, 0);")
    o("  lg_cp_async_commit();")
    q_ld = c_layout(p.q_read, (lane, 0, (0, 0, w)), {lane: 32, w: cfg.warps}, "Q lane offset")
    k_ld = c_layout(p.k_read, (lane, 0, (0, 0)), {lane: 32}, "K lane offset")
    v_ld = c_layout(p.v_read, (lane, 0, (0, 0)), {lane: 32}, "V lane offset")
    o(f"  const int q_ld = {q_ld};")
    o(f"  const int k_ld = {k_ld};")
    o(f"  const int v_ld = {v_ld};")
    o("  const int q_sw = lg_swz_q(q_ld), k_sw = lg_swz_k(k_ld), v_sw = lg_swz_v(v_ld);")
    q_bases = lane_bases(p.q_read, 3, cfg.warps)
    k_bases = lane_bases(p.k_read, 2, 1)
    v_bases = lane_bases(p.v_read, 2, 1)

    def addr(sw, bases, c, sbase, fn, ld_name):
        t = swz_step(sw, bases, c, sbase)
        return t if t is not None else f"{fn}({ld_name} + {c})"

    def split(sw, bases, c, sbase, fn, ld_name, base):
        """(address expression without the immediate, immediate bytes) for constant c."""
        sp = swz_split(sw, bases, c)
        if sp is None:
            return f"{base} + 2u * {fn}({ld_name} + {c})", 0
        lo, hi = sp
        return (f"{base} + 2u * ({sbase} ^ {lo})" if lo else f"{base} + 2u * {sbase}"), 2 * hi
    # accumulator rows/cols from the mma C layout (row g + 8*(e>>1), col 2t + (e&1))
    spec = mma_m16n8k16(cfg.dtype)
    from .gemm import split_rows
    crow, ccol = split_rows(spec.tv_layout("C"), 16)
    o(f"  const int row0 = m0 + warp * {cfg.rpw} + {c_layout(crow, (lane, 0), {lane: 32}, 'C row')};")
    o(f"  const int col0 = {c_layout(ccol, (lane, 0), {lane: 32}, 'C col')};")
    o(f"  float acc[{mt}][{dt}][4];")
    o(f"  float m_i[{mt}][2], l_i[{mt}][2];")
    o(f"  #pragma unroll\n  for (int i = 0; i < {mt}; ++i) {{")
    o(f"    #pragma unroll\n    for (int j = 0; j < {dt}; ++j) acc[i][j][0] = acc[i][j][1] = "
      "acc[i][j][2] = acc[i][j][3] = 0.f;")
    o("    m_i[i][0] = m_i[i][1] = -__int_as_float(0x7f800000); l_i[i][0] = l_i[i][1] = 0.f;\n  }")
    if cfg.q_in_regs:
        o(f"  lg_u32 qa[{kd}][4];")
    o("  for (int j = 0; j < NB; ++j) {")
    o(f"    const int n0 = j * {bn};")
    o("    lg_cp_async_wait<1>();")
    o("    __syncthreads();")
    o(f"    if (j + 1 < NB) load_k((j + 1) & 1, n0 + {bn});")
    o("    lg_cp_async_commit();")
    if cfg.q_in_regs:
        o("    if (j == 0) {")
        for k in range(kd):
            off = p.q_read((0, 0, (k, 0, 0)))
            o(f"      lg_ldmatrix_x4(qa[{k}][0], qa[{k}][1], qa[{k}][2], qa[{k}][3], "
              f"sQ + 2u * {addr(p.sw_q, q_bases, off, 'q_sw', 'lg_swz_q', 'q_ld')});")
        o("    }")
    o(f"    const lg_u32 kbuf = sK + (j & 1) * {kv_bytes}, vbuf = sV + (j & 1) * {kv_bytes};")
    o(f"    float s[{mt}][{nt}][4];")
    o(f"    #pragma unroll\n    for (int i = 0; i < {mt}; ++i)\n    #pragma unroll\n"
      f"    for (int n = 0; n < {nt}; ++n) s[i][n][0] = s[i][n][1] = s[i][n][2] = s[i][n][3] = 0.f;")
    for kk in range(kd):
        o("    {")
        if not cfg.q_in_regs:
            o(f"      lg_u32 qf[{mt}][4];")
            for i in range(mt):
                a, imm = split(p.sw_q, q_bases, p.q_read((0, 0, (kk, i, 0))), "q_sw", "lg_swz_q",
                               "q_ld", "sQ")
                o(f"      lg_ldsm_x4<{imm}>(qf[{i}][0], qf[{i}][1], qf[{i}][2], qf[{i}][3], {a});")
        for n in range(nt // 2):
            a, imm = split(p.sw_k, k_bases, p.k_read((0, 0, (kk, n))), "k_sw", "lg_swz_k", "k_ld",
                           "kbuf")
            o("      { lg_u32 kb[4];")
            o(f"        lg_ldsm_x4<{imm}>(kb[0], kb[1], kb[2], kb[3], {a});")
            for i in range(mt):
                q = f"qa[{kk}]" if cfg.q_in_regs else f"qf[{i}]"
                o(f"        {mma}(s[{i}][{2 * n}], {q}, kb); {mma}(s[{i}][{2 * n + 1}], {q}, kb + 2);")
            o("      }")
        o("    }")
    # mask + online softmax
    o(f"    const bool need_mask = n0 + {bn} > Skv" + (f" || n0 + {bn - 1} > m0" if cfg.causal
                                                      else "") + ";")
    o(f"    #pragma unroll\n    for (int i = 0; i < {mt}; ++i)\n    #pragma unroll\n"
      f"    for (int n = 0; n < {nt}; ++n)\n    #pragma unroll\n    for (int e = 0; e < 4; ++e) {{")
    o("      float x = s[i][n][e];")
    o("      if (need_mask) {")
    o("        const int r = row0 + i * 16 + 8 * (e >> 1), c = n0 + n * 8 + col0 + (e & 1);")
    cond = "c >= Skv" + (" || c > r" if cfg.causal else "")
    o(f"        if ({cond}) x = -__int_as_float(0x7f800000);")
    o("      }")
    o("      s[i][n][e] = x;\n    }")
    o(f"    #pragma unroll\n    for (int i = 0; i < {mt}; ++i)\n    #pragma unroll\n"
      "    for (int hh = 0; hh < 2; ++hh) {")
    o("      float mx = m_i[i][hh];   // raw scores: scale > 0 commutes with max")
    o(f"      #pragma unroll\n      for (int n = 0; n < {nt}; ++n) mx = fmaxf(mx, fmaxf(s[i][n][2 * hh], "
      "s[i][n][2 * hh + 1]));")
    o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));")
    o("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));")
    o("      const float base = mx == -__int_as_float(0x7f800000) ? 0.f : mx * scale_log2;")
    o("      const float alpha = lg_exp2(m_i[i][hh] * scale_log2 - base);")
    o("      m_i[i][hh] = mx;")
    o("      float rs = 0.f;")
    o(f"      #pragma unroll\n      for (int n = 0; n < {nt}; ++n) {{")
    o("        const float p0 = lg_exp2(fmaf(s[i][n][2 * hh], scale_log2, -base));")
    o("        const float p1 = lg_exp2(fmaf(s[i][n][2 * hh + 1], scale_log2, -base));")
    o("        s[i][n][2 * hh] = p0; s[i][n][2 * hh + 1] = p1; rs += p0 + p1;\n      }")
    o("      l_i[i][hh] = l_i[i][hh] * alpha + rs;")
    o(f"      #pragma unroll\n      for (int n = 0; n < {dt}; ++n) {{ acc[i][n][2 * hh] *= alpha; "
      "acc[i][n][2 * hh + 1] *= alpha; }")
    o("    }")
    o("    lg_cp_async_wait<1>();")
    o("    __syncthreads();")
    o(f"    if (j + 1 < NB) load_v((j + 1) & 1, n0 + {bn});")
    o("    lg_cp_async_commit();")
    for kb in range(bn // 16):
        o("    {")
        o(f"      lg_u32 pa[{mt}][4];")
        for i in range(mt):
            o(f"      pa[{i}][0] = {pack}(s[{i}][{2 * kb}][0], s[{i}][{2 * kb}][1]);")
            o(f"      pa[{i}][1] = {pack}(s[{i}][{2 * kb}][2], s[{i}][{2 * kb}][3]);")
            o(f"      pa[{i}][2] = {pack}(s[{i}][{2 * kb + 1}][0], s[{i}][{2 * kb + 1}][1]);")
            o(f"      pa[{i}][3] = {pack}(s[{i}][{2 * kb + 1}][2], s[{i}][{2 * kb + 1}][3]);")
        for n in range(kd):
            a, imm = split(p.sw_v, v_bases, p.v_read((0, 0, (kb, n))), "v_sw", "lg_swz_v", "v_ld",
                           "vbuf")
            o("      { lg_u32 vb[4];")
            o(f"        lg_ldsm_x4_trans<{imm}>(vb[0], vb[1], vb[2], vb[3], {a});")
            for i in range(mt):
                o(f"        {mma}(acc[{i}][{2 * n}], pa[{i}], vb); {mma}(acc[{i}][{2 * n + 1}], pa[{i}], vb + 2);")
            o("      }")
        o("    }")
    o("  }")
    o("  lg_cp_async_wait<0>();")
    o(f"  #pragma unroll\n  for (int i = 0; i < {mt}; ++i)\n  #pragma unroll\n"
      "  for (int hh = 0; hh < 2; ++hh) {")
    o("    float l = l_i[i][hh];")
    o("    l += __shfl_xor_sync(0xffffffffu, l, 1);")
    o("    l += __shfl_xor_sync(0xffffffffu, l, 2);")
    o("    const float inv = l > 0.f ? 1.f / l : 0.f;")
    o("    const int r = row0 + i * 16 + 8 * hh;")
    o("    if (r < Sq) {")
    o("      lg_u16* dst = Ob + r * o_ss + col0;")
    o(f"      #pragma unroll\n      for (int n = 0; n < {dt}; ++n)")
    o(f"        *reinterpret_cast<lg_u32*>(dst + n * 8) = {pack}(acc[i][n][2 * hh] * inv, "
      "acc[i][n][2 * hh + 1] * inv);")
    o("    }\n  }\n}")
    return "\n".join(L) + "\n"


class FlashAttention(CompiledKernel):
    """A compiled prefill configuration: ``fa(q, k, v, out=None, scale=None) -> out``.

    ``q`` (B, Hq, Sq, D), ``k``/``v`` (B, Hkv, Skv, D), any strides with the last dimension
    contiguous and rows 16-byte aligned; ``out`` (B, Hq, Sq, D) like ``q``.
    """

    def __init__(self, cfg: FlashConfig = FlashConfig(), *, backend: str = "auto"):
        self.plan = plan_flash(cfg)
        super().__init__(cfg, emit_flash(cfg), backend)

    def check_args(self, q, k, v, out=None):
        cfg = self.cfg
        dt = _TORCH_DT[cfg.dtype]
        for t, nm in ((q, "q"), (k, "k"), (v, "v")):
            if not hasattr(t, "dim") or t.dim() != 4:
                raise LaunchError(f"{nm} must be a 4-D (batch, heads, seq, head_dim) tensor, got "
                                  f"{getattr(t, 'shape', type(t).__name__)}")
            if _dt_name(t) != dt:
                raise LaunchError(f"{nm}: dtype {_dt_name(t)}, this kernel was built for {dt}")
            if t.shape[3] != cfg.head_dim:
                raise LaunchError(f"{nm}: head_dim {t.shape[3]}, this kernel was built for "
                                  f"{cfg.head_dim}")
            if t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16:
                raise LaunchError(f"{nm}: strides {tuple(t.stride())} at pointer offset "
                                  f"{t.data_ptr() % 16} B: the head dimension must be contiguous "
                                  "and every row 16-byte aligned (strides multiples of 8)")
        B, Hq, Sq, D = q.shape
        if tuple(k.shape) != tuple(v.shape):
            raise LaunchError(f"k {tuple(k.shape)} and v {tuple(v.shape)} differ")
        if k.shape[0] != B:
            raise LaunchError(f"batch: q has {B}, k/v have {k.shape[0]}")
        Hkv, Skv = k.shape[1], k.shape[2]
        if Hkv < 1 or Hq % Hkv:
            raise LaunchError(f"q has {Hq} heads, k/v {Hkv}: GQA needs Hq a multiple of Hkv")
        if min(B, Hq, Sq, Skv) < 1:
            raise LaunchError(f"empty attention: q {tuple(q.shape)}, k {tuple(k.shape)}")
        if Hq >= 65536 or B >= 65536:
            raise LaunchError(f"heads {Hq} / batch {B} must be below 65536 (grid y/z)")
        if out is not None:
            if tuple(out.shape) != tuple(q.shape) or _dt_name(out) != dt or out.stride(3) != 1 \
                    or any(s % 2 for s in out.stride()[:3]) or out.data_ptr() % 4:
                raise LaunchError(f"out must be a {tuple(q.shape)} {dt} tensor with contiguous "
                                  f"rows, got {tuple(out.shape)} {out.dtype} strides "
                                  f"{tuple(out.stride())}")
        return B, Hq, Sq, Hkv, Skv

    def __call__(self, q, k, v, out=None, scale: Optional[float] = None):
        return self.bound(q, k, v, out, scale)(q, k, v, out)

    def bind(self, q, k, v, out=None, scale: Optional[float] = None):
        """Check the arguments; ``run(q, k, v, out)`` for every call with their ``call_key``
        (``scale`` is part of it)."""
        import torch
        from ..runtime.cuda import LaunchSite
        B, Hq, Sq, Hkv, Skv = self.check_args(q, k, v, out)
        cfg = self.cfg
        scale = 1.0 / math.sqrt(cfg.head_dim) if scale is None else float(scale)
        if not scale > 0 or not math.isfinite(scale):
            raise LaunchError(f"scale must be a positive finite number, got {scale}")
        grid = self.launch_grid(B, Hq, Sq, q.device)
        more = self.launch_extras(q, k, v)      # per call: the TMA maps follow the pointers
        site = LaunchSite(self.module, cfg.name, grid, cfg.threads,
                          signature=("ptr",) * 4 + ("i32",) * 3 + ("i64",) * 12 + ("f32",)
                          + tuple(s for _, s, _ in more),
                          specs=[TensorSpec(strides=())] * 4 + [None] * 16
                          + [sp for _, _, sp in more],
                          smem_bytes=cfg.smem_bytes)
        head = [Sq, Skv, Hq // Hkv] + [t.stride(d) for t in (q, k, v) for d in range(3)]
        log2_scale = scale * math.log2(math.e)
        extras = self.launch_extras if more else (lambda q, k, v: ())

        def run(q, k, v, out):
            if out is None:
                out = torch.empty_like(q, memory_format=torch.contiguous_format)
            site([q, k, v, out, *head, out.stride(0), out.stride(1), out.stride(2),
                  log2_scale, *(a for a, _, _ in extras(q, k, v))])
            return out
        return run

    def launch_grid(self, B: int, Hq: int, Sq: int, device: Any) -> Tuple[int, int, int]:
        """One block per (query block, head, batch); a persistent kernel overrides it."""
        return (-(-Sq // self.cfg.bm), Hq, B)

    def launch_extras(self, q, k, v) -> List[Tuple[Any, str, Any]]:
        """Arguments a kernel takes after the common prefill parameters, as (value, signature
        kind, TensorSpec or None); none here (the TMA prefill adds its tensor maps)."""
        return []


FLASH_DEFAULTS = {64: dict(bm=128, bn=64, warps=4), 128: dict(bm=128, bn=64, warps=4),
                  256: dict(bm=64, bn=32, warps=4)}



# =========================================================================== decode

@dataclass(frozen=True)
class DecodeConfig:
    in_dtype: str = "bf16"     # q, k, v
    out_dtype: str = "f16"
    head_dim: int = 128
    chunk: int = 16            # keys loaded per round (all in flight before the first use)
    warps: int = 8
    arch: str = "sm_90"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def lanes_per_row(self) -> int:
        return self.head_dim // 8

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.lanes_per_row

    @property
    def name(self) -> str:
        return (f"lg_decode_{self.in_dtype}_{self.out_dtype}_d{self.head_dim}_c{self.chunk}"
                f"_w{self.warps}")


def emit_decode(cfg: DecodeConfig) -> str:
    _need(cfg.in_dtype in ("f16", "bf16") and cfg.out_dtype in ("f16", "bf16"),
          "decode dtypes must be f16 or bf16")
    _need(cfg.head_dim in (64, 128, 256), f"head_dim must be 64, 128 or 256, got {cfg.head_dim}")
    _need(cfg.chunk in (1, 2, 4, 8, 16, 32), f"chunk={cfg.chunk} must be a power of two <= 32")
    G = cfg.lanes_per_row
    # lane -> (row in block, element offset): G lanes per row, 8 contiguous elements each
    lane_row = Layout((G, cfg.threads // G), (0, 1))
    lane_col = Layout((G, cfg.threads // G), (8, 0))
    tid = lc.sym("tid")
    rr = c_layout(lane_row, tid, {tid: cfg.threads}, "decode row")
    cc = c_layout(lane_col, tid, {tid: cfg.threads}, "decode col")
    _need(coverage(Layout(((G, cfg.threads // G), 8), ((8, cfg.head_dim), 1)),
                   cfg.rows_per_block * cfg.head_dim).holds, "decode partition coverage")
    lo, hi = ("lg_bf16_lo", "lg_bf16_hi") if cfg.in_dtype == "bf16" else ("lg_f16_lo", "lg_f16_hi")
    pack = PACK[cfg.out_dtype]
    C = cfg.chunk
    L = source_head("kernels/cuda_attention.py", cfg.name,
                    [f"lane -> row {lane_row}, lane -> element {lane_col} (+0..7), {G} lanes per "
                     "row"])
    o = L.append
    o("LG_DEV lg_u32x4 lg_ld_stream(const lg_u16* p) {")
    o("  lg_u32x4 r;")
    o('  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\\n"')
    o('               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));')
    o("  return r;\n}")
    o("LG_DEV void lg_unpack8(const lg_u32x4& v, float* f) {")
    o(f"  f[0] = {lo}(v.x); f[1] = {hi}(v.x); f[2] = {lo}(v.y); f[3] = {hi}(v.y);")
    o(f"  f[4] = {lo}(v.z); f[5] = {hi}(v.z); f[6] = {lo}(v.w); f[7] = {hi}(v.w);\n}}")
    o(f'extern "C" __global__ void __launch_bounds__({cfg.threads})')
    o(f"{cfg.name}(const lg_u16* __restrict__ Q, const lg_u16* __restrict__ K, "
      "const lg_u16* __restrict__ V, lg_u16* __restrict__ O, int rows, int Hq, int group, "
      "int Skv, long long q_sb, long long q_sh, long long k_sb, long long k_sh, long long k_ss, "
      "long long v_sb, long long v_sh, long long v_ss, long long o_sb, long long o_sh, "
      "float scale_log2) {")
    o("  const int tid = threadIdx.x;")
    o(f"  const int row = blockIdx.x * {cfg.rows_per_block} + {rr};")
    o(f"  const int col = {cc};")
    o("  const bool live = row < rows;   // no early exit: the shuffles need every lane")
    o("  const int b = (live ? row : rows - 1) / Hq, h = (live ? row : rows - 1) - b * Hq;")
    o("  const int hk = h / group;")
    o("  float q[8];")
    o("  lg_unpack8(lg_ld_stream(Q + b * q_sb + h * q_sh + col), q);")
    o("  const lg_u16* Kp = K + b * k_sb + hk * k_sh + col;")
    o("  const lg_u16* Vp = V + b * v_sb + hk * v_sh + col;")
    o("  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};")
    o("  float m = -__int_as_float(0x7f800000), l = 0.f;")
    o(f"  for (int c0 = 0; c0 < Skv; c0 += {C}) {{")
    o(f"    lg_u32x4 kv[{C}], vv[{C}];")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o("      const int t = c0 + s < Skv ? c0 + s : Skv - 1;")
    o("      kv[s] = lg_ld_stream(Kp + t * k_ss);")
    o("      vv[s] = lg_ld_stream(Vp + t * v_ss);\n    }")
    o(f"    float sc[{C}];")
    o("    float mx = m;")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o("      float kf[8]; lg_unpack8(kv[s], kf);")
    o("      float d = 0.f;")
    o("      #pragma unroll\n      for (int e = 0; e < 8; ++e) d = fmaf(q[e], kf[e], d);")
    for sh in [1 << i for i in range(int(math.log2(G)))]:
        o(f"      d += __shfl_xor_sync(0xffffffffu, d, {sh});")
    o("      sc[s] = c0 + s < Skv ? d * scale_log2 : -__int_as_float(0x7f800000);")
    o("      mx = fmaxf(mx, sc[s]);\n    }")
    o("    const float alpha = lg_exp2(m - mx);")
    o("    m = mx;")
    o("    l *= alpha;")
    o("    #pragma unroll\n    for (int e = 0; e < 8; ++e) acc[e] *= alpha;")
    o(f"    #pragma unroll\n    for (int s = 0; s < {C}; ++s) {{")
    o("      const float p = lg_exp2(sc[s] - mx);")
    o("      l += p;")
    o("      float vf[8]; lg_unpack8(vv[s], vf);")
    o("      #pragma unroll\n      for (int e = 0; e < 8; ++e) acc[e] = fmaf(p, vf[e], acc[e]);\n    }")
    o("  }")
    o("  const float inv = 1.f / l;")
    o("  lg_u32x4 r;")
    o(f"  r.x = {pack}(acc[0] * inv, acc[1] * inv); r.y = {pack}(acc[2] * inv, acc[3] * inv);")
    o(f"  r.z = {pack}(acc[4] * inv, acc[5] * inv); r.w = {pack}(acc[6] * inv, acc[7] * inv);")
    o("  if (live) *reinterpret_cast<lg_u32x4*>(O + b * o_sb + h * o_sh + col) = r;")
    o("}")
    return "\n".join(L) + "\n"


class DecodeAttention(CompiledKernel):
    """``dec(q, k, v, out=None, scale=None)``: ``q`` (B, Hq, 1, D) or (B, Hq, D), ``k``/``v``
    (B, Hkv, Skv, D); ``out`` like ``q`` in ``cfg.out_dtype``."""

    def __init__(self, cfg: DecodeConfig = DecodeConfig(), *, backend: str = "auto"):
        super().__init__(cfg, emit_decode(cfg), backend)

    def check_args(self, q, k, v, out=None):
        cfg = self.cfg
        dt = _TORCH_DT[cfg.in_dtype]
        if not hasattr(q, "dim") or q.dim() not in (3, 4) or (q.dim() == 4 and q.shape[2] != 1):
            raise LaunchError(f"q must be (batch, heads, 1, head_dim) or (batch, heads, head_dim), "
                              f"got {getattr(q, 'shape', type(q).__name__)}")
        for t, nm in ((q, "q"), (k, "k"), (v, "v")):
            if _dt_name(t) != dt:
                raise LaunchError(f"{nm}: dtype {_dt_name(t)}, this kernel was built for {dt}")
            if t.shape[-1] != cfg.head_dim:
                raise LaunchError(f"{nm}: head_dim {t.shape[-1]}, this kernel was built for "
                                  f"{cfg.head_dim}")
            if t.stride(-1) != 1 or any(s % 8 for s in t.stride()[:-1]) or t.data_ptr() % 16:
                raise LaunchError(f"{nm}: strides {tuple(t.stride())}: the head dimension must be "
                                  "contiguous and rows 16-byte aligned")
        for t, nm in ((k, "k"), (v, "v")):
            if t.dim() != 4:
                raise LaunchError(f"{nm} must be (batch, kv_heads, seqlen_kv, head_dim), got "
                                  f"{tuple(t.shape)}")
        if tuple(k.shape) != tuple(v.shape):
            raise LaunchError(f"k {tuple(k.shape)} and v {tuple(v.shape)} differ")
        B, Hq = q.shape[0], q.shape[1]
        Hkv, Skv = k.shape[1], k.shape[2]
        if k.shape[0] != B:
            raise LaunchError(f"batch: q has {B}, k/v have {k.shape[0]}")
        if Hkv < 1 or Hq % Hkv:
            raise LaunchError(f"q has {Hq} heads, k/v {Hkv}: GQA needs Hq a multiple of Hkv")
        if Skv < 1:
            raise LaunchError("seqlen_kv must be at least 1")
        if B * Hq >= 2 ** 31:
            raise LaunchError("batch * heads must fit in 31 bits")
        if out is not None:
            odt = _TORCH_DT[cfg.out_dtype]
            if tuple(out.shape) != tuple(q.shape) or _dt_name(out) != odt or \
                    out.stride(-1) != 1 or any(s % 8 for s in out.stride()[:-1]) or \
                    out.data_ptr() % 16:
                raise LaunchError(f"out must be a {tuple(q.shape)} {odt} tensor with 16-byte "
                                  f"aligned contiguous rows, got {tuple(out.shape)} {out.dtype}")
        return B, Hq, Hkv, Skv

    def __call__(self, q, k, v, out=None, scale: Optional[float] = None):
        import torch
        from ..runtime.cuda import launch
        B, Hq, Hkv, Skv = self.check_args(q, k, v, out)
        cfg = self.cfg
        if out is None:
            out = torch.empty(q.shape, dtype=getattr(torch, _TORCH_DT[cfg.out_dtype]),
                              device=q.device)
        scale = 1.0 / math.sqrt(cfg.head_dim) if scale is None else float(scale)
        rows = B * Hq
        grid = -(-rows // cfg.rows_per_block)
        args = [q, k, v, out, rows, Hq, Hq // Hkv, Skv, q.stride(0), q.stride(1),
                k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                out.stride(0), out.stride(1), scale * math.log2(math.e)]
        sig = ("ptr",) * 4 + ("i32",) * 4 + ("i64",) * 10 + ("f32",)
        launch(self.module, cfg.name, grid, cfg.threads, args, signature=sig,
               specs=[TensorSpec(strides=())] * 4 + [None] * 15)
        return out


_DECODE: Dict[DecodeConfig, DecodeAttention] = {}


def decode_attention(q, k, v, *, out_dtype: Optional[str] = None, scale: Optional[float] = None,
                     out=None, config: Optional[DecodeConfig] = None):
    """One decode step: ``softmax(q k^T * scale) v`` per (batch, head)."""
    dt = short_dtype(q)
    if dt is None:
        raise LaunchError(f"q: dtype {q.dtype}; the decode kernel takes float16 or bfloat16")
    if config is None:
        skv = k.shape[2] if k.dim() == 4 else 1
        chunk = 1
        while chunk < min(skv, 16):
            chunk *= 2
        od = {None: "f16", "f16": "f16", "float16": "f16", "bf16": "bf16",
              "bfloat16": "bf16"}.get(out_dtype)
        if od is None:
            raise LaunchError(f"out_dtype must be 'f16' or 'bf16', got {out_dtype!r}")
        config = DecodeConfig(in_dtype=dt, out_dtype=od, head_dim=q.shape[-1], chunk=chunk)
    dec = _DECODE.get(config)
    if dec is None:
        dec = _DECODE[config] = DecodeAttention(config)
    return dec(q, k, v, out=out, scale=scale)
