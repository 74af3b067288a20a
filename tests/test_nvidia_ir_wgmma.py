"""The cp.async + wgmma GEMM built as kernel IR (issue 20 item 1): the one verifier proves it on
sm_90a (the IR and its printed CUDA), the CUDA compiles with NVRTC, the descriptor model of the
IR is mfma_specs' one, and bad configurations are refused with the project's errors.  The
planted bugs of every wgmma rule are in tests/test_mutation_wgmma.py."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from kernels.ir.nvidia_wgmma import (GmmaOperand, WgmmaMma, WgmmaWait, operand_elements)
from kernels.ir import walk
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.wgmma import WgmmaGemmConfig, plan_wgmma_gemm
from kernels.nvidia.wgmma_ir import build_wgmma_gemm_ir
from kernels.printer.cuda import emit_cuda, smem_bytes
from kernels.verify.rules import checks_for
from kernels.verify.verifier import verify
from mfma_specs.nvidia_wgmma import GmmaDescriptor, gmma_addresses

SMALL = WgmmaGemmConfig(bm=128, bn=64, bk=32, stages=3)


@pytest.mark.parametrize("cfg,shape", [
    (SMALL, (256, 128, 128)),
    (WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"), (128, 256, 192)),
    (WgmmaGemmConfig(bm=128, bn=128, bk=16, stages=4), (128, 128, 64)),
    (WgmmaGemmConfig(), (128, 256, 128)),            # the template's default tile
], ids=lambda x: getattr(x, "name", str(x)))
def test_every_check_holds_ir_and_printed(cfg, shape):
    k = build_wgmma_gemm_ir(cfg, *shape)
    r = verify(k, arch="sm_90a", source=emit_cuda(k))
    # the same named checks, in the same order, as every GEMM (AMD, mma.sync) gets
    assert tuple(r.checks)[:len(checks_for(k.spec))] == checks_for(k.spec)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    # every wgmma of every warpgroup and k tile was simulated
    n_wg = cfg.warpgroups * (shape[2] // cfg.bk) * (cfg.bk // 16)
    assert f"({n_wg} wave-level MFMA issues" in r.checks["lane_mfma_operands"].domain


def test_operand_model_is_mfma_specs_descriptor_model():
    """The IR's vectorised operand addresses equal gmma_addresses at every start the plans
    use (both majors, every stage, k step and warpgroup)."""
    for cfg in (SMALL, WgmmaGemmConfig(bm=64, bn=128, bk=64, b_major="k")):
        p = plan_wgmma_gemm(cfg)
        for op, stage_b, mn in ((p.a, cfg.a_stage, 64), (p.b, cfg.b_stage, cfg.bn)):
            for st in range(cfg.stages):
                for ks in op.k_starts:
                    for g in range(cfg.warpgroups if op is p.a else 1):
                        start = st * stage_b + ks + g * op.wg_step
                        d = GmmaDescriptor(start, op.desc.lbo, op.desc.sbo,
                                           op.desc.swizzle_width)
                        want = gmma_addresses(d, op.major, 2, mn, 16) // 2
                        got = operand_elements(GmmaOperand("s", 0, op.desc, op.major, mn),
                                               start // 2)
                        assert np.array_equal(got, want)


def test_operand_start_off_the_swizzle_pattern_is_refused():
    p = plan_wgmma_gemm(SMALL)
    op = GmmaOperand("sA", 0, p.a.desc, "K", 64)
    with pytest.raises(ValueError, match="8-row pattern"):
        operand_elements(op, 64)          # 128 bytes: row bits 1 of a 64-byte swizzle
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        operand_elements(op, 3)


def test_printed_cuda_shape():
    k = build_wgmma_gemm_ir(SMALL, 256, 128, 128)
    src = emit_cuda(k)
    assert src.count("lg_wgmma_m64n64_f16_t1(&acc[0], lg_gmma_desc(") == 2   # bk 32: 2 k steps
    assert "lg_wgmma_wait<1>();\n    lg_pin(acc);" in src
    assert "lg_fence_proxy_async();\n    __syncthreads();\n    lg_wgmma_fence();" in src
    assert "cp_stage" not in src                      # the staging frag is virtual
    # 1024-aligned arrays carved from a base rounded up to 1024 (plus that slack)
    assert smem_bytes(k) == 3 * (SMALL.a_stage + SMALL.b_stage) + 1024
    assert "lg_smem_raw" in src


def test_nvrtc_compiles():
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    for cfg in (SMALL, WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16",
                                       b_major="k")):
        k = build_wgmma_gemm_ir(cfg, 256, 256, 128)
        m = compile_cuda(emit_cuda(k), "sm_90a", name=f"{k.name}.cu", backend="nvrtc")
        assert m.kernels == (k.name,)


@pytest.mark.parametrize("cfg,shape,msg", [
    (SMALL, (100, 128, 128), "multiple of its tile"),
    (SMALL, (256, 128, 48), "multiple of its tile"),
    (WgmmaGemmConfig(split_k=True), (128, 256, 128), "no split-K form"),
])
def test_refuses_what_it_does_not_build(cfg, shape, msg):
    with pytest.raises(GemmConfigError, match=msg):
        build_wgmma_gemm_ir(cfg, *shape)


def test_statement_constructors_refuse_bad_input():
    k = build_wgmma_gemm_ir(SMALL, 256, 128, 128)
    w = next(s for s in walk(k.body) if isinstance(s, WgmmaMma))
    with pytest.raises(ValueError, match="f32 registers"):
        WgmmaMma(w.atom, w.acc.frag.regs(range(4)), w.a, w.b)
    with pytest.raises(ValueError, match="64 x 16 K-major"):
        WgmmaMma(w.atom, w.acc, w.b, w.a)
    with pytest.raises(ValueError, match="start 0"):
        GmmaOperand("sA", sympy.Integer(0), GmmaDescriptor(16, 16, 1024, 128), "K", 64)
    with pytest.raises(ValueError, match="0..7"):
        WgmmaWait(8)
