"""NVIDIA kernel builders on the CPU: plans and their proofs, refusals, printed address math,
offline compilation (nvcc or NVRTC when present) and launch validation without a GPU."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import layoutalg as la
from kernels.cuda import layout_c as lc
from kernels.cuda.compile import compile_cuda, kernel_names, nvcc_path, nvrtc_available
from kernels.cuda_attention import (AttentionConfigError, DecodeConfig, FlashConfig, emit_decode,
                                    emit_flash, plan_flash)
from kernels.cuda_gemm import (CudaGemm, CudaGemmConfig, GemmConfigError, emit_gemm,
                               plan_gemm)
from kernels.errors import CompileError, LaunchError
from kernels.nvidia.gemm import swz_split

HAVE_COMPILER = nvcc_path() is not None or nvrtc_available()


@pytest.mark.parametrize("cfg", [
    CudaGemmConfig(), CudaGemmConfig(dtype="bf16", b_major="k"),
    CudaGemmConfig(bk=64, stages=3), CudaGemmConfig(vec=2),
    CudaGemmConfig(bm=128, bn=128, warps_m=2, warps_n=2, vec=4, b_major="k"),
], ids=lambda c: c.name)
def test_gemm_plan_proofs_hold(cfg):
    p = plan_gemm(cfg)
    names = set(p.checks)
    assert {"A cp.async banks", "A ldmatrix banks", "B cp.async banks", "B ldmatrix banks",
            "A copy coverage", "B copy coverage", "A lanes", "B lanes (n8 tile 0)",
            "B lanes (n8 tile 1)"} <= names
    assert all(r.holds for r in p.checks.values())
    assert p.checks["A ldmatrix banks"].max_ways == 1
    src = emit_gemm(cfg)
    assert kernel_names(src) == (cfg.name,)
    assert "mma.sync.aligned.m16n8k16.row.col.f32." + cfg.dtype in src


def test_gemm_default_swizzles():
    p = plan_gemm(CudaGemmConfig())
    # 64-byte A rows need 2 XOR bits, 512-byte B rows 3 bits from row bits 0-2
    assert (p.sw_a.bits, p.sw_a.base, p.sw_a.shift) == (2, 3, 3)
    assert (p.sw_b.bits, p.sw_b.base, p.sw_b.shift) == (3, 3, 5)


@pytest.mark.parametrize("kw,msg", [
    (dict(dtype="f32"), "dtype"), (dict(b_major="m"), "b_major"), (dict(bk=24), "power of two"),
    (dict(bm=64, warps_m=8), "multiple of 16"), (dict(vec=3), "vec"),
    (dict(bk=64, stages=8), "shared memory"), (dict(warps_m=8, warps_n=8), "1024"),
])
def test_gemm_bad_configs(kw, msg):
    with pytest.raises(GemmConfigError, match=msg):
        plan_gemm(CudaGemmConfig(**kw))


@pytest.mark.parametrize("cfg", [FlashConfig(), FlashConfig(causal=True, dtype="bf16"),
                                 FlashConfig(head_dim=64), FlashConfig(head_dim=256, bm=64, bn=32),
                                 FlashConfig(bm=128, warps=8, q_in_regs=True)],
                         ids=lambda c: c.name)
def test_flash_plan_proofs_hold(cfg):
    p = plan_flash(cfg)
    assert all(r.holds for r in p.checks.values())
    assert any(k.startswith("V lanes") for k in p.checks)
    src = emit_flash(cfg)
    assert kernel_names(src) == (cfg.name,)
    assert ("c > r" in src) == cfg.causal


def test_flash_bad_configs():
    with pytest.raises(AttentionConfigError, match="head_dim"):
        plan_flash(FlashConfig(head_dim=96))
    with pytest.raises(AttentionConfigError, match="rows per warp"):
        plan_flash(FlashConfig(bm=256, warps=4))
    with pytest.raises(AttentionConfigError, match="q_in_regs"):
        plan_flash(FlashConfig(q_in_regs=True))
    with pytest.raises(AttentionConfigError, match="shared memory"):
        plan_flash(FlashConfig(head_dim=256, bm=128, bn=128, warps=8))


def test_decode_source():
    src = emit_decode(DecodeConfig(head_dim=256, chunk=8))
    assert kernel_names(src) == ("lg_decode_bf16_f16_d256_c8_w8",)
    assert src.count("__shfl_xor_sync") == 5      # 32 lanes per row: 5 butterfly steps
    assert "ld.global.nc.L1::no_allocate.v4.u32" in src


def test_printed_expressions_are_checked():
    lane = lc.sym("lane")
    layout = la.Layout(((8, 2, 2), 8), ((64, 512, 8), 1))
    e = lc.expr(layout, (lane, 0))
    lc.check_printed(e, lambda env: np.array([layout((int(l), 0)) for l in env[lane]]),
                     {lane: 32}, "ok")
    with pytest.raises(AssertionError, match="printed expression"):
        lc.check_printed(e + 1, lambda env: np.array([layout((int(l), 0)) for l in env[lane]]),
                         {lane: 32}, "off by one")
    sw = la.Swizzle(3, 3, 4)
    x = lc.sym("x")
    se = lc.swizzle_expr(sw, x)
    lc.check_printed(se, lambda env: np.array([sw(int(v)) for v in env[x]]), {x: 4096}, "swz")


def test_swizzle_split_is_exact():
    sw = la.Swizzle(3, 3, 4)
    bases = np.array([r * 128 + 8 * h for r in range(64) for h in range(2)])
    assert swz_split(sw, bases, 16 * 3) == (48, 0)          # k step: XOR into the chunk bits
    assert swz_split(sw, bases, 16 * 128) == (0, 2048)      # 16 rows on: a plain add
    assert swz_split(sw, bases, 128) is None                 # one row: changes the XOR pattern


@pytest.mark.skipif(not HAVE_COMPILER, reason="needs nvcc or NVRTC (cuda-python)")
def test_generated_kernels_compile_offline(tmp_path):
    from kernels.cache import Cache
    cache = Cache(tmp_path)
    for src, name in ((emit_gemm(CudaGemmConfig(dtype="bf16")), "gemm.cu"),
                      (emit_flash(FlashConfig(causal=True)), "flash.cu"),
                      (emit_decode(DecodeConfig()), "decode.cu")):
        m = compile_cuda(src, "sm_90", name=name, cache=cache)
        assert m.cubin[:4] == b"\x7fELF" and m.kernels == kernel_names(src)
        assert compile_cuda(src, "sm_90", name=name, cache=cache).cache_status == "hit"


@pytest.mark.skipif(not HAVE_COMPILER, reason="needs nvcc or NVRTC (cuda-python)")
def test_compile_error_quotes_the_line():
    src = 'extern "C" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n'
    with pytest.raises(CompileError) as e:
        compile_cuda(src, "sm_90", name="bad.cu", use_cache=False)
    assert e.value.diagnostics and e.value.diagnostics[0].line == 2
    assert "undefined_name" in str(e.value)


def test_launch_validation_without_gpu():
    torch = pytest.importorskip("torch")
    from kernels.cuda_gemm import gemm
    a = torch.randn(64, 32, dtype=torch.float16)
    b = torch.randn(32, 48, dtype=torch.float16)
    with pytest.raises(LaunchError, match="NVIDIA GPU"):
        gemm(a, b)
    with pytest.raises(LaunchError, match="must be"):
        CudaGemm(CudaGemmConfig()).check_args(a, torch.randn(30, 48, dtype=torch.float16))
    with pytest.raises(LaunchError, match="dtype"):
        CudaGemm(CudaGemmConfig(dtype="bf16")).check_args(a, b)
    with pytest.raises(LaunchError, match="float16 or bfloat16"):
        gemm(a.float(), b.float())
    from kernels.cuda_attention import decode_attention, flash_attention
    q = torch.randn(1, 2, 16, 128, dtype=torch.float16)
    with pytest.raises(LaunchError, match="NVIDIA GPU"):
        flash_attention(q, q, q)
    # CPU tensors are refused before any argument check that needs the built kernel (the
    # device first: tests/test_nvidia_no_gpu.py); those checks on a pretend GPU below
    with pytest.raises(LaunchError, match="NVIDIA GPU"):
        flash_attention(q, q, q, scale=-1.0)
    with pytest.raises(LaunchError, match="head_dim"):      # the one-pass template's own call
        decode_attention(q[:, :, :1, :64].contiguous(), q, q)


def test_attention_argument_checks_on_a_pretend_gpu(monkeypatch):
    pytest.importorskip("torch")
    import torch
    import _fake_cuda as fc
    from kernels.cuda_attention import flash_attention
    from kernels.nvidia import dispatch
    fc.install(monkeypatch)
    try:
        q = fc.FakeCudaTensor((1, 2, 16, 128), torch.float16)
        k3 = fc.FakeCudaTensor((1, 3, 16, 128), torch.float16)
        with pytest.raises(LaunchError, match="GQA"):
            flash_attention(q, k3, k3)
        with pytest.raises(LaunchError, match="scale"):
            flash_attention(q, q, q, scale=-1.0)
        with pytest.raises(LaunchError, match="head_dim"):
            dispatch.decode_attention(fc.FakeCudaTensor((1, 2, 1, 64), torch.float16), q, q)
    finally:
        fc.clear_caches()
