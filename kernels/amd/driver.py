"""One build driver for the AMD kernels (issue 13, item 4).

Every AMD builder runs the same sequence: plan -> IR -> gate (or a skipped report) -> print HIP
-> the printed-source checks (:func:`kernels.verify.printed.attach_printed_checks`) -> the built
program -> ``raise_if_failed``.  This module holds that sequence once.  A kernel family says
what differs, in a :class:`KernelFamily`: how to plan (optional), how to build the IR, which
verifier gates it, which printer prints it and on which instances its printed text is checked.
A program of several kernels compiled as one source (the split-KV pair) is built from several
families and a ``link`` check that relates them.

Adding a kernel family needs a builder, a printer choice and a verifier, not another copy of
the sequence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["KernelFamily", "Stages", "build_program", "build_stages"]


@dataclass(frozen=True)
class KernelFamily:
    """What one kernel family plugs into the driver.

    ``build_ir`` takes the plan (or, without ``plan``, the configuration) and returns the IR;
    ``verifier`` gates the IR and returns a report (``checks``, ``holds``, ``raise_if_failed``);
    ``printer`` prints the IR as HIP.  ``instances`` names the launches the printed text is
    checked on (``None``: checked symbolically over every launch, as the GEMM's block
    translation argument allows).  ``plan`` (optional) turns the configuration into a plan;
    without it the plan is the IR's ``meta["plan"]``."""

    build_ir: Callable[[Any], Any]
    verifier: Callable[[Any], Any]
    printer: Callable[[Any], str]
    plan: Optional[Callable[[Any], Any]] = None
    instances: Optional[Callable[[Any], Sequence[Any]]] = None


@dataclass
class Stages:
    """One kernel after the driver's stages: its plan, IR, printed source, gate report and the
    seconds of each stage (``plan_s`` when the family plans, ``ir_s``, ``gate_s``, ``emit_s``;
    ``printed_s`` once the printed checks ran)."""

    plan: Any
    ir: Any
    source: str
    verification: Any
    timings: Dict[str, float] = field(default_factory=dict)


def _skipped(ir: Any) -> Any:
    """The report of an unverified build (``verify=False``, for tests of the gates): no checks,
    and says so."""
    from ..verify.gate import GateReport
    return GateReport(ir.name, {}, {"skipped": True})


def build_stages(family: KernelFamily, cfg: Any, *, verify: bool = True) -> Stages:
    """Plan, build the IR, gate it (or record that it was not gated) and print it.  The
    printed-source checks are not run here: they need the source the program compiles
    (:func:`build_program` runs them)."""
    timings: Dict[str, float] = {}
    t = time.perf_counter()
    if family.plan is not None:
        plan = family.plan(cfg)
        now = time.perf_counter()
        timings["plan_s"], t = now - t, now
        ir = family.build_ir(plan)
    else:
        ir = family.build_ir(cfg)
        plan = ir.meta["plan"]
    now = time.perf_counter()
    timings["ir_s"], t = now - t, now
    rep = family.verifier(ir) if verify else _skipped(ir)
    now = time.perf_counter()
    timings["gate_s"], t = now - t, now
    src = family.printer(ir)
    timings["emit_s"] = time.perf_counter() - t
    return Stages(plan, ir, src, rep, timings)


def _check_printed(family: KernelFamily, st: Stages, source: str) -> None:
    """The printed text is the checked object too: add ``printed_source``, ``declarations``
    and ``index_ranges`` of ``source`` (the text the program compiles) to the kernel's
    report."""
    from ..verify.printed import attach_printed_checks
    t = time.perf_counter()
    instances = None if family.instances is None else family.instances(st.ir)
    attach_printed_checks(st.verification, st.ir, source, instances=instances)
    st.timings["printed_s"] = time.perf_counter() - t


def build_program(families: Sequence[KernelFamily], cfg: Any,
                  make: Callable[[List[Stages]], Any], *, verify: bool = True,
                  link: Optional[Callable[[Any], None]] = None) -> Any:
    """Build a program of one or more kernels and return it, verified.

    Each family's kernel goes through :func:`build_stages`; ``make`` turns the stages into the
    built program (a :class:`kernels.built.BuiltProgram`, whose ``source`` is what compiles);
    with ``verify``, each kernel's printed text is then checked in that source, ``link`` (for
    programs of several kernels) checks what relates them, and a failed check raises
    :class:`kernels.verify.gate.VerificationError`.  ``verify=False`` is for tests of the
    gates: nothing is checked and the report says so."""
    stages = [build_stages(f, cfg, verify=verify) for f in families]
    program = make(stages)
    if verify:
        for f, st in zip(families, stages):
            _check_printed(f, st, program.source)
        if link is not None:
            link(program)
        program.verification.raise_if_failed()
    return program
