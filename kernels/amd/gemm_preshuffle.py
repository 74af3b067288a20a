"""GEMM with preshuffled B (FlyDSL's last ladder step): B straight from global memory into the
MFMA's registers with ``buffer_load_dwordx4``, A through swizzled double-buffered LDS as in
:mod:`kernels.amd.gemm`.

B is stored by :func:`kernels.amd.preshuffle.preshuffle` (the layout
:func:`~kernels.amd.preshuffle.preshuffle_layout`), so each lane's k-fragment for ``kpack``
MFMAs is 16 contiguous bytes and a wave's load is 1024 contiguous bytes.  Each B load is one
``lagen_buffer_load_b128`` through the buffer resource ``B_rsrc``: the per-lane part of the offset
(``voffset``, a VGPR: the thread's natural coordinates in the layout) and the wave-uniform part
(``soffset``, an SGPR: block id and k-tile) are separate IR expressions, both evaluated from the
layout; the gate proves their sum is the layout at the access's coordinates
(``emitted_index_math``), that each is non-negative and the soffset wave-uniform, that the
coordinates are in range (``in_bounds``: the loads never rely on the hardware's out-of-range
zero fill), and that the registers hold the MFMA's B fragment (``lane_mfma_operands``).

Pipeline: as the LDS GEMM (one barrier per k-tile), but B has no LDS stage: two register sets
``b_fr0`` / ``b_fr1`` alternate by k-tile parity (the loop is unrolled by two), k-tile ``kt+1``'s
B loads are issued with A's prefetch while the MFMAs of k-tile ``kt`` run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, List, Optional, Tuple

import sympy

from ..errors import KernelError
from ..ir.core import Access, Comment, Frag, Kernel, Let, Loop, Param, WaitCnt, sym
from ..printer.hip import emit
from .driver import KernelFamily, Stages, build_program
from .gemm import BuiltKernel, GemmBuilder, choose_lds_layouts
from .gemm_plan import ConfigError, GemmConfig, GemmPlan, OperandPlan, plan_gemm
from .preshuffle import (PreshuffleGeometry, kernel_view, preshuffle_geometry,
                         preshuffle_layout)

__all__ = ["PreshuffleGemmBuilder", "build_gemm_preshuffled", "build_gemm_preshuffled_ir",
           "plan_preshuffled", "check_preshuffled", "gemm_preshuffle_family", "B_LAYOUTS"]

B_LAYOUTS = ("plain", "preshuffled")


class PreshuffleGemmBuilder(GemmBuilder):
    """:class:`GemmBuilder` with B read from the preshuffled buffer into registers."""

    def __init__(self, plan: GemmPlan, name: Optional[str] = None,
                 read_ahead: Optional[int] = None) -> None:
        c = plan.cfg
        g = check_preshuffled(plan)
        super().__init__(plan, name or (f"la_gemm_ps_{c.a_major[0]}_{c.dtype}_{c.out_dtype}_"
                                        f"{c.m}x{c.n}x{c.k}"), read_ahead)
        self.geo = g
        self.layout = preshuffle_layout(c.k, c.n, plan.spec.name, c.dtype, c.arch)
        self.blay = kernel_view(self.layout)           # (n, k) -> offset, the operand view
        n_frag = plan.b.frag_mn[1].size()
        self.bfr = [Frag(f"b_fr{s}", c.dtype, n_frag, g.vec) for s in range(2)]
        self.fr["B"] = self.bfr[0]

    # ---- thread bases -------------------------------------------------------------------
    def bases(self) -> List[Any]:
        out = [s for s in super().bases()
               if not (isinstance(s, Let) and s.name.startswith("b_cp_"))]
        g = self.geo
        mn, k = self.base["b_fr_mn"], self.base["b_fr_k"]
        out.append(Comment("B: the thread's natural coordinates in the preshuffled layout "
                           f"{self.blay}"))
        for name, e in (("b_ps_n", sympy.Mod(mn, g.tile_n)),
                        ("b_ps_nt", sympy.floor(mn / g.tile_n)),
                        ("b_ps_e", sympy.Mod(k, g.vec)),
                        ("b_ps_g", sympy.Mod(sympy.floor(k / g.vec), g.lane_groups)),
                        ("b_ps_kb", sympy.floor(k / g.k_block))):
            out.append(Let(name, e))
            self.base[name] = sym(name)
        return out

    # ---- global -> registers (B) ---------------------------------------------------------
    def load_tile(self, op: OperandPlan, kt_expr: Any) -> List[Any]:
        if op.name != "B":
            return super().load_tile(op, kt_expr)
        g, c = self.geo, self.c
        parity = sympy.Mod(sympy.sympify(kt_expr), 2)
        if not parity.is_Integer:
            raise KernelError(f"preshuffled B: k-tile {kt_expr} has no fixed parity")
        regs = self.bfr[int(parity)]
        n_frag = regs.count
        NT, KB = g.n_padded // g.tile_n, g.k_padded // g.k_block
        b = self.base
        out: List[Any] = []
        for base in range(0, n_frag, g.vec):
            d = [self.vc((op.frag_mn, op.frag_k), v) for v in range(base, base + g.vec)]
            dmn, dk = d[0]
            if any(x != (dmn, dk + j) for j, x in enumerate(d)) or dmn % g.tile_n or dk % g.vec:
                raise KernelError(f"preshuffled B: fragment values {base}..{base + g.vec - 1} "
                                  "are not one lane vector of consecutive k")
            nt = b["b_ps_nt"] + self.bn * (c.block_n // g.tile_n) + dmn // g.tile_n
            kb = b["b_ps_kb"] + kt_expr * (c.block_k // g.k_block) + dk // g.k_block
            q = b["b_ps_g"] + (dk // g.vec) % g.lane_groups
            coords = tuple(((b["b_ps_n"], nt), (b["b_ps_e"] + j, q, kb)) for j in range(g.vec))
            total = sympy.expand(self.blay(coords[0]))
            voff, soff = _split_uniform(total, {self.bm, self.bn, sym("kp"), self.kt})
            terms = []
            if g.n_padded % c.block_n:
                terms.append(nt < NT)
            if g.k_padded % c.block_k:
                terms.append(kb < KB)
            pred = sympy.And(*terms) if terms else None
            out.append(Access("load", "global", "B", voff, g.vec,
                              regs.regs(range(base, base + g.vec)), pred, tag="B.frag.load",
                              origin=self.blay, coords=coords, soffset=soff))
        return out

    def store_tile(self, op: OperandPlan, stage: Any) -> List[Any]:
        return [] if op.name == "B" else super().store_tile(op, stage)

    def groups(self, op: OperandPlan):
        got = super().groups(op)
        if op.name != "B":
            return got
        (w, (kind, mn_l, k_l, _)) = got[0], got[1]
        return w, (kind, mn_l, k_l, [])        # no LDS reads of B: its registers are loaded

    def compute(self, stage: Any) -> List[Any]:
        self.fr["B"] = self.bfr[int(stage) % 2]
        try:
            return super().compute(stage)
        finally:
            self.fr["B"] = self.bfr[0]

    # ---- whole kernel ----------------------------------------------------------------------
    def build(self) -> Kernel:
        k = super().build()
        c = self.c
        # the tensor's declared storage is the public contract (what preshuffle() writes),
        # evaluated afresh: the gate checks every B access against it, not against self.blay
        # (the parameters after C, fp8's scale vectors, stay as the LDS GEMM declares them)
        k.params = [k.params[0], Param("B", c.dtype, layout=kernel_view(self.layout),
                                       buffer=True), *k.params[2:]]
        k.shared = [s for s in k.shared if s.name != "sB"]
        k.frags = [self.ld["A"], self.fr["A"], *self.bfr, self.acc, *self.scale_frags]
        k.header = [h for h in k.header if not h.startswith("  B.")]
        k.header.insert(2, f"B preshuffled (kernels.amd.preshuffle, {self.geo.instruction}): "
                           f"{self.layout} as (k, n); loaded with buffer_load_dwordx4 straight "
                           "into two register sets (no LDS)")
        k.header.append(f"  B.storage (n, k): {self.blay}")
        k.meta["b_layout"] = "preshuffled"
        _relax_vm_waits(k.body)
        return k


def _relax_vm_waits(body: List[Any]) -> None:
    """Before A's LDS stores the LDS GEMM waits for every global load (``vmcnt(0)``).  Here
    the B loads issued after A's are consumed only by the next k-tile's MFMAs, so the wait
    lets them stay in flight: ``vmcnt(n)`` with n the B loads issued after the last A load
    (vmcnt counts in issue order).  Scheduling only: the compiler still inserts every wait the
    B registers need before their MFMAs."""
    since_a = 0
    for s in body:
        if isinstance(s, Loop):
            _relax_vm_waits(s.body)
        elif isinstance(s, Access) and s.space == "global" and s.kind == "load":
            since_a = since_a + 1 if s.buf == "B" else 0
        elif isinstance(s, WaitCnt) and s.vm == 0:
            s.vm = min(since_a, 63)


def _split_uniform(expr: Any, uniform: set) -> Tuple[Any, Any]:
    """``(voffset, soffset)``: the terms of ``expr`` that name only ``uniform`` symbols (the
    block ids and the k loop's variable: the same at every lane of a wave) go to the soffset,
    the rest (per-thread symbols, constants) to the voffset.  The gate re-checks that the
    soffset is wave-uniform."""
    per_thread, scalar = [], []
    for t in sympy.Add.make_args(sympy.expand(expr)):
        syms = t.free_symbols
        (scalar if syms and syms <= uniform else per_thread).append(t)
    return sympy.Add(*per_thread), sympy.Add(*scalar)


def check_preshuffled(plan: GemmPlan) -> PreshuffleGeometry:
    """The preshuffled buffer's geometry for a plan, or ``ConfigError`` saying why this plan
    cannot read B preshuffled (the builder's conditions, callable without building: the tile
    choice asks it of each candidate)."""
    c = plan.cfg
    if c.stages != 2:
        raise ConfigError("preshuffled B needs stages=2 (B's register sets alternate with "
                          "the LDS stages of A)")
    g = preshuffle_geometry(c.k, c.n, plan.spec.name, c.dtype, c.arch)
    if plan.items * plan.kpack != g.vec:
        raise ConfigError(f"preshuffled B: block_k={c.block_k} must be a multiple of "
                          f"{g.k_block} (one 16-byte B vector per lane feeds "
                          f"{g.kpack} {plan.spec.name})")
    if g.k_padded * g.n_padded * g.elem_bytes >= 2 ** 31:
        raise ConfigError("preshuffled B: the buffer exceeds 2 GiB (32-bit buffer offsets)")
    return g


def plan_preshuffled(cfg: GemmConfig) -> GemmPlan:
    """The GEMM plan (A's LDS layouts chosen) for a preshuffled-B config."""
    plan = plan_gemm(replace(cfg.normalized(), b_major="row", b_layout="preshuffled"))
    choose_lds_layouts(plan)
    return plan


def build_gemm_preshuffled_ir(cfg: GemmConfig) -> Kernel:
    """The kernel IR alone (not gated, not printed): for tests of the gate."""
    return PreshuffleGemmBuilder(plan_preshuffled(cfg)).build()


def gemm_preshuffle_family() -> KernelFamily:
    """The preshuffled-B GEMM for the build driver: the GEMM's plan, its gate and printer."""
    from ..verify.gate import verify_kernel
    return KernelFamily(plan=plan_preshuffled,
                        build_ir=lambda plan: PreshuffleGemmBuilder(plan).build(),
                        verifier=lambda ir: verify_kernel(ir, arch=ir.meta["plan"].cfg.arch),
                        printer=emit)


def build_gemm_preshuffled(cfg: GemmConfig, *, verify: bool = True) -> BuiltKernel:
    """Plan, build, gate and print the GEMM with preshuffled B (``B`` argument: the 1-D buffer
    of :func:`kernels.amd.preshuffle.preshuffle`).  ``cfg.b_major`` is ignored (B's layout is
    the preshuffled one); raises ``ConfigError`` / ``VerificationError``."""
    cfg = replace(cfg.normalized(), b_major="row", b_layout="preshuffled")

    def make(stages: List[Stages]) -> BuiltKernel:
        st, = stages
        return BuiltKernel(st.ir.name, st.source, st.ir, st.plan, st.verification, st.timings)
    return build_program([gemm_preshuffle_family()], cfg, make, verify=verify)
