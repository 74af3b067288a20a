"""Role-specialised waves (ping-pong): a per-wave phase model of a kernel's IR.

A ping-pong kernel runs the same program on every wave, but its wave groups are offset by
barriers that only some waves execute (``if (wave >= 4) __syncthreads();`` before the loop, the
other group's after it): while one group runs its MFMA phase the other runs its softmax phase,
and they swap at every ``s_barrier``.  The lockstep engines (every thread executes the same
statement at the same time) cannot see that offset, so this pass re-runs the IR **per wave**:

* each wave counts the barriers it has passed (its *phase*); ``s_barrier`` makes the k-th barrier
  of every wave one instant, so phase ``e`` of every wave is one interval of time, whatever
  statement each wave is at;
* a branch may depend on the wave (a wave-uniform condition) but not on the lane.

The spec's ``wave_roles`` names the groups (``("ping", "pong")``: waves ``0 .. W/2-1`` and
``W/2 .. W-1``).  Checks (rules of :data:`kernels.verify.rules.RULES` with ``needs=("wave_roles",)``):

``barrier_balance``
    every wave passes the same number of barriers on every block of every instance (an
    unbalanced count deadlocks the work-group or silently lets a wave run a phase early), and no
    barrier sits under a lane-divergent branch;
``wave_role_schedule``
    every phase of every wave is one role: it issues MFMAs (``mfma``) or softmax statements
    (``softmax``: mask, row max, exchanges, exponentials, rescale, normalise), never both; the
    waves of a group play the same role in every phase; no two groups are in their MFMA role in
    the same phase (the ping-pong: one group owns the matrix pipe while the other does its
    softmax); MFMAs issue under ``s_setprio`` >= 1 and the softmax under priority 0;
``wave_row_ownership``
    each wave stores exactly the output rows whose queries it loaded, and no two waves load the
    same query rows: every row's softmax (per-thread state, checked by ``online_softmax``) runs
    on the wave that owns the row's S and O;
``lds_phase_races``
    every pair of accesses to one LDS element by different waves, at least one a write, lies in
    different phases, and the earlier phase is the earlier statement in program order: a write
    reaches its readers after a barrier, a read ends before the next overwrite, and the lockstep
    engines' element identities (program order) are the ones the staggered waves really see.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.attention import (ExpScores, FinalNormalize, LaneXor, LetMinMax, MaskScores, Rescale,
                            RowMax, SoftmaxUpdate)
from ..ir.core import Access, Barrier, If, Let, Loop, Mfma, SetPrio, c_eval, sym, walk
from .gate_common import Fail, leaves
from .spec import KernelSpec, SpecError

__all__ = ["WAVE_CHECKS", "WAVE_SIZE", "WavePhases", "check_wave_roles", "wave_groups"]

WAVE_SIZE = 64
WAVE_CHECKS = ("barrier_balance", "wave_role_schedule", "wave_row_ownership", "lds_phase_races")
_SOFTMAX = (MaskScores, RowMax, LaneXor, SoftmaxUpdate, ExpScores, Rescale, FinalNormalize)


def wave_groups(spec: KernelSpec, threads: int) -> List[Tuple[str, range]]:
    """``[(role, waves)]``: the spec's ``wave_roles`` as equal runs of consecutive waves."""
    roles = spec.wave_roles
    if not roles:
        raise SpecError(f"spec {spec.name}: no wave_roles; the wave-role checks need the names of "
                        "the wave groups (e.g. ('ping', 'pong'))")
    if threads % WAVE_SIZE:
        raise SpecError(f"spec {spec.name}: {threads} threads are not whole {WAVE_SIZE}-lane "
                        "waves")
    W = threads // WAVE_SIZE
    if W % len(roles):
        raise SpecError(f"spec {spec.name}: {W} waves do not split into {len(roles)} equal "
                        f"groups for the roles {roles}")
    n = W // len(roles)
    return [(r, range(g * n, (g + 1) * n)) for g, r in enumerate(roles)]


class WavePhases:
    """One block of one launch, per wave: phases, roles, priorities, rows and LDS accesses."""

    def __init__(self, k: Any, spec: KernelSpec, values: Dict[str, int],
                 block: Tuple[int, ...], f: Fail, where: str = "",
                 query: Optional[str] = None, out: Optional[str] = None) -> None:
        self.k, self.spec, self.f, self.block = k, spec, f, block
        self.T = k.block
        self.W = self.T // WAVE_SIZE
        self.groups = wave_groups(spec, self.T)
        self.group_of = np.repeat(np.arange(len(self.groups)), self.W // len(self.groups))
        self.where = where
        self.values = values
        self.query, self.out = query, out
        self.phase = np.zeros(self.W, np.int64)
        self.prio = np.zeros(self.W, np.int64)
        self.roles: Dict[Tuple[int, int], set] = {}          # (wave, phase) -> roles played
        self.rows_in = [set() for _ in range(self.W)]         # query rows each wave loads
        self.rows_out = [set() for _ in range(self.W)]        # output rows each wave stores
        self.lds: Dict[str, Dict[str, np.ndarray]] = {}
        for s in k.shared:
            self.lds[s.name] = {"w_wave": np.full(s.count, -1), "w_ph": np.full(s.count, -1),
                                "r_ph": np.full((s.count, self.W), -1)}

    # ---- driver ----------------------------------------------------------------------------
    def fail(self, check: str, msg: str) -> None:
        self.f.add(check, f"{msg} (block {self.block}{', ' + self.where if self.where else ''})")

    def run(self) -> None:
        env: Dict[Any, Any] = {(sym(n) if isinstance(n, str) else n): v
                               for n, v in self.values.items()}
        env[sym("tid")] = np.arange(self.T)
        for name, b in zip(self.k.grid_symbols, self.block):
            env[sym(name)] = b
        self.stmts(self.k.body, env, np.ones(self.T, bool), "")
        done = self.phase
        if not (done == done[0]).all():
            w = int(np.argmax(done != done[0]))
            self.fail("barrier_balance", f"wave 0 passes {int(done[0])} barriers, wave {w} "
                                         f"{int(done[w])}: the work-group deadlocks or a wave "
                                         "runs ahead of its partners")

    def stmts(self, body: Sequence[Any], env: Dict[Any, Any], on: np.ndarray, at: str) -> None:
        for s in body:
            if isinstance(s, (Let, LetMinMax)):
                if isinstance(s, LetMinMax):
                    a, b = np.asarray(c_eval(s.a, env)), np.asarray(c_eval(s.b, env))
                    env[sym(s.name)] = np.minimum(a, b) if s.op == "min" else np.maximum(a, b)
                else:
                    env[sym(s.name)] = c_eval(s.expr, env)
            elif isinstance(s, Loop):
                lo, hi = int(np.min(c_eval(s.start, env))), int(np.max(c_eval(s.stop, env)))
                for i in range(lo, hi):
                    inner = dict(env)
                    inner[sym(s.var)] = i
                    self.stmts(s.body, inner, on, f"{at}{s.var}={i} ")
            elif isinstance(s, If):
                self.branch(s, env, on, at)
            elif isinstance(s, Barrier):
                self.phase[self.waves(on)] += 1
            elif isinstance(s, SetPrio):
                self.prio[self.waves(on)] = s.prio
            elif isinstance(s, Mfma):
                self.play(on, "mfma", at)
            elif isinstance(s, _SOFTMAX):
                self.play(on, "softmax", at)
            elif isinstance(s, Access):
                self.access(s, env, on, at)

    def waves(self, on: np.ndarray) -> np.ndarray:
        return np.nonzero(on.reshape(self.W, WAVE_SIZE).any(axis=1))[0]

    def branch(self, s: If, env: Dict[Any, Any], on: np.ndarray, at: str) -> None:
        c = np.broadcast_to(np.asarray(c_eval(s.cond, env), bool), (self.T,)) & on
        per_wave = c.reshape(self.W, WAVE_SIZE)
        live = on.reshape(self.W, WAVE_SIZE)
        split = [w for w in range(self.W) if live[w].any()
                 and not (per_wave[w][live[w]] == per_wave[w][live[w]][0]).all()]
        if split and any(isinstance(x, Barrier) for x in walk(s.body)):
            self.fail("barrier_balance", f"{at}if ({s.cond}) splits the lanes of wave "
                                         f"{split[0]} around a barrier")
        if c.any():
            self.stmts(s.body, dict(env), c, at)

    # ---- roles -----------------------------------------------------------------------------
    def play(self, on: np.ndarray, role: str, at: str) -> None:
        for w in self.waves(on):
            w = int(w)
            self.roles.setdefault((w, int(self.phase[w])), set()).add(role)
            want_hi = role == "mfma"
            if (self.prio[w] >= 1) != want_hi:
                self.fail("wave_role_schedule",
                          f"{at}wave {w} (group {self.groups[self.group_of[w]][0]}) runs its "
                          f"{role} under s_setprio({int(self.prio[w])}); MFMA runs need "
                          "priority >= 1 and the softmax priority 0")

    def check_roles(self) -> None:
        phases = sorted({p for (_, p) in self.roles})
        for (w, p), rs in sorted(self.roles.items()):
            if len(rs) > 1:
                self.fail("wave_role_schedule", f"wave {w} mixes MFMAs and softmax in phase {p} "
                                                "(between two of its barriers): its role is not "
                                                "specialised")
                return
        for p in phases:
            mfma_groups = []
            for g, (name, ws) in enumerate(self.groups):
                got = [frozenset(self.roles.get((w, p), ())) for w in ws]
                if len(set(got)) > 1:
                    self.fail("wave_role_schedule", f"phase {p}: the waves of group {name} play "
                                                    f"different roles {[sorted(x) for x in got]}")
                    return
                if "mfma" in got[0]:
                    mfma_groups.append(name)
            if len(mfma_groups) > 1:
                self.fail("wave_role_schedule", f"phase {p}: groups {mfma_groups} all run MFMAs "
                                                "at once: the groups do not take turns on the "
                                                "matrix pipe")
                return

    def schedule(self) -> str:
        """Each group's roles phase by phase, e.g. ``ping: M S M S .., pong: - M S M ..``."""
        out = []
        last = max([p for (_, p) in self.roles] + [0])
        for name, ws in self.groups:
            w = ws[0]
            seq = "".join({"mfma": "M", "softmax": "S"}.get(next(iter(self.roles[(w, p)])), "?")
                          if len(self.roles.get((w, p), ())) == 1 else "-"
                          for p in range(last + 1))
            out.append(f"{name} (waves {ws.start}-{ws.stop - 1}): {seq}")
        return "; ".join(out)

    # ---- memory ----------------------------------------------------------------------------
    def access(self, a: Access, env: Dict[Any, Any], on: np.ndarray, at: str) -> None:
        T = self.T
        pred = np.broadcast_to(np.asarray(True if a.pred is None else c_eval(a.pred, env), bool),
                               (T,)) & on
        if a.space == "global":
            if a.buf in (self.query, self.out) and a.coords:
                rows = np.broadcast_to(np.asarray(c_eval(leaves(a.coords[0])[0], env),
                                                  np.int64), (T,))
                dst = self.rows_in if a.buf == self.query else self.rows_out
                for w in range(self.W):
                    sel = pred[w * WAVE_SIZE:(w + 1) * WAVE_SIZE]
                    dst[w].update(rows[w * WAVE_SIZE:(w + 1) * WAVE_SIZE][sel].tolist())
            return
        if a.buf not in self.lds:
            return
        st = self.lds[a.buf]
        off = np.broadcast_to(np.asarray(c_eval(a.offset, env), np.int64), (T,))
        th = np.nonzero(pred)[0]
        wave = th // WAVE_SIZE
        ph = self.phase[wave]
        n = st["w_ph"].shape[0]
        for j in range(a.width):
            addr = off[th] + j
            ok = (addr >= 0) & (addr < n)        # outside: in_bounds reports it
            addr, wv, p = addr[ok], wave[ok], ph[ok]
            if addr.size == 0:
                continue
            if a.kind == "store":
                self.store(a, st, addr, wv, p, at)
            else:
                self.load(a, st, addr, wv, p, at)

    def store(self, a: Access, st, addr, wv, p, at: str) -> None:
        ww, wp, rp = st["w_wave"][addr], st["w_ph"][addr], st["r_ph"][addr]
        bad = (ww >= 0) & (ww != wv) & (wp >= p)
        if bad.any():
            i = int(np.argmax(bad))
            self.race(a, at, int(addr[i]), "written", int(ww[i]), int(wp[i]), "overwritten",
                      int(wv[i]), int(p[i]))
        others = rp.copy()
        others[np.arange(addr.size), wv] = -1
        late = others.max(axis=1)
        bad = late >= p
        if bad.any():
            i = int(np.argmax(bad))
            self.race(a, at, int(addr[i]), "read", int(np.argmax(others[i])), int(late[i]),
                      "overwritten", int(wv[i]), int(p[i]))
        # two waves writing one element in one statement: both in their own phases
        order = np.argsort(addr, kind="stable")
        sa, sw, sp = addr[order], wv[order], p[order]
        dup = (sa[1:] == sa[:-1]) & (sw[1:] != sw[:-1]) & (sp[1:] == sp[:-1])
        if dup.any():
            i = int(np.argmax(dup))
            self.race(a, at, int(sa[i]), "written", int(sw[i]), int(sp[i]), "written",
                      int(sw[i + 1]), int(sp[i + 1]))
        st["w_wave"][addr], st["w_ph"][addr] = wv, p
        st["r_ph"][addr] = -1

    def load(self, a: Access, st, addr, wv, p, at: str) -> None:
        ww, wp = st["w_wave"][addr], st["w_ph"][addr]
        bad = (ww >= 0) & (ww != wv) & (wp >= p)
        if bad.any():
            i = int(np.argmax(bad))
            self.race(a, at, int(addr[i]), "written", int(ww[i]), int(wp[i]), "read",
                      int(wv[i]), int(p[i]))
        r = st["r_ph"]
        np.maximum.at(r, (addr, wv), p)

    def race(self, a: Access, at: str, addr: int, first: str, w1: int, p1: int, second: str,
             w2: int, p2: int) -> None:
        why = ("in the same phase: no barrier between them" if p1 == p2 else
               f"the program orders them the other way round (phase {p1} runs after phase {p2})")
        self.fail("lds_phase_races", f"{at}{a.tag}: {a.buf}[{addr}] {first} by wave {w1} in its "
                                     f"phase {p1}, then {second} by wave {w2} in its phase {p2}, "
                                     f"{why}")

    # ---- rows ------------------------------------------------------------------------------
    def check_rows(self) -> None:
        if self.query is None or self.out is None:
            return
        owner: Dict[int, int] = {}
        for w in range(self.W):
            for r in self.rows_in[w]:
                if r in owner:
                    self.fail("wave_row_ownership", f"query row {r} is loaded by waves "
                                                    f"{owner[r]} and {w}")
                    return
                owner[r] = w
        for w in range(self.W):
            alien = sorted(self.rows_out[w] - self.rows_in[w])
            if alien:
                r = alien[0]
                self.fail("wave_row_ownership", f"wave {w} stores output row {r}, whose query "
                                                f"(S, maxima, sums) wave {owner.get(r, 'none')} "
                                                "holds")
                return


def check_wave_roles(k: Any, spec: KernelSpec, launches: Sequence[Tuple[str, Dict[str, int],
                                                                        Sequence[Tuple[int, ...]]]],
                     f: Fail, query: Optional[str] = None,
                     out: Optional[str] = None) -> Dict[str, str]:
    """Run :class:`WavePhases` on every ``(name, symbol values, blocks)`` launch, adding
    counterexamples to ``f``; returns the domain text of each check of :data:`WAVE_CHECKS`.
    ``query`` / ``out``: the tensors whose rows each wave must own (None: no row check)."""
    sched, nb = "", 0
    for name, values, blocks in launches:
        for blk in blocks:
            ph = WavePhases(k, spec, values, tuple(blk), f, name, query, out)
            ph.run()
            ph.check_roles()
            ph.check_rows()
            sc = ph.schedule()
            sched = sc if len(sc) > len(sched) else sched
            nb += 1
    dom = (f"{nb} blocks of {len(launches)} launches, every wave, every loop iteration; wave "
           f"groups {', '.join(f'{r} (waves {w.start}-{w.stop - 1})' for r, w in wave_groups(spec, k.block))}")
    return {"barrier_balance": dom, "wave_role_schedule": f"{dom}; roles by phase: {sched}",
            "wave_row_ownership": dom + (f"; rows of {query} loaded vs {out} stored per wave"
                                         if query else "; no query/output tensor: nothing to "
                                         "own"),
            "lds_phase_races": dom + "; every element of every LDS access, per-wave phases"}
