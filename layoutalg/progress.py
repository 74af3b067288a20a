"""Per-stage progress lines on stderr for steps that can take seconds.

The console script turns them on (:func:`enabled`); library calls stay silent by default, so a
notebook or a test that calls the API directly prints nothing.  One line when a stage starts and
one when it ends with its time keeps logs readable and needs no dependency (no ``tqdm``/``rich``).
Most slow steps (host-compiling the emulator, clang, rasterizing) are single calls that report
no fraction done, so a bar would have nothing to fill; the one that does - the emulator's blocks,
counted by its workers in shared memory - prints a ``done/total`` line once a second
(:func:`count`), which reads well in logs too (a redrawn bar does not).

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

__all__ = ["enabled", "stage", "is_enabled", "count"]

_state = {"on": False, "stream": None, "last": {}, "every_s": 1.0}


@contextlib.contextmanager
def enabled(on: bool = True, stream: TextIO = None, every_s: float = 1.0) -> Iterator[None]:
    """Turn stage lines on (or off) inside the block; ``stream`` defaults to ``sys.stderr``;
    :func:`count` prints at most every ``every_s`` seconds (and not before the first)."""
    old = dict(_state)
    _state.update(on=on, stream=stream, last={}, every_s=every_s)
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


def count(what: str, done: int, total: int) -> None:
    """``[layoutalg] what: done/total`` at most once a second, from a polling loop (the
    emulator's blocks).  The first line comes after a second, so quick steps stay quiet."""
    if not _state["on"]:
        return
    now = time.monotonic()
    last = _state["last"].setdefault(what, now)
    if now - last >= _state["every_s"] and done < total:
        _state["last"][what] = now
        _say(f"{what}: {done}/{total} ({100.0 * done / max(total, 1):.0f} %)")


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
