"""docs/TUTORIAL.ipynb executes top to bottom (nbclient, a real IPython kernel) and its cells
show rich output: diagrams for the layout, the TV layout, the MFMA choice and spec, and the bank
results (verdict plus diagram), fitted to the cell width.  Needs the ``test`` extra's nbformat,
nbclient and ipykernel (skipped cleanly without them) and clang-19 for the compile cell."""

from __future__ import annotations

import os
from pathlib import Path

import re

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "TUTORIAL.ipynb"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from kernels.errors import ToolchainError
    from kernels.toolchain import find_toolchain
    try:
        find_toolchain()
    except ToolchainError as e:  # pragma: no cover
        pytest.skip(str(e))
    work = tmp_path_factory.mktemp("tutorial")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    old = os.environ.get("PYTHONPATH")
    # the kernel is a subprocess: it must import this checkout, as the test process does
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([old] if old else []))
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}}).execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return [c for c in nb.cells if c.cell_type == "code"]


def _results(cell):
    return [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]


def _source_has(cells, text):
    return next(c for c in cells if text in c.source)


def test_every_cell_runs_without_error(executed):
    errors = [o for c in executed for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    assert all(c.execution_count for c in executed)


def test_objects_render_as_fitted_diagrams(executed):
    for marker, needle in [("make_layout_tv", "T63"), ("choose_mfma", "choose_mfma -&gt;"),
                           ("lookup(", "D[16x16] += A[16x16] * B[16x16]"),
                           ("conflicted = ", "8-way bank conflict"),
                           ("fixed = ", "conflict-free; 8 cycles")]:
        cell = _source_has(executed, marker)
        [res] = _results(cell)
        html = res["data"].get("text/html", "")
        assert "max-width:100%" in html and "<svg" in html, marker     # a diagram, fitted
        assert needle in html, (marker, needle)
    layout = _results(_source_has(executed, 'la.parse("(4,8):(8,1)")'))[0]
    assert "<svg" in layout["data"]["text/html"]


def test_the_kernel_is_verified_compiled_and_matches_torch(executed):
    out = "".join(o.get("text", "") for c in executed for o in c.outputs
                  if o.output_type == "stream")
    held = re.search(r"(\d+) of (\d+) checks hold", out)
    assert held and held.group(1) == held.group(2) and int(held.group(2)) >= 13, out
    assert "bytes of code object" in out and "max |out - ref|" in out
