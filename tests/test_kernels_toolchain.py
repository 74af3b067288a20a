"""kernels.toolchain / cache / codeobject: compiling for gfx942 offline and reading the result.

Needs clang-19 + lld-19 + llvm-19 (scripts/dev.sh installs them): without them these tests are
skipped, except under CI=true where they fail.
"""

from __future__ import annotations

import json
import os

import pytest

from kernels import Cache, CompileError, KernelError, ToolchainError, compile_hip
from kernels.codeobject import Insn, _innermost, find_loops, occupancy, read_metadata
from kernels.testkernels import VECTOR_ADD, gemm_source, mfma_16x16x16_f16_source, require
from kernels.toolchain import find_toolchain, parse_diagnostics

REPORT_KEYS = {"vgpr", "agpr", "sgpr", "lds_bytes", "scratch_bytes", "spills", "waves_per_simd",
               "mfma_count", "hot_loop_mfma", "histogram"}


@pytest.fixture(scope="module")
def tc():
    return require("device")


def test_vector_add_report(tc):
    co = compile_hip(VECTOR_ADD)
    assert co.arch == "gfx942" and co.binary[:4] == b"\x7fELF"
    assert co.kernels == ["vector_add"]
    r = co.report(block_threads=256)
    d = json.loads(r.to_json())
    assert REPORT_KEYS <= set(d)
    assert d["lds_bytes"] == 1024            # LAGEN_SHARED(float, tile, 256)
    assert d["scratch_bytes"] == 0 and d["spills"] == 0
    assert d["mfma_count"] == 0 and d["hot_loop_mfma"] == 0
    assert 0 < d["vgpr"] <= 32 and d["agpr"] == 0 and d["sgpr"] > 0
    assert d["waves_per_simd"] == 8
    assert d["histogram"]["s_barrier"] == 1 and d["histogram"]["s_endpgm"] == 1
    assert "s_nop" not in d["histogram"] or d["histogram"]["s_nop"] < 4  # padding dropped
    assert r.max_flat_workgroup_size == 256     # LAGEN_LAUNCH_BOUNDS(256)


def test_mfma_kernel_compiles_to_the_mfma(tc):
    r = compile_hip(mfma_16x16x16_f16_source()).report()
    assert r.histogram.get("v_mfma_f32_16x16x16_f16") == 1
    assert r.mfma_count == 1
    assert r.scratch_bytes == 0 and r.spills == 0
    assert r.hot_loop is None and r.hot_loop_mfma == 0


def test_gemm_hot_loop(tc):
    r = compile_hip(gemm_source()).report(block_threads=256)
    # 2x2 MFMA tiles per wave per K step, two barriers per step, all inside the K loop
    assert r.hot_loop_mfma == 4
    assert r.hot_loop["histogram"]["s_barrier"] == 2
    assert r.mfma_count >= 4
    assert r.lds_bytes == 2 * 64 * 16 * 2
    assert r.scratch_bytes == 0 and r.spills == 0
    assert r.waves_per_simd == occupancy("gfx942", r.vgpr_unified, r.sgpr, r.lds_bytes, 256)[
        "waves_per_simd"]


def test_metadata_counts_unified_registers(tc):
    # 18 accumulators of 16 floats: more than 256 registers, so the compiler uses AGPRs; on
    # gfx942 the metadata .vgpr_count is align(arch, 4) + agpr
    src = r"""#include "lagen_hip.h"
LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(64) void many(const lagen_f16x4* A, float* C, int kt) {
  const unsigned l = threadIdx.x;
  lagen_f32x16 acc[18] = {};
  for (int k = 0; k < kt; ++k) {
    lagen_f16x4 a = A[k * 64 + l];
    for (int t = 0; t < 18; ++t) acc[t] = __builtin_amdgcn_mfma_f32_32x32x8f16(a, a, acc[t], 0, 0, 0);
  }
  for (int t = 0; t < 18; ++t) for (int e = 0; e < 16; ++e) C[(t * 16 + e) * 64 + l] = acc[t][e];
}
"""
    r = compile_hip(src).report()
    assert r.agpr > 0
    assert r.vgpr_unified == r.vgpr + r.agpr and r.vgpr % 4 == 0
    assert r.hot_loop_mfma == 18
    alloc = -(-r.vgpr_unified // 8) * 8
    assert r.waves_per_simd == min(8, 512 // alloc)


def test_compile_error_quotes_the_line(tc):
    src = VECTOR_ADD.replace("c[i] = tile[threadIdx.x] + b[i];", "c[i] = tile[threadIdx.x] + bogus;")
    with pytest.raises(CompileError) as ei:
        compile_hip(src, name="vadd_bad.hip", use_cache=False)
    e = ei.value
    line = next(i + 1 for i, t in enumerate(src.splitlines()) if "bogus" in t)
    d = [d for d in e.diagnostics if d.severity == "error"][0]
    assert (d.file, d.line) == ("vadd_bad.hip", line) and "bogus" in d.message
    assert "bogus" in d.source_line
    assert f"vadd_bad.hip:{line}:" in str(e) and "c[i] = tile[threadIdx.x] + bogus;" in str(e)
    assert e.exit_code == 1


def test_parse_diagnostics_without_compiler():
    log = "k.hip:2:5: error: boom\nk.hip:2:5: note: here\nIn file included from x\n"
    ds = parse_diagnostics(log, {"k.hip": "line one\n\tline two\n"})
    assert [(d.severity, d.line, d.col) for d in ds] == [("error", 2, 5), ("note", 2, 5)]
    assert ds[0].source_line == "\tline two"
    assert ds[0].format().splitlines()[-1].endswith("\t   ^")


def test_archs(tc):
    co = compile_hip(VECTOR_ADD, arch="gfx90a")
    assert co.arch == "gfx90a" and co.report().vgpr > 0
    with pytest.raises(KernelError, match="unsupported arch 'gfx1100'"):
        compile_hip(VECTOR_ADD, arch="gfx1100")
    if tc.kind == "clang" and tc.major < 20:
        with pytest.raises(ToolchainError, match="gfx950") as ei:
            compile_hip(VECTOR_ADD, arch="gfx950")
        assert ei.value.exit_code == 3
    else:  # pragma: no cover - newer toolchains
        assert compile_hip(VECTOR_ADD, arch="gfx950").arch == "gfx950"


def test_cache_hit_and_corruption(tc, tmp_path):
    cache = Cache(tmp_path)
    first = compile_hip(VECTOR_ADD, cache=cache)
    assert first.cache_status == "miss" and first.compile_seconds > 0
    again = compile_hip(VECTOR_ADD, cache=cache)
    assert again.cache_status == "hit" and again.binary == first.binary
    # truncate the object: detected, rebuilt, identical again
    data = first.path.read_bytes()
    first.path.write_bytes(data[: len(data) // 2])
    rebuilt = compile_hip(VECTOR_ADD, cache=cache)
    assert rebuilt.cache_status == "corrupt" and rebuilt.binary == data
    # flip one byte (same size): the checksum catches it
    bad = bytearray(data)
    bad[len(bad) // 3] ^= 0xFF
    first.path.write_bytes(bytes(bad))
    assert compile_hip(VECTOR_ADD, cache=cache).cache_status == "corrupt"
    # a damaged side file too
    first.path.with_suffix(".json").write_text("{not json")
    r = compile_hip(VECTOR_ADD, cache=cache)
    assert r.cache_status == "corrupt" and r.binary == data
    assert compile_hip(VECTOR_ADD, cache=cache).cache_status == "hit"
    # flags and arch are part of the key
    assert compile_hip(VECTOR_ADD, options=["-DUNUSED=1"], cache=cache).key != first.key
    assert compile_hip(VECTOR_ADD, arch="gfx90a", cache=cache).key != first.key


def test_cache_root_from_environment(tc, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTALG_CACHE", str(tmp_path / "c"))
    co = compile_hip(VECTOR_ADD)
    assert str(co.path).startswith(str(tmp_path / "c"))


def test_missing_toolchain_says_what_to_install(tmp_path, monkeypatch):
    if os.path.isdir("/opt/rocm"):
        pytest.skip("a ROCm install is present at /opt/rocm")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    monkeypatch.delenv("LAYOUTALG_HIP_CLANG", raising=False)
    with pytest.raises(ToolchainError, match="apt-get install clang-19 lld-19 llvm-19") as ei:
        find_toolchain()
    assert ei.value.exit_code == 3


def test_metadata_reader_rejects_garbage():
    with pytest.raises(KernelError, match="ELF"):
        read_metadata(b"not an elf at all")


def test_innermost_loop_selection():
    # outer loop 0x00..0x40 holds two inner loops; the hot one is the inner loop with more MFMAs
    insns = [Insn(0x00, "s_mov_b32", ""), Insn(0x04, "v_mfma_f32_16x16x16_f16", ""),
             Insn(0x08, "s_cbranch_scc1", "", 0x04),
             Insn(0x0C, "v_mfma_f32_16x16x16_f16", ""), Insn(0x10, "v_mfma_f32_16x16x16_f16", ""),
             Insn(0x14, "s_cbranch_vccnz", "", 0x0C), Insn(0x18, "s_branch", "", 0x30),
             Insn(0x40, "s_cbranch_scc0", "", 0x00)]
    loops = find_loops(insns)
    assert loops == [(0x00, 0x40), (0x04, 0x08), (0x0C, 0x14)]  # s_branch forward: no loop
    assert _innermost(loops) == [(0x04, 0x08), (0x0C, 0x14)]


def test_two_back_edges_to_one_header_are_one_loop():
    # regression: a GEMM k loop with a predicated path has two back edges to its header; the
    # hot loop must span to the last one (it once stopped at the first and missed a load)
    insns = [Insn(0x00, "v_mfma_f32_16x16x16_f16", ""), Insn(0x04, "s_cbranch_scc1", "", 0x00),
             Insn(0x08, "global_load_dwordx4", ""), Insn(0x0C, "s_cbranch_vccnz", "", 0x00)]
    loops = find_loops(insns)
    assert loops == [(0x00, 0x0C)]
    assert _innermost(loops) == [(0x00, 0x0C)]
