"""The AMD-on-NVIDIA harness (:mod:`kernels.nvidia.amd_flavour` runs the AMD kernels' HIP source
on an NVIDIA GPU): the registry's GEMM, prefill and decode kernels on torch CUDA tensors
(:func:`run_gemm`, :func:`run_attention`, :func:`run_decode`), their large-shape checks against
torch, and the command line ``python3 -m kernels.nvidia.amd_flavour_checks``."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from ..errors import KernelError, LaunchError
from ..ir.dtypes import ELEM_TYPES
from .amd_flavour import AmdCudaModule, compile_amd, kernel_signatures, launch_amd

__all__ = ["gemm_kernel", "run_gemm", "attention_case", "decode_case", "run_attention",
           "decode_workspace", "run_decode", "check_gemm", "check_attention", "decode_reference",
           "check_decode", "main"]


# ----------------------------------------------------------------------------- the registry kernels

_TORCH_DT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
# the registry's GemmEntry.tolerance: (atol, rtol) by output type
_GEMM_TOL = {"f32": (1e-4, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}


def gemm_kernel(m: int, n: int, k: int, dtype: str = "f16", out_dtype: Optional[str] = None,
                **kw: Any):
    from ..amd.gemm import build_gemm
    from ..amd.gemm_plan import GemmConfig
    cfg = GemmConfig(m, n, k, dtype=dtype, out_dtype=out_dtype, **kw)
    if cfg.b_layout == "preshuffled":
        from ..amd.gemm_preshuffle import build_gemm_preshuffled
        return build_gemm_preshuffled(cfg)
    return build_gemm(cfg)


def run_gemm(built: Any, a: Any, b: Any, c: Any, *scales: Any, sm: str = "sm_90",
             module: Optional[AmdCudaModule] = None) -> AmdCudaModule:
    """Launch a built GEMM (kernels.gemm.build_gemm) on CUDA tensors a, b (as stored), c (output)
    and, for a scaled GEMM (fp8/bf8 by default), the one-element float tensors scale_a, scale_b.
    8-bit operands are passed as their raw bytes (uint8)."""
    mod = module or compile_amd(built.source, sm)
    launch_amd(mod, built.name, built.grid, built.block, [a, b, c, *scales])
    return mod


def attention_case(batch: int, heads: int, seqlen: int, head_dim: int = 128, causal: bool = False,
                   dtype: str = "f16", seqlen_kv: Optional[int] = None,
                   kv_heads: Optional[int] = None, causal_align: str = "top_left",
                   out_dtype: Optional[str] = None, kv_splits: Optional[int] = None,
                   pingpong: bool = False):
    """(entry, AttnCase, shaped kernel) of the registry's attention: prefill, or (``seqlen`` 1)
    decode / split-KV decode exactly as ``layoutalg check attention`` picks them (both call
    :func:`kernels.amd.attention_api.select_kernel`).  ``pingpong``: the prefill kernel's
    ping-pong form (head_dim 128)."""
    from ..amd.attention_registry import attention_case as make_case
    from ..amd.registry import get
    e = get("attention")
    cfg = make_case(batch=batch, heads=heads, kv_heads=kv_heads, seqlen_q=seqlen,
                    seqlen_kv=seqlen_kv or seqlen, head_dim=head_dim, dtype=dtype,
                    out_dtype=out_dtype, causal=causal, causal_align=causal_align,
                    kv_splits=kv_splits, arch="gfx942", pingpong=pingpong)
    return e, cfg, e.build(cfg)


def decode_case(batch: int, heads: int, seqlen_kv: int, head_dim: int = 128, dtype: str = "f16",
                out_dtype: Optional[str] = None, kv_heads: Optional[int] = None,
                kv_splits: Optional[int] = None):
    """(entry, AttnCase, shaped kernel) of the registry's decode attention (seqlen_q 1).

    ``kv_splits`` None: the registry's choice (:func:`kernels.decode_splitkv.choose_splits`: the
    single decode kernel when one split suffices, else the split-KV pair); a positive count: the
    split-KV pair with that many splits (``--kv-splits``); 0: the single decode kernel
    (``kernels.decode``) whatever the KV length."""
    if kv_splits is not None and kv_splits < 0:
        raise KernelError(f"kv_splits {kv_splits}: None, 0 (single kernel) or a positive count")
    e, cfg, shaped = attention_case(batch, heads, 1, head_dim, False, dtype, seqlen_kv=seqlen_kv,
                                    kv_heads=kv_heads, out_dtype=out_dtype,
                                    kv_splits=kv_splits or None)
    if kv_splits == 0 and shaped.bk.kind != "decode":
        from ..amd.decode import DecodeConfig
        k = cfg.kernel
        cfg = replace(cfg, kernel=DecodeConfig(**{f: getattr(k, f) for f in
                                                  DecodeConfig.__dataclass_fields__}).normalized(),
                      n_splits=1, kv_chunk=k.keys_per_step)
        shaped = e.build(cfg)
    return e, cfg, shaped


def run_attention(shaped: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, *, sm: str = "sm_90",
                  module: Optional[AmdCudaModule] = None) -> AmdCudaModule:
    scalars, grid = shaped.case_args()
    mod = module or compile_amd(shaped.source, sm)
    launch_amd(mod, shaped.name, grid, shaped.block, [q, k, v, o, lse] + list(scalars))
    return mod


def decode_workspace(shaped: Any, device: Any = "cuda") -> Tuple[Any, Any, Any]:
    """The split-KV pair's fp32 workspace ``(Op [B H n D], Mp [B H n], Lp [B H n])``, NaN."""
    import torch
    c = shaped.case
    n = c.batch * c.heads * c.n_splits
    return (torch.full((n * c.kernel.head_dim,), float("nan"), device=device, dtype=torch.float32),
            torch.full((n,), float("nan"), device=device, dtype=torch.float32),
            torch.full((n,), float("nan"), device=device, dtype=torch.float32))


def _check_decode_args(shaped: Any, q: Any, k: Any, v: Any, o: Any, lse: Any,
                       workspace: Optional[Sequence[Any]]) -> None:
    """Refuse (LaunchError, before any compile or launch) a tensor too small for the case: the
    kernels index through the case's strides and would read or write past it."""
    kind = getattr(getattr(shaped, "bk", None), "kind", None)
    if kind not in ("decode", "decode_splitkv"):
        raise LaunchError(f"run_decode: {getattr(shaped, 'name', shaped)!r} is a {kind} kernel; "
                          "build it with decode_case (seqlen_q 1)")
    c = shaped.case
    if c.layout != "bhsd":
        raise LaunchError(f"run_decode: layout {c.layout}; the CUDA flavour checks bhsd")
    D = c.kernel.head_dim
    want = {"q": (q, c.batch * c.heads * D, 2), "k": (k, c.batch * c.kv_heads * c.seqlen_kv * D, 2),
            "v": (v, c.batch * c.kv_heads * c.seqlen_kv * D, 2),
            "o": (o, c.batch * c.heads * D, 2), "lse": (lse, c.batch * c.heads, 4)}
    if kind == "decode_splitkv":
        if workspace is None or len(workspace) != 3:
            raise LaunchError("run_decode: the split-KV pair needs its (Op, Mp, Lp) workspace "
                              "(decode_workspace)")
        n = c.batch * c.heads * c.n_splits
        want.update({"Op": (workspace[0], n * D, 4), "Mp": (workspace[1], n, 4),
                     "Lp": (workspace[2], n, 4)})
    for name, (t, numel, size) in want.items():
        if t.numel() != numel or t.element_size() != size or not t.is_contiguous():
            raise LaunchError(f"run_decode {shaped.name}: {name} has {t.numel()} elements of "
                              f"{t.element_size()} bytes (contiguous: {t.is_contiguous()}); the "
                              f"case needs {numel} contiguous of {size}")


def run_decode(shaped: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, *,
               workspace: Optional[Sequence[Any]] = None, sm: str = "sm_90",
               module: Optional[AmdCudaModule] = None) -> AmdCudaModule:
    """Launch the registry's decode attention (:func:`decode_case`) on CUDA tensors (BHSD, q/o
    ``[B, H, 1, D]``, k/v ``[B, Hkv, Skv, D]``, lse ``[B, H, 1]`` fp32): the single decode kernel,
    or the split-KV pair (split kernel on grid ``(q blocks, n_splits)`` writing ``workspace``,
    then the combine kernel) with the registry's scalar arguments."""
    _check_decode_args(shaped, q, k, v, o, lse, workspace)
    mod = module or compile_amd(shaped.source, sm)
    if shaped.bk.kind == "decode":
        scalars, grid = shaped.case_args()
        launch_amd(mod, shaped.name, grid, shaped.block, [q, k, v, o, lse] + list(scalars))
        return mod
    from ..amd.decode_splitkv import combine_args
    c, bk = shaped.case, shaped.bk
    shape = shaped.shape()
    split_scalars, g1 = shaped.case_args()          # the registry's split_args and split grid
    g2 = bk.grids(shape, c.n_splits)[1]
    op, mp, lp = workspace
    launch_amd(mod, bk.split.name, g1, bk.split.block, [q, k, v, op, mp, lp] + list(split_scalars))
    launch_amd(mod, bk.combine.name, g2, bk.combine.block,
               [op, mp, lp, o, lse] + combine_args(shape, c.n_splits))
    return mod


# ----------------------------------------------------------------------------- large-shape checks

def _time(fn, reps: int) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def check_gemm(m: int, n: int, k: int, dtype: str = "f16", out_dtype: Optional[str] = None,
               layout: str = "NN", reps: int = 3, seed: int = 0, built: Any = None) -> Dict[str, Any]:
    import torch
    if built is None:
        built = gemm_kernel(m, n, k, dtype, out_dtype, a_major="row" if layout[0] == "N" else "col",
                            b_major="row" if layout[1] == "N" else "col")
    cfg = built.plan.cfg
    od = cfg.out_dtype
    odt = getattr(torch, _TORCH_DT[od])
    g = torch.Generator(device="cuda").manual_seed(seed)
    if ELEM_TYPES[cfg.dtype].bytes == 1:
        # 8-bit floats as the registry makes them (randn * 4 rounded to the format, on the CPU),
        # stored as raw bytes; the reference decodes the SAME bytes with torch's table of the
        # 256 codes
        f8 = getattr(torch, ELEM_TYPES[cfg.dtype].torch)
        gc = torch.Generator().manual_seed(seed)
        a8 = (torch.randn(m, k, generator=gc) * 4).to(f8).view(torch.uint8).cuda()
        b8 = (torch.randn(k, n, generator=gc) * 4).to(f8).view(torch.uint8).cuda()
        lut = torch.arange(256, dtype=torch.uint8).view(f8).double().cuda()
        a, b = lut[a8.long()], lut[b8.long()]
        a_st = a8 if layout[0] == "N" else a8.t().contiguous()
        b_st = b8 if layout[1] == "N" else b8.t().contiguous()
    else:
        dt = getattr(torch, _TORCH_DT[dtype])
        a = torch.randn(m, k, device="cuda", generator=g).to(dt)
        b = torch.randn(k, n, device="cuda", generator=g).to(dt)
        a_st = a.contiguous() if layout[0] == "N" else a.t().contiguous()
        b_st = b.contiguous() if layout[1] == "N" else b.t().contiguous()
    # per-tensor scales that are not powers of two (a dropped factor cannot hide)
    if cfg.scales == "rowcol":
        scales = [torch.rand(m, device="cuda", generator=g) + 0.3,
                  torch.rand(n, device="cuda", generator=g) + 0.3]
    else:
        scales = [torch.tensor([0.7], device="cuda"), torch.tensor([1.3], device="cuda")] \
            if cfg.scales == "tensor" else []
    if cfg.b_layout == "preshuffled":     # B in MFMA fragment order (1-D buffer)
        from ..amd.preshuffle import preshuffle
        # 8-bit floats: the raw bytes, shuffled as bytes (the kernel reads uint8 buffers)
        b_src = b8 if ELEM_TYPES[cfg.dtype].bytes == 1 else b
        b_st = preshuffle(b_src, built.plan.spec.name, cfg.dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
    t0 = time.perf_counter()
    mod = compile_amd(built.source)
    t_compile = time.perf_counter() - t0
    run_gemm(built, a_st, b_st, c, *scales, module=mod)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double())
    if scales:
        sa, sb = scales[0].double(), scales[1].double()
        ref = ref * (sa[:, None] * sb[None, :] if cfg.scales == "rowcol" else sa[0] * sb[0])
    out = c.double()
    err = out - ref
    res = {"kernel": built.name, "shape": [m, n, k], "dtype": dtype, "out_dtype": od,
           "layout": layout, "grid": list(built.grid), "block": built.block,
           "unwritten_nan": int(torch.isnan(out).sum()),
           "max_abs_err": float(err.abs().max()),
           "rel_fro_err": float(err.norm() / ref.norm()),
           "max_abs_ref": float(ref.abs().max()),
           "compile_s": round(t_compile, 2), "backend": mod.module.backend,
           "smem_bytes": mod.smem_bytes(built.block)}
    atol, rtol = _GEMM_TOL[od]
    res["tol"] = [atol, rtol]
    res["within_tol"] = bool((err.abs() <= atol + rtol * ref.abs()).all())
    # the output rounding to f16/bf16 bounds the error: |c - ref| <= ulp/2 of |ref| + fp32 sum
    ms = _time(lambda: run_gemm(built, a_st, b_st, c, *scales, module=mod), reps)
    res["ms_per_launch"] = round(ms, 3)
    return res


def check_attention(batch: int, heads: int, seqlen: int, head_dim: int = 128,
                    causal: bool = False, dtype: str = "f16", reps: int = 3,
                    seed: int = 0, case: Any = None, kv_heads: Optional[int] = None,
                    seqlen_kv: Optional[int] = None,
                    causal_align: str = "top_left") -> Dict[str, Any]:
    """Prefill attention (BHSD, GQA when kv_heads < heads; causal_align top_left = torch's
    is_causal mask, bottom_right = flash-attention's: key j visible iff j <= i + Skv - Sq) on the
    GPU against float64 torch; outputs and LSE poisoned with NaN first.  Rows that see no key
    (bottom-right with Sq > Skv) must give O = 0 and LSE = -inf (the registry's reference)."""
    import torch
    hk, skv = kv_heads or heads, seqlen_kv or seqlen
    e, cfg, shaped = case or attention_case(batch, heads, seqlen, head_dim, causal, dtype,
                                            seqlen_kv=skv, kv_heads=hk, causal_align=causal_align)
    if cfg.causal_align != causal_align and causal:
        raise KernelError(f"check_attention: case built for {cfg.causal_align}, asked "
                          f"{causal_align}")
    dt = getattr(torch, _TORCH_DT[dtype])
    g = torch.Generator(device="cuda").manual_seed(seed)
    shp = (batch, heads, seqlen, head_dim)
    q = torch.randn(shp, device="cuda", generator=g).to(dt)
    k, v = (torch.randn((batch, hk, skv, head_dim), device="cuda", generator=g).to(dt)
            for _ in range(2))
    o = torch.full(shp, float("nan"), device="cuda", dtype=dt)
    lse = torch.full((batch, heads, seqlen), float("nan"), device="cuda", dtype=torch.float32)
    t0 = time.perf_counter()
    mod = compile_amd(shaped.source)
    t_compile = time.perf_counter() - t0
    run_attention(shaped, q, k, v, o, lse, module=mod)
    torch.cuda.synchronize()
    scale = 1.0 / head_dim ** 0.5
    kk = k.double().repeat_interleave(heads // hk, 1)
    vv = v.double().repeat_interleave(heads // hk, 1)
    s = (q.double() @ kk.transpose(-1, -2)) * scale
    off = skv - seqlen if (causal and causal_align == "bottom_right") else 0
    if causal:
        i = torch.arange(seqlen, device="cuda")[:, None]
        j = torch.arange(skv, device="cuda")[None, :]
        s = s.masked_fill(~(j <= i + off), float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    seen = torch.isfinite(ref_lse)
    ref = torch.where(seen[..., None], torch.softmax(s, -1), 0.0) @ vv
    del s
    err = o.double() - ref
    lse_ok = torch.equal(torch.isfinite(lse), seen)
    res = {"kernel": shaped.name, "shape": list(shp), "kv_heads": hk, "seqlen_kv": skv,
           "causal": causal, "causal_align": cfg.causal_align if causal else None,
           "causal_offset": off, "rows_without_keys": int((~seen).sum()), "dtype": dtype,
           "grid": list(shaped.grid), "block": shaped.block,
           "unwritten_nan": int(torch.isnan(o).sum()) + int(torch.isnan(lse).sum()),
           "max_abs_err": float(err.abs().max()),
           "rel_fro_err": float(err.norm() / ref.norm()),
           "lse_max_abs_err": (float((lse.double() - ref_lse)[seen].abs().max()) if lse_ok
                               and bool(seen.any()) else float("inf") if not lse_ok else 0.0),
           "compile_s": round(t_compile, 2), "backend": mod.module.backend,
           "smem_bytes": mod.smem_bytes(shaped.block)}
    atol, rtol = e.tolerance(cfg)
    res["tol"] = [atol, rtol]
    res["within_tol"] = bool((err.abs() <= atol + rtol * ref.abs()).all())
    ms = _time(lambda: run_attention(shaped, q, k, v, o, lse, module=mod), reps)
    res["ms_per_launch"] = round(ms, 3)
    return res


# the CPU emulator tests' decode / split-KV criteria (tests/test_attention_emulate.py,
# tests/test_attention_splitkv.py): max |O - ref| by O's type, cosine, LSE
_DECODE_EMU_TOL = {"f16": 4e-3, "bf16": 2e-2}
_DECODE_LSE_TOL = 1e-4
_DECODE_MIN_COS = 0.9999


def decode_reference(q: Any, k: Any, v: Any, chunk_bytes: int = 1 << 30) -> Tuple[Any, Any]:
    """(O [B, H, 1, D], LSE [B, H, 1]) in float64 by explicit softmax (GQA by grouping the query
    heads of a KV head, never expanding K/V), a few batches at a time."""
    import torch
    B, H, _, D = q.shape
    HK, S = k.shape[1], k.shape[2]
    G = H // HK
    scale = 1.0 / D ** 0.5
    per = max(1, chunk_bytes // max(1, 3 * HK * S * D * 8))
    outs, lses = [], []
    for b0 in range(0, B, per):
        qq = q[b0:b0 + per].double().reshape(-1, HK, G, D)
        kk, vv = k[b0:b0 + per].double(), v[b0:b0 + per].double()
        sc = (qq @ kk.transpose(-1, -2)) * scale             # [b, HK, G, S]
        lses.append(torch.logsumexp(sc, -1).reshape(-1, H, 1))
        outs.append((torch.softmax(sc, -1) @ vv).reshape(-1, H, 1, D))
        del sc, kk, vv
    return torch.cat(outs), torch.cat(lses)


def check_decode(batch: int, heads: int, seqlen_kv: int, head_dim: int = 128, dtype: str = "f16",
                 out_dtype: Optional[str] = None, kv_heads: Optional[int] = None,
                 kv_splits: Optional[int] = None, reps: int = 3, seed: int = 0,
                 case: Any = None) -> Dict[str, Any]:
    """Decode attention (seqlen_q 1, BHSD, GQA/MQA when kv_heads < heads) on the GPU against a
    float64 explicit-softmax reference: the single decode kernel or the split-KV pair, as
    :func:`decode_case` picks it (``kv_splits``).  O, LSE and the split-KV workspace are poisoned
    with NaN first.  ``within_tol``: the registry's elementwise (atol, rtol); ``emulator_criteria``:
    the CPU emulator tests' max |err| by output type, cosine >= 0.9999 and |LSE err| <= 1e-4."""
    import torch
    hk = kv_heads or heads
    e, cfg, shaped = case or decode_case(batch, heads, seqlen_kv, head_dim, dtype, out_dtype,
                                         kv_heads=hk, kv_splits=kv_splits)
    c = cfg
    od = c.kernel.out_dtype
    dt, odt = getattr(torch, _TORCH_DT[c.kernel.dtype]), getattr(torch, _TORCH_DT[od])
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn((batch, heads, 1, head_dim), device="cuda", generator=g).to(dt)
    k, v = (torch.randn((batch, hk, seqlen_kv, head_dim), device="cuda", generator=g).to(dt)
            for _ in range(2))
    o = torch.full((batch, heads, 1, head_dim), float("nan"), device="cuda", dtype=odt)
    lse = torch.full((batch, heads, 1), float("nan"), device="cuda", dtype=torch.float32)
    ws = decode_workspace(shaped) if shaped.bk.kind == "decode_splitkv" else None
    t0 = time.perf_counter()
    mod = compile_amd(shaped.source)
    t_compile = time.perf_counter() - t0
    run_decode(shaped, q, k, v, o, lse, workspace=ws, module=mod)
    torch.cuda.synchronize()
    ws_nan = sum(int(torch.isnan(w).sum()) for w in ws) if ws is not None else 0
    ref, ref_lse = decode_reference(q, k, v)
    out = o.double()
    err = out - ref
    cos = float(torch.nn.functional.cosine_similarity(out.reshape(1, -1), ref.reshape(1, -1)))
    res = {"kernel": shaped.name, "kind": shaped.bk.kind, "batch": batch, "heads": heads,
           "kv_heads": hk, "seqlen_kv": seqlen_kv, "head_dim": head_dim, "dtype": c.kernel.dtype,
           "out_dtype": od, "n_splits": c.n_splits, "kv_chunk": c.kv_chunk,
           "grid": list(shaped.grid), "block": shaped.block,
           "unwritten_nan": int(torch.isnan(o).sum()) + int(torch.isnan(lse).sum()),
           "workspace_nan": ws_nan,
           "max_abs_err": float(err.abs().max()),
           "rel_fro_err": float(err.norm() / ref.norm()),
           "max_abs_ref": float(ref.abs().max()),
           "cosine": cos,
           "lse_max_abs_err": float((lse.double() - ref_lse).abs().max()),
           "compile_s": round(t_compile, 2), "backend": mod.module.backend,
           "smem_bytes": mod.smem_bytes(shaped.block)}
    atol, rtol = e.tolerance(cfg)
    res["tol"] = [atol, rtol]
    res["within_tol"] = bool((err.abs() <= atol + rtol * ref.abs()).all())
    res["emulator_tol"] = {"max_abs": _DECODE_EMU_TOL[od], "min_cosine": _DECODE_MIN_COS,
                           "lse_max_abs": _DECODE_LSE_TOL}
    res["emulator_criteria"] = bool(res["max_abs_err"] <= _DECODE_EMU_TOL[od]
                                    and res["cosine"] >= _DECODE_MIN_COS
                                    and res["lse_max_abs_err"] <= _DECODE_LSE_TOL)
    ms = _time(lambda: run_decode(shaped, q, k, v, o, lse, workspace=ws, module=mod), reps)
    res["ms_per_launch"] = round(ms, 4)
    if shaped.bk.kind == "decode_splitkv":
        from ..amd.decode_splitkv import splitkv_bytes
        nb = splitkv_bytes(batch, heads, hk, seqlen_kv, head_dim, c.n_splits)["total"]
    else:
        from ..amd.decode import decode_bytes
        nb = decode_bytes(batch, heads, hk, seqlen_kv, head_dim)["total"]
    res["min_bytes"] = nb
    res["gb_per_s"] = round(nb / (ms * 1e-3) / 1e9, 1)
    return res


def main(argv: Optional[Sequence[str]] = None) -> int:
    import torch
    p = argparse.ArgumentParser(description="AMD-flavoured kernels on an NVIDIA GPU (functional)")
    p.add_argument("--json", default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="small shapes only")
    p.add_argument("--dump", default=None, help="directory: write the source of a failing case")
    p.add_argument("--variants", action="store_true",
                   help="other configurations (layouts, 16x16x16 MFMA, block_k 64, head_dim "
                        "64/256, GQA, Sq != Skv) at mid-size ragged shapes")
    p.add_argument("--only", default="gemm,attention,decode",
                   help="comma-separated kinds to run: gemm, attention, decode (default all)")
    p.add_argument("--pingpong", action="store_true",
                   help="attention: the head_dim 128 prefill rows use the ping-pong form "
                        "(AttnConfig(pingpong=True)); other head dims keep the default form")
    a = p.parse_args(argv)
    kinds = {x.strip() for x in a.only.split(",") if x.strip()}
    if not kinds <= {"gemm", "attention", "decode"}:
        p.error(f"--only {a.only!r}: use gemm, attention, decode")
    props = torch.cuda.get_device_properties(0)
    out: Dict[str, Any] = {"device": props.name, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                       time.gmtime()),
                           "torch": torch.__version__, "gemm": [], "attention": [], "decode": []}
    # gemm rows: (m, n, k, dtype, out_dtype, layout[, GemmConfig keywords]);
    # attention rows: (batch, heads, seqlen, head_dim, causal, dtype[, kv_heads, seqlen_kv
    # [, causal_align]]);
    # decode rows: (batch, heads, kv_heads, seqlen_kv, head_dim, dtype, out_dtype, kv_splits)
    # with kv_splits None = the registry's choice, 0 = the single decode kernel, n = n splits
    if a.quick:
        gemms = [(256, 256, 256, "f16", None, "NN"), (200, 136, 72, "bf16", None, "NN"),
                 (200, 136, 200, "fp8", None, "NT", {"block_k": 64}),
                 (130, 66, 136, "bf8", "f32", "NN", {"block_k": 64, "mfma": "16x16x32"})]
        atts = [(1, 2, 200, 128, True, "f16"),
                (1, 2, 130, 64, True, "f16", 1, 77, "bottom_right")]
        decs = [(2, 4, 2, 77, 128, "f16", None, None), (1, 4, 2, 1000, 128, "bf16", "f16", 4)]
    elif a.variants:
        gemms = [(2000, 1544, 1000, dt, None, lay, kw)
                 for dt, lay in (("f16", "NT"), ("bf16", "TN"), ("f16", "TT"))
                 for kw in ({}, {"mfma": "16x16x16"}, {"block_k": 64}, {"block_m": 64, "block_n": 64})]
        atts = [(2, 8, 1000, 64, True, "f16"), (2, 8, 1000, 256, False, "bf16"),
                (2, 8, 1500, 128, True, "f16", 2, 1500), (1, 8, 777, 128, True, "bf16", 4, 2047),
                (1, 4, 1024, 128, False, "f16", 4, 3000),
                (1, 8, 777, 128, True, "bf16", 4, 2047, "bottom_right"),
                (2, 8, 1500, 64, True, "f16", 2, 1000, "bottom_right")]
        decs = [(16, 16, 2, 1000, 64, "f16", None, 0), (16, 16, 2, 1000, 256, "bf16", "f16", 0),
                (16, 16, 1, 4097, 256, "bf16", "f16", None), (7, 12, 4, 3001, 64, "f16", None, 5)]
    else:
        gemms = [(4096, 4096, 4096, "f16", None, "NN"), (4000, 3000, 1000, "f16", None, "NN"),
                 (4000, 3000, 1000, "bf16", None, "NN"), (4096, 4096, 4096, "bf16", "f32", "NT"),
                 (4096, 4096, 4096, "fp8", None, "NT", {"block_k": 64}),
                 (4000, 3000, 1000, "bf8", None, "NN", {"block_k": 64}),
                 (4096, 4096, 4096, "bf16", None, "NN", {"b_layout": "preshuffled"}),
                 (4000, 3000, 1000, "f16", None, "NN", {"b_layout": "preshuffled"}),
                 # fp8 with preshuffled B at the form the tile choice picks for 4096^3
                 (4096, 4096, 4096, "fp8", None, "NN",
                  {"b_layout": "preshuffled", "block_m": 224, "block_n": 128, "block_k": 64,
                   "waves_m": 1, "waves_n": 4, "schedule": "pipelined", "waves_per_eu": 2})]
        atts = [(2, 8, 2048, 128, False, "f16"), (2, 8, 2048, 128, True, "f16"),
                (2, 8, 2048, 128, True, "bf16"),
                (2, 8, 1000, 128, True, "f16", 4, 3000, "bottom_right"),
                (2, 8, 1500, 128, True, "bf16", 8, 1000, "bottom_right"),
                # issue 16's sequence length (the default one-stage prefill) at one batch
                (1, 16, 8192, 128, True, "bf16"), (1, 16, 8192, 128, False, "bf16")]
        decs = [(64, 16, 16, 1, 128, "f16", None, None), (64, 16, 16, 7, 128, "f16", None, None),
                (64, 16, 16, 1000, 128, "f16", None, 0), (64, 16, 16, 4096, 128, "f16", None, 0),
                (64, 32, 8, 1000, 128, "bf16", "f16", 0), (64, 32, 8, 4096, 128, "bf16", "f16", 0),
                (64, 16, 16, 1000, 128, "f16", None, None),
                (64, 16, 16, 4096, 128, "f16", None, None),
                (64, 16, 16, 16384, 128, "f16", None, None),
                (64, 32, 8, 16384, 128, "bf16", "f16", None),
                (1, 32, 8, 16384, 128, "f16", None, None)]
    gemms = gemms if "gemm" in kinds else []
    atts = atts if "attention" in kinds else []
    decs = decs if "decode" in kinds else []
    # every source is emitted before the first NVRTC compile of the process (see the docs: on the
    # device machine's Python 3.12 a source emitted after a compile once lost the blanks
    # between declared types and names)
    gemms = [g if len(g) == 7 else tuple(g) + ({},) for g in gemms]
    atts = [tuple(t) + (None, None, "top_left")[len(t) - 6:] for t in atts]
    built_g = [gemm_kernel(m, n, k, dt, od, a_major="row" if lay[0] == "N" else "col",
                           b_major="row" if lay[1] == "N" else "col", **kw)
               for (m, n, k, dt, od, lay, kw) in gemms]
    built_a = [attention_case(b, h, s, d, causal, dt, seqlen_kv=skv, kv_heads=hk,
                              causal_align=al, pingpong=a.pingpong and d == 128 and s > 1)
               for (b, h, s, d, causal, dt, hk, skv, al) in atts]
    built_d = [decode_case(b, h, skv, d, dt, od, kv_heads=hk, kv_splits=ks)
               for (b, h, hk, skv, d, dt, od, ks) in decs]
    for bk in built_g + [c[2] for c in built_a + built_d]:
        sig = kernel_signatures(bk.source)
        print(f"emitted {bk.name}: {len(bk.source)} chars, signature ok: {bool(sig)}", flush=True)
    rows = []
    for (m, n, k, dt, od, lay, kw), bk in zip(gemms, built_g):
        try:
            r = check_gemm(m, n, k, dt, od, lay, reps=a.reps, built=bk)
            r["config"] = kw
        except Exception as ex:  # keep going: report every case
            r = {"shape": [m, n, k], "dtype": dt, "layout": lay, "error": f"{type(ex).__name__}: {ex}"[:800]}
            if a.dump:
                Path(a.dump, f"gemm_{m}x{n}x{k}_{dt}_{lay}.hip").write_text(bk.source)
        out["gemm"].append(r)
        extra = " ".join(f"{k_}={v_}" for k_, v_ in kw.items())
        rows.append(("gemm", f"{m}x{n}x{k} {dt}->{od or dt} {lay} {extra}".strip(), r))
        print(json.dumps(r), flush=True)
    for (b, h, s, d, causal, dt, hk, skv, al), case in zip(atts, built_a):
        try:
            r = check_attention(b, h, s, d, causal, dt, reps=a.reps, case=case, kv_heads=hk,
                                seqlen_kv=skv, causal_align=al)
        except Exception as ex:
            r = {"shape": [b, h, s, d], "causal": causal, "causal_align": al,
                 "error": f"{type(ex).__name__}: {ex}"[:800]}
            if a.dump:
                Path(a.dump, f"attn_{s}_{d}_{int(causal)}_{dt}.hip").write_text(case[2].source)
        out["attention"].append(r)
        kv = f" Hkv{hk} Skv{skv}" if (hk or skv) else ""
        mask = ("causal-br" if al == "bottom_right" else "causal") if causal else "full"
        pp = " pingpong" if getattr(case[1].kernel, "pingpong", False) else ""
        rows.append(("attn", f"B{b} H{h} S{s}{kv} D{d} {mask} {dt}{pp}", r))
        print(json.dumps(r), flush=True)
    for (b, h, hk, skv, d, dt, od, ks), case in zip(decs, built_d):
        try:
            r = check_decode(b, h, skv, d, dt, od, kv_heads=hk, kv_splits=ks, reps=a.reps,
                             case=case)
        except Exception as ex:
            r = {"batch": b, "heads": h, "kv_heads": hk, "seqlen_kv": skv, "head_dim": d,
                 "error": f"{type(ex).__name__}: {ex}"[:800]}
            if a.dump:
                Path(a.dump, f"decode_{skv}_{d}_{dt}.hip").write_text(case[2].source)
        out["decode"].append(r)
        c = case[1]
        how = f"split{c.n_splits}x{c.kv_chunk}" if case[2].bk.kind == "decode_splitkv" else "single"
        rows.append(("dec", f"B{b} H{h} Hkv{hk} Skv{skv} D{d} {dt}->{od or dt} {how}", r))
        print(json.dumps(r), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    print(f"\n{out['device']}  {out['date']}  torch {out['torch']}")
    print(f"{'kind':5} {'case':52} {'max|err|':>10} {'rel fro':>10} {'nan':>5} {'ms':>9} {'tol ok':>6}")
    for kind, case, r in rows:
        if "error" in r:
            print(f"{kind:5} {case:52} ERROR {r['error'][:200]}")
        else:
            extra = ""
            if kind == "dec":
                extra = (f"  lse {r['lse_max_abs_err']:.2g} cos {r['cosine']:.6f} emu-criteria "
                         f"{r['emulator_criteria']} {r['gb_per_s']} GB/s")
            elif "lse_max_abs_err" in r:
                extra = f"  lse {r['lse_max_abs_err']:.2g}"
            print(f"{kind:5} {case:52} {r['max_abs_err']:10.3g} {r['rel_fro_err']:10.3g} "
                  f"{r['unwritten_nan'] + r.get('workspace_nan', 0):5d} "
                  f"{r['ms_per_launch']:9.3f} {str(r['within_tol']):>6}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
