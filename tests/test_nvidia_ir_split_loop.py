"""The tensor-core split-KV decode's KV loop as kernel IR (issue 20 item 1, the split kernel's
engine pieces): ``S = Q K^T`` on mma.sync with Q as the A operand (rows 8-15 zero), operands
built from registers (``__byte_perm``), the ``__shfl_xor_sync`` reductions and the alpha
broadcast ``__shfl_sync``, P split hi + lo with two mmas per step.  The instance engine's
dataflow pass runs on every block and thread of instances (GQA, ragged last split, a split
shorter than one tile, hg < 8); each rule refuses a planted bug by its named check."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from kernels.ir.attention import AttnKernel, LaneXor, MaskScores, ScalarParam
from kernels.ir.core import Access, Mfma, Param, sym, walk
from kernels.ir.warp_registers import PackWord, ShflBroadcast, SplitProbs, word_form
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.nvidia.decode_split_ir import (SPLIT_IR_SCALARS, split_loop_statements,
                                            split_lse_spec)
from kernels.printer.cuda_warp import pack_word_line, warp_stmt
from kernels.verify.attention_dataflow import AttentionDataflow
from kernels.verify.attention_ids import rowid
from kernels.verify.attention_static import Instance
from kernels.verify.gate_common import Fail, bits_to_list


def _kernel(cfg, edit=None):
    body, F = split_loop_statements(cfg)
    if edit is not None:
        body = edit(body, F)
    spec = split_lse_spec("split_loop", cfg.head_dim, cfg.in_dtype, lambda k: [])
    params = [Param(n, cfg.in_dtype) for n in ("Q", "K", "V")]
    return AttnKernel("split_loop", params, [], list(F.values()), body, 32 * cfg.warps, (0, 0, 1),
                      grid_symbols=("block_bh", "split"), spec=spec,
                      scalars=[ScalarParam(n) for n in SPLIT_IR_SCALARS])


def _instance(cfg, name, B, H, HK, skv, ns):
    D = cfg.head_dim
    chunk = -(-skv // ns)
    v = dict(batch=B, heads=H, kv_heads=HK, group=H // HK, seqlen_q=1, seqlen_kv=skv,
             n_splits=ns, kv_chunk=chunk, q_sb=H * D, q_sh=D, k_sb=HK * skv * D, k_sh=skv * D,
             k_ss=D, v_sb=HK * skv * D, v_sh=skv * D, v_ss=D)
    return Instance(name, v, (B * HK * (H // HK // cfg.hg), -(-skv // chunk), 1), False)


def _run(k, inst):
    """Every block of the instance: (Fail, [(block, pass)])."""
    f = Fail()
    kw = -(-(inst.values["seqlen_kv"] + 16 * 8 * 4) // 64)
    out = []
    for by in range(inst.grid[1]):
        for bx in range(inst.grid[0]):
            fl = AttentionDataflow(k, inst, (bx, by), f, kw, k.spec)
            fl.run()
            out.append(((bx, by), fl))
    return f, out


def _failed(f):
    return {c for c, _ in f.first.items()} if hasattr(f, "first") else set()


CASES = [  # (cfg, instance args): GQA, ragged last split, a split shorter than one tile, hg < 8
    (MmaDecodeConfig(head_dim=64, hg=4, warps=2), ("gqa-ragged", 2, 8, 2, 100, 3)),
    (MmaDecodeConfig(head_dim=128, hg=8, warps=4), ("short-splits", 1, 8, 1, 40, 4)),
    (MmaDecodeConfig(head_dim=128, hg=4, warps=8), ("hg4-w8", 1, 4, 1, 200, 2)),
    (MmaDecodeConfig(head_dim=256, hg=4, warps=8, in_dtype="bf16"), ("d256", 1, 8, 2, 70, 2)),
]


@pytest.mark.parametrize("cfg,args", CASES, ids=[c[1][0] for c in CASES])
def test_the_loop_holds_and_o_holds_exactly_each_warps_keys(cfg, args):
    k = _kernel(cfg)
    inst = _instance(cfg, *args)
    f, flows = _run(k, inst)
    assert not f.first, f.first
    v, W, HG, D = inst.values, cfg.warps, cfg.hg, cfg.head_dim
    for (bx, split), fl in flows:
        hcs = v["group"] // HG
        hc, bb = bx % hcs, bx // hcs
        hk, bat = bb % v["kv_heads"], bb // v["kv_heads"]
        h0 = hk * v["group"] + hc * HG
        s0, s1 = split * v["kv_chunk"], min(v["seqlen_kv"], (split + 1) * v["kv_chunk"])
        n_it = -(-(s1 - s0) // (16 * W))
        o = fl.acc["o_acc"]
        for tid in range(32 * W):
            rg, t = tid // 32, tid % 4
            keys = sorted(s0 + 16 * (it * W + rg) + j for it in range(n_it) for j in range(16))
            vis = [x for x in keys if x < s1]
            for item in range(o.row.shape[1]):
                head = h0 + min(2 * t + (item & 1), HG - 1)
                assert o.row[tid, item] == rowid(bat * v["heads"] + head, split)
                assert bits_to_list(o.kbits[tid, item]) == keys
                assert bits_to_list(o.lobits[tid, item]) == keys      # hi and lo, each once
                assert bits_to_list(o.vbits[tid, item]) == vis
        # the 4 lanes of a row reduced l over the warp's every key of the row
        l = fl.vars["l_run"]
        assert all(bits_to_list(l.kbits[tid]) == sorted(
            s0 + 16 * (it * W + tid // 32) + j for it in range(n_it) for j in range(16))
            for tid in range(32 * W))


CFG = MmaDecodeConfig(head_dim=64, hg=4, warps=2)
INST = ("gqa-ragged", 2, 8, 2, 100, 3)


def _planted(edit):
    f, flows = _run(_kernel(CFG, edit), _instance(CFG, *INST))
    return f, flows


def _replace(pred, make):
    """An edit replacing the statements ``pred`` selects (anywhere in the body) by
    ``make(s, F)`` (a list)."""
    def go(body, F):
        out = []
        for s in body:
            if pred(s):
                out += make(s, F)
                continue
            if hasattr(s, "body") and isinstance(getattr(s, "body"), list):
                s.body = go(s.body, F)
            out.append(s)
        return out
    return go


def _why(f, check):
    return f.first.get(check, "")


def test_v_pairs_with_the_wrong_byte_perm_selector_are_refused():
    """0x7632 (high halves) where 0x5410 belongs: the V^T row mixes head dims."""
    def make(s, F):
        return [PackWord(s.dst, s.word, (s.lo[0], s.lo[1] + 1), (s.hi[0], s.hi[1] + 1))]
    f, _ = _planted(_replace(lambda s: isinstance(s, PackWord) and s.dst.name == "va"
                             and s.word == 0, make))
    assert "lane_mfma_operands" in f.first and "mixes head dims" in _why(f, "lane_mfma_operands")


def test_q_words_in_the_wrong_rows_are_refused():
    """{q[2s], q[2s+1], 0, 0}: rows g + 8 get Q, row g zeros in its upper k slots."""
    def make(s, F):
        st = s.word // 4
        if s.word % 4 == 1:
            return [PackWord(s.dst, s.word, (F["qv"], 4 * st + 2), (F["qv"], 4 * st + 3))]
        if s.word % 4 == 2:
            return [PackWord(s.dst, s.word, None, None)]
        return [s]
    f, _ = _planted(_replace(lambda s: isinstance(s, PackWord) and s.dst.name == "qa", make))
    assert "lane_mfma_operands" in f.first, f.first
    assert "mixes" in _why(f, "lane_mfma_operands")


def test_k_of_another_kv_head_is_refused():
    def make(s, F):
        hk = sym("hk")
        cs = tuple((c[0], c[1], sympy.Mod(hk + 1, sympy.Symbol("kv_heads", integer=True,
                                                                 nonnegative=True)), c[3])
                   for c in s.coords)
        return [Access(s.kind, s.space, s.buf, sympy.expand(s.origin(cs[0])), s.width, s.regs,
                       s.pred, tag=s.tag, origin=s.origin, coords=cs)]
    f, _ = _planted(_replace(lambda s: isinstance(s, Access) and s.buf == "K", make))
    assert "GQA" in _why(f, "lane_mfma_operands"), f.first


def test_shfl_xor_across_rows_is_refused():
    """xor 4 pairs lane (g, t) with (g + 1, t): another head's maximum."""
    f, _ = _planted(_replace(lambda s: isinstance(s, LaneXor) and s.var == "mx" and
                             s.pattern == 2, lambda s, F: [LaneXor("mx", "max", "shfl_xor", 4)]))
    assert "cross_lane_reductions" in f.first, f.first


def test_l_summed_over_the_same_lane_twice_is_refused():
    """xor 0: a lane adds its own keys again."""
    f, _ = _planted(_replace(lambda s: isinstance(s, LaneXor) and s.var == "l_run" and
                             s.pattern == 2, lambda s, F: [LaneXor("l_run", "sum", "shfl_xor",
                                                                   0)]))
    assert "counted twice" in _why(f, "cross_lane_reductions"), f.first


def test_alpha_broadcast_from_the_wrong_lane_is_refused():
    """lane 4t owns head t, not head 2t: O^T's column rescaled by another row's alpha."""
    f, _ = _planted(_replace(lambda s: isinstance(s, ShflBroadcast) and s.dst == "a_lo",
                             lambda s, F: [ShflBroadcast("a_lo", "alpha", 4 * sym("t"))]))
    assert "online_softmax" in f.first, f.first     # (missing rescale at the first tile)


def test_alpha_broadcast_from_any_lane_of_the_head_holds():
    """lane 8t + 1 holds head 2t as well (its t differs): the same maximum."""
    f, _ = _planted(_replace(lambda s: isinstance(s, ShflBroadcast) and s.dst == "a_lo",
                             lambda s, F: [ShflBroadcast("a_lo", "alpha", 8 * sym("t") + 1)]))
    assert not f.first, f.first


def test_the_hi_part_accumulated_twice_is_refused():
    f, _ = _planted(_replace(lambda s: isinstance(s, Mfma) and s.b.frag.name == "pl",
                             lambda s, F: [Mfma(s.spec, s.acc, s.a, F["ph"].regs(range(4)),
                                                tag=s.tag)]))
    assert "already summed" in _why(f, "lane_mfma_operands"), f.first


def test_a_dropped_lo_mma_leaves_an_unpaired_o():
    f, flows = _planted(_replace(lambda s: isinstance(s, Mfma) and s.b.frag.name == "pl" and
                                 s.tag.startswith("O.m1."), lambda s, F: []))
    assert not f.first                      # the loop alone cannot tell: the pair is checked
    fl = flows[0][1]                        # where O is consumed
    assert not fl.check_pairs(fl.acc["o_acc"], np.arange(16), "merge")
    assert "different keys" in _why(fl.f, "lane_mfma_operands")
    assert fl.check_pairs(fl.acc["o_acc"], np.array([0, 1, 2, 3, 8, 9]), "merge")


def test_probabilities_split_before_they_are_computed_are_refused():
    """SplitProbs moved before ExpScores: the lo / hi parts hold the previous tile's keys (or
    none at the first tile)."""
    def go(body, F):
        for s in body:
            if hasattr(s, "body") and isinstance(s.body, list) and \
                    any(isinstance(x, SplitProbs) for x in s.body):
                sp = next(x for x in s.body if isinstance(x, SplitProbs))
                s.body.remove(sp)
                at = next(i for i, x in enumerate(s.body) if type(x).__name__ == "ExpScores")
                s.body.insert(at, sp)
        return body
    f, _ = _planted(go)
    assert "online_softmax" in f.first or "lane_mfma_operands" in f.first, f.first


def test_a_mask_past_the_split_end_is_refused():
    def make(s, F):
        return [MaskScores(s.frag, s.items, s.rows, s.keys,
                           tuple(sympy.StrictLessThan(k, sym("s1") + 1) for k in s.keys))]
    f, _ = _planted(_replace(lambda s: isinstance(s, MaskScores), make))
    assert "masking_and_tile_skipping" in f.first, f.first


# ---- the statements' forms ---------------------------------------------------------------

def test_pack_word_forms_and_the_refused_ones():
    from kernels.ir.core import Frag
    a, b, f32 = Frag("a", "f16", 8), Frag("b", "f16", 8), Frag("x", "f32", 4)
    d = Frag("d", "f16", 8)
    assert pack_word_line(PackWord(d, 1, (a, 2), (a, 3))) == "d[1] = a[1];"
    assert pack_word_line(PackWord(d, 0, (a, 2), (b, 6))) == \
        "d[0] = __byte_perm(a[1], b[3], 0x5410);"
    assert pack_word_line(PackWord(d, 3, (a, 3), (b, 1))) == \
        "d[3] = __byte_perm(a[1], b[0], 0x7632);"
    assert pack_word_line(PackWord(d, 2, None, None)) == "d[2] = 0u;"
    for lo, hi, msg in (((a, 0), None, "one zero half"), ((a, 0), (b, 1), "two low halves"),
                        ((f32, 0), (f32, 1), "not 16-bit")):
        with pytest.raises(ValueError, match=msg):
            word_form(lo, hi)
    with pytest.raises(ValueError, match="not a word"):
        PackWord(d, 4, None, None)
    with pytest.raises(ValueError, match="f32 probabilities"):
        SplitProbs(a, b, a, (0, 1))


def test_the_printed_warp_lines():
    from kernels.ir.core import Frag
    lines = []
    out = lambda d, s: lines.append(s)           # noqa: E731
    ph, pl, pf = Frag("ph", "bf16", 4), Frag("pl", "bf16", 4), Frag("pf", "f32", 4)
    assert warp_stmt(out, ShflBroadcast("a_lo", "alpha", 8 * sym("t")), 1)
    assert warp_stmt(out, LaneXor("mx", "max", "shfl_xor", 2), 1)
    assert warp_stmt(out, LaneXor("l", "sum", "shfl_xor", 1), 1)
    assert warp_stmt(out, SplitProbs(ph, pl, pf, (0, 1, 2, 3)), 1)
    assert not warp_stmt(out, LaneXor("mx", "max", "swizzle", 0x41f), 1)
    assert lines == [
        "const float a_lo = __shfl_sync(0xffffffffu, alpha, 8*t);",
        "mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));",
        "l += __shfl_xor_sync(0xffffffffu, l, 1);",
        "ph[0] = lg_pack_bf16x2(pf[0], pf[1]);",
        "pl[0] = lg_pack_bf16x2(pf[0] - lg_bf16_lo(ph[0]), pf[1] - lg_bf16_hi(ph[0]));",
        "ph[1] = lg_pack_bf16x2(pf[2], pf[3]);",
        "pl[1] = lg_pack_bf16x2(pf[2] - lg_bf16_lo(ph[1]), pf[3] - lg_bf16_hi(ph[1]));"]
