"""The ``cp.async`` + ``wgmma`` GEMM of :mod:`kernels.nvidia.wgmma` as kernel IR at **runtime
sizes** (issue 20 item 1): the form :func:`kernels.nvidia.dispatch.gemm` runs.

Same plan as the template (:func:`~kernels.nvidia.wgmma.plan_wgmma_gemm`: stage layouts, copy
partitions, descriptors), same program as the compile-time IR form
(:mod:`kernels.nvidia.wgmma_ir`: ``stages - 2`` tiles ahead, one wgmma group in flight), and the
template's runtime behaviour, every statement IR:

* ``M``, ``N``, ``K`` and the leading dimensions ``lda``, ``ldb``, ``ldc`` are ``int``
  arguments; a 1-D grid of ``ceil(M/bm) ceil(N/bn)`` blocks walks the tiles in the template's
  grouped raster (``group_m`` tile rows walk N together);
* per operand and k tile (block-uniform): a tile inside the matrix with 16-byte rows (``a_vec``
  / ``b_vec``, the host's word: leading dimension a multiple of 8, pointer 16-byte aligned) is
  copied by unpredicated ``cp.async``; an edge tile with 16-byte rows whose vectors the edge
  never cuts (K, or N for an N-major B, a multiple of 8) by ``cp.async`` predicated on the
  whole vector (zero fill); any other by the **edge copy**: per 16-byte vector, 8 predicated
  2-byte loads (off: zero) into registers and one 16-byte shared store to the address the
  ``cp.async`` would write (the template's ``lg_copy_edge``; printed by
  :mod:`kernels.printer.cuda_gemm_edge`);
* C is stored as 4-byte pairs where both columns exist and ``ldc`` is even, else as single
  elements, rows past M and columns past N never.

Proved by :func:`kernels.verify.verify` (its spec's domain: the launches of :func:`rt_instances`,
:func:`kernels.verify.concrete_instances.verify_at_instances`) (edge tiles in M, N and K, odd K / N / leading dimensions, 1x1x8, a
partial raster group): every check of the every-block engine at each launch (zero-filled
elements contribute nothing: the contraction check sums exactly k < K) and the printed text at
all of them.  The edge copy's loads are each "on exactly when the element is in range"
(``in_bounds``), the ``cp.async`` vectors aligned (``vector_widths``: a launch whose ``a_vec``
lied about an odd ``lda`` fails there).

Scope: no split-K (the template :class:`~kernels.nvidia.wgmma.WgmmaGemm` runs split-K
configurations); shared-memory A only.  The edge copy is all 2-byte loads where the template
decides per vector and still takes ``cp.async`` for the whole, aligned ones (one row in eight
with an odd ``lda``; the vectors of a K edge that K leaves whole).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import sympy

from layoutalg import ComposedLayout, Layout, composition

from ..ir.attention import AttnKernel, ScalarParam
from ..ir.core import (Access, Barrier, Comment, Frag, If, Let, Loop, Param, Shared, ZeroFrag,
                       swizzle_expr, sym)
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait
from ..ir.nvidia_wgmma import FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaWait
from ..printer.cuda_gemm_edge import emit_cuda_gemm_rt
from ..verify.concrete_instances import RuntimeInstance
from ..verify.spec import Contraction, Dim, Domain, KernelSpec, Symbol, TensorSpec
from .rt_gemm_launch import RtGemmKernel
from .gemm import GemmConfigError
from .rt_gemm_parts import (RT_SCALARS, RtGemmBuilder, copy_vector, edge_limit, lt,
                            pair_or_single_stores, raster_lets)
from .wgmma import Operand, WgmmaGemmConfig, accumulator_rows_cols, plan_wgmma_gemm
from .wgmma_ir import shared_k_steps

__all__ = ["RT_SCALARS", "RtWgmmaBuilder", "build_wgmma_rt_ir", "rt_instances", "rt_gemm_spec",
           "IrWgmmaRtGemm", "rt_ir_refusal", "rt_kernel_name"]


def rt_ir_refusal(cfg: WgmmaGemmConfig) -> Any:
    """Why the runtime-size IR form cannot run ``cfg`` (None: it can); dispatch and the
    builder read this one rule."""
    if cfg.split_k:
        return ("the IR-built cp.async wgmma GEMM has no split-K form; the template WgmmaGemm "
                "runs WgmmaGemmConfig(split_k=True)")
    return None


def rt_kernel_name(cfg: WgmmaGemmConfig) -> str:
    """The IR-built kernel's name (``lg_irwgmma_rt_`` + the template's suffix): what a
    profiler and ``print(choose_gemm(a, b))`` show."""
    return "lg_irwgmma_rt_" + cfg.name[len("lg_wgmma_"):]


def rt_instances(cfg: WgmmaGemmConfig) -> Tuple[RuntimeInstance, ...]:
    """The launches the kernel is verified at: (a) edge tiles in M, N (odd) and K (``K = 2 bk +
    2``, not a multiple of 8): A's 16-byte rows take ``cp.async`` on inside k tiles and the
    2-byte edge copy at the K edge, B's odd rows the edge copy throughout; (b) 16-byte rows, K
    and N multiples of 8: inside k tiles ``cp.async``, the K edge predicated whole-vector
    ``cp.async``; (c) 1 x 1 x 8; (d) a partial raster group (``group_m + 1`` tile rows), odd
    ``lda``, odd ``ldc``."""
    bm, bn, bk, g = cfg.bm, cfg.bn, cfg.bk, cfg.group_m
    b_rows = lambda n, k: n if cfg.b_major == "n" else k     # noqa: E731 - ldb's minimum
    raw = [("edge_odd", 2 * bm - 3, bn + 41, 2 * bk + 2, 6, 0, 0),
           ("aligned_k_edge", bm, 2 * bn, 2 * bk + 8, 8, 16, 0),
           ("one", 1, 1, 8, 0, 0, 0),
           ("raster_odd_ld", g * bm + 1, bn + 8, bk, 3, 0, 1)]
    out = []
    for name, m, n, k, pa, pb, pc in raw:
        lda, ldb, ldc = k + pa, b_rows(n, k) + pb, n + pc
        tiles = -(-m // bm) * -(-n // bn)
        out.append(RuntimeInstance(name, dict(M=m, N=n, K=k, lda=lda, ldb=ldb, ldc=ldc,
                                              a_vec=int(lda % 8 == 0), b_vec=int(ldb % 8 == 0)),
                                   (tiles, 1, 1)))
    return tuple(out)


def rt_gemm_spec(name: str, cfg: Any,
                 instances: Optional[Callable[[Any], Tuple[RuntimeInstance, ...]]] = None
                 ) -> KernelSpec:
    """``C[m, n] = sum_k A[m, k] B[n, k]`` with runtime M, N, K, proved at the launches
    ``instances(cfg)`` (default :func:`rt_instances`; the mma.sync form adds its own)."""
    launches = instances or rt_instances
    return KernelSpec(
        name=name, dims=(Dim("m", "M"), Dim("n", "N"), Dim("k", "K")),
        tensors=(TensorSpec("A", ("m", "k"), "input", cfg.dtype),
                 TensorSpec("B", ("n", "k"), "input", cfg.dtype),
                 TensorSpec("C", ("m", "n"), "output", cfg.dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), None),),
        symbols=tuple(Symbol(n, 0, 2 ** 31 - 1) for n in RT_SCALARS),
        domain=Domain.at_launches(lambda k: launches(cfg)))


class RtWgmmaBuilder(RtGemmBuilder):
    """The runtime-size program of one configuration; the split-K form
    (:mod:`.wgmma_rt_ir_split`) overrides the k range, the epilogue and the interface."""

    def __init__(self, cfg: WgmmaGemmConfig) -> None:
        super().__init__(cfg, plan_wgmma_gemm)
        self.wg = sym("wg")
        self.n_lets = 0
        self.acc = Frag("acc", "f32", cfg.bn // 2)
        self.elems = {"A": cfg.a_stage // 2, "B": cfg.b_stage // 2}

    def refusal(self, cfg: WgmmaGemmConfig) -> Any:
        return rt_ir_refusal(cfg)

    def let(self, stem: str, expr: Any) -> Tuple[Let, Any]:
        self.n_lets += 1
        name = f"{stem}{self.n_lets}"
        return Let(name, sympy.expand(sympy.sympify(expr))), sym(name)

    def staged(self, op: Operand) -> Any:
        """``(pre-swizzle stage offset, stage) -> element of the shared array``."""
        e = self.elems[op.name]
        return ComposedLayout(op.smem.outer, 0, Layout((e, self.S), (1, e)))

    # ---- global -> shared ---------------------------------------------------------------
    def vector(self, op: Operand, kt: Any, i: int) -> Tuple[List[Tuple[Any, Any]], Any, Any]:
        """Copy iteration ``i`` of this thread (:func:`~.rt_gemm_parts.copy_vector`)."""
        t = self.tid
        return copy_vector(self, op.name, op.copy.row((t, i)), op.copy.col((t, i)), kt)

    def copy_bases(self) -> List[Any]:
        """Per operand, this thread's first vector once, before the k loop: ``{x}g0`` its
        global offset at k tile 0, ``{x}s0`` its swizzled offset in a stage.  Every copy is a
        base plus a constant (the plan proves the shared constants at every thread,
        :func:`~kernels.nvidia.wgmma.check_copy_offsets`; the verifier checks every printed
        offset against the layouts), as the template's copies are."""
        out: List[Any] = []
        for op in (self.p.a, self.p.b):
            coords, glob, _ = self.vector(op, 0, 0)
            x = op.name.lower()
            pre = composition(op.smem.inner, op.copy.off)
            out += self.base_lets(x, sympy.expand(glob(coords[0]))) + \
                [Let(f"{x}s0", swizzle_expr(op.smem.outer, pre((self.tid, 0, 0))))]
        return out

    def copy_tile(self, op: Operand, kt: Any, stage: Any, mode: str) -> List[Any]:
        """Operand ``op``'s k tile ``kt`` into ``stage``: ``mode`` "fast" (unpredicated
        ``cp.async``), "whole" (``cp.async`` predicated on the whole vector lying inside the
        matrix, zero fill otherwise: no vector is cut when the edge extent is a multiple of 8)
        or "edge" (8 predicated 2-byte loads and one 16-byte shared store)."""
        c, t, vec = self.c, self.tid, self.c.vec
        pre = composition(op.smem.inner, op.copy.off)
        origin = self.staged(op)
        x = op.name.lower()
        base_coords, glob, _ = self.vector(op, 0, 0)
        g0 = sympy.expand(glob(base_coords[0]))
        lim, kpos = self.edge_limit(op)
        out: List[Any] = []
        for i, (_, _, ds, b) in enumerate(op.copy_consts):
            if b != 0:
                raise GemmConfigError(f"{c.name}: the {op.name} copy needs a second shared base")
            coords, glob, row_ok = self.vector(op, kt, i)
            delta = sympy.expand(glob(coords[0]) - g0)
            if t in delta.free_symbols:
                raise GemmConfigError(f"{c.name}: {op.name} copy iteration {i} is not the "
                                      f"first vector plus a thread-free step ({delta})")
            goff = self.global_base(x, g0) + delta
            off = pre((t, 0, i))
            scoords = tuple((off + j, stage) for j in range(vec))
            saddr = sym(f"{x}s0") + ds + stage * self.elems[op.name]
            if mode != "edge":
                regs = self.stage_frag.regs(range(vec))
                pred = None if mode == "fast" else \
                    sympy.And(row_ok, lt(coords[-1][kpos], lim))
                load = Access("load", "global", op.name, goff, vec, regs, pred=pred,
                              tag=f"{op.name}.cp.async.load", origin=glob, coords=tuple(coords))
                store = Access("store", "lds", f"s{op.name}", saddr, vec, regs,
                               tag=f"{op.name}.cp.async.store", origin=origin, coords=scoords)
                out.append(CpAsync(load, store, tag=f"{op.name}.cp.async"))
                continue
            for j, cc in enumerate(coords):
                out.append(Access("load", "global", op.name, goff + j, 1,
                                  self.edge_frag.regs([j]),
                                  pred=sympy.And(row_ok, lt(cc[kpos], lim)),
                                  tag=f"{op.name}.edge.load", origin=glob, coords=(cc,)))
            out.append(Access("store", "lds", f"s{op.name}", saddr, vec,
                              self.edge_frag.regs(range(vec)), tag=f"{op.name}.edge.store",
                              origin=origin, coords=scoords))
        return out

    def edge_limit(self, op: Operand) -> Tuple[Any, int]:
        return edge_limit(self, op.name)

    def load_operand(self, op: Operand, kt: Any, stage: Any) -> List[Any]:
        """The copy path of ``op``'s k tile ``kt``, block-uniform: a tile inside the matrix
        with 16-byte rows takes ``cp.async``; one at an edge whose vectors are never cut
        (16-byte rows, edge extent a multiple of 8) predicated ``cp.async``; any other the
        2-byte edge copy (the template's ``lg_copy_edge`` per vector)."""
        c = self.c
        lim, _ = self.edge_limit(op)
        inside = (self.m0 + c.bm <= self.M) if op.name == "A" else (self.n0 + c.bn <= self.N)
        aligned = self.vec[op.name] >= 1
        uncut = sympy.And(aligned, sympy.Mod(lim, 8) < 1)
        fast = sympy.And(aligned, inside, kt * c.bk + c.bk <= self.K)
        return [If(fast, self.copy_tile(op, kt, stage, "fast")),
                If(sympy.And(uncut, sympy.Not(fast)), self.copy_tile(op, kt, stage, "whole")),
                If(sympy.And(sympy.Not(uncut), sympy.Not(fast)),
                   self.copy_tile(op, kt, stage, "edge"))]

    def load_stage(self, kt: Any, stage: Any) -> List[Any]:
        """The copies of this block's ``kt``-th k tile (:meth:`k_tile`) into ``stage``."""
        kt = self.k_tile(kt)
        return self.load_operand(self.p.a, kt, stage) + self.load_operand(self.p.b, kt, stage)

    def k_tile(self, kt: Any) -> Any:
        """The k tile of the matrix this block's ``kt``-th iteration multiplies: all of them
        here (a split kernel starts at its range's first)."""
        return kt

    def k_range(self) -> Tuple[List[Any], Any]:
        """The statements naming this block's k-tile count, and that count: ``KT`` here."""
        return [], sym("KT")

    # ---- wgmma and epilogue -------------------------------------------------------------
    def epilogue(self) -> List[Any]:
        """Pairs as one store where both columns exist and the row stride is even, else each
        element alone; nothing past M or N (the template's ``emit_pair_store``; the split
        kernel's ``emit_partial_store``), into :meth:`store_target`.  The thread's first row
        and column are two Lets (``er``, ``ec``; the template's ``crow`` / ``ccol``) and every
        store a constant step from them: printed in full per store, NVRTC re-derived them
        behind each short-circuit predicate (the split kernel's epilogue was 3x the
        template's SASS, its measured gap on an H100)."""
        c, M, N = self.c, self.M, self.N
        crow, ccol = accumulator_rows_cols(c.bn)
        t = sym("t")
        buf, glob, at, even, words = self.store_target()
        er, ec = sym("er"), sym("ec")
        out: List[Any] = [Comment(f"accumulators -> {words}: (row, col) of each item from the "
                                  "wgmma accumulator layout"), Let("t", self.tid - 128 * self.wg),
                          Let("er", self.m0 + self.wg * 64 + crow((t, 0))),
                          Let("ec", self.n0 + ccol((t, 0)))]
        for it in range(0, c.bn // 2, 2):
            r = er + crow((0, it)) - crow((0, 0))
            q = ec + ccol((0, it)) - ccol((0, 0))
            out += pair_or_single_stores(glob, self.acc, it, r, q, M, N,
                                         self.ldc, buf=buf, at=at, even=even)
        return out

    def store_target(self) -> Tuple[str, Any, Any, Any, str]:
        """``(buffer, its layout, (row, col) -> its coordinate, "pairs allowed", words)``: C
        row-major with row stride ldc, pairs (4 bytes) where ldc is even."""
        return ("C", self.c_glob, lambda r, q: (r, q), sympy.Mod(self.ldc, 2) < 1, "C")

    def raster(self) -> List[Any]:
        """``m0`` / ``n0`` of block ``pid``: the template's grouped raster."""
        c = self.c
        return raster_lets(c.bm, c.bn, c.bk, c.group_m, self.M, self.N, self.K)

    def build(self) -> AttnKernel:
        c, S = self.c, self.S
        kt = sym("kt")
        k_lets, KT = self.k_range()
        body: List[Any] = [Let("wg", sympy.floor(self.tid / 128))] + self.raster() + k_lets + \
            self.copy_bases() + [
            ZeroFrag(self.acc),
            Comment(f"prologue: k tiles 0..{S - 3} in flight, one cp.async group each (a loop:"
                    " the copy paths printed once, not per stage)"),
            Loop("ps", 0, S - 2, [If(sym("ps") < KT, self.load_stage(sym("ps"), sym("ps"))),
                                  CpAsyncCommit()], unroll=1)]
        nxt = kt + S - 2
        loop = Loop("kt", 0, KT)
        loop.body += [
            Let("rs", sympy.Mod(kt, S)), Let("ws", sympy.Mod(nxt, S)),
            Comment(f"k tile kt has landed once at most {S - 3} newer groups are pending; the "
                    "proxy fence makes the landed writes (cp.async and edge stores) visible "
                    "to wgmma, the barrier every thread's"),
            CpAsyncWait(S - 3), FenceProxyAsync(), Barrier(), WgmmaFence()]
        loop.body += shared_k_steps(c, self.p, self.acc, sym("rs"), self.wg)
        loop.body += [
            WgmmaCommit(),
            Comment("the stage the next copy overwrites was read by the wgmma group retired "
                    "by the previous iteration's wait"),
            If(nxt < KT, self.load_stage(nxt, sym("ws"))),
            CpAsyncCommit(), WgmmaWait(1, ("acc",))]
        body += [loop, WgmmaWait(0, ("acc",)), CpAsyncWait(0)]
        body += self.epilogue()
        name = self.kernel_name()
        header = [f"C[M x N] = A[M x K] (row-major, lda) @ B "
                  f"({'K x N' if c.b_major == 'n' else 'N x K'} row-major, ldb), {c.dtype}, f32 "
                  f"accumulation, runtime M/N/K and leading dimensions; block tile "
                  f"{c.bm}x{c.bn}x{c.bk}, {c.warpgroups} warpgroups, {S} stages, cp.async 16 B "
                  f"(edge tiles: 2-byte loads, zero fill), wgmma m64n{c.bn}k16, group_m "
                  f"{c.group_m}",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()
                   if "banks" not in k and "coverage" not in k]
        out, scalars, grid_symbols, meta = self.interface()
        return AttnKernel(name, [Param("A", c.dtype), Param("B", c.dtype), out],
                          [Shared("sA", c.dtype, S * self.elems["A"]),
                           Shared("sB", c.dtype, S * self.elems["B"])],
                          [self.stage_frag, self.edge_frag, self.acc], body, c.threads,
                          (1, 1, 1), grid_symbols=grid_symbols, header=header,
                          meta=dict(meta, plan=self.p, cfg=c), min_blocks=1,
                          scalars=[ScalarParam(n) for n in scalars],
                          spec=self.spec(name))

    # ---- what a variant changes ---------------------------------------------------------
    def kernel_name(self) -> str:
        return rt_kernel_name(self.c)

    def interface(self) -> Tuple[Any, Tuple[str, ...], Tuple[str, ...], dict]:
        """``(output parameter, scalar arguments, grid symbols, extra meta)``."""
        return Param("C", self.c.dtype, const=False), RT_SCALARS, ("pid",), {}

    def spec(self, name: str) -> KernelSpec:
        return rt_gemm_spec(name, self.c)


def build_wgmma_rt_ir(cfg: WgmmaGemmConfig = WgmmaGemmConfig(), wide: bool = False
                      ) -> AttnKernel:
    """The runtime-size IR of ``cfg`` (any M, N, K, leading dimensions); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` for split-K or a plan that fails its proofs.
    ``wide``: the 64-bit form (:mod:`.gemm_wide`)."""
    b = RtWgmmaBuilder(cfg)
    if not wide:
        return b.build()
    from .gemm_wide import widen_rt_gemm
    b.wide = True
    return widen_rt_gemm(b.build())


class IrWgmmaRtGemm(RtGemmKernel):
    """The IR-built runtime-size kernel of ``cfg``, verified (IR and printed CUDA, at
    :func:`rt_instances`; a passing verdict is remembered on disk by content) before anything
    is compiled: ``g(a, b, out=None) -> c`` with the template
    :class:`~kernels.nvidia.wgmma.WgmmaGemm`'s arguments and checks, any M/N/K and strides."""

    def __init__(self, cfg: WgmmaGemmConfig = WgmmaGemmConfig(), *,
                 backend: str = "auto") -> None:
        ir, source = self.build(cfg)
        super().__init__(cfg, ir, source, plan_wgmma_gemm(cfg), backend)

    def build(self, cfg: WgmmaGemmConfig, wide: bool = False) -> Tuple[Any, str]:
        """``(kernel IR, printed source)`` of ``cfg`` (``wide``: the 64-bit form)."""
        ir = build_wgmma_rt_ir(cfg, wide)
        return ir, emit_cuda_gemm_rt(ir)

    def make_template(self) -> Any:
        from .wgmma import WgmmaGemm
        return WgmmaGemm(self.cfg, backend=self.backend)

    def __call__(self, a, b, out=None, splits: int = 1):
        return self.bound(a, b, out, splits)(a, b, out)

    def bind(self, a, b, out=None, splits: int = 1):
        """Check the arguments (the template's checks) and return ``run(a, b, out) -> c``."""
        from ..errors import LaunchError
        if splits != 1:
            raise LaunchError(f"{self.kernel_name}: the IR-built cp.async wgmma GEMM has no "
                              f"split-K; splits={splits} needs WgmmaGemmConfig(split_k=True)")
        return self.bind_one_launch(a, b, out)
