"""Swapped MFMA operands (issue 15, the C write-back): ``GemmConfig(swap_ab=True)`` feeds B as
the MFMA's srcA and A as its srcB, so the instruction computes each C tile transposed and a
lane's accumulator values lie along N: a row-major C is written with 4-8-byte stores instead of
one 2-byte store per element.  Verified, emulated against torch (aligned, ragged, odd N, both
MFMA shapes, fp8 with scales), chosen by the tile choice for its interleaved tile, and refused
by the gate / the printed-text check when the IR and the printed call disagree."""

import dataclasses

import pytest

from kernels.amd.gemm_select import select_gemm
from kernels.gate import verify_kernel
from kernels.gemm import build_gemm, build_gemm_ir
from kernels.gemm_plan import ConfigError, GemmConfig
from kernels.ir import Access, Mfma, walk
from kernels.verify.printed import verify_printed

from _gemm_cases import emulate_against_reference

SMALL = dict(block_m=64, block_n=64, block_k=32, waves_m=2, waves_n=2, mfma="16x16x16",
             swap_ab=True)
INTERLEAVED_FP8 = dict(block_m=224, block_n=256, block_k=64, waves_m=2, waves_n=2, stages=1,
                       mfma="16x16x32", schedule="interleaved", waves_per_eu=1, swap_ab=True)


def _compiled_mnemonics(bk):
    """The mnemonics of ``bk``'s gfx942 code object (compiled afresh), in order."""
    from kernels.toolchain import find_toolchain
    from kernels.toolchain.codeobject import disassemble
    co = bk.compile("gfx942", use_cache=False)
    insns = disassemble(co.binary, "gfx942", find_toolchain().tool("llvm-objdump"))[bk.name]
    return [i.mnemonic for i in insns]


def _c_store_widths(ir):
    return sorted({s.width for s in walk(ir.body) if isinstance(s, Access) and s.buf == "C"
                   and s.kind == "store"})


@pytest.mark.parametrize("cfg", [
    GemmConfig(200, 252, 96, **SMALL),                               # ragged, N % 4 == 0
    GemmConfig(200, 251, 96, **SMALL),                               # odd N: 2-byte stores
    GemmConfig(130, 132, 128, **{**SMALL, "mfma": "32x32x8"}),       # the 32x32 MFMA
    GemmConfig(96, 100, 64, dtype="bf16", a_major="col", b_major="col", **SMALL),
    GemmConfig(240, 264, 192, dtype="fp8", **INTERLEAVED_FP8),       # the 4096^3 default's form
    GemmConfig(130, 264, 128, dtype="bf8", scales="rowcol",
               **{**SMALL, "block_k": 64, "mfma": "16x16x32"}),
], ids=["ragged", "odd-n", "32x32x8", "bf16-TT", "fp8-interleaved", "bf8-rowcol"])
def test_swapped_gemm_emulates_against_torch(cfg):
    emulate_against_reference(cfg)


def test_stores_are_wide_along_n_and_narrow_where_n_is_odd():
    """16x16 MFMA: a lane's 4 values are consecutive along N, so with N % 4 == 0 each is one
    8-byte (4 x f16) store; without the swap they are 4 values along M, one store each; an
    odd N leaves no aligned pair, so every store is one element (and still verified)."""
    assert _c_store_widths(build_gemm_ir(GemmConfig(256, 256, 64, **SMALL))) == [4]
    plain = dataclasses.replace(GemmConfig(256, 256, 64, **SMALL), swap_ab=False)
    assert _c_store_widths(build_gemm_ir(plain)) == [1]
    assert _c_store_widths(build_gemm_ir(GemmConfig(200, 250, 64, **SMALL))) == [2]
    assert _c_store_widths(build_gemm_ir(GemmConfig(200, 251, 64, **SMALL))) == [1]


def test_compiled_write_back_uses_dwordx2_stores():
    """The gfx942 code object: 16 values a lane (2x2 waves of 32x32) in 4 global_store_dwordx2,
    no 2-byte stores."""
    ops = _compiled_mnemonics(build_gemm(GemmConfig(256, 256, 64, **SMALL)))
    assert ops.count("global_store_dwordx2") == 4
    assert not any(m.startswith("global_store_short") for m in ops)


def test_tile_choice_swaps_for_its_interleaved_tile_and_row_major_c_only():
    for dtype in ("f16", "fp8"):
        cfg = select_gemm(4096, 4096, 4096, dtype=dtype).config
        assert cfg.schedule == "interleaved" and cfg.swap_ab
    col = select_gemm(4096, 4096, 4096, c_major="col").config
    assert not col.swap_ab


def test_bad_swap_ab_value_is_a_config_error():
    with pytest.raises(ConfigError, match="swap_ab must be True or False"):
        GemmConfig(64, 64, 64, swap_ab="yes").normalized()


# ---------------------------------------------------------------------------- planted bugs

@pytest.mark.parametrize("swap", [True, False])
def test_ir_mfma_swap_flag_disagreeing_with_the_plan_is_refused(swap):
    """The MFMA statements say one operand order while the accumulator layout (and so the
    stores) assume the other: every C element would land transposed within its 16x16 tile."""
    ir = build_gemm_ir(GemmConfig(128, 128, 64, **{**SMALL, "swap_ab": swap}))
    for s in walk(ir.body):
        if isinstance(s, Mfma):
            s.swap_ab = not swap
    r = verify_kernel(ir)
    assert not r.holds
    failed = {k for k, c in r.checks.items() if not c.holds}
    assert failed & {"lane_mfma_operands", "lane_accumulator_writeback"}, failed


def test_printed_call_with_unswapped_operands_is_refused():
    """The IR swaps, the printed builtin call does not: printed_source names it."""
    bk = build_gemm(GemmConfig(128, 128, 64, **SMALL))
    m = next(s for s in walk(bk.ir.body) if isinstance(s, Mfma))
    line = next(ln for ln in bk.source.splitlines() if m.spec.builtin + "(" in ln)
    call = line[line.index(m.spec.builtin + "(") + len(m.spec.builtin) + 1:]
    b_arg, a_arg, rest = call.split(", ", 2)
    bad = line.replace(f"{b_arg}, {a_arg}, {rest}", f"{a_arg}, {b_arg}, {rest}")
    assert bad != line
    r = verify_printed(bk.ir, bk.source.replace(line, bad, 1))
    assert not r["printed_source"].holds


def test_fp8_default_epilogue_packs_bf16_pairs_without_shifts():
    """The 4096^3 fp8 default (224x256x64 interleaved, per-tensor scales, bf16 C): 224 values
    a lane in 56 global_store_dwordx2; lagen_f32_to_bf16 selects whole words and shifts last,
    so the high halves of two results pack with one v_perm_b32 (before: one v_lshrrev_b32 per
    element, 224, then the perm)."""
    ops = _compiled_mnemonics(build_gemm(select_gemm(4096, 4096, 4096, dtype="fp8").config))
    assert ops.count("global_store_dwordx2") == 56
    assert not any(m.startswith("global_store_short") for m in ops)
    assert sum(m.startswith("v_lshrrev_b32") for m in ops) < 64
