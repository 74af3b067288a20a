"""TMA loads for the warp-specialised prefill (:mod:`.wgmma_attention_ws`, ``loader="tma"``).

With ``cp.async`` the producer warpgroup's 128 threads issue 16 copies each per K (or V) block
and signal the ring with ``cp.async.mbarrier.arrive.noinc``; their instructions share the SM's
issue slots with the consumers' softmax.  With TMA one producer thread issues each tile as
``cp.async.bulk.tensor.4d`` boxes (the FlashAttention-3 producer; read, not copied) that
complete bytes on the stage's ``full`` mbarrier (``arrive.expect_tx`` of the stage's bytes),
and the producer warpgroup keeps :data:`TMA_PRODUCER_REGS` registers, leaving
:data:`TMA_CONSUMER_REGS` to each consumer thread.

The tensors are addressed as 4-D tensor maps ``(head_dim, seq, heads, batch)`` (innermost
first) with the caller's strides, so any batch / head / row stride that is a multiple of 16
bytes works, and rows past the sequence (dimension 1) are zero-filled per (batch, head) by
the hardware: a partial last block of K or V reads zeros, never the next head's rows.

Proved at plan time (:func:`plan_tma_loads`): for Q, K and V, every (warpgroup, k step,
element) address the proved tile's wgmma descriptors read is where the TMA boxes (the model of
:mod:`.tma`: 128-byte swizzle rows of 64 elements, boxes ``box_stride`` bytes apart) write that
element; each stage's expected transaction bytes are the bytes its boxes deliver (a stage
whose count is short completes before its data landed; one that is long never completes); and
every box destination is on the 1024-byte swizzle repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from layoutalg.verify import CheckResult

from ..errors import LaunchError
from .attention import AttentionConfigError
from .gemm import GemmConfigError
from .tma import (DeviceMaps, SWIZZLE_REPEAT, TmaOperandLoad, check_tma_against_descriptors,
                  TMA_LOAD_4D_HELPER, encode_tiled_map)
from .wgmma import proved

__all__ = ["TMA_PRODUCER_REGS", "TMA_CONSUMER_REGS", "TMA_WS_HELPERS", "TMA_PARAMS",
           "PERSISTENT_PARAMS", "WsTmaLoads", "plan_tma_loads", "emit_tma_producer",
           "emit_tile_decode", "attention_map_args", "tma_attention_ready", "BHSD_AXES",
           "ir_attention_map_args",
           "AttentionTensorMaps", "unit_order", "printed_unit_order", "check_unit_decode", "UNIT_DECODE_CASES"]

TMA_PRODUCER_REGS = 24     # one thread issues boxes: FA3's producer count
TMA_CONSUMER_REGS = 240    # 128 x 24 + 256 x 240 = 64512 <= 65536

TMA_PARAMS = (", const void* __restrict__ tmQ, const void* __restrict__ tmK, "
              "const void* __restrict__ tmV")
PERSISTENT_PARAMS = ", int n_heads, int n_batch"

TMA_WS_HELPERS = r"""
LG_DEV void lg_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
LG_DEV void lg_mbar_expect_tx(lg_u32 bar, lg_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
LG_DEV void lg_tma_prefetch(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(tmap) : "memory");
}""" + TMA_LOAD_4D_HELPER


@dataclass(frozen=True)
class WsTmaLoads:
    """The TMA boxes of one Q tile and one K / V stage (``box_inner`` = 64 elements of
    head_dim, one 128-byte swizzle row) and the proofs' results."""

    q: TmaOperandLoad
    k: TmaOperandLoad
    v: TmaOperandLoad
    checks: Dict[str, CheckResult]


def plan_tma_loads(cfg: Any, tile: Any) -> WsTmaLoads:
    """The boxes of ``cfg`` (a ``WsFlashConfig``) proved against ``tile`` (its proved
    ``WgmmaFlashPlan``): descriptors vs box writes for Q, K and V, transaction bytes, box
    alignment.  Raises :class:`AttentionConfigError` naming what does not hold."""
    d, bm, bn = cfg.head_dim, cfg.bm, cfg.bn
    q, k, v = TmaOperandLoad(bm, d), TmaOperandLoad(bn, d), TmaOperandLoad(bn, d)
    checks: Dict[str, CheckResult] = {}
    try:
        for nm, ld, op, wgs, mn in (("Q", q, tile.q, cfg.consumers, 64),
                                    ("K", k, tile.k, 1, bn), ("V", v, tile.v, 1, d)):
            n = check_tma_against_descriptors(f"{cfg.name}: {nm}", ld, op.major, op.desc,
                                              op.k_starts, op.wg_step, wgs, mn)
            checks[f"{nm} TMA boxes vs descriptors"] = proved(
                f"{nm}: {ld.boxes} boxes of ({ld.box_inner}, {ld.rows}), {ld.stride} B apart, "
                f"read where written ({n} points)", "every warpgroup, k step and element")
    except GemmConfigError as e:
        raise AttentionConfigError(str(e)) from None
    for nm, ld, want in (("Q", q, cfg.q_bytes), ("K", k, cfg.kv_bytes), ("V", v, cfg.kv_bytes)):
        if ld.stage_bytes != want:
            raise AttentionConfigError(
                f"{cfg.name}: {nm} expects {want} transaction bytes per stage but its boxes "
                f"deliver {ld.stage_bytes}: the full barrier would complete early or never")
        if ld.stride % SWIZZLE_REPEAT[ld.swizzle] or want % SWIZZLE_REPEAT[ld.swizzle]:
            raise AttentionConfigError(
                f"{cfg.name}: {nm} boxes start {ld.stride} B apart in {want}-byte stages: not "
                f"on the {SWIZZLE_REPEAT[ld.swizzle]}-byte swizzle repeat")
        checks[f"{nm} transaction bytes"] = proved(
            f"{nm}: expect_tx {want} B = {ld.boxes} boxes x {ld.box_bytes} B", "every stage")
    return WsTmaLoads(q, k, v, checks)


def emit_tile_decode(o: Callable[[str], None], cfg: Any, ind: str) -> None:
    """A persistent kernel's work unit ``u`` -> query block ``qb`` (longest first when causal:
    every head and batch of the last query block, then the one before; with
    ``cfg.unit_heads`` = G, the same inside consecutive chunks of G (batch, head) pairs, the
    order :func:`unit_order` models and :func:`check_unit_decode` proves), head ``h``, batch
    ``b``, KV head ``hk``, first row ``m0`` and ``NB`` key blocks (stopping at the diagonal
    when causal), as :func:`.attention.emit_flash_block` prints them for a block's grid
    position."""
    if cfg.unit_heads:     # chunks of G pairs (the last one may be short), qb-major inside
        G = cfg.unit_heads
        o(f"{ind}const int chunk = u / (nqb * {G}), r = u - chunk * (nqb * {G});")
        o(f"{ind}const int gsz = min({G}, n_heads * n_batch - chunk * {G});")
        o(f"{ind}const int rank = r / gsz, hb = chunk * {G} + r % gsz;")
    else:
        o(f"{ind}const int rank = u / (n_heads * n_batch), hb = u % (n_heads * n_batch);")
    o(f"{ind}const int qb = {'nqb - 1 - rank' if cfg.causal else 'rank'};")
    o(f"{ind}const int h = hb % n_heads, b = hb / n_heads, hk = h / group;")
    o(f"{ind}const int m0 = qb * {cfg.bm};")
    o(f"{ind}const int n_end = " + (f"min(Skv, m0 + {cfg.bm});" if cfg.causal else "Skv;"))
    o(f"{ind}const int NB = (n_end + {cfg.bn - 1}) / {cfg.bn};")


# (query blocks, heads, batches, resident blocks) the decode is proved over: short and partial
# last chunks, one head, more blocks than units, and the S8K / S512 causal suite shapes
UNIT_DECODE_CASES = ((1, 1, 1, 132), (3, 5, 1, 4), (7, 3, 2, 132), (4, 32, 16, 132),
                     (64, 32, 8, 132), (5, 13, 3, 7))


def unit_order(u: int, nqb: int, n_heads: int, n_batch: int, unit_heads: int,
               causal: bool) -> Tuple[int, int, int]:
    """Work unit ``u`` -> (query block, head, batch): the arithmetic
    :func:`emit_tile_decode` prints, in Python (C's ``/`` and ``%`` on non-negative ints)."""
    hbn = n_heads * n_batch
    if unit_heads:
        chunk = u // (nqb * unit_heads)
        r = u - chunk * (nqb * unit_heads)
        gsz = min(unit_heads, hbn - chunk * unit_heads)
        rank, hb = r // gsz, chunk * unit_heads + r % gsz
    else:
        rank, hb = u // hbn, u % hbn
    return (nqb - 1 - rank if causal else rank), hb % n_heads, hb // n_heads


def printed_unit_order(cfg: Any) -> Callable[..., Tuple[int, int, int]]:
    """The decode :func:`emit_tile_decode` prints for ``cfg``, evaluated as printed: each
    ``const int a = e, b = f;`` line is run with C's ``/`` as ``//`` (every operand is
    non-negative), so the proof reads the kernel's own arithmetic, not a second copy."""
    lines: list = []
    emit_tile_decode(lines.append, cfg, "")
    stmts = []
    for ln in lines:
        body = ln.strip().removeprefix("const int ").removesuffix(";")
        depth, start = 0, 0
        for i, ch in enumerate(body + ","):      # split the declarators at top-level commas
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                name, expr = body[start:i].split("=", 1)
                stmts.append((name.strip(), compile(expr.strip().replace("/", "//"), ln, "eval")))
                start = i + 1

    def order(u: int, nqb: int, n_heads: int, n_batch: int, *_: Any) -> Tuple[int, int, int]:
        env: Dict[str, int] = dict(u=u, nqb=nqb, n_heads=n_heads, n_batch=n_batch, group=1,
                                   Skv=nqb * cfg.bm)
        for name, code in stmts:
            env[name] = eval(code, {"min": min}, env)   # noqa: S307 - our own printed ints
        return env["qb"], env["h"], env["b"]
    return order


def check_unit_decode(cfg: Any, cases: Iterable[Tuple[int, int, int, int]] = UNIT_DECODE_CASES,
                      order: Optional[Callable[..., Tuple[int, int, int]]] = None
                      ) -> CheckResult:
    """Every (query block, head, batch) is computed exactly once over the persistent grid's
    walks (block ``x`` takes units ``x, x + grid, ...`` below ``nqb * heads * batch``), for
    each case (nqb, heads, batch, grid), by the printed decode (:func:`printed_unit_order`;
    ``order`` replaces it in tests); raises :class:`AttentionConfigError` naming the first
    unit decoded out of range, twice or never."""
    order = order or printed_unit_order(cfg)
    n = 0
    for nqb, nh, nb, grid in cases:
        tiles, seen = nqb * nh * nb, {}
        grid = min(grid, tiles)
        for x in range(grid):
            for u in range(x, tiles, grid):
                t = order(u, nqb, nh, nb, cfg.unit_heads, cfg.causal)
                if not (0 <= t[0] < nqb and 0 <= t[1] < nh and 0 <= t[2] < nb):
                    raise AttentionConfigError(
                        f"{cfg.name}: unit {u} of {tiles} (nqb {nqb}, {nh} heads, {nb} "
                        f"batches) decodes to (qb, h, b) = {t}, outside the problem")
                if t in seen:
                    raise AttentionConfigError(
                        f"{cfg.name}: units {seen[t]} and {u} (nqb {nqb}, {nh} heads, {nb} "
                        f"batches) both decode to (qb, h, b) = {t}: computed twice")
                seen[t] = u
                n += 1
        if len(seen) != tiles:
            raise AttentionConfigError(
                f"{cfg.name}: nqb {nqb}, {nh} heads, {nb} batches, grid {grid}: "
                f"{tiles - len(seen)} (qb, h, b) never computed")
    return proved(f"unit decode (unit_heads {cfg.unit_heads}): {n} units, each (qb, h, b) "
                  "exactly once", "every block's walk of each case")


def emit_tma_producer(o: Callable[[str], None], cfg: Any, loads: WsTmaLoads) -> None:
    """The producer warpgroup's body (after its ``setmaxnreg.dec``): thread 0 loads Q, then
    K and V block by block into the ring, waiting on ``empty`` before reusing a stage (the
    parities of :func:`.wgmma_attention_ws.ring_schedule`).  Persistent: the same for each
    work unit of the block, the ring's block count ``g`` running on over the units, and Q
    refilled once the consumers released the previous unit's (parity of unit ``it - 1``)."""
    S, bn = cfg.stages, cfg.bn
    pt = cfg.persistent

    def boxes(ind: str, ld: TmaOperandLoad, dst: str, tmap: str, bar: str, row: str,
              head: str) -> None:
        for j in range(ld.boxes):
            off = f" + {j * ld.stride}" if j else ""
            o(f"{ind}lg_tma_load_4d({dst}{off}, {tmap}, {bar}, {j * ld.box_inner}, {row}, "
              f"{head}, b);")

    o("    if (tid == 0) {")
    o("      lg_tma_prefetch(tmQ); lg_tma_prefetch(tmK); lg_tma_prefetch(tmV);")
    if pt:
        o("      int g0 = 0, it = 0;")
        o("      for (int u = blockIdx.x; u < tiles; u += gridDim.x, ++it) {")
        emit_tile_decode(o, cfg, "      ")
        o("      if (it) lg_mbar_wait(bQe, (it - 1) & 1);   // the previous unit's Q released")
    o(f"      lg_mbar_expect_tx(bQ, {loads.q.stage_bytes}u);")
    boxes("      ", loads.q, "sQ", "tmQ", "bQ", "m0", "h")
    G = "g0 + " if pt else ""
    if getattr(cfg, "v_behind_k", False):
        # the order the consumers read them: K of block j, then V of block j - 1
        o("      for (int j = 0; j <= NB; ++j) {")
        for kv, ld, blk, when in (("K", loads.k, "j", "j < NB"),
                                  ("V", loads.v, "j - 1", "j > 0")):
            o(f"        if ({when}) {{")
            o(f"          const int s = ({G}{blk}) % {S}, use = ({G}{blk}) / {S};")
            o(f"          if (use) lg_mbar_wait(b{kv}e + 8 * s, (use - 1) & 1);   // block "
              f"{blk} - {S} released")
            o(f"          lg_mbar_expect_tx(b{kv}f + 8 * s, {ld.stage_bytes}u);")
            boxes("          ", ld, f"s{kv} + s * {cfg.kv_bytes}", f"tm{kv}",
                  f"b{kv}f + 8 * s", f"({blk}) * {bn}", "hk")
            o("        }")
        o("      }")
    else:
        o("      for (int j = 0; j < NB; ++j) {")
        if pt:
            o(f"        const int s = (g0 + j) % {S}, use = (g0 + j) / {S};")
        else:
            o(f"        const int s = j % {S}, use = j / {S};")
        for kv, ld in (("K", loads.k), ("V", loads.v)):
            o(f"        if (use) lg_mbar_wait(b{kv}e + 8 * s, (use - 1) & 1);   // block j - "
              f"{S} released")
            o(f"        lg_mbar_expect_tx(b{kv}f + 8 * s, {ld.stage_bytes}u);")
            boxes("        ", ld, f"s{kv} + s * {cfg.kv_bytes}", f"tm{kv}", f"b{kv}f + 8 * s",
                  f"j * {bn}", "hk")
        o("      }")
    if pt:
        o("      g0 += NB;\n      }")
    o("    }")


# --------------------------------------------------------------------------- host side

def tma_attention_ready(t) -> bool:
    """True when TMA can address the (batch, heads, seq, head_dim) tensor ``t`` as it is:
    16-byte aligned base, head_dim contiguous, every other stride a positive multiple of 16
    bytes (a broadcast stride of 0 is not a tensor map stride)."""
    st = tuple(int(x) for x in t.stride())
    return (t.data_ptr() % 16 == 0 and st[3] == 1
            and all(0 < s and (2 * s) % 16 == 0 and 2 * s < 2 ** 40 for s in st[:3]))


def attention_map_args(t, box_rows: int) -> Dict[str, Any]:
    """The 4-D tensor map of ``t`` (batch, heads, seq, head_dim) with boxes of 64 head_dim
    elements x ``box_rows`` rows: dims innermost first, byte strides of seq, heads, batch.
    Raises :class:`LaunchError` for what TMA cannot address."""
    if not tma_attention_ready(t):
        raise LaunchError(f"TMA needs a 16-byte aligned base, head_dim contiguous and positive "
                          f"strides that are multiples of 8 elements; got strides "
                          f"{tuple(t.stride())} at pointer offset {t.data_ptr() % 16} B")
    B, H, S, D = (int(x) for x in t.shape)
    return {"dims": (D, S, H, B), "strides": tuple(2 * int(t.stride(i)) for i in (2, 1, 0)),
            "box": (64, box_rows, 1, 1)}


#: the axis of a (batch, heads, seq, head_dim) tensor each spec dimension an IR attention map
#: names is stored on (:class:`~kernels.ir.nvidia_tma.TensorMap` ``dims``, innermost first)
BHSD_AXES: Dict[str, int] = {"d": 3, "row": 2, "key": 2, "head": 1, "kv_head": 1, "batch": 0}

_MAP_DTYPES = {"bf16": "torch.bfloat16", "f16": "torch.float16"}


def ir_attention_map_args(tm: Any, t: Any, sizes: Dict[str, int]) -> Dict[str, Any]:
    """The 4-D tensor map an IR kernel declares (``tm``, a
    :class:`~kernels.ir.nvidia_tma.TensorMap` with ``planes``) over the (batch, heads, seq,
    head_dim) tensor ``t`` at one launch (``sizes``: the value of each runtime symbol in
    ``tm``'s extents), read against ``t``: its ``dims`` name ``t``'s axes innermost first in
    the order the template encodes, (head_dim, seq, head, batch) (:data:`BHSD_AXES`); its
    extents evaluated at ``sizes`` are ``t``'s; its box is (64, rows, 1, 1) of its dtype.
    Returns :func:`attention_map_args` of ``t`` with ``tm``'s box rows -- the strides ``t``'s,
    what TMA cannot address refused there -- so an IR kernel's map is encoded by the
    template's one mechanism (:class:`AttentionTensorMaps`, :func:`~.tma.encode_tiled_map`).
    Raises :class:`LaunchError` naming the first thing that differs."""
    import sympy
    if len(tm.planes) != 2:
        raise LaunchError(f"tensor map {tm.name}: dims {tm.dims} are a 2-D map; an attention "
                          "map is 4-D (head_dim, seq, head, batch)")
    axes = tuple(BHSD_AXES.get(n, -1) for n in tm.dims)
    if axes != (3, 2, 1, 0):
        raise LaunchError(f"tensor map {tm.name}: dims {tm.dims} are not (head_dim, seq, head, "
                          "batch) of a (batch, heads, seq, head_dim) tensor: the host encodes "
                          "no other order")
    want = []
    for e in (tm.inner, tm.outer, *tm.planes):
        e = sympy.sympify(e)
        free = {s.name: s for s in e.free_symbols}
        if set(free) - set(sizes):
            raise LaunchError(f"tensor map {tm.name}: no launch value for "
                              f"{sorted(set(free) - set(sizes))} in its extent {e}")
        want.append(int(e.subs({s: sizes[n] for n, s in free.items()})))
    if _MAP_DTYPES.get(tm.dtype) != str(t.dtype):
        raise LaunchError(f"tensor map {tm.name}: the IR's elements are {tm.dtype}, the tensor's "
                          f"{t.dtype}")
    args = attention_map_args(t, tm.box_outer)
    if tuple(want) != args["dims"]:
        raise LaunchError(f"tensor map {tm.name} over {tm.tensor}: the IR's extents "
                          f"{tuple(want)} (head_dim, seq, head, batch) at this launch, the "
                          f"tensor's {args['dims']}")
    if (tm.box_inner, tm.box_outer, 1, 1) != args["box"]:
        raise LaunchError(f"tensor map {tm.name}: the IR's box ({tm.box_inner}, "
                          f"{tm.box_outer}, 1, 1), the template encodes {args['box']}")
    return args


class AttentionTensorMaps(DeviceMaps):
    """Device copies of the tensor maps of the tensors a prefill reads, cached by (pointer,
    shape, strides, dtype, box)."""

    def get(self, t, box_rows: int):  # type: ignore[override]
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), box_rows,
               t.device)
        return super().get(key, lambda: encode_tiled_map(t, attention_map_args(t, box_rows)),
                           t.device)
