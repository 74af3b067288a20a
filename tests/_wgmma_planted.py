"""Scaffolding the wgmma planted-bug tests share (tests/test_mutation_wgmma.py for shared-memory
A, tests/test_wgmma_register_a.py for register A): the small verified base kernel, its main
loop, and the assertion that a planted bug is refused by the named check (the shared
tests/_planted.py)."""

from __future__ import annotations

from typing import Tuple

from kernels.ir import Loop
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_ir import build_wgmma_gemm_ir
from kernels.printer.cuda import emit_cuda
from kernels.verify.verifier import verify

from _planted import assert_refused

SMALL = WgmmaGemmConfig(bm=128, bn=64, bk=32, stages=3)


def verified_base(**build) -> Tuple[object, str]:
    """The SMALL 256x128x128 wgmma GEMM (``build``: extra builder options such as ``a_from``)
    and its CUDA text, asserted to pass every check before any bug is planted in it."""
    k = build_wgmma_gemm_ir(SMALL, 256, 128, 128, **build)
    src = emit_cuda(k)
    assert verify(k, arch="sm_90a", source=src).holds
    return k, src


def main_loop(k) -> Loop:
    """The kernel's first top-level loop (the K loop)."""
    return next(s for s in k.body if isinstance(s, Loop))


def assert_ir_bug_refused(k, what: str, check: str, words: str) -> None:
    """The mutated IR ``k`` fails ``check`` and its counterexample names ``words``
    (:func:`_planted.assert_refused`)."""
    assert_refused(verify(k, arch="sm_90a").checks, check, what, words)
