"""The ``wide`` (64-bit) form of the runtime-size IR GEMMs (issue 20 item 1): the mma.sync
:mod:`.gemm_rt_ir` and the cp.async wgmma :mod:`.wgmma_rt_ir` for matrices their 32-bit form
cannot launch (rows x leading dimension reaching 2^31 elements), which ran the string
template (``size_t`` offsets) before.

The prefills' and decodes' mechanism (:mod:`.prefill_wide`), applied to the GEMM's scalars:

* the leading dimensions ``lda``, ``ldb``, ``ldc`` are ``long long`` arguments, so every global
  offset (a row times one of them, plus a column) is 64-bit C arithmetic; ``M``, ``N``, ``K``
  and every other index stay ``int``;
* no ``int`` let holds a row times a leading dimension: the builders print each copy's whole
  offset (``RtGemmBuilder.wide``: no ``ag0`` / ``bg0`` lets), the epilogue's ``er * ldc``
  was printed inline already;
* the kernel is verified as the 32-bit form is (every check, at its own launches, the
  leading-dimension symbols typed ``long long``) and its printed text again at
  :func:`past_2_31_instances` (``printed_source`` and ``index_ranges``: every printed
  expression equals the IR's there with C semantics and fits its C type; the full gate does
  not run there: it counts coverage per element of a buffer of that size), and each launch is
  proved at its own values (:func:`~.prefill_wide.launch_index_ranges`) before it runs.

The 32-bit forms' printed sources are byte-identical (``wide`` defaults to False).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, List

from ..errors import KernelError

__all__ = ["LD_SCALARS", "WIDE_GEMM_ON_IR", "widen_rt_gemm", "past_2_31_instances",
           "check_wide_text"]

#: the leading dimensions: ``long long`` in the wide form
LD_SCALARS = ("lda", "ldb", "ldc")

#: a call whose 32-bit offsets could reach 2^31 runs the wide IR form (proved at its launch)
#: instead of the template.  H100, 2026-11-25 (benchmarks/gpu_gemm_wide.py --rounds 7, medians
#: of 7 rotated rounds; tests/test_gemm_wide_gpu.py: bitwise the template; docs/PERFORMANCE.md):
#: A / C rows 2^20 + 8 apart: mma.sync 1.41x, cp.async wgmma 1.52x the template's speed; a
#: real tensor past 2^31 elements: mma.sync 1.00x, wgmma 0.954x.  On, below parity at that
#: one shape, as the prefills' and decodes' wide forms: where the 32-bit form cannot launch, the
#: kernel that runs is the verified one, each launch's index arithmetic proved at its values
WIDE_GEMM_ON_IR = True


def widen_rt_gemm(k: Any, longs: Any = LD_SCALARS) -> Any:
    """The wide kernel of ``k``, a runtime-size GEMM built with ``RtGemmBuilder.wide`` set (no
    ``{x}g0`` lets): the scalars ``longs`` (default :data:`LD_SCALARS`; a test plants fewer)
    ``long long``, the spec's symbols of them over [0, 2^63), name suffixed ``_i64``."""
    from ..ir.attention import ScalarParam
    from ..verify.spec import Symbol
    if k.meta.get("wide"):
        raise ValueError(f"{k.name}: already wide")
    w = copy.copy(k)                # every attribute changed below is assigned anew
    w.scalars = [ScalarParam(p.name, "long long") if p.name in longs else p for p in k.scalars]
    w.name = f"{k.name}_i64"
    w.meta = dict(k.meta, wide=True)
    w.header = list(k.header) + [
        "wide form (kernels/nvidia/gemm_wide.py): long long leading dimensions (64-bit "
        "offsets), each copy's offset printed whole"]
    syms = tuple(Symbol(s.name, s.lo, 2 ** 63 - 1) if s.name in longs else s
                 for s in k.spec.symbols)
    w.spec = dataclasses.replace(k.spec, name=w.name, symbols=syms)
    return w


def past_2_31_instances(cfg: Any) -> List[Any]:
    """Two launches whose A, B and C each span more than 2^32 elements (rows x leading
    dimension): edge tiles in M, N and K (``M = 2 bm + 3``, ``N = bn + 41``, ``K = 2 bk + 2``)
    with the leading dimensions multiples of 8 (16-byte copies) and odd (the 2-byte edge
    copies, odd ``ldc``: element stores)."""
    from ..verify.concrete_instances import RuntimeInstance
    bm, bn, bk = cfg.bm, cfg.bn, cfg.bk
    m, n, kk = 2 * bm + 3, bn + 41, 2 * bk + 2
    b_rows = kk if cfg.b_major == "n" else n
    tiles = -(-m // bm) * -(-n // bn)
    out = []
    for name, pad in (("past-2^31-aligned", 0), ("past-2^31-odd", 1)):
        lda = (2 ** 32 // m + 8) // 8 * 8 + pad
        ldb = (2 ** 32 // b_rows + 8) // 8 * 8 + pad
        ldc = (2 ** 32 // m + 8) // 8 * 8 + pad
        out.append(RuntimeInstance(name, dict(M=m, N=n, K=kk, lda=lda, ldb=ldb, ldc=ldc,
                                              a_vec=int(pad == 0), b_vec=int(pad == 0)),
                                   (tiles, 1, 1)))
    return out


def check_wide_text(k: Any, source: str) -> None:
    """The printed wide kernel read back at :func:`past_2_31_instances` of its configuration
    (``printed_source`` and ``index_ranges`` of :func:`kernels.verify.printed.verify_printed`),
    or :class:`~kernels.errors.KernelError` naming the failed check."""
    from ..verify.printed import verify_printed
    res = verify_printed(k, source, instances=past_2_31_instances(k.meta["cfg"]))
    bad = {n: r.counterexample for n, r in res.items()
           if n in ("printed_source", "index_ranges") and not r.holds}
    if bad:
        raise KernelError(f"{k.name}: the printed wide kernel fails past 2^31: {bad}")
