"""``BuiltProgram``: what every AMD kernel builder returns (issue 13, item 4, first step).

A program is a generated HIP source with the verification report that travels with it, and the
operations on it: ``compile()`` (a cached code object, recorded in ``code_object`` and
``timings``), ``report()`` (``report.json``: resources + verification).  The GEMM
(:class:`kernels.amd.gemm.BuiltKernel`), the attention kernels
(:class:`kernels.amd.flash_attention.BuiltAttention`) and the split-KV pair
(:class:`kernels.amd.decode_splitkv.BuiltSplitKV`) derive from it.  Still per family: how to
emulate (a GEMM takes its arguments, an attention kernel its arguments and grid, the split-KV
pair a problem shape) and the report's kernel-specific fields.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = ["BuiltProgram"]


class BuiltProgram:
    """Base of the built AMD kernels.  Subclasses provide the attributes ``name``, ``source``,
    ``verification`` (a report with ``holds``, ``as_bools()``, ``to_json()``), ``timings``
    (a dict), ``code_object`` (None until compiled) and the properties ``arch`` and
    ``block``."""

    name: str
    source: str
    verification: Any
    timings: Dict[str, float]
    code_object: Any

    @property
    def arch(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} does not say its target")

    def compile(self, arch: Optional[str] = None, **kw: Any) -> Any:
        """Compile ``source`` for ``arch`` (default: the configuration's); cached by content.
        Returns the :class:`~kernels.toolchain.codeobject.CodeObject` (also ``code_object``)."""
        from .toolchain.hip import compile_built
        return compile_built(self, arch or self.arch, **kw)

    def report(self) -> Dict[str, Any]:
        """``report.json``: the compiled resources plus the verification results."""
        raise NotImplementedError(f"{type(self).__name__} has no report")
