"""The A/B scaffolding the IR-versus-template benchmark scripts share: the runtime-size GEMMs
(nvidia_wgmma_rt_ir.py, nvidia_wgmma_rt_split_ir.py; nvidia_tma_ir_speed.py its first build and
rounds) and the prefills (nvidia_ir_flash.py, nvidia_ir_wgmma_flash.py,
nvidia_ir_wgmma_flash_d128.py).  One copy of each step, so every
script interleaves, reduces and prints the same way:

* :func:`rotated_rounds`: ``rounds`` rounds of one measurement per name, round ``r`` starting
  with the ``r mod n``-th name (two names: the order reversed every other round), so no kernel
  always runs right after the same other one; the samples per name in round order;
* :func:`medians` / :func:`print_row`: the median per name, and one result row as a JSON line
  without its raw samples;
* :func:`gemm_operands` / :func:`first_build` / :func:`gemm_outputs`: a GEMM shape's seeded
  operands (A's rows padded to ``lda = K + pad``), the IR kernel built (and verified) and
  compiled once per configuration with those times, and both kernels bound to NaN-poisoned
  outputs, run once, with the IR output's error against the float32 reference;
* :func:`prefill_rounds`: a prefill shape's kernels each writing its own output, warmed up
  once, timed in rotated rounds of CUDA-event means (``event_round_us``, 10 calls), with each
  output's error against a float32 torch reference on batch 0 (GQA: K / V heads repeated);
* :func:`prefill_ab_fields`: the comparison fields of one such row (medians, the IR's speed,
  bitwise equality and errors against each other kernel), the warp-specialised IR scripts'
  (nvidia_ws_ir_serial.py, nvidia_ws_ir_cp.py, nvidia_ws_ir_persist.py) one row format.

torch is imported inside the functions: the scripts' ``--help`` works without a GPU.
"""
from __future__ import annotations

import json
import statistics
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple, TypeVar

from gpu_timing import event_round_us

__all__ = ["rotated_rounds", "medians", "print_row", "gemm_operands", "first_build",
           "gemm_outputs", "prefill_rounds", "prefill_ab_fields"]

T = TypeVar("T")


def rotated_rounds(names: Sequence[str], rounds: int,
                   measure: Callable[[str], T]) -> Dict[str, List[T]]:
    """``measure(name)`` for every name in each of ``rounds`` rounds, round ``r`` in the order
    ``names[r % n:] + names[:r % n]``; per name, its samples in round order."""
    names = list(names)
    samples: Dict[str, List[T]] = {n: [] for n in names}
    for r in range(rounds):
        s = r % len(names)
        for n in names[s:] + names[:s]:
            samples[n].append(measure(n))
    return samples


def medians(samples: Dict[str, List[float]]) -> Dict[str, float]:
    """The median of each name's samples."""
    return {n: statistics.median(v) for n, v in samples.items()}


def print_row(row: Dict[str, Any], raw: str) -> None:
    """``row`` as one JSON line without its raw samples (the key ``raw``), flushed."""
    print(json.dumps({k: v for k, v in row.items() if k != raw}), flush=True)


def gemm_operands(dtype: str, m: int, n: int, k: int, b_major: str, pad: int,
                  device: str = "cuda") -> Tuple[Any, Any, Any]:
    """``(torch dtype, A, B)`` of one GEMM shape, seeded by ``m + n + k``: A ``(m, k)`` with
    leading dimension ``k + pad`` (an odd pad: rows not 16-byte aligned), B ``(k, n)`` for an
    N-major B, else ``(n, k)``."""
    import torch
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device=device).manual_seed(m + n + k)
    a = torch.randn((m, k + pad), device=device, generator=g).to(dt)[:, :k]
    b = torch.randn((k, n) if b_major == "n" else (n, k), device=device, generator=g).to(dt)
    return dt, a, b


def first_build(built: Dict[Any, Tuple[Any, Any]], cfg: Any, make_ir: Callable[[Any], Any],
                make_template: Callable[[Any], Any]) -> Tuple[Any, Any, Dict[str, float]]:
    """``(ir, template, first)`` for ``cfg``, each built once per configuration (``built``
    caches them): at the first, ``first`` holds the seconds of ``make_ir(cfg)`` (build and
    verify, ``build_verify_s``) and of its module's compile (``compile_s``); later, empty."""
    first: Dict[str, float] = {}
    if cfg not in built:
        t0 = time.perf_counter()
        ir = make_ir(cfg)
        first["build_verify_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ir.module
        first["compile_s"] = time.perf_counter() - t0
        built[cfg] = (ir, make_template(cfg))
    ir, tpl = built[cfg]
    return ir, tpl, first


def gemm_outputs(ir: Any, tpl: Any, a: Any, b: Any, b_major: str, *bind: Any
                 ) -> Tuple[Any, Any, Dict[str, Callable[[], Any]], float]:
    """Both kernels bound (``kernel.bound(a, b, out, *bind)``) to their own NaN-poisoned
    output, run once and synchronized: ``(o_ir, o_template, calls, rel_err)`` with ``calls``
    ``{"ir", "template"}`` (one launch each) and the IR output's relative Frobenius error
    against the float32 product."""
    import torch
    m, n = a.shape[0], (b.shape[1] if b_major == "n" else b.shape[0])
    o_ir = torch.full((m, n), float("nan"), dtype=a.dtype, device=a.device)
    o_tp = torch.full((m, n), float("nan"), dtype=a.dtype, device=a.device)
    run_ir, run_tp = ir.bound(a, b, o_ir, *bind), tpl.bound(a, b, o_tp, *bind)
    run_ir(a, b, o_ir)
    run_tp(a, b, o_tp)
    torch.cuda.synchronize()
    ref = a.float() @ (b.float() if b_major == "n" else b.float().T)
    err = ((o_ir.float() - ref).norm() / ref.norm()).item()
    calls = {"ir": lambda: run_ir(a, b, o_ir), "template": lambda: run_tp(a, b, o_tp)}
    return o_ir, o_tp, calls, err


def prefill_rounds(kinds: Dict[str, Any], q: Any, k: Any, v: Any, causal: bool, rounds: int,
                   poison: bool = False, calls_per_round: int = 10
                   ) -> Tuple[Dict[str, Any], Dict[str, List[float]], Dict[str, float],
                              Dict[str, float]]:
    """Each prefill kernel of ``kinds`` called ``f(q, k, v, out=its own output)`` (outputs
    uninitialised, or NaN with ``poison``), warmed up once, then timed in
    :func:`rotated_rounds` of :func:`~gpu_timing.event_round_us` (``calls_per_round``
    calls): ``(outs, rounds_us, median_us, err)``, ``err`` each output's max abs error on batch
    0 against float32 ``scaled_dot_product_attention`` (K / V heads repeated for GQA)."""
    import torch
    outs = {n: (torch.full_like(q, float("nan")) if poison else torch.empty_like(q))
            for n in kinds}
    calls = {n: (lambda f=f, o=outs[n]: f(q, k, v, out=o)) for n, f in kinds.items()}
    for f in calls.values():
        f()
    torch.cuda.synchronize()
    ts = rotated_rounds(list(calls), rounds,
                        lambda n: event_round_us(calls[n], calls_per_round))
    med = medians(ts)
    g = q.shape[1] // k.shape[1]
    ref = torch.nn.functional.scaled_dot_product_attention(
        q[:1].float(), k[:1].float().repeat_interleave(g, 1),
        v[:1].float().repeat_interleave(g, 1), is_causal=causal)
    err = {n: (o[:1].float() - ref).abs().max().item() for n, o in outs.items()}
    return outs, ts, med, err


def prefill_ab_fields(outs: Dict[str, Any], ts: Dict[str, List[float]],
                      med: Dict[str, float], err: Dict[str, float]) -> Dict[str, Any]:
    """The comparison fields of one row of :func:`prefill_rounds`'s results, ``"ir"`` against
    every other kernel: ``{name}_us`` (medians), ``ir_speed_vs_{name}`` (its time over the
    IR's), ``bitwise_equal`` / ``max_abs_ir_vs_template`` against ``"template"`` and
    ``bitwise_equal_{name}`` against the others, ``ir_nan``, ``max_abs_{name}_vs_f32_ref_b0``
    and the raw ``rounds_us``."""
    import torch
    row: Dict[str, Any] = {f"{n}_us": round(t, 1) for n, t in med.items()}
    others = [n for n in outs if n != "ir"]
    row.update({f"ir_speed_vs_{n}": round(med[n] / med["ir"], 3) for n in others})
    for n in others:
        same = bool(torch.equal(outs["ir"], outs[n]))
        if n == "template":
            row["bitwise_equal"] = same
            row["max_abs_ir_vs_template"] = (outs["ir"].float() - outs[n].float()) \
                .abs().max().item()
        else:
            row[f"bitwise_equal_{n}"] = same
    row["ir_nan"] = bool(outs["ir"].isnan().any())
    row.update({f"max_abs_{n}_vs_f32_ref_b0": e for n, e in err.items()})
    row["rounds_us"] = ts
    return row
