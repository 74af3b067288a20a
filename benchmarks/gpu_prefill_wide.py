"""The wide (64-bit) IR prefills (kernels/nvidia/prefill_wide.py) against their templates on
a GPU: bitwise equality and rotated-round timings at tensors the 32-bit IR form cannot launch.

    PYTHONPATH=. python benchmarks/gpu_prefill_wide.py [--rounds 7] [--out DIR]

Shapes (each case: its family's head_dim):

* ``past-2^31``: B2 H16 S4096, q / k / v strided views of one buffer whose batches lie
  2^31 + 8192 elements apart (every offset of batch 1 past 2^31), out likewise in its own
  buffer;
* ``grid-y``: B2048 H40 S64 contiguous (batch x heads = 81920, past grid y).

Cases: the mma.sync prefill d64 and d128 causal, the d64 wgmma prefill (both masks), the
warp-specialised d128 prefill's three dispatched configurations.  Per case and shape: the
wide IR kernel (verified, each launch proved) and the template, each writing its own
NaN-poisoned output, warmed up once, then rotated rounds of 10-call CUDA-event means; the row
says whether the outputs are bitwise equal, the IR's error against a float32 reference on
(batch 0, head 0) and (last batch, last head), and the medians.  Then ``flash_attention()``
with ``WIDE_PREFILL_ON_IR`` on: the kernel it launches at each shape (its name) and whether
its output equals the template's.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_rounds import medians, rotated_rounds  # noqa: E402
from gpu_timing import bench_parser, event_round_us, run_header  # noqa: E402

SB = 2 ** 31 + 8192


def views(shape_name, D, dtype):
    """(q, k, v, make_out) of the shape (module docstring)."""
    import torch
    if shape_name == "grid-y":
        B, H, S = 2048, 40, 64
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
        return q, k, v, lambda: torch.full_like(q, float("nan"))
    B, H, S = 2, 16, 4096
    n = H * S * D
    buf = torch.empty(SB + 3 * n, device="cuda", dtype=dtype)
    buf[:3 * n].normal_()
    buf[SB:].normal_()
    st = (SB, S * D, D, 1)
    q, k, v = (buf.as_strided((B, H, S, D), st, i * n) for i in range(3))

    def make_out():
        o = torch.full((SB + n,), float("nan"), device="cuda", dtype=dtype)
        return o.as_strided((B, H, S, D), st, 0)
    return q, k, v, make_out


def ref_err(q, k, v, o, causal):
    """Max abs error of o at (batch 0, head 0) and (last, last) against float32 SDPA."""
    import torch
    g = q.shape[1] // k.shape[1]
    worst = 0.0
    for b, h in ((0, 0), (q.shape[0] - 1, q.shape[1] - 1)):
        r = torch.nn.functional.scaled_dot_product_attention(
            q[b:b + 1, h:h + 1].float(), k[b:b + 1, h // g:h // g + 1].float(),
            v[b:b + 1, h // g:h // g + 1].float(), is_causal=causal)
        worst = max(worst, (o[b:b + 1, h:h + 1].float() - r).abs().max().item())
    return worst


def measure(ir, tpl, cfg, shape, dt, rounds, reps):
    """One row: the wide IR kernel and the template at ``shape``, bitwise and timed."""
    import torch
    q, k, v, make_out = views(shape, cfg.head_dim, dt)
    outs = {"ir": make_out(), "template": make_out()}
    kern = {"ir": ir, "template": tpl}
    calls = {n: (lambda f=kern[n], o=outs[n]: f(q, k, v, out=o)) for n in kern}
    for f in calls.values():
        f()
    torch.cuda.synchronize()
    same = bool(torch.equal(outs["ir"], outs["template"]))
    nan = bool(outs["ir"].isnan().any())
    err = ref_err(q, k, v, outs["ir"], cfg.causal)
    ts = rotated_rounds(list(calls), rounds, lambda n: event_round_us(calls[n], reps))
    med = medians(ts)
    return dict(shape=shape, kernel=ir.kernel_name, bitwise_equal=same, ir_nan=nan,
                max_abs_ir_vs_f32_ref=round(err, 5), ir_us=round(med["ir"], 1),
                template_us=round(med["template"], 1),
                ir_speed_vs_template=round(med["template"] / med["ir"], 3), rounds_us=ts)


def cases():
    from kernels.nvidia.attention import FlashAttention, FlashConfig
    from kernels.nvidia.flash_ir import IrFlashAttention
    from kernels.nvidia.wgmma_attention import WgmmaFlashAttention, WgmmaFlashConfig
    from kernels.nvidia.wgmma_attention_ws import WsFlashAttention, WsFlashConfig
    from kernels.nvidia.wgmma_flash_ir import IrWgmmaFlashAttention
    from kernels.nvidia.wgmma_ws_ir_launch import IrWsAttention
    ws = dict(head_dim=128, pingpong=True, loader="tma", dtype="bf16")
    out = []
    for cfg in (FlashConfig(head_dim=64), FlashConfig(head_dim=128, causal=True)):
        out.append((f"mma-{cfg.name}", cfg, IrFlashAttention, FlashAttention))
    for causal in (False, True):
        cfg = WgmmaFlashConfig(head_dim=64, warpgroups=1, bn=128, causal=causal)
        out.append((f"wgmma-{cfg.name}", cfg, IrWgmmaFlashAttention, WgmmaFlashAttention))
    for kw in (dict(stages=3), dict(bn=192, stages=2),
               dict(stages=2, causal=True, defer_pv_wait=True)):
        cfg = WsFlashConfig(**ws, **kw)
        out.append((f"ws-{cfg.name}", cfg, IrWsAttention, WsFlashAttention))
    return out


def main() -> None:
    import torch
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    rows = []
    print(json.dumps(run_header()), flush=True)
    for name, cfg, ir_cls, tpl_cls in cases():
        if a.only and a.only not in name:
            continue
        t0 = time.perf_counter()
        ir = ir_cls(cfg, wide=True)
        tpl = tpl_cls(getattr(ir, "ws_cfg", cfg))
        build_s = time.perf_counter() - t0
        dt = torch.bfloat16 if cfg.dtype == "bf16" else torch.float16
        for shape in ("past-2^31", "grid-y"):
            row = measure(ir, tpl, cfg, shape, dt, a.rounds, a.reps)
            row.update(case=name, build_verify_s=round(build_s, 1))
            rows.append(row)
            print(json.dumps({k2: v2 for k2, v2 in row.items() if k2 != "rounds_us"}),
                  flush=True)
            torch.cuda.empty_cache()
    # the dispatch with the switch on: what flash_attention launches, equal to the template
    from kernels.nvidia import dispatch, prefill_ir
    prefill_ir.WIDE_PREFILL_ON_IR = True
    for D, dt, causal in ((64, torch.float16, False), (128, torch.bfloat16, False),
                          (128, torch.bfloat16, True)):
        for shape in ("past-2^31", "grid-y"):
            q, k, v, make_out = views(shape, D, dt)
            o = make_out()
            fa = dispatch._within_offsets(dispatch.compiled_flash(
                dispatch.choose_prefill(short(dt), D, causal, "wgmma", True,
                                        q.shape[2], k.shape[2]).config), q, k, v, o)
            dispatch.flash_attention(q, k, v, causal=causal, out=o)
            t = make_out()
            dispatch.compiled_flash(dispatch.prefill_config(fa), template=True)(q, k, v, out=t)
            torch.cuda.synchronize()
            row = dict(case=f"dispatch-d{D}{'-causal' if causal else ''}", shape=shape,
                       kernel=getattr(fa, "kernel_name", fa.cfg.name),
                       wide=bool(getattr(fa, "wide", False)),
                       bitwise_equal=bool(torch.equal(o, t)), ir_nan=bool(o.isnan().any()))
            rows.append(row)
            print(json.dumps(row), flush=True)
            del q, k, v, o, t
            torch.cuda.empty_cache()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    Path(a.out, "gpu_prefill_wide.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "header": run_header(), "rows": rows},
        indent=1))
    print("case shape bitwise speed(template/ir) ir_us template_us", flush=True)
    for r in rows:
        print(r["case"], r["shape"], r["bitwise_equal"], r.get("ir_speed_vs_template"),
              r.get("ir_us"), r.get("template_us"), r.get("kernel"), flush=True)


def short(dt) -> str:
    import torch
    return "bf16" if dt == torch.bfloat16 else "f16"


if __name__ == "__main__":
    main()
