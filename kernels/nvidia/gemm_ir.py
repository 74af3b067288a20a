"""The ``mma.sync`` GEMM built as kernel IR and proved by the one verifier (issue 20 item 1).

Same layouts as the string-template kernel of :mod:`kernels.nvidia.gemm` (its
:func:`~kernels.nvidia.gemm.plan_gemm`: swizzled shared tiles, ``cp.async`` copy partitions,
``ldmatrix`` address layouts, the ``mma.sync`` m16n8k16 atom of :mod:`mfma_specs.nvidia`), but
every statement is IR (:mod:`kernels.ir.core`, :mod:`kernels.ir.nvidia`), printed by
:mod:`kernels.printer.cuda` and verified by :func:`kernels.verify.verify` with a
:class:`~kernels.verify.spec.KernelSpec` on the ``sm_90`` target: index math, bounds, vector
alignment, bank conflicts under the 32-bank model (``cp.async`` writes and ``ldmatrix`` reads),
coverage of C, shared-memory capacity, the ``ldmatrix -> mma`` lane pairing, the accumulator
write-back (``C = A B`` summed over every k once) and races, including the ``cp.async`` group
rule (a shared element is read only after the ``cp.async.wait_group`` that retires its copy and a
barrier).

Scope today (what differs from the template kernel): sizes are compile-time, multiples of the
tile (``m % bm == n % bn == k % bk == 0``; the template takes any M/N/K at run time); blocks are
launched row-major over a (M/bm, N/bn) grid (no group-M rasterisation); each k tile's fragments
are loaded then multiplied (no register double-buffering, no immediate-offset ``ldmatrix``).
So it computes the same function as the template on those shapes, but its speed is not the
template's; ``gemm()`` does not dispatch to it (yet).

>>> k = build_mma_gemm_ir(CudaGemmConfig(bm=64, bn=64, warps_m=2, warps_n=2), 128, 128, 64)
>>> verify(k, arch="sm_90").holds      # doctest: +SKIP
True
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Optional, Tuple

import sympy

from layoutalg import ComposedLayout, Layout
from mfma_specs.nvidia import ldmatrix, mma_m16n8k16

from ..ir.core import (Access, Barrier, Comment, Frag, If, Kernel, Let, Loop, Mfma, Param, Shared,
                       ZeroFrag, swizzle_expr, sym)
from ..errors import LaunchError
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from ..printer.cuda import emit_cuda, smem_bytes
from ..runtime.rocm import TensorSpec as LaunchSpec
from ..verify.spec import Contraction, Dim, Domain, KernelSpec, Symbol, TensorSpec
from .builder import TORCH_DT, CompiledKernel, dtype_name
from .gemm import CopyPlan, CudaGemmConfig, GemmConfigError, plan_gemm, split_rows

__all__ = ["build_mma_gemm_ir", "IrMmaGemm", "mma_gemm_spec"]


def mma_gemm_spec(name: str, dtype: str, m: int, n: int, k: int,
                  grid: Tuple[int, int]) -> KernelSpec:
    """``C[m, n] = sum_k A[m, k] B[n, k]`` (B's coordinates are (n, k) whatever its memory
    order), every block of the compile-time grid."""
    return KernelSpec(
        name=name, dims=(Dim("m", m), Dim("n", n), Dim("k", k)),
        tensors=(TensorSpec("A", ("m", "k"), "input", dtype),
                 TensorSpec("B", ("n", "k"), "input", dtype),
                 TensorSpec("C", ("m", "n"), "output", dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), k),),
        symbols=(Symbol("block_m", 0, grid[0] - 1), Symbol("block_n", 0, grid[1] - 1)),
        domain=Domain.every_block())


class _Builder:
    def __init__(self, cfg: CudaGemmConfig, m: int, n: int, k: int) -> None:
        for v, t, what in ((m, cfg.bm, "m"), (n, cfg.bn, "n"), (k, cfg.bk, "k")):
            if v < 1 or v % t:
                raise GemmConfigError(f"the IR-built mma.sync GEMM takes {what} as a positive "
                                      f"multiple of its tile ({t}), got {v}")
        self.c, self.m, self.n, self.k = cfg, m, n, k
        self.p = plan_gemm(cfg)
        self.S = cfg.stages
        self.KT = k // cfg.bk
        self.tid, self.lane, self.wm, self.wn = sym("tid"), sym("lane"), sym("wm"), sym("wn")
        self.bm_, self.bn_ = sym("block_m"), sym("block_n")
        self.n_lets = 0
        kk, mt, nt = cfg.bk // 16, cfg.wtm // 16, cfg.wtn // 8
        self.kk, self.mt, self.nt = kk, mt, nt
        self.stage_frag = Frag("cp_stage", cfg.dtype, cfg.vec, cfg.vec)
        self.af = Frag("af", cfg.dtype, kk * mt * 8, 8)
        self.bf = Frag("bf", cfg.dtype, kk * nt * 4, 4)
        self.acc = Frag("acc", "f32", mt * nt * 4, 4)
        self.a_glob = Layout((m, k), (k, 1))
        self.b_glob = Layout((n, k), (1, n)) if cfg.b_major == "n" else Layout((n, k), (k, 1))
        self.c_glob = Layout((m, n), (n, 1))
        br, bc = (cfg.bk, cfg.bn) if cfg.b_major == "n" else (cfg.bn, cfg.bk)
        self.a_elems, self.b_elems = cfg.bm * cfg.bk, br * bc
        self.smem = {"A": self._staged(self.p.sw_a, self.a_elems),
                     "B": self._staged(self.p.sw_b, self.b_elems)}

    def _staged(self, sw: Any, elems: int) -> Any:
        """``(tile offset, stage) -> element of the shared array``: stages of the plan's
        swizzled tile (the swizzle's bits lie inside one stage, so it commutes with the
        stage offset; the gate checks every printed offset against this layout)."""
        lay = Layout((elems, self.S), (1, elems))
        return ComposedLayout(sw, 0, lay) if sw is not None else lay

    def let(self, stem: str, expr: Any) -> Tuple[Let, Any]:
        self.n_lets += 1
        name = f"{stem}{self.n_lets}"
        return Let(name, sympy.expand(sympy.sympify(expr))), sym(name)

    def lds(self, op: str, tile_off: Any, stage: Any) -> Tuple[Let, Any, Any]:
        """(let of the linear offset, printed swizzled offset, origin layout) of one shared
        vector at ``tile_off`` of stage ``stage``."""
        sw = self.p.sw_a if op == "A" else self.p.sw_b
        elems = self.a_elems if op == "A" else self.b_elems
        let, s = self.let(f"s{op.lower()}_", tile_off + stage * elems)
        return let, swizzle_expr(sw, s) if sw is not None else s, self.smem[op]

    # ---- global -> shared ---------------------------------------------------------------
    def copy_tile(self, op: str, cpl: CopyPlan, kt: Any, stage: Any) -> List[Any]:
        c, t, vec = self.c, self.tid, self.c.vec
        out: List[Any] = []
        for i in range(cpl.iters):
            row, col = cpl.row((t, i)), cpl.col((t, i))
            tile_off = cpl.off((t, 0, i))
            if op == "A":
                coords = [(self.bm_ * c.bm + row, kt * c.bk + col + j) for j in range(vec)]
                glob = self.a_glob
            elif c.b_major == "n":          # tile rows are k, columns n
                coords = [(self.bn_ * c.bn + col + j, kt * c.bk + row) for j in range(vec)]
                glob = self.b_glob
            else:                           # tile rows are n, columns k
                coords = [(self.bn_ * c.bn + row, kt * c.bk + col + j) for j in range(vec)]
                glob = self.b_glob
            coords = [tuple(sympy.expand(x) for x in cc) for cc in coords]
            regs = self.stage_frag.regs(range(vec))
            load = Access("load", "global", op, sympy.expand(glob(coords[0])), vec, regs,
                          tag=f"{op}.cp.async.load", origin=glob, coords=tuple(coords))
            let, soff, origin = self.lds(op, tile_off, stage)
            store = Access("store", "lds", f"s{op}", soff, vec, regs, tag=f"{op}.cp.async.store",
                           origin=origin, coords=tuple((tile_off + j, stage) for j in range(vec)))
            out += [let, CpAsync(load, store, tag=f"{op}.cp.async")]
        return out

    def load_stage(self, kt: Any, stage: Any) -> List[Any]:
        return (self.copy_tile("A", self.p.a_copy, kt, stage)
                + self.copy_tile("B", self.p.b_copy, kt, stage))

    # ---- shared -> registers -> mma ------------------------------------------------------
    def compute(self, stage: Any) -> List[Any]:
        c, p = self.c, self.p
        spec = mma_m16n8k16(c.dtype)
        ldm_a, ldm_b = ldmatrix(4, False), ldmatrix(4, c.b_major == "n")
        out: List[Any] = []
        for k in range(self.kk):
            for i in range(self.mt):
                off = p.a_read((self.lane, 0, (k, i, self.wm)))
                let, soff, origin = self.lds("A", off, stage)
                out += [let, LdMatrixLoad(
                    "load", "lds", "sA", soff, 8, self.af.regs(range((k * self.mt + i) * 8,
                                                                     (k * self.mt + i + 1) * 8)),
                    tag="A.ldmatrix", origin=origin,
                    coords=tuple((off + j, stage) for j in range(8)), atom=ldm_a)]
            for j2 in range(self.nt // 2):
                off = p.b_read((self.lane, 0, (k, j2, self.wn)))
                let, soff, origin = self.lds("B", off, stage)
                b0 = (k * self.nt + 2 * j2) * 4
                out += [let, LdMatrixLoad(
                    "load", "lds", "sB", soff, 8, self.bf.regs(range(b0, b0 + 8)),
                    tag="B.ldmatrix", origin=origin,
                    coords=tuple((off + j, stage) for j in range(8)), atom=ldm_b)]
            for j in range(self.nt):
                for i in range(self.mt):
                    a0, b0, c0 = (k * self.mt + i) * 8, (k * self.nt + j) * 4, (i * self.nt + j) * 4
                    out.append(Mfma(spec, self.acc.regs(range(c0, c0 + 4)),
                                    self.af.regs(range(a0, a0 + 8)),
                                    self.bf.regs(range(b0, b0 + 4)), tag=f"mma(k{k},m{i},n{j})"))
        return out

    # ---- epilogue -----------------------------------------------------------------------
    def epilogue(self) -> List[Any]:
        c = self.c
        crow, ccol = split_rows(mma_m16n8k16(c.dtype).tv_layout("C"), 16)
        out: List[Any] = [Comment("accumulators -> C: (row, col) of each item from the mma C "
                                  "layout")]
        for i in range(self.mt):
            for j in range(self.nt):
                for h in range(2):
                    coords = []
                    for e in (2 * h, 2 * h + 1):
                        r = self.bm_ * c.bm + self.wm * c.wtm + 16 * i + crow((self.lane, e))
                        q = self.bn_ * c.bn + self.wn * c.wtn + 8 * j + ccol((self.lane, e))
                        coords.append((sympy.expand(r), sympy.expand(q)))
                    c0 = (i * self.nt + j) * 4 + 2 * h
                    out.append(Access("store", "global", "C",
                                      sympy.expand(self.c_glob(coords[0])), 2,
                                      self.acc.regs([c0, c0 + 1]), tag="C.store",
                                      origin=self.c_glob, coords=tuple(coords)))
        return out

    # ---- the kernel ---------------------------------------------------------------------
    def build(self) -> Kernel:
        c, S, KT = self.c, self.S, self.KT
        kt = sym("kt")
        body: List[Any] = [
            Let("lane", sympy.Mod(self.tid, 32)),
            Let("wm", sympy.Mod(sympy.floor(self.tid / 32), c.warps_m)),
            Let("wn", sympy.floor(self.tid / (32 * c.warps_m))),
            ZeroFrag(self.acc),
            Comment(f"prologue: k tiles 0..{S - 2} in flight, one cp.async group each")]
        for s in range(S - 1):
            if s < KT:
                body += self.load_stage(s, s)
            body.append(CpAsyncCommit())
        loop = Loop("kt", 0, KT)
        nxt = kt + S - 1
        loop.body += [
            Comment(f"k tile kt has landed once at most {S - 2} newer groups are pending; the "
                    "barrier makes every thread's copies visible and retires the reads of the "
                    "stage the next copy overwrites"),
            CpAsyncWait(S - 2), Barrier(),
            If(nxt < KT, self.load_stage(nxt, sympy.Mod(nxt, S))),
            CpAsyncCommit()]
        loop.body += self.compute(sympy.Mod(kt, S))
        body += [loop, CpAsyncWait(0)]
        body += self.epilogue()
        grid = (self.m // c.bm, self.n // c.bn, 1)
        name = (f"lg_irgemm_{c.dtype}_{c.b_major}_{self.m}x{self.n}x{self.k}_{c.bm}x{c.bn}x"
                f"{c.bk}_w{c.warps_m}x{c.warps_n}_s{S}_v{c.vec}")
        header = [f"C[{self.m}x{self.n}] = A[{self.m}x{self.k}] (row-major) @ B "
                  f"({'K x N' if c.b_major == 'n' else 'N x K'} row-major), {c.dtype}, "
                  f"f32 accumulation",
                  f"block tile {c.bm}x{c.bn}x{c.bk}, {c.warps_m}x{c.warps_n} warps, {S} stages, "
                  f"cp.async {2 * c.vec} B, ldmatrix.x4, mma.sync m16n8k16; grid {grid[0]}x"
                  f"{grid[1]}",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items() if "banks" not in k
                   and "lanes" not in k and "coverage" not in k]
        return Kernel(name, [Param("A", c.dtype), Param("B", c.dtype),
                             Param("C", c.dtype, const=False)],
                      [Shared("sA", c.dtype, S * self.a_elems),
                       Shared("sB", c.dtype, S * self.b_elems)],
                      [self.stage_frag, self.af, self.bf, self.acc], body, c.threads, grid,
                      header=header, meta={"plan": self.p},
                      spec=mma_gemm_spec(name, c.dtype, self.m, self.n, self.k, grid[:2]))


def build_mma_gemm_ir(cfg: CudaGemmConfig, m: int, n: int, k: int) -> Kernel:
    """The IR of ``cfg`` for an ``m x n x k`` problem (multiples of the tile); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` otherwise or when the plan's proofs fail."""
    return _Builder(cfg, m, n, k).build()


class IrMmaGemm(CompiledKernel):
    """The IR-built kernel of ``cfg`` for one ``m x n x k`` problem, verified (the IR and its
    printed CUDA) on ``cfg.arch`` before anything is compiled: ``g(a, b, out=None) -> c`` on
    contiguous torch CUDA tensors of exactly that shape.  ``report`` is the verifier's."""

    def __init__(self, cfg: CudaGemmConfig, m: int, n: int, k: int, *,
                 backend: str = "auto") -> None:
        from ..verify.verifier import verify
        self.ir = build_mma_gemm_ir(cfg, m, n, k)
        source = emit_cuda(self.ir)
        self.report = verify(self.ir, arch=cfg.arch, source=source).raise_if_failed()
        self.shape = (m, n, k)
        self.gemm_cfg = cfg
        super().__init__(SimpleNamespace(arch=cfg.arch, name=self.ir.name), source, backend)

    def __call__(self, a: Any, b: Any, out: Optional[Any] = None) -> Any:
        import torch
        from ..runtime.cuda import launch
        m, n, k = self.shape
        c = self.gemm_cfg
        want_b = (k, n) if c.b_major == "n" else (n, k)
        dt = TORCH_DT[c.dtype]
        for t, nm, shp in ((a, "a", (m, k)), (b, "b", want_b)):
            if tuple(getattr(t, "shape", ())) != shp or dtype_name(t) != dt or \
                    not t.is_contiguous():
                raise LaunchError(f"{nm} must be a contiguous {shp} {dt} tensor for "
                                  f"{self.ir.name}, got {tuple(getattr(t, 'shape', ()))} "
                                  f"{getattr(t, 'dtype', type(t).__name__)}")
        if out is None:
            out = torch.empty((m, n), dtype=a.dtype, device=a.device)
        elif tuple(out.shape) != (m, n) or not out.is_contiguous() or dtype_name(out) != dt:
            raise LaunchError(f"out must be a contiguous ({m}, {n}) {dt} tensor")
        spec16 = LaunchSpec(strides=(), align=16)
        launch(self.module, self.ir.name, self.ir.grid, self.ir.block, [a, b, out],
               signature=("ptr", "ptr", "ptr"), specs=[spec16, spec16,
                                                       LaunchSpec(strides=(), align=4)],
               smem_bytes=smem_bytes(self.ir))
        return out
