"""scripts/dev.sh: a Debian without python3-venv gets it installed, not a cryptic venv failure."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _missing(tmp_path, stub_python: str) -> list:
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text(stub_python)
    (stub / "python3").chmod(0o755)
    env = dict(os.environ, PATH=f"{stub}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "dev.sh"), "missing"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_python3_venv_is_listed_when_ensurepip_is_absent(tmp_path):
    # Debian's python3 without python3-venv: 'import ensurepip' fails
    stub = "#!/bin/sh\ncase \"$*\" in *ensurepip*) exit 1;; esac\nexit 0\n"
    assert "python3-venv" in _missing(tmp_path, stub)


def test_python3_venv_is_not_listed_when_venv_works(tmp_path):
    assert "python3-venv" not in _missing(tmp_path, "#!/bin/sh\nexit 0\n")


def test_unknown_command_is_a_usage_error():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "dev.sh"), "frobnicate"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "layoutalg" in r.stderr


def test_readme_quick_start_says_how_to_run_layoutalg():
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):readme.index("## A taste")]
    for needle in (".venv/bin/layoutalg", "source .venv/bin/activate",
                   "bash scripts/dev.sh layoutalg", "python3-venv", "own virtualenv",
                   "layoutalg[torch]"):
        assert needle in quick, needle
