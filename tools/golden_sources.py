"""Regenerate ``tests/fixtures/golden_sources.json``: the sha256 of every generated kernel source
over the configuration matrix the tests use.

    PYTHONPATH=. python tools/golden_sources.py          # rewrite the JSON
    PYTHONPATH=. python tools/golden_sources.py --check  # exit 1 and list what differs

``tests/test_golden_sources.py`` compares against the JSON, so a refactor (moving modules,
splitting files, renaming private helpers) that changes a single byte of a generated source
fails.  A deliberate change of a generated source regenerates the JSON in the same commit, and
the commit message says which sources changed and why.

Nothing here compiles: the AMD kernels are built with ``verify=False`` (the gate does not
change the IR or the printed text; it only checks them), so the whole matrix takes seconds.
The imports use the documented (old) module paths on purpose: they must keep working.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, Tuple

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "fixtures" / "golden_sources.json"


def _load(path: Path, name: str = ""):
    """A module that is not in a package (a test helper, an example), loaded by its path."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_gemm_cases = _load(ROOT / "tests" / "_gemm_cases.py")


_INTERLEAVED = dict(block_m=224, block_n=256, block_k=32, waves_m=2, waves_n=2, stages=1,
                   mfma="16x16x16", schedule="interleaved", waves_per_eu=1)


def _amd_gemm() -> Iterator[Tuple[str, Callable[[], str]]]:
    import argparse as ap

    from kernels.gemm import build_gemm
    from kernels.gemm_plan import GemmConfig
    from kernels.amd.gemm_select import select_gemm
    from kernels.registry import get

    cfgs = {
        # tests/test_gemm_compile.py, test_gemm_plan.py, test_gemm_gate.py, examples/04
        "compile-nn-f16-32x32x8": GemmConfig(512, 512, 512),
        "compile-tn-bf16-16x16x16-f32out": GemmConfig(512, 256, 256, dtype="bf16",
                                                      out_dtype="f32", a_major="col",
                                                      mfma="16x16x16"),
        "plan-4096": GemmConfig(4096, 4096, 4096),
        "plan-4096-bk64-1stage": GemmConfig(4096, 4096, 4096, block_k=64, stages=1),
        "plan-512-64x64": GemmConfig(512, 512, 512, block_m=64, block_n=64),
        "plan-512-colcol-16x16": GemmConfig(512, 512, 512, b_major="col", a_major="col",
                                            mfma="16x16x16"),
        "plan-512-bf16-bk64": GemmConfig(512, 512, 512, dtype="bf16", block_k=64, stages=1,
                                         block_n=64, waves_n=1),
        "gate-200x136x72": GemmConfig(200, 136, 72),
        "gate-150x140x72-64x64": GemmConfig(150, 140, 72, block_m=64, block_n=64),
        "example04-4096-preshuffled": GemmConfig(4096, 4096, 4096, dtype="f16", b_major="col"),
        # tests/test_gemm_emulate.py, one-stage cases
        "emu-NN-bk64-1stage": GemmConfig(150, 140, 136, block_k=64, stages=1),
        "emu-NT-bk64-1stage-bf16": GemmConfig(130, 72, 100, dtype="bf16", out_dtype="f32",
                                              b_major="col", block_k=64, stages=1),
        "emu-NN-bk64-2stage-no-waits": GemmConfig(72, 200, 130, block_k=64,
                                                  explicit_waits=False),
        "emu-NN-bk64-1stage-read-ahead": GemmConfig(100, 90, 140, block_k=64, stages=1,
                                                    read_ahead=1),
        "emu-256-bk64-1stage": GemmConfig(256, 256, 256, block_k=64, stages=1),
        # fp8 (docs/PERFORMANCE.md's 4096^3 row, tests/test_gemm_fp8.py)
        "fp8-4096-nt-bk64": GemmConfig(4096, 4096, 4096, dtype="fp8", b_major="col",
                                       block_k=64),
        "bf8-nn-16x16x32-f32out": GemmConfig(100, 72, 200, dtype="bf8", out_dtype="f32",
                                             block_m=64, block_n=64, block_k=64,
                                             mfma="16x16x32"),
        "fp8-nt-rowcol-scales": GemmConfig(200, 136, 200, dtype="fp8", b_major="col",
                                           block_k=64, scales="rowcol"),
        # the pipelined schedule (issue 15) as the tile choice picks it
        "default-4096-f16": select_gemm(4096, 4096, 4096).config,
        "default-4096-bf16": select_gemm(4096, 4096, 4096, dtype="bf16").config,
        "default-4000x3000x1000": select_gemm(4000, 3000, 1000).config,
        "default-16x4096x4096": select_gemm(16, 4096, 4096).config,
        "default-4096x14336x4096": select_gemm(4096, 14336, 4096).config,
        # the fp8 default (NN, per-tensor scales, bf16 C; B transposed with v_perm_b32)
        "default-4096-fp8": select_gemm(4096, 4096, 4096, dtype="fp8").config,
        "pipelined-128x128x32-2stage": GemmConfig(4096, 4096, 4096, schedule="pipelined"),
        # 64x128x64, the choice at 2048^3 (Triton's tile there); the 224-row quantisation tile
        # (the 4096^3 default until the 128x128 loop reached 100 % busy by the model)
        "default-2048": select_gemm(2048, 2048, 2048).config,
        "tile-224x128x32-4096": GemmConfig(4096, 4096, 4096, block_m=224, block_n=128,
                                           block_k=32, waves_m=1, waves_n=4, stages=1,
                                           schedule="pipelined", waves_per_eu=2),
        # the interleaved schedule (one wave per SIMD; tests/test_gemm_interleaved.py): every
        # edge ragged (branch-free buffer loads), and the fp8 twin
        "interleaved-ragged-300x280x136": GemmConfig(300, 280, 136, **_INTERLEAVED),
        "interleaved-fp8-300x256x200": GemmConfig(300, 256, 200, dtype="fp8",
                                                  **{**_INTERLEAVED, "block_k": 64,
                                                     "mfma": "16x16x32"}),
    }
    for name, cfg in cfgs.items():
        yield f"amd/gemm/{name}", lambda cfg=cfg: build_gemm(cfg, verify=False).source
    # preshuffled B (kernels/amd/gemm_preshuffle.py): tests/test_gemm_preshuffle.py's cases,
    # the 4096^3 kernels of docs/PERFORMANCE.md and examples/04's fragment-order step
    from kernels.amd.gemm_preshuffle import build_gemm_preshuffled
    ps = {
        "f16-32x32x8": GemmConfig(128, 128, 96),
        "bf16-16x16x16-f32out": GemmConfig(64, 96, 96, dtype="bf16", out_dtype="f32",
                                           block_m=64, block_n=64, mfma="16x16x16"),
        "ragged-f16": GemmConfig(37, 100, 70, block_m=64, block_n=64, mfma="16x16x16"),
        "ragged-bf16-32x32": GemmConfig(130, 72, 40, dtype="bf16"),
        "colA-tiny-k": GemmConfig(96, 64, 24, a_major="col", block_m=64, block_n=64,
                                  mfma="16x16x16"),
        "k-block-predicated": GemmConfig(64, 48, 70, block_m=64, block_n=64, block_k=64,
                                         mfma="16x16x16"),
        "4096-f16": GemmConfig(4096, 4096, 4096),
        "4096-bf16": GemmConfig(4096, 4096, 4096, dtype="bf16"),
        # fp8 with preshuffled B: the tile choice's 4096^3 kernel and its form on a ragged
        # problem (tests/test_gemm_preshuffle.py's FP8_CASES)
        "default-4096-fp8": select_gemm(4096, 4096, 4096, dtype="fp8",
                                        b_layout="preshuffled").config,
        "fp8-224-ragged": GemmConfig(300, 136, 264, dtype="fp8", block_m=224, block_n=128,
                                     block_k=64, waves_m=1, waves_n=4, schedule="pipelined",
                                     waves_per_eu=2),
        "bf8-16x16x32-rowcol": GemmConfig(48, 80, 200, dtype="bf8", block_m=32, block_n=64,
                                          block_k=128, waves_m=1, waves_n=4, mfma="16x16x32",
                                          scales="rowcol", out_dtype="f32"),
    }
    for name, cfg in ps.items():
        yield (f"amd/gemm-preshuffled/{name}",
               lambda cfg=cfg: build_gemm_preshuffled(cfg, verify=False).source)
    # tests/test_gemm_emulate.py's CASES (tests/_gemm_cases.py), through the CLI entry
    base, cases = _gemm_cases.BASE, _gemm_cases.CASES
    entry = get("gemm")
    for name, opts in cases.items():
        def gen(opts=opts):
            return build_gemm(entry.config(ap.Namespace(**{**base, **opts})),
                              verify=False).source
        yield f"amd/gemm-cli/{name}", gen


def _amd_attention() -> Iterator[Tuple[str, Callable[[], str]]]:
    from kernels.attention_plan import AttnConfig
    from kernels.decode import DecodeConfig, build_decode
    from kernels.decode_splitkv import build_splitkv
    from kernels.flash_attention import build_attention

    for d in (64, 128, 256):
        for dtype, out in (("f16", None), ("bf16", None), ("bf16", "f16")):
            for causal in (False, True):
                cfg = AttnConfig(head_dim=d, dtype=dtype, out_dtype=out, causal=causal)
                yield (f"amd/prefill/d{d}-{dtype}-{out or dtype}{'-causal' if causal else ''}",
                       lambda cfg=cfg: build_attention(cfg, verify=False).source)
    # explicit configurations (lds_stages=2: the double-buffered form, the default before the
    # one-stage default of issue 16, so these hashes did not change with it)
    explicit = {"d64-waves_per_eu0": dict(head_dim=64, waves_per_eu=0, lds_stages=2),
                "d128-block_n32": dict(head_dim=128, block_n=32, lds_stages=2),
                "d128-bf16-lds_stages2": dict(head_dim=128, dtype="bf16", lds_stages=2),
                "d128-bf16-causal-lds_stages2": dict(head_dim=128, dtype="bf16", causal=True,
                                                     lds_stages=2),
                "d128-block_n32-lds_stages1": dict(head_dim=128, block_n=32, lds_stages=1),
                "d256-lds_stages1": dict(head_dim=256, lds_stages=1)}
    for name, kw in explicit.items():
        yield (f"amd/prefill/{name}",
               lambda kw=kw: build_attention(AttnConfig(**kw), verify=False).source)
    # the ping-pong form (kernels/amd/flash_attention_pingpong.py, head_dim 128)
    from kernels.amd.flash_attention_pingpong import build_attention_pingpong
    for causal in (False, True):
        cfg = AttnConfig(head_dim=128, dtype="bf16", causal=causal, pingpong=True)
        yield (f"amd/prefill/d128-bf16-pingpong{'-causal' if causal else ''}",
               lambda cfg=cfg: build_attention_pingpong(cfg, verify=False).source)
    for d in (64, 128, 256):
        for dtype, out in (("bf16", "f16"), ("f16", "f16"), ("bf16", "bf16")):
            cfg = DecodeConfig(head_dim=d, dtype=dtype, out_dtype=out)
            yield (f"amd/decode/d{d}-{dtype}-{out}",
                   lambda cfg=cfg: build_decode(cfg, verify=False).source)
            yield (f"amd/splitkv/d{d}-{dtype}-{out}",
                   lambda cfg=cfg: build_splitkv(cfg, verify=False).source)
    for kps, threads in ((1, 64), (4, 128), (16, 256)):
        cfg = DecodeConfig(head_dim=128, keys_per_step=kps, threads=threads)
        yield (f"amd/decode/d128-kps{kps}-t{threads}",
               lambda cfg=cfg: build_decode(cfg, verify=False).source)


def _nvidia() -> Iterator[Tuple[str, Callable[[], str]]]:
    from kernels.cuda_attention import DecodeConfig, FlashConfig, emit_decode, emit_flash
    from kernels.cuda_gemm import CudaGemmConfig, emit_gemm
    from kernels.cuda_wgmma import WgmmaGemmConfig, emit_wgmma_gemm
    from kernels.cuda_wgmma_attention import WgmmaFlashConfig, emit_wgmma_flash

    gemm = [dict(), dict(dtype="bf16", b_major="k"), dict(bk=64, stages=3), dict(vec=2),
            dict(bm=128, bn=128, warps_m=2, warps_n=2, vec=4, b_major="k"), dict(dtype="bf16")]
    for kw in gemm:
        yield (f"nvidia/mma-gemm/{_kw(kw)}", lambda kw=kw: emit_gemm(CudaGemmConfig(**kw)))
    # issue 20 item 1: the same GEMM built as kernel IR, printed by kernels.printer.cuda
    from kernels.nvidia.gemm_ir import build_mma_gemm_ir
    from kernels.printer.cuda import emit_cuda
    small = dict(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3)
    ir = [(small, (128, 128, 128)), (dict(small, dtype="bf16", b_major="k"), (64, 128, 96)),
          (dict(), (512, 1024, 512))]
    for kw, shape in ir:
        yield (f"nvidia/mma-gemm-ir/{_kw(kw)}-{'x'.join(map(str, shape))}",
               lambda kw=kw, shape=shape: emit_cuda(build_mma_gemm_ir(CudaGemmConfig(**kw),
                                                                      *shape)))
    flash = [dict(), dict(causal=True, dtype="bf16"), dict(head_dim=64),
             dict(head_dim=256, bm=64, bn=32), dict(bm=128, warps=8, q_in_regs=True),
             dict(causal=True)]
    for kw in flash:
        yield (f"nvidia/mma-flash/{_kw(kw)}", lambda kw=kw: emit_flash(FlashConfig(**kw)))
    # ... and built as verified IR (kernels.nvidia.flash_ir), the mma.sync defaults
    from kernels.nvidia.flash_ir import build_flash_ir
    from kernels.printer.cuda_attention import emit_cuda_attention as emit_attn_ir
    for kw in (dict(), dict(causal=True, dtype="bf16"), dict(head_dim=64),
               dict(head_dim=64, causal=True), dict(head_dim=256, bm=64, bn=32)):
        yield (f"nvidia/mma-flash-ir/{_kw(kw)}",
               lambda kw=kw: emit_attn_ir(build_flash_ir(FlashConfig(**kw))))
    # ... and their wide (64-bit) form (kernels.nvidia.prefill_wide), for big tensors
    from kernels.nvidia.prefill_wide import widen_prefill
    for kw in (dict(head_dim=64), dict(causal=True, dtype="bf16")):
        yield (f"nvidia/mma-flash-ir-i64/{_kw(kw)}",
               lambda kw=kw: emit_attn_ir(widen_prefill(build_flash_ir(FlashConfig(**kw)))))
    for kw in (dict(), dict(head_dim=256, chunk=8), dict(head_dim=256), dict(head_dim=64)):
        yield (f"nvidia/decode/{_kw(kw)}", lambda kw=kw: emit_decode(DecodeConfig(**kw)))
    wg = [dict(), dict(dtype="bf16", b_major="k"), dict(bk=32, stages=6),
          dict(bk=16, stages=8, bn=128), dict(bm=256, bn=128), dict(bm=64, bn=64, stages=3),
          dict(b_major="k", bk=32, stages=6), dict(dtype="bf16"), dict(bk=16, stages=8),
          dict(b_major="k", bm=256, bn=128),
          # issue 20: the selection's small-M tiles and split-K
          dict(bm=64, bn=128, stages=4, split_k=True, dtype="bf16"),
          dict(bm=64, bn=64, stages=6, b_major="k"), dict(split_k=True)]
    for kw in wg:
        yield (f"nvidia/wgmma-gemm/{_kw(kw)}", lambda kw=kw: emit_wgmma_gemm(WgmmaGemmConfig(**kw)))
    # issue 20 item 1: the cp.async + wgmma GEMM built as kernel IR (kernels.nvidia.wgmma_ir)
    from kernels.nvidia.wgmma_ir import build_wgmma_gemm_ir
    wir = [(dict(bm=128, bn=64, bk=32, stages=3), (256, 128, 128)),
           (dict(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"), (128, 256, 192)),
           (dict(), (512, 1024, 512))]
    for kw, shape in wir:
        yield (f"nvidia/wgmma-gemm-ir/{_kw(kw)}-{'x'.join(map(str, shape))}",
               lambda kw=kw, shape=shape: emit_cuda(build_wgmma_gemm_ir(WgmmaGemmConfig(**kw),
                                                                        *shape)))
    # ... and its register-A (.rs) form: A by ldmatrix, each wgmma reading A from registers
    for kw, shape in wir:
        yield (f"nvidia/wgmma-gemm-ir-rs/{_kw(kw)}-{'x'.join(map(str, shape))}",
               lambda kw=kw, shape=shape: emit_cuda(build_wgmma_gemm_ir(
                   WgmmaGemmConfig(**kw), *shape, a_from="registers")))
    # ... and at runtime sizes, the form gemm() runs (kernels.nvidia.wgmma_rt_ir): the
    # selection's four tiles
    from kernels.nvidia.wgmma_rt_ir import build_wgmma_rt_ir
    from kernels.printer.cuda_gemm_edge import emit_cuda_gemm_rt
    for kw in (dict(), dict(bm=128, bn=128, stages=6, dtype="bf16", b_major="k"),
               dict(bm=64, bn=128, stages=4), dict(bm=64, bn=64, stages=6)):
        yield (f"nvidia/wgmma-gemm-ir-rt/{_kw(kw)}",
               lambda kw=kw: emit_cuda_gemm_rt(build_wgmma_rt_ir(WgmmaGemmConfig(**kw))))
    # ... and the mma.sync GEMM at runtime sizes with the template's schedule, what gemm()
    # runs on the mma.sync path (kernels.nvidia.gemm_rt_ir)
    from kernels.nvidia.gemm_rt_ir import build_mma_rt_ir
    for kw in (dict(), dict(dtype="bf16", b_major="k"),
               dict(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=3),
               dict(bk=64, stages=3, mma_order="serp", group_m=4)):
        yield (f"nvidia/mma-gemm-ir-rt/{_kw(kw)}",
               lambda kw=kw: emit_cuda_gemm_rt(build_mma_rt_ir(CudaGemmConfig(**kw))))
    # ... and its split-K (kernels.nvidia.wgmma_rt_ir_split): split kernel + IR reduce kernel,
    # one module
    from kernels.nvidia.wgmma_rt_ir_split import build_wgmma_rt_split_ir, split_source
    for kw in (dict(split_k=True), dict(split_k=True, dtype="bf16", b_major="k")):
        yield (f"nvidia/wgmma-gemm-ir-rt-split/{_kw(kw)}",
               lambda kw=kw: split_source(build_wgmma_rt_split_ir(WgmmaGemmConfig(**kw))))
    from kernels.nvidia.wgmma_tma import TmaGemmConfig, emit_tma_gemm
    # issue 20 item 4: the TMA GEMM the selection runs (persistent, TMA store; split-K units)
    tm = [dict(), dict(dtype="bf16", b_major="k"), dict(bn=128, stages=6),
          dict(store="direct", b_major="k", dtype="bf16"),
          dict(bm=64, bn=128, stages=8, store="direct", split_k=True, dtype="bf16"),
          dict(bm=128, bn=128, stages=6, store="direct", split_k=True),
          # one-launch split-K: the last split CTA of each tile reduces (splitk_inline.py)
          dict(bm=64, bn=128, stages=8, store="direct", split_k=True, reduce="inline",
               dtype="bf16"),
          dict(bm=128, bn=128, stages=6, store="direct", split_k=True, reduce="inline"),
          # skinny problems: 64x64 tiles, A boxes of only M's rows (a_rows), two CTAs per SM
          dict(bm=64, bn=64, stages=12, store="direct", split_k=True, reduce="inline",
               dtype="bf16", a_rows=16),
          dict(bm=64, bn=128, stages=8, store="direct", split_k=True, reduce="inline",
               b_major="k", a_rows=8),
          dict(bm=64, bn=64, stages=6, store="direct", split_k=True, reduce="inline",
               ctas_per_sm=2)]
    for kw in tm:
        yield (f"nvidia/wgmma-tma-gemm/{_kw(kw)}", lambda kw=kw: emit_tma_gemm(TmaGemmConfig(**kw)))
    # issue 20 item 1: the TMA GEMM built as kernel IR (kernels.nvidia.wgmma_tma_ir)
    from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir, tma_ir_source
    for kw in (dict(), dict(dtype="bf16", b_major="k"), dict(bm=64, bn=128, stages=6),
               dict(bm=64, bn=64, stages=6, dtype="bf16", a_rows=16),
               dict(bm=64, bn=128, stages=8, b_major="k", a_rows=8),
               # the direct-store epilogue (C rows not 16-byte aligned; one-split skinny shapes)
               dict(store="direct"), dict(dtype="bf16", b_major="k", store="direct"),
               dict(bm=64, bn=64, stages=12, dtype="bf16", store="direct"),
               dict(bm=64, bn=128, stages=8, dtype="bf16", store="direct", a_rows=16),
               # the one-launch split-K (partials, per-warpgroup ticket, ordered merge)
               dict(bm=64, bn=64, stages=12, dtype="bf16", store="direct", split_k=True,
                    reduce="inline", a_rows=16),
               dict(bm=64, bn=128, stages=8, b_major="k", store="direct", split_k=True,
                    reduce="inline"),
               dict(bm=128, bn=128, stages=6, dtype="bf16", store="direct", split_k=True,
                    reduce="inline"),
               # the split-K with a second launch: split kernel + IR reduce kernel, one text
               dict(bm=64, bn=256, stages=5, dtype="bf16", store="direct", split_k=True),
               # two CTAs per SM (launch bounds 2, setmaxnreg 216)
               dict(bm=64, bn=64, stages=6, dtype="bf16", store="direct", split_k=True,
                    reduce="inline", ctas_per_sm=2),
               dict(bm=64, bn=128, stages=3, dtype="bf16", ctas_per_sm=2)):
        yield (f"nvidia/wgmma-tma-gemm-ir/{_kw(kw)}",
               lambda kw=kw: tma_ir_source(build_tma_gemm_ir(TmaGemmConfig(**kw))))
    from kernels.nvidia.decode_splitkv import SplitKVDecodeConfig, emit_splitkv_decode
    for kw in (dict(), dict(head_dim=64, hg=8, chunk=2), dict(head_dim=256, hg=1),
               dict(in_dtype="f16", out_dtype="bf16", hg=3)):
        yield (f"nvidia/decode-splitkv/{_kw(kw)}",
               lambda kw=kw: emit_splitkv_decode(SplitKVDecodeConfig(**kw)))
    from kernels.nvidia.decode_mma import MmaDecodeConfig, emit_mma_decode
    for kw in (dict(), dict(hg=8), dict(head_dim=64, hg=8), dict(hg=4, warps=8),
               dict(in_dtype="f16", out_dtype="bf16", hg=3, chunk=2),
               dict(head_dim=256, hg=4), dict(head_dim=256, hg=8, in_dtype="f16"),
               dict(head_dim=256, hg=4, warps=8),      # the B4 H32/8 Skv 4096 choice
               dict(head_dim=256, hg=4, warps=8, fused=True),   # ... as dispatched (fused)
               dict(hg=4, fused=True), dict(hg=8, fused=True),
               dict(in_dtype="f16", out_dtype="bf16", hg=3, fused=True)):
        yield (f"nvidia/decode-mma/{_kw(kw)}", lambda kw=kw: emit_mma_decode(MmaDecodeConfig(**kw)))
    # issue 20 item 1: the decode's combine kernel built as kernel IR (kernels.nvidia.decode_mma_ir)
    from kernels.nvidia.decode_mma_ir import build_decode_combine_ir
    from kernels.printer.cuda_attention import emit_cuda_attention
    for kw in (dict(head_dim=64), dict(), dict(head_dim=256, out_dtype="bf16")):
        yield (f"nvidia/decode-combine-ir/{_kw(kw)}",
               lambda kw=kw: emit_cuda_attention(build_decode_combine_ir(MmaDecodeConfig(**kw))))
    # ... and its split kernel (kernels.nvidia.decode_split_ir), the dispatched configurations
    from kernels.nvidia.decode_split_ir import build_decode_split_ir
    for kw in (dict(hg=4, warps=4), dict(hg=8, warps=4), dict(hg=4, warps=8),
               dict(hg=8, warps=8), dict(head_dim=256, hg=4, warps=8),
               dict(head_dim=64, hg=4, warps=2, in_dtype="f16", out_dtype="bf16"),
               # odd heads per block (MHA, GQA 3/5/7: decode_split_ir.padded_heads)
               dict(hg=1, warps=4), dict(head_dim=64, hg=3, warps=8),
               dict(head_dim=256, hg=5, warps=8, in_dtype="f16"),
               dict(head_dim=64, hg=7, warps=4, out_dtype="bf16"),
               # head dims over padded widths (kernels.nvidia.decode_padded)
               dict(head_dim=32, hg=8, warps=4), dict(head_dim=80, hg=3, warps=8),
               dict(head_dim=96, hg=8, warps=8), dict(head_dim=160, hg=5, warps=4)):
        yield (f"nvidia/decode-split-ir/{_kw(kw)}",
               lambda kw=kw: emit_cuda_attention(build_decode_split_ir(MmaDecodeConfig(**kw))))
    # ... and the one-launch form (kernels.nvidia.decode_fused_ir), dispatched for the same
    from kernels.nvidia.decode_fused_ir import build_decode_fused_ir
    for kw in (dict(hg=4, warps=4), dict(hg=8, warps=4), dict(hg=4, warps=8),
               dict(hg=8, warps=8), dict(head_dim=256, hg=4, warps=8),
               dict(head_dim=64, hg=4, warps=2, in_dtype="f16", out_dtype="bf16"),
               dict(hg=1, warps=4), dict(head_dim=64, hg=3, warps=8),
               dict(head_dim=256, hg=5, warps=8, in_dtype="f16"),
               dict(head_dim=64, hg=7, warps=4, out_dtype="bf16"),
               dict(head_dim=32, hg=8, warps=4), dict(head_dim=80, hg=3, warps=8),
               dict(head_dim=96, hg=8, warps=8), dict(head_dim=160, hg=5, warps=4)):
        yield (f"nvidia/decode-fused-ir/{_kw(kw)}",
               lambda kw=kw: emit_cuda_attention(build_decode_fused_ir(MmaDecodeConfig(**kw))))
    # ... and the one-pass decode (kernels.nvidia.decode_onepass_ir), what short caches run
    from kernels.nvidia.decode_onepass_ir import build_onepass_ir
    for kw in (dict(chunk=1), dict(chunk=8), dict(), dict(head_dim=64, chunk=16),
               dict(head_dim=256, chunk=16), dict(head_dim=256, chunk=2, in_dtype="f16"),
               dict(head_dim=64, chunk=4, in_dtype="f16", out_dtype="bf16")):
        yield (f"nvidia/decode-onepass-ir/{_kw(kw)}",
               lambda kw=kw: emit_cuda_attention(build_onepass_ir(DecodeConfig(**kw))))
    for kw in (dict(chunk=8), dict(head_dim=256, chunk=1, in_dtype="f16")):
        yield (f"nvidia/decode-onepass-ir-i64/{_kw(kw)}",
               lambda kw=kw: emit_cuda_attention(build_onepass_ir(DecodeConfig(**kw), wide=True)))
    wf = [dict(), dict(bn=64), dict(warpgroups=1), dict(head_dim=64, bn=64),
          dict(warpgroups=1, bn=192), dict(overlap=False),
          dict(head_dim=64, warpgroups=1, bn=64, overlap=False),
          dict(overlap=False, warpgroups=1, bn=64),
          # issue 20: head_dim 256 on wgmma; the tiles prefill_select picks
          dict(head_dim=256, bn=64), dict(warpgroups=1, bn=64), dict(head_dim=64, warpgroups=1),
          # one warpgroup at head_dim 256: two per-thread copy bases
          dict(head_dim=256, warpgroups=1, bn=64)]
    for kw in wf:
        for causal in (False, True):
            for dtype in (("f16", "bf16") if not kw else ("f16",)):
                k2 = dict(kw, causal=causal, dtype=dtype)
                yield (f"nvidia/wgmma-flash/{_kw(k2)}",
                       lambda k2=k2: emit_wgmma_flash(WgmmaFlashConfig(**k2)))
    # issue 20 item 1: the head_dim 64 wgmma prefill built as verified IR
    # (kernels.nvidia.wgmma_flash_ir): choose_prefill's tile, both schedules, both masks
    from kernels.nvidia.wgmma_flash_ir import build_wgmma_flash_ir
    for kw in (dict(), dict(causal=True), dict(dtype="bf16"), dict(overlap=False),
               dict(overlap=False, causal=True)):
        k2 = dict(kw, head_dim=64, warpgroups=1, bn=128)
        yield (f"nvidia/wgmma-flash-ir/{_kw(kw)}",
               lambda k2=k2: emit_attn_ir(build_wgmma_flash_ir(WgmmaFlashConfig(**k2))))
    for kw in (dict(), dict(causal=True)):
        k2 = dict(kw, head_dim=64, warpgroups=1, bn=128)
        yield (f"nvidia/wgmma-flash-ir-i64/{_kw(kw)}",
               lambda k2=k2: emit_attn_ir(widen_prefill(
                   build_wgmma_flash_ir(WgmmaFlashConfig(**k2)))))
    from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, emit_ws_flash
    for kw in (dict(), dict(causal=True), dict(pingpong=False), dict(stages=3),
               dict(head_dim=64, dtype="f16"), dict(loader="tma", stages=3),
               dict(loader="tma", stages=3, causal=True),
               dict(loader="tma", stages=3, causal=True, persistent=True),
               # short causal (prefill_select): units in chunks of 4 (batch, head) pairs
               dict(loader="tma", stages=3, causal=True, persistent=True, unit_heads=4),
               # d128 non-causal past 1024 rows (prefill_select.WIDE_KEYS): 192-key blocks
               dict(loader="tma", bn=192, stages=2),
               # head_dim 256 (prefill_select's choice): 24/240 registers, two copy bases
               dict(head_dim=256, bn=64), dict(head_dim=256, bn=64, causal=True),
               # d256 as prefill_select now runs it: the P V wait after the next ring waits
               dict(head_dim=256, bn=64, defer_pv_wait=True),
               dict(head_dim=256, bn=64, causal=True, defer_pv_wait=True),
               # the deferred wait with the TMA producer (persistent: the lagged V releases of
               # the unit's tail) and the warp-voted rescale
               dict(loader="tma", stages=3, causal=True, persistent=True, unit_heads=4,
                    defer_pv_wait=True),
               dict(loader="tma", bn=192, stages=2, defer_pv_wait=True, rescale_vote=True),
               # long causal d128 (prefill_select.CAUSAL_LONG); V loaded behind K
               dict(loader="tma", stages=2, causal=True, defer_pv_wait=True),
               dict(loader="tma", bn=192, stages=2, defer_pv_wait=True, v_behind_k=True)):
        yield (f"nvidia/ws-flash/{_kw(kw)}", lambda kw=kw: emit_ws_flash(WsFlashConfig(**kw)))


def _amd_on_nvidia() -> Iterator[Tuple[str, Callable[[], str]]]:
    from kernels.attention_plan import AttnConfig
    from kernels.cuda import amd_flavour as af
    from kernels.decode import DecodeConfig, build_decode
    from kernels.decode_splitkv import build_splitkv
    from kernels.flash_attention import build_attention
    from kernels.gemm import build_gemm
    from kernels.gemm_plan import GemmConfig

    yield "amd-on-nvidia/mfma-all", lambda: af.generate_cuda(None)[0]
    srcs = {
        "gemm-200x136x72": lambda: build_gemm(GemmConfig(200, 136, 72), verify=False).source,
        "gemm-bf16-16x16": lambda: build_gemm(GemmConfig(512, 256, 256, dtype="bf16",
                                                         out_dtype="f32", mfma="16x16x16"),
                                              verify=False).source,
        "prefill-d128-causal": lambda: build_attention(AttnConfig(head_dim=128, causal=True),
                                                       verify=False).source,
        "decode-d128": lambda: build_decode(DecodeConfig(head_dim=128), verify=False).source,
        "splitkv-d256": lambda: build_splitkv(DecodeConfig(head_dim=256), verify=False).source,
    }
    for name, src in srcs.items():
        def tu(src=src):
            s = src()
            opts, info = af.cuda_options(s)
            return af.translate(s) + "\n// options " + json.dumps(
                [list(opts), {k: repr(v) for k, v in sorted(info.items())}])
        yield f"amd-on-nvidia/{name}", tu


def _examples() -> Iterator[Tuple[str, Callable[[], str]]]:
    """The kernels the examples print, captured where they hand the source to compile_hip."""
    for name, argv in (("01_vector_add", ["--n", "5000"]), ("02_tiled_copy", []),
                       ("03_tiled_mma", [])):
        yield f"examples/{name}", lambda name=name, argv=argv: _example_source(name, argv)


class _Captured(Exception):
    def __init__(self, source: str) -> None:
        super().__init__("captured")
        self.source = source


def _example_source(name: str, argv: list) -> str:
    import contextlib
    import io
    import tempfile
    mod = _load(ROOT / "examples" / f"{name}.py", f"golden_{name}")

    def capture(src, *a, **kw):
        raise _Captured(src)
    mod.compile_hip = capture
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        try:
            mod.main(argv + ["--out", d])
        except _Captured as c:
            return c.source
    raise RuntimeError(f"examples/{name}.py never called compile_hip")


def _kw(kw: Dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(kw.items())) or "default"


def configurations() -> Iterator[Tuple[str, Callable[[], str]]]:
    """(name, thunk that returns the generated source) for the whole matrix."""
    for gen in (_amd_gemm, _amd_attention, _nvidia, _amd_on_nvidia, _examples):
        yield from gen()


def normalise(text: str) -> str:
    """The source with the machine's paths replaced by placeholders: the AMD-on-NVIDIA sources
    record their compile options (``-I<checkout>/kernels/include``, a directory under the temp
    dir) in a comment, and a golden hash must not depend on where the checkout lies."""
    import tempfile
    return (text.replace(str(ROOT), "<ROOT>")
                .replace(str(Path(tempfile.gettempdir()).resolve()), "<TMP>")
                .replace(tempfile.gettempdir(), "<TMP>"))


def digest(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


def compute() -> Dict[str, str]:
    out: Dict[str, str] = {}
    for name, thunk in configurations():
        if name in out:
            raise RuntimeError(f"duplicate golden configuration name {name}")
        out[name] = digest(thunk())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare instead of rewriting")
    args = p.parse_args(argv)
    got = compute()
    if args.check:
        want = json.loads(GOLDEN.read_text())
        bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        print("\n".join(bad) or f"all {len(got)} sources identical")
        return 1 if bad else 0
    GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(got)} hashes to {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
