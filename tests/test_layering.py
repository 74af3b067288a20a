"""The layering of the four packages, enforced (issue 13, item 5).

* no import cycle among project modules (layoutalg, mfma_specs, kernels, visualize), counting
  every import, including the ones inside functions: a lazy import hides a cycle from Python's
  import machinery, not from the design;
* the packages import one way: layoutalg <- mfma_specs <- kernels, and visualize reads the first
  two (never kernels);
* no module over 800 lines;
* no ``_private`` name imported from another module.  A package's ``__init__`` re-exporting
  its own submodules' names is the package speaking for itself; the allow-list below is empty
  on purpose: make the name public where it is a real seam.

The graph is read from the source (``ast``), so the test needs no optional dependency and
sees imports on paths that are never executed here (CUDA, ROCm).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("layoutalg", "mfma_specs", "kernels", "visualize")
MAX_LINES = 800
# which project packages each package may import (besides itself)
ALLOWED_PACKAGE_DEPS = {"layoutalg": set(), "mfma_specs": {"layoutalg"},
                        "kernels": {"layoutalg", "mfma_specs"},
                        "visualize": {"layoutalg", "mfma_specs"}}
# (importing module, imported module, name): justified private imports.  Empty: keep it so.
PRIVATE_ALLOWED: Set[Tuple[str, str, str]] = set()

# Edges that break the package direction on purpose (each says why); they are left out of the
# direction and the cycle checks.  The ``layoutalg`` command is the application on top of all
# four packages: its ``demo`` subcommand runs visualize's and kernels' demos.
UPWARD_ALLOWED: Dict[Tuple[str, str], str] = {
    ("layoutalg.cli", "visualize.demo"): "the CLI is the application layer over all packages",
    ("layoutalg.cli", "kernels.demo"): "the CLI is the application layer over all packages",
}

# Debt outside kernels/ that issue 13's session did not pay (see kernels/README.md, "Layering");
# each entry is a violation that exists today.  The test fails when one disappears, so the
# list only shrinks: delete the entry with the fix.
KNOWN_DEBT_UPWARD: Set[Tuple[str, str]] = {
    # Jupyter _repr_svg_ draws with visualize (a lazy import inside the method)
    ("layoutalg.layout", "visualize"), ("layoutalg.swizzle", "visualize"),
    ("layoutalg.tv", "visualize"), ("mfma_specs.spec", "visualize"),
    ("layoutalg.verify.banks", "visualize"), ("mfma_specs.select", "visualize"),
    ("mfma_specs.select", "visualize.notebook"), ("mfma_specs.spec", "visualize.notebook"),
    # ``layoutalg mfma show --svg`` draws with visualize
    ("mfma_specs.cli", "visualize"), ("mfma_specs.cli", "visualize.cli"),
    # the Triton / CuTe interop resolves MFMA atoms through mfma_specs
    ("layoutalg.interop.atoms", "mfma_specs"), ("layoutalg.interop.ttgir", "mfma_specs"),
}
KNOWN_DEBT_BIG: Set[str] = set()
# lazy imports between layoutalg's core modules (the layout types and composition call each
# other) and between two verifiers.  The layoutalg knot is inherent: Layout.with_shape and
# ComposedLayout.compose call composition, which builds Layouts and dispatches a Swizzle or a
# ComposedLayout on the left; tilers, which composition reads its tiler argument with, builds
# Layouts.  The rest of the algebra (complements, inverses, divides, products, casts,
# composed_ops, the algebra facade) and enumerate import the knot one way.
KNOWN_DEBT_CYCLES = [["layoutalg.compose", "layoutalg.layout", "layoutalg.swizzle",
                      "layoutalg.tilers"],
                     ["layoutalg.verify.banks", "layoutalg.verify.symbolic"],
                     ["layoutalg.dialects", "layoutalg.parse"],
                     ["visualize.cli", "visualize.from_triton"]]
KNOWN_DEBT_PRIVATE: Set[Tuple[str, str, str]] = {
    ("mfma_specs.select", "mfma_specs", "_table"),
    ("visualize.from_triton", "visualize.cli", "_write"),
}


def _modules() -> Dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str) -> str:
    """The project module a dotted name lives in (longest known prefix), or ''."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return ""


def imports(mod: str) -> Iterator[Tuple[str, str, int]]:
    """(imported project module, imported name or '', line) for every import in ``mod``."""
    path = MODULES[mod]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _owner(a.name):
                    yield _owner(a.name), "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, path, node)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:                  # ``from pkg import submodule``
                    yield sub, "", node.lineno
                elif _owner(target):
                    yield _owner(target), a.name, node.lineno


def _excused(m: str, target: str) -> bool:
    return (m, target) in UPWARD_ALLOWED or (m, target) in KNOWN_DEBT_UPWARD


def graph() -> Dict[str, Set[str]]:
    g: Dict[str, Set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in imports(m):
            if target != m and not _excused(m, target):
                g[m].add(target)
    return g


def _is_package_of(pkg: str, mod: str) -> bool:
    return mod.startswith(pkg + ".")


def cycles(g: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan).  A package's
    ``__init__`` importing its submodules is not an edge that can close a cycle through the
    package itself: ``kernels`` -> ``kernels.ir`` -> (nothing in kernels/__init__)."""
    g = {m: {t for t in ts if not _is_package_of(t, m)} for m, ts in g.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10000))
    try:
        for v in sorted(g):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return out


def private_imports() -> List[str]:
    bad = []
    for m in MODULES:
        for target, name, line in imports(m):
            if not name.startswith("_") or name.startswith("__") or target == m:
                continue
            if (m, target, name) in PRIVATE_ALLOWED | KNOWN_DEBT_PRIVATE:
                continue
            bad.append(f"{m}:{line} imports {name} from {target}")
    return bad


def test_no_import_cycles():
    found = [c for c in cycles(graph()) if c not in KNOWN_DEBT_CYCLES]
    assert not found, "import cycles (break them; a lazy import is still an edge):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_packages_import_one_way():
    bad = []
    for m in MODULES:
        pkg = m.split(".")[0]
        for target, _, line in imports(m):
            tp = target.split(".")[0]
            if tp != pkg and tp not in ALLOWED_PACKAGE_DEPS[pkg] and not _excused(m, target):
                bad.append(f"{m}:{line} imports {target}")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_module_over_800_lines():
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES
           and m not in KNOWN_DEBT_BIG}
    assert not big, f"modules over {MAX_LINES} lines (split them): {big}"


def test_no_private_imports_across_modules():
    bad = private_imports()
    assert not bad, "private names imported from another module:\n" + "\n".join(bad)


def test_known_debt_is_still_owed():
    """Each KNOWN_DEBT entry is a violation that still exists (delete it with its fix)."""
    edges = {(m, t) for m in MODULES for t, _, _ in imports(m)}
    assert KNOWN_DEBT_UPWARD <= edges, KNOWN_DEBT_UPWARD - edges
    assert all(len(MODULES[m].read_text().splitlines()) > MAX_LINES for m in KNOWN_DEBT_BIG)
    priv = {(m, t, n) for m in MODULES for t, n, _ in imports(m)}
    assert KNOWN_DEBT_PRIVATE <= priv, KNOWN_DEBT_PRIVATE - priv
    assert not any(m.startswith("kernels") for m, _ in KNOWN_DEBT_UPWARD)
    found = cycles(graph())
    assert all(c in found for c in KNOWN_DEBT_CYCLES), (KNOWN_DEBT_CYCLES, found)
    assert not any(m.startswith("kernels") for c in found for m in c)


def test_project_code_uses_no_old_kernels_path():
    """``kernels.compat`` serves the pre-issue-13 paths for users; project code imports the
    new ones (an old path would also hide its real dependency from this test)."""
    from kernels.compat import MOVED
    bad = []
    for m, p in MODULES.items():
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [_resolve(m, p, node)] + [f"{_resolve(m, p, node)}.{a.name}"
                                                  for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            bad += [f"{m}:{node.lineno} imports {n}" for n in names if n in MOVED]
    assert not bad, "old kernels paths (see kernels.compat.MOVED):\n" + "\n".join(bad)


def test_old_paths_are_the_new_modules():
    """``import kernels.gemm`` is ``kernels.amd.gemm`` itself (monkeypatching it patches the
    code that runs); a module split in two is served by a proxy that finds names in both."""
    import importlib
    import kernels  # noqa: F401  (installs the finder)
    from kernels.compat import MOVED, new_paths
    for old in MOVED:
        mod = importlib.import_module(old)
        news = new_paths(old)
        if len(news) == 1 and not any(o.startswith(old + ".") for o in MOVED):
            assert mod is importlib.import_module(news[0]), old
    from kernels.cuda_gemm import CudaGemmConfig, gemm
    assert gemm.__module__ == "kernels.nvidia.dispatch"
    assert CudaGemmConfig.__module__ == "kernels.nvidia.gemm"
    from kernels.cuda import compile as cc, launch
    assert cc.__name__ == "kernels.toolchain.nvrtc" and callable(launch)
    with pytest.raises(AttributeError, match="moved to kernels.nvidia.gemm"):
        importlib.import_module("kernels.cuda_gemm").no_such_name


def test_lds_models_come_from_the_registered_provider(monkeypatch):
    """layoutalg.verify resolves ``arch=`` strings through what mfma_specs registered (it does
    not import mfma_specs); with nothing registered it says what to do."""
    import layoutalg as la
    import mfma_specs
    from layoutalg.verify import VerifyError, bank_conflicts, model
    assert model.registered_lds_models() is mfma_specs.lds_model
    monkeypatch.setattr(model, "_PROVIDER", [])
    with pytest.raises(VerifyError, match="import mfma_specs"):
        bank_conflicts(la.Layout((64, 2), (2, 1)), instruction="ds_read_b64")


# ---- the checks themselves can fail (planted violations) -----------------------------------

def test_cycle_finder_sees_a_lazy_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_reader_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    src = "from .ir import walk\n\ndef f():\n    from ..layoutalg import _x\n    import kernels.emit\n"
    p = tmp_path / "kernels" / "verify" / "mod.py"
    p.parent.mkdir(parents=True)
    p.write_text(src)
    fake = {"kernels": ROOT / "kernels/__init__.py", "kernels.verify": p.parent / "__init__.py",
            "kernels.verify.mod": p, "kernels.verify.ir": p, "kernels.emit": p,
            "kernels.layoutalg": p}
    monkeypatch.setitem(globals(), "MODULES", fake)
    got = sorted(imports("kernels.verify.mod"))
    assert got == [("kernels.emit", "", 5), ("kernels.layoutalg", "_x", 4),
                   ("kernels.verify.ir", "walk", 1)]


@pytest.mark.parametrize("mod", ["kernels", "kernels.emulator"])
def test_package_inits_are_modules(mod):
    assert mod in MODULES


def test_python_dash_m_on_an_old_path_runs_the_moved_entry_point():
    """Regression: ``python -m kernels.cuda.amd_flavour`` (the documented command) ended in an
    AttributeError traceback from runpy after the move; it runs the moved entry point now, and
    an old path without one is refused in one line."""
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "kernels.cuda.amd_flavour", "--help"], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "usage: amd_flavour_checks.py" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "kernels.gemm"], cwd=ROOT, capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "kernels.gemm (moved to kernels.amd.gemm) has no command-line entry point" in r.stderr
