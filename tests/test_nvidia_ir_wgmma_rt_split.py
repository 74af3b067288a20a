"""The cp.async wgmma GEMM's split-K as kernel IR (kernels/nvidia/wgmma_rt_ir_split.py): the
split kernel and its IR reduce kernel verified together at the split launches (every check,
the split-aware dataflow of kernels/verify/gate_split_partials.py and the reduce kernel's
``merge_reads_partials``), the printed module, the refusals and the dispatch switch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.errors import LaunchError
from kernels.nvidia import dispatch
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.wgmma import WgmmaGemmConfig, split_ranges
from kernels.nvidia.wgmma_rt_ir import build_wgmma_rt_ir
from kernels.nvidia.wgmma_rt_ir_split import (SPLIT_SCALARS, build_wgmma_rt_split_ir,
                                              split_instances, split_source)
from kernels.verify.gate_split_partials import SplitPartialsRun
from kernels.verify.spec import SpecError
from kernels.verify.verifier import verify

SMALL = WgmmaGemmConfig(bm=64, bn=64, stages=3, split_k=True)


@pytest.fixture(scope="module")
def small():
    k = build_wgmma_rt_split_ir(SMALL)
    return k, split_source(k)


def test_split_program_verifies_with_its_reduce_kernel(small):
    k, src = small
    r = verify(k, arch="sm_90a", source=src)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert not bad, bad
    for name in ("merge_reads_partials", "lane_accumulator_writeback", "coverage",
                 "printed_source", "in_bounds"):
        assert name in r.checks
    # the reduce proof ran at every launch, on the workspace every block wrote
    dom = r.checks["merge_reads_partials"].domain
    assert dom.count("reduce kernel") == len(split_instances(SMALL))
    assert "splits=3" in dom and "splits=1" in dom


def test_bf16_k_major_verifies():
    cfg = WgmmaGemmConfig(bm=64, bn=64, stages=3, split_k=True, dtype="bf16", b_major="k")
    k = build_wgmma_rt_split_ir(cfg)
    r = verify(k, arch="sm_90a", source=split_source(k))
    assert all(c.holds for c in r.checks.values()), \
        {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_printed_module_holds_both_kernels_with_the_template_arguments(small):
    k, src = small
    assert src.count('extern "C" __global__') == 2
    assert src.index(k.name + "(") < src.index(k.meta["reduce"].name + "(")
    head = src[src.index(k.name + "("):].split("{", 1)[0]
    assert "float* __restrict__ W" in head and head.count("int ") == len(SPLIT_SCALARS)
    assert "const int sp = blockIdx.y;" in src and "KTn" in src


def test_instances_follow_the_template_partition():
    for inst in split_instances(WgmmaGemmConfig(split_k=True)):
        v = inst.values
        kt_per, used = split_ranges(v["K"], 64, v["splits"])
        assert (v["kt_per"], v["splits"]) == (kt_per, used) and inst.grid[1] == used
    # one launch asks for more splits than the k tiles leave non-empty
    asked = {i.name: i.values["splits"] for i in split_instances(SMALL)}
    assert asked["raster_odd_ld"] == 3


def test_refusals():
    with pytest.raises(GemmConfigError, match="not a split-K configuration"):
        build_wgmma_rt_split_ir(WgmmaGemmConfig())
    with pytest.raises(GemmConfigError, match="no split-K form"):
        build_wgmma_rt_ir(SMALL)


def test_split_run_needs_the_split_declaration(small):
    k, _ = small
    plain = build_wgmma_rt_ir(WgmmaGemmConfig(bm=64, bn=64, stages=3))
    with pytest.raises(SpecError, match="meta\\['split'\\]"):
        SplitPartialsRun(plain, dict(M=1, N=1, K=8, splits=1, kt_per=1))


def test_dispatch_switch(monkeypatch):
    """Off: the template runs split-K; on: the IR pair, named with its reduce kernel."""
    monkeypatch.setattr(dispatch, "CP_SPLIT_ON_IR", False)
    assert type(dispatch.wgmma_gemm(SMALL)).__name__ == "WgmmaGemm"
    monkeypatch.setattr(dispatch, "CP_SPLIT_ON_IR", True)
    g = dispatch.wgmma_gemm(SMALL)
    assert type(g).__name__ == "IrWgmmaRtSplitGemm"
    assert g.kernel_name == build_wgmma_rt_split_ir(SMALL).name
    assert g.reduce_name == g.kernel_name + "_reduce"
    with pytest.raises(LaunchError, match="splits must be a positive int"):
        import torch
        a = torch.zeros((4, 8), dtype=torch.float16)
        g.bind(a, torch.zeros((8, 4), dtype=torch.float16), splits=0)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 5000), splits=st.integers(1, 40), bk=st.sampled_from([16, 32, 64]))
def test_split_ranges_the_dataflow_demands_partition_k_as_the_template(k, splits, bk):
    """The per-split k range a partial must hold (SplitPartialsRun.split_range) is the
    template's partition: ascending, non-empty, covering [0, K) exactly, ``kt_per`` tiles each."""
    kt_per, used = split_ranges(k, bk, splits)

    class _K:
        name = "probe"
        meta = {"split": {"bk": bk, "workspace": "W"}, "reduce": None}
    run = SplitPartialsRun(_K(), dict(M=1, N=1, K=k, splits=used, kt_per=kt_per))
    ranges = [run.split_range(s) for s in range(used)]
    assert ranges[0][0] == 0 and ranges[-1][1] == k
    assert all(lo < hi for lo, hi in ranges)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(hi - lo == kt_per * bk for lo, hi in ranges[:-1])
