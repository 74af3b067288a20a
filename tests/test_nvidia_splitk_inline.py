"""One-launch split-K of the TMA GEMM (issue 20, ``kernels/nvidia/splitk_inline.py``): the
protocol's proofs hold for the printed expressions, planted bugs in each of them are refused,
the printed source is what was proved, and the host path launches one kernel (CPU, with the
pretend H100 of ``_fake_cuda``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.splitk_inline import (PROTOCOL, InlineReduceProtocol, check_arrival_protocol,
                                          check_inline_reduce, printed_protocol_lines,
                                          prove_inline_reduce, tile_origin)
from kernels.nvidia.wgmma_tma import TmaGemmConfig, emit_tma_gemm, plan_tma_gemm

INLINE = [TmaGemmConfig(dtype=d, bm=bm, bn=bn, stages=s, store="direct", split_k=True,
                        reduce="inline")
          for d, (bm, bn, s) in (("bf16", (64, 128, 8)), ("f16", (64, 128, 8)),
                                 ("bf16", (128, 128, 6)))]


@pytest.mark.parametrize("cfg", INLINE, ids=lambda c: c.name)
def test_plan_proves_the_protocol_and_prints_it(cfg):
    plan = plan_tma_gemm(cfg)
    assert plan.checks["split-K inline reduce"].holds
    src = emit_tma_gemm(cfg)
    for line in printed_protocol_lines(PROTOCOL, cfg.consumers):
        assert line in src, line
    assert src.count(f"C + {PROTOCOL.partial};") == 3   # the store, the reducer's two reads
    assert "atomicAdd(cnt + slot, 1)" in src and "if (last) cnt[slot] = 0;" in src
    assert "__threadfence();" in src and "__ldcg(" in src
    assert "_reduce(" not in src, "an inline configuration carries no reduce kernel"
    assert cfg.name.endswith("_ski")


def test_kernel_reduce_configuration_is_unchanged():
    cfg = TmaGemmConfig(bm=64, bn=128, stages=8, store="direct", split_k=True, dtype="bf16")
    src = emit_tma_gemm(cfg)
    assert cfg.name.endswith("_sk") and "atomicAdd" not in src and "_reduce(" in src


@pytest.mark.parametrize("kw, msg", [(dict(reduce="inline"), "split_k=True"),
                                     (dict(reduce="tree", split_k=True, store="direct"),
                                      "'kernel' or 'inline'"),
                                     (dict(reduce="inline", split_k=True, store="direct", bm=64,
                                           stages=5), "spills at bn=256")])
def test_bad_reduce_forms_are_refused(kw, msg):
    with pytest.raises(GemmConfigError, match=msg):
        plan_tma_gemm(TmaGemmConfig(**kw))


# planted bugs: each printed expression wrong in one way, refused by the proof
BUGS = {
    "never last": (replace(PROTOCOL, last="old == splits"), "reduced the tile 0 times"),
    "early last": (replace(PROTOCOL, last="old >= splits - 2"), "after 4 of 5 splits"),
    "no reset": (replace(PROTOCOL, reset=False), "not 0: the next launch"),
    "shared counter": (replace(PROTOCOL, counter="tile"), "share an arrival counter"),
    "counter past workspace": (replace(PROTOCOL, counter="tile * {consumers} + cg + 1"),
                               "outside the"),
    "partial without split": (replace(PROTOCOL, partial="(size_t)r * N + col"), "overlap"),
    "partial row stride": (replace(PROTOCOL, partial="(size_t)split * M * N + (size_t)r * M + col"),
                           "overlap|outside"),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_protocol_bugs_are_refused(bug):
    proto, msg = BUGS[bug]
    with pytest.raises(GemmConfigError, match=msg):
        prove_inline_reduce("bf16", 128, 128, proto=proto)


def test_last_test_only_wrong_on_one_split_is_caught():
    """``old == 0`` is right for one split only: the proof's multi-split problems refuse it."""
    check_inline_reduce(replace(PROTOCOL, last="old == 0"), "bf16", 64, 128, 1, 8, 64, 1, 1)
    with pytest.raises(GemmConfigError, match="2 splits .* reduced the tile 2 times"):
        check_inline_reduce(replace(PROTOCOL, last="old == 0"), "bf16", 64, 128, 1, 8, 128, 2, 1)


def test_units_not_all_run_are_refused():
    with pytest.raises(GemmConfigError, match="exactly once"):
        check_inline_reduce(PROTOCOL, "bf16", 64, 128, 64, 128, 640, 2, 0)


@settings(max_examples=25, deadline=None)
@given(M=st.integers(1, 300), N=st.integers(1, 600), kt=st.integers(1, 40),
       splits=st.integers(1, 9), grid=st.integers(1, 140), tile=st.sampled_from(
           [(64, 128), (64, 256), (128, 128)]))
def test_protocol_holds_on_any_problem(M, N, kt, splits, grid, tile):
    out = check_inline_reduce(PROTOCOL, "f16", *tile, M, N, 64 * kt, splits, grid)
    assert out["units"] >= -(-M // tile[0]) * -(-N // tile[1])


@given(n=st.integers(1, 5))
def test_arrival_protocol_counts_every_order(n):
    import math
    assert check_arrival_protocol(PROTOCOL, n, n) == math.factorial(n)


def test_raster_visits_every_tile_once():
    for gm, gn, g in ((5, 3, 8), (17, 2, 8), (1, 9, 4)):
        seen = {tile_origin(t, gm, gn, g, 64, 128) for t in range(gm * gn)}
        assert seen == {(64 * i, 128 * j) for i in range(gm) for j in range(gn)}


def test_custom_protocol_type():
    assert InlineReduceProtocol().c_counter(2) == "tile * 2 + cg"


# ------------------------------------------------------------------ the host path (CPU)

torch = pytest.importorskip("torch")


@pytest.fixture
def fake(monkeypatch):
    import _fake_cuda as fc
    f = fc.install(monkeypatch)
    yield f
    fc.clear_caches()


@pytest.mark.parametrize("splits", [1, 4])
def test_inline_split_k_is_one_launch_with_reused_workspaces(fake, splits):
    """The template's host path (gemm() runs the IR kernel: the IR test below)."""
    import _fake_cuda as fc
    from kernels.nvidia.wgmma_tma import TmaGemm
    g = TmaGemm(INLINE[0])
    a, b, out = (fc.FakeCudaTensor(s, torch.bfloat16) for s in ((16, 4096), (4096, 4096),
                                                                 (16, 4096)))
    n0 = len(fake.launches)
    g(a, b, out, splits=splits)
    g(a, b, out, splits=splits)
    L = fake.launches[n0:]
    assert [x.kernel for x in L] == [INLINE[0].name] * 2, "one launch per call"
    args = L[0].args
    # (tmA, tmB, tmC, W, M, N, K, ldc, splits, kt_per, O, cnt, ldo)
    assert not args[2] and args[4:10] == (16, 4096, 4096, 4096, splits, 64 // splits)
    assert args[10] == out.data_ptr() and args[12] == 4096
    if splits == 1:
        assert not args[3] and not args[11], "one split needs no workspace"
    else:
        assert args[3] and args[11]
    assert L[1].args == args, "the second call re-uses the same workspaces"


@pytest.mark.parametrize("splits", [1, 4])
def test_ir_inline_split_k_is_one_launch_with_reused_workspaces(fake, splits):
    """gemm()'s kernel for an inline split-K configuration is the verified IR one: one launch
    of (tmA, tmB, W, C, cnt, M, N, K, ctas, ldc, splits, kt_per), its workspaces kept for the
    next call, none with one split."""
    import _fake_cuda as fc
    from kernels.nvidia.dispatch import compiled_gemm
    from kernels.nvidia.wgmma_tma_ir import IrTmaGemm
    g = compiled_gemm(INLINE[0])
    assert isinstance(g, IrTmaGemm) and g.report.holds
    a, b, out = (fc.FakeCudaTensor(s, torch.bfloat16) for s in ((16, 4096), (4096, 4096),
                                                                 (16, 4096)))
    n0 = len(fake.launches)
    g(a, b, out, splits=splits)
    g(a, b, out, splits=splits)
    L = fake.launches[n0:]
    assert [x.kernel for x in L] == [g.kernel_name] * 2, "one launch per call"
    args = L[0].args
    assert args[3] == out.data_ptr() and args[5:] == (16, 4096, 4096, L[0].grid[0], 4096,
                                                      splits, 64 // splits)
    assert L[0].grid[0] == min(4096 // INLINE[0].bn * splits, 132)    # units on the SMs
    if splits == 1:
        assert not args[2] and not args[4], "one split needs no workspace"
    else:
        assert args[2] and args[4]
    assert L[1].args == args, "the second call re-uses the same workspaces"


def _have_compiler() -> bool:
    from kernels.cuda.compile import nvcc_path, nvrtc_available
    return nvrtc_available() or nvcc_path() is not None


@pytest.mark.skipif(not _have_compiler(), reason="needs NVRTC (cuda-python) or nvcc")
@pytest.mark.parametrize("cfg", [INLINE[1], INLINE[2]], ids=lambda c: c.name)
def test_inline_forms_compile_without_spills(cfg, tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    m = compile_cuda(emit_tma_gemm(cfg), "sm_90a", ["--ptxas-options=-v"],
                     name=f"{cfg.name}.cu", cache=Cache(tmp_path))
    assert m.cubin[:4] == b"\x7fELF"
    if m.backend == "nvrtc":
        assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


def test_gemm_fast_path_skips_choice_and_checks_but_bad_input_raises_every_time(fake, monkeypatch):
    import _fake_cuda as fc
    from kernels.errors import LaunchError
    from kernels.nvidia import dispatch
    bf = torch.bfloat16
    a, b, out = (fc.FakeCudaTensor(s, bf) for s in ((16, 4096), (4096, 4096), (16, 4096)))
    dispatch.gemm(a, b, out)
    assert fake.launches[-1].kernel == "lg_irtma_bf16_n_64x64x64_s12_ds_ski_a16"
    seen = []
    monkeypatch.setattr(dispatch, "choose_gemm", lambda *x, **k: seen.append("choose"))
    monkeypatch.setattr(dispatch, "gemm_runner", lambda *x, **k: seen.append("runner"))
    n0 = len(fake.launches)
    a2 = fc.FakeCudaTensor((16, 4096), bf)           # a new pointer, the same key
    dispatch.gemm(a2, b, out)
    assert seen == [] and len(fake.launches) == n0 + 1
    assert fake.launches[-1].args[3] == out.data_ptr()
    monkeypatch.undo()
    fake = fc.install(monkeypatch)
    bad = fc.FakeCudaTensor((16, 4096), torch.float16)   # out of another dtype than a and b
    for _ in range(2):
        with pytest.raises(LaunchError):
            dispatch.gemm(a, b, bad)
    assert not fake.launches
