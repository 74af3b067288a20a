"""The packages stay pyflakes-clean (unused imports and variables, undefined names, f-strings
without placeholders): a name left behind by a refactor is a reader's false lead, and an
undefined one a NameError waiting on a path no test takes.  Skipped where pyflakes is not
installed.  A line may opt out as flake8 lets it (``# noqa`` or ``# noqa: F401``: a deliberate
re-export, an import that only probes whether a package is present)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pyflakes_api = pytest.importorskip("pyflakes.api")
from pyflakes import reporter as pyflakes_reporter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "layoutalg", "mfma_specs", "visualize")

#: flake8's codes of the pyflakes messages (what a ``# noqa: Fnnn`` names)
CODES = {"UnusedImport": "F401", "ImportShadowedByLoopVar": "F402", "ImportStarUsed": "F403",
         "LateFutureImport": "F404", "ImportStarUsage": "F405", "MultiValueRepeatedKeyLiteral":
         "F601", "FStringMissingPlaceholders": "F541", "RedefinedWhileUnused": "F811",
         "UndefinedName": "F821", "UndefinedExport": "F822", "UndefinedLocal": "F823",
         "UnusedVariable": "F841", "UnusedAnnotation": "F842"}
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
                  re.IGNORECASE)


class _Collect(pyflakes_reporter.Reporter):
    def __init__(self):
        self.found = []

    def unexpectedError(self, filename, msg):
        self.found.append(f"{filename}: {msg}")

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append(f"{filename}:{lineno}: {msg}")

    def flake(self, message):
        self.found.append(message)


def _waived(message, lines) -> bool:
    m = NOQA.search(lines[message.lineno - 1]) if message.lineno <= len(lines) else None
    if m is None:
        return False
    codes = m.group("codes")
    return codes is None or CODES.get(type(message).__name__, "?") in re.split(r"[,\s]+",
                                                                               codes.upper())


def findings(path: Path) -> list:
    """pyflakes' messages for one file, less the lines that waive them."""
    rep = _Collect()
    pyflakes_api.checkPath(str(path), rep)
    lines = path.read_text().splitlines()
    return [str(m) for m in rep.found if isinstance(m, str) or not _waived(m, lines)]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_is_pyflakes_clean(package):
    found = [f for p in sorted((ROOT / package).rglob("*.py")) for f in findings(p)]
    assert not found, "\n".join(found)


def test_a_planted_unused_import_is_found_and_noqa_waives_it(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import os\nimport re  # noqa: F401\nimport sys  # noqa: E402\n"
                   "x = f'no placeholder'\n")
    got = findings(bad)
    assert len(got) == 3, got           # os, sys (waived for another code), the f-string
    assert any("'os' imported but unused" in f for f in got)
    assert any("'sys' imported but unused" in f for f in got)
    assert not any("'re'" in f for f in got)


def test_amd_flavour_exports_only_what_it_defines():
    """Regression: amd_flavour's ``__all__`` still named the runners that moved to
    amd_flavour_checks, so ``from kernels.nvidia.amd_flavour import *`` raised AttributeError."""
    import kernels.nvidia.amd_flavour as m
    assert [n for n in m.__all__ if not hasattr(m, n)] == []
    ns: dict = {}
    exec("from kernels.nvidia.amd_flavour import *", ns)
    assert "compile_amd" in ns and "run_gemm" not in ns
