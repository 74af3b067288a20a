#!/usr/bin/env python3
"""Layout-algebra micro-benchmark: layoutalg against pycute and tensor-layouts.

For each operation (composition, logical_divide, logical_product, complement, coalesce,
right_inverse) it generates ``--rounds x --n`` *distinct* random inputs that every library
accepts (admissible by construction, and checked: all three must agree on the result's shape and
values before anything is timed).  Each library gets its own objects, parsed from the same
(shape, stride) tuples outside the timed region; every object is used in exactly one timed call,
so no per-object cache (layoutalg's flattened modes, tensor-layouts' cosize) is ever hit twice.
A round times one pass of each library over its N inputs (library order rotates per round); the
table reports the median over rounds in microseconds per call and the speedup of layoutalg over
the faster peer.  Calls are timed with ``time.process_time`` (CPU time of this process), which
other jobs on a shared machine disturb far less than wall-clock time.

    python3 benchmarks/algebra.py                 # defaults: --n 400 --rounds 7 --seed 2026
    python3 benchmarks/algebra.py --quick         # smaller, for a smoke run

Peers: ``pip install nvidia-cutlass`` provides ``pycute`` (or use a copy of the wheel's pycute
directory on PYTHONPATH); ``pip install tensor-layouts`` provides ``tensor_layouts``.  A missing
peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import layoutalg as la  # noqa: E402

try:  # pragma: no cover - depends on the environment
    import pycute as pc
except ImportError:  # pragma: no cover
    pc = None
try:  # pragma: no cover
    import tensor_layouts as tl
except ImportError:  # pragma: no cover
    tl = None

Spec = Tuple[Any, Any]  # (shape, stride) as nested int tuples

# CPU time of this process: the dev box is shared, and wall-clock medians move with other jobs'
# load while per-process CPU time does not (perf_counter is used for the values() line).
CLOCK = time.process_time


# ---- input generation (pure tuples; each library builds its own objects) ------------------------

def _nest(rng: random.Random, flat: list) -> Any:
    """Group a flat list into a random tree of depth <= 2 (keeps the leaf order)."""
    if len(flat) == 1:
        return flat[0] if rng.random() < 0.7 else (flat[0],)
    out, i = [], 0
    while i < len(flat):
        k = rng.randint(1, min(3, len(flat) - i))
        grp = flat[i:i + k]
        out.append(grp[0] if k == 1 else tuple(grp))
        i += k
    return tuple(out) if len(out) > 1 else out[0]


def _rebuild(profile: Any, flat: list) -> Any:
    it = iter(flat)

    def go(p: Any) -> Any:
        return tuple(go(x) for x in p) if type(p) is tuple else next(it)
    return go(profile)


def _flatten(t: Any) -> list:
    return [y for x in t for y in _flatten(x)] if type(t) is tuple else [t]


EXTENTS = [2, 2, 2, 4, 4, 8, 3, 6, 16]


def _extents(rng: random.Random, lo: int, hi: int, budget: int) -> list:
    n = rng.randint(lo, hi)
    out, total = [], 1
    for _ in range(n):
        e = rng.choice(EXTENTS)
        if total * e > budget:
            break
        out.append(e)
        total *= e
    return out or [rng.choice(EXTENTS)]


def gen_layout(rng: random.Random, lo: int = 2, hi: int = 5, budget: int = 4096,
               gaps: bool = True, permute: bool = True) -> Spec:
    """Injective layout: flat modes in random order, each stride a multiple of the span below."""
    fs = _extents(rng, lo, hi, budget)
    order = list(range(len(fs)))
    if permute:
        rng.shuffle(order)
    fd = [0] * len(fs)
    span = 1
    for i in order:
        d = span * (rng.choice([1, 1, 2, 3]) if gaps else 1)
        fd[i] = d
        span = d * fs[i]
    prof = _nest(rng, list(range(len(fs))))
    return _rebuild(prof, fs), _rebuild(prof, fd)


def gen_admissible_rhs(rng: random.Random, a: Spec) -> Spec:
    """B = compact (x, n/x) with n and x prefix sizes of A's flat extents: admissible for A."""
    fs = _flatten(a[0])
    sizes, pre = [], 1
    for s in fs:
        sizes += [pre * g for g in range(1, s + 1) if s % g == 0]
        pre *= s
    sizes = sorted(set(sizes))
    n = rng.choice(sizes[len(sizes) // 3:])
    xs = [x for x in sizes if n % x == 0 and 1 < x < n]
    if not xs:
        return n, 1
    x = rng.choice(xs)
    return (x, n // x), (1, x)


def gen_cases(op: str, rng: random.Random, count: int) -> List[tuple]:
    """``count`` distinct argument tuples (of Specs / ints) for ``op``."""
    seen, out = set(), []
    while len(out) < count:
        if op in ("composition", "logical_divide"):
            a = gen_layout(rng)
            case: tuple = (a, gen_admissible_rhs(rng, a))
        elif op == "logical_product":
            case = (gen_layout(rng, 1, 3, 256, gaps=False), gen_layout(rng, 1, 3, 64, gaps=False))
        elif op == "complement":
            a = gen_layout(rng, 1, 4, 1024, gaps=True)
            case = (a, rng.choice([1, 2, 4]) * _span(a))
        elif op == "coalesce":
            case = (gen_layout(rng, 2, 6, 1 << 14, gaps=rng.random() < 0.5,
                               permute=rng.random() < 0.5),)
        elif op == "right_inverse":
            case = (gen_layout(rng, 2, 5, 4096, gaps=False),)
        elif op == "construct":
            case = (gen_layout(rng, 2, 6, 1 << 14, gaps=rng.random() < 0.5),)
        else:
            raise KeyError(op)
        key = repr(case)
        if key not in seen:
            seen.add(key)
            out.append(case)
    return out


def _span(a: Spec) -> int:
    fs, fd = _flatten(a[0]), _flatten(a[1])
    return 1 + sum((s - 1) * d for s, d in zip(fs, fd))


# ---- library adapters --------------------------------------------------------------------------

class Lib:
    def __init__(self, name: str, version: str, make: Callable[[Spec], Any],
                 ops: Dict[str, Callable], values: Callable[[Any], Tuple[str, list]]):
        self.name, self.version, self.make, self.ops, self.values = name, version, make, ops, values

    def build(self, op: str, case: tuple) -> tuple:
        if op == "construct":
            return case  # the timed call builds the object from the (shape, stride) tuples
        if op == "complement":
            return (self.make(case[0]), case[1])
        return tuple(self.make(x) for x in case)


def _fmt(t: Any) -> str:
    return "(" + ",".join(_fmt(x) for x in t) + ")" if isinstance(t, tuple) else str(t)


def _eval(shape: Any, stride: Any, n: int) -> list:
    fs, fd = _flatten(shape), _flatten(stride)
    out = []
    for i in range(n):
        r, x = 0, i
        for k in range(len(fs) - 1):
            r += (x % fs[k]) * fd[k]
            x //= fs[k]
        out.append(r + x * fd[-1])
    return out


def _size(shape: Any) -> int:
    p = 1
    for x in _flatten(shape):
        p *= x
    return p


def _canon(shape: Any, stride: Any) -> Tuple[str, list]:
    shape = tuple(shape) if isinstance(shape, list) else shape
    return _fmt(shape), _eval(shape, stride, _size(shape))


def make_libs() -> List[Lib]:
    libs = [Lib("layoutalg", la.__version__, lambda s: la.Layout(s[0], s[1]), {
        "composition": la.composition, "logical_divide": la.logical_divide,
        "logical_product": la.logical_product, "complement": la.complement,
        "coalesce": la.coalesce, "right_inverse": la.right_inverse,
        "construct": lambda s: la.Layout(s[0], s[1]),
    }, lambda L: _canon(L.shape, L.stride))]
    if pc is not None:
        from importlib import metadata
        try:
            v = metadata.version("nvidia-cutlass")
        except Exception:  # pragma: no cover
            v = "unknown (pycute from a wheel copy)"
        libs.append(Lib("pycute", f"nvidia-cutlass {v}", lambda s: pc.Layout(s[0], s[1]), {
            "composition": pc.composition, "logical_divide": pc.logical_divide,
            "logical_product": pc.logical_product, "complement": pc.complement,
            "coalesce": pc.coalesce, "right_inverse": pc.right_inverse,
            "construct": lambda s: pc.Layout(s[0], s[1]),
        }, lambda L: _canon(L.shape, L.stride)))
    if tl is not None:
        from importlib import metadata
        libs.append(Lib("tensor-layouts", metadata.version("tensor-layouts"),
                        lambda s: tl.Layout(s[0], s[1]), {
                            "composition": tl.compose, "logical_divide": tl.logical_divide,
                            "logical_product": tl.logical_product, "complement": tl.complement,
                            "coalesce": tl.coalesce, "right_inverse": tl.right_inverse,
                            "construct": lambda s: tl.Layout(s[0], s[1]),
                        }, lambda L: _canon(L.shape, L.stride)))
    return libs


OPS = ["composition", "logical_divide", "logical_product", "complement", "coalesce",
       "right_inverse", "construct"]
# "construct" (Layout(shape, stride) from tuples) is informational: layoutalg validates its
# input there and records the flat modes the algebra uses, which the timed operations rely on.


def check_agreement(libs: List[Lib], op: str, cases: List[tuple]) -> None:
    """Every library must give the same shape and values: we time the same computation."""
    for case in cases:
        ref: Optional[Tuple[str, list]] = None
        for lib in libs:
            got = lib.values(lib.ops[op](*lib.build(op, case)))
            if ref is None:
                ref = got
            elif got != ref:
                raise SystemExit(f"{op}{case}: {lib.name} gives {got[0]} {got[1][:8]}..., "
                                 f"{libs[0].name} gives {ref[0]} {ref[1][:8]}...")


def time_round(lib: Lib, op: str, built: List[tuple]) -> float:
    fn = lib.ops[op]
    gc.disable()
    t0 = CLOCK()
    for args in built:
        fn(*args)
    t1 = CLOCK()
    gc.enable()
    return (t1 - t0) / len(built) * 1e6


def values_benchmark() -> str:
    """Time Layout.values() on 2^20 elements (reported, not asserted)."""
    L = la.Layout(((4, 8), (8, 4), (16, 64)), ((1, 32), (4, 1024), (8192, 256)))
    assert L.size() == 1 << 20
    times = []
    for _ in range(7):
        M = la.Layout(L.shape, L.stride)  # fresh object: no cached flattening
        t0 = time.perf_counter()
        M.values()
        times.append(time.perf_counter() - t0)
    return (f"Layout.values() on 2^20 elements {L}: median of 7 = "
            f"{statistics.median(times) * 1e3:.1f} ms (best {min(times) * 1e3:.1f} ms, "
            f"worst {max(times) * 1e3:.1f} ms; target < 50 ms)")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=400, help="distinct inputs per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="--n 60 --rounds 3")
    ap.add_argument("--ops", default=",".join(OPS))
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.rounds = 60, 3
    libs = make_libs()
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs; n={args.n} distinct inputs x {args.rounds} rounds per op")
    for lib in libs:
        print(f"  {lib.name}: {lib.version}")
    missing = [n for n, m in (("pycute", pc), ("tensor-layouts", tl)) if m is None]
    if missing:
        print(f"  (not installed, skipped: {', '.join(missing)})")
    rng = random.Random(args.seed)
    rows = []
    for op in args.ops.split(","):
        cases = gen_cases(op, rng, args.n * args.rounds)
        check_agreement(libs, op, cases[: min(200, len(cases))])
        per_lib: Dict[str, List[float]] = {lib.name: [] for lib in libs}
        for r in range(args.rounds):
            chunk = cases[r * args.n:(r + 1) * args.n]
            order = libs[r % len(libs):] + libs[:r % len(libs)]
            for lib in order:
                built = [lib.build(op, c) for c in chunk]  # outside the timed region
                per_lib[lib.name].append(time_round(lib, op, built))
        med = {k: statistics.median(v) for k, v in per_lib.items()}
        rows.append((op, med))
    names = [lib.name for lib in libs]
    head = f"| {'operation':<16} | " + " | ".join(f"{n + ' (µs)':>20}" for n in names)
    head += " | speedup vs faster peer |"
    print()
    print(head)
    print("|" + "-" * 18 + "|" + "|".join("-" * 22 for _ in names) + "|" + "-" * 24 + "|")
    for op, med in rows:
        ours = med["layoutalg"]
        peers = [med[n] for n in names if n != "layoutalg"]
        ratio = f"{min(peers) / ours:.2f}x" if peers else "n/a"
        cells = " | ".join(f"{med[n]:>20.2f}" for n in names)
        print(f"| {op:<16} | {cells} | {ratio:>22} |")
    print()
    print(values_benchmark())
    return 0


if __name__ == "__main__":
    sys.exit(main())
