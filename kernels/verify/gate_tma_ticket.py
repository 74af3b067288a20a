"""The inter-CTA ticket on the per-role phase model (:mod:`kernels.verify.gate_tma`): the TMA
GEMM's one-launch split-K (:mod:`kernels.nvidia.wgmma_tma_ir_split`), whose consumer warpgroups
store fp32 partials to a workspace, take a ticket per (tile, warpgroup) and - the last arrival
- sum every split's partial and store C.

The model runs each CTA on its own, so another CTA's partials are not there yet when a
warpgroup's merge runs; the merge is therefore run for **every** arrival (any of them may draw
the last ticket), its reads recorded, and checked once every CTA of the instance has run:

* ``ticket_structure`` (static, :func:`~kernels.verify.ticket_rules.check_ticket_structure`
  on the block holding the ticket; the barriers are the warpgroup's named barrier): partial
  stores, then ``__threadfence``, a barrier, the ticket, a barrier, the last-arrival branch
  (fence first, every partial read and output store inside it, the counter reset there at the
  ticket's slot); the branch tests the ticket's own per-warpgroup int;
* ``ticket_single_thread``: the ticket and the reset are taken by exactly one thread of the
  warpgroup;
* ``counter_slots``: each (tile, warpgroup) - its ``(m0, n0)`` and warpgroup - takes its
  tickets at one slot, no two share one, every slot inside the counter buffer
  (``meta["counter_size"]``);
* ``arrival_orders``: :func:`~kernels.nvidia.splitk_inline.check_arrival_protocol` (the same
  function as the template's and the fused decode's proofs) on each slot's arrival count:
  over every arrival order and two launches, one merge per launch, after all ``splits``
  arrivals, the counter back at 0;
* ``merge_reads_partials``: every arrival's merge stores the same C elements from the same
  reads; each stored element ``(r, c)`` is ``0.f + W[0] + ... + W[splits - 1]``, each read
  once, in split order, where ``W[s]`` holds (stored exactly once, under this slot's ticket)
  the accumulator of ``(r, c)`` over the k range of split ``s``; the k ranges ascend and
  partition ``[0, K)``; the element is counted for ``coverage`` once per slot.

A partial store's address is read back through the workspace's plane and row strides
(``meta["plane_stride"]`` / ``["row_stride"]``) and must lie inside ``splits x M x N``
[``in_bounds``] and hold the accumulator of its own (r, c), each of its k once
[``lane_accumulator_writeback``].
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Tuple

import numpy as np

from layoutalg.symbolic import to_c

from ..ir.core import c_eval, walk
from ..ir.nvidia_tma import WARPGROUP, NamedBarrier
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence
from .gate_tma_data import INCOMPLETE, SH0, SHT, Stop, UNDEFINED
from .ticket_rules import TICKET_RULES, TicketProtocolError, check_ticket_structure

__all__ = ["TicketModel", "TicketLedger", "ticket_structure", "TICKET_RULES",
           "has_tickets"]


def has_tickets(k: Any) -> bool:
    return any(isinstance(s, AtomicTicket) for s in walk(k.body))


def ticket_structure(k: Any, f: Any) -> None:
    """``ticket_structure`` on the statement list that holds the ticket (recorded in ``f``)."""
    holder = None

    def find(body: List[Any]) -> None:
        nonlocal holder
        for s in body:
            if isinstance(s, AtomicTicket):
                holder = body if holder is None else holder
            elif hasattr(s, "body") and not isinstance(s, LastArrival):
                find(s.body)
    find(k.body)
    ws = [t.name for t in k.spec.tensors if t.role == "workspace"]
    out = [t.name for t in k.spec.tensors if t.role == "output"]
    try:
        if holder is None or len(ws) != 1 or len(out) != 1:
            raise TicketProtocolError("ticket_structure", "no block holding one ticket, or not "
                                      "one workspace and one output tensor in the spec")
        check_ticket_structure(holder, ws, out[0], (NamedBarrier,))
    except TicketProtocolError as e:
        f.add("ticket_structure", str(e))


class TicketLedger:
    """One instance's (one schedule's) record over all CTAs: the workspace's contents, the
    tickets, the merges."""

    def __init__(self, values: Dict[str, int], planes: int) -> None:
        M, N = values["M"], values["N"]
        size = planes * M * N
        self.values, self.planes = values, planes
        self.w_id = np.full(size, -1, np.int64)         # the C identity each element holds
        self.w_k = np.full(size, -1, np.int64)          # its k set (an index of ksets)
        self.w_count = np.zeros(size, np.int64)
        self.w_slot = np.full(size, -1, np.int64)       # the ticket its writer took after
        self.ksets: Dict[Tuple[int, ...], int] = {}
        self.kinfo: List[Tuple[int, int, int]] = []     # (min, max, size) per k set
        self.arrivals: Counter = Counter()
        self.owner: Dict[int, set] = {}
        self.slot_of: Dict[Tuple, set] = {}
        self.merges: Dict[int, List[Tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.last_test = "splits - 1"   # set from the kernel's LastArrival (last_arrival)

    def kset(self, ks: Tuple[int, ...]) -> int:
        i = self.ksets.get(ks)
        if i is None:
            i = self.ksets[ks] = len(self.kinfo)
            self.kinfo.append((min(ks), max(ks), len(ks)) if ks else (0, -1, 0))
        return i

    def resolve(self, f: Any, cover: np.ndarray, where: str) -> None:
        """The deferred rules of the module docstring; each stored element counted once per
        slot in ``cover``."""
        from ..nvidia.gemm import GemmConfigError
        from ..nvidia.splitk_inline import InlineReduceProtocol, check_arrival_protocol
        v = self.values
        n = v["splits"]
        for slot, owners in self.owner.items():
            if len(owners) != 1:
                f.add("counter_slots", f"{where}: (tile, warpgroup)s {sorted(owners)[:2]} share "
                                       f"counter slot {slot}: their tickets mix")
                return
        for key, slots in self.slot_of.items():
            if len(slots) != 1:
                f.add("counter_slots", f"{where}: (m0, n0, warpgroup) {key} takes tickets at "
                                       f"slots {sorted(slots)}: no arrival sees every split")
                return
        # the branch's own test (the IR's LastArrival.last), as the template's protocol prints
        proto = InlineReduceProtocol(last=f"old == {self.last_test}", reset=True)
        for slot, count in self.arrivals.items():
            try:
                check_arrival_protocol(proto, n, count)
            except GemmConfigError as e:
                f.add("arrival_orders", f"{where}, slot {slot}: {e}")
                return
        R = "merge_reads_partials"
        for slot, merges in self.merges.items():
            first = merges[0]
            for m in merges[1:]:
                if not all(np.array_equal(x, y) for x, y in zip(first, m)):
                    f.add(R, f"{where}, slot {slot}: the arrivals' merges store other elements "
                             "or read other partials")
                    return
            if not self.check_merge(f, *first, f"{where}, slot {slot}", cover, slot):
                return

    def check_merge(self, f: Any, rows: np.ndarray, cols: np.ndarray, seqs: np.ndarray,
                    where: str, cover: np.ndarray, slot: Any = None) -> bool:
        """``merge_reads_partials`` on one merge: stored elements ``(rows, cols)``, each with
        the workspace elements it summed in order (``seqs``, one row each): ``splits`` reads,
        planes 0..splits-1 in order, each element stored exactly once (under ticket ``slot``;
        ``None``: a reduce kernel, ordered after every store by the kernel boundary) holding
        the accumulator of its (r, c) over one k range, the ranges ascending and partitioning
        [0, K).  Counts each element once in ``cover``; False (and a failure in ``f``) if not."""
        v = self.values
        n, M, N, K = v["splits"], v["M"], v["N"], v["K"]
        R = "merge_reads_partials"
        kmin = np.array([k[0] for k in self.kinfo] + [0], np.int64)
        kmax = np.array([k[1] for k in self.kinfo] + [-2], np.int64)
        ksize = np.array([k[2] for k in self.kinfo] + [0], np.int64)
        if seqs.shape[1] != n or (seqs < 0).any():
            f.add(R, f"{where}: a stored element sums {seqs.shape[1]} partial reads, not one "
                     f"of each of the {n} splits")
            return False
        planes = seqs // (M * N)
        if (planes != np.arange(n)[None, :]).any():
            i = int(np.argwhere(planes != np.arange(n)[None, :])[0][0])
            f.add(R, f"{where}: C[{int(rows[i])}, {int(cols[i])}] sums the workspace planes "
                     f"{planes[i].tolist()}, not 0..{n - 1} in order")
            return False
        want = (self.c_tensor << SHT) | (rows[:, None] << SH0) | cols[:, None]
        ids, cnt, sl = self.w_id[seqs], self.w_count[seqs], self.w_slot[seqs]
        other = (sl != slot) if slot is not None else np.zeros(sl.shape, bool)
        if (cnt != 1).any() or (ids != want).any() or other.any():
            i, j = (int(x) for x in np.argwhere((cnt != 1) | (ids != want) | other)[0])
            why = (f"written {int(cnt[i, j])} times" if cnt[i, j] != 1 else
                   "written by a warpgroup that took its ticket at another slot (no ticket "
                   "orders it before the read)" if other[i, j] else
                   "holding another element's accumulator")
            f.add(R, f"{where}: C[{int(rows[i])}, {int(cols[i])}] reads W[{j}] element "
                     f"{int(seqs[i, j])}, {why}")
            return False
        ks = self.w_k[seqs]
        lo, hi, sz = kmin[ks], kmax[ks], ksize[ks]
        ok = (sz == hi - lo + 1) & (lo[:, :1] == 0).all(axis=1)[:, None] & \
            (hi[:, -1:] == K - 1).all(axis=1)[:, None]
        ok &= np.concatenate([np.ones((len(rows), 1), bool), lo[:, 1:] == hi[:, :-1] + 1],
                             axis=1)
        if not ok.all():
            i = int(np.argwhere(~ok)[0][0])
            f.add(R, f"{where}: C[{int(rows[i])}, {int(cols[i])}]'s partials hold k ranges "
                     f"{list(zip(lo[i].tolist(), hi[i].tolist()))}, not ascending ranges "
                     f"partitioning [0, {K})")
            return False
        np.add.at(cover, (rows, cols), 1)
        return True


class TicketModel:
    """The per-role model's CTA mixin for the ticket statements (module docstring): reads the
    CTA's ``g.ledger`` and the agent's ticket state."""

    def ticket_action(self, a: Any, s: Any, env: Dict[Any, Any]) -> None:
        if isinstance(s, ThreadFence):
            return                      # ordering: ticket_structure; visibility: the axiom
        tid = np.broadcast_to(np.asarray(env[_tid()]), (WARPGROUP,))
        if isinstance(s, (AtomicTicket, CounterReset)):
            on = np.broadcast_to(np.asarray(c_eval(s.pred, env), bool), tid.shape)
            what = "ticket" if isinstance(s, AtomicTicket) else "counter reset"
            if a.leader or int(on.sum()) != 1:
                self.f.add("ticket_single_thread", self.where(
                    a, f"the {what} is taken by {1 if a.leader else int(on.sum())} thread(s) "
                       "of the warpgroup's 128 (exactly one, in a warpgroup-wide block)", env))
                raise Stop()
            slot = self.uni(a, s.slot, env, f"the {what}'s slot")
            size = int(c_eval(self.k.meta["counter_size"][s.counter], env))
            if not 0 <= slot < size:
                self.f.add("counter_slots", self.where(a, f"slot {slot} outside the {size}-int "
                                                          f"counter buffer {s.counter}", env))
                raise Stop()
            led = self.g.ledger
            if isinstance(s, AtomicTicket):
                led.arrivals[slot] += 1
                key = (int(np.asarray(env[_sym("m0")]).flat[0]),
                       int(np.asarray(env[_sym("n0")]).flat[0]), a.wg)
                led.owner.setdefault(slot, set()).add(key)
                led.slot_of.setdefault(key, set()).add(slot)
                for el in a.pending_w:
                    led.w_slot[el] = slot
                a.pending_w, a.slot = [], slot
            elif slot != a.slot or not a.in_last:
                self.f.add("ticket_structure", self.where(
                    a, f"the counter reset zeroes slot {slot}; the warpgroup's ticket is at "
                       f"{a.slot} (the reset belongs in the last arrival's branch)", env))
            return
        if isinstance(s, PartialAdd):
            if not a.in_last:
                self.f.add("ticket_structure", self.where(a, f"{s.tag}: a partial read outside "
                                                             "the last arrival's branch", env))
                raise Stop()
            off = np.broadcast_to(np.asarray(c_eval(s.offset, env), np.int64), tid.shape)
            on = np.ones(tid.shape, bool) if s.pred is None else \
                np.broadcast_to(np.asarray(c_eval(s.pred, env), bool), tid.shape)
            for j, ri in enumerate(s.regs.idx):
                a.psum.setdefault(ri, []).append(np.where(on, off + j, -1))
            return
        raise TypeError(type(s).__name__)

    def last_arrival(self, a: Any, s: LastArrival, env: Dict[Any, Any]):
        """Run the branch as the last arrival (every arrival may be)."""
        if a.slot is None:
            self.f.add("ticket_structure", self.where(a, "a last-arrival branch before any "
                                                         "ticket", env))
            raise Stop()
        self.g.ledger.last_test = to_c(s.last)
        a.in_last, a.psum, a.merge_parts = True, {}, []
        yield from self.run(a, s.body, env)
        a.in_last = False
        self.end_merge(a)

    def workspace_store(self, a: Any, s: Any, env: Dict[Any, Any], el: np.ndarray,
                        on: np.ndarray) -> None:
        """A partial store (``el``: the elements per thread, ``on``: the threads storing)."""
        v = self.values
        M, N = v["M"], v["N"]
        plane = int(c_eval(self.k.meta["plane_stride"][s.buf], env))
        row = int(c_eval(self.k.meta["row_stride"][s.buf], env))
        led = self.g.ledger
        e = el[on]
        if e.size == 0:
            return
        sp, rem = e // plane, e % plane
        r, c = rem // row, rem % row
        bad = (e < 0) | (sp >= led.planes) | (r >= M) | (c >= N)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            self.f.add("in_bounds", self.where(
                a, f"{s.tag} stores {s.buf} element {int(e[i])} (plane {int(sp[i])}, row "
                   f"{int(r[i])}, column {int(c[i])}): outside the {led.planes} x {M} x {N} "
                   "workspace", env))
            raise Stop()
        if ((el[on][:, 0] * 4) % (4 * s.width)).any():
            self.f.add("in_bounds", self.where(a, f"{s.tag}: a {4 * s.width}-byte store not "
                                                  f"{4 * s.width}-byte aligned", env))
            raise Stop()
        st = a.acc.get(s.regs.frag.name)
        ids = self.acc_ids(a, s, el.shape, complete=False)[on]
        want = (self.g.tensor_id["C"] << SHT) | (r << SH0) | c
        if st is None or (ids == INCOMPLETE).any() or \
                any(cnt != 1 for cnt in st.kcount.values()):
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores an accumulator some k of which was summed more than once "
                   "(or never by a wgmma)", env))
            raise Stop()
        if (ids == UNDEFINED).any() or (ids != want).any():
            i = tuple(np.argwhere(ids != want)[0])
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores W[{int(sp[i])}][{int(r[i])}][{int(c[i])}] from another "
                   "element's accumulator", env))
            raise Stop()
        led.w_id[e] = ids
        # the k it summed inside the tensor (k >= K: TMA's zero fill, adding 0)
        led.w_k[e] = led.kset(tuple(sorted(k for k in st.kcount if k < v["K"])))
        np.add.at(led.w_count, e.ravel(), 1)
        a.pending_w.append(e.ravel())

    def merged_store(self, a: Any, s: Any, env: Dict[Any, Any], el: np.ndarray,
                     on: np.ndarray, ld: int) -> None:
        """An output store in the last arrival's branch: its registers are sums of partial
        reads (``a.psum``), recorded for :meth:`TicketLedger.resolve`."""
        v = self.values
        M, N = v["M"], v["N"]
        if not on.any():
            return
        e = el[on]
        r, c = e // ld, e % ld
        if (e < 0).any() or (r >= M).any() or (c >= N).any():
            self.f.add("in_bounds", self.where(a, f"{s.tag} stores outside the {M} x {N} "
                                                  "tensor", env))
            raise Stop()
        seqs = []
        for j, ri in enumerate(s.regs.idx):
            reads = a.psum.get(ri, [])
            seq = np.stack(reads, axis=1) if reads else np.zeros((WARPGROUP, 0), np.int64)
            seqs.append(seq[on])
        # one row per stored element: its reads in order (predicated-off loads dropped)
        rows, cols = r.reshape(-1), c.reshape(-1)
        flat = np.concatenate([q[:, None, :] for q in seqs], axis=1).reshape(len(rows), -1)
        a.merge_parts.append((rows, cols, flat))

    def end_merge(self, a: Any) -> None:
        """One arrival's merge, all its stores together, into the ledger."""
        parts, a.merge_parts = a.merge_parts, []
        if not parts:
            return
        width = max(p[2].shape[1] for p in parts)
        rows = np.concatenate([p[0] for p in parts])
        cols = np.concatenate([p[1] for p in parts])
        flat = np.concatenate([np.pad(p[2], ((0, 0), (0, width - p[2].shape[1])),
                                      constant_values=-1) for p in parts])
        valid = flat >= 0
        keep = int(valid.sum(axis=1).max()) if len(flat) else 0
        order = np.argsort(~valid, axis=1, kind="stable")
        packed = np.take_along_axis(flat, order, axis=1)[:, :keep]
        self.g.ledger.c_tensor = self.g.tensor_id["C"]
        self.g.ledger.merges.setdefault(a.slot, []).append((rows, cols, packed))


def _sym(name: str) -> Any:
    from ..ir.core import sym
    return sym(name)


def _tid() -> Any:
    return _sym("tid")
