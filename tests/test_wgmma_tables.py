"""The memoised wgmma index tables (kernels/verify/wgmma_tables.py) every wgmma engine reads:
the PTX fragment facts of mfma_specs' Wgmma restated element by element, one table object per
atom value, and read-only (a write would change every later verification in the process)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.verify.wgmma_tables import WgmmaTables, wgmma_tables
from mfma_specs.nvidia_wgmma import Wgmma


@pytest.mark.parametrize("n", [64, 128, 192, 256])
def test_the_tables_are_the_fragment_layouts(n):
    atom = Wgmma("bf16", n)
    t = wgmma_tables(atom)
    assert t.c_i.shape == t.c_j.shape == (128, n // 2)
    for th in range(128):
        for e in range(n // 2):
            assert (t.c_i[th, e], t.c_j[th, e]) == atom.element_c(th, e)
    for th in range(128):
        for e in range(8):
            r, k = atom.element_a(th, e)
            assert (t.a_lane[r, k], t.a_item[r, k]) == (th, e)
    assert (t.M, t.N, t.K, t.lanes) == (64, n, 16, 128)


def test_one_table_per_atom_value():
    assert wgmma_tables(Wgmma("f16", 128)) is wgmma_tables(Wgmma("f16", 128))
    assert wgmma_tables(Wgmma("f16", 128)) is not wgmma_tables(Wgmma("f16", 192))


def test_the_tables_are_read_only():
    t = wgmma_tables(Wgmma("bf16", 128))
    for a in (t.c_i, t.c_j, t.a_lane, t.a_item):
        with pytest.raises(ValueError, match="read-only"):
            a[0, 0] = 1
    assert t.c_i[0, 0] == 0


def test_an_a_layout_leaving_an_element_unheld_is_refused():
    class Half(Wgmma):
        def layout_a(self):
            from layoutalg import Layout
            return Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 0)))
    with pytest.raises(ValueError, match="does not cover its 64 x 16 A"):
        WgmmaTables(Half("bf16", 64))
    assert np.array_equal(WgmmaTables(Wgmma("bf16", 64)).c_i, wgmma_tables(Wgmma("bf16", 64)).c_i)
