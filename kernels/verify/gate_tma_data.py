"""The data rules of the per-role phase model (:mod:`kernels.verify.gate_tma`): what TMA boxes,
TMA stores, wgmma operands and accumulator stores do to the CTA's shared-memory identities, and
the races, operand and write-back checks on them.

:class:`DataRules` is a mixin of the model's CTA (``gate_tma._Cta``), which holds the state it
reads and writes: ``f`` (the :class:`~kernels.verify.gate_common.Fail` of the run), ``g`` (the
gate: ``spec``, ``tensor_id``, ``cover``, ``incomplete``, ``acc_table``), ``values`` (the
instance), ``smem`` / ``tok`` / ``gen`` / ``writer`` / ``pend`` / ``rd`` (per shared array: the
element identities, the box token that wrote them, their proxy generation, writer, pending bulk
reads and per-agent read stamps), ``tokens``, and the helpers ``where``, ``uni``, ``bar`` and
``complete``.  The scheduler, control flow and barrier rules stay in ``gate_tma``.

An element's identity: ``tensor << SHT | coord0 << SH0 | coord1`` (bit 62: zero fill); a
4-D box's (``TmaLoad.coords``): ``tensor << SHT | inner << SH0 | outer + stride * plane``
(:func:`plane_ids`, read back by :func:`plane_coords`; the GEMM's wgmma rules never see one:
its operands' tensors are 2-D);
:data:`INCOMPLETE` marks an accumulator not summed over every k once, :data:`UNDEFINED` one fed
by shared operand elements nothing wrote (the rows past a short A box: allowed as long as no
store reaches global memory with it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..ir.core import Access, c_eval
from ..ir.nvidia_tma import WARPGROUP, Setmaxnreg, TmaLoad, TmaStore
from ..ir.nvidia_wgmma import WgmmaMma, WgmmaWait, operand_elements
from ..nvidia.tma import TmaOperandLoad, tma_tile_addresses
from .spec import SpecError

__all__ = ["Stop", "Bar", "AccState", "Agent", "DataRules", "SH0", "SHT", "INCOMPLETE",
           "UNDEFINED", "plane_ids", "plane_coords"]

SH0, SHT = 25, 50          # an element's identity: tensor << 50 | coord0 << 25 | coord1
INCOMPLETE = -2
UNDEFINED = -3             # an accumulator fed by shared elements nothing wrote


def _plane_stride(tm: Any, env) -> int:
    """Rows of one plane in a 4-D identity: the outer extent plus a box of overhang, so a
    zero-filled row past one (batch, head)'s sequence keeps its own coordinates."""
    return int(c_eval(tm.outer, env)) + tm.box_outer


def plane_ids(t: int, tm: Any, c0: int, c1: int, planes: List[int], env,
              spec_dims: Tuple[str, ...]) -> np.ndarray:
    """The identities of a 4-D box (``tm.planes``) at (``c0``, ``c1``, ``planes``), per
    (row, column) of the box: ``t << SHT | inner << SH0 | outer + stride (p2 + P2 p3)`` with
    ``stride`` = :func:`_plane_stride`, bit 62 where any coordinate is past its extent (the
    TMA zero fill, per dimension).  :func:`plane_coords` reads them back."""
    if set(tm.dims) != set(spec_dims):
        raise SpecError(f"tensor map {tm.name}: dims {tm.dims} are not tensor {tm.tensor}'s "
                        f"{spec_dims}")
    r, c = np.meshgrid(np.arange(tm.box_outer), np.arange(tm.box_inner), indexing="ij")
    inner, outer = c0 + c, c1 + r
    ext = [int(c_eval(e, env)) for e in (tm.inner, tm.outer) + tuple(tm.planes)]
    oob = (inner < 0) | (inner >= ext[0]) | (outer < 0) | (outer >= ext[1])
    for p, e in zip(planes, ext[2:]):
        oob = oob | (p < 0) | (p >= e)
    stride = _plane_stride(tm, env)
    flat = outer + stride * (planes[0] + ext[2] * planes[1])
    if (inner < 0).any() or (outer < 0).any() or min(planes) < 0 or \
            inner.max() >= 1 << SH0 or flat.max() >= 1 << SH0:
        raise SpecError(f"tensor map {tm.name}: box ({c0}, {c1}, {planes}) outside the 4-D "
                        "identity encoding (coordinates >= 0, below 2**25)")
    return (np.int64(t) << SHT) | (inner.astype(np.int64) << SH0) | flat | \
        np.where(oob, np.int64(1) << 62, np.int64(0))


def plane_coords(ids: np.ndarray, tm: Any, env) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """The spec coordinates (dimension name -> array) and the zero-fill flags of identities
    :func:`plane_ids` wrote for ``tm``."""
    mask = (1 << SH0) - 1
    ids = np.asarray(ids, dtype=np.int64)
    inner, flat = (ids >> SH0) & mask, ids & mask
    stride = _plane_stride(tm, env)
    p2e = int(c_eval(tm.planes[0], env))
    plane, outer = np.divmod(flat, stride)
    p3, p2 = np.divmod(plane, p2e)
    return dict(zip(tm.dims, (inner, outer, p2, p3))), (ids & (1 << 62)) != 0


class Stop(Exception):
    """An agent cannot go on (its failure is recorded)."""


@dataclass
class Bar:
    """One mbarrier: arrivals and transaction bytes still pending in the current phase, the
    phases completed, and the vector clock each completed phase published."""

    count: int
    pending: int
    tx: int = 0
    completed: int = 0
    clock: Dict[int, int] = field(default_factory=dict)
    phase_clocks: List[Dict[int, int]] = field(default_factory=list)


@dataclass
class AccState:
    """An accumulator fragment: the C rows / columns its wgmmas add into and how many times
    each k was summed."""

    rows: Optional[np.ndarray] = None
    cols: Optional[np.ndarray] = None
    kcount: Dict[int, int] = field(default_factory=dict)
    zeroed: bool = False


class Agent:
    """One warpgroup running its role: vector clock, observed barrier phases, wgmma and bulk
    groups in flight."""

    def __init__(self, wg: int) -> None:
        self.wg = wg
        self.role: Optional[str] = None
        self.roles: List[str] = []
        self.clock = 0
        self.vc: Dict[int, int] = {}
        self.obs: Dict[Tuple[str, int], int] = {}
        self.leader = False
        self.stmts_in_role = 0
        self.setmaxnreg: List[Setmaxnreg] = []
        self.open: List[Tuple[str, np.ndarray, str]] = []
        self.groups: List[List[Tuple[str, np.ndarray, str]]] = []
        self.acc: Dict[str, AccState] = {}
        self.unfenced: set = set()
        self.bulk_open: List[Tuple[str, np.ndarray]] = []
        self.bulk_groups: List[List[Tuple[str, np.ndarray]]] = []
        self.bulk_unwaited = 0
        self.named_ids: set = set()
        self.waiting: str = ""
        self.done = False
        # the inter-CTA ticket (gate_tma_ticket): partial stores not yet under a ticket, the
        # slot taken, inside the last arrival's branch, its partial reads and stores
        self.pending_w: List[np.ndarray] = []
        self.slot: Optional[int] = None
        self.in_last = False
        self.psum: Dict[int, List[np.ndarray]] = {}
        self.merge_parts: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []



class DataRules:
    """TMA boxes and stores, wgmma operands and accumulator stores on a CTA's shared memory
    (a mixin of the per-role model's CTA; the module docstring lists what it reads)."""

    # ---- TMA ---------------------------------------------------------------------------------
    def box(self, a: Agent, tm: Any, buf: str, offset: Any, env, what: str) -> np.ndarray:
        off = self.uni(a, offset, env, f"{what}'s shared offset")
        if (off * 2) % 1024:
            self.f.add("in_bounds", self.where(a, f"{what} at {buf}[{off}]: byte {off * 2} is "
                                                  "not on the 1024-byte swizzle repeat the TMA "
                                                  "model needs", env))
            raise Stop()
        el = off + tma_tile_addresses(TmaOperandLoad(tm.box_outer, tm.box_inner)) // 2
        n = self.smem[buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{what} writes {buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            raise Stop()
        return el

    def coords(self, tm: Any, c0: int, c1: int, env) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Spec coordinates (d0, d1) of the box's (row, col) elements and their out-of-range
        mask (the TMA zero fill / store clip)."""
        r, c = np.meshgrid(np.arange(tm.box_outer), np.arange(tm.box_inner), indexing="ij")
        inner, outer = c0 + c, c1 + r
        ie, oe = int(c_eval(tm.inner, env)), int(c_eval(tm.outer, env))
        oob = (inner < 0) | (inner >= ie) | (outer < 0) | (outer >= oe)
        dims = self.g.spec.tensor(tm.tensor).dims
        by = {tm.dims[0]: inner, tm.dims[1]: outer}
        return by[dims[0]], by[dims[1]], oob

    def tma_load(self, a: Agent, s: TmaLoad, env) -> None:
        if not a.leader:
            self.f.add("mbarrier_protocol", self.where(a, f"{s.tag}: a TMA load issued by "
                                                          "every thread of the warpgroup", env))
            raise Stop()
        idx = self.uni(a, s.index, env, "the box's barrier index")
        key = (s.bar, idx)
        b = self.bar(a, s.bar, idx, env, s.tag)
        el = self.box(a, s.tmap, s.dst, s.offset, env, s.tag)
        flat = el.reshape(-1)
        for c, stamps in enumerate(self.rd[s.dst]):
            bad = stamps[flat] > a.vc.get(c, 0)
            if c != a.wg and bad.any():
                i = int(flat[np.argmax(bad)])
                state = "still in flight" if np.isinf(stamps[i]) else "retired"
                self.f.add("lds_races", self.where(
                    a, f"{s.tag} overwrites {s.dst}[{i}], which warpgroup {c}'s wgmma read "
                       f"({state}) with no wait since on a phase that warpgroup released the "
                       "stage on after retiring the read", env))
                break
        c0, c1 = self.uni(a, s.c0, env, "c0"), self.uni(a, s.c1, env, "c1")
        t = self.g.tensor_id[s.tmap.tensor]
        if s.coords:
            planes = [self.uni(a, c, env, f"plane coordinate {i}") for i, c in enumerate(s.coords)]
            self.smem[s.dst][el] = plane_ids(t, s.tmap, c0, c1, planes, env,
                                             self.g.spec.tensor(s.tmap.tensor).dims)
        else:
            d0, d1, oob = self.coords(s.tmap, c0, c1, env)
            self.smem[s.dst][el] = (t << SHT) | (np.maximum(d0, 0) << SH0) | np.maximum(d1, 0)
            self.smem[s.dst][el[oob]] |= 1 << 62
        self.tokens.append((key, b.completed))
        self.tok[s.dst][el] = len(self.tokens) - 1
        b.tx -= s.tmap.box_bytes
        if b.tx < 0:
            self.f.add("mbarrier_protocol", self.where(
                a, f"{s.tag}: the boxes on {s.bar}[{idx}] phase {b.completed} bring "
                   f"{-b.tx} bytes more than its expect_tx announced (the phase can complete "
                   "before they land)", env))
            b.tx = 0
        self.complete(key, b)

    def tma_store(self, a: Agent, s: TmaStore, env) -> None:
        if not a.leader:
            self.f.add("lds_races", self.where(a, f"{s.tag}: a TMA store issued by every thread",
                                               env))
            raise Stop()
        el = self.box(a, s.tmap, s.src, s.offset, env, s.tag)
        flat = el.reshape(-1)
        gen = self.gen[s.src][flat]
        if gen.any():
            i = int(flat[np.argmax(gen > 0)])
            why = ("with no fence.proxy.async after it" if gen.max() == 1 else
                   "fenced but not published to the storing thread by a barrier")
            self.f.add("lds_races", self.where(a, f"{s.tag} (async proxy) reads {s.src}[{i}], "
                                                  f"written through the generic proxy {why}", env))
        m, n, oob = self.coords(s.tmap, self.uni(a, s.c0, env, "c0"),
                                self.uni(a, s.c1, env, "c1"), env)
        ids = self.smem[s.src][el]
        keep = ~oob
        want = (self.g.tensor_id[s.tmap.tensor] << SHT) | (m << SH0) | n
        if (ids[keep] == -1).any():
            self.f.add("lds_races", self.where(a, f"{s.tag} stores C elements never written to "
                                                  f"{s.src}", env))
        elif (ids[keep] == INCOMPLETE).any():
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores an accumulator not summed over every k < K exactly once "
                   f"({self.g.incomplete.get(a.wg, '')})", env))
        elif (ids[keep] == UNDEFINED).any():
            j = np.argwhere(keep & (ids == UNDEFINED))[0]
            self.f.add("lds_races", self.where(
                a, f"{s.tag} stores C[{int(m[tuple(j)])}, {int(n[tuple(j)])}], summed from "
                   "shared operand elements read before anything was written (e.g. rows past "
                   "a short A box: M must not exceed the box's rows)", env))
        elif (ids[keep] != want[keep]).any():
            j = np.argwhere(keep & (ids != want))[0]
            got = int(ids[tuple(j)])
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores C[{int(m[tuple(j)])}, {int(n[tuple(j)])}] from a shared "
                   f"element holding C[{(got >> SH0) & ((1 << 25) - 1)}, "
                   f"{got & ((1 << 25) - 1)}]", env))
        self.g.cover[m[keep], n[keep]] += 1
        self.pend[s.src][flat] = 1
        self.writer[s.src][flat] = a.wg
        a.bulk_open.append((s.src, flat))

    # ---- wgmma -------------------------------------------------------------------------------
    def acc_busy(self, a: Agent, frag: str, env, what: str) -> None:
        for grp in a.groups + [a.open]:
            if any(f == frag for _, _, f in grp):
                self.f.add("lane_accumulator_writeback", self.where(
                    a, f"{what} {frag} while a wgmma writing it is in flight (no "
                       "wgmma.wait_group retired its group)", env))
                return

    def wgmma_wait(self, a: Agent, s: WgmmaWait, env) -> None:
        while len(a.groups) > s.pending:
            grp = a.groups.pop(0)
            self.retire_reads(a, [(buf, el) for buf, el, _ in grp])
            for buf, el, frag in grp:
                if frag not in s.pins:
                    self.f.add("lane_accumulator_writeback", self.where(
                        a, f"wgmma.wait_group retires a wgmma into {frag} without pinning it "
                           "(lg_pin)", env))

    def retire_reads(self, a: Agent, reads: List[Tuple[str, np.ndarray]]) -> None:
        """A wgmma group of warpgroup ``a`` retires: its shared reads are stamped with a new
        tick of ``a``'s clock, so a box may overwrite them only once a wait published that tick
        to the producer (through a barrier ``a`` arrived on after this point)."""
        a.clock += 1
        for buf, el in reads:
            self.rd[buf][a.wg][el] = a.clock

    def stamped_read(self, a: Agent, buf: str, el: np.ndarray, tag: str, env) -> bool:
        """Warpgroup ``a``'s wgmma reads ``buf[el]``: every box that wrote them must complete
        on a barrier phase ``a`` has waited on (``lds_races`` otherwise, False); the elements
        are then marked read and in flight for ``a`` (a box overwriting them needs ``a``'s
        release after :meth:`retire_reads`)."""
        tok = self.tok[buf][el]
        for t in np.unique(tok[tok >= 0]):
            key, ph = self.tokens[int(t)]
            if a.obs.get(key, -2) < ph:
                self.f.add("lds_races", self.where(
                    a, f"{tag} reads {buf} elements whose box completes on {key[0]}"
                       f"[{key[1]}] phase {ph}, which this warpgroup has not waited on", env))
                return False
        self.rd[buf][a.wg][np.asarray(el).reshape(-1)] = np.inf
        return True

    def operand(self, a: Agent, op: Any, s: WgmmaMma, env) -> Optional[np.ndarray]:
        start = self.uni(a, op.start, env, f"{s.tag}'s {op.buf} descriptor start")
        try:
            el = operand_elements(op, start)
        except ValueError as e:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}, {op.buf}: {e}", env))
            return None
        n = self.smem[op.buf].shape[0]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{s.tag} reads {op.buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            return None
        tok = self.tok[op.buf][el]
        # an element nothing wrote (the rows past a short A box) is not a race by itself: its
        # operand row is marked undefined (-1) and poisons the accumulator rows / columns it
        # feeds, which must never reach global memory (tma_store); all-undefined is refused
        undef = (tok < 0).any(axis=1)
        if undef.all():
            self.f.add("lds_races", self.where(a, f"{s.tag} reads {op.buf}"
                                                  f"[{int(el.reshape(-1)[np.argmax(tok.reshape(-1) < 0)])}]"
                                                  " before anything was written", env))
            return None
        if not self.stamped_read(a, op.buf, el, s.tag, env):
            return None
        a.open.append((op.buf, el.reshape(-1), s.acc.frag.name))
        vals = self.smem[op.buf][el].copy()
        vals[undef] = -1
        return vals

    def wgmma(self, a: Agent, s: WgmmaMma, env) -> None:
        fr = s.acc.frag.name
        if not s.accumulate:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: scale-d 0 (accumulate="
                                                           "False) is not modelled by the "
                                                           "per-role engine", env))
            return
        if fr in a.unfenced:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {fr} was written since "
                                                           "the last wgmma.fence", env))
            a.unfenced.discard(fr)
        A, B = self.operand(a, s.a, s, env), self.operand(a, s.b, s, env)
        if A is None or B is None:
            return
        ua, ub = A[:, 0] < 0, B[:, 0] < 0          # undefined operand rows (operand())
        A, B = A & ~(1 << 62), B & ~(1 << 62)
        A[ua], B[ub] = A[~ua][0], B[~ub][0]        # checked as a defined row; poisoned below
        ta, tb = self.g.tensor_id["A"], self.g.tensor_id["B"]
        if ((A >> SHT) != ta).any() or ((B >> SHT) != tb).any():
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: operand elements hold "
                                                           "another tensor's", env))
            return
        mask = (1 << 25) - 1
        am, ak = (A >> SH0) & mask, A & mask
        bn, bk = (B >> SH0) & mask, B & mask
        for nm, rows in (("A", am), ("B", bn)):
            if (rows != rows[:, :1]).any():
                i = int(np.argwhere(rows != rows[:, :1])[0][0])
                self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {nm} operand row {i} "
                                                               "mixes rows of the tensor", env))
                return
        kq = ak[0]
        if (ak != kq[None]).any() or (bk != kq[None]).any() or len(set(kq.tolist())) != 16:
            self.f.add("lane_mfma_operands", self.where(
                a, f"{s.tag}: the 16 reduction slots pair A's k {ak[0].tolist()} with B's k "
                   f"{bk[0].tolist()}", env))
            return
        st = a.acc.get(fr)
        if st is None or not st.zeroed:
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: {fr} used before it was "
                                                           "zeroed", env))
            return
        rows, cols = np.where(ua, -1, am[:, 0]), np.where(ub, -1, bn[:, 0])
        if st.rows is None:
            st.rows, st.cols = rows, cols
        elif not (np.array_equal(st.rows, rows) and np.array_equal(st.cols, cols)):
            self.f.add("lane_mfma_operands", self.where(a, f"{s.tag}: the accumulators held "
                                                           "other C elements than this wgmma "
                                                           "adds into", env))
            return
        for k_ in kq.tolist():
            st.kcount[k_] = st.kcount.get(k_, 0) + 1

    def c_store(self, a: Agent, s: Access, env) -> None:
        """A consumer thread's accumulator pair -> the shared C buffer (the TMA store's
        source); identity: the C element the accumulator holds (incomplete sums marked)."""
        if (s.kind, s.space) != ("store", "lds") or a.leader:
            self.f.add("lds_races", self.where(a, f"{s.tag}: only warpgroup-wide shared stores "
                                                  "of accumulators are modelled", env))
            raise Stop()
        fr = s.regs.frag.name
        self.acc_busy(a, fr, env, "stores")
        off = np.broadcast_to(np.asarray(c_eval(s.offset, env), dtype=np.int64), (WARPGROUP,))
        n = self.smem[s.buf].shape[0]
        el = off[:, None] + np.arange(s.width)[None, :]
        if el.min() < 0 or el.max() >= n:
            self.f.add("in_bounds", self.where(a, f"{s.tag} writes {s.buf}[{int(el.min())}.."
                                                  f"{int(el.max())}] of a {n}-element array", env))
            return
        words = (off * 2) // 4
        for w in range(WARPGROUP // 32):
            banks = set((words[32 * w:32 * w + 32] % 32).tolist())
            if len(banks) != 32 or ((off[32 * w:32 * w + 32] * 2) % (2 * s.width)).any():
                self.f.add("bank_conflicts_lds_write", self.where(
                    a, f"{s.tag}: warp {w}'s {2 * s.width}-byte stores hit {len(banks)} banks "
                       "(or are misaligned)", env))
                break
        flat = el.reshape(-1)
        busy = self.pend[s.buf][flat]
        if busy.any():
            i = int(flat[np.argmax(busy > 0)])
            why = ("a bulk store not yet waited on still reads it" if busy.max() == 1 else
                   "the bulk wait has not been published by a barrier")
            self.f.add("lds_races", self.where(a, f"{s.tag} rewrites {s.buf}[{i}]: {why}", env))
        self.smem[s.buf][el] = self.acc_ids(a, s, el.shape)
        self.gen[s.buf][flat] = 1
        self.writer[s.buf][flat] = a.wg

    def acc_ids(self, a: Agent, s: Access, shape: Tuple[int, ...],
                complete: bool = True) -> np.ndarray:
        """The identities of the accumulator registers ``s`` stores, per (thread, element):
        the C element each holds, :data:`INCOMPLETE` if its sums are not over every k < K
        once, :data:`UNDEFINED` if fed by shared elements nothing wrote."""
        st = a.acc.get(s.regs.frag.name)
        ids = np.full(shape, INCOMPLETE, np.int64)
        if st is not None and st.rows is not None:
            K = self.values["K"]
            bad = [k_ for k_, c in st.kcount.items() if c != 1 or k_ < 0]
            miss = [k_ for k_ in range(K) if k_ not in st.kcount] if complete else []
            if not bad and not miss:
                ci, cj = self.g.acc_table(s)
                rows = st.rows[ci[:, list(s.regs.idx)]]
                cols = st.cols[cj[:, list(s.regs.idx)]]
                ids = np.where((rows < 0) | (cols < 0), UNDEFINED,
                               (self.g.tensor_id["C"] << SHT) | (rows << SH0) | cols)
            else:
                self.g.incomplete[a.wg] = (
                    f"k {bad[:3]} summed {[st.kcount[x] for x in bad[:3]]} times" if bad
                    else f"k {miss[:3]} never summed")
        return ids

    def global_store(self, a: Agent, s: Access, env) -> None:
        """A consumer's accumulators -> an output tensor in global memory (the direct-store
        epilogue), predicated per thread.  The tensor is row-major with the row stride the
        kernel's ``meta["row_stride"]`` names (the host's contract): every address a thread
        stores at is read back to its (row, column) through it and must lie inside the spec's
        M x N [``in_bounds``], be aligned to the store's width (C's base is 4-byte aligned)
        [``in_bounds``], and hold its own accumulator summed over every k < K once
        [``lane_accumulator_writeback``]; each element is counted for ``coverage``."""
        out = [t.name for t in self.g.spec.tensors if t.role in ("output", "workspace")]
        ld_expr = getattr(self.k, "meta", {}).get("row_stride", {}).get(s.buf)
        if s.kind != "store" or a.leader or s.buf not in out or ld_expr is None:
            self.f.add("lds_races", self.where(
                a, f"{s.tag}: only warpgroup-wide stores of accumulators to an output tensor "
                   "whose row stride the kernel declares (meta['row_stride']) are modelled "
                   "in global memory", env))
            raise Stop()
        self.acc_busy(a, s.regs.frag.name, env, "stores")
        off = np.broadcast_to(np.asarray(c_eval(s.offset, env), dtype=np.int64), (WARPGROUP,))
        on = np.ones(WARPGROUP, bool) if s.pred is None else \
            np.broadcast_to(np.asarray(c_eval(s.pred, env), dtype=bool), (WARPGROUP,))
        ld = int(c_eval(ld_expr, env))
        M, N = self.values["M"], self.values["N"]
        el = off[:, None] + np.arange(s.width)[None, :]
        if s.buf in self.k.meta.get("plane_stride", {}):
            self.workspace_store(a, s, env, el, on)     # gate_tma_ticket
            return
        if a.in_last:
            self.merged_store(a, s, env, el, on, ld)
            return
        ids = self.acc_ids(a, s, el.shape)
        if not on.any():
            return
        el, ids, first = el[on], ids[on], off[on]
        r, c = el // ld, el % ld
        out_of = (el < 0) | (r >= M) | (c >= N)
        if out_of.any():
            i = tuple(np.argwhere(out_of)[0])
            self.f.add("in_bounds", self.where(
                a, f"{s.tag} stores {s.buf} element {int(el[i])} (row {int(r[i])}, column "
                   f"{int(c[i])} at row stride {ld}): outside the {M} x {N} tensor", env))
            return
        if ((first * 2) % (2 * s.width)).any():
            i = int(first[np.argmax((first * 2) % (2 * s.width) != 0)])
            self.f.add("in_bounds", self.where(
                a, f"{s.tag}: a {2 * s.width}-byte store at {s.buf} element {i} is not "
                   f"{2 * s.width}-byte aligned (row stride {ld})", env))
            return
        want = (self.g.tensor_id[s.buf] << SHT) | (r << SH0) | c
        if (ids == INCOMPLETE).any():
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores an accumulator not summed over every k < K exactly once "
                   f"({self.g.incomplete.get(a.wg, '')})", env))
        elif (ids == UNDEFINED).any():
            i = tuple(np.argwhere(ids == UNDEFINED)[0])
            self.f.add("lds_races", self.where(
                a, f"{s.tag} stores C[{int(r[i])}, {int(c[i])}], summed from shared operand "
                   "elements read before anything was written (e.g. rows past a short A box: "
                   "M must not exceed the box's rows)", env))
        elif (ids != want).any():
            i = tuple(np.argwhere(ids != want)[0])
            got = int(ids[i])
            self.f.add("lane_accumulator_writeback", self.where(
                a, f"{s.tag} stores C[{int(r[i])}, {int(c[i])}] from the accumulator of "
                   f"C[{(got >> SH0) & ((1 << 25) - 1)}, {got & ((1 << 25) - 1)}]", env))
        np.add.at(self.g.cover, (r.ravel(), c.ravel()), 1)
