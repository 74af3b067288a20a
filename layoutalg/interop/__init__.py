"""layoutalg.interop: layouts from the tools kernels are written in (Triton, FlyDSL, CuTe DSL).

Each adapter imports its tool lazily, only when handed one of the tool's objects, so
``import layoutalg.interop.triton`` works without Triton installed: the pure-data entry points
(Triton *bases*, i.e. lists of basis vectors; printed text) need nothing.  See docs/INTEROP.md.

* :mod:`layoutalg.interop.triton` - Triton / Gluon linear layouts <-> TV layouts and LDS layouts,
  and the ``#ttg.*`` attribute text of a TTGIR dump.
* :mod:`layoutalg.interop.atoms` - check an MMA atom's TV layouts (from FlyDSL, CuTe DSL or
  anything that yields ``(lane, item) -> tile index``) against ``mfma_specs``.
* Printed forms of CuTe C++, CuTe DSL and FlyDSL are read by :func:`layoutalg.parse`
  (:mod:`layoutalg.dialects`).
"""

from .errors import InteropError

__all__ = ["InteropError"]
