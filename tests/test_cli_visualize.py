"""The ``layoutalg show | tv | banks | demo`` commands, run as a user would: in a subprocess."""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "layoutalg.cli", *args], capture_output=True,
                       text=True, cwd=cwd or ROOT, env=env, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_show_prints_table():
    r = run("show", "(4,(2,4)):(2,(1,8))")
    assert r.returncode == 0
    assert "size 32, cosize 32" in r.stdout
    rows = [l.split() for l in r.stdout.splitlines() if re.match(r"\s*\d+(\s+\d+){8}$", l)]
    assert rows[0] == ["0", "0", "1", "8", "9", "16", "17", "24", "25"]


def test_show_writes_svg_and_png(tmp_path):
    svg, png = tmp_path / "l.svg", tmp_path / "l.png"
    r = run("show", "Sw<1,0,1> o 0 o (4,4):(4,1)", "--svg", str(svg), "--png", str(png))
    assert r.returncode == 0, r.stderr
    ET.parse(svg)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {svg}" in r.stdout


def test_show_malformed_layout_exit_2_no_traceback():
    r = run("show", "(4,8:(8,1)")
    assert r.returncode == 2
    assert "is not a layout" in r.stderr and "(4,8):(8,1)" in r.stderr  # says what is valid


@pytest.mark.parametrize("bad", ["(4,8):(8)", "4:x:", "", "<4,8>", "(0,2):(1,1)", "Sw<3,3>"])
def test_show_malformed_layouts_in_process(bad, capsys):
    # the same entry point as the console script, without a process per case
    from layoutalg.cli import main
    assert main(["show", bad]) == 2
    err = capsys.readouterr().err
    assert "layoutalg show: error:" in err and "Traceback" not in err


def test_show_bare_shape_is_compact_layout():
    r = run("show", "(2,3)")
    assert r.returncode == 0 and "(2,3):(1,2)" in r.stdout


def test_show_unwritable_output_exit_2(tmp_path):
    r = run("show", "(2,2):(1,2)", "--svg", str(tmp_path / "no" / "such" / "dir.svg"))
    assert r.returncode == 2 and "cannot write" in r.stderr


def test_tv_table_and_drawing(tmp_path):
    out = tmp_path / "tv.svg"
    r = run("tv", "(16,4):(4,1)", "(1,8)", "--highlight", "0-3", "--svg", str(out))
    assert r.returncode == 0, r.stderr
    assert "tile     16x32" in r.stdout and "T0V0" in r.stdout and "T4V0" in r.stdout
    ET.parse(out)


def test_tv_bad_inputs():
    assert run("tv", "(16,4):(4,1)", "(1,8", ).returncode == 2
    r = run("tv", "(4,2):(1,4)", "(2,2):(1,2)", "--highlight", "a-b")
    assert r.returncode == 2 and "thread list" in r.stderr
    r = run("tv", "(4,2):(2,2)")          # not a bijection onto its tile
    assert r.returncode == 2 and "error" in r.stderr


def test_banks_conflict_exit_1_and_fixed_exit_0(tmp_path):
    png = tmp_path / "b.png"
    r = run("banks", "(64,8):(64,1)", "--png", str(png))
    assert r.returncode == 1
    assert "8-way" in r.stdout and png.exists()
    r = run("banks", "Sw<3,3,3> o 0 o (64,8):(64,1)")
    assert r.returncode == 0 and "conflict-free" in r.stdout


def test_banks_bad_instruction_exit_2():
    r = run("banks", "(64,8):(64,1)", "--instruction", "ds_read_b96x")
    assert r.returncode == 2 and "ds_read_b96x" in r.stderr


def test_help():
    r = run("--help")
    assert r.returncode == 0
    for cmd in ("show", "tv", "banks", "demo"):
        assert cmd in r.stdout
    r = run("banks", "--help")
    assert r.returncode == 0 and "Exit code 1 when conflicts" in r.stdout


@pytest.mark.parametrize("cmd", ["show", "tv", "banks", "demo"])
def test_subcommand_help_in_process(cmd, capsys):
    from layoutalg.cli import main
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0 and "usage: layoutalg " + cmd in capsys.readouterr().out


def test_demo_writes_diagrams_and_index(tmp_path):
    pytest.importorskip("cairosvg", reason="PNG output in the demo uses cairosvg")
    out = tmp_path / "demo"
    r = run("demo", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    index = (out / "index.html").read_text()
    assert str(out / "index.html") in r.stdout
    for stem in ("tv_layout", "mfma_16x16x16_f16", "mfma_32x32x8_f16", "swizzle",
                 "banks_conflicted", "banks_fixed"):
        for ext in ("svg", "png"):
            assert f'href="{stem}.{ext}"' in index
            assert (out / f"{stem}.{ext}").stat().st_size > 1000
        ET.parse(out / f"{stem}.svg")
    assert "8-way bank conflict" in index and "conflict-free" in index
