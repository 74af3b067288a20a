"""A passing verification, remembered on disk by the content of everything it read (issue 20
item 1: ``gemm()`` builds the verified IR TMA GEMM on its first call for a configuration, and
verifying the IR and its printed text takes 2-4 s).

:func:`verified` returns :func:`kernels.verify.verify`'s report for ``(kernel IR, printed
source, arch)`` and raises if it fails.  A report that holds is stored in the
:mod:`kernels.toolchain.cache` store (kind ``verified``) under a key of:

* the printed source and the arch;
* the IR's statements, parameters, shared arrays and frags (their ``repr``: the sympy index
  expressions included) and the instances its spec's domain names;
* :func:`verifier_version`: a hash of every Python file of the packages a verdict depends on
  (``kernels/verify``, ``kernels/ir``, ``kernels/printer``, ``kernels/nvidia``,
  ``mfma_specs``, ``layoutalg``), so a change to any rule, model, builder or printer verifies
  again.

A later call with the same key returns the stored verdict (every check ``holds``, its method
and domain, ``details["cached"]`` the entry's path) without re-running the engines.  Failing
reports are never stored.  ``LAYOUTALG_VERIFY_CACHE=0`` turns the store off (always verify).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from layoutalg.verify.result import CheckResult

from ..toolchain.cache import Cache, content_key, default_cache
from .gate import GateReport
from .verifier import verify

__all__ = ["verified", "verifier_version", "report_key"]

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("kernels/verify", "kernels/ir", "kernels/printer", "kernels/nvidia", "mfma_specs",
             "layoutalg")


@lru_cache(maxsize=1)
def verifier_version() -> str:
    """SHA-256 over the path and bytes of every ``.py`` file of :data:`_PACKAGES`."""
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        for p in sorted((_ROOT / pkg).rglob("*.py")):
            h.update(str(p.relative_to(_ROOT)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def report_key(kernel_ir: Any, source: str, arch: str) -> str:
    """The content key of one verification (see the module docstring)."""
    spec = kernel_ir.spec
    inst = repr(list(spec.domain.instances(kernel_ir))) \
        if spec.domain.kind in ("instances", "launches") else spec.domain.kind
    return content_key(source, arch, kernel_ir.name, repr(kernel_ir.body),
                       repr(kernel_ir.params), repr(kernel_ir.shared), repr(kernel_ir.frags),
                       repr(spec.name), repr(spec.tensors), repr(spec.warpgroup_roles), inst,
                       verifier_version())


def verified(kernel_ir: Any, source: str, arch: str, cache: Optional[Cache] = None
             ) -> GateReport:
    """``verify(kernel_ir, arch=arch, source=source).raise_if_failed()``, or the stored
    verdict of an identical earlier verification (a passing one only)."""
    if os.environ.get("LAYOUTALG_VERIFY_CACHE", "1") == "0":
        return verify(kernel_ir, arch=arch, source=source).raise_if_failed()
    cache = cache if cache is not None else default_cache()
    key = report_key(kernel_ir, source, arch)
    path, meta = cache.lookup("verified", key, "report")
    if path is not None:
        try:
            stored = json.loads(path.read_text())
            checks = {n: CheckResult(check=n, holds=True, method=c["method"], domain=c["domain"])
                      for n, c in stored["checks"].items() if c["holds"] is True}
            if stored["kernel"] == kernel_ir.name and len(checks) == len(stored["checks"]) \
                    and checks:
                return GateReport(kernel_ir.name, checks, {"cached": str(path)}, 0.0)
        except (OSError, ValueError, KeyError, TypeError):
            pass        # a damaged entry: verify again (and overwrite it)
    report = verify(kernel_ir, arch=arch, source=source).raise_if_failed()
    data = json.dumps({"kernel": kernel_ir.name, "checks": report.to_json()}, indent=1)
    cache.store("verified", key, "report", data.encode(), {"kernel": kernel_ir.name})
    return report
