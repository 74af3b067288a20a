"""The ``mma.sync`` GEMM of :mod:`kernels.nvidia.gemm` as kernel IR at **runtime sizes** with
the template's schedule (issue 20 item 1): the form :func:`kernels.nvidia.dispatch.gemm` runs
on the mma.sync path.

Same plan as the template (:func:`~kernels.nvidia.gemm.plan_gemm`: swizzled stage layouts,
copy partitions, ``ldmatrix`` address layouts, all proved there) and the template's program,
every statement IR:

* ``M``, ``N``, ``K`` and the leading dimensions ``lda``, ``ldb``, ``ldc`` are ``int``
  arguments (plus the host's ``a_vec`` / ``b_vec``: that operand's rows are 16-byte aligned);
  a 1-D grid of ``ceil(M/bm) ceil(N/bn)`` blocks walks the tiles in the template's grouped
  raster (:func:`~kernels.nvidia.rt_gemm_parts.raster_lets`);
* ``stages - 1`` k tiles in flight, one ``cp.async`` group each; per operand and k tile the
  runtime-size wgmma GEMM's three copy paths (:mod:`kernels.nvidia.wgmma_rt_ir`: unpredicated
  ``cp.async`` inside, whole-vector predicated ``cp.async`` at an edge that cuts no vector,
  else the 2-byte edge copy), the first chosen by one compare of loop-invariant ``Let`` s
  (``a_fkt`` / ``b_fkt``: how many leading k tiles of the operand are inside, counted once
  per block; ``ab_fkt``: both, one branch as the template's ``full``);
* the fragments **double-buffered** as the template's: the ``ldmatrix`` of k step ``s + 1``
  is issued before the ``mma`` of step ``s``, and across the k tile boundary (the wait and
  barrier sit before the last k step's ``mma``, whose next fragments are the next tile's
  first: CUTLASS-style); ``ldmatrix`` addresses are the template's per-lane swizzled base
  XOR a constant plus an immediate (:func:`~kernels.nvidia.gemm.swz_split`, proved at every
  lane and warp);
* the k loop in two parts (issue 20 item 1, session 12): a **main loop** over the tiles whose
  next copy is on both operands' fast path (``kt + S - 1 < ab_fkt``), ``S`` tiles per trip,
  so each tile's stage is a constant (every shared offset an immediate), its copy the
  unpredicated ``cp.async`` with no branch and its next tile's fragments loaded
  unconditionally; then a **tail loop** over the rest (an edge block's tiles, the last
  ``S - 1``, the remainder of ``S``) with the stage ``kt % S`` and the copy paths;
* each warp's ``mma`` in the template's order (``mma_order``); C as 4-byte pairs where both
  columns exist and ``ldc`` is even, else element by element, never past M or N.

The one difference from the template: on the last k tile the "next" fragments are the last
tile's own again (the tail's stage ``min(kt + 1, KT - 1) % S``; the template reads the stage
after it, stale or never written, and never uses it), so no thread reads shared memory
nothing wrote and no load is guarded.  The sums are the template's, in its k order: the
output is bitwise the template's.

Proved by :func:`kernels.verify.verify` at the launches of :func:`mma_rt_instances` (edge
tiles in M, N and K, odd K / N / leading dimensions, 1x1x8, a partial raster group, every copy
path), IR and printed text, as :mod:`kernels.nvidia.wgmma_rt_ir` is.

Shared offsets are printed as a per-thread base and a block-uniform rest scaled apart
(``meta["split_shared_offsets"]``, :mod:`kernels.printer.cuda_gemm_edge`), so the compiler
adds the stage once per k tile rather than an add and a scale per access.

Scope (:func:`mma_rt_refusal`): 16-byte copy vectors (``vec=8``; 8- and 4-byte rows run on
the template ``CudaGemm``) and an even number of 16-wide k steps per tile (``bk`` a multiple
of 32: the fragment buffers alternate statically; the template now refuses ``bk=16`` too).
Where the dispatch runs it: :func:`mma_rt_at_parity` (measured on an H100,
docs/PERFORMANCE.md): every launch of more than one tile.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import sympy

from layoutalg import ComposedLayout, Layout
from layoutalg.symbolic import Xor
from mfma_specs.nvidia import ldmatrix, mma_m16n8k16

from ..ir.attention import AttnKernel, ScalarParam
from ..ir.core import (Access, Barrier, Comment, Frag, If, Let, Loop, Mfma, Param, Shared,
                       ZeroFrag, swizzle_expr, sym)
from ..ir.nvidia import CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrixLoad
from ..printer.cuda_gemm_edge import emit_cuda_gemm_rt
from ..selection import GemmProblem, cdiv
from ..verify.concrete_instances import RuntimeInstance
from ..verify.spec import KernelSpec
from .gemm import (CopyPlan, CudaGemmConfig, GemmConfigError, copy_steps, lane_bases,
                   mma_issue_order, plan_gemm, split_rows, swz_split)
from .rt_gemm_launch import RtGemmKernel
from .rt_gemm_parts import (RT_SCALARS, RtGemmBuilder, copy_vector, edge_limit, lt,
                            pair_or_single_stores, raster_lets)
from .wgmma_rt_ir import rt_gemm_spec, rt_instances

__all__ = ["build_mma_rt_ir", "mma_rt_instances", "mma_rt_spec", "mma_rt_refusal",
           "mma_rt_at_parity", "mma_rt_kernel_name", "IrMmaRtGemm"]


def mma_rt_refusal(cfg: CudaGemmConfig) -> Optional[str]:
    """Why the runtime-size IR form cannot run ``cfg`` (None: it can); dispatch and the
    builder read this one rule."""
    if cfg.vec != 8:
        return (f"the IR-built mma.sync GEMM copies 16-byte vectors (vec=8), got vec={cfg.vec}; "
                "the template CudaGemm runs 8- and 4-byte copies")
    if (cfg.bk // 16) % 2:
        return (f"the IR-built mma.sync GEMM alternates its two fragment buffers per k step, "
                f"so a tile needs an even number of 16-wide k steps (bk a multiple of 32), got "
                f"bk={cfg.bk}")
    return None


def mma_rt_at_parity(p: GemmProblem, cfg: CudaGemmConfig) -> bool:
    """Whether the IR form runs ``p`` at least as fast as the template, as measured (H100,
    2026-11-24 23:56Z, ``benchmarks/nvidia_mma_rt_ir.py --rounds 7 --reps 8``: the suite's 14
    GEMM shapes and 3 with B K-major, docs/PERFORMANCE.md): 1.004-1.022x on the six edge-free
    N-major problems (since the main loop of constant stages; before it 0.96-0.98x, which
    kept them on the template), 1.06x with B K-major, 1.06-1.29x where a block reaches an
    edge (the template's ``full`` sends both operands of such a block through its per-vector
    edge branches, the IR only the operand at the edge).  Not at parity: one block of one k
    tile (1x1x8: 0.95x, launch-bound, +0.2 us), which the dispatch leaves on the template."""
    one_launch_tile = cdiv(p.m, cfg.bm) * cdiv(p.n, cfg.bn) == 1 and p.k <= cfg.bk
    return not one_launch_tile


def mma_rt_kernel_name(cfg: CudaGemmConfig) -> str:
    """The IR-built kernel's name (``lg_irgemm_rt_`` + the template's suffix): what a profiler
    and ``print(choose_gemm(a, b))`` show."""
    return "lg_irgemm_rt_" + cfg.name[len("lg_gemm_"):]


def mma_rt_instances(cfg: CudaGemmConfig) -> Tuple[RuntimeInstance, ...]:
    """The launches the kernel is verified at: those of the runtime-size wgmma GEMM
    (:func:`~kernels.nvidia.wgmma_rt_ir.rt_instances`: edge tiles in M, N and K with odd N and
    ``K = 2 bk + 2``, 16-byte rows with K and N multiples of 8, 1 x 1 x 8, a partial raster
    group with odd ``lda`` and ``ldc``), one k tile short of the pipeline (``K`` under
    ``(stages - 2) bk``: prologue loads skipped, the last tile's fragments reloaded at once)
    and the main loop: ``K = 3 S bk + 8`` over two tile rows, the inside block running two
    trips of ``S`` tiles then the tail (``S`` whole tiles and the K edge), the block at the M
    edge the tail alone."""
    short = RuntimeInstance("short_k", dict(M=cfg.bm, N=cfg.bn, K=cfg.bk, lda=cfg.bk,
                                            ldb=cfg.bn if cfg.b_major == "n" else cfg.bk,
                                            ldc=cfg.bn, a_vec=1, b_vec=1), (1, 1, 1))
    k = 3 * cfg.stages * cfg.bk + 8
    main = RuntimeInstance("main_loop", dict(M=cfg.bm + 1, N=cfg.bn, K=k, lda=k,
                                             ldb=cfg.bn if cfg.b_major == "n" else k,
                                             ldc=cfg.bn, a_vec=1, b_vec=1), (2, 1, 1))
    return tuple(rt_instances(cfg)) + (short, main)


def mma_rt_spec(name: str, cfg: CudaGemmConfig) -> KernelSpec:
    """``C[m, n] = sum_k A[m, k] B[n, k]`` with runtime M, N, K, proved at the launches of
    :func:`mma_rt_instances`."""
    return rt_gemm_spec(name, cfg, mma_rt_instances)


class _Builder(RtGemmBuilder):
    def __init__(self, cfg: CudaGemmConfig) -> None:
        super().__init__(cfg, plan_gemm)
        self.lane, self.wm, self.wn = sym("lane"), sym("wm"), sym("wn")
        self.kk, self.mt, self.nt = cfg.bk // 16, cfg.wtm // 16, cfg.wtn // 8
        # two fragment buffers (the template's af[2][mt][4], bf[2][nt][2])
        self.af = Frag("af", cfg.dtype, 2 * self.mt * 8, 8)
        self.bf = Frag("bf", cfg.dtype, 2 * self.nt * 4, 4)
        self.acc = Frag("acc", "f32", self.mt * self.nt * 4, 4)
        br, bc = (cfg.bk, cfg.bn) if cfg.b_major == "n" else (cfg.bn, cfg.bk)
        self.elems = {"A": cfg.bm * cfg.bk, "B": br * bc}
        self.sw = {"A": self.p.sw_a, "B": self.p.sw_b}
        self.copy = {"A": self.p.a_copy, "B": self.p.b_copy}
        self.steps = {op: copy_steps(self.copy[op], self.p.flat_smem(op)) for op in "AB"}
        for op, steps in self.steps.items():
            if any(ds is None for _, _, ds in steps):
                raise GemmConfigError(f"{cfg.name}: the {op} copy's shared offsets are not one "
                                      "per-thread base plus constants")
        self.xor_lets: Dict[str, Dict[Any, str]] = {"A": {}, "B": {}}

    def refusal(self, cfg: CudaGemmConfig) -> Optional[str]:
        return mma_rt_refusal(cfg)

    def staged(self, op: str) -> Any:
        """``(tile offset, stage) -> element of the shared array``: stages of the plan's
        swizzled tile (the swizzle's bits lie inside one stage)."""
        e, sw = self.elems[op], self.sw[op]
        lay = Layout((e, self.S), (1, e))
        return ComposedLayout(sw, 0, lay) if sw is not None else lay

    def swz(self, op: str, x: Any) -> Any:
        sw = self.sw[op]
        return swizzle_expr(sw, x) if sw is not None else x

    # ---- global -> shared ---------------------------------------------------------------
    def vector(self, op: str, cpl: CopyPlan, kt: Any, i: int
               ) -> Tuple[List[Tuple[Any, Any]], Any, Any]:
        """Copy iteration ``i`` of this thread (:func:`~.rt_gemm_parts.copy_vector`)."""
        t = self.tid
        return copy_vector(self, op, cpl.row((t, i)), cpl.col((t, i)), kt)

    def copy_bases(self) -> List[Any]:
        """Per operand, this thread's first vector once, before the k loop: ``{x}g0`` its
        global offset at k tile 0, ``{x}s0`` its swizzled offset in a stage (the template's
        ``ag`` / ``as``); every copy is a base plus a constant (``copy_steps`` proves the
        shared constants at every thread; the verifier checks every printed offset)."""
        out: List[Any] = []
        for op in "AB":
            cpl = self.copy[op]
            coords, glob, _ = self.vector(op, cpl, 0, 0)
            x = op.lower()
            out += self.base_lets(x, sympy.expand(glob(coords[0]))) + \
                [Let(f"{x}s0", self.swz(op, cpl.off((self.tid, 0, 0))))]
        return out

    def edge_limit(self, op: str) -> Tuple[Any, int]:
        return edge_limit(self, op)

    def copy_tile(self, op: str, kt: Any, stage: Any, mode: str) -> List[Any]:
        """Operand ``op``'s k tile ``kt`` into ``stage``: ``mode`` "fast" (unpredicated
        ``cp.async``), "whole" (``cp.async`` predicated on the whole vector) or "edge" (8
        predicated 2-byte loads and one 16-byte shared store)."""
        c, t, vec = self.c, self.tid, self.c.vec
        cpl, origin, x = self.copy[op], self.staged(op), op.lower()
        base, glob, _ = self.vector(op, cpl, 0, 0)
        g0 = sympy.expand(glob(base[0]))
        lim, kpos = self.edge_limit(op)
        out: List[Any] = []
        for i, (_, _, ds) in enumerate(self.steps[op]):
            coords, glob, row_ok = self.vector(op, cpl, kt, i)
            delta = sympy.expand(glob(coords[0]) - g0)
            if t in delta.free_symbols:
                raise GemmConfigError(f"{c.name}: {op} copy iteration {i} is not the first "
                                      f"vector plus a thread-free step ({delta})")
            goff = self.global_base(x, g0) + delta
            off = cpl.off((t, 0, i))
            scoords = tuple((off + j, stage) for j in range(vec))
            saddr = sym(f"{x}s0") + ds + stage * self.elems[op]
            if mode != "edge":
                regs = self.stage_frag.regs(range(vec))
                pred = None if mode == "fast" else sympy.And(row_ok, lt(coords[-1][kpos], lim))
                load = Access("load", "global", op, goff, vec, regs, pred=pred,
                              tag=f"{op}.cp.async.load", origin=glob, coords=tuple(coords))
                store = Access("store", "lds", f"s{op}", saddr, vec, regs,
                               tag=f"{op}.cp.async.store", origin=origin, coords=scoords)
                out.append(CpAsync(load, store, tag=f"{op}.cp.async"))
                continue
            for j, cc in enumerate(coords):
                out.append(Access("load", "global", op, goff + j, 1, self.edge_frag.regs([j]),
                                  pred=sympy.And(row_ok, lt(cc[kpos], lim)),
                                  tag=f"{op}.edge.load", origin=glob, coords=(cc,)))
            out.append(Access("store", "lds", f"s{op}", saddr, vec,
                              self.edge_frag.regs(range(vec)), tag=f"{op}.edge.store",
                              origin=origin, coords=scoords))
        return out

    def fast_lets(self) -> List[Let]:
        """Once per block, before any copy: ``{x}_fkt``, how many leading k tiles of operand
        ``x`` take unpredicated ``cp.async`` (all ``floor(K / bk)`` whole k tiles when its
        rows are 16-byte aligned and the block's tile lies inside M (A) or N (B), else none),
        and ``ab_fkt``, their minimum: a k tile ``t`` is on the fast path exactly when
        ``t < {x}_fkt``, one compare of loop-invariant registers (the template's ``full``)."""
        c = self.c
        whole_kt = sympy.floor(self.K / c.bk)
        out: List[Let] = []
        for op, room in (("A", self.M - self.m0 - c.bm), ("B", self.N - self.n0 - c.bn)):
            inside = sympy.Max(0, sympy.Min(1, room + 1))        # 1 iff the tile is inside
            out.append(Let(f"{op.lower()}_fkt",
                           sympy.Min(self.vec[op], inside) * whole_kt))
        out.append(Let("ab_fkt", sympy.Min(sym("a_fkt"), sym("b_fkt"))))
        return out

    def load_operand(self, op: str, kt: Any, stage: Any) -> List[Any]:
        """The copy path of ``op``'s k tile ``kt``, block-uniform (as the runtime-size wgmma
        GEMM's, :mod:`kernels.nvidia.wgmma_rt_ir`): ``kt < {x}_fkt`` unpredicated ``cp.async``;
        else an edge that cuts no vector (16-byte rows, edge extent a multiple of 8)
        predicated ``cp.async``; else the 2-byte edge copy."""
        lim, _ = self.edge_limit(op)
        fkt = sym(f"{op.lower()}_fkt")
        uncut = sympy.And(self.vec[op] >= 1, sympy.Mod(lim, self.c.vec) < 1)
        return [If(lt(kt, fkt), self.copy_tile(op, kt, stage, "fast")),
                If(sympy.And(uncut, kt >= fkt), self.copy_tile(op, kt, stage, "whole")),
                If(sympy.And(sympy.Not(uncut), kt >= fkt),
                   self.copy_tile(op, kt, stage, "edge"))]

    def load_stage(self, kt: Any, stage: Any) -> List[Any]:
        """Both operands' k tile ``kt``: one branch when both take the fast path (the
        template's ``full``), else each operand's own paths."""
        return [If(lt(kt, sym("ab_fkt")), self.copy_tile("A", kt, stage, "fast")
                   + self.copy_tile("B", kt, stage, "fast")),
                If(kt >= sym("ab_fkt"), self.load_operand("A", kt, stage)
                   + self.load_operand("B", kt, stage))]

    # ---- shared -> registers (double-buffered) -> mma ------------------------------------
    def lane_lets(self) -> List[Any]:
        """``a_sw`` / ``b_sw``: the swizzled ldmatrix row of this lane and warp at k step 0 of
        fragment 0 (the template's ``lg_swz_a(a_ld)``), and one ``{x}_x{lo}`` per constant's
        swizzle bits (``swizzle(base + c) = (swizzle(base) ^ lo) + hi``, proved at every lane
        and warp by :func:`~kernels.nvidia.gemm.swz_split`; the template's ``_XorRegs``)."""
        p = self.p
        out = [Let("a_ld", p.a_read((self.lane, 0, (0, 0, self.wm)))),
               Let("b_ld", p.b_read((self.lane, 0, (0, 0, self.wn))))]
        out += [Let("a_sw", self.swz("A", sym("a_ld"))), Let("b_sw", self.swz("B", sym("b_ld")))]
        for op, read, wext in (("A", p.a_read, self.c.warps_m), ("B", p.b_read, self.c.warps_n)):
            bases = lane_bases(read, 3, wext)
            x = op.lower()
            n_frag = self.mt if op == "A" else self.nt // 2
            for k in range(self.kk):
                for f in range(n_frag):
                    const = read((0, 0, (k, f, 0)))
                    split = swz_split(self.sw[op], bases, const)
                    if split is None:
                        raise GemmConfigError(f"{self.c.name}: the {op} ldmatrix constant "
                                              f"{const} is not swizzle(base) ^ lo + hi")
                    lo = split[0]
                    if lo not in self.xor_lets[op]:
                        name = f"{x}_x{lo}"
                        self.xor_lets[op][lo] = name
                        out.append(Let(name, Xor(sym(f"{x}_sw"), lo) if lo else sym(f"{x}_sw")))
        return out

    def frags(self, buf: int, k: int, stage: Any) -> List[Any]:
        """The ldmatrix of k step ``k`` of ``stage`` into fragment buffer ``buf``."""
        c, p = self.c, self.p
        ldm_a, ldm_b = ldmatrix(4, False), ldmatrix(4, c.b_major == "n")
        out: List[Any] = []
        for op, read, wsym, n_frag in (("A", p.a_read, self.wm, self.mt),
                                       ("B", p.b_read, self.wn, self.nt // 2)):
            bases = lane_bases(read, 3, c.warps_m if op == "A" else c.warps_n)
            for f in range(n_frag):
                lo, hi = swz_split(self.sw[op], bases, read((0, 0, (k, f, 0))))
                off = read((self.lane, 0, (k, f, wsym)))
                soff = sym(self.xor_lets[op][lo]) + hi + stage * self.elems[op]
                if op == "A":
                    r0 = (buf * self.mt + f) * 8
                    regs, atom, tag = self.af.regs(range(r0, r0 + 8)), ldm_a, "A.ldmatrix"
                else:
                    r0 = (buf * self.nt + 2 * f) * 4
                    regs, atom, tag = self.bf.regs(range(r0, r0 + 8)), ldm_b, "B.ldmatrix"
                out.append(LdMatrixLoad("load", "lds", f"s{op}", sympy.expand(soff), 8, regs,
                                        tag=tag, origin=self.staged(op),
                                        coords=tuple((off + j, stage) for j in range(8)),
                                        atom=atom))
        return out

    def mmas(self, buf: int, k: int) -> List[Any]:
        spec = mma_m16n8k16(self.c.dtype)
        out: List[Any] = []
        for i, j in mma_issue_order(self.c.mma_order, self.mt, self.nt):
            a0, b0, c0 = (buf * self.mt + i) * 8, (buf * self.nt + j) * 4, (i * self.nt + j) * 4
            out.append(Mfma(spec, self.acc.regs(range(c0, c0 + 4)),
                            self.af.regs(range(a0, a0 + 8)), self.bf.regs(range(b0, b0 + 4)),
                            tag=f"mma(k{k},m{i},n{j})"))
        return out

    def tile(self, kt: Any, rs: Any, rn: Any, fast: bool) -> List[Any]:
        """One k tile ``kt`` read from stage ``rs``: the next k step's fragments before each
        step's ``mma``; at k step 0 the copy of tile ``kt + S - 1``; the wait and barrier
        before the last step, whose next fragments are the first of the tile in stage ``rn``
        (the next tile's; the caller's choice on the last).  ``fast``: the caller has proved
        tile ``kt + S - 1`` exists and is inside both operands (``kt + S - 1 < ab_fkt <=
        KT``), so the copy is unpredicated ``cp.async``; else the copy paths."""
        S, kk, KT = self.S, self.kk, sym("KT")
        nxt = kt + S - 1
        out: List[Any] = []
        for k in range(kk):
            cur = k % 2
            if k == kk - 1:
                out += [
                    Comment(f"k tile kt + 1 has landed once at most {S - 2} newer groups are "
                            "pending; the barrier makes every thread's copies visible and "
                            "retires this tile's earlier reads of the stage the next copy "
                            "overwrites"),
                    CpAsyncWait(S - 2), Barrier()]
                out += self.frags(1 - cur, 0, rn)
            else:
                out += self.frags(1 - cur, k + 1, rs)
            if k == 0:
                nst = sympy.Mod(nxt, S) if not fast else (rs + S - 1) % S
                if fast:
                    out += self.copy_tile("A", nxt, nst, "fast") + \
                        self.copy_tile("B", nxt, nst, "fast")
                else:
                    out.append(If(nxt < KT, self.load_stage(nxt, nst)))
                out.append(CpAsyncCommit())
            out += self.mmas(cur, k)
        return out

    def main_loop(self) -> List[Any]:
        """The k tiles whose next copy is on both operands' fast path, ``S`` at a time with
        the stages constants (every shared offset an immediate, no guard, no copy branch):
        tile ``kt`` is here iff ``kt + S - 1 < ab_fkt`` (then ``kt + 1 < KT`` too), the
        first ``kq_n S`` of them, ``kq_n = max(0, ab_fkt - S + 1) // S``; the tail loop
        takes the rest.  An edge block (``ab_fkt = 0``) runs the tail loop alone."""
        S, kq = self.S, sym("kq")
        body: List[Any] = []
        for s in range(S):
            body += self.tile(S * kq + s, s, (s + 1) % S, fast=True)
        return [Let("kq_n", sympy.floor(sympy.Max(0, sym("ab_fkt") - S + 1) / S)),
                Comment(f"k tiles 0 .. {S} kq_n - 1, {S} per trip: stage s of trip kq is "
                        f"tile {S} kq + s"),
                Loop("kq", 0, sym("kq_n"), body, unroll=1)]

    # ---- epilogue -----------------------------------------------------------------------
    def epilogue(self) -> List[Any]:
        c = self.c
        crow, ccol = split_rows(mma_m16n8k16(c.dtype).tv_layout("C"), 16)
        er, ec = sym("er"), sym("ec")
        out: List[Any] = [Comment("accumulators -> C: (row, col) of each item from the mma C "
                                  "layout"),
                          Let("er", self.m0 + self.wm * c.wtm + crow((self.lane, 0))),
                          Let("ec", self.n0 + self.wn * c.wtn + ccol((self.lane, 0)))]
        for i in range(self.mt):
            for j in range(self.nt):
                for h in range(2):
                    r = er + 16 * i + crow((0, 2 * h)) - crow((0, 0))
                    q = ec + 8 * j + ccol((0, 2 * h)) - ccol((0, 0))
                    out += pair_or_single_stores(self.c_glob, self.acc,
                                                 (i * self.nt + j) * 4 + 2 * h, r, q, self.M,
                                                 self.N, self.ldc)
        return out

    # ---- the kernel ---------------------------------------------------------------------
    def build(self) -> AttnKernel:
        c, S = self.c, self.S
        kt, KT = sym("kt"), sym("KT")
        body: List[Any] = [
            Let("lane", sympy.Mod(self.tid, 32)),
            Let("wm", sympy.Mod(sympy.floor(self.tid / 32), c.warps_m)),
            Let("wn", sympy.floor(self.tid / (32 * c.warps_m)))]
        body += raster_lets(c.bm, c.bn, c.bk, c.group_m, self.M, self.N, self.K)
        body += self.copy_bases() + self.fast_lets() + self.lane_lets() + [
            ZeroFrag(self.acc),
            Comment(f"prologue: k tiles 0..{S - 2} in flight, one cp.async group each (a loop:"
                    " the copy paths printed once, not per stage)"),
            Loop("ps", 0, S - 1, [If(sym("ps") < KT, self.load_stage(sym("ps"), sym("ps"))),
                                  CpAsyncCommit()], unroll=1),
            CpAsyncWait(S - 2), Barrier(),
            Comment("k step 0 of k tile 0 into fragment buffer 0")]
        body += self.frags(0, 0, 0)
        body += self.main_loop()
        loop = Loop("kt", S * sym("kq_n"), KT)
        # the next tile's stage; the last tile reloads its own (landed, unused): every tile
        # loads the next fragments unconditionally, and no thread reads a stage nothing wrote
        loop.body += [Let("rs", sympy.Mod(kt, S)),
                      Let("rn", sympy.Mod(sympy.Min(kt + 1, KT - 1), S))]
        loop.body += self.tile(kt, sym("rs"), sym("rn"), fast=False)
        body += [Comment(f"the k tiles left (an edge block's, the last {S - 1}, the remainder "
                         f"of {S}): the stage kt % {S}, the copy paths, the next tile's "
                         "fragments only where there is one"), loop, CpAsyncWait(0)]
        body += self.epilogue()
        name = mma_rt_kernel_name(c)
        header = [f"C[M x N] = A[M x K] (row-major, lda) @ B "
                  f"({'K x N' if c.b_major == 'n' else 'N x K'} row-major, ldb), {c.dtype}, f32 "
                  f"accumulation, runtime M/N/K and leading dimensions; block tile "
                  f"{c.bm}x{c.bn}x{c.bk}, {c.warps_m}x{c.warps_n} warps, {S} stages, cp.async "
                  f"16 B (edge tiles: 2-byte loads, zero fill), ldmatrix.x4 double-buffered, "
                  f"mma.sync m16n8k16, group_m {c.group_m}",
                  "layouts (every index below is one of these, evaluated on the named symbols):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()
                   if "banks" not in k and "lanes" not in k and "coverage" not in k]
        return AttnKernel(name, [Param("A", c.dtype), Param("B", c.dtype),
                                 Param("C", c.dtype, const=False)],
                          [Shared("sA", c.dtype, S * self.elems["A"]),
                           Shared("sB", c.dtype, S * self.elems["B"])],
                          [self.stage_frag, self.edge_frag, self.af, self.bf, self.acc], body,
                          c.threads, (1, 1, 1), grid_symbols=("pid",), header=header,
                          meta={"plan": self.p, "cfg": c, "split_shared_offsets": True},
                          min_blocks=c.min_blocks,
                          scalars=[ScalarParam(n) for n in RT_SCALARS],
                          spec=mma_rt_spec(name, c))


def build_mma_rt_ir(cfg: CudaGemmConfig = CudaGemmConfig(), wide: bool = False) -> AttnKernel:
    """The runtime-size IR of ``cfg`` (any M, N, K, leading dimensions); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` where :func:`mma_rt_refusal` says so or the
    plan fails its proofs.  ``wide``: the 64-bit form (:mod:`.gemm_wide`)."""
    b = _Builder(cfg)
    if not wide:
        return b.build()
    from .gemm_wide import widen_rt_gemm
    b.wide = True
    return widen_rt_gemm(b.build())


class IrMmaRtGemm(RtGemmKernel):
    """The IR-built runtime-size mma.sync kernel of ``cfg``, verified (IR and printed CUDA, at
    :func:`mma_rt_instances`; a passing verdict is remembered on disk by content) before
    anything is compiled: ``g(a, b, out=None) -> c`` with the template
    :class:`~kernels.nvidia.gemm.CudaGemm`'s arguments and checks, any M/N/K and strides."""

    def __init__(self, cfg: CudaGemmConfig = CudaGemmConfig(), *, backend: str = "auto") -> None:
        ir, source = self.build(cfg)
        super().__init__(cfg, ir, source, plan_gemm(cfg), backend)

    def build(self, cfg: CudaGemmConfig, wide: bool = False) -> Tuple[Any, str]:
        """``(kernel IR, printed source)`` of ``cfg`` (``wide``: the 64-bit form)."""
        ir = build_mma_rt_ir(cfg, wide)
        return ir, emit_cuda_gemm_rt(ir)

    def make_template(self) -> Any:
        from .gemm import CudaGemm
        return CudaGemm(self.cfg, backend=self.backend)

    def __call__(self, a, b, out=None):
        return self.bound(a, b, out)(a, b, out)

    def bind(self, a, b, out=None):
        """Check the arguments (the template's checks) and return ``run(a, b, out) -> c``."""
        return self.bind_one_launch(a, b, out)
