"""The distribution as a user gets it: build the wheel and the sdist, install the wheel into a new
virtualenv outside the checkout and run ``layoutalg compile gemm``, ``layoutalg check gemm
--emulate`` and ``layoutalg demo`` from another directory.

Regression for issue 19: the wheel left out ``kernels/include/*.h`` and
``kernels/emulator/hip_emu.h``, so an installed ``layoutalg compile gemm`` ended in a
``FileNotFoundError`` and the demo marked its kernel steps FAILED.

How the virtualenv gets its dependencies (a decision, not an accident): the wheel is installed
with ``--no-deps --no-index`` and the new environment sees numpy/sympy/torch through a ``.pth``
file that appends this interpreter's site-packages *after* its own.  That keeps the test offline
and within seconds (installing torch would take minutes and a network), while everything the
wheel ships - the four packages, their data files and the ``layoutalg`` console script - comes
from the new environment only; the test asserts that, and runs with ``PYTHONPATH`` unset and its
working directory outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("layoutalg", "mfma_specs", "kernels", "visualize")
HEADERS = ("kernels/include/lagen_hip.h", "kernels/include/lagen_cuda.h",
           "kernels/emulator/hip_emu.h")

pytestmark = pytest.mark.slow


def _copy_source(dst: Path) -> Path:
    """The files a build reads, copied so that building leaves nothing in the checkout."""
    src = dst / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "*.egg-info")
    for name in PACKAGES + ("tests", "docs", "examples", "scripts"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
    return src


def _build(src: Path, out: Path, kind: str) -> Path:
    """``setuptools.build_meta`` directly (PEP 517, no network, no ``build`` package needed)."""
    code = (f"import setuptools.build_meta as b; print(b.build_{kind}({str(out)!r}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    src = _copy_source(tmp)
    out = tmp / "out"
    out.mkdir()
    return {"wheel": _build(src, out, "wheel"), "sdist": _build(src, out, "sdist")}


def test_wheel_and_sdist_carry_the_headers_and_the_sdist_the_fixtures(dist):
    names = set(zipfile.ZipFile(dist["wheel"]).namelist())
    for h in HEADERS:
        assert h in names, f"wheel lacks {h}"
    with tarfile.open(dist["sdist"]) as t:
        snames = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for h in HEADERS + ("tests/fixtures/cute_oracle.jsonl", "tests/fixtures/mfma_ground_truth.json.gz",
                        "scripts/dev.sh", "MANIFEST.in"):
        assert h in snames, f"sdist lacks {h}"


def _dep_dirs() -> list:
    """This interpreter's site-packages directories (numpy, sympy, torch live there)."""
    dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return dirs or [sysconfig.get_paths()["purelib"]]


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("venv")
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=120)
    py = env_dir / "bin" / "python"
    install = ["install", "-q", "--no-deps", "--no-index", str(dist["wheel"])]
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py)] + install,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "no such option" in r.stderr:  # pip < 22.3: the venv's own pip
        shutil.rmtree(env_dir)
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
        r = subprocess.run([str(py), "-m", "pip"] + install, capture_output=True, text=True,
                           timeout=300)
    assert r.returncode == 0, r.stderr
    purelib = subprocess.run([str(py), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    Path(purelib, "zz_layoutalg_test_deps.pth").write_text("\n".join(_dep_dirs()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp / "elsewhere"
    work.mkdir()
    return {"python": py, "purelib": Path(purelib), "env": env, "cwd": work}


def _run(venv, *argv, timeout=300):
    return subprocess.run(list(argv), cwd=venv["cwd"], env=venv["env"], capture_output=True,
                          text=True, timeout=timeout)


def test_installed_packages_come_from_the_new_virtualenv(venv):
    code = "import " + ", ".join(PACKAGES) + "; print('\\n'.join(m.__file__ for m in (" + \
        ", ".join(PACKAGES) + ")))"
    r = _run(venv, str(venv["python"]), "-c", code)
    assert r.returncode == 0, r.stderr
    for f in r.stdout.split():
        assert Path(f).is_relative_to(venv["purelib"]), f"{f} is not from the wheel"


def test_installed_compile_check_and_demo_run_outside_the_checkout(venv):
    exe = shutil.which("layoutalg", path=venv["env"]["PATH"])
    assert exe and Path(exe).parent == venv["python"].parent   # the wheel's console script
    r = _run(venv, exe, "compile", "gemm", "--arch", "gfx942", "--out", "g")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (venv["cwd"] / "g" / "kernel.co").stat().st_size > 0
    assert "10/10 checks hold" in r.stdout or "checks hold" in r.stdout

    pytest.importorskip("torch")
    r = _run(venv, exe, "check", "gemm", "--emulate", "--m", "64", "--n", "64", "--k", "32")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().splitlines()[-1].startswith("PASS")

    r = _run(venv, exe, "demo", "--out", "demo", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout
    demo = venv["cwd"] / "demo"
    assert (demo / "index.html").exists() and (demo / "gemm_gfx942" / "kernel.co").exists()
    assert (demo / "tv_layout.png").read_bytes()[:4] == b"\x89PNG"


def test_a_package_overwritten_by_another_distribution_is_refused(venv):
    # what pip does when a second distribution ships a top-level 'kernels': same folder, its file
    init = venv["purelib"] / "kernels" / "__init__.py"
    orig = init.read_bytes()
    try:
        init.write_text("# Hugging Face kernels\n")
        r = _run(venv, str(venv["python"].parent / "layoutalg"), "show", "(4,8):(8,1)")
        assert r.returncode == 3, r.stdout + r.stderr
        assert "is not the file layoutalg installed" in r.stderr and "Traceback" not in r.stderr
    finally:
        init.write_bytes(orig)
    assert _run(venv, str(venv["python"].parent / "layoutalg"), "show", "4:1").returncode == 0


def test_a_file_missing_from_the_install_is_reported_plainly(venv):
    header = venv["purelib"] / "kernels" / "include" / "lagen_hip.h"
    moved = header.with_suffix(".moved")
    header.rename(moved)
    try:
        r = _run(venv, str(venv["python"].parent / "layoutalg"), "compile", "gemm", "--out", "x")
        assert r.returncode == 3, r.stdout + r.stderr
        assert f"files installed by layoutalg's wheel are missing: {header}" in r.stderr
        assert "Traceback" not in r.stderr
    finally:
        moved.rename(header)


class _FakeDist:
    """A distribution whose files list names a file that does not exist."""

    def __init__(self, root, record, direct_url=None):
        self.root, self.record, self.direct_url = root, record, direct_url
        from importlib.metadata import PackagePath
        self.files = [PackagePath("kernels/gone_after_a_move.py")]

    def read_text(self, name):
        return {"RECORD": self.record, "direct_url.json": self.direct_url}.get(name)

    def locate_file(self, f):
        return self.root / f


@pytest.mark.parametrize("record, direct_url, reported", [
    (None, None, False),                                           # a checkout's egg-info
    ("kernels/gone_after_a_move.py,,\n", '{"dir_info": {"editable": true}}', False),
    ("kernels/gone_after_a_move.py,,\n", '{"url": "file:///x.whl"}', True),   # a real wheel
])
def test_only_a_wheel_install_is_checked_for_missing_files(monkeypatch, record, direct_url,
                                                           reported):
    """Regression: with the checkout on sys.path, importlib.metadata found its stale
    layoutalg.egg-info (SOURCES.txt listed the modules issue 13 moved) and every CLI command in
    the checkout exited 3 with 'files installed by layoutalg's wheel are missing'."""
    import importlib.metadata as md
    from pathlib import Path

    import layoutalg.install as inst
    root = Path(inst.__file__).resolve().parent.parent
    monkeypatch.setattr(md, "distribution", lambda name: _FakeDist(root, record, direct_url))
    msgs = inst.package_clashes()
    assert any("gone_after_a_move.py" in m for m in msgs) == reported, msgs
