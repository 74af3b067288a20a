"""The pipelined GEMM k-tile schedule (issue 15 item 1): every operand read of a k-tile before
its MFMAs, partial lgkmcnt waits, s_setprio (sched_group_barrier on request).  Emulated against torch
(ragged shapes included), checked for its IR order, its printed scheduling statements, and, in
the compiled gfx942 code object, for the intended hot-loop order."""

import re

import pytest

from kernels.gemm import build_gemm
from kernels.gemm_plan import ConfigError, GemmConfig
from kernels.amd.gemm_schedule import pipelined_k_tile
from kernels.ir import (Access, Barrier, Comment, Loop, Mfma, SchedGroupBarrier, SetPrio,
                        WaitCnt)
from _gemm_cases import emulate_against_reference


CASES = {
    # two LDS stages, partial tiles in M, N and K (KT = 3: loop + peel)
    "NN-2stage-ragged": GemmConfig(150, 140, 72, schedule="pipelined"),
    # one LDS stage, block_k 64 (16 operand reads per k-tile), ragged, bf16 -> f32
    "NT-1stage-bk64-bf16": GemmConfig(130, 72, 200, dtype="bf16", out_dtype="f32",
                                      b_major="col", block_k=64, stages=1,
                                      schedule="pipelined"),
    # 16x16x16 MFMAs, column-major A, a small-M tile (the decode-time linear layer)
    "TN-small-m-16x16": GemmConfig(16, 200, 96, a_major="col", block_m=16, block_n=64,
                                   block_k=64, waves_m=1, waves_n=4, mfma="16x16x16",
                                   schedule="pipelined"),
    # K < block_k: no loop, only the last k-tile
    "TT-no-loop": GemmConfig(40, 48, 24, a_major="col", b_major="col", block_m=32,
                             block_n=32, waves_m=1, waves_n=1, schedule="pipelined"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_emulated_pipelined_gemm_matches_torch(name):
    cfg = CASES[name]
    _, _, out, _ = emulate_against_reference(cfg, seed=5)
    assert float(out.abs().max()) > 0


def _k_tiles(body):
    """The statement runs between SetPrio(1) ... SetPrio(0) with what precedes them."""
    loop = next(s for s in body if isinstance(s, Loop))
    return loop.body


def test_pipelined_ir_order():
    """In each k-tile: all LDS operand reads, the first MFMA, then s_setprio 1, the rest of the
    MFMA run with no LDS access inside it, s_setprio 0."""
    bk = build_gemm(GemmConfig(256, 256, 256, block_k=64, stages=1, schedule="pipelined"))
    body = _k_tiles(bk.ir.body)
    ups = [i for i, s in enumerate(body) if isinstance(s, SetPrio) and s.prio == 1]
    downs = [i for i, s in enumerate(body) if isinstance(s, SetPrio) and s.prio == 0]
    assert len(ups) == len(downs) == 1        # one LDS stage: one k-tile per iteration
    for up, down in zip(ups, downs):
        run = body[up + 1:down]
        assert not any(isinstance(s, Access) and s.space == "lds" for s in run)
        assert sum(isinstance(s, Mfma) for s in run) == 31    # 2x2 reps x 8 k-steps, less one
        assert isinstance(body[up - 1], Mfma)                 # the first MFMA, at priority 0
        before = body[:up - 1]
        last_barrier = max(i for i, s in enumerate(before) if isinstance(s, Barrier)) \
            if any(isinstance(s, Barrier) for s in before) else -1
        reads = [s for s in before[last_barrier + 1:]
                 if isinstance(s, Access) and s.space == "lds" and s.kind == "load"]
        assert len(reads) == 16
        assert not any(isinstance(s, SchedGroupBarrier) for s in body)   # pin is off


def test_pipelined_source_prints_the_scheduling_statements():
    bk = build_gemm(GemmConfig(128, 128, 128, schedule="pipelined"))
    assert "__builtin_amdgcn_s_setprio(1);" in bk.source
    assert "__builtin_amdgcn_s_setprio(0);" in bk.source
    assert "pipelined schedule" in bk.source
    # the basic schedule is unchanged: none of these
    basic = build_gemm(GemmConfig(128, 128, 128))
    assert "setprio" not in basic.source


def test_pipelined_k_tile_pin_prints_sched_group_barriers():
    """pin=True: sched_group_barrier statements fix reads-then-MFMAs; the printer prints them
    with LLVM's mask values."""
    from kernels.printer.hip import Printer
    from kernels.ir import Frag, Kernel
    f = Frag("x", "f16", 8, 8)
    rd = Access("load", "lds", "sA", 0, 8, f.regs(range(8)))
    out = pipelined_k_tile([[rd, rd]], [[Comment("m")]], sync_id=1, pin=True)
    pins = [s for s in out if isinstance(s, SchedGroupBarrier)]
    assert [(p.what, p.mask, p.size, p.sync_id) for p in pins] == [("ds_read", 0x100, 2, 1)]
    p = Printer(Kernel("k", [], [], [], [], 64, (1, 1, 1)))
    for s in pins + [SchedGroupBarrier("mfma", 16, 1)]:
        p.stmt(s, 0)
    assert p.lines == ["__builtin_amdgcn_sched_group_barrier(0x100, 2, 1);  // 2 ds_read",
                       "__builtin_amdgcn_sched_group_barrier(0x8, 16, 1);  // 16 mfma"]
    assert not any(isinstance(s, SchedGroupBarrier) for s in pipelined_k_tile([[rd]], [[]]))


def test_pipelined_k_tile_explicit_partial_waits():
    """With explicit waits, group g's MFMAs wait for lgkmcnt(reads issued after group g)."""
    from kernels.ir import Frag
    f = Frag("x", "f16", 8, 8)
    rd = lambda: Access("load", "lds", "sA", 0, 8, f.regs(range(8)))   # noqa: E731
    reads = [[rd(), rd()], [rd(), rd(), rd()], [rd()]]
    mfmas = [[Comment("m0")], [Comment("m1")], [Comment("m2")]]
    out = pipelined_k_tile(reads, mfmas, explicit_waits=True)
    assert [w.lgkm for w in out if isinstance(w, WaitCnt)] == [4, 1, 0]
    many = pipelined_k_tile([[rd() for _ in range(20)], [rd()]], [[], []], explicit_waits=True)
    assert [w.lgkm for w in many if isinstance(w, WaitCnt)] == [1, 0]
    capped = pipelined_k_tile([[rd()], [rd() for _ in range(20)]], [[], []],
                              explicit_waits=True)
    assert [w.lgkm for w in capped if isinstance(w, WaitCnt)] == [15, 0]   # 4-bit counter
    with pytest.raises(ValueError):
        pipelined_k_tile([[]], [[], []])


def test_schedule_option_is_validated():
    with pytest.raises(ConfigError, match="schedule must be one of"):
        build_gemm(GemmConfig(64, 64, 64, schedule="fast"))
    with pytest.raises(ConfigError, match="read_ahead"):
        build_gemm(GemmConfig(64, 64, 64, schedule="pipelined", read_ahead=1))
    with pytest.raises(ValueError, match="unknown class"):
        SchedGroupBarrier("tensor", 1)
    with pytest.raises(ValueError, match="priority"):
        SetPrio(4)


def _hot_loop_text(bk) -> list:
    """The kernel's instructions up to the loop's back edge, as 'mnemonic operands'."""
    from kernels.toolchain import find_toolchain
    from kernels.toolchain.codeobject import disassemble
    co = bk.compile("gfx942")
    insns = disassemble(co.binary, "gfx942", find_toolchain().tool("llvm-objdump"))[bk.name]
    ins = [f"{x.mnemonic} {x.operands}" for x in insns]
    back = max(i for i, x in enumerate(insns) if x.mnemonic.startswith("s_cbranch")
               and x.target is not None and x.target < x.addr)
    return ins[:back + 1]


def test_compiled_hot_loop_has_the_intended_order():
    """gfx942 disassembly: in the compiled loop, each k-tile's ds_reads all come before its
    first MFMA, the MFMAs wait with partial lgkmcnt(N > 0), s_setprio 1 comes right after the
    first MFMA (not before it) and s_setprio 0 after the last."""
    from kernels.errors import KernelError
    bk = build_gemm(GemmConfig(4096, 4096, 4096, block_k=64, stages=1, schedule="pipelined"))
    try:
        ins = _hot_loop_text(bk)
    except KernelError as e:   # no clang-19 / llvm-objdump here (ToolchainError)
        pytest.skip(f"no gfx942 toolchain: {e}")
    last = max(i for i, s in enumerate(ins) if s.startswith("s_setprio 0"))
    first = max(i for i, s in enumerate(ins[:last]) if s.startswith("s_setprio 1"))
    assert ins[first - 1].startswith("v_mfma")     # the first MFMA runs at priority 0
    run = ins[first - 1:last]
    assert sum(s.startswith("v_mfma") for s in run) == 32
    assert not any(s.startswith("ds_") for s in run)
    reads_before = [s for s in ins[:first][-40:] if s.startswith("ds_read")]
    assert len(reads_before) == 16
    partial = [int(m.group(1)) for s in ins[first - 3:last]
               for m in [re.search(r"lgkmcnt\((\d+)\)", s)] if m]
    assert partial and max(partial) > 0 and partial == sorted(partial, reverse=True)


@pytest.mark.parametrize("k, stages, loop_trips, peeled", [
    (256, 1, 3, 0),        # KT = 4: 3 loop iterations of one k-tile, then the last k-tile
    (320, 2, 2, 0),        # KT = 5 (two stages): 2 pairs of k-tiles, nothing peeled
    (256, 2, 1, 1),        # KT = 4 (two stages): 1 pair and a peeled k-tile
])
def test_k_loop_shape(k, stages, loop_trips, peeled):
    """Two LDS stages: the loop is unrolled by two (constant stage per half) and an odd k-tile
    is peeled; one stage: one k-tile per iteration and nothing peeled (regression: the unrolled
    one-stage loop carried a peeled copy of the k-tile, ~120 instructions outside the loop that
    the model's whole-kernel estimate pays for)."""
    bk = build_gemm(GemmConfig(128, 128, k, block_k=64, stages=stages, schedule="pipelined"))
    body = bk.ir.body
    loop = next(s for s in body if isinstance(s, Loop))
    assert sum(isinstance(s, Mfma) for s in loop.body) == 32 * stages    # k-tiles per trip
    # the one-stage loop stays a loop (clang unrolled 15 k-tiles completely at K = 1000)
    assert loop.unroll == (1 if stages == 1 else None)
    assert ("#pragma unroll 1" in bk.source) == (stages == 1)
    assert loop.stop - loop.start == loop_trips
    after = body[body.index(loop) + 1:]
    n_mfma = sum(isinstance(s, Mfma) for s in after)
    assert n_mfma == 32 * (1 + peeled)     # the last k-tile (+ a peeled one)
