"""Suite-wide pytest hooks: the file order of tests/_file_order.py (the slow files first, so
``dev.sh test``'s workers finish together)."""

from __future__ import annotations

from _file_order import file_order


def pytest_collection_modifyitems(config, items):
    items[:] = file_order(items)
