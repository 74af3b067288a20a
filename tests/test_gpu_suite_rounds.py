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


def test_interleaved_rounds_can_settle_once_for_all(monkeypatch):
    """The suite's GEMM rows settle once and then alternate the pair without settling (nothing
    is released between the timings)."""
    log = []
    monkeypatch.setattr(gpu_suite, "settle", lambda: log.append("settle"))
    monkeypatch.setattr(gpu_suite, "timed", lambda fn, reps, bench: {"wall_s": fn()})
    calls = {"ours": lambda: log.append("ours") or 1.0, "cublas": lambda: log.append("cub") or 2.0}
    meas = gpu_suite.interleaved_rounds(calls, 3, 1, None, settle_each=False)
    assert log == ["ours", "cub", "cub", "ours", "ours", "cub"]
    assert meas == {"ours": [{"wall_s": 1.0}] * 3, "cublas": [{"wall_s": 2.0}] * 3}


def test_suite_table_gemm_rows_give_rounds_and_host_time():
    row = {"part": "suite_gemm", "M": 4000, "N": 3000, "K": 1000, "dtype": "f16",
           "ours_device_s": 48e-6, "cublas_device_s": 43.2e-6, "ratio_device": 0.9,
           "ratio_wall": 0.7, "tflops_device": 500.0, "rel_err": 2e-4, "choice": "wgmma_tma x: y",
           "ours_wall_s_rounds": [1, 2, 3], "ours_host_s": 41.4e-6, "cublas_host_s": 21.6e-6}
    text = gpu_suite.suite_table([row], 3000.0)
    assert "medians of 3 rounds" in text
    line = next(x for x in text.splitlines() if x.startswith("4000x3000x1000"))
    assert "41/22" in line and line.endswith("wgmma_tma x")
    del row["ours_host_s"]                     # a row of an older run: no host column value
    line = next(x for x in gpu_suite.suite_table([row], 3000.0).splitlines()
                if x.startswith("4000x3000x1000"))
    assert " - " in line
