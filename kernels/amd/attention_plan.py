"""The flash-attention forward layout plan: every register, copy and LDS layout as a layoutalg
object, for the ``K Q^T`` ordering on 32x32x8 MFMAs.

A block has ``W`` waves and ``BM = 32 W`` query rows (wave ``w`` owns rows ``32w .. 32w+31``);
a KV tile has ``BN`` keys.  With ``l`` the lane, ``h = l // 32`` its half, ``i = l % 32``:

* ``S^T = K Q^T`` (first MFMA): A = K rows, B = Q^T.  Q is loaded from global straight into
  registers as the B operand (lane: query row ``i``, head dims ``16p + 8h .. +8``, one 128-bit
  load per ``p``); K is read from LDS as the A operand with one ``ds_read_b128`` feeding two
  MFMAs (head dims ``16p + 8h + 4s + e`` for step ``s``, the same permutation as Q's, so A's
  and B's reduction slots agree).
* The accumulator ``S^T`` puts query row ``i`` in every item of lane ``l``: the row maximum is a
  per-lane maximum plus ONE exchange with lane ``l ^ 32`` (``ds_bpermute``; ``ds_swizzle``
  never crosses 32-lane halves), and the row sum needs no exchange until the end.
* ``O^T = V^T P^T`` (second MFMA): B = P^T is the first MFMA's accumulator itself, rounded to
  16 bits, with no data movement ("P kept in registers by the K^T Q^T ordering").  This needs
  the MFMA row ``i`` of ``S^T`` tile ``n`` to be key ``pi(i) + 32 n`` with ``pi`` swapping bits 2
  and 3 of ``i``, so that the 8 keys one lane supplies to two consecutive MFMAs are contiguous
  in ``V^T`` and one ``ds_read_b128`` feeds both.
* V is stored transposed in LDS (``V^T[d][key]``): each thread loads 4 (or 2) keys x 8 head
  dims with 128-bit global loads and writes 8 vectors of 4 (or 2) keys.
* ``O^T``'s MFMA row ``i`` of d-tile ``t`` is head dim ``rho(i) + 32 t`` with ``rho`` moving bit 2
  of ``i`` to bit 4, so each lane ends up holding 16 consecutive head dims of its query row:
  the output is written with 128-bit stores.
* K (``[BN][D]``) and V^T (``[D][BN]``) each have two LDS stages; their XOR swizzles are the
  first ones :func:`layoutalg.verify.suggest_swizzle` proves conflict-free for the copy writes
  and the MFMA-operand reads together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

import numpy as np

from layoutalg import ComposedLayout, Layout, Swizzle

from ..ir.p_rounding import P_ROUNDINGS
from .gemm_plan import ConfigError, norm_dtype

__all__ = ["AttnConfig", "AttnPlan", "plan_attention", "ConfigError"]


@dataclass(frozen=True)
class AttnConfig:
    """Compile-time options of the prefill kernel (shapes and strides are runtime arguments)."""

    head_dim: int = 128
    dtype: str = "f16"               # Q, K, V: f16 | bf16
    out_dtype: Optional[str] = None  # O: f16 | bf16 (default: dtype)
    causal: bool = False
    block_n: Optional[int] = None    # keys per KV tile (default 64, 32 for head_dim 256)
    waves: int = 4                   # waves per block; 32 query rows each
    arch: str = "gfx942"
    # amdgpu_waves_per_eu hint (0: none).  Default: 2 for head_dim <= 128, i.e. a budget of 256
    # registers, under which clang-19 selects the MFMAs with VGPR accumulators (it picks AGPR
    # accumulators whenever the budget exceeds 256), so O and S stay in VGPRs and the softmax
    # rescale needs no v_accvgpr_read/write round trip; 0 for head_dim 256, whose O (128
    # registers) + Q (64) do not fit in 256 without spills.  256 registers are also the
    # budget of two waves per SIMD (512 per SIMD lane), which the one-stage LDS default
    # (32 KiB per work-group, two work-groups per CU) needs.
    waves_per_eu: Optional[int] = None
    # how P (f32 softmax probabilities) is rounded to bf16 for the P V MFMA: rtne (round to
    # nearest even, the default), rtna (ties away: one add fewer) or rtz (truncation); f16 P
    # is always rtne (v_cvt_f16_f32).  See kernels.ir.p_rounding.
    p_rounding: str = "rtne"
    # LDS stages of the K and V^T tiles: 2 (double-buffered: the next tile is stored while
    # this one is read, one barrier per tile) or 1 (half the LDS: the next tile is stored
    # after a barrier that ends every wave's reads, then a second barrier).  Default: 1 for
    # head_dim <= 128 (BN 64: 32 KiB per work-group, so two work-groups of 4 waves share a
    # CU, two waves per SIMD, and one's barriers hide behind the other's MFMAs: by the static
    # model, B16 H16 S8K bf16 d128 with the full-tile prefetch pinned: 0.75 of MFMA peak, 0.56
    # double-buffered, docs/PERFORMANCE.md);
    # 2 for head_dim 256, whose registers allow one wave per SIMD whatever the LDS.
    lds_stages: Optional[int] = None
    # ping-pong waves (kernels.amd.flash_attention_pingpong): 256-row work-groups of 8 waves
    # in two groups one barrier apart, so that one group's MFMA phase (S = K Q^T, O += V^T P^T)
    # runs while the other group does its softmax; K and V^T double-buffered (64 KiB at
    # head_dim 128: one work-group of 8 waves per CU, two waves per SIMD).  head_dim 128 only
    # (at 64 the 512-thread V copy would move one key per thread: no 32-bit transposed write).
    pingpong: bool = False

    def normalized(self) -> "AttnConfig":
        c = replace(self, dtype=norm_dtype(self.dtype),
                    out_dtype=norm_dtype(self.out_dtype or self.dtype, "out dtype"))
        if c.dtype not in ("f16", "bf16"):
            raise ConfigError(f"attention input dtype {c.dtype}: use f16 or bf16")
        if c.out_dtype not in ("f16", "bf16"):
            raise ConfigError(f"attention output dtype {c.out_dtype}: use f16 or bf16")
        if c.head_dim not in (64, 128, 256):
            raise ConfigError(f"head_dim {c.head_dim}: the prefill kernel supports 64, 128 and "
                              "256")
        if c.block_n is None:
            c = replace(c, block_n=32 if c.head_dim == 256 else 64)
        if c.block_n not in (32, 64):
            raise ConfigError(f"block_n {c.block_n}: use 32 or 64")
        if c.pingpong:
            if c.head_dim != 128:
                raise ConfigError(f"pingpong: head_dim {c.head_dim}: the ping-pong form is built "
                                  "for head_dim 128 (use the default form for 64 and 256)")
            if c.waves not in (4, 8) or c.block_n != 64 or c.lds_stages not in (None, 2):
                raise ConfigError(f"pingpong: waves {c.waves}, block_n {c.block_n}, lds_stages "
                                  f"{c.lds_stages}: the ping-pong form is 8 waves (two groups of "
                                  "4), block_n 64 and two LDS stages (leave them unset)")
            c = replace(c, waves=8, lds_stages=2)
        elif c.waves not in (1, 2, 4):
            raise ConfigError(f"waves {c.waves}: use 1, 2 or 4 (8: pingpong=True)")
        if c.waves_per_eu is None:
            c = replace(c, waves_per_eu=2 if c.head_dim <= 128 else 0)
        if c.waves_per_eu not in range(0, 9):
            raise ConfigError(f"waves_per_eu {c.waves_per_eu}: use 0 (no hint) .. 8")
        if c.arch not in ("gfx940", "gfx941", "gfx942"):
            raise ConfigError(f"arch {c.arch}: the attention kernels target CDNA3 (gfx942)")
        if c.lds_stages is None:
            c = replace(c, lds_stages=1 if c.head_dim <= 128 else 2)
        if c.lds_stages not in (1, 2):
            raise ConfigError(f"lds_stages {c.lds_stages}: use 1 or 2")
        if c.p_rounding not in P_ROUNDINGS:
            raise ConfigError(f"p_rounding {c.p_rounding!r}: use one of "
                              f"{', '.join(P_ROUNDINGS)}")
        if c.p_rounding != "rtne" and c.dtype != "bf16":
            raise ConfigError(f"p_rounding {c.p_rounding}: only bf16 P has a rounding choice; "
                              f"{c.dtype} P is converted round-to-nearest-even (use rtne)")
        return c

    @property
    def block_m(self) -> int:
        return 32 * self.waves

    @property
    def threads(self) -> int:
        return 64 * self.waves

    @property
    def lds_bytes(self) -> int:
        """LDS of one work-group: the K and V^T tiles of every stage (2-byte elements)."""
        return 2 * 2 * self.lds_stages * self.block_n * self.head_dim


@dataclass
class AttnPlan:
    cfg: AttnConfig
    spec1: Any                  # MFMA of S^T = K Q^T
    spec2: Any                  # MFMA of O^T = V^T P^T (same instruction)
    layouts: Dict[str, Layout]  # name -> (tid, value) -> coordinate
    pi: Layout                  # MFMA row of S^T -> key within a 32-key tile
    rho: Layout                 # MFMA row of O^T -> head dim within a 32-dim tile
    sk_inner: Layout            # ((key, d), stage) -> LDS offset before the swizzle
    sv_inner: Layout            # ((d, key), stage) -> LDS offset before the swizzle
    sk_swizzle: Swizzle
    sv_swizzle: Swizzle
    sk_search: Any = None
    sv_search: Any = None
    kv_keys: int = 4            # keys per thread in the V copy
    perm_k: Any = None          # key -> K LDS row
    perm_v: Any = None          # head dim -> V^T LDS row

    @property
    def sk(self) -> ComposedLayout:
        return ComposedLayout(self.sk_swizzle, 0, self.sk_inner)

    @property
    def sv(self) -> ComposedLayout:
        return ComposedLayout(self.sv_swizzle, 0, self.sv_inner)

    def describe(self) -> Dict[str, str]:
        out = {k: str(v) for k, v in self.layouts.items()}
        out["pi (S^T row -> key)"] = str(self.pi)
        out["rho (O^T row -> head dim)"] = str(self.rho)
        out["sK"] = str(self.sk)
        out["sVt"] = str(self.sv)
        return out


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def _spec(cfg: AttnConfig) -> Any:
    import mfma_specs
    name = {"f16": "v_mfma_f32_32x32x8_f16", "bf16": "v_mfma_f32_32x32x8_bf16"}[cfg.dtype]
    spec = mfma_specs.lookup(cfg.arch, name)
    # the plan below is written for this lane layout; refuse anything else loudly
    _need(str(spec.tv_layout("A")) == "((32,2),4):((1,128),32)"
          and str(spec.tv_layout("B")) == "((32,2),4):((8,4),1)"
          and str(spec.tv_layout("C")) == "((32,2),(4,4)):((32,4),(1,8))",
          f"{name}: unexpected lane layout; the attention plan assumes CDNA3's 32x32x8")
    return spec


def plan_attention(cfg: AttnConfig) -> AttnPlan:
    """Every layout of the prefill kernel for ``cfg`` (raises :class:`ConfigError`)."""
    cfg = cfg.normalized()
    D, BN, W, T = cfg.head_dim, cfg.block_n, cfg.waves, cfg.threads
    spec = _spec(cfg)
    lane = (32, 2, W)                       # (i, h, wave) of tid
    # ---- Q: B operand of S^T = K Q^T, value v = j + 8 p (j < 8, p < D/16)
    qv = (8, D // 16)
    L = {}
    L["q_row"] = Layout((lane, qv), ((1, 0, 32), (0, 0)))
    L["q_d"] = Layout((lane, qv), ((0, 8, 0), (1, 16)))
    # ---- pi: S^T row i = e + 4 b2 + 8 b3 + 16 b4 -> key e + 8 b2 + 4 b3 + 16 b4
    pi = Layout((4, 2, 2, 2), (1, 8, 4, 16))
    rho = Layout((4, 2, 4), (1, 16, 4))     # O^T row i = e + 4 b2 + 8 a -> e + 16 b2 + 4 a
    # ---- K: A operand, value v = j + 8 (p + (D/16) n)
    nt = BN // 32
    kv_shape = (8, D // 16, nt)
    L["kfr_key"] = Layout((((4, 2, 2, 2), 2, W), kv_shape),
                          ((pi.stride, 0, 0), (0, 0, 32)))
    L["kfr_d"] = Layout((((4, 2, 2, 2), 2, W), kv_shape),
                        (((0, 0, 0, 0), 8, 0), (1, 16, 0)))
    # ---- S^T accumulator: value r + 16 n -> (query row, key); C[i = 8a + 4h + e][j = l%32]
    #      key = 32 n + pi(8a + 4h + e) = 32 n + e + 8h + 4 (a%2) + 16 (a//2)
    L["s_row"] = Layout((lane, (4, 2, 2, nt)), ((1, 0, 32), (0, 0, 0, 0)))
    L["s_key"] = Layout((lane, (4, 2, 2, nt)), ((0, 8, 0), (1, 4, 16, 32)))
    # ---- V^T: A operand of O^T = V^T P^T, value v = j + 8 (u + (BN/16) t)
    vv_shape = (8, BN // 16, D // 32)
    L["vfr_d"] = Layout((((4, 2, 4), 2, W), vv_shape), ((rho.stride, 0, 0), (0, 0, 32)))
    L["vfr_key"] = Layout((((4, 2, 4), 2, W), vv_shape), (((0, 0, 0), 8, 0), (1, 16, 0)))
    # ---- O^T accumulator: value r + 16 t -> (query row, head dim 32 t + 16 h + r)
    L["o_row"] = Layout((lane, (16, D // 32)), ((1, 0, 32), (0, 0)))
    L["o_d"] = Layout((lane, (16, D // 32)), ((0, 16, 0), (1, 32)))
    # ---- copies (global -> registers -> LDS), 128-bit global loads of 8 head dims
    cpr = D // 8                               # threads per key row
    _need(T % cpr == 0, f"{T} threads do not split into rows of {cpr} 128-bit vectors")
    R = T // cpr
    _need(BN % R == 0, f"block_n {BN} is not a multiple of the {R} rows one pass copies")
    L["kcp_key"] = Layout(((cpr, R), (8, BN // R)), ((0, 1), (0, R)))
    L["kcp_d"] = Layout(((cpr, R), (8, BN // R)), ((8, 0), (1, 0)))
    kv = BN * D // (8 * T)
    _need(kv >= 2 and BN % kv == 0, f"V copy: {kv} keys per thread; need at least 2 "
                                     "(a 32-bit transposed LDS write)")
    # thread t: key group t % (BN/kv) (fast: a b64/b32 write phase stays in one V^T row),
    # head-dim chunk t // (BN/kv)
    ng = BN // kv
    L["vcp_key"] = Layout(((ng, T // ng), (8, kv)), ((kv, 0), (0, 1)))
    L["vcp_d"] = Layout(((ng, T // ng), (8, kv)), ((0, 8), (1, 0)))
    # LDS rows are stored permuted so that the MFMA-operand reads (lane i -> key pi(i), head
    # dim rho(i)) touch LDS rows i in order, which an XOR swizzle makes conflict-free:
    # K row of key k is pi(k % 32) + 32 (k // 32) (pi is an involution); V^T row of head dim d
    # is rho^-1(d % 32) + 32 (d // 32)
    perm_k = Layout((4, 2, 2, 2, BN // 32), (1, 8, 4, 16, 32))
    perm_v = Layout((4, 4, 2, D // 32), (1, 8, 4, 32))
    ns = cfg.lds_stages
    sk_inner = Layout((((4, 2, 2, 2, BN // 32), D), ns),
                      ((tuple(D * x for x in perm_k.stride), 1), BN * D))
    sv_inner = Layout((((4, 4, 2, D // 32), BN), ns),
                      ((tuple(BN * x for x in perm_v.stride), 1), D * BN))
    plan = AttnPlan(cfg, spec, spec, L, pi, rho, sk_inner, sv_inner, Swizzle(0, 0, 0),
                    Swizzle(0, 0, 0), kv_keys=kv, perm_k=perm_k, perm_v=perm_v)
    _check_pi_rho(plan)
    _choose_swizzles(plan)
    return plan


def _check_pi_rho(plan: AttnPlan) -> None:
    """pi and rho are permutations of 0..31, and the plan's layouts are the MFMA C layout
    composed with them (checked point by point against ``spec.tv_layout('C')``)."""
    for name, lay in (("pi", plan.pi), ("rho", plan.rho)):
        v = lay.values().reshape(-1)
        if sorted(v.tolist()) != list(range(32)):
            raise ConfigError(f"{name} = {lay} is not a permutation of 0..31")
    c = plan.spec1.tv_layout("C").values().reshape((64, 16), order="F")
    i_c, j_c = c % 32, c // 32                  # C[i][j]: i = MFMA row, j = column (query)
    L = plan.layouts
    W = plan.cfg.waves
    tids = np.arange(64)
    pi_v = plan.pi.values().reshape(-1)
    rho_v = plan.rho.values().reshape(-1)
    for r in range(16):
        key = np.array([L["s_key"]((t, r)) for t in tids])
        row = np.array([L["s_row"]((t, r)) for t in tids])
        dd = np.array([L["o_d"]((t, r)) for t in tids])
        if not (np.array_equal(key, pi_v[i_c[:, r]]) and np.array_equal(row, j_c[:, r])
                and np.array_equal(dd, rho_v[i_c[:, r]])):
            raise ConfigError(f"accumulator layouts disagree with {plan.spec1.name}'s C layout "
                              f"at item {r}")
    del W


def _tile_index(plan: AttnPlan, rows_l: Layout, cols_l: Layout, rows: int, groups,
                perm: Layout) -> np.ndarray:
    """[threads, values] tile indices ``perm(row) + rows * col`` of the given vector groups."""
    T = plan.cfg.threads
    pv = perm.values().reshape(-1)
    r = pv[rows_l.values().reshape((T, -1), order="F")]
    c = cols_l.values().reshape((T, -1), order="F")
    idx = r + rows * c
    return np.concatenate([idx[:, g] for g in groups], axis=1)


def k_read_groups(plan: AttnPlan):
    n = plan.layouts["kfr_key"][1].size()
    return [list(range(b, b + 8)) for b in range(0, n, 8)]


def v_read_groups(plan: AttnPlan):
    n = plan.layouts["vfr_key"][1].size()
    return [list(range(b, b + 8)) for b in range(0, n, 8)]


def k_write_groups(plan: AttnPlan):
    n = plan.layouts["kcp_key"][1].size()
    return [list(range(b, b + 8)) for b in range(0, n, 8)]


def v_write_groups(plan: AttnPlan):
    kv = plan.kv_keys
    return [[j + 8 * kk for kk in range(kv)] for j in range(8)]


def _choose_swizzles(plan: AttnPlan) -> None:
    from layoutalg.verify import suggest_swizzle
    c = plan.cfg
    D, BN = c.head_dim, c.block_n
    L = plan.layouts
    # K tile (BN keys x D) row-major: index = key + BN * d (column-major tile index)
    wk = _tile_index(plan, L["kcp_key"], L["kcp_d"], BN, k_write_groups(plan), plan.perm_k)
    rk = _tile_index(plan, L["kfr_key"], L["kfr_d"], BN, k_read_groups(plan), plan.perm_k)
    res = suggest_swizzle((BN, D), write=wk, read=rk, elem_bytes=2, arch=c.arch,
                          write_instruction="ds_write_b128", read_instruction="ds_read_b128")
    plan.sk_search = res
    if res.holds and res.swizzle is not None:
        plan.sk_swizzle = res.swizzle
    # V^T tile (D x BN) row-major: index = perm_v(d) + D * key.  Row orders tried: rho^-1
    # (reads touch rows i in order), then one that also puts the two head dims a 64-byte-row
    # (BN = 32) write phase covers into the two halves of a bank window
    rv_cands = [plan.perm_v, Layout((4, 2, 2, 2, D // 32), (2, 8, 1, 16, 32))]
    for perm in rv_cands:
        wv = _tile_index(plan, L["vcp_d"], L["vcp_key"], D, v_write_groups(plan), perm)
        rv = _tile_index(plan, L["vfr_d"], L["vfr_key"], D, v_read_groups(plan), perm)
        res = suggest_swizzle((D, BN), write=wv, read=rv, elem_bytes=2, arch=c.arch,
                              write_instruction=f"ds_write_b{16 * plan.kv_keys}",
                              read_instruction="ds_read_b128")
        if plan.sv_search is None or res.holds:
            plan.sv_search = res
            plan.perm_v = perm
            plan.sv_inner = Layout(((perm.shape, BN), c.lds_stages),
                                   ((tuple(BN * x for x in perm.stride), 1), D * BN))
        if res.holds:
            if res.swizzle is not None:
                plan.sv_swizzle = res.swizzle
            break
