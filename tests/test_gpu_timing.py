"""benchmarks/gpu_timing.py, the loops every GPU benchmark script shares, checked without a GPU:
torch.cuda.synchronize and the profiler are replaced by recorders, so the order of warm-up,
synchronize and timed calls (the timing semantics the scripts rely on) is pinned."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.profiler

# appended, never inserted first: benchmarks/visualize.py would shadow the visualize
# package for every test module collected after this one
sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_timing  # noqa: E402


@pytest.fixture
def trace(monkeypatch):
    log = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    return log


def test_host_seconds_warms_up_three_calls_then_times_n(trace):
    t = gpu_timing.host_seconds(lambda: trace.append("call"), n=5)
    assert trace == ["call"] * 3 + ["sync"] + ["call"] * 5 + ["sync"]
    assert t >= 0.0


def test_kernel_events_warms_up_once_and_keeps_the_cuda_events(trace, monkeypatch):
    ev = [SimpleNamespace(name="lg_a", device_type=SimpleNamespace(name="CUDA")),
          SimpleNamespace(name="aten::mm", device_type=SimpleNamespace(name="CPU"))]

    class FakeProfile:
        def __init__(self, activities):
            assert activities == [torch.profiler.ProfilerActivity.CUDA]

        def __enter__(self):
            trace.append("profile on")
            return self

        def __exit__(self, *exc):
            trace.append("profile off")

        def events(self):
            return ev

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    got = gpu_timing.kernel_events(lambda: trace.append("call"), reps=2)
    assert got == [ev[0]]
    assert trace == ["call", "sync", "profile on", "call", "call", "sync", "profile off"]


def test_write_report_prints_and_writes_text_and_json(tmp_path, capsys):
    gpu_timing.write_report(tmp_path / "o", "study", ["a", "b"], {"x": 1})
    assert capsys.readouterr().out == "a\nb\n"
    assert (tmp_path / "o" / "study.txt").read_text() == "a\nb\n"
    assert json.loads((tmp_path / "o" / "study.json").read_text()) == {"x": 1}


def test_bench_parser_defaults(monkeypatch):
    monkeypatch.setenv("OUT", "/tmp/x")
    a = gpu_timing.bench_parser(reps=7).parse_args([])
    assert (a.out, a.reps) == ("/tmp/x", 7)


def test_gpu_clocks_returns_the_failure_as_text(monkeypatch):
    def boom(*a, **kw):
        raise FileNotFoundError("nvidia-smi")
    monkeypatch.setattr(gpu_timing.subprocess, "run", boom)
    assert gpu_timing.gpu_clocks(timeout=1).startswith("nvidia-smi: ")


def test_gpu_clocks_passes_the_timeout(monkeypatch):
    seen = {}

    def run(cmd, **kw):
        seen.update(kw)
        return SimpleNamespace(stdout=" 1980 MHz, 2619 MHz \n")
    monkeypatch.setattr(gpu_timing.subprocess, "run", run)
    assert gpu_timing.gpu_clocks(timeout=20) == "1980 MHz, 2619 MHz"
    assert seen["timeout"] == 20


def test_benchmarks_do_not_shadow_the_visualize_package():
    """Regression: this module once put benchmarks/ first on sys.path at import time, so
    `import visualize` in every later-collected test module found benchmarks/visualize.py
    (the whole suite stopped at collection)."""
    import importlib
    vis = importlib.import_module("visualize")
    assert Path(vis.__file__).name == "__init__.py", vis.__file__
    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    assert bench not in sys.path[:1]


def test_event_round_us_times_n_calls_between_two_events(trace, monkeypatch):
    class FakeEvent:
        made = []

        def __init__(self, enable_timing):
            assert enable_timing
            self.tag = "start" if not FakeEvent.made else "stop"
            FakeEvent.made.append(self)

        def record(self):
            trace.append(self.tag)

        def elapsed_time(self, other):
            assert (self.tag, other.tag) == ("start", "stop")
            return 2.0                                  # ms, as CUDA events report

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    us = gpu_timing.event_round_us(lambda: trace.append("call"), n=4)
    assert trace == ["start"] + ["call"] * 4 + ["stop", "sync"]
    assert us == pytest.approx(2.0 / 4 * 1e3)           # mean us per call, not the round's ms


def test_run_header_names_gpu0_torch_utc_date_and_command(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: asked.append(i) or "GPU X")
    monkeypatch.setattr(sys, "argv", ["bench.py", "--skip", "timing"])
    h = gpu_timing.run_header()
    assert list(h) == ["device", "torch", "date", "command"]      # the result files' key order
    assert (h["device"], h["torch"], h["command"]) == ("GPU X", torch.__version__,
                                                       "bench.py --skip timing")
    assert asked == [0] and h["date"].endswith("Z") and len(h["date"]) == 20


def test_write_rows_json_writes_device_and_rows_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "GPU X")
    gpu_timing.write_rows_json(None, [{"a": 1}])                   # --out not given: no file
    assert list(tmp_path.iterdir()) == []
    gpu_timing.write_rows_json(str(tmp_path / "r.json"), [{"a": 1}])
    assert json.loads((tmp_path / "r.json").read_text()) == {"device": "GPU X", "rows": [{"a": 1}]}
