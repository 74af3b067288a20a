"""Flash-attention forward for NVIDIA Hopper (``sm_90a``) on ``wgmma``.

The same contract as :class:`kernels.cuda_attention.FlashAttention` (``(B, H, S, D)`` tensors,
GQA, top-left causal mask, the same arguments and checks), on the warpgroup MMA: a block of
``warpgroups`` x 64 query rows; per key block of ``bn`` rows, each warpgroup computes
``S = Q K^T`` with ``wgmma.m64n{bn}k16`` reading Q and K from shared memory, runs the online
softmax on the S accumulator registers, converts ``P`` to 16 bits in registers and accumulates
``O += P V`` with ``wgmma.m64n{D}k16`` taking A (``P``) from registers and V (N-major) from
shared memory.  K and V blocks are double-buffered (``cp.async``, zero-filled past the
sequence); no TMA, no warp specialisation, no overlap of softmax and MMA inside a warpgroup.

Proved before the source is printed (:func:`plan_wgmma_flash`):

* every copy covers its tile once and its 16-byte writes are bank-conflict-free;
* for Q, K and V, every warpgroup and k step, the descriptor's read address of each operand
  element equals the address the copy wrote it to (:func:`kernels.cuda_wgmma.check_descriptor`);
* ``P``: for every thread, k step and A register item, the S accumulator register packed into
  it holds the (row, key) the register-A fragment layout expects
  (:meth:`mfma_specs.nvidia_wgmma.Wgmma.layout_a` against ``layout_c``);
* the softmax rows/columns and the output rows/columns are printed from ``layout_c`` and
  checked at every thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, Optional

import numpy as np

from layoutalg.verify import CheckResult, bank_conflicts, coverage
from layoutalg.verify._access import eval_at
from mfma_specs.nvidia import smem_model
from mfma_specs.nvidia_wgmma import wgmma

from . import layout_c as lc
from .prelude import PACK, source_head
from .attention import (FLASH_PARAMS, AttentionConfigError, FlashAttention,
                             emit_flash_block)
from .gemm import c_layout, swz_fn
from .wgmma import (STAGE_ALIGN, HELPERS, Operand, accumulator_rows_cols, check_descriptor,
                         emit_copy_base, kmajor_operand, mnmajor_operand, proved, wgmma_wrapper)

__all__ = ["WgmmaFlashConfig", "WgmmaFlashPlan", "plan_wgmma_flash", "emit_wgmma_flash",
           "WgmmaFlashAttention", "WGMMA_FLASH_DEFAULTS"]


@dataclass(frozen=True)
class WgmmaFlashConfig:
    dtype: str = "f16"        # "f16" or "bf16" (q, k, v and out)
    head_dim: int = 128       # 64, 128 or 256 (256: warpgroups=2, bn=64 fits)
    warpgroups: int = 2       # 64 query rows each
    bn: int = 128             # key rows per iteration (a multiple of 16, at most 256)
    causal: bool = False
    overlap: bool = True      # softmax of block j while P V of block j - 1 runs
    arch: str = "sm_90a"

    @property
    def bm(self) -> int:
        return 64 * self.warpgroups

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups

    @property
    def q_bytes(self) -> int:
        return self.bm * self.head_dim * 2

    @property
    def kv_bytes(self) -> int:
        return self.bn * self.head_dim * 2

    @property
    def smem_bytes(self) -> int:
        return self.q_bytes + 4 * self.kv_bytes + STAGE_ALIGN

    @property
    def name(self) -> str:
        return (f"lg_wgflash_{self.dtype}_d{self.head_dim}_{self.bm}x{self.bn}"
                + ("" if self.overlap else "_serial") + ("_causal" if self.causal else ""))


WGMMA_FLASH_DEFAULTS = {64: dict(warpgroups=2, bn=128), 128: dict(warpgroups=2, bn=128),
                        256: dict(warpgroups=2, bn=64)}   # per-shape choice: prefill_select


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise AttentionConfigError(msg)


def _validate(cfg: WgmmaFlashConfig) -> None:
    _need(cfg.dtype in ("f16", "bf16"), f"dtype must be 'f16' or 'bf16', got {cfg.dtype!r}")
    _need(cfg.head_dim in (64, 128, 256), f"head_dim={cfg.head_dim}: the wgmma kernel takes 64, "
          "128 or 256")
    _need(cfg.warpgroups in (1, 2, 3), f"warpgroups={cfg.warpgroups}: 1, 2 or 3")
    _need(cfg.bn % 64 == 0 and 64 <= cfg.bn <= 256, f"bn={cfg.bn}: a multiple of 64 in 64..256 "
          "(the S = Q K^T wgmma N)")
    _need(cfg.arch.startswith("sm_90") and cfg.arch.endswith("a"),
          f"arch={cfg.arch!r}: wgmma needs 'sm_90a'")
    _need(cfg.smem_bytes <= 227 * 1024, f"{cfg.smem_bytes} bytes of shared memory; sm_90 "
          "allows 227 KiB per block")
    for rows, what in ((cfg.bm, "Q"), (cfg.bn, "K/V")):
        _need(rows * cfg.head_dim // 8 % cfg.threads == 0,
              f"{what} tile {rows}x{cfg.head_dim} has {rows * cfg.head_dim // 8} 16-byte vectors, "
              f"not a multiple of {cfg.threads} threads: choose bn / warpgroups that divide")


@dataclass
class WgmmaFlashPlan:
    cfg: WgmmaFlashConfig
    q: Operand
    k: Operand
    v: Operand
    checks: Dict[str, Any] = field(default_factory=dict)

    def describe(self) -> Dict[str, str]:
        out = {}
        for op in (self.q, self.k, self.v):
            out[f"{op.name} smem"] = str(op.smem)
            out[f"{op.name} descriptor"] = (f"{op.major}-major, swizzle {op.desc.swizzle_width} B, "
                                            f"LBO {op.desc.lbo} B, SBO {op.desc.sbo} B")
        out.update({k: v.summary() for k, v in self.checks.items()})
        return out


def p_item(s: int, e: int) -> int:
    """The S accumulator register (of ``wgmma m64n{bn}``) packed into A item ``e`` of k step
    ``s`` of the ``P V`` product: items ``4j .. 4j+3`` are columns ``8j ..`` of rows g, g+8."""
    return 4 * (2 * s + (e >> 2)) + (e & 3)


def _check_p_fragment(cfg: WgmmaFlashConfig) -> CheckResult:
    """For every thread, k step and A item: the S register packed there holds the (row, key)
    the register-A layout expects."""
    s_atom, a_atom = wgmma(cfg.dtype, cfg.bn), wgmma(cfg.dtype, cfg.head_dim)
    n = 0
    for t in range(128):
        for s in range(cfg.bn // 16):
            for e in range(8):
                row, k = a_atom.element_a(t, e)
                got = s_atom.element_c(t, p_item(s, e))
                if got != (row, 16 * s + k):
                    raise AttentionConfigError(
                        f"{cfg.name}: thread {t}, k step {s}, A item {e} expects P[{row}]"
                        f"[{16 * s + k}] but S register {p_item(s, e)} holds P{got}")
                n += 1
    return proved(f"P: S registers == register-A fragment at all {n} (thread, k step, item) "
                  "points", "every thread, k step and A register item")


@lru_cache(maxsize=32)
def plan_wgmma_flash(cfg: WgmmaFlashConfig) -> WgmmaFlashPlan:
    """Layouts, descriptors and proofs of one configuration (cached)."""
    _validate(cfg)
    d, T = cfg.head_dim, cfg.threads
    q = kmajor_operand("Q", cfg.bm, d, T, wg_rows=64)
    k = kmajor_operand("K", cfg.bn, d, T)        # B of S = Q K^T: n = keys, k = head dim
    v = mnmajor_operand("V", cfg.bn, d, T)       # B of O = P V: k = keys, n = head dim
    plan = WgmmaFlashPlan(cfg, q, k, v)
    ch = plan.checks
    wmodel = smem_model("cp.async.16")
    for op in (q, k):                            # V's copy and layout are K's
        ch[f"{op.name} copy coverage"] = coverage(op.copy.off, op.rows * op.cols)
        ch[f"{op.name} cp.async banks"] = bank_conflicts(op.copy.off, lds=op.smem, model=wmodel,
                                                         elem_bytes=2)
    idx = np.arange(cfg.bn * d)
    _need(np.array_equal(eval_at(v.smem, idx), eval_at(k.smem, idx))
          and v.copy_consts == k.copy_consts,
          "K and V tiles must share one layout and copy (one load routine, two buffers)")
    ch["Q descriptors"] = check_descriptor(q, cfg, cfg.warpgroups, 64)
    ch["K descriptors"] = check_descriptor(k, cfg, 1, cfg.bn)
    ch["V descriptors"] = check_descriptor(v, cfg, 1, d)
    ch["P fragment"] = _check_p_fragment(cfg)
    for nbytes in (cfg.q_bytes, cfg.kv_bytes):
        _need(nbytes % STAGE_ALIGN == 0, f"a {nbytes}-byte tile breaks the 1024-byte stage alignment")
    for name, r in ch.items():
        if not r.holds:
            raise AttentionConfigError(f"{cfg.name}: {name} does not hold:\n{r}")
    return plan


# --------------------------------------------------------------------------- emission

def emit_wgmma_flash(cfg: WgmmaFlashConfig) -> str:
    p = plan_wgmma_flash(cfg)
    d, bm, bn, T = cfg.head_dim, cfg.bm, cfg.bn, cfg.threads
    pack = PACK[cfg.dtype]
    L = source_head("kernels/cuda_wgmma_attention.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    o = L.append
    o(HELPERS)
    o(wgmma_wrapper("lg_wgmma_qk", cfg.dtype, bn, 0))
    o(wgmma_wrapper("lg_wgmma_pv", cfg.dtype, d, 1, a_regs=True))
    o(swz_fn("lg_swz_q", p.q.smem.outer, bm * d))
    o(swz_fn("lg_swz_kv", p.k.smem.outer, bn * d))
    o(f'extern "C" __global__ void __launch_bounds__({T}, 1)')
    o(f"{cfg.name}({FLASH_PARAMS}) {{")
    o("  extern __shared__ __align__(1024) unsigned char lg_smem[];")
    o(f"  const lg_u32 sQ = (lg_smem_u32(lg_smem) + {STAGE_ALIGN - 1}u) & ~{STAGE_ALIGN - 1}u;")
    o(f"  const lg_u32 sK = sQ + {cfg.q_bytes}, sV = sK + {2 * cfg.kv_bytes};")
    o("  const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127;")
    emit_flash_block(o, cfg)
    for op, nm in ((p.q, "q"), (p.k, "kv")):
        emit_copy_base(o, op, nm, T)
    for dr, dc, ds in p.q.copy_consts:
        o(f"  {{ const int r = m0 + qr + {dr}; const bool ok = r < Sq;")
        o(f"    lg_cp_async16(sQ + qs + {2 * ds}, ok ? (const void*)(Qb + r * q_ss + qc + {dc}) "
          ": (const void*)Q, ok ? 16 : 0); }")
    for nm, base, ss in (("k", "Kb", "k_ss"), ("v", "Vb", "v_ss")):
        o(f"  auto load_{nm} = [&](int buf, int n0) {{")
        o(f"    const lg_u32 dst = s{nm.upper()} + buf * {cfg.kv_bytes} + kvs;")
        o(f"    if (n0 + {bn} <= Skv) {{   // the whole block inside the sequence: no predicates")
        o(f"      const lg_u16* src = {base} + (long long)(n0 + kvr) * {ss} + kvc;")
        for dr, dc, ds in p.k.copy_consts:
            o(f"      lg_cp_async16_i<{2 * ds}>(dst, src + {dr} * {ss} + {dc});")
        o("      return;\n    }")
        for dr, dc, ds in p.k.copy_consts:
            o(f"    {{ const int r = n0 + kvr + {dr}; const bool ok = r < Skv;")
            o(f"      lg_cp_async16(dst + {2 * ds}, ok ? (const void*)({base} + r * {ss} + kvc + "
              f"{dc}) : (const void*){base[0]}, ok ? 16 : 0); }}")
        o("  };")
    for op, nm, base in ((p.q, "q", "sQ + wg * %d" % p.q.wg_step), (p.k, "k", "sK"),
                         (p.v, "v", "sV")):
        o(f"  const lg_u64 {nm}desc = 0x{op.desc.constant_bits():016x}ull | "
          f"(lg_u64)((({base}) & 0x3FFFF) >> 4);   // {op.desc}")
    crow, ccol = accumulator_rows_cols(d)
    tt = lc.sym("t")
    o(f"  const int row0 = m0 + wg * 64 + {c_layout(crow, (tt, 0), {tt: 128}, 'C row')};")
    o(f"  const int col0 = {c_layout(ccol, (tt, 0), {tt: 128}, 'C col')};")
    accumulator_rows_cols(bn)   # S is read with the same (row, col) pattern over bn columns
    inf = "__int_as_float(0x7f800000)"
    o(f"  float acc[{d // 2}], m_i[2] = {{-{inf}, -{inf}}}, l_i[2] = {{0.f, 0.f}};")
    o(f"  #pragma unroll\n  for (int i = 0; i < {d // 2}; ++i) acc[i] = 0.f;")
    o(f"  float s[{bn // 2}], alpha[2];")
    o(f"  lg_u32 pa[{bn // 16}][4];")

    def sync_loads(wait: int, what: str) -> None:
        o(f"    lg_cp_async_wait<{wait}>();            // {what} landed")
        o("    lg_fence_proxy_async();")
        o("    __syncthreads();")

    def issue_qk(buf: str) -> None:          # S = Q K_buf^T (s overwritten); buf: a C expression
        for st, (qs, ks) in enumerate(zip(p.q.k_starts, p.k.k_starts)):
            o(f"    lg_wgmma_qk(s, qdesc + {qs >> 4}, kdesc + ((({buf}) * {cfg.kv_bytes} + {ks}) "
              f">> 4), {0 if st == 0 else 1});")

    def issue_pv(buf: str) -> None:          # acc += P V_buf
        for st, vs in enumerate(p.v.k_starts):
            o(f"    lg_wgmma_pv(acc, pa[{st}], vdesc + ((({buf}) * {cfg.kv_bytes} + {vs}) >> 4));")

    def softmax(n0: str) -> None:
        """Mask S (key block at n0), new row max, P = exp2 in place, l update; the
        accumulator's rescale factor is left in alpha[hh] (applied by rescale())."""
        o(f"    const bool need_mask = {n0} + {bn} > Skv" +
          (f" || {n0} + {bn - 1} > m0" if cfg.causal else "") + ";")
        o("    if (need_mask) {")
        o(f"      #pragma unroll\n      for (int i = 0; i < {bn // 2}; ++i) {{")
        o(f"        const int r = row0 + 8 * ((i >> 1) & 1), c = {n0} + col0 + 8 * (i >> 2) + (i & 1);")
        cond = "c >= Skv" + (" || c > r" if cfg.causal else "")
        o(f"        if ({cond}) s[i] = -{inf};")
        o("      }\n    }")
        o("    #pragma unroll\n    for (int hh = 0; hh < 2; ++hh) {")
        o("      float mx = m_i[hh];   // raw scores: scale > 0 commutes with max")
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

    def rescale() -> None:
        o("    #pragma unroll\n    for (int hh = 0; hh < 2; ++hh)")
        o(f"    #pragma unroll\n    for (int jj = 0; jj < {d // 8}; ++jj) {{ acc[4 * jj + 2 * hh] *= "
          "alpha[hh]; acc[4 * jj + 2 * hh + 1] *= alpha[hh]; }")

    def pack_p() -> None:
        # register r of k step st holds A items 2r, 2r+1 = S items p_item(st, 2r), p_item(st, 2r+1)
        o(f"    #pragma unroll\n    for (int st = 0; st < {bn // 16}; ++st) {{")
        for r in range(4):
            lo, hi = p_item(0, 2 * r), p_item(0, 2 * r + 1)
            o(f"      pa[st][{r}] = {pack}(s[8 * st + {lo}], s[8 * st + {hi}]);")
        o("    }")

    _need(all(p_item(st, e) == 8 * st + p_item(0, e) for st in range(bn // 16) for e in range(8)),
          "P packing: the printed item offsets do not follow p_item")
    if not cfg.overlap:
        # one key block at a time: S, softmax, P V, each waited for
        o("  load_k(0, 0);")
        o("  lg_cp_async_commit();              // group: Q + K block 0")
        o("  load_v(0, 0);")
        o("  lg_cp_async_commit();              // group: V block 0")
        o("  for (int j = 0; j < NB; ++j) {")
        o(f"    const int n0 = j * {bn}, buf = j & 1;")
        sync_loads(1, "K block j (and Q)")
        o(f"    if (j + 1 < NB) load_k(buf ^ 1, n0 + {bn});")
        o("    lg_cp_async_commit();")
        o("    lg_wgmma_fence();")
        issue_qk("buf")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(s);")
        softmax("n0")
        rescale()
        pack_p()
        sync_loads(1, "V block j")
        o(f"    if (j + 1 < NB) load_v(buf ^ 1, n0 + {bn});")
        o("    lg_cp_async_commit();")
        o("    lg_wgmma_fence();")
        issue_pv("buf")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(acc); lg_pin(pa);")
        o("  }")
    else:
        # S of block j and P V of block j - 1 are issued together; the softmax of block j
        # runs while P V (j - 1) is still on the tensor cores (FA3's intra-warpgroup overlap)
        o("  load_k(0, 0);")
        o("  lg_cp_async_commit();              // group: Q + K block 0")
        o("  {")
        sync_loads(0, "Q + K block 0")
        o(f"    if (NB > 1) load_k(1, {bn});")
        o("    load_v(0, 0);")
        o("    lg_cp_async_commit();            // group: K block 1 + V block 0")
        o("    lg_wgmma_fence();")
        issue_qk("0")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(s);")
        softmax("0")
        o("  }")
        o("  for (int j = 1; j < NB; ++j) {")
        o(f"    const int n0 = j * {bn}, buf = j & 1;")
        # K block j and V block j - 1 landed; every warpgroup finished block j - 1's wgmmas,
        # so K buffer buf ^ 1 (block j - 1) and V buffer buf (block j - 2) are free
        sync_loads(0, "K block j + V block j - 1")
        o(f"    if (j + 1 < NB) load_k(buf ^ 1, n0 + {bn});")
        o("    load_v(buf, n0);")
        o("    lg_cp_async_commit();")
        pack_p()
        o("    lg_pin(acc); lg_pin(pa); lg_pin(s);   // every register write before the fence")
        o("    lg_wgmma_fence();")
        issue_qk("buf")
        o("    lg_wgmma_commit();")
        issue_pv("buf ^ 1")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<1>();              // S of block j done, P V (j - 1) may still run")
        o("    lg_pin(s);")
        softmax("n0")
        o("    lg_wgmma_wait<0>();              // P V (j - 1) done: acc may be rescaled")
        o("    lg_pin(acc); lg_pin(pa);")
        rescale()
        o("  }")
        o("  {")
        sync_loads(0, "V block NB - 1")
        pack_p()
        o("    lg_pin(acc); lg_pin(pa);")
        o("    lg_wgmma_fence();")
        issue_pv("(NB - 1) & 1")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(acc); lg_pin(pa);")
        o("  }")
    o("  lg_cp_async_wait<0>();")
    o("  #pragma unroll\n  for (int hh = 0; hh < 2; ++hh) {")
    o("    float l = l_i[hh];")
    o("    l += __shfl_xor_sync(0xffffffffu, l, 1);")
    o("    l += __shfl_xor_sync(0xffffffffu, l, 2);")
    o("    const float inv = l > 0.f ? 1.f / l : 0.f;")
    o("    const int r = row0 + 8 * hh;")
    o("    if (r < Sq) {")
    o("      lg_u16* dst = Ob + r * o_ss + col0;")
    o(f"      #pragma unroll\n      for (int jj = 0; jj < {d // 8}; ++jj)")
    o(f"        *reinterpret_cast<lg_u32*>(dst + 8 * jj) = {pack}(acc[4 * jj + 2 * hh] * inv, "
      "acc[4 * jj + 2 * hh + 1] * inv);")
    o("    }\n  }\n}")
    return "\n".join(L) + "\n"


class WgmmaFlashAttention(FlashAttention):
    """A compiled configuration: ``fa(q, k, v, out=None, scale=None) -> out`` (sm_90a);
    arguments, checks and launch as :class:`kernels.cuda_attention.FlashAttention`."""

    def __init__(self, cfg: WgmmaFlashConfig = WgmmaFlashConfig(), *, backend: str = "auto"):
        self.plan = plan_wgmma_flash(cfg)
        super(FlashAttention, self).__init__(cfg, emit_wgmma_flash(cfg), backend)


def default_config(dtype: str, head_dim: int, causal: bool) -> Optional[WgmmaFlashConfig]:
    """The default configuration for ``head_dim``, or None where this kernel has none."""
    kw = WGMMA_FLASH_DEFAULTS.get(head_dim)
    return None if kw is None else WgmmaFlashConfig(dtype=dtype, head_dim=head_dim,
                                                    causal=causal, **kw)
