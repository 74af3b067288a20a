"""The timing loops and the report writing the GPU benchmark scripts share (gpu_suite.py,
gpu_host.py, gpu_splitk_inline.py, nvidia_ir_decode.py, nvidia_ir_split.py and the gpu_decode_*.py
studies).

One copy of each loop, so every script times the same way:

* :func:`host_seconds`: 3 warm-up calls and a synchronize, then the mean host (launch) time of
  ``n`` calls back to back; the clock stops before the synchronize that drains them.
* :func:`kernel_events`: one warm-up call and a synchronize, then ``reps`` calls under
  ``torch.profiler`` (CUPTI); the profiler's CUDA-side events, for the caller to filter and
  reduce (medians per kernel, sums per call).
* :func:`run_header` / :func:`write_rows_json`: the identity a result file starts with (GPU,
  torch, UTC date, command line) and the ``{"device", "rows"}`` file of the nvidia_ir_*.py runs.
* :func:`event_round_us`: one round of ``n`` calls back to back between two CUDA events, the
  mean microseconds per call (no warm-up: the caller warms up once, then times rounds).

torch is imported inside the functions: the scripts' ``--help`` works without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["bench_parser", "event_round_us", "gpu_clocks", "host_seconds", "kernel_events",
           "run_header", "write_report", "write_rows_json"]


def bench_parser(reps: int, description: str | None = None) -> argparse.ArgumentParser:
    """A parser with the two options every study has: ``--out`` (a folder; default ``$OUT`` or
    ``out``) and ``--reps`` (calls per measurement, default ``reps``)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=reps)
    return ap


def host_seconds(fn: Callable[[], Any], n: int = 300) -> float:
    """Mean host seconds of one call of ``fn`` over ``n`` back-to-back calls, after 3 warm-up
    calls and a synchronize (the clock stops before the final synchronize)."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    return host


def kernel_events(fn: Callable[[], Any], reps: int) -> List[Any]:
    """The CUDA-side profiler events (CUPTI) of ``reps`` calls of ``fn``, after one warm-up call
    and a synchronize."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type.name == "CUDA"]


def event_round_us(fn: Callable[[], Any], n: int) -> float:
    """Mean microseconds per call of ``n`` back-to-back calls of ``fn``, timed by two CUDA
    events around them (no warm-up: callers warm up once and then time interleaved rounds)."""
    import torch
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e3


def write_report(out: str | Path, stem: str, lines: Sequence[str], data: Any) -> None:
    """Print ``lines`` and write them to ``out/stem.txt``, ``data`` to ``out/stem.json``."""
    text = "\n".join(lines)
    print(text, flush=True)
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{stem}.txt").write_text(text + "\n")
    (d / f"{stem}.json").write_text(json.dumps(data, indent=1))


def run_header() -> Dict[str, str]:
    """What a result file says of its run: GPU 0's name, the torch version, the UTC date and
    the command line."""
    import torch
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(sys.argv)}


def write_rows_json(path: Optional[str], rows: List[Any]) -> None:
    """Write ``{"device": GPU 0's name, "rows": rows}`` to ``path`` (indent 1); nothing when
    ``path`` is None (the scripts' ``--out`` is optional)."""
    import torch
    if path:
        with open(path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)


def gpu_clocks(timeout: float) -> str:
    """nvidia-smi's SM and memory clocks, temperature, power and throttle reasons now, as one
    CSV line (context for a measurement, never part of it: a failure is returned as text)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,"
                               "power.draw,clocks_throttle_reasons.active", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=timeout).stdout.strip()
    except Exception as e:      # the clock is context, not the measurement
        return f"nvidia-smi: {e}"
