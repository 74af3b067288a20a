"""The ``cp.async`` + ``wgmma`` GEMM of :mod:`kernels.nvidia.wgmma` built as kernel IR and proved
by the one verifier (issue 20 item 1).

Same plan as the string template (:func:`~kernels.nvidia.wgmma.plan_wgmma_gemm`: the swizzled
stage layouts, the ``cp.async`` partitions, the descriptors' constant fields and the start of
every warpgroup's k step), same pipeline (``stages - 2`` tiles loaded ahead, one wgmma group in
flight across the barrier), but every statement is IR (:mod:`kernels.ir.core`,
:mod:`kernels.ir.nvidia`, :mod:`kernels.ir.nvidia_wgmma`), printed by
:mod:`kernels.printer.cuda` and verified with :func:`kernels.verify.verify` (the IR and the
printed text) on ``sm_90a``.  What that adds to the template's plan proofs: the printed copy
offsets and descriptor starts are the plan's at every thread, stage and k tile; each
warpgroup's wgmma reads, through the descriptor model, exactly the A rows / B columns and k
slots its accumulator layout needs, summed over every k once; the wgmma group waits protect the
accumulators and the stage the next copy overwrites; the proxy fence orders the ``cp.async``
writes before the async-proxy reads.

Scope (differences from the template; ``gemm()`` runs the runtime-size form of
:mod:`kernels.nvidia.wgmma_rt_ir` instead): sizes are compile-time multiples of the tile (the
template takes any M/N/K at run time, with edge copies); blocks are launched row-major over
(M/bm, N/bn) (no group-M rasterisation); no split-K.  The register-A (``.rs``) form lives here
only.  The printed text differs from the template's (descriptor arithmetic per k step is an
address expression, not ``desc + (offset >> 4)``), so equality with the template is a GPU
comparison, not byte identity.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Tuple

import sympy

from layoutalg import ComposedLayout, Layout, composition
from mfma_specs.nvidia import ldmatrix
from mfma_specs.nvidia_wgmma import wgmma

from ..ir.core import (Access, Barrier, Comment, Frag, If, Kernel, Let, Loop, Param, Shared,
                       ZeroFrag, swizzle_expr, sym)
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from ..ir.nvidia_wgmma import (FenceProxyAsync, GmmaOperand, WgmmaCommit, WgmmaFence, WgmmaMma,
                               WgmmaWait)
from ..printer.cuda import emit_cuda
from .builder import CompiledKernel
from .gemm import GemmConfigError
from .gemm_ir import IrMmaGemm, mma_gemm_spec
from .wgmma import Operand, WgmmaGemmConfig, accumulator_rows_cols, plan_wgmma_gemm

__all__ = ["build_wgmma_gemm_ir", "IrWgmmaGemm", "shared_k_steps"]


A_FROM = ("shared", "registers")


class _Builder:
    def __init__(self, cfg: WgmmaGemmConfig, m: int, n: int, k: int,
                 a_from: str = "shared") -> None:
        if a_from not in A_FROM:
            raise GemmConfigError(f"a_from must be one of {A_FROM}, got {a_from!r}")
        if cfg.split_k:
            raise GemmConfigError("the IR-built wgmma GEMM has no split-K form yet; use "
                                  "WgmmaGemmConfig(split_k=False)")
        for v, t, what in ((m, cfg.bm, "m"), (n, cfg.bn, "n"), (k, cfg.bk, "k")):
            if not isinstance(v, int) or v < 1 or v % t:
                raise GemmConfigError(f"the IR-built wgmma GEMM takes {what} as a positive "
                                      f"multiple of its tile ({t}), got {v!r}")
        self.c, self.m, self.n, self.k = cfg, m, n, k
        self.p = plan_wgmma_gemm(cfg)
        self.a_regs = a_from == "registers"
        if self.a_regs and cfg.bk > 64:
            raise GemmConfigError(f"the register-A form reads A rows of at most 64 elements "
                                  f"(one swizzle row); bk={cfg.bk}")
        self.af = Frag("af", cfg.dtype, 8 * (cfg.bk // 16))
        self.S, self.KT = cfg.stages, k // cfg.bk
        self.tid, self.wg = sym("tid"), sym("wg")
        self.bm_, self.bn_ = sym("block_m"), sym("block_n")
        self.n_lets = 0
        self.stage_frag = Frag("cp_stage", cfg.dtype, cfg.vec, cfg.vec)
        self.acc = Frag("acc", "f32", cfg.bn // 2)
        self.a_glob = Layout((m, k), (k, 1))
        self.b_glob = Layout((n, k), (1, n)) if cfg.b_major == "n" else Layout((n, k), (k, 1))
        self.c_glob = Layout((m, n), (n, 1))
        self.elems = {"A": cfg.a_stage // 2, "B": cfg.b_stage // 2}

    def let(self, stem: str, expr: Any) -> Tuple[Let, Any]:
        self.n_lets += 1
        name = f"{stem}{self.n_lets}"
        return Let(name, sympy.expand(sympy.sympify(expr))), sym(name)

    def staged(self, op: Operand) -> Any:
        """``(pre-swizzle stage offset, stage) -> element of the shared array``: the plan's
        swizzle over the stages (its bits lie inside one 1024-byte stage, so it commutes with
        the stage offset; the gate checks every printed offset against this layout)."""
        e = self.elems[op.name]
        return ComposedLayout(op.smem.outer, 0, Layout((e, self.S), (1, e)))

    # ---- global -> shared ---------------------------------------------------------------
    def copy_tile(self, op: Operand, kt: Any, stage: Any) -> List[Any]:
        c, t, vec = self.c, self.tid, self.c.vec
        pre = composition(op.smem.inner, op.copy.off)
        origin = self.staged(op)
        out: List[Any] = []
        for i in range(op.copy.iters):
            row, col = op.copy.row((t, i)), op.copy.col((t, i))
            if op.name == "A":
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
            load = Access("load", "global", op.name, sympy.expand(glob(coords[0])), vec, regs,
                          tag=f"{op.name}.cp.async.load", origin=glob, coords=tuple(coords))
            off = pre((t, 0, i))
            let, s = self.let(f"s{op.name.lower()}_", off + stage * self.elems[op.name])
            store = Access("store", "lds", f"s{op.name}", swizzle_expr(op.smem.outer, s), vec,
                           regs, tag=f"{op.name}.cp.async.store", origin=origin,
                           coords=tuple((off + j, stage) for j in range(vec)))
            out += [let, CpAsync(load, store, tag=f"{op.name}.cp.async")]
        return out

    def load_stage(self, kt: Any, stage: Any) -> List[Any]:
        return self.copy_tile(self.p.a, kt, stage) + self.copy_tile(self.p.b, kt, stage)

    # ---- register A (the .rs form): ldmatrix of each warp's 16 rows ------------------------
    def load_a_regs(self, stage: Any) -> List[Any]:
        """``ldmatrix.x4`` of each k step's A into ``af``: lane ``l`` of warp ``w`` of the
        warpgroup supplies row ``16w + l % 8 + 8 ((l / 8) % 2)``, k ``8 (l / 16)`` of the
        warpgroup's 64 rows (matrices 0..3 = rows +0/+8 x k +0/+8: the mma.m16n8k16 A
        fragment, which is the wgmma register-A fragment of each warp; the gate checks it)."""
        c, op = self.c, self.p.a
        lane, wq = sym("lane"), sym("wq")
        row = self.wg * 64 + 16 * wq + sympy.Mod(lane, 8) + 8 * sympy.Mod(sympy.floor(lane / 8), 2)
        out: List[Any] = []
        for s in range(c.bk // 16):
            col = 16 * s + 8 * sympy.floor(lane / 16)
            off = sympy.expand(op.smem.inner(row * c.bk + col))
            let, sv = self.let("sa_", off + stage * self.elems["A"])
            out += [let, LdMatrixLoad("load", "lds", "sA", swizzle_expr(op.smem.outer, sv), 8,
                                      self.af.regs(range(8 * s, 8 * s + 8)), tag="A.ldmatrix",
                                      origin=self.staged(op),
                                      coords=tuple((off + j, stage) for j in range(8)),
                                      atom=ldmatrix(4, False))]
        return out

    # ---- wgmma ---------------------------------------------------------------------------
    def k_steps(self, stage: Any) -> List[Any]:
        c, p = self.c, self.p
        atom = wgmma(c.dtype, c.bn)
        out: List[Any] = []
        for s in range(c.bk // 16):
            a_start = stage * (c.a_stage // 2) + p.a.k_starts[s] // 2 + \
                self.wg * (p.a.wg_step // 2)
            b_start = stage * (c.b_stage // 2) + p.b.k_starts[s] // 2
            a = self.af.regs(range(8 * s, 8 * s + 8)) if self.a_regs else \
                GmmaOperand("sA", sympy.expand(a_start), p.a.desc, p.a.major, 64)
            b = GmmaOperand("sB", sympy.expand(b_start), p.b.desc, p.b.major, c.bn)
            out.append(WgmmaMma(atom, self.acc.regs(range(self.acc.count)), a, b,
                                tag=f"wgmma(k{s})"))
        return out

    # ---- epilogue -----------------------------------------------------------------------
    def epilogue(self) -> List[Any]:
        c = self.c
        crow, ccol = accumulator_rows_cols(c.bn)
        t = sym("t")
        out: List[Any] = [Comment("accumulators -> C: (row, col) of each item from the wgmma "
                                  "accumulator layout"), Let("t", self.tid - 128 * self.wg)]
        for it in range(0, c.bn // 2, 2):
            r = self.bm_ * c.bm + self.wg * 64 + crow((t, it))
            coords = tuple((sympy.expand(r), sympy.expand(self.bn_ * c.bn + ccol((t, it + e))))
                           for e in range(2))
            out.append(Access("store", "global", "C", sympy.expand(self.c_glob(coords[0])), 2,
                              self.acc.regs([it, it + 1]), tag="C.store", origin=self.c_glob,
                              coords=coords))
        return out

    def build(self) -> Kernel:
        c, S, KT = self.c, self.S, self.KT
        kt = sym("kt")
        rs = sym("rs")
        body: List[Any] = [
            Let("wg", sympy.floor(self.tid / 128)),
            *([Let("lane", sympy.Mod(self.tid, 32)),
               Let("wq", sympy.floor(sympy.Mod(self.tid, 128) / 32))] if self.a_regs else []),
            ZeroFrag(self.acc),
            Comment(f"prologue: k tiles 0..{S - 3} in flight, one cp.async group each")]
        for s in range(S - 2):
            if s < KT:
                body += self.load_stage(s, s)
            body.append(CpAsyncCommit())
        nxt = kt + S - 2
        loop = Loop("kt", 0, KT)
        loop.body += [
            Let("rs", sympy.Mod(kt, S)),
            Comment(f"k tile kt has landed once at most {S - 3} newer groups are pending; the "
                    "proxy fence makes the landed cp.async writes visible to wgmma, the "
                    "barrier every thread's"),
            CpAsyncWait(S - 3), FenceProxyAsync(), Barrier()]
        if self.a_regs:
            loop.body += [Comment("register A: each warp's rows of stage rs by ldmatrix, before "
                                  "the fence that orders register writes before wgmma reads")]
            loop.body += self.load_a_regs(rs)
        loop.body += [WgmmaFence()]
        loop.body += self.k_steps(rs)
        loop.body += [
            WgmmaCommit(),
            Comment("the stage the next copy overwrites was read by the wgmma group retired "
                    "by the previous iteration's wait"),
            If(nxt < KT, self.load_stage(nxt, sympy.Mod(nxt, S))),
            CpAsyncCommit()]
        if self.a_regs:     # the next iteration's ldmatrix rewrites af: retire its readers
            loop.body += [WgmmaWait(0, ("acc", "af"))]
        else:
            loop.body += [WgmmaWait(1, ("acc",))]
        body += [loop, WgmmaWait(0, ("acc",)), CpAsyncWait(0)]
        body += self.epilogue()
        grid = (self.m // c.bm, self.n // c.bn, 1)
        name = (f"lg_irwgmma_{c.dtype}_{c.b_major}_{self.m}x{self.n}x{self.k}_{c.bm}x{c.bn}x"
                f"{c.bk}_s{S}" + ("_rs" if self.a_regs else ""))
        header = [f"C[{self.m}x{self.n}] = A[{self.m}x{self.k}] (row-major) @ B "
                  f"({'K x N' if c.b_major == 'n' else 'N x K'} row-major), {c.dtype}, "
                  f"f32 accumulation; block tile {c.bm}x{c.bn}x{c.bk}, {c.warpgroups} "
                  f"warpgroups, {S} stages, cp.async 16 B, wgmma m64n{c.bn}k16"
                  f"{' with A from registers (ldmatrix)' if self.a_regs else ''}; grid "
                  f"{grid[0]}x{grid[1]}",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()
                   if "banks" not in k and "coverage" not in k]
        return Kernel(name, [Param("A", c.dtype), Param("B", c.dtype),
                             Param("C", c.dtype, const=False)],
                      [Shared("sA", c.dtype, S * self.elems["A"]),
                       Shared("sB", c.dtype, S * self.elems["B"])],
                      [self.stage_frag, self.acc] + ([self.af] if self.a_regs else []), body,
                      c.threads, grid,
                      header=header, meta={"plan": self.p},
                      spec=mma_gemm_spec(name, c.dtype, self.m, self.n, self.k, grid[:2]))


def shared_k_steps(cfg: Any, plan: Any, acc: Frag, stage: Any, wg: Any) -> List[Any]:
    """One ``WgmmaMma`` per 16-deep k step of shared-memory stage ``stage``, A and B through
    descriptors (warpgroup ``wg``'s A rows): the k loop body the runtime-size cp.async GEMM
    (:mod:`.wgmma_rt_ir`) and the TMA GEMM (:mod:`.wgmma_tma_ir`) share; the starts are the
    plan's proved ones (``cfg``: a configuration with ``a_stage`` / ``b_stage`` / ``bk`` /
    ``bn`` / ``dtype``)."""
    p = plan
    atom = wgmma(cfg.dtype, cfg.bn)
    out: List[Any] = []
    for s in range(cfg.bk // 16):
        a0 = stage * (cfg.a_stage // 2) + p.a.k_starts[s] // 2 + wg * (p.a.wg_step // 2)
        b0 = stage * (cfg.b_stage // 2) + p.b.k_starts[s] // 2
        out.append(WgmmaMma(atom, acc.regs(range(acc.count)),
                            GmmaOperand("sA", sympy.expand(a0), p.a.desc, p.a.major, 64),
                            GmmaOperand("sB", sympy.expand(b0), p.b.desc, p.b.major, cfg.bn),
                            tag=f"wgmma(k{s})"))
    return out


def build_wgmma_gemm_ir(cfg: WgmmaGemmConfig, m: int, n: int, k: int,
                        a_from: str = "shared") -> Kernel:
    """The IR of ``cfg`` for an ``m x n x k`` problem (multiples of the tile); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` otherwise or when the plan's proofs fail.
    ``a_from="registers"``: A is loaded from shared memory into registers by ``ldmatrix`` and
    each wgmma takes it from there (the ``.rs`` form; one wgmma group in flight at most, since
    the next k tile's ``ldmatrix`` rewrites the registers)."""
    return _Builder(cfg, m, n, k, a_from).build()


class IrWgmmaGemm(IrMmaGemm):
    """The IR-built wgmma kernel of ``cfg`` for one ``m x n x k`` problem, verified (the IR and
    its printed CUDA) on ``cfg.arch`` before anything is compiled: ``g(a, b, out=None) -> c``
    on contiguous torch CUDA tensors of exactly that shape (the launch of
    :class:`~kernels.nvidia.gemm_ir.IrMmaGemm`).  ``report`` is the verifier's."""

    def __init__(self, cfg: WgmmaGemmConfig, m: int, n: int, k: int, *,
                 a_from: str = "shared", backend: str = "auto") -> None:
        from ..verify.verifier import verify
        self.ir = build_wgmma_gemm_ir(cfg, m, n, k, a_from)
        source = emit_cuda(self.ir)
        self.report = verify(self.ir, arch=cfg.arch, source=source).raise_if_failed()
        self.shape = (m, n, k)
        self.gemm_cfg = cfg
        CompiledKernel.__init__(self, SimpleNamespace(arch=cfg.arch, name=self.ir.name), source,
                                backend)
