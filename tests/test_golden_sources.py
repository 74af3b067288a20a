"""Generated sources are byte-identical to the committed golden hashes.

``tests/fixtures/golden_sources.json`` holds the sha256 of every kernel source the tests and
examples generate (AMD GEMM / prefill / decode / split-KV over dtypes, layouts, tiles, d64/128/256
and causal; the NVIDIA mma.sync and wgmma builders; the AMD-on-NVIDIA translation units; the
examples' kernels).  A refactor must not change one byte of them.  A deliberate change of a
generated source regenerates the JSON in the same commit
(``PYTHONPATH=. python tools/golden_sources.py``) and the commit message says which sources
changed and why.  Nothing is compiled: the whole matrix is generated in about a minute (the reductions are memoised: layoutalg.symbolic).
"""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("golden_sources", ROOT / "tools" / "golden_sources.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

WANT = json.loads(golden.GOLDEN.read_text())
CONFIGS = dict(golden.configurations())


def test_matrix_matches_the_committed_names():
    """A configuration added or dropped without regenerating the JSON is caught too."""
    assert sorted(CONFIGS) == sorted(WANT)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_generated_source_is_byte_identical(name):
    got = golden.digest(CONFIGS[name]())
    assert got == WANT.get(name), (
        f"{name}: the generated source changed. If that is deliberate, regenerate "
        "tests/fixtures/golden_sources.json with tools/golden_sources.py in the same commit")


def test_digest_sees_one_byte():
    """The check can fail: a one-character change of a source changes its hash."""
    src = CONFIGS["amd/gemm/gate-200x136x72"]()
    assert golden.digest(src) == WANT["amd/gemm/gate-200x136x72"]
    assert golden.digest(src.replace("sA", "sB", 1)) != WANT["amd/gemm/gate-200x136x72"]
