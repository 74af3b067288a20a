"""Our Python's share of a steady-state ``dispatch.gemm`` call, without a GPU (issue 20, session
12): the pretend H100 of ``tests/_fake_cuda.py`` (tensors that say they are on ``cuda:0``, modules
never compiled), its ``cuLaunchKernel`` recorder replaced by a no-op, so what is timed is the
dispatch, the bound call, the tensor maps and the prepared launch, in Python.

    python3 benchmarks/host_fake.py [--calls 2000] [--repeat 7]

Prints one JSON line: microseconds per call (best of ``--repeat`` loops of ``--calls``) for five
suite shapes.  The pretend tensors' shape / stride queries are Python, slower than torch's, so
the figures rank host-path changes; they are not the H100 host's times
(``benchmarks/gpu_gemm_wall.py`` measures those).  Run a baseline tree's copy of this script
(or this one with ``PYTHONPATH`` at it) alternately with this one: a busy CPU moves them by ~1-2 us.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(4000, 3000, 1000, "float16"), (128, 4096, 14336, "bfloat16"),
          (2048, 2048, 2048, "bfloat16"), (16, 4096, 4096, "bfloat16"),
          (1024, 1024, 16384, "bfloat16")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    # benchmarks/visualize.py (the script's folder, first on sys.path) would shadow the package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    import pytest
    import torch
    import _fake_cuda as fc
    from kernels.nvidia import dispatch
    mp = pytest.MonkeyPatch()
    fake = fc.install(mp)
    fake.cuLaunchKernel = lambda *a: (0,)      # our path, not the recorder's decoding
    res = {}
    try:
        for M, N, K, dt in SHAPES:
            dtype = getattr(torch, dt)
            a, b, c = (fc.FakeCudaTensor(s, dtype) for s in ((M, K), (K, N), (M, N)))
            for _ in range(200):
                dispatch.gemm(a, b, c)
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                for _ in range(args.calls):
                    dispatch.gemm(a, b, c)
                best = min(best, (time.perf_counter() - t) / args.calls)
            res[f"{M}x{N}x{K}"] = round(best * 1e6, 2)
    finally:
        fc.clear_caches()
        mp.undo()
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
