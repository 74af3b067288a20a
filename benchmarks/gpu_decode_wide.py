"""The decodes' wide (64-bit offsets) IR forms against the templates that run today where the
32-bit IR cannot launch: bitwise equality and rotated-round timings.

    PYTHONPATH=. python benchmarks/gpu_decode_wide.py [--rounds 7] [--out DIR]

* ``split``: the split-KV decode (:class:`~kernels.nvidia.decode_fused_ir.IrFusedMmaDecode`,
  configuration by ``dispatch.mma_decode_config``) on K / V the 32-bit kernels cannot address:
  the call bound with ``decode_ir.WIDE_SPLIT_ON_IR`` on (the wide IR split kernel + the IR
  combine) against the same call bound with it off (the template split kernel + the same IR
  combine).  Shapes: ``S1000`` B2 Hq16 Hkv4 d128 and ``S16384`` B2 Hq32 Hkv8 d128, K / V
  strided views of one buffer whose batches lie 2^31 + 128 elements apart; ``real``
  B65 Hq32 Hkv8 S32768 d128, contiguous K and V of 2^31 + 2^25 elements each.
* ``onepass``: the one-pass decode, ``IrOnePassDecode(cfg, wide=True)`` against the template
  ``DecodeAttention(cfg)`` (configuration by ``onepass_config``).  Shapes: ``S12`` B2 Hq8 Hkv2
  d128 (the GPU test's, batches 2^31 + 128 apart) and ``S16`` B64 Hq32 Hkv8 d128 with batches
  2^25 + 2^20 elements apart (batch 63 past 2^31).

Each kernel writes its own NaN-poisoned output; warmed up once, then rotated rounds of
``--reps``-call CUDA-event means (whole calls: split + combine for ``split``).  Rows: bitwise
equality, the medians and template / wide (above 1: the wide form is faster).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_rounds import medians, rotated_rounds  # noqa: E402
from gpu_timing import bench_parser, event_round_us, run_header  # noqa: E402


def strided_kv(B, Hkv, S, D, sb, dtype):
    """k, v: views of one buffer, batches ``sb`` elements apart (v starts Hkv S D later)."""
    import torch
    n = Hkv * S * D
    buf = torch.empty((B - 1) * sb + 2 * n, device="cuda", dtype=dtype)
    for b in range(B):
        buf[b * sb:b * sb + 2 * n].normal_()
    st = (sb, S * D, D, 1)
    return buf.as_strided((B, Hkv, S, D), st, 0), buf.as_strided((B, Hkv, S, D), st, n)


def split_shapes():
    import torch
    bf = torch.bfloat16
    yield "S1000", lambda: (2, 16, *strided_kv(2, 4, 1000, 128, 2 ** 31 + 128, bf))
    yield "S16384", lambda: (2, 32, *strided_kv(2, 8, 16384, 128, 2 ** 31 + 128, bf))

    def real():
        k = torch.randn(65, 8, 32768, 128, device="cuda", dtype=bf)
        return 65, 32, k, torch.randn_like(k)
    yield "real", real


def onepass_shapes():
    import torch
    bf = torch.bfloat16
    yield "S12", lambda: (2, 8, *strided_kv(2, 2, 12, 128, 2 ** 31 + 128, bf))
    yield "S16", lambda: (64, 32, *strided_kv(64, 8, 16, 128, 2 ** 25 + 2 ** 20, bf))


def timed(calls, outs, rounds, reps):
    """Warm up, compare, time: the row's fields."""
    import torch
    for f in calls.values():
        f()
    torch.cuda.synchronize()
    a, b = (outs[n] for n in calls)
    fields = dict(bitwise_equal=bool(torch.equal(a, b)), wide_nan=bool(a.isnan().any()))
    ts = rotated_rounds(list(calls), rounds, lambda n: event_round_us(calls[n], reps))
    med = medians(ts)
    fields.update(wide_us=round(med["wide"], 2), template_us=round(med["template"], 2),
                  wide_speed_vs_template=round(med["template"] / med["wide"], 3), rounds_us=ts)
    return fields


def split_rows(rounds, reps):
    import torch
    from kernels.nvidia import decode_ir, dispatch
    from kernels.nvidia.decode_fused_ir import IrFusedMmaDecode
    for name, make in split_shapes():
        B, Hq, k, v = make()
        q = torch.randn(B, Hq, 1, k.shape[-1], device="cuda", dtype=k.dtype)
        cfg = dispatch.mma_decode_config(q, k)
        t0 = time.perf_counter()
        dec = IrFusedMmaDecode(cfg)
        build = time.perf_counter() - t0
        outs = {n: torch.full(q.shape, float("nan"), device="cuda", dtype=torch.float16)
                for n in ("wide", "template")}
        runs = {}
        for n, on in (("wide", True), ("template", False)):
            decode_ir.WIDE_SPLIT_ON_IR = on
            t0 = time.perf_counter()
            runs[n] = dec.bind(q, k, v, outs[n])
            if n == "wide":
                bind_s = time.perf_counter() - t0
                took_wide = dec.wide_split_call(q, k, v, outs[n], 1.0, None, None) is not None
        decode_ir.WIDE_SPLIT_ON_IR = False
        calls = {n: (lambda r=runs[n], o=outs[n], t=(q, k, v): r(*t, o)) for n in runs}
        row = dict(case="split", shape=name, config=cfg.name, wide_launch=took_wide,
                   build_s=round(build, 1), wide_bind_s=round(bind_s, 2))
        row.update(timed(calls, outs, rounds, reps))
        yield row
        del q, k, v, outs, runs, calls
        torch.cuda.empty_cache()


def onepass_rows(rounds, reps):
    import torch
    from kernels.nvidia.attention import DecodeAttention
    from kernels.nvidia.decode_onepass_ir import IrOnePassDecode, onepass_config
    for name, make in onepass_shapes():
        B, Hq, k, v = make()
        q = torch.randn(B, Hq, 1, k.shape[-1], device="cuda", dtype=k.dtype)
        cfg = onepass_config(q, k, "f16")
        kern = {"wide": IrOnePassDecode(cfg, wide=True), "template": DecodeAttention(cfg)}
        outs = {n: torch.full(q.shape, float("nan"), device="cuda", dtype=torch.float16)
                for n in kern}
        calls = {n: (lambda f=kern[n], o=outs[n], t=(q, k, v): f(*t, out=o)) for n in kern}
        row = dict(case="onepass", shape=name, config=kern["wide"].kernel_name)
        row.update(timed(calls, outs, rounds, reps))
        yield row
        del q, k, v, outs, calls
        torch.cuda.empty_cache()


def main() -> None:
    import torch
    ap = bench_parser(10, __doc__)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    rows = []
    print(json.dumps(run_header()), flush=True)
    for gen in (onepass_rows, split_rows):
        for row in gen(a.rounds, a.reps):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "rounds_us"}), flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    Path(a.out, "gpu_decode_wide.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "header": run_header(), "rows": rows},
        indent=1))


if __name__ == "__main__":
    main()
