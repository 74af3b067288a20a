"""The tensor-core split-KV decode's split kernel as kernel IR (issue 20 item 1): the KV loop
(tests/test_nvidia_ir_split_loop.py) plus the warps' merge through shared memory and the
split's normalised partial + base-2 LSE, proved by the one verifier on instances (GQA, ragged
last split, splits shorter than one tile, two head chunks, hg 4 < 8 and 16 mma rows); each
rule of kernels/ir/warp_merge.py refuses a planted bug by its named check, and the partials it
writes are the layouts the IR combine kernel reads."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.core import Access, Barrier, Mfma, sym
from kernels.ir.warp_merge import StoreVar, WarpCombine, WarpStats
from kernels.ir.attention import LaneXor
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.nvidia.decode_mma_ir import build_decode_combine_ir
from kernels.nvidia.decode_split_ir import (acc_layout, build_decode_split_ir,
                                            check_same_workspace, padded_heads)
from kernels.nvidia.attention import AttentionConfigError
from kernels.verify.attention_gate import SPLIT_CHECKS
from kernels.verify.rules import checks_for
from kernels.verify.verifier import verify

DISPATCHED = [MmaDecodeConfig(head_dim=128, hg=4, warps=4), MmaDecodeConfig(head_dim=128, hg=8, warps=4),
              MmaDecodeConfig(head_dim=128, hg=4, warps=8), MmaDecodeConfig(head_dim=128, hg=8, warps=8),
              MmaDecodeConfig(head_dim=256, hg=4, warps=8, in_dtype="bf16")]


def _failed(k):
    r = verify(k, arch="sm_90")
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", DISPATCHED, ids=lambda c: c.name)
def test_every_check_holds_on_the_dispatched_configurations(cfg):
    k = build_decode_split_ir(cfg)
    r = verify(k, arch="sm_90")
    assert tuple(r.checks) == checks_for(k.spec)
    assert "split_partition" in r.checks and set(SPLIT_CHECKS) - {"reduction_reads_partials"} \
        <= set(r.checks)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    dom = r.checks["split_partition"].domain
    for name in ("gqa-ragged-last-split", "splits-shorter-than-a-tile",
                 "two-head-chunks-one-split"):
        assert name in dom


def test_the_shared_o_layout_is_conflict_free_and_fits():
    """heads innermost, 8-d groups at 8 (mod 32) floats: the bank check holds (it is part of
    every verify above); the static shared memory stays under 48 KiB at every dispatched
    configuration."""
    for cfg in DISPATCHED:
        lay, n = acc_layout(cfg)
        small = 3 * cfg.warps * cfg.hg + 2 * cfg.hg
        assert 4 * (n + small) <= 48 * 1024, cfg.name
        offs = sorted(int(lay((r, h, d))) for r in range(cfg.warps) for h in range(cfg.hg)
                      for d in range(cfg.head_dim))
        assert len(set(offs)) == len(offs) and offs[-1] < n     # injective, inside the array


def test_chunked_tiles_are_refused():
    with pytest.raises(AttentionConfigError, match="one 16-key tile"):
        build_decode_split_ir(MmaDecodeConfig(head_dim=128, hg=8, warps=4, chunk=2))


# odd heads per block: every MHA model (hg 1) and the groups 3, 5, 7 (issue 20 item 1)
ODD = [MmaDecodeConfig(head_dim=128, hg=1, warps=4), MmaDecodeConfig(head_dim=64, hg=3, warps=8),
       MmaDecodeConfig(head_dim=256, hg=5, warps=8, in_dtype="f16"),
       MmaDecodeConfig(head_dim=64, hg=7, warps=4, out_dtype="bf16")]


@pytest.mark.parametrize("cfg", ODD, ids=lambda c: c.name)
def test_every_check_holds_at_odd_heads_per_block(cfg):
    """The lane whose head 2t is the block's last stores its pair into the padding head
    (padded_heads): proved with the printed text like the even configurations."""
    from kernels.printer.cuda_attention import emit_cuda_attention
    k = build_decode_split_ir(cfg)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    assert tuple(r.checks)[:-3] == checks_for(k.spec)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_the_padding_head_makes_odd_pairs_aligned_and_disjoint():
    """hg rounded up to even heads: every (warp, head < hg, d) has its own slot, the pair of
    heads (2t, 2t + 1) lands on 8-byte aligned offsets, and the padding head hg is inside the
    array, disjoint from every real head's slots."""
    for hg in (1, 3, 5, 7):
        cfg = MmaDecodeConfig(head_dim=128, hg=hg, warps=4)
        assert padded_heads(hg) == hg + 1
        lay, n = acc_layout(cfg)
        real = {int(lay((r, h, d))) for r in range(4) for h in range(hg) for d in range(128)}
        pad = {int(lay((r, hg, d))) for r in range(4) for d in range(128)}
        assert len(real) == 4 * hg * 128 and not real & pad and max(real | pad) < n
        assert all(int(lay((r, 2 * t, d))) % 2 == 0 for r in range(4) for t in range(hg // 2 + 1)
                   for d in range(128))


def test_odd_heads_without_the_padding_head_are_refused():
    """Planted bug: the warps' O laid out over hg = 3 heads (no padding head): the last
    lane's second column lands on head 0's next d, which another lane writes."""
    from layoutalg import Layout
    cfg = MmaDecodeConfig(head_dim=128, hg=3, warps=4)
    lay, n = acc_layout(cfg)
    bad = Layout(lay.shape, (lay.stride[0], 1, (3,) + tuple(lay.stride[2][1:])))

    def make(s):
        return [Access(s.kind, s.space, s.buf, sympy.expand(bad(s.coords[0])), s.width, s.regs,
                       s.pred, tag=s.tag, origin=bad, coords=s.coords)]
    failed = _edit(lambda s: isinstance(s, Access) and s.buf == "s_acc" and s.kind == "store",
                   make, cfg)
    assert "vector_widths" in failed or "lds_races" in failed, failed


def test_the_split_writes_what_the_combine_reads():
    """The verifier fact that replaces the template's text test: the split kernel's Op / LSEp
    stores and the IR combine's loads use the same layouts (same objects' values), over the
    spec's (split, d, head, batch) coordinates."""
    for cfg in DISPATCHED:
        split, comb = build_decode_split_ir(cfg), build_decode_combine_ir(cfg)
        check_same_workspace(split, comb)
        assert split.spec.tensor("Op").dims == comb.spec.tensor("Op").dims
        assert split.spec.tensor("LSEp").dims == comb.spec.tensor("LSEp").dims


def test_a_different_workspace_layout_is_refused():
    from layoutalg import Layout
    cfg = DISPATCHED[0]
    split, comb = build_decode_split_ir(cfg), build_decode_combine_ir(cfg)
    for s in _walk(comb.body):
        if isinstance(s, Access) and s.buf == "LSEp":
            s.origin = Layout((1,), (0,))
    with pytest.raises(Exception, match="LSEp"):
        check_same_workspace(split, comb)


# ---- planted bugs ------------------------------------------------------------------------

CFG = MmaDecodeConfig(head_dim=128, hg=4, warps=4)


def _walk(body):
    for s in body:
        yield s
        if isinstance(getattr(s, "body", None), list):
            yield from _walk(s.body)


def _edit(pred, make, cfg=CFG):
    k = build_decode_split_ir(cfg)

    def go(body):
        out = []
        for s in body:
            if pred(s):
                out += make(s)
                continue
            if isinstance(getattr(s, "body", None), list):
                s.body = go(s.body)
            out.append(s)
        return out
    k.body = go(k.body)
    return _failed(k)


def test_l_stored_before_its_lane_sum_is_refused():
    """s_l of one lane's keys only: the maximum and the sum are over different keys."""
    k = build_decode_split_ir(CFG)
    xs = [s for s in k.body if isinstance(s, LaneXor) and s.var == "l_run"]
    for s in xs:
        k.body.remove(s)
    at = max(i for i, s in enumerate(k.body) if isinstance(s, StoreVar))
    k.body[at + 1:at + 1] = xs
    bad = _failed(k)
    assert "different rows, maximum versions or keys" in bad.get("online_softmax", ""), bad


def test_o_pair_stored_to_the_wrong_heads_is_refused():
    def make(s):
        r = s.regs
        return [Access(s.kind, s.space, s.buf, s.offset, s.width,
                       r.frag.regs((r.idx[1], r.idx[0])), s.pred, tag=s.tag, origin=s.origin,
                       coords=s.coords)]
    bad = _edit(lambda s: isinstance(s, Access) and s.buf == "s_acc", make)
    assert "under the weight of" in bad.get("lane_mfma_operands", ""), bad


def test_a_missing_barrier_before_the_merge_is_refused():
    k = build_decode_split_ir(CFG)
    k.body.remove(next(s for s in k.body if isinstance(s, Barrier)))
    bad = _failed(k)
    assert "lds_races" in bad, bad


def test_stats_over_fewer_warps_are_refused():
    """The last warp's weight is never written: the combine reads nothing there."""
    bad = _edit(lambda s: isinstance(s, WarpStats),
                lambda s: [WarpStats(s.warps - 1, s.rows, s.s_m, s.s_l, s.s_w, s.s_inv,
                                     s.s_lse)])
    assert "not a weight" in bad.get("lds_races", ""), bad


def test_a_combine_over_fewer_warps_is_refused():
    def make(s):
        return [WarpCombine(s.f, s.n, s.warps - 1, s.rows, s.x_offset, s.j, s.c, s.pred,
                            s.s_acc, s.s_w, s.s_inv)]
    bad = _edit(lambda s: isinstance(s, WarpCombine), make)
    assert "online_softmax" in bad, bad


def test_a_combine_reading_another_rows_o_is_refused():
    def make(s):
        return [WarpCombine(s.f, s.n, s.warps, s.rows, s.x_offset.subs(sym("mrc"), 0), s.j,
                            s.c, s.pred, s.s_acc, s.s_w, s.s_inv)]
    bad = _edit(lambda s: isinstance(s, WarpCombine), make)
    assert "lane_mfma_operands" in bad, bad


def test_o_written_to_another_head_is_refused():
    def make(s):
        cs = tuple((c[0], c[1], c[2] + 1, c[3]) for c in s.coords)
        return [Access(s.kind, s.space, s.buf, sympy.expand(s.origin(cs[0])), s.width, s.regs,
                       s.pred, tag=s.tag, origin=s.origin, coords=cs)]
    bad = _edit(lambda s: isinstance(s, Access) and s.buf == "Op", make)
    assert "lane_accumulator_writeback" in bad, bad


def test_the_lse_of_another_row_is_refused():
    def make(s):
        return [Access(s.kind, s.space, s.buf, 0, 1, s.regs, None, tag=s.tag, origin=s.origin,
                       coords=((0,),))]
    bad = _edit(lambda s: isinstance(s, Access) and s.buf == "s_lse", make)
    assert "logsumexp of row" in bad.get("lane_accumulator_writeback", ""), bad


def test_a_dropped_lo_mma_is_refused_where_o_leaves_the_warp():
    bad = _edit(lambda s: isinstance(s, Mfma) and s.tag == "O.m3.pl", lambda s: [])
    assert "different keys" in bad.get("lane_mfma_operands", ""), bad


def test_a_split_whose_loop_stops_a_step_early_is_refused():
    """The last iteration dropped: keys of the split never reach its partial."""
    from kernels.ir.core import Loop
    def make(s):
        return [Loop(s.var, s.start, s.stop - 1, s.body, s.unroll)]
    bad = _edit(lambda s: isinstance(s, Loop) and s.var == "it", make)
    assert "masking_and_tile_skipping" in bad or "split_partition" in bad, bad


# ---- the printed CUDA, read back -------------------------------------------------------------

def test_the_printed_text_holds_and_is_read_back():
    from kernels.printer.cuda_attention import emit_cuda_attention
    k = build_decode_split_ir(CFG)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    assert tuple(r.checks)[-3:] == ("printed_source", "declarations", "index_ranges")
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}


_TEXT_MUTATIONS = [   # (printed text, mutated text): each a printer bug the IR proof cannot see
    ("va[0] = __byte_perm(vr[0], vr[8], 0x5410);", "va[0] = __byte_perm(vr[0], vr[8], 0x7632);"),
    ("__shfl_sync(0xffffffffu, alpha, 8*t);", "__shfl_sync(0xffffffffu, alpha, 4*t);"),
    ("__shfl_xor_sync(0xffffffffu, mx, 2)", "__shfl_xor_sync(0xffffffffu, mx, 4)"),
    ("k_ss*kb + 8*t), g + kb < seqlen_kv);", "k_ss*kb + 8*t));"),
    ("(kb + 2*t < s1) ? sc[0]", "(kb + 2*t <= s1) ? sc[0]"),
    ("lg_exp2(sc[0] - mc); l_run += pf[0];", "lg_exp2(sc[0] - mx); l_run += pf[0];"),
    ("pf[1] - lg_bf16_hi(ph[0]));", "pf[1] - lg_bf16_hi(ph[1]));"),
    ("s_acc + (640*rg + 2*t", "s_acc + (640*rg + 2*t + 1"),
    ("lg_warp_stats<4, 4>", "lg_warp_stats<3, 4>"),
    ("r * 4 + mrc, s_acc, ", "r * 4 + mrow, s_acc, "),
    ("if (t == 0 && g < 4) s_m[g + 4*rg] = m_run;", "if (g < 4) s_m[g + 4*rg] = m_run;"),
    ("lse_part[0] = s_lse[mrc];", "lse_part[0] = s_lse[0];"),
    ("128*mrc + 4)) = make_float4(f_out[4]", "128*mrc + 4)) = make_float4(f_out[0]"),
]


@pytest.mark.parametrize("old,new", _TEXT_MUTATIONS, ids=[m[1][:32] for m in _TEXT_MUTATIONS])
def test_printed_cuda_mutations_are_refused(old, new):
    from kernels.printer.cuda_attention import emit_cuda_attention
    k = build_decode_split_ir(CFG)
    src = emit_cuda_attention(k)
    assert src.count(old) >= 1, old
    r = verify(k, arch="sm_90", source=src.replace(old, new, 1))
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert "printed_source" in failed, failed


def test_nvrtc_compiles_the_dispatched_configurations_without_spills():
    """NVRTC 13: d128 158-162 registers (the template's split kernel 148: the same blocks per
    SM at 4 and 8 warps), d256 235 (the template 236); no spills."""
    import re
    from kernels.printer.cuda_attention import emit_cuda_attention
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    for cfg in (DISPATCHED[0], DISPATCHED[-1]):
        k = build_decode_split_ir(cfg)
        m = compile_cuda(emit_cuda_attention(k), "sm_90", name=f"{k.name}.cu", backend="nvrtc",
                         options=("--ptxas-options=-v",), use_cache=False)
        assert m.kernels == (k.name,)
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
        assert spills and not any(spills), m.log[-400:]


def test_store_heads_is_what_lets_the_merge_write_other_heads():
    """With the default ("own": a thread writes only its Q's head) the merge's stores are
    refused by the head mapping; a value outside ("own", "kv_group") is an ill-formed spec."""
    from dataclasses import replace
    from kernels.verify.spec import SpecError
    k = build_decode_split_ir(CFG)
    own = replace(k.spec, store_heads="own")
    r = verify(k, spec=own, arch="sm_90")
    assert "but the thread's Q is" in (r.checks["lane_accumulator_writeback"].counterexample
                                       or "")
    with pytest.raises(SpecError, match="store_heads"):
        replace(k.spec, store_heads="any")


def test_a_split_partition_needs_stats_or_an_lse():
    from dataclasses import replace
    from kernels.verify.spec import SpecError
    k = build_decode_split_ir(CFG)
    with pytest.raises(SpecError, match="stats or its log-sum-exp"):
        replace(k.spec, softmax=replace(k.spec.softmax, lse=None))


def test_dispatch_keeps_the_template_split_kernel_where_the_ir_is_not_built():
    from kernels.nvidia.decode_ir import ir_split_supported
    assert ir_split_supported(MmaDecodeConfig(head_dim=128, hg=4, warps=4))
    assert ir_split_supported(MmaDecodeConfig(head_dim=128, hg=3, warps=4))   # odd: padded
    assert not ir_split_supported(MmaDecodeConfig(head_dim=128, hg=4, warps=4, chunk=2))
    assert not ir_split_supported(MmaDecodeConfig(head_dim=128, hg=4, warps=4, fused=True))


def test_int_offsets_past_2_31_fall_back_to_the_template_split_kernel(monkeypatch):
    """The printed offsets are int: a call whose K / V / workspace offsets would leave int is
    run by the template split kernel (long long offsets) with the IR combine, never by a
    kernel that would wrap."""
    pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia.decode_ir import IrSplitMmaDecode
    fc.install(monkeypatch)
    try:
        dec = IrSplitMmaDecode(MmaDecodeConfig(head_dim=128, hg=4, warps=4))
        assert dec.split_verification.holds
        ok = dict(batch=8, heads=32, kv_heads=8, group=4, seqlen_kv=32768, kv_chunk=2048,
                  q_sb=4096, q_sh=128, k_sb=8 * 32768 * 128, k_sh=32768 * 128, k_ss=128,
                  v_sb=8 * 32768 * 128, v_sh=32768 * 128, v_ss=128)
        assert dec.ints_fit(ok, 16, 256)
        big = dict(ok, batch=128, k_sb=8 * 32768 * 128 * 2)      # K past 2^31 elements
        assert not dec.ints_fit(big, 16, 4096)
        assert not dec.ints_fit(dict(ok, k_ss=-128), 16, 256)     # a negative stride
    finally:
        fc.clear_caches()


def test_ir_call_resolves_the_plan_scale_and_fit_the_ir_binds_share(monkeypatch):
    """IrSplitMmaDecode.ir_call is the one place the IR decodes' binds (two-kernel and fused)
    resolve a call: rows = B * Hq, the split count of the plan, the default scale
    1/sqrt(head_dim), the output dtype, and ``fits`` False once an int offset would wrap (the
    bind then hands the call, with the resolved scale, to the template split kernel)."""
    torch = pytest.importorskip("torch")
    import math
    import _fake_cuda as fc
    from kernels.nvidia.decode_ir import IrSplitMmaDecode
    from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
    fc.install(monkeypatch)
    try:
        dec = IrSplitMmaDecode(MmaDecodeConfig(head_dim=128, hg=4, warps=4))
        q = torch.zeros(2, 32, 1, 128, dtype=torch.bfloat16)
        k = torch.zeros(2, 8, 1000, 128, dtype=torch.bfloat16)
        c = dec.ir_call(q, k, k, None, None, None, 132)
        assert (c.rows, c.head_dim, c.out_dtype, c.fits) == (64, 128, torch.float16, True)
        assert c.splits == c.plan["splits"] >= 1 and c.sizes == dec.ir_sizes(q, k, k, c.plan)
        assert c.scale == 1.0 / math.sqrt(128)
        assert dec.ir_call(q, k, k, None, 0.5, None, 132).scale == 0.5
        seen = {}

        def template_bind(self, q, k, v, out, scale, kv_splits, sms):
            seen["scale"] = scale
            return "template"
        monkeypatch.setattr(IrMmaSplitKVDecode, "bind", template_bind)
        monkeypatch.setattr(IrSplitMmaDecode, "ints_fit", lambda self, s, n, rows: False)
        # the template path (the wide IR split kernel, on by default, is
        # tests/test_decode_split_wide.py's)
        import kernels.nvidia.decode_ir as decode_ir
        monkeypatch.setattr(decode_ir, "WIDE_SPLIT_ON_IR", False)
        assert not dec.ir_call(q, k, k, None, None, None, 132).fits
        assert dec.bind(q, k, k, None, None, None, 132) == "template"
        assert seen["scale"] == 1.0 / math.sqrt(128)
    finally:
        fc.clear_caches()


def test_ir_decodes_compile_their_printed_sources_under_the_ir_names(monkeypatch):
    """builder.ir_compiled_kernel, shared by the IR split, combine and fused kernels: each
    CompiledKernel carries its IR kernel's name, the config's arch and exactly the printed
    source that was verified (what runs is what was checked)."""
    pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    fc.install(monkeypatch)
    try:
        dec = IrFusedMmaDecode(MmaDecodeConfig(head_dim=128, hg=4, warps=4))
        for kern, ir, src in ((dec.split_kernel, dec.split_ir, dec.split_source),
                              (dec.combine_kernel, dec.combine_ir, dec.combine_source),
                              (dec.fused_kernel, dec.fused_ir, dec.fused_source)):
            assert (kern.cfg.name, kern.cfg.arch) == (ir.name, dec.cfg.arch)
            assert kern.source is src and kern.backend == "auto"
        assert len({dec.split_ir.name, dec.combine_ir.name, dec.fused_ir.name}) == 3
    finally:
        fc.clear_caches()


def test_a_shared_access_no_thread_executes_is_no_crash():
    """Regression (found building hg 1, whose pair store's predicate no lane met): the race
    tracker crashed on an empty address array (``zero-size array to reduction``) inside
    ``verify`` instead of recording nothing."""
    import numpy as np
    from types import SimpleNamespace
    from kernels.verify.gate_common import LdsRaces
    races = LdsRaces([SimpleNamespace(name="s", count=8)])
    none = np.zeros(0, dtype=int)
    assert races.touch("s", none, none, True) == []
    assert races.touch("s", np.array([1, 1]), np.array([0, 1]), True)[0][0] == "write_twice"
