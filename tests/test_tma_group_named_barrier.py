"""Named barriers across warpgroups (``bar.sync`` / ``bar.arrive`` of
:class:`kernels.ir.nvidia_tma.NamedBarrier` with ``threads`` > 128 or ``arrive``): the
warp-specialised prefill's ping-pong (the two consumers take turns to issue their wgmmas), on
the per-role phase model (kernels/verify/gate_tma.py) and the printed-text checks
(kernels/verify/printed_tma.py).

The vehicle is the IR TMA GEMM with two consumer warpgroups (bm=128) with the ping-pong
inserted around each k tile's wgmma issue, as the template prints it
(kernels/nvidia/wgmma_attention_ws.py): consumer ``cg`` syncs on ``3 + cg`` before issuing and
arrives on ``4 - cg`` after (ids 1 and 2 are the GEMM's per-warpgroup epilogue barriers);
consumer 1 opens with an arrive on 3 and skips its last arrive.  Each planted bug is refused
under the named check."""

from __future__ import annotations

import re

import pytest
import sympy

from kernels.ir.core import If, Loop, sym
from kernels.ir.nvidia_tma import NamedBarrier, RoleBranch
from kernels.ir.nvidia_wgmma import WgmmaCommit, WgmmaFence
from kernels.nvidia.tma import NAMED_ARRIVE_HELPER
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir, tma_ir_source
from kernels.verify.verifier import verify

CFG = TmaGemmConfig(bm=128, bn=128)
CG, KK, IU = sym("cg"), sym("kk"), sym("iu")


def _pingpong(k, sync_id=3 + CG, arrive_id=4 - CG, threads=256, arrive_threads=256,
              opening=True, skip_last=True, open_id=3, local_first=False):
    """Insert the ping-pong into ``k``'s consumer role; the keywords plant the bugs."""
    cons = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")
    units = next(s for s in cons.body if isinstance(s, Loop) and s.var == "iu")
    kl = next(s for s in units.body if isinstance(s, Loop) and s.var == "kk")
    i0 = next(i for i, s in enumerate(kl.body) if isinstance(s, WgmmaFence))
    kl.body.insert(i0, NamedBarrier(sync_id, threads))
    i1 = next(i for i, s in enumerate(kl.body) if isinstance(s, WgmmaCommit))
    last = sympy.And(sympy.Eq(KK, kl.stop - 1), sympy.Eq(IU, units.stop - 1))
    hand_over = [NamedBarrier(arrive_id, arrive_threads, arrive=True)]
    kl.body.insert(i1 + 1, If(sympy.Or(sympy.Eq(CG, 0), sympy.Not(last)), hand_over)
                   if skip_last else hand_over[0])
    if local_first:     # a warpgroup's own bar.sync 1 + cg, 128 before the loops
        cons.body.insert(cons.body.index(units), NamedBarrier(1 + CG, 128))
    if opening:
        cons.body.insert(cons.body.index(units),
                         If(sympy.Eq(CG, 1), [NamedBarrier(open_id, 256, arrive=True)]))
    return k


def _verify(k, src=None):
    return verify(k, arch="sm_90a", source=tma_ir_source(k) if src is None else src)


def test_pingpong_is_verified_and_printed():
    k = _pingpong(build_tma_gemm_ir(CFG))
    src = tma_ir_source(k)
    r = _verify(k, src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert src.count(NAMED_ARRIVE_HELPER) == 1
    assert "lg_named_bar(cg + 3, 256);" in src and "lg_named_arrive(4 - cg, 256);" in src
    assert "lg_named_arrive(3, 256);" in src


def test_kernels_without_arrive_print_no_arrive_helper():
    assert "lg_named_arrive" not in tma_ir_source(build_tma_gemm_ir(CFG))


# (case, IR bug keywords or None, text mutation or None, the check that refuses it, message)
CASES = [
    ("arrive-on-own-id", dict(arrive_id=3 + CG), None, "mbarrier_protocol", "twice in phase"),
    ("arrive-count-128", dict(arrive_threads=128), None, "mbarrier_protocol",
     "counts 256 threads elsewhere"),
    ("count-above-the-block", dict(threads=512, arrive_threads=512), None,
     "mbarrier_protocol", "whole warpgroups up to the block's 384 threads"),
    ("no-opening-arrive", dict(opening=False), None, "mbarrier_protocol", "deadlock"),
    ("last-arrive-kept", dict(skip_last=False), None, "mbarrier_protocol", "part-way"),
    ("id-of-a-warpgroup-barrier", dict(sync_id=1 + CG, arrive_id=2 - CG, open_id=1), None,
     "mbarrier_protocol", "also a barrier across warpgroups"),
    ("id-of-a-warpgroup-barrier-first", dict(sync_id=1 + CG, arrive_id=2 - CG, open_id=1,
                                              local_first=True), None,
     "mbarrier_protocol", "own barrier"),
    ("text-arrive-printed-as-sync", {}, lambda s: s.replace("lg_named_arrive(4 - cg, 256);",
                                                            "lg_named_bar(4 - cg, 256);"),
     "printed_source", "lg_named"),
    ("text-stray-arrive", {}, lambda s: s.replace("lg_named_bar(cg + 3, 256);",
                                                  "lg_named_bar(cg + 3, 256); "
                                                  "lg_named_arrive(4 - cg, 256);"),
     "printed_source", "lg_named_arrive"),
    ("text-sync-id", {}, lambda s: s.replace("lg_named_bar(cg + 3, 256);",
                                             "lg_named_bar(cg + 2, 256);"),
     "printed_source", "cg + 2"),
    ("text-opening-id", {}, lambda s: s.replace("lg_named_arrive(3, 256);",
                                                "lg_named_arrive(4, 256);"),
     "printed_source", "NamedBarrier"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_planted_pingpong_bug_is_refused(case):
    name, kw, text_bug, check, msg = case
    k = _pingpong(build_tma_gemm_ir(CFG), **kw)
    src = tma_ir_source(k)
    if text_bug is not None:
        bad = text_bug(src)
        assert bad != src, f"{name}: the text mutation changed nothing"
        src = bad
    r = _verify(k, src)
    assert not r.checks[check].holds, (name, {n: c.holds for n, c in r.checks.items()})
    assert re.search(re.escape(msg), r.checks[check].counterexample), \
        r.checks[check].counterexample
