"""The mutation catalogue's entries for the one-pass decode built as IR
(kernels/nvidia/decode_onepass_ir.py; tests/test_mutation_catalogue.py is at the line limit):
each case plants one bug in its IR or its printed CUDA and names the check of the one verifier
that must refuse it.  The text cases cover every form the one-pass kernel added to the CUDA
printer and its read-back (kernels/printer/cuda_onepass.py, kernels/verify/source_onepass.py):
the dot and axpy helpers (operands, input type, body), the frag-element shuffle, the
branch-free predicated load and the 16-byte store."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.attention import LaneXor, LetMinMax, MaskScores, Rescale, VecAxpy
from kernels.ir.core import Access, Let, Loop, sym, walk
from kernels.nvidia.attention import DecodeConfig
from kernels.nvidia.decode_onepass_ir import build_onepass_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify

from _planted import assert_case_refused, replaced

CFG = DecodeConfig(in_dtype="bf16", out_dtype="f16", head_dim=64, chunk=4)


def _loops(k):
    return [s for s in k.body if isinstance(s, Loop)]


def _xor_across_rows(k):
    x = next(s for s in walk(k.body) if isinstance(s, LaneXor))
    x.pattern = 8                     # d64: 8 lanes per row, xor 8 reaches the next row


def _xor_dropped(k):
    body = _loops(k)[0].body
    body.remove(next(s for s in body if isinstance(s, LaneXor) and s.pattern == 4))


def _k_of_query_head(k):
    i = next(i for i, s in enumerate(k.body) if isinstance(s, Let) and s.name == "hk")
    k.body[i] = Let("hk", sym("h"))


def _rescale_dropped(k):
    body = _loops(k)[0].body
    body.remove(next(s for s in body if isinstance(s, Rescale)))


def _last_mask_dropped(k):
    body = _loops(k)[1].body
    m = next(s for s in body if isinstance(s, MaskScores) and s.items == (3,))
    m.conds = (sympy.true,)


def _last_step_unpredicated(k):
    for s in walk(_loops(k)[1].body):
        if isinstance(s, Access) and s.buf == "V":
            s.pred = None


def _store_every_lane(k):
    k.body[-1].pred = None


def _row_not_clamped(k):
    i = next(i for i, s in enumerate(k.body) if isinstance(s, LetMinMax) and s.name == "qc")
    k.body[i] = Let("qc", sym("qi"))


def _axpy_other_key(k):
    ax = [s for s in _loops(k)[0].body if isinstance(s, VecAxpy)]
    ax[1].p_item = 0


def _loop_a_step_short(k):
    _loops(k)[0].stop = sym("n_full") - 1       # the last whole step is never run


def _to_bf16_store(src):
    i = src.index("lg_st_u32x4(O + ")
    j = src.index("\n", i)
    return src[:i] + src[i:j].replace("lg_pack_f16x2", "lg_pack_bf16x2") + src[j:]


def _text(old, new, count=1):
    return lambda src: replaced(src, old, new, count)


# (case, check that refuses it, IR mutation or None, text mutation or None)
ONEPASS_IR_CASES = [
    ("onepass-xor-across-rows", "cross_lane_reductions", _xor_across_rows, None),
    ("onepass-xor-dropped", "lane_mfma_operands", _xor_dropped, None),
    ("onepass-k-of-query-head", "lane_mfma_operands", _k_of_query_head, None),
    ("onepass-rescale-dropped", "online_softmax", _rescale_dropped, None),
    ("onepass-last-mask-dropped", "masking_and_tile_skipping", _last_mask_dropped, None),
    ("onepass-last-step-unpredicated", "in_bounds", _last_step_unpredicated, None),
    ("onepass-store-every-lane", "coverage", _store_every_lane, None),
    ("onepass-row-not-clamped", "in_bounds", _row_not_clamped, None),
    ("onepass-axpy-other-key", "lane_mfma_operands", _axpy_other_key, None),
    ("onepass-loop-a-step-short", "masking_and_tile_skipping", _loop_a_step_short, None),
    ("onepass-text-dot-operand", "printed_source", None,
     _text("lg_dot8_bf16(&q_fr[0], &k_ld[4]);", "lg_dot8_bf16(&q_fr[0], &k_ld[8]);")),
    ("onepass-text-dot-type", "printed_source", None,
     _text("= lg_dot8_bf16(&q_fr[0], &k_ld[0]);", "= lg_dot8_f16(&q_fr[0], &k_ld[0]);")),
    ("onepass-text-axpy-prob", "printed_source", None,
     _text("p_fr[1], &v_ld[4]);", "p_fr[2], &v_ld[4]);")),
    ("onepass-text-xor-pattern", "printed_source", None,
     _text("s_fr[1], 2);", "s_fr[1], 1);")),
    ("onepass-text-load-predicate", "printed_source", None,
     _text("4*it + 3 < seqlen_kv);", "4*it + 3 <= seqlen_kv);")),
    ("onepass-text-store-register", "printed_source", None,
     _text("lg_pack_f16x2(o_acc[6], o_acc[7])", "lg_pack_f16x2(o_acc[7], o_acc[6])")),
    ("onepass-text-store-conversion", "printed_source", None, _to_bf16_store),
    ("onepass-text-dot-helper-order", "declarations", None,
     _text("d = fmaf(lg_bf16_lo(a[0]), lg_bf16_lo(b[0]), d);\n"
           "  d = fmaf(lg_bf16_hi(a[0]), lg_bf16_hi(b[0]), d);",
           "d = fmaf(lg_bf16_hi(a[0]), lg_bf16_hi(b[0]), d);\n"
           "  d = fmaf(lg_bf16_lo(a[0]), lg_bf16_lo(b[0]), d);")),
    ("onepass-text-load-helper", "declarations", None,
     _text("@q ld.global.nc", "ld.global.nc")),
]


@pytest.mark.parametrize("case", ONEPASS_IR_CASES, ids=[c[0] for c in ONEPASS_IR_CASES])
def test_onepass_ir_planted_bug_is_refused(case):
    name, check, ir_bug, text_bug = case
    assert_case_refused(name, lambda: build_onepass_ir(CFG), emit_cuda_attention, check,
                        ir_bug, text_bug, arch="sm_90")


def test_unmutated_kernel_passes():
    k = build_onepass_ir(CFG)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    assert all(c.holds for c in r.checks.values())


def test_the_32_bit_form_is_refused_past_2_31():
    """index_ranges refuses the int form at a launch whose offsets pass 2^31 (what the runtime's
    int_offsets_fit routes to the template or the wide form) ..."""
    from kernels.nvidia.decode_onepass_ir import onepass_instance
    k = build_onepass_ir(CFG)
    inst = onepass_instance(CFG, "past", 3, 4, 2, 6, layout="past-2^31")
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k), instances=[inst])
    assert not r.checks["index_ranges"].holds
    assert "outside the C int" in r.checks["index_ranges"].counterexample


def test_a_wide_form_with_one_int_stride_is_refused():
    """... and the wide form with one stride left int (k_sb) at its own past-2^31 launch."""
    from kernels.ir.attention import ScalarParam
    k = build_onepass_ir(CFG, wide=True)
    k.scalars = [ScalarParam(p.name, "int") if p.name == "k_sb" else p for p in k.scalars]
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    assert not r.checks["index_ranges"].holds
    assert "k_sb" in r.checks["index_ranges"].counterexample
