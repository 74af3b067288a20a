"""The mutation catalogue's entries for the wgmma prefill built as IR
(kernels/nvidia/wgmma_flash_ir.py): one planted bug per rule the wgmma statements brought into
the attention dataflow (kernels/verify/attention_wgmma.py: the GEMM's wgmma rules on the
attention engine, and the pairing of both products), each refused by
``verify(ir, source=...)`` under the named check.  A bug in the IR is printed with it (the text
agrees with the IR, so the IR check must catch it); a bug in the text alone must be caught by
``printed_source``."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.attention import ExpScores, MaskScores, Rescale
from kernels.ir.core import Frag, If, Let, Loop, Shared, sym, walk
from kernels.ir.nvidia_wgmma import (FenceProxyAsync, GmmaOperand, WgmmaCommit, WgmmaFence,
                                     WgmmaMma, WgmmaWait)
from kernels.ir.warp_registers import RoundProbs
from kernels.nvidia.wgmma_attention import WgmmaFlashConfig
from kernels.nvidia.wgmma_flash_ir import build_wgmma_flash_ir
from kernels.printer.cuda_attention import emit_cuda_attention

from _planted import assert_case_refused

SERIAL = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, overlap=False)
OVERLAP = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128)
# two warpgroups at head_dim 128: the warp-specialised prefill's consumer tile
TWO_WG = WgmmaFlashConfig(head_dim=128, warpgroups=2, bn=128)
# the overlapped causal kernel built with MASK_BLOCK0_WHEN_NEEDED on
OVERLAP_CAUSAL_M0 = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=True)
MASK_BLOCK0 = {OVERLAP_CAUSAL_M0: True}


def _loops(k):
    return [s for s in k.body if isinstance(s, Loop)]


def _index(body, cls, nth=0, pred=lambda s: True):
    return [i for i, s in enumerate(body) if isinstance(s, cls) and pred(s)][nth]


def _proxy_fence_dropped(k):
    """cp.async writes read by wgmma (async proxy) with no fence.proxy.async after them."""
    for lp in _loops(k):
        lp.body[:] = [s for s in lp.body if not isinstance(s, FenceProxyAsync)]


def _s_wait_keeps_one(k):
    """The softmax reads S while its wgmma group may still be running."""
    for lp in _loops(k):
        lp.body[_index(lp.body, WgmmaWait)].pending = 1


def _fence_before_pv_dropped(k):
    """P (RoundProbs) and O (Rescale) are written, then a wgmma reads them with no
    wgmma.fence in between."""
    for lp in _loops(k):
        del lp.body[_index(lp.body, WgmmaFence, 1)]


def _p_not_pinned(k):
    for lp in _loops(k):
        w = lp.body[_index(lp.body, WgmmaWait, 1)]
        w.pins = tuple(p for p in w.pins if p != "pa")


def _o_not_pinned(k):
    for lp in _loops(k):
        w = lp.body[_index(lp.body, WgmmaWait, 1)]
        w.pins = tuple(p for p in w.pins if p != "o_acc")


def _rescale_before_pv_wait(k):
    """Overlap: O rescaled while P V of the previous block is still on the tensor cores."""
    for lp in _loops(k):
        w = _index(lp.body, WgmmaWait, 1)
        r = _index(lp.body, Rescale)
        lp.body.insert(w, lp.body.pop(r))


def _p_rewritten_in_flight(k):
    """Overlap: P of block j rounded into the registers P V of block j - 1 still reads."""
    for lp in _loops(k):
        r = lp.body.pop(_index(lp.body, RoundProbs))
        lp.body.insert(_index(lp.body, WgmmaCommit, 1) + 1, r)


def _p_step_shifted(k):
    """The P V k step s takes the P registers of step s + 1 (keys 16 on)."""
    for s in walk(k.body):
        if isinstance(s, WgmmaMma) and s.a_in_regs:
            i0 = (s.a.idx[0] + 8) % s.a.frag.count
            s.a = s.a.frag.regs(range(i0, i0 + 8))


def _p_never_rounded(k):
    """P rounded into another frag: the wgmma's register A holds no probabilities."""
    pb = Frag("pb", "f16", 64)
    k.frags.append(pb)
    for s in walk(k.body):
        if isinstance(s, RoundProbs):
            s.dst = pb


def _k_other_stage(k):
    """S reads K from the stage the next block's copy fills."""
    j = sympy.Symbol("j", integer=True, nonnegative=True)
    for lp in _loops(k):
        for s in walk(lp.body):
            if isinstance(s, WgmmaMma) and not s.a_in_regs:
                b = s.b
                s.b = GmmaOperand(b.buf, sympy.expand(b.start + 8192 * (1 - 2 * sympy.Mod(j, 2))),
                                  b.desc, b.major, b.mn)


def _v_read_k_major(k):
    """V read through a K-major descriptor (keys and head dims swapped)."""
    for s in walk(k.body):
        if isinstance(s, WgmmaMma) and s.a_in_regs:
            q = next(x for x in walk(k.body) if isinstance(x, WgmmaMma) and not x.a_in_regs).a
            s.b = GmmaOperand(s.b.buf, s.b.start, q.desc, "K", s.b.mn)


def _q_start_off(k):
    """Q's descriptor start 16 bytes on: the k step reads head dims 8..23."""
    for s in walk(k.body):
        if isinstance(s, WgmmaMma) and not s.a_in_regs:
            s.a = GmmaOperand(s.a.buf, s.a.start + 8, s.a.desc, s.a.major, s.a.mn)


def _q_start_same_for_both_warpgroups(k):
    """Q's descriptor start without the warpgroup's 64-row step: warpgroup 1 computes
    warpgroup 0's rows."""
    for s in walk(k.body):
        if isinstance(s, WgmmaMma) and not s.a_in_regs:
            s.a = GmmaOperand(s.a.buf, s.a.start.subs(sym("wg"), 0),
                              s.a.desc, s.a.major, s.a.mn)


def _rows_same_for_both_warpgroups(k):
    """``row0`` without the warpgroup's 64 rows: both warpgroups store rows 0..63."""
    for s in walk(k.body):
        if isinstance(s, Let) and s.name == "row0":
            s.expr = s.expr.subs(sym("wg"), 0)


def _s_second_step_overwrites(k):
    """S's second k step with scale-d 0: head dims 0..15 dropped from every score."""
    for lp in _loops(k):
        [s for s in walk(lp.body) if isinstance(s, WgmmaMma) and not s.a_in_regs][1] \
            .accumulate = False


def _exp_not_raw(k):
    """One row's exponents in base-2 units while its maximum and the mask stay raw."""
    for s in walk(k.body):
        if isinstance(s, ExpScores):
            s.raw = False
            return


def _sv_halved(k):
    k.shared = [Shared(s.name, s.dtype, s.count // 2) if s.name == "sV" else s
                for s in k.shared]


def _text_proxy_fence(src):
    return src.replace("lg_fence_proxy_async();\n", "", 1)


def _text_scale_d_dropped(src):
    """The text's first S step accumulates onto the previous block's probabilities."""
    return src.replace("sK_u32, 8192*(((j) % 2))), 0);", "sK_u32, 8192*(((j) % 2))));", 1)


def _text_mask_scaled(src):
    """A masked score scaled to base 2 while the exponents scale it again."""
    return src.replace("? sc[0] : LG_NEG_INF;", "? sc[0] * scale_log2 : LG_NEG_INF;", 1)


def _text_mask_other_register(src):
    return src.replace("sc[1] = (", "sc[0] = (", 1).replace("? sc[1] : LG_NEG_INF;",
                                                            "? sc[0] : LG_NEG_INF;", 1)


def _text_exp_other_row(src):
    return src.replace("lg_exp2(fmaf(sc[0], scale_log2, -mc0))",
                       "lg_exp2(fmaf(sc[0], scale_log2, -mc1))", 1)


def _text_alpha_unscaled(src):
    """alpha from the raw maximum left unscaled against the scaled new maximum."""
    return src.replace("lg_exp2(fmaf(mr0, scale_log2, -mc0))", "lg_exp2(fmaf(mr0, 1, -mc0))",
                       1)


def _text_k_start(src):
    """The second k step's K descriptor 16 bytes on (head dims 24..39 against Q's 16..31)."""
    return src.replace("sK_u32, 8192*(((j) % 2)) + 16))", "sK_u32, 8192*(((j) % 2)) + 24))", 1)


def _text_desc_other_base(src):
    """The second k step's K descriptor built from V's 32-bit base (same start)."""
    return src.replace("sK_u32, 8192*(((j) % 2)) + 16))", "sV_u32, 8192*(((j) % 2)) + 16))", 1)


def _text_copy_constant_off(src):
    """A K copy's stage-and-constant term 8 elements on: its vector lands in the next one."""
    return src.replace("+ 2 * (8192*(((j + 1) % 2)) + 1024)), K", "+ 2 * (8192*(((j + 1) % 2)) "
                       "+ 1032)), K", 1)


def _text_copy_thread_base_dropped(src):
    """A K copy without the thread's swizzled base (every thread writes the same vector)."""
    return src.replace("(sK_u32 + 2 * (kvs0) + 2 * (8192*(((j + 1) % 2)) + 1024))",
                       "(sK_u32 + 2 * (8192*(((j + 1) % 2)) + 1024))", 1)


def _block0_mask_never(k):
    """MASK_BLOCK0_WHEN_NEEDED's block-0 mask under a condition that never holds: a ragged or
    causal block 0 reaches the softmax unmasked."""
    for s in k.body:
        if isinstance(s, If) and any(isinstance(x, MaskScores) for x in s.body):
            s.cond = sympy.StrictLessThan(sym("n_full"), 0, evaluate=False)


def _text_block0_mask_never(src):
    return src.replace("if (n_full < 1) {", "if (n_full < 0) {", 1)


# (case, config, check that refuses it, IR mutation or None, text mutation or None)
WGMMA_FLASH_IR_CASES = [
    ("wgflash-proxy-fence-dropped", SERIAL, "lds_races", _proxy_fence_dropped, None),
    ("wgflash-s-read-in-flight", SERIAL, "lane_accumulator_writeback", _s_wait_keeps_one,
     None),
    ("wgflash-fence-before-pv-dropped", SERIAL, "lane_mfma_operands", _fence_before_pv_dropped,
     None),
    ("wgflash-p-not-pinned", SERIAL, "lane_accumulator_writeback", _p_not_pinned, None),
    ("wgflash-o-not-pinned", SERIAL, "lane_accumulator_writeback", _o_not_pinned, None),
    ("wgflash-rescale-before-pv-wait", OVERLAP, "lane_accumulator_writeback",
     _rescale_before_pv_wait, None),
    ("wgflash-p-rewritten-in-flight", OVERLAP, "lane_mfma_operands", _p_rewritten_in_flight,
     None),
    ("wgflash-p-step-shifted", SERIAL, "lane_mfma_operands", _p_step_shifted, None),
    ("wgflash-p-never-rounded", SERIAL, "lane_mfma_operands", _p_never_rounded, None),
    ("wgflash-k-other-stage", SERIAL, "lane_mfma_operands", _k_other_stage, None),
    ("wgflash-v-read-k-major", SERIAL, "lane_mfma_operands", _v_read_k_major, None),
    ("wgflash-q-start-off", SERIAL, "lane_mfma_operands", _q_start_off, None),
    ("wgflash-v-past-sV", SERIAL, "in_bounds", _sv_halved, None),
    ("wgflash-s-step-overwrites", SERIAL, "lane_mfma_operands", _s_second_step_overwrites,
     None),
    ("wgflash-text-scale-d-dropped", SERIAL, "printed_source", None, _text_scale_d_dropped),
    ("wgflash-mixed-score-units", SERIAL, "printed_source", _exp_not_raw, None),
    ("wgflash-text-mask-scaled", SERIAL, "printed_source", None, _text_mask_scaled),
    ("wgflash-text-mask-other-register", SERIAL, "printed_source", None,
     _text_mask_other_register),
    ("wgflash-text-exp-other-row", SERIAL, "printed_source", None, _text_exp_other_row),
    ("wgflash-text-alpha-unscaled", SERIAL, "printed_source", None, _text_alpha_unscaled),
    ("wgflash-text-proxy-fence", SERIAL, "printed_source", None, _text_proxy_fence),
    ("wgflash-text-k-start", SERIAL, "printed_source", None, _text_k_start),
    ("wgflash-2wg-q-start-same", TWO_WG, "lane_accumulator_writeback",
     _q_start_same_for_both_warpgroups, None),
    ("wgflash-2wg-rows-same", TWO_WG, "coverage", _rows_same_for_both_warpgroups, None),
    # the 32-bit shared bases (meta "u32_shared", "split_shared_offsets"): the reader joins
    # the printed terms back and compares them with the IR's
    ("wgflash-text-desc-other-base", SERIAL, "printed_source", None, _text_desc_other_base),
    ("wgflash-text-copy-constant-off", SERIAL, "printed_source", None,
     _text_copy_constant_off),
    ("wgflash-text-copy-thread-base-dropped", SERIAL, "printed_source", None,
     _text_copy_thread_base_dropped),
    # block 0 masked only where needed (MASK_BLOCK0_WHEN_NEEDED; built with it on below)
    ("wgflash-block0-mask-never", OVERLAP_CAUSAL_M0, "masking_and_tile_skipping",
     _block0_mask_never, None),
    ("wgflash-text-block0-mask-never", OVERLAP_CAUSAL_M0, "printed_source", None,
     _text_block0_mask_never),
]


@pytest.mark.parametrize("case", WGMMA_FLASH_IR_CASES,
                         ids=[c[0] for c in WGMMA_FLASH_IR_CASES])
def test_wgmma_flash_ir_planted_bug_is_refused(case):
    name, cfg, check, ir_bug, text_bug = case
    assert_case_refused(name, lambda: build_wgmma_flash_ir(
        cfg, mask_block0_when_needed=MASK_BLOCK0.get(cfg)), emit_cuda_attention, check, ir_bug,
        text_bug, arch="sm_90a")
