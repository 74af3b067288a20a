"""The verifier's path for a kernel whose spec declares a :class:`~.spec.TicketProtocol`
(:func:`kernels.verify.verifier.verify` calls :func:`verify_ticket`), and the refusal of ticket
statements in a kernel whose spec does not (:func:`require_declared_ticket`).

The report's checks are :func:`kernels.verify.rules.checks_for` of the spec: ``ticket_parts``
(each part verified by the one verifier, its report kept in ``details["parts"]``), the five
rules of :mod:`.ticket_rules` (they stop at the first failure: that rule fails with its
counterexample; the others, except a ``ticket_structure`` proved before it, are reported
failed as "not evaluated", never as holding),
and with ``source`` ``printed_ticket``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

from layoutalg.verify.result import CheckResult

from ..errors import KernelError
from ..ir.core import walk
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, ThreadFence
from .gate import GateReport
from .spec import KernelSpec, SpecError
from .ticket_rules import TICKET_RULES, TicketProtocolError, check_ticket_protocol

__all__ = ["verify_ticket", "require_declared_ticket", "TICKET_STATEMENTS"]

TICKET_STATEMENTS = (ThreadFence, AtomicTicket, LastArrival, CounterReset)


def require_declared_ticket(kernel_ir: Any, spec: KernelSpec) -> None:
    """Ticket statements in a kernel whose spec declares no ticket protocol: SpecError (the
    ticket rules would not run).  A warpgroup-role spec needs none: its per-role model runs the
    ticket rules on every kernel holding a ticket (:mod:`.gate_tma_ticket`)."""
    if spec.ticket is not None or spec.warpgroup_roles:
        return
    hit = next((s for s in walk(getattr(kernel_ir, "body", []))
                if isinstance(s, TICKET_STATEMENTS)), None)
    if hit is not None:
        raise SpecError(f"spec {spec.name}: kernel {getattr(kernel_ir, 'name', '?')} holds a "
                        f"{type(hit).__name__} but its spec declares no ticket protocol; give "
                        "KernelSpec(ticket=TicketProtocol(...)) so the ticket rules run")


def _result(name: str, holds: bool, domain: str, cex: Any = None) -> CheckResult:
    return CheckResult(check=name, holds=holds, method="exhaustive", domain=domain,
                       counterexample=None if holds else cex)


def verify_ticket(kernel_ir: Any, spec: KernelSpec, arch: str, source: Optional[str],
                  instances: Optional[Sequence[Any]], verify: Callable[..., GateReport]
                  ) -> GateReport:
    """The checks of the module docstring for ``kernel_ir`` at the spec's instances (or
    ``instances``); ``verify`` is the one verifier, which proves each part (passed in by
    :func:`kernels.verify.verifier.verify`: no import of it here, so no cycle)."""
    tp = spec.ticket
    inst = list(instances) if instances is not None else list(spec.domain.instances(kernel_ir))
    where = f"{len(inst)} instances ({', '.join(getattr(i, 'name', '?') for i in inst)})"
    checks: Dict[str, CheckResult] = {}
    details: Dict[str, Any] = {"parts": {}}
    try:
        parts = list(tp.parts(kernel_ir))
        bad = []
        for name, ir, text in parts:
            rep = verify(ir, arch=arch, source=text)
            details["parts"][name] = rep
            bad += [f"{name}.{c}" for c, r in rep.checks.items() if not r.holds]
        checks["ticket_parts"] = _result("ticket_parts", not bad and bool(parts),
                                         f"parts {[p[0] for p in parts]}, each on its own "
                                         "spec's domain", f"failing: {bad or 'no parts'}")
    except KernelError as e:
        checks["ticket_parts"] = _result("ticket_parts", False, "the parts", str(e))
    counters = {s.counter for s in walk(kernel_ir.body) if isinstance(s, (AtomicTicket,
                                                                            CounterReset))}
    try:
        if counters - {tp.counter}:
            raise TicketProtocolError("ticket_structure", f"tickets on {sorted(counters)}, the "
                                      f"spec's counter is {tp.counter!r}")
        details["ticket"] = check_ticket_protocol(kernel_ir, inst, tp.partials, tp.output)
        for r in TICKET_RULES:
            checks[r] = _result(r, True, where)
    except TicketProtocolError as e:
        # the structure is proved whole before the per-instance rules, which interleave
        for r in TICKET_RULES:
            done = r == "ticket_structure" and e.rule != r
            checks[r] = _result(r, done, where, str(e) if r == e.rule else
                                f"not evaluated on every instance: {e.rule} failed first")
    if source is not None:
        try:
            tp.printed(kernel_ir, source)
            checks["printed_ticket"] = _result("printed_ticket", True, "the printed ticket lines "
                                               f"at {where}")
        except KernelError as e:
            checks["printed_ticket"] = _result("printed_ticket", False, "the printed text",
                                               str(e))
    return GateReport(getattr(kernel_ir, "name", "?"), checks, details)
