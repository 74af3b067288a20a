"""The TMA / warp-specialised / persistent wgmma GEMM on the CPU (issue 20 item 4): the TMA
swizzle model, the proofs that TMA writes where the descriptors read (and where the epilogue
writes the C buffer the TMA store reads), their planted bugs, refused configurations, the
printed source and NVRTC compiles of every form without spills or serialised wgmma."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from layoutalg import Swizzle
from layoutalg.verify._access import eval_at
from kernels.cuda.compile import kernel_names, nvcc_path, nvrtc_available
from kernels.errors import LaunchError
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.tma import (TmaOperandLoad, box_offset_expr, check_printed_offsets,
                                check_tma_against_descriptors, tensor_map_args, tma_swizzle,
                                tma_tile_addresses)
from kernels.nvidia.wgmma_tma import (TmaGemmConfig, emit_tma_gemm, kmajor_reads, mnmajor_reads,
                                      plan_tma_gemm)
from mfma_specs.nvidia_wgmma import GmmaDescriptor

HAVE_COMPILER = nvrtc_available() or nvcc_path() is not None

CONFIGS = [TmaGemmConfig(), TmaGemmConfig(dtype="bf16", stages=3),
           TmaGemmConfig(b_major="k", store="direct"), TmaGemmConfig(bn=128, stages=6),
           TmaGemmConfig(dtype="bf16", bm=64, bn=128, stages=8, store="direct", split_k=True),
           TmaGemmConfig(bm=64, bn=256, stages=5, store="direct", split_k=True, b_major="k"),
           TmaGemmConfig(bn=192, stages=3)]


# ------------------------------------------------------------------------- the TMA model

@pytest.mark.parametrize("width, bits", [(128, 3), (64, 2), (32, 1)])
def test_tma_swizzle_is_the_cute_swizzle_on_bytes(width, bits):
    """The TMA swizzle of ``width`` bytes is CuTe's Swizzle<bits, 4, 3> on byte offsets (the
    16-byte chunk XOR the row), the pattern the wgmma descriptors' swizzle modes use too."""
    o = np.arange(4 * 1024)
    want = eval_at(Swizzle(bits, 4, 3), o)
    assert np.array_equal(tma_swizzle(o, width), want)
    # a permutation of each swizzle repeat: nothing written twice
    assert np.array_equal(np.sort(tma_swizzle(np.arange(1024), width)), np.arange(1024))


def test_tile_addresses_of_a_multi_box_stage():
    ld = TmaOperandLoad(64, 256)               # B n-major: 4 boxes of (64, 64)
    addr = tma_tile_addresses(ld)
    assert addr.shape == (64, 256) and ld.boxes == 4 and ld.stage_bytes == 32768
    assert np.array_equal(np.sort(2 * (addr.reshape(-1) // 2)), np.arange(0, 32768, 2))
    assert addr[0, 64] == 8192 and addr[1, 0] == 128 + 16      # row 1: chunk 0 -> chunk 1


@pytest.mark.parametrize("kw, msg", [
    (dict(box_inner=32), "one swizzle row"), (dict(swizzle=64), "one swizzle row"),
    (dict(rows=512), "at most 256"), (dict(box_stride=9000), "swizzle repeat")])
def test_unmodelled_boxes_are_refused(kw, msg):
    with pytest.raises(GemmConfigError, match=msg):
        tma_tile_addresses(TmaOperandLoad(**{"rows": 64, "cols": 128, **kw}))


# ------------------------------------------------------------------------- the proofs

@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_plan_proofs_hold(cfg):
    p = plan_tma_gemm(cfg)
    names = {"A TMA == descriptors", "B TMA == descriptors", "stage alignment"}
    if cfg.store == "tma":
        names |= {"C buffer == TMA store", "C buffer banks"}
    assert set(p.checks) == names and all(r.holds for r in p.checks.values())
    assert p.stage_tx_bytes == cfg.a_stage + cfg.b_stage
    assert cfg.smem_bytes <= 227 * 1024


def _a_case():
    return TmaOperandLoad(128, 64), kmajor_reads("A", 64)


def _b_case():
    return TmaOperandLoad(64, 256), mnmajor_reads("B", 64, 256)


def _prove(load, op, wgs, mn):
    return check_tma_against_descriptors("t", load, op.major, op.desc, op.k_starts, op.wg_step,
                                         wgs, mn)


def test_unmutated_operands_prove():
    assert _prove(*_a_case(), 2, 64) == 2 * 4 * 64 * 16
    assert _prove(*_b_case(), 1, 256) == 4 * 256 * 16


# planted bugs: each a plausible mistake in the TMA box or the descriptor, each refused
@pytest.mark.parametrize("bug", [
    "a_sbo_512", "a_lbo_as_stride", "a_swizzle_64_desc", "a_wg_step_half", "a_kstep_16",
    "b_box_stride_16k", "b_lbo_4096", "b_sbo_2048", "b_kstep_1024", "b_kmajor_desc"])
def test_planted_descriptor_and_box_bugs_are_refused(bug):
    (la, a), (lb, b) = _a_case(), _b_case()
    if bug == "a_sbo_512":
        a = replace(a, desc=GmmaDescriptor(0, 16, 512, 128))
    elif bug == "a_lbo_as_stride":
        a = replace(a, desc=GmmaDescriptor(0, 1024, 16, 128))
    elif bug == "a_swizzle_64_desc":
        a = replace(a, desc=GmmaDescriptor(0, 16, 512, 64))
    elif bug == "a_wg_step_half":
        a = replace(a, wg_step=a.wg_step // 2)
    elif bug == "a_kstep_16":
        a = replace(a, k_starts=tuple(16 * s for s in range(4)))
    elif bug == "b_box_stride_16k":
        lb = replace(lb, box_stride=16384)
    elif bug == "b_lbo_4096":
        b = replace(b, desc=GmmaDescriptor(0, 4096, 1024, 128))
    elif bug == "b_sbo_2048":
        b = replace(b, desc=GmmaDescriptor(0, 8192, 2048, 128))
    elif bug == "b_kstep_1024":
        b = replace(b, k_starts=tuple(1024 * s for s in range(4)))
    elif bug == "b_kmajor_desc":
        b = replace(b, major="K")
    with pytest.raises(GemmConfigError, match="reads element|does not fit"):
        if bug.startswith("a"):
            _prove(la, a, 2, 64)
        else:
            _prove(lb, b, 1, 256)


def test_printed_c_offsets_are_proved_and_mutations_refused():
    ld = TmaOperandLoad(64, 256)
    text = box_offset_expr(ld, "r", "c")
    assert check_printed_offsets(ld, text) == 64 * 256
    for bad in (text.replace("& 7", "& 3"), text.replace("* 128", "* 64"),
                text.replace(">> 6", ">> 7"), text.replace("^", "|"),
                text.replace(f"* {ld.stride}", "* 4096")):
        assert bad != text
        with pytest.raises(GemmConfigError, match="printed offset"):
            check_printed_offsets(ld, bad)


def test_printed_c_offset_is_in_the_source():
    cfg = TmaGemmConfig()
    src = emit_tma_gemm(cfg)
    assert box_offset_expr(plan_tma_gemm(cfg).c_load, "r", "c") in src


@pytest.mark.parametrize("kw, msg", [
    (dict(bk=32), "bk=32"), (dict(bm=256), "bm=256"), (dict(bn=96), "bn=96"),
    (dict(stages=1), "stages=1"), (dict(stages=4), "shared memory"),
    (dict(split_k=True), "store='direct'"), (dict(store="smem"), "store="),
    (dict(arch="sm_90"), "sm_90a"), (dict(dtype="f32"), "dtype")])
def test_bad_configs_are_refused(kw, msg):
    with pytest.raises(GemmConfigError, match=msg):
        plan_tma_gemm(TmaGemmConfig(**kw))


# ------------------------------------------------------------------------- the source

@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_source_shape(cfg):
    src = emit_tma_gemm(cfg)
    p = plan_tma_gemm(cfg)
    names = (cfg.name, cfg.reduce_name) if cfg.split_k else (cfg.name,)
    assert kernel_names(src) == names
    assert f"lg_mbar_expect_tx(full, {p.stage_tx_bytes}u)" in src
    assert len(re.findall(r"^\s+lg_tma_load_2d\(", src, re.M)) == 1 + p.b_load.boxes
    assert f"lg_setmaxnreg_dec<40>" in src and "lg_setmaxnreg_inc<232>" in src
    assert f"lg_mbar_init(empty0 + 8 * s, {4 * cfg.consumers})" in src
    assert (len(re.findall(r"^\s+lg_tma_store_2d\(", src, re.M)) ==
            (cfg.bn // 64 if cfg.store == "tma" else 0))
    assert f"__launch_bounds__({cfg.threads}, 1)" in src


def test_tensor_map_args_and_refusals():
    torch = pytest.importorskip("torch")
    t = torch.empty(100, 64, dtype=torch.float16)
    assert tensor_map_args(t, 64, 128) == {"dims": (64, 100), "strides": (128,),
                                           "box": (64, 128)}
    with pytest.raises(LaunchError, match="multiple of 16"):
        tensor_map_args(torch.empty(10, 13, dtype=torch.float16), 64, 64)
    with pytest.raises(LaunchError, match="16-byte aligned base"):
        tensor_map_args(torch.empty(10, 16, dtype=torch.float16)[:, 1:], 64, 64)


@pytest.mark.skipif(not HAVE_COMPILER, reason="needs NVRTC (cuda-python) or nvcc")
def test_every_form_compiles_without_spills(tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    for cfg in CONFIGS:
        m = compile_cuda(emit_tma_gemm(cfg), "sm_90a", ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        assert m.cubin[:4] == b"\x7fELF"
        if m.backend == "nvrtc":
            assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log
