"""The order the suite's test files run in under ``dev.sh test`` (pytest-xdist ``--dist
loadfile --no-loadscope-reorder``: the workers take whole files in this order).

xdist's own order (``--loadscope-reorder``, its default) puts the files with the most tests
first, so the files with few but slow tests -- the warp-specialised attention kernels, each
verification several seconds -- came last, and one worker ran the last of them while the other
sat idle.  Here the files whose every test is marked ``slow`` go first (the longest jobs
first: the idle tail is then one short file), and the rest follow as xdist would order them
(most tests first, ties in collection order).  A file's tests keep their order, so its
module-scoped fixtures are built once, as in one process.
"""

from __future__ import annotations

from typing import Any, Dict, List

__all__ = ["file_order"]


def file_order(items: List[Any]) -> List[Any]:
    """``items`` (pytest items, or anything with ``nodeid`` and ``get_closest_marker``) with
    the files whose items are all marked ``slow`` first, then by number of items, most first;
    stable, and each file's items contiguous in their own order."""
    files: Dict[str, List[Any]] = {}
    for it in items:
        files.setdefault(it.nodeid.split("::")[0], []).append(it)

    def key(its: List[Any]):
        slow = all(it.get_closest_marker("slow") is not None for it in its)
        return (not slow, -len(its))
    return [it for its in sorted(files.values(), key=key) for it in its]
