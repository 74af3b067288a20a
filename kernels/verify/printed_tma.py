"""Printed-text checks of a warpgroup-specialised (TMA) kernel, added to its per-role report.

``declarations``: the printed helpers are exactly the texts the PTX rules were written against
(:data:`kernels.nvidia.tma.TMA_HELPERS`, the wgmma helpers and one wrapper per wgmma shape of
:mod:`kernels.nvidia.wgmma_prelude`, each defined once); the signature's parameters are the IR's
(tensor maps ``const void*``, sizes ``int``); ``__launch_bounds__(threads, 1)`` (the
``setmaxnreg`` budgets are shares of one CTA's register file); every shared array is carved at
a 1024-byte aligned offset with the IR's element count, and every mbarrier array has the IR's
length.

``printed_source``: every TMA / mbarrier / wgmma / named-barrier call of the IR appears in the
text, in program order, with the IR's barrier, tensor map, buffer and constant arguments (the
index expressions are the printer's ``to_c`` of the IR's, the one expression printer the other
kernels' ``printed_source`` checks re-evaluate).
"""

from __future__ import annotations

import re
from typing import Any, List

from layoutalg.verify.result import CheckResult

from ..ir.core import walk
from ..ir.nvidia_tma import (BulkCommit, BulkWait, MbarrierArrive, MbarrierExpectTx,
                             MbarrierInit, MbarrierWait, NamedBarrier, Setmaxnreg, TensorMap,
                             TmaLoad, TmaStore)
from ..ir.nvidia_wgmma import WgmmaMma
from ..nvidia.tma import TMA_HELPERS
from ..nvidia.wgmma_prelude import GMMA_DESC, HELPERS, wgmma_fn, wgmma_wrapper
from .gate_common import Fail

__all__ = ["attach_printed_tma", "printed_tma_checks"]

_CALLS = {TmaLoad: "lg_tma_load_2d", TmaStore: "lg_tma_store_2d", MbarrierWait: "lg_mbar_wait",
          MbarrierExpectTx: "lg_mbar_expect_tx", MbarrierArrive: "lg_mbar_arrive",
          NamedBarrier: "lg_named_bar", BulkCommit: "lg_bulk_commit",
          WgmmaMma: "lg_wgmma_m64n", Setmaxnreg: "lg_setmaxnreg_"}


def _expected(s: Any) -> List[str]:
    """Fragments the printed call of ``s`` must contain."""
    if isinstance(s, TmaLoad):
        return [f"lg_tma_load_2d(lg_smem_u32({s.dst} + (", f", {s.tmap.name}, ",
                f"&lg_bar_{s.bar}["]
    if isinstance(s, TmaStore):
        return [f"lg_tma_store_2d({s.tmap.name}, lg_smem_u32({s.src} + ("]
    if isinstance(s, MbarrierWait):
        return [f"lg_mbar_wait(lg_smem_u32(&lg_bar_{s.bar}["]
    if isinstance(s, MbarrierExpectTx):
        return [f"lg_mbar_expect_tx(lg_smem_u32(&lg_bar_{s.bar}[", f", {int(s.bytes)}u)"]
    if isinstance(s, MbarrierArrive):
        return [f"lg_mbar_arrive(lg_smem_u32(&lg_bar_{s.bar}["]
    if isinstance(s, NamedBarrier):
        return ["lg_named_bar(", f", {s.threads})"]
    if isinstance(s, BulkCommit):
        return ["lg_bulk_commit()"]
    if isinstance(s, Setmaxnreg):
        return [f"lg_setmaxnreg_{'inc' if s.inc else 'dec'}<{s.regs}>()"]
    if isinstance(s, WgmmaMma):
        return [f"{wgmma_fn(s.atom.dtype, s.atom.n, s.trans_b)}(&{s.acc.frag.name}[0], "
                f"lg_gmma_desc(0x{s.a.desc.constant_bits():016x}ull, {s.a.buf}, ",
                f"lg_gmma_desc(0x{s.b.desc.constant_bits():016x}ull, {s.b.buf}, "]
    return []


def printed_tma_checks(k: Any, source: str) -> Fail:
    f = Fail()
    # ---- declarations ----------------------------------------------------------------------
    ms = [s for s in walk(k.body) if isinstance(s, WgmmaMma)]
    helpers = [("TMA helpers", TMA_HELPERS)] + ([("wgmma helpers", HELPERS),
                                                 ("descriptor helper", GMMA_DESC)] if ms else [])
    for key in sorted({(m.atom.dtype, m.atom.n, m.trans_b) for m in ms}):
        helpers.append((wgmma_fn(*key), wgmma_wrapper(wgmma_fn(*key), *key)))
    for what, text in helpers:
        n = source.count(text)
        if n != 1:
            f.add("declarations", f"the {what} are printed {n} times, not once with the text the "
                                  "rules were written against")
    m = re.search(r'__launch_bounds__\((\d+)(?:, (\d+))?\)\s+(\w+)\(([^)]*)\)', source)
    if m is None or m.group(3) != k.name:
        f.add("declarations", f"no __launch_bounds__ signature of {k.name}")
        return f
    if int(m.group(1)) != k.block or m.group(2) != "1":
        f.add("declarations", f"__launch_bounds__({m.group(1)}, {m.group(2)}); the IR has "
                              f"{k.block} threads and one CTA per SM (setmaxnreg)")
    got = [p.strip() for p in m.group(4).split(",")]
    want = [(f"const void* __restrict__ {p.name}" if isinstance(p, TensorMap) else
             f"int {p.name}" if getattr(p, "ctype", None) == "int" else None) for p in k.params]
    if got != want:
        f.add("declarations", f"printed parameters {got}; the IR's are {want}")
    at = 0
    for s in k.shared:
        line = re.search(rf"lg_u16\* const {s.name} = reinterpret_cast<lg_u16\*>\(lg_smem \+ "
                         rf"(\d+)\);  // (\d+) x", source)
        if line is None or int(line.group(1)) % 1024 or int(line.group(2)) != s.count or \
                int(line.group(1)) < at:
            f.add("declarations", f"shared array {s.name}: printed "
                                  f"{line.group(0) if line else 'nowhere'}; the IR has "
                                  f"{s.count} elements at a 1024-byte aligned offset >= {at}")
        at = int(line.group(1)) + 2 * s.count if line else at
    for s in walk(k.body):
        if isinstance(s, MbarrierInit) and \
                f"unsigned long long lg_bar_{s.bar}[{s.n}];" not in source:
            f.add("declarations", f"mbarrier array {s.bar}[{s.n}] is not declared")
    # ---- printed_source ----------------------------------------------------------------------
    body = source[m.end():]
    pos = 0
    for s in walk(k.body):
        frags = _expected(s)
        if not frags:
            continue
        i = body.find(frags[0], pos)
        end = body.find(";", i) if i >= 0 else -1
        line = body[i:end] if i >= 0 else ""
        if i < 0 or not all(x in line for x in frags[1:]):
            f.add("printed_source", f"{type(s).__name__} {getattr(s, 'tag', '')}: no printed "
                                    f"call {frags} after offset {pos} of the kernel body")
            break
        pos = end
    return f


def attach_printed_tma(report: Any, k: Any, source: str) -> None:
    """Add ``declarations`` and ``printed_source`` to ``report`` (a GateReport)."""
    f = printed_tma_checks(k, source)
    for name in ("printed_source", "declarations"):
        ok = name not in f.first
        report.checks[name] = CheckResult(
            check=name, holds=ok, method="exhaustive",
            domain="the printed text: helpers, signature, shared arrays, calls in order",
            counterexample=None if ok else f.first[name])
