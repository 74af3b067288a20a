"""``lagen_f32_to_bf16`` (kernels/include/lagen_hip.h), the bf16 C conversion of every AMD GEMM
epilogue: round to nearest even, NaN kept quiet.  It selects between the two results instead of
returning early for NaN (the early return compiled to a branch around each of the 224 stores of
the interleaved tile's epilogue).  Checked in the device build itself: clang-19 folds the helper
on constants for gfx942, and the folded bits must be torch's RNE (NaN: the quiet pattern)."""

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import torch

BITS = [0x3F800000, 0x3F808000, 0x3F818000, 0x3F817FFF, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
        0x7FC00000, 0x7F800001, 0xFFC00001, 0x80000000, 0x00008000, 0x807FFFFF, 0x4049_0FDB]


def _want(u: int) -> int:
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return ((u >> 16) | 0x40) & 0xFFFF
    f = torch.tensor([struct.unpack("<f", struct.pack("<I", u))[0]], dtype=torch.float32)
    return int(f.to(torch.bfloat16).view(torch.int16).item()) & 0xFFFF


def test_device_bf16_rounding_is_rne_with_quiet_nan():
    import kernels
    clang = shutil.which("clang-19")
    if not clang:
        pytest.skip("clang-19 missing")
    body = "".join(f"  o[{i}] = lagen_f32_to_bf16(__builtin_bit_cast(float, {u}u));\n"
                   for i, u in enumerate(BITS))
    src = ('#include "lagen_hip.h"\n'
           f'extern "C" __global__ void k(unsigned short* o) {{\n{body}}}\n')
    inc = Path(kernels.__file__).parent / "include"
    ir = subprocess.run([clang, "-x", "hip", "-nogpuinc", "-nogpulib", "--offload-arch=gfx942",
                         "--cuda-device-only", "-O2", "-S", "-emit-llvm", f"-I{inc}", "-", "-o",
                         "-"], input=src, capture_output=True, text=True, check=True).stdout
    stores = [l for l in ir.splitlines() if l.strip().startswith("store")]
    # clang merges neighbouring stores into vector ones: every i16 constant, in order
    got = [int(x) & 0xFFFF for l in stores for x in re.findall(r"i16 (-?\d+)", l)]
    assert got == [_want(u) for u in BITS]
