"""Planted bugs of every wgmma rule (kernels/ir/nvidia_wgmma.py, kernels/verify/gate_wgmma.py)
and of the printed wgmma text, on the IR-built cp.async + wgmma GEMM: each is refused by the
NAMED check the rule reports to (the mutation catalogue of tests/test_mutation_catalogue.py,
for the Hopper statements; that file is at the 800-line limit)."""

from __future__ import annotations

import copy

import pytest
import sympy

from kernels.ir import Barrier, sym, walk
from kernels.ir.nvidia import CpAsyncWait
from kernels.ir.nvidia_wgmma import (FenceProxyAsync, GmmaOperand, WgmmaFence, WgmmaMma,
                                     WgmmaWait)
from kernels.verify.printed import verify_printed
from kernels.verify.verifier import verify
from mfma_specs.nvidia_wgmma import GmmaDescriptor

from _planted import assert_refused, replaced
from _wgmma_planted import SMALL, assert_ir_bug_refused, main_loop, verified_base



@pytest.fixture(scope="module")
def base():
    return verified_base()


def _wgmmas(k):
    return [s for s in walk(k.body) if isinstance(s, WgmmaMma)]


def _retarget(s, which, **kw):
    op = getattr(s, which)
    fields = dict(buf=op.buf, start=op.start, desc=op.desc, major=op.major, mn=op.mn)
    fields.update(kw)
    setattr(s, which, GmmaOperand(**fields))


def _mutate(k, what):
    k = copy.deepcopy(k)
    body = main_loop(k).body
    if what == "no-wgmma-wait-in-loop":
        body[:] = [s for s in body if not isinstance(s, WgmmaWait)]
    elif what == "lax-wgmma-wait":
        for s in body:
            if isinstance(s, WgmmaWait):
                s.pending = 2
    elif what == "no-final-wgmma-wait":
        k.body[:] = [s for s in k.body if not isinstance(s, WgmmaWait)]
    elif what == "wait-without-pin":
        for s in walk(k.body):
            if isinstance(s, WgmmaWait):
                s.pins = ()
    elif what == "no-wgmma-fence":
        body[:] = [s for s in body if not isinstance(s, WgmmaFence)]
    elif what == "no-proxy-fence":
        body[:] = [s for s in body if not isinstance(s, FenceProxyAsync)]
    elif what == "proxy-fence-before-cp-wait":
        i = next(i for i, s in enumerate(body) if isinstance(s, CpAsyncWait))
        j = next(i for i, s in enumerate(body) if isinstance(s, FenceProxyAsync))
        body[i], body[j] = body[j], body[i]
    elif what == "proxy-fence-after-barrier":
        i = next(i for i, s in enumerate(body) if isinstance(s, Barrier))
        j = next(i for i, s in enumerate(body) if isinstance(s, FenceProxyAsync))
        body[i], body[j] = body[j], body[i]
    elif what == "no-barrier":
        body[:] = [s for s in body if not isinstance(s, Barrier)]
    elif what == "a-k-step-swapped":        # A of k step 1 with B of k step 0
        ws = _wgmmas(k)
        _retarget(ws[0], "a", start=ws[1].a.start)
    elif what == "b-wrong-sbo":
        for s in _wgmmas(k):
            d = s.b.desc
            _retarget(s, "b", desc=GmmaDescriptor(0, d.lbo, 2 * d.sbo, d.swizzle_width))
    elif what == "no-warpgroup-step":       # both warpgroups read A rows 0..63
        for s in _wgmmas(k):
            _retarget(s, "a", start=s.a.start.subs(sym("wg"), 0))
    elif what == "start-not-uniform":
        s = _wgmmas(k)[0]
        _retarget(s, "a", start=s.a.start + 8 * sympy.Mod(sym("tid"), 2))
    elif what == "start-past-the-array":
        s = _wgmmas(k)[0]
        _retarget(s, "b", start=s.b.start + SMALL.stages * SMALL.b_stage // 2)
    return k


@pytest.mark.parametrize("what, check, words", [
    ("no-wgmma-wait-in-loop", "lds_races", "not yet retired"),
    ("lax-wgmma-wait", "lds_races", "not yet retired"),
    ("no-final-wgmma-wait", "lane_accumulator_writeback", "in flight"),
    ("wait-without-pin", "lane_accumulator_writeback", "without pinning"),
    ("no-wgmma-fence", "lane_mfma_operands", "wgmma.fence"),
    ("no-proxy-fence", "lds_races", "fence.proxy.async"),
    ("proxy-fence-before-cp-wait", "lds_races", "fence.proxy.async"),
    ("proxy-fence-after-barrier", "lds_races", "no barrier since the fence"),
    ("no-barrier", "lds_races", "without a barrier"),
    ("a-k-step-swapped", "lane_mfma_operands", "reduction slot"),
    ("b-wrong-sbo", "lane_mfma_operands", ""),
    ("no-warpgroup-step", "lane_accumulator_writeback", ""),
    ("start-not-uniform", "lane_mfma_operands", "differs between its threads"),
    ("start-past-the-array", "in_bounds", "reads sB"),
])
def test_ir_planted_bug_is_refused_by_its_rule(base, what, check, words):
    assert_ir_bug_refused(_mutate(base[0], what), what, check, words)


@pytest.mark.parametrize("what, check", [
    ("wgmma-desc-constant", "printed_source"),
    ("wgmma-start", "printed_source"),
    ("wgmma-wait-count", "printed_source"),
    ("pin-dropped", "printed_source"),
    ("proxy-fence-dropped", "printed_source"),
    ("wrapper-tnspB", "declarations"),
    ("wrapper-shape", "declarations"),
    ("base-not-rounded-up", "declarations"),
])
def test_printed_planted_bug_is_refused(base, what, check):
    k, src = base
    w = _wgmmas(k)[0]
    bits = f"0x{w.b.desc.constant_bits():016x}ull"
    if what == "wgmma-desc-constant":
        bad = replaced(src, f"lg_gmma_desc({bits}", f"lg_gmma_desc(0x{w.b.desc.constant_bits() ^ 1 << 16:016x}ull")
    elif what == "wgmma-start":
        i = src.index("lg_wgmma_m64n64_f16_t1(&acc[0]")
        j = src.index("));", i)
        bad = src[:j] + " + 8" + src[j:]
    elif what == "wgmma-wait-count":
        bad = replaced(src, "lg_wgmma_wait<1>();", "lg_wgmma_wait<2>();")
    elif what == "pin-dropped":
        bad = replaced(src, "lg_wgmma_wait<1>();\n    lg_pin(acc);", "lg_wgmma_wait<1>();")
    elif what == "proxy-fence-dropped":
        bad = replaced(src, "    lg_fence_proxy_async();\n    __syncthreads();", "    __syncthreads();")
    elif what == "wrapper-tnspB":
        bad = replaced(src, "p, 1, 1, 0, 1;", "p, 1, 1, 0, 0;")
    elif what == "wrapper-shape":
        bad = replaced(src, ".m64n64k16.", ".m64n56k16.")
    else:
        bad = replaced(src, "lg_smem_raw + ((1024u - (lg_smem_u32(lg_smem_raw) & 1023u)) & 1023u)",
                       "lg_smem_raw + 0")
    assert_refused(verify_printed(k, bad), check, what)


WGMMA_CATALOGUE = ["no-wgmma-wait-in-loop", "lax-wgmma-wait", "no-final-wgmma-wait",
                   "wait-without-pin", "no-wgmma-fence", "no-proxy-fence",
                   "proxy-fence-before-cp-wait", "no-barrier", "a-k-step-swapped", "b-wrong-sbo",
                   "no-warpgroup-step", "start-not-uniform", "start-past-the-array",
                   "wgmma-desc-constant", "wgmma-start", "wgmma-wait-count", "pin-dropped",
                   "proxy-fence-dropped", "wrapper-tnspB", "wrapper-shape",
                   "base-not-rounded-up", "retired-stage-rewritten-without-barrier",
                   "proxy-fence-after-barrier"]


def test_wgmma_catalogue_names_are_unique():
    assert len(WGMMA_CATALOGUE) == len(set(WGMMA_CATALOGUE)) == 23


def _rewrite_after_last_wait(k, barrier):
    """A barrier between the last wgmmas and the final wgmma.wait_group, then every thread
    overwrites one element of the stage the last wgmma group read, right after the wait (with
    or without a barrier between)."""
    from layoutalg import Layout
    from kernels.ir import Access
    k = copy.deepcopy(k)
    i = next(i for i, s in enumerate(k.body) if isinstance(s, WgmmaWait))
    last = (128 // SMALL.bk - 1) % SMALL.stages          # the stage of the last k tile
    sh = next(s for s in k.shared if s.name == "sA")
    off = last * (SMALL.a_stage // 2) + sym("tid")
    acc = next(f for f in k.frags if f.name == "acc")
    st = Access("store", "lds", "sA", off, 1, acc.regs([0]), tag="sA.rewrite",
                origin=Layout(sh.count, 1), coords=((off,),))
    k.body[i + 1:i + 1] = ([Barrier()] if barrier else []) + [st]
    k.body.insert(i, Barrier())
    return k


def test_retired_stage_rewritten_by_another_warpgroup_needs_a_barrier(base):
    """The simulation retires every warpgroup's wgmmas at one wait; the hardware retires each
    warpgroup's own, so another warpgroup's write after the wait needs a barrier."""
    r = verify(_rewrite_after_last_wait(base[0], barrier=False), arch="sm_90a")
    assert not r.checks["lds_races"].holds
    assert "several threads read since the last barrier" in r.checks["lds_races"].counterexample
    r = verify(_rewrite_after_last_wait(base[0], barrier=True), arch="sm_90a")
    assert r.checks["lds_races"].holds, r.checks["lds_races"].counterexample
