"""Verify a runtime-size kernel with the every-block engine, one concrete launch at a time.

A GEMM whose sizes and strides are kernel arguments (``k.scalars``: ``M``, ``N``, ``K``,
``lda``, ...; the IR-built ``cp.async`` GEMMs, :mod:`kernels.nvidia.wgmma_rt_ir`) has no
compile-time grid.  :func:`verify_at_instances` proves it at **instances**: for each, every
runtime symbol in every statement (offsets, predicates, coordinates, ``Let`` and loop bounds,
the origin layouts' shapes and strides) is replaced by the instance's value
(:func:`concretize`), and the resulting kernel, with the instance's grid and a spec of the
instance's sizes, goes through the every-block engine (:func:`kernels.verify.gate
.verify_every_block`, what :func:`kernels.verify.verify` runs for such a spec: every
block, loop iteration and thread statically; dataflow on every block, since a grouped raster
is no block translation).  The printed text is then checked once against the runtime IR at
all instances (:func:`kernels.verify.printed.verify_printed`: the printed expressions evaluated
at the instances' argument values).  A check holds when it holds at every instance; its domain
names them.  What is proved is exactly those launches: the instances must hit every path (edge
tiles in M, N and K, odd strides, partial raster groups), and the builders say which they use.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import sympy

from layoutalg import ComposedLayout, Layout
from layoutalg.verify.result import CheckResult

from ..ir.core import Frag, Kernel, Regs, sym
from .gate import GateReport, verify_every_block
from .printed import verify_printed
from .spec import Dim, Domain, KernelSpec, SpecError

__all__ = ["RuntimeInstance", "concretize", "spec_at", "verify_at_instances"]


@dataclasses.dataclass(frozen=True)
class RuntimeInstance:
    """One launch: the runtime arguments' ``values`` and the ``grid`` (x, y, z)."""

    name: str
    values: Dict[str, int]
    grid: Tuple[int, int, int]

    def describe(self) -> str:
        return f"{self.name}: " + ", ".join(f"{k}={v}" for k, v in self.values.items()) + \
            f", grid {'x'.join(map(str, self.grid))}"


def _subst(x: Any, vals: Dict[Any, int]) -> Any:
    if isinstance(x, sympy.Basic):
        v = x.xreplace(vals)
        return int(v) if isinstance(v, int) or getattr(v, "is_Integer", False) else v
    if isinstance(x, (Frag, Regs, str, int, float, bool)) or x is None:
        return x
    if isinstance(x, tuple):
        return tuple(_subst(y, vals) for y in x)
    if isinstance(x, list):
        return [_subst(y, vals) for y in x]
    if isinstance(x, ComposedLayout):
        return ComposedLayout(x.outer, x.offset, _subst(x.inner, vals))
    if isinstance(x, Layout):
        return Layout(_subst(x.shape, vals), _subst(x.stride, vals))
    if dataclasses.is_dataclass(x) and type(x).__module__.startswith("kernels.ir"):
        return dataclasses.replace(x, **{f.name: _subst(getattr(x, f.name), vals)
                                         for f in dataclasses.fields(x) if f.init})
    return x        # atoms, descriptors, plans: no runtime symbol


def concretize(k: Any, values: Dict[str, int], grid: Tuple[int, int, int], spec: Any) -> Kernel:
    """A plain :class:`Kernel` of ``k`` at one launch: every runtime symbol of ``values``
    replaced by its value in every statement, the grid ``grid``, the spec ``spec``."""
    vals = {sym(n): int(v) for n, v in values.items()}
    vals.update({sympy.Symbol(n, integer=True): int(v) for n, v in values.items()})
    return Kernel(f"{k.name}", list(k.params), list(k.shared), list(k.frags),
                  _subst(list(k.body), vals), k.block, tuple(grid), tuple(k.grid_symbols),
                  list(k.header), dict(k.meta), spec=spec, min_blocks=k.min_blocks)


def spec_at(spec: KernelSpec, inst: RuntimeInstance) -> KernelSpec:
    """``spec`` at one launch: each dimension whose extent names a runtime symbol gets its
    value, the reductions span their dimension's extent, the domain is every block."""
    dims = tuple(Dim(d.name, inst.values[d.extent]) if isinstance(d.extent, str) else d
                 for d in spec.dims)
    extent = {d.name: d.extent for d in dims}
    cons = tuple(dataclasses.replace(c, span=c.span if isinstance(c.span, int) else
                                     extent[c.over[0]]) for c in spec.contractions)
    return dataclasses.replace(spec, dims=dims, contractions=cons, symbols=(),
                               domain=Domain.every_block())


def verify_at_instances(k: Any, spec: KernelSpec, arch: str, source: Optional[str] = None,
                        instances: Optional[Sequence[RuntimeInstance]] = None,
                        dataflow: Any = None) -> GateReport:
    """Every check of the every-block engine at each launch (``instances``, default the
    spec's domain's) on the kernel with the launch substituted (:func:`concretize`,
    :func:`spec_at`), and with ``source`` the printed-source checks at all of them; one
    report whose checks hold where they hold at every launch.  ``dataflow(kernel, instance)``:
    a per-launch dataflow factory simulated on every block (a split kernel's,
    :mod:`.gate_split_partials`)."""
    t0 = time.perf_counter()
    insts = list(instances) if instances is not None else list(spec.domain.instances(k))
    if not insts:
        raise SpecError(f"spec {spec.name}: no launches to verify at")
    merged: Dict[str, List[Tuple[RuntimeInstance, CheckResult]]] = {}
    for inst in insts:
        at = spec_at(spec, inst)
        kc = concretize(k, inst.values, inst.grid, at)
        if dataflow is None:
            rep = verify_every_block(kc, at, arch=arch)
        else:
            every = [(i, j) for j in range(inst.grid[1]) for i in range(inst.grid[0])]
            rep = verify_every_block(kc, at, arch=arch, blocks=every,
                                     dataflow=dataflow(kc, inst))
        for name, res in rep.checks.items():
            merged.setdefault(name, []).append((inst, res))
    checks: Dict[str, CheckResult] = {}
    for name, per in merged.items():
        bad = [(i, r) for i, r in per if not r.holds]
        dom = "; ".join(f"[{i.describe()}] {r.domain}" for i, r in per)
        checks[name] = CheckResult(
            check=name, holds=not bad, method=per[0][1].method, domain=dom,
            counterexample=None if not bad else f"[{bad[0][0].name}] {bad[0][1].counterexample}")
    if source is not None:
        checks.update(verify_printed(k, source, instances=insts))
    return GateReport(k.name, checks, {"instances": [i.describe() for i in insts]},
                      time.perf_counter() - t0)
