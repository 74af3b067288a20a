"""Configuration sweep of the NVIDIA attention kernels on the suite's shapes (issue 20): every
candidate prefill configuration and split-KV decode configuration, device time by the
profiler, checked against the float32 reference -- what the dispatch defaults are chosen from.

    python3 benchmarks/gpu_attn_sweep.py [--out DIR] [--reps N] [--only prefill,decode]

Writes ``attn_sweep.json`` (one row per (shape, configuration)) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu_suite import (DECODE_SHAPES, PREFILL_SHAPES, attention_ref,  # noqa: E402
                                  copy_device_gbps, device_time, rel)


def prefill_candidates(D: int, causal: bool):
    """(label, config) pairs: the wgmma kernel's tiles that fit, and the mma.sync default."""
    from kernels.nvidia.attention import FLASH_DEFAULTS, FlashConfig
    from kernels.nvidia.wgmma_attention import WgmmaFlashConfig, plan_wgmma_flash
    out = []
    tiles = {64: [(2, 128), (2, 64), (1, 128), (3, 192), (2, 192), (1, 64)],
             128: [(2, 128), (2, 64), (1, 128), (1, 64), (2, 192)],
             256: [(2, 64), (1, 64)]}[D]
    for wg, bn in tiles:
        for ov in (True,):
            cfg = WgmmaFlashConfig(dtype="bf16", head_dim=D, warpgroups=wg, bn=bn, causal=causal,
                                   overlap=ov)
            try:
                plan_wgmma_flash(cfg)
            except Exception as e:                      # noqa: BLE001 -- a tile that cannot be
                print(f"skip {cfg.name}: {e}"[:200])    # built is simply not a candidate
                continue
            out.append((cfg.name, cfg))
    cfg = FlashConfig(dtype="bf16", head_dim=D, causal=causal, **FLASH_DEFAULTS[D])
    out.append((cfg.name, cfg))
    from kernels.nvidia.wgmma_attention_ws import WsFlashConfig   # warp-specialised (FA3-style)
    ws = {256: (dict(bn=64), dict(bn=64, pingpong=False))}.get(
        D, (dict(), dict(pingpong=False), dict(stages=3), dict(loader="tma"),
            dict(loader="tma", stages=3), dict(loader="tma", pingpong=False),
            dict(loader="tma", persistent=True), dict(loader="tma", persistent=True, stages=3),
            dict(loader="tma", persistent=True, pingpong=False)))
    for kw in ws:
        c = WsFlashConfig(dtype="bf16", head_dim=D, causal=causal, **kw)
        out.append((c.name, c))
    return out


def sweep_prefill(rows, reps, shapes):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from kernels.nvidia.dispatch import compiled_flash
    for B, Hq, Hkv, Sq, Skv, D, causal in shapes:
        q = torch.randn(B, Hq, Sq, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        bs = 1
        ref = attention_ref(q[:bs], k[:bs], v[:bs], causal)
        pairs = Sq * Skv if not causal else sum(min(Skv, r + 1) for r in range(Sq))
        flops = 4 * B * Hq * pairs * D
        shape = dict(B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Skv=Skv, D=D, causal=causal)
        sdpa = {}                                        # every SDPA backend that runs
        for nm, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                       ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:
                with sdpa_kernel([be]):
                    f = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                        q, k, v, is_causal=causal, enable_gqa=Hq != Hkv)
                    sdpa[nm] = device_time(f, reps)
            except Exception as e:                      # noqa: BLE001
                print(f"sdpa {nm} unavailable", e)
        cud = sdpa.get("cudnn", float("nan"))
        best = min(sdpa.values()) if sdpa else float("nan")
        for label, cfg in prefill_candidates(D, causal):
            if _MATCH and not any(m in label for m in _MATCH):
                continue
            row = {"part": "prefill", **shape, "config": label, "cudnn_s": cud,
                   "sdpa_best_s": best, "sdpa_best": min(sdpa, key=sdpa.get) if sdpa else None}
            try:
                fa = compiled_flash(cfg)
                out = torch.full_like(q, float("nan"))
                fa(q, k, v, out=out)
                row["rel_err"] = rel(out[:bs], ref)
                t = device_time(lambda: fa(q, k, v, out=out), reps)
                row.update(device_s=t, tflops=flops / t / 1e12, vs_cudnn=cud / t,
                           vs_sdpa_best=best / t)
            except Exception as e:                      # noqa: BLE001
                _failed(row, e)
            _keep(rows, row)
        del q, k, v
        torch.cuda.empty_cache()


def _failed(row, e: Exception) -> None:
    row["error"] = f"{type(e).__name__}: {e}"[:400]
    traceback.print_exc()


def _keep(rows, row) -> None:
    """Keep, print and append the row to ``attn_sweep.jsonl`` at once (a hung kernel leaves
    the rows before it)."""
    rows.append(row)
    print(json.dumps(row), flush=True)
    if _LOG:
        with open(_LOG[0], "a") as f:
            f.write(json.dumps(row) + "\n")


_LOG = []
_MATCH = []


def decode_candidates(group: int, D: int):
    from kernels.nvidia.decode_splitkv import SplitKVDecodeConfig, validate
    out = []
    for hg in sorted({h for h in (1, 2, 4, 8) if group % h == 0}, reverse=True):
        for chunk in (1, 2, 4):
            for warps in (4, 8):
                cfg = SplitKVDecodeConfig(in_dtype="bf16", out_dtype="f16", head_dim=D, hg=hg,
                                          chunk=chunk, warps=warps)
                try:
                    validate(cfg)
                except Exception:                        # noqa: BLE001
                    continue
                out.append(cfg)
    return out


def sweep_decode(rows, reps, shapes, copy):
    import torch
    from kernels.nvidia.decode_splitkv import SplitKVDecode
    for B, Hq, Hkv, Skv, D in shapes:
        q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
        g = Hq // Hkv
        kf, vf = k[:1].float().repeat_interleave(g, 1), v[:1].float().repeat_interleave(g, 1)
        ref = ((q[:1].float() @ kf.transpose(-1, -2)) / D ** 0.5).softmax(-1) @ vf
        del kf, vf
        nbytes = (q.numel() + k.numel() + v.numel() + q.numel()) * 2
        for cfg in decode_candidates(g, D):
            dec = SplitKVDecode(cfg)
            for splits in (None, "x2", "/2"):
                row = {"part": "decode", "B": B, "Hq": Hq, "Hkv": Hkv, "Skv": Skv, "D": D,
                       "config": cfg.name, "splits_arg": splits}
                try:
                    base = dec.plan(q, k, v)["splits"]
                    ks = {None: None, "x2": 2 * base, "/2": max(1, base // 2)}[splits]
                    row["splits"] = dec.plan(q, k, v, kv_splits=ks)["splits"]
                    out = torch.full((B, Hq, 1, D), float("nan"), dtype=torch.float16,
                                     device="cuda")
                    dec(q, k, v, out=out, kv_splits=ks)
                    row["rel_err"] = rel(out[:1], ref)
                    t = device_time(lambda: dec(q, k, v, out=out, kv_splits=ks), reps)
                    row.update(device_s=t, of_copy=nbytes / t / 1e9 / copy)
                except Exception as e:                      # noqa: BLE001
                    _failed(row, e)
                _keep(rows, row)
        del q, k, v
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", default="prefill,decode")
    ap.add_argument("--decode-shapes", default="", help="indices into DECODE_SHAPES (default all)")
    ap.add_argument("--prefill-shapes", default="", help="indices into PREFILL_SHAPES")
    ap.add_argument("--match", default="", help="only prefill configurations whose name "
                    "contains one of these comma-separated strings")
    a = ap.parse_args(argv)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    _LOG.append(str(Path(a.out) / "attn_sweep.jsonl"))
    _MATCH.extend(x for x in a.match.split(",") if x)
    pick = lambda s, xs: [xs[int(i)] for i in s.split(",")] if s else xs  # noqa: E731
    rows = []
    copy = copy_device_gbps(a.reps)
    rows.append({"part": "copy", "GBps_device": copy})
    if "prefill" in a.only:
        sweep_prefill(rows, a.reps, pick(a.prefill_shapes, PREFILL_SHAPES))
    if "decode" in a.only:
        sweep_decode(rows, a.reps, pick(a.decode_shapes, DECODE_SHAPES), copy)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "attn_sweep.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
