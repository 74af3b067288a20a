"""NaN and +inf scores reach the output (issue 16): the 16-bit rounding of P does not keep NaN
(kernels.ir.p_rounding: a select per element, a sixth of the bf16 hot loop), so the kernels
carry a NaN row through the f32 row sum ``l`` instead: FinalNormalize gives a NaN output row and
a NaN logsumexp when ``l`` is NaN.  Checked on the CPU emulator against torch, whose softmax
gives NaN for the same rows; rows that never see the bad key stay finite and correct."""

import math

import pytest
import torch

import kernels.flash_attention as attn
from kernels.attention_registry import reference


def _qkv(b, h, hk, sq, skv, d, dt, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, sq, d, generator=g).to(dt), torch.randn(b, hk, skv, d,
                                                                          generator=g).to(dt),
            torch.randn(b, hk, skv, d, generator=g).to(dt))


def _compare(clean, bad, causal, nan_rows, **kw):
    """``bad`` = ``clean`` with a NaN/inf planted: the ``nan_rows`` ([B, H, Sq]) are NaN in O
    and lse (as torch's softmax gives for a row that sees the bad value), every other row
    equals the clean problem's reference (torch's SDPA would poison masked rows too: it adds
    the mask, and -inf + NaN is NaN; the kernel never reads a masked key)."""
    out, lse = attn.attention(*bad, causal=causal, return_lse=True, backend="emulator", **kw)
    ref, lref = reference(*clean, causal=causal)
    assert nan_rows.any() and not nan_rows.all(), "the case must mix NaN and finite rows"
    assert torch.equal(torch.isnan(out.float()).all(-1), nan_rows), "NaN rows of O"
    assert not torch.isnan(out.float()[~nan_rows]).any()
    assert torch.equal(torch.isnan(lse), nan_rows), "NaN rows of the logsumexp"
    ok = ~nan_rows
    assert float((out.float()[ok] - ref[ok]).abs().max()) <= 2e-2
    fin = torch.isfinite(lref) & ok
    assert float((lse[fin] - lref[fin]).abs().max()) <= 1e-4


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
def test_nan_key_poisons_exactly_the_rows_that_see_it_bf16(rounding):
    """A NaN in key 70 of a causal bf16 prefill: rows >= 70 see it (NaN), rows < 70 do not."""
    q, k, v = _qkv(1, 2, 1, 100, 100, 128, torch.bfloat16)
    kb = k.clone()
    kb[0, 0, 70, 5] = float("nan")
    rows = torch.zeros(1, 2, 100, dtype=torch.bool)
    rows[:, :, 70:] = True              # both query heads share KV head 0 (GQA)
    _compare((q, k, v), (q, kb, v), True, rows, decode=False, p_rounding=rounding)


def test_inf_score_gives_nan_row_f16_and_two_stage():
    """A +inf query element (its row's scores are +-inf): NaN in torch and here."""
    q, k, v = _qkv(1, 1, 1, 40, 90, 64, torch.float16, seed=1)
    qb = q.clone()
    qb[0, 0, 7, 3] = float("inf")
    rows = torch.zeros(1, 1, 40, dtype=torch.bool)
    rows[0, 0, 7] = True
    _compare((q, k, v), (qb, k, v), False, rows, decode=False, lds_stages=2)


def test_nan_reaches_the_decode_output():
    q, k, v = _qkv(2, 2, 2, 1, 50, 64, torch.bfloat16, seed=2)
    v[1, 0, 10, 0] = float("nan")     # V NaN: only batch 1 head 0 sees it, through P V
    out, lse = attn.attention(q, k, v, return_lse=True, backend="emulator")
    ref, _ = reference(q, k, v)
    assert torch.equal(torch.isnan(out.float()), torch.isnan(ref))
    assert not math.isnan(float(lse[0, 0, 0]))


def test_planted_finalize_without_nan_loses_the_nan_row():
    """Planted bug: the old finalisation (``l > 0 ? 1 / l : 0``, lse -inf unless l > 0): a NaN
    row's logsumexp comes out -inf, which the comparisons above refuse (and its O is NaN only
    while P's rounding happens to keep the NaN: exp2's canonical NaN does, other payloads need
    not); the printed kernel gives NaN for both."""
    import argparse
    import copy

    import numpy as np

    from kernels.registry import get
    entry = get("attention")
    p = argparse.ArgumentParser()
    entry.add_arguments(p)
    cfg = entry.config(p.parse_args(["--dtype", "bf16", "--heads", "1", "--seqlen-q", "40",
                                     "--seqlen-kv", "40", "--head-dim", "64"]))
    shaped = entry.build(cfg)
    inputs = entry.inputs(cfg, 0)
    inputs[0][0, 0, 5, 0] = float("nan")           # query row 5 of the one head is NaN
    good = shaped.emulate(*inputs)
    def nan_bf16(a):       # the emulator returns bf16 O as its 16-bit patterns
        return (np.asarray(a).view(np.uint16) & 0x7FFF) > 0x7F80

    o_good, lse_good = good.outputs[3], np.asarray(good.outputs[4])
    assert nan_bf16(o_good[0, 0, 5]).all() and np.isnan(lse_good[0, 0, 5])
    assert not nan_bf16(o_good[0, 0, 6]).any() and not np.isnan(lse_good[0, 0, 6])

    src = shaped.bk.source
    old = src.replace("l_run == 0.0f ? 0.0f : 1.0f / l_run", "l_run > 0.0f ? 1.0f / l_run : 0.0f")
    old = old.replace("l_run == 0.0f ? -__builtin_inff() : (mc + __builtin_log2f(l_run)) * "
                      "0.6931471805599453f;", "l_run > 0.0f ? (mc + __builtin_log2f(l_run)) * "
                      "0.6931471805599453f : -__builtin_inff();")
    assert old != src
    m = copy.copy(shaped)
    m.bk = copy.copy(shaped.bk)
    m.bk.source = old
    bad = m.emulate(*inputs)
    assert src.count("l_run > 0.0f") == 0 and old.count("l_run > 0.0f") == 2
    # the row's logsumexp comes out -inf (as if the row saw no key), not NaN
    assert np.asarray(bad.outputs[4])[0, 0, 5] == -np.inf
