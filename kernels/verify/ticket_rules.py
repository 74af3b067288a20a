"""The rules of the inter-block ticket (:mod:`kernels.ir.ticket`): a kernel whose blocks of a
group each store a partial, take a ticket, and whose last block reads every partial of its
group (the split-KV decode's one-launch form, :mod:`kernels.nvidia.decode_fused_ir`).

:func:`check_ticket_protocol` proves, on a kernel's IR at launch instances (every block,
thread and loop iteration of the statements that touch the partials, the output and the
counter; the score loop does not take part and is skipped):

* ``ticket_structure``: every partial store comes before a ``__threadfence`` that precedes a
  barrier and then the ticket; no partial store after the ticket; a barrier between the ticket
  and the last-arrival branch (the shared ticket is read after it); every partial load and
  output store inside that branch, after a fence there; the counter reset inside the branch,
  at the ticket's slot; one ticket, one branch;
* ``ticket_single_thread``: the ticket and the reset are done by exactly one thread of a block;
* ``counter_slots``: every block of a group (the blocks differing only in the split) takes its
  ticket at one slot, two groups never share a slot, slots lie in the counter buffer;
* ``arrival_orders``: the arrival-order proof of the GEMM's one-launch split-K
  (:func:`kernels.nvidia.splitk_inline.check_arrival_protocol`, the same function): over every
  arrival order of the group's blocks (all orders up to 5 splits) and two launches in a row,
  the branch runs exactly once, after all ``n_splits`` tickets, and the counter is 0 after;
* ``merge_reads_partials``: for every block that can draw the last ticket, every output element
  its group owns is stored exactly once, by a thread whose loops read each split's partial of
  that element (and its LSE) exactly once per pass, and every partial element the branch reads
  was written by a block of the same group (so the group's tickets order it before the read);
  over all groups the output is stored exactly once.

A failure raises :class:`TicketProtocolError` naming the rule, the instance and the first
counterexample.  :func:`check_ticket_structure` is the structure rule alone on any block of
statements and barrier kind: the TMA GEMM's per-warpgroup ticket inside its persistent loop
(named barriers; partial reads as :class:`~kernels.ir.ticket.PartialAdd`) uses it from the
per-role model (:mod:`kernels.verify.gate_tma_ticket`), which checks the other rules there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import numpy as np
import sympy

from layoutalg.symbolic import to_c

from ..errors import KernelError
from ..ir.attention import LetMinMax
from ..ir.core import Access, Barrier, If, Let, Loop, c_eval, sym, walk
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence

__all__ = ["TicketProtocolError", "check_ticket_protocol", "check_ticket_structure",
           "TICKET_RULES"]

TICKET_RULES = ("ticket_structure", "ticket_single_thread", "counter_slots", "arrival_orders",
                "merge_reads_partials")


class TicketProtocolError(KernelError):
    """A ticket rule failed (``rule`` names it)."""

    exit_code = 1

    def __init__(self, rule: str, msg: str) -> None:
        super().__init__(f"{rule}: {msg}")
        self.rule = rule


def _need(ok: bool, rule: str, msg: str) -> None:
    if not ok:
        raise TicketProtocolError(rule, msg)


def _touches(s: Any, bufs: Iterable[str], kinds: Tuple[str, ...] = ("load", "store")) -> bool:
    """Does ``s`` access a global buffer of ``bufs`` that way (a :class:`PartialAdd` is a load
    of its buffer)?"""
    bufs = set(bufs)
    return any((isinstance(x, Access) and x.space == "global" and x.buf in bufs and
                x.kind in kinds) or
               (isinstance(x, PartialAdd) and x.buf in bufs and "load" in kinds)
               for x in walk([s]))


def check_ticket_structure(body: List[Any], partials: Sequence[str], output: str,
                           barriers: Tuple[type, ...] = (Barrier,)
                           ) -> Tuple[AtomicTicket, LastArrival, CounterReset]:
    """``ticket_structure`` on the statements ``body`` (the kernel's top level, or the block a
    per-warpgroup ticket sits in, whose barriers are then the warpgroup's named barrier:
    ``barriers``); returns the ticket, branch and reset, raises :class:`TicketProtocolError`.
    A per-warpgroup ticket's branch must test the ticket's own shared int."""
    t, last, r = _structure(body, partials, output, barriers)
    if (t.dst_index is None) != (last.index is None) or (
            t.dst_index is not None and sympy.simplify(t.dst_index - last.index) != 0):
        raise TicketProtocolError("ticket_structure", f"the branch tests {last.dst}"
                                  f"[{last.index}], the ticket is in {t.dst}[{t.dst_index}]")
    return t, last, r


def _waits(s: Any, barriers: Tuple[type, ...]) -> bool:
    """Is ``s`` one of ``barriers`` that waits?  An arrive-only named barrier (``bar.arrive``,
    :class:`~kernels.ir.nvidia_tma.NamedBarrier` with ``arrive``) counts its threads and goes
    on: it orders nothing for them, so it is never the barrier the ticket protocol needs."""
    return isinstance(s, barriers) and not getattr(s, "arrive", False)


def _structure(body: List[Any], partials: Sequence[str], output: str,
               barriers: Tuple[type, ...] = (Barrier,)
               ) -> Tuple[AtomicTicket, LastArrival, CounterReset]:
    """``ticket_structure`` on the top-level statements; the ticket, branch and reset."""
    R = "ticket_structure"
    tickets = [i for i, s in enumerate(body) if isinstance(s, AtomicTicket)]
    lasts = [i for i, s in enumerate(body) if isinstance(s, LastArrival)]
    _need(len(tickets) == 1 and len(lasts) == 1, R, f"{len(tickets)} tickets and {len(lasts)} "
          "last-arrival branches at the kernel's top level; one of each")
    ti, li = tickets[0], lasts[0]
    nested = [s for s in walk(body) if isinstance(s, (AtomicTicket, LastArrival))]
    tickets_in_branch = [s for s in walk(body[li].body) if isinstance(s, AtomicTicket)]
    _need(not tickets_in_branch, R, "a ticket inside the last arrival's branch")
    _need(len(nested) == 2, R, "a ticket or last-arrival branch nested in a loop or branch")
    stores = [i for i, s in enumerate(body) if _touches(s, partials, ("store",))]
    _need(bool(stores), R, f"no store of the partials {list(partials)}")
    _need(max(stores) < ti, R, f"a partial store (statement {max(stores)}) after the ticket "
          f"(statement {ti}): another block may read it before it is written")
    fences = [i for i in range(max(stores) + 1, ti) if isinstance(body[i], ThreadFence)]
    _need(bool(fences), R, "no __threadfence between the last partial store and the ticket: a "
          "block drawing the last ticket may read partials not yet visible")
    _need(any(_waits(body[i], barriers) for i in range(fences[0] + 1, ti)), R,
          "no barrier between the fence and the ticket: the ticket may be taken before the "
          "other threads' partial stores are fenced")
    _need(li > ti and any(_waits(body[i], barriers) for i in range(ti + 1, li)), R,
          "no barrier between the ticket and the last-arrival branch: threads read the shared "
          "ticket before it is written")
    t, last = body[ti], body[li]
    _need(last.dst == t.dst, R, f"the branch tests {last.dst!r}, the ticket is in {t.dst!r}")
    outside = [i for i, s in enumerate(body) if i != li and
               (_touches(s, partials, ("load",)) or _touches(s, [output], ("store",)))]
    _need(not outside, R, f"statement {outside[:1]} reads a partial or stores the output "
          "outside the last arrival's branch (before every split's partial is there)")
    lb = last.body
    reads = [i for i, s in enumerate(lb) if _touches(s, partials, ("load",))]
    _need(bool(reads), R, "the last arrival's branch reads no partial")
    _need(any(isinstance(lb[i], ThreadFence) for i in range(min(reads))), R,
          "no __threadfence in the last arrival's branch before its first partial read")
    resets = [s for s in walk(body) if isinstance(s, CounterReset)]
    _need(len(resets) == 1 and any(s is resets[0] for s in lb), R, f"{len(resets)} counter "
          "resets, the branch's own statements holding "
          f"{sum(isinstance(s, CounterReset) for s in lb)}: exactly one, in the last arrival's "
          "branch (a reset by every block loses tickets; none leaves the next launch wrong)")
    r = resets[0]
    _need(r.counter == t.counter and sympy.simplify(r.slot - t.slot) == 0, R,
          f"the reset zeroes {r.counter}[{to_c(r.slot)}], the ticket is at "
          f"{t.counter}[{to_c(t.slot)}]")
    return t, last, r


def _relevant(s: Any, bufs: Sequence[str]) -> bool:
    return _touches(s, bufs)


def _trace(stmts: List[Any], env: Dict[Any, Any], bufs: Sequence[str], ctx: Tuple,
           out: List[Tuple]) -> None:
    """Run the index statements of ``stmts`` for every thread (``tid`` a vector): every
    access of ``bufs`` as ``(ctx, access, coords arrays, pred array)``; loops and branches
    holding none of them are skipped, a last-arrival branch is not entered."""
    n = len(env[sym("tid")])
    for s in stmts:
        if isinstance(s, Let):
            env[s.symbol] = np.broadcast_to(np.asarray(c_eval(s.expr, env)), (n,))
        elif isinstance(s, LetMinMax):
            a, b = c_eval(s.a, env), c_eval(s.b, env)
            env[sym(s.name)] = np.broadcast_to(np.minimum(a, b) if s.op == "min" else
                                               np.maximum(a, b), (n,))
        elif isinstance(s, Loop) and _relevant(s, bufs):
            lo, hi = (np.unique(np.asarray(c_eval(x, env))) for x in (s.start, s.stop))
            _need(lo.size == 1 and hi.size == 1, "merge_reads_partials",
                  f"loop {s.var}: bounds differ between threads")
            for v in range(int(lo[0]), int(hi[0])):
                env[sym(s.var)] = v
                _trace(s.body, env, bufs, ctx + ((id(s), v),), out)
        elif isinstance(s, LastArrival):
            continue                                    # traced for the last block only
        elif isinstance(s, If) and _relevant(s, bufs):
            raise TicketProtocolError("merge_reads_partials", "a branch around a partial / "
                                      "output access: predicate the access instead")
        elif isinstance(s, Access) and s.space == "global" and s.buf in bufs:
            cs = [tuple(np.broadcast_to(np.asarray(c_eval(c, env)), (n,)) for c in cc)
                  for cc in s.coords]
            pred = np.ones(n, bool) if s.pred is None else \
                np.broadcast_to(np.asarray(c_eval(s.pred, env), bool), (n,))
            out.append((ctx, s, cs, pred))


def _block_env(inst: Any, grid_symbols: Sequence[str], block: Tuple[int, ...], threads: int
               ) -> Dict[Any, Any]:
    env: Dict[Any, Any] = dict(inst.symbols())
    env[sym("tid")] = np.arange(threads)
    for name, v in zip(grid_symbols, block):
        env[sym(name)] = v
    return env


def _elements(events: List[Tuple], buf: str, kind: str) -> Dict[Tuple, List[Tuple]]:
    """Per (thread, enclosing loop iterations except the innermost ``s`` loop) the elements
    ``buf`` is ``kind``-accessed at, in order (predicated-off threads left out)."""
    per: Dict[Tuple, List[Tuple]] = {}
    for ctx, a, cs, pred in events:
        if a.buf != buf or a.kind != kind:
            continue
        for t in np.nonzero(pred)[0]:
            key = (int(t), ctx[:-1] if kind == "load" else ctx)
            per.setdefault(key, []).extend(tuple(int(c[t]) for c in cc) for cc in cs)
    return per


def _single_thread(pred: Any, env: Dict[Any, Any], what: str) -> None:
    hit = int(np.count_nonzero(np.broadcast_to(np.asarray(c_eval(pred, env), bool),
                                               env[sym("tid")].shape)))
    _need(hit == 1, "ticket_single_thread", f"the {what} ({to_c(pred)}) is done by {hit} "
          "threads of a block; exactly one")


def check_ticket_protocol(k: Any, instances: Sequence[Any], partials: Sequence[str] = ("Op", "LSEp"),
                          output: str = "O", counter_slots: Any = None,
                          out_elements: Any = None) -> Dict[str, int]:
    """The rules of the module docstring for kernel ``k`` (grid symbols ``(group, split)``)
    at ``instances``; ``counter_slots``: the counter buffer's ints as an expression of the
    runtime symbols (default: the grid's x extent); ``out_elements(inst)``: the output's
    coordinates, each to be stored once (default: ``(0, d, head, batch)`` over
    ``k.meta["cfg"].head_dim``, the decode's O).  Returns counts of what was checked."""
    from ..nvidia.gemm import GemmConfigError
    from ..nvidia.splitk_inline import InlineReduceProtocol, check_arrival_protocol
    ticket, last, reset = _structure(k.body, partials, output)
    gs, T = tuple(k.grid_symbols), k.block
    last_py = to_c(sympy.sympify(last.last).subs(
        {s: sympy.Symbol("splits") for s in sympy.sympify(last.last).free_symbols
         if s.name == "n_splits"}))
    proto = InlineReduceProtocol(last=f"old == {last_py}", reset=True)
    bufs = tuple(partials) + (output,)
    counts = Counter()
    for inst in instances:
        gx, ns = inst.grid[0], inst.grid[1]
        n = inst.values["n_splits"]
        _need(ns == n, "arrival_orders", f"{inst.name}: grid y {ns} is not n_splits {n}")
        size = gx if counter_slots is None else int(c_eval(counter_slots, inst.symbols()))
        slots: Dict[int, set] = {}
        written: Dict[Tuple, int] = {}
        stored_all: Counter = Counter()
        envs: Dict[Tuple[int, int], Dict[Any, Any]] = {}
        for g in range(gx):
            for s in range(ns):
                env = _block_env(inst, gs, (g, s), T)
                ev: List[Tuple] = []
                _trace(k.body, env, bufs, (), ev)
                envs[(g, s)] = env
                for ctx, a, cs, pred in ev:
                    if a.kind == "store" and a.buf in partials:
                        for t in np.nonzero(pred)[0]:
                            for cc in cs:
                                written[(a.buf,) + tuple(int(c[t]) for c in cc)] = g
                _single_thread(ticket.pred, env, "ticket")
                _single_thread(reset.pred, env, "counter reset")
                sl = np.unique(np.asarray(c_eval(ticket.slot, env)))
                _need(sl.size == 1, "counter_slots", f"{inst.name}: block ({g}, {s}) takes "
                      "tickets at several slots")
                slots.setdefault(g, set()).add(int(sl[0]))
        for g, ss in slots.items():
            _need(len(ss) == 1, "counter_slots", f"{inst.name}: the splits of group {g} take "
                  f"tickets at slots {sorted(ss)}, not one: no block sees every split arrive")
            _need(0 <= min(ss) and max(ss) < size, "counter_slots", f"{inst.name}: slot "
                  f"{min(ss)} outside the {size}-int counter buffer")
        owner = Counter(next(iter(ss)) for ss in slots.values())
        dup = [sl for sl, c in owner.items() if c > 1]
        _need(not dup, "counter_slots", f"{inst.name}: groups share counter slot {dup[:1]}: "
              "their tickets mix")
        try:
            counts["orders"] += check_arrival_protocol(proto, n, n)
        except GemmConfigError as e:
            raise TicketProtocolError("arrival_orders", f"{inst.name}: {e}") from None
        # the branch, for every block that can draw the last ticket
        for g in range(gx):
            first = None
            for s in range(ns):
                ev = []
                _trace(last.body, envs[(g, s)], bufs, (), ev)
                stored = _elements(ev, output, "store")
                mine = Counter(e for els in stored.values() for e in els)
                first = mine if first is None else first
                _need(mine == first, "merge_reads_partials", f"{inst.name}: group {g} stores "
                      f"other output elements when split {s} merges than when split 0 does")
                counts["merges"] += _check_merge(inst, g, s, ev, stored, written, n, partials)
            stored_all.update(first)
        want = set(out_elements(inst)) if out_elements is not None else \
            {(0, d, h, b) for b in range(inst.values["batch"])
             for h in range(inst.values["heads"]) for d in range(k.meta["cfg"].head_dim)}
        bad = [e for e, c in stored_all.items() if c != 1 or e not in want]
        _need(not bad and set(stored_all) == want, "merge_reads_partials",
              f"{inst.name}: output elements stored {len(stored_all)} distinct, "
              f"{len(want)} expected; first bad {bad[:1]}")
        counts["instances"] += 1
    return dict(counts)


def _check_merge(inst: Any, g: int, s: int, ev: List[Tuple], stored: Dict[Tuple, List[Tuple]],
                 written: Dict[Tuple, int], n: int, partials: Sequence[str]) -> int:
    R, where = "merge_reads_partials", f"{inst.name}, group {g} merged by split {s}"
    op, lse = partials[0], partials[1]
    for ctx, a, cs, pred in ev:
        if a.kind != "load":
            continue
        for t in np.nonzero(pred)[0]:
            for cc in cs:
                e = (a.buf,) + tuple(int(c[t]) for c in cc)
                _need(written.get(e) == g, R, f"{where}: thread {t} reads {e}, written by "
                      f"{'no block' if e not in written else f'group {written[e]}'}: no "
                      "ticket of this group orders it before the read")
    loads: Dict[Tuple, Dict[Any, Counter]] = {}
    for ctx, a, cs, pred in ev:
        if a.kind != "load":
            continue
        for t in range(len(pred)):
            key = (t, ctx[:-1])
            loads.setdefault(key, {}).setdefault((id(a), a.buf), Counter()).update(
                tuple(int(c[t]) for c in cc) for cc in cs)
    for (t, ctx), els in stored.items():
        passes = loads.get((t, ctx), {})
        for (_, buf), got in passes.items():
            if buf == op:
                want = Counter((sp, d, h, b) for sp in range(n) for (_, d, h, b) in els)
            else:
                want = Counter((sp, 0, h, b) for sp in range(n)
                               for (h, b) in {(h, b) for (_, _, h, b) in els})
            _need(got == want, R, f"{where}: thread {t} stores {sorted(els)[:2]}... but one "
                  f"pass reads {buf} at {sorted(got.elements())[:3]}..., not each of the {n} "
                  "splits of those elements once")
        _need({b for (_, b) in passes} >= {op, lse}, R, f"{where}: thread {t} stores without "
              f"reading {op} and {lse}")
    return len(stored)
