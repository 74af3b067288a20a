"""The IR-built TMA GEMM against the string-template one (the default NVIDIA GEMM) on a real GPU
(skipped without).

Run on the device machine: ``python3 -m pytest -m gpu tests/test_nvidia_ir_tma_gpu.py``.
Both kernels issue the same TMA boxes and wgmma instructions on the same shared layouts and
descriptors in the same k order and round with the same ``cvt.rn`` pairs into the same swizzled
C buffer, so their outputs must be bitwise equal (the raster and CTA count only decide which CTA
computes a tile).  Both are also compared with a float32 torch reference; the output is poisoned
with NaN first, so an element the kernel never writes fails.  The direct-store form (registers
-> global C; ``test_ir_direct_store_equals_template``) rounds each accumulator with the same
``cvt.rn`` into the same C element, at even and odd row strides.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from _nvidia_gpu import NVIDIA_GPU  # noqa: E402

pytestmark = NVIDIA_GPU

from kernels.nvidia.wgmma_tma import (TmaGemm, TmaGemmConfig, tma_padded,  # noqa: E402
                                      tma_ready)
from kernels.nvidia.wgmma_tma_ir import IrTmaGemm  # noqa: E402

TOL = {torch.float16: 1e-3, torch.bfloat16: 6e-3}


@pytest.mark.parametrize("cfg,shape", [
    (TmaGemmConfig(), (1024, 2048, 512)),
    (TmaGemmConfig(), (1000, 3000, 1000)),              # edge tiles in M, N and K
    (TmaGemmConfig(dtype="bf16", b_major="k"), (777, 336, 136)),
    (TmaGemmConfig(bn=128, stages=6, dtype="bf16"), (4096, 4096, 256)),   # > 1 unit per CTA
    (TmaGemmConfig(bm=64, bn=128, stages=6, b_major="k"), (64, 4104, 72)),
    # short A boxes (a_rows): the wgmma reads rows no box wrote; they must never reach C
    (TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", a_rows=16), (16, 4096, 4096)),
    (TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", a_rows=8), (1, 520, 4096)),
    (TmaGemmConfig(bm=64, bn=128, stages=8, b_major="k", a_rows=32), (29, 4104, 1000)),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_tma_kernel_equals_template(cfg, shape):
    _compare(cfg, shape, None)


# the direct store (registers -> global C by its row stride ldc): odd N = ldc (2-byte stores
# where a pair would straddle), padded even and odd ldc (the padding must stay NaN), a short
# A box; operands padded to 16-byte rows first where TMA needs it, as gemm() does
@pytest.mark.parametrize("cfg,shape,ldc", [
    (TmaGemmConfig(store="direct"), (1000, 3001, 1000), None),
    (TmaGemmConfig(store="direct"), (1000, 3001, 1000), 3010),
    (TmaGemmConfig(dtype="bf16", b_major="k", store="direct"), (777, 333, 130), 341),
    (TmaGemmConfig(bm=64, bn=128, stages=6, store="direct"), (130, 4104, 200), None),
    (TmaGemmConfig(bm=64, bn=64, stages=6, dtype="bf16", store="direct", a_rows=16),
     (13, 517, 4096), 520),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_direct_store_equals_template(cfg, shape, ldc):
    _compare(cfg, shape, ldc)


SPLIT = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=12, store="direct", split_k=True,
                      reduce="inline")


# the one-launch split-K: partials, the per-warpgroup ticket, the last arrival's ordered sum;
# interior and edge tiles, odd N (4-byte partials and loads), 1-5 splits, a short A box, the
# 128x128 tile; twice in a row (the counters must be back at 0)
@pytest.mark.parametrize("cfg,shape,ldc,splits", [
    (SPLIT, (64, 4096, 4096), None, 2), (SPLIT, (130, 1001, 640), 1010, 3),
    (dataclasses.replace(SPLIT, a_rows=16), (16, 4096, 4096), None, 4),
    (dataclasses.replace(SPLIT, bn=128, stages=8, dtype="f16", b_major="k"),
     (77, 333, 1300), 341, 5),
    (dataclasses.replace(SPLIT, bm=128, bn=128, stages=6), (1024, 1024, 4096), None, 2),
    (SPLIT, (64, 512, 512), None, 1),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_split_k_equals_template(cfg, shape, ldc, splits):
    _compare(cfg, shape, ldc, splits, repeat=2)


def _compare(cfg, shape, ldc, splits=1, repeat=1):
    m, n, k = shape
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    g = torch.Generator(device="cuda").manual_seed(20)
    a = torch.randn((m, k), device="cuda", generator=g).to(dt)
    b = torch.randn((k, n) if cfg.b_major == "n" else (n, k), device="cuda", generator=g).to(dt)
    ref = a.float() @ (b.float() if cfg.b_major == "n" else b.float().T)
    a, b = (t if tma_ready(t) else tma_padded(t) for t in (a, b))
    full = [torch.full((m, ldc or n), float("nan"), dtype=dt, device="cuda") for _ in range(2)]
    ir_out, tpl_out = (f[:, :n] for f in full)
    ir = IrTmaGemm(cfg)
    assert ir.report.holds and ir.kernel_name.startswith("lg_irtma_")
    for _ in range(repeat):
        ir_out.fill_(float("nan"))
        ir(a, b, ir_out, splits)
    TmaGemm(cfg)(a, b, tpl_out, splits)
    torch.cuda.synchronize()
    assert torch.isfinite(ir_out.float()).all()
    if ldc:
        assert torch.isnan(full[0][:, n:].float()).all()       # nothing stored past N
    err = ((ir_out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dt], err
    assert torch.equal(ir_out, tpl_out), (ir_out.float() - tpl_out.float()).abs().max().item()


RED = TmaGemmConfig(dtype="bf16", bm=64, bn=256, stages=5, store="direct", split_k=True,
                    reduce="kernel")


# the two-launch split-K (reduce="kernel"): the IR split kernel's partials, then the IR reduce
# kernel; the selection's 64x256 tile (192x3072x32768: 3 splits), odd N with a padded C, one
# split, a short A box, the 128x128 tile; twice in a row (the workspace is kept per stream)
@pytest.mark.parametrize("cfg,shape,ldc,splits", [
    (RED, (192, 3072, 32768), None, 3), (RED, (130, 1001, 640), 1010, 3),
    (RED, (64, 512, 512), None, 1),
    (dataclasses.replace(RED, dtype="f16", b_major="k", a_rows=16), (16, 4096, 4096), None, 4),
    (dataclasses.replace(RED, bm=128, bn=128, stages=6), (1024, 1024, 4096), None, 2),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_reduce_launch_split_k_equals_template(cfg, shape, ldc, splits):
    _compare(cfg, shape, ldc, splits, repeat=2)


C2 = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=6, store="direct", split_k=True,
                   reduce="inline", ctas_per_sm=2)


# two CTAs per SM (launch bounds 2, setmaxnreg 40 / 216): the one-launch split-K, the direct
# and the TMA store
@pytest.mark.parametrize("cfg,shape,ldc,splits", [
    (C2, (128, 4096, 14336), None, 2), (dataclasses.replace(C2, a_rows=16), (16, 4096, 4096),
                                        None, 2),
    (dataclasses.replace(C2, split_k=False, reduce="kernel", bn=128, stages=4),
     (1000, 3001, 1000), 3010, 1),
    (dataclasses.replace(C2, split_k=False, reduce="kernel", store="tma", bn=128, stages=3),
     (1024, 4096, 1000), None, 1),
], ids=lambda x: getattr(x, "name", str(x)))
def test_ir_two_ctas_per_sm_equals_template(cfg, shape, ldc, splits):
    _compare(cfg, shape, ldc, splits, repeat=2)
