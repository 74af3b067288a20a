"""Every AMD builder returns a ``kernels.BuiltProgram`` (issue 13, item 4): source, verification,
``compile()`` and ``report()`` on one base."""

import pytest

import kernels
from kernels.amd.decode import DecodeConfig, build_decode
from kernels.amd.decode_splitkv import build_splitkv
from kernels.amd.gemm import build_gemm
from kernels.amd.gemm_plan import GemmConfig
from kernels.built import BuiltProgram


@pytest.mark.parametrize("build", [
    lambda: build_gemm(GemmConfig(64, 64, 64, block_m=64, block_n=64), verify=False),
    lambda: build_decode(DecodeConfig(head_dim=64), verify=False),
    lambda: build_splitkv(DecodeConfig(head_dim=64), verify=False)])
def test_builders_return_programs(build):
    p = build()
    assert isinstance(p, BuiltProgram) and kernels.BuiltProgram is BuiltProgram
    assert p.arch == "gfx942" and p.block in (64, 128, 256)
    assert p.code_object is None and "LAGEN_KERNEL" in p.source


def test_compile_goes_through_the_base(monkeypatch):
    """``compile()`` is the base's: it hands the program and its arch to compile_built."""
    import kernels.toolchain.hip as hip
    seen = []
    monkeypatch.setattr(hip, "compile_built", lambda prog, arch, **kw: seen.append(arch) or "co")
    p = build_decode(DecodeConfig(head_dim=64), verify=False)
    assert p.compile() == "co" and p.compile("gfx950") == "co"
    assert seen == ["gfx942", "gfx950"]


def test_base_refuses_what_a_family_must_say():
    with pytest.raises(NotImplementedError, match="does not say its target"):
        BuiltProgram().arch
    with pytest.raises(NotImplementedError, match="has no report"):
        BuiltProgram().report()
