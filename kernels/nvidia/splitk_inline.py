"""One-launch split-K for the TMA GEMM (issue 20): the last-arriving CTA of each output tile
reduces the fp32 partials itself, so a split-K call is one kernel launch instead of two.

Each (tile, consumer warpgroup) of a split writes its fp32 partial tile to ``W[split]``
(``splits x M x N``, as the reduce kernel's workspace), every thread fences
(``__threadfence``), the warpgroup meets at its named barrier and one thread adds 1 to the
tile's arrival counter (``atomicAdd`` on ``cnt[slot]``, a zeroed int workspace).  The thread
that reads ``splits - 1`` knows every other split has stored and fenced: it resets the
counter to 0 (so the workspace is reusable by the next launch on the stream), and its
warpgroup fences again and sums ``W[0] + W[1] + ... + W[splits - 1]`` in that fixed order,
starting from ``0.f`` like :func:`kernels.nvidia.splitk.reduce_kernel`, then rounds once.  The
result is therefore bitwise the reduce kernel's.  With ``splits == 1`` nothing is stored:
``0.f + acc`` is rounded straight to C (the same value the reduce kernel would compute).

The protocol's three expressions (:class:`InlineReduceProtocol`) are printed into the kernel
and evaluated here by :func:`check_inline_reduce`, which proves for a set of problems (edges
in M and N, several splits and grids): every work unit runs once, each tile's k ranges
partition the k tiles, the partial stores of all (tile, warpgroup, split) are disjoint, inside
the workspace and read back by the reducer at the addresses written, counter slots are
distinct per (tile, warpgroup) and inside the counter workspace, and -- over every arrival
order of up to 5 splits and two launches in a row -- each tile is reduced exactly once, by an
arrival that came after all its splits, with the counter back at 0.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, Tuple

import numpy as np

from .gemm import need
from .prelude import PACK

__all__ = ["InlineReduceProtocol", "PROTOCOL", "counter_slots", "emit_inline_epilogue",
           "check_inline_reduce", "prove_inline_reduce", "INLINE_PARAMS", "tile_origin",
           "check_arrival_protocol", "printed_protocol_lines"]

# the kernel parameters an inline-reduce configuration appends to the TMA GEMM's list
INLINE_PARAMS = "lg_u16* __restrict__ O, int* __restrict__ cnt, int ldo"


@dataclass(frozen=True)
class InlineReduceProtocol:
    """The printed expressions of the protocol (C text; ``{consumers}`` is filled in).

    ``counter``: the counter slot of (``tile``, consumer ``cg``); ``partial``: the ``W``
    element offset of (``split``, row ``r``, column ``col``); ``last``: the test on the
    counter's old value ``old``; ``reset``: whether the last arrival zeroes its counter."""

    counter: str = "tile * {consumers} + cg"
    partial: str = "(size_t)split * M * N + (size_t)r * N + col"
    last: str = "old == splits - 1"
    reset: bool = True

    def c_counter(self, consumers: int) -> str:
        return self.counter.format(consumers=consumers)


PROTOCOL = InlineReduceProtocol()


def counter_slots(tiles: int, consumers: int) -> int:
    """Ints of the zeroed counter workspace: one per (tile, consumer warpgroup)."""
    return tiles * consumers


def _py(expr: str) -> str:
    """A printed C integer expression as Python (casts dropped; the operands are non-negative
    and the expressions use only + and *, so the values agree)."""
    return re.sub(r"\((size_t|int|long long)\)", "", expr)


def _eval(expr: str, **env: Any) -> Any:
    return eval(_py(expr), {"__builtins__": {}}, env)   # noqa: S307 - our own printed text


# ------------------------------------------------------------------------------ emission

def emit_inline_epilogue(w: Callable[[str], None], dtype: str, bn: int, consumers: int,
                         proto: InlineReduceProtocol = PROTOCOL) -> None:
    """Print the consumer's epilogue of one work unit (inside the unit loop; ``acc``, ``m0``,
    ``n0``, ``trow``, ``tcol``, ``tile``, ``u``, ``cg``, ``t`` in scope; kernel parameters
    ``W`` (the ``C`` float pointer), ``O``, ``cnt``, ``ldo``)."""
    cvt = "lg_f32_to_f16" if dtype == "f16" else "lg_f32_to_bf16"
    loop = (f"      #pragma unroll\n      for (int j = 0; j < {bn // 8}; ++j)\n"
            "      #pragma unroll\n      for (int h = 0; h < 2; ++h) {\n"
            "        const int r = m0 + trow + 8 * h, col = n0 + tcol + 8 * j;")

    def store_out(lo: str, hi: str, ind: str) -> None:
        w(f"{ind}lg_u16* dst = O + (size_t)r * ldo + col;")
        w(f"{ind}if (col + 1 < N && opair) {{")
        w(f"{ind}  *reinterpret_cast<lg_u32*>(dst) = {PACK[dtype]}({lo}, {hi});")
        w(f"{ind}}} else {{")
        w(f"{ind}  if (col < N) dst[0] = {cvt}({lo});")
        w(f"{ind}  if (col + 1 < N) dst[1] = {cvt}({hi});")
        w(f"{ind}}}")

    w("      const int split = u / tiles;")
    w("      if (splits == 1) {   // one split: 0.f + acc, rounded as the reduce kernel would")
    w(loop)
    w("        if (r < M) {")
    store_out("0.f + acc[4 * j + 2 * h]", "0.f + acc[4 * j + 2 * h + 1]", "          ")
    w("        }\n      }")
    w("      } else {")
    w(loop)
    w("        if (r < M) {")
    w(f"          float* dst = C + {proto.partial};")
    w("          if (col + 1 < N && pair_ok) {")
    w("            *reinterpret_cast<float2*>(dst) = make_float2(acc[4 * j + 2 * h], "
      "acc[4 * j + 2 * h + 1]);")
    w("          } else {")
    w("            if (col < N) dst[0] = acc[4 * j + 2 * h];")
    w("            if (col + 1 < N) dst[1] = acc[4 * j + 2 * h + 1];")
    w("          }\n        }\n      }")
    w("      __threadfence();            // this thread's partials are visible device-wide ...")
    w("      lg_named_bar(1 + cg, 128);  // ... before its warpgroup arrives")
    w("      if (t == 0) {")
    w(f"        const int slot = {proto.c_counter(consumers)};")
    w("        const int old = atomicAdd(cnt + slot, 1);")
    w(f"        const int last = {proto.last};")
    if proto.reset:
        w("        if (last) cnt[slot] = 0;   // every split has arrived: reusable next launch")
    w("        lg_last[cg] = last;")
    w("      }")
    w("      lg_named_bar(1 + cg, 128);")
    w("      if (lg_last[cg]) {          // the last arrival sums W[0..splits) in order")
    w("        __threadfence();")
    # split outermost, every (j, h) of one split loaded at once: the loads of a split are
    # independent (one L2 latency per split, not per element); each register still sums
    # 0.f + W[0] + W[1] + ... in split order, the reduce kernel's order
    w(f"        #pragma unroll\n        for (int i = 0; i < {bn // 2}; ++i) acc[i] = 0.f;")
    # an interior tile of even N: one predicated 8-byte load per (j, h); edge tiles two
    # predicated 4-byte loads.  No branches, so a split's loads issue together (loads under
    # if/else waited for each other: 42 us against 14 us at 16x4096x4096, 64x128, 4 splits)
    w(f"        if (n0 + {bn} <= N && pair_ok) {{")
    w("        for (int split = 0; split < splits; ++split) {")
    w(loop.replace("\n      ", "\n        ").replace("      #pragma", "        #pragma", 1))
    w(f"          const float* src = C + {proto.partial};")
    w("          float2 v = make_float2(0.f, 0.f);")
    w("          if (r < M) v = __ldcg(reinterpret_cast<const float2*>(src));")
    w("          acc[4 * j + 2 * h] += v.x;\n          acc[4 * j + 2 * h + 1] += v.y;")
    w("        }\n        }")
    w("        } else {")
    w("        for (int split = 0; split < splits; ++split) {")
    w(loop.replace("\n      ", "\n        ").replace("      #pragma", "        #pragma", 1))
    w(f"          const float* src = C + {proto.partial};")
    w("          float x = 0.f, y = 0.f;   // 4-byte loads, predicated: no branch, no alignment")
    w("          if (r < M && col < N) x = __ldcg(src);")
    w("          if (r < M && col + 1 < N) y = __ldcg(src + 1);")
    w("          acc[4 * j + 2 * h] += x;\n          acc[4 * j + 2 * h + 1] += y;")
    w("        }\n        }\n        }")
    w(loop.replace("\n      ", "\n        ").replace("      #pragma", "        #pragma", 1))
    w("          if (r < M) {")
    store_out("acc[4 * j + 2 * h]", "acc[4 * j + 2 * h + 1]", "            ")
    w("          }\n        }\n      }")
    w("      }")


# ------------------------------------------------------------------------------- proofs

def _units(tiles: int, kt: int, kt_per: int, n: int, grid: int):
    """(cta, u, tile, split, kt0, kn) of every unit the printed persistent loop runs."""
    units = tiles * n
    for cta in range(grid):
        for u in range(cta, units, grid):
            tile, split = u % tiles, u // tiles
            kt0 = split * kt_per
            yield cta, u, tile, split, kt0, min(kt - kt0, kt_per)


def _arrivals(proto: InlineReduceProtocol, n: int, order: Iterable[int], counter: int
              ) -> Tuple[int, list]:
    """One launch's arrivals at one counter slot in ``order``: (counter after, reductions as
    the number of splits arrived when each happened)."""
    arrived, reduced = 0, []
    for _ in order:
        old = counter
        counter += 1
        arrived += 1
        if _eval(proto.last, old=old, splits=n):
            reduced.append(arrived)
            if proto.reset:
                counter = 0
    return counter, reduced


def check_arrival_protocol(proto: InlineReduceProtocol, n: int, arrivals: int) -> int:
    """Every order of ``arrivals`` arrivals (all orders up to 5 splits, else rotations) at a
    slot, over two launches: exactly one reduction per launch, after all ``n`` splits, and
    the counter back at 0.  Returns the number of orders checked."""
    orders = (list(itertools.permutations(range(arrivals))) if arrivals <= 5 else
              [tuple(range(i, arrivals)) + tuple(range(i)) for i in range(arrivals)])
    for order in orders:
        counter = 0
        for launch in (1, 2):
            counter, reduced = _arrivals(proto, n, order, counter)
            need(len(reduced) == 1, f"split-K protocol: launch {launch} of {n} splits "
                 f"({arrivals} arrivals at one counter) reduced the tile {len(reduced)} times; "
                 "exactly once is required (is the counter reset, the last test old == "
                 "splits - 1, the slot one per (tile, warpgroup)?)")
            need(reduced[0] == n == arrivals, f"split-K protocol: the tile was reduced after "
                 f"{reduced[0]} of {n} splits had arrived ({arrivals} arrivals at its counter)")
            need(counter == 0, f"split-K protocol: the counter is {counter} after launch "
                 f"{launch}, not 0: the next launch on this workspace would be wrong")
    return len(orders)


def tile_origin(tile: int, grid_m: int, grid_n: int, group_m: int, bm: int, bn: int
                ) -> Tuple[int, int]:
    """``(m0, n0)`` of ``tile`` in the TMA GEMM's grouped raster (its printed formulas)."""
    group = group_m * grid_n
    first_m = (tile // group) * group_m
    gsize = min(grid_m - first_m, group_m)
    return (first_m + (tile % group) % gsize) * bm, ((tile % group) // gsize) * bn


@lru_cache(maxsize=16)
def _pair_starts(dtype: str, bn: int) -> Tuple[np.ndarray, np.ndarray]:
    """(row, col) in a warpgroup's 64 x bn band of accumulator pair ``4j + 2h`` of every
    thread (the printed ``trow + 8h``, ``tcol + 8j``; its partner is the next column)."""
    from mfma_specs.nvidia_wgmma import wgmma
    mma = wgmma(dtype, bn)
    loc = np.array([[mma.element_c(t, i) for i in range(0, bn // 2, 2)] for t in range(128)])
    need(bool((loc[..., 1] % 2 == 0).all()), "an accumulator pair starts on an odd column")
    return loc[..., 0].ravel(), loc[..., 1].ravel()


def check_inline_reduce(proto: InlineReduceProtocol, dtype: str, bm: int, bn: int, M: int,
                        N: int, K: int, splits: int, grid: int, bk: int = 64,
                        group_m: int = 8) -> Dict[str, int]:
    """The protocol's proofs for one problem (see the module docstring); raises
    :class:`~kernels.nvidia.gemm.GemmConfigError` naming the first failure.  Returns counts
    of what was checked."""
    from .wgmma import split_ranges
    consumers = bm // 64
    kt_per, n = split_ranges(K, bk, splits)
    kt = -(-K // bk)
    grid_m, grid_n = -(-M // bm), -(-N // bn)
    tiles = grid_m * grid_n
    seen_units = np.zeros(tiles * n, dtype=np.int64)
    ranges: Dict[int, list] = {}
    for cta, u, tile, split, kt0, kn in _units(tiles, kt, kt_per, n, grid):
        seen_units[u] += 1
        need(kn >= 1, f"split-K: unit {u} (tile {tile}, split {split}) has an empty k range")
        ranges.setdefault(tile, []).append((kt0, kt0 + kn, split))
    need(bool((seen_units == 1).all()), f"split-K: grid {grid} does not run every one of the "
         f"{tiles * n} work units exactly once")
    for tile, rs in ranges.items():
        rs.sort()
        need([s for _, _, s in rs] == list(range(n)), f"split-K: tile {tile} has splits "
             f"{[s for _, _, s in rs]}, not 0..{n - 1}")
        need(rs[0][0] == 0 and rs[-1][1] == kt and all(a[1] == b[0] for a, b in zip(rs, rs[1:])),
             f"split-K: tile {tile}'s k ranges {[(a, b) for a, b, _ in rs]} do not partition "
             f"the {kt} k tiles")
    # counter slots: one per (tile, warpgroup), inside the workspace the host zeroes
    slots = np.array([[_eval(proto.c_counter(consumers), tile=tl, cg=cg)
                       for cg in range(consumers)] for tl in range(tiles)])
    size = counter_slots(tiles, consumers)
    need(len(set(slots.ravel().tolist())) == slots.size, "split-K: two (tile, warpgroup) pairs "
         "share an arrival counter")
    need(int(slots.min()) >= 0 and int(slots.max()) < size, f"split-K: counter slots "
         f"{int(slots.min())}..{int(slots.max())} outside the {size}-int workspace")
    # partial addresses of every (split, tile, warpgroup, thread, register pair)
    rl, cl = _pair_starts(dtype, bn)
    written = []
    for tile in range(tiles):
        m0, n0 = tile_origin(tile, grid_m, grid_n, group_m, bm, bn)
        for cg in range(consumers):
            r = m0 + cg * 64 + rl
            col = n0 + cl
            for c2 in (col, col + 1):
                keep = (r < M) & (c2 < N)
                if not keep.any():
                    continue
                for s in range(n):   # the reducer prints the same offset for split s
                    base = _eval(proto.partial, split=s, M=M, N=N, r=r[keep], col=col[keep])
                    written.append(base + (c2[keep] - col[keep]))
    allw = np.concatenate(written) if written else np.zeros(0, dtype=np.int64)
    need(allw.size == n * M * N, f"split-K: {allw.size} partial elements written, "
         f"{n * M * N} expected ({n} splits x {M} x {N})")
    need(allw.size == 0 or (int(allw.min()) >= 0 and int(allw.max()) < n * M * N),
         f"split-K: partial offsets {int(allw.min())}..{int(allw.max())} outside the "
         f"{n} x {M} x {N} workspace")
    need(allw.size == 0 or bool((np.bincount(allw, minlength=allw.size) == 1).all()),
         "split-K: two (split, tile, warpgroup) partial stores overlap")
    arrivals = {int(s): 0 for s in slots.ravel()}
    for tile in range(tiles):
        for cg in range(consumers):
            arrivals[int(slots[tile, cg])] += n
    orders = sum(check_arrival_protocol(proto, n, a) for a in set(arrivals.values()))
    return {"units": tiles * n, "partials": int(allw.size), "slots": size, "orders": orders}


# problems the plan proves the protocol on: edges in M and N (a tile - 1 / + 3 rows, odd N,
# one element), several tiles, uneven k ranges, splits 1, 2, 3, 5 and 7, grids smaller than
# and larger than the work units (the addressing does not depend on the grid)
def _problems(bm: int, bn: int):
    """(M, N, K, splits, grid) of the proof set."""
    return [(1, 8, 64, 1, 1), (1, 8, 64 * 5, 5, 3), (bm + 3, bn - 6, 64 * 7, 3, 132),
            (2 * bm, 2 * bn + 1, 128, 2, 1), (bm - 1, 3 * bn, 64 * 20, 7, 132),
            (2 * bm, 2 * bn + 1, 64 * 9, 5, 3)]


def prove_inline_reduce(dtype: str, bm: int, bn: int, group_m: int = 8,
                        proto: InlineReduceProtocol = PROTOCOL) -> Dict[str, int]:
    """:func:`check_inline_reduce` on every problem of the plan's set; the totals."""
    tot: Dict[str, int] = {}
    for M, N, K, splits, grid in _problems(bm, bn):
        for k, v in check_inline_reduce(proto, dtype, bm, bn, M, N, K, splits, grid,
                                        group_m=group_m).items():
            tot[k] = tot.get(k, 0) + v
    return tot


def printed_protocol_lines(proto: InlineReduceProtocol, consumers: int) -> Tuple[str, ...]:
    """The lines of the protocol the source must contain (what was proved is what runs)."""
    return (f"const int slot = {proto.c_counter(consumers)};", f"const int last = {proto.last};",
            f"C + {proto.partial};")
