"""Benchmark of layoutalg.verify (issue 4).

1. Agreement with tensor-layouts' ``bank_conflicts`` (PyPI 0.3.2) where the two models
   coincide: ds_read_b32 (2 x 32 lanes), ds_read_b64 (4 x 16), ds_write_b128 (8 x 8
   contiguous) - tensor-layouts' ``per_group_bank_conflicts`` with the same group size.
2. Where the phase model changes the verdict: ds_read_b128 (8 non-contiguous groups) against
   tensor-layouts with contiguous groups of 8 and with one flat 64-lane group.
3. Time to verify every LDS access of a 256x256x64 f16 GEMM configuration (target < 1 s).
4. Time of one F2 swizzle proof (target < 10 ms).

Run from the repository root:  python3 benchmarks/verify.py  [--cases N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import layoutalg as la  # noqa: E402
from layoutalg.verify import (bank_conflicts, coverage, lane_correctness,  # noqa: E402
                              prove_banks_f2, vector_width)

SW333 = la.Swizzle(3, 3, 3)


# ---- random accesses -----------------------------------------------------------------------------

def random_access(rng: np.random.Generator, vec: int):
    """A (64 lanes, vec values) access: random lane strides (powers of two, padded rows or odd
    multiples of the vector), optionally behind a random swizzle that keeps vectors whole."""
    vb = vec.bit_length() - 1
    strides = []
    for _ in range(6):
        kind = rng.integers(0, 3)
        if kind == 0:
            strides.append(int(vec << rng.integers(0, 7)))
        elif kind == 1:
            strides.append(int(vec * rng.integers(1, 40)))
        else:
            strides.append(int((64 << rng.integers(0, 3)) + vec * rng.integers(0, 3)))
    inner = ((2,) * 6, vec), (tuple(strides), 1)
    sw = None
    if rng.random() < 0.4:
        b = int(rng.integers(1, 4))
        sw = (b, vb + int(rng.integers(0, 2)), int(rng.integers(b, 6)))
    return inner, sw


def ours(inner, sw, instr, eb):
    L = la.Layout(*inner)
    if sw is not None:
        L = la.ComposedLayout(la.Swizzle(*sw), 0, L)
    return bank_conflicts(L, instruction=instr, elem_bytes=eb).max_ways


def theirs(inner, sw, eb, group):
    import tensor_layouts as tl
    from tensor_layouts.analysis import per_group_bank_conflicts
    L = tl.Layout(*inner)
    if sw is not None:
        L = tl.compose(tl.Swizzle(*sw), L)
    return per_group_bank_conflicts(L, element_bytes=eb, group_size=group)["worst_max_ways"]


def agreement(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for instr, group in (("ds_read_b32", 32), ("ds_read_b64", 16), ("ds_write_b128", 8)):
        agree = total = 0
        mismatch = None
        for _ in range(n):
            eb = int(rng.choice([1, 2, 4]))
            ab = {"ds_read_b32": 4, "ds_read_b64": 8}.get(instr, 16)
            if eb > ab:
                eb = 2
            inner, sw = random_access(rng, ab // eb)
            a, b = ours(inner, sw, instr, eb), theirs(inner, sw, eb, group)
            total += 1
            agree += a == b
            if a != b and mismatch is None:
                mismatch = (inner, sw, eb, a, b)
        out[instr] = {"cases": total, "agree": agree, "first_mismatch": repr(mismatch)}
    return out


def f2_access(rng: np.random.Generator, vec: int):
    """A random F2 access: the 6 lane bits go to distinct 16-byte-chunk bits 0..8 (or are
    replicated), optionally behind a swizzle: the family where phase models differ most."""
    bits = rng.permutation(9)[:6]
    strides = tuple(int(vec << int(b)) if rng.random() > 0.1 else 0 for b in bits)
    sw = None
    if rng.random() < 0.5:
        b = int(rng.integers(1, 4))
        sw = (b, vec.bit_length() - 1, int(rng.integers(b, 7)))
    return ((2,) * 6, vec), (strides, 1), sw


def verdict_changes(n: int, seed: int = 1) -> dict:
    """ds_read_b128 under the real phases vs tensor-layouts' contiguous-8 and flat-64 groups."""
    rng = np.random.default_rng(seed)
    free = 0
    diff = {"ours free, contiguous-8 conflicts": 0, "ours conflicts, contiguous-8 free": 0,
            "ours free, flat-64 conflicts": 0, "ours conflicts, flat-64 free": 0}
    for _ in range(n):
        shp, strd, sw = f2_access(rng, 8)
        inner = (shp, strd)
        a = ours(inner, sw, "ds_read_b128", 2) == 1
        t8 = theirs(inner, sw, 2, 8) == 1
        t64 = theirs(inner, sw, 2, 64) == 1
        free += a
        diff["ours free, contiguous-8 conflicts"] += a and not t8
        diff["ours conflicts, contiguous-8 free"] += t8 and not a
        diff["ours free, flat-64 conflicts"] += a and not t64
        diff["ours conflicts, flat-64 free"] += t64 and not a
    # the two hand-built witnesses (tests/test_verify_banks.py)
    acc = ((((2,) * 6), 8), ((8, 16, 64, 128, 32, 256), 1))
    wit = {"read_b128 free, contiguous-8 says": theirs(acc, None, 2, 8),
           "ours (ds_read_b128)": ours(acc, None, "ds_read_b128", 2)}
    tile = la.ComposedLayout(SW333, 0, la.Layout((64, 64), (64, 1)))
    read = la.Layout((64, 8), (1, 64))
    from tensor_layouts import Layout as TL, Swizzle as TS, compose
    tl_read = compose(TS(3, 3, 3), TL((64, 8), (64, 1)))
    wit["64-row tile Sw<3,3,3>: ours"] = bank_conflicts(read, lds=tile).max_ways
    from tensor_layouts.analysis import bank_conflicts as tl_bc
    wit["64-row tile Sw<3,3,3>: tensor-layouts flat 64"] = tl_bc(tl_read, element_bytes=2,
                                                                 group_size=64)["max_ways"]
    return {"cases": n, "conflict_free_under_phases": free, "verdict_changes": diff,
            "witnesses": wit}


# ---- the 256x256x64 GEMM -------------------------------------------------------------------------

def gemm_accesses():
    """Every LDS access of a 256x256x64 f16 GEMM: 256 threads (2 x 2 waves of 128 x 128),
    A and B tiles (256 rows x 64 k, K contiguous, 128-byte rows) behind Swizzle<3,3,3>, two
    pipeline stages.  Index convention: column-major over (row, k, stage)."""
    lds = la.ComposedLayout(SW333, 0, la.Layout((256, 64, 2), (64, 1, 256 * 64)))
    # global -> LDS: thread t stores row t//8 (+32 i), 16-byte chunk t%8
    write = la.Layout(((8, 32), 8, 8, 2), ((256 * 8, 1), 256, 32, 256 * 64))
    # LDS -> registers, ds_read_b128 (kpack 8 = two 32x32x8 MFMA k steps): lane l reads row
    # l%32 (+32 m-repeat, +128 wave), k chunk l//32 (+2 per k step); the other wave index
    # does not move the A rows (stride 0)
    read_a = la.Layout((((32, 2), (2, 2)), 8, 4, 4, 2),
                       (((1, 256 * 8), (128, 0)), 256, 32, 256 * 16, 256 * 64))
    read_b = la.Layout((((32, 2), (2, 2)), 8, 4, 4, 2),
                       (((1, 256 * 8), (0, 128)), 256, 32, 256 * 16, 256 * 64))
    # the exact MFMA order with ds_read_b64: lane l reads row l%32, k 4*(l//32)..+3
    read_a64 = la.Layout((((32, 2), (2, 2)), 4, 4, 8, 2),
                         (((1, 256 * 4), (128, 0)), 256, 32, 256 * 8, 256 * 64))
    return lds, write, read_a, read_b, read_a64


def verify_gemm():
    lds, write, read_a, read_b, read_a64 = gemm_accesses()
    res = {
        "A write (ds_write_b128)": bank_conflicts(write, lds=lds, instruction="ds_write_b128"),
        "B write (ds_write_b128)": bank_conflicts(write, lds=lds, instruction="ds_write_b128"),
        "A read (ds_read_b128)": bank_conflicts(read_a, lds=lds, instruction="ds_read_b128"),
        "B read (ds_read_b128)": bank_conflicts(read_b, lds=lds, instruction="ds_read_b128"),
        "A read (ds_read_b64, exact MFMA k order)": bank_conflicts(read_a64, lds=lds,
                                                                   instruction="ds_read_b64"),
        "write coverage": coverage(write, (256, 64, 2)),
        "write vector width": vector_width(write, lds=lds, require_bytes=16),
        "read vector width": vector_width(read_a, lds=lds, require_bytes=16),
    }
    try:
        import mfma_specs
        spec = mfma_specs.lookup("gfx942", "v_mfma_f32_32x32x8_f16")
        part = la.Layout(((32, 2), 4, 8), ((1, 256 * 4), 256, 256 * 8))
        res["lane correctness A (32x32x8, 8 k steps)"] = lane_correctness(
            spec, "A", part, lds=la.ComposedLayout(SW333, 0, la.Layout((256, 64), (64, 1))),
            steps=8)
    except ImportError:  # pragma: no cover
        pass
    return res


def timed(fn, repeat: int):
    fn()                                   # warm-up (imports, caches)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, statistics.median(ts), min(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=300, help="random cases per instruction")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args()
    report = {}
    try:
        import tensor_layouts  # noqa: F401
        report["agreement"] = agreement(args.cases)
        report["verdict_changes"] = verdict_changes(args.cases)
    except ImportError:
        report["agreement"] = "tensor-layouts not installed (pip install tensor-layouts==0.3.2)"
    res, med, best = timed(verify_gemm, 5)
    report["gemm_256x256x64"] = {
        "median_s": round(med, 4), "min_s": round(best, 4),
        "issues": sum(getattr(r, "n_issues", 0) for r in res.values()),
        "verdicts": {k: (r.summary() + f" [{r.method}]") for k, r in res.items()}}
    tile = la.ComposedLayout(SW333, 0, la.Layout((64, 64), (64, 1)))
    read = la.Layout((64, 8), (1, 64))
    from mfma_specs.arch import lds_model
    m = lds_model("gfx942", "ds_read_b128")
    proof, pmed, pbest = timed(lambda: prove_banks_f2(read, tile, m, 2, 64, 8, 8), 200)
    full, fmed, fbest = timed(lambda: bank_conflicts(read, lds=tile, model=m), 50)
    report["f2_proof_64row_sw333"] = {
        "prove_banks_f2_median_ms": round(pmed * 1e3, 3), "min_ms": round(pbest * 1e3, 3),
        "bank_conflicts_with_crosscheck_median_ms": round(fmed * 1e3, 3),
        "ways": proof.ways, "method": full.method}
    print(json.dumps(report, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
