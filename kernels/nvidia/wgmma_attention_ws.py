"""Warp-specialised flash-attention forward for Hopper (``sm_90a``): the published
FlashAttention-3 design (read, not copied), on the layouts :mod:`.wgmma_attention` proves.

One block of ``1 + consumers`` warpgroups owns ``64 * consumers`` query rows of one (batch,
head):

* warpgroup 0, the producer (``setmaxnreg.dec`` to :data:`PRODUCER_REGS`), loads Q once and
  then K and V blocks of ``bn`` keys into a ``stages``-deep shared-memory ring with 16-byte
  ``cp.async`` (zero-filled past the sequence); each of its 128 threads signals a stage's
  ``full`` mbarrier with ``cp.async.mbarrier.arrive.noinc`` (the barrier counts 128 arrivals,
  one per thread, each when that thread's copies landed) and waits on the stage's ``empty``
  mbarrier before refilling it;
* warpgroups 1.. are consumers (``setmaxnreg.inc`` to :data:`CONSUMER_REGS`), 64 query rows
  each: they wait on ``full`` (then ``fence.proxy.async``: the copies wrote through the
  generic proxy, wgmma reads through the async one), issue ``S = Q K^T`` of block j and
  ``O += P V`` of block j - 1 together and run block j's softmax while ``P V`` is still on the
  tensor cores (intra-warpgroup overlap: in the SASS only with ``defer_pv_wait``, since ptxas
  otherwise schedules the P V wait above the softmax), and release each stage with an
  ``mbarrier.arrive`` on ``empty`` (256 arrivals: every consumer thread) once the wgmma reading
  it has completed;
* ``pingpong``: the consumers take turns to issue their GEMMs (named barriers 1 and 2,
  ``bar.sync`` my turn / ``bar.arrive`` the other's), so one warpgroup's softmax runs while the
  other's GEMMs do (inter-warpgroup overlap).

Proved before the source is printed: the shared layouts, descriptors and the P register
fragment are :func:`.wgmma_attention.plan_wgmma_flash`'s for the same tile (its proofs run);
the producer's own 128-thread copies of Q, K and V are proved to cover their tiles once with
bank-conflict-free 16-byte writes into those same layouts; the barrier protocol (phases,
arrival counts, the stage each block uses) is checked by :func:`check_ring_protocol` on a
model of the producer and consumers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from layoutalg.verify import CheckResult, bank_conflicts, coverage
from layoutalg.verify._access import eval_at
from mfma_specs.nvidia import smem_model

from .attention import FLASH_PARAMS, AttentionConfigError, FlashAttention, emit_flash_block
from .gemm import swz_fn
from .prelude import source_head
from .wgmma import (HELPERS, STAGE_ALIGN, Operand, emit_copy_base, kmajor_operand,
                    mnmajor_operand, proved, wgmma_wrapper)
from .wgmma_attention import WgmmaFlashConfig, WgmmaFlashPlan, plan_wgmma_flash
from .wgmma_softmax_emit import WgmmaFlashEmitter, emit_kv_loaders, emit_q_copy
from .ws_protocol import check_persistent_protocol, check_release_lag
from .ws_tma_loads import (PERSISTENT_PARAMS, TMA_CONSUMER_REGS, TMA_PARAMS, TMA_PRODUCER_REGS,
                           TMA_WS_HELPERS, AttentionTensorMaps, WsTmaLoads, emit_tile_decode,
                           emit_tma_producer, plan_tma_loads, check_unit_decode)

__all__ = ["WsFlashConfig", "WsFlashPlan", "plan_ws_flash", "emit_ws_flash", "WsFlashAttention",
           "check_ring_protocol", "PRODUCER_REGS", "CONSUMER_REGS"]

PRODUCER_REGS = 56      # the producer's copy loop needs ~40; 128 x 56 + 256 x 224 <= 65536
CONSUMER_REGS = 224
# head_dim 256: O alone is 128 f32 registers per consumer thread (the 2-warpgroup kernel
# compiles to 244-247), so the split moves to the most a consumer may hold: 128 x 24 + 256 x 240
WIDE_REGS = (24, 240)
BARRIER_BYTES = 8


@dataclass(frozen=True)
class WsFlashConfig:
    dtype: str = "bf16"
    head_dim: int = 128       # 64, 128 or 256 (256: bn=64, stages=2 fit the shared memory)
    bn: int = 128             # keys per block
    stages: int = 2           # K (and V) blocks in flight
    causal: bool = False
    pingpong: bool = True     # consumers alternate their GEMM issue (named barriers)
    arch: str = "sm_90a"
    loader: str = "cp.async"  # "tma": one producer thread issues 4-D TMA boxes (ws_tma_loads)
    persistent: bool = False  # (tma) one block per SM walks the work units, longest first
    # persistent: units in chunks of this many (batch, head) pairs, longest query block first
    # inside a chunk, so resident blocks share few heads' K/V in L2 (0: one chunk of all pairs)
    unit_heads: int = 0
    # wait for P V (j - 1) at the top of block j + 1, after the ring waits, instead of after
    # block j's softmax: ptxas schedules a wgmma wait as early as its basic block allows, which
    # put the wait<0> above the softmax and lost the softmax / P V overlap (SASS: every ex2 of
    # the loop after WARPGROUP.DEPBAR.LE gsb0, 0x0); the ring waits' spin loops end the block
    defer_pv_wait: bool = False
    # skip the O rescale (64 FMULs a thread) when no row max of the warp changed: a warp vote;
    # exact (it skips only multiplications by 1.0f)
    rescale_vote: bool = False
    # (tma) the producer loads V of block j - 1 after K of block j, the order the consumers
    # read them (FA3's), instead of K and V of block j together
    v_behind_k: bool = False

    consumers = 2             # 64 query rows each

    @property
    def bm(self) -> int:
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def q_bytes(self) -> int:
        return self.bm * self.head_dim * 2

    @property
    def kv_bytes(self) -> int:
        return self.bn * self.head_dim * 2

    @property
    def smem_bytes(self) -> int:
        return (self.q_bytes + 2 * self.stages * self.kv_bytes + STAGE_ALIGN
                + BARRIER_BYTES * (1 + 4 * self.stages + (1 if self.persistent else 0)))

    @property
    def name(self) -> str:
        return (f"lg_wsflash_{self.dtype}_d{self.head_dim}_{self.bm}x{self.bn}_s{self.stages}"
                + ("_pp" if self.pingpong else "") + ("_causal" if self.causal else "")
                + ("_tma" if self.loader == "tma" else "") + ("_pt" if self.persistent else "")
                + (f"_uh{self.unit_heads}" if self.unit_heads else "")
                + ("_dw" if self.defer_pv_wait else "") + ("_rv" if self.rescale_vote else "")
                + ("_vk" if self.v_behind_k else ""))

    @property
    def regs(self) -> Tuple[int, int]:
        """(producer, consumer) registers per thread after ``setmaxnreg``: the TMA producer
        needs few (one thread issues the boxes); at d256 the consumers hold O's 128 registers."""
        if self.loader == "tma":
            return TMA_PRODUCER_REGS, TMA_CONSUMER_REGS
        return WIDE_REGS if self.head_dim == 256 else (PRODUCER_REGS, CONSUMER_REGS)

    def tile(self) -> WgmmaFlashConfig:
        """The :mod:`.wgmma_attention` configuration of the same tile: its layout proofs."""
        return WgmmaFlashConfig(dtype=self.dtype, head_dim=self.head_dim,
                                warpgroups=self.consumers, bn=self.bn, causal=self.causal)


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise AttentionConfigError(msg)


def _validate(cfg: WsFlashConfig) -> None:
    _need(cfg.head_dim in (64, 128, 256), f"head_dim={cfg.head_dim}: the warp-specialised "
          "kernel takes 64, 128 or 256")
    _need(cfg.stages in (2, 3, 4), f"stages={cfg.stages}: 2, 3 or 4")
    _need(cfg.loader in ("cp.async", "tma"), f"loader={cfg.loader!r}: 'cp.async' or 'tma'")
    _need(not cfg.persistent or cfg.loader == "tma", "persistent=True needs loader='tma' (the "
          "one producer thread walks the work units)")
    _need(cfg.unit_heads >= 0 and (cfg.persistent or not cfg.unit_heads),
          f"unit_heads={cfg.unit_heads}: a count >= 0 of (batch, head) pairs per chunk of "
          "work units, for persistent=True only (0: one chunk)")
    _need(not cfg.v_behind_k or cfg.loader == "tma", "v_behind_k=True needs loader='tma' (the "
          "one producer thread orders the loads)")
    _need(cfg.smem_bytes <= 227 * 1024, f"{cfg.smem_bytes} bytes of shared memory; sm_90 "
          "allows 227 KiB per block: fewer stages or a smaller bn")
    _need(cfg.regs[0] * 128 + cfg.regs[1] * 128 * cfg.consumers <= 65536,
          "register split exceeds the 64K-register file")


@dataclass
class WsFlashPlan:
    cfg: WsFlashConfig
    tile: WgmmaFlashPlan          # layouts, descriptors, P fragment (proved there)
    q: Operand                    # the producer's 128-thread copies into the same layouts
    k: Operand
    v: Operand
    checks: Dict[str, Any] = field(default_factory=dict)
    tma: Optional[WsTmaLoads] = None   # the TMA boxes (loader "tma")

    def describe(self) -> Dict[str, str]:
        out = dict(self.tile.describe())
        out.update({f"producer {k}": v.summary() for k, v in self.checks.items()})
        return out


def ring_schedule(nb: int, stages: int) -> List[Tuple[str, int, int, int]]:
    """The producer's barrier operations for ``nb`` key blocks: ``(op, barrier, stage,
    parity)`` -- op "wait_empty" (parity to wait for) or "fill" -- K then V of each block."""
    ops = []
    for j in range(nb):
        s, use = j % stages, j // stages
        for kv in ("k", "v"):
            if use:
                ops.append(("wait_empty_" + kv, j, s, (use - 1) & 1))
            ops.append(("fill_" + kv, j, s, use & 1))
    return ops


def check_ring_protocol(stages: int, max_blocks: int = 12) -> CheckResult:
    """Model the mbarrier ring: for every block count up to ``max_blocks``, every order the
    consumers' release and the producer's refills can take, a consumer reading block j finds
    block j in its stage (the full barrier's phase parity it waits for is the one the
    producer's fill of block j completes), and the producer never refills a stage before
    both consumers released the block it held (the empty parity it waits for is the release
    of block j - stages)."""
    n = 0
    for nb in range(1, max_blocks + 1):
        fills: Dict[Tuple[str, int], int] = {}       # (kv, stage) -> fills so far
        held: Dict[Tuple[str, int], int] = {}        # (kv, stage) -> block it holds
        for op, j, s, par in ring_schedule(nb, stages):
            kv = op[-1]
            if op.startswith("wait_empty"):
                prev = j - stages
                # the empty barrier's phase (use - 1) completes when block j - stages is released
                if held.get((kv, s)) != prev or par != (prev // stages) & 1:
                    raise AttentionConfigError(f"ring: block {j} {kv} would overwrite stage {s} "
                                               f"holding block {held.get((kv, s))}")
            else:
                c = fills.get((kv, s), 0)
                if c != j // stages or par != c & 1:
                    raise AttentionConfigError(f"ring: fill {c} of stage {s} is block {j}")
                fills[(kv, s)] = c + 1
                held[(kv, s)] = j
            n += 1
        for j in range(nb):       # the consumer side: block j is in stage j % S, phase j // S
            s = j % stages
            if fills.get(("k", s), 0) <= j // stages:
                raise AttentionConfigError(f"ring: block {j} never filled")
    return proved(f"mbarrier ring of {stages} stages: fill/wait parities for 1..{max_blocks} "
                  f"blocks ({n} operations)", "every block count, stage and use")


@lru_cache(maxsize=16)
def plan_ws_flash(cfg: WsFlashConfig) -> WsFlashPlan:
    _validate(cfg)
    tile = plan_wgmma_flash(cfg.tile())
    d = cfg.head_dim
    q = kmajor_operand("Q", cfg.bm, d, 128, wg_rows=64)
    k = kmajor_operand("K", cfg.bn, d, 128)
    v = mnmajor_operand("V", cfg.bn, d, 128)
    plan = WsFlashPlan(cfg, tile, q, k, v)
    ch = plan.checks
    wmodel = smem_model("cp.async.16")
    for mine, theirs in ((q, tile.q), (k, tile.k), (v, tile.v)):
        idx = np.arange(mine.rows * mine.cols)
        _need(np.array_equal(eval_at(mine.smem, idx), eval_at(theirs.smem, idx))
              and mine.desc == theirs.desc and mine.k_starts == theirs.k_starts,
              f"{mine.name}: the producer's layout is not the proved tile's")
    for op in (q, k):
        ch[f"{op.name} copy coverage"] = coverage(op.copy.off, op.rows * op.cols)
        ch[f"{op.name} cp.async banks"] = bank_conflicts(op.copy.off, lds=op.smem, model=wmodel,
                                                         elem_bytes=2)
    _need(v.copy_consts == k.copy_consts, "K and V must share one copy routine")
    ch["ring"] = check_ring_protocol(cfg.stages)
    lag = 1 if cfg.defer_pv_wait else 0
    if lag or cfg.v_behind_k:
        ch["V release lag"] = check_release_lag(cfg.stages, cfg.consumers, lag,
                                                v_behind_k=cfg.v_behind_k)
    if cfg.loader == "tma":
        plan.tma = plan_tma_loads(cfg, tile)
        ch.update(plan.tma.checks)
    if cfg.persistent:     # the one Q buffer is a ring of one stage over the work units
        ch["Q ring"] = check_ring_protocol(1)
        ch["persistent protocol"] = check_persistent_protocol(cfg.stages, cfg.consumers, lag,
                                                              cfg.v_behind_k)
        ch["persistent unit decode"] = check_unit_decode(cfg)
    for name, r in ch.items():
        if not r.holds:
            raise AttentionConfigError(f"{cfg.name}: {name} does not hold:\n{r}")
    return plan


MBAR = r"""
LG_DEV void lg_mbar_init(lg_u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
LG_DEV bool lg_mbar_try(lg_u32 bar, int parity) {
  lg_u32 ok;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return ok != 0;
}
LG_DEV void lg_mbar_wait(lg_u32 bar, int parity) { while (!lg_mbar_try(bar, parity)) {} }
LG_DEV void lg_mbar_arrive(lg_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// arrives on bar when every cp.async this thread issued before has landed (no pending-count
// increment: the barrier's expected count includes this arrival)
LG_DEV void lg_cp_async_mbar_arrive(lg_u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}
LG_DEV void lg_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(n) : "memory"); }
LG_DEV void lg_bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(n) : "memory"); }
"""


def _cp_async_producer(o, p: WsFlashPlan) -> None:
    """The producer's cp.async body: its 128 threads copy Q, then K and V block by block, each
    signalling the stage's full barrier when its own copies landed."""
    cfg = p.cfg
    S, bn = cfg.stages, cfg.bn
    for op, nm in ((p.q, "q"), (p.k, "kv")):
        emit_copy_base(o, op, nm, 128)
    emit_q_copy(o, p.q, "    ")
    o("    lg_cp_async_mbar_arrive(bQ);")
    emit_kv_loaders(o, p.k, bn, cfg.kv_bytes, "    ")
    o("    for (int j = 0; j < NB; ++j) {")
    o(f"      const int s = j % {S}, use = j / {S};")
    o(f"      if (use) lg_mbar_wait(bKe + 8 * s, (use - 1) & 1);   // block j - {S} released")
    o(f"      load_k(s, j * {bn});")
    o("      lg_cp_async_mbar_arrive(bKf + 8 * s);")
    o("      if (use) lg_mbar_wait(bVe + 8 * s, (use - 1) & 1);")
    o(f"      load_v(s, j * {bn});")
    o("      lg_cp_async_mbar_arrive(bVf + 8 * s);")
    o("    }")
    o("    lg_cp_async_wait<0>();")


def emit_ws_flash(cfg: WsFlashConfig) -> str:
    p = plan_ws_flash(cfg)
    d, bm, bn, S = cfg.head_dim, cfg.bm, cfg.bn, cfg.stages
    kvb = cfg.kv_bytes
    L = source_head("kernels/nvidia/wgmma_attention_ws.py", cfg.name,
                    (f"{k}: {v}" for k, v in p.describe().items()))
    o = L.append
    tma = cfg.loader == "tma"
    preg, creg = cfg.regs
    # cp.async: every thread of the producer arrives on full (128), every consumer thread on
    # empty; TMA: one expect_tx arrival on full (the bytes complete it), one lane per
    # consumer warp on empty (after the warp's wgmma wait)
    full_n, empty_n = (1, 4 * cfg.consumers) if tma else (128, 128 * cfg.consumers)
    o(HELPERS)
    o(MBAR)
    if tma:
        o(TMA_WS_HELPERS)
    o(wgmma_wrapper("lg_wgmma_qk", cfg.dtype, bn, 0))
    o(wgmma_wrapper("lg_wgmma_pv", cfg.dtype, d, 1, a_regs=True))
    o(swz_fn("lg_swz_q", p.q.smem.outer, bm * d))
    o(swz_fn("lg_swz_kv", p.k.smem.outer, bn * d))
    o(f'extern "C" __global__ void __launch_bounds__({cfg.threads}, 1)')
    pt = cfg.persistent
    o(f"{cfg.name}({FLASH_PARAMS}{TMA_PARAMS if tma else ''}"
      f"{PERSISTENT_PARAMS if pt else ''}) {{")
    o("  extern __shared__ __align__(1024) unsigned char lg_smem[];")
    o(f"  const lg_u32 sQ = (lg_smem_u32(lg_smem) + {STAGE_ALIGN - 1}u) & ~{STAGE_ALIGN - 1}u;")
    o(f"  const lg_u32 sK = sQ + {cfg.q_bytes}, sV = sK + {S * kvb};")
    o(f"  // mbarriers: Q full; K full[{S}], V full[{S}], K empty[{S}], V empty[{S}]")
    o(f"  const lg_u32 bQ = sV + {S * kvb}, bKf = bQ + 8, bVf = bKf + {8 * S}, "
      f"bKe = bVf + {8 * S}, bVe = bKe + {8 * S};" + (f"  // Q empty: bQe = bVe + {8 * S}"
                                                      if pt else ""))
    o("  const int tid = threadIdx.x, wg = tid >> 7;")
    if pt:
        o(f"  const lg_u32 bQe = bVe + {8 * S};")
        o(f"  const int nqb = (Sq + {bm - 1}) / {bm}, tiles = nqb * n_heads * n_batch;")
    else:
        emit_flash_block(o, cfg)
    o("  if (tid == 0) {")
    o(f"    lg_mbar_init(bQ, {full_n});")
    o(f"    for (int s = 0; s < {S}; ++s) {{")
    o(f"      lg_mbar_init(bKf + 8 * s, {full_n}); lg_mbar_init(bVf + 8 * s, {full_n});")
    o(f"      lg_mbar_init(bKe + 8 * s, {empty_n}); "
      f"lg_mbar_init(bVe + 8 * s, {empty_n});")
    o("    }" + (f"\n    lg_mbar_init(bQe, {empty_n});" if pt else "")
      + ("\n    lg_mbar_init_fence();   // the inits, visible to the TMA unit" if tma
                  else "") + "\n  }")
    o("  __syncthreads();")
    # ------------------------------------------------------------------ producer
    o("  if (wg == 0) {")
    o(f'    asm volatile("setmaxnreg.dec.sync.aligned.u32 {preg};\\n");')
    if tma:
        emit_tma_producer(o, cfg, p.tma)
    else:
        _cp_async_producer(o, p)
    o("    return;\n  }")
    # ------------------------------------------------------------------ consumers
    o(f'  asm volatile("setmaxnreg.inc.sync.aligned.u32 {creg};\\n");')
    o("  const int cw = wg - 1, t = tid & 127;")
    o(f"  const lg_u64 qdesc = 0x{p.q.desc.constant_bits():016x}ull | "
      f"(lg_u64)(((sQ + cw * {p.q.wg_step}) & 0x3FFFF) >> 4);   // {p.q.desc}")
    for op, nm, base in ((p.k, "k", "sK"), (p.v, "v", "sV")):
        o(f"  const lg_u64 {nm}desc = 0x{op.desc.constant_bits():016x}ull | "
          f"(lg_u64)((({base}) & 0x3FFFF) >> 4);   // {op.desc}")
    em = WgmmaFlashEmitter(o, cfg.dtype, d, bn, kvb, p.q, p.k, p.v, wg="cw",
                           causal_rows="m0 + cw * 64" if cfg.causal else None)
    if not pt:
        em.registers()
    pp, dw = cfg.pingpong, cfg.defer_pv_wait
    if pp:
        o("  // ping-pong: consumer cw issues its GEMMs after bar.sync(1 + cw); consumer 1 opens")
        o("  // consumer 0's first turn; each hands the turn over after issuing (bar.arrive)")
        o("  if (cw == 1) lg_bar_arrive(1, 256);")
    # g: the ring's block count (persistent: it runs on over the work units from g0)
    G = "g0 + " if pt else ""
    if pt:
        o("  int g0 = 0, it = 0;")
        o("  for (int u = blockIdx.x; u < tiles; u += gridDim.x, ++it) {")
        emit_tile_decode(o, cfg, "  ")
        o("  lg_u16* Ob = O + b * o_sb + h * o_sh;")
        o("  const bool last_unit = u + (int)gridDim.x >= tiles;")
        em.registers()

    def turn_begin() -> None:
        if pp:
            o("    lg_bar_sync(1 + cw, 256);")

    def turn_end(last: str = "false") -> None:
        if pp:
            o(f"    if (cw == 0 || !({last})) lg_bar_arrive(2 - cw, 256);")

    def fence_proxy() -> None:
        if not tma:   # cp.async wrote through the generic proxy, wgmma reads the async one
            o("    lg_fence_proxy_async();")

    def release(bar: str, when: str = "") -> None:
        """Arrive on an empty barrier (TMA: one lane a warp); ``when``: a C condition."""
        cond = " && ".join(c for c in (when, "(t & 31) == 0" if tma else "") if c)
        o(f"    if ({cond}) lg_mbar_arrive({bar});" if cond else f"    lg_mbar_arrive({bar});")

    def pv_done(v_stage: str, when: str = "") -> None:
        """The last P V completed: release its V stage (C expression), rescale O by the
        softmax's alpha (deferred: ``when`` says whether that block exists)."""
        o("    lg_wgmma_wait<0>();" + ("              // P V of the block before last: after the "
                                      "ring waits, so ptxas keeps the softmax above it"
                                      if when else ""))
        o("    lg_pin(acc); lg_pin(pa);")
        release(f"bVe + 8 * {v_stage}", when)
        em.rescale(cfg.rescale_vote)

    def wait_full(bar: str, j: str) -> None:
        o(f"    lg_mbar_wait({bar} + 8 * (({j}) % {S}), (({j}) / {S}) & 1);")

    # a consumer's causal rows end at m0 + cw*64 + 63: its own key range is shorter than the
    # block's NB for cw = 0, but both consumers run NB blocks (the ring and the ping-pong turns
    # are per block); the mask covers keys past each row
    o("  {")
    o("    lg_mbar_wait(bQ, it & 1);" if pt else "    lg_mbar_wait(bQ, 0);")
    wait_full("bKf", G + "0" if pt else "0")
    fence_proxy()
    turn_begin()
    o("    lg_wgmma_fence();")
    em.issue_qk(f"g0 % {S}" if pt else "0")
    o("    lg_wgmma_commit();")
    turn_end()
    o("    lg_wgmma_wait<0>();")
    o("    lg_pin(s);")
    release(f"bKe + 8 * (g0 % {S})" if pt else "bKe")
    if pt:    # the last S = Q K^T of the unit is done: Q may be refilled
        o("    if (NB == 1 && (t & 31) == 0) lg_mbar_arrive(bQe);")
    em.softmax("0")
    o("  }")
    o("  for (int j = 1; j < NB; ++j) {")
    o(f"    const int n0 = j * {bn}, buf = ({G}j) % {S}, pbuf = ({G}j - 1) % {S};" if pt else
      f"    const int n0 = j * {bn}, buf = j % {S}, pbuf = (j - 1) % {S};")
    wait_full("bKf", G + "j")
    wait_full("bVf", G + "j - 1")
    if dw:
        pv_done(f"(({G}j - 2) % {S})", "j > 1")
    fence_proxy()
    em.pack_p()
    o("    lg_pin(acc); lg_pin(pa); lg_pin(s);")
    turn_begin()
    o("    lg_wgmma_fence();")
    em.issue_qk("buf")
    o("    lg_wgmma_commit();")
    em.issue_pv("pbuf")
    o("    lg_wgmma_commit();")
    turn_end()
    o("    lg_wgmma_wait<1>();              // S of block j done, P V (j - 1) may still run")
    o("    lg_pin(s);")
    release("bKe + 8 * buf")
    if pt:
        o("    if (j == NB - 1 && (t & 31) == 0) lg_mbar_arrive(bQe);")
    em.softmax("n0")
    if not dw:
        pv_done("pbuf")
    o("  }")
    o("  {")
    wait_full("bVf", G + "NB - 1")
    if dw:
        pv_done(f"(({G}NB - 2) % {S})", "NB > 1")
    fence_proxy()
    em.pack_p()
    o("    lg_pin(acc); lg_pin(pa);")
    turn_begin()
    o("    lg_wgmma_fence();")
    em.issue_pv(f"({G}NB - 1) % {S}")
    o("    lg_wgmma_commit();")
    turn_end("last_unit" if pt else "true")
    o("    lg_wgmma_wait<0>();")
    o("    lg_pin(acc); lg_pin(pa);")
    o("  }")
    if pt:    # the unit's last V stage: released, the next unit's blocks reuse it
        release(f"bVe + 8 * ((g0 + NB - 1) % {S})")
        em.store_output(close=False)
        o("  g0 += NB;\n  }\n}")
    else:
        em.store_output()
    return "\n".join(L) + "\n"


class WsFlashAttention(FlashAttention):
    """A compiled configuration: ``fa(q, k, v, out=None, scale=None) -> out`` (sm_90a);
    arguments, checks and launch as :class:`kernels.cuda_attention.FlashAttention`."""

    def __init__(self, cfg: WsFlashConfig = WsFlashConfig(), *, backend: str = "auto"):
        self.plan = plan_ws_flash(cfg)
        super(FlashAttention, self).__init__(cfg, emit_ws_flash(cfg), backend)
        self._maps = AttentionTensorMaps()

    def launch_grid(self, B: int, Hq: int, Sq: int, device: Any) -> Tuple[int, int, int]:
        """Persistent: one block per SM (fewer when there are fewer work units)."""
        if not self.cfg.persistent:
            return super().launch_grid(B, Hq, Sq, device)
        import torch
        from ..runtime.cuda import device_info
        index = device.index if device.index is not None else torch.cuda.current_device()
        return (min(-(-Sq // self.cfg.bm) * Hq * B, device_info(index)["sms"]), 1, 1)

    def launch_extras(self, q, k, v) -> List[Tuple[Any, str, Any]]:
        """The TMA configuration's Q, K, V tensor maps (boxes of bm, bn, bn rows); persistent:
        the head and batch counts the work units are decoded with."""
        if self.cfg.loader != "tma":
            return []
        from ..runtime.cuda import TensorSpec
        spec = TensorSpec(strides=(), align=64)
        out = [(self._maps.get(q, self.cfg.bm), "ptr", spec),
               (self._maps.get(k, self.cfg.bn), "ptr", spec),
               (self._maps.get(v, self.cfg.bn), "ptr", spec)]
        if self.cfg.persistent:
            out += [(int(q.shape[1]), "i32", None), (int(q.shape[0]), "i32", None)]
        return out
