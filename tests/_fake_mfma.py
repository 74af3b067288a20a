"""Small stand-ins for mfma_specs specs (the diagram code only needs the duck-typed API)."""
from layoutalg import Layout


class FakeSpec:
    def __init__(self, name, M, N, K, blocks, fa, fb, fc, items):
        self.name, self.M, self.N, self.K, self.blocks = name, M, N, K, blocks
        self.arch = "gfx942"
        self._f = {"A": fa, "B": fb, "C": fc, "D": fc}
        self._items = items

    def element(self, op, lane, item):
        return self._f[op](lane, item)

    def tv_layout(self, op):
        return Layout((64, self._items[op]))


def mfma_16x16x16():
    return FakeSpec("v_mfma_f32_16x16x16_f16", 16, 16, 16, 1,
                    lambda l, i: (l % 16, 4 * (l // 16) + i, 0),
                    lambda l, i: (4 * (l // 16) + i, l % 16, 0),
                    lambda l, i: (4 * (l // 16) + i, l % 16, 0),
                    {"A": 4, "B": 4, "C": 4, "D": 4})


def mfma_32x32x8():
    return FakeSpec("v_mfma_f32_32x32x8_f16", 32, 32, 8, 1,
                    lambda l, i: (l % 32, 4 * (l // 32) + i, 0),
                    lambda l, i: (4 * (l // 32) + i, l % 32, 0),
                    lambda l, i: ((i % 4) + 8 * (i // 4) + 4 * (l // 32), l % 32, 0),
                    {"A": 4, "B": 4, "C": 16, "D": 16})


def mfma_4x4x4_16b():
    return FakeSpec("v_mfma_f32_4x4x4_16b_f16", 4, 4, 4, 16,
                    lambda l, i: (l % 4, i, l // 4),
                    lambda l, i: (i, l % 4, l // 4),
                    lambda l, i: (i, l % 4, l // 4),
                    {"A": 4, "B": 4, "C": 4, "D": 4})
