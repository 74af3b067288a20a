"""The shape suite of ``benchmarks/gpu.py --suite`` (issue 20 item 5): the generated NVIDIA
kernels against torch on the shapes users bring, in one run.

    python3 benchmarks/gpu.py --suite [--out DIR] [--reps N]

* GEMM (14 shapes: ragged, skinny M = 1/16/64, LLM projections, 8192^3): ``kernels.nvidia
  .dispatch.gemm`` (its own choice, printed) against ``torch.matmul`` (cuBLAS);
* prefill attention (8 shapes: GQA, causal, odd lengths, d64/d128/d256):
  ``dispatch.flash_attention`` against ``scaled_dot_product_attention`` with each of the
  cuDNN, flash (FA2) and efficient backends that runs the shape (``enable_gqa`` for GQA), the
  best of them as "SDPA best";
* decode (the seed's configurations to 128K-token GQA): ``dispatch.decode_attention`` as a
  fraction of a device-to-device copy's bandwidth (bytes: q, K, V read once, out written).

Settling (issue 20, ``benchmarks/gpu_decode_firstcall.py``): memory handed back to the driver
by ``torch.cuda.empty_cache()`` (the suite frees each row's tensors and float32 references)
costs HBM bandwidth for the next ~10-30 ms: on an H100 a decode AND a copy of the same bytes
both ran ~16 % slower for the first ~200 calls after an 8 GiB release, and not at all after
0.3 s idle or when the memory stayed cached.  So before the first timed call of each row (ours
and torch's alike) :func:`settle` releases the cached memory and waits until a 64 MiB probe
copy runs at the speed it had on the quiet GPU at the start (within :data:`SETTLE_TOL`, at most
:data:`SETTLE_MAX_S`); each row records ``settle_ms`` and whether the GPU was quiet.  Each decode
row also re-times the 1 GiB device copy right after its own timing (``copy_adjacent_GBps``),
as a check that the reference did not drift; the ratio stays to the copy timed at the start.

Two times per kernel, both medians: ``device`` -- the kernels' own GPU time per call, from the
CUDA profiler (CUPTI through ``torch.profiler``: per kernel name the median duration times
launches per call), which leaves out host launch overhead; ``wall`` -- CUDA events around one
call (includes the host work between launches, which dominates microsecond kernels).  Ratios
are given on both.  Every output is checked against a float32 torch reference (relative
Frobenius error in the JSON and the table).

GEMM rows (session 12): the ours / cuBLAS pair is timed in :data:`GEMM_ROUNDS` rounds of
alternating order after one settle, medians kept, with each call's host time
(``host_seconds``, 100 calls back to back): a call whose host time nears its kernels' time
leaves the GPU without a queue, and then its wall (events around ONE call) is host time plus
device time and moves with the host's jitter; one pass with ours always first read 0.46x by
wall on the first row where later rounds read 0.68-0.78x (``benchmarks/gpu_gemm_wall.py``).
"""

from __future__ import annotations

import json
import math
import statistics
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpu_timing import host_seconds, kernel_events

GEMM_SHAPES = [  # (M, N, K, dtype)
    (4000, 3000, 1000, "f16"), (16, 4096, 4096, "bf16"), (777, 333, 130, "f16"),
    (1, 1, 8, "f16"), (8192, 8192, 8192, "bf16"), (4096, 14336, 4096, "bf16"),
    (1, 4096, 4096, "bf16"), (64, 4096, 4096, "bf16"), (16, 14336, 4096, "bf16"),
    (128, 4096, 14336, "bf16"), (4096, 4096, 4096, "f16"), (1024, 1024, 16384, "bf16"),
    (4097, 4097, 4097, "f16"), (2048, 2048, 2048, "bf16")]

PREFILL_SHAPES = [  # (B, Hq, Hkv, Sq, Skv, D, causal)
    (8, 32, 32, 8192, 8192, 128, False), (8, 32, 32, 8192, 8192, 128, True),
    (2, 32, 8, 4096, 4096, 128, True), (1, 16, 16, 1000, 4097, 64, False),
    (4, 8, 1, 513, 513, 256, True), (4, 16, 16, 2048, 2048, 64, False),
    (2, 16, 16, 4096, 4096, 256, False), (16, 32, 8, 512, 512, 128, True)]

DECODE_SHAPES = [  # (B, Hq, Hkv, Skv, D)
    (30720, 32, 32, 1, 128), (30720, 32, 32, 16, 128), (30720, 16, 16, 16, 256),
    (64, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (4, 32, 8, 4096, 256),
    (1, 32, 8, 100_000, 128), (1, 32, 8, 131_072, 128), (1, 64, 8, 131_072, 128)]

TORCH_DT = {"f16": "float16", "bf16": "bfloat16"}


def device_time(fn: Callable[[], Any], reps: int) -> float:
    """Median GPU seconds per call of ``fn``'s kernels (CUPTI), launch gaps excluded."""
    per: Dict[str, List[float]] = {}
    for e in kernel_events(fn, reps):
        if e.device_time > 0:
            per.setdefault(e.name, []).append(e.device_time)
    if not per:
        raise RuntimeError("the profiler saw no GPU kernel (CUPTI unavailable?)")
    return sum(statistics.median(v) * len(v) / reps for v in per.values()) / 1e6


SETTLE_TOL = 0.03     # a probe within 3 % of its quiet time counts as quiet
SETTLE_MAX_S = 2.0    # give up waiting after this long (the row records quiet=False)
PROBE_BYTES = 64 * 2 ** 20


def wait_quiet(probe: Callable[[], float], quiet_s: float, tol: float = SETTLE_TOL,
               max_s: float = SETTLE_MAX_S, pause: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> Tuple[float, bool]:
    """Call ``probe`` (seconds of a fixed piece of GPU work) until it takes at most ``quiet_s
    * (1 + tol)`` or ``max_s`` have passed; returns ``(seconds waited, quiet)``."""
    t0 = clock()
    while True:
        if probe() <= quiet_s * (1 + tol):
            return clock() - t0, True
        if clock() - t0 >= max_s:
            return clock() - t0, False
        pause(0.005)


class _Probe:
    """Ten copies of :data:`PROBE_BYTES` between two CUDA events; buffers kept for the run
    (allocated once, so probing frees nothing).  ``quiet_s`` is the fastest probe seen so
    far, so a start under contention corrects itself at the first quiet probe."""

    def __init__(self) -> None:
        import torch
        self.src = torch.ones(PROBE_BYTES, dtype=torch.uint8, device="cuda")
        self.dst = torch.empty_like(self.src)
        for _ in range(6):
            self()

    def __call__(self) -> float:
        import torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            self.dst.copy_(self.src)
        e.record()
        e.synchronize()
        t = s.elapsed_time(e) / 1e3
        self.quiet_s = min(getattr(self, "quiet_s", t), t)
        return t


_PROBE: Optional[_Probe] = None


def settle(row: Optional[dict] = None) -> Tuple[float, bool]:
    """Release the allocator's cached memory, then wait until the GPU copies at its quiet
    speed again (:func:`wait_quiet`); recorded in ``row`` as ``settle_ms`` / ``settled``."""
    import torch
    global _PROBE
    torch.cuda.synchronize()
    if _PROBE is None:          # before the release below: its quiet time on a quiet GPU
        _PROBE = _Probe()
    torch.cuda.empty_cache()
    waited, quiet = wait_quiet(_PROBE, _PROBE.quiet_s)
    if row is not None:
        row["settle_ms"], row["settled"] = waited * 1e3, quiet
    return waited, quiet


def timed(fn: Callable[[], Any], reps: int, bench) -> Dict[str, float]:
    return {"device_s": device_time(fn, reps), "wall_s": bench(fn, reps=reps)[0]}


def interleaved_rounds(calls: Dict[str, Callable[[], Any]], rounds: int, reps: int, bench,
                       after: Optional[Callable[[str, Callable[[], Any]], None]] = None,
                       settle_each: bool = True) -> Dict[str, List[Dict[str, float]]]:
    """``rounds`` rounds of every call in ``calls``, the order reversed every other round (so
    neither variant always runs right after the other), each one :func:`settle`-d (unless
    ``settle_each`` is False: the caller settled once and releases nothing in between) and then
    :func:`timed` with ``reps`` calls; ``after(name, fn)``, when given, runs right after each
    timing (the fused-decode study's back-to-back clock).  Per name, the timings in round
    order."""
    meas: Dict[str, List[Dict[str, float]]] = {n: [] for n in calls}
    for r in range(rounds):
        for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            if settle_each:
                settle()
            meas[name].append(timed(calls[name], reps, bench))
            if after is not None:
                after(name, calls[name])
    return meas


def decode_tensors(B: int, Hq: int, Hkv: int, Skv: int, D: int):
    """Random bf16 decode inputs on the GPU, q ``(B, Hq, 1, D)`` and K, V ``(B, Hkv, Skv, D)``,
    with an fp16 ``out`` of q's shape (uninitialised); ``(q, k, v, out)``."""
    import torch
    q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(B, Hq, 1, D, dtype=torch.float16, device="cuda")
    return q, k, v, out


def rel(out, ref) -> float:
    import torch
    out, ref = out.float(), ref.float()
    if not bool(torch.isfinite(out).all()):
        return float("nan")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _row(part: str, **kw) -> Dict[str, Any]:
    return {"part": part, **kw}


#: rounds of the GEMM rows' ours / cuBLAS pair, the order alternating, medians reported:
#: session 12 (benchmarks/gpu_gemm_wall.py, H100): one pass per row, ours always first, read
#: 0.46x by wall where the next five rounds read 0.68-0.78x (4000x3000x1000, the suite's first
#: row), and a row's wall moved by 0.9-1.2x between rounds on host jitter alone
GEMM_ROUNDS = 3


def suite_gemm(results: List[dict], reps: int, bench, rounds: int = GEMM_ROUNDS) -> None:
    """The GEMM rows: each row's check against float32, one :func:`settle`, then ``rounds``
    rounds of ours and cuBLAS in alternating order (:func:`interleaved_rounds`, nothing
    released in between so no settle), each timed (device, wall) and its host time per call
    (:func:`gpu_timing.host_seconds`, 100 calls); the row keeps the medians and each round's
    values (``*_rounds``)."""
    import torch
    from kernels.nvidia.dispatch import choose_gemm, gemm
    torch.backends.cuda.matmul.allow_tf32 = False
    for M, N, K, dt in GEMM_SHAPES:
        row = _row("suite_gemm", M=M, N=N, K=K, dtype=dt)
        try:
            dtype = getattr(torch, TORCH_DT[dt])
            a = torch.randn(M, K, dtype=dtype, device="cuda")
            b = torch.randn(K, N, dtype=dtype, device="cuda")
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            row["choice"] = str(choose_gemm(a, b))
            gemm(a, b, out)
            ref = a.float() @ b.float() if M * N * K <= 2 ** 36 else torch.matmul(a, b)
            row["rel_err"] = rel(out, ref)
            flops = 2 * M * N * K
            settle(row)
            host: Dict[str, List[float]] = {"ours": [], "cublas": []}
            meas = interleaved_rounds(
                {"ours": lambda: gemm(a, b, out), "cublas": lambda: torch.matmul(a, b)},
                rounds, reps, bench, settle_each=False,
                after=lambda name, fn: host[name].append(host_seconds(fn, 100)))
            for name, ms in meas.items():
                for k in ("device_s", "wall_s"):
                    row[f"{name}_{k}_rounds"] = [m[k] for m in ms]
                    row[f"{name}_{k}"] = statistics.median(row[f"{name}_{k}_rounds"])
                row[f"{name}_host_s_rounds"] = host[name]
                row[f"{name}_host_s"] = statistics.median(host[name])
            ours, cub = ({k: row[f"{n}_{k}"] for k in ("device_s", "wall_s")}
                         for n in ("ours", "cublas"))
            row["tflops_device"] = flops / ours["device_s"] / 1e12
            row["ratio_device"] = cub["device_s"] / ours["device_s"]
            row["ratio_wall"] = cub["wall_s"] / ours["wall_s"]
            del a, b, out, ref
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:1000]
            traceback.print_exc()
        results.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()


def sdpa_times(q, k, v, causal: bool, reps: int, bench) -> Dict[str, Dict[str, float]]:
    """Device/wall time of each SDPA backend that runs (q, k, v) (GQA via enable_gqa)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    gqa = q.shape[1] != k.shape[1]
    out = {}
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel([be]):
                f = lambda: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=gqa)
                f()
                torch.cuda.synchronize()
                out[name] = timed(f, reps, bench)
        except Exception as e:
            print(f"sdpa {name}: unavailable for {tuple(q.shape)}/{tuple(k.shape)}: "
                  f"{type(e).__name__}: {str(e)[:160]}", flush=True)
    return out


def attention_ref(q, k, v, causal: bool):
    """float32 softmax(q k^T / sqrt(d) [top-left causal]) v, GQA by repeating K/V heads, in
    query chunks (memory)."""
    import torch
    g = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(g, 1)
    vf = v.float().repeat_interleave(g, 1)
    outs = []
    for s0 in range(0, q.shape[2], 1024):
        qs = q[:, :, s0:s0 + 1024].float()
        s = qs @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            r = torch.arange(s0, s0 + qs.shape[2], device=q.device)[:, None]
            c = torch.arange(k.shape[2], device=q.device)[None, :]
            s = s.masked_fill(c > r, float("-inf"))
        outs.append(s.softmax(-1) @ vf)
    return torch.cat(outs, 2)


def suite_prefill(results: List[dict], reps: int, bench) -> None:
    import torch
    from kernels.nvidia.dispatch import flash_attention
    for B, Hq, Hkv, Sq, Skv, D, causal in PREFILL_SHAPES:
        row = _row("suite_prefill", B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Skv=Skv, D=D, causal=causal)
        try:
            q = torch.randn(B, Hq, Sq, D, dtype=torch.bfloat16, device="cuda")
            k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
            v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
            out = torch.full_like(q, float("nan"))
            flash_attention(q, k, v, causal=causal, out=out)
            bs = min(B, 2)
            row["rel_err"] = rel(out[:bs], attention_ref(q[:bs], k[:bs], v[:bs], causal))
            # causal (top-left) keeps about half the score matrix when Sq == Skv
            pairs = Sq * Skv if not causal else sum(min(Skv, r + 1) for r in range(Sq))
            flops = 4 * B * Hq * pairs * D
            settle(row)
            ours = timed(lambda: flash_attention(q, k, v, causal=causal, out=out), reps, bench)
            row.update({f"ours_{k_}": v_ for k_, v_ in ours.items()})
            row["tflops_device"] = flops / ours["device_s"] / 1e12
            sd = sdpa_times(q, k, v, causal, reps, bench)
            for name, t in sd.items():
                row[f"sdpa_{name}_device_s"] = t["device_s"]
                row[f"sdpa_{name}_wall_s"] = t["wall_s"]
            if sd:
                best = min(sd, key=lambda n: sd[n]["device_s"])
                row["sdpa_best"] = best
                row["ratio_device"] = sd[best]["device_s"] / ours["device_s"]
                row["ratio_wall"] = min(t["wall_s"] for t in sd.values()) / ours["wall_s"]
            del q, k, v, out
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:1000]
            traceback.print_exc()
        results.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()


def suite_decode(results: List[dict], reps: int, bench, copy_gbps: float) -> None:
    import torch
    from kernels.nvidia.dispatch import choose_decode, decode_attention
    for B, Hq, Hkv, Skv, D in DECODE_SHAPES:
        row = _row("suite_decode", B=B, Hq=Hq, Hkv=Hkv, Skv=Skv, D=D)
        try:
            q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device="cuda")
            k = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
            v = torch.randn(B, Hkv, Skv, D, dtype=torch.bfloat16, device="cuda")
            out = torch.full((B, Hq, 1, D), float("nan"), dtype=torch.float16, device="cuda")
            row["choice"] = str(choose_decode(q, k))
            decode_attention(q, k, v, out=out)
            idx = torch.randperm(B, device="cuda")[:64]
            g = Hq // Hkv
            kf = k[idx].float().repeat_interleave(g, 1)
            vf = v[idx].float().repeat_interleave(g, 1)
            s = (q[idx].float() @ kf.transpose(-1, -2)) / math.sqrt(D)
            row["rel_err"] = rel(out[idx], s.softmax(-1) @ vf)
            row["all_finite"] = bool(torch.isfinite(out).all())
            del kf, vf, s
            nbytes = (q.numel() + k.numel() + v.numel() + out.numel()) * 2
            settle(row)
            ours = timed(lambda: decode_attention(q, k, v, out=out), reps, bench)
            row["copy_adjacent_GBps"] = copy_device_gbps(reps)
            row.update({f"ours_{k_}": v_ for k_, v_ in ours.items()}, bytes=nbytes)
            row["GBps_device"] = nbytes / ours["device_s"] / 1e9
            row["of_copy_device"] = row["GBps_device"] / copy_gbps
            row["of_copy_wall"] = nbytes / ours["wall_s"] / 1e9 / copy_gbps
            row["of_copy_adjacent"] = row["GBps_device"] / row["copy_adjacent_GBps"]
            del q, k, v, out
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:1000]
            traceback.print_exc()
        results.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()


def copy_device_gbps(reps: int) -> float:
    """A 1 GiB device-to-device copy's read + write bandwidth, by the profiler's device time
    (the same clock as the decode rows).  Its buffers are ``del``'d, not released: a release
    would slow whatever is timed next (module docstring, settling)."""
    import torch
    n = 2 ** 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = device_time(lambda: dst.copy_(src), reps)
    del src, dst
    return 2 * n / t / 1e9


def _host(r: dict) -> str:
    """``ours/cuBLAS`` host microseconds per call of a GEMM row ('-' for rows without)."""
    if "ours_host_s" not in r:
        return "-"
    return f"{r['ours_host_s'] * 1e6:.0f}/{r['cublas_host_s'] * 1e6:.0f}"


def _geo(xs: List[float]) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def suite_table(results: List[dict], copy_gbps: float) -> str:
    L = [f"suite: device copy {copy_gbps:.0f} GB/s (profiler device time, 1 GiB); times are "
         "medians; 'dev' excludes host launch overhead, 'wall' includes it; every row timed "
         "after settle() (released memory, GPU back to its quiet copy speed)"]
    unsettled = [r for r in results if r.get("settled") is False]
    if unsettled:
        L.append(f"WARNING: {len(unsettled)} row(s) timed before the GPU was quiet again "
                 f"(settle gave up after {SETTLE_MAX_S} s): their ratios may read low")
    g = [r for r in results if r["part"] == "suite_gemm"]
    if g:
        L += ["", f"GEMM rows: medians of {len(g[0].get('ours_wall_s_rounds', [0]))} rounds, "
                  "ours / cuBLAS alternating; 'host' = host us per call (ours / cuBLAS): where "
                  "it nears the device time the wall of one call is host-bound",
              f"{'GEMM':<22}{'dt':<5}{'ours us':>9}{'cuBLAS':>9}{'dev x':>7}{'wall x':>8}"
              f"{'TF/s':>7}{'rel err':>9}{'host':>11}  choice"]
        for r in g:
            name = f"{r['M']}x{r['N']}x{r['K']}"
            if "error" in r:
                L.append(f"{name:<22}{r['dtype']:<5} ERROR {r['error'][:80]}")
                continue
            L.append(f"{name:<22}{r['dtype']:<5}{r['ours_device_s'] * 1e6:>9.1f}"
                     f"{r['cublas_device_s'] * 1e6:>9.1f}{r['ratio_device']:>7.2f}"
                     f"{r['ratio_wall']:>8.2f}{r['tflops_device']:>7.0f}{r['rel_err']:>9.1e}"
                     f"{_host(r):>11}  {r['choice'].split(':')[0]}")
        L.append(f"{'geo-mean':<27}{'':>18}{_geo([r.get('ratio_device') for r in g]):>7.2f}"
                 f"{_geo([r.get('ratio_wall') for r in g]):>8.2f}")
    p = [r for r in results if r["part"] == "suite_prefill"]
    if p:
        L += ["", f"{'prefill B H/Hkv Sq/Skv D c':<30}{'ours us':>9}{'SDPA best':>16}{'dev x':>7}"
                  f"{'wall x':>8}{'TF/s':>7}{'rel err':>9}"]
        for r in p:
            name = (f"B{r['B']} H{r['Hq']}/{r['Hkv']} {r['Sq']}/{r['Skv']} d{r['D']}"
                    f"{' c' if r['causal'] else ''}")
            if "error" in r:
                L.append(f"{name:<30} ERROR {r['error'][:80]}")
                continue
            best = r.get("sdpa_best")
            bt = f"{best} {r[f'sdpa_{best}_device_s'] * 1e6:.0f}" if best else "n/a"
            L.append(f"{name:<30}{r['ours_device_s'] * 1e6:>9.0f}{bt:>16}"
                     f"{r.get('ratio_device', float('nan')):>7.2f}"
                     f"{r.get('ratio_wall', float('nan')):>8.2f}{r['tflops_device']:>7.0f}"
                     f"{r['rel_err']:>9.1e}")
    d = [r for r in results if r["part"] == "suite_decode"]
    if d:
        L += ["", f"{'decode B H/Hkv Skv D':<28}{'MB':>8}{'ours us':>9}{'GB/s':>7}{'of copy':>8}"
                  f"{'adj':>6}{'wall':>6}{'rel err':>9}  choice  ('adj': of the copy re-timed "
                  "right after the row)"]
        for r in d:
            name = f"B{r['B']} H{r['Hq']}/{r['Hkv']} {r['Skv']} d{r['D']}"
            if "error" in r:
                L.append(f"{name:<28} ERROR {r['error'][:80]}")
                continue
            L.append(f"{name:<28}{r['bytes'] / 1e6:>8.0f}{r['ours_device_s'] * 1e6:>9.0f}"
                     f"{r['GBps_device']:>7.0f}{r['of_copy_device']:>8.2f}"
                     f"{r.get('of_copy_adjacent', float('nan')):>6.2f}{r['of_copy_wall']:>6.2f}{r['rel_err']:>9.1e}  "
                     f"{r['choice'].split('(')[0].strip()[:60]}")
    return "\n".join(L)


def run_suite(results: List[dict], reps: int, bench, parts=("gemm", "prefill", "decode"),
              gemm_rounds: Optional[int] = None) -> str:
    """Run the suite's parts, append their rows to ``results``; returns the table
    (``gemm_rounds``: :func:`suite_gemm`'s rounds, default :data:`GEMM_ROUNDS`)."""
    copy = copy_device_gbps(reps)
    results.append({"part": "suite_copy", "GBps_device": copy})
    if "gemm" in parts:
        suite_gemm(results, reps, bench, gemm_rounds or GEMM_ROUNDS)
    if "prefill" in parts:
        suite_prefill(results, reps, bench)
    if "decode" in parts:
        suite_decode(results, reps, bench, copy)
    return suite_table(results, copy)
