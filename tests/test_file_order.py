"""The suite's file order (tests/_file_order.py, applied by tests/conftest.py) and the
``dev.sh test`` flag that keeps it (xdist would otherwise reorder the files by test count)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from _file_order import file_order

ROOT = Path(__file__).resolve().parents[1]


def _item(nodeid, slow=False):
    return SimpleNamespace(nodeid=nodeid,
                           get_closest_marker=lambda name: object() if slow and name == "slow"
                           else None)


def test_slow_files_first_then_most_tests_first_each_file_whole():
    items = [_item("tests/a.py::t1"), _item("tests/a.py::t2"),
             _item("tests/b.py::t1", slow=True),
             _item("tests/c.py::t1"), _item("tests/c.py::t2"), _item("tests/c.py::t3"),
             _item("tests/d.py::t1", slow=True), _item("tests/d.py::t2", slow=True),
             _item("tests/e.py::t1", slow=True), _item("tests/e.py::t2")]
    got = [it.nodeid for it in file_order(items)]
    assert got == ["tests/d.py::t1", "tests/d.py::t2", "tests/b.py::t1",
                   "tests/c.py::t1", "tests/c.py::t2", "tests/c.py::t3",
                   "tests/a.py::t1", "tests/a.py::t2", "tests/e.py::t1", "tests/e.py::t2"]


def test_ties_keep_the_collection_order():
    items = [_item(f"tests/{n}.py::t") for n in "zyx"]
    assert [it.nodeid for it in file_order(items)] == [it.nodeid for it in items]


def test_dev_sh_keeps_the_order_and_the_whole_files():
    text = (ROOT / "scripts" / "dev.sh").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("test)"))
    assert "--dist loadfile" in line and "--no-loadscope-reorder" in line, line
