"""The cp.async + wgmma GEMM as kernel IR at runtime sizes (issue 20 item 1,
kernels/nvidia/wgmma_rt_ir.py): the one verifier proves it at launches that hit every path
(edge tiles in M, N and K, odd K / N / leading dimensions, 1x1x8, a partial raster group), the
printed text reads back, gemm() dispatches to it and says so, and bad configurations are
refused.  Planted bugs: tests/test_mutation_wgmma_rt.py."""

from __future__ import annotations

import pytest
import torch

from kernels.ir import Access, If, walk
from kernels.nvidia import dispatch
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_rt_ir import (RT_SCALARS, build_wgmma_rt_ir, rt_instances,
                                        rt_kernel_name)
from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
from kernels.verify.rules import checks_for
from kernels.verify.spec import SpecError
from kernels.verify.verifier import verify

SMALL = WgmmaGemmConfig(bm=64, bn=64, stages=3)


@pytest.mark.parametrize("cfg", [SMALL, WgmmaGemmConfig(bm=64, bn=128, dtype="bf16",
                                                        b_major="k")],
                         ids=lambda c: c.name)
def test_every_check_holds_at_every_launch(cfg):
    k = build_wgmma_rt_ir(cfg)
    src = emit_cuda_gemm_rt(k)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    for name in checks_for(k.spec) + ("printed_source", "declarations", "index_ranges"):
        assert name in r.checks
    # each engine check names every launch it covered
    for inst in rt_instances(cfg):
        assert f"[{inst.name}:" in r.checks["coverage"].domain
        assert f"instance {inst.name}" in r.checks["printed_source"].domain or \
            inst.name in r.checks["printed_source"].domain


def test_launches_hit_every_path():
    """Edge tiles in M, N and K, an odd N, odd leading dimensions, every copy path (16-byte
    rows or not, K a multiple of 8 or not), a k tile on the fast path next to an edge one, a
    partial raster group."""
    cfg = WgmmaGemmConfig()
    insts = rt_instances(cfg)
    v = [i.values for i in insts]
    assert any(x["M"] % cfg.bm and x["N"] % cfg.bn and x["K"] % cfg.bk for x in v)
    assert any(x["N"] % 2 for x in v) and any(x["K"] % 8 for x in v)
    assert any(x["lda"] % 2 for x in v) and any(x["ldc"] % 2 for x in v)
    assert {x["a_vec"] for x in v} == {0, 1} and {x["b_vec"] for x in v} == {0, 1}
    # A with 16-byte rows at a K edge that cuts vectors (edge copy) and one that does not
    # (predicated cp.async), each next to inside k tiles (unpredicated cp.async)
    assert any(x["a_vec"] and x["K"] > cfg.bk and x["K"] % 8 for x in v)
    assert any(x["a_vec"] and x["K"] > cfg.bk and x["K"] % cfg.bk and not x["K"] % 8
               for x in v)
    assert any(-(-x["M"] // cfg.bm) > cfg.group_m for x in v)
    assert any((x["M"], x["N"], x["K"]) == (1, 1, 8) for x in v)
    for i in insts:    # the host's rule (IrWgmmaRtGemm.bind), aligned pointers
        assert i.values["a_vec"] == int(i.values["lda"] % 8 == 0)
        assert i.values["b_vec"] == int(i.values["ldb"] % 8 == 0)


def test_printed_kernel_takes_runtime_sizes_and_edge_copy():
    k = build_wgmma_rt_ir(SMALL)
    src = emit_cuda_gemm_rt(k)
    head = next(line for line in src.splitlines() if k.name + "(" in line)
    assert head.endswith(", ".join(f"int {n}" for n in RT_SCALARS) + ") {")
    assert "lg_ld16z(" in src and "lg_st_shared_v4(" in src and "lg_cp_async16(" in src
    # the copy paths are chosen by block-uniform conditions on the host's a_vec
    ifs = [s for s in walk(k.body) if isinstance(s, If) and any(
        isinstance(a, Access) and a.tag == "A.edge.load" for a in s.body)]
    assert ifs and all("a_vec" in str(s.cond) for s in ifs)


def test_split_k_is_refused():
    with pytest.raises(GemmConfigError, match="split-K"):
        build_wgmma_rt_ir(WgmmaGemmConfig(split_k=True))


def test_launches_domain_needs_launches():
    k = build_wgmma_rt_ir(SMALL)
    with pytest.raises(SpecError, match="no launches"):
        verify(k, arch="sm_90a", instances=[])


def test_choose_gemm_names_the_ir_kernel():
    """An unaligned problem (rows not 16-byte aligned) keeps the cp.async wgmma kernel, which is
    the IR-built one; split-K and the switch off keep the template's name."""
    a, b = torch.zeros((777, 130), dtype=torch.float16), torch.zeros((130, 333),
                                                                     dtype=torch.float16)
    ch = dispatch.choose_gemm(a, b)
    assert ch.kernel == rt_kernel_name(ch.config) and not ch.config.split_k
    assert ch.kernel.startswith("lg_irwgmma_rt_")
    assert isinstance(dispatch.wgmma_gemm(ch.config), dispatch.IrWgmmaRtGemm)


def test_template_runs_split_k_only_with_the_switch_off(monkeypatch):
    """This module's kernel has no split-K form: a split-K configuration runs the split IR
    pair (wgmma_rt_ir_split; CP_SPLIT_ON_IR, on by default: test_nvidia_ir_wgmma_rt_split
    ::test_dispatch_switch builds it) or, with the switch off, the template."""
    from kernels.nvidia.wgmma import WgmmaGemm
    assert dispatch.CP_SPLIT_ON_IR
    monkeypatch.setattr(dispatch, "CP_SPLIT_ON_IR", False)
    assert type(dispatch.wgmma_gemm(WgmmaGemmConfig(split_k=True))) is WgmmaGemm


@pytest.mark.parametrize("which", ["wgmma", "wgmma_split", "mma"])
def test_epilogue_stores_step_from_the_thread_row_and_column(which):
    """Regression (session 11): the epilogue printed every store's row and column from the
    thread index in full, and NVRTC re-derived them per store (the split kernel's epilogue
    3x the template's SASS: its measured 0.89-0.96x on an H100).  Every C / W store's
    predicate and offset now reads the thread only through the two Lets ``er`` / ``ec``."""
    import sympy
    from kernels.ir.core import Access, Let, walk
    from kernels.nvidia.gemm import CudaGemmConfig
    from kernels.nvidia.gemm_rt_ir import build_mma_rt_ir
    from kernels.nvidia.wgmma_rt_ir_split import build_wgmma_rt_split_ir
    k = {"wgmma": lambda: build_wgmma_rt_ir(WgmmaGemmConfig(bm=64, bn=64, stages=3)),
         "wgmma_split": lambda: build_wgmma_rt_split_ir(
             WgmmaGemmConfig(bm=64, bn=64, stages=3, split_k=True)),
         "mma": lambda: build_mma_rt_ir(CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2,
                                                       warps_n=2, stages=3))}[which]()
    lets = {s.name for s in walk(k.body) if isinstance(s, Let)}
    assert {"er", "ec"} <= lets
    stores = [s for s in walk(k.body) if isinstance(s, Access) and s.kind == "store"
              and s.space == "global"]
    assert stores
    thread = {"tid", "t", "lane", "wm", "wn", "wg"}
    for s in stores:
        used = {x.name for x in sympy.sympify(s.offset).free_symbols |
                sympy.sympify(s.pred).free_symbols}
        assert not used & thread and {"er", "ec"} <= used, (s.tag, used)
