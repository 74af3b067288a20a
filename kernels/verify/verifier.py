"""One entry point: verify a kernel's IR (and, given, its printed source) against its spec.

:func:`verify` runs the checks the spec calls for (:data:`kernels.verify.rules.RULES`) over the
spec's domain:

* ``every_block``: :func:`kernels.verify.gate.verify_every_block` - the static pass over every
  block (by the block-translation lemma where its symbolic conditions hold, else by
  enumeration) and the dataflow pass on representative blocks;
* ``instances``: :func:`kernels.verify.attention_gate.verify_on_instances` - every block,
  iteration and thread of each instance the domain names;
* ``launches``: :func:`kernels.verify.concrete_instances.verify_at_instances` - each launch
  the domain names substituted into the IR and proved by the every-block engine.

A spec declaring a ticket protocol (``KernelSpec.ticket``) selects
:func:`kernels.verify.ticket_verify.verify_ticket` (its parts, the ticket rules, the printed
ticket); ticket statements in a kernel whose spec declares none are refused (SpecError).  A
spec with ``warpgroup_roles`` and a softmax (warp-specialised attention) selects
:func:`kernels.verify.attention_ring.verify_ws_attention`, and its printed text
:mod:`kernels.verify.printed_ws`.

With ``source``, the printed-source rules (``printed_source``, ``declarations``,
``index_ranges``) are added, on the same domain.  The report's domains say how each check was
covered.  ``verify_kernel`` and ``verify_attention`` are this function for the kernels' own
specs, kept under their old names.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .attention_gate import verify_on_instances
from .gate import GateReport, verify_every_block
from .printed import attach_printed_checks
from .spec import KernelSpec, SpecError
from .target_arch import resolve_arch
from .ticket_verify import require_declared_ticket, verify_ticket

__all__ = ["verify"]


def verify(kernel_ir: Any, spec: Optional[KernelSpec] = None, arch: Optional[str] = None, *,
           source: Optional[str] = None, instances: Optional[Sequence[Any]] = None,
           translation: bool = True,
           blocks: Optional[List[Tuple[int, int]]] = None) -> GateReport:
    """Verify ``kernel_ir`` against ``spec`` (default: the spec its builder attached) for
    ``arch`` (default: the kernel's own, else gfx942; NVIDIA statements at an AMD arch are
    refused: :func:`~.target_arch.resolve_arch`); returns the report (``raise_if_failed`` raises
    :class:`~kernels.verify.gate.VerificationError` with the counterexamples).

    ``instances`` replaces an ``instances`` domain's own launches; ``translation`` / ``blocks``
    tune the ``every_block`` engine (``translation=False``: enumerate every block)."""
    spec = spec if spec is not None else getattr(kernel_ir, "spec", None)
    if spec is None:
        raise SpecError(f"kernel {getattr(kernel_ir, 'name', kernel_ir)!r}: no spec given and "
                        "none attached (Kernel.spec); describe what it computes with a "
                        "kernels.verify.spec.KernelSpec")
    if not isinstance(spec, KernelSpec):
        raise SpecError(f"verify: spec must be a KernelSpec, got {type(spec).__name__}")
    arch = resolve_arch(kernel_ir, arch)
    require_declared_ticket(kernel_ir, spec)
    if spec.ticket is not None:
        return verify_ticket(kernel_ir, spec, arch, source, instances, verify)
    if spec.warpgroup_roles and spec.softmax is not None:
        return _verify_ws_attention(kernel_ir, spec, arch, source, instances)
    if spec.warpgroup_roles:
        return _verify_roles(kernel_ir, spec, arch, source, instances)
    _no_carried_variables(kernel_ir, spec)
    if spec.domain.kind == "launches":
        from .concrete_instances import verify_at_instances
        if "split" in getattr(kernel_ir, "meta", {}):
            # a split kernel's fp32 partials, summed by its reduce kernel (gate_split_partials)
            from .gate_split_partials import verify_split_at_instances
            return verify_split_at_instances(kernel_ir, spec, arch, source, instances)
        return verify_at_instances(kernel_ir, spec, arch, source, instances)
    if spec.domain.kind == "every_block":
        if spec.wave_roles:
            raise SpecError(f"spec {spec.name}: wave_roles are checked per wave on instances "
                            "(Domain.on_instances); the every-block engine has no wave-phase "
                            "model")
        if instances is not None:
            raise SpecError(f"spec {spec.name}: instances given, but its domain is every block")
        report = verify_every_block(kernel_ir, spec, arch=arch, blocks=blocks,
                                    translation=translation)
        printed_on = None
    else:
        report = verify_on_instances(kernel_ir, spec, arch=arch, instances=instances)
        printed_on = list(instances) if instances is not None else \
            list(spec.domain.instances(kernel_ir))
    if source is not None:
        attach_printed_checks(report, kernel_ir, source, instances=printed_on)
    return report


def _no_carried_variables(kernel_ir: Any, spec: KernelSpec) -> None:
    """The lockstep engines read a ``Let`` as a function of the loop indices (closed forms,
    block translation); a loop-carried variable (``VarInit`` / ``VarSet``) is not one, so
    only the per-role model runs kernels holding one."""
    from ..ir.core import walk
    from ..ir.nvidia_tma import VarInit, VarSet
    hit = next((s for s in walk(getattr(kernel_ir, "body", [])) if isinstance(s, (VarInit,
                                                                                   VarSet))),
               None)
    if hit is not None:
        raise SpecError(f"spec {spec.name}: {type(hit).__name__} {hit.name!r} is a loop-carried "
                        "variable, which only the per-role phase model runs (a spec with "
                        "warpgroup_roles); write it as a Let of the loop indices here")


def _verify_ws_attention(kernel_ir: Any, spec: KernelSpec, arch: str, source: Optional[str],
                         instances: Optional[Sequence[Any]]) -> GateReport:
    """A warp-specialised attention kernel (producer / consumer roles and a softmax): the
    engine of :mod:`.attention_ring` on the spec's instances (or ``instances``); with
    ``source``, the printed-text checks of :mod:`.printed_ws` (the attention reader's and the
    per-role text checks on the one text) at the same instances."""
    from .attention_ring import verify_ws_attention
    from .attention_static import default_instances
    from .printed_ws import attach_printed_ws
    if spec.domain.kind != "instances":
        raise SpecError(f"spec {spec.name}: warpgroup_roles are checked on instances")
    report = verify_ws_attention(kernel_ir, instances=instances, arch=arch)
    if source is not None:
        insts = list(instances) if instances is not None else default_instances(kernel_ir)
        attach_printed_ws(report, kernel_ir, source, instances=insts)
    return report


def _verify_roles(kernel_ir: Any, spec: KernelSpec, arch: str, source: Optional[str],
                  instances: Optional[Sequence[Any]]) -> GateReport:
    """A warpgroup-specialised kernel: the per-role phase model at the spec's instances (or
    ``instances``), and with ``source`` the printed-text checks of :mod:`.printed_tma`."""
    from .gate_tma import verify_roles
    from .printed_tma import attach_printed_tma
    if spec.domain.kind != "instances":
        raise SpecError(f"spec {spec.name}: warpgroup_roles are checked on instances "
                        "(Domain.on_instances: runtime sizes and CTA counts)")
    inst = list(instances) if instances is not None else list(spec.domain.instances(kernel_ir))
    report = verify_roles(kernel_ir, spec, arch, inst)
    if source is not None:
        f = None
        if "reduce" in getattr(kernel_ir, "meta", {}):
            # a split kernel with its reduce kernel printed after it (gate_split_reduce)
            from .gate_common import Fail
            from .gate_split_reduce import check_printed_reduce
            f = Fail()
            source = check_printed_reduce(f, kernel_ir, source)
        attach_printed_tma(report, kernel_ir, source)
        if f is not None and f.first:
            report.checks.update(f.results(("printed_source",), {
                "printed_source": "the printed text: split kernel, then its reduce kernel"}))
    return report
