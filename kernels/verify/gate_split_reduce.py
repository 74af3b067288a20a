"""A split kernel's second launch on the per-role phase model: the reduce kernel of the TMA
GEMM's two-launch split-K (:mod:`kernels.nvidia.wgmma_tma_ir_reduce`), proved against the
workspace the split kernel wrote.

The split kernel names its reduce kernel in ``meta["reduce"]`` (a :class:`~kernels.ir.core
.Kernel` of plain statements: ``Let``, ``Loop``, ``ZeroFrag``, ``PartialAdd`` and predicated
global stores).  After every CTA of an instance has run on the per-role model (the partials it
stored are in the :class:`~kernels.verify.gate_tma_ticket.TicketLedger`), :func:`run_reduce`
runs the reduce kernel on every thread of its grid (``ceil(M N / block)`` blocks, vectorised),
recording for each stored C element the workspace elements summed into its register, in
order.  The rules, under the ticket form's names:

* ``merge_reads_partials`` (:meth:`TicketLedger.check_merge`, the one-launch form's rule): each
  stored ``(r, c)`` sums exactly ``splits`` reads, in plane order 0..splits-1, each an element
  the split kernel stored exactly once holding the accumulator of ``(r, c)`` over one k range,
  the ranges ascending and partitioning ``[0, K)``; the two kernels declare the same
  workspace layout (``meta["plane_stride"]`` / ``["row_stride"]`` of ``W`` equal at the
  instance); a kernel that stores partials with neither a ticket nor a reduce kernel is
  refused (nothing would ever sum them);
* ``in_bounds``: every read inside the ``splits x M x N`` workspace, every C address (read
  back through the reduce kernel's ``row_stride`` of C) inside ``M x N``;
* ``lane_accumulator_writeback``: the register stored was zeroed before its sum and is
  stored once per thread; every element is counted for ``coverage`` (exactly once over the
  grid);
* a statement the model does not run is refused (``lds_races``, as the per-role model refuses
  what it does not model).

The kernel boundary orders the split kernel's stores before the reduce kernel's reads (two
launches on one stream), so no ticket slot is asked for.  The printed reduce kernel is checked
by :func:`check_printed_reduce`: the compiled text holds exactly the printer's text of the
verified reduce IR, once, after the split kernel (``printed_source``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ..ir.core import Access, Let, Loop, ZeroFrag, c_eval, sym
from ..ir.ticket import PartialAdd

__all__ = ["run_reduce", "check_reduce", "check_printed_reduce", "reduce_text",
           "REDUCE_RULE"]

REDUCE_RULE = "merge_reads_partials"


class _Refused(Exception):
    def __init__(self, check: str, why: str) -> None:
        super().__init__(why)
        self.check, self.why = check, why


def run_reduce(red: Any, values: Dict[str, int]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(element offsets stored in C, the W offsets summed into each, in order; -1 for a
    predicated-off read)`` of reduce kernel ``red`` at ``values`` over its whole grid (raises
    :class:`_Refused` for what the rules forbid)."""
    M, N = values["M"], values["N"]
    T = red.block
    blocks = -(-M * N // T)
    g = np.arange(blocks * T, dtype=np.int64)
    env: Dict[Any, Any] = {sym(k): v for k, v in values.items()}
    env[sym("tid")], env[sym(red.grid_symbols[0])] = g % T, g // T
    state: Dict[str, Any] = {"sums": {}, "zeroed": set(), "stores": [],
                             "size": values["splits"] * M * N}
    _run(red.body, env, state, len(g))
    if not state["stores"]:
        raise _Refused(REDUCE_RULE, f"{red.name} stores nothing")
    if len(state["stores"]) != 1:
        raise _Refused("lane_accumulator_writeback", f"{red.name}: {len(state['stores'])} "
                       "stores of C per thread (one: the rounded sum)")
    return state["stores"][0]


def _run(body: List[Any], env: Dict[Any, Any], st: Dict[str, Any], n: int) -> None:
    for s in body:
        if isinstance(s, Let):
            env[s.symbol] = c_eval(s.expr, env)
        elif isinstance(s, Loop):
            lo, hi = (int(np.asarray(c_eval(x, env)).max()) for x in (s.start, s.stop))
            for v in range(lo, hi):
                env[sym(s.var)] = v
                _run(s.body, env, st, n)
        elif isinstance(s, ZeroFrag):
            st["zeroed"].add(s.frag.name)
            for i in range(s.frag.count):
                st["sums"][(s.frag.name, i)] = []
        elif isinstance(s, PartialAdd):
            off = np.broadcast_to(np.asarray(c_eval(s.offset, env), np.int64), (n,))
            on = _pred(s.pred, env, n)
            out = on & ((off < 0) | (off + s.width > st["size"]))
            if out.any():       # any thread's read, whether or not it stores
                raise _Refused("in_bounds", f"{s.tag} reads W element {int(off[out][0])}: "
                                            f"outside the {st['size']}-float workspace")
            for j, ri in enumerate(s.regs.idx):
                key = (s.regs.frag.name, ri)
                if key not in st["sums"]:
                    raise _Refused("lane_accumulator_writeback", f"{s.tag} adds into "
                                   f"{key[0]}[{ri}] before it was zeroed")
                st["sums"][key].append(np.where(on, off + j, -1))
        elif isinstance(s, Access) and s.kind == "store" and s.space == "global":
            if s.width != 1 or len(s.regs.idx) != 1:
                raise _Refused("lane_accumulator_writeback", f"{s.tag}: one rounded element "
                               "per store")
            key = (s.regs.frag.name, s.regs.idx[0])
            if key not in st["sums"]:
                raise _Refused("lane_accumulator_writeback", f"{s.tag} stores {key[0]}"
                               f"[{key[1]}], never zeroed")
            el = np.broadcast_to(np.asarray(c_eval(s.offset, env), np.int64), (n,))
            reads = st["sums"][key]
            seq = np.stack(reads, axis=1) if reads else np.zeros((n, 0), np.int64)
            on = _pred(s.pred, env, n)
            st["stores"].append((s.buf, el[on], seq[on]))
        else:
            raise _Refused("lds_races", f"{type(s).__name__} {getattr(s, 'tag', '')}: a "
                           "statement the reduce kernel's model does not run")


def _pred(p: Any, env: Dict[Any, Any], n: int) -> np.ndarray:
    if p is None:
        return np.ones(n, bool)
    return np.broadcast_to(np.asarray(c_eval(p, env), bool), (n,))


def check_reduce(k: Any, g: Any, values: Dict[str, int], where: str) -> None:
    """The rules of the module docstring for split kernel ``k``'s reduce kernel at one
    instance; ``g`` is the per-role gate (its ``f``, ``ledger``, ``cover``, ``tensor_id``)."""
    red = k.meta["reduce"]
    env = {sym(n_): v for n_, v in values.items()}
    try:
        for what in ("plane_stride", "row_stride"):
            a, b = (int(c_eval(x.meta[what]["W"], env)) for x in (k, red))
            if a != b:
                raise _Refused(REDUCE_RULE, f"the reduce kernel reads W with {what} {b}; the "
                                            f"split kernel wrote it with {a}")
        buf, el, seq = run_reduce(red, values)
        M, N = values["M"], values["N"]
        ld = int(c_eval(red.meta["row_stride"][buf], env))
        r, c = el // ld, el % ld
        bad = (el < 0) | (r >= M) | (c >= N)
        if bad.any():
            i = int(np.argmax(bad))
            raise _Refused("in_bounds", f"C.reduce stores {buf} element {int(el[i])} (row "
                                        f"{int(r[i])}, column {int(c[i])} at row stride {ld}):"
                                        f" outside the {M} x {N} tensor")
    except _Refused as e:
        g.f.add(e.check, f"{where}, reduce kernel {red.name}: {e.why}")
        return
    # predicated-off reads add 0.f: drop them, keeping each row's order
    valid = seq >= 0
    keep = int(valid.sum(axis=1).max()) if len(seq) else 0
    order = np.argsort(~valid, axis=1, kind="stable")
    packed = np.take_along_axis(seq, order, axis=1)[:, :keep]
    if (valid.sum(axis=1) != keep).any():
        i = int(np.argmax(valid.sum(axis=1) != keep))
        g.f.add(REDUCE_RULE, f"{where}: C[{int(r[i])}, {int(c[i])}] sums "
                             f"{int(valid[i].sum())} partial reads, others {keep}")
        return
    g.ledger.c_tensor = g.tensor_id[buf]
    g.ledger.check_merge(g.f, r, c, packed, f"{where} (reduce kernel)", g.cover)


def reduce_text(red: Any) -> str:
    """The reduce kernel as the printer prints it after the split kernel's text (no prelude)."""
    from ..printer.cuda import CudaPrinter
    return CudaPrinter(red).kernel(prelude=False)


def check_printed_reduce(f: Any, k: Any, source: str) -> str:
    """``printed_source``: ``source`` is the split kernel's text followed by exactly the
    printed reduce kernel (once); returns the split kernel's part for its own checks."""
    text = reduce_text(k.meta["reduce"])
    n = source.count(text)
    if n != 1 or not source.endswith(text):
        f.add("printed_source", f"the source holds the printed reduce kernel "
                                f"{k.meta['reduce'].name} {n} time(s)"
                                + ("" if n != 1 else ", not at its end") + " (once, after the "
                                "split kernel, exactly the verified IR's text)")
        return source
    return source[:-len(text)]
