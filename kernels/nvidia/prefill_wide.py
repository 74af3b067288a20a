"""The ``wide`` (64-bit) form of the IR prefills (issue 20 item 1): the mma.sync prefill
(:mod:`.flash_ir`), the head_dim 64 wgmma prefill (:mod:`.wgmma_flash_ir`) and the
warp-specialised d128 prefill (:mod:`.wgmma_ws_ir`) for tensors their 32-bit form cannot
launch: an element offset or stride reaching 2^31, or batch x heads past grid y (65535).

The one mechanism of the one-pass decode's wide form (:mod:`.decode_onepass_ir`), applied to
the built kernel (:func:`widen_prefill`), so every prefill family gets it the same way and the
32-bit forms' printed sources stay byte-identical:

* the batch and head strides (``*_sb``, ``*_sh``) are ``long long``: every global offset, a
  sum with their products, is 64-bit C arithmetic (the template's strides are ``long long``
  too); the row strides and every other index stay ``int`` (:func:`is_stride`: a row times
  its stride passes 2^31 only where one batch alone does, which the launch proof refuses);
* the grid is the template's (query blocks, heads, batch): ``h`` and ``bat`` are ``blockIdx.y``
  and ``blockIdx.z`` instead of lets from ``block_bh`` (heads and batch each up to 65535,
  the template's limits);
* the spec's stride symbols range over [0, 2^63) and its instances are the 32-bit form's on
  the 3-D grid plus launches whose offsets pass 2^31 (batches, and heads, 2^31 to 2^32
  elements apart): the verifier's ``index_ranges`` (the C
  types of :mod:`kernels.verify.cexpr`) proves there that nothing is narrowed to ``int``, and
  the launcher proves each launch's own values again (:func:`prove_launch`), so a launch past
  the grid-y limit or at strides the instances do not reach is checked before it runs.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, List, Sequence, Tuple

from ..errors import LaunchError
from ..ir.attention import ScalarParam
from ..ir.core import Let
from ..runtime.launch_cache import BoundedCache

__all__ = ["WIDE_GRID", "MAX_GRID_X", "MAX_GRID_YZ", "is_stride", "widen_prefill", "wide_instances", "past_2_31_instances",
           "wide_grid", "launch_values", "launch_proved", "prove_launch", "scalar_signature"]

#: the wide form's grid symbols: (query block, head, batch) on blockIdx.x / y / z
WIDE_GRID = ("block_q", "h", "bat")

#: grid y and z (heads, batch) are below 2^16, grid x below 2^31
MAX_GRID_YZ = 65535
MAX_GRID_X = 2 ** 31 - 1


def is_stride(name: str) -> bool:
    """Is the scalar ``name`` a batch or head stride (``q_sb``, ``k_sh``, ..): ``long long``
    in the wide form.  The row strides (``*_ss``) stay ``int``: a row times its stride stays
    inside one batch's (S, H, D) slice, below 2^31 unless that slice alone passes 2^31 elements
    (:func:`prove_launch` refuses such a launch; the template runs it).  With them ``long
    long`` too the d64 wgmma kernel needs 176-185 registers (two blocks per SM, or 308 bytes
    of spills under its three-block bound) against 168 (NVRTC 13.5, sm_90a)."""
    return name[-3:] in ("_sb", "_sh")


def _drop_block_lets(body: List[Any]) -> Tuple[List[Any], int]:
    """``body`` without the top-level lets of ``bat`` and ``h`` from ``block_bh``
    (:func:`~.flash_ir.query_block_lets`): the wide grid binds them."""
    out, dropped = [], 0
    for s in body:
        if isinstance(s, Let) and s.name in ("bat", "h") and \
                {str(x) for x in s.expr.free_symbols} >= {"block_bh"}:
            dropped += 1
            continue
        out.append(s)
    return out, dropped


def widen_prefill(k: Any) -> Any:
    """The wide form of the built IR prefill ``k`` (module docstring), a new kernel (``k``
    unchanged):
    stride scalars ``long long``, grid :data:`WIDE_GRID`, name suffixed ``_i64``, the spec's
    stride symbols 64-bit and its domain :func:`wide_instances` of the 32-bit form's.
    ``ValueError`` where ``k`` is not a (query block, batch x heads) prefill on instances."""
    from ..verify.spec import Domain, Symbol
    instances = k.spec.domain.instances
    if instances is None or k.meta.get("wide"):
        raise ValueError(f"{k.name}: not a 32-bit prefill verified on instances")
    if tuple(k.grid_symbols) != ("block_q", "block_bh"):
        raise ValueError(f"{k.name}: grid {tuple(k.grid_symbols)} is not a prefill's "
                         "(block_q, block_bh)")
    k = copy.copy(k)            # every attribute changed below is assigned anew
    body, dropped = _drop_block_lets(list(k.body))
    if dropped != 2:
        raise ValueError(f"{k.name}: {dropped} lets of bat / h from block_bh, want 2")
    k.body = body
    k.grid_symbols = WIDE_GRID
    k.scalars = [ScalarParam(p.name, "long long") if p.ctype == "int" and is_stride(p.name)
                 else p for p in k.scalars]
    k.name = f"{k.name}_i64"
    k.meta = dict(k.meta, wide=True)
    k.header = list(k.header) + [
        "wide form (kernels/nvidia/prefill_wide.py): long long strides (64-bit offsets), grid "
        "(query blocks, heads, batch)"]
    longs = {p.name for p in k.scalars if p.ctype == "long long"}
    syms = tuple(Symbol(s.name, s.lo, 2 ** 63 - 1) if s.name in longs else s
                 for s in k.spec.symbols)
    k.spec = dataclasses.replace(k.spec, name=k.name, symbols=syms,
                                 domain=Domain.on_instances(wide_instances(instances)))
    return k


def _grid3(inst: Any) -> Any:
    from ..verify.attention_gate import Instance
    v = inst.values
    return Instance(inst.name, v, (inst.grid[0], v["heads"], v["batch"]), inst.causal)


def past_2_31_instances(cfg: Any) -> List[Any]:
    """Two launches whose offsets pass 2^31 (every tensor's elements at distinct offsets,
    strides multiples of 64 elements): ``batch-past-2^31`` (B2 H2, GQA 2: each tensor's
    batches 2^31 to 2^32 + 2^31 elements apart) and ``head-past-2^31`` (B1 H4 over 2 kv heads:
    Q / O heads 2^31 + 2^10 apart, K / V heads 2^32 + 2^11 apart, K / V rows 2^20 apart)."""
    from ..verify.attention_gate import Instance
    bm, bn, D = cfg.bm, cfg.bn, cfg.head_dim
    sq, skv = bm + 9, 2 * bn + 5
    base = dict(seqlen_q=sq, seqlen_kv=skv, causal_off=0)
    a: Dict[str, int] = dict(base, batch=2, heads=2, kv_heads=1, group=2)
    for t, rows, heads, sb in (("q", sq, 2, 2 ** 31 + 512), ("k", skv, 1, 2 ** 32 + 1024),
                               ("v", skv, 1, 3 * 2 ** 31), ("o", sq, 2, 2 ** 31 + 256)):
        a.update({f"{t}_sb": sb, f"{t}_sh": rows * D, f"{t}_ss": D})
    b: Dict[str, int] = dict(base, batch=1, heads=4, kv_heads=2, group=2)
    for t in ("q", "o"):
        b.update({f"{t}_sb": 2 ** 34, f"{t}_sh": 2 ** 31 + 1024, f"{t}_ss": D})
    for t in ("k", "v"):
        b.update({f"{t}_sb": 2 ** 35, f"{t}_sh": 2 ** 32 + 2048, f"{t}_ss": 2 ** 20})
    gx = -(-sq // bm)
    return [Instance("batch-past-2^31", a, (gx, 2, 2), cfg.causal),
            Instance("head-past-2^31", b, (gx, 4, 1), cfg.causal)]


def wide_instances(instances: Callable[[Any], Sequence[Any]]) -> Callable[[Any], List[Any]]:
    """The wide form's domain: ``instances(k)`` (the 32-bit form's) on the (query blocks,
    heads, batch) grid, then :func:`past_2_31_instances`."""
    def make(k: Any) -> List[Any]:
        return [_grid3(i) for i in instances(k)] + past_2_31_instances(k.meta["cfg"])
    make.__qualname__ = f"wide_instances({getattr(instances, '__qualname__', instances)})"
    return make


# ---------------------------------------------------------------------------- launch

def wide_grid(name: str, q: Any, bm: int) -> Tuple[int, int, int]:
    """The wide form's grid for q (B, H, S, D): (query blocks, heads, batch);
    :class:`LaunchError` past the grid's limits (the template's too)."""
    B, H, S = (int(x) for x in q.shape[:3])
    grid = (-(-S // bm), H, B)
    if grid[0] > MAX_GRID_X or H > MAX_GRID_YZ or B > MAX_GRID_YZ:
        raise LaunchError(f"{name}: grid {grid} past CUDA's limits (x below 2^31, y and z "
                          "(heads, batch) at most 65535)")
    return grid


def scalar_signature(k: Any) -> Tuple[str, ...]:
    """The launch kinds of ``k``'s scalars in order: ``i64`` / ``i32`` / ``f32``."""
    kinds = {"long long": "i64", "int": "i32", "float": "f32"}
    return tuple(kinds[p.ctype] for p in k.scalars)


def launch_values(q: Any, k: Any, v: Any, out: Any) -> Dict[str, int]:
    """The prefills' runtime arguments at a launch, by the IR's names: sizes, and the strides
    of q, k, v and out (the contiguous output the launcher allocates where ``out`` is None)."""
    B, H, S, D = (int(x) for x in q.shape)
    Hk, Skv = int(k.shape[1]), int(k.shape[2])
    vals = dict(batch=B, heads=H, kv_heads=Hk, group=H // Hk, seqlen_q=S, seqlen_kv=Skv)
    o_st = tuple(out.stride()[:3]) if out is not None else (H * S * D, S * D, D)
    for n, st in (("q", q.stride()), ("k", k.stride()), ("v", v.stride()), ("o", o_st)):
        vals.update({f"{n}_sb": int(st[0]), f"{n}_sh": int(st[1]), f"{n}_ss": int(st[2])})
    return vals


def launch_proved(fa: Any, q: Any, k: Any, v: Any, out: Any) -> bool:
    """Does ``index_ranges`` hold for the wide kernel ``fa`` (``fa.ir``, ``fa.source``)
    at this launch's values and grid (:func:`launch_index_ranges`)?"""
    grid = (-(-int(q.shape[2]) // fa.cfg.bm), int(q.shape[1]), int(q.shape[0]))
    return launch_index_ranges(fa.ir, fa.source, launch_values(q, k, v, out), grid).holds


#: launch -> its index_ranges result (bounded: one entry per distinct launch)
_PROVED: BoundedCache = BoundedCache(256)


def launch_index_ranges(k: Any, source: str, values: Dict[str, int],
                        grid: Sequence[int]) -> Any:
    """The verifier's ``index_ranges`` of the printed kernel ``k`` at ONE launch (its runtime
    values and grid as the only instance; the warp-specialised kernel's role-aware reading,
    :func:`kernels.verify.printed_ws.verify_printed_ws`, else
    :func:`kernels.verify.printed.verify_printed`), remembered per launch."""
    from ..verify.attention_static import Instance
    key = (k.name, hash(source), tuple(sorted(values.items())), tuple(grid))
    hit = _PROVED.get(key)
    if hit is None:
        inst = Instance("launch", values, tuple(grid),
                        bool(getattr(k.meta["cfg"], "causal", False)))
        if str(k.meta.get("kind", "")).startswith("wgmma_ws"):
            from ..verify.printed_ws import verify_printed_ws
            res = verify_printed_ws(k, source, instances=[inst])
        else:
            from ..verify.printed import verify_printed
            res = verify_printed(k, source, instances=[inst])
        hit = _PROVED.put(key, res["index_ranges"])
    return hit


def prove_launch(k: Any, source: str, values: Dict[str, int], grid: Sequence[int]) -> None:
    """``index_ranges`` of the printed wide kernel at this launch's own argument values and
    grid (:func:`launch_index_ranges`): every printed ``int`` expression stays inside ``int``
    and every ``long long`` one inside 64 bits, or :class:`LaunchError` (nothing runs).  The
    instances prove the form; this proves the launch (past the grid-y limit, strides the
    instances do not reach)."""
    res = launch_index_ranges(k, source, values, grid)
    if not res.holds:
        raise LaunchError(f"{k.name}: the printed index arithmetic does not fit this launch: "
                          f"{res.counterexample}")
