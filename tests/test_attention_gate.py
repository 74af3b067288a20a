"""The attention gate proves the kernels and catches deliberate bugs (a verified that checks
nothing would be the worst bug): each mutation below must fail the named check."""

import pytest
import sympy

from kernels.flash_attention import AttnBuilder, AttnConfig, PrefillShape
from kernels.attention_gate import CHECKS, Instance, verify_attention
from kernels.attention_ir import LaneXor, LetMinMax, MaskScores, Rescale, runtime_symbol
from kernels.attention_plan import plan_attention
from kernels.decode import DecodeBuilder, DecodeConfig
from kernels.ir import Barrier, If, Let, Loop, Mfma, Regs, sym, walk
from layoutalg import Swizzle
from layoutalg.symbolic import Xor


def _inst(causal=False, sq=77, skv=77, off=0):
    s = PrefillShape.bhsd(1, 4, 2, sq, skv, 64, causal_off=off)
    return [Instance("t", s.env(), s.grid(128, causal), causal)]


def _build(causal=False, plan_mut=None, lds_stages=None):
    plan = plan_attention(AttnConfig(head_dim=64, causal=causal, lds_stages=lds_stages))
    if plan_mut:
        plan_mut(plan)
    return AttnBuilder(plan).build()


def _failed(k, **kw):
    rep = verify_attention(k, **kw)
    return {c for c, r in rep.checks.items() if not r.holds}, rep


@pytest.mark.parametrize("causal", [False, True])
def test_default_instances_all_hold(causal):
    failed, rep = _failed(_build(causal))
    assert not failed, rep.checks
    assert set(rep.checks) == set(CHECKS)
    assert "instances" in rep.details and len(rep.details["instances"]) >= 3
    for r in rep.checks.values():
        assert r.method == "exhaustive" and r.domain


def _stmts(k):
    return list(walk(k.body))


def m_xor16(k):
    for s in _stmts(k):
        if isinstance(s, LaneXor):
            s.addr = 4 * Xor(sym("tid"), 16)


def m_swizzle_wrong_formula(k):  # offset | (0x1F << 5) | (0x1F << 10): a broadcast, not a xor
    for s in _stmts(k):
        if isinstance(s, LaneXor) and s.op == "max":
            s.method, s.pattern, s.addr = "swizzle", 1 | (0x1F << 5) | (0x1F << 10), None


def m_no_rescale(k):
    def rm(body):
        body[:] = [s for s in body if not isinstance(s, Rescale)]
        for s in body:
            if isinstance(s, (Loop, If)):
                rm(s.body)
    rm(k.body)


def _mask_limit_off_by_one(k, name):
    """The mask's limit (``mlim`` / causal ``mvis``: the thread's bases and the tile moved to
    the right of every condition) with runtime symbol ``name`` one larger: one more key kept
    per row."""
    x = runtime_symbol(name, signed=name == "causal_off")
    hit = 0
    for s in _stmts(k):
        if isinstance(s, Let) and s.name.startswith("mlim") and s.expr.has(x):
            s.expr = s.expr.xreplace({x: x + 1})
            hit += 1
        elif isinstance(s, LetMinMax) and s.name == "mvis":
            s.a, s.b = s.a.xreplace({x: x + 1}), s.b.xreplace({x: x + 1})
            hit += 1
    assert hit, f"no mask limit uses {name}"


def m_mask_off_by_one(k):
    _mask_limit_off_by_one(k, "seqlen_kv")


def m_causal_mask_off_by_one(k):
    _mask_limit_off_by_one(k, "causal_off")


def m_mask_item_offset(k):
    """The first item compares the key offset of the last one."""
    for s in _stmts(k):
        if isinstance(s, MaskScores):
            s.conds = (s.conds[-1],) + tuple(s.conds[1:])


def m_skip_one_tile(k):
    for i, s in enumerate(k.body):
        if isinstance(s, Let) and s.name == "n_end":
            k.body[i] = Let("n_end", s.expr - 1)


def m_no_barrier(k):
    for s in _stmts(k):
        if isinstance(s, Loop):
            s.body[:] = [x for x in s.body if not isinstance(x, Barrier)]


def m_q_slots(k):
    for s in _stmts(k):
        if isinstance(s, Mfma) and s.tag.startswith("qk") and s.tag.endswith("s1)"):
            s.b = Regs(s.b.frag, tuple(i - 4 for i in s.b.idx))


def m_p_slots(k):
    for s in _stmts(k):
        if isinstance(s, Mfma) and s.tag.startswith("pv"):
            i = s.b.idx
            s.b = Regs(s.b.frag, (i[1], i[0], i[2], i[3]))


def m_gqa_modulo(k):  # hk = h % kv_heads: in bounds, wrong head
    for i, s in enumerate(k.body):
        if isinstance(s, Let) and s.name == "hk":
            k.body[i] = Let("hk", sympy.Mod(sym("h"), 2))


def m_stale_max(k):  # exponentiate with the lane's own maximum (exchange after the update)
    for s in _stmts(k):
        if isinstance(s, Loop):
            b = s.body
            i = next(j for j, x in enumerate(b) if isinstance(x, LaneXor))
            b[i], b[i + 1] = b[i + 1], b[i]


def m_hoisted_lds_base(k):  # a loop-invariant swizzled K base XORs the wrong column bits
    for i, s in enumerate(k.body):
        if isinstance(s, Let) and s.name == "kfr_sw1":
            assert isinstance(s.expr, Xor) and s.expr.args[1] == 16
            k.body[i] = Let("kfr_sw1", Xor(s.expr.args[0], 48))
            return
    raise AssertionError("no hoisted K base kfr_sw1")


def m_hoisted_store_stage(k):  # the V^T register -> LDS copy writes the stage being read
    one = sympy.Integer(1)
    for s in _stmts(k):
        if isinstance(s, If):
            for a in s.body:
                if getattr(a, "tag", "") == "V.copy.store" and a.offset.has(sym("st")):
                    a.offset = a.offset.xreplace({sym("st"): one - sym("st")})


MUTATIONS = {
    "xor16": (m_xor16, False, "cross_lane_reductions"),
    "swizzle-or-mask-formula": (m_swizzle_wrong_formula, False, "cross_lane_reductions"),
    "no-rescale": (m_no_rescale, False, "online_softmax"),
    "mask-off-by-one": (m_mask_off_by_one, False, "masking_and_tile_skipping"),
    "causal-mask-off-by-one": (m_causal_mask_off_by_one, True, "masking_and_tile_skipping"),
    "mask-item-offset": (m_mask_item_offset, False, "masking_and_tile_skipping"),
    "causal-skips-a-visible-tile": (m_skip_one_tile, True, "masking_and_tile_skipping"),
    "no-barrier": (m_no_barrier, False, "lds_races"),
    "q-slots": (m_q_slots, False, "lane_mfma_operands"),
    "p-slots": (m_p_slots, False, "lane_mfma_operands"),
    "gqa-modulo": (m_gqa_modulo, False, "lane_mfma_operands"),
    "stale-max": (m_stale_max, False, "online_softmax"),
    "hoisted-lds-base": (m_hoisted_lds_base, False, "emitted_index_math"),
    # a two-stage bug: the one-stage default (issue 16) stores to its only stage
    "hoisted-store-stage": (m_hoisted_store_stage, False, "emitted_index_math", 2),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_is_caught(name):
    mut, causal, check, *stages = MUTATIONS[name]
    k = _build(causal, lds_stages=stages[0] if stages else None)
    mut(k)
    inst = _inst(causal, 77, 200, 0) if causal else _inst()
    failed, rep = _failed(k, instances=inst)
    assert check in failed, (name, failed)
    assert rep.checks[check].counterexample


def test_unswizzled_lds_has_bank_conflicts():
    k = _build(plan_mut=lambda p: setattr(p, "sk_swizzle", Swizzle(0, 0, 0)))
    failed, rep = _failed(k, instances=_inst())
    assert "bank_conflicts_lds_read" in failed
    assert "8-way" in rep.checks["bank_conflicts_lds_read"].counterexample


def test_decode_gate_and_mutation():
    k = DecodeBuilder(DecodeConfig(head_dim=128)).build()
    failed, _ = _failed(k)
    assert not failed
    for s in _stmts(k):
        if isinstance(s, LaneXor) and s.pattern == (8 << 10) | 0x1F:
            s.pattern = (16 << 10) | 0x1F     # crosses into another query's lanes
    failed, rep = _failed(k)
    assert "cross_lane_reductions" in failed
