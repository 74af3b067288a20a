"""kernels.nvidia.rt_gemm_parts.RtGemmBuilder, the set-up both runtime-size GEMM builders
(gemm_rt_ir, wgmma_rt_ir) share: a refused configuration raises our error before it is
planned, and both builders see the same runtime scalars and global layouts."""
import pytest

from kernels.nvidia.gemm import CudaGemmConfig, GemmConfigError
from kernels.nvidia.gemm_rt_ir import _Builder
from kernels.nvidia.rt_gemm_parts import RT_SCALARS, RtGemmBuilder
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_rt_ir import RtWgmmaBuilder


class _Refusing(RtGemmBuilder):
    def refusal(self, cfg):
        return f"{cfg.name}: not this one"


def test_refused_configuration_raises_before_planning():
    def plan(cfg):
        raise AssertionError("planned a refused configuration")
    with pytest.raises(GemmConfigError, match="not this one"):
        _Refusing(CudaGemmConfig(), plan)


def test_a_builder_must_name_its_scope():
    with pytest.raises(NotImplementedError):
        RtGemmBuilder(CudaGemmConfig(), lambda cfg: None)


@pytest.mark.parametrize("b_major", ["n", "k"])
def test_both_builders_share_the_runtime_set_up(b_major):
    mma = _Builder(CudaGemmConfig(b_major=b_major))
    wg = RtWgmmaBuilder(WgmmaGemmConfig(b_major=b_major))
    for b in (mma, wg):
        assert [str(x) for x in (b.M, b.N, b.K, b.ldc)] == ["M", "N", "K", "ldc"]
        assert {op: str(x) for op, x in b.vec.items()} == {"A": "a_vec", "B": "b_vec"}
        assert b.S == b.c.stages
    for name in ("a_glob", "b_glob", "c_glob"):
        assert str(getattr(mma, name)) == str(getattr(wg, name))
    # an N-major B steps along N by 1 and along K by ldb; a K-major B the other way round
    assert str(mma.b_glob.stride) == ("(1, ldb)" if b_major == "n" else "(ldb, 1)")
    assert RT_SCALARS == ("M", "N", "K", "lda", "ldb", "ldc", "a_vec", "b_vec")
