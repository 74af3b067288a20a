"""The examples/ ladder runs as tests: each main() at small sizes in a temp dir must exit 0 and
print its proof lines; a bad input must make it exit 1 with the verifier's reason."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.testkernels import require

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def _toolchains():
    require("device")    # clang for gfx942 (fails under CI=true when missing, else skips)
    require("host")      # the emulator's host compiler


def _main(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def _run(capsys, name, *argv):
    rc = _main(name)(list(argv))
    return rc, capsys.readouterr().out


def _has(out, *lines):
    for line in lines:
        assert line in out, f"missing {line!r} in:\n{out}"


def test_01_vector_add(capsys, tmp_path):
    rc, out = _run(capsys, "01_vector_add", "--n", "5000", "--out", str(tmp_path))
    assert rc == 0, out
    _has(out, "first element of a thread's vector: 1024*bid + 4*tid",
         "PROVED coverage", "PROVED 128-bit vectors", "in bounds iff Eq(Mod(n, 4), 0)",
         "PROVED bounds for every n = 4q", "'global_load_dwordx4': 2",
         "'global_store_dwordx4': 1", "OK: emulated 5 blocks x 256 threads",
         "ALL PROOFS AND THE EMULATED RUN PASSED")
    assert {p.name for p in tmp_path.iterdir()} == {"vector_add.hip", "vector_add.co",
                                                      "block_tv.svg"}


def test_01_refuses_a_size_the_guard_does_not_cover(capsys, tmp_path):
    rc, out = _run(capsys, "01_vector_add", "--n", "4098", "--out", str(tmp_path))
    assert rc == 1
    _has(out, "FAILED: n=4098 violates Eq(Mod(n, 4), 0)")


def test_02_tiled_copy(capsys, tmp_path):
    rc, out = _run(capsys, "02_tiled_copy", "--out", str(tmp_path))
    assert rc == 0, out
    _has(out, "tiled over the 8x24 block: TV (4,(8,(2,3))):(1,(8,(4,64)))",
         "PROVED coverage of the 8x24 tile", "PROVED no guard needed for any 8m x 24n problem",
         "PROVED 128-bit source vectors", "16-byte vectors are legal for ldb = 0 (mod 4)",
         "PROVED 128-bit destination vectors at ldb=128", "'global_load_dwordx4': 12",
         "'global_store_dwordx4': 12", "OK: emulated 15 blocks x 4 threads",
         "ALL PROOFS AND THE EMULATED RUN PASSED")
    assert (tmp_path / "tv_layout.svg").stat().st_size > 0
    assert (tmp_path / "tiled_copy.co").stat().st_size > 0


def test_02_rejects_a_pitch_that_breaks_128_bit_vectors(capsys, tmp_path):
    rc, out = _run(capsys, "02_tiled_copy", "--ldb", "122", "--out", str(tmp_path))
    assert rc == 1
    _has(out, "FAILED 128-bit destination vectors at ldb=122", "not a multiple of 4")


def test_03_tiled_mma(capsys, tmp_path):
    rc, out = _run(capsys, "03_tiled_mma", "--out", str(tmp_path))
    assert rc == 0, out
    _has(out, "PROVED lane correctness of A for 4 waves", "PROVED lane correctness of B",
         "PROVED lane correctness of C for 4 waves: 4096 register items",
         "PROVED gate on the printed kernel: 13/13 checks hold", "MFMA 8, no loop",
         "OK: emulated 1 block x 256 threads", "ALL PROOFS AND THE EMULATED RUN PASSED")
    for f in ("tiled_mma.hip", "tiled_mma.co", "mma_atom.svg", "tiled_A.svg", "tiled_B.svg",
              "tiled_C.svg"):
        assert (tmp_path / f).stat().st_size > 0, f
    assert "__builtin_amdgcn_mfma_f32_16x16x4f32" in (tmp_path / "tiled_mma.hip").read_text()


def test_04_swizzled_gemm(capsys, tmp_path):
    rc, out = _run(capsys, "04_swizzled_gemm", "--size", "512", "--emulate-size", "128",
                   "--out", str(tmp_path))
    assert rc == 0, out
    _has(out, "PROVED gate, B as stored: 13/13 checks on the printed 512^3 kernel",
         "PROVED gate, B pre-shuffled: 13/13 checks",
         "A unswizzled ((128,32),2):((32,1),4096): writes 1-way, reads 4-way",
         "PROVED A LDS conflict-free with Sw<", "PROVED B LDS conflict-free with Sw<",
         "PROVED double buffer", "== the instructions the gate verified: True",
         "B's LDS writes 32-bit -> 128-bit", "OK: B as stored, emulated 128^3",
         "OK: B pre-shuffled, emulated 128^3", "compiled 512^3 for gfx942, emulated 128^3",
         "ALL PROOFS AND THE EMULATED RUNS PASSED",
         # the ladder's last step: B preshuffled into MFMA fragment order, in registers
         "PROVED gate, B in fragment order: 13/13 checks",
         "B in fragment order: B has no LDS (buffer_load_dwordx4 straight into registers)",
         "'buffer_load_dwordx4': 8", "PROVED B in fragment order:", "(lane_mfma_operands)",
         "LDS 16384 B (A only, was 32768 B)", "OK: B in fragment order, emulated 128^3",
         "model (not a measurement, +-25%)")
    assert len(list(tmp_path.glob("*.co"))) == 3 and len(list(tmp_path.glob("banks_*.svg"))) == 4
    svg = (tmp_path / "preshuffle_B.svg").read_text()
    assert "L63" in svg and "fragment order" in svg
    # every compiled hot loop is the verified one (the three variants)
    assert out.count("== the instructions the gate verified: True") == 3


def test_examples_run_as_scripts_from_anywhere(tmp_path):
    r = subprocess.run([sys.executable, str(EXAMPLES / "01_vector_add.py"), "--n", "1024",
                        "--out", "o"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "o" / "vector_add.co").is_file()
