"""The IR builder of the TMA GEMM (:class:`TmaIrBuilder`) and the rules its forms share (which
configurations the IR has, the kernels' names, the launches they are verified at, their spec):
the layer :mod:`kernels.nvidia.wgmma_tma_ir` (the entry points, the TMA-store and direct-store
forms) and :mod:`kernels.nvidia.wgmma_tma_ir_split` (the split-K form, a subclass) build on.
See :mod:`kernels.nvidia.wgmma_tma_ir` for the kernel.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import sympy

from layoutalg.symbolic import Xor

from ..ir.core import Access, Comment, Frag, If, Kernel, Let, Loop, Param, Shared, ZeroFrag, sym
from ..ir.nvidia_tma import (BulkCommit, BulkWait, IntParam, LeaderOnly, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierInitFence, MbarrierWait,
                             NamedBarrier, RoleBranch, Setmaxnreg, TensorMap, TmaLoad,
                             TmaPrefetch, TmaStore, VarInit, VarSet)
from ..ir.nvidia_wgmma import FenceProxyAsync, WgmmaCommit, WgmmaFence, WgmmaWait
from ..verify.spec import Contraction, Dim, Domain, KernelSpec, Symbol, TensorSpec
from .gemm import GemmConfigError
from .wgmma import accumulator_rows_cols
from .wgmma_ir import shared_k_steps
from .wgmma_tma import PRODUCER_REGS, TmaGemmConfig, plan_tma_gemm

__all__ = ["TmaIrBuilder", "tma_gemm_spec", "DEFAULT_INSTANCES", "DIRECT_INSTANCES",
           "plain_instances", "instance_symbols", "ir_form_refusal", "ir_kernel_name"]


#: (M, N, K, ctas) launches the verifier runs the kernel at: edge tiles in M, N and K, several
#: units per CTA, a partial raster group, a single tile
DEFAULT_INSTANCES: Tuple[Tuple[int, int, int, int], ...] = (
    (200, 300, 136, 3), (128, 256, 64, 1), (520, 264, 200, 4))


#: the direct-store form's launches (M, N, K, ctas, ldc): odd N with ldc = N (every row's pairs
#: alternate between 4-byte and 2-byte stores), ldc > N even, ldc > N odd
DIRECT_INSTANCES: Tuple[Tuple[int, ...], ...] = (
    (200, 301, 136, 3, 301), (128, 256, 64, 1, 264), (520, 264, 200, 4, 267))


def plain_instances(cfg: TmaGemmConfig) -> Tuple[Tuple[int, ...], ...]:
    """The launches a non-split ``cfg`` is verified at: :data:`DEFAULT_INSTANCES` (the direct store:
    :data:`DIRECT_INSTANCES`, which add C's row stride ``ldc``), or with a short A box
    (``a_rows``; the runner takes M <= a_rows only) M = a_rows, an odd M below it and M = 1,
    with edge tiles in N and K and several units per CTA."""
    r = cfg.a_rows
    direct = cfg.store == "direct"
    if not r:
        return DIRECT_INSTANCES if direct else DEFAULT_INSTANCES
    if direct:
        return ((r, 301, 136, 3, 301), (r - 3, 264, 200, 4, 267), (1, 128, 64, 1, 130))
    return ((r, 300, 136, 3), (r - 3, 264, 200, 4), (1, 128, 64, 1))


def instance_symbols(store: str) -> Tuple[str, ...]:
    """The runtime symbols of one launch instance, in the order its tuple lists them."""
    return ("M", "N", "K", "ctas") + (("ldc",) if store == "direct" else ())


def tma_gemm_spec(name: str, dtype: str, instances: Sequence[Tuple[int, ...]],
                  max_m: int = 2 ** 20, store: str = "tma") -> KernelSpec:
    """``C[m, n] = sum_k A[m, k] B[n, k]`` with runtime sizes (M <= ``max_m``: a short A box's
    rows), proved on the per-role phase model at ``instances`` ((M, N, K, ctas) launches; the
    direct store's add C's row stride ``ldc``)."""
    names = instance_symbols(store)
    for v in instances:
        if len(v) != len(names):
            raise GemmConfigError(f"instance {tuple(v)}: the {store}-store form's launches are "
                                  f"{names} tuples")
    inst = [dict(zip(names, v)) for v in instances]
    return KernelSpec(
        name=name, dims=(Dim("m", None), Dim("n", None), Dim("k", None)),
        tensors=(TensorSpec("A", ("m", "k"), "input", dtype),
                 TensorSpec("B", ("n", "k"), "input", dtype),
                 TensorSpec("C", ("m", "n"), "output", dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), None),),
        symbols=(Symbol("M", 1, max_m), Symbol("N", 1, 2 ** 20), Symbol("K", 1, 2 ** 20),
                 Symbol("ctas", 1, 1024)) + ((Symbol("ldc", 1, 2 ** 20),) if store == "direct"
                                             else ()),
        domain=Domain.on_instances(lambda k: inst), warpgroup_roles=("producer", "consumer"))


def ir_form_refusal(cfg: TmaGemmConfig) -> Optional[str]:
    """Why the IR-built TMA GEMM cannot run ``cfg`` (``None``: it can).  The IR has every form
    of the template :class:`~kernels.nvidia.wgmma_tma.TmaGemm`: the TMA-store and
    direct-store epilogues, both split-K forms (one launch, :mod:`.wgmma_tma_ir_split`; a
    reduce kernel after the split kernel, :mod:`.wgmma_tma_ir_reduce`), whole or short
    (``a_rows``) A boxes, one or two CTAs per SM (``ctas_per_sm``: launch bounds, setmaxnreg
    shares and shared memory proved by the per-role model), so it refuses none; the seam
    stays, read by dispatch (``kernels.nvidia.dispatch.tma_gemm``) and the builder, for a
    template form added later."""
    del cfg
    return None


def ir_kernel_name(cfg: TmaGemmConfig) -> str:
    """The IR-built kernel's name for ``cfg`` (``lg_irtma_`` + the template's suffix): what a
    profiler and ``print(choose_gemm(a, b))`` show when the IR form runs."""
    return "lg_irtma_" + cfg.name[len("lg_wgmma_tma_"):]


class TmaIrBuilder:
    """Builds the IR of one configuration (the forms :func:`ir_form_refusal` accepts); the
    split-K form (:mod:`kernels.nvidia.wgmma_tma_ir_split`) overrides the unit decomposition
    (``unit_lets``, ``kbound``, ``kcoord``), the epilogue, the parameters and the spec."""

    def __init__(self, cfg: TmaGemmConfig) -> None:
        refusal = ir_form_refusal(cfg)
        if refusal is not None:
            raise GemmConfigError(refusal)
        self.c, self.p = cfg, plan_tma_gemm(cfg)
        self.S = cfg.stages
        self.M, self.N, self.K, self.ctas = (sym(n) for n in ("M", "N", "K", "ctas"))
        self.tid, self.wg, self.bx = sym("tid"), sym("wg"), sym("bx")
        self.acc = Frag("acc", "f32", cfg.bn // 2)
        self.elems = {"A": cfg.a_stage // 2, "B": cfg.b_stage // 2, "C": cfg.c_stage // 2}
        dt = cfg.dtype
        # a_rows: the box carries the tile's first a_rows rows (plan: check_short_a_box);
        # the wgmma reads all 64, the rest feed C rows >= M the gate sees are never stored
        self.tm_a = TensorMap("tmA", "A", ("k", "m"), self.K, self.M, 64, cfg.a_box_rows, dt)
        if cfg.b_major == "n":
            self.tm_b = TensorMap("tmB", "B", ("n", "k"), self.N, self.K, 64, cfg.bk, dt)
        else:
            self.tm_b = TensorMap("tmB", "B", ("k", "n"), self.K, self.N, 64, cfg.bn, dt)
        self.direct = cfg.store == "direct"
        # the k tiles of a unit: kk in [0, kbound), k tile kcoord(kk) (split-K: kn and kt0 + kk)
        self.kbound = sym("KT")
        self.tm_c = None if self.direct else TensorMap("tmC", "C", ("n", "m"), self.N, self.M,
                                                       64, 64, dt)

    # ---- shared pieces -------------------------------------------------------------------
    def unit_lets(self) -> List[Any]:
        """``m0`` / ``n0`` of this CTA's ``i``-th unit ``u`` (a tile)."""
        return [Let("u", self.bx + sym("iu") * self.ctas)] + self.raster(sym("u"))

    def raster(self, tile: Any) -> List[Any]:
        """``m0`` / ``n0`` of ``tile``: the template's grouped raster (groups of ``group_m``
        tile rows walk N together)."""
        c = self.c
        group, grid_m = sym("group"), sym("grid_m")
        first_m, gsize = sym("first_m"), sym("gsize")
        return [Let("first_m", sympy.floor(tile / group) * c.group_m),
                Let("gsize", sympy.Min(grid_m - first_m, c.group_m)),
                Let("m0", (first_m + sympy.Mod(sympy.Mod(tile, group), gsize)) * c.bm),
                Let("n0", sympy.floor(sympy.Mod(tile, group) / gsize) * c.bn)]

    def kcoord(self, kk: Any) -> Any:
        """The k tile of the unit's ``kk``-th step."""
        return kk

    def ring_state(self) -> List[Any]:
        """The ring position carried through a role's loops (the template's counters): stage
        ``st`` and phase parity ``ph`` of the CTA's ``g``-th fill, ``prev`` the stage before."""
        return [VarInit("st", 0), VarInit("ph", 0), VarInit("prev", 0)]

    def ring_advance(self) -> List[Any]:
        """The next fill's stage and parity: ``wrap`` = max(0, st + 2 - S) is 1 at the last
        stage, else 0 (st < S); ``ph`` flips by it (first: it reads the old ``st``) and ``st``
        steps back by S.  A compare and select in SASS, where ``(st + 1) % S`` is a multiply-
        high division (the H100 runs showed such ALU chains in these loops cost time)."""
        st, ph = sym("st"), sym("ph")
        wrap = sympy.Max(0, st + 2 - self.S)
        return [VarSet("prev", st),
                VarSet("ph", Xor(ph, wrap)),
                VarSet("st", st + 1 - self.S * wrap)]

    # ---- producer ------------------------------------------------------------------------
    def producer(self) -> RoleBranch:
        c, p = self.c, self.p
        st, kk, m0, n0 = sym("st"), sym("kk"), sym("m0"), sym("n0")
        kt = self.kcoord(kk)
        loads: List[Any] = [
            TmaLoad(self.tm_a, kt * c.bk, m0, "sA", st * self.elems["A"], "full", st, "A.tma")]
        bl = p.b_load
        for j in range(bl.boxes):
            off = st * self.elems["B"] + j * (bl.stride // 2)
            if c.b_major == "n":
                loads.append(TmaLoad(self.tm_b, n0 + j * bl.box_inner, kt * c.bk, "sB", off,
                                     "full", st, f"B.tma{j}"))
            else:
                loads.append(TmaLoad(self.tm_b, kt * c.bk, n0, "sB", off, "full", st, "B.tma"))
        kloop = Loop("kk", 0, self.kbound, [
            Comment("the consumers released this stage (parity of the previous round; a fresh "
                    "barrier passes parity 1)"),
            MbarrierWait("empty", st, sympy.Mod(sym("ph") + 1, 2)),
            MbarrierExpectTx("full", st, p.stage_tx_bytes)] + loads + self.ring_advance()[1:])
        body = [TmaPrefetch(self.tm_a), TmaPrefetch(self.tm_b)] + self.ring_state()[:2] + [
            Loop("iu", 0, sym("nloc"), self.unit_lets() + [kloop])]
        return RoleBranch("producer", 0, 1, [Setmaxnreg(False, PRODUCER_REGS),
                                             LeaderOnly(body)])

    # ---- consumers -----------------------------------------------------------------------
    def k_steps(self) -> List[Any]:
        """The wgmma k steps of the ring's stage ``st`` for consumer ``cg``
        (:func:`~kernels.nvidia.wgmma_ir.shared_k_steps`, shared with the runtime-size cp.async
        GEMM)."""
        return shared_k_steps(self.c, self.p, self.acc, sym("st"), sym("cg"))

    def epilogue(self) -> List[Any]:
        """Accumulators -> this consumer's swizzled C buffer (the TMA store's box layout) ->
        ``bn / 64`` TMA stores of 64 x 64 boxes."""
        c, cl = self.c, self.p.c_load
        cg = sym("cg")
        r0, c0, rx = sym("r0"), sym("c0"), sym("rx")
        out: List[Any] = [LeaderOnly([BulkWait(read=True)]), NamedBarrier(1 + cg, 128)]
        for j in range(c.bn // 8):
            for h in range(2):
                # row r0 + 8h, column c0 + 8j of the buffer (c0 < 8: the box is j // 8, the
                # column in it c0 + 8 (j % 8)); the 128-byte swizzle XORs the 16-byte chunk
                # with the row mod 8 (the gate checks every thread against the TMA model)
                off = (cg * self.elems["C"] + (8 * j // 64) * (cl.stride // 2)
                       + Xor(r0 * 64 + 512 * h + c0 + 8 * (j % 8), rx))
                it = 4 * j + 2 * h
                out.append(Access("store", "lds", "sC", off, 2, self.acc.regs([it, it + 1]),
                                  tag="C.shared"))
        out += [FenceProxyAsync(), NamedBarrier(1 + cg, 128)]
        stores: List[Any] = [
            TmaStore(self.tm_c, "sC", cg * self.elems["C"] + j * (cl.stride // 2),
                     sym("n0") + 64 * j, sym("m0") + 64 * cg, f"C.tma{j}")
            for j in range(cl.boxes)]
        out.append(LeaderOnly(stores + [BulkCommit()]))
        return out

    def direct_epilogue(self, buf: str = "C", lets: bool = True) -> List[Any]:
        """Accumulators -> C in global memory (the template's direct store): accumulator pair
        ``4j + 2h`` of the thread is C[rr + 8h][cc + 8j .. + 1]; one 4-byte store where both
        columns exist and ``ldc`` is even (the pair is then 4-byte aligned: C's base is, the
        runner checks), else a 2-byte store of each column that exists; rows >= M skipped."""
        c = self.c
        rr, cc, ldc = sym("rr"), sym("cc"), sym("ldc")
        even = sympy.Eq(sympy.Mod(ldc, 2), 0)
        out: List[Any] = [Let("rr", sym("m0") + 64 * sym("cg") + sym("r0")),
                          Let("cc", sym("n0") + sym("c0"))] if lets else []
        for j in range(c.bn // 8):
            for h in range(2):
                r, col, it = rr + 8 * h, cc + 8 * j, 4 * j + 2 * h
                pair = sympy.And(r < self.M, col + 1 < self.N, even)
                out += [
                    Access("store", "global", buf, r * ldc + col, 2, self.acc.regs([it, it + 1]),
                           pred=pair, tag="C.store2", coords=((r, col), (r, col + 1))),
                    Access("store", "global", buf, r * ldc + col, 1, self.acc.regs([it]),
                           pred=sympy.And(r < self.M, col < self.N,
                                          sympy.Not(sympy.And(col + 1 < self.N, even))),
                           tag="C.store.lo", coords=((r, col),)),
                    Access("store", "global", buf, r * ldc + col + 1, 1,
                           self.acc.regs([it + 1]),
                           pred=sympy.And(r < self.M, col + 1 < self.N, sympy.Not(even)),
                           tag="C.store.hi", coords=((r, col + 1),))]
        return out

    def unit_epilogue(self) -> List[Any]:
        """What a consumer does with a unit's accumulators."""
        return self.direct_epilogue() if self.direct else self.epilogue()

    def consumer(self) -> RoleBranch:
        c = self.c
        crow, ccol = accumulator_rows_cols(c.bn)
        st, kk = sym("st"), sym("kk")
        kloop = Loop("kk", 0, self.kbound, [
            MbarrierWait("full", st, sym("ph")), WgmmaFence()] + self.k_steps() + [
            WgmmaCommit(), WgmmaWait(1, ("acc",)),
            Comment("the group before this one has retired: release its stage"),
            If(kk > 0, [MbarrierArrive("empty", sym("prev"))])] + self.ring_advance())
        unit = self.unit_lets() + [ZeroFrag(self.acc), kloop, WgmmaWait(0, ("acc",)),
                                   MbarrierArrive("empty", sym("prev"))]
        unit += self.unit_epilogue()
        # the consumers' share of the register file of ctas_per_sm CTAs (232 with one CTA per
        # SM, 216 for one consumer with two: TmaGemmConfig.consumer_regs)
        lets = [Setmaxnreg(True, c.consumer_regs), Let("cg", self.wg - 1),
                Let("t", self.tid - 128 * self.wg),
                Let("r0", crow((sym("t"), 0))), Let("c0", ccol((sym("t"), 0)))]
        if self.direct:
            return RoleBranch("consumer", 1, c.consumers, lets + self.ring_state() + [
                Loop("iu", 0, sym("nloc"), unit)])
        return RoleBranch("consumer", 1, c.consumers, lets + [
            Let("rx", sympy.Mod(sym("r0"), 8) * 8)] + self.ring_state() + [
            Loop("iu", 0, sym("nloc"), unit),
            LeaderOnly([BulkWait(read=False)])])

    def build(self, instances: Sequence[Tuple[int, int, int, int]]) -> Kernel:
        c, S = self.c, self.S
        M, N, K, ctas = self.M, self.N, self.K, self.ctas
        units = self.units()
        body: List[Any] = [
            Let("wg", sympy.floor(self.tid / 128)),
            MbarrierInit("full", S, 1),
            MbarrierInit("empty", S, 4 * c.consumers),
            MbarrierInitFence(),
            Let("grid_m", sympy.floor((M + c.bm - 1) / c.bm)),
            Let("grid_n", sympy.floor((N + c.bn - 1) / c.bn)),
            Let("tiles", sym("grid_m") * sym("grid_n")),
            Let("group", c.group_m * sym("grid_n")),
            Let("KT", sympy.floor((K + c.bk - 1) / c.bk)),
            Comment("this CTA's units: bx, bx + ctas, ... (the host launches ctas <= tiles)"),
            Let("nloc", sympy.floor((units - self.bx + ctas - 1) / ctas)),
            self.producer(), self.consumer()]
        name = ir_kernel_name(c)
        header = [f"C[M x N] = A[M x K] (row-major) @ B "
                  f"({'K x N' if c.b_major == 'n' else 'N x K'} row-major), {c.dtype}, f32 "
                  f"accumulation, runtime M/N/K; tile {c.bm}x{c.bn}x{c.bk}, {S} stages, 1 "
                  f"producer + {c.consumers} consumer warpgroups, persistent over "
                  + ("min(tiles, SMs) CTAs" if c.ctas_per_sm == 1 else
                     f"min(units, {c.ctas_per_sm} x SMs) CTAs ({c.ctas_per_sm} per SM: "
                     f"setmaxnreg {PRODUCER_REGS} / {c.consumer_regs})")
                  + f", group_m {c.group_m}, "
                  + self.epilogue_words()
                  + (f"; A boxes of {c.a_rows} rows (M <= {c.a_rows})" if c.a_rows else ""),
                  "plan (proved by kernels.nvidia.wgmma_tma.plan_tma_gemm):"]
        header += [f"  {k}: {v}" for k, v in self.p.describe().items()]
        shared = [Shared("sA", c.dtype, S * self.elems["A"]),
                  Shared("sB", c.dtype, S * self.elems["B"])]
        params, extra, meta = self.interface()
        shared += extra
        return Kernel(name, params, shared, [self.acc], body, c.threads, (1, 1, 1),
                      grid_symbols=("bx",), header=header,
                      # ctas_per_sm CTAs per SM: the roles' setmaxnreg budgets are shares of
                      # the register file of that many CTAs (__launch_bounds__(threads, 1);
                      # without it ptxas gave the 64x128 tile 110 registers, below the
                      # consumers' 232); the per-role model checks the shares and the shared
                      # memory of min_blocks CTAs against the SM
                      min_blocks=c.ctas_per_sm,
                      # row_stride: the host's contract for a tensor stored through a pointer
                      # (row-major, this row stride); the per-role model reads each stored
                      # address back to its (row, column) through it
                      meta=dict(meta, plan=self.p),
                      spec=self.spec(name, instances))

    # ---- the forms' hooks ------------------------------------------------------------------
    def units(self) -> Any:
        """The launch's work units (the persistent loop's extent)."""
        return sym("tiles")

    def epilogue_words(self) -> str:
        return "direct-store epilogue (C row stride ldc)" if self.direct else \
            "TMA-store epilogue"

    def interface(self) -> Tuple[List[Any], List[Any], Dict[str, Any]]:
        """(parameters, shared arrays besides sA / sB, meta: the host's tensor maps and the
        row strides of the tensors stored through pointers)."""
        c = self.c
        if self.direct:
            params: List[Any] = [self.tm_a, self.tm_b, Param("C", c.dtype, const=False)]
            extra: List[Any] = []
            # row_stride: the host's contract for a tensor stored through a pointer
            # (row-major, this row stride); the per-role model reads each stored address
            # back to its (row, column) through it
            meta = {"maps": (self.tm_a, self.tm_b), "row_stride": {"C": sym("ldc")}}
        else:
            extra = [Shared("sC", c.dtype, c.consumers * self.elems["C"])]
            params = [self.tm_a, self.tm_b, self.tm_c]
            meta = {"maps": (self.tm_a, self.tm_b, self.tm_c), "row_stride": {}}
        return params + [IntParam(n) for n in instance_symbols(c.store)], extra, meta

    def spec(self, name: str, instances: Sequence[Tuple[int, ...]]) -> KernelSpec:
        c = self.c
        return tma_gemm_spec(name, c.dtype, instances, c.a_rows or 2 ** 20, c.store)
