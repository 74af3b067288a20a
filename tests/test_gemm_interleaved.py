"""The interleaved GEMM schedule (issue 15: 224x256, 2x2 waves, one wave per SIMD) and its
branch-free predicated buffer loads: verified, emulated against torch (ragged, aligned, one
k-tile), its configuration errors, its place in the tile choice, planted bugs in the IR and
the printed text, and the compiled hot loop (one basic block, no accumulator copies)."""

import dataclasses

import numpy as np
import pytest

from kernels.amd.gemm_select import select_gemm
from kernels.emulator import run
from kernels.errors import EmulatorError, KernelError
from kernels.gate import verify_kernel
from kernels.gemm import build_gemm, build_gemm_ir
from kernels.gemm_plan import ConfigError, GemmConfig
from kernels.ir import Access, Barrier, Loop, walk
from kernels.verify.printed import verify_printed

from _gemm_cases import emulate_against_reference

TILE = dict(block_m=224, block_n=256, block_k=32, waves_m=2, waves_n=2, stages=1,
            mfma="16x16x16", schedule="interleaved", waves_per_eu=1)
RAGGED = GemmConfig(300, 280, 136, **TILE)      # every edge partial, 5 k-tiles (a 3-trip loop)


@pytest.fixture(scope="module")
def ragged():
    return build_gemm(RAGGED)


@pytest.mark.parametrize("m,n,k,dtype", [(300, 280, 136, "f16"),   # M, N, K ragged
                                         (224, 256, 64, "bf16"),   # aligned, 2 k-tiles
                                         (100, 96, 20, "bf16")])   # one partial k-tile
def test_interleaved_gemm_emulates_against_torch(m, n, k, dtype):
    emulate_against_reference(GemmConfig(m, n, k, dtype=dtype, **TILE))


@pytest.mark.parametrize("dtype,scales", [("fp8", "tensor"), ("bf8", "rowcol")])
def test_interleaved_fp8_emulates_against_torch(dtype, scales):
    """The fp8 twin (224x256x64, 16x16x32): M and K ragged, bf16 C, scales in the epilogue."""
    emulate_against_reference(GemmConfig(300, 256, 200, dtype=dtype, scales=scales,
                                         **{**TILE, "block_k": 64, "mfma": "16x16x32"}))


def test_ragged_loads_are_branch_free_buffer_loads(ragged):
    """Every predicated global load prints as lagen_buffer_load_if over a buffer resource of
    the whole tensor; the k loop runs one k-tile an iteration and has no if."""
    src = ragged.source
    assert "const lagen_buffer A_rsrc = lagen_make_buffer(A, 81600u);" in src   # 300*136*2
    assert "const lagen_buffer B_rsrc = lagen_make_buffer(B, 76160u);" in src   # 136*280*2
    loops = [s for s in ragged.ir.body if isinstance(s, Loop)]
    assert [(lp.var, lp.start, lp.stop) for lp in loops] == [("kt", 0, 3)]
    pred_loads = [s for s in walk(ragged.ir.body) if isinstance(s, Access)
                  and s.space == "global" and s.kind == "load" and s.pred is not None]
    assert pred_loads and all(s.soffset == 0 for s in pred_loads)
    assert src.count("lagen_buffer_load_if<") == len(pred_loads)
    body = src[src.index("for (int kt = 0; kt < 3; ++kt) {"):]
    body = body[:body.index("\n  }\n")]
    assert "if (" not in body
    assert body.count("__syncthreads();") == 2


def test_aligned_operands_keep_pointer_loads():
    """No partial edge: no buffer resource, the loads stay global_load (no predicate)."""
    ir = build_gemm_ir(GemmConfig(224, 256, 96, **TILE))
    assert not any(p.buffer for p in ir.params)
    assert not any(isinstance(s, Access) and s.soffset is not None for s in walk(ir.body))


def test_interleaved_config_errors():
    with pytest.raises(ConfigError, match="one LDS stage"):
        GemmConfig(448, 512, 64, **{**TILE, "stages": 2}).normalized()
    with pytest.raises(ConfigError, match="block_k >= 2"):
        build_gemm(GemmConfig(448, 512, 64, **{**TILE, "block_k": 16}))


def test_tile_choice_at_4096_cubed_is_the_interleaved_tile():
    """304 work-groups (19 x 16) on 304 CUs, by the candidate's measured figures >= 85 %."""
    for dtype in ("f16", "bf16"):
        ch = select_gemm(4096, 4096, 4096, dtype=dtype)
        best = ch.ranking[0]
        assert best.candidate.schedule == "interleaved"
        assert (best.tiles, best.slots, best.waves) == (304, 304, 1)
        assert best.value >= 0.85
        assert ch.config.schedule == "interleaved" and ch.config.waves_per_eu == 1


def test_tile_choice_refuses_it_without_a_conflict_free_swizzle():
    """k-contiguous B: no swizzle makes one-k-step reads and the copy's writes conflict-free,
    so the candidate is refused at selection (the gate would refuse the kernel)."""
    ch = select_gemm(4096, 4096, 4096, b_major="col")
    assert all(s.candidate.schedule != "interleaved" for s in ch.ranking)


# ---------------------------------------------------------------------------- planted bugs

def _refused_by(ir, check):
    r = verify_kernel(ir)
    failed = {k for k, c in r.checks.items() if not c.holds}
    assert check in failed, (check, failed)
    return r.checks[check].counterexample


def test_unmutated_ragged_ir_holds():
    assert verify_kernel(build_gemm_ir(RAGGED)).holds


def test_dropped_buffer_load_predicate_is_refused_by_in_bounds():
    """The prologue's last A vector (tile rows 192.., rows 416.. of block 1 >= M = 300): the
    buffer would zero-fill it on the hardware, but the IR claims an in-range read."""
    ir = build_gemm_ir(RAGGED)
    ld = [s for s in walk(ir.body) if isinstance(s, Access) and s.soffset is not None
          and s.buf == "A"][6]
    ld.pred = None
    _refused_by(ir, "in_bounds")


def test_missing_buffer_resource_is_refused_by_in_bounds():
    ir = build_gemm_ir(RAGGED)
    ir.params[0] = dataclasses.replace(ir.params[0], buffer=False)
    assert "no buffer resource" in _refused_by(ir, "in_bounds")


def test_barrier_before_the_stores_dropped_is_refused():
    """The barrier between the last k-group's first MFMAs and the LDS stores of the next
    k-tile: without it a wave overwrites LDS another wave may still be reading."""
    ir = build_gemm_ir(RAGGED)
    loop = next(s for s in ir.body if isinstance(s, Loop))
    first = next(i for i, s in enumerate(loop.body) if isinstance(s, Barrier))
    del loop.body[first]
    assert "writes sA" in _refused_by(ir, "lds_races")


PRINTED = [   # a_ld[2] of the prologue: tile rows 64.., rows 288..319 of block 1 cross M = 300
    ("buffer-predicate-off-by-one", ("a_cp_k + 3 < 136 && a_cp_mn + 224*block_m + 64 < 300, ",
                                     "a_cp_k + 3 < 136 && a_cp_mn + 224*block_m + 64 <= 300, "),
     "printed_source"),
    ("buffer-predicate-always-on",
     ("(A_rsrc, a_cp_k + 3 < 136 && a_cp_mn + 224*block_m + 64 < 300, ", "(A_rsrc, 1, "),
     "printed_source"),
    ("buffer-voffset-constant", ("30464*block_m + 4352, 0);", "30464*block_m + 4360, 0);"),
     "printed_source"),
    ("buffer-num-records", ("lagen_make_buffer(A, 81600u)", "lagen_make_buffer(A, 40800u)"),
     "declarations"),
]


@pytest.mark.parametrize("case", PRINTED, ids=[c[0] for c in PRINTED])
def test_printed_mutation_is_refused(ragged, case):
    _, (old, new), check = case
    assert old in ragged.source
    r = verify_printed(ragged.ir, ragged.source.replace(old, new, 1))
    assert not r[check].holds, {k: c.counterexample for k, c in r.items()}


def test_emulator_zero_fills_off_lanes_and_stops_on_an_on_lane_out_of_range(ragged):
    """An on lane's offset past num_records stops the kernel (never a silent zero)."""
    bad = ragged.source.replace("30464*block_m + 4352, 0);", "30464*block_m + 81600, 0);", 1)
    args = [np.zeros((300, 136), np.float16), np.zeros((136, 280), np.float16),
            np.zeros((300, 280), np.float16)]
    with pytest.raises(EmulatorError, match="predicated buffer load out of range"):
        run(bad, ragged.name, ragged.grid, ragged.block, args)


# ---------------------------------------------------------------------------- compiled loop

def test_compiled_hot_loop_is_one_block_without_accumulator_copies():
    """gfx942 disassembly of the 4096^3 default: the loop has one k-tile's 112 MFMAs, no
    branch out of the MFMA run (s_cbranch_execz) and no AGPR<->VGPR copies (clang rotated the
    accumulators through them when a branch or a 2x unroll split the run); the verified LDS /
    global / MFMA instructions are the compiled ones."""
    cfg = select_gemm(4096, 4096, 4096).config
    bk = build_gemm(cfg)
    try:
        from kernels.toolchain import find_toolchain
        from kernels.toolchain.codeobject import disassemble
        co = bk.compile("gfx942")
        insns = disassemble(co.binary, "gfx942", find_toolchain().tool("llvm-objdump"))[bk.name]
    except KernelError as e:    # no clang-19 / llvm-objdump here (ToolchainError)
        pytest.skip(f"no gfx942 toolchain: {e}")
    back = max(i for i, x in enumerate(insns) if x.mnemonic.startswith("s_cbranch")
               and x.target is not None and x.target < x.addr)
    start = next(i for i, x in enumerate(insns) if x.addr == insns[back].target)
    loop = [x.mnemonic for x in insns[start:back + 1]]
    assert sum(m.startswith("v_mfma") for m in loop) == 112
    assert "s_cbranch_execz" not in loop
    assert not any(m.startswith(("v_accvgpr_read", "v_accvgpr_write")) for m in loop)
    assert sum(m.startswith("buffer_load") for m in loop) == 7     # A: rows 4032.. predicated
    assert loop.count("s_barrier") == 2
    hist = {m: loop.count(m) for m in set(loop)}
    assert bk.hot_loop_match({"histogram": hist})["match"] is True
