"""Static gfx942 comparison: the same GEMM compiled by Triton 3.9 and by layoutalg.

Both code objects are produced offline on a CPU-only machine and read by the same code
(:mod:`kernels.codeobject`): VGPR/AGPR, LDS, waves/SIMD, spills, hot-loop MFMA count and MFMA
share of the hot loop's instructions, LDS read/write and global load instructions (widths), and
the time from Python objects to a code object; and the static MI300X performance model
(kernels.perf): MFMA busy of the hot loop, the binding resource, the whole GEMM as a fraction of
MFMA peak (model estimates with an error bar).  Nothing here runs on a GPU: MI300X run time is
NOT measured.

    python3 benchmarks/gfx942_static.py [--m 4096 --n 4096 --k 4096] [--dtype fp8] [--json out.json]

``--dtype fp8``: A and B in gfx942's FP8 E4M3 FNUZ (Triton's ``fp8e4b8``, our ``fp8`` with
scales off so both kernels compute the same C = A @ B), fp32 accumulate, fp16 C; the model's
peak is then the fp8 MFMA's own rate (twice bf16's).

Triton: ``triton.compile(ASTSource, target=GPUTarget("hip", "gfx942", 64))`` with a fresh cache
directory (so the timing is a cold compile).  layoutalg: plan -> LDS layouts (suggest_swizzle)
-> IR -> verification gate -> HIP -> clang (cache bypassed), timed as a whole and per stage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TRITON_CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    (128, 128, 64, 4, 2),     # the kernel of shared/docs/REFERENCE.md
    (256, 256, 32, 8, 2),     # the tile of our larger config
    (256, 256, 64, 8, 2),     # the same tile with BK=64 (our BK=64 row's tile)
]
# fp8: the same tiles with twice the k depth (the same bytes per LDS row as fp16)
TRITON_FP8_CONFIGS = [(128, 128, 128, 4, 2), (256, 256, 128, 8, 2), (128, 128, 64, 4, 2)]
OURS_FP8_CONFIGS = [(128, 128, 64, 2, 2, 2), (128, 128, 128, 2, 2, 1), (128, 128, 128, 2, 4, 1),
                    (256, 256, 64, 2, 4, 2)]
# the Triton pointer type of each input dtype
TRITON_ELT = {"f16": "fp16", "bf16": "bf16", "fp8": "fp8e4b8"}
OURS_CONFIGS = [  # (block_m, block_n, block_k, waves_m, waves_n, LDS stages)
    (128, 128, 32, 2, 2, 2),  # the GemmConfig default
    (128, 128, 64, 2, 2, 1),  # Triton's first tile: BK=64, one LDS stage (32 KiB: 2 waves/SIMD)
    (256, 256, 32, 4, 2, 2),
    (256, 256, 64, 4, 2, 1),
]


# issue 15's suite: square, ragged, M = 16 / 64 (decode-time linear layers), long K, an LLM
# projection; our default choice (kernels.amd.gemm_select) against Triton's best of a small
# autotune list, by the same model
SUITE = [(4096, 4096, 4096), (2048, 2048, 2048), (8192, 8192, 8192), (4000, 3000, 1000),
         (16, 4096, 4096), (64, 4096, 4096), (1024, 1024, 16384), (4096, 14336, 4096)]
TRITON_AUTOTUNE = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): tutorial-style list
    (256, 256, 64, 8, 2), (128, 128, 64, 4, 2), (128, 64, 64, 4, 2), (64, 128, 64, 4, 2),
    (64, 64, 64, 4, 2), (32, 64, 128, 4, 2), (16, 64, 128, 4, 2),
]


def _triton_masked_kernel():
    """The tutorial GEMM with bounds masks (any M, N, K), as a Triton user writes it."""
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_masked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - kk * BLOCK_K
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left),
                        other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N),
                        other=0.0)
            acc += tl.dot(a, b)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

    return matmul_masked


def _triton_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for _ in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            acc += tl.dot(a, b)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, acc.to(tl.float16))

    return matmul_kernel


def triton_compile(cfg, dtype: str = "f16", masked: bool = False) -> Dict[str, Any]:
    """Cold-compile the Triton GEMM (row-major A, B of ``dtype``; C of the same type, fp16 for
    fp8; divisibility-16 hints on the pointers and strides; ``masked``: the bounds-masked kernel
    for any M, N, K)."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    bm, bn, bk, warps, stages = cfg
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        import triton
        from triton.backends.compiler import GPUTarget
        fn = _triton_masked_kernel() if masked else _triton_kernel()
        elt = TRITON_ELT[dtype]
        c_elt = "fp16" if dtype == "fp8" else elt
        sig = {"a_ptr": f"*{elt}", "b_ptr": f"*{elt}", "c_ptr": f"*{c_elt}", "M": "i32", "N": "i32",
               "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
               "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
        # masked: M, N, K are any size (no hint on them); pointers and strides keep theirs
        hinted = (0, 1, 2, 6, 7, 8) if masked else range(9)
        attrs = {(i,): [["tt.divisibility", 16]] for i in hinted}
        t0 = time.perf_counter()
        src = triton.compiler.ASTSource(fn=fn, signature=sig,
                                        constexprs={(9,): bm, (10,): bn, (11,): bk}, attrs=attrs)
        k = triton.compile(src, target=GPUTarget("hip", "gfx942", 64),
                           options={"num_warps": warps, "num_stages": stages})
        seconds = time.perf_counter() - t0
    return {"binary": k.asm["hsaco"], "lds_dynamic": int(k.metadata.shared),
            "threads": 64 * warps, "seconds": seconds, "version": triton.__version__}


def ours_compile(m: int, n: int, k: int, cfg, dtype: str = "f16") -> Dict[str, Any]:
    from kernels.gemm import build_gemm
    from kernels.gemm_plan import GemmConfig
    bm, bn, bk, wm, wn, stages = cfg
    t0 = time.perf_counter()
    built = build_gemm(GemmConfig(m, n, k, block_m=bm, block_n=bn, block_k=bk, waves_m=wm,
                                  waves_n=wn, stages=stages, dtype=dtype, out_dtype="f16",
                                  scales="none"))
    t1 = time.perf_counter()
    co = built.compile("gfx942", use_cache=False)
    t2 = time.perf_counter()
    assert built.verification.holds
    rep = built.report()
    return {"binary": co.binary, "lds_dynamic": 0, "threads": built.block,
            "seconds": t2 - t0, "built": built, "stages": dict(built.timings),
            "build_s": t1 - t0, "compile_s": t2 - t1,
            "hot_loop_match": rep["hot_loop_instructions"]["match"],
            "checks": f"{sum(rep['verification'].values())}/{len(rep['verification'])}"}


def ours_default(m: int, n: int, k: int, dtype: str = "f16",
                 b_layout: str = "plain") -> Dict[str, Any]:
    """The library's default for the problem (kernels.amd.gemm_select), built, verified,
    compiled and modelled; ``b_layout="preshuffled"``: the choice for a B stored preshuffled
    (fp8/bf8)."""
    from kernels.amd.gemm_select import select_gemm
    from kernels.registry import get
    ch = select_gemm(m, n, k, dtype=dtype, b_layout=b_layout)
    c = ch.config
    t0 = time.perf_counter()
    built = get("gemm").build(c)     # build_gemm, or build_gemm_preshuffled
    co = built.compile("gfx942", use_cache=False)
    seconds = time.perf_counter() - t0
    assert built.verification.holds
    out = {"who": "layoutalg default", "config": ch.ranking[0].candidate.label(),
           "dtype": dtype, "seconds": seconds, "reason": ch.reason,
           "hot_loop_match": built.report()["hot_loop_instructions"]["match"]}
    out.update(model(co.binary, built.block, 0, gemm=f"{m},{n},{k}",
                     tile=f"{c.block_m}x{c.block_n}x{c.block_k}"))
    out["_binary"], out["_threads"] = co.binary, built.block
    return out


def run_suite(json_path: Optional[str] = None) -> int:
    """Issue 15's 8 shapes: our default choice vs Triton's best of TRITON_AUTOTUNE (the model
    standing in for the autotuner's timing), f16, by the same model in one run."""
    try:
        import triton  # noqa: F401
    except ImportError:
        print("triton not installed (pip install triton==3.9.0): the suite needs it")
        return 3
    binaries = {}
    for cfg in TRITON_AUTOTUNE:
        for masked in (False, True):
            binaries[cfg, masked] = triton_compile(cfg, masked=masked)
    rows = []
    print("\nGEMM suite, f16 in/out, NN, gfx942; static MI300X performance model (kernels.perf; "
          "a model, NOT a measurement; error bar +-25%)\n")
    print("| M x N x K | layoutalg default (gemm_select) | model busy | model % of peak | "
          "Triton 3.9 best of the autotune list | model busy | model % of peak | ours / Triton |")
    print("|---|---|---|---|---|---|---|---|")
    for m, n, k in SUITE:
        ours = ours_default(m, n, k)
        best = None
        exact = all(v % b == 0 for v, b in ((m, 16), (n, 16), (k, 16)))
        for cfg in TRITON_AUTOTUNE:
            masked = not (m % cfg[0] == 0 and n % cfg[1] == 0 and k % cfg[2] == 0 and exact)
            t = binaries[cfg, masked]
            # BMxBNxBK: kernels.perf counts MFMAs that waves repeat (a tile too small for
            # num_warps) once, and reports the duplication
            r = model(t["binary"], t["threads"], t["lds_dynamic"], gemm=f"{m},{n},{k}",
                      tile=f"{cfg[0]}x{cfg[1]}x{cfg[2]}")
            r.update({"config": f"{cfg[0]}x{cfg[1]}x{cfg[2]}, {cfg[3]} warps, {cfg[4]} stages"
                      + (", masked" if masked else "")})
            if "model_peak_fraction" not in r:
                continue
            if best is None or r["model_peak_fraction"] > best["model_peak_fraction"]:
                best = r
        pf_o, pf_t = ours.get("model_peak_fraction"), best["model_peak_fraction"]
        rep = "" if best["model_mfma_duplication"] <= 1 else \
            f" (MFMAs repeated {best['model_mfma_duplication']:g}x over the warps)"
        print(f"| {m}x{n}x{k} | {ours['config']} | {100 * ours['model_mfma_busy']:.0f}% | "
              f"{100 * pf_o:.1f}% | {best['config']} | {100 * best['model_mfma_busy']:.0f}% | "
              f"{100 * pf_t:.1f}%{rep} | {pf_o / pf_t:.2f} |")
        ours = {k_: v for k_, v in ours.items() if not k_.startswith("_")}
        rows.append({"shape": [m, n, k], "ours": ours, "triton_best": best})
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1, default=str))
    return 0


def model(binary: bytes, threads: int, lds_dynamic: int, **problem: str) -> Dict[str, Any]:
    """The static MI300X performance model (kernels.perf) of a code object: MFMA busy of the hot
    loop, the binding resource and, given ``gemm=``/``attention=`` and ``tile=``, the whole
    kernel's fraction of MFMA peak and TFLOP/s.  A model, not a measurement."""
    from kernels.perf import PerfError, analyze
    try:
        r = analyze(binary, block_threads=threads, dynamic_lds_bytes=lds_dynamic, **problem)
    except PerfError as e:
        return {"model_error": str(e)}
    w = r.whole_kernel or {}
    return {"model_mfma_busy": r.mfma_busy, "model_binding": r.binding,
            "model_idle": r.idle_breakdown, "model_peak_fraction": r.peak_fraction,
            "model_tflops": w.get("tflops"), "model_error_bar": r.error_bar,
            "model_cycles_per_iteration": r.cycles_per_iteration,
            "model_k_per_iteration": w.get("k_per_iteration"),
            "model_mfma_duplication": w.get("mfma_duplication", 1),
            "model_waves_per_simd": r.occupancy.get("waves_per_simd"),
            "model_trip_model": w.get("trip_model"),
            "model_mfma_busy_weighted": w.get("mfma_busy_weighted"),
            "model_loops": [{k: x[k] for k in ("instructions", "units", "cycles_per_iteration",
                                               "mfma_busy", "trips", "share")}
                            for x in w.get("loops", [])]}


def loops_cell(r: Dict[str, Any]) -> str:
    """The model's MFMA loops of one row: instructions, the units they run, MFMA busy and
    share of the clocks (``kernels.perf.trips``: trip counts from the problem)."""
    loops = r.get("model_loops") or []
    return "; ".join(f"{x['instructions']} instr {x['units']} busy {100 * x['mfma_busy']:.0f}%"
                     f" x {x['trips']} ({100 * x['share']:.0f}%)" for x in loops) or "-"


def print_model(rows: List[Dict[str, Any]], problem: str) -> None:
    """The model table (every figure labelled a model estimate with its error bar)."""
    eb = next((r["model_error_bar"] for r in rows if "model_error_bar" in r), 0)
    print(f"\nstatic MI300X performance model (kernels.perf; a model, NOT a measurement; error "
          f"bar +-{100 * eb:.0f}%), {problem}\n")
    print("| kernel | waves/SIMD | model MFMA busy (hot loop) | binding | largest MFMA-idle "
          "causes | MFMA loops: instructions, units, busy x trips (share of clocks) | "
          "model % of MFMA peak (whole kernel) | model TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "model_error" in r:
            print(f"| {r['who']} {r['config']} | | - | {r['model_error']} | | | | |")
            continue
        idle = ", ".join(f"{k} {100 * v:.0f}%" for k, v in list(r["model_idle"].items())[:3])
        pf, tf = r["model_peak_fraction"], r["model_tflops"]
        pf_s = "-" if pf is None else f"{100 * pf:.0f}%"
        tf_s = "-" if tf is None else f"{tf:.0f}"
        print(f"| {r['who']} {r['config']} | {r.get('model_waves_per_simd', '-')} | "
              f"{100 * r['model_mfma_busy']:.0f}% | {r['model_binding']} | {idle} | "
              f"{loops_cell(r)} | {pf_s} | {tf_s} |")


def analyse(binary: bytes, threads: int, lds_dynamic: int) -> Dict[str, Any]:
    from kernels.codeobject import CodeObject
    from kernels.toolchain import find_toolchain
    co = CodeObject(binary=binary, arch="gfx942", source="", flags=(), toolchain=find_toolchain(),
                    key="")
    r = co.report(block_threads=threads, dynamic_lds_bytes=lds_dynamic)
    hot = r.hot_loop or {"histogram": {}, "instructions": 0, "mfma": 0}
    h = Counter(hot["histogram"])

    def pick(prefix: str) -> str:
        items = sorted((k, v) for k, v in h.items() if k.startswith(prefix))
        return " + ".join(f"{v} {k.replace(prefix, '')}" for k, v in items) or "0"
    return {
        "vgpr": r.vgpr, "agpr": r.agpr, "lds_bytes": r.lds_bytes, "waves_per_simd":
        r.waves_per_simd, "spills": r.spills, "scratch_bytes": r.scratch_bytes,
        "hot_loop_mfma": r.hot_loop_mfma, "hot_loop_instructions": hot["instructions"],
        "mfma_share": (hot["mfma"] / hot["instructions"]) if hot["instructions"] else 0.0,
        "ds_read": pick("ds_read"), "ds_write": pick("ds_write"),
        "global_load": pick("global_load"), "v_perm": h.get("v_perm_b32", 0),
        "s_waitcnt": h.get("s_waitcnt", 0),
        "ds_read_n": sum(v for k, v in h.items() if k.startswith("ds_read")),
        "ds_write_n": sum(v for k, v in h.items() if k.startswith("ds_write")),
        "global_n": sum(v for k, v in h.items() if k.startswith("global_load")),
    }


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--dtype", default="f16", choices=sorted(TRITON_ELT),
                    help="A/B element type (fp8 = gfx942's E4M3 FNUZ; C is then fp16)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--suite", action="store_true", help="issue 15's 8 shapes: our default "
                    "choice vs Triton's best of a small autotune list, by the model")
    args = ap.parse_args(argv)
    fp8 = args.dtype == "fp8"
    if args.suite:
        return run_suite(args.json)
    rows = []
    shape = f"{args.m},{args.n},{args.k}"
    try:
        import triton  # noqa: F401
        have_triton = bool(triton.__version__)
    except ImportError:
        have_triton = False
        print("triton not installed (pip install triton==3.9.0): layoutalg rows only")
    if have_triton:
        for cfg in TRITON_FP8_CONFIGS if fp8 else TRITON_CONFIGS:
            t = triton_compile(cfg, args.dtype)
            a = analyse(t["binary"], t["threads"], t["lds_dynamic"])
            a.update(model(t["binary"], t["threads"], t["lds_dynamic"], gemm=shape,
                           tile=f"{cfg[0]}x{cfg[1]}x{cfg[2]}"))
            rows.append({"who": f"Triton {t['version']}", "config": f"{cfg[0]}x{cfg[1]}x{cfg[2]}"
                         f", {cfg[3]} warps, {cfg[4]} stages", "seconds": t["seconds"], **a})
    for cfg in OURS_FP8_CONFIGS if fp8 else OURS_CONFIGS:
        o = ours_compile(args.m, args.n, args.k, cfg, args.dtype)
        a = analyse(o["binary"], o["threads"], 0)
        a.update(model(o["binary"], o["threads"], 0, gemm=shape,
                       tile=f"{cfg[0]}x{cfg[1]}x{cfg[2]}"))
        st = o["stages"]
        rows.append({"who": "layoutalg", "config": f"{cfg[0]}x{cfg[1]}x{cfg[2]}, "
                     f"{cfg[3]}x{cfg[4]} waves, {cfg[5]} LDS stage{'s' if cfg[5] > 1 else ''}",
                     "seconds": o["seconds"],
                     "stages": {k: round(v, 3) for k, v in st.items() if isinstance(v, float)},
                     "checks": o["checks"], "hot_loop_match": o["hot_loop_match"], **a})
    if have_triton and not fp8:   # the target's bf16 half: Triton's first config in bf16
        cfg = TRITON_CONFIGS[0]
        t = triton_compile(cfg, dtype="bf16")
        a = analyse(t["binary"], t["threads"], t["lds_dynamic"])
        a.update(model(t["binary"], t["threads"], t["lds_dynamic"], gemm=shape,
                       tile=f"{cfg[0]}x{cfg[1]}x{cfg[2]}"))
        rows.append({"who": f"Triton {t['version']}", "config": f"{cfg[0]}x{cfg[1]}x{cfg[2]}"
                     f", {cfg[3]} warps, {cfg[4]} stages, bf16", "seconds": t["seconds"], **a})
    # the library's default choice (fp8: also the choice for a B stored preshuffled)
    defaults = (("fp8", "plain"), ("fp8", "preshuffled")) if fp8 else \
        (("f16", "plain"), ("bf16", "plain"))
    for dtype, b_layout in defaults:
        d = ours_default(args.m, args.n, args.k, dtype, b_layout)
        a = analyse(d.pop("_binary"), d.pop("_threads"), 0)
        a.update({k_: v for k_, v in d.items() if k_.startswith("model_")})
        ps = ", B preshuffled" if b_layout == "preshuffled" else ""
        rows.append({"who": "layoutalg", "config": f"default {d['config']}, {dtype}{ps}",
                     "seconds": d["seconds"], "stages": {}, "checks": "all",
                     "hot_loop_match": d["hot_loop_match"], **a})
        print(f"layoutalg default ({dtype}{ps}): {d['reason']}")
    hdr = ("| compiler | config | VGPR/AGPR | LDS | waves/SIMD | spills | hot-loop MFMA | "
           "MFMA share | ds_read | ds_write | global loads | v_perm | s_waitcnt | "
           "Python -> code object |")
    ins = "fp8 (E4M3 FNUZ) in, fp16 out" if fp8 else "fp16 in/out"
    print(f"\nGEMM {args.m}x{args.n}x{args.k}, {ins}, fp32 accumulate, A and B row-major "
          "(NN), gfx942; static (compiled, not run)\n")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for r in rows:
        print(f"| {r['who']} | {r['config']} | {r['vgpr']}/{r['agpr']} | "
              f"{r['lds_bytes'] // 1024} KiB | {r['waves_per_simd']} | {r['spills']} | "
              f"{r['hot_loop_mfma']} | {100 * r['mfma_share']:.1f}% "
              f"({r['hot_loop_mfma']}/{r['hot_loop_instructions']}) | {r['ds_read']} | "
              f"{r['ds_write']} | {r['global_load']} | {r['v_perm']} | {r['s_waitcnt']} | "
              f"{r['seconds']:.2f} s |")
    for r in rows:
        if r["who"] == "layoutalg":
            print(f"\nlayoutalg {r['config']}: gate {r['checks']} checks hold; compiled hot loop "
                  f"== verified instructions: {r['hot_loop_match']}; stages (s): {r['stages']}")
    print_model(rows, f"GEMM {args.m}x{args.n}x{args.k} {args.dtype}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
