"""The runtime-size IR GEMMs' wide (64-bit) form (kernels/nvidia/gemm_wide.py) against the
string template that runs today where the 32-bit IR cannot launch: bitwise equality and
rotated-round timings.  Written 2026-11-25, not yet run.

    PYTHONPATH=. python benchmarks/gpu_gemm_wide.py [--rounds 7] [--out DIR]

Shapes (f16): ``lda-2^20`` M 2304 K 1000 N 520 with A's and C's rows 2^20 + 8 elements apart
(strided views, 2.4 x 10^9 elements each: past 2^31), and ``real`` M 264192 K 8192 N 256
contiguous (A 2^31 + 2^24 elements, 4.3 GB).  Kernels: the mma.sync and the
wgmma runtime-size IR GEMMs of the default configurations, each call bound once with
``gemm_wide.WIDE_GEMM_ON_IR`` on (the wide kernel; the row says it launched) and once off
(the template), each writing its own NaN-poisoned output, warmed up once, then rotated rounds
of ``--reps``-call CUDA-event means.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_rounds import medians, rotated_rounds  # noqa: E402
from gpu_timing import bench_parser, event_round_us, run_header  # noqa: E402

LD = 2 ** 20 + 8


def strided(rows, cols, ld, fill=None):
    """A (rows, cols) f16 view whose rows lie ``ld`` elements apart, random or ``fill``."""
    import torch
    buf = torch.empty((rows - 1) * ld + cols, device="cuda", dtype=torch.float16)
    v = buf.as_strided((rows, cols), (ld, 1))
    if fill is None:
        v.normal_()
    else:
        v.fill_(fill)
    return v


def shapes():
    """(name, a, b, make_out) per shape (module docstring)."""
    import torch
    M, K, N = 2304, 1000, 520
    yield ("lda-2^20", strided(M, K, LD), torch.randn(K, N, device="cuda").half(),
           lambda: strided(M, N, LD, float("nan")))
    M, K, N = 264192, 8192, 256
    yield ("real", torch.randn(M, K, device="cuda", dtype=torch.float16),
           torch.randn(K, N, device="cuda").half(),
           lambda: torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16))


def main() -> None:
    import torch
    from kernels.nvidia import gemm_wide
    from kernels.nvidia.gemm import CudaGemmConfig
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm
    from kernels.nvidia.wgmma import WgmmaGemmConfig
    from kernels.nvidia.wgmma_rt_ir import IrWgmmaRtGemm
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=7)
    a_ = ap.parse_args()
    print(json.dumps(run_header()), flush=True)
    gemms = {"mma": IrMmaRtGemm(CudaGemmConfig()), "wgmma": IrWgmmaRtGemm(WgmmaGemmConfig())}
    rows = []
    for shape, a, b, make_out in shapes():
        for kind, g in gemms.items():
            outs = {"wide": make_out(), "template": make_out()}
            runs = {}
            for n, on in (("wide", True), ("template", False)):
                gemm_wide.WIDE_GEMM_ON_IR = on
                g.forget_calls()
                runs[n] = g.bind(a, b, outs[n])
            gemm_wide.WIDE_GEMM_ON_IR = False
            M, K = a.shape
            N = b.shape[1]
            vals = dict(M=M, N=N, K=K, lda=a.stride(0), ldb=b.stride(0),
                        ldc=outs["wide"].stride(0), a_vec=1, b_vec=1)
            gemm_wide.WIDE_GEMM_ON_IR = True
            launched = g.wide_launch(vals, -(-M // g.cfg.bm) * -(-N // g.cfg.bn)) is not None
            gemm_wide.WIDE_GEMM_ON_IR = False
            calls = {n: (lambda r=runs[n], o=outs[n], t=(a, b): r(*t, o)) for n in runs}
            for f in calls.values():
                f()
            torch.cuda.synchronize()
            row = dict(shape=shape, kind=kind, kernel=g.kernel_name + "_i64",
                       wide_launch=launched,
                       bitwise_equal=bool(torch.equal(outs["wide"], outs["template"])),
                       wide_nan=bool(outs["wide"].isnan().any()))
            ts = rotated_rounds(list(calls), a_.rounds,
                                lambda n, c=calls: event_round_us(c[n], a_.reps))
            med = medians(ts)
            row.update(wide_us=round(med["wide"], 1), template_us=round(med["template"], 1),
                       wide_speed_vs_template=round(med["template"] / med["wide"], 3),
                       rounds_us=ts)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "rounds_us"}), flush=True)
            del outs, runs, calls
            torch.cuda.empty_cache()
        del a, b
        torch.cuda.empty_cache()
    Path(a_.out).mkdir(parents=True, exist_ok=True)
    Path(a_.out, "gpu_gemm_wide.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "header": run_header(), "rows": rows},
        indent=1))


if __name__ == "__main__":
    main()
