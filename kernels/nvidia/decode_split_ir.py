"""The tensor-core split-KV decode's SPLIT kernel (:mod:`.decode_mma`) as kernel IR (issue 20
item 1): so far the KV loop of one block, on the statements of :mod:`kernels.ir.warp_registers`
and ``mma.sync`` (the warps' merge through shared memory and the partial's writes are not IR
yet: :func:`split_loop_statements` is what the verifier proves today, in
``tests/test_nvidia_ir_split_loop.py``).

The IR follows the template's plan (lane ``(g, t)``, ``g = lane / 4``, ``t = lane % 4``, the
interleaved 16-byte vectors of :func:`.decode_mma.fragment_maps`), with three differences the
instance engine needs, none of which changes a stored value:

* Q rows past the block's ``hg`` heads load head ``h0 + hg - 1`` again (``gq = min(g, hg -
  1)``) instead of zeros: every load is unpredicated and in range; the duplicated rows' scores
  and O^T columns are never stored (rows 8-15 of the A operand are the zero words, the
  engine's zero-padded rows);
* keys past the split are not clamped to its last key but loaded where they are (predicated on
  ``key < seqlen_kv``, the tensor's range) and masked at the split's end, so every register
  holds the key it claims (a clamped load would make the engine see the last key twice);
* the tile loop is block-uniform (``ceil(tiles / warps)`` iterations; a warp's tile past the
  split is entirely masked: ``alpha = 1``, ``p = 0``), where the template's loop bound is per
  warp.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import sympy

from layoutalg import Layout
from mfma_specs.nvidia import mma_m16n8k16

from ..ir.attention import (ExpScores, FVar, LaneXor, LetMinMax, MaskScores, Rescale, RowMax,
                            SoftmaxUpdate, runtime_symbol as R)
from ..ir.core import Access, Comment, Frag, Let, Loop, Mfma, ZeroFrag, sym
from ..ir.warp_registers import PackWord, ShflBroadcast, SplitProbs
from .attention import AttentionConfigError
from .decode_mma import QK_LANE, QK_VEC, V_LANE, V_VEC, MmaDecodeConfig, validate
from .decode_padded import (TEMPLATE_HEAD_DIMS, IR_MAX_HEAD_DIM, ir_head_dim_ok,
                            policy_head_dim, qk_width, v_width)

__all__ = ["build_decode_split_ir", "split_instances", "split_loop_statements", "split_frags",
           "qkv_layouts", "split_lse_spec", "merge_tail", "split_ir_name", "acc_layout",
           "padded_heads",
           "check_same_workspace", "validate_ir",
           "SPLIT_IR_SCALARS"]

SPLIT_IR_SCALARS = ("batch", "heads", "kv_heads", "group", "seqlen_kv", "kv_chunk", "q_sb",
                    "q_sh", "k_sb", "k_sh", "k_ss", "v_sb", "v_sh", "v_ss")


def qkv_layouts(D: int) -> Dict[str, Layout]:
    """``(row, d, head, batch)`` -> element offset: Q (its row mode, the split, has stride 0:
    every split reads the one query row), K and V ``(key, d, kv_head, batch)``."""
    return {"Q": Layout((R("n_splits"), D, R("heads"), R("batch")), (0, 1, R("q_sh"), R("q_sb"))),
            "K": Layout((R("seqlen_kv"), D, R("kv_heads"), R("batch")),
                        (R("k_ss"), 1, R("k_sh"), R("k_sb"))),
            "V": Layout((R("seqlen_kv"), D, R("kv_heads"), R("batch")),
                        (R("v_ss"), 1, R("v_sh"), R("v_sb")))}


def validate_ir(cfg: MmaDecodeConfig) -> None:
    """:func:`.decode_mma.validate` for the IR kernels: any head_dim of
    :func:`.decode_padded.ir_head_dim_ok`, the rest of the configuration checked as at its
    :func:`.decode_padded.policy_head_dim` (whose registers and shared memory bound its
    own); else :class:`~.attention.AttentionConfigError`."""
    from dataclasses import replace
    D = cfg.head_dim
    if not ir_head_dim_ok(D):
        raise AttentionConfigError(f"head_dim {D}: the tensor-core decode's IR kernel takes a "
                                   f"multiple of 16 from 16 to {IR_MAX_HEAD_DIM}")
    validate(cfg if D in TEMPLATE_HEAD_DIMS else replace(cfg, head_dim=policy_head_dim(D)))


def split_frags(cfg: MmaDecodeConfig) -> Dict[str, Frag]:
    """The registers of a lane: Q vectors and the A operand built from them, one tile's K / V
    vectors, the scores of two mmas, the f32 probabilities and their 16-bit hi / lo, the V^T
    operand words and O^T.  Q / K span :func:`.decode_padded.qk_width` head dims, V and O^T
    :func:`.decode_padded.v_width` (both ``head_dim`` at 64 / 128 / 256)."""
    D, dt = cfg.head_dim, cfg.in_dtype
    KV, VV, KS, MT = qk_width(D) // 32, v_width(D) // 64, qk_width(D) // 16, v_width(D) // 16
    return {"qv": Frag("qv", dt, 8 * KV), "qa": Frag("qa", dt, 8 * KS),
            "kr": Frag("kr", dt, 2 * 8 * KV), "vr": Frag("vr", dt, 4 * 8 * VV),
            "sc": Frag("sc", "f32", 8), "pf": Frag("pf", "f32", 4),
            "ph": Frag("ph", dt, 4), "pl": Frag("pl", dt, 4),
            "va": Frag("va", dt, 8 * MT), "o": Frag("o_acc", "f32", 4 * MT)}


def d_pred(D: int, lane: Any, lanes: int, first: int) -> Any:
    """Whether the 8 head dims ``8 lane + first ..`` of a lane's 16-byte vector (``lane`` one
    of ``lanes``: t of 4 for Q / K, g of 8 for V) are inside ``[0, D)`` (``D`` a multiple of
    16, so a vector is wholly inside or outside): None where every lane's is, else ``lane <
    (D - first) / 8``."""
    if first + 8 * lanes <= D:
        return None
    return sympy.StrictLessThan(lane, (D - first) // 8)


def _and(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else sympy.And(a, b)


def _load(buf: str, G: Layout, fr: Frag, first: int, coords: Tuple[Any, ...], pred: Any,
          tag: str) -> Access:
    """An 8-element (16-byte) global load of ``coords`` (row, d, head, batch) and the next 7
    head dims."""
    cs = tuple((coords[0], coords[1] + j, coords[2], coords[3]) for j in range(8))
    return Access("load", "global", buf, sympy.expand(G(cs[0])), 8,
                  fr.regs(range(first, first + 8)), pred, tag=tag, origin=G, coords=cs)


def block_lets(cfg: MmaDecodeConfig) -> List[Any]:
    """Lane, warp and the block's (batch, kv head, head chunk) and key range."""
    HG = cfg.hg
    tid, blk = sym("tid"), sym("block_bh")
    return [
        Let("lane", sympy.Mod(tid, 32)), Let("rg", sympy.floor(tid / 32)),
        Let("g", sympy.floor(sym("lane") / 4)), Let("t", sympy.Mod(sym("lane"), 4)),
        Comment(f"block: (batch, kv head, chunk of {HG} query heads); y: the split"),
        Let("hcs", sympy.floor(R("group") / HG)),
        Let("hc", sympy.Mod(blk, sym("hcs"))), Let("bb", sympy.floor(blk / sym("hcs"))),
        Let("hk", sympy.Mod(sym("bb"), R("kv_heads"))),
        Let("bat", sympy.floor(sym("bb") / R("kv_heads"))),
        Let("h0", sym("hk") * R("group") + sym("hc") * HG),
        Let("s0", sym("split") * R("kv_chunk")),
        LetMinMax("s1", "min", R("seqlen_kv"), sym("s0") + R("kv_chunk")),
        LetMinMax("gq", "min", sym("g"), HG - 1),
    ]


def q_operand(cfg: MmaDecodeConfig, F: Dict[str, Frag], G: Dict[str, Layout]) -> List[Any]:
    """Q row ``gq`` as 16-byte vectors ``t QK_LANE + QK_VEC i``, then the A words of k-step
    ``s``: ``{q[2s], 0, q[2s+1], 0}`` (rows 8-15 of the mma are zeros)."""
    D = cfg.head_dim
    qv, qa = F["qv"], F["qa"]
    out: List[Any] = [Comment("Q as the A operand: head gq, rows 8-15 zero")]
    for i in range(qk_width(D) // 32):
        out.append(_load("Q", G["Q"], qv, 8 * i, (sym("split"), QK_LANE * sym("t") + QK_VEC * i,
                                                   sym("h0") + sym("gq"), sym("bat")),
                         d_pred(D, sym("t"), QK_VEC // QK_LANE, QK_VEC * i), "Q.load"))
    for s in range(qk_width(D) // 16):
        out += [PackWord(qa, 4 * s, (qv, 4 * s), (qv, 4 * s + 1)), PackWord(qa, 4 * s + 1, None, None),
                PackWord(qa, 4 * s + 2, (qv, 4 * s + 2), (qv, 4 * s + 3)),
                PackWord(qa, 4 * s + 3, None, None)]
    return out


def tile_statements(cfg: MmaDecodeConfig, F: Dict[str, Frag], G: Dict[str, Layout]) -> List[Any]:
    """One warp's 16-key tile ``[kb, kb + 16)``: loads, ``S = Q K^T``, the online softmax, the
    alpha broadcast, P split hi + lo and ``O^T += V^T P^T`` twice."""
    D, W = cfg.head_dim, cfg.warps
    KV, VV, KS, MT = qk_width(D) // 32, v_width(D) // 64, qk_width(D) // 16, v_width(D) // 16
    spec = mma_m16n8k16(cfg.in_dtype)
    kr, vr, sc, pf, ph, pl, va, o, qa = (F[n] for n in ("kr", "vr", "sc", "pf", "ph", "pl", "va",
                                                         "o", "qa"))
    t, g, kb = sym("t"), sym("g"), sym("kb")
    out: List[Any] = [Let("kb", sym("s0") + 16 * (sym("it") * W + sym("rg")))]
    for r in range(2):                                   # K rows g (keys 0-7), g + 8 (8-15)
        key = kb + g + 8 * r
        for i in range(KV):
            out.append(_load("K", G["K"], kr, 8 * (r * KV + i),
                             (key, QK_LANE * t + QK_VEC * i, sym("hk"), sym("bat")),
                             _and(key < R("seqlen_kv"), d_pred(D, t, QK_VEC // QK_LANE, QK_VEC * i)),
                             "K.load"))
    vkeys = [kb + 2 * t + (r & 1) + 8 * (r >> 1) for r in range(4)]
    for r in range(4):                                   # V rows of keys 2t, 2t+1, 8+2t, 9+2t
        for i in range(VV):
            out.append(_load("V", G["V"], vr, 8 * (r * VV + i),
                             (vkeys[r], V_LANE * g + V_VEC * i, sym("hk"), sym("bat")),
                             _and(vkeys[r] < R("seqlen_kv"), d_pred(D, g, V_VEC // V_LANE, V_VEC * i)),
                             "V.load"))
    out.append(ZeroFrag(sc))
    for s in range(KS):
        for r in range(2):
            b0 = 8 * (r * KV + s // 2) + 4 * (s % 2)
            out.append(Mfma(spec, sc.regs(range(4 * r, 4 * r + 4)), qa.regs(range(8 * s, 8 * s + 8)),
                            kr.regs(range(b0, b0 + 4)), tag=f"S{r}.k{s}"))
    items = (0, 1, 4, 5)                                 # head g's scores (rows 8-15: padding)
    keys = tuple(kb + 2 * t + (i & 1) + 8 * (i >> 2) for i in items)
    out += [MaskScores(sc, items, (sym("split"),) * 4, keys,
                       tuple(sympy.StrictLessThan(k, sym("s1")) for k in keys)),
            RowMax("mx", sc, items),
            LaneXor("mx", "max", "shfl_xor", 1), LaneXor("mx", "max", "shfl_xor", 2),
            SoftmaxUpdate("m_run", "mx", "alpha", "mc"),
            ExpScores(pf, (0, 1, 2, 3), sc, items, "mc", "l_run", "alpha"),
            Comment("O^T columns of this lane: heads 2t, 2t+1; their alphas from lanes 8t, 8t+4"),
            ShflBroadcast("a_lo", "alpha", 8 * t), ShflBroadcast("a_hi", "alpha", 8 * t + 4)]
    for j in range(MT):
        out += [Rescale(o, (4 * j, 4 * j + 2), "a_lo"), Rescale(o, (4 * j + 1, 4 * j + 3), "a_hi")]
    out.append(SplitProbs(ph, pl, pf, (0, 1, 2, 3)))
    for j in range(MT):
        e = [8 * (r * VV + j // 4) + 2 * (j % 4) for r in range(4)]
        out += [PackWord(va, 4 * j, (vr, e[0]), (vr, e[1])),
                PackWord(va, 4 * j + 1, (vr, e[0] + 1), (vr, e[1] + 1)),
                PackWord(va, 4 * j + 2, (vr, e[2]), (vr, e[3])),
                PackWord(va, 4 * j + 3, (vr, e[2] + 1), (vr, e[3] + 1))]
        for part in (ph, pl):
            out.append(Mfma(spec, o.regs(range(4 * j, 4 * j + 4)), va.regs(range(8 * j, 8 * j + 8)),
                            part.regs(range(4)), tag=f"O.m{j}.{part.name}"))
    return out


def split_loop_statements(cfg: MmaDecodeConfig) -> Tuple[List[Any], Dict[str, Frag]]:
    """The block's lets, Q operand and KV loop (every warp's tiles), then each lane's sum over
    its row's four lanes: the body the warps' merge will follow."""
    validate_ir(cfg)
    if cfg.chunk != 1:
        raise AttentionConfigError(f"chunk={cfg.chunk}: the IR split kernel takes one 16-key "
                                   "tile in flight per warp (the dispatched configurations)")
    F, G = split_frags(cfg), qkv_layouts(cfg.head_dim)
    W = cfg.warps
    tiles = sympy.floor((sym("s1") - sym("s0") + 16 * W - 1) / (16 * W))
    body = block_lets(cfg) + q_operand(cfg, F, G) + [
        FVar("m_run", "-inf"), FVar("l_run", "0"), ZeroFrag(F["o"]),
        Comment(f"{W} warps x 16 keys per iteration; a warp's tile past the split is masked"),
        Loop("it", 0, tiles, tile_statements(cfg, F, G)),
        LaneXor("l_run", "sum", "shfl_xor", 1), LaneXor("l_run", "sum", "shfl_xor", 2)]
    return body, F


def split_lse_spec(name: str, head_dim: int, in_dtype: str, instances: Any,
                   stat_frag: str = "lse_part", key_step: int = 16, wide: Any = ()) -> Any:
    """What the split kernel computes: ``S = Q K^T`` over ``d``, the online softmax over the
    split's keys, ``Op = P V`` normalised, and the split's base-2 log-sum-exp ``LSEp`` (the
    partial of :func:`.decode_mma_ir.combine_lse_spec`'s merge, at the same workspace
    layouts); the splits partition the keys, each partial's key set carried by ``stat_frag``
    (the register stored to ``LSEp``); ``key_step`` the keys one loop iteration of the block
    covers (its warps' tiles); the scalars in ``wide`` are ``long long`` ([0, 2^63))."""
    from ..verify.spec import (Contraction, Dim, Domain, KernelSpec, OnlineSoftmax,
                               SplitPartition, Symbol, TensorSpec)
    dims = (Dim("row", "seqlen_q"), Dim("key", "seqlen_kv"), Dim("d", head_dim),
            Dim("head", "heads"), Dim("kv_head", "kv_heads"), Dim("batch", "batch"),
            Dim("split", "n_splits"), Dim("one", 1))
    tensors = (TensorSpec("Q", ("row", "d", "head", "batch"), "input", in_dtype),
               TensorSpec("K", ("key", "d", "kv_head", "batch"), "input", in_dtype),
               TensorSpec("V", ("key", "d", "kv_head", "batch"), "input", in_dtype),
               TensorSpec("Op", ("split", "d", "head", "batch"), "workspace", "f32"),
               TensorSpec("LSEp", ("split", "one", "head", "batch"), "workspace", "f32"))
    return KernelSpec(
        name=name, dims=dims, tensors=tensors,
        contractions=(Contraction("S", "Q", "K", ("d",)), Contraction("Op", "P", "V", ("key",))),
        softmax=OnlineSoftmax("S", "P", "key", "d", key_step, lse="LSEp"),
        split_partition=SplitPartition("split", (stat_frag,)),
        symbols=tuple(Symbol(n, 0, 2 ** (63 if n in wide else 31) - 1)
                      for n in SPLIT_IR_SCALARS + ("n_splits",)),
        domain=Domain.on_instances(instances), head_anchor="Q", kv_head="kv_head",
        head_symbols=("bat", "hk", "hc", "bb", "h0", "block_bh"), store_heads="kv_group")


def padded_heads(hg: int) -> int:
    """The heads a warp's O occupies in shared memory: ``hg`` rounded up to even.  A lane
    stores its two O^T columns, heads ``2t`` and ``2t + 1``, as one 8-byte pair; at odd ``hg``
    the lane whose ``2t`` is the last head writes its second column (the duplicated Q row's O,
    see the module docstring) to the padding head, which nothing reads.  (Without it that
    column would land on the next d of head 0; storing the last head alone instead makes the
    pairs of odd ``hg`` 4-byte aligned and the single store a 2-way bank conflict.)"""
    return hg + hg % 2


def acc_layout(cfg: MmaDecodeConfig) -> Tuple[Layout, int]:
    """The warps' O in shared memory, ``(warp, head, d) -> offset`` with ``d = (d % 8, d / 8
    % 8, d / 64)`` over :func:`padded_heads` heads: heads innermost (a lane's O^T pair, heads 2t and 2t+1, is one 8-byte
    store) and the 8-d groups ``g`` at a stride of 8 (mod 32) floats, so the 16 lanes of an
    8-byte phase hit 16 distinct bank pairs (the template's ``[warp][head][d]`` rows made
    its stores 4-way conflicts).  Returns the layout and its size in floats."""
    HG, D, W = padded_heads(cfg.hg), cfg.head_dim, cfg.warps
    sg = 8 * HG + (8 - 8 * HG) % 32
    sj, J = 8 * sg, max(1, v_width(D) // 64)
    sr = sj * J
    return Layout((W, HG, (8, 8, J)), (sr, 1, (HG, sg, sj))), W * sr


def merge_tail(cfg: MmaDecodeConfig, F: Dict[str, Frag]) -> Tuple[List[Any], List[Any],
                                                                    List[Frag]]:
    """The warps' partials to shared memory, merged per row (:mod:`kernels.ir.warp_merge`),
    and the split's normalised partial ``Op`` + base-2 ``LSEp`` written at
    :func:`.decode_mma_ir.workspace_layouts` (the layouts the IR combine kernel reads):
    ``(statements, shared arrays, frags)``."""
    from ..ir.core import Barrier, Shared
    from ..ir.warp_merge import StoreVar, WarpCombine, WarpStats
    from .decode_mma_ir import workspace_layouts
    HG, D, W, T = cfg.hg, cfg.head_dim, cfg.warps, cfg.threads
    o, tid, t, g = F["o"], sym("tid"), sym("t"), sym("g")
    SA, n_acc = acc_layout(cfg)
    shared = [Shared("s_acc", "f32", n_acc), Shared("s_m", "f32", W * HG),
              Shared("s_l", "f32", W * HG), Shared("s_w", "f32", W * HG),
              Shared("s_inv", "f32", HG), Shared("s_lse", "f32", HG)]
    f, lse = Frag("f_out", "f32", 8), Frag("lse_part", "f32", 1)
    lead = sympy.And(sympy.Eq(t, 0), g < HG)
    out: List[Any] = [
        Comment("the warp's (m, l) per head and its O^T pairs (heads 2t, 2t+1) to shared"),
        StoreVar("s_m", sym("rg") * HG + g, "m_run", lead, "s_m.store"),
        StoreVar("s_l", sym("rg") * HG + g, "l_run", lead, "s_l.store")]
    for j in range(v_width(D) // 16):
        # O^T rows past D (zero V^T rows of a padded head_dim) stay in registers
        keep = _and(2 * t < HG, d_pred(D, g, V_VEC // V_LANE, V_VEC * (j // 4)))
        for h in range(2):
            d = V_LANE * g + V_VEC * (j // 4) + 2 * (j % 4) + h
            cs = ((sym("rg"), 2 * t, d), (sym("rg"), 2 * t + 1, d))
            out.append(Access("store", "lds", "s_acc", sympy.expand(SA(cs[0])), 2,
                              o.regs((4 * j + 2 * h, 4 * j + 2 * h + 1)), keep,
                              tag="s_acc.store", origin=SA, coords=cs))
    G = workspace_layouts(D)
    per_row = D // 8
    it = sym("mi")
    ok = sym("mrow") < HG
    x_off = SA((sym("r"), sym("mrc"), sym("mc8") + sym("e")))
    out += [Barrier(), WarpStats(W, HG, "s_m", "s_l", "s_w", "s_inv", "s_lse"), Barrier(),
            Loop("mi", 0, -(-HG * per_row // T), [
                Let("mrow", sympy.floor((tid + it * T) / per_row)),
                Let("mc8", 8 * sympy.Mod(tid + it * T, per_row)),
                Comment("threads past the last row merge it again and store nothing"),
                LetMinMax("mrc", "min", sym("mrow"), HG - 1),
                WarpCombine(f, 8, W, HG, x_off, sym("mrc"), sym("mc8"), ok, "s_acc", "s_w",
                            "s_inv"),
                *[_store_op(G["Op"], f, 4 * q, ok) for q in range(2)],
                Access("load", "lds", "s_lse", sym("mrc"), 1, lse.regs([0]), None,
                       tag="s_lse.load", origin=Layout((HG,), (1,)), coords=((sym("mrc"),),)),
                _store_lse(G["LSEp"], lse, sympy.And(ok, sympy.Eq(sym("mc8"), 0)))])]
    return out, shared, [f, lse]


def _store_op(G: Layout, f: Frag, first: int, pred: Any) -> Access:
    cs = tuple((sym("split"), sym("mc8") + first + e, sym("h0") + sym("mrc"), sym("bat"))
               for e in range(4))
    return Access("store", "global", "Op", sympy.expand(G(cs[0])), 4,
                  f.regs(range(first, first + 4)), pred, tag="Op.store", origin=G, coords=cs)


def _store_lse(G: Layout, lse: Frag, pred: Any) -> Access:
    cs = ((sym("split"), 0, sym("h0") + sym("mrc"), sym("bat")),)
    return Access("store", "global", "LSEp", sympy.expand(G(cs[0])), 1, lse.regs([0]), pred,
                  tag="LSEp.store", origin=G, coords=cs)


def split_ir_name(cfg: MmaDecodeConfig, wide: bool = False) -> str:
    return (f"lg_decode_split_ir_{cfg.in_dtype}_d{cfg.head_dim}_g{cfg.hg}_w{cfg.warps}"
            f"{'_i64' if wide else ''}")


def scalar_params(names: Any, wide: bool) -> List[Any]:
    """``int`` scalars ``names``; ``wide``: the batch and head strides ``long long``
    (:func:`~.prefill_wide.is_stride`, the prefills' one rule; row strides stay ``int``)."""
    from ..ir.attention import ScalarParam
    from .prefill_wide import is_stride
    return [ScalarParam(n, "long long" if wide and is_stride(n) else "int") for n in names]


def build_decode_split_ir(cfg: MmaDecodeConfig, wide: bool = False) -> Any:
    """The split kernel of ``cfg`` as IR with its spec: grid ``(batch x kv heads x head
    chunks, n_splits)``, ``32 warps`` threads.  ``wide``: the batch / head strides ``long
    long`` (:func:`scalar_params`), verified with a launch whose offsets pass 2^31 too."""
    from ..ir.attention import AttnKernel, ScalarParam
    from ..ir.core import Param
    body, F = split_loop_statements(cfg)
    tail, shared, extra = merge_tail(cfg, F)
    name = split_ir_name(cfg, wide)
    dt = cfg.in_dtype
    params = [Param("Q", dt), Param("K", dt), Param("V", dt), Param("Op", "f32", const=False),
              Param("LSEp", "f32", const=False)]
    header = [f"split-KV decode, split kernel (kernels/nvidia/decode_split_ir.py): {cfg.hg} "
              f"query heads per block on mma.sync m16n8k16, {cfg.warps} warps, head_dim "
              f"{cfg.head_dim}; built as kernel IR and verified"]
    return AttnKernel(name, params, shared, list(F.values()) + extra, body + tail, cfg.threads,
                      (0, 0, 1), grid_symbols=("block_bh", "split"), header=header,
                      meta={"kind": "decode_split_lse", "cfg": cfg, **({"wide": True} if wide else {})},
                      scalars=scalar_params(SPLIT_IR_SCALARS, wide) +
                      [ScalarParam("scale_log2", "float")], min_blocks=1,
                      spec=split_lse_spec(name, cfg.head_dim, dt, split_instances,
                                          key_step=16 * cfg.warps,
                                          wide=[p.name for p in scalar_params(
                                              SPLIT_IR_SCALARS, wide)
                                              if p.ctype == "long long"]))


def split_instance(cfg: MmaDecodeConfig, name: str, B: int, HK: int, chunks: int, skv: int,
                   ns: int, far: bool = False) -> Any:
    """A launch of ``B`` x ``HK`` kv heads x ``chunks`` head chunks (``group = chunks hg``),
    ``skv`` keys in ``ns`` splits of ``ceil(skv / ns)`` keys, contiguous BHSD tensors; ``far``:
    their heads and batches 2^31 to 2^34 elements apart (every tensor's elements at distinct
    offsets; the wide form's launch past 2^31)."""
    from ..verify.attention_gate import Instance
    D, H = cfg.head_dim, HK * chunks * cfg.hg
    chunk = -(-skv // ns)
    v = dict(batch=B, heads=H, kv_heads=HK, group=H // HK, seqlen_q=1, seqlen_kv=skv,
             n_splits=-(-skv // chunk), kv_chunk=chunk, q_sb=H * D, q_sh=D,
             k_sb=HK * skv * D, k_sh=skv * D, k_ss=D, v_sb=HK * skv * D, v_sh=skv * D, v_ss=D)
    if far:
        v.update(q_sb=2 ** 31 + 512, k_sh=2 ** 31 + 1024, k_sb=2 ** 33, v_sh=2 ** 32 + 2048,
                 v_sb=2 ** 34)
    return Instance(name, v, (B * HK * chunks, v["n_splits"], 1), False)


def split_instances(k: Any) -> List[Any]:
    """Verification launches: GQA over 2 kv heads and 2 batches with a ragged last split; 4
    splits each shorter than one 16-key tile; two head chunks of one kv head, one split; the
    wide form also the first with heads and batches 2^31 to 2^34 elements apart."""
    cfg = k.meta["cfg"]
    return [split_instance(cfg, "gqa-ragged-last-split", 2, 2, 1, 100, 3),
            split_instance(cfg, "splits-shorter-than-a-tile", 1, 1, 1, 37, 4),
            split_instance(cfg, "two-head-chunks-one-split", 1, 1, 2, 45, 1)] + \
        ([split_instance(cfg, "past-2^31", 2, 2, 1, 100, 3, far=True)]
         if k.meta.get("wide") else [])


def check_same_workspace(split: Any, combine: Any) -> None:
    """The split kernel writes its partials ``Op`` / ``LSEp`` at the layouts the combine kernel
    reads them with (the layout objects of every access, compared by value); else
    :class:`~kernels.errors.KernelError` naming the tensor."""
    from ..errors import KernelError
    from ..ir.core import walk

    def origins(k: Any, kind: str) -> Dict[str, set]:
        out: Dict[str, set] = {}
        for s in walk(k.body):
            if isinstance(s, Access) and s.kind == kind and s.buf in ("Op", "LSEp"):
                out.setdefault(s.buf, set()).add(str(s.origin))
        return out
    w, r = origins(split, "store"), origins(combine, "load")
    for buf in ("Op", "LSEp"):
        if w.get(buf) is None or w.get(buf) != r.get(buf):
            raise KernelError(f"split kernel {split.name} writes {buf} at {w.get(buf)}, the "
                              f"combine kernel {combine.name} reads it at {r.get(buf)}")
