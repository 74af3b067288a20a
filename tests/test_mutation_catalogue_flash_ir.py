"""The mutation catalogue's entries for the prefill built as IR (kernels/nvidia/flash_ir.py;
tests/test_mutation_catalogue.py is at the line limit): one planted bug per rule the prefill
brought into the attention checks - ``cp.async`` groups and ``ldmatrix`` in the attention
dataflow (kernels/verify/attention_async.py), ``cp.async`` accesses in the static pass, P as
the A operand of ``O = P V`` and :class:`~kernels.ir.warp_registers.RoundProbs`
(kernels/verify/warp_register_rules.py), the CUDA forms of RoundProbs, FinalNormalize and
the folded softmax (mask, update, exponent, row sum) read back (kernels/verify/source_decode.py),
the unpredicated copy of whole key blocks (bounds in the IR, its condition in the text) - each
refused by ``verify(ir, source=...)`` under the named check.  A bug in the IR is printed with it (the text agrees with the IR, so the IR check
must catch it); a bug in the text alone must be caught by ``printed_source``."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.attention import FinalNormalize, MaskScores, Rescale
from kernels.ir.core import Barrier, If, Loop, Shared, sym, walk
from kernels.ir.nvidia import CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from kernels.ir.warp_registers import RoundProbs
from kernels.nvidia.attention import FlashConfig
from kernels.nvidia.flash_ir import build_flash_ir
from kernels.printer.cuda_attention import emit_cuda_attention

from _planted import assert_case_refused

CFG = FlashConfig(head_dim=64, bm=128, bn=64, warps=4, dtype="f16")
CAUSAL = FlashConfig(head_dim=64, bm=128, bn=64, warps=4, dtype="f16", causal=True)


def _loops(k):
    return [s for s in k.body if isinstance(s, Loop)]


def _first(body, cls, pred=lambda s: True):
    return next(s for s in walk(body) if isinstance(s, cls) and pred(s))


def _drop(body, target) -> bool:
    for i, s in enumerate(body):
        if s is target:
            del body[i]
            return True
        for attr in ("body",):
            if isinstance(getattr(s, attr, None), list) and _drop(getattr(s, attr), target):
                return True
    return False


def _k_wait_dropped(k):
    """Both loops: the wait before S = Q K^T: K of block j may still be in flight."""
    for lp in _loops(k):
        _drop(lp.body, _first(lp.body, CpAsyncWait))


def _v_commit_dropped(k):
    """The prologue's second commit: V of block 0 joins K of block 1's group, so the wait
    before P V does not retire it."""
    commits = [i for i, s in enumerate(k.body) if isinstance(s, CpAsyncCommit)]
    del k.body[commits[1]]


def _v_not_transposed(k):
    for s in walk(k.body):
        if isinstance(s, LdMatrixLoad) and s.buf == "sV":
            s.atom = _first(k.body, LdMatrixLoad, lambda x: x.buf == "sK").atom


def _k_other_stage(k):
    """K fragments read from the stage being filled for the next block."""
    for lp in _loops(k):
        for s in walk(lp.body):
            if isinstance(s, LdMatrixLoad) and s.buf == "sK":
                j = sympy.Symbol("j", integer=True, nonnegative=True)
                s.coords = tuple((c[0], sympy.Mod(j + 1, 2)) for c in s.coords)


def _round_wrong_tile(k):
    """P of keys 16-31 rounded into the operand of keys 0-15."""
    for s in walk(k.body):
        if isinstance(s, RoundProbs) and s.items[0] % 32 == 0:
            s.items = tuple(i + 8 for i in s.items)


def _round_dropped(k):
    for lp in _loops(k):
        for s in [x for x in walk(lp.body) if isinstance(x, RoundProbs)][:1]:
            _drop(lp.body, s)


def _rescale_dropped(k):
    for lp in _loops(k):
        _drop(lp.body, _first(lp.body, Rescale))


def _ragged_mask_dropped(k):
    masked = _loops(k)[1]
    m = _first(masked.body, MaskScores)
    m.conds = tuple(sympy.true for _ in m.conds)


def _causal_off_by_one(k):
    for lp in _loops(k)[1:]:       # the masked loop (the unmasked one has no mask)
        m = _first(lp.body, MaskScores)
        m.conds = tuple(sympy.And(*[a if not isinstance(a, sympy.Le) else
                                    sympy.StrictLessThan(a.lhs, a.rhs, evaluate=False)
                                    for a in c.args]) if isinstance(c, sympy.And) else c
                        for c in m.conds)


def _v_barrier_dropped(k):
    """The barrier after the V wait (before the softmax at d64): other threads' cp.async
    writes of V are not yet visible to the P V ldmatrix reads."""
    for lp in _loops(k):
        bars = [s for s in lp.body if isinstance(s, Barrier)]
        _drop(lp.body, bars[1])


def _sk_halved(k):
    k.shared = [Shared(s.name, s.dtype, s.count // 2) if s.name == "sK" else s
                for s in k.shared]


def _normalize_other_row(k):
    fins = [s for s in k.body if isinstance(s, FinalNormalize)]
    fins[0].l = fins[1].l


def _text_round(src):
    return src.replace("pa[0] = lg_pack_f16x2(pf[0], pf[1]);",
                       "pa[0] = lg_pack_f16x2(pf[2], pf[3]);")


def _text_normalize(src):
    return src.replace("{ const float lg_inv = l00 > 0.f ? 1.f / l00 : 0.f;",
                       "{ const float lg_inv = l01 > 0.f ? 1.f / l01 : 0.f;", 1)


def _text_guard_dropped(src):
    """The folded maximum without its guard (a row with no key yet: -inf * scale)."""
    return src.replace("const float mc00 = mc00_n == LG_NEG_INF ? 0.f : mc00_n * scale_log2;",
                       "const float mc00 = mc00_n * scale_log2;", 1)


def _text_exp_other_row(src):
    """A score's exponent subtracts the next row's folded maximum."""
    return src.replace("pf[0] = lg_exp2(fmaf(sc[0], scale_log2, -mc00));",
                       "pf[0] = lg_exp2(fmaf(sc[0], scale_log2, -mc01));", 1)


def _text_exp_unscaled(src):
    """A score's exponent with the scale left out (the folded form's one fma)."""
    return src.replace("pf[0] = lg_exp2(fmaf(sc[0], scale_log2, -mc00));",
                       "pf[0] = lg_exp2(fmaf(sc[0], alpha00, -mc00));", 1)


def _text_mask_scales(src):
    """A masked score scaled at the mask as well (the decode's form): scaled twice."""
    line = next(ln for ln in src.splitlines() if ": LG_NEG_INF;" in ln and "sc[0] = (" in ln)
    return src.replace(line, line.replace("? sc[0] :", "? sc[0] * scale_log2 :"), 1)


def _text_pair_dropped(src):
    """One pair of probabilities left out of the row sum."""
    return src.replace("    l00_s += pf[4] + pf[5];\n", "", 1)


def _text_l_other_alpha(src):
    """The row sum rescaled by the other row's alpha."""
    return src.replace("l00 = fmaf(l00, alpha00, l00_s);", "l00 = fmaf(l00, alpha01, l00_s);", 1)


def _text_fast_copy_bound(src):
    """The unpredicated copy taken for the last (ragged) key block too."""
    return src.replace("if (j + 1 < n_whole) {", "if (j + 1 <= n_whole) {", 1)


def _fast_copy_past_sequence(k):
    """The IR's unpredicated copy under an off-by-one bound: reads rows past seqlen_kv."""
    for s in walk(k.body):
        if isinstance(s, If) and isinstance(s.cond, sympy.StrictLessThan) and \
                s.cond.rhs == sym("n_whole"):
            s.cond = sympy.LessThan(s.cond.lhs, s.cond.rhs, evaluate=False)


def _lse_base2(k):
    """The lse read in base-2 units (FinalNormalize not raw) while the running maximum is raw:
    the mix of units main printed before the one raw-score mechanism (the lse register is
    never stored by this kernel, but the statement's value was wrong by a factor of the scale)."""
    for s in walk(k.body):
        if isinstance(s, FinalNormalize):
            s.raw = False
            return


def _text_lse_unscaled(src):
    """The text's lse adds the raw maximum unscaled to log2(l)."""
    return src.replace("(m00 * scale_log2 + log2f(l00))", "(m00 + log2f(l00))", 1)


def _text_kv_predicate(src):
    return src.replace("< seqlen_kv) ? 16 : 0)", "< seqlen_kv + 1) ? 16 : 0)", 1)


# (case, config, check that refuses it, IR mutation or None, text mutation or None)
FLASH_IR_CASES = [
    ("flash-k-wait-dropped", CFG, "lds_races", _k_wait_dropped, None),
    ("flash-v-commit-dropped", CFG, "lds_races", _v_commit_dropped, None),
    ("flash-v-ldmatrix-not-trans", CFG, "lane_mfma_operands", _v_not_transposed, None),
    ("flash-k-other-stage", CFG, "emitted_index_math", _k_other_stage, None),
    ("flash-round-probs-wrong-tile", CFG, "lane_mfma_operands", _round_wrong_tile, None),
    ("flash-round-probs-dropped", CFG, "lane_mfma_operands", _round_dropped, None),
    ("flash-rescale-dropped", CFG, "online_softmax", _rescale_dropped, None),
    ("flash-ragged-mask-dropped", CFG, "masking_and_tile_skipping", _ragged_mask_dropped, None),
    ("flash-causal-mask-off-by-one", CAUSAL, "masking_and_tile_skipping", _causal_off_by_one,
     None),
    ("flash-cp-async-store-past-sK", CFG, "in_bounds", _sk_halved, None),
    ("flash-normalize-by-other-row", CFG, "online_softmax", _normalize_other_row, None),
    ("flash-text-round-probs", CFG, "printed_source", None, _text_round),
    ("flash-text-normalize", CFG, "printed_source", None, _text_normalize),
    ("flash-text-kv-predicate", CFG, "printed_source", None, _text_kv_predicate),
    ("flash-text-max-guard-dropped", CFG, "printed_source", None, _text_guard_dropped),
    ("flash-text-exp-other-row", CFG, "printed_source", None, _text_exp_other_row),
    ("flash-text-exp-unscaled", CFG, "printed_source", None, _text_exp_unscaled),
    ("flash-text-mask-scales-twice", CAUSAL, "printed_source", None, _text_mask_scales),
    ("flash-text-row-sum-pair-dropped", CFG, "printed_source", None, _text_pair_dropped),
    ("flash-text-row-sum-other-alpha", CFG, "printed_source", None, _text_l_other_alpha),
    ("flash-text-fast-copy-bound", CFG, "printed_source", None, _text_fast_copy_bound),
    ("flash-fast-copy-past-sequence", CFG, "in_bounds", _fast_copy_past_sequence, None),
    ("flash-v-barrier-dropped", CFG, "lds_races", _v_barrier_dropped, None),
    ("flash-lse-mixed-score-units", CFG, "printed_source", _lse_base2, None),
    ("flash-text-lse-unscaled", CFG, "printed_source", None, _text_lse_unscaled),
]


@pytest.mark.parametrize("case", FLASH_IR_CASES, ids=[c[0] for c in FLASH_IR_CASES])
def test_flash_ir_planted_bug_is_refused(case):
    name, cfg, check, ir_bug, text_bug = case
    assert_case_refused(name, lambda: build_flash_ir(cfg), emit_cuda_attention, check, ir_bug,
                        text_bug, arch="sm_90")
