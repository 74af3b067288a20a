"""The warp-specialised d128 prefill of the dispatched configurations built as IR
(kernels/nvidia/wgmma_ws_ir.py: the template's overlap schedule, stages 2 and 3, bn 128 and
192, the deferred P V wait), verified -- IR and printed text -- by the one verifier at the IR
prefills' instances and a ring-wrapping one, causal and not; each schedule feature's planted
bug refused by its rule; ping-pong and persistence refused naming the missing piece."""

from __future__ import annotations

import dataclasses

import pytest
import sympy

from kernels.ir.attention import RowMax, SoftmaxUpdate
from kernels.ir.core import If, Loop, sym
from kernels.ir.nvidia_tma import MbarrierArrive, MbarrierWait, RoleBranch
from kernels.ir.nvidia_wgmma import WgmmaWait
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia.wgmma_ws_ir import build_ws_ir, ws_ir_supported
from kernels.nvidia.wgmma_ws_ir_plan import dispatched_d128_configs
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow


def _cfg(**kw) -> WsFlashConfig:
    return WsFlashConfig(**{"dtype": "bf16", "head_dim": 128, "pingpong": False,
                            "loader": "tma", **kw})


#: the dispatched configurations without what the IR form lacks (ping-pong, persistence;
#: test_the_dispatched_configurations_differ_only_by_the_missing_pieces), and the deferred
#: wait without the mask
CONFIGS = {
    "128x192 s2 (B8 H32 S8K)": _cfg(bn=192, stages=2),
    "128x128 s2 causal dw (S8K causal)": _cfg(bn=128, stages=2, causal=True,
                                              defer_pv_wait=True),
    "128x128 s3 (short)": _cfg(bn=128, stages=3),
    "128x128 s3 causal (short causal)": _cfg(bn=128, stages=3, causal=True),
    "128x128 s2 dw": _cfg(bn=128, stages=2, defer_pv_wait=True),
    "128x192 s2 f16": dataclasses.replace(_cfg(bn=192, stages=2), dtype="f16"),
}


#: the dispatched configurations as they run (ping-pong on), but for persistence
PP_CONFIGS = {
    "128x192 s2 pp (B8 H32 S8K)": _cfg(bn=192, stages=2, pingpong=True),
    "128x128 s2 pp causal dw (S8K causal)": _cfg(bn=128, stages=2, causal=True,
                                                 defer_pv_wait=True, pingpong=True),
    "128x128 s3 pp (short)": _cfg(bn=128, stages=3, pingpong=True),
}


def test_the_dispatched_configurations_differ_only_by_the_missing_pieces():
    """What the dispatch runs at d128, with persistence off, is in PP_CONFIGS, and without
    ping-pong in CONFIGS."""
    built, pp = set(CONFIGS.values()), set(PP_CONFIGS.values())
    for label, c in dispatched_d128_configs("bf16").items():
        bare = dataclasses.replace(c, pingpong=False, persistent=False, unit_heads=0)
        assert bare in built, label
        assert ws_ir_supported(bare) is None
        if not c.persistent:
            assert c in pp, label
            assert ws_ir_supported(c) is None


@pytest.mark.parametrize("name", list(PP_CONFIGS))
def test_the_pingpong_forms_are_verified(name):
    """The consumers' GEMM turns (kernels.nvidia.ws_pingpong in the builder's turn hooks),
    verified by the engine's three-agent replay beside the dataflow, IR and text."""
    from kernels.ir.nvidia_tma import NamedBarrier
    from kernels.ir.core import walk
    from kernels.verify.verifier import verify
    cfg = PP_CONFIGS[name]
    k = build_ws_ir(cfg)
    assert k.name.endswith(cfg.name[len("lg_wsflash_"):]) and "_pp" in k.name
    bars = [s for s in walk(k.body) if isinstance(s, NamedBarrier)]
    assert {str(b.id) for b in bars} >= {"1", "cw + 1", "2 - cw"}, bars
    r = verify(k, arch="sm_90a", source=emit_cuda_attention(k))
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "lg_named_bar" in emit_cuda_attention(k)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_ir_and_its_printed_text_are_verified(name):
    from kernels.verify.printed import PRINTED_CHECKS
    from kernels.verify.verifier import verify
    cfg = CONFIGS[name]
    k = build_ws_ir(cfg)
    r = verify(k, arch="sm_90a", source=emit_cuda_attention(k))
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert r.details["engine"].startswith("warp-specialised attention")
    assert set(PRINTED_CHECKS) <= set(r.checks)
    dom = r.checks["online_softmax"].domain
    assert "bshd-strided" in dom and "ring-wrap" in dom
    assert k.name == "lg_wsflash_ir_" + cfg.name[len("lg_wsflash_"):]
    assert (k.block, k.min_blocks) == (384, 1)


def test_the_ring_wrap_instance_wraps_every_ring():
    """The instance the rings need: more key blocks than stages, several rounds."""
    for cfg in CONFIGS.values():
        k = build_ws_ir(cfg)
        wrap = next(i for i in default_instances(k) if i.name == "ring-wrap")
        blocks = -(-wrap.values["seqlen_kv"] // cfg.bn)
        assert blocks >= 2 * cfg.stages, cfg.name


@pytest.mark.parametrize("change,piece", [(dict(persistent=True), "persistent_units"),
                                          (dict(persistent=True, unit_heads=4),
                                           "persistent_units")])
def test_persistence_is_refused_naming_the_missing_piece(change, piece):
    cfg = dataclasses.replace(_cfg(bn=128, stages=3, causal=True), **change)
    with pytest.raises(AttentionConfigError, match=piece):
        build_ws_ir(cfg)


@pytest.mark.parametrize("change,msg", [(dict(loader="cp.async", bn=192), "loader='cp.async'"),
                                        (dict(head_dim=64), "head_dim"),
                                        (dict(bn=64), "bn=64"),
                                        (dict(stages=4), "stages=4"),
                                        (dict(rescale_vote=True), "rescale_vote"),
                                        (dict(v_behind_k=True), "v_behind_k")])
def test_other_configurations_are_refused(change, msg):
    with pytest.raises(AttentionConfigError, match=msg):
        build_ws_ir(dataclasses.replace(_cfg(bn=128, stages=2), **change))


def test_shared_memory_over_the_block_is_refused_by_the_plan():
    with pytest.raises(AttentionConfigError, match="shared memory"):
        build_ws_ir(_cfg(bn=192, stages=3))


def test_the_hooks_are_the_ping_pong_seam():
    """Every GEMM issue of the consumers sits between turn_begin() and turn_end() (empty
    today): what a hook returns lands around each issue, the last one told it is last."""
    from kernels.ir.core import Comment
    from kernels.nvidia.wgmma_ws_ir import WsOverlapBuilder

    class Marked(WsOverlapBuilder):
        def turn_begin(self):
            return [Comment("turn begin")]

        def turn_end(self, last=False):
            return [Comment(f"turn end last={last}")]
    k = Marked(_cfg(bn=128, stages=2)).build_ws()
    text = emit_cuda_attention(k)
    assert text.count("// turn begin") == 4          # block 0, two loops, the last P V
    assert text.count("// turn end last=False") == 3
    assert text.count("// turn end last=True") == 1


def test_the_deferred_alpha_outlives_the_block():
    """defer_pv_wait: alpha is a variable of the consumer (assigned by each block's softmax,
    read at the top of the next block), not a const of the block."""
    k = build_ws_ir(CONFIGS["128x128 s2 causal dw (S8K causal)"])
    text = emit_cuda_attention(k)
    assert "float alpha0 = 0.f;" in text and "const float alpha0" not in text
    assert "    alpha0 = lg_exp2(fmaf(mr0, scale_log2, -mc0));" in text
    plain = emit_cuda_attention(build_ws_ir(CONFIGS["128x128 s3 (short)"]))
    assert "const float alpha0 = lg_exp2(" in plain and "float alpha0 = 0.f;" not in plain
    with pytest.raises(ValueError, match="raw"):
        SoftmaxUpdate("m", "mx", "a", "mc", raw=False, alpha_declared=True)


# ---- planted bugs -----------------------------------------------------------------------

def _role(k, name):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == name)


def _edit_loops(k, fn):
    for s in _role(k, "consumer").body:
        if isinstance(s, Loop) and s.var == "j":
            s.body = fn(s.body)


def _s_wait_count(n):
    def plant(k):
        _edit_loops(k, lambda b: [WgmmaWait(n, s.pins) if isinstance(s, WgmmaWait) and
                                  s.pending == 1 else s for s in b])
    return plant


def _v_release_before_pv_retired(k):
    """The V release moved above the P V wait (the deferred form: its ``if (j > 1)``)."""
    def f(b):
        rel = [s for s in b if (isinstance(s, MbarrierArrive) and s.bar == "emptyV") or
               (isinstance(s, If) and any(isinstance(x, MbarrierArrive) for x in s.body))]
        b = [s for s in b if not any(s is r for r in rel)]
        i = max(i for i, s in enumerate(b) if isinstance(s, WgmmaWait) and s.pending == 0)
        return b[:i] + rel + b[i:]
    _edit_loops(k, f)


def _k_parity_of_two_stages(k):
    _edit_loops(k, lambda b: [MbarrierWait(s.bar, s.index, sympy.Mod(sympy.floor(sym("j") / 2),
                                                                       2))
                              if isinstance(s, MbarrierWait) and s.bar == "fullK" else s
                              for s in b])


def _row_max_over_256_columns(k):
    def f(b):
        return [dataclasses.replace(s, items=tuple(4 * j + 2 * int(s.dst[-1]) + e
                                                   for j in range(32) for e in range(2)))
                if isinstance(s, RowMax) else s for s in b]
    _edit_loops(k, f)


def _deferred_wait_dropped(k):
    _edit_loops(k, lambda b: [s for s in b if not (isinstance(s, WgmmaWait) and
                                                   s.pending == 0)])


def _v_release_two_blocks_late(k):
    """The deferred release of V j - 3 (under j > 2) instead of j - 2: later than a 2-stage
    ring absorbs."""
    def f(b):
        out = []
        for s in b:
            if isinstance(s, If) and any(isinstance(x, MbarrierArrive) for x in s.body):
                s = If(sympy.StrictGreaterThan(sym("j"), 2, evaluate=False),
                       [dataclasses.replace(x, index=sympy.Mod(sym("jp") - 2, 2))
                        if isinstance(x, MbarrierArrive) else x for x in s.body])
            out.append(s)
        return out
    _edit_loops(k, f)


_DW = "128x128 s2 causal dw (S8K causal)"
#: (name, configuration, plant, the check refusing it, a phrase of its counterexample)
BUGS = [
    ("S wait_group 2 (off by one: S not retired)", "128x128 s3 (short)", _s_wait_count(2),
     "lane_accumulator_writeback", "reads sc while a wgmma writing it is in flight"),
    ("V released before its P V retired", "128x128 s3 (short)",
     _v_release_before_pv_retired, "lds_races", "V.tma0 overwrites"),
    ("V released before its P V retired (deferred)", _DW, _v_release_before_pv_retired,
     "lds_races", "V.tma0 overwrites"),
    ("K parity of a 2-stage ring on the 3-stage ring", "128x128 s3 (short)",
     _k_parity_of_two_stages, "mbarrier_protocol", "deadlock"),
    ("bn 192: the row max reads S past its 192 columns", "128x192 s2 (B8 H32 S8K)",
     _row_max_over_256_columns, "in_bounds", "reads sc[96], past its 96 registers"),
    ("the deferred P V wait dropped", _DW, _deferred_wait_dropped, "lane_mfma_operands",
     "overwrites A registers pa"),
    ("V released two blocks late on a 2-stage ring", _DW, _v_release_two_blocks_late,
     "mbarrier_protocol", "deadlock"),
]


@pytest.mark.parametrize("name,cfg,plant,check,msg", BUGS, ids=[b[0] for b in BUGS])
def test_planted_bugs_are_refused(name, cfg, plant, check, msg):
    k = build_ws_ir(CONFIGS[cfg])
    plant(k)
    r = verify_ws_attention(k)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, (name, bad)
    assert msg in bad[check], (name, bad[check])


def test_the_deferred_wait_dropped_only_at_the_last_block_is_refused():
    k = build_ws_ir(CONFIGS[_DW])
    c = _role(k, "consumer")
    i = max(i for i, s in enumerate(c.body) if isinstance(s, Loop))
    j = next(j for j in range(i, len(c.body)) if isinstance(c.body[j], WgmmaWait))
    del c.body[j]
    r = verify_ws_attention(k, schedules=("lazy",))
    assert not r.holds
    assert "in flight" in (r.checks["lane_accumulator_writeback"].counterexample or "") or \
        "not yet retired" in (r.checks["lane_mfma_operands"].counterexample or "")


# ---- printed text ------------------------------------------------------------------------

def _printed(cfg_name):
    from kernels.verify.printed_ws import verify_printed_ws
    k = build_ws_ir(CONFIGS[cfg_name])
    src = emit_cuda_attention(k)

    def check(bad):
        assert bad != src
        r = verify_printed_ws(k, bad, instances=default_instances(k))
        return {n: c.counterexample for n, c in r.items() if not c.holds}
    return src, check


def test_planted_text_bugs_of_the_overlap_schedule_are_refused():
    src, check = _printed(_DW)
    # the deferred alpha declared in the block (shadowing the consumer's variable: the next
    # block would rescale O by a stale alpha)
    line = "      alpha0 = lg_exp2(fmaf(mr0, scale_log2, -mc0));"
    assert line in src
    bad = check(src.replace(line, line.replace("alpha0 =", "const float alpha0 ="), 1))
    assert "update_alpha_f" in bad["printed_source"], bad
    # the S wait of the loop printed as wait_group 0 ... and as 2
    w = "      lg_wgmma_wait<1>();"
    assert w in src
    for n in ("0", "2"):
        bad = check(src.replace(w, w.replace("<1>", f"<{n}>"), 1))
        assert "printed_source" in bad, (n, bad)
    # the deferred release's condition
    cond = "      if (j > 1) {"
    assert cond in src
    bad = check(src.replace(cond, "      if (j > 0) {", 1))
    assert "printed_source" in bad, bad


# ---- what the registers need: the write-only S and the pins before the fence ------------

@pytest.mark.parametrize("name", list(CONFIGS) + list(PP_CONFIGS))
def test_nvrtc_compiles_the_printed_kernels_without_spills(name):
    """The consumers under setmaxnreg 240: no spills, no serialised wgmma (bn 192 spilled with
    an in-out S accumulator; the deferred wait spilled with O's rescale sunk below the issue;
    bn 192 with ping-pong spilled 72 bytes of hoisted Q descriptors before they were pinned)."""
    import re
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    k = build_ws_ir({**CONFIGS, **PP_CONFIGS}[name])
    m = compile_cuda(emit_cuda_attention(k), "sm_90a", name=f"{k.name}.cu", backend="nvrtc",
                     options=("--ptxas-options=-v",), use_cache=False)
    assert m.kernels == (k.name,)
    assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log
    assert re.search(r"Used \d+ registers", m.log), m.log


def test_write_only_is_the_scale_d_0_form():
    from kernels.ir.nvidia_wgmma import WgmmaMma
    k = build_ws_ir(CONFIGS["128x128 s3 (short)"])
    first = next(s for s in _walk(k) if isinstance(s, WgmmaMma) and not s.accumulate)
    assert first.write_only
    with pytest.raises(ValueError, match="scale-d 0"):
        dataclasses.replace(first, accumulate=True)
    assert all(not s.write_only for s in _walk(k) if isinstance(s, WgmmaMma) and s.accumulate)


def _walk(k):
    from kernels.ir.core import walk
    return list(walk(k.body))


def _pin_after_issue(frag):
    """A fence pinning ``frag`` right after the loop's issue (P V in flight on O and P)."""
    from kernels.ir.nvidia_wgmma import WgmmaCommit, WgmmaFence

    def plant(k):
        def f(b):
            i = max(i for i, s in enumerate(b) if isinstance(s, WgmmaCommit))
            return b[:i + 1] + [WgmmaFence((frag,))] + b[i + 1:]
        _edit_loops(k, f)
    return plant


@pytest.mark.parametrize("frag,check,msg", [
    ("o_acc", "lane_accumulator_writeback", "pins o_acc while a wgmma writing it is in flight"),
    ("pa", "lane_mfma_operands", "overwrites A registers pa")])
def test_a_pin_of_registers_in_flight_is_refused(frag, check, msg):
    k = build_ws_ir(CONFIGS["128x128 s3 (short)"])
    _pin_after_issue(frag)(k)
    r = verify_ws_attention(k, schedules=("lazy",))
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad and msg in bad[check], bad


def test_planted_text_bugs_of_the_register_forms_are_refused():
    src, check = _printed("128x192 s2 (B8 H32 S8K)")
    fn = "lg_wgmma_m64n192_bf16_t0"
    call = f"{fn}_wo(&sc[0], "
    assert call in src and f"{fn}(&sc[0], " in src
    # the write-only wrapper defined with an in-out accumulator
    i = src.index(f"LG_DEV void {fn}_wo(")
    j = src.index("}\n", i)
    bad = check(src[:i] + src[i:j].replace('"=f"', '"+f"') + src[j:])
    assert "write-only D" in bad["declarations"], bad
    # the scale-d 0 step calling the in-out wrapper; the write-only one accumulating
    bad = check(src.replace(call, f"{fn}(&sc[0], ", 1))
    assert "printed_source" in bad, bad
    k0 = src.index(call)
    end = src.index(");", k0)
    bad = check(src[:end - 1] + "1" + src[end:])
    assert "printed_source" in bad, bad
    # a pin before the fence dropped
    pins = "      lg_pin(o_acc);\n      lg_pin(pa);\n      lg_wgmma_fence();\n"
    assert pins in src
    bad = check(src.replace(pins, "      lg_pin(pa);\n      lg_wgmma_fence();\n", 1))
    assert "printed_source" in bad, bad


def test_the_serial_schedule_calls_the_same_hooks():
    """The serial kernel (kernels/nvidia/wgmma_ws_ir_serial.py) wraps its S and P V issues in
    the same hooks; its P V's ``last`` is the condition of the final block."""
    from kernels.ir.core import Comment
    from kernels.nvidia import wgmma_ws_ir_serial as serial

    class Marked(serial.WsSerialBuilder):
        def turn_begin(self):
            return [Comment("turn begin")]

        def turn_end(self, last=sympy.false):
            return [Comment(f"turn end last={last}")]
    ws = WsFlashConfig(dtype="bf16", head_dim=128, bn=128, stages=2, pingpong=False,
                       loader="tma")
    text = emit_cuda_attention(Marked(ws).build_ws())
    assert text.count("// turn begin") == 4            # S and P V in each of the two loops
    assert text.count("// turn end last=False") == 2
    assert text.count("// turn end last=Eq(j, n_blocks - 1)") == 2


# ---- Q's descriptors recomputed at each issue at bn 192 (lg_gmma_desc_u32_pin) -------------

def test_only_the_192_key_tile_pins_q_descriptors():
    """bn 192 prints Q's descriptors pinned (held, they spilled with ping-pong); bn 128 holds
    them (no spill there; the recompute would cost 25 instructions per key block)."""
    for name, cfg in {**CONFIGS, **PP_CONFIGS}.items():
        k = build_ws_ir(cfg)
        src = emit_cuda_attention(k)
        if cfg.bn == 192:
            assert k.meta["pinned_desc_bases"] == ("sQ",), name
            assert "lg_gmma_desc_u32_pin(0x4000004000010000ull, sQ_u32, " in src
            assert "lg_gmma_desc_u32(0x4000004000010000ull, sQ_u32, " not in src
            assert "lg_gmma_desc_u32_pin(0x4000004000010000ull, sK_u32" not in src
        else:
            assert "pinned_desc_bases" not in k.meta and "lg_gmma_desc_u32_pin" not in src


def test_planted_text_bugs_of_the_pinned_descriptors_are_refused():
    from kernels.nvidia.wgmma_prelude import GMMA_DESC_U32_PIN
    src, check = _printed("128x192 s2 (B8 H32 S8K)")
    assert src.count(GMMA_DESC_U32_PIN) == 1
    # the pinned helper computing another address (a 32-byte start step)
    bad = check(src.replace(GMMA_DESC_U32_PIN, GMMA_DESC_U32_PIN.replace(
        "(lg_u32)start >> 3", "(lg_u32)start >> 4"), 1))
    assert "lg_gmma_desc_u32_pin" in bad["declarations"], bad
    # ... or missing (the calls then name an undefined helper)
    bad = check(src.replace(GMMA_DESC_U32_PIN, "", 1))
    assert "declarations" in bad, bad
    # a pinned Q descriptor reading K's array, or the next k step of Q
    call = "lg_gmma_desc_u32_pin(0x4000004000010000ull, sQ_u32, 4096*wg - 4080)"
    assert call in src
    bad = check(src.replace(call, call.replace("sQ_u32", "sK_u32"), 1))
    assert "printed_source" in bad or "emitted_index_math" in bad, bad
    bad = check(src.replace(call, call.replace("4080", "4064"), 1))
    assert bad, bad


def test_the_printer_refuses_pinned_descriptors_without_32_bit_bases():
    from kernels.printer.cuda import CudaPrinter
    k = build_ws_ir(CONFIGS["128x192 s2 (B8 H32 S8K)"])
    p = CudaPrinter.__new__(CudaPrinter)
    p.k, p.tma, p.u32_shared = k, False, False
    with pytest.raises(ValueError, match="pinned descriptors of \\['sQ'\\] need the 32-bit"):
        p.pinned_descs()
