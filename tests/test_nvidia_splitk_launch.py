"""``kernels.nvidia.splitk.launch_reduce``: the one launch of the split-K reduce kernel both
wgmma GEMMs (cp.async and TMA) use; checked on the CPU with the driver call replaced."""

from types import SimpleNamespace

import pytest

import kernels.runtime.cuda as rc
from kernels.nvidia.splitk import REDUCE_THREADS, launch_reduce
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_tma import TmaGemmConfig


def test_launch_reduce_grid_arguments_and_specs(monkeypatch):
    seen = {}

    def fake(module, kernel, grid, block, args, **kw):
        seen.update(module=module, kernel=kernel, grid=grid, block=block, args=args, **kw)

    monkeypatch.setattr(rc, "launch", fake)
    out = SimpleNamespace(stride=lambda d: 40)
    launch_reduce("mod", "k_reduce", "partials", out, 33, 17, 3)
    assert seen["kernel"] == "k_reduce" and seen["module"] == "mod"
    assert seen["grid"] == -(-(33 * 17) // REDUCE_THREADS) and seen["block"] == REDUCE_THREADS
    assert seen["args"] == ["partials", out, 33, 17, 40, 3]
    assert seen["signature"] == ("ptr", "ptr", "i32", "i32", "i32", "i32")
    assert [s.align for s in seen["specs"][:2]] == [4, 2] and seen["specs"][2:] == [None] * 4


@pytest.mark.parametrize("cfg", [WgmmaGemmConfig(bm=64, bn=128, bk=32, split_k=True),
                                 TmaGemmConfig(bm=64, bn=192, store="direct", split_k=True)])
def test_shared_tile_bytes(cfg):
    # GemmTileBytes: the stage sizes and the reduce kernel's name, the same for both GEMMs
    assert cfg.a_stage == cfg.bm * cfg.bk * 2 and cfg.b_stage == cfg.bk * cfg.bn * 2
    assert cfg.reduce_name == cfg.name + "_reduce"
