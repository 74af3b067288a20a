"""The static MI300X performance model (kernels.perf) on hand-written gfx942 loops whose cycle
counts are known by construction, and on bad input.

Each loop is assembled with clang-19 (``-x assembler -mcpu=gfx942``); the expected numbers are
worked out by hand from the model's rules (kernels/perf/simulate.py docstring): a SIMD
arbitrates every 4 clocks, v_mfma_f32_32x32x8_f16 holds the matrix pipe 32 clocks and its
result is readable 4 clocks after it completes, SALU/VALU take one issue slot.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kernels.perf import GFX942, PerfError, analyze, report_fields
from layoutalg.cli import main as cli_main

CLANG, LLD = shutil.which("clang-19") or shutil.which("clang"), shutil.which("ld.lld-19") \
    or shutil.which("ld.lld")
pytestmark = pytest.mark.skipif(not (CLANG and LLD and shutil.which("llvm-objdump-19")),
                                reason="needs clang-19, ld.lld-19 and llvm-objdump-19")

MFMA = "v_mfma_f32_32x32x8_f16"
TAIL = "  s_sub_u32 s0, s0, 1\n  s_cmp_lg_u32 s0, 0\n  s_cbranch_scc1 .Lloop\n"


def build(tmp, name: str, body: str, *, vgprs: int = 512, agprs: int = 0, threads: int = 256,
          mcpu: str = "gfx942", loop: bool = True, lds: int = 0) -> str:
    """Assemble ``body`` as the loop of a one-kernel code object; ``vgprs`` (the unified count
    in the metadata) sets the occupancy: 512 -> 1 wave/SIMD, 256 -> 2."""
    code = ("  s_mov_b32 s0, 100\n.Lloop:\n" + body + TAIL) if loop else body
    arch_v = vgprs - agprs
    src = f""".text
.globl k
.p2align 8
.type k,@function
k:
{code}  s_endpgm
.Lend:
.size k, .Lend-k
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr {min(vgprs, 512)}
  .amdhsa_next_free_sgpr 16
  .amdhsa_accum_offset {max(4, min(arch_v, 256))}
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.target: amdgcn-amd-amdhsa--{mcpu}
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 0
    .group_segment_fixed_size: {lds}
    .private_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .wavefront_size: 64
    .sgpr_count: 16
    .vgpr_count: {vgprs}
    .agpr_count: {agprs}
    .max_flat_workgroup_size: {threads}
...
.end_amdgpu_metadata
"""
    s, o, co = tmp / f"{name}.s", tmp / f"{name}.o", tmp / f"{name}.co"
    s.write_text(src)
    subprocess.run([CLANG, "-x", "assembler", "-target", "amdgcn-amd-amdhsa", f"-mcpu={mcpu}",
                    "-c", str(s), "-o", str(o)], check=True, capture_output=True)
    subprocess.run([LLD, "-shared", str(o), "-o", str(co)], check=True, capture_output=True)
    return str(co)


def mfmas(n: int, dst: str = "a", first: int = 0) -> str:
    return "".join(f"  {MFMA} {dst}[{first + 16 * i}:{first + 16 * i + 15}], v[0:1], v[2:3], "
                   f"{dst}[{first + 16 * i}:{first + 16 * i + 15}]\n" for i in range(n))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("perf")


def test_mfma_bound_loop_keeps_the_pipe_full(tmp):
    # 4 independent MFMAs x 32 clocks, the 3 SALU ops issue while the pipe is busy: 128 clocks
    # per iteration, every SIMD's pipe always busy
    r = analyze(build(tmp, "mfma", mfmas(4), agprs=64))
    assert r.loop["mfma"] == 4 and r.loop["instructions"] == 7
    assert r.loop["waves_per_simd"] == [1, 1, 1, 1]
    assert r.cycles_per_iteration == pytest.approx(128, abs=0.5)
    assert r.mfma_busy == pytest.approx(1.0, abs=1e-6)
    assert r.binding == "mfma" and r.idle_breakdown == {}


def test_pass_counts_come_from_mfma_specs(tmp):
    # 16x16x16 f16 is 16 clocks (4 passes) on gfx942: 4 of them = 64 clocks per iteration
    body = "".join(f"  v_mfma_f32_16x16x16_f16 a[{4 * i}:{4 * i + 3}], v[0:1], v[2:3], "
                   f"a[{4 * i}:{4 * i + 3}]\n" for i in range(4))
    r = analyze(build(tmp, "mfma16", body, agprs=64))
    assert r.cycles_per_iteration == pytest.approx(64, abs=0.5)
    assert r.mfma_busy == pytest.approx(1.0, abs=1e-6)


DEP = (f"  {MFMA} v[32:47], v[0:1], v[2:3], v[32:47]\n  s_sub_u32 s1, s1, 1\n"
       "  s_cmp_lg_u32 s1, 0\n  v_add_f32 v20, v32, v20\n")


def test_one_wave_exposes_the_mfma_latency(tmp):
    # MFMA at t; s_sub t+4; s_cmp t+8; v_add reads v32: ready t+32+4 -> t+36; the tail's
    # s_sub/s_cmp/s_cbranch t+40, t+44, t+48; next MFMA t+52: 52 clocks, 32 of them busy; of
    # the 20 idle ones 4 wait for the result, 16 issue v_add and the tail
    r = analyze(build(tmp, "dep1", DEP, threads=256))
    assert r.cycles_per_iteration == pytest.approx(52, abs=0.5)
    assert r.mfma_busy == pytest.approx(32 / 52, abs=1e-3)
    assert r.idle_breakdown["mfma_dependency"] == pytest.approx(4 / 52, abs=1e-3)
    assert r.idle_breakdown["instruction_issue"] == pytest.approx(16 / 52, abs=1e-3)


def test_two_waves_hide_the_mfma_latency(tmp):
    # the same loop with two waves per SIMD: each needs the pipe 32 of its 52 clocks, so two
    # of them keep it busy (64 clocks of MFMA per 2 iterations >= 52)
    r = analyze(build(tmp, "dep2", DEP, vgprs=256, threads=512))
    assert r.loop["waves_per_simd"] == [2, 2, 2, 2]
    assert r.mfma_busy == pytest.approx(1.0, abs=0.01)
    assert r.binding == "mfma"


def test_lds_bound_loop(tmp):
    # 8 ds_read_b128 per wave = 8 KiB at 128 B/clk = 64 clocks of the CU's one LDS pipe; four
    # waves (one per SIMD) -> 256 clocks per iteration, the MFMA pipes busy 32/256
    body = "  ds_read_b128 v[4:7], v8\n" * 8 + "  s_waitcnt lgkmcnt(0)\n" + mfmas(1)
    r = analyze(build(tmp, "lds", body, agprs=64))
    assert r.cycles_per_iteration == pytest.approx(256, rel=0.02)
    assert r.utilisation["lds"] == pytest.approx(1.0, abs=0.02)
    assert r.mfma_busy == pytest.approx(32 / 256, rel=0.02)
    assert r.binding == "lds_bandwidth"


def test_read2_and_write2_move_two_elements_per_lane(tmp):
    # Regression: ds_read2st64_b64 (Triton's operand read) was charged as one b64 (512 B per
    # wave) instead of two (1024 B, the same as ds_read_b128), under-counting Triton's LDS
    # traffic 2x.  The same loop as test_lds_bound_loop with read2 instead of b128: 256 clocks
    for mn, ops in (("ds_read2st64_b64", "v[4:7], v8 offset1:16"),
                    ("ds_read2_b64", "v[4:7], v8 offset1:1")):
        body = f"  {mn} {ops}\n" * 8 + "  s_waitcnt lgkmcnt(0)\n" + mfmas(1)
        r = analyze(build(tmp, mn, body, agprs=64))
        assert r.cycles_per_iteration == pytest.approx(256, rel=0.02), mn
        assert r.utilisation["lds"] == pytest.approx(1.0, abs=0.02), mn
    from kernels.perf import classify
    assert classify("gfx942", "ds_write2st64_b64").bytes == 1024
    assert classify("gfx942", "ds_write2_b32").bytes == 512
    assert classify("gfx942", "ds_read_b64").bytes == 512


def test_waitcnt_on_a_global_load_is_memory_latency(tmp):
    # one load, wait for it, one MFMA: each iteration exposes the memory latency
    body = ("  global_load_dwordx4 v[10:13], v9, s[4:5]\n  s_waitcnt vmcnt(0)\n" + mfmas(1))
    r = analyze(build(tmp, "vm", body, agprs=64))
    assert r.cycles_per_iteration > GFX942.vmem_latency
    assert r.cycles_per_iteration < GFX942.vmem_latency + 100
    assert r.binding == "global_memory_latency"
    idle = 1 - r.mfma_busy
    assert r.idle_breakdown["memory_wait"] > 0.9 * idle


def test_one_wave_waiting_on_memory_by_hand(tmp):
    # one wave per CU (64 KiB of LDS: one work-group of one wave).  Load at t (1 KiB at
    # 64 B/clk: 16 clocks, then the 700-clock latency: data at t+716); s_waitcnt t+716; MFMA
    # t+720; s_sub/s_cmp/s_cbranch t+724..t+732; next load t+736.  SIMD 0's pipe is idle 704
    # of 736 clocks: 700 waiting on vmcnt, 4 issuing s_waitcnt; SIMDs 1-3 have no wave.
    body = ("  global_load_dwordx4 v[10:13], v9, s[4:5]\n  s_waitcnt vmcnt(0)\n" + mfmas(1))
    r = analyze(build(tmp, "vm1", body, agprs=64, threads=64, lds=65536))
    assert r.loop["waves_per_simd"] == [1, 0, 0, 0]
    lat = GFX942.vmem_latency
    period = 16 + lat + 5 * 4
    assert r.cycles_per_iteration == pytest.approx(period, abs=0.5)
    assert r.mfma_busy == pytest.approx(32 / (4 * period), abs=1e-4)
    assert r.idle_breakdown["memory_wait"] == pytest.approx(lat / (4 * period), abs=1e-3)
    assert r.idle_breakdown["no_wave"] == pytest.approx(3 / 4, abs=1e-3)
    assert r.binding == "occupancy"


def test_not_an_amdgpu_elf(tmp):
    import sys
    with pytest.raises(PerfError, match="EM_AMDGPU"):
        analyze(sys.executable if sys.executable.endswith("python") else "/bin/sh")


def test_barrier_makes_the_light_simds_wait(tmp):
    # 5 waves per work-group: SIMD 0 holds two of them (64 MFMA clocks per iteration), SIMDs
    # 1-3 one (32); the barrier holds everyone to SIMD 0's pace: busy (64 + 3 * 32) / (4 * 64)
    body = mfmas(1) + "  s_barrier\n"
    r = analyze(build(tmp, "bar", body, vgprs=256, agprs=64, threads=320))
    assert r.loop["waves_per_simd"] == [2, 1, 1, 1]
    assert r.mfma_busy == pytest.approx(0.625, abs=0.01)
    assert r.idle_breakdown.get("barrier", 0) > 0.1
    # control: without the barrier each SIMD runs at its own pace
    free = analyze(build(tmp, "nobar", mfmas(1), vgprs=256, agprs=64, threads=320))
    assert free.mfma_busy == pytest.approx(1.0, abs=0.01)


def test_setprio_orders_the_waves(tmp):
    # a wave that raises its priority issues first; the model records it without changing a
    # saturated pipe
    r = analyze(build(tmp, "prio", "  s_setprio 3\n" + mfmas(2, first=0) + "  s_setprio 0\n",
                      vgprs=256, agprs=64, threads=512))
    assert r.mfma_busy == pytest.approx(1.0, abs=0.01)


def test_whole_gemm_estimate_by_hand(tmp):
    # 4 waves x 4 MFMAs x 16384 flops = 2 * 128 * 128 * 8: one iteration covers K = 8 of a
    # 128x128 tile.  304 tiles (one per CU), K = 1024 -> 128 iterations x 128 clocks, plus the
    # prologue/epilogue (instructions outside the loop x 4 + two memory latencies)
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    r = analyze(co, gemm=f"{128 * 304},128,1024", tile="128x128")
    w = r.whole_kernel
    assert w["k_per_iteration"] == 8 and w["iterations_per_workgroup"] == 128
    assert w["workgroups"] == 304 and w["slots"] == 304
    overhead = 2 * 4 + 2 * GFX942.vmem_latency      # s_mov before the loop, s_endpgm after
    assert w["prologue_epilogue_cycles"] == overhead
    assert r.peak_fraction == pytest.approx(128 * 128 / (128 * 128 + overhead), abs=1e-4)
    assert w["tflops"] == pytest.approx(r.peak_fraction * 512 * 4 * 304 * GFX942.clock_mhz
                                        / 1e6, rel=1e-3)


def test_mfmas_repeated_over_waves_are_not_useful_work(tmp):
    # Regression (Triton 32x64x128 with 4 warps): a tile too small for the work-group's waves
    # makes every wave run the same MFMAs.  Here each of 4 waves runs 4 MFMAs into 4 distinct
    # 32x32 accumulators (64 registers x 64 lanes = 4096 outputs per wave, 16384 per
    # work-group) against a 32x32 tile: every output 16x, so the 4 x 4 x 16384 executed flops
    # per iteration are 8 K elements of the tile's work, not 128.
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    r = analyze(co, gemm=f"{32 * 304},32,1024", tile="32x32")
    w = r.whole_kernel
    assert w["mfma_duplication"] == 16 and w["accumulator_coverage"] == 16
    assert w["k_per_iteration"] == 8 and w["executed_k_per_iteration"] == 128
    assert w["iterations_per_workgroup"] == 128
    # one 32x32 tile per CU: 1024 clocks of peak work (2*32*32*1024 flops at 2048 flops/clk)
    # in 128 iterations x 128 clocks + the prologue/epilogue (not 8 iterations)
    overhead = w["prologue_epilogue_cycles"]
    assert r.peak_fraction == pytest.approx(1024 / (128 * 128 + overhead), abs=1e-4)
    assert any("16x the tile's outputs" in n for n in r.notes)
    # BK = 8: one BK-step per iteration; BK = 4: two (the unroll factor)
    assert analyze(co, gemm="4096,4096,4096", tile="32x32x8").whole_kernel["loop_unroll"] == 1
    assert analyze(co, gemm="4096,4096,4096", tile="32x32x4").whole_kernel["loop_unroll"] == 2


def test_a_tile_that_the_accumulators_cover_once_is_not_duplicated(tmp):
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    r = analyze(co, gemm="4096,4096,4096", tile="128x128")
    assert r.whole_kernel["mfma_duplication"] == 1
    assert r.whole_kernel["accumulator_coverage"] == 1
    assert not any("tile's outputs" in n for n in r.notes)
    # a bigger tile than the accumulators hold: not an integer duplication, counted as is
    big = analyze(co, gemm="4096,4096,4096", tile="256x128")
    assert big.whole_kernel["mfma_duplication"] == 1
    assert big.whole_kernel["accumulator_coverage"] == 0.5


def test_a_bk_that_the_loop_does_not_step_in_is_refused(tmp):
    co = build(tmp, "mfma", mfmas(4), agprs=64)       # 8 K elements of 128x128 per iteration
    with pytest.raises(PerfError, match="not a whole number of BK=16"):
        analyze(co, gemm="4096,4096,4096", tile="128x128x16")
    with pytest.raises(PerfError, match="not a whole number of BK=3"):
        analyze(co, gemm="4096,4096,4096", tile="128x128x3")
    with pytest.raises(PerfError, match="BMxBN or BMxBNxBK"):
        analyze(co, gemm="4096,4096,4096", tile="128x128x8x2")


def test_causal_attention_is_imbalanced(tmp):
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    full = analyze(co, attention="1,2,4096,128", tile="64")
    causal = analyze(co, attention="1,2,4096,128,causal", tile="64")
    # half the flops, but the longest query block still runs the whole KV length
    assert causal.whole_kernel["cycles"] > 0.5 * full.whole_kernel["cycles"]
    assert causal.peak_fraction < full.peak_fraction


# ----------------------------------------------------------------------------- bad input

def test_not_a_code_object(tmp):
    p = tmp / "notes.txt"
    p.write_text("hello")
    with pytest.raises(PerfError, match="not a code object"):
        analyze(str(p))
    with pytest.raises(PerfError, match="no such file"):
        analyze(str(tmp / "missing.co"))


def test_no_loop(tmp):
    co = build(tmp, "straight", mfmas(2), agprs=64, loop=False)
    with pytest.raises(PerfError, match="no loop"):
        analyze(co)


def test_another_arch(tmp):
    co = build(tmp, "gfx90a", "  v_add_f32 v1, v2, v3\n", mcpu="gfx90a")
    with pytest.raises(PerfError, match="gfx90a.*gfx942"):
        analyze(co)


def test_bad_problem_sizes(tmp):
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    with pytest.raises(PerfError, match="--tile"):
        analyze(co, gemm="128,128,128")
    with pytest.raises(PerfError, match="BMxBN or BMxBNxBK"):
        analyze(co, gemm="128,128,128", tile="128")
    with pytest.raises(PerfError, match="3 comma-separated"):
        analyze(co, gemm="128,128", tile="128x128")
    with pytest.raises(PerfError, match="causal"):
        analyze(co, attention="1,1,128,128,sometimes", tile="64")
    with pytest.raises(PerfError, match="kernel 'nope'"):
        analyze(co, "nope")


def test_cli_json_and_exit_codes(tmp, capsys):
    co = build(tmp, "mfma", mfmas(4), agprs=64)
    assert cli_main(["perf", co, "--gemm", "4096,4096,4096", "--tile", "128x128", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("mfma_busy", "peak_fraction", "binding", "idle_breakdown", "model", "error_bar"):
        assert key in d
    assert "not a measurement" in d["model"] and d["error_bar"] > 0
    assert cli_main(["perf", co]) == 0
    out = capsys.readouterr().out
    assert "model" in out and "not a measurement" in out and "+-" in out
    p = tmp / "junk.co"
    p.write_bytes(b"junk")
    assert cli_main(["perf", str(p)]) == 2
    assert "not a code object" in capsys.readouterr().err
    # BMxBNxBK on the command line: the duplication in the JSON and the note in the text
    assert cli_main(["perf", co, "--gemm", "4096,4096,4096", "--tile", "32x32x8", "--json"]) == 0
    w = json.loads(capsys.readouterr().out)["whole_kernel"]
    assert w["mfma_duplication"] == 16 and w["loop_unroll"] == 1
    assert cli_main(["perf", co, "--gemm", "4096,4096,4096", "--tile", "32x32"]) == 0
    assert "16x the tile's outputs" in capsys.readouterr().out
    assert cli_main(["perf", co, "--gemm", "4096,4096,4096", "--tile", "32x32x16"]) == 2
    assert "not a whole number of BK=16" in capsys.readouterr().err


def test_report_fields_for_report_json(tmp):
    from pathlib import Path
    f = report_fields(Path(build(tmp, "mfma", mfmas(4), agprs=64)).read_bytes())
    assert f["mfma_busy"] == pytest.approx(1.0, abs=1e-6) and f["binding"] == "mfma"
    assert "not a measurement" in f["model"]
    # a kernel the model cannot run says why instead of failing the compile
    g = report_fields(Path(build(tmp, "straight", mfmas(2), agprs=64, loop=False)).read_bytes())
    assert "no loop" in g["unavailable"] and "mfma_busy" not in g


def test_guarded_blocks_all_or_skip(tmp):
    # a forward branch over 20 VALU ops: 'all' runs them (20 x 4 clocks > the 32-clock MFMA:
    # the loop is issue-bound), 'skip' leaves them out (MFMA-bound); the notes give the other
    body = (mfmas(1) + "  s_cmp_eq_u32 s1, 0\n  s_cbranch_scc1 .Lskip\n"
            + "  v_add_f32 v20, v21, v20\n" * 20 + ".Lskip:\n")
    co = build(tmp, "guard", body, agprs=64)
    every = analyze(co)
    skip = analyze(co, branches="skip")
    assert every.loop["guarded_blocks"] == 1
    assert every.loop["instructions"] == skip.loop["instructions"] + 20
    assert skip.mfma_busy == pytest.approx(1.0, abs=1e-6)
    assert every.mfma_busy < 0.5 and every.binding == "instruction_issue"
    assert any("branches='skip'" in n and "100.0%" in n for n in every.notes)
    with pytest.raises(PerfError, match="branches='sometimes'"):
        analyze(co, branches="sometimes")


ROLES = ("  v_lshrrev_b32 v3, 6, v0\n  v_readfirstlane_b32 s5, v3\n  s_cmp_lt_i32 s5, 2\n"
         "  s_cbranch_scc0 .Lrole_b\n  s_mov_b32 s0, 100\n.La:\n" + mfmas(4)
         + "  s_sub_u32 s0, s0, 1\n  s_cmp_lg_u32 s0, 0\n  s_cbranch_scc1 .La\n  s_endpgm\n"
         + ".Lrole_b:\n  s_mov_b32 s0, 100\n.Lb:\n" + DEP
         + "  s_sub_u32 s0, s0, 1\n  s_cmp_lg_u32 s0, 0\n  s_cbranch_scc1 .Lb\n")


def test_wave_specialised_roles_by_hand(tmp):
    # waves 0-1 (SIMDs 0, 1) run loop A (4 MFMAs: pipe always busy), waves 2-3 (SIMDs 2, 3)
    # loop B (the one-wave dependency loop above: 32 of 52 clocks busy), told apart by a branch
    # on readfirstlane(threadIdx.x >> 6): busy (2 + 2 * 32/52) / 4
    co = build(tmp, "roles", ROLES, agprs=64, loop=False)
    r = analyze(co)
    assert r.loop["roles"] == 2
    assert any("wave-specialised" in n and "s_cmp_lt_i32 s5, 2" in n for n in r.notes)
    assert r.mfma_busy == pytest.approx((2 + 2 * 32 / 52) / 4, abs=2e-3)
    # without the split every wave runs the hot loop (A): the pipes are always busy
    every = analyze(co, roles=False)
    assert every.loop["roles"] == 1 and every.mfma_busy == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(PerfError, match="two or more innermost loops"):
        analyze(build(tmp, "mfma", mfmas(4), agprs=64), roles=True)


# ----------------------------------------------------------------------------- invariants

from hypothesis import given, settings, strategies as st  # noqa: E402

from kernels.perf.program import make_op  # noqa: E402
from kernels.perf.simulate import simulate  # noqa: E402

_OPS = [(MFMA, "a[0:15], v[0:1], v[2:3], a[0:15]"), ("v_add_f32_e32", "v20, v21, v20"),
        ("v_exp_f32_e32", "v22, v23"), ("s_add_u32", "s1, s1, 1"),
        ("ds_read_b128", "v[4:7], v8"), ("s_waitcnt", "lgkmcnt(0)"),
        ("global_load_dwordx4", "v[10:13], v9, s[4:5]"), ("s_waitcnt", "vmcnt(0)"),
        ("buffer_load_dwordx4", "v[14:17], v9, s[8:11], 0 offen"), ("s_barrier", ""),
        (MFMA, "v[32:47], v[0:1], v[2:3], v[32:47]"), ("v_add_f32_e32", "v24, v32, v24"),
        ("s_nop", "3")]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, len(_OPS) - 1), min_size=1, max_size=12),
       st.sampled_from([(1, 1), (4, 1), (8, 1), (4, 2)]))
def test_simulation_invariants(picks, shape):
    """Any loop: busy + idle causes = 1; a SIMD cannot beat its matrix pipe nor issue more than
    one instruction of a wave per 4 clocks."""
    wpg, wgs = shape
    body = [make_op("gfx942", 4 * i, *_OPS[k]) for i, k in enumerate(picks)]
    body.append(make_op("gfx942", 4 * len(body), "s_cbranch_scc1", "0"))
    r = simulate(body, waves_per_workgroup=wpg, workgroups=wgs, iterations=5)
    assert 0 <= r.mfma_busy <= 1 + 1e-9
    assert r.mfma_busy + sum(r.idle_breakdown.values()) == pytest.approx(1, abs=5e-3)
    waves = max(r.waves_per_simd)
    mfma_clocks = sum(o.cost.cycles for o in body if o.cost.cls == "mfma")
    # per wave and iteration: the SIMD's pipe serves all its waves; every instruction takes
    # an issue slot of 4 clocks
    assert r.cycles_per_iteration >= 0.97 * waves * mfma_clocks
    assert r.cycles_per_iteration >= 0.97 * 4 * len(body)


def test_a_compiled_gemm_of_ours(tmp):
    """The model on a code object of our own GEMM (compiled here, verification gate on)."""
    from kernels.gemm import build_gemm
    from kernels.gemm_plan import GemmConfig
    built = build_gemm(GemmConfig(256, 256, 1024, block_k=64, stages=1))
    co = built.compile("gfx942")
    r = analyze(co.binary, gemm="4096,4096,4096", tile="128x128")
    assert r.loop["mfma"] > 0 and 0 < r.mfma_busy <= 1
    assert r.mfma_busy + sum(r.idle_breakdown.values()) == pytest.approx(1, abs=5e-3)
    assert 0 < r.peak_fraction <= r.mfma_busy + 1e-9
    # K per loop iteration from the loop's MFMA flops (4 waves, 32x32x8 = 16384 flops each);
    # clang unrolls the BK=64 loop twice: 64 MFMAs per wave = K 128 per iteration
    assert r.whole_kernel["k_per_iteration"] == r.loop["mfma"] * 4 * 16384 / (2 * 128 * 128)
    assert r.whole_kernel["k_per_iteration"] % 64 == 0


def test_a_triton_kernel(tmp):
    """The model on a Triton 3.9 gfx942 code object (compiled offline, as the benchmark does)."""
    pytest.importorskip("triton")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from gfx942_static import triton_compile
    t = triton_compile((128, 128, 64, 4, 2))
    r = analyze(t["binary"], gemm="4096,4096,4096", tile="128x128",
                block_threads=t["threads"], dynamic_lds_bytes=t["lds_dynamic"])
    assert r.loop["mfma"] > 0 and r.loop["waves_per_workgroup"] == 4
    assert r.whole_kernel["k_per_iteration"] == 64
    assert 0 < r.peak_fraction <= 1
    assert r.whole_kernel["mfma_duplication"] == 1


def test_a_triton_tile_too_small_for_its_warps(tmp):
    """Regression: Triton 32x64x128 with 4 warps repeats the tile's MFMAs on every warp; the
    model counted the repeats as work (79% of peak at 1024x1024x16384 instead of ~20%)."""
    pytest.importorskip("triton")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from gfx942_static import triton_compile
    t = triton_compile((32, 64, 128, 4, 2))   # 4 warps, each holding the whole 32x64 tile
    kw = dict(gemm="1024,1024,16384", block_threads=t["threads"],
              dynamic_lds_bytes=t["lds_dynamic"])
    r = analyze(t["binary"], tile="32x64x128", **kw)
    w = r.whole_kernel
    assert w["mfma_duplication"] == 4 and w["k_per_iteration"] == 128
    assert w["executed_k_per_iteration"] == 4 * 128
    assert r.peak_fraction < 0.3


def test_cli_missing_objdump_exits_3(tmp, monkeypatch, capsys):
    from kernels import toolchain
    from kernels.errors import ToolchainError
    co = build(tmp, "mfma", mfmas(4), agprs=64)

    def missing():
        raise ToolchainError("llvm-objdump not found; install llvm-19")
    monkeypatch.setattr(toolchain, "find_toolchain", missing)
    assert cli_main(["perf", co]) == 3
    assert "llvm-objdump not found" in capsys.readouterr().err


def test_a_queue_still_filling_is_reported_not_hidden():
    """Regression (found by the invariant test): loads that are never waited for fill the
    memory queue slowly; after 5 iterations the window saw no idle clock although the pipes
    were not always busy: the report says 'not_steady' instead of idle causes that do not add
    up.  Long enough, the loop settles where the memory system binds it: 8 waves x 2 loads x
    16 clocks = 256 clocks per round for 2 x 96 MFMA clocks per SIMD: busy 192/256."""
    body = [make_op("gfx942", 4 * i, *_OPS[k]) for i, k in enumerate([0, 0, 0, 6, 6])]
    body.append(make_op("gfx942", 20, "s_cbranch_scc1", "0"))
    short = simulate(body, waves_per_workgroup=8, workgroups=1, iterations=5)
    assert "not_steady" in short.idle_breakdown
    assert short.mfma_busy + sum(short.idle_breakdown.values()) == pytest.approx(1, abs=1e-3)
    long = simulate(body, waves_per_workgroup=8, workgroups=1, iterations=40)
    assert long.mfma_busy == pytest.approx(0.75, abs=0.025)
    assert long.utilisation["vmem"] == pytest.approx(1.0, abs=0.01)


def test_a_loop_without_mfma_says_what_the_model_misses(tmp):
    r = analyze(build(tmp, "valu", "  v_add_f32 v1, v2, v3\n  global_load_dword v4, v5, s[4:5]\n"))
    assert r.mfma_busy == 0 and r.loop["mfma"] == 0
    assert any("no MFMA in the hot loop" in n and "HBM" in n for n in r.notes)
    with pytest.raises(PerfError, match="no MFMA"):
        analyze(build(tmp, "valu", "  v_add_f32 v1, v2, v3\n"), gemm="128,128,128",
                tile="128x128")
