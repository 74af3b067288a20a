"""kernels.emulator: the exact kernel source executed on the CPU, checked against numpy/torch.

MFMA builtins are checked against numpy matmuls with operands placed by AMD's Matrix
Instruction Calculator lane maps (the committed oracle, independent of mfma_specs, from which
the emulator's semantics are generated).  Needs a host C++ compiler (clang-19): skipped without
one, except under CI=true where the tests fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mfma_specs
from _mfma_oracle import entries, oracle
from kernels import Cache, EmulatorError, KernelError, LaunchError
from kernels.emulator import build, run
from kernels.emulator import mfma_gen, runner
from kernels.launch import TensorSpec
from kernels.testkernels import (MFMA_16x16x16_F16_MAPS, VECTOR_ADD, c_to_python, gemm_source,
                                 mfma_16x16x16_f16_source, require)


@pytest.fixture(scope="module", autouse=True)
def host():
    return require("host")


# ------------------------------------------------------------------ basic execution

def test_vector_add_numpy_and_torch():
    n = 1000  # not a multiple of the block: the tail threads take the i >= n path
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    res = run(VECTOR_ADD, "vector_add", (n + 255) // 256, 256, [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)                 # written back in place
    np.testing.assert_array_equal(res.outputs[2], a + b)
    assert res.outputs[3] is None
    assert res.stats["blocks"] == 4 and res.stats["barriers"] == 4
    ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.zeros(n)
    run(VECTOR_ADD, "vector_add", 4, 256, [ta, tb, tc, n], workers=1)
    torch.testing.assert_close(tc, ta + tb, rtol=0, atol=0)


def test_indices_2d_grid_3d_block_and_dynamic_lds():
    src = r"""#include "lagen_hip.h"
LAGEN_KERNEL void ids(unsigned* out, int words) {
  LAGEN_DYNAMIC_SHARED(unsigned, dyn);
  LAGEN_SHARED(unsigned, stat, 64);
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  if (t < (unsigned)words) dyn[t] = t * 3;
  stat[t] = lagen_wave_id() * 1000 + lagen_lane_id();
  __syncthreads();
  unsigned* o = out + 4 * (b * 64 + t);
  o[0] = threadIdx.x | (threadIdx.y << 8) | (threadIdx.z << 16);
  o[1] = blockIdx.x | (blockIdx.y << 8);
  o[2] = t < (unsigned)words ? dyn[(t + 1) % words] : 0u;
  o[3] = stat[63 - t];
}
"""
    out = np.zeros((6, 64, 4), np.uint32)
    run(src, "ids", (3, 2), (4, 4, 4), [out, 16], lds_bytes=64)
    t = np.arange(64)
    tx, ty, tz = t % 4, (t // 4) % 4, t // 16
    for b in range(6):
        assert (out[b, :, 0] == tx | (ty << 8) | (tz << 16)).all()
        assert (out[b, :, 1] == (b % 3) | ((b // 3) << 8)).all()
        assert (out[b, :16, 2] == ((t[:16] + 1) % 16) * 3).all()
        assert (out[b, :, 3] == 63 - t).all()   # one wave: wave id 0, lane = flat id


def test_cross_lane_builtins():
    src = r"""#include "lagen_hip.h"
LAGEN_KERNEL void xl(const int* in, int* out, unsigned long long* bal) {
  const unsigned t = threadIdx.x;
  const int v = in[t];
  int* o = out + 8 * t;
  o[0] = __builtin_amdgcn_ds_swizzle(v, 0x041f);          // xor 1
  o[1] = __builtin_amdgcn_ds_swizzle(v, 0x401f);          // xor 16
  o[2] = __builtin_amdgcn_ds_swizzle(v, 0x0018 | (3 << 5)); // and 0x18, or 3: broadcast in 8s
  o[3] = __builtin_amdgcn_ds_swizzle(v, 0x8000 | 0x1b);   // quad permute (3,2,1,0)
  o[4] = __builtin_amdgcn_ds_bpermute((int)((t * 7 + 3) % 64) * 4, v);
  o[5] = __builtin_amdgcn_readfirstlane(v);
  o[6] = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  __builtin_amdgcn_wave_barrier();
  o[7] = (int)lagen_lane_id();
  bal[t] = __builtin_amdgcn_ballot_w64(v % 3 == 0);
}
"""
    inp = (np.arange(64, dtype=np.int32) * 5 + 7)
    out = np.zeros((64, 8), np.int32)
    bal = np.zeros(64, np.uint64)
    run(src, "xl", 1, 64, [inp, out, bal])
    i = np.arange(64)
    half = i & 0x20
    assert (out[:, 0] == inp[i ^ 1]).all()
    assert (out[:, 1] == inp[i ^ 16]).all()
    assert (out[:, 2] == inp[half | (((i & 0x1f) & 0x18) | 3)]).all()
    assert (out[:, 3] == inp[(i & ~3) | (3 - (i & 3))]).all()
    assert (out[:, 4] == inp[(i * 7 + 3) % 64]).all()
    assert (out[:, 5] == inp[0]).all()
    assert (out[:, 6] == i).all() and (out[:, 7] == i).all()
    assert int(bal[0]) == sum(1 << int(k) for k in i if inp[k] % 3 == 0) and (bal == bal[0]).all()


# ------------------------------------------------------------------ MFMA semantics

MFMA_SRC = r"""#include "lagen_hip.h"
// one wave: lane l passes its register images a[l], b[l], c[l] and stores d[l]
#define MFMA_TEST(NAME, BUILTIN, TA, TB, TC) \
LAGEN_KERNEL void NAME(const TA* a, const TB* b, const TC* c, TC* d) { \
  const unsigned l = threadIdx.x; d[l] = BUILTIN(a[l], b[l], c[l], 0, 0, 0); }
MFMA_TEST(t_f32_16x16x16f16, __builtin_amdgcn_mfma_f32_16x16x16f16, lagen_f16x4, lagen_f16x4, lagen_f32x4)
MFMA_TEST(t_f32_32x32x8f16, __builtin_amdgcn_mfma_f32_32x32x8f16, lagen_f16x4, lagen_f16x4, lagen_f32x16)
MFMA_TEST(t_f32_16x16x16bf16_1k, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k, lagen_bf16x4, lagen_bf16x4, lagen_f32x4)
MFMA_TEST(t_f32_32x32x8bf16_1k, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k, lagen_bf16x4, lagen_bf16x4, lagen_f32x16)
MFMA_TEST(t_f32_16x16x4f32, __builtin_amdgcn_mfma_f32_16x16x4f32, float, float, lagen_f32x4)
MFMA_TEST(t_f32_32x32x2f32, __builtin_amdgcn_mfma_f32_32x32x2f32, float, float, lagen_f32x16)
MFMA_TEST(t_f32_32x32x1f32, __builtin_amdgcn_mfma_f32_32x32x1f32, float, float, lagen_f32x32)
MFMA_TEST(t_f32_16x16x4f16, __builtin_amdgcn_mfma_f32_16x16x4f16, lagen_f16x4, lagen_f16x4, lagen_f32x16)
MFMA_TEST(t_i32_16x16x32_i8, __builtin_amdgcn_mfma_i32_16x16x32_i8, long, long, lagen_i32x4)
MFMA_TEST(t_f64_16x16x4f64, __builtin_amdgcn_mfma_f64_16x16x4f64, double, double, lagen_f64x4)
MFMA_TEST(t_f32_16x16x32_fp8_fp8, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8, long, long, lagen_f32x4)
MFMA_TEST(t_f32_32x32x16_bf8_bf8, __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8, long, long, lagen_f32x16)
"""

MFMA_CASES = [  # kernel, CDNA3 instruction, input kind
    ("t_f32_16x16x16f16", "v_mfma_f32_16x16x16_f16", "f16"),
    ("t_f32_32x32x8f16", "v_mfma_f32_32x32x8_f16", "f16"),
    ("t_f32_16x16x16bf16_1k", "v_mfma_f32_16x16x16_bf16", "bf16"),
    ("t_f32_32x32x8bf16_1k", "v_mfma_f32_32x32x8_bf16", "bf16"),
    ("t_f32_16x16x4f32", "v_mfma_f32_16x16x4_f32", "f32"),
    ("t_f32_32x32x2f32", "v_mfma_f32_32x32x2_f32", "f32"),
    ("t_f32_32x32x1f32", "v_mfma_f32_32x32x1_2b_f32", "f32"),     # 2 blocks
    ("t_f32_16x16x4f16", "v_mfma_f32_16x16x4_4b_f16", "f16"),     # 4 blocks
    ("t_i32_16x16x32_i8", "v_mfma_i32_16x16x32_i8", "i8"),
    ("t_f64_16x16x4f64", "v_mfma_f64_16x16x4_f64", "f64"),
    ("t_f32_16x16x32_fp8_fp8", "v_mfma_f32_16x16x32_fp8_fp8", "fp8"),   # e4m3fnuz
    ("t_f32_32x32x16_bf8_bf8", "v_mfma_f32_32x32x16_bf8_bf8", "bf8"),   # e5m2fnuz
]
FP8 = {"fp8": torch.float8_e4m3fnuz, "bf8": torch.float8_e5m2fnuz}


def _images(g, op, mat):
    """Per-lane register images of ``mat[block][row][col]`` by the calculator's lane map."""
    rows = list(entries(g[op]))
    items = max(e[1] for e in rows) + 1
    img = np.zeros((64, items), mat.dtype)
    for lane, item, r, c, blk in rows:
        img[lane, item] = mat[blk, r, c]
    return img


@pytest.mark.parametrize("kernel,inst,kind", MFMA_CASES, ids=[c[1] for c in MFMA_CASES])
def test_mfma_builtin_matches_numpy(kernel, inst, kind):
    g = oracle()["cdna3"][inst]
    p = g["props"]
    M, N, K, nb = p["M"], p["N"], p["K"], p["blocks"]
    rng = np.random.default_rng(sum(map(ord, inst)))
    if kind == "i8":
        A, B = rng.integers(-128, 128, (nb, M, K)), rng.integers(-128, 128, (nb, K, N))
        C = rng.integers(-2 ** 20, 2 ** 20, (nb, M, N))
    else:
        A, B, C = (rng.standard_normal(s) for s in ((nb, M, K), (nb, K, N), (nb, M, N)))
        rnd = {"f16": lambda x: x.astype(np.float16).astype(np.float64),
               "bf16": lambda x: torch.tensor(x).bfloat16().double().numpy(),
               "fp8": lambda x: torch.tensor(x).to(FP8["fp8"]).double().numpy(),
               "bf8": lambda x: torch.tensor(x).to(FP8["bf8"]).double().numpy(),
               "f32": lambda x: x.astype(np.float32).astype(np.float64),
               "f64": lambda x: x}[kind]
        A, B = rnd(A), rnd(B)
        C = C if kind == "f64" else C.astype(np.float32).astype(np.float64)
    a, b, c = _images(g, "A", A), _images(g, "B", B), _images(g, "C", C)
    if kind == "bf16":
        a, b = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
    elif kind == "i8":
        a, b = a.astype(np.int8).view(np.int64), b.astype(np.int8).view(np.int64)
    elif kind in FP8:  # 8 bytes per lane, passed as the builtin's `long`
        a, b = (torch.tensor(x).to(FP8[kind]).view(torch.uint8).numpy().view(np.int64)
                for x in (a, b))
    else:
        a, b = a.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[kind]), \
            b.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[kind])
    cdt = {"i8": np.int32, "f64": np.float64}.get(kind, np.float32)
    c = c.astype(cdt)
    d = np.zeros_like(c)
    run(MFMA_SRC, kernel, 1, 64, [a, b, c, d])
    D = np.zeros((nb, M, N))
    for lane, item, r, col, blk in entries(g["D"]):
        D[blk, r, col] = d[lane, item]
    ref = np.einsum("bik,bkj->bij", A, B) + C
    if kind == "i8":
        np.testing.assert_array_equal(D, ref)
    else:
        tol = {"f64": 1e-12}.get(kind, 1e-5)
        np.testing.assert_allclose(D, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_mfma_generator_covers_the_cdna3_dense_set():
    names = set(mfma_gen.emulated_instructions("gfx942"))
    assert {c[1] for c in MFMA_CASES} <= names
    assert not any(n.startswith("v_smfmac") or "xf32" in n for n in names)
    text = mfma_gen.generate("gfx942", ["__builtin_amdgcn_mfma_f32_16x16x16f16"])
    assert text.count("#define __builtin_amdgcn_mfma_") == 1
    with pytest.raises(EmulatorError, match="not emulated"):
        mfma_gen.generate("gfx942", ["__builtin_amdgcn_smfmac_f32_16x16x32_f16"])
    with pytest.raises(EmulatorError, match="not a matrix builtin"):
        mfma_gen.generate("gfx942", ["__builtin_amdgcn_mfma_f32_99x99x99f16"])


def test_mfma_generator_refuses_a_broken_lane_map():
    real = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x16_f16")

    class Broken:  # A's lane 1 item 0 duplicates lane 0 item 0
        def __getattr__(self, k):
            return getattr(real, k)

        def element(self, op, lane, item):
            return real.element(op, 0 if (op, lane, item) == ("A", 1, 0) else lane, item)

    with pytest.raises(KernelError, match="not a bijection"):
        mfma_gen.emit_instruction(Broken())


def test_mfma_kernel_lane_maps_are_the_specs():
    spec = mfma_specs.lookup("gfx942", "v_mfma_f32_16x16x16_f16")
    for op, (row, col) in MFMA_16x16x16_F16_MAPS.items():
        for op2 in (op, "D") if op == "C" else (op,):
            for l in range(64):
                for e in range(spec.items(op2)):
                    got = (eval(c_to_python(row)), eval(c_to_python(col)))
                    assert got == spec.element(op2, l, e)[:2], (op2, l, e)


def test_mfma_single_wave_kernel_matches_torch():
    rng = np.random.default_rng(3)
    A = torch.tensor(rng.standard_normal((16, 16))).half()
    B = torch.tensor(rng.standard_normal((16, 16))).half()
    C = torch.zeros(16, 16)
    run(mfma_16x16x16_f16_source(), "mfma_16x16x16_f16", 1, 64, [A, B, C])
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=1e-5, atol=1e-5)


def test_gemm_200x136x72_runs_in_seconds():
    M, N, K = 200, 136, 72
    rng = np.random.default_rng(4)
    A = torch.tensor(rng.standard_normal((M, K))).half()
    B = torch.tensor(rng.standard_normal((K, N))).half()
    C = torch.full((M, N), -1.0)
    res = run(gemm_source(), "gemm_f16_f32", ((N + 63) // 64, (M + 63) // 64), 256,
              [A, B, C, M, N, K])
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=1e-4, atol=1e-4)
    assert res.stats["blocks"] == 12 and res.stats["wave_collectives"] == 12 * 4 * 5 * 4
    assert res.seconds < 20, res.seconds


# ------------------------------------------------------------------ errors the emulator reports

ERR_SRC = r"""#include "lagen_hip.h"
LAGEN_KERNEL void half_barrier(float* p) {
  if (threadIdx.x < 32) __syncthreads();
  p[threadIdx.x] = 1.0f;
}
LAGEN_KERNEL void early_return(float* p) {
  if (threadIdx.x >= 64) return;
  __syncthreads();
}
LAGEN_KERNEL void two_barriers(float* p) {
  if (threadIdx.x < 64) { __syncthreads(); } else { __syncthreads(); }
}
LAGEN_KERNEL void wave_vs_barrier(int* p) {
  if (threadIdx.x < 32) p[threadIdx.x] = __builtin_amdgcn_ds_swizzle(1, 0x041f);
  else __syncthreads();
}
LAGEN_KERNEL void divergent_swizzle(int* out) {
  const int t = threadIdx.x;
  if (t < 10) out[t] = __builtin_amdgcn_ds_swizzle(t, 0x041f);
  else out[t] = __builtin_amdgcn_ds_swizzle(t, 0x081f);
}
LAGEN_KERNEL void mfma_half_wave(float* out) {
  lagen_f16x4 a = {1, 1, 1, 1};
  lagen_f32x4 c = {0, 0, 0, 0};
  c = __builtin_amdgcn_mfma_f32_16x16x16f16(a, a, c, 0, 0, 0);
  out[threadIdx.x] = c[0];
}
LAGEN_KERNEL void mfma_cbsz(float* out) {
  lagen_f16x4 a = {1, 1, 1, 1};
  lagen_f32x4 c = {0, 0, 0, 0};
  c = __builtin_amdgcn_mfma_f32_16x16x16f16(a, a, c, 1, 0, 0);
  out[threadIdx.x] = c[0];
}
LAGEN_KERNEL void overrun(float* p, int n) { p[threadIdx.x + n] = 1.0f; }
LAGEN_KERNEL void lds_overflow(float* p) {
  LAGEN_SHARED(float, big, 20000);
  big[threadIdx.x] = 1.0f;
  __syncthreads();
  p[threadIdx.x] = big[threadIdx.x];
}
LAGEN_KERNEL void spin(int* flag) { while (*(volatile int*)flag == 0) {} }
LAGEN_KERNEL void uninit_lds(float* out) {
  LAGEN_SHARED(float, t, 64);
  out[threadIdx.x] = t[threadIdx.x];
}
LAGEN_KERNEL void deep(float* p, int n) {
  volatile float big[40000];
  for (int i = 0; i < n; ++i) big[i] = i;
  p[threadIdx.x] = big[n - 1];
}
LAGEN_KERNEL void takes(const _Float16* h, lagen_f32x4 v, unsigned char u, float* out) {
  out[0] = (float)h[0] + v[1] + u;
}
"""

ERR_CASES = [
    ("half_barrier", 128, r"__syncthreads at kernel\.hip:3 is reached by 32 threads, but 96 "
                          r"threads of the block already returned[\s\S]*threads 32-127: returned"),
    ("early_return", 128, r"already returned"),
    ("two_barriers", 128, r"divergent barriers: .*kernel\.hip:11 and kernel\.hip:11"),
    ("wave_vs_barrier", 64, r"deadlock: no thread can proceed[\s\S]*threads 0-31: waiting at "
                            r"ds_swizzle \(kernel\.hip:14\)[\s\S]*threads 32-63: waiting at "
                            r"__syncthreads"),
    ("divergent_swizzle", 64, r"wave 0 diverged: lane 0 waits at ds_swizzle \(kernel\.hip:19\), "
                              r"lane 10 at ds_swizzle \(kernel\.hip:20\)"),
    ("mfma_half_wave", 32, r"needs all 64 lanes of the wave, but only 32 are active"),
    ("mfma_cbsz", 64, r"cbsz/abid/blgp = 1/0/0: the emulator implements only 0/0/0"),
    ("lds_overflow", 64, r"LDS overflow at kernel\.hip:36: LAGEN_SHARED big needs 80000 bytes"),
]


@pytest.mark.parametrize("kernel,block,pattern", ERR_CASES, ids=[c[0] for c in ERR_CASES])
def test_emulator_reports(kernel, block, pattern):
    with pytest.raises(EmulatorError, match=pattern):
        int_arg = kernel in ("wave_vs_barrier", "divergent_swizzle")
        run(ERR_SRC, kernel, 1, block, [np.zeros(128, np.int32 if int_arg else np.float32)])


def test_out_of_bounds_names_the_argument():
    with pytest.raises(EmulatorError, match=r"out-of-bounds access: address 0x[0-9a-f]+ is 0 "
                                            r"bytes past the end of argument 0 \(float\*, 400 "
                                            r"bytes\); in block \(0,0,0\) thread \(0,0,0\)"):
        run(ERR_SRC, "overrun", 1, 64, [np.zeros(100, np.float32), 100])


def test_stack_overflow_is_caught():
    p = np.zeros(64, np.float32)
    with pytest.raises(EmulatorError, match=r"thread stack overflow in block \(0,0,0\) thread "
                                            r"\(0,0,0\).*raise stack_kib"):
        run(ERR_SRC, "deep", 1, 64, [p, 40000])
    run(ERR_SRC, "deep", 1, 64, [p, 40000], stack_kib=256)
    assert (p == 39999).all()


def test_hang_times_out():
    with pytest.raises(EmulatorError, match="did not finish in 1 s"):
        run(ERR_SRC, "spin", 1, 64, [np.zeros(1, np.int32)], timeout=1.0)


def test_uninitialised_lds_reads_nan():
    out = np.zeros(64, np.float32)
    run(ERR_SRC, "uninit_lds", 1, 64, [out], isolate=False)
    assert np.isnan(out).all()


def test_argument_checks():
    out = np.zeros(4, np.float32)
    h = np.ones(4, np.float16)
    res = run(ERR_SRC, "takes", 1, 64, [h, np.array([0, 2, 0, 0], np.float32), 3, out])
    assert out[0] == 1 + 2 + 3 and res.outputs[0] is not None
    with pytest.raises(LaunchError, match=r"argument 0 \(const _Float16\*\): the kernel takes "
                                          r"const _Float16\*, but the array has dtype float32"):
        run(ERR_SRC, "takes", 1, 64, [h.astype(np.float32), (0, 0, 0, 0), 3, out])
    with pytest.raises(LaunchError, match=r"takes 4 arguments"):
        run(ERR_SRC, "takes", 1, 64, [h, out])
    with pytest.raises(LaunchError, match=r"256 does not fit uint8_t"):
        run(ERR_SRC, "takes", 1, 64, [h, (0, 0, 0, 0), 256, out])
    with pytest.raises(LaunchError, match=r"float x4 \(4 values\), got 3"):
        run(ERR_SRC, "takes", 1, 64, [h, (0, 0, 0), 3, out])
    with pytest.raises(LaunchError, match="not C-contiguous"):
        run(ERR_SRC, "takes", 1, 64, [np.ones((4, 4), np.float16)[:, 0], (0, 0, 0, 0), 3, out])
    with pytest.raises(LaunchError, match="expected a numpy array or torch tensor, got float"):
        run(ERR_SRC, "takes", 1, 64, [1.0, (0, 0, 0, 0), 3, out])
    with pytest.raises(LaunchError, match="block .* 2048 threads"):
        run(ERR_SRC, "takes", 1, 2048, [h, (0, 0, 0, 0), 3, out])
    with pytest.raises(KernelError, match=r"no kernel 'nope' in the source \(found: .*takes"):
        run(ERR_SRC, "nope", 1, 64, [])
    with pytest.raises(LaunchError, match=r"shape \(4,\), the kernel needs \(8\)"):
        run(ERR_SRC, "takes", 1, 64, [h, (0, 0, 0, 0), 3, out], specs=[TensorSpec(shape=(8,))])


def test_emulator_library_cache_detects_corruption(tmp_path):
    cache = Cache(tmp_path)
    src = VECTOR_ADD + "\n// cache test\n"
    lib = build(src, cache=cache)
    assert lib.cache_status == "miss" and "vector_add" in lib.kernels
    runner._LOADED.clear()
    assert build(src, cache=cache).cache_status == "hit"
    runner._LOADED.clear()
    lib.path.write_bytes(lib.path.read_bytes()[:1000])
    rebuilt = build(src, cache=cache)
    assert rebuilt.cache_status == "corrupt"
    a = np.ones(256, np.float32)
    c = np.zeros(256, np.float32)
    run(src, "vector_add", 1, 256, [a, a, c, 256], cache=cache)
    assert (c == 2).all()
