"""The GPU comparison the IR GEMM tests share (tests/test_nvidia_ir_gemm_gpu.py,
tests/test_nvidia_ir_wgmma_gpu.py): two kernels that issue the same products in the same k order
run on the same seeded operands into NaN-poisoned outputs (an element never written fails); the
first must be within the float32 reference tolerance (those of tests/test_nvidia_gpu.py) and
bitwise equal to the second.  Import only after ``pytest.importorskip("torch")``."""

from __future__ import annotations

from typing import Any, Callable, Tuple

import torch

TOL = {torch.float16: 1e-3, torch.bfloat16: 6e-3}

Gemm = Callable[[Any, Any, Any], Any]


def assert_bitwise_pair(cfg: Any, shape: Tuple[int, int, int], seed: int, checked: Gemm,
                        other: Gemm) -> None:
    """``checked(a, b, out)`` against the float32 reference and bitwise against ``other``, for
    ``cfg``'s dtype and B major at ``shape`` (m, n, k)."""
    m, n, k = shape
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), device="cuda", generator=g).to(dt)
    b = torch.randn((k, n) if cfg.b_major == "n" else (n, k), device="cuda", generator=g).to(dt)
    ref = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
    out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    other_out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
    checked(a, b, out)
    other(a, b, other_out)
    torch.cuda.synchronize()
    assert torch.isfinite(out.float()).all()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dt], err
    assert torch.equal(out, other_out), (out.float() - other_out.float()).abs().max().item()
