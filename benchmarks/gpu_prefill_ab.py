"""Interleaved A/B timing of warp-specialised prefill configurations against cuDNN (issue 20).

One figure per configuration from one pass is at the mercy of clock and power drift across a
run (the S8K d128 row measured 0.95x in a suite and 1.01-1.02x in sweeps of the same kernel).
Here every round times cuDNN and each candidate back to back, in a rotated order, with the
same profiler (``benchmarks.gpu_suite.device_time``); the result per candidate is the median
over rounds of its time and of its per-round ratio cuDNN / ours, so both sides see the same
drift.  Every candidate's output is checked against float32 torch first.

    python3 benchmarks/gpu_prefill_ab.py --out DIR [--rounds 7] [--reps 10] \
        [--shape B,Hq,Hkv,Sq,Skv,D,causal ...] [--config bn=176,stages=2 ...]

``--config`` takes ``WsFlashConfig`` fields (head_dim and causal come from the shape,
loader defaults to "tma"); ``select`` is the configuration ``choose_prefill`` picks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu_suite import attention_ref, device_time, rel  # noqa: E402

DEFAULT_SHAPES = ["8,32,32,8192,8192,128,0"]
DEFAULT_CONFIGS = ["select", "bn=176,stages=2", "bn=160,stages=2", "bn=192,stages=2"]


def parse_config(spec: str, D: int, causal: bool, sq: int = 0, skv: int = 0):
    from kernels.nvidia.prefill_select import choose_prefill
    from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
    if spec == "select":       # what flash_attention picks for these lengths (TMA-addressable)
        return choose_prefill("bf16", D, causal, "wgmma", seq=max(sq, skv), seq_kv=skv).config
    kw = {"loader": "tma"}
    for item in spec.split(","):
        key, val = item.split("=")
        kw[key] = (val == "1") if key in ("pingpong", "persistent", "defer_pv_wait",
                                             "rescale_vote", "v_behind_k") else (
            int(val) if val.isdigit() else val)
    return WsFlashConfig(dtype="bf16", head_dim=D, causal=causal, **kw)


def run_shape(shape, specs, rounds: int, reps: int):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from kernels.nvidia.dispatch import compiled_flash
    B, Hq, Hkv, Sq, Skv, D, causal = shape
    causal = bool(causal)
    q = torch.randn(B, Hq, Sq, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    out = torch.full_like(q, float("nan"))
    ref = attention_ref(q[:1], k[:1], v[:1], causal)
    pairs = Sq * Skv if not causal else sum(min(Skv, r + 1) for r in range(Sq))
    flops = 4 * B * Hq * pairs * D

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=Hq != Hkv)

    fns, rows = {"cudnn": cudnn}, []
    for spec in specs:
        cfg = parse_config(spec, D, causal, Sq, Skv)
        fa = compiled_flash(cfg)
        out.fill_(float("nan"))
        fa(q, k, v, out=out)
        err = rel(out[:1], ref)
        rows.append({"spec": spec, "config": cfg.name, "rel_err": err})
        if not err < 1e-2:
            raise RuntimeError(f"{cfg.name}: rel err {err} against float32 torch")
        fns[cfg.name] = (lambda fa=fa: fa(q, k, v, out=out))
    times = {n: [] for n in fns}
    names = list(fns)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(device_time(fns[n], reps))
    shape_d = dict(B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Skv=Skv, D=D, causal=bool(causal))
    cud = statistics.median(times["cudnn"])
    res = [{"part": "prefill_ab", **shape_d, "config": "cudnn", "device_s": cud,
            "times_s": times["cudnn"], "tflops": flops / cud / 1e12}]
    for row in rows:
        t = times[row["config"]]
        ratios = [c / o for c, o in zip(times["cudnn"], t)]
        res.append({"part": "prefill_ab", **shape_d, **row, "device_s": statistics.median(t),
                    "times_s": t, "tflops": flops / statistics.median(t) / 1e12,
                    "vs_cudnn_median": statistics.median(ratios),
                    "vs_cudnn_min": min(ratios), "vs_cudnn_max": max(ratios)})
    del q, k, v, out
    torch.cuda.empty_cache()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--shape", action="append")
    ap.add_argument("--config", action="append")
    a = ap.parse_args()
    import torch
    dev = torch.cuda.get_device_properties(0)
    head = (f"device: {dev.name} ({dev.multi_processor_count} SMs), torch {torch.__version__}; "
            f"command: {' '.join(sys.argv)}")
    print(head, flush=True)
    res = []
    for s in a.shape or DEFAULT_SHAPES:
        shape = tuple(int(x) for x in s.split(","))
        res += run_shape(shape, a.config or DEFAULT_CONFIGS, a.rounds, a.reps)
        for r in res[-(1 + len(a.config or DEFAULT_CONFIGS)):]:
            print(f"{s:<28} {r['config']:<44} {1e6 * r['device_s']:9.0f} us "
                  f"{r['tflops']:5.0f} TF/s  "
                  + (f"x cuDNN {r['vs_cudnn_median']:.3f} ({r['vs_cudnn_min']:.3f}-"
                     f"{r['vs_cudnn_max']:.3f})  err {r['rel_err']:.1e}"
                     if "vs_cudnn_median" in r else ""), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "prefill_ab.json").write_text(json.dumps({"head": head, "rows": res}, indent=1))


if __name__ == "__main__":
    main()
