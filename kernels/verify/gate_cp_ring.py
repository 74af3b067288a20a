"""The ``cp.async`` producer on the per-role phase model (:mod:`kernels.verify.gate_tma`): the
rules of :mod:`kernels.ir.nvidia_cp_ring` -- 128 copying threads signalling a ring stage's
``full`` mbarrier with ``cp.async.mbarrier.arrive.noinc`` -- as a mixin of the model's CTA.

* :class:`~kernels.ir.nvidia.CpAsync` in a role (every thread of the warpgroup, 16 bytes
  each): the shared elements (in bounds, two threads never writing one element in one copy)
  take the identity of the global element each thread reads -- the attention dataflow's
  :func:`~kernels.verify.attention_ids.encode_ids` of (tensor, batch x heads + head, row,
  column), zero fill kept where the load's predicate is off -- and are *pending*: no phase
  stamps them yet, so a wgmma reading one is refused (``lds_races``: the ring's "no box has
  written it" rule).  A copy overwriting an element a consumer's wgmma read, unless the
  producer has since waited on a phase that consumer arrived on after retiring the read, is a
  race (``lds_races``, the TMA box's rule).  Every element written is marked *unfenced* for
  every consumer warpgroup.
* :class:`~kernels.ir.nvidia_cp_ring.CpAsyncArrive` ``(bar, index)``: 128 arrivals on
  ``bar[index]`` (one per thread; the leader alone: 1); the warpgroup's pending copies land on
  the phase the arrivals join: they are stamped with (``bar[index]``, that phase), the rule of
  :meth:`~kernels.verify.gate_tma_data.DataRules.stamped_read` then asks the reading
  consumer to have waited on it.  More arrivals than the barrier's count in one phase (a count
  of 1 for a 128-thread producer) is the per-role model's ``mbarrier_protocol`` failure; too
  few (a count of 256) never completes the phase (a deadlock).
* :class:`~kernels.ir.nvidia_wgmma.FenceProxyAsync` by a consumer: the elements whose copies
  landed on a phase that consumer has observed become visible to its async proxy; a wgmma of
  that consumer reading an element still unfenced for it is refused (``lds_races``: written
  through the generic proxy with no ``fence.proxy.async`` after the wait that acquired it).
* At the producer's end: copies no arrival covers are refused (``mbarrier_protocol``: nothing
  ever signals them; their readers wait forever or read before they land).

:meth:`CpRingRules.copied_ids` hands the lockstep attention dataflow
(:mod:`kernels.verify.attention_ring`) the identities of the elements a copy wrote;
:func:`anchor_loads` the Q copies (their barrier and (head, batch)) its static pass takes the
thread's (batch, head) from.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from ..ir.core import c_eval, walk
from ..ir.nvidia import CpAsync
from ..ir.nvidia_cp_ring import CpAsyncArrive
from ..ir.nvidia_tma import WARPGROUP, TmaLoad
from .attention_ids import encode_ids
from .gate_common import leaves
from .gate_tma_data import Agent, Stop

__all__ = ["CpRingRules", "AnchorLoad", "anchor_loads", "CP_STATEMENTS"]

#: the statements :meth:`CpRingRules.cp_action` runs
CP_STATEMENTS = (CpAsync, CpAsyncArrive)


class AnchorLoad(NamedTuple):
    """A load of the anchor tensor (Q) a consumer's wait on ``bar`` orders: its (head, batch)
    expressions."""

    bar: str
    coords: Tuple[Any, Any]


def anchor_loads(k: Any, anchor: Optional[str]) -> List[Any]:
    """The loads of ``anchor`` that fix a consumer thread's (batch, head): 4-D TMA boxes (their
    own barrier and plane coordinates) and ``cp.async`` copies (the barrier of the first
    :class:`~kernels.ir.nvidia_cp_ring.CpAsyncArrive` after them in the producer's program,
    the (head, batch) of their first element)."""
    out: List[Any] = []
    pending: List[Tuple[Any, Any]] = []
    for s in walk(k.body):
        if isinstance(s, TmaLoad) and s.tmap.tensor == anchor:
            out.append(AnchorLoad(s.bar, tuple(s.coords)))
        elif isinstance(s, CpAsync) and s.load.buf == anchor:
            lv = leaves(s.load.coords[0])
            pending.append((lv[-2], lv[-1]))
        elif isinstance(s, CpAsyncArrive) and pending:
            out += [AnchorLoad(s.bar, c) for c in dict.fromkeys(pending)]
            pending = []
    return out


class CpRingRules:
    """The ``cp.async`` producer's rules on a CTA of the per-role model (the module
    docstring).  State (made on first use): the copies each warpgroup has pending, the
    identities copies wrote (``cp_ids`` / ``cp_src`` per shared array) and the elements still
    unfenced per warpgroup."""

    def _cp_state(self) -> None:
        if getattr(self, "cp_pending", None) is None:
            n_ag = len(self.agents)
            self.cp_pending: Dict[int, List[Tuple[str, np.ndarray]]] = {}
            self.cp_ids = {b: np.full(v.shape[0], -1, np.int64) for b, v in self.smem.items()}
            self.cp_src = {b: np.zeros(v.shape[0], bool) for b, v in self.smem.items()}
            self.cp_unfenced = {b: np.zeros((n_ag, v.shape[0]), bool)
                                for b, v in self.smem.items()}
            from .attention_roles import Roles
            spec = self.g.spec
            self.cp_kv = Roles.from_spec(spec).kv_tensors if spec.softmax is not None else \
                frozenset()

    def cp_action(self, a: Agent, s: Any, env) -> None:
        """Run a :data:`CP_STATEMENTS` statement of agent ``a``."""
        self._cp_state()
        if isinstance(s, CpAsync):
            self.cp_copy(a, s, env)
        else:
            self.cp_arrive(a, s, env)

    def cp_copy(self, a: Agent, s: CpAsync, env) -> None:
        ld, st = s.load, s.store
        if a.leader:
            self.f.add("mbarrier_protocol", self.where(a, f"{s.tag}: a cp.async in a "
                                                          "leader-only block (the producer's "
                                                          "copies are every thread's)", env))
            raise Stop()
        off = np.broadcast_to(np.asarray(c_eval(st.offset, env), dtype=np.int64), (WARPGROUP,))
        el = (off[:, None] + np.arange(st.width)[None, :])
        buf = st.buf
        if buf not in self.smem:
            self.f.add("in_bounds", self.where(a, f"{s.tag}: shared array {buf} is not "
                                                  "declared", env))
            raise Stop()
        n = self.smem[buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{s.tag} writes {buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array",
                                               env))
            raise Stop()
        flat = el.reshape(-1)
        if np.unique(flat).size != flat.size:
            self.f.add("lds_races", self.where(a, f"{s.tag}: two threads copy into one "
                                                  f"element of {buf}", env))
            raise Stop()
        for c, stamps in enumerate(self.rd[buf]):
            bad = stamps[flat] > a.vc.get(c, 0)
            if c != a.wg and bad.any():
                i = int(flat[np.argmax(bad)])
                state = "still in flight" if np.isinf(stamps[i]) else "retired"
                self.f.add("lds_races", self.where(
                    a, f"{s.tag} overwrites {buf}[{i}], which warpgroup {c}'s wgmma read "
                       f"({state}) with no wait since on a phase that warpgroup released the "
                       "stage on after retiring the read", env))
                raise Stop()
        pred = np.broadcast_to(np.asarray(True if ld.pred is None else c_eval(ld.pred, env)),
                               (WARPGROUP,))
        v = self.values
        heads = v["kv_heads"] if ld.buf in self.cp_kv else v["heads"]
        tid = self.g.tensor_id.get(ld.buf)
        if tid is None:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {ld.buf} is not a spec "
                                                           "tensor", env))
            raise Stop()
        # every element's coordinates at once ([thread, element] each); the leaves the
        # elements share (the row, head and batch of a row copy) are evaluated once
        memo: Dict[Any, np.ndarray] = {}

        def ev(x: Any) -> np.ndarray:
            if x not in memo:
                memo[x] = np.broadcast_to(np.asarray(c_eval(x, env), dtype=np.int64),
                                          (WARPGROUP,))
            return memo[x]
        per = [[ev(x) for x in leaves(ld.coords[j])] for j in range(ld.width)]
        row, col, h, bat = (np.stack([c[i] for c in per], axis=1) for i in (0, 1, -2, -1))
        # the copy's elements are distinct (checked above): one scatter is the per-element one
        self.cp_ids[buf][el] = encode_ids(tid, bat * heads + h, row, col, ~pred[:, None])
        self.smem[buf][flat] = self.cp_ids[buf][flat]
        self.cp_src[buf][flat] = True
        self.tok[buf][flat] = -1                   # pending: no phase stamps it yet
        self.cp_unfenced[buf][:, flat] = True
        self.cp_pending.setdefault(a.wg, []).append((buf, flat))

    def cp_arrive(self, a: Agent, s: CpAsyncArrive, env) -> None:
        idx = self.uni(a, s.index, env, "the cp.async arrive's barrier index")
        key = (s.bar, idx)
        b = self.bar(a, s.bar, idx, env, "cp.async.mbarrier.arrive")
        self.tokens.append((key, b.completed))
        t = len(self.tokens) - 1
        for buf, flat in self.cp_pending.pop(a.wg, []):
            self.tok[buf][flat] = t
        self.arrive(a, key, b, 1 if a.leader else WARPGROUP, env)

    def cp_fence(self, a: Agent) -> None:
        """``fence.proxy.async`` by ``a``: the copies it has acquired become async-visible."""
        if getattr(self, "cp_pending", None) is None:
            return
        for buf, unf in self.cp_unfenced.items():
            el = np.nonzero(unf[a.wg])[0]
            if el.size == 0:
                continue
            tok = self.tok[buf][el]
            seen = np.zeros(el.size, bool)
            for t in np.unique(tok[tok >= 0]):
                key, ph = self.tokens[int(t)]
                if a.obs.get(key, -2) >= ph:
                    seen |= tok == t
            unf[a.wg][el[seen]] = False

    def stamped_read(self, a: Agent, buf: str, el: np.ndarray, tag: str, env) -> bool:
        """The per-role read rule, then: no element a copy wrote is still unfenced for
        ``a``."""
        if not super().stamped_read(a, buf, el, tag, env):
            return False
        if getattr(self, "cp_pending", None) is None:
            return True
        flat = np.asarray(el).reshape(-1)
        unf = self.cp_unfenced[buf][a.wg][flat]
        if unf.any():
            i = int(flat[np.argmax(unf)])
            self.f.add("lds_races", self.where(
                a, f"{tag} (async proxy) reads {buf}[{i}], which a cp.async wrote through the "
                   "generic proxy, with no fence.proxy.async by this warpgroup after the wait "
                   "that acquired it", env))
            return False
        return True

    def copied_ids(self, buf: str, el: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(which of ``buf[el]`` a copy wrote, their identities)."""
        if getattr(self, "cp_pending", None) is None:
            return np.zeros(np.asarray(el).shape, bool), np.zeros(np.asarray(el).shape, np.int64)
        return self.cp_src[buf][el], self.cp_ids[buf][el]

    def cp_end_checks(self) -> None:
        """Copies no arrival covers when the CTA ends."""
        for wg, pend in (getattr(self, "cp_pending", None) or {}).items():
            if pend:
                buf, flat = pend[0]
                self.f.add("mbarrier_protocol", f"{self.where0}: warpgroup {wg} ends with "
                                                f"cp.async copies into {buf} (e.g. element "
                                                f"{int(flat[0])}) that no cp.async.mbarrier"
                                                ".arrive covers")

