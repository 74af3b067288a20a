"""The mma.sync GEMM as kernel IR at runtime sizes with the template's schedule (issue 20 item
1, kernels/nvidia/gemm_rt_ir.py): the one verifier proves it at launches that hit every path
(edge tiles in M, N and K, odd K / N / leading dimensions, 1x1x8, a partial raster group, every
copy path, B N- and K-major), the printed text reads back, the schedule is the template's
(double-buffered fragments, the raster, the mma order), gemm() dispatches to it and says so,
and what it cannot build is refused.  Planted bugs: tests/test_mutation_mma_rt.py."""

from __future__ import annotations

import pytest
import torch

from kernels.ir import Barrier, If, Let, Loop, Mfma, walk
from kernels.ir.nvidia import CpAsync, CpAsyncWait, LdMatrixLoad
from kernels.nvidia import dispatch
from kernels.nvidia.gemm import CudaGemm, CudaGemmConfig, GemmConfigError, mma_issue_order
from kernels.nvidia.gemm_rt_ir import (IrMmaRtGemm, build_mma_rt_ir, mma_rt_instances,
                                       mma_rt_kernel_name, mma_rt_refusal)
from kernels.nvidia.wgmma_rt_ir import RT_SCALARS
from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
from kernels.verify.rules import checks_for
from kernels.verify.verifier import verify

SMALL = CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3)


@pytest.mark.parametrize("cfg", [
    SMALL,
    CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3, dtype="bf16",
                   b_major="k"),
    CudaGemmConfig(bm=64, bn=128, bk=64, warps_m=2, warps_n=2, stages=2, mma_order="serp",
                   group_m=2),
], ids=lambda c: c.name)
def test_every_check_holds_at_every_launch(cfg):
    k = build_mma_rt_ir(cfg)
    src = emit_cuda_gemm_rt(k)
    r = verify(k, arch="sm_90", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    for name in checks_for(k.spec) + ("printed_source", "declarations", "index_ranges"):
        assert name in r.checks
    for inst in mma_rt_instances(cfg):
        assert f"[{inst.name}:" in r.checks["coverage"].domain


def test_launches_hit_every_path():
    cfg = CudaGemmConfig()
    insts = mma_rt_instances(cfg)
    v = [i.values for i in insts]
    assert any(x["M"] % cfg.bm and x["N"] % cfg.bn and x["K"] % cfg.bk for x in v)
    assert any(x["N"] % 2 for x in v) and any(x["K"] % 8 for x in v)
    assert any(x["lda"] % 2 for x in v) and any(x["ldc"] % 2 for x in v)
    assert {x["a_vec"] for x in v} == {0, 1} and {x["b_vec"] for x in v} == {0, 1}
    assert any(x["a_vec"] and x["K"] > cfg.bk and x["K"] % 8 for x in v)
    assert any(x["a_vec"] and x["K"] > cfg.bk and x["K"] % cfg.bk and not x["K"] % 8 for x in v)
    assert any(-(-x["M"] // cfg.bm) > cfg.group_m for x in v)
    assert any((x["M"], x["N"], x["K"]) == (1, 1, 8) for x in v)
    # fewer k tiles than the pipeline holds (prologue copies skipped, no next tile)
    assert any(-(-x["K"] // cfg.bk) < cfg.stages - 1 for x in v)
    # the main loop: two trips and a tail after them in one block, none in another (an edge)
    S = cfg.stages
    main = [i for i in insts if i.values["K"] // cfg.bk - S + 1 >= 2 * S + 1
            and i.values["a_vec"] and i.values["b_vec"] and i.values["N"] % cfg.bn == 0
            and i.values["M"] > cfg.bm and i.values["M"] % cfg.bm]
    assert main and main[0].grid[0] == 2
    for i in insts:
        assert i.values["a_vec"] == int(i.values["lda"] % 8 == 0)
        assert i.values["b_vec"] == int(i.values["ldb"] % 8 == 0)


def test_schedule_is_the_templates():
    """Stages - 1 tiles in flight; per k tile: the next k step's fragments loaded before this
    step's mma (two buffers), one wait + barrier before the last step, whose next fragments
    are the next tile's first; the mma issue order of the configuration.  The same per tile
    in the main loop (S tiles a trip) and the tail loop."""
    cfg = CudaGemmConfig(mma_order="serp")
    S, kk, mt, nt = cfg.stages, cfg.bk // 16, cfg.wtm // 16, cfg.wtn // 8
    k = build_mma_rt_ir(cfg)
    for var, tiles in (("kt", 1), ("kq", S)):
        loop = next(s for s in k.body if isinstance(s, Loop) and s.var == var)
        body = list(walk(loop.body))
        waits = [s for s in body if isinstance(s, CpAsyncWait)]
        assert [w.pending for w in waits] == [cfg.stages - 2] * tiles
        assert sum(isinstance(s, Barrier) for s in body) == tiles
        mmas = [s for s in body if isinstance(s, Mfma)]
        assert len(mmas) == tiles * kk * mt * nt
        order = mma_issue_order("serp", mt, nt)
        first = [(int(m.acc.idx[0]) // 4 // nt, int(m.acc.idx[0]) // 4 % nt)
                 for m in mmas[:mt * nt]]
        assert first == order
        # step s's mma reads buffer s % 2; the ldmatrix before it fills the other buffer
        a_regs = {s: {int(m.a.idx[0]) // (mt * 8) for m in mmas[s * mt * nt:(s + 1) * mt * nt]}
                  for s in range(tiles * kk)}
        assert a_regs == {s: {s % 2} for s in range(tiles * kk)}
        # no fragment load is guarded: the last tile reloads its own (the tail's rn)
        assert not any(isinstance(s, If) and any(isinstance(x, LdMatrixLoad) for x in s.body)
                       for s in body)
    tail = next(s for s in k.body if isinstance(s, Loop) and s.var == "kt")
    rn = next(s for s in tail.body if isinstance(s, Let) and s.name == "rn")
    assert str(rn.expr) == f"Mod(Min(KT - 1, kt + 1), {S})"


def test_main_loop_has_constant_stages_and_no_branch():
    """The main loop: S tiles a trip from kq = 0 to kq_n = max(0, ab_fkt - S + 1) // S, then
    the tail from S kq_n; in it no if, every shared offset free of loop symbols but the
    thread's (the stage an immediate), every copy unpredicated cp.async into stage
    (s + S - 1) % S of tile s."""
    cfg = CudaGemmConfig()
    S = cfg.stages
    k = build_mma_rt_ir(cfg)
    kq_n = next(s for s in k.body if isinstance(s, Let) and s.name == "kq_n")
    assert str(kq_n.expr) == f"floor(Max(0, ab_fkt - {S - 1})/{S})"
    main = next(s for s in k.body if isinstance(s, Loop) and s.var == "kq")
    tail = next(s for s in k.body if isinstance(s, Loop) and s.var == "kt")
    assert (main.start, main.stop, main.unroll) == (0, kq_n.symbol, 1)
    assert str(tail.start) == f"{S}*kq_n"
    assert not any(isinstance(s, If) for s in walk(main.body))
    lds = [s for s in walk(main.body) if isinstance(s, LdMatrixLoad)]
    assert all(not ({"kq", "kt", "rs", "rn"} & {x.name for x in s.offset.free_symbols})
               for s in lds)
    cps = [s for s in walk(main.body) if isinstance(s, CpAsync)]
    per = len(cps) // S
    for t in range(S):
        for c in cps[t * per:(t + 1) * per]:
            assert c.load.pred is None
            assert {int(co[1]) for co in c.store.coords} == {(t + S - 1) % S}


def test_printed_kernel_takes_runtime_sizes_and_paths():
    k = build_mma_rt_ir(SMALL)
    src = emit_cuda_gemm_rt(k)
    head = next(line for line in src.splitlines() if k.name + "(" in line)
    assert head.endswith(", ".join(f"int {n}" for n in RT_SCALARS) + ") {")
    assert "lg_ld16z(" in src and "lg_st_shared_v4(" in src and "lg_cp_async16(" in src
    assert "lg_ldmatrix_x4_trans(" in src and "lg_mma_f16(&acc[" in src
    assert "const int ab_fkt = min(a_fkt, b_fkt);" in src
    assert sum(isinstance(s, CpAsync) for s in walk(k.body)) > 0


def test_forms_it_does_not_build_are_refused():
    cfg = CudaGemmConfig(vec=4)
    assert "vec=8" in mma_rt_refusal(cfg)
    with pytest.raises(GemmConfigError, match="vec=8"):
        build_mma_rt_ir(cfg)
    assert type(dispatch.mma_gemm(cfg)) is CudaGemm
    assert "bk a multiple of 32" in mma_rt_refusal(CudaGemmConfig(bk=16, stages=4))


def test_template_refuses_one_k_step_per_tile():
    """Regression: the template CudaGemm alternates its two fragment buffers statically per
    k step; at bk=16 (one k step per tile) the next tile's fragments went to buffer 1 while
    every mma read buffer 0, k tile 0's: a silent wrong answer (found by reading while
    building the IR form, 2026-11-24; never run on a GPU).  Now refused by the plan."""
    with pytest.raises(GemmConfigError, match="bk a multiple of 32"):
        CudaGemm(CudaGemmConfig(bk=16, stages=4))
    with pytest.raises(GemmConfigError, match="bk a multiple of 32"):
        build_mma_rt_ir(CudaGemmConfig(bk=16, stages=4))


def test_choose_gemm_names_the_ir_kernel():
    a = torch.zeros((777, 130), dtype=torch.float16)
    b = torch.zeros((130, 333), dtype=torch.float16)
    ch = dispatch.choose_gemm(a, b, atom="mma")
    assert ch.kernel == mma_rt_kernel_name(ch.config) and ch.kernel.startswith("lg_irgemm_rt_")
    assert isinstance(dispatch.mma_gemm(ch.config), IrMmaRtGemm)


def test_switch_off_keeps_the_template(monkeypatch):
    monkeypatch.setattr(dispatch, "MMA_RT_IR", False)
    cfg = CudaGemmConfig()
    assert type(dispatch.mma_gemm(cfg)) is CudaGemm
    a = torch.zeros((64, 64), dtype=torch.float16)
    ch = dispatch.choose_gemm(a, a, atom="mma")
    assert not ch.kernel and str(ch).startswith("mma lg_gemm_")


@pytest.mark.parametrize("shape,b_major,ir", [
    ((4000, 3000, 1000), "n", True),     # edges in M, N and K: 1.15x on the H100
    ((16, 4096, 4096), "n", True),       # an M edge: 1.22x
    ((4096, 4096, 4096), "n", True),     # no edge, N-major: 1.008x since the main loop
    ((2048, 2048, 2048), "n", True),     # (session 11: 0.96-0.98x, the template)
    ((4096, 4096, 4096), "k", True),     # B K-major: 1.06x
    ((1, 1, 8), "n", False),             # one block, one k tile: 0.91x -> the template
])
def test_choose_gemm_runs_the_ir_form_where_it_measured_at_parity(shape, b_major, ir):
    m, n, k = shape
    a = torch.zeros((m, k), dtype=torch.float16)
    b = torch.zeros((k, n) if b_major == "n" else (n, k), dtype=torch.float16)
    ch = dispatch.choose_gemm(a, b, b_major=b_major, atom="mma")
    assert isinstance(ch.config, CudaGemmConfig)
    assert ch.kernel.startswith("lg_irgemm_rt_") is ir, ch
    assert ("verified IR form" in ch.reason) is ir and ("; the template (" in ch.reason) is not ir
    g = dispatch.compiled_gemm(ch.config, template=not ch.kernel)
    assert isinstance(g, IrMmaRtGemm) is ir and isinstance(g, CudaGemm) is not ir


def test_nvrtc_registers_and_spills(tmp_path):
    """The default tile as NVRTC compiles it (what gemm() runs): no spill, B N- and K-major
    (254 registers each, NVRTC 13.5, 2026-11-24; B K-major spilled 8 bytes out of the loop
    before the main loop of constant stages; the template: 240 / 242 registers, none).  A
    regression past that fails."""
    import re
    from kernels.cache import Cache
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("needs NVRTC (cuda-python)")
    for cfg, most in ((CudaGemmConfig(), 0), (CudaGemmConfig(dtype="bf16", b_major="k"), 0)):
        m = compile_cuda(emit_cuda_gemm_rt(build_mma_rt_ir(cfg)), cfg.arch,
                         ["--ptxas-options=-v"], name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        spilled = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
        assert spilled and max(spilled) <= most, m.log


@pytest.fixture
def fake(monkeypatch):
    import _fake_cuda as fc
    f = fc.install(monkeypatch)
    yield f
    fc.clear_caches()


def test_launch_arguments_and_the_int_offset_fallback(fake, monkeypatch):
    """The host's words: sizes, leading dimensions, a_vec / b_vec from the strides and
    pointers (an odd lda: a_vec 0); a matrix of 2^31 elements or more runs the wide IR form
    (gemm_wide.WIDE_GEMM_ON_IR, on), and with that switch off the template (the 32-bit IR's
    offsets are ints)."""
    from kernels.nvidia import gemm_wide
    import _fake_cuda as fc
    g = IrMmaRtGemm(CudaGemmConfig())
    a = fc.FakeCudaTensor((300, 200), torch.float16, stride=(201, 1))
    b = fc.FakeCudaTensor((200, 520), torch.float16)
    g(a, b, fc.FakeCudaTensor((300, 520), torch.float16))
    L = fake.launches[-1]
    assert L.kernel == "lg_irgemm_rt_f16_n_128x256x32_w2x4_s4_v8"
    assert L.grid == (3 * 3, 1, 1) and L.args[3:] == (300, 520, 200, 201, 520, 520, 0, 1)
    big = fc.FakeCudaTensor((70000, 40000), torch.float16)
    b2 = fc.FakeCudaTensor((40000, 256), torch.float16)
    g(big, b2, fc.FakeCudaTensor((70000, 256), torch.float16))
    assert fake.launches[-1].kernel == "lg_irgemm_rt_f16_n_128x256x32_w2x4_s4_v8_i64"
    monkeypatch.setattr(gemm_wide, "WIDE_GEMM_ON_IR", False)
    g.forget_calls()                    # the bound call is kept per call key
    g(big, b2, fc.FakeCudaTensor((70000, 256), torch.float16))
    assert fake.launches[-1].kernel == "lg_gemm_f16_n_128x256x32_w2x4_s4_v8"
