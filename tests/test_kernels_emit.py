"""The kernel IR, its C-semantics evaluator and the HIP printer (kernels.ir / kernels.emit)."""

import shutil
import subprocess

import numpy as np
import pytest
import sympy

from layoutalg import Swizzle
from layoutalg.symbolic import Xor, to_c
from kernels.emit import emit
from kernels.gemm import vector_groups
from kernels.ir import (Access, Barrier, Comment, Frag, Kernel, Let, Loop, NonIntegerExpr, Param,
                        Shared, c_eval, swizzle_expr, sym)

t, k = sym("tid"), sym("kt")

EXPRS = [
    sympy.floor(t / 4) + 8 * sympy.Mod(t, 4),
    sympy.floor((t + 6) / 4) * 3 - 2 * k,
    sympy.Mod(sympy.floor(t / 64), 2) * 64 + sympy.Mod(t, 32),
    Xor(t, 8 * sympy.Mod(sympy.floor(t / 64), 8)),
    swizzle_expr(Swizzle(3, 3, 3), 32 * t + 8 * k),
    sympy.floor(sympy.floor(t / 16) / 2) + 136 * k,
    t - 5 * k,                       # negative values: C arithmetic, not floor arithmetic
    sympy.Mod(t - 7 * k, 5),         # sympy's Mod on a possibly negative argument: floor mod
    sympy.floor((t - 7 * k) / 8),    # floor (not C's truncation) of a possibly negative value
]


@pytest.mark.parametrize("e", EXPRS, ids=[str(i) for i in range(len(EXPRS))])
def test_c_eval_matches_compiled_c(e, tmp_path):
    """c_eval (what the gate checks) == the C program to_c prints (what runs)."""
    cxx = shutil.which("clang++-19") or shutil.which("clang++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    ts, ks = np.arange(0, 300, 7), np.arange(0, 5)
    src = ["#include <cstdio>", "int main() {",
           "  for (int tid = 0; tid < 300; tid += 7) for (int kt = 0; kt < 5; ++kt)",
           f"    printf(\"%d\\n\", (int)({to_c(e)}));", "  return 0; }"]
    (tmp_path / "e.cpp").write_text("\n".join(src))
    subprocess.run([cxx, "-O0", str(tmp_path / "e.cpp"), "-o", str(tmp_path / "e")], check=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "e")], capture_output=True, text=True,
                                          check=True).stdout.split()]
    tt, kk = np.meshgrid(ts, ks, indexing="ij")
    want = np.broadcast_to(c_eval(e, {t: tt, k: kk}), tt.shape).reshape(-1).tolist()
    assert got == want


def test_swizzle_expr_is_the_swizzle():
    x = np.arange(1 << 13)
    for sw in (Swizzle(3, 3, 3), Swizzle(2, 3, 5), Swizzle(1, 5, 3), Swizzle(3, 4, 3)):
        got = c_eval(swizzle_expr(sw, t), {t: x})
        assert (got == np.array([sw(int(i)) for i in x])).all(), sw


def test_non_integer_index_math_is_refused():
    with pytest.raises(NonIntegerExpr):
        c_eval(t / 2, {t: 4})
    with pytest.raises(KeyError):
        c_eval(t + k, {t: 1})


def test_vector_groups():
    assert vector_groups([0, 1, 2, 3, 4, 5, 6, 7], 8) == [list(range(8))]
    assert vector_groups([0, 1, 2, 3, 4, 5, 6, 7], 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # strided values stay scalar; misaligned runs split to aligned pieces
    assert vector_groups([0, 32, 64], 8) == [[0], [1], [2]]
    assert vector_groups([2, 3, 4, 5], 4) == [[0, 1], [2, 3]]
    # register order need not be memory order
    assert vector_groups([1, 0], 2) == [[1, 0]]


def _tiny_kernel():
    f = Frag("r", "f16", 8, 8)
    body = [Let("row", sympy.floor(t / 4)), Comment("copy"),
            Loop("kt", 0, 2, [
                Access("load", "global", "X", 64 * sym("row") + 8 * sympy.Mod(t, 4) + 32 * k, 8,
                       f.regs(range(8)), pred=sym("row") < 3),
                Access("store", "lds", "S", swizzle_expr(Swizzle(2, 3, 3), 8 * t), 8,
                       f.regs(range(8))),
                Barrier()])]
    return Kernel("tiny", [Param("X", "f16")], [Shared("S", "f16", 2048)], [f], body, 256,
                  (1, 1, 1))


def test_emit_prints_the_ir():
    src = emit(_tiny_kernel())
    assert '#include "lagen_hip.h"' in src
    assert "LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(256) void tiny(const _Float16* __restrict__ X)" in src
    assert "LAGEN_SHARED(lagen_f16x8, S_v, 256);" in src
    assert "const int row = ((tid) / 4);" in src
    assert "for (int kt = 0; kt < 2; ++kt) {" in src
    assert "if (row < 3) r[0] = *(const lagen_f16x8*)(X + " in src
    assert "__syncthreads();" in src
    # the printed swizzle is to_c of the IR expression, nothing else
    assert to_c(swizzle_expr(Swizzle(2, 3, 3), 8 * t)) in src


def test_emit_compiles_for_gfx942(tmp_path):
    from kernels import compile_hip
    from kernels.errors import ToolchainError
    try:
        co = compile_hip(emit(_tiny_kernel()), "gfx942", name="tiny.hip")
    except ToolchainError as e:
        pytest.skip(str(e))
    assert "tiny" in co.kernels
