"""Per-stage progress lines on stderr for steps that can take seconds.

The console script turns them on (:func:`enabled`); library calls stay silent by default, so a
notebook or a test that calls the API directly prints nothing.  One line when a stage starts and
one when it ends with its time keeps logs readable and needs no dependency (no ``tqdm``/``rich``):
the slow steps (host-compiling the emulator, running its blocks, clang, rasterizing) are single
calls that report no fraction done, so a bar would have nothing to fill.

    with stage("compiling for gfx942"):
        ...
    # [layoutalg] compiling for gfx942 ...
    # [layoutalg] compiling for gfx942: done in 0.61 s
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator, TextIO

__all__ = ["enabled", "stage", "is_enabled"]

_state = {"on": False, "stream": None}


@contextlib.contextmanager
def enabled(on: bool = True, stream: TextIO = None) -> Iterator[None]:
    """Turn stage lines on (or off) inside the block; ``stream`` defaults to ``sys.stderr``."""
    old = dict(_state)
    _state.update(on=on, stream=stream)
    try:
        yield
    finally:
        _state.update(old)


def is_enabled() -> bool:
    return bool(_state["on"])


def _say(text: str) -> None:
    stream = _state["stream"] or sys.stderr
    try:
        print(f"[layoutalg] {text}", file=stream, flush=True)
    except (BrokenPipeError, ValueError):  # a closed stderr must not fail the command
        pass


@contextlib.contextmanager
def stage(what: str) -> Iterator[None]:
    """Announce ``what`` on stderr, run the block, then report its time (or that it failed)."""
    if not _state["on"]:
        yield
        return
    _say(f"{what} ...")
    t0 = time.perf_counter()
    try:
        yield
    except BaseException:
        _say(f"{what}: stopped after {time.perf_counter() - t0:.2f} s")
        raise
    _say(f"{what}: done in {time.perf_counter() - t0:.2f} s")
