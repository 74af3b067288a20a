"""Static gfx942 comparison for attention: Triton 3.x flash-attention forward beside ours, and
decode attention bytes moved -> estimated time at 5.3 TB/s (peak) and 4.3 TB/s (BabelStream).

Triton's kernel comes in two forms: one loop that masks every causal tile (the calibration's
kernel, ``benchmarks/perf_calibration.py``) and the fused-attention tutorial's two-stage form
(an unmasked loop over the off-diagonal tiles, then a masked one over the diagonal: "triton
2-stage"), the same loop shape as ours.  The model weights every MFMA loop by its trip count
from the problem (``kernels.perf.trips``), for every kernel the same way.

Both code objects are produced offline on a CPU-only machine and read by the same code
(``benchmarks.gfx942_static.analyse``), and compared by the static MI300X performance model
(``kernels.perf``: MFMA busy, binding resource, whole kernel at B16 H16 S8K; model estimates
with an error bar).  Nothing here runs on a GPU: MI300X run time is NOT
measured; decode times are estimates from bytes moved.

    python3 benchmarks/gfx942_static_attention.py [--json out.json] [--splitkv-only]

The prefill rows include our ping-pong form (``layoutalg pingpong``, head_dim 128) beside the
default one.

Split-KV decode (long KV): code-object summary of the split / combine kernels, the automatic
split count and bytes moved (partials included) -> time, printed first.

Callable from benchmarks/gfx942_static.py as ``gfx942_static_attention.main([])``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

HEAD_DIMS = (128, 64)
DTYPE = "bf16"                 # Q/K/V/O of both kernels (issue 16's targets are bf16)
MODEL_SHAPE = "16,16,8192"     # B,H,S of the model's whole-kernel estimate (attn-dsl-bench's)
SEQ_LENS = (2048, 4096, 8192, 16384)   # the whole-kernel estimate at B16 H16 and these S
PEAK_TBS, MEASURED_TBS = 5.3, 4.3
PINGPONG_DIMS = (128,)         # the ping-pong form (AttnConfig(pingpong=True)) beside the default


def _triton_fa():
    import triton
    import triton.language as tl

    @triton.jit
    def fa_fwd(Q, K, V, O, sqz, sqh, sqm, skz, skh, skn, svz, svh, svn, soz, soh, som,
               H, N_CTX, sm_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
        z, h = off_hz // H, off_hz % H
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + z * sqz + h * sqh + offs_m[:, None] * sqm + offs_d[None, :])
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.44269504
        hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
        for start_n in range(0, hi, BLOCK_N):
            k = tl.load(K + z * skz + h * skh + (start_n + offs_n)[None, :] * skn
                        + offs_d[:, None])
            qk = tl.dot(q, k)
            if CAUSAL:
                qk = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(V + z * svz + h * svh + (start_n + offs_n)[:, None] * svn
                        + offs_d[None, :])
            acc = tl.dot(p.to(V.dtype.element_ty), v, acc)
            m_i = m_ij
        acc = acc / l_i[:, None]
        tl.store(O + z * soz + h * soh + offs_m[:, None] * som + offs_d[None, :],
                 acc.to(O.dtype.element_ty))

    return fa_fwd


def _triton_fa_staged():
    """Triton's FA forward in the two-stage form of its fused-attention tutorial: a causal
    row block runs its off-diagonal KV tiles in an unmasked loop, then its diagonal tiles in
    a masked one (non-causal: one unmasked loop).  The same shape as our prefill's full-tile
    and boundary loops, so the model's trip counts apply to both the same way."""
    import triton
    import triton.language as tl

    @triton.jit
    def _inner(acc, l_i, m_i, q, Kb, Vb, skn, svn, lo, hi, offs_m, offs_n, offs_d, qk_scale,
               BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
        for start_n in range(lo, hi, BLOCK_N):
            k = tl.load(Kb + (start_n + offs_n)[None, :] * skn + offs_d[:, None])
            qk = tl.dot(q, k)
            if MASKED:
                qk = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(Vb + (start_n + offs_n)[:, None] * svn + offs_d[None, :])
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_ij
        return acc, l_i, m_i

    @triton.jit
    def fa_fwd_staged(Q, K, V, O, sqz, sqh, sqm, skz, skh, skn, svz, svh, svn, soz, soh, som,
                      H, N_CTX, sm_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
        z, h = off_hz // H, off_hz % H
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + z * sqz + h * sqh + offs_m[:, None] * sqm + offs_d[None, :])
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.44269504
        Kb, Vb = K + z * skz + h * skh, V + z * svz + h * svh
        if CAUSAL:   # off-diagonal tiles unmasked, then the diagonal ones masked
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, Kb, Vb, skn, svn, 0, start_m * BLOCK_M,
                                   offs_m, offs_n, offs_d, qk_scale, BLOCK_N, False)
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, Kb, Vb, skn, svn, start_m * BLOCK_M,
                                   (start_m + 1) * BLOCK_M, offs_m, offs_n, offs_d, qk_scale,
                                   BLOCK_N, True)
        else:
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, Kb, Vb, skn, svn, 0, N_CTX, offs_m,
                                   offs_n, offs_d, qk_scale, BLOCK_N, False)
        acc = acc / l_i[:, None]
        tl.store(O + z * soz + h * soh + offs_m[:, None] * som + offs_d[None, :],
                 acc.to(O.dtype.element_ty))

    return fa_fwd_staged


def triton_compile(d: int, causal: bool, dtype: str = "f16",
                   staged: bool = False) -> Dict[str, Any]:
    """Triton's kernel for head_dim ``d`` (f16 by default: benchmarks/perf_calibration.py's
    fitted check; this script's tables pass DTYPE).  ``staged``: the tutorial's two-stage
    form (:func:`_triton_fa_staged`) instead of one loop that masks every causal tile."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        import triton
        from triton.backends.compiler import GPUTarget
        fn = _triton_fa_staged() if staged else _triton_fa()
        names = ["Q", "K", "V", "O", "sqz", "sqh", "sqm", "skz", "skh", "skn", "svz", "svh",
                 "svn", "soz", "soh", "som", "H", "N_CTX", "sm_scale"]
        sig = {n: {"f16": "*fp16", "bf16": "*bf16"}[dtype] for n in names[:4]}
        sig.update({n: "i32" for n in names[4:18]})
        sig["sm_scale"] = "fp32"
        sig.update({"BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "HEAD_DIM": "constexpr",
                    "CAUSAL": "constexpr"})
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(18)}
        t0 = time.perf_counter()
        src = triton.compiler.ASTSource(fn=fn, signature=sig, attrs=attrs, constexprs={
            (19,): 128, (20,): 64, (21,): d, (22,): causal})
        k = triton.compile(src, target=GPUTarget("hip", "gfx942", 64),
                           options={"num_warps": 4, "num_stages": 1})
        secs = time.perf_counter() - t0
    return {"binary": k.asm["hsaco"], "lds_dynamic": int(k.metadata.shared), "threads": 256,
            "block_m": 128,
            "seconds": secs, "version": triton.__version__}


def ours(d: int, causal: bool, dtype: str = DTYPE, pingpong: bool = False) -> Dict[str, Any]:
    """Our prefill kernel (``pingpong``: its ping-pong form, head_dim 128) built, verified and
    compiled, with what the tables print."""
    from kernels.flash_attention import AttnConfig, build_attention
    from kernels.amd.flash_attention_pingpong import build_attention_pingpong
    t0 = time.perf_counter()
    build = build_attention_pingpong if pingpong else build_attention
    bk = build(AttnConfig(head_dim=d, dtype=dtype, causal=causal, pingpong=pingpong))
    t1 = time.perf_counter()
    co = bk.compile("gfx942", use_cache=False)
    t2 = time.perf_counter()
    rep = bk.report()
    return {"binary": co.binary, "lds_dynamic": 0, "threads": bk.block, "seconds": t2 - t0,
            "block_m": bk.plan.cfg.block_m,
            "build_s": t1 - t0, "gate_s": bk.timings["gate_s"], "compile_s": t2 - t1,
            "hot_loop_match": rep["hot_loop_instructions"]["match"],
            "checks": checks_held(rep["verification"])}


DECODE_SET = [(30720, h, h, skv, d) for d in (128, 256) for h in (16, 32)
              for skv in (1, 2, 4, 8, 16)]
DECODE_GQA = [(30720, 32, 8, skv, 128) for skv in (1, 16)] + [(30720, 32, 1, 16, 128)]


def decode_table() -> List[Dict[str, Any]]:
    from kernels.decode import decode_bytes
    rows = []
    for b, h, hk, skv, d in DECODE_SET + DECODE_GQA:
        by = decode_bytes(b, h, hk, skv, d)
        t = by["total"]
        rows.append({"batch": b, "heads": h, "kv_heads": hk, "seqlen_kv": skv, "head_dim": d,
                     "bytes": t, "us_at_5.3TBs": t / (PEAK_TBS * 1e12) * 1e6,
                     "us_at_4.3TBs": t / (MEASURED_TBS * 1e12) * 1e6})
    return rows


SPLITKV_SET = [(b, 32, 32, 32768, 128) for b in (1, 2, 4, 8)] + \
    [(b, 32, 8, 32768, 128) for b in (1, 8)] + [(1, 32, 32, 32768, 256), (8, 32, 32, 32768, 256)]


def splitkv_table() -> List[Dict[str, Any]]:
    """Split-KV decode (kernels/decode_splitkv.py): automatic split count, bytes moved (q, K, V,
    fp32 partials written + read back, O, LSE) -> time at 5.3 / 4.3 TB/s."""
    from kernels.decode import DecodeConfig
    from kernels.decode_splitkv import choose_splits, splitkv_bytes
    rows = []
    for b, h, hk, skv, d in SPLITKV_SET:
        cfg = DecodeConfig(head_dim=d)
        ns, chunk = choose_splits(b, h, skv, cfg)
        by = splitkv_bytes(b, h, hk, skv, d, ns)
        t = by["total"]
        q_blocks = -(-(b * h) // cfg.queries_per_block)
        rows.append({"batch": b, "heads": h, "kv_heads": hk, "seqlen_kv": skv, "head_dim": d,
                     "n_splits": ns, "kv_chunk": chunk, "split_blocks": q_blocks * ns,
                     "bytes": t, "partial_bytes": by["partials_write"] + by["partials_read"],
                     "us_at_5.3TBs": t / (PEAK_TBS * 1e12) * 1e6,
                     "us_at_4.3TBs": t / (MEASURED_TBS * 1e12) * 1e6})
    return rows


def splitkv_static() -> Dict[str, Any]:
    from kernels.decode_splitkv import SplitKVConfig, build_splitkv
    out = {}
    for d in (128, 256):
        bk = build_splitkv(SplitKVConfig(head_dim=d, dtype="bf16", out_dtype="f16"))
        rep = bk.report()
        v = rep["verification"]
        for who, r in rep["kernels"].items():
            hist = (r["hot_loop"] or {}).get("histogram", {})
            out[f"d{d} {who}"] = {k: r[k] for k in ("vgpr", "agpr", "sgpr", "lds_bytes",
                                                    "scratch_bytes", "spills", "waves_per_simd")}
            out[f"d{d} {who}"]["hot_loop_global"] = {k: n for k, n in hist.items()
                                                     if k.startswith("global_")}
            out[f"d{d} {who}"]["checks"] = checks_held(v)
    return out


def checks_held(verification: Dict[str, bool]) -> str:
    """``held/run`` of a gate's checks (the denominator is the number of checks that ran, not
    a constant: decode ran 17 and printed "17/14" when it was hard-coded)."""
    return f"{sum(bool(v) for v in verification.values())}/{len(verification)}"


def decode_static() -> Dict[str, Any]:
    from gfx942_static import analyse, model, print_model
    from kernels.decode import DecodeConfig, build_decode
    out = {}
    for d in (128, 256):
        bk = build_decode(DecodeConfig(head_dim=d, dtype="bf16", out_dtype="f16"))
        co = bk.compile("gfx942")
        a = analyse(co.binary, bk.block, 0)
        a["checks"] = checks_held(bk.verification.as_bools())
        out[f"d{d}"] = a
    return out


def print_splitkv(res: Dict[str, Any]) -> None:
    for k, an in res["splitkv_static"].items():
        print(f"split-KV {k}: " + ", ".join(f"{n} {v}" for n, v in an.items()))
    print("\n| B | H | HK | Skv | D | splits x keys | split blocks | MB moved | of which partials "
          "(MB) | us @5.3 TB/s | us @4.3 TB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res["splitkv_estimates"]:
        print(f"| {r['batch']} | {r['heads']} | {r['kv_heads']} | {r['seqlen_kv']} | "
              f"{r['head_dim']} | {r['n_splits']} x {r['kv_chunk']} | {r['split_blocks']} | "
              f"{r['bytes'] / 1e6:.1f} | {r['partial_bytes'] / 1e6:.2f} | "
              f"{r['us_at_5.3TBs']:.1f} | {r['us_at_4.3TBs']:.1f} |")
    print()


def main(argv: Optional[List[str]] = None) -> int:
    from gfx942_static import analyse, model, print_model
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--splitkv-only", action="store_true", help="only the split-KV tables")
    a = ap.parse_args(argv)
    res: Dict[str, Any] = {"splitkv_static": splitkv_static(), "splitkv_estimates":
                           splitkv_table()}
    print_splitkv(res)
    if a.splitkv_only:
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1, default=str))
        return 0
    res.update({"prefill": {}, "decode_static": decode_static(),
                "decode_estimates": decode_table()})
    cols = ["vgpr", "agpr", "lds_bytes", "waves_per_simd", "spills", "hot_loop_mfma",
            "mfma_share", "ds_read", "ds_write", "global_load"]
    print("| kernel | " + " | ".join(cols) + " | compile s |")
    print("|---" * (len(cols) + 2) + "|")
    for d in HEAD_DIMS:
        for causal in (False, True):
            tag = f"d{d}{' causal' if causal else ''}"
            runs = {"layoutalg": ours(d, causal, DTYPE)}
            if d in PINGPONG_DIMS:
                runs["layoutalg pingpong"] = ours(d, causal, DTYPE, pingpong=True)
            if not a.no_triton:
                for who, staged in (("triton", False), ("triton 2-stage", True)):
                    try:
                        runs[who] = triton_compile(d, causal, DTYPE, staged=staged)
                    except Exception as e:  # noqa: BLE001 - reported, not hidden
                        print(f"{who} {tag}: {type(e).__name__}: {e}")
            for who, r in runs.items():
                an = analyse(r["binary"], r["threads"], r["lds_dynamic"])
                an.update(model(r["binary"], r["threads"], r["lds_dynamic"],
                                attention=f"{MODEL_SHAPE},{d}{',causal' if causal else ''}",
                                tile=str(r.get("block_m", 128))))
                an.update({"who": who, "config": tag})
                an.update({k: v for k, v in r.items() if k not in ("binary",)})
                an["model_by_seqlen"] = {
                    S: model(r["binary"], r["threads"], r["lds_dynamic"],
                             attention=f"16,16,{S},{d}{',causal' if causal else ''}",
                             tile=str(r.get("block_m", 128))).get("model_peak_fraction")
                    for S in SEQ_LENS}
                res["prefill"][f"{who} {tag}"] = an
                vals = [f"{an[c]:.2f}" if c == "mfma_share" else str(an[c]) for c in cols]
                print(f"| {who} {tag} | " + " | ".join(vals) + f" | {r['seconds']:.2f} |")
    print_model(list(res["prefill"].values()), f"attention forward {DTYPE} B,H,S = {MODEL_SHAPE}")
    print(f"\nmodel % of MFMA peak (whole kernel, B16 H16, a model: +-25%) by sequence length\n")
    print("| kernel | " + " | ".join(f"S={S}" for S in SEQ_LENS) + " |")
    print("|---" * (len(SEQ_LENS) + 1) + "|")
    for k, an in res["prefill"].items():
        print(f"| {k} | " + " | ".join("-" if an["model_by_seqlen"][S] is None else
                                       f"{100 * an['model_by_seqlen'][S]:.0f}%"
                                       for S in SEQ_LENS) + " |")
    print()
    for k, an in res["decode_static"].items():
        print(f"decode {k}: VGPR {an['vgpr']} waves/SIMD {an['waves_per_simd']} global "
              f"{an['global_load']} spills {an['spills']} checks {an['checks']}")
    print("\n| B | H | HK | Skv | D | MB moved | us @5.3 TB/s | us @4.3 TB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in res["decode_estimates"]:
        print(f"| {r['batch']} | {r['heads']} | {r['kv_heads']} | {r['seqlen_kv']} | "
              f"{r['head_dim']} | {r['bytes'] / 1e6:.1f} | {r['us_at_5.3TBs']:.1f} | "
              f"{r['us_at_4.3TBs']:.1f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
