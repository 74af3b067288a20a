"""The TMA GEMM's one-launch split-K (``TmaGemmConfig(split_k=True, reduce="inline")``) as
kernel IR: the template's :mod:`kernels.nvidia.splitk_inline` protocol built from the ticket
statements of :mod:`kernels.ir.ticket` and proved by the one verifier.

Work units ``u`` in ``[0, tiles * splits)``: tile ``u % tiles``, split ``u / tiles``, k tiles
``[kt0, kt0 + kn)`` with ``kt0 = split * kt_per``, ``kn = min(KT - kt0, kt_per)`` (the host's
:func:`~kernels.nvidia.wgmma.split_ranges`).  With one split the consumer rounds its
accumulators straight to C (the direct store).  With more, per unit and consumer warpgroup:

1. every thread stores its fp32 partials to ``W[split][r][col]`` (a workspace of ``splits x M
   x N`` floats; 8-byte pairs where N is even);
2. ``__threadfence()``, the warpgroup's named barrier, and one thread takes a ticket:
   ``lg_tk[cg] = atomicAdd(&cnt[tile * consumers + cg], 1)`` (a per-warpgroup shared int);
3. the named barrier again; the warpgroup whose ticket is ``splits - 1`` (the last arrival)
   fences, resets the counter to 0 (the workspace is ready for the next launch on the stream),
   sums ``0.f + W[0] + W[1] + ... + W[splits - 1]`` per register, in that order (8-byte loads
   where the tile is interior and N even, else predicated 4-byte loads, as the template), and
   rounds once to C.

The result is bitwise the template's (same k ranges, same wgmma order per split, same sum
order, same rounding).  The per-role model (:mod:`kernels.verify.gate_tma_ticket`) proves the
partial stores, the ticket and the merge at the spec's instances; the ticket's structure is
:func:`kernels.verify.ticket_rules.check_ticket_structure`, its arrival orders the GEMM's
:func:`~kernels.nvidia.splitk_inline.check_arrival_protocol` (the same rules as the fused
split-KV decode's, generalised to a per-warpgroup ticket inside the persistent loop).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import sympy

from ..ir.core import Access, If, Let, Loop, Param, ZeroFrag, sym
from ..ir.nvidia_tma import IntParam, NamedBarrier
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence
from ..verify.spec import (Contraction, Dim, Domain, KernelSpec, Symbol, TensorSpec)
from .gemm import GemmConfigError
from .wgmma import split_ranges
from .wgmma_tma import TmaGemmConfig
from .wgmma_tma_ir_builder import TmaIrBuilder

__all__ = ["SplitTmaIrBuilder", "operand_maps", "SPLIT_INSTANCES", "split_instances", "split_spec",
           "split_run"]

#: (M, N, K, ctas, ldc, splits) launches: odd N (4-byte partials and loads), even N with a
#: padded C, uneven k ranges, units per CTA > 1, a partial raster group, one split
SPLIT_INSTANCES: Tuple[Tuple[int, ...], ...] = (
    (70, 75, 320, 3, 75, 3), (130, 128, 200, 2, 136, 2), (70, 64, 130, 2, 64, 1))


def split_instances(cfg: TmaGemmConfig) -> Tuple[Tuple[int, ...], ...]:
    """The launches ``cfg`` is verified at (M <= a_rows with a short A box)."""
    r = cfg.a_rows
    if not r:
        return SPLIT_INSTANCES
    return ((r, 75, 320, 3, 75, 3), (r - 3, 128, 200, 2, 136, 2), (1, 64, 130, 1, 64, 1))


def instance_values(v: Sequence[int], bk: int = 64) -> Dict[str, int]:
    """One launch's symbols from its (M, N, K, ctas, ldc, splits): ``kt_per`` and the split
    count the host really launches (equal ranges of whole k tiles, none empty)."""
    M, N, K, ctas, ldc, splits = v
    kt_per, n = split_ranges(K, bk, splits)
    return dict(M=M, N=N, K=K, ctas=ctas, ldc=ldc, splits=n, kt_per=kt_per)


def split_spec(name: str, dtype: str, instances: Sequence[Tuple[int, ...]],
               max_m: int = 2 ** 20) -> KernelSpec:
    """``C = A B`` through the fp32 workspace ``W`` (``splits x M x N``) and the arrival
    counters ``cnt``, proved on the per-role model at ``instances``."""
    for v in instances:
        if len(v) != 6:
            raise GemmConfigError(f"instance {tuple(v)}: the split-K form's launches are (M, N, "
                                  "K, ctas, ldc, splits) tuples")
    inst = [instance_values(v) for v in instances]
    return KernelSpec(
        name=name, dims=(Dim("s", None), Dim("m", None), Dim("n", None), Dim("k", None)),
        tensors=(TensorSpec("A", ("m", "k"), "input", dtype),
                 TensorSpec("B", ("n", "k"), "input", dtype),
                 TensorSpec("W", ("s", "m", "n"), "workspace", "f32"),
                 TensorSpec("C", ("m", "n"), "output", dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), None),),
        symbols=(Symbol("M", 1, max_m), Symbol("N", 1, 2 ** 20), Symbol("K", 1, 2 ** 20),
                 Symbol("ctas", 1, 1024), Symbol("ldc", 1, 2 ** 20), Symbol("splits", 1, 64),
                 Symbol("kt_per", 1, 2 ** 15)),
        domain=Domain.on_instances(lambda k: inst), warpgroup_roles=("producer", "consumer"))


class SplitTmaIrBuilder(TmaIrBuilder):
    """The IR of an inline-reduce split-K configuration (module docstring)."""

    def __init__(self, cfg: TmaGemmConfig) -> None:
        super().__init__(cfg)
        self.kbound = sym("kn")

    def kcoord(self, kk: Any) -> Any:
        return sym("kt0") + kk

    def units(self) -> Any:
        return sym("tiles") * sym("splits")

    def unit_lets(self) -> List[Any]:
        u, tiles, split = sym("u"), sym("tiles"), sym("split")
        return [Let("u", self.bx + sym("iu") * self.ctas),
                Let("tile", sympy.Mod(u, tiles)), Let("split", sympy.floor(u / tiles)),
                Let("kt0", split * sym("kt_per")),
                Let("kn", sympy.Min(sym("KT") - sym("kt0"), sym("kt_per")))] + \
            self.raster(sym("tile"))

    def epilogue_words(self) -> str:
        return ("split-K work units (tile, k range), one launch: fp32 partials in W, the last "
                "arriving split of each (tile, consumer warpgroup) sums them in split order and "
                "rounds once to C (row stride ldc)")

    # ---- the epilogue --------------------------------------------------------------------
    def pairs(self):
        """(r, col, accumulator index) of each of the thread's accumulator pairs."""
        rr, cc = sym("rr"), sym("cc")
        for j in range(self.c.bn // 8):
            for h in range(2):
                yield rr + 8 * h, cc + 8 * j, 4 * j + 2 * h

    def partial_stores(self) -> List[Any]:
        """fp32 partials -> ``W[split]`` (row stride N): an 8-byte pair where both columns
        exist and N is even, else a 4-byte store of each column that exists."""
        M, N = self.M, self.N
        even = sympy.Eq(sympy.Mod(N, 2), 0)
        base = sym("split") * M * N
        out: List[Any] = []
        for r, col, it in self.pairs():
            off = base + r * N + col
            out += [Access("store", "global", "W", off, 2, self.acc.regs([it, it + 1]),
                           pred=sympy.And(r < M, col + 1 < N, even), tag="W.store2"),
                    Access("store", "global", "W", off, 1, self.acc.regs([it]),
                           pred=sympy.And(r < M, col < N,
                                          sympy.Not(sympy.And(col + 1 < N, even))),
                           tag="W.store.lo"),
                    Access("store", "global", "W", off + 1, 1, self.acc.regs([it + 1]),
                           pred=sympy.And(r < M, col + 1 < N, sympy.Not(even)),
                           tag="W.store.hi")]
        return out

    def merge(self) -> List[Any]:
        """The last arrival's sum of ``W[0..splits)`` into the zeroed accumulators, split
        outermost (a split's loads issue together), 8-byte loads on an interior tile of even
        N, else predicated 4-byte loads (the template's two loops)."""
        M, N, c = self.M, self.N, self.c
        even = sympy.Eq(sympy.Mod(N, 2), 0)
        interior = sympy.And(sym("n0") + c.bn <= N, even)
        base = sym("sp") * M * N
        wide: List[Any] = []
        narrow: List[Any] = []
        for r, col, it in self.pairs():
            off = base + r * N + col
            wide.append(PartialAdd("W", off, 2, self.acc.regs([it, it + 1]), r < M,
                                   tag="W.merge2"))
            narrow += [PartialAdd("W", off, 1, self.acc.regs([it]), sympy.And(r < M, col < N),
                                  tag="W.merge.lo"),
                       PartialAdd("W", off + 1, 1, self.acc.regs([it + 1]),
                                  sympy.And(r < M, col + 1 < N), tag="W.merge.hi")]
        return [If(interior, [Loop("sp", 0, sym("splits"), wide)]),
                If(sympy.Not(interior), [Loop("sp", 0, sym("splits"), narrow)])]

    def unit_epilogue(self) -> List[Any]:
        c = self.c
        cg, t, splits = sym("cg"), sym("t"), sym("splits")
        slot = sym("tile") * c.consumers + cg
        one = self.direct_epilogue()
        lets = one[:2]          # rr, cc: the thread's first row and column in the tile
        ticket = AtomicTicket("cnt", slot, "lg_tk", sympy.Eq(t, 0), dst_index=cg,
                              dst_count=c.consumers)
        branch = LastArrival("lg_tk", splits - 1, [
            ThreadFence(), CounterReset("cnt", slot, sympy.Eq(t, 0)), ZeroFrag(self.acc)]
            + self.merge() + self.direct_epilogue(lets=False), index=cg)
        return [If(sympy.Eq(splits, 1), one),
                If(splits > 1, lets + self.partial_stores() + [
                    ThreadFence(), NamedBarrier(1 + cg, 128), ticket,
                    NamedBarrier(1 + cg, 128), branch])]

    # ---- interface -----------------------------------------------------------------------
    def interface(self) -> Tuple[List[Any], List[Any], Dict[str, Any]]:
        c = self.c
        params: List[Any] = [self.tm_a, self.tm_b, Param("W", "f32", const=False),
                             Param("C", c.dtype, const=False), Param("cnt", "i32", const=False)]
        params += [IntParam(n) for n in ("M", "N", "K", "ctas", "ldc", "splits", "kt_per")]
        # W: splits planes of M x N floats (row stride N); cnt: one int per (tile, consumer)
        meta = {"maps": (self.tm_a, self.tm_b),
                "row_stride": {"C": sym("ldc"), "W": self.N},
                "plane_stride": {"W": self.M * self.N},
                "counter_size": {"cnt": sym("tiles") * c.consumers}}
        return params, [], meta

    def spec(self, name: str, instances: Sequence[Tuple[int, ...]]) -> KernelSpec:
        return split_spec(name, self.c.dtype, instances, self.c.a_rows or 2 ** 20)


def operand_maps(g: Any) -> Any:
    """``maps_of(a, b[, c])``: the tensor maps of the operands the verified IR has maps for
    (its boxes, in order: A, B and for the TMA store C; extra operands are ignored) for one
    bound call of kernel ``g``, kept by those operands' pointers (their shapes and strides are
    the bound call's): one dict look-up per call, not :meth:`tensor_map`'s key of shapes and
    strides per map (host time per call, issue 20: these launches last 20-50 us)."""
    boxes = [(tm.box_inner, tm.box_outer) for tm in g.ir.meta["maps"]]
    n = len(boxes)
    by_ptr: Dict[Tuple[int, ...], List[Any]] = {}

    def maps_of(*ts) -> List[Any]:
        ts = ts[:n]
        key = tuple(t.data_ptr() for t in ts)
        maps = by_ptr.get(key)
        if maps is None:
            if len(by_ptr) > 64:
                by_ptr.clear()
            maps = by_ptr[key] = [g.tensor_map(t, *box) for t, box in zip(ts, boxes)]
        return maps
    return maps_of


def split_run(g: Any, M: int, N: int, K: int, splits: int, tiles: int, sms: int):
    """``run(a, b, out)`` of IR split-K kernel ``g`` (an ``IrTmaGemm``; its argument checks
    passed): one launch of ``min(units, sms)`` CTAs (``sms``: the CTA slots, ``ctas_per_sm``
    x the SM count).  The ``n x M x N`` fp32 partials and the
    zeroed per-(tile, warpgroup) counters (which the kernel leaves at zero) are kept per CUDA
    stream, as the template's (launches on one stream run in order); one split needs neither
    (null pointers: the kernel rounds its accumulators straight to C)."""
    import torch
    from ..printer.cuda import smem_bytes
    from ..runtime.cuda import LaunchSite
    from ..runtime.launch_cache import PerStream
    from ..runtime.rocm import TensorSpec as Spec
    from .splitk_inline import counter_slots
    cfg = g.cfg
    kt_per, n = split_ranges(K, cfg.bk, splits)
    ctas = min(tiles * n, sms)
    slots = counter_slots(tiles, cfg.consumers)
    spaces = PerStream(lambda device: (
        torch.empty((n, M, N), dtype=torch.float32, device=device),
        torch.zeros(slots, dtype=torch.int32, device=device)) if n > 1 else (None, None))
    main = LaunchSite(g.module, g.kernel_name, ctas, cfg.threads,
                      signature=("ptr",) * 5 + ("i32",) * 7,
                      specs=[Spec(strides=(), align=64)] * 2 + [
                          Spec(strides=(), align=8), Spec(strides=(), align=4),
                          Spec(strides=(), align=4)] + [None] * 7,
                      smem_bytes=smem_bytes(g.ir))
    maps_of = operand_maps(g)

    def run(a, b, out):
        if out is None:
            out = torch.empty((M, N), dtype=a.dtype, device=a.device)
        maps = maps_of(a, b)
        ws, stream = spaces.on(a.device)
        main(maps + [ws[0], out, ws[1], M, N, K, ctas, out.stride(0), n, kt_per], stream)
        return out
    return run
