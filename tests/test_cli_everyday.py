"""Issue 19: the CLI finishes the job - verdict lines, both split-KV kernels, warnings for options
that are ignored, torch missing -> exit 3, progress on stderr, the package-clash refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from layoutalg.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_compile_split_kv_summarises_both_kernels_and_ends_on_pass(tmp_path, capsys):
    rc = main(["compile", "attention", "--out", str(tmp_path), "--seqlen-q", "1",
               "--seqlen-kv", "8192", "--kv-splits", "4"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert out[0].startswith("split: la_attn_decode_split_")
    assert out[1].startswith("combine: la_attn_decode_combine_")
    assert out[-1].startswith("PASS: la_attn_decode_split_") and "+ la_attn_decode_combine_" \
        in out[-1]


def test_compile_failure_ends_on_fail(monkeypatch, tmp_path, capsys):
    # planted: the gate reports a failing check but does not raise -> the verdict must say FAIL
    from kernels import registry
    entry = registry.get("gemm")
    orig = entry.build

    def build(cfg):
        bk = orig(cfg)
        real = bk.report

        def report():
            rep = real()
            rep["verification"] = dict(rep["verification"], coverage=False)
            return rep
        bk.report = report
        return bk
    monkeypatch.setattr(entry, "build", build)
    rc = main(["compile", "gemm", "--out", str(tmp_path), "--m", "64", "--n", "64", "--k", "32",
               "--block", "64x64x32"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 1 and out[-1] == "FAIL: 1 verification check(s) fail: coverage"


@pytest.mark.parametrize("argv, warning", [
    (["--seqlen-q", "1", "--causal"], "builds the prefill kernel, not decode"),
    (["--causal-align", "bottom_right"], "--causal-align is ignored without --causal"),
    (["--seqlen-q", "1", "--waves", "8"], "--waves is ignored"),
    (["--batch", "3", "--heads", "4"], "--batch, --heads ignored by compile for prefill"),
])
def test_ignored_attention_options_are_warned(argv, warning, tmp_path, capsys, monkeypatch):
    from kernels import registry
    entry = registry.get("attention")
    # the warning is decided before anything is built: stop there (keeps the test fast)
    monkeypatch.setattr(entry, "build", lambda cfg: (_ for _ in ()).throw(SystemExit(0)))
    with pytest.raises(SystemExit):
        main(["compile", "attention", "--out", str(tmp_path), "--head-dim", "64"] + argv)
    assert warning in capsys.readouterr().err


def test_no_warning_for_used_options(tmp_path, capsys, monkeypatch):
    from kernels import registry
    entry = registry.get("attention")
    monkeypatch.setattr(entry, "build", lambda cfg: (_ for _ in ()).throw(SystemExit(0)))
    with pytest.raises(SystemExit):
        main(["compile", "attention", "--out", str(tmp_path), "--causal", "--waves", "4",
              "--causal-align", "bottom_right"])
    assert "warning" not in capsys.readouterr().err


def test_check_without_torch_exits_3_naming_the_install(tmp_path):
    # a torch that cannot be found: a stub directory first on sys.path that hides it
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\nclass _Hide:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(name)\n        return None\n"
        "sys.meta_path.insert(0, _Hide())\n")
    env = dict(os.environ, PYTHONPATH=f"{hide}{os.pathsep}{ROOT}")
    r = subprocess.run([sys.executable, "-m", "layoutalg.cli", "check", "gemm", "--emulate",
                        "--m", "64", "--n", "64", "--k", "32"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "pip install 'layoutalg[torch]'" in r.stderr and "Traceback" not in r.stderr


def test_stages_are_reported_on_stderr_only(capsys):
    rc = main(["check", "gemm", "--emulate", "--m", "64", "--n", "64", "--k", "32",
               "--block", "64x64x32"])
    cap = capsys.readouterr()
    assert rc == 0
    assert "[layoutalg] emulating 1 block(s) x 256 threads on the CPU ..." in cap.err
    assert "[layoutalg] building and verifying gemm: done in" in cap.err
    assert "[layoutalg]" not in cap.out


def test_library_calls_stay_silent(capsys):
    from layoutalg.progress import stage
    with stage("anything"):
        pass
    assert capsys.readouterr().err == ""


def _fake_package(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "fake"
    (d / name).mkdir(parents=True)
    (d / name / "__init__.py").write_text("SOMEONE_ELSE = True\n")
    return d


@pytest.mark.parametrize("name", ["kernels", "visualize"])
def test_a_foreign_package_first_on_the_path_is_refused_plainly(name, tmp_path):
    fake = _fake_package(tmp_path, name)
    env = dict(os.environ, PYTHONPATH=f"{fake}{os.pathsep}{ROOT}")
    r = subprocess.run([sys.executable, "-m", "layoutalg.cli", "show", "(4,8):(8,1)"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 3
    assert f"the top-level package {name!r} is imported from {fake / name}" in r.stderr
    assert "own virtualenv" in r.stderr and "Traceback" not in r.stderr
    # import layoutalg alone warns (the algebra still works)
    r = subprocess.run([sys.executable, "-c", "import layoutalg as la; print(la.parse('4:1')(3))"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.stdout.strip() == "3" and "PackageClashWarning" in r.stderr


def test_own_packages_are_no_clash():
    from layoutalg import package_clashes
    assert package_clashes() == []


# ---- banks --suggest, honest --lds, PASS/FAIL, mfma show --svg/--png, ignored --highlight ----

def test_banks_suggest_prints_proved_layouts_whose_check_commands_pass(capsys):
    import shlex
    rc = main(["banks", "(64,8):(64,1)", "--suggest", "--tile", "64x64"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "suggest_swizzle: Sw<3,3,3>" in out and "suggest_padding: pad 8" in out
    assert out.strip().splitlines()[-1].startswith("PASS: 2 proved conflict-free")
    cmds = [line.split("check it: ", 1)[1] for line in out.splitlines() if "check it: " in line]
    assert len(cmds) == 2
    for cmd in cmds:   # the printed command re-proves the suggestion
        argv = shlex.split(cmd)
        assert argv[0] == "layoutalg"
        assert main(argv[1:]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1].startswith("PASS: ")


def test_banks_suggest_usage_errors(capsys):
    assert main(["banks", "(64,8):(64,1)", "--suggest"]) == 2
    assert "--tile" in capsys.readouterr().err
    assert main(["banks", "(64,8):(64,1)", "--suggest", "--tile", "8x8"]) == 2
    assert "outside the 8x8 --tile" in capsys.readouterr().err
    assert main(["banks", "(64,8):(1,64)", "--suggest", "--tile", "64x64",
                 "--lds", "(64,64):(64,1)"]) == 2
    assert "drop --lds" in capsys.readouterr().err


def test_banks_ends_on_fail_for_a_conflict(capsys):
    assert main(["banks", "(64,8):(64,1)"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(
        "FAIL: ds_read_b128 on gfx942 is bank-conflicted")


def test_banks_help_says_lds_changes_what_access_means():
    from layoutalg.cli import build_parser
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command").choices["banks"]
    text = " ".join(sub.format_help().split())
    assert "changes what ACCESS means" in text and "LDS(ACCESS(lane, value))" in text


def test_mfma_show_draws_svg_and_png(tmp_path, capsys):
    svg, png = tmp_path / "m.svg", tmp_path / "m.png"
    rc = main(["mfma", "show", "v_mfma_f32_16x16x16_f16", "--arch", "gfx942", "--svg", str(svg),
               "--png", str(png), "--highlight", "0-3"])
    if rc == 3:  # pragma: no cover - no rasterizer on this machine
        pytest.skip("no SVG rasterizer")
    assert rc == 0
    assert "T63" in svg.read_text() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    err = capsys.readouterr().err
    assert f"[layoutalg] rasterizing {png} (" in err and "done in" in err


def test_large_labelled_drawings_report_a_stage(tmp_path, capsys):
    assert main(["tv", "(16,16):(16,1)", "(8,8):(8,1)", "--max-cells", "100000", "--svg",
                 str(tmp_path / "big.svg")]) == 0
    assert "[layoutalg] drawing 16384 labelled cells: done in" in capsys.readouterr().err


def test_mfma_show_bad_highlight_fails_before_printing(tmp_path, capsys):
    rc = main(["mfma", "show", "v_mfma_f32_16x16x16_f16", "--arch", "gfx942", "--svg",
               str(tmp_path / "m.svg"), "--highlight", "x"])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == "" and "thread list 'x'" in cap.err


@pytest.mark.parametrize("argv", [
    ["tv", "(16,4):(4,1)", "(1,8)", "--highlight", "0,100"],
    ["mfma", "show", "v_mfma_f32_16x16x16_f16", "--arch", "gfx942", "--highlight", "100"],
])
def test_highlight_beyond_the_threads_is_warned(argv, tmp_path, capsys):
    assert main(argv + ["--svg", str(tmp_path / "x.svg")]) == 0
    assert "--highlight 100: not among the 64 threads (0-63); ignored" in capsys.readouterr().err


def test_emulator_reports_blocks_done_from_its_workers():
    import io
    import torch
    from layoutalg.progress import enabled
    from kernels import GemmConfig, build_gemm
    bk = build_gemm(GemmConfig(128, 128, 32, dtype="f16", block_m=64, block_n=64))
    a, b = torch.randn(128, 32).half(), torch.randn(32, 128).half()
    out = io.StringIO()
    with enabled(stream=out, every_s=0.0):
        bk.emulate(a, b, torch.zeros(128, 128, dtype=torch.float16), workers=1)
    lines = [x for x in out.getvalue().splitlines() if "blocks emulated" in x]
    assert lines, out.getvalue()
    done = [int(x.split(": ")[-1].split("/")[0]) for x in lines]
    assert all(x.endswith("/4 (" + x.split("(")[-1]) for x in lines) and done == sorted(done)
    assert max(done) < 4      # the last count is the stage's "done" line, not a 4/4


def test_count_is_quiet_for_quick_steps_and_when_disabled():
    import io
    from layoutalg.progress import count, enabled
    out = io.StringIO()
    with enabled(stream=out):             # default: nothing within the first second
        count("x", 1, 10)
    count("x", 1, 10)                     # disabled outside
    assert out.getvalue() == ""
