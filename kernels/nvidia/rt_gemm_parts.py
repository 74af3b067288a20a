"""The IR pieces both runtime-size ``cp.async`` GEMMs build the same way (issue 20 item 1):
the wgmma one (:mod:`kernels.nvidia.wgmma_rt_ir`) and the mma.sync one
(:mod:`kernels.nvidia.gemm_rt_ir`).

* :func:`lt`: ``a < b`` as written (never rewritten by sympy);
* :func:`raster_lets`: ``m0`` / ``n0`` / ``KT`` of block ``pid`` in the templates' grouped
  raster (:func:`kernels.nvidia.gemm.emit_block_origin`: ``group_m`` tile rows walk N
  together, the last group may be partial);
* :func:`pair_or_single_stores`: one accumulator pair to C as a 4-byte store where both
  columns exist and ``ldc`` is even, else element by element, nothing past M or N (the
  templates' :func:`kernels.nvidia.gemm.emit_pair_store`);
* :func:`copy_vector` / :func:`edge_limit`: where one thread's copy vector lies in A or B
  and the extent the vector runs along (both builders expose ``c``, ``tid``, ``m0``, ``n0``,
  ``M``, ``N``, ``K``, ``a_glob``, ``b_glob``);
* :class:`RtGemmBuilder`: the set-up both builders' constructors share (the refusal, the plan,
  the runtime scalars :data:`RT_SCALARS` as symbols, the copy fragments, the global layouts of
  A, B and C), so those names mean the same in both.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import sympy

from layoutalg import Layout

from ..ir.core import Access, Frag, Let, sym
from .gemm import GemmConfigError

__all__ = ["RT_SCALARS", "RtGemmBuilder", "lt", "raster_lets", "pair_or_single_stores",
           "copy_vector", "edge_limit"]

#: the kernel's runtime arguments after the pointers A, B, C (``a_vec`` / ``b_vec``: 1 when the
#: host saw that operand's leading dimension a multiple of 8 and its pointer 16-byte aligned)
RT_SCALARS = ("M", "N", "K", "lda", "ldb", "ldc", "a_vec", "b_vec")


class RtGemmBuilder:
    """The set-up shared by the runtime-size GEMM builders (``_Builder`` of
    :mod:`kernels.nvidia.gemm_rt_ir`, :class:`~kernels.nvidia.wgmma_rt_ir.RtWgmmaBuilder`).

    ``plan(cfg)`` is the configuration's plan (``self.p``); a subclass names its scope in
    :meth:`refusal` (a refused configuration raises :class:`GemmConfigError` with that reason
    before anything is planned).  Sets ``c``, ``p``, ``S`` (stages), the runtime scalars
    ``M``, ``N``, ``K``, ``ldc`` and ``vec`` (``{"A": a_vec, "B": b_vec}``), the symbols
    ``tid``, ``m0``, ``n0``, the copy fragments ``stage_frag`` / ``edge_frag`` and the global
    layouts ``a_glob``, ``b_glob`` (by ``b_major``), ``c_glob``."""

    def __init__(self, cfg: Any, plan: Callable[[Any], Any]) -> None:
        refusal = self.refusal(cfg)
        if refusal is not None:
            raise GemmConfigError(refusal)
        self.c, self.p, self.S = cfg, plan(cfg), cfg.stages
        M, N, K, lda, ldb, ldc, a_vec, b_vec = (sym(n) for n in RT_SCALARS)
        self.M, self.N, self.K, self.ldc = M, N, K, ldc
        self.vec = {"A": a_vec, "B": b_vec}
        self.tid, self.m0, self.n0 = sym("tid"), sym("m0"), sym("n0")
        self.stage_frag = Frag("cp_stage", cfg.dtype, cfg.vec, cfg.vec)
        self.edge_frag = Frag("ev", cfg.dtype, cfg.vec, cfg.vec)
        self.a_glob = Layout((M, K), (lda, 1))
        self.b_glob = Layout((N, K), (1, ldb)) if cfg.b_major == "n" else \
            Layout((N, K), (ldb, 1))
        self.c_glob = Layout((M, N), (ldc, 1))
        #: the wide (64-bit) form (:mod:`.gemm_wide`): no ``int`` let holds a global copy
        #: base (a row times ``lda`` / ``ldb``), each copy's offset is printed whole
        self.wide = False

    def base_lets(self, x: str, g0: Any) -> List[Let]:
        """The let of operand ``x``'s first global copy offset ``g0`` (``{x}g0``); none in
        the wide form, where a row times a ``long long`` leading dimension cannot sit in an
        ``int``."""
        return [] if self.wide else [Let(f"{x}g0", g0)]

    def global_base(self, x: str, g0: Any) -> Any:
        """What a copy of operand ``x`` adds its thread-free step to: the let ``{x}g0``, or
        in the wide form ``g0`` itself (64-bit C arithmetic through ``lda`` / ``ldb``)."""
        return g0 if self.wide else sym(f"{x}g0")

    def refusal(self, cfg: Any) -> Optional[str]:
        """Why this builder cannot build ``cfg`` (``None``: it can)."""
        raise NotImplementedError


def lt(a: Any, b: Any) -> Any:
    """``a < b`` as written (sympy would turn ``floor(tid / 8) < K`` into ``tid / 8 < K``, a
    rational the printed C cannot have)."""
    return sympy.StrictLessThan(sympy.expand(a), sympy.expand(b), evaluate=False)


def raster_lets(bm: int, bn: int, bk: int, group_m: int, M: Any, N: Any, K: Any) -> List[Let]:
    """``grid_m``, ``grid_n``, ``group``, ``first_m``, ``gsize``, ``m0``, ``n0``, ``KT`` of
    block ``pid`` (the 1-D grid symbol): the templates' grouped raster."""
    pid, group, grid_m = sym("pid"), sym("group"), sym("grid_m")
    first_m, gsize = sym("first_m"), sym("gsize")
    return [Let("grid_m", sympy.floor((M + bm - 1) / bm)),
            Let("grid_n", sympy.floor((N + bn - 1) / bn)),
            Let("group", group_m * sym("grid_n")),
            Let("first_m", sympy.floor(pid / group) * group_m),
            Let("gsize", sympy.Min(grid_m - first_m, group_m)),
            Let("m0", (first_m + sympy.Mod(sympy.Mod(pid, group), gsize)) * bm),
            Let("n0", sympy.floor(sympy.Mod(pid, group) / gsize) * bn),
            Let("KT", sympy.floor((K + bk - 1) / bk))]


def pair_or_single_stores(c_glob: Any, acc: Frag, item: int, r: Any, q: Any, M: Any, N: Any,
                          ldc: Any, buf: str = "C", at: Optional[Callable[[Any, Any], Any]] = None,
                          even: Any = None) -> List[Access]:
    """Accumulators ``item``, ``item + 1`` (``buf`` [r][q], [r][q + 1]): the pair as one store
    where both columns exist and the rows allow pairs (``even``; default: ``ldc`` even) (tag
    ``<buf>.store``), else each element that exists alone (``<buf>.store1``); rows past M
    never.  ``at(r, q)``: the coordinate of ``c_glob`` (default ``(r, q)``; the split-K
    partials put the split first)."""
    at = at or (lambda r_, q_: (r_, q_))
    r, q = sympy.expand(r), sympy.expand(q)
    pair = sympy.And(r < M, q + 1 < N, sympy.Mod(ldc, 2) < 1 if even is None else even)
    out = [Access("store", "global", buf, sympy.expand(c_glob(at(r, q))), 2,
                  acc.regs([item, item + 1]), pred=pair, tag=f"{buf}.store", origin=c_glob,
                  coords=(at(r, q), at(r, q + 1)))]
    for e in range(2):
        single = sympy.And(r < M, q + e < N, sympy.Not(pair))
        out.append(Access("store", "global", buf, sympy.expand(c_glob(at(r, q + e))), 1,
                          acc.regs([item + e]), pred=single, tag=f"{buf}.store1", origin=c_glob,
                          coords=(at(r, q + e),)))
    return out


def copy_vector(b: Any, op: str, row: Any, col: Any, kt: Any
                ) -> Tuple[List[Tuple[Any, Any]], Any, Any]:
    """The vector at tile ``(row, col)`` of operand ``op``'s k tile ``kt`` for builder ``b``:
    its ``c.vec`` global coordinates ((m, k) for A, (n, k) for B), the global layout, and
    whether the vector's row lies inside the matrix."""
    c = b.c
    k0 = kt * c.bk
    if op == "A":
        coords = [(b.m0 + row, k0 + col + j) for j in range(c.vec)]
        glob, row_ok = b.a_glob, lt(b.m0 + row, b.M)
    elif c.b_major == "n":          # tile rows are k, columns n
        coords = [(b.n0 + col + j, k0 + row) for j in range(c.vec)]
        glob, row_ok = b.b_glob, lt(k0 + row, b.K)
    else:                           # tile rows are n, columns k
        coords = [(b.n0 + row, k0 + col + j) for j in range(c.vec)]
        glob, row_ok = b.b_glob, lt(b.n0 + row, b.N)
    return [tuple(sympy.expand(x) for x in cc) for cc in coords], glob, row_ok


def edge_limit(b: Any, op: str) -> Tuple[Any, int]:
    """The extent a copy vector of ``op`` runs along (K for A and a K-major B, N for an
    N-major B) and that coordinate's position in the operand's coordinates."""
    if op == "A" or b.c.b_major == "k":
        return b.K, 1
    return b.N, 0
