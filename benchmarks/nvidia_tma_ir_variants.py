"""Diagnostic only (issue 20 item 1): text variants of the IR-built TMA GEMM's printed CUDA,
to measure which difference from the template costs time before changing the IR / printer.

Each variant is the printed text of :func:`kernels.nvidia.wgmma_tma_ir.build_tma_gemm_ir`
rewritten by plain string edits; none is verified and none is dispatched.  The edits target the
text as printed before commit c1569fc (generic-pointer addresses, ``g % S``); the IR has had
both changes since, so on today's text they find little to edit:

* ``ir``: the printed text as it is;
* ``hoist``: every shared address as a 32-bit base computed once (``lg_smem_u32`` of each array
  and mbarrier array at the top) plus ``2 * offset`` / ``8 * index``, descriptors from it;
* ``count``: ``hoist`` with the ring stage / phase / previous stage carried as incremented
  counters (the template's form) instead of ``g % S`` and ``(g / S) % 2``.

    python3 benchmarks/nvidia_tma_ir_variants.py --out variants.json
"""

from __future__ import annotations

import re
from typing import Dict, List

DESC32 = ("LG_DEV lg_u64 lg_gmma_desc32(lg_u64 bits, lg_u32 base, int start) {\n"
          "  return bits | (lg_u64)(((base & 0x3FFFF) >> 4) + ((lg_u32)start >> 3));\n}\n")


def hoist(src: str) -> str:
    lines = src.split("\n")
    out: List[str] = []
    arrays = re.findall(r"lg_u16\* const (s[A-Z]) = reinterpret_cast", src)
    bars = re.findall(r"unsigned long long lg_bar_(\w+)\[\d+\];", src)
    for ln in lines:
        out.append(ln)
        if f"unsigned long long lg_bar_{bars[-1]}[" in ln:
            out.append("  const lg_u32 " + ", ".join(f"lg_{a} = lg_smem_u32({a})" for a in arrays)
                       + ";")
            out.append("  const lg_u32 " + ", ".join(f"lg_bar0_{b} = lg_smem_u32(lg_bar_{b})"
                                                      for b in bars) + ";")
    s = "\n".join(out)
    s = re.sub(r"lg_smem_u32\(&lg_bar_(\w+)\[([^\]]*)\]\)", r"(lg_bar0_\1 + 8u * (lg_u32)(\2))", s)
    s = re.sub(r"lg_smem_u32\((s[A-Z]) \+ \(([^()]*)\)\)", r"(lg_\1 + 2u * (lg_u32)(\2))", s)
    s = re.sub(r"lg_gmma_desc\((0x[0-9a-f]+ull), (s[A-Z]), ", r"lg_gmma_desc32(\1, lg_\2, ", s)
    s = s.replace("for (int i = 0; i < 128; ++i) acc[i] = 0.f;",
                  "#pragma unroll\n      for (int i = 0; i < 128; ++i) acc[i] = 0.f;")
    i = s.index('extern "C" __global__')
    return s[:i] + DESC32 + s[i:]


def count(src: str, stages: int = 3) -> str:
    s = hoist(src)
    lines = s.split("\n")
    out: List[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.strip().startswith("for (int iu = 0;"):
            ind = ln[:len(ln) - len(ln.lstrip())]
            out.append(f"{ind}int lg_st = 0, lg_ph = 0, lg_prev = 0;")
        if ln.strip().startswith("for (int kk = 0;"):
            ind = ln[:len(ln) - len(ln.lstrip())]
            j = i + 1
            while lines[j] != ind + "}":
                j += 1
            body = lines[i + 1:j]
            consumer = any("lg_wgmma" in b for b in body)
            out.append(ln)
            for b in body:
                b = b.replace(f"const int st = ((g) % {stages});", "const int st = lg_st;")
                b = b.replace(f"const int ph = ((((g) / {stages})) % 2);", "const int ph = lg_ph;")
                b = re.sub(r"\(lg_u32\)\(\(\(g \+ \d+\) % \d+\)\)", "(lg_u32)(lg_prev)", b)
                out.append(b)
            if consumer:
                out.append(f"{ind}  lg_prev = st;")
            out.append(f"{ind}  if (++lg_st == {stages}) {{ lg_st = 0; lg_ph ^= 1; }}")
            out.append(lines[j])
            i = j + 1
            continue
        ln = re.sub(r"\(lg_u32\)\(\(\(KT\*iu \+ KT \+ \d+\) % \d+\)\)", "(lg_u32)(lg_prev)", ln)
        out.append(ln)
        i += 1
    return "\n".join(out)


VARIANTS = {"hoist": hoist, "count": count}


def variants(cfg) -> Dict[str, str]:
    from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
    from kernels.printer.cuda import emit_cuda
    src = emit_cuda(build_tma_gemm_ir(cfg))
    return {"ir": src, **{k: f(src) for k, f in VARIANTS.items()}}


def _kernel(cfg, source: str):
    """An :class:`~kernels.nvidia.wgmma_tma_ir.IrTmaGemm` running ``source`` (a text variant:
    not verified, diagnostic only)."""
    from kernels.nvidia.builder import CompiledKernel
    from kernels.nvidia.tma import DeviceMaps
    from kernels.nvidia.wgmma_tma import plan_tma_gemm
    from kernels.nvidia.wgmma_tma_ir import IrTmaGemm, build_tma_gemm_ir
    g = IrTmaGemm.__new__(IrTmaGemm)
    g.ir = build_tma_gemm_ir(cfg)
    g.plan, g.gemm_cfg = plan_tma_gemm(cfg), cfg
    CompiledKernel.__init__(g, cfg, source, "auto")
    g.kernel_name, g._maps = g.ir.name, DeviceMaps()
    return g


def main() -> None:
    import argparse
    import json
    import statistics
    import torch
    from gpu_timing import write_rows_json
    from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for dtype, m, n, k in (("bf16", 4096, 4096, 4096), ("bf16", 8192, 8192, 8192),
                           ("f16", 4096, 14336, 4096)):
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        cfg = TmaGemmConfig(dtype=dtype)
        ks = {name: _kernel(cfg, src) for name, src in variants(cfg).items()}
        ks["template"] = TmaGemm(cfg)
        a = torch.randn((m, k), device="cuda").to(dt)
        b = torch.randn((k, n), device="cuda").to(dt)
        outs = {nm: torch.empty((m, n), dtype=dt, device="cuda") for nm in ks}
        for nm, g in ks.items():
            g(a, b, outs[nm])
        torch.cuda.synchronize()
        times: Dict[str, List[float]] = {nm: [] for nm in ks}
        names = list(ks)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for nm in order:
                g, o = ks[nm], outs[nm]
                for _ in range(3):
                    g(a, b, o)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(10):
                    g(a, b, o)
                e.record()
                torch.cuda.synchronize()
                times[nm].append(s.elapsed_time(e) / 10)
        med = {nm: statistics.median(v) for nm, v in times.items()}
        row = {"dtype": dtype, "m,n,k": [m, n, k],
               "ms": med, "tflops": {nm: 2 * m * n * k / t / 1e9 for nm, t in med.items()},
               "over_template": {nm: med["template"] / t for nm, t in med.items()},
               "bitwise_equal_template": {nm: bool(torch.equal(outs[nm], outs["template"]))
                                          for nm in ks},
               "samples_ms": times}
        rows.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "samples_ms"}), flush=True)
    write_rows_json(args.out, rows)


if __name__ == "__main__":
    main()
