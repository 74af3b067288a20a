"""Calibrate and check the static MI300X performance model (kernels.perf) on published anchors.

Model estimates only: nothing here runs on a GPU.  Third-party code objects are read from a
path when present and never copied into the repository:

    AITER_HSA=/path/to/aiter/hsa/gfx942 python3 benchmarks/perf_calibration.py [--json out.json]

(AITER_HSA is the ``hsa/gfx942`` folder of a ROCm/aiter checkout: its precompiled fmha v3
forward kernels.)  Triton 3.9's flash-attention forward is compiled here (the kernel of
benchmarks/gfx942_static_attention.py).  One model constant is fitted, the sustained clock
(``MachineModel.clock_mhz``: it absorbs the clock MI300X holds under MFMA load and any
systematic bias of the model): the geometric mean of published / model over the FIT points.
The CHECK points are not used in the fit; their error is the honest error bar.

Published anchors (shared/docs/REFERENCE.md): attn-dsl-bench causal B16 H16 d128 bf16, AITER
409/446/494 and Triton 261/317/364 TFLOP/s at S = 4K/8K/16K; MoonMath non-causal AITER v3
435-551 TFLOP/s (a range: its shapes are not in our notes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SEQ = (4096, 8192, 16384)
AITER_CAUSAL = {4096: 409, 8192: 446, 16384: 494}
TRITON_CAUSAL = {4096: 261, 8192: 317, 16384: 364}
MOONMATH_NONCAUSAL = (435, 551)


def _model_tflops(binary_or_path, attention: str, tile: str, model, threads=None, lds=0):
    from kernels.perf import analyze
    r = analyze(binary_or_path, attention=attention, tile=tile, model=model,
                block_threads=threads, dynamic_lds_bytes=lds)
    return r


def points(model) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    hsa = os.environ.get("AITER_HSA")
    if hsa and Path(hsa, "fmha_v3_fwd", "MI300").is_dir():
        base = Path(hsa, "fmha_v3_fwd", "MI300")
        for s in SEQ:
            r = _model_tflops(base / "fwd_hd128_bf16_causal_rtne.co", f"16,16,{s},128,causal",
                              "256", model)
            rows.append({"kernel": "AITER fmha v3 fwd bf16 causal (rtne)", "S": s,
                         "published": AITER_CAUSAL[s], "role": "fit", "report": r})
        for s in SEQ:
            r = _model_tflops(base / "fwd_hd128_bf16_rtne.co", f"16,16,{s},128", "256", model)
            rows.append({"kernel": "AITER fmha v3 fwd bf16 non-causal (rtne)", "S": s,
                         "published": MOONMATH_NONCAUSAL, "role": "check (range)", "report": r})
    else:
        print("AITER_HSA not set (or no fmha_v3_fwd/MI300 under it): AITER points skipped")
    try:
        from gfx942_static_attention import triton_compile
        t = triton_compile(128, True)
        for s in SEQ:
            r = _model_tflops(t["binary"], f"16,16,{s},128,causal", "128", model, t["threads"],
                              t["lds_dynamic"])
            rows.append({"kernel": f"Triton {t['version']} FA fwd causal (BM128 BN64, 4 warps)",
                         "S": s, "published": TRITON_CAUSAL[s], "role": "check", "report": r})
    except ImportError:
        print("triton not installed: Triton points skipped")
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from kernels.perf import GFX942
    unit = dataclasses.replace(GFX942, clock_mhz=1000)      # TFLOP/s per GHz
    rows = points(unit)
    fit = [r for r in rows if r["role"] == "fit"]
    if fit:
        clock = 1000 * math.exp(sum(math.log(r["published"] / r["report"].whole_kernel["tflops"])
                                    for r in fit) / len(fit))
    else:
        clock = GFX942.clock_mhz
        print("no FIT points: using the model's clock")
    print(f"\nfitted sustained clock: {clock:.0f} MHz (model default {GFX942.clock_mhz} MHz)\n")
    print("| kernel | S | role | model MFMA busy (loop) | binding | model peak fraction | "
          "model TFLOP/s | published TFLOP/s | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    out = []
    for r in rows:
        rep = r["report"]
        tf = rep.whole_kernel["tflops"] * clock / 1000
        pub = r["published"]
        if isinstance(pub, tuple):
            err = 0.0 if pub[0] <= tf <= pub[1] else \
                (tf - pub[1]) / pub[1] if tf > pub[1] else (tf - pub[0]) / pub[0]
            pubs = f"{pub[0]}-{pub[1]}"
        else:
            err = (tf - pub) / pub
            pubs = str(pub)
        print(f"| {r['kernel']} | {r['S']} | {r['role']} | {100 * rep.mfma_busy:.1f}% | "
              f"{rep.binding} | {100 * rep.peak_fraction:.1f}% | {tf:.0f} | {pubs} | "
              f"{100 * err:+.1f}% |")
        out.append({"kernel": r["kernel"], "S": r["S"], "role": r["role"], "model_tflops": tf,
                    "published": pub, "error": err, "mfma_busy": rep.mfma_busy,
                    "binding": rep.binding, "peak_fraction": rep.peak_fraction,
                    "idle_breakdown": rep.idle_breakdown})
    checks = [abs(o["error"]) for o in out if o["role"].startswith("check")]
    if checks:
        print(f"\ncheck points: max |error| {100 * max(checks):.0f}%, mean "
              f"{100 * sum(checks) / len(checks):.0f}% (model estimates, not measurements)")
    if args.json:
        Path(args.json).write_text(json.dumps({"clock_mhz": clock, "rows": out}, indent=1,
                                              default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
