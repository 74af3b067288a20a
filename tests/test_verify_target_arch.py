"""Which architecture the verifier checks a kernel for (kernels.verify.target_arch): the
kernel's own by default, never an AMD arch for a kernel holding NVIDIA statements (its bank
model, lane count and shared-memory capacity would be the other vendor's: a "verified" that
did not check what runs).  Regression: ``verify(k)`` and ``verify_kernel(k)`` used to take
gfx942 for every kernel, and the fused decode's planted-bug catalogue verified the NVIDIA
kernel there."""

from __future__ import annotations

import dataclasses

import pytest

from kernels.ir.core import Kernel
from kernels.nvidia.decode_fused_ir import build_decode_fused_ir
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.nvidia.wgmma_ws_ir_serial import build_ws_serial_ir
from kernels.verify.gate import verify_kernel
from kernels.verify.spec import SpecError
from kernels.verify.target_arch import (DEFAULT_ARCH, kernel_arch, nvidia_statement,
                                        resolve_arch)
from kernels.verify.verifier import verify

CFG = MmaDecodeConfig(head_dim=64, hg=4)


@pytest.fixture(scope="module")
def nvidia_kernel():
    """A kernel built for NVIDIA of portable statements (its arch recorded, sm_90)."""
    return build_decode_fused_ir(CFG)


@pytest.fixture(scope="module")
def tma_kernel():
    """A kernel holding NVIDIA statements (mbarriers, TMA, wgmma)."""
    return build_ws_serial_ir()


def _portable() -> Kernel:
    return Kernel(name="portable", params=[], shared=[], frags=[], body=[], block=64,
                  grid=(1, 1, 1))


def test_an_nvidia_kernel_is_checked_for_its_own_arch(nvidia_kernel, tma_kernel):
    assert nvidia_statement(tma_kernel) is not None
    assert resolve_arch(tma_kernel, None) == "sm_90a"
    assert kernel_arch(nvidia_kernel) == CFG.arch
    assert resolve_arch(nvidia_kernel, None) == CFG.arch
    assert resolve_arch(nvidia_kernel, "sm_80") == "sm_80"      # another NVIDIA target: its call


def test_an_nvidia_kernel_at_an_amd_arch_is_refused(nvidia_kernel, tma_kernel):
    with pytest.raises(SpecError, match=r"NVIDIA statements \(MbarrierInit\), which 'gfx942' "
                                        r"does not run; verify it for its own 'sm_90a'"):
        verify(tma_kernel, arch="gfx942")
    with pytest.raises(SpecError, match="does not run"):
        verify_kernel(tma_kernel, arch="gfx942")
    with pytest.raises(SpecError, match=f"built for '{CFG.arch}'.*not verified under 'gfx942'"):
        verify(nvidia_kernel, arch="gfx942")


def test_an_nvidia_kernel_without_a_recorded_arch_must_be_given_one(tma_kernel):
    bare = dataclasses.replace(tma_kernel, meta={})
    with pytest.raises(SpecError, match=r"records no arch.*arch='sm_90a'"):
        verify(bare)
    assert resolve_arch(bare, "sm_90a") == "sm_90a"


def test_a_portable_kernel_takes_the_default_or_either_vendor():
    k = _portable()
    assert nvidia_statement(k) is None and kernel_arch(k) is None
    assert resolve_arch(k, None) == DEFAULT_ARCH == "gfx942"
    assert resolve_arch(k, "sm_90a") == "sm_90a"
    k.meta["arch"] = "gfx950"
    assert resolve_arch(k, None) == "gfx950"


def test_verify_without_arch_verifies_the_nvidia_kernel_for_its_target(nvidia_kernel,
                                                                       monkeypatch):
    """The whole call: the engine receives the kernel's sm_* target, and the kernel holds."""
    import kernels.verify.verifier as verifier
    seen = []
    real = verifier.verify_ticket

    def spy(k, spec, arch, *a, **kw):
        seen.append(arch)
        return real(k, spec, arch, *a, **kw)
    monkeypatch.setattr(verifier, "verify_ticket", spy)
    assert verify(nvidia_kernel).holds
    assert seen == [CFG.arch]
