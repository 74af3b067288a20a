"""``--waves-per-eu`` on ``compile gemm`` / ``check gemm`` (issue 15): with ``--block`` it sets
GemmConfig.waves_per_eu, so the tile choice's configurations (224x256x32 with a 512-register
hint at 4096^3, 224x128x32 with a 256-register one) can be reproduced by hand; without ``--block`` it is refused like the other
tile options; a bad value is refused with the valid range."""

import argparse

import pytest

from kernels.amd.gemm_select import select_gemm
from kernels.amd.registry import get

CHOICE_FLAGS = ["--block", "224x128x32", "--waves", "1x4", "--stages", "1",
                "--schedule", "pipelined", "--waves-per-eu", "2"]
CHOICE_4096 = ["--block", "224x256x32", "--waves", "2x2", "--stages", "1", "--mfma", "16x16x16",
               "--schedule", "interleaved", "--swap-ab", "--waves-per-eu", "1"]


def _config(argv):
    entry = get("gemm")
    p = argparse.ArgumentParser()
    entry.add_arguments(p)
    return entry.config(p.parse_args(argv))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_block_flags_reproduce_the_tile_choice_at_4096_cubed(dtype):
    chosen = select_gemm(4096, 4096, 4096, dtype=dtype).config
    assert chosen.waves_per_eu == 1     # the choice this flag exists to reproduce
    by_hand = _config(["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", dtype]
                      + CHOICE_4096)
    assert by_hand == chosen
    # without the flag the same block is another kernel (no register hint)
    plain = _config(["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", dtype]
                    + CHOICE_4096[:-2])
    assert plain.waves_per_eu == 0 and plain != chosen


FP8_CHOICE_FLAGS = ["--block", "224x128x64"] + CHOICE_FLAGS[2:]


@pytest.mark.parametrize("dtype", ["fp8", "bf8"])
def test_block_flags_reproduce_the_tile_choice_of_a_ragged_fp8_gemm(dtype):
    """The 224x128x64 tile (1x4 waves, the 256-register hint) is the choice at 4000x3000x1000
    fp8 (at 4096^3 it was the choice until the interleaved 224x256x64 tile and the 100 %-busy
    128x128x128 loop passed it)."""
    shape = ["--m", "4000", "--n", "3000", "--k", "1000", "--dtype", dtype]
    chosen = select_gemm(4000, 3000, 1000, dtype=dtype).config
    assert chosen.waves_per_eu == 2     # the choice this flag exists to reproduce
    by_hand = _config(shape + FP8_CHOICE_FLAGS)
    assert by_hand == chosen
    # without the flag the same block is another kernel (no register hint)
    plain = _config(shape + FP8_CHOICE_FLAGS[:-2])
    assert plain.waves_per_eu == 0 and plain != chosen


def test_the_hint_reaches_the_source_and_zero_means_none():
    entry = get("gemm")
    small = ["--m", "300", "--n", "200", "--k", "96"]
    src = entry.build(_config(small + CHOICE_FLAGS)).source
    assert "LAGEN_WAVES_PER_EU(2) void" in src
    src0 = entry.build(_config(small + CHOICE_FLAGS[:-1] + ["0"])).source
    assert "LAGEN_WAVES_PER_EU(" not in src0.replace("#define LAGEN_WAVES_PER_EU(", "")


def test_cli_check_with_waves_per_eu_matches_torch(capsys):
    from layoutalg.cli import main
    rc = main(["check", "gemm", "--emulate", "--m", "230", "--n", "136", "--k", "64"]
              + CHOICE_FLAGS)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.strip().splitlines()[-1].startswith("PASS")


def test_waves_per_eu_without_block_is_refused(capsys):
    from layoutalg.cli import main
    rc = main(["check", "gemm", "--emulate", "--m", "64", "--waves-per-eu", "2"])
    assert rc == 2
    assert "--waves-per-eu without --block" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["9", "-1"])
def test_out_of_range_waves_per_eu_is_refused_with_the_range(bad, capsys):
    from layoutalg.cli import main
    rc = main(["check", "gemm", "--emulate", "--m", "64", "--n", "64", "--k", "64",
               "--block", "64x64x32", "--waves-per-eu", bad])
    assert rc == 2
    assert "waves_per_eu must be 0 (no hint) .. 8" in capsys.readouterr().err


def test_preshuffled_b_takes_the_hint_too():
    """The preshuffled-B builder shares GemmBuilder's kernel assembly: the flag is not dropped."""
    entry = get("gemm")
    cfg = _config(["--m", "256", "--n", "256", "--k", "128", "--b-layout", "preshuffled",
                   "--block", "128x128x32", "--waves-per-eu", "2"])
    assert cfg.waves_per_eu == 2
    assert "LAGEN_WAVES_PER_EU(2) void" in entry.build(cfg).source
