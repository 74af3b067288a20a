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

from .prelude import source_head
from .attention import (FLASH_PARAMS, AttentionConfigError, FlashAttention,
                             emit_flash_block)
from .gemm import swz_fn
from .wgmma import (STAGE_ALIGN, HELPERS, Operand, check_descriptor,
                         emit_copy_base, kmajor_operand, mnmajor_operand, proved, wgmma_wrapper)
from .wgmma_softmax_emit import WgmmaFlashEmitter, emit_kv_loaders, emit_q_copy, p_item

__all__ = ["WgmmaFlashConfig", "WgmmaFlashPlan", "plan_wgmma_flash", "emit_wgmma_flash",
           "WgmmaFlashAttention", "WGMMA_FLASH_DEFAULTS"]


@dataclass(frozen=True)
class WgmmaFlashConfig:
    dtype: str = "f16"        # "f16" or "bf16" (q, k, v and out)
    head_dim: int = 128       # 64, 128 or 256 (256: bn=64, 1 or 2 warpgroups fit)
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
    # bn is the S = Q K^T wgmma N (a multiple of 8) and the P V k extent (k steps of 16 keys)
    _need(cfg.bn % 16 == 0 and 64 <= cfg.bn <= 256, f"bn={cfg.bn}: a multiple of 16 in 64..256 "
          "(the S = Q K^T wgmma N, P V k steps of 16 keys)")
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
    emit_q_copy(o, p.q, "  ")
    emit_kv_loaders(o, p.k, bn, cfg.kv_bytes, "  ",
                    "   // the whole block inside the sequence: no predicates")
    for op, nm, base in ((p.q, "q", "sQ + wg * %d" % p.q.wg_step), (p.k, "k", "sK"),
                         (p.v, "v", "sV")):
        o(f"  const lg_u64 {nm}desc = 0x{op.desc.constant_bits():016x}ull | "
          f"(lg_u64)((({base}) & 0x3FFFF) >> 4);   // {op.desc}")
    em = WgmmaFlashEmitter(o, cfg.dtype, d, bn, cfg.kv_bytes, p.q, p.k, p.v, wg="wg",
                           causal_rows="m0" if cfg.causal else None,
                           max_note="   // raw scores: scale > 0 commutes with max")
    em.registers()

    def sync_loads(wait: int, what: str) -> None:
        o(f"    lg_cp_async_wait<{wait}>();            // {what} landed")
        o("    lg_fence_proxy_async();")
        o("    __syncthreads();")

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
        em.issue_qk("buf")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(s);")
        em.softmax("n0")
        em.rescale()
        em.pack_p()
        sync_loads(1, "V block j")
        o(f"    if (j + 1 < NB) load_v(buf ^ 1, n0 + {bn});")
        o("    lg_cp_async_commit();")
        o("    lg_wgmma_fence();")
        em.issue_pv("buf")
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
        em.issue_qk("0")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(s);")
        em.softmax("0")
        o("  }")
        o("  for (int j = 1; j < NB; ++j) {")
        o(f"    const int n0 = j * {bn}, buf = j & 1;")
        # K block j and V block j - 1 landed; every warpgroup finished block j - 1's wgmmas,
        # so K buffer buf ^ 1 (block j - 1) and V buffer buf (block j - 2) are free
        sync_loads(0, "K block j + V block j - 1")
        o(f"    if (j + 1 < NB) load_k(buf ^ 1, n0 + {bn});")
        o("    load_v(buf, n0);")
        o("    lg_cp_async_commit();")
        em.pack_p()
        o("    lg_pin(acc); lg_pin(pa); lg_pin(s);   // every register write before the fence")
        o("    lg_wgmma_fence();")
        em.issue_qk("buf")
        o("    lg_wgmma_commit();")
        em.issue_pv("buf ^ 1")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<1>();              // S of block j done, P V (j - 1) may still run")
        o("    lg_pin(s);")
        em.softmax("n0")
        o("    lg_wgmma_wait<0>();              // P V (j - 1) done: acc may be rescaled")
        o("    lg_pin(acc); lg_pin(pa);")
        em.rescale()
        o("  }")
        o("  {")
        sync_loads(0, "V block NB - 1")
        em.pack_p()
        o("    lg_pin(acc); lg_pin(pa);")
        o("    lg_wgmma_fence();")
        em.issue_pv("(NB - 1) & 1")
        o("    lg_wgmma_commit();")
        o("    lg_wgmma_wait<0>();")
        o("    lg_pin(acc); lg_pin(pa);")
        o("  }")
    o("  lg_cp_async_wait<0>();")
    em.store_output()
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
