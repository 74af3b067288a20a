"""``select_gemm(problem, target) -> GemmChoice``: the one GEMM selection entry for both
vendors (issue 20 item 2).  The types are :mod:`kernels.selection`'s; NVIDIA's rule is
:func:`kernels.nvidia.gemm_select.select_nvidia_gemm`, AMD's
:func:`kernels.amd.gemm_select.select_gemm` (the same choice as ``layoutalg compile gemm``
without ``--block``).

    python -m kernels.select 16,4096,4096 --dtype bf16 [--target h100|h200|mi300x] [--sms N]

prints the choice and its reason (no GPU needed: the target is named).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import List, Optional

from .errors import LaunchError
from .selection import H100, H200, MI300X, GemmChoice, GemmProblem, Target, cdiv

__all__ = ["select_gemm", "main"]

TARGETS = {"h100": H100, "h200": H200, "mi300x": MI300X}


def select_gemm(problem: GemmProblem, target: Target, atom: str = "auto") -> GemmChoice:
    """The kernel that runs ``problem`` on ``target``, with the reason."""
    if target.vendor == "nvidia":
        from .nvidia.gemm_select import select_nvidia_gemm
        return select_nvidia_gemm(problem, target, atom)
    if target.vendor == "amd":
        # the AMD rule: kernels.amd.gemm_select (tile, waves, LDS stages, schedule against the
        # 304-CU quantisation, by the static model's closed form), what `compile gemm` uses
        from .amd.gemm_select import select_gemm as select_amd_gemm
        ch = select_amd_gemm(problem.m, problem.n, problem.k, dtype=problem.dtype,
                             b_major="row" if problem.b_major == "n" else "col",
                             arch=target.arch)
        cfg = ch.config
        tiles = cdiv(problem.m, cfg.block_m) * cdiv(problem.n, cfg.block_n)
        return GemmChoice("amd", cfg, 1, tiles, f"{target.arch}: {ch.reason}")
    raise LaunchError(f"target vendor {target.vendor!r}: 'nvidia' or 'amd'")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels.select", description=__doc__.split("\n")[0])
    ap.add_argument("mnk", help="M,N,K")
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    ap.add_argument("--b-major", default="n", choices=("n", "k"))
    ap.add_argument("--vec", type=int, default=8, help="widest copy the rows allow (elements)")
    ap.add_argument("--target", default="h100", choices=sorted(TARGETS))
    ap.add_argument("--sms", type=int, help="override the target's SM/CU count")
    ns = ap.parse_args(argv)
    try:
        m, n, k = (int(x) for x in ns.mnk.split(","))
        t = TARGETS[ns.target] if ns.sms is None else replace(TARGETS[ns.target], sms=ns.sms)
        print(select_gemm(GemmProblem(m, n, k, ns.dtype, ns.b_major, ns.vec), t))
    except (ValueError, LaunchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
