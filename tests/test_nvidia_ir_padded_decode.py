"""The tensor-core decode's IR kernels at head dims other than 64/128/256 (issue 20 item 1,
kernels/nvidia/decode_padded.py): multiples of 16 from 16 to 256 over padded widths (Q K^T over
D rounded up to 32, P V over D rounded up to 64), the vectors past D predicated-off loads,
O^T rows past D never stored.  Proved by the one verifier with the printed text; the one new
engine rule (a reduction slot zero in A AND B adds no head dim, the scores' head-dim set
still exactly [0, D)) refuses its planted bugs by name.  GPU tests:
tests/test_nvidia_ir_padded_gpu.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from kernels.ir.core import Access, sym
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.decode_fused_ir import build_decode_fused_ir, verify_fused
from kernels.nvidia.decode_mma import MmaDecodeConfig, fragment_maps, mma_blocks_per_sm
from kernels.nvidia.decode_padded import (padded_decode_on_ir, policy_head_dim, qk_width,
                                          v_width)
from kernels.nvidia.decode_split_ir import build_decode_split_ir, d_pred, validate_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.verifier import verify

# the brief's head dims (32, 80, 96, 160), GQA 8 and odd heads per block, both warp counts
PADDED = [MmaDecodeConfig(head_dim=32, hg=8, warps=4),
          MmaDecodeConfig(head_dim=80, hg=3, warps=8, in_dtype="f16", out_dtype="bf16"),
          MmaDecodeConfig(head_dim=96, hg=8, warps=8),
          MmaDecodeConfig(head_dim=160, hg=5, warps=4)]
CFG = MmaDecodeConfig(head_dim=80, hg=4, warps=4)


def _failed(k, source=None):
    r = verify(k, arch="sm_90", source=source)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", PADDED, ids=lambda c: c.name)
def test_the_split_and_fused_kernels_verify_with_their_printed_text(cfg):
    split = build_decode_split_ir(cfg)
    assert _failed(split, emit_cuda_attention(split)) == {}
    fused = build_decode_fused_ir(cfg)
    rep = verify_fused(fused, emit_cuda_attention(fused))["report"]
    assert rep.holds and "printed_ticket" in rep.checks


@pytest.mark.parametrize("D", [16, 48, 112, 208, 240])
def test_the_other_multiples_of_16_verify(D):
    k = build_decode_split_ir(MmaDecodeConfig(head_dim=D, hg=2, warps=4))
    assert _failed(k, emit_cuda_attention(k)) == {}


@pytest.mark.parametrize("D,qk,v,policy", [(16, 32, 64, 64), (32, 32, 64, 64), (48, 64, 64, 64),
                                           (80, 96, 128, 128), (96, 96, 128, 128),
                                           (160, 160, 192, 256), (192, 192, 192, 256),
                                           (240, 256, 256, 256), (128, 128, 128, 128)])
def test_padded_widths_and_the_policy_head_dim(D, qk, v, policy):
    assert (qk_width(D), v_width(D), policy_head_dim(D)) == (qk, v, policy)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 16))
def test_in_range_vectors_cover_d_exactly_once(n):
    """For every multiple of 16: the lanes' vectors whose d predicate is on (d_pred) hold
    every head dim below D exactly once, Q/K over qk_width and V/O over v_width."""
    D = 16 * n
    mp = fragment_maps(max(qk_width(D), v_width(D)))

    def on(p, **lane):
        return p is None or bool(p.subs({sympy.Symbol(k): x for k, x in lane.items()}))
    qk = [mp["qk_d"](t, s, i) for t in range(4) for s in range(qk_width(D) // 16)
          for i in range(4) if on(d_pred(D, sympy.Symbol("t"), 4, 32 * (s // 2)), t=t)]
    od = [mp["o_d"](g, j, h) for g in range(8) for j in range(v_width(D) // 16) for h in range(2)
          if on(d_pred(D, sympy.Symbol("g"), 8, 64 * (j // 4)), g=g)]
    assert sorted(qk) == list(range(D)) and sorted(od) == list(range(D))


@pytest.mark.parametrize("D", [8, 40, 264, 0])
def test_head_dims_off_the_16_grid_are_refused_with_the_valid_ones(D):
    with pytest.raises(AttentionConfigError, match="multiple of 16 from 16 to 256"):
        validate_ir(MmaDecodeConfig(head_dim=D, hg=4, warps=4))
    assert not padded_decode_on_ir(D)


def test_the_rest_of_the_configuration_is_checked_at_the_policy_head_dim():
    """d160 hg 8 at 8 warps: the shared merge of d256 (its policy head dim) is too big."""
    with pytest.raises(AttentionConfigError, match="static shared memory"):
        validate_ir(MmaDecodeConfig(head_dim=160, hg=8, warps=8))
    validate_ir(MmaDecodeConfig(head_dim=160, hg=8, warps=4))
    assert mma_blocks_per_sm(MmaDecodeConfig(head_dim=160, warps=4)) == 2    # d256's rule
    assert mma_blocks_per_sm(MmaDecodeConfig(head_dim=96, warps=4)) == 2


# ---- planted bugs: the zero reduction slots -----------------------------------------------

def _loads(k, tag):
    from kernels.ir.core import walk
    return [s for s in walk(k.body) if isinstance(s, Access) and s.tag == tag]


def _planted(tag, edit, cfg=CFG):
    """The split kernel with ``edit(access)`` applied to its ``tag`` loads that carry a head-dim
    predicate (in place: the statements are the kernel's)."""
    k = build_decode_split_ir(cfg)
    hit = 0
    for a in _loads(k, tag):
        new = edit(a)
        if new is not None:
            a.pred = new
            hit += 1
    assert hit, tag
    return _failed(k)


def _d_part(p, lane):
    """The head-dim part ``lane < c`` of a load predicate (None: the load has none)."""
    parts = p.args if isinstance(p, sympy.And) else (p,)
    for x in parts:
        if isinstance(x, sympy.StrictLessThan) and x.lhs == sym(lane):
            return x
    return None


def _shorten(lane):
    """The head-dim predicate one lane short: a vector inside D zero-filled."""
    def edit(a):
        d = _d_part(a.pred, lane) if a.pred is not None else None
        return None if d is None else a.pred.subs(d, sympy.StrictLessThan(d.lhs, d.rhs - 1))
    return edit


def _drop(lane):
    """The head-dim predicate dropped: a vector past D loaded."""
    def edit(a):
        d = _d_part(a.pred, lane) if a.pred is not None else None
        if d is None:
            return None
        rest = [x for x in (a.pred.args if isinstance(a.pred, sympy.And) else ()) if x != d]
        return sympy.And(*rest) if rest else sympy.true
    return edit


def test_a_q_vector_zeroed_inside_d_is_refused():
    """Q's predicate a lane short: a real score row meets zeros where K is real."""
    failed = _planted("Q.load", _shorten("t"))
    assert "lane_mfma_operands" in failed and "mixes" in str(failed["lane_mfma_operands"])
    assert "in_bounds" in failed


def test_q_and_k_zeroed_inside_d_lose_head_dims():
    """Q's and K's predicates both a lane short: the slots are zero on both sides inside D,
    which is no padding slot (the rule takes only head dims past D: a Q tile past seqlen_q
    meeting keys past seqlen_kv in the prefill is zero on both sides inside D too), so real Q
    rows mix elements and zeros."""
    k = build_decode_split_ir(CFG)
    for tag in ("Q.load", "K.load"):
        for a in _loads(k, tag):
            new = _shorten("t")(a)
            if new is not None:
                a.pred = new
    failed = _failed(k)
    assert "lane_mfma_operands" in failed
    assert "mixes Q elements and zeros" in str(failed["lane_mfma_operands"])


def test_k_past_d_loaded_is_refused():
    """K's head-dim predicate dropped: K past D is loaded (out of range) against zero Q; a
    slot zero in A only is no padding slot (the rule needs both operands zero)."""
    failed = _planted("K.load", _drop("t"))
    assert "in_bounds" in failed and "lane_mfma_operands" in failed
    assert "mixes" in str(failed["lane_mfma_operands"])


def test_q_past_d_loaded_is_refused():
    """Q's head-dim predicate dropped (None: an unpredicated load past D)."""
    k = build_decode_split_ir(CFG)
    for a in _loads(k, "Q.load"):
        if a.pred is not None:
            a.pred = None
    failed = _failed(k)
    assert "in_bounds" in failed and "lane_mfma_operands" in failed


def test_v_past_d_loaded_is_refused():
    failed = _planted("V.load", _drop("g"))
    assert "in_bounds" in failed


def test_v_zeroed_inside_d_is_refused():
    """V's predicate a lane short: O rows below D from zero V; the store rules see the
    zero-filled elements' head dims still in range, so the in-range check names it."""
    failed = _planted("V.load", _shorten("g"))
    assert "in_bounds" in failed


_TEXT_MUTATIONS = [   # the printed head-dim predicates: each a printer bug the IR cannot see
    ("8*t + 64), t < 2);", "8*t + 64), t < 3);"),
    ("8*t + 64), t < 2 && g + kb < seqlen_kv);", "8*t + 64), g + kb < seqlen_kv);"),
    ("+ 64), g < 2 && kb + 2*t < seqlen_kv);", "+ 64), g < 1 && kb + 2*t < seqlen_kv);"),
    ("if (g < 2 && 2*t < 4) *reinterpret_cast<float2*>", "if (2*t < 4) *reinterpret_cast<float2*>"),
]


@pytest.mark.parametrize("old,new", _TEXT_MUTATIONS, ids=[m[1][:36] for m in _TEXT_MUTATIONS])
def test_printed_predicate_mutations_are_refused(old, new):
    k = build_decode_split_ir(CFG)
    src = emit_cuda_attention(k)
    assert src.count(old) >= 1, old
    failed = _failed(k, src.replace(old, new, 1))
    assert "printed_source" in failed, failed


# ---- the launch objects -------------------------------------------------------------------

def test_the_fused_decode_builds_at_a_padded_head_dim_without_a_template(monkeypatch):
    """IrFusedMmaDecode at d80: verified at construction; there is no template split kernel
    (empty source, never compiled), so a call whose int offsets would leave int is refused
    by name rather than run by a kernel that does not exist."""
    pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.errors import LaunchError
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    fc.install(monkeypatch)
    try:
        dec = IrFusedMmaDecode(replace(CFG, hg=8))
        assert dec.split_verification.holds and dec.fused_verification["report"].holds
        assert dec.source == "" and dec.fused_kernel.source is dec.fused_source
        assert dec.blocks_per_sm == 2 and not dec.whole_waves
        # with the wide IR split kernel off (on by default: tests/test_decode_split_wide.py)
        import kernels.nvidia.decode_ir as decode_ir
        monkeypatch.setattr(decode_ir, "WIDE_SPLIT_ON_IR", False)
        with pytest.raises(LaunchError, match="exists only at head_dim 64, 128 and 256"):
            dec.template_bind(None, None, None, None, 1.0, None, None)
    finally:
        fc.clear_caches()


@pytest.mark.parametrize("cfg", PADDED, ids=lambda c: c.name)
def test_the_fused_kernel_compiles_offline_without_spills(cfg):
    """The printed source of the fused kernel through nvcc (offline, no GPU needed; skipped
    without nvcc): it compiles under its IR name and ptxas spills nothing (2026-11-24, nvcc
    13.0: d32 96 registers, d80/d96 152, d160 198 at hg 8, 4 warps)."""
    import re
    import shutil
    from kernels.toolchain.nvrtc import compile_cuda
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    k = build_decode_fused_ir(cfg)
    m = compile_cuda(emit_cuda_attention(k), "sm_90", name=f"{k.name}.cu", backend="nvcc",
                     use_cache=False)
    assert m.kernels == (k.name,)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
    assert spills and not any(spills), m.log[-400:]
