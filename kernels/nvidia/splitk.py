"""Split-K for the wgmma GEMM (issue 20 item 2): skinny or long-K problems whose output tiles
cannot fill the SMs split the k tiles over ``gridDim.y`` blocks.

Block ``(tile, s)`` multiplies k tiles ``[s * kt_per, min(KT, (s + 1) * kt_per))`` and writes
its fp32 partial tile to ``W[s]`` (``splits x M x N``, row-major, no rounding); the reduce
kernel printed here then sums the ``splits`` partials of each element in a fixed order (so
the result is deterministic) and rounds once to the output dtype.  The rounding is therefore
the same as the one-pass kernel's (one fp32 -> 16-bit conversion); only the fp32 summation
order of the k tiles differs.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["REDUCE_THREADS", "reduce_kernel", "emit_partial_store", "k_range_lines",
           "reduce_launch", "reduce_site"]

REDUCE_THREADS = 256


def k_range_lines(w: Callable[[str], None], bk: int) -> None:
    """Print this block's k-tile range: ``kt0`` (first k tile) and ``KTn`` (its count)."""
    w("  const int kt0 = blockIdx.y * kt_per;")
    w("  const int KTn = min(KT - kt0, kt_per);")


def emit_partial_store(w: Callable[[str], None], lo: str, hi: str) -> None:
    """Print the fp32 store of accumulators ``lo``, ``hi`` (W[s][r][col], W[s][r][col + 1]):
    an 8-byte store when both columns exist (``ldc`` = N even keeps it aligned), else one or
    two 4-byte stores; rows past M are skipped.  Closes the caller's loop and the kernel."""
    w("    if (r < M) {")
    w("      float* dst = C + (size_t)blockIdx.y * M * ldc + (size_t)r * ldc + col;")
    w("      if (col + 1 < N && pair_ok) {")
    w(f"        *reinterpret_cast<float2*>(dst) = make_float2({lo}, {hi});")
    w("      } else {")
    w(f"        if (col < N) dst[0] = {lo};")
    w(f"        if (col + 1 < N) dst[1] = {hi};")
    w("      }\n    }\n  }\n}")


def reduce_kernel(name: str, dtype: str) -> str:
    """``name(W, C, M, N, ldc, splits)``: ``C[r][c] = round(sum_s W[s][r][c])``, one thread per
    element of C, the splits summed in order 0, 1, ..."""
    cvt = "lg_f32_to_f16" if dtype == "f16" else "lg_f32_to_bf16"
    return (
        f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS})\n'
        f"{name}(const float* __restrict__ W, lg_u16* __restrict__ C, int M, int N, int ldc, "
        "int splits) {\n"
        f"  const long long i = (long long)blockIdx.x * {REDUCE_THREADS} + threadIdx.x;\n"
        "  const long long MN = (long long)M * N;\n"
        "  if (i >= MN) return;\n"
        "  float s = 0.f;\n"
        "  for (int k = 0; k < splits; ++k) s += W[k * MN + i];\n"
        "  const int r = (int)(i / N), c = (int)(i - (long long)r * N);\n"
        f"  C[(size_t)r * ldc + c] = {cvt}(s);\n"
        "}\n")


def reduce_launch(M: int, N: int):
    """``(grid, block, signature, specs)`` of a :func:`reduce_kernel` launch on an ``M x N``
    output: one thread an element; partials 4-byte aligned, the 16-bit output 2-byte."""
    from ..runtime.rocm import TensorSpec
    return (-(-(M * N) // REDUCE_THREADS), REDUCE_THREADS, ("ptr", "ptr") + ("i32",) * 4,
            [TensorSpec(strides=(), align=4), TensorSpec(strides=(), align=2)] + [None] * 4)


def reduce_site(module, name: str, M: int, N: int):
    """The :class:`~kernels.runtime.cuda.LaunchSite` of :func:`reduce_kernel` ``name`` of
    ``module`` for one ``M x N`` output, called with ``[partials, out, M, N, out.stride(0),
    splits]``: the ``splits`` fp32 partial tiles (``splits x M x N``) summed into the 16-bit
    ``out``.  Both wgmma GEMMs (cp.async and TMA) launch their reduce through it."""
    from ..runtime.cuda import LaunchSite
    grid, block, sig, specs = reduce_launch(M, N)
    return LaunchSite(module, name, grid, block, signature=sig, specs=specs)
