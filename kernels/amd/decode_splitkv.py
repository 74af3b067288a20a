"""Split-KV decode attention (seqlen_q = 1, long KV) for gfx942: two gated kernels.

The KV sequence of each query (batch, head) is cut into ``n_splits`` ranges of ``kv_chunk``
keys (a multiple of the keys per step ``U``); split ``s`` sees keys ``[s kv_chunk, min((s+1)
kv_chunk, seqlen_kv))``.

1. ``..._split``: grid ``(ceil(B H / queries_per_block), n_splits)``.  Block ``(x, s)`` runs the
   decode kernel of :mod:`.decode` (``D / 8`` lanes per query, 128-bit K/V loads, ``U`` keys per
   step, ``ds_swizzle`` xor reductions, online softmax) over split ``s``'s keys only and writes
   the split's partial, in fp32 workspace::

       Mp[b, h, s] = m c                      (running max in log2 units; -inf: no key)
       Lp[b, h, s] = sum_k exp2(s_k c - m c)
       Op[b, h, s, :] = sum_k exp2(s_k c - m c) v_k      (UNnormalised, two 128-bit stores)

2. ``..._combine``: grid ``(ceil(B H / queries_per_block), 1)``; the same lanes per query read
   every split's ``(Mp, Lp, Op)`` (``Op`` with 128-bit loads) and merge them exactly
   (log-sum-exp, online over the splits)::

       M = max_s Mp;  w_s = exp2(Mp_s - M);  L = sum_s w_s Lp_s;  O = sum_s w_s Op_s / L
       LSE = (M + log2 L) ln 2

The gate (:mod:`.attention_gate`) proves both kernels on instances (ragged last split, an
empty split, GQA, MQA, one key): index math, bounds, 128-bit widths, coverage of the workspace
and of O/LSE, the exchanges and the online softmax of each split, the masking (split ``s`` is
checked as query "row" ``s`` of a problem whose row ``s`` sees exactly its key range; Q's row
mode has stride 0: every split reads the one query row), ``split_partition`` (per (batch,
head) the stored partials' key sets are disjoint and cover ``[0, seqlen_kv)``) and
``reduction_reads_partials`` (each output element merged the partials of its own (batch, head)
and head dim, every split exactly once).  The exp2/fma arithmetic is checked numerically by the
emulator tests against torch SDPA.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import sympy

from layoutalg import Layout

from ..ir.attention import (AttnKernel, FVar, LOG2E, MergeFinal, MergeStep, PartialStats,
                            ScalarParam)
from ..printer.attention import emit_attention
from ..built import BuiltProgram
from .decode import DECODE_SCALARS, DecodeBuilder, DecodeConfig, DecodePlan, query_lets
from .driver import Stages, build_program
from .kernel_specs import combine_spec, split_spec
from .flash_attention import BuiltAttention, PrefillShape, R, attention_family, built_attention
from ..errors import KernelError
from .gemm_plan import ConfigError
from ..ir.core import Access, Comment, Frag, Let, Loop, Param, ZeroFrag, sym

__all__ = ["SplitKVConfig", "build_splitkv", "BuiltSplitKV", "choose_splits", "splitkv_bytes",
           "splitkv_instances", "SPLIT_SCALARS", "COMBINE_SCALARS", "MI300X_CUS"]

SPLIT_SCALARS = tuple(n for n in DECODE_SCALARS if not n.startswith("o_")) + ("n_splits",
                                                                             "kv_chunk")
COMBINE_SCALARS = ("batch", "heads", "n_splits", "o_sb", "o_sh")
MI300X_CUS = 304
MIN_KEYS_PER_SPLIT = 256
MAX_SPLITS = 256


@dataclass(frozen=True)
class SplitKVConfig(DecodeConfig):
    """Compile-time options of the split-KV pair (the split count and the keys per split are
    runtime arguments: :func:`choose_splits`)."""


def workspace_layouts(D: int) -> Dict[str, Layout]:
    """``(split, d, head, batch)`` -> fp32 offset of ``Op`` (``[B, H, n_splits, D]``) and
    ``(split, 0, head, batch)`` of ``Mp``/``Lp`` (``[B, H, n_splits]``)."""
    S, H, B = R("n_splits"), R("heads"), R("batch")
    return {"Op": Layout((S, D, H, B), (D, 1, S * D, H * S * D)),
            "Mp": Layout((S, 1, H, B), (1, 0, S, H * S)),
            "Lp": Layout((S, 1, H, B), (1, 0, S, H * S))}


def _q_split_layout(D: int) -> Layout:
    """Q seen by split ``s`` as query row ``s``: the row mode has stride 0 (one query row)."""
    return Layout((R("n_splits"), D, R("heads"), R("batch")), (0, 1, R("q_sh"), R("q_sb")))


class SplitBuilder(DecodeBuilder):
    def __init__(self, cfg: DecodeConfig) -> None:
        super().__init__(cfg)
        c = self.c
        self.name = (f"la_attn_decode_split_{c.dtype}_d{c.head_dim}_u{c.keys_per_step}"
                     f"_t{c.threads}")
        self.glob["Q"] = _q_split_layout(c.head_dim)
        self.glob.update(workspace_layouts(c.head_dim))
        self.o = Frag("o_acc", "f32", 8, 4)
        self.m_out = Frag("m_part", "f32", 1, 1)
        self.l_out = Frag("l_part", "f32", 1, 1)
        self.mask_row = sym("split")
        self.mask_bound = sym("k1")

    def build(self) -> AttnKernel:
        c = self.c
        D, U, C, Gq = c.head_dim, c.keys_per_step, c.lanes_per_query, c.queries_per_block
        tid, sp = sym("tid"), sym("split")
        G = R("group")
        q_ok = sym("qi") < R("batch") * R("heads")
        body: List[Any] = [
            Comment(f"{C} lanes per query, {Gq} queries per block; block (x, split) reads keys "
                    "[k0, k1) of split `split`"),
            *query_lets(C, Gq),
            Let("hk", sympy.floor(sym("h") / G)),
            Let("k0", sp * R("kv_chunk")),
        ]
        from ..ir.attention import LetMinMax
        body += [LetMinMax("k1m", "min", R("seqlen_kv"), sym("k0") + R("kv_chunk")),
                 LetMinMax("k1", "max", sym("k0"), sym("k1m")),
                 Comment(f"kv_chunk is a multiple of {U} (checked at launch): steps start at k0"),
                 Let("it0", sympy.floor(sym("k0") / U)),
                 Let("n_full", sympy.floor(sym("k1") / U)),
                 Let("n_steps", sympy.floor((sym("k1") + U - 1) / U))]
        GQ = self.glob["Q"]
        coords = tuple((sp, sym("dc") + j, sym("h"), sym("bat")) for j in range(8))
        body.append(Access("load", "global", "Q", sympy.expand(GQ(coords[0])), 8,
                           self.q_fr.regs(range(8)), q_ok, tag="Q.load", origin=GQ,
                           coords=coords))
        body += [FVar("m_run", "-inf"), FVar("l_run", "0"), FVar("alpha", "0"),
                 FVar("mc", "0"), ZeroFrag(self.o)]
        body.append(Loop("it", sym("it0"), sym("n_full"), self.step(False)))
        body.append(Comment("last, partial step of the split: mask keys >= k1"))
        body.append(Loop("it", sym("n_full"), sym("n_steps"), self.step(True)))
        body.append(Comment("the split's partial: (max in log2 units, sum, unnormalised O)"))
        body.append(PartialStats(self.o, tuple(range(8)), "l_run", "m_run", self.m_out,
                                 self.l_out))
        GO = self.glob["Op"]
        for g in range(2):
            coords = tuple((sp, sym("dc") + 4 * g + j, sym("h"), sym("bat")) for j in range(4))
            body.append(Access("store", "global", "Op", sympy.expand(GO(coords[0])), 4,
                               self.o.regs(range(4 * g, 4 * g + 4)), q_ok, tag="Op.store",
                               origin=GO, coords=coords))
        lead = sympy.And(q_ok, sympy.Eq(sympy.Mod(tid, C), 0))
        for buf, fr in (("Mp", self.m_out), ("Lp", self.l_out)):
            GL = self.glob[buf]
            coords = ((sp, 0, sym("h"), sym("bat")),)
            body.append(Access("store", "global", buf, sympy.expand(GL(coords[0])), 1,
                               fr.regs([0]), lead, tag=f"{buf}.store", origin=GL, coords=coords))
        dt = c.dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("Op", "f32", const=False),
                  Param("Mp", "f32", const=False), Param("Lp", "f32", const=False)]
        scalars = [ScalarParam(n) for n in SPLIT_SCALARS] + [ScalarParam("scale_log2", "float")]
        frags = [self.q_fr, self.k_ld, self.v_ld, self.s, self.p, self.o, self.m_out, self.l_out]
        header = [f"split-KV decode attention, split kernel: {dt} in, fp32 partials, head_dim "
                  f"{D}, {C} lanes per query, {U} keys per step, 128-bit loads"]
        return AttnKernel(self.name, params, [], frags, body, c.threads, (0, 0, 1),
                          grid_symbols=("block_q", "split"), header=header,
                          meta={"plan": DecodePlan(c), "kind": "decode_split"},
                          scalars=scalars,
                          spec=split_spec(self.name, c, SPLIT_SCALARS, splitkv_instances,
                                          stat_frags=(self.m_out.name,)))


class CombineBuilder:
    def __init__(self, cfg: DecodeConfig) -> None:
        self.c = c = cfg.normalized()
        self.name = f"la_attn_decode_combine_{c.out_dtype}_d{c.head_dim}_t{c.threads}"
        from .flash_attention import global_layouts
        self.glob = global_layouts(c.head_dim, seqlen_q=1)
        self.glob.update(workspace_layouts(c.head_dim))

    def build(self) -> AttnKernel:
        c = self.c
        D, C, Gq = c.head_dim, c.lanes_per_query, c.queries_per_block
        tid, s = sym("tid"), sym("s")
        q_ok = sym("qi") < R("batch") * R("heads")
        x = Frag("x_fr", "f32", 8, 4)
        mp, lp = Frag("mp_fr", "f32", 1, 1), Frag("lp_fr", "f32", 1, 1)
        o = Frag("o_acc", "f32", 8, 8)
        lse = Frag("lse_v", "f32", 1, 1)
        body: List[Any] = [
            Comment(f"{C} lanes per query (8 head dims each), {Gq} queries per block"),
            *query_lets(C, Gq),
            FVar("m_run", "-inf"), FVar("l_run", "0"), ZeroFrag(o)]
        step: List[Any] = []
        for buf, fr in (("Mp", mp), ("Lp", lp)):
            G = self.glob[buf]
            coords = ((s, 0, sym("h"), sym("bat")),)
            step.append(Access("load", "global", buf, sympy.expand(G(coords[0])), 1,
                               fr.regs([0]), q_ok, tag=f"{buf}.load", origin=G, coords=coords))
        G = self.glob["Op"]
        for g in range(2):
            coords = tuple((s, sym("dc") + 4 * g + j, sym("h"), sym("bat")) for j in range(4))
            step.append(Access("load", "global", "Op", sympy.expand(G(coords[0])), 4,
                               x.regs(range(4 * g, 4 * g + 4)), q_ok, tag="Op.load", origin=G,
                               coords=coords))
        step.append(MergeStep(o, tuple(range(8)), x, tuple(range(8)), mp, 0, lp, 0, "m_run",
                              "l_run"))
        body.append(Loop("s", 0, R("n_splits"), step))
        body.append(MergeFinal(o, tuple(range(8)), "l_run", "m_run", lse))
        GO = self.glob["O"]
        coords = tuple((0, sym("dc") + j, sym("h"), sym("bat")) for j in range(8))
        body.append(Access("store", "global", "O", sympy.expand(GO(coords[0])), 8,
                           o.regs(range(8)), q_ok, tag="O.store", origin=GO, coords=coords))
        GL = self.glob["LSE"]
        coords = ((0, sym("h"), sym("bat")),)
        body.append(Access("store", "global", "LSE", sympy.expand(GL(coords[0])), 1,
                           lse.regs([0]), sympy.And(q_ok, sympy.Eq(sympy.Mod(tid, C), 0)),
                           tag="LSE.store", origin=GL, coords=coords))
        params = [Param("Op", "f32"), Param("Mp", "f32"), Param("Lp", "f32"),
                  Param("O", c.out_dtype, const=False), Param("LSE", "f32", const=False)]
        scalars = [ScalarParam(n) for n in COMBINE_SCALARS]
        header = [f"split-KV decode attention, combine kernel: fp32 partials -> {c.out_dtype} O "
                  f"and fp32 LSE, head_dim {D}, log-sum-exp merge over the splits"]
        return AttnKernel(self.name, params, [], [x, mp, lp, o, lse], body, c.threads, (0, 0, 1),
                          grid_symbols=("block_q", "block_s"), header=header,
                          meta={"plan": DecodePlan(c), "kind": "decode_combine"},
                          scalars=scalars,
                          spec=combine_spec(self.name, c, COMBINE_SCALARS, splitkv_instances))


# ---------------------------------------------------------------------------- shapes

def splitkv_instances(k: Any) -> List[Any]:
    """Gate instances: a ragged last split with GQA, an empty trailing split, MQA with one key,
    splits of one step each."""
    from ..verify.attention_gate import Instance
    c = k.meta["plan"].cfg
    D, U, Gq = c.head_dim, c.keys_per_step, c.queries_per_block
    cases = [("ragged-gqa", PrefillShape.bhsd(3, 4, 2, 1, 4 * U + 3, D), 2 * U, 3),
             ("empty-split-one-head", PrefillShape.bhsd(1, 1, 1, 1, 2 * U, D), U, 3),
             ("one-key-mqa", PrefillShape.bhsd(2, 5, 1, 1, 1, D), U, 1),
             ("one-step-splits", PrefillShape.bhsd(1, 2, 2, 1, 3 * U, D), U, 3)]
    out = []
    for name, s, chunk, ns in cases:
        v = s.env()
        v.update(n_splits=ns, kv_chunk=chunk)
        nqb = -(-(s.batch * s.heads) // Gq)
        grid = (nqb, ns if k.meta["kind"] == "decode_split" else 1, 1)
        out.append(Instance(name, v, grid, False))
    return out


def choose_splits(batch: int, heads: int, seqlen_kv: int, cfg: DecodeConfig,
                  kv_splits: Optional[int] = None) -> Tuple[int, int]:
    """``(n_splits, kv_chunk)``.  Automatic: enough blocks to fill MI300X (304 CUs x 3 resident
    blocks of the 132-VGPR decode kernel), at least 256 keys per split, at most 256 splits;
    ``kv_chunk`` is rounded up to the keys per step and the count recomputed from it, so no split
    is empty (except for seqlen_kv = 0).  ``kv_splits`` asks for a count explicitly."""
    c = cfg.normalized()
    U = c.keys_per_step
    if seqlen_kv <= 0:
        return 1, U
    if kv_splits is None:
        q_blocks = -(-(batch * heads) // c.queries_per_block)
        want = -(-(3 * MI300X_CUS) // q_blocks)
        n = max(1, min(want, seqlen_kv // MIN_KEYS_PER_SPLIT, MAX_SPLITS))
    else:
        if int(kv_splits) < 1:
            raise ConfigError(f"kv_splits {kv_splits} must be positive")
        n = min(int(kv_splits), -(-seqlen_kv // U))
    chunk = -(-(-(-seqlen_kv // n)) // U) * U
    return -(-seqlen_kv // chunk), chunk


def splitkv_bytes(batch: int, heads: int, kv_heads: int, seqlen_kv: int, head_dim: int,
                  n_splits: int, in_bytes: int = 2, out_bytes: int = 2) -> Dict[str, int]:
    """Bytes the two kernels move from/to HBM at least: q, K, V (once per KV head), the fp32
    partials written and read back (O, max, sum per split), O, LSE."""
    q = batch * heads * head_dim * in_bytes
    kv = 2 * batch * kv_heads * seqlen_kv * head_dim * in_bytes
    part = batch * heads * n_splits * (head_dim + 2) * 4
    o = batch * heads * head_dim * out_bytes
    lse = batch * heads * 4
    return {"q": q, "kv": kv, "partials_write": part, "partials_read": part, "o": o, "lse": lse,
            "total": q + kv + 2 * part + o + lse}


def split_args(shape: PrefillShape, scale: float, n_splits: int, kv_chunk: int) -> List[Any]:
    e = shape.env()
    e.update(n_splits=n_splits, kv_chunk=kv_chunk)
    return [int(e[n]) for n in SPLIT_SCALARS] + [float(scale * LOG2E)]


def combine_args(shape: PrefillShape, n_splits: int) -> List[Any]:
    e = shape.env()
    e["n_splits"] = n_splits
    return [int(e[n]) for n in COMBINE_SCALARS]


# ---------------------------------------------------------------------------- the pair

class _PairReport:
    """Both kernels' gate reports as one: a check holds when it holds for both."""

    def __init__(self, split: Any, combine: Any) -> None:
        self.split, self.combine = split, combine

    def as_bools(self) -> Dict[str, bool]:
        a, b = self.split.as_bools(), self.combine.as_bools()
        return {k: a.get(k, True) and b.get(k, True) for k in list(a) + [k for k in b
                                                                         if k not in a]}

    def to_json(self) -> Dict[str, Any]:
        return {"split": self.split.to_json(), "combine": self.combine.to_json()}

    @property
    def details(self) -> Dict[str, Any]:
        return {"instances": self.split.details.get("instances"),
                "split": self.split.details, "combine": self.combine.details}

    @property
    def checks(self) -> Dict[str, Any]:
        out = dict(self.combine.checks)
        for k, r in self.split.checks.items():
            if k not in out or r.holds is False:
                out[k] = r
        return out

    def raise_if_failed(self) -> None:
        self.split.raise_if_failed()
        self.combine.raise_if_failed()


@dataclass
class _PairResult:
    outputs: List[Any]
    seconds: float
    stats: Dict[str, Any] = field(default_factory=dict)


class BuiltSplitKV(BuiltProgram):
    """The gated split / combine pair in ONE source (one code object with two kernels)."""

    kind = "decode_splitkv"

    def __init__(self, split: BuiltAttention, combine: BuiltAttention, cfg: SplitKVConfig,
                 timings: Dict[str, float]) -> None:
        self.split, self.combine, self.cfg = split, combine, cfg
        self.name = split.name
        self.source = split.source + "\n" + emit_attention(combine.ir, prelude=False)
        self.verification = _PairReport(split.verification, combine.verification)
        self.timings = timings
        self.code_object = None
        self.plan = split.plan

    @property
    def block(self) -> int:
        return self.split.block

    @property
    def arch(self) -> str:
        return self.cfg.arch

    def report(self) -> Dict[str, Any]:
        if self.code_object is None:
            self.compile()
        out: Dict[str, Any] = {}
        for who, bk in (("split", self.split), ("combine", self.combine)):
            bk.code_object = self.code_object
            r = self.code_object.report(bk.name, block_threads=bk.block)
            out[who] = {"kernel": bk.name, "vgpr": r.vgpr, "agpr": r.agpr, "sgpr": r.sgpr,
                        "lds_bytes": r.lds_bytes, "scratch_bytes": r.scratch_bytes,
                        "spills": r.spills, "waves_per_simd": r.waves_per_simd,
                        "mfma_count": r.mfma_count, "hot_loop": r.hot_loop,
                        "instructions": r.instructions}
        s, c = out["split"], out["combine"]
        rep = {"kernel": self.name, "kind": self.kind, "arch": self.arch,
               **{k: s[k] for k in ("vgpr", "agpr", "sgpr", "lds_bytes", "waves_per_simd",
                                    "mfma_count", "hot_loop", "instructions")},
               "scratch_bytes": max(s["scratch_bytes"], c["scratch_bytes"]),
               "spills": s["spills"] + c["spills"], "hot_loop_mfma": 0,
               "verification": self.verification.as_bools(),
               "verification_detail": self.verification.to_json(),
               "verification_domain": self.verification.details.get("instances"),
               "block": self.block, "kernels": out,
               "config": {k: getattr(self.cfg, k) for k in self.cfg.__dataclass_fields__},
               "timings_s": dict(self.timings)}
        return rep

    def emulate(self, *args: Any, grid: Any = None, **kw: Any) -> Any:
        """Refused: the pair is two launches with a workspace between them (a launch of
        ``source`` by ``name`` would run the split kernel alone); use :meth:`emulate_pair`."""
        raise KernelError(f"split-KV pair {self.name}: two kernels, two launches; emulate it "
                          "with emulate_pair(q, k, v, out, lse, shape, scale, n_splits, "
                          "kv_chunk)")

    def emulate_pair(self, q: Any, k: Any, v: Any, out: Any, lse: Any, shape: PrefillShape,
                     scale: float, n_splits: int, kv_chunk: int, **kw: Any) -> _PairResult:
        """Run both kernels on the CPU emulator (fp32 workspace allocated here)."""
        import torch
        from ..emulator import run
        B, H, D = shape.batch, shape.heads, self.cfg.head_dim
        op = torch.full((B * H * n_splits * D,), float("nan"), dtype=torch.float32)
        mp = torch.full((B * H * n_splits,), float("nan"), dtype=torch.float32)
        lp = torch.full((B * H * n_splits,), float("nan"), dtype=torch.float32)
        g1, g2 = self.grids(shape, n_splits)
        r1 = run(self.source, self.split.name, g1, self.block,
                 [q, k, v, op, mp, lp] + split_args(shape, scale, n_splits, kv_chunk),
                 arch=self.arch, name=f"{self.name}.hip", **kw)
        r2 = run(self.source, self.combine.name, g2, self.combine.block,
                 [op, mp, lp, out, lse] + combine_args(shape, n_splits), arch=self.arch,
                 name=f"{self.name}.hip", **kw)
        return _PairResult([q, k, v, r2.outputs[3], r2.outputs[4]], r1.seconds + r2.seconds,
                           {"split": r1.stats, "combine": r2.stats,
                            "workspace": (op, mp, lp)})

    def grids(self, shape: PrefillShape, n_splits: int) -> Tuple[Tuple[int, int, int], ...]:
        nqb = max(1, -(-(shape.batch * shape.heads) // self.cfg.normalized().queries_per_block))
        return (nqb, n_splits, 1), (nqb, 1, 1)


def validate_split(n_splits: int, kv_chunk: int, seqlen_kv: int, cfg: DecodeConfig) -> None:
    U = cfg.normalized().keys_per_step
    if n_splits < 1 or kv_chunk < 1 or kv_chunk % U:
        raise ConfigError(f"kv_chunk {kv_chunk} must be a positive multiple of the {U} keys per "
                          "step")
    if n_splits * kv_chunk < seqlen_kv:
        raise ConfigError(f"{n_splits} splits of {kv_chunk} keys do not cover seqlen_kv "
                          f"{seqlen_kv}")


def _check_same_workspace(bk: BuiltSplitKV) -> None:
    """The pair's link, read from the two kernels' specs: the split spec's workspace tensors are
    the combine spec's merged partials (same names, dimensions, dtypes), and the combine kernel
    reads them through the same layouts (printed from the same layoutalg objects) the split
    kernel writes them with; else the combine's ``reduction_reads_partials`` fails."""
    from layoutalg.verify.result import CheckResult
    from ..ir.core import walk
    sspec, cspec = bk.split.ir.spec, bk.combine.ir.spec
    parts = cspec.split_merge.partials
    ws = {t.name: t for t in sspec.by_role("workspace")}
    spec_bad = [f"{b}: the split kernel's spec writes "
                f"{(ws[b].dims, ws[b].dtype) if b in ws else 'no such workspace'}, the combine's "
                f"reads {(cspec.tensor(b).dims, cspec.tensor(b).dtype)}"
                for b in parts if b not in ws or (ws[b].dims, ws[b].dtype) !=
                (cspec.tensor(b).dims, cspec.tensor(b).dtype)]
    spec_bad += [f"{b}: written by the split kernel, merged by no combine step"
                 for b in ws if b not in parts]

    def origins(ir: Any) -> Dict[str, set]:
        out: Dict[str, set] = {}
        for a in walk(ir.body):
            if isinstance(a, Access) and a.buf in parts:
                out.setdefault(a.buf, set()).add(str(a.origin))
        return out
    w, r = origins(bk.split.ir), origins(bk.combine.ir)
    bad = [b for b in parts if len(w.get(b, ())) != 1 or w.get(b) != r.get(b)]
    rep = bk.combine.verification
    old = rep.checks.get("reduction_reads_partials")
    if old is None:
        return
    dom = old.domain + f"; the split kernel writes and the combine kernel reads " \
                       f"{', '.join(parts)} (the split spec's workspace is the combine spec's " \
                       f"partials, same dimensions and dtypes) through the same layouts: " + \
        ", ".join(f"{b} {sorted(w.get(b, ()))}" for b in parts)
    cex = old.counterexample
    if bad or spec_bad:
        cex = (cex + "\n" if cex else "") + "; ".join(spec_bad + [
            f"{b}: written as {sorted(w.get(b, ()))}, read as {sorted(r.get(b, ()))}" for b in bad])
    rep.checks["reduction_reads_partials"] = CheckResult(
        check="reduction_reads_partials", holds=old.holds and not bad and not spec_bad,
        method=old.method,
        domain=dom, counterexample=cex)


def build_splitkv(cfg: DecodeConfig, *, verify: bool = True) -> BuiltSplitKV:
    """Build, gate and print the split and combine kernels (:mod:`kernels.amd.driver`); their
    printed text is checked in the one source that compiles both, and the pair is linked by
    :func:`_check_same_workspace`."""
    c = SplitKVConfig(**{k: getattr(cfg, k) for k in DecodeConfig.__dataclass_fields__})
    c = c.normalized()
    t0 = time.perf_counter()

    def make(stages: List[Stages]) -> BuiltSplitKV:
        split, combine = (built_attention(st, st.ir.meta["kind"]) for st in stages)
        return BuiltSplitKV(split, combine, c, {"build_and_gate_s": time.perf_counter() - t0})
    # a default argument binds each builder (a bare closure would see only the last one)
    families = [attention_family(lambda c_, B=B: B(c_).build())
                for B in (SplitBuilder, CombineBuilder)]
    return build_program(families, c, make, verify=verify, link=_check_same_workspace)


del Sequence
