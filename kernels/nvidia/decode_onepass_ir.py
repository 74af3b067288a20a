"""The one-pass decode (:class:`~.attention.DecodeAttention`, ``emit_decode``) built as kernel IR
and verified (issue 20 item 1): what ``decode_attention()`` runs for short caches where the
tensor-core IR kernel measured slower (fewer than ``SHORT_IR_KEYS`` keys, many blocks, d256).

The same lane layout and schedule as the template: ``G = D / 8`` lanes own one (batch, head)
row (``qi = block_q x rows_per_block + tid / G``), each lane 8 head dims ``dc = 8 (tid % G)``
(16-byte loads); per step of ``U = chunk`` keys every K and V row of the step is loaded before
the first use, each lane's partial dot product (8 ``fmaf`` from ``0.f``, the template's order) is
summed over its lane group by ``__shfl_xor_sync`` (xor 1, 2, .., G / 2), the scores are masked
and scaled to base 2 (``s * scale_log2``, the template's), the online softmax runs across the
steps and the 8 accumulators are divided by ``l`` and stored as one 16-byte vector.  The
statements are the AMD decode's (:mod:`kernels.amd.decode`: ``VecDot``, ``LaneXor``,
``MaskScores``, ``RowMax``, ``SoftmaxUpdate``, ``ExpScores``, ``Rescale``, ``VecAxpy``,
``FinalNormalize``) with ``LaneXor(method="shfl_xor")`` on a 32-lane warp, printed by
:mod:`kernels.printer.cuda_attention` (:mod:`kernels.printer.cuda_onepass`: the dot, axpy and
16-byte store helpers) and proved with its printed text by :func:`kernels.verify.verify` on
launches covering its edges (one key, ragged GQA, a partial last block, strided q / k / v /
out, every step count).

One difference from the template, not in a stored value for finite inputs: the keys past
``seqlen_kv`` in the last step are loaded predicated off (zeros, the loop's last, partial step
is a second loop over ``[n_full, n_steps)``) where the template clamps them to the last key (a
clamped key would be seen twice by the verifier); their scores are masked either way, so ``p =
0`` and ``fmaf(0, v, acc) = acc``.  The whole steps load unpredicated, as the template does
(predicated loads there let ptxas issue the V loads late, next to their use: 0.58-0.75x the
template's device time on an H100 at 8 / 16 keys per step, 2026-11-24).  Lanes of rows past
``batch x heads`` (a partial last block) compute the last row again (``qc = min(qi, rows -
1)``, the template's clamp) and store nothing.

Offsets are 32-bit ``int`` (the template's strides are ``long long``): a call whose offsets or
strides reach 2^31 (:func:`~.flash_ir.int_offsets_fit`) runs the ``wide`` form
(:data:`WIDE_FALLBACK_ON_IR`, on; off: the template): the same IR with the strides as ``long
long`` arguments (64-bit offsets, as the template's), proved with a launch whose batches lie
2^31 to 2^32 elements apart (``index_ranges`` types the ``long long`` arguments).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import sympy

from layoutalg import Layout

from ..errors import LaunchError
from ..ir.attention import (AttnKernel, ExpScores, FinalNormalize, FVar, LaneXor, LetMinMax,
                            MaskScores,
                            Rescale, RowMax, ScalarParam, SoftmaxUpdate, VecAxpy, VecDot,
                            runtime_symbol as R)
from ..ir.core import Access, Comment, Frag, Let, Loop, Param, ZeroFrag, sym
from .attention import AttentionConfigError, DecodeAttention, DecodeConfig, emit_decode
from .builder import CompiledKernel
from .flash_ir import attention_ir_spec, int_offsets_fit

__all__ = ["WIDE_FALLBACK_ON_IR", "STRIDE_SCALARS", "build_onepass_ir", "onepass_ir_spec", "onepass_instances", "onepass_ir_name",
           "onepass_layouts", "IrOnePassDecode", "ONEPASS_SCALARS", "int_offsets_fit",
           "onepass_config"]

ONEPASS_SCALARS = ("batch", "heads", "group", "seqlen_kv", "q_sb", "q_sh", "k_sb", "k_sh",
                   "k_ss", "v_sb", "v_sh", "v_ss", "o_sb", "o_sh")


def onepass_layouts(D: int) -> Dict[str, Layout]:
    """``(row, d, head, batch) -> element offset`` of Q / O (one query row: stride 0) and
    ``(key, d, kv_head, batch)`` of K / V, on the runtime strides."""
    out = {}
    for t in ("Q", "O"):
        p = t.lower()
        out[t] = Layout((1, D, R("heads"), R("batch")), (0, 1, R(f"{p}_sh"), R(f"{p}_sb")))
    for t in ("K", "V"):
        p = t.lower()
        out[t] = Layout((R("seqlen_kv"), D, R("kv_heads"), R("batch")),
                        (R(f"{p}_ss"), 1, R(f"{p}_sh"), R(f"{p}_sb")))
    return out


#: the strides, ``long long`` arguments in the wide form (:func:`build_onepass_ir`)
STRIDE_SCALARS = ONEPASS_SCALARS[4:]


def onepass_ir_name(cfg: DecodeConfig, wide: bool = False) -> str:
    return (f"lg_decode_ir_{cfg.in_dtype}_{cfg.out_dtype}_d{cfg.head_dim}_c{cfg.chunk}"
            f"_w{cfg.warps}{'_i64' if wide else ''}")


def onepass_ir_spec(name: str, cfg: DecodeConfig, instances: Any, wide: bool = False) -> Any:
    """``S = Q K^T`` over d, the online softmax over the keys (masked past seqlen_kv) in steps
    of ``chunk``, ``O = P V`` over the keys, normalised; no log-sum-exp (the template stores
    none); its (batch, head) symbols ``bat``, ``h``, ``hk`` enter global accesses only."""
    return attention_ir_spec(name, cfg.in_dtype, cfg.out_dtype, cfg.head_dim, cfg.chunk,
                             ONEPASS_SCALARS, instances, ("bat", "h", "hk"),
                             wide=STRIDE_SCALARS if wide else ())


def _xors(G: int) -> List[int]:
    return [1 << i for i in range(int(math.log2(G)))]


class _Builder:
    def __init__(self, cfg: DecodeConfig, wide: bool = False) -> None:
        emit_decode(cfg)                # the template's validation (dtypes, head_dim, chunk)
        if cfg.threads % cfg.lanes_per_row:
            raise AttentionConfigError(f"{cfg.threads} threads are not whole rows of "
                                       f"{cfg.lanes_per_row} lanes")
        self.c, self.wide = cfg, wide
        U, dt = cfg.chunk, cfg.in_dtype
        self.G = onepass_layouts(cfg.head_dim)
        self.q = Frag("q_fr", dt, 8)
        self.k = Frag("k_ld", dt, 8 * U)
        self.v = Frag("v_ld", dt, 8 * U)
        self.s = Frag("s_fr", "f32", U)
        self.p = Frag("p_fr", "f32", U)
        self.o = Frag("o_acc", "f32", 8)
        self.lse = Frag("lse_v", "f32", 1)

    def _vec(self, t: str, row: Any, head: Any, fr: Frag, first: int, pred: Any) -> Access:
        """A 16-byte access of tensor ``t`` at (row, dc .. dc + 7, head, bat)."""
        G = self.G[t]
        cs = tuple((row, sym("dc") + j, head, sym("bat")) for j in range(8))
        kind = "store" if t == "O" else "load"
        return Access(kind, "global", t, sympy.expand(G(cs[0])), 8,
                      fr.regs(range(first, first + 8)), pred, tag=f"{t}.{kind}", origin=G,
                      coords=cs)

    def step(self, last: bool) -> List[Any]:
        """One step of ``U`` keys: every K / V load, then per key the dot product, its lane-group
        sum and mask, then the online softmax and ``O += P V`` (the template's order).  Only
        the ``last`` step's loads are predicated (on the key being inside the cache)."""
        U, Gl = self.c.chunk, self.c.lanes_per_row
        keys = [sym("it") * U + u for u in range(U)]
        what = "the last, partial step: keys past seqlen_kv load zeros" if last else \
            "every K and V load in flight, then the math"
        out: List[Any] = [Comment(f"{U} keys: {what}")]
        for u in range(U):
            ok = sympy.StrictLessThan(keys[u], R("seqlen_kv")) if last else None
            out += [self._vec("K", keys[u], sym("hk"), self.k, 8 * u, ok),
                    self._vec("V", keys[u], sym("hk"), self.v, 8 * u, ok)]
        for u in range(U):
            out.append(VecDot(self.s, u, self.q, tuple(range(8)), self.k,
                              tuple(range(8 * u, 8 * u + 8))))
            out += [LaneXor("", "sum", "shfl_xor", pattern=m, frag=self.s, item=u)
                    for m in _xors(Gl)]
            # every step masks (and scales to base 2) as the template does
            out.append(MaskScores(self.s, (u,), (0,), (keys[u],),
                                  (sympy.StrictLessThan(keys[u], R("seqlen_kv")),)))
        items = tuple(range(U))
        out += [RowMax("mt", self.s, items), SoftmaxUpdate("m_run", "mt", "alpha", "mc"),
                ExpScores(self.p, items, self.s, items, "mc", "l_run", "alpha"),
                Rescale(self.o, tuple(range(8)), "alpha")]
        out += [VecAxpy(self.o, tuple(range(8)), self.p, u, self.v,
                        tuple(range(8 * u, 8 * u + 8))) for u in range(U)]
        return out

    def build(self) -> AttnKernel:
        c = self.c
        D, U, Gl, rpb = c.head_dim, c.chunk, c.lanes_per_row, c.rows_per_block
        tid = sym("tid")
        q_ok = sym("qi") < R("batch") * R("heads")
        body: List[Any] = [
            Comment(f"{Gl} lanes per (batch, head) row, {rpb} rows per block, 8 head dims a "
                    "lane"),
            Let("qi", sym("block_q") * rpb + sympy.floor(tid / Gl)),
            Comment("rows past batch x heads compute the last row again and store nothing "
                    "(no early exit: the shuffles need every lane)"),
            LetMinMax("qc", "min", sym("qi"), R("batch") * R("heads") - 1),
            Let("dc", 8 * sympy.Mod(tid, Gl)),
            Let("bat", sympy.floor(sym("qc") / R("heads"))),
            Let("h", sympy.Mod(sym("qc"), R("heads"))),
            Let("hk", sympy.floor(sym("h") / R("group"))),
            Let("n_full", sympy.floor(R("seqlen_kv") / U)),
            *([Let("n_steps", sympy.floor((R("seqlen_kv") + U - 1) / U))] if U > 1 else []),
            self._vec("Q", 0, sym("h"), self.q, 0, None),
            FVar("m_run", "-inf"), FVar("l_run", "0"), ZeroFrag(self.o),
            Loop("it", 0, sym("n_full"), self.step(False))]
        if U > 1:                       # one key a step: every step is whole
            body.append(Loop("it", sym("n_full"), sym("n_steps"), self.step(True)))
        body += [
            FinalNormalize(self.o, tuple(range(8)), "l_run", "m_run", self.lse),
            self._vec("O", 0, sym("h"), self.o, 0, q_ok)]
        name = onepass_ir_name(c, self.wide)
        dt, ot = c.in_dtype, c.out_dtype
        params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("O", ot, const=False)]
        header = [f"one-pass decode (kernels/nvidia/decode_onepass_ir.py): {dt} in, {ot} out, "
                  f"head_dim {D}, {Gl} lanes per (batch, head) row, {U} keys per step, FMA "
                  "dot products and lane-group shuffles; built as kernel IR and verified"]
        return AttnKernel(name, params, [], [self.q, self.k, self.v, self.s, self.p, self.o,
                                             self.lse],
                          body, c.threads, (0, 0, 1), grid_symbols=("block_q",), header=header,
                          meta={"kind": "decode_onepass", "cfg": c, "wide": self.wide},
                          scalars=[ScalarParam(n, "long long" if self.wide and
                                               n in STRIDE_SCALARS else "int")
                                   for n in ONEPASS_SCALARS] +
                          [ScalarParam("scale_log2", "float")],
                          spec=onepass_ir_spec(name, c, onepass_instances, self.wide))


def build_onepass_ir(cfg: DecodeConfig, wide: bool = False) -> AttnKernel:
    """The IR of the one-pass decode ``cfg`` with its spec (the template's validation:
    :class:`~.attention.AttentionConfigError` for what it refuses).  ``wide``: the strides are
    ``long long`` arguments, so every offset (a product with a stride) is 64-bit C arithmetic
    (the template's form), proved by ``index_ranges`` at a launch whose offsets pass 2^31."""
    return _Builder(cfg, wide).build()


# ---------------------------------------------------------------------------- verification

def onepass_instance(cfg: DecodeConfig, name: str, B: int, H: int, HK: int, skv: int,
                     layout: str = "bhsd") -> Any:
    """A launch of ``B x H`` rows over ``HK`` kv heads and ``skv`` keys: contiguous BHSD
    tensors, or (``layout="strided"``) q / out rows padded by 8 elements per head and K / V in
    BSHD order with their rows padded (every stride a different symbol value)."""
    from ..verify.attention_gate import Instance
    D = cfg.head_dim
    v: Dict[str, int] = dict(batch=B, heads=H, kv_heads=HK, group=H // HK, seqlen_q=1,
                             seqlen_kv=skv)
    if layout == "past-2^31":        # every batch of q / k / v / out 2^31 elements or more apart
        v.update(q_sh=D, q_sb=2 ** 32 + 8, o_sh=D + 8, o_sb=2 ** 31 + 64)
        for t, base in (("k", 2 ** 31 + 128), ("v", 3 * 2 ** 31)):
            v.update({f"{t}_ss": D, f"{t}_sh": skv * D, f"{t}_sb": base})
    elif layout == "strided":
        v.update(q_sh=D + 8, q_sb=H * (D + 8) + 16, o_sh=D + 16, o_sb=H * (D + 16))
        for t, pad in (("k", 8), ("v", 24)):
            ss = HK * D + pad
            v.update({f"{t}_ss": ss, f"{t}_sh": D, f"{t}_sb": skv * ss})
    else:
        v.update(q_sh=D, q_sb=H * D, o_sh=D, o_sb=H * D)
        for t in ("k", "v"):
            v.update({f"{t}_ss": D, f"{t}_sh": skv * D, f"{t}_sb": HK * skv * D})
    return Instance(name, v, (-(-B * H // cfg.rows_per_block), 1, 1), False)


def onepass_instances(k: Any) -> List[Any]:
    """One key (MQA, 5 heads); ragged GQA over 2 kv heads with a partial last step and a
    partial last block; whole steps only; strided q / k / v / out over 3 blocks' rows; the
    wide form also batches 2^31 to 2^32 elements apart (offsets up to ~2^33.6)."""
    c = k.meta["cfg"]
    U, rpb = c.chunk, c.rows_per_block
    many = 2 * rpb + 3
    return [onepass_instance(c, "one-key-mqa", 2, 5, 1, 1),
            onepass_instance(c, "ragged-gqa", 3, 4, 2, 2 * U + 3),
            onepass_instance(c, "whole-steps", 1, 2, 2, U),
            onepass_instance(c, "strided-many-blocks", 1, many, 1, U + 1, layout="strided")] + \
        ([onepass_instance(c, "offsets-past-2^31", 3, 4, 2, U + 2, layout="past-2^31")]
         if k.meta.get("wide") else [])


# ---------------------------------------------------------------------------- runtime

def onepass_config(q: Any, k: Any, out_dtype: str = "f16") -> DecodeConfig:
    """The one-pass configuration :func:`.attention.decode_attention` builds for q and k:
    ``chunk`` the power of two at least ``min(seqlen_kv, 16)``."""
    from .builder import short_dtype
    skv = k.shape[2] if k.dim() == 4 else 1
    chunk = 1
    while chunk < min(skv, 16):
        chunk *= 2
    return DecodeConfig(in_dtype=short_dtype(q), out_dtype=out_dtype, head_dim=q.shape[-1],
                        chunk=chunk)


#: a call whose 32-bit offsets do not fit runs the wide IR form (``long long`` strides,
#: verified with a launch past 2^31) instead of the template.  H100 2026-11-25:
#: tests/test_nvidia_onepass_ir_gpu.py::test_wide_form_past_2_31_equals_template passed
#: (bitwise the template on a 4 GiB cache); benchmarks/gpu_decode_wide.py: bitwise at B2 Hq8
#: Hkv2 S12 and B64 Hq32 Hkv8 S16 d128 (batches past 2^31), whole calls back to back 2.88x /
#: 2.61x faster than the template (launch-bound rows: 19-21 us vs 50-60 us per call)
WIDE_FALLBACK_ON_IR = True


class IrOnePassDecode(DecodeAttention):
    """The IR-built one-pass decode of ``cfg``, verified (IR and printed CUDA; a passing verdict
    is remembered on disk by content, :mod:`kernels.verify.report_cache`) before anything is
    compiled: ``dec(q, k, v, out=None, scale=None) -> out`` with the template's arguments and
    checks; a call whose element offsets reach 2^31 runs the ``wide`` form instead
    (:data:`WIDE_FALLBACK_ON_IR`; off: the template :class:`~.attention.DecodeAttention`,
    64-bit strides).  ``wide=True``: the strides are ``long long``
    arguments (:func:`build_onepass_ir`), every call fits.  ``report`` is the verifier's."""

    def __init__(self, cfg: DecodeConfig = DecodeConfig(), *, backend: str = "auto",
                 wide: bool = False) -> None:
        from ..printer.cuda_attention import emit_cuda_attention
        from ..verify.report_cache import verified
        self.wide = wide
        self.ir = build_onepass_ir(cfg, wide)
        source = emit_cuda_attention(self.ir)
        self.report = verified(self.ir, source, cfg.arch)
        CompiledKernel.__init__(self, cfg, source, backend)
        self.kernel_name = self.ir.name
        self.template: Optional[DecodeAttention] = None       # built on first need
        self.wide_kernel: Optional[IrOnePassDecode] = None

    def fallback(self) -> DecodeAttention:
        """The kernel of a call whose offsets do not fit: the wide IR form with
        :data:`WIDE_FALLBACK_ON_IR`, else the template."""
        if WIDE_FALLBACK_ON_IR:
            if self.wide_kernel is None:
                self.wide_kernel = IrOnePassDecode(self.cfg, wide=True)
            return self.wide_kernel
        if self.template is None:
            self.template = DecodeAttention(self.cfg)
        return self.template

    def fits(self, q: Any, k: Any, v: Any, out: Any = None) -> bool:
        """Whether the IR's 32-bit offsets reach every element of the call's tensors (and of
        the contiguous output it allocates when ``out`` is None); always, in the wide form."""
        if self.wide:
            return True
        if not int_offsets_fit(q, k, v):
            return False
        if out is None:
            return q.shape[0] * q.shape[1] * self.cfg.head_dim <= 2 ** 31
        return int_offsets_fit(out)

    def __call__(self, q, k, v, out=None, scale: Optional[float] = None):
        return self.bound(q, k, v, out, scale)(q, k, v, out)

    def bind(self, q, k, v, out=None, scale: Optional[float] = None):
        """Check the arguments (the template's checks, 32-bit offsets, the scale);
        ``run(q, k, v, out)`` for every call with their ``call_key`` (one prepared launch;
        the template's 64-bit kernel where the offsets do not fit)."""
        import torch
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec
        from .builder import TORCH_DT
        B, Hq, Hkv, Skv = self.check_args(q, k, v, out)
        cfg = self.cfg
        if not self.fits(q, k, v, out):
            tpl = self.fallback()
            return lambda q, k, v, out: tpl(q, k, v, out=out, scale=scale)
        s = 1.0 / math.sqrt(cfg.head_dim) if scale is None else float(scale)
        if not math.isfinite(s):
            raise LaunchError(f"scale must be finite, got {s}")
        site = LaunchSite(self.module, self.kernel_name, -(-(B * Hq) // cfg.rows_per_block),
                          cfg.threads,
                          signature=("ptr",) * 4 + tuple("i64" if self.wide and n in
                                                         STRIDE_SCALARS else "i32"
                                                         for n in ONEPASS_SCALARS) + ("f32",),
                          specs=[TensorSpec(strides=())] * 4 + [None] * (len(ONEPASS_SCALARS)
                                                                          + 1))
        head = [B, Hq, Hq // Hkv, Skv, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                k.stride(2), v.stride(0), v.stride(1), v.stride(2)]
        odt = getattr(torch, TORCH_DT[cfg.out_dtype])
        log2_scale = s * math.log2(math.e)

        def run(q, k, v, out):
            if out is None:
                out = torch.empty(q.shape, dtype=odt, device=q.device)
            site([q, k, v, out, *head, out.stride(0), out.stride(1), log2_scale])
            return out
        return run


_IR_DECODE: Dict[DecodeConfig, IrOnePassDecode] = {}


def onepass_ir_decode(q, k, v, *, out_dtype: str = "f16", scale: Optional[float] = None,
                      out=None) -> Any:
    """:func:`.attention.decode_attention` on the IR-built kernel (its configuration from
    :func:`onepass_config`)."""
    cfg = onepass_config(q, k, out_dtype)
    dec = _IR_DECODE.get(cfg)
    if dec is None:
        dec = _IR_DECODE[cfg] = IrOnePassDecode(cfg)
    return dec(q, k, v, out=out, scale=scale)


__all__ += ["onepass_ir_decode"]
del Tuple
