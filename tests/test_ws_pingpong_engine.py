"""The consumers' ping-pong on the warp-specialised attention engine (plan piece
``engine_pingpong``): the serial warp-specialised prefill built with ``pingpong=True``
(kernels/nvidia/wgmma_ws_ir_serial.py through kernels/nvidia/ws_pingpong.py: ``bar.sync 1 +
cw, 256`` before each S and P V issue, ``bar.arrive 2 - cw, 256`` after, consumer 1 opening
with an arrive on barrier 1 and skipping its last hand-over) is verified by one engine run
(kernels/verify/attention_ring.py with kernels/verify/ring_pingpong.py: the lockstep data, the
three agents' protocol replayed beside it) and its printed text by kernels/verify/printed_ws.py.
Each planted bug is refused by the rule meant to catch it."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir.core import If, Loop, sym
from kernels.ir.nvidia_tma import NamedBarrier, RoleBranch
from kernels.ir.nvidia_wgmma import WgmmaCommit, WgmmaFence, WgmmaMma
from kernels.nvidia.ws_pingpong import CW
from kernels.nvidia.wgmma_ws_ir_serial import build_ws_serial_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import NAMED_BARRIERS, verify_ws_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.printed_ws import verify_printed_ws

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("causal", [False, True])
def test_the_pingpong_prefill_is_verified_with_its_text(causal):
    from kernels.verify.verifier import verify
    k = build_ws_serial_ir(causal, pingpong=True)
    src = emit_cuda_attention(k)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert {"printed_source", "mbarrier_protocol", "online_softmax"} <= set(r.checks)
    assert NAMED_BARRIERS is True


def test_the_pingpong_prints_the_templates_turns():
    k = build_ws_serial_ir(pingpong=True)
    src = emit_cuda_attention(k)
    assert k.name.endswith("_pp") and not build_ws_serial_ir().name.endswith("_pp")
    assert "const int cw = wg - 1;" in src
    assert src.count("lg_named_arrive(1, 256);") == 1          # consumer 1's opening
    # S and P V of the unmasked and the masked loop: 4 turns printed
    assert src.count("lg_named_bar(cw + 1, 256);") == 4
    assert src.count("lg_named_arrive(2 - cw, 256);") == 4
    assert src.count("if (cw == 0 || j != n_blocks - 1) {") == 2   # the P V hand-overs
    plain = emit_cuda_attention(build_ws_serial_ir()).split("\n")
    assert not [ln for ln in plain if ln.strip().startswith("lg_named")]


def test_the_turn_statements_are_the_templates():
    """kernels/nvidia/ws_pingpong.py spells the template's turns (kernels/nvidia/
    wgmma_attention_ws.py, pingpong=True): the same ids, counts and conditions."""
    from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, emit_ws_flash
    from kernels.nvidia.ws_pingpong import pingpong_open, pingpong_turn
    tmpl = emit_ws_flash(WsFlashConfig(head_dim=128, pingpong=True, loader="tma"))
    assert "if (cw == 1) lg_bar_arrive(1, 256);" in tmpl
    assert "lg_bar_sync(1 + cw, 256);" in tmpl
    assert "if (cw == 0 || !(true)) lg_bar_arrive(2 - cw, 256);" in tmpl
    (op,) = pingpong_open()
    assert op.cond == sympy.Eq(CW, 1) and op.body == [NamedBarrier(1, 256, arrive=True)]
    last = sympy.Symbol("last")
    sync, issue, hand = pingpong_turn(["issue"], last)
    assert sync == NamedBarrier(1 + CW, 256) and issue == "issue"
    assert hand.cond == sympy.Or(sympy.Eq(CW, 0), sympy.Not(last))
    assert hand.body == [NamedBarrier(2 - CW, 256, arrive=True)]
    assert pingpong_turn([], False)[-1] == NamedBarrier(2 - CW, 256, arrive=True)


def test_a_barrier_branch_split_within_a_warpgroup_is_refused():
    """A named barrier's branch is taken per warpgroup: a condition that splits a warpgroup
    is refused by the per-role model's uniformity rule."""
    k = build_ws_serial_ir(pingpong=True)
    c = _consumer(k)
    i = next(i for i, s in enumerate(c.body) if type(s) is If)
    c.body[i] = If(sympy.Eq(sympy.Mod(sym("tid"), 2), 0), c.body[i].body)
    r = verify_ws_attention(k, schedules=("lazy",))
    cex = r.checks["mbarrier_protocol"].counterexample
    assert "a named barrier's branch condition is not uniform over the warpgroup" in cex, cex


# ---- planted IR bugs ---------------------------------------------------------------------
def _consumer(k):
    return next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")


def _loops(k):
    return [s for s in _consumer(k).body if isinstance(s, Loop) and s.var == "j"]


def _turns(body):
    """The indices of the turns' syncs in a loop body (S first, then P V)."""
    return [i for i, s in enumerate(body) if isinstance(s, NamedBarrier) and not s.arrive]


def _map_syncs(fn):
    def plant(k):
        for lp in _loops(k):
            lp.body = [fn(s) if isinstance(s, NamedBarrier) and not s.arrive else s
                       for s in lp.body]
    return plant


def _drop_opening(k):
    c = _consumer(k)
    c.body = [s for s in c.body if not (type(s) is If and isinstance(s.body[0], NamedBarrier))]


def _open_both(k):
    """Consumer 0 opens consumer 1's first turn as well: both hold a turn at once."""
    c = _consumer(k)
    i = next(i for i, s in enumerate(c.body) if type(s) is If)
    c.body.insert(i, If(sympy.Eq(CW, 0), [NamedBarrier(2, 256, arrive=True)]))


def _drop_s_hand_over(k):
    for lp in _loops(k):
        lp.body = [s for s in lp.body if not (isinstance(s, NamedBarrier) and s.arrive)]


def _s_hand_over_first(k):
    """The S turn's bar.arrive moved up to just after its bar.sync (before the issue)."""
    for lp in _loops(k):
        b = lp.body
        i = next(i for i, s in enumerate(b) if isinstance(s, NamedBarrier) and s.arrive)
        arrive = b.pop(i)
        b.insert(_turns(b)[0] + 1, arrive)


def _pv_before_its_turn(k):
    """The P V issue (fence, wgmmas, commit) moved above its turn's bar.sync."""
    for lp in _loops(k):
        b = lp.body
        i = _turns(b)[1]
        j = next(j for j in range(i, len(b)) if isinstance(b[j], WgmmaCommit))
        assert isinstance(b[i + 1], WgmmaFence) and isinstance(b[i + 2], WgmmaMma)
        lp.body = b[:i] + b[i + 1:j + 1] + [b[i]] + b[j + 1:]


def _last_hand_over_kept(k):
    for lp in _loops(k):
        lp.body = [s.body[0] if type(s) is If and isinstance(s.body[0], NamedBarrier) else s
                   for s in lp.body]


BUGS = [
    ("sync on the other consumer's barrier (2 - cw)",
     _map_syncs(lambda s: NamedBarrier(2 - CW, s.threads)), "mbarrier_protocol",
     "arrives twice in phase 0"),
    ("sync counts 384 threads (the block)", _map_syncs(lambda s: NamedBarrier(s.id, 384)),
     "mbarrier_protocol", "counts 256 threads elsewhere"),
    ("sync counts 128 threads (a warpgroup's own barrier)",
     _map_syncs(lambda s: NamedBarrier(s.id, 128)), "mbarrier_protocol",
     "also a barrier across warpgroups"),
    ("consumer 1's opening arrive dropped", _drop_opening, "mbarrier_protocol",
     "deadlock: "),
    ("the S turn's sync without its arrive", _drop_s_hand_over, "mbarrier_protocol",
     "deadlock: "),
    ("the S turn's arrive before its GEMM issue", _s_hand_over_first, "mbarrier_protocol",
     "wgmma S(k0) is issued outside the warpgroup's ping-pong turn"),
    ("P V issued before its turn", _pv_before_its_turn, "mbarrier_protocol",
     "wgmma O(k0) is issued outside the warpgroup's ping-pong turn"),
    ("both consumers opened (their turns overlap)", _open_both, "mbarrier_protocol",
     "still holds its own"),
    ("consumer 1's last hand-over kept", _last_hand_over_kept, "mbarrier_protocol",
     "<named barrier>[1] ends part-way"),
]


@pytest.mark.parametrize("name,plant,check,msg", BUGS, ids=[b[0] for b in BUGS])
def test_planted_pingpong_bugs_are_refused(name, plant, check, msg):
    k = build_ws_serial_ir(pingpong=True)
    plant(k)
    # the replay does not depend on the ring schedule (it runs in the first one only)
    r = verify_ws_attention(k, schedules=("lazy",))
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, (name, bad)
    assert "ping-pong replay" in bad[check] and msg in bad[check], (name, bad[check])


# ---- planted text bugs -------------------------------------------------------------------
TEXT_BUGS = [
    ("opening on consumer 0", "if (cw == 1) {", "if (cw == 0) {", "printed 1, IR 0"),
    ("sync id", "lg_named_bar(cw + 1, 256);", "lg_named_bar(cw + 2, 256);", "'cw + 2'"),
    ("sync thread count", "lg_named_bar(cw + 1, 256);", "lg_named_bar(cw + 1, 128);",
     "NamedBarrier"),
    ("hand-over id", "lg_named_arrive(2 - cw, 256);", "lg_named_arrive(1 - cw, 256);",
     "'1 - cw'"),
    ("last hand-over on consumer 0", "if (cw == 0 || j != n_blocks - 1) {",
     "if (cw == 1 || j != n_blocks - 1) {", "printed 0, IR 1"),
    ("consumer index", "const int cw = wg - 1;", "const int cw = wg - 2;", "printed -2"),
    ("a hand-over dropped", "      lg_named_arrive(2 - cw, 256);\n", "",
     "4 printed named barrier arrive lines; the IR has 5"),
    ("the opening printed as a sync", "lg_named_arrive(1, 256);", "lg_named_bar(1, 256);",
     "5 printed named barrier sync lines; the IR has 4"),
]


@pytest.mark.parametrize("name,old,new,msg", TEXT_BUGS, ids=[b[0] for b in TEXT_BUGS])
def test_planted_pingpong_text_bugs_are_refused(name, old, new, msg):
    k = build_ws_serial_ir(pingpong=True)
    src = emit_cuda_attention(k)
    assert old in src, name
    r = verify_printed_ws(k, src.replace(old, new, 1), instances=default_instances(k)[:1])
    cex = r["printed_source"].counterexample
    assert not r["printed_source"].holds and msg in cex, (name, cex)
