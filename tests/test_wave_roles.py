"""The wave-role rules (kernels.verify.wave_phases) on a ping-pong schedule skeleton, and the
planted bugs each rule must refuse (issue 16 item 2).

The skeleton is the schedule the gfx942 ping-pong prefill is designed around (docs/VERIFY.md,
"Role-specialised waves"): 8 waves in two groups, group pong one barrier behind group ping;
per KV tile ``j`` an MFMA phase (store K_{j+1} and V_j into their LDS stages, O += P_{j-1}
V_{j-1}, S_j = K_j Q^T, under s_setprio(1)) and a softmax phase; K and V double-buffered.  Its
LDS accesses read another wave's elements, so every cross-wave ordering the schedule relies on
is exercised.  Each mutation is one planted bug (a dropped barrier, a swapped role, a store
moved into the other phase, a wrong row, a missing s_setprio) and must be refused by its NAMED
check with a counterexample that says where.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import numpy as np
import pytest
import sympy

from kernels.ir import Access, Barrier, If, Kernel, Let, Loop, Mfma, Param, SetPrio, Shared
from kernels.ir.attention import AttnKernel, RowMax
from kernels.ir.core import Frag, sym, walk
from kernels.verify.gate_common import Fail
from kernels.verify.rules import RULES, checks_for
from kernels.verify.spec import Dim, KernelSpec, SpecError, TensorSpec
from kernels.verify.wave_phases import WAVE_CHECKS, check_wave_roles, wave_groups

T, W, N = 512, 8, 512          # threads, waves, LDS elements per stage

_REG = Frag("r", "f32", 4, 1)


def _lds(kind: str, buf: str, stage: Any, shift: int, tag: str) -> Access:
    # thread t touches element (t + shift) % T of the stage: shift 64 reads the next wave's
    off = stage * N + sympy.Mod(sym("tid") + shift, T)
    return Access(kind, "lds", buf, off, 1, _REG.regs([0]), tag=tag)


def _mfma(tag: str) -> Mfma:
    return Mfma(None, _REG.regs([1]), _REG.regs([0]), _REG.regs([2]), tag=tag)


def skeleton(mutate: str = "") -> Kernel:
    """The ping-pong schedule over ``n`` KV tiles (runtime symbol), optionally with one bug."""
    j, n = sym("j"), sym("n")
    wave = sympy.floor(sym("tid") / 64)
    pong = sym("tid") >= 256            # waves 4..7 (sympy folds floor(tid/64) >= 4 to a ratio)
    a_phase: List[Any] = [SetPrio(1)]
    store_k = If(j + 1 < n, [_lds("store", "sK", sympy.Mod(j + 1, 2), 0, "K.store")])
    store_v = _lds("store", "sV", sympy.Mod(j, 2), 0, "V.store")
    if mutate != "store_in_softmax":
        a_phase += [store_k, store_v]
    a_phase += [If(j >= 1, [_lds("load", "sV", sympy.Mod(j + 1, 2), 64, "V.frag"),
                            _mfma("pv")]),
                _lds("load", "sK", sympy.Mod(j, 2), 64, "K.frag"), _mfma("qk"),
                SetPrio(0)]
    b_phase: List[Any] = [RowMax("mt", _REG, (1,))]
    if mutate == "store_in_softmax":
        b_phase += [store_k, store_v]
    if mutate == "mixed_phase":
        a_phase.append(RowMax("mt", _REG, (1,)))     # after s_setprio(0), before the barrier
    if mutate == "no_setprio":
        a_phase = [s for s in a_phase if not isinstance(s, SetPrio)]
    loop = a_phase + [Barrier()] + b_phase + ([] if mutate == "drop_loop_barrier" else
                                              [Barrier()])
    lead = [] if mutate == "no_stagger" else [If(pong, [Barrier()])]
    tail = [] if mutate in ("no_stagger", "unbalanced") else [If(sympy.Not(pong), [Barrier()])]
    if mutate == "lane_divergent":
        lead = [If(sympy.Mod(sym("tid"), 64) < 32, [Barrier()])]
        tail = [If(sympy.Mod(sym("tid"), 64) >= 32, [Barrier()])]
    q_row = sym("tid")
    o_row = sympy.Mod(sym("tid") + 64, T) if mutate == "wrong_rows" else sym("tid")
    body: List[Any] = [
        Let("w", wave),
        Access("load", "global", "Q", q_row, 1, _REG.regs([2]), tag="Q.load", coords=((q_row, 0),)),
        If(n > 0, [_lds("store", "sK", 0, 0, "K.store")]),
        Barrier()] + lead + [
        Loop("j", 0, n, loop),
        SetPrio(1), If(n > 0, [_lds("load", "sV", sympy.Mod(n + 1, 2), 64, "V.frag"),
                               _mfma("pv")]), SetPrio(0)] + tail + [
        Access("store", "global", "O", o_row, 1, _REG.regs([1]), tag="O.store",
               coords=((o_row, 0),))]
    if mutate == "swap_role":
        # group pong runs its MFMAs a phase early: both groups on the matrix pipe at once
        body.remove(lead[0]) if lead else None
    k = Kernel("pingpong_skeleton", [Param("Q", "f32"), Param("O", "f32", const=False)],
               [Shared("sK", "f32", 2 * N), Shared("sV", "f32", 2 * N)], [_REG], body, T,
               (1, 1, 1), grid_symbols=("bx",))
    return k


def spec(roles=("ping", "pong")) -> KernelSpec:
    return KernelSpec("pingpong_skeleton", (Dim("s"), Dim("d")),
                      (TensorSpec("Q", ("s", "d"), "input", "f32"),
                       TensorSpec("O", ("s", "d"), "output", "f32")), wave_roles=roles)


def run(k: Kernel, tiles=(0, 1, 2, 5)) -> Dict[str, Any]:
    f = Fail()
    doms = check_wave_roles(k, spec(), [(f"n={t}", {"n": t}, [(0,)]) for t in tiles], f,
                            query="Q", out="O")
    return {c: f.first.get(c) for c in WAVE_CHECKS} | {"_doms": doms}


def test_the_pingpong_schedule_passes_every_wave_check():
    r = run(skeleton())
    assert all(r[c] is None for c in WAVE_CHECKS), r
    # and the report says what the schedule is: ping M S M S ..., pong one phase behind
    sched = r["_doms"]["wave_role_schedule"]
    assert "ping (waves 0-3): -MSMSMSMSMSM" in sched and "pong (waves 4-7): --MSMSMSMSMSM" in \
        sched, sched


@pytest.mark.parametrize("bug, check, words", [
    ("drop_loop_barrier", "lds_phase_races", "sV["),
    ("store_in_softmax", "lds_phase_races", "no barrier between them"),
    ("no_stagger", "wave_role_schedule", "all run MFMAs at once"),
    ("swap_role", "barrier_balance", "passes"),
    ("swap_role", "wave_role_schedule", "all run MFMAs at once"),
    ("unbalanced", "barrier_balance", "wave 4"),
    ("lane_divergent", "barrier_balance", "splits the lanes"),
    ("mixed_phase", "wave_role_schedule", "mixes MFMAs and softmax"),
    ("no_setprio", "wave_role_schedule", "s_setprio(0)"),
    ("wrong_rows", "wave_row_ownership", "stores output row"),
])
def test_planted_bug_is_refused_by_its_named_check(bug, check, words):
    r = run(skeleton(bug))
    assert r[check] is not None, (bug, r)
    assert words in r[check], r[check]


def test_a_race_names_the_buffer_the_waves_and_their_phases():
    msg = run(skeleton("store_in_softmax"))["lds_phase_races"]
    assert "by wave" in msg and "in its phase" in msg and "block (0,)" in msg, msg


def test_the_read_before_overwrite_order_is_checked_against_program_order():
    # moving V's store one tile late (V_{j-1} into its stage while another wave still reads it
    # in the same phase) is a write-after-read race
    k = skeleton()
    loop = next(s for s in k.body if isinstance(s, Loop))
    st = next(s for s in loop.body if isinstance(s, Access) and s.tag == "V.store")
    st.offset = sympy.Mod(sym("j") + 1, 2) * N + sympy.Mod(sym("tid"), T)
    r = run(k)
    assert r["lds_phase_races"] is not None and "read by wave" in r["lds_phase_races"], r


def test_rules_apply_only_to_specs_with_wave_roles():
    plain = KernelSpec("x", (Dim("s"), Dim("d")), (TensorSpec("Q", ("s", "d"), "input", "f32"),
                                                    TensorSpec("O", ("s", "d"), "output", "f32")))
    assert not set(WAVE_CHECKS) & set(checks_for(plain))
    assert set(WAVE_CHECKS) <= set(checks_for(spec()))
    assert all(RULES[c].needs == frozenset({"wave_roles"}) for c in WAVE_CHECKS)


@pytest.mark.parametrize("roles, words", [(("ping",), "two or more"),
                                          (("a", "a"), "distinct"), (("a", ""), "distinct")])
def test_bad_wave_roles_are_refused_by_the_spec(roles, words):
    with pytest.raises(SpecError, match=words):
        spec(roles)


def test_groups_must_split_the_waves_evenly():
    with pytest.raises(SpecError, match="equal"):
        wave_groups(spec(("a", "b", "c")), T)
    assert [(r, list(w)) for r, w in wave_groups(spec(), T)] == [("ping", [0, 1, 2, 3]),
                                                                 ("pong", [4, 5, 6, 7])]


def test_the_verifier_runs_the_rules_for_a_prefill_kernel_that_declares_roles():
    """The one verifier with a spec naming roles: the shipped prefill kernel (every wave does
    its own MFMAs and softmax in the same phase) is refused by wave_role_schedule; its barriers
    are balanced, its rows owned, its LDS race-free under the per-wave model too."""
    import dataclasses
    from kernels.amd.flash_attention import AttnConfig, build_attention_ir
    from kernels.verify.verifier import verify
    from kernels.verify.attention_static import default_instances
    k = build_attention_ir(AttnConfig(head_dim=64, causal=True))
    sp = dataclasses.replace(k.spec, wave_roles=("ping", "pong"))
    rep = verify(k, sp, instances=default_instances(k)[:1])
    assert not rep.checks["wave_role_schedule"].holds
    cex = rep.checks["wave_role_schedule"].counterexample
    assert "runs its mfma under s_setprio(0)" in cex, cex
    for c in ("barrier_balance", "wave_row_ownership", "lds_phase_races", "online_softmax"):
        assert rep.checks[c].holds, (c, rep.checks[c].counterexample)
