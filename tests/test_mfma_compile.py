"""Every builtin the specs name compiles to the spec's mnemonic.

One HIP file per target holds a one-instruction kernel per spec (``mfma_specs.probe``); clang-19
compiles it (all targets in parallel), llvm-objdump-19 disassembles it, and each kernel must
contain exactly its spec's matrix instruction.  Required: the 46 CDNA3 instructions on gfx942
(also gfx940/gfx941); also checked: CDNA1 (gfx908), CDNA2 (gfx90a), RDNA3 wave32/wave64
(gfx1100), RDNA4 (gfx1201).
CDNA4 (gfx950) needs clang >= 20 and is not compiled here.

Skipped only when the CI environment variable is unset *and* the tools are missing; under CI
a missing clang-19 fails (CI installs it through the README set-up).
"""

from __future__ import annotations

import os
import tempfile

import pytest

import mfma_specs as ms
from mfma_specs.probe import compile_probes, disassemble, find_tool

TOOLS = ("clang++-19", "llvm-objdump-19")
MISSING = [t for t in TOOLS if find_tool(t) is None]
IN_CI = bool(os.environ.get("CI"))

CONFIGS = [  # (target, wave size, extra clang flags)
    ("gfx942", None, ()),
    ("gfx940", None, ()),
    ("gfx941", None, ()),
    ("gfx908", None, ()),
    ("gfx90a", None, ()),
    ("gfx1100", None, ()),
    ("gfx1100", 64, ("-mwavefrontsize64",)),
    ("gfx1201", None, ()),
]


def _gate(missing, in_ci) -> str:
    """"run" with the tools; else "fail" under CI, "skip" only outside CI."""
    if not missing:
        return "run"
    return "fail" if in_ci else "skip"


def _apply_gate() -> None:
    decision = _gate(MISSING, IN_CI)
    if decision == "fail":
        pytest.fail(f"CI is set but {', '.join(MISSING)} missing: the README set-up installs "
                    "clang-19/llvm-19 (scripts/dev.sh setup)")
    if decision == "skip":
        pytest.skip(f"{', '.join(MISSING)} not installed (and CI is not set)")


def test_gate_never_skips_in_ci():
    assert _gate([], True) == _gate([], False) == "run"
    assert _gate(["clang++-19"], True) == "fail"
    assert _gate(["clang++-19"], False) == "skip"


def test_toolchain_present_or_explicitly_skipped():
    _apply_gate()


@pytest.fixture(scope="module")
def disassembly():
    _apply_gate()
    results = {}
    with tempfile.TemporaryDirectory() as d:
        jobs = []
        for arch, wave, flags in CONFIGS:
            specs = ms.instructions(arch, wave)
            jobs.append(((arch, wave), specs, *compile_probes(specs, arch, d, flags)))
        for key, specs, proc, obj, names in jobs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"clang failed for {key}:\n{err}"
            found = disassemble(obj, key[0])
            results[key] = (specs, {names[k]: v for k, v in found.items()})
    return results


@pytest.mark.parametrize("arch,wave", [(a, w) for a, w, _ in CONFIGS])
def test_builtins_compile_to_the_spec_mnemonic(disassembly, arch, wave):
    specs, found = disassembly[(arch, wave)]
    assert set(found) == {s.name for s in specs}
    wrong = {name: got for name, got in found.items() if got != [name]}
    assert not wrong, f"{arch}: probe kernels with unexpected matrix instructions: {wrong}"
    if arch.startswith("gfx94"):
        assert len(found) == 46
