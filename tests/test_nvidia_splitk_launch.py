"""``kernels.nvidia.splitk.reduce_site``: the one launch of the split-K reduce kernel both
wgmma GEMMs (cp.async and TMA) use; checked on the CPU without a driver."""

import pytest

from kernels.nvidia.splitk import REDUCE_THREADS, reduce_site
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_tma import TmaGemmConfig


def test_reduce_site_grid_signature_and_specs():
    site = reduce_site("mod", "k_reduce", 33, 17)
    assert site.kernel == "k_reduce" and site.module == "mod"
    assert site.grid == -(-(33 * 17) // REDUCE_THREADS) and site.block == REDUCE_THREADS
    assert site.signature == ("ptr", "ptr", "i32", "i32", "i32", "i32")
    assert [s.align for s in site.specs[:2]] == [4, 2] and site.specs[2:] == [None] * 4


@pytest.mark.parametrize("cfg", [WgmmaGemmConfig(bm=64, bn=128, bk=32, split_k=True),
                                 TmaGemmConfig(bm=64, bn=192, store="direct", split_k=True)])
def test_shared_tile_bytes(cfg):
    # GemmTileBytes: the stage sizes and the reduce kernel's name, the same for both GEMMs
    assert cfg.a_stage == cfg.bm * cfg.bk * 2 and cfg.b_stage == cfg.bk * cfg.bn * 2
    assert cfg.reduce_name == cfg.name + "_reduce"
