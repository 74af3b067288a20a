"""The TMA GEMM's forms for skinny problems on the CPU (issue 20, the rows furthest below
cuBLAS): short A boxes (``a_rows``), two CTAs per SM (``ctas_per_sm``), their proofs, planted
bugs and refusals, the printed source and NVRTC compiles without spills; the padding copy's
wide element type."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernels.cuda.compile import nvcc_path, nvrtc_available
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.tma import TmaOperandLoad
from kernels.nvidia.wgmma_tma import (REGISTER_FILE, PRODUCER_REGS, TmaGemmConfig,
                                      check_short_a_box, emit_tma_gemm, plan_tma_gemm)

HAVE_COMPILER = nvrtc_available() or nvcc_path() is not None

SKINNY = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=12, store="direct", split_k=True,
                       reduce="inline")


@pytest.mark.parametrize("a_rows", [8, 16, 32])
@pytest.mark.parametrize("base", [SKINNY, replace(SKINNY, bn=128, stages=8, b_major="k")],
                         ids=lambda c: c.name)
def test_short_a_box_is_proved_and_printed(base, a_rows):
    cfg = replace(base, a_rows=a_rows)
    p = plan_tma_gemm(cfg)
    assert p.checks["A short box"].holds and p.checks["A TMA == descriptors"].holds
    assert (p.a_load.rows, p.a_load.cols) == (a_rows, 64)
    # expect_tx counts the short box (a 64-row count would never complete: a hang)
    assert p.stage_tx_bytes == a_rows * 128 + cfg.b_stage
    src = emit_tma_gemm(cfg)
    assert f"lg_mbar_expect_tx(full, {p.stage_tx_bytes}u)" in src
    assert cfg.name.endswith(f"_a{a_rows}") and cfg.a_box_rows == a_rows
    # the stage keeps the whole tile: the wgmma reads 64 rows inside it
    assert cfg.a_stage == 64 * 64 * 2 and cfg.smem_bytes == replace(cfg, a_rows=0).smem_bytes


def test_whole_box_source_is_unchanged_by_the_new_fields():
    """a_rows=0 and ctas_per_sm=1 are the template as before (the golden sources hash it)."""
    src = emit_tma_gemm(SKINNY)
    assert "__launch_bounds__(256, 1)" in src and "lg_setmaxnreg_inc<232>" in src
    assert SKINNY.name == "lg_wgmma_tma_bf16_n_64x64x64_s12_ds_ski"


@pytest.mark.parametrize("bad, msg", [
    (TmaOperandLoad(16, 64), "does not write where"),      # a 16-row box for a_rows=32
    (TmaOperandLoad(32, 128), "does not write where"),     # two boxes side by side
])
def test_planted_short_box_bugs_are_refused(bad, msg):
    with pytest.raises(GemmConfigError, match=msg):
        check_short_a_box(replace(SKINNY, a_rows=32), bad)


def test_planted_short_box_past_the_stage_is_refused(monkeypatch):
    """A box model (short and whole alike) that lands past the A stage is refused: the wgmma
    would read the next stage, or B's, as A."""
    import kernels.nvidia.wgmma_tma as W
    real = W.tma_tile_addresses
    cfg = replace(SKINNY, a_rows=16)
    monkeypatch.setattr(W, "tma_tile_addresses", lambda load: real(load) + cfg.a_stage)
    with pytest.raises(GemmConfigError, match="past its stage"):
        check_short_a_box(cfg, TmaOperandLoad(16, 64))


@pytest.mark.parametrize("kw, msg", [
    (dict(bm=128, stages=4, a_rows=16), "one consumer"), (dict(a_rows=12), "a_rows=12"),
    (dict(a_rows=64), "a_rows=64"),
    (dict(ctas_per_sm=3), "ctas_per_sm=3"), (dict(bm=128, stages=4, ctas_per_sm=2), "register"),
    (dict(ctas_per_sm=2), "228 KiB")])          # 12 stages of 16 KiB, twice
def test_bad_skinny_configs_are_refused(kw, msg):
    with pytest.raises(GemmConfigError, match=msg):
        plan_tma_gemm(replace(SKINNY, **kw))


@pytest.mark.parametrize("bn, stages", [(64, 6), (128, 4)])
def test_two_ctas_per_sm_share_the_register_file(bn, stages):
    cfg = replace(SKINNY, bn=bn, stages=stages, ctas_per_sm=2)
    plan_tma_gemm(cfg)
    src = emit_tma_gemm(cfg)
    assert "__launch_bounds__(256, 2)" in src and f"lg_setmaxnreg_inc<{cfg.consumer_regs}>" in src
    # producer + consumer warpgroups within half the register file; setmaxnreg counts are
    # multiples of 8; the consumer keeps its bn / 2 accumulators with room to spare
    assert 128 * PRODUCER_REGS + 128 * cfg.consumer_regs <= REGISTER_FILE // 2
    assert cfg.consumer_regs == 216 and cfg.consumer_regs % 8 == 0
    assert 2 * (cfg.smem_bytes + 2048) <= 228 * 1024 and cfg.name.endswith("_c2")


@pytest.mark.skipif(not HAVE_COMPILER, reason="needs NVRTC (cuda-python) or nvcc")
def test_skinny_forms_compile_without_spills(tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    for cfg in (replace(SKINNY, a_rows=16), replace(SKINNY, bn=128, stages=8, a_rows=8,
                                                     dtype="f16", b_major="k"),
                replace(SKINNY, stages=6, ctas_per_sm=2),
                replace(SKINNY, bn=128, stages=4, ctas_per_sm=2, a_rows=32)):
        m = compile_cuda(emit_tma_gemm(cfg), "sm_90a", ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        assert m.cubin[:4] == b"\x7fELF"
        if m.backend == "nvrtc":
            assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log
            if cfg.ctas_per_sm == 2:    # what launch gives each thread: 64K / (256 x 2)
                assert "Used 128 registers" in m.log, m.log


def test_wide_copy_dtype_of_rows():
    torch = pytest.importorskip("torch")
    from kernels.nvidia.wgmma_tma import tma_padded, wide_copy_dtype
    t = torch.randn(6, 3000).to(torch.float16)
    assert wide_copy_dtype(t) is torch.int64
    assert wide_copy_dtype(torch.randn(6, 130).to(torch.float16)) is torch.int32
    assert wide_copy_dtype(torch.randn(6, 333).to(torch.float16)) is None
    assert wide_copy_dtype(t[:, 1:]) is None                 # offset by one element
    assert wide_copy_dtype(t[:, 2:]) is torch.int32
    for x in (t, t[:, 1:], t[:, 2:], t[1:], torch.randn(5, 333).to(torch.bfloat16)):
        p = tma_padded(x, 128)
        assert (p.stride(0) * 2) % 128 == 0 and torch.equal(p.view(torch.int16),
                                                             x.view(torch.int16))


def test_ir_form_builds_two_ctas_per_sm():
    """Two CTAs per SM are a builder option of the IR-built TMA GEMM (launch bounds 2, the
    consumers' setmaxnreg share of half the file; tests/test_nvidia_ir_tma_two_ctas.py proves
    them and plants bugs): the builder no longer refuses the form."""
    from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
    cfg = TmaGemmConfig(dtype="bf16", bm=64, stages=3, bn=128, ctas_per_sm=2)
    plan_tma_gemm(cfg)
    assert build_tma_gemm_ir(cfg).min_blocks == 2


def test_row_copier_copies_each_source_of_the_key_bitwise():
    """row_copier (issue 20: the padded GEMM's copy with its width decided once): for each
    source shaped like the one it was made for (8-byte, 4-byte and 2-byte elements), every
    call leaves exactly that source's bits in the padded buffer, NaN payloads included."""
    torch = pytest.importorskip("torch")
    from kernels.nvidia.wgmma_tma import padded_empty, row_copier, wide_copy_dtype
    base = torch.randn(7, 260).to(torch.bfloat16)
    for x, wide in ((base[:, :256], torch.int64), (base[:, 2:258], torch.int32),
                    (base[:, 1:256], None)):
        assert wide_copy_dtype(x) is wide
        dst = padded_empty(x, 128)
        copy = row_copier(dst, x)
        for _ in range(2):
            src = torch.randn(7, 260).to(torch.bfloat16)
            src.view(torch.int16)[0, :4] = torch.tensor([0x7fc1, -1, 0x7f81, 0xff],
                                                        dtype=torch.int16)
            s = src[:, 2:258] if wide is torch.int32 else src[:, 1:256] if wide is None \
                else src[:, :256]
            copy(s)
            assert torch.equal(dst.view(torch.int16), s.view(torch.int16))
