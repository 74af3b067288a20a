"""Small hand-written kernels the backend's own tests (and demos) compile and emulate.

The MFMA kernels place operands with the lane maps of ``v_mfma_f32_16x16x16_f16`` written as
C expressions in ``MFMA_16x16x16_F16_MAPS`` (lane ``l``, item ``e``); the tests check those
expressions against ``mfma_specs`` for every lane and item, so the kernels and the spec cannot
drift apart.
"""

from __future__ import annotations

import os
from typing import Dict, Tuple

__all__ = ["VECTOR_ADD", "MFMA_16x16x16_F16_MAPS", "mfma_16x16x16_f16_source", "gemm_source",
           "c_to_python", "require"]


def require(what: str = "device"):
    """For tests: the device toolchain (``"device"``) or the emulator's host compiler
    (``"host"``).  When it is missing the test FAILS if ``CI=true`` (CI installs clang-19
    through the README set-up) and is skipped with the reason otherwise."""
    import pytest

    from .errors import ToolchainError
    from .toolchain.hip import find_host_compiler, find_toolchain
    try:
        return find_toolchain() if what == "device" else find_host_compiler()
    except ToolchainError as e:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true but the {what} compiler is missing: {e}")
        pytest.skip(f"{what} compiler not available: {e}")

VECTOR_ADD = r"""#include "lagen_hip.h"

// c[i] = a[i] + b[i]; goes through LDS and a barrier so the emulator's block machinery is used
LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(256) void vector_add(const float* a, const float* b, float* c,
                                                      int n) {
  LAGEN_SHARED(float, tile, 256);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < (unsigned)n ? a[i] : 0.0f;
  __syncthreads();
  if (i < (unsigned)n) c[i] = tile[threadIdx.x] + b[i];
}
"""

# operand -> (row expression, column expression) of the element lane l holds in item e
MFMA_16x16x16_F16_MAPS: Dict[str, Tuple[str, str]] = {
    "A": ("l % 16", "4 * (l / 16) + e"),      # A[i][k]
    "B": ("4 * (l / 16) + e", "l % 16"),      # B[k][j]
    "C": ("4 * (l / 16) + e", "l % 16"),      # C[i][j] (and D)
}


def c_to_python(expr: str) -> str:
    """The C index expressions above use only + * % and integer /, so ``/`` -> ``//``."""
    return expr.replace("/", "//")


def mfma_16x16x16_f16_source() -> str:
    """One wave: C (16x16 f32, row-major) = A (16x16 f16) @ B (16x16 f16), one MFMA."""
    (ar, ac), (br, bc), (cr, cc) = (MFMA_16x16x16_F16_MAPS[o] for o in "ABC")
    return rf"""#include "lagen_hip.h"

LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(64) void mfma_16x16x16_f16(const lagen_f16* A, const lagen_f16* B,
                                                          float* C) {{
  const unsigned l = threadIdx.x;
  lagen_f16x4 a, b;
  for (unsigned e = 0; e < 4; ++e) {{
    a[e] = A[({ar}) * 16 + ({ac})];
    b[e] = B[({br}) * 16 + ({bc})];
  }}
  lagen_f32x4 c = {{0.0f, 0.0f, 0.0f, 0.0f}};
  c = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
  for (unsigned e = 0; e < 4; ++e) C[({cr}) * 16 + ({cc})] = c[e];
}}
"""


def gemm_source() -> str:
    """C[M][N] (f32) = A[M][K] @ B[K][N] (f16, row-major), any M, N, K.

    Block tile 64x64, 256 threads = 4 waves, each wave a 32x32 sub-tile of 2x2 MFMA 16x16x16
    tiles; K in steps of 16 through LDS (zero-filled at the edges), two barriers per step.
    Launch: grid (ceil(N/64), ceil(M/64)), block 256.
    """
    (ar, ac), (br, bc), (cr, cc) = (MFMA_16x16x16_F16_MAPS[o] for o in "ABC")
    return rf"""#include "lagen_hip.h"

LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(256) void gemm_f16_f32(const lagen_f16* A, const lagen_f16* B,
                                                      float* C, int M, int N, int K) {{
  LAGEN_SHARED(lagen_f16, As, 64 * 16);   // [m][k]
  LAGEN_SHARED(lagen_f16, Bs, 16 * 64);   // [k][n]
  const int tid = threadIdx.x, l = tid % 64, wave = tid / 64;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  const int wm = (wave / 2) * 32, wn = (wave % 2) * 32;
  lagen_f32x4 acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) acc[i][j] = (lagen_f32x4){{0.0f, 0.0f, 0.0f, 0.0f}};
  for (int k0 = 0; k0 < K; k0 += 16) {{
    for (int t = 0; t < 4; ++t) {{
      const int idx = tid * 4 + t;
      const int ar_ = idx / 16, ac_ = idx % 16, br_ = idx / 64, bc_ = idx % 64;
      As[idx] = (m0 + ar_ < M && k0 + ac_ < K) ? A[(m0 + ar_) * K + k0 + ac_] : (lagen_f16)0;
      Bs[idx] = (k0 + br_ < K && n0 + bc_ < N) ? B[(k0 + br_) * N + n0 + bc_] : (lagen_f16)0;
    }}
    __syncthreads();
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {{
        lagen_f16x4 a, b;
        for (int e = 0; e < 4; ++e) {{
          a[e] = As[(wm + i * 16 + ({ar})) * 16 + ({ac})];
          b[e] = Bs[({br}) * 64 + wn + j * 16 + ({bc})];
        }}
        acc[i][j] = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, acc[i][j], 0, 0, 0);
      }}
    __syncthreads();
  }}
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int e = 0; e < 4; ++e) {{
        const int row = m0 + wm + i * 16 + ({cr}), col = n0 + wn + j * 16 + ({cc});
        if (row < M && col < N) C[row * N + col] = acc[i][j][e];
      }}
}}
"""
