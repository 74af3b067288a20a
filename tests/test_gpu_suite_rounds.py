"""benchmarks/gpu_suite.py's ``interleaved_rounds``, the A/B loop of the fused-decode studies
(gpu_decode_fused.py, gpu_decode_fused_ir.py), run without a GPU: settle and the clocks are
replaced by recorders, so the order (settle before every timing, the order reversed every other
round, ``after`` right after each timing) is pinned."""
from __future__ import annotations

import sys
from pathlib import Path

# appended, never inserted first: benchmarks/visualize.py would shadow the visualize
# package for every test module collected after this one
sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_suite  # noqa: E402


def test_interleaved_rounds_alternate_the_order_and_settle_before_each_timing(monkeypatch):
    log = []
    monkeypatch.setattr(gpu_suite, "settle", lambda: log.append("settle"))

    def timed(fn, reps, bench):
        assert (reps, bench) == (5, "bench")
        fn()
        return {"device_s": float(len(log))}
    monkeypatch.setattr(gpu_suite, "timed", timed)
    calls = {"a": lambda: log.append("a"), "b": lambda: log.append("b")}
    meas = gpu_suite.interleaved_rounds(calls, 3, 5, "bench",
                                        after=lambda name, f: log.append(f"after {name}"))
    one = lambda n: ["settle", n, f"after {n}"]              # noqa: E731
    assert log == one("a") + one("b") + one("b") + one("a") + one("a") + one("b")
    assert list(meas) == ["a", "b"]
    assert [m["device_s"] for m in meas["a"]] == [2.0, 11.0, 14.0]   # log length at each timing
    assert [m["device_s"] for m in meas["b"]] == [5.0, 8.0, 17.0]


def test_interleaved_rounds_without_after_only_times(monkeypatch):
    monkeypatch.setattr(gpu_suite, "settle", lambda: None)
    monkeypatch.setattr(gpu_suite, "timed", lambda fn, reps, bench: {"wall_s": fn()})
    meas = gpu_suite.interleaved_rounds({"x": lambda: 1.0}, 2, 1, None)
    assert meas == {"x": [{"wall_s": 1.0}, {"wall_s": 1.0}]}
