"""TTGIR layout attributes (real lines from Triton's compiler, tests/fixtures/
ttgir_attributes.json) read by layoutalg.interop.ttgir and the ``--from-triton`` CLI options.

#ttg.linear and #ttg.swizzled_shared need no Triton; MFMA/WMMA/dot_op/blocked tests skip
without it, and the refusal without Triton is tested in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import layoutalg as la
from layoutalg.interop import InteropError
from layoutalg.interop.ttgir import from_ttgir, instruction_check, parse_attribute

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(HERE)
DUMPS = json.load(open(os.path.join(HERE, "fixtures", "ttgir_attributes.json")))["dumps"]
BASES = json.load(open(os.path.join(HERE, "fixtures", "triton_bases.json")))


def _alias(arch, name):
    return next(l for l in DUMPS[arch]["aliases"] if l.startswith(name + " "))


def _header(arch):
    return "\n".join(DUMPS[arch]["aliases"])


def test_parse_real_attribute_lines():
    a = parse_attribute(_alias("gfx942", "#mma"))
    assert a == {"kind": "amd_mfma", "version": 3, "warpsPerCTA": [2, 2],
                 "instrShape": [32, 32, 8], "isTransposed": True}
    w = parse_attribute(_alias("gfx1200", "#mma"))
    assert w["kind"] == "amd_wmma" and w["ctaLayout"] == {"warp": [[0, 1], [1, 0]]}
    d = parse_attribute(_header("gfx942") + "\n" + DUMPS["gfx942"]["dot_ops"][0])
    assert d["kind"] == "dot_op" and d["parent"] == a and d["kWidth"] == 4


def test_linear_attribute_needs_no_triton():
    line = _alias("gfx942", "#linear")
    tv = from_ttgir(line, [64, 128])
    a = parse_attribute(line)
    b = la.interop.triton.bases_of({**{k: a[k] for k in ("register", "lane", "warp", "block")},
                                    "shape": [64, 128]})
    assert tv.layout_tv == la.interop.triton.from_linear_layout(b).layout_tv


@pytest.mark.parametrize("sw", BASES["shared"]["swizzled"], ids=lambda s: str(s))
def test_swizzled_shared_formula_equals_triton_bases(sw):
    order = ", ".join(map(str, sw["order"]))
    text = (f"#ttg.swizzled_shared<{{vec = {sw['vec']}, perPhase = {sw['per_phase']}, "
            f"maxPhase = {sw['max_phase']}, order = [{order}]}}>")
    ours = from_ttgir(text, sw["shape"])
    theirs = la.interop.triton.from_linear_layout({"offset": sw["offset"],
                                                   "shape": sw["shape"]})
    n = sw["shape"][0] * sw["shape"][1]
    assert [ours(i) for i in range(n)] == [theirs(i) for i in range(n)]


def test_real_swizzled_lines_read_to_cute_swizzles():
    lds = from_ttgir(_alias("gfx942", "#shared"), [128, 64])   # vec 4, maxPhase 16
    assert lds == la.ComposedLayout(la.Swizzle(4, 2, 4), 0, la.Layout((128, 64), (64, 1)))


@pytest.mark.parametrize("text, msg", [
    ("", "expected a TTGIR layout attribute"),
    ("#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>", "paste its '#name = ...' line"),
    ("#ttg.amd_rotating_shared<{vec = 4, perPhase = 1, maxPhase = 16, order = [0, 1]}>",
     "not supported"),
    ("#ttg.linear<{register = [[1, 0]], lane = [[0, 1]]", "cannot read"),
])
def test_bad_attributes_are_refused(text, msg):
    with pytest.raises(InteropError, match=msg):
        from_ttgir(text, [4, 4])


def test_without_triton_mfma_attributes_say_what_is_missing():
    code = ("import sys; sys.modules['triton'] = None\n"
            "from layoutalg.interop.ttgir import from_ttgir\n"
            f"line = {_alias('gfx942', '#mma')!r}\n"
            "try:\n    from_ttgir(line, [32, 32])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert "InteropError #ttg.amd_mfma is built by Triton's own layout code" in p.stdout


# ---- with Triton ----------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx1100", "gfx1200"])
def test_real_dump_lane_maps_against_mfma_specs(arch):
    pytest.importorskip("triton")
    hdr = _header(arch)
    assert instruction_check(parse_attribute(hdr + "\n#mma"), arch)[0] == "equal"
    for dot in DUMPS[arch]["dot_ops"]:
        status, msg = instruction_check(parse_attribute(hdr + "\n" + dot), arch)
        # gfx12: Triton's compiler picks kWidth 8 (K contiguous); the instruction interleaves
        # K by 4 - the same permutation for A and B (see test_interop_triton)
        assert status == ("k-relabelled" if arch == "gfx1200" else "equal"), msg


def test_planted_wrong_mfma_operand_is_reported():
    pytest.importorskip("triton")
    # kWidth 8 on a 32x32x8 f16 MFMA: 8 registers a lane where the instruction reads 4
    text = _alias("gfx942", "#mma") + "\n#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 8}>"
    status, msg = instruction_check(parse_attribute(text), "gfx942")
    assert status == "differs" and "8 registers per lane" in msg
    # kWidth 1: a K permutation, reported as such (lane 0 item 1 holds k = 2, not 1)
    text = text.replace("kWidth = 8", "kWidth = 1")
    status, msg = instruction_check(parse_attribute(text), "gfx942")
    assert status == "k-relabelled" and "lane 0 item 1 holds (0, 2)" in msg


def _cli(*argv):
    p = subprocess.run([sys.executable, "-m", "layoutalg.cli", *argv], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_cli_tv_from_triton_linear():
    rc, out, err = _cli("tv", "--from-triton", _alias("gfx942", "#linear"), "--shape", "64,128")
    assert rc == 0, err
    assert "layout_tv" in out and "T0V0" in out


def test_cli_tv_from_triton_checks_the_lane_map(tmp_path):
    pytest.importorskip("triton")
    svg = tmp_path / "a.svg"
    rc, out, err = _cli("tv", "--from-triton", _header("gfx942") + "\n" +
                        DUMPS["gfx942"]["dot_ops"][0], "--svg", str(svg))
    assert rc == 0, err
    assert "lane map vs mfma_specs: equal: A of v_mfma_f32_32x32x8_f16" in out
    assert svg.read_text().startswith("<svg") or "<svg" in svg.read_text()[:200]


def test_cli_banks_from_triton_verdicts():
    pytest.importorskip("triton")
    acc = _header("gfx950") + "\n" + DUMPS["gfx950"]["dot_ops"][0]
    swz = "#ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>"
    plain = "#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}>"
    rc, out, err = _cli("banks", "--arch", "gfx942", "--from-triton", acc, "--lds-from-triton",
                        swz, "--shape", "128,64")
    assert rc == 0 and "conflict-free" in out, out + err
    rc, out, err = _cli("banks", "--arch", "gfx942", "--from-triton", acc, "--lds-from-triton",
                        plain, "--shape", "128,64")
    assert rc == 1 and "8-way bank conflict" in out, out + err


def test_cli_from_triton_bad_input_exit_2():
    rc, out, err = _cli("tv", "--from-triton", "#ttg.nonsense<{a = 1}>", "--shape", "4,4")
    assert rc == 2 and "not supported" in err
    rc, out, err = _cli("tv")
    assert rc == 2 and "tv needs THR" in err
    rc, out, err = _cli("banks", "--lds-from-triton", _alias("gfx942", "#linear"),
                        "--shape", "64,128")
    assert rc == 2


@pytest.mark.parametrize("shape, trans", [("[4, 64, 4]", "false"), ("[64, 4, 4]", "true")])
def test_sixteen_block_tiles_are_checked_too(shape, trans):
    pytest.importorskip("triton")
    mma = (f"#mma = #ttg.amd_mfma<{{version = 3, warpsPerCTA = [2, 2], instrShape = {shape}, "
           f"isTransposed = {trans}}}>")
    assert instruction_check(parse_attribute(mma + "\n#mma"), "gfx942")[0] == "equal"
    for i in (0, 1):
        dot = f"\n#ttg.dot_op<{{opIdx = {i}, parent = #mma, kWidth = 4}}>"
        status, msg = instruction_check(parse_attribute(mma + dot), "gfx942")
        assert status == "equal" and "v_mfma_f32_4x4x4_16b_f16" in msg, msg
