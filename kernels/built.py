"""``BuiltProgram``: what every AMD kernel builder returns (issue 13, item 4, first step).

A program is a generated HIP source with the verification report that travels with it, and the
operations on it: ``compile()`` (a cached code object, recorded in ``code_object`` and
``timings``), ``report()`` (``report.json``: resources + verification).  The GEMM
(:class:`kernels.amd.gemm.BuiltKernel`), the attention kernels
(:class:`kernels.amd.flash_attention.BuiltAttention`) and the split-KV pair
(:class:`kernels.amd.decode_splitkv.BuiltSplitKV`) derive from it, and all are built by the
one driver :mod:`kernels.amd.driver`.  ``emulate(*args, grid=None)`` is one signature for all:
a GEMM's grid defaults to its own, an attention kernel's must be given; the split-KV pair (two
launches and a workspace) is emulated by ``emulate_pair``.  ``report()`` is the base's too;
a family adds its own fields (``report_extra``) and its hot-loop comparison.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

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
        """``report.json``: the compiled resources plus the verification results, the same keys
        for every kernel, then the family's own (:meth:`report_extra`), then the hot loop's
        instructions against what was verified (:meth:`hot_loop_instructions`).  Compiles
        first if needed.  A subclass that is not one kernel (the split-KV pair) overrides it."""
        if not hasattr(self, "plan"):
            raise NotImplementedError(f"{type(self).__name__} has no report (it is not one "
                                      "planned kernel)")
        if getattr(self, "code_object", None) is None:
            self.compile()
        r = self.code_object.report(self.name, block_threads=self.block)
        c = self.plan.cfg
        out: Dict[str, Any] = {
            "kernel": self.name, "arch": r.arch,
            **r.report_fields(),
            "verification": self.verification.as_bools(),
            "verification_detail": self.verification.to_json(),
            "vgpr_unified": r.vgpr_unified, "occupancy": r.occupancy,
            "hot_loop": r.hot_loop, "instructions": r.instructions,
            "block": self.block,
            "config": {k: getattr(c, k) for k in c.__dataclass_fields__},
            "layouts": self.plan.describe(),
            "timings_s": dict(self.timings),
        }
        out.update(self.report_extra())
        out["hot_loop_instructions"] = self.hot_loop_instructions(r.hot_loop)
        return out

    def report_extra(self) -> Dict[str, Any]:
        """The family's own ``report.json`` fields (after the common ones)."""
        return {}

    def hot_loop_instructions(self, hot_loop: Any) -> Dict[str, Any]:
        """The compiled hot loop's instruction counts against the verified IR's."""
        raise NotImplementedError(f"{type(self).__name__} has no hot-loop comparison")

    def default_grid(self) -> Optional[Tuple[int, int, int]]:
        """The launch grid when the program fixes it (a GEMM: its sizes are compiled in);
        ``None`` when it depends on the problem (attention: pass ``grid=``)."""
        return None

    def emulate(self, *args: Any, grid: Optional[Sequence[int]] = None, **kw: Any) -> Any:
        """Run the kernel on the CPU emulator (:func:`kernels.emulator.run`).  ``args`` follow
        the kernel's parameters (buffers, then scalars); ``grid`` defaults to
        :meth:`default_grid`; ``kw`` goes to ``run`` (``workers``, ``timeout``, ...)."""
        from .emulator import run
        from .errors import KernelError
        if grid is None:
            grid = self.default_grid()
            if grid is None:
                raise KernelError(f"{type(self).__name__} {self.name}: its grid depends on the "
                                  "problem shape; pass grid=(x, y, z), e.g. "
                                  "PrefillShape.grid(block_m)")
        return run(self.source, self.name, tuple(grid), self.block, list(args), arch=self.arch,
                   name=f"{self.name}.hip", **kw)
