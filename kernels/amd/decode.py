"""Decode attention (seqlen_q = 1) for gfx942: bandwidth-bound, VALU only, gated like prefill.

Each query (batch, head) is served by ``C = head_dim / 8`` consecutive lanes; lane ``c`` holds
head dims ``8c .. 8c+7`` of q, of every key and value it loads (one 128-bit load each) and of
the output, so every global access is a 128-bit vector and the ``C`` lanes of a query read
``16 C`` contiguous bytes of each K/V row.  A block of 256 threads serves ``256 / C`` queries
(GQA: consecutive query heads of one KV head sit in one wave and read the same K/V lines).

Per step of ``U`` keys (all loads issued first, ``2U`` 128-bit loads in flight per lane)::

    s[u]  = sum over this lane's 8 dims q * k_u       (partial dot products)
    s[u] += s[u] of lane ^ m, m = 1, 2, .., C/2       (ds_swizzle bit mode, (m << 10) | 0x1f)
    [mask keys >= seqlen_kv]                          (last step only)
    m, alpha = online max; p[u] = exp2(s c - m c); l = l alpha + sum p; o = o alpha + sum p v_u

then ``o /= l`` and a 128-bit store.  Every lane of a query holds the same softmax state (the
scores are reduced across the query's lanes before the softmax), so no other exchange is needed.
The same gate as prefill proves index math, bounds, 128-bit widths, coverage, the exchanges
(same query row and key, disjoint head dims), the online softmax and the masking.

Long KV: this kernel has only ``ceil(B H / queries_per_block)`` work-groups; when that cannot
fill the GPU, :mod:`.decode_splitkv` splits the KV sequence over work-groups and merges.

Causal masking does not apply: with one query row, bottom-right causal attention sees every key
of the cache (and top-left would see only key 0, which no decoder wants).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

import sympy

from .driver import build_program
from .kernel_specs import decode_spec
from .flash_attention import (BuiltAttention, PrefillShape, R, attention_family, built_attention,
                              global_layouts, hot_loop_match)
from ..ir.attention import (AttnKernel, ExpScores, FinalNormalize, FVar, LaneXor, LOG2E,
                            MaskScores, Rescale, RowMax, ScalarParam, SoftmaxUpdate, VecAxpy,
                            VecDot)
from .gemm_plan import ConfigError, norm_dtype
from ..ir.core import Access, Barrier, Comment, Frag, If, Let, Loop, Param, ZeroFrag, sym

__all__ = ["DecodeConfig", "build_decode", "decode_instances", "decode_bytes",
           "DECODE_SCALARS"]

DECODE_SCALARS = ("batch", "seqlen_kv", "heads", "group", "q_sb", "q_sh", "k_sb", "k_sh",
                  "k_ss", "v_sb", "v_sh", "v_ss", "o_sb", "o_sh")


@dataclass(frozen=True)
class DecodeConfig:
    head_dim: int = 128
    dtype: str = "bf16"
    out_dtype: Optional[str] = "f16"
    keys_per_step: int = 8
    threads: int = 256
    arch: str = "gfx942"

    def normalized(self) -> "DecodeConfig":
        c = replace(self, dtype=norm_dtype(self.dtype),
                    out_dtype=norm_dtype(self.out_dtype or self.dtype, "out dtype"))
        if c.dtype not in ("f16", "bf16") or c.out_dtype not in ("f16", "bf16"):
            raise ConfigError("decode attention: f16/bf16 in and out")
        if c.head_dim not in (64, 128, 256):
            raise ConfigError(f"decode head_dim {c.head_dim}: use 64, 128 or 256")
        if c.keys_per_step not in (1, 2, 4, 8, 16):
            raise ConfigError("keys_per_step: 1, 2, 4, 8 or 16")
        if c.threads not in (64, 128, 256):
            raise ConfigError("threads: 64, 128 or 256")
        return c

    @property
    def lanes_per_query(self) -> int:
        return self.head_dim // 8

    @property
    def queries_per_block(self) -> int:
        return self.threads // self.lanes_per_query

    # the prefill gate reads cfg.block_n (KV tile) to size its key bit sets
    @property
    def block_n(self) -> int:
        return self.keys_per_step

    @property
    def block_m(self) -> int:
        return self.queries_per_block

    @property
    def causal(self) -> bool:
        return False


@dataclass
class DecodePlan:
    cfg: DecodeConfig

    def describe(self) -> Dict[str, str]:
        c = self.cfg
        return {"lane": f"tid -> (query tid // {c.lanes_per_query}, head dims 8 (tid % "
                        f"{c.lanes_per_query}) .. +8)",
                "exchange": "xor " + ", ".join(str(m) for m in _xors(c)) + " (ds_swizzle)"}


def _xors(c: DecodeConfig) -> List[int]:
    out, m = [], 1
    while m < c.lanes_per_query:
        out.append(m)
        m *= 2
    return out


def query_lets(lanes_per_query: int, queries_per_block: int) -> List[Any]:
    """The thread -> query mapping of the decode kernels (one query, ``qi`` = batch * heads +
    head, per ``lanes_per_query`` lanes, 8 head dims from ``dc`` per lane): ``qi``, ``dc``,
    ``bat``, ``h``."""
    tid, H = sym("tid"), R("heads")
    return [Let("qi", sym("block_q") * queries_per_block + sympy.floor(tid / lanes_per_query)),
            Let("dc", 8 * sympy.Mod(tid, lanes_per_query)),
            Let("bat", sympy.floor(sym("qi") / H)),
            Let("h", sympy.Mod(sym("qi"), H))]


class DecodeBuilder:
    def __init__(self, cfg: DecodeConfig) -> None:
        c = cfg.normalized()
        self.c = c
        D, U = c.head_dim, c.keys_per_step
        self.name = f"la_attn_decode_{c.dtype}_{c.out_dtype}_d{D}_u{U}_t{c.threads}"
        self.glob = global_layouts(D, seqlen_q=1)
        dt = c.dtype
        self.q_fr = Frag("q_fr", dt, 8, 8)
        self.k_ld = Frag("k_ld", dt, 8 * U, 8)
        self.v_ld = Frag("v_ld", dt, 8 * U, 8)
        self.s = Frag("s_fr", "f32", U, 1)
        self.p = Frag("p_fr", "f32", U, 1)
        self.o = Frag("o_acc", "f32", 8, 8)
        self.lse = Frag("lse_v", "f32", 1, 1)
        # the query row the masked scores belong to, and the end of the keys it sees (the split-KV
        # kernel of decode_splitkv.py overrides both)
        self.mask_row: Any = 0
        self.mask_bound: Any = R("seqlen_kv")

    def step(self, masked: bool) -> List[Any]:
        c = self.c
        U, C = c.keys_per_step, c.lanes_per_query
        it = sym("it")
        q_ok = sym("qi") < R("batch") * R("heads")
        out: List[Any] = [Comment(f"{U} keys: issue every K and V load, then the math")]
        keys = [it * U + u for u in range(U)]
        for t, frag in (("K", self.k_ld), ("V", self.v_ld)):
            G = self.glob[t]
            for u in range(U):
                coords = tuple((keys[u], sym("dc") + j, sym("hk"), sym("bat")) for j in range(8))
                out.append(Access("load", "global", t, sympy.expand(G(coords[0])), 8,
                                  frag.regs(range(8 * u, 8 * u + 8)),
                                  sympy.And(q_ok, keys[u] < R("seqlen_kv")), tag=f"{t}.load",
                                  origin=G, coords=coords))
        for u in range(U):
            out.append(VecDot(self.s, u, self.q_fr, tuple(range(8)), self.k_ld,
                              tuple(range(8 * u, 8 * u + 8))))
        for m in _xors(c):
            for u in range(U):
                out.append(LaneXor("", "sum", "swizzle", pattern=(m << 10) | 0x1F,
                                   frag=self.s, item=u,
                                   note=f"lane-xor {m}: (m << 10) | 0x1f" if u == 0 else ""))
        if masked:
            out.append(MaskScores(self.s, tuple(range(U)), tuple(self.mask_row for _ in range(U)),
                                  tuple(keys), tuple(k < self.mask_bound for k in keys)))
        out += [RowMax("mt", self.s, tuple(range(U))),
                SoftmaxUpdate("m_run", "mt", "alpha", "mc"),
                ExpScores(self.p, tuple(range(U)), self.s, tuple(range(U)), "mc", "l_run",
                          "alpha"),
                Rescale(self.o, tuple(range(8)), "alpha")]
        for u in range(U):
            out.append(VecAxpy(self.o, tuple(range(8)), self.p, u, self.v_ld,
                               tuple(range(8 * u, 8 * u + 8))))
        del C
        return out

    def build(self) -> AttnKernel:
        c = self.c
        D, U, C, Gq = c.head_dim, c.keys_per_step, c.lanes_per_query, c.queries_per_block
        tid = sym("tid")
        G = R("group")
        q_ok = sym("qi") < R("batch") * R("heads")
        body: List[Any] = [
            Comment(f"{C} lanes per query, {Gq} queries per block"),
            *query_lets(C, Gq),
            Let("hk", sympy.floor(sym("h") / G)),
            Let("n_steps", sympy.floor((R("seqlen_kv") + U - 1) / U)),
            Let("n_full", sympy.floor(R("seqlen_kv") / U)),
        ]
        GQ = self.glob["Q"]
        coords = tuple((0, sym("dc") + j, sym("h"), sym("bat")) for j in range(8))
        body.append(Access("load", "global", "Q", sympy.expand(GQ(coords[0])), 8,
                           self.q_fr.regs(range(8)), q_ok, tag="Q.load", origin=GQ,
                           coords=coords))
        body += [FVar("m_run", "-inf"), FVar("l_run", "0"), FVar("alpha", "0"),
                 FVar("mc", "0"), ZeroFrag(self.o)]
        body.append(Loop("it", 0, sym("n_full"), self.step(False)))
        body.append(Comment("last, partial step: mask keys past seqlen_kv"))
        body.append(Loop("it", sym("n_full"), sym("n_steps"), self.step(True)))
        body.append(FinalNormalize(self.o, tuple(range(8)), "l_run", "mc", self.lse))
        GO = self.glob["O"]
        coords = tuple((0, sym("dc") + j, sym("h"), sym("bat")) for j in range(8))
        body.append(Access("store", "global", "O", sympy.expand(GO(coords[0])), 8,
                           self.o.regs(range(8)), q_ok, tag="O.store", origin=GO, coords=coords))
        GL = self.glob["LSE"]
        coords = ((0, sym("h"), sym("bat")),)
        body.append(Access("store", "global", "LSE", sympy.expand(GL(coords[0])), 1,
                           self.lse.regs([0]), sympy.And(q_ok, sympy.Eq(sympy.Mod(tid, C), 0)),
                           tag="LSE.store", origin=GL, coords=coords))
        dt, ot = c.dtype, c.out_dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("O", ot, const=False),
                  Param("LSE", "f32", const=False)]
        scalars = [ScalarParam(n) for n in DECODE_SCALARS] + [ScalarParam("scale_log2", "float")]
        frags = [self.q_fr, self.k_ld, self.v_ld, self.s, self.p, self.o, self.lse]
        header = [f"decode attention (seqlen_q = 1): {dt} in, {ot} out, head_dim {D}, {C} lanes "
                  f"per query, {U} keys per step, 128-bit loads"]
        return AttnKernel(self.name, params, [], frags, body, c.threads, (0, 0, 1),
                          grid_symbols=("block_q", "block_s"), header=header,
                          meta={"plan": DecodePlan(c), "kind": "decode"}, scalars=scalars,
                          spec=decode_spec(self.name, c, DECODE_SCALARS, decode_instances))


def decode_instances(k: Any) -> List[Any]:
    from ..verify.attention_gate import Instance
    c = k.meta["plan"].cfg
    D, Gq = c.head_dim, c.queries_per_block
    shapes = [("ragged-gqa", PrefillShape.bhsd(3, 4, 2, 1, 2 * c.keys_per_step + 3, D)),
              ("one-key-mqa", PrefillShape.bhsd(2, 5, 1, 1, 1, D)),
              ("full-steps", PrefillShape.bhsd(1, 2, 2, 1, c.keys_per_step, D)),
              ("one-head", PrefillShape.bhsd(1, 1, 1, 1, c.keys_per_step + 1, D))]
    out = []
    for name, s in shapes:
        nq = s.batch * s.heads
        out.append(Instance(name, s.env(), (-(-nq // Gq), 1, 1), False))
    return out


def decode_grid(shape: PrefillShape, cfg: DecodeConfig) -> Tuple[int, int, int]:
    c = cfg.normalized()
    return (max(1, -(-(shape.batch * shape.heads) // c.queries_per_block)), 1, 1)


def decode_args(shape: PrefillShape, scale: float) -> List[Any]:
    e = shape.env()
    return [int(e[n]) for n in DECODE_SCALARS] + [float(scale * LOG2E)]


def decode_bytes(batch: int, heads: int, kv_heads: int, seqlen_kv: int, head_dim: int,
                 in_bytes: int = 2, out_bytes: int = 2) -> Dict[str, int]:
    """Bytes a decode call must move from/to HBM at least: q, K, V (once per KV head), O, LSE."""
    q = batch * heads * head_dim * in_bytes
    kv = 2 * batch * kv_heads * seqlen_kv * head_dim * in_bytes
    o = batch * heads * head_dim * out_bytes
    lse = batch * heads * 4
    return {"q": q, "kv": kv, "o": o, "lse": lse, "total": q + kv + o + lse}


def build_decode(cfg: DecodeConfig, *, verify: bool = True) -> BuiltAttention:
    """Build the IR, run the attention gate, emit HIP (:mod:`kernels.amd.driver`)."""
    family = attention_family(lambda c: DecodeBuilder(c).build())
    return build_program([family], cfg, lambda sts: built_attention(sts[0], "decode"),
                         verify=verify)


del Barrier, If, hot_loop_match
