"""Print a runtime-size GEMM (:class:`kernels.ir.attention.AttnKernel`: by-value ``int``
sizes and strides after the pointers) as CUDA C++: the statements of
:class:`kernels.printer.cuda.CudaPrinter` plus the element-wise edge copy of the IR-built
``cp.async`` GEMMs (:mod:`kernels.nvidia.wgmma_rt_ir`, issue 20 items 1 and 2).

The edge copy of one 16-byte shared vector is IR (the template's ``lg_copy_edge``, written
out): 8 predicated 2-byte global loads into a 16-bit register frag (a load whose predicate is
off reads zero) and one 16-byte shared store of those registers to the address the
``cp.async`` would have written.  Each prints as ONE line, which
:func:`kernels.verify.source_text.read_cuda_source` reads back for ``printed_source``:

* ``ev[w] = lg_ld16z(A + (offset), pred);`` (element ``2w`` of frag ``ev``) and
  ``ev[w] |= lg_ld16z(A + (offset), pred) << 16;`` (element ``2w + 1``);
* ``lg_st_shared_v4((sA_u32 + 2 * (offset)), &ev[w]);`` (8 elements from ``2w``; shared
  addresses are the arrays' 32-bit bases, computed once, plus the offset's bytes).

A kernel whose ``meta["split_shared_offsets"]`` is set (the runtime-size mma.sync GEMM,
:mod:`kernels.nvidia.gemm_rt_ir`) prints each shared offset with a per-thread base and a
block-uniform rest as ``(sA_u32 + 2 * (base) + 2 * (rest))``: the compiler then keeps ``2 *
base`` in a register and ``sA_u32 + 2 * rest`` in a uniform one, and ``ldmatrix`` / ``cp.async``
address ``[R + UR + imm]`` as the template's do (one ``2 * (base + rest)`` cost two
instructions per access).  The reader joins the terms back
(:func:`kernels.verify.source_text.read_cuda_source`).
"""

from __future__ import annotations

from typing import Any, List

from layoutalg.symbolic import to_c

from ..ir.core import Access
from .cuda import CudaPrinter

__all__ = ["EDGE_HELPERS", "CudaGemmEdgePrinter", "emit_cuda_gemm_rt"]

#: the device helpers the edge statements call (after the prelude: ``LG_DEV``, ``lg_u32``)
EDGE_HELPERS = r"""
// one 16-bit element, or zero where `on` is false (the address is then never read)
LG_DEV lg_u32 lg_ld16z(const lg_u16* p, bool on) { return on ? (lg_u32)*p : 0u; }
// 16 bytes (4 words of 2 elements each) to one shared vector
LG_DEV void lg_st_shared_v4(lg_u32 dst, const lg_u32* w) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" :: "r"(dst), "r"(w[0]), "r"(w[1]),
               "r"(w[2]), "r"(w[3]) : "memory");
}
"""


class CudaGemmEdgePrinter(CudaPrinter):
    """:class:`CudaPrinter` with scalar parameters, the edge-copy statements and shared
    addresses from 32-bit bases computed once (``const lg_u32 sA_u32 = lg_smem_u32(sA);``,
    ``(sA_u32 + 2 * (offset))``, ``lg_gmma_desc_u32(bits, sA_u32, start)``, as the IR TMA
    GEMM prints them: a generic pointer converted per use cost that kernel 5-8 %)."""

    def __init__(self, k: Any) -> None:
        super().__init__(k)
        self.tma = True         # CudaPrinter's switch to the 32-bit descriptor form
        self.u32_shared = True  # ... and to 32-bit shared bases (CudaPrinter.saddr)

    def stmt(self, s: Any, d: int) -> None:
        if isinstance(s, Access) and s.regs.frag.dtype != "f32" and (
                (s.kind, s.space, s.width) in (("load", "global", 1), ("store", "lds", 8))):
            self.edge(s, d)
        else:
            super().stmt(s, d)

    def edge(self, a: Access, d: int) -> None:
        f = a.regs.frag.name
        if a.kind == "load":
            if a.pred is None:
                raise ValueError(f"cuda gemm printer: edge load {a.tag} has no predicate (an "
                                 "unpredicated element belongs in a cp.async)")
            i = a.regs.idx[0]
            call = f"lg_ld16z({a.buf} + ({to_c(a.offset)}), {to_c(a.pred)})"
            self.out(d, f"{f}[{i // 2}] = {call};" if i % 2 == 0 else
                     f"{f}[{i // 2}] |= {call} << 16;")
            return
        if a.pred is not None:
            raise ValueError(f"cuda gemm printer: shared store {a.tag} cannot be predicated")
        w = self.words(a.regs, f"shared store {a.tag}")
        self.out(d, f"lg_st_shared_v4({self.saddr(a)}, &{f}[{w}]);")

    def helpers(self) -> str:
        return super().helpers() + EDGE_HELPERS

    def params(self) -> List[str]:
        return super().params() + [f"{p.ctype} {p.name}" for p in self.k.scalars]


def emit_cuda_gemm_rt(k: Any) -> str:
    """CUDA C++ source of a runtime-size GEMM kernel (one ``extern "C" __global__``)."""
    return CudaGemmEdgePrinter(k).kernel()
