"""The typed kernel spec (kernels.verify.spec), the rule table and the one `verify` entry point.

A brand-new kernel family (here C = A^T B, a few lines of builder below) is verified by writing
its spec only: no gate code.  Its planted bugs are refused by named checks.
"""

import dataclasses

import pytest
import sympy

import layoutalg as la
import mfma_specs
from kernels.attention_gate import CHECKS as ATTN_CHECKS
from kernels.attention_gate import SPLIT_CHECKS
from kernels.gate import CHECKS as GEMM_CHECKS
from kernels.ir.core import Access, Frag, Kernel, Mfma, Param, ZeroFrag
from kernels.verify.rules import RULES, checks_for
from kernels.verify.spec import (Contraction, Dim, Domain, KernelSpec, OnlineSoftmax, SpecError,
                                 TensorSpec)
from kernels.verify.verifier import verify

MFMA = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x4_f32")


def _gemm_like(**kw):
    args = dict(name="t", dims=(Dim("m", 16), Dim("n", 16), Dim("k", 4)),
                tensors=(TensorSpec("X", ("k", "m"), "input", "f32"),
                         TensorSpec("Y", ("k", "n"), "input", "f32"),
                         TensorSpec("Z", ("m", "n"), "output", "f32")),
                contractions=(Contraction("Z", "X", "Y", ("k",), 4),))
    args.update(kw)
    return KernelSpec(**args)


# ---------------------------------------------------------------------------- ill-formed specs

@pytest.mark.parametrize("change, words", [
    (dict(tensors=(TensorSpec("X", ("k", "q"), "input", "f32"),)), "unknown dimension 'q'"),
    (dict(tensors=(TensorSpec("X", ("k", "m"), "scratch", "f32"),)), "unknown role 'scratch'"),
    (dict(tensors=(TensorSpec("X", ("k", "m"), "input", "f17"),)), "unknown dtype 'f17'"),
    (dict(contractions=(Contraction("Z", "X", "W", ("k",)),)), "unknown operand 'W'"),
    (dict(contractions=(Contraction("Z", "X", "Y", ("j",)),)), "unknown dimension 'j'"),
    (dict(contractions=(Contraction("Z", "X", "Y", ("m",)),)), "does not carry"),
    (dict(tensors=(TensorSpec("X", ("k", "m"), "input", "f32"),
                   TensorSpec("Y", ("k", "n"), "input", "f32"),
                   TensorSpec("Z", ("m", "k"), "output", "f32"))), "operands leave"),
    (dict(dims=(Dim("m"), Dim("m"))), "dimension names repeat"),
    (dict(domain=Domain("instances")), "needs its instances function"),
    (dict(domain=Domain("somewhere")), "unknown domain"),
])
def test_ill_formed_spec_is_refused_with_what_was_wrong(change, words):
    with pytest.raises(SpecError, match=words):
        _gemm_like(**change)


def test_lookups_name_what_exists():
    s = _gemm_like()
    assert s.position("X", "m") == 1 and s.free_dims(s.contractions[0], "Y") == ("n",)
    assert [t.name for t in s.by_role("output")] == ["Z"]
    with pytest.raises(SpecError, match="no tensor 'W'.*X, Y, Z"):
        s.tensor("W")
    with pytest.raises(SpecError, match="unknown role"):
        s.by_role("scratch")
    with pytest.raises(SpecError, match="has no dimension 'n'"):
        s.position("X", "n")


def test_fp8_and_register_only_tensors_fit():
    s = _gemm_like(tensors=(TensorSpec("X", ("k", "m"), "input", "fp8_e4m3fnuz"),
                            TensorSpec("Y", ("k", "n"), "input", "fp8", via_lds=False),
                            TensorSpec("Z", ("m", "n"), "output", "f32")))
    assert not s.tensor("Y").via_lds


def test_softmax_needs_its_contractions():
    with pytest.raises(SpecError, match="no contraction produces 'S'"):
        _gemm_like(softmax=OnlineSoftmax("S", "P", "k", "m", 64))


# ---------------------------------------------------------------------------- the rule table

def test_rules_give_each_family_its_checks_in_report_order():
    from kernels.amd.kernel_specs import combine_spec, prefill_spec, split_spec
    from kernels.amd.attention_plan import AttnConfig, plan_attention
    assert checks_for(_gemm_like()) == GEMM_CHECKS
    cfg = plan_attention(AttnConfig(head_dim=64)).cfg
    assert checks_for(prefill_spec("p", cfg, (), lambda k: [])) == ATTN_CHECKS
    sp = split_spec("s", cfg, (), lambda k: [], stat_frags=("m",))
    assert checks_for(sp) == ATTN_CHECKS + SPLIT_CHECKS[:1]
    assert checks_for(combine_spec("c", cfg, (), lambda k: [])) == ATTN_CHECKS + SPLIT_CHECKS[1:]
    assert checks_for(_gemm_like(), "printed") == ("printed_source", "declarations",
                                                   "index_ranges")
    assert all(r.stage in ("ir", "printed") for r in RULES.values())


def test_builders_attach_their_specs():
    from kernels.amd.gemm import build_gemm_ir
    from kernels.amd.gemm_plan import GemmConfig
    k = build_gemm_ir(GemmConfig(m=128, n=128, k=64))
    assert k.spec is not None and checks_for(k.spec) == GEMM_CHECKS
    assert [t.role for t in k.spec.tensors] == ["input", "input", "output"]
    assert {t.name for t in k.spec.tensors} == {p.name for p in k.params}


def test_verify_refuses_a_kernel_without_spec():
    k = _toy_kernel()
    with pytest.raises(SpecError, match="no spec given"):
        verify(dataclasses.replace(k, spec=None))


# ---------------------------------------------------------------------------- a new family

def _coords(tv, shape, tid):
    """(row, col) of a column-major ``shape`` tile that lane ``tid`` holds (item 0)."""
    return tuple(la.composition(la.Layout(shape, s), tv)((tid, 0)) for s in ((1, 0), (0, 1)))


def _toy_kernel(a_rows_are_m=False, c_transposed=False):
    """C(16x16) = A^T B with A stored K x M and B stored K x N (row major), one wave, one
    v_mfma_f32_16x16x4_f32; the spec says so; that is all a new family needs."""
    tid = la.index_symbol("tid")
    a, b, acc = Frag("a", "f32", 1), Frag("b", "f32", 1), Frag("acc", "f32", 4, 4)
    gA = la.Layout((16, 4), (4, 1)) if a_rows_are_m else la.Layout((4, 16), (16, 1))
    gB, gC = la.Layout((4, 16), (16, 1)), la.Layout((16, 16), (16, 1))
    m, k = _coords(MFMA.tv_layout("A"), (16, 4), tid)
    ak = (m, k) if a_rows_are_m else (k, m)      # the bug: A read as M x K
    k2, n = _coords(MFMA.tv_layout("B"), (4, 16), tid)
    body = [ZeroFrag(acc),
            Access("load", "global", "A", sympy.expand(gA(ak)), 1, a.regs([0]), tag="A.load",
                   origin=gA, coords=(ak,)),
            Access("load", "global", "B", sympy.expand(gB((k2, n))), 1, b.regs([0]),
                   tag="B.load", origin=gB, coords=((k2, n),)),
            Mfma(MFMA, acc.regs(range(4)), a.regs([0]), b.regs([0]), tag="mfma")]
    for v in range(4):
        cm, cn = (la.composition(la.Layout((16, 16), s), MFMA.tv_layout("C"))((tid, v))
                  for s in ((1, 0), (0, 1)))
        mn = (cn, cm) if c_transposed else (cm, cn)  # the bug: C^T written
        body.append(Access("store", "global", "C", sympy.expand(gC(mn)), 1, acc.regs([v]),
                           tag="C.store", origin=gC, coords=(mn,)))
    spec = KernelSpec(
        name="toy_atb", dims=(Dim("m", 16), Dim("n", 16), Dim("k", 4)),
        tensors=(TensorSpec("A", ("k", "m"), "input", "f32"),
                 TensorSpec("B", ("k", "n"), "input", "f32"),
                 TensorSpec("C", ("m", "n"), "output", "f32")),
        contractions=(Contraction("C", "A", "B", ("k",), span=4),))
    return Kernel("toy_atb", [Param("A", "f32"), Param("B", "f32"), Param("C", "f32", False)],
                  [], [a, b, acc], body, 64, (1, 1, 1), spec=spec)


def test_new_family_is_verified_by_its_spec_alone():
    from kernels.printer.hip import emit
    k = _toy_kernel()
    rep = verify(k, source=emit(k))
    assert rep.holds, {n: str(r) for n, r in rep.checks.items() if not r.holds}
    assert tuple(rep.checks) == GEMM_CHECKS + ("printed_source", "declarations", "index_ranges")
    assert "every element" in rep.checks["lane_accumulator_writeback"].domain or \
        "blocks" in rep.checks["lane_accumulator_writeback"].domain


def test_new_family_reading_a_as_m_by_k_is_refused():
    # self-consistent index math (so the static checks hold), but the caller's A is K x M:
    # only the spec knows, and the MFMA operand check refuses it
    rep = verify(_toy_kernel(a_rows_are_m=True))
    assert rep.checks["emitted_index_math"].holds
    assert not rep.checks["lane_mfma_operands"].holds


def test_new_family_writing_c_transposed_is_refused():
    rep = verify(_toy_kernel(c_transposed=True))
    assert not rep.checks["lane_accumulator_writeback"].holds
    assert "C(" in rep.checks["lane_accumulator_writeback"].counterexample


def test_same_kernel_other_spec_is_refused():
    # the spec is the reference: the correct kernel against a spec that says A is M x K
    k = _toy_kernel()
    wrong = dataclasses.replace(k.spec, tensors=(TensorSpec("A", ("m", "k"), "input", "f32"),)
                                + k.spec.tensors[1:])
    assert not verify(k, wrong).checks["lane_mfma_operands"].holds


def test_batched_operands_are_refused_with_a_clear_error():
    k = _toy_kernel()
    s = KernelSpec(name="bmm", dims=(Dim("b", 1), Dim("m", 16), Dim("n", 16), Dim("k", 4)),
                   tensors=(TensorSpec("A", ("b", "k", "m"), "input", "f32"),
                            TensorSpec("B", ("b", "k", "n"), "input", "f32"),
                            TensorSpec("C", ("b", "m", "n"), "output", "f32")),
                   contractions=(Contraction("C", "A", "B", ("k",), span=4),))
    with pytest.raises(SpecError, match="2-D operands"):
        verify(k, s)


# ---------------------------------------------------------------------------- domains

def _spread(insts):
    return ({i.values["heads"] // i.values["kv_heads"] for i in insts},
            {i.values["heads"] for i in insts})


@pytest.mark.parametrize("family", ["prefill", "prefill-causal", "decode", "split", "combine"])
def test_attention_instances_cover_gqa_groups_and_head_counts(family):
    """Issue 13: the instances include GQA group 1 and a group > 2, one head and many heads."""
    from kernels.amd.attention_plan import AttnConfig
    from kernels.amd.decode import DecodeConfig, build_decode
    from kernels.amd.decode_splitkv import build_splitkv
    from kernels.amd.flash_attention import build_attention_ir
    if family.startswith("prefill"):
        k = build_attention_ir(AttnConfig(head_dim=64, causal=family.endswith("causal")))
    elif family == "decode":
        k = build_decode(DecodeConfig(head_dim=64), verify=False).ir
    else:
        pair = build_splitkv(DecodeConfig(head_dim=64), verify=False)
        k = pair.split.ir if family == "split" else pair.combine.ir
    insts = k.spec.domain.instances(k)
    groups, heads = _spread(insts)
    assert 1 in groups and max(groups) > 2, groups
    assert 1 in heads and max(heads) > 1, heads


def test_split_pair_specs_must_agree_on_the_workspace():
    """The split-KV pair is verified as a pair: the split spec's workspace tensors are the
    combine spec's partials; a split spec that writes Lp with other dimensions is refused."""
    import copy
    from kernels.amd.decode import DecodeConfig
    from kernels.amd.decode_splitkv import build_splitkv
    from kernels.decode_splitkv import _check_same_workspace
    bk = build_splitkv(DecodeConfig(head_dim=64))
    assert bk.combine.verification.checks["reduction_reads_partials"].holds
    bk2 = copy.copy(bk)
    bk2.combine = copy.deepcopy(bk.combine)
    bk2.split = copy.copy(bk.split)
    bk2.split.ir = copy.copy(bk.split.ir)
    s = bk.split.ir.spec
    bk2.split.ir.spec = dataclasses.replace(s, tensors=tuple(
        dataclasses.replace(t, dims=("split", "d", "head", "batch")) if t.name == "Lp" else t
        for t in s.tensors))
    _check_same_workspace(bk2)
    r = bk2.combine.verification.checks["reduction_reads_partials"]
    assert not r.holds and "Lp: the split kernel's spec writes" in r.counterexample


def test_block_independence_reads_the_head_symbols_from_the_spec():
    """Planted bug: an LDS offset that depends on the head (a block's (batch, head) must enter
    global coordinates only) is refused by block_independence, whose symbols come from the
    spec; a spec with a head anchor but no head symbols is ill-formed."""
    import copy
    from kernels.amd.attention_plan import AttnConfig
    from kernels.amd.flash_attention import build_attention_ir
    from kernels.ir.core import sym, walk
    from kernels.verify.attention_gate import block_independence
    k = build_attention_ir(AttnConfig(head_dim=64))
    ok, why = block_independence(k)
    assert ok and "bat, h, hk, block_bh" in why
    bad = copy.deepcopy(k)
    lds = next(s for s in walk(bad.body) if isinstance(s, Access) and s.space == "lds")
    lds.offset = lds.offset + sym("h")
    ok, why = block_independence(bad)
    assert not ok and "depends on the batch/head index" in why
    with pytest.raises(SpecError, match="head_symbols"):
        dataclasses.replace(k.spec, head_symbols=())
