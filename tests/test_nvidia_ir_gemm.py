"""The mma.sync GEMM built as kernel IR (issue 20 item 1): the one verifier proves it on the
sm_90 target, its CUDA compiles with NVRTC, and every rule the NVIDIA statements brought
(cp.async groups, ldmatrix lane exchange, mma.sync lanes, the 32-bank model, the sm_90
shared-memory capacity) refuses a planted bug by its named check."""

from __future__ import annotations

import copy

import pytest
import sympy

from kernels.errors import KernelError
from kernels.ir import Barrier, If, Let, Loop, Mfma, Shared, sym, walk
from kernels.ir.nvidia import CpAsync, CpAsyncWait, LdMatrixLoad
from kernels.nvidia.gemm import CudaGemmConfig, GemmConfigError
from kernels.nvidia.gemm_ir import build_mma_gemm_ir
from kernels.printer.cuda import emit_cuda, smem_bytes
from kernels.verify.rules import checks_for
from kernels.verify.verifier import verify
from mfma_specs.nvidia import ldmatrix

SMALL = CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3)


def _ir(cfg=SMALL, m=128, n=128, k=128):
    return build_mma_gemm_ir(cfg, m, n, k)


def _failed(k, arch="sm_90"):
    r = verify(k, arch=arch)
    return {n for n, c in r.checks.items() if not c.holds}, r


@pytest.mark.parametrize("cfg,shape", [
    (SMALL, (128, 128, 128)),
    (CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3, dtype="bf16",
                    b_major="k"), (64, 128, 96)),
    (CudaGemmConfig(bm=64, bn=128, bk=32, warps_m=2, warps_n=2, stages=2, vec=4), (64, 128, 64)),
    (CudaGemmConfig(), (128, 256, 64)),            # the template's default tile, 4 stages
], ids=lambda x: getattr(x, "name", str(x)))
def test_every_check_holds(cfg, shape):
    k = build_mma_gemm_ir(cfg, *shape)
    r = verify(k, arch="sm_90")
    # the same named checks, in the same order, as an AMD GEMM gets
    assert tuple(r.checks) == checks_for(k.spec)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert r.details["bank_worst_ways"] == {"read": 1, "write": 1}
    assert "sm_90" in r.checks["bank_conflicts_lds_read"].domain


def test_printed_cuda_shape():
    k = _ir()
    src = emit_cuda(k)
    # bk 32 = 2 k steps; 2 A tiles (x4 each) and 2 pairs of n8 B tiles per warp and k step
    assert src.count("lg_ldmatrix_x4_trans(bf[") == 4 and src.count("lg_ldmatrix_x4(af[") == 4
    assert "lg_cp_async_wait<1>();" in src and "__syncthreads();" in src
    assert "lg_mma_f16(&acc[" in src and "cp_stage" not in src   # the staging frag is virtual
    assert smem_bytes(k) == 3 * (64 * 32 + 32 * 64) * 2


def test_nvrtc_compiles():
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    for cfg in (SMALL, CudaGemmConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3,
                                      dtype="bf16", b_major="k")):
        k = _ir(cfg)
        m = compile_cuda(emit_cuda(k), "sm_90", name=f"{k.name}.cu", backend="nvrtc")
        assert m.kernels == (k.name,)


def test_refuses_ragged_sizes():
    with pytest.raises(GemmConfigError, match="multiple of its tile"):
        _ir(m=100)


# ---------------------------------------------------------------------------- planted bugs

def _loop(k):
    return next(s for s in k.body if isinstance(s, Loop))


def test_missing_wait_is_a_race():
    k = _ir()
    body = _loop(k).body
    body[:] = [s for s in body if not isinstance(s, CpAsyncWait)]
    failed, r = _failed(k)
    # the stale tile then also breaks the operands: the first counterexample is the race
    assert "lds_races" in failed and failed <= {"lds_races", "lane_mfma_operands",
                                                "lane_accumulator_writeback"}
    assert "in flight" in r.checks["lds_races"].counterexample


def test_too_lax_wait_is_a_race():
    k = _ir()
    for s in _loop(k).body:
        if isinstance(s, CpAsyncWait):
            s.pending += 1            # the newest tile's group may still be in flight
    failed, r = _failed(k)
    assert "lds_races" in failed and "in flight" in r.checks["lds_races"].counterexample


def test_missing_barrier_is_a_race():
    k = _ir()
    body = _loop(k).body
    body[:] = [s for s in body if not isinstance(s, Barrier)]
    failed, r = _failed(k)
    assert failed == {"lds_races"}
    assert "without a barrier" in r.checks["lds_races"].counterexample or \
        "since the last barrier" in r.checks["lds_races"].counterexample


def test_ldmatrix_without_trans_breaks_the_lanes():
    k = _ir()
    for s in walk(k.body):
        if isinstance(s, LdMatrixLoad) and s.buf == "sB":
            s.atom = ldmatrix(4, not s.atom.trans)
    failed, r = _failed(k)
    assert "lane_mfma_operands" in failed and not failed & {"lds_races", "emitted_index_math",
                                                            "bank_conflicts_lds_read"}
    assert "mixes B columns" in r.checks["lane_mfma_operands"].counterexample or \
        "disagree on k" in r.checks["lane_mfma_operands"].counterexample


def test_mma_on_the_wrong_k_step_is_refused():
    k = _ir()
    mm = {s.tag: s for s in walk(k.body) if isinstance(s, Mfma)}
    mm["mma(k1,m0,n0)"].b = mm["mma(k0,m0,n0)"].b      # k step 1 A times k step 0 B
    failed, r = _failed(k)
    assert "lane_mfma_operands" in failed
    assert "disagree on k" in r.checks["lane_mfma_operands"].counterexample


def test_printed_offset_without_swizzle_is_refused():
    k = _ir()
    lets = {s.name: s for s in walk(k.body) if isinstance(s, Let)}
    for s in walk(k.body):
        if isinstance(s, LdMatrixLoad) and s.buf == "sA":
            s.offset = next(iter(sympy.sympify(s.offset).free_symbols & {sym(n) for n in lets}))
            break
    assert "emitted_index_math" in _failed(k)[0]


def test_unswizzled_tile_has_bank_conflicts():
    k = _ir()
    lets = {sym(s.name) for s in walk(k.body) if isinstance(s, Let)}
    for s in walk(k.body):            # drop the swizzle from offsets and layouts alike
        if hasattr(s, "space") and s.space == "lds":
            s.offset = next(iter(sympy.sympify(s.offset).free_symbols & lets))
            s.origin = s.origin.inner
    failed, r = _failed(k)
    assert "bank_conflicts_lds_read" in failed
    assert "ldmatrix" in r.checks["bank_conflicts_lds_read"].counterexample
    assert "emitted_index_math" not in failed


def test_wrong_global_offset_is_refused():
    k = _ir()
    cp = next(s for s in walk(k.body) if isinstance(s, CpAsync))
    cp.load.offset = cp.load.offset + 8
    assert "emitted_index_math" in _failed(k)[0]


def test_store_to_the_wrong_column_is_refused():
    k = _ir()
    st = [s for s in k.body if getattr(s, "tag", "") == "C.store"]
    st[0].regs, st[1].regs = st[1].regs, st[0].regs
    assert "lane_accumulator_writeback" in _failed(k)[0]


def test_dropped_copy_is_refused():
    k = _ir()
    loop = _loop(k)
    guarded = next(s for s in loop.body if isinstance(s, If))
    guarded.body[:] = [s for s in guarded.body if not (isinstance(s, CpAsync) and
                                                       s.load.buf == "A")]
    failed, _ = _failed(k)
    assert failed & {"lds_races", "lane_mfma_operands", "lane_accumulator_writeback"}


def test_shared_memory_capacity_of_the_target():
    k = _ir()
    k.shared = [Shared(s.name, s.dtype, s.count * 40) for s in k.shared]
    failed, r = _failed(k)
    assert "lds_capacity" in failed and "sm_90" in r.checks["lds_capacity"].counterexample
    with pytest.raises(KernelError, match="no shared-memory capacity"):
        verify(_ir(), arch="sm_75")


def test_amd_scheduling_statements_are_refused_by_the_cuda_printer():
    from kernels.ir import SchedBarrier
    k = _ir()
    k.body.insert(0, SchedBarrier())
    with pytest.raises(TypeError, match="AMD scheduling statement"):
        emit_cuda(k)


def test_the_ir_survives_a_deep_copy():     # mutations above rely on fresh IR per test
    k = _ir()
    k2 = copy.deepcopy(k)
    assert verify(k2, arch="sm_90").holds


# ---------------------------------------------------------------------------- the printed CUDA

def _printed_failures(src, k=None):
    from kernels.verify.printed import verify_printed
    k = k or _ir()
    r = verify_printed(k, src)
    return {n for n, c in r.items() if not c.holds}, r


def test_printed_cuda_passes_every_printed_check():
    k = _ir()
    r = verify(k, arch="sm_90", source=emit_cuda(k))
    assert {"printed_source", "declarations", "index_ranges"} <= set(r.checks)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def _sub(src, old, new, count=1):
    assert old in src, old
    return src.replace(old, new, count)


@pytest.mark.parametrize("old,new,check", [
    # the ldmatrix address printed without its swizzle
    ("lg_ldmatrix_x4(af[0], af[1], af[2], af[3], lg_smem_u32(sA + (((sa_13) ^ (8*(((((sa_13) "
     "/ 64)) % 4))))))", "lg_ldmatrix_x4(af[0], af[1], af[2], af[3], lg_smem_u32(sA + (sa_13))",
     "printed_source"),
    ("lg_cp_async_wait<1>();", "lg_cp_async_wait<2>();", "printed_source"),
    ("lg_ldmatrix_x4_trans(bf[0]", "lg_ldmatrix_x4(bf[0]", "printed_source"),
    ("lg_mma_f16(&acc[0], &af[0], &bf[0]);", "lg_mma_f16(&acc[0], &af[0], &bf[2]);",
     "printed_source"),
    ("lg_mma_f16(&acc[0]", "lg_mma_bf16(&acc[0]", "printed_source"),
    ("lg_pack_f16x2(acc[0], acc[1])", "lg_pack_bf16x2(acc[0], acc[1])", "printed_source"),
    ("lg_pack_f16x2(acc[0], acc[1])", "lg_pack_f16x2(acc[1], acc[0])", "printed_source"),
    ("lg_u32 af[16];", "lg_u32 af[8];", "declarations"),
    ("lg_smem + 12288", "lg_smem + 4096", "declarations"),          # sB overlaps sA
    ("__launch_bounds__(128)", "__launch_bounds__(256)", "declarations"),
    ("for (int i = 0; i < 32; ++i) acc[i] = 0.f;", "for (int i = 0; i < 16; ++i) acc[i] = 0.f;",
     "declarations"),
    ("const int block_n = blockIdx.y;", "const int block_n = blockIdx.x;", "declarations"),
])
def test_printed_cuda_mutations_are_refused(old, new, check):
    src = _sub(emit_cuda(_ir()), old, new)
    failed, r = _printed_failures(src)
    assert check in failed, {n: c.counterexample for n, c in r.items()}


def test_dropped_cp_async_line_is_refused():
    src = emit_cuda(_ir())
    line = next(ln for ln in src.split("\n") if "lg_cp_async16(" in ln and "sB" in ln and
                "sb_11" in ln)
    failed, _ = _printed_failures(src.replace(line + "\n", ""))
    assert "printed_source" in failed


def test_an_int_overflowing_problem_is_refused_by_index_ranges():
    k = build_mma_gemm_ir(CudaGemmConfig(bm=128, bn=256, bk=32, warps_m=2, warps_n=4), 65536,
                          65536, 32)
    failed, r = _printed_failures(emit_cuda(k), k)
    assert failed == {"index_ranges"}, {n: c.counterexample for n, c in r.items()}
