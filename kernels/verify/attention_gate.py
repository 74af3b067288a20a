"""The attention verification gate: prove the attention IR before it is emitted, or stop.

Shapes and strides are runtime arguments, so the gate checks the kernel on **instances**
(concrete shapes chosen to hit every edge: ragged sequence lengths, a single row or key, GQA,
strided BSHD layouts, causal with seqlen_q != seqlen_kv and rows that see no key), and says so
in every domain.  Everything is evaluated from the IR, i.e. from the sympy objects the printer
prints, with C semantics (:func:`kernels.ir.c_eval`).

1. **Static, every block of the instance's grid x every loop iteration x every thread**:
   ``emitted_index_math`` (printed offset == layout(coordinates), element by element),
   ``in_bounds`` (predicated-on elements in range; a predicated load is on exactly when its
   whole vector is in range, so zero-filled means out of range; LDS inside its array),
   ``vector_widths`` (aligned vectors), ``bank_conflicts_lds_read`` / ``_write`` (every LDS
   access of every wave and iteration under the gfx942 phase model, max ways 1),
   ``coverage`` (every element of O and LSE stored exactly once over the grid),
   ``lds_capacity``.
2. **Dataflow** per simulated block (every query tile of two (batch, head) pairs; the other
   blocks are the same program on other global coordinates, ``block_independence``): registers
   and LDS hold element identities instead of values.

   * ``lane_mfma_operands`` - each MFMA of ``S^T = K Q^T`` multiplies a key row of K by a query
     row of Q with equal head dims in every reduction slot; each MFMA of ``O^T = V^T P^T``
     multiplies a head-dim row of V^T by a query row of P with equal keys; accumulators keep
     their (row, column) and never add an index twice;
   * ``cross_lane_reductions`` - every ``ds_swizzle`` / ``ds_bpermute`` exchange (source lane
     from the printed pattern or address, hardware semantics) pairs lanes holding the same
     query row; sums combine disjoint key sets;
   * ``online_softmax`` - each exponent subtracts a maximum of its own row that covers every key
     exponentiated so far; ``O`` and ``l`` are rescaled by the ``alpha`` of their own row from
     the version of the maximum they were accumulated under (an ``O`` element still its zero
     fill is at every version: its rescale is the identity, which a kernel may skip); ``O`` and
     ``l`` are combined only under the same maximum; the normaliser sums exactly the keys
     accumulated into ``O``;
   * ``masking_and_tile_skipping`` - each mask condition is evaluated at the (row, key) the
     register really holds and equals visibility (``key < seqlen_kv`` and, causal, ``key <= row +
     causal_off``); at the store, the keys accumulated unmasked into each output row are exactly
     its visible keys (so skipped tiles held no visible key and unmasked tiles no invisible one);
   * ``lane_accumulator_writeback`` - each stored O element is O[row][d] of the coordinates it
     is stored to (batch and head included), normalised, over its complete head-dim reduction;
   * ``lds_races`` - no LDS element is read and written (or written twice) by different threads
     without a barrier in between; nothing reads LDS never written.

3. **Split-KV decode** (:mod:`kernels.decode_splitkv`, two kernels): the split kernel is checked
   as a decode whose query "row" ``s`` is split ``s`` (Q's row mode has stride 0) and sees
   exactly the keys ``[s kv_chunk, (s+1) kv_chunk)`` below seqlen_kv, so the checks above prove
   each partial's keys; ``split_partition`` adds that per (batch, head) the partials' key sets
   are disjoint and cover ``[0, seqlen_kv)``; the partial O is stored unnormalised next to the
   (max, sum) of the same row, keys and maximum version.  For the combine kernel,
   ``reduction_reads_partials``: every merge step combines O, max and sum of one (batch, head)
   and split, at the accumulator's head dims, no split twice, and each stored O / LSE element
   merged all ``n_splits`` splits of its own (batch, head); the pair's workspace layouts are
   the same objects on both sides (``decode_splitkv._check_same_workspace``).

Value arithmetic (exp2, fma, max, rounding) is outside the proof: the emulator tests check it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy

from ..ir.attention import LaneXor, LetMinMax, MaskScores
from ..ir.core import Access, If, Let, Loop, sym, walk
from .attention_dataflow import AttentionDataflow
from .attention_ids import rowid
from .attention_roles import Roles
from .attention_static import AttentionStatic, Instance, default_instances, grid_blocks
from .gate import GateReport
from .gate_common import Fail, bits_to_list, check_lds_capacity, leaves
from .rules import checks_for
from .spec import KernelSpec, SpecError
from .wave_phases import check_wave_roles

__all__ = ["verify_attention", "verify_on_instances", "CHECKS", "Instance",
           "default_instances"]

CHECKS = ("emitted_index_math", "in_bounds", "vector_widths", "bank_conflicts_lds_read",
          "bank_conflicts_lds_write", "coverage", "lds_capacity", "block_independence",
          "lane_mfma_operands", "cross_lane_reductions", "online_softmax",
          "masking_and_tile_skipping", "lane_accumulator_writeback", "lds_races")
# split-KV decode only: the split kernel's partials cover every key of each (batch, head) once;
# the reduction merges exactly the partials written, each once, into the output they belong to
SPLIT_CHECKS = ("split_partition", "reduction_reads_partials")


# ============================================================================ entry point

def block_independence(k: Any, spec: Optional[KernelSpec] = None) -> Tuple[bool, str]:
    """The batch / head symbols enter nothing but global accesses (and the lets defining
    them): blocks of other (batch, head) pairs run the same program on other global
    coordinates, which the static pass checks for every block."""
    names = (spec if spec is not None else k.spec).head_symbols
    syms = {sym(n) for n in names} | {sympy.Symbol(n, integer=True) for n in names}
    defining = set(names)          # the lets that define them (a grid symbol is no let)
    for s in walk(k.body):
        exprs: List[Any] = []
        if isinstance(s, Let) and s.name not in defining:
            exprs = [s.expr]
        elif isinstance(s, LetMinMax):
            exprs = [s.a, s.b]
        elif isinstance(s, (Loop,)):
            exprs = [s.start, s.stop]
        elif isinstance(s, If):
            exprs = [s.cond]
        elif isinstance(s, Access) and s.space == "lds":
            exprs = [s.offset, s.pred] + leaves(s.coords)
        elif isinstance(s, MaskScores):
            exprs = list(s.rows) + list(s.keys) + list(s.conds)
        elif isinstance(s, LaneXor) and s.addr is not None:
            exprs = [s.addr]
        for e in exprs:
            if e is not None and sympy.sympify(e).free_symbols & syms:
                return False, f"{type(s).__name__} depends on the batch/head index: {e}"
    return True, (f"batch/head symbols ({', '.join(names)}) appear only in global access "
                  "offsets and coordinates (checked symbolically on every statement), and the "
                  "static pass checks for every block and thread that K/V are read at the GQA "
                  "(batch, kv head) of the thread's Q and O/LSE written at its (batch, head)")


def _check_partition(inst: Instance, part: Dict[int, np.ndarray], kw: int, f: Fail) -> None:
    """Split-KV: per (batch, head), the partials' key sets partition [0, seqlen_kv)."""
    v = inst.values
    skv, ns = v["seqlen_kv"], v["n_splits"]
    want = np.zeros(kw * 64, np.int64)
    want[:skv] = 1
    for bh in range(v["batch"] * v["heads"]):
        cnt = np.zeros(kw * 64, np.int64)
        for s in range(ns):
            bits = part.get(int(rowid(bh, s)))
            if bits is None:
                f.add("split_partition", f"(batch, head) {divmod(bh, v['heads'])}: split {s} "
                                         f"stores no partial [{inst.name}]")
                return
            cnt[bits_to_list(bits)] += 1
        bad = cnt != want
        if bad.any():
            key = int(np.argmax(bad))
            f.add("split_partition", f"(batch, head) {divmod(bh, v['heads'])}: key {key} is in "
                                     f"{int(cnt[key])} splits' partials (want {int(want[key])})"
                                     f" [{inst.name}]")
            return


def _dataflow_blocks(inst: Instance, k: Any) -> List[Tuple[int, int]]:
    """Every query tile of the first and the last (batch, head) pair, whichever grid axis holds
    the query tiles (the causal prefill kernel puts them on y: its longest-first order)."""
    gx, gy, gz = inst.grid
    if tuple(k.grid_symbols[:2]) == ("block_bh", "block_q"):
        return [(bx, by) for bx in sorted({0, gx - 1}) for by in range(gy)]
    if len(k.grid_symbols) > 2:   # (query blocks, heads, batch): first and last (head, batch)
        return [(bx, by, bz) for by, bz in sorted({(0, 0), (gy - 1, gz - 1)})
                for bx in range(gx)]
    return [(bx, by) for by in sorted({0, gy - 1}) for bx in range(gx)]


def _instance_spread(insts: Sequence[Instance]) -> str:
    """Which GQA groups and head counts the instances cover (the domain says so)."""
    groups = sorted({i.values["heads"] // max(1, i.values["kv_heads"]) for i in insts})
    heads = sorted({i.values["heads"] for i in insts})
    return f"GQA groups {groups}, heads {heads} covered"


def verify_attention(k: Any, *, instances: Optional[Sequence[Instance]] = None,
                     arch: Optional[str] = None) -> GateReport:
    """Run every check on an attention kernel's IR; returns the report (``raise_if_failed``).

    The attention entry point, kept for its callers: :func:`verify_on_instances` with the
    kernel's spec (``k.spec``), on the instances its domain names unless ``instances`` are
    given, for the plan's target unless ``arch`` is."""
    if getattr(k, "spec", None) is None:
        raise SpecError(f"attention gate: kernel {k.name} carries no spec (its builder attaches "
                        "one: kernels.amd.kernel_specs)")
    return verify_on_instances(k, k.spec, arch=arch or k.meta["plan"].cfg.arch,
                               instances=instances)


def verify_on_instances(k: Any, spec: KernelSpec, *, arch: str = "gfx942",
                        instances: Optional[Sequence[Instance]] = None) -> GateReport:
    """The engine of the ``instances`` domain: the checks :func:`checks_for` ``spec`` on each
    instance (every block, iteration and thread statically; dataflow on every query tile of
    the first and last (batch, head), or on every block where blocks are not independent or
    the kernel is one of a split pair)."""
    t0 = time.perf_counter()
    roles = Roles.from_spec(spec)
    insts = list(instances) if instances is not None else default_instances(k)
    f = Fail()
    bank_cache: Dict = {}
    points = 0
    widths: Dict[str, int] = {}
    worst = {"read": 1, "write": 1}
    nbank = {"read": 0, "write": 0}
    cov = []
    issues = stores = exchanges = 0
    sim = []
    launches = []
    indep, why = block_independence(k, spec)
    if not indep:
        f.add("block_independence", why)
    for inst in insts:
        st = AttentionStatic(k, inst, arch, f, bank_cache, spec)
        st.run()
        cov.append(st.coverage())
        points += st.points
        widths.update(st.widths)
        for kd in ("read", "write"):
            worst[kd] = max(worst[kd], st.bank_worst[kd])
            nbank[kd] += st.bank_n[kd]
        v = inst.values
        BN = roles.key_tile
        # one step of slack: a block-uniform loop (the NVIDIA split kernel's) may run a step
        # whose keys lie past the last one (zero-filled, masked): they must stay trackable
        kw = max(1, -(-(-(-v["seqlen_kv"] // BN) * BN + BN) // 64))
        every = not indep or roles.partitioned or roles.merged
        blocks = grid_blocks(inst.grid, len(k.grid_symbols)) if every else _dataflow_blocks(inst, k)
        part: Dict[int, np.ndarray] = {}
        for blk in blocks:
            fl = AttentionDataflow(k, inst, blk, f, kw, spec)
            fl.run()
            issues += fl.mfma_issues
            stores += fl.stores
            exchanges += fl.exchanges
            part.update(fl.part_keys)
        if roles.partitioned:
            _check_partition(inst, part, kw, f)
        sim.append(f"{inst.name}: blocks {blocks}")
        launches.append((inst.name, inst.symbols(), blocks))
    wave_doms = check_wave_roles(k, spec, launches, f, roles.query, roles.out) \
        if spec.wave_roles else {}
    lds_total, cap = check_lds_capacity(k, arch, f)
    t1 = time.perf_counter()
    inst_txt = "; ".join(i.describe() for i in insts) + "; " + _instance_spread(insts)
    static_dom = (f"instances [{inst_txt}]: every block x every loop iteration x every thread, "
                  f"every element of every access ({points} points)")
    flow_dom = (f"instances [{inst_txt}]; simulated {'; '.join(sim)} (every query tile of the "
                f"first and last (batch, head); {why}), all loop iterations, all {k.block} "
                f"threads ({issues} wave-level MFMA issues, {exchanges} exchanges, {stores} "
                f"stores checked)")
    doms = {
        "emitted_index_math": static_dom, "in_bounds": static_dom,
        "vector_widths": static_dom + "; widths: " + ", ".join(
            f"{t} {w}-bit" for t, w in sorted(widths.items())),
        "bank_conflicts_lds_read": f"{nbank['read']} (access, iteration) issues of all waves "
                                   f"under the {arch} phase model; worst {worst['read']}-way",
        "bank_conflicts_lds_write": f"{nbank['write']} (access, iteration) issues of all waves "
                                    f"under the {arch} phase model; worst {worst['write']}-way",
        "coverage": "every element of " + "; ".join(cov) + " over the whole grid of each instance",
        "lds_capacity": f"{lds_total} bytes of LDS vs {cap} on {arch}",
        "block_independence": why,
    }
    for c in ("lane_mfma_operands", "cross_lane_reductions", "online_softmax",
              "masking_and_tile_skipping", "lane_accumulator_writeback", "lds_races"):
        doms[c] = flow_dom
    doms["split_partition"] = (f"{flow_dom}; for every (batch, head): the key sets of the "
                               "stored partials (max/sum/O of split s) are disjoint and their "
                               "union is [0, seqlen_kv)")
    doms["reduction_reads_partials"] = (f"{flow_dom}; every stored O / LSE element merged the "
                                        "partials (Op, Mp, Lp) of its own (batch, head) and "
                                        "split, each of the n_splits splits exactly once, O at "
                                        "its own head dim")
    doms.update(wave_doms)
    checks = f.results(checks_for(spec), doms)
    details = {"instances": [i.describe() for i in insts], "bank_worst_ways": worst,
               "access_bits": widths, "lds_bytes": lds_total, "simulated": sim}
    return GateReport(k.name, checks, details, t1 - t0)
