"""Printed-text checks of a warp-specialised attention kernel (piece 5 of
:mod:`kernels.nvidia.wgmma_ws_ir_plan`): the attention reader's checks and the per-role (TMA)
checks on **one** text.

The text holds two kinds of statements.  The attention statements (index lets, the role and
leader branches with their loops, wgmma issue / commit / wait, the softmax lines, masks, P
conversion, write-back) are read back by :func:`kernels.verify.printed.verify_printed` against
a view of the IR without its role / mbarrier / TMA statements; :class:`RoleBranch` and
:class:`LeaderOnly` stay in that view as the ``if`` statements they are, so their conditions
are compared with C semantics like every other branch.  The role / mbarrier / TMA lines
(mbarrier arrays, their 32-bit addresses and initialisation, the init fence and its
``__syncthreads``, ``setmaxnreg``, waits with their parities, expect-tx byte counts, per-warp
arrivals after their ``__syncwarp``, 4-D box loads with their coordinates, tensor-map
prefetches (the map each names), the ping-pong's
named barriers ``lg_named_bar`` / ``lg_named_arrive`` with their ids and thread counts; the
``if`` on the consumer index around a hand-over stays a branch of the attention reader's) are
read by
:func:`kernels.verify.printed_tma.printed_tma_checks` on the whole text, against the whole
IR (every call in program order -- a wait moved past the wgmma it guards is refused -- and
every index expression of those lines read back with C semantics).

The attention reader sees the text with exactly those role lines blanked (line numbers kept):
each blanked line must match one of the anchored forms the TMA printer
(:func:`kernels.printer.cuda_tma.tma_stmt`) prints, and the number blanked of each form must
equal the number of IR statements that print it -- a stray wait, arrive, box or
``__syncthreads`` is refused, not hidden, and any other line is left to the attention reader,
which refuses what it does not know.
"""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from layoutalg.verify.result import CheckResult

from ..ir.core import If, Loop, walk
from ..ir.nvidia_tma import (TMA_STATEMENTS, MbarrierArrive, MbarrierExpectTx, MbarrierInit,
                             MbarrierInitFence, MbarrierWait, NamedBarrier, Setmaxnreg,
                             TmaLoad, TmaPrefetch, VarInit, VarSet)
from ..ir.nvidia_cp_ring import CpAsyncArrive
from .gate_common import Fail
from .printed import PRINTED_CHECKS, verify_printed
from .printed_tma import printed_tma_checks

__all__ = ["verify_printed_ws", "attach_printed_ws", "role_lines"]

_Hit = Callable[[Any], bool]


def _is(*kinds: type) -> _Hit:
    return lambda s: isinstance(s, kinds)


def _arrive(per_warp: bool) -> _Hit:
    return lambda s: isinstance(s, MbarrierArrive) and s.per_warp == per_warp


def _named(arrive: bool) -> _Hit:
    return lambda s: isinstance(s, NamedBarrier) and s.arrive == arrive


#: (form of a printed role line, the IR statements printing one such line each)
_FORMS: Tuple[Tuple[str, re.Pattern, _Hit], ...] = (
    ("mbarrier array", re.compile(r"__shared__ __align__\(8\) unsigned long long lg_bar_\w+"
                                  r"\[\d+\];"), _is(MbarrierInit)),
    ("mbarrier address", re.compile(r"const lg_u32 lg_bar_\w+_u32 = lg_smem_u32\(lg_bar_\w+\);"),
     _is(MbarrierInit)),
    ("mbarrier init", re.compile(r"if \(tid == 0\) \{ for \(int i = 0; i < \d+; \+\+i\) "
                                 r"lg_mbar_init\(.*\); \}"), _is(MbarrierInit)),
    ("init fence", re.compile(r"if \(tid == 0\) lg_mbar_init_fence\(\);"),
     _is(MbarrierInitFence)),
    ("setmaxnreg", re.compile(r"lg_setmaxnreg_(?:inc|dec)<\d+>\(\);"), _is(Setmaxnreg)),
    ("expect-tx", re.compile(r"lg_mbar_expect_tx\(.*\);"), _is(MbarrierExpectTx)),
    ("wait", re.compile(r"lg_mbar_wait\(.*\);"), _is(MbarrierWait)),
    ("per-warp arrive", re.compile(r"if \(\(tid & 31\) == 0\) lg_mbar_arrive\(.*\);"),
     _arrive(True)),
    ("arrive", re.compile(r"lg_mbar_arrive\(.*\);"), _arrive(False)),
    ("box load", re.compile(r"lg_tma_load_\dd\(.*\);"), _is(TmaLoad)),
    ("tensormap prefetch", re.compile(r"lg_tma_prefetch\(\w+\);"), _is(TmaPrefetch)),
    ("named barrier sync", re.compile(r"lg_named_bar\(.*\);"), _named(False)),
    ("named barrier arrive", re.compile(r"lg_named_arrive\(.*\);"), _named(True)),
    ("cp.async arrive", re.compile(r"lg_cp_mbar_arrive\(.*\);"), _is(CpAsyncArrive)),
)
#: the statements the role / mbarrier reader takes (the attention reader's view drops them)
_ROLE_STATEMENTS = TMA_STATEMENTS + (CpAsyncArrive, VarInit, VarSet)
#: lines printed with the one before them: ``__syncthreads`` after the init fence,
#: ``__syncwarp`` before a per-warp arrive
_WITH_NEXT = {"per-warp arrive": ("__syncwarp();", -1), "init fence": ("__syncthreads();", 1)}


def role_lines(k: Any, source: str, f: Fail) -> str:
    """``source`` with its role / mbarrier / TMA lines blanked (see the module docstring);
    a count of a form differing from the IR's, or a companion line missing, is added to
    ``f`` as ``printed_source``."""
    lines = source.split("\n")
    stmts = list(walk(k.body))
    forms = _FORMS + _carried_forms(stmts)
    supported = [s for s in stmts if isinstance(s, _ROLE_STATEMENTS)]
    for s in supported:
        if not any(hit(s) for _n, _p, hit in forms):
            f.add("printed_source", f"{type(s).__name__}: no printed form the warp-specialised "
                                    "text reader knows")
    for name, pat, hit in forms:
        at = [i for i, ln in enumerate(lines) if pat.fullmatch(ln.strip())]
        want = sum(1 for s in stmts if hit(s))
        if len(at) != want:
            f.add("printed_source", f"{len(at)} printed {name} lines; the IR has {want} such "
                                    "statements")
        for i in at:
            lines[i] = ""
            if name in _WITH_NEXT:
                text, step = _WITH_NEXT[name]
                j = i + step
                if not (0 <= j < len(lines)) or lines[j].strip() != text:
                    f.add("printed_source", f"line {i + 1}: the {name} is not printed with "
                                            f"{text!r} {'after' if step > 0 else 'before'} it")
                else:
                    lines[j] = ""
    return "\n".join(lines)


def _carried_forms(stmts: Sequence[Any]) -> Tuple[Tuple[str, re.Pattern, _Hit], ...]:
    """The printed forms of the loop-carried variables (``int g0 = ...;`` / ``g0 = ...;``,
    :mod:`kernels.printer.cuda_tma`), one pair per name the IR declares; their expressions are
    read back by :func:`~.printed_tma.printed_tma_checks` with the role lines."""
    out = []
    for n in dict.fromkeys(s.name for s in stmts if isinstance(s, VarInit)):
        out += [(f"{n} declaration", re.compile(rf"int {n} = .*;"),
                 lambda s, n=n: isinstance(s, VarInit) and s.name == n),
                (f"{n} assignment", re.compile(rf"{n} = .*;"),
                 lambda s, n=n: isinstance(s, VarSet) and s.name == n)]
    return tuple(out)


def carried_reading(k: Any, view: Any, text: str, instances: Sequence[Any],
                    f: Fail) -> Dict[str, CheckResult]:
    """The attention reader's ``printed_source`` and ``index_ranges`` of a kernel with
    loop-carried variables (``VarInit``; none: nothing): the reader does not run the loops
    that carry them, so it reads the text with each one a value of the view only (a scalar
    the signature does not have), at the ends of the range the kernel declares and one past
    the start (:func:`~.ring_carried.declared_ranges`; the engine checks every value the
    kernel gives it against that range).  A carried variable without a declared range is
    refused."""
    from ..ir.attention import ScalarParam
    from .attention_static import Instance
    from .ring_carried import declared_ranges
    names = sorted({s.name for s in walk(k.body) if isinstance(s, VarInit)})
    if not names:
        return {}
    runs: List[Any] = []
    for i in instances:
        rng = declared_ranges(k, i.values, i.grid)
        if set(names) - set(rng):
            f.add("printed_source", f"loop-carried {sorted(set(names) - set(rng))} without a "
                                    "declared range: the text reader cannot read it")
            return {}
        samples = [[v for v in sorted({lo, lo + 1, hi}) if lo <= v <= hi]
                   for lo, hi in (rng[n] for n in names)]
        for vals in itertools.product(*samples):
            tag = ", ".join(f"{n}={v}" for n, v in zip(names, vals))
            runs.append(Instance(f"{i.name}, {tag}", dict(i.values, **dict(zip(names, vals))),
                                 i.grid, i.causal))
    v = copy.copy(view)
    v.scalars = list(view.scalars) + [ScalarParam(n) for n in names]
    res = verify_printed(v, text, instances=runs)
    return {n: res[n] for n in ("printed_source", "index_ranges")}


def _without(body: Sequence[Any], drop: Callable[[Any], bool]) -> List[Any]:
    """``body`` without the statements ``drop`` names, at every depth (the others copied)."""
    out: List[Any] = []
    for s in body:
        if drop(s):
            continue
        if isinstance(s, (If, Loop)):
            s = copy.copy(s)
            s.body = _without(s.body, drop)
        out.append(s)
    return out


def _view(k: Any, drop: Callable[[Any], bool]) -> Any:
    v = copy.copy(k)
    v.body = _without(k.body, drop)
    return v


def verify_printed_ws(k: Any, source: str, *,
                      instances: Sequence[Any]) -> Dict[str, CheckResult]:
    """``printed_source``, ``declarations`` and ``index_ranges`` of the printed text of the
    warp-specialised attention kernel ``k`` (the module docstring): the attention reader's
    checks at ``instances`` and the per-role text checks, each check holding only if both
    hold."""
    f = Fail()
    text = role_lines(k, source, f)
    view = _view(k, lambda s: isinstance(s, _ROLE_STATEMENTS))
    attention = verify_printed(view, text, instances=instances)
    attention.update(carried_reading(k, view, text, instances, f))
    tma = printed_tma_checks(k, source)
    out: Dict[str, CheckResult] = {}
    for name in PRINTED_CHECKS:
        res = attention[name]
        why: Optional[str] = f.first.get(name) or \
            (None if res.holds else res.counterexample) or tma.first.get(name)
        out[name] = CheckResult(
            check=name, holds=why is None, method=res.method,
            domain=(res.domain + ("; and the role / mbarrier / TMA lines (each form counted "
                                  "against the IR; calls in order, their barriers, parities, "
                                  "byte counts and box coordinates read back)"
                                  if name != "index_ranges" else "")),
            counterexample=why)
    return out


def attach_printed_ws(report: Any, k: Any, source: str, *, instances: Sequence[Any]) -> Any:
    """Add :func:`verify_printed_ws`'s results to ``report.checks`` and return it."""
    report.checks.update(verify_printed_ws(k, source, instances=instances))
    return report
