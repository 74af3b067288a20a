"""Ping-pong waves for the gfx942 flash-attention prefill (``AttnConfig(pingpong=True)``).

A work-group of 8 waves owns 256 query rows (32 per wave, the layouts of
:mod:`.attention_plan`).  Every wave runs the same program, alternating two phases per KV tile
``j``, with a barrier after each:

* **MFMA phase** ``A(j)`` under ``s_setprio(1)``: store the K tile ``j+1`` and the V^T tile ``j``
  from registers into their LDS stages; ``O^T += V^T_{j-1} P^T_{j-1}``; ``S^T_j = K_j Q^T``;
* **softmax phase** ``B(j)``: issue the global loads of K ``j+2`` and V ``j+1``; mask, row max,
  ``P_j = exp2(S c - m c)`` (rounded for the next MFMA phase), ``O *= alpha``.

The waves 4..7 (group ``pong``) pass one barrier more before the loops and the waves 0..3
(``ping``) one more after them (:func:`kernels.ir.core.group_barrier`), so pong runs a phase
behind ping: while ping runs ``A(j)`` on the matrix pipe, pong runs ``B(j-1)`` on the VALU,
then they swap at the barrier.  K and V^T are double-buffered; tile ``t`` lives in stage
``t % 2`` of both.  The stores sit in the MFMA phase because that is the one position whose
two instants (ping's and, a phase later, pong's) both lie after the last read of the stage's
old tile and before the first read of the new one (docs/VERIFY.md, "Role-specialised waves",
has the windows); the verifier's ``lds_phase_races`` proves it per wave, per element.

LDS: 2 stages x (K + V^T) x 64 keys x 128 dims x 2 bytes = 64 KiB, one work-group per CU: 8 waves,
two per SIMD, within the 256-register budget of ``waves_per_eu=2``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List

import sympy

from ..ir.attention import ExpScores, Rescale, RowMax, SoftmaxUpdate
from ..ir.core import Barrier, Comment, If, Loop, SetPrio, group_barrier, sym
from .attention_plan import AttnConfig, AttnPlan, plan_attention
from .flash_attention import AttnBuilder, BuiltAttention, attention_family, built_attention
from .driver import build_program

__all__ = ["PingPongBuilder", "build_attention_pingpong", "build_pingpong_ir", "WAVE_ROLES"]

WAVE_ROLES = ("ping", "pong")


class PingPongBuilder(AttnBuilder):
    """The prefill IR in the ping-pong schedule (the plan must have ``cfg.pingpong``)."""

    def __init__(self, plan: AttnPlan) -> None:
        super().__init__(plan)
        self.name += "_pp"
        self.half = 64 * plan.cfg.waves // 2        # first thread of group pong

    def pv_of(self, j: Any) -> List[Any]:
        return [SetPrio(1)] + self.pv(sympy.Mod(j, 2)) + [SetPrio(0)]

    def mfma_phase(self) -> List[Any]:
        """A(j): K_{j+1} and V_j into LDS, O += P_{j-1} V_{j-1}, S_j = K_j Q^T."""
        j, n = sym("kt"), sym("n_end")
        return [Comment("MFMA phase A(kt): K tile kt+1 and V tile kt -> LDS; O^T += V^T P^T of "
                        "tile kt-1; S^T = K Q^T of tile kt"),
                If(j + 1 < n, self.store_tile("K", sympy.Mod(j + 1, 2))),
                *self.store_tile("V", sympy.Mod(j, 2)),
                If(j >= 1, self.pv_of(j + 1)),
                SetPrio(1), *self.qk(sympy.Mod(j, 2)), SetPrio(0),
                Barrier()]

    def softmax_phase(self, masked: bool) -> List[Any]:
        """B(j): global loads of K_{j+2} and V_{j+1}; the softmax of S_j; O *= alpha."""
        j, n = sym("kt"), sym("n_end")
        out: List[Any] = [Comment("softmax phase B(kt): prefetch K tile kt+2 and V tile kt+1; "
                                  "P = exp2(S c - m c); O *= alpha"),
                          If(j + 2 < n, self.load_tile("K", j + 2)),
                          If(j + 1 < n, self.load_tile("V", j + 1))]
        if masked:
            out += self.mask(j)
        k = self.s_fr.count
        out += [RowMax("mt", self.s_fr, tuple(range(k))),
                self.xor32("mt", "max"),
                SoftmaxUpdate("m_run", "mt", "alpha", "mc"),
                ExpScores(self.p_fr, tuple(range(k)), self.s_fr, tuple(range(k)), "mc", "l_run",
                          "alpha", self.c.p_rounding),
                Rescale(self.o_fr, tuple(range(self.o_fr.count)), "alpha"),
                Barrier()]
        return out

    def build(self) -> Any:
        k = super().build()
        hoisted = len(self.hoist)
        n = sym("n_end")
        pong = sym("tid") >= self.half
        # keep the block lets, bases, Q load and softmax state of the default form; replace
        # its prologue, loops and final phase
        first = next(i for i, s in enumerate(k.body) if isinstance(s, If)
                     and any(isinstance(x, Comment) and "prologue" in x.text for x in s.body))
        ep = next(i for i, s in enumerate(k.body) if isinstance(s, Comment)
                  and s.text.startswith("the thread index recomputed"))
        body = k.body[:first] + [
            If(n > 0, [Comment("prologue: K tile 0 -> LDS stage 0; K tile 1 and V tile 0 -> "
                               "registers")]
               + self.load_tile("K", 0) + self.store_tile("K", 0)
               + [If(n > 1, self.load_tile("K", 1))] + self.load_tile("V", 0)),
            Barrier(),
            Comment("group pong (waves 4..7) one phase behind group ping"),
            group_barrier(pong),
            Comment("full tiles (no mask), then the boundary tiles (masked)"),
            Loop("kt", 0, sym("n_full"), self.mfma_phase() + self.softmax_phase(False)),
            Loop("kt", sym("n_full"), n, self.mfma_phase() + self.softmax_phase(True)),
            Comment("final MFMA phase: O^T += V^T P^T of the last tile (a one-trip loop: the "
                    "stage is a loop index, as in the loops, not a function of the block)"),
            Loop("kt", n, n + 1, [If(n > 0, self.pv_of(sym("kt") + 1))]),
            Barrier(),
            Comment("group ping passes its extra barrier: every wave the same count (and the "
                    "normalisation is a phase of its own for both groups)"),
            group_barrier(sympy.Not(pong)),
        ] + k.body[ep:]
        if len(self.hoist) != hoisted:
            raise AssertionError("ping-pong: an LDS access needs a swizzled base the default "
                                 "form did not hoist")
        k.body = body
        k.name = self.name
        k.spec = dataclasses.replace(k.spec, name=self.name, wave_roles=WAVE_ROLES)
        k.header = [h.replace(f"{self.c.waves} waves x 32 query rows",
                              f"{self.c.waves} waves x 32 query rows in two groups (ping-pong)")
                    for h in k.header]
        return k


def build_pingpong_ir(cfg: AttnConfig) -> Any:
    return PingPongBuilder(plan_attention(cfg)).build()


def build_attention_pingpong(cfg: AttnConfig, *, verify: bool = True) -> BuiltAttention:
    """Plan, build the ping-pong IR, verify it (the wave-role rules included), emit HIP."""
    family = attention_family(lambda plan: PingPongBuilder(plan).build(), plan=plan_attention)
    return build_program([family], cfg, lambda sts: built_attention(sts[0]), verify=verify)

