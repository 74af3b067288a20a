"""Two CTAs per SM on the IR-built TMA GEMM (``TmaGemmConfig(ctas_per_sm=2)``, issue 20 item 1):
a builder option, not a template.  The kernel prints ``__launch_bounds__(256, 2)`` and the
consumers' ``setmaxnreg`` share of half the register file (216); the per-role model proves the
roles' registers fit the file of ``min_blocks`` CTAs (``register_budget``), the shared memory
of ``min_blocks`` CTAs (each plus the 1 KiB the driver reserves) fits the SM
(``lds_capacity``) and the printed launch bounds are the IR's (``declarations``).  Planted bugs:
one per rule, each refused by name."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from kernels.ir.nvidia_tma import RoleBranch, Setmaxnreg
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir, ir_form_refusal, ir_kernel_name
from kernels.printer.cuda import emit_cuda
from kernels.verify.verifier import verify

TWO = TmaGemmConfig(dtype="bf16", bm=64, bn=128, stages=3, store="direct", ctas_per_sm=2)
SMALL_DIRECT = ((200, 301, 136, 3, 301),)


def _bad(k, source=None):
    r = verify(k, arch="sm_90a", source=source)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", [
    TWO, replace(TWO, store="tma", dtype="f16", b_major="k"),
    replace(TWO, stages=4, split_k=True, reduce="inline"),
    replace(TWO, bn=128, stages=4, split_k=True, reduce="inline", a_rows=32),
], ids=lambda c: c.name)
def test_two_ctas_per_sm_verifies(cfg):
    """Every two-CTA form the template has is IR now: the builder accepts it, its IR and
    printed text pass every check, launch bounds 2 and the consumers' 216 registers."""
    assert ir_form_refusal(cfg) is None
    k = build_tma_gemm_ir(cfg)
    src = emit_cuda(k)
    assert k.min_blocks == 2 and k.name == ir_kernel_name(cfg) and k.name.endswith(
        "_c2" + (f"_a{cfg.a_rows}" if cfg.a_rows else ""))
    assert f"__launch_bounds__(256, 2) {k.name}(" in src
    regs = [s.regs for s in _setmaxnregs(k)]
    assert sorted(regs) == [40, cfg.consumer_regs] and cfg.consumer_regs == 216
    assert not _bad(k, src)


@settings(max_examples=4, deadline=None)
@given(m=st.integers(1, 140), n=st.integers(1, 300), pad=st.integers(0, 9),
       k=st.integers(1, 500), ctas=st.integers(1, 4), splits=st.integers(1, 5))
def test_two_ctas_split_k_verifies_at_any_size(m, n, pad, k, ctas, splits):
    """The two-CTA one-launch split-K at any size (the host launches up to 2 x SMs CTAs: any
    CTA count is a launch it may make)."""
    cfg = replace(TWO, stages=4, split_k=True, reduce="inline")
    assert not _bad(build_tma_gemm_ir(cfg, ((m, n, k, ctas, n + pad, splits),)))


def test_one_cta_per_sm_prints_what_it_did():
    """ctas_per_sm=1 is unchanged: launch bounds 1, the consumers' 232 (the golden sources
    hash the text)."""
    k = build_tma_gemm_ir(replace(TWO, ctas_per_sm=1))
    assert k.min_blocks == 1 and sorted(s.regs for s in _setmaxnregs(k)) == [40, 232]


def _setmaxnregs(k):
    out = []
    for s in k.body:
        if isinstance(s, RoleBranch):
            out += [x for x in _flat(s.body) if isinstance(x, Setmaxnreg)]
    return out


def _flat(body):
    for s in body:
        yield s
        if hasattr(s, "body") and isinstance(s.body, list):
            yield from _flat(s.body)


# ---------------------------------------------------------------------------- planted bugs

@pytest.fixture(scope="module")
def two():
    k = build_tma_gemm_ir(TWO, SMALL_DIRECT)
    assert not _bad(k)
    return k


def test_consumers_keeping_the_one_cta_share_is_refused(two):
    """setmaxnreg.inc 232 with two CTAs per SM: 128 x (40 + 232) = 34816 registers, more than
    the 32768 of half the file (the second CTA would not be resident, or setmaxnreg would
    stall)."""
    k = copy.deepcopy(two)
    for s in _setmaxnregs(k):
        if s.inc:
            s.regs = 232
    bad = _bad(k)
    assert "register_budget" in bad and "2 CTAs per SM" in bad["register_budget"], bad


def test_two_ctas_over_the_sms_shared_memory_is_refused():
    """Launch bounds 2 on a 6-stage 64x128 ring (145 KiB a CTA): two do not fit the SM's 228
    KiB (each also costs 1 KiB reserved) - the registers fit (216), the shared memory not."""
    one = TmaGemmConfig(dtype="bf16", bm=64, bn=128, stages=6, store="direct")
    k = build_tma_gemm_ir(one, SMALL_DIRECT)
    k.min_blocks = 2
    for s in _setmaxnregs(k):
        if s.inc:
            s.regs = 216
    bad = _bad(k)
    assert set(bad) == {"lds_capacity"}, bad
    assert "2 CTAs per SM" in bad["lds_capacity"] and str(228 * 1024) in bad["lds_capacity"]


def test_printed_launch_bounds_of_one_cta_are_refused(two):
    """The text asks ptxas for one CTA per SM (up to 255 registers a thread at launch) while
    the IR's register shares are half the file's: ``declarations``."""
    src = emit_cuda(two)
    assert "__launch_bounds__(256, 2)" in src
    bad = _bad(two, src.replace("__launch_bounds__(256, 2)", "__launch_bounds__(256, 1)"))
    assert set(bad) == {"declarations"} and "2 CTA(s) per SM" in bad["declarations"], bad


def test_printed_setmaxnreg_of_the_one_cta_share_is_refused(two):
    """The printed consumer ``setmaxnreg.inc`` must be the IR's 216, not the one-CTA 232."""
    src = emit_cuda(two)
    assert "lg_setmaxnreg_inc<216>()" in src
    bad = _bad(two, src.replace("lg_setmaxnreg_inc<216>()", "lg_setmaxnreg_inc<232>()"))
    assert "printed_source" in bad, bad
