"""The GPU suite's settle rule (issue 20): a row is timed only once a probe copy runs at its
quiet speed again after the suite released memory (benchmarks/gpu_decode_firstcall.py: an
8 GiB release slowed a decode and a copy ~16 % for ~10+ ms).  The waiting logic runs here on
fake probes; the GPU side is benchmarks/gpu_suite.py's ``settle``."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

# appended, never inserted first: benchmarks/visualize.py would shadow the visualize
# package for every test module collected after this one
sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gpu_suite import SETTLE_TOL, suite_table, wait_quiet  # noqa: E402


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def probes(times, clock, each=0.0005):
    """A probe returning ``times`` in turn (the last one forever), each taking ``each`` s."""
    it = iter(times)
    last = [None]

    def probe() -> float:
        clock.t += each
        last[0] = next(it, last[0])
        return last[0]
    return probe


def test_quiet_at_once_waits_for_nothing():
    clock = FakeClock()
    waited, quiet = wait_quiet(probes([1.0], clock), 1.0, pause=clock.sleep, clock=clock)
    assert quiet and waited == pytest.approx(0.0005)


def test_waits_through_a_contended_window():
    # 16 % slow for 5 probes (the measured slowdown), then quiet
    clock = FakeClock()
    calls = [1.16] * 5 + [1.01]
    waited, quiet = wait_quiet(probes(calls, clock), 1.0, pause=clock.sleep, clock=clock)
    assert quiet
    assert waited == pytest.approx(6 * 0.0005 + 5 * 0.005)


def test_gives_up_after_max_and_says_so():
    clock = FakeClock()
    waited, quiet = wait_quiet(probes([1.2], clock), 1.0, max_s=0.1, pause=clock.sleep,
                               clock=clock)
    assert not quiet and 0.1 <= waited < 0.12


@settings(max_examples=60, deadline=None)
@given(slow=st.floats(0.0, 0.5), n_slow=st.integers(0, 30))
def test_quiet_means_within_tolerance(slow, n_slow):
    """It never reports quiet on a probe more than SETTLE_TOL slower than the quiet time."""
    clock = FakeClock()
    seen = []
    inner = probes([1.0 + slow] * n_slow + [1.0], clock)

    def probe() -> float:
        seen.append(inner())
        return seen[-1]
    waited, quiet = wait_quiet(probe, 1.0, pause=clock.sleep, clock=clock)
    assert quiet
    assert seen[-1] <= 1.0 + SETTLE_TOL
    assert all(t > 1.0 + SETTLE_TOL for t in seen[:-1])


def test_table_warns_about_unsettled_rows():
    rows = [{"part": "suite_decode", "B": 4, "Hq": 32, "Hkv": 8, "Skv": 4096, "D": 256,
             "bytes": 134348800, "ours_device_s": 5e-5, "GBps_device": 2687.0,
             "of_copy_device": 0.89, "of_copy_adjacent": 0.89, "of_copy_wall": 0.4,
             "rel_err": 2e-4, "choice": "split_kv x", "settle_ms": 2000.0, "settled": False}]
    text = suite_table(rows, 3015.0)
    assert "WARNING: 1 row(s) timed before the GPU was quiet" in text
    rows[0]["settled"] = True
    assert "WARNING" not in suite_table(rows, 3015.0)
