"""The IR-built mma.sync GEMM at runtime sizes (kernels.nvidia.gemm_rt_ir.IrMmaRtGemm, verified)
against the string template (kernels.nvidia.gemm.CudaGemm) of the same configuration on a GPU
(issue 20 item 1: the evidence for letting gemm() dispatch to it on the mma.sync path).

Per shape of the suite (benchmarks/gpu_suite.py GEMM_SHAPES, A (M, K) and B (K, N) row-major; then three with B
(N, K) row-major, ``EXTRA_K_MAJOR``)
the configuration is the selection's with ``atom="mma"`` (``choose_gemm(a, b, atom="mma")``:
the template's); a configuration the IR form refuses (``mma_rt_refusal``: 8- or 4-byte rows)
is recorded and skipped.  Outputs NaN-poisoned, compared with the float32 reference and
bitwise between the two kernels, and with cuBLAS (``torch.matmul`` in the input dtype) by
relative error.  Device time per kernel launch from the profiler (CUPTI), ``--reps`` launches
per sample, rotated rounds (IR, template, cuBLAS; then template, cuBLAS, IR; ...), median of
all samples (cuBLAS: its kernels summed per call, one sample per round).

    python3 benchmarks/nvidia_mma_rt_ir.py --out DIR [--rounds 5] [--reps 10] [--only 0,4]
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from gpu_suite import GEMM_SHAPES

#: beyond the suite (whose B is N-major): B K-major (a @ b.T), the other copy and ldmatrix form
EXTRA_K_MAJOR = [(4096, 4096, 4096, "f16"), (2048, 2048, 2048, "bf16"), (4000, 3000, 1000, "f16")]
from gpu_timing import bench_parser, kernel_events, run_header


def device_us(fn: Callable[[], Any], reps: int) -> Dict[str, List[float]]:
    """Device microseconds of each GPU kernel ``fn`` launches, per launch."""
    per: Dict[str, List[float]] = {}
    for e in kernel_events(fn, reps):
        if e.device_time > 0:
            per.setdefault(e.name, []).append(e.device_time)
    return per


def text_variant(g: Any, tag: str, source: str) -> Any:
    """A copy of the built kernel ``g`` running ``source`` (its kernel renamed ``<name>_<tag>``)
    instead of ``g``'s verified text: a timing control only (an earlier form's printed
    source), never what ``gemm()`` runs."""
    import copy
    from kernels.nvidia.builder import CompiledKernel
    v = copy.copy(g)
    # a fresh module and call cache for the new text (the copy shares g's otherwise)
    CompiledKernel.__init__(v, g.cfg, source.replace(g.kernel_name, g.kernel_name + "_" + tag),
                            g.backend)
    v.kernel_name = g.kernel_name + "_" + tag
    return v


def main() -> None:
    import torch
    from kernels.nvidia.dispatch import choose_gemm
    from kernels.nvidia.gemm import CudaGemm
    from kernels.nvidia.gemm_rt_ir import IrMmaRtGemm, mma_rt_refusal
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="indices into GEMM_SHAPES (comma-separated)")
    ap.add_argument("--prev", default="", help="a folder of earlier printed sources of the IR "
                    "kernels, <kernel name>.cu (timing control, not verified here): timed in "
                    "the same rotation as 'prev'")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    built: Dict[Any, Any] = {}
    shapes = [s + ("n",) for s in GEMM_SHAPES] + [s + ("k",) for s in EXTRA_K_MAJOR]
    pick = [int(x) for x in args.only.split(",") if x] or range(len(shapes))
    for idx in pick:
        m, n, k, dtype, bmaj = shapes[idx]
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), device="cuda", generator=g).to(dt)
        b = torch.randn((k, n) if bmaj == "n" else (n, k), device="cuda", generator=g).to(dt)
        cfg = choose_gemm(a, b, b_major=bmaj, atom="mma").config
        row: Dict[str, Any] = {"dtype": dtype, "m,n,k": [m, n, k], "b_major": bmaj,
                               "config": cfg.name}
        refusal = mma_rt_refusal(cfg)
        if refusal is not None:
            row["ir_refused"] = refusal
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        first: Dict[str, float] = {}
        if cfg not in built:
            t0 = time.perf_counter()
            ir = IrMmaRtGemm(cfg)
            first["build_verify_s"] = time.perf_counter() - t0
            first["verdict_cached"] = "cached" in ir.report.details
            t0 = time.perf_counter()
            ir.module
            first["compile_s"] = time.perf_counter() - t0
            built[cfg] = (ir, CudaGemm(cfg))
        ir, tpl = built[cfg]
        o_ir = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        o_tp = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        run_ir, run_tp = ir.bound(a, b, o_ir), tpl.bound(a, b, o_tp)
        run_ir(a, b, o_ir)
        run_tp(a, b, o_tp)
        torch.cuda.synchronize()
        ref = a.float() @ (b.float() if bmaj == "n" else b.float().T)
        err = ((o_ir.float() - ref).norm() / ref.norm()).item()
        bt = b if bmaj == "n" else b.T
        o_cb = torch.matmul(a, bt)      # cuBLAS in the input dtype: a second, independent check
        torch.cuda.synchronize()
        err_cb = ((o_ir.float() - o_cb.float()).norm() / o_cb.float().norm()).item()
        fns = {"ir": lambda: run_ir(a, b, o_ir), "template": lambda: run_tp(a, b, o_tp),
               "cublas": lambda: torch.matmul(a, bt, out=o_cb)}
        names = {"ir": ir.kernel_name, "template": cfg.name}
        prev = Path(args.prev) / f"{ir.kernel_name}.cu" if args.prev else None
        if prev is not None and prev.exists():
            pv = text_variant(ir, "prev", prev.read_text())
            o_pv = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
            run_pv = pv.bound(a, b, o_pv)
            run_pv(a, b, o_pv)
            torch.cuda.synchronize()
            row["prev_bitwise_equal"] = bool(torch.equal(o_pv, o_tp))
            fns["prev"], names["prev"] = (lambda: run_pv(a, b, o_pv)), pv.kernel_name
        samples: Dict[str, List[float]] = {nm: [] for nm in fns}
        # rotated: each round starts one kernel later than the last
        order = list(fns)
        for r in range(args.rounds):
            for nm in order[r % len(order):] + order[:r % len(order)]:
                per = device_us(fns[nm], args.reps)
                if nm in names:
                    samples[nm] += per.get(names[nm], [])
                else:       # cuBLAS: whatever it launches, summed per call
                    samples[nm].append(sum(sum(v) for v in per.values()) / args.reps)
        med = {nm: statistics.median(v) for nm, v in samples.items()}
        row.update({"kernel": ir.kernel_name, "verified": bool(ir.report.holds),
                    "first_call": first, "median_us": med,
                    "ir_over_template": med["template"] / med["ir"],
                    "ir_over_cublas": med["cublas"] / med["ir"],
                    **({"prev_over_template": med["template"] / med["prev"]}
                       if "prev" in med else {}),
                    "bitwise_equal": bool(torch.equal(o_ir, o_tp)),
                    "all_written": bool(torch.isfinite(o_ir.float()).all()), "rel_err": err,
                    "rel_err_vs_cublas": err_cb, "samples_us": samples})
        rows.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "samples_us"}), flush=True)
    res = {**run_header(), "rows": rows}
    (out_dir / "nvidia_mma_rt_ir.json").write_text(json.dumps(res, indent=1))
    for r in rows:          # the short table last (what a device reply's tail shows)
        if "median_us" in r:
            med = r["median_us"]
            print(f"{r['dtype']:4s} {'x'.join(map(str, r['m,n,k'])):>16s} B{r['b_major']} "
                  f"ir {med['ir']:9.1f} tpl {med['template']:9.1f} cublas {med['cublas']:9.1f}"
                  f"  ir/tpl speed {r['ir_over_template']:.3f} bitwise {r['bitwise_equal']} "
                  f"err {r['rel_err']:.1e} vs cublas {r['rel_err_vs_cublas']:.1e}"
                  + (f" | prev {med['prev']:9.1f} speed {r['prev_over_template']:.3f} bitwise "
                     f"{r['prev_bitwise_equal']}" if "prev" in med else ""), flush=True)


if __name__ == "__main__":
    main()
