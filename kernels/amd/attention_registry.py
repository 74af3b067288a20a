"""``layoutalg compile attention`` / ``layoutalg check attention``: the registry entry.

``compile`` needs only the compile-time options (dtype, head dim, causal; ``--seqlen-q 1`` picks
the decode kernel); shapes are runtime arguments.  ``check --emulate`` runs one shape on the CPU
emulator against torch's ``scaled_dot_product_attention`` in fp32.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

# no import of .registry here: registry.py imports this module at its end (a cycle otherwise);
# the entry implements KernelEntry's interface (duck-typed, like every REGISTRY value is used)
__all__ = ["AttentionEntry", "AttnCase"]

_TORCH = {"f16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class AttnCase:
    """Kernel options plus the problem ``check`` runs."""

    kernel: Any                 # AttnConfig | DecodeConfig
    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_kv: int
    causal: bool
    causal_align: str
    layout: str
    n_splits: int = 1           # split-KV decode: KV splits and keys per split
    kv_chunk: int = 0

    def normalized(self) -> "AttnCase":
        return self


class _Shaped:
    """A built kernel bound to one problem: what ``cmd_check`` calls."""

    def __init__(self, bk: Any, case: AttnCase) -> None:
        self.bk, self.case = bk, case
        self.name, self.verification, self.block = bk.name, bk.verification, bk.block
        self.source = bk.source

    @property
    def grid(self) -> Tuple[int, int, int]:
        return self.case_args()[1]

    def shape(self):
        return self.case_args(shape_only=True)

    def case_args(self, shape_only: bool = False):
        from .flash_attention import PrefillShape
        c = self.case
        D = c.kernel.head_dim
        if c.layout == "bshd":
            q = (c.seqlen_q * c.heads * D, D, c.heads * D)
            k = (c.seqlen_kv * c.kv_heads * D, D, c.kv_heads * D)
        else:
            q = (c.heads * c.seqlen_q * D, c.seqlen_q * D, D)
            k = (c.kv_heads * c.seqlen_kv * D, c.seqlen_kv * D, D)
        off = c.seqlen_kv - c.seqlen_q if (c.causal and c.causal_align == "bottom_right") else 0
        shape = PrefillShape(c.batch, c.heads, c.kv_heads, c.seqlen_q, c.seqlen_kv, q, k, k, q,
                             off)
        scale = 1.0 / math.sqrt(D)
        if shape_only:
            return shape
        if type(c.kernel).__name__ == "SplitKVConfig":
            from .decode_splitkv import split_args
            return (split_args(shape, scale, c.n_splits, c.kv_chunk),
                    self.bk.grids(shape, c.n_splits)[0])
        if type(c.kernel).__name__ == "DecodeConfig":
            from .decode import decode_args, decode_grid
            return decode_args(shape, scale), decode_grid(shape, c.kernel)
        return shape.scalar_args(scale), shape.grid(self.bk.plan.cfg.block_m, self.bk.plan.cfg.causal)

    def compile(self, arch=None):
        return self.bk.compile(arch)

    def report(self):
        """The kernel's report plus the bytes the checked problem moves at least (HBM)."""
        rep = self.bk.report()
        c = self.case
        kd, ob = c.kernel.head_dim, 2
        if self.bk.kind == "decode_splitkv":
            from .decode_splitkv import splitkv_bytes
            rep["bytes_moved"] = splitkv_bytes(c.batch, c.heads, c.kv_heads, c.seqlen_kv, kd,
                                               c.n_splits, 2, ob)
            rep["splits"] = {"n_splits": c.n_splits, "kv_chunk": c.kv_chunk}
        elif self.bk.kind == "decode":
            from .decode import decode_bytes
            rep["bytes_moved"] = decode_bytes(c.batch, c.heads, c.kv_heads, c.seqlen_kv, kd, 2, ob)
        if "bytes_moved" in rep:
            rep["bytes_moved"]["problem"] = (f"B={c.batch} H={c.heads} HK={c.kv_heads} "
                                             f"seqlen_kv={c.seqlen_kv} D={kd}")
        return rep

    def emulate(self, *inputs: Any, **kw: Any) -> Any:
        c = self.case
        if self.bk.kind == "decode_splitkv":
            return self.bk.emulate_pair(*inputs, self.shape(), 1.0 / math.sqrt(c.kernel.head_dim),
                                        c.n_splits, c.kv_chunk, **kw)
        scalars, grid = self.case_args()
        return self.bk.emulate(*inputs, *scalars, grid=grid, **kw)


class AttentionEntry:
    name = "attention"
    help = ("flash-attention forward (prefill) and decode attention: fp16/bf16 in, fp32 "
            "softmax and accumulation, fp16/bf16 out, causal, GQA/MQA, any sequence lengths")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("attention options")
        g.add_argument("--dtype", default="f16", help="Q/K/V element type: f16 | bf16")
        g.add_argument("--out-dtype", default=None, help="O element type (default: --dtype)")
        g.add_argument("--head-dim", type=int, default=128, help="64 | 128 | 256 (default 128)")
        g.add_argument("--causal", action="store_true", help="causal mask")
        g.add_argument("--causal-align", default="top_left", choices=("top_left", "bottom_right"),
                       help="top_left = torch SDPA is_causal (default), bottom_right = "
                            "flash-attention's (key j visible iff j <= i + Skv - Sq)")
        g.add_argument("--seqlen-q", type=int, default=None,
                       help="query length (1 selects the decode kernel; default 77 for check)")
        g.add_argument("--seqlen-kv", type=int, default=77, help="key/value length (check)")
        g.add_argument("--batch", type=int, default=1, help="batch (check)")
        g.add_argument("--heads", type=int, default=2, help="query heads (check)")
        g.add_argument("--kv-heads", type=int, default=None, help="KV heads (default --heads)")
        g.add_argument("--layout", default="bhsd", choices=("bhsd", "bshd"),
                       help="memory layout of Q/K/V/O in check (bshd through strides)")
        g.add_argument("--kv-splits", type=int, default=None,
                       help="decode: KV splits of the split-KV kernel pair (default: chosen from "
                            "the shape; 1 split = the single decode kernel below 512 keys)")
        g.add_argument("--block-n", type=int, default=None, help="keys per KV tile (prefill)")
        g.add_argument("--waves", type=int, default=4, help="waves per block (prefill)")
        g.add_argument("--lds-stages", type=int, default=None,
                       help="prefill: LDS stages of the K and V^T tiles, 1 | 2 (default 1 for "
                            "head_dim <= 128: 32 KiB, two work-groups per CU; 2 for 256)")
        g.add_argument("--p-rounding", default="rtne",
                       help="prefill, bf16: how P is rounded to bf16 before P V: rtne (round to "
                            "nearest even, default) | rtna (ties away) | rtz (truncate)")
        g.add_argument("--pingpong", action="store_true",
                       help="prefill, head_dim 128: ping-pong waves (256-row work-groups, two "
                            "groups of 4 waves taking turns on the MFMA pipe)")

    def config(self, args: argparse.Namespace) -> AttnCase:
        sq = 77 if args.seqlen_q is None else args.seqlen_q
        return attention_case(batch=args.batch, heads=args.heads, kv_heads=args.kv_heads,
                              seqlen_q=sq, seqlen_kv=args.seqlen_kv, head_dim=args.head_dim,
                              dtype=args.dtype, out_dtype=args.out_dtype,
                              causal=bool(args.causal), causal_align=args.causal_align,
                              layout=args.layout, kv_splits=getattr(args, "kv_splits", None),
                              block_n=args.block_n, waves=args.waves,
                              arch=getattr(args, "arch", "gfx942"),
                              p_rounding=getattr(args, "p_rounding", "rtne"),
                              lds_stages=getattr(args, "lds_stages", None),
                              pingpong=bool(getattr(args, "pingpong", False)))

    def ignored_options(self, args: argparse.Namespace, cfg: AttnCase, command: str,
                        given: Any) -> List[str]:
        """What the user asked for that this kernel/command will not do (see KernelEntry)."""
        out = []
        decode = type(cfg.kernel).__name__ != "AttnConfig"
        if args.seqlen_q == 1 and not decode:
            out.append("--seqlen-q 1 with --causal (top-left aligned) lets each query see only "
                       "key 0, so this builds the prefill kernel, not decode; for causal decode "
                       "pass --causal-align bottom_right (the query sees every key)")
        if given("causal_align") and not cfg.causal:
            out.append("--causal-align is ignored without --causal")
        if decode:
            out += [f"--{o.replace('_', '-')} is ignored: it applies to the prefill kernel, "
                    "not decode (--seqlen-q 1)" for o in ("block_n", "waves", "lds_stages",
                                                          "pingpong")
                    if given(o)]
        elif command == "compile":
            shape = [o for o in ("seqlen_kv", "batch", "heads", "kv_heads", "layout") if given(o)]
            if shape:
                out.append(", ".join("--" + o.replace("_", "-") for o in shape) + " ignored by "
                           "compile for prefill: shapes are runtime arguments (check uses them)")
        return out

    def build(self, cfg: AttnCase) -> Any:
        from .attention_api import get_kernel
        return _Shaped(get_kernel(cfg.kernel), cfg)

    def inputs(self, cfg: AttnCase, seed: int = 0) -> List[Any]:
        import torch
        c = cfg
        g = torch.Generator().manual_seed(seed)
        dt = getattr(torch, _TORCH[c.kernel.dtype])
        D = c.kernel.head_dim

        def mk(h, s):
            if c.layout == "bshd":
                return torch.randn(c.batch, s, h, D, generator=g).to(dt)
            return torch.randn(c.batch, h, s, D, generator=g).to(dt)
        q, k, v = mk(c.heads, c.seqlen_q), mk(c.kv_heads, c.seqlen_kv), mk(c.kv_heads, c.seqlen_kv)
        o = torch.zeros_like(mk(c.heads, c.seqlen_q), dtype=getattr(torch, _TORCH[c.kernel.out_dtype]))
        lse = torch.zeros(c.batch, c.heads, c.seqlen_q, dtype=torch.float32)
        return [q, k, v, o, lse]

    def _bhsd(self, cfg: AttnCase, t: Any) -> Any:
        return t.transpose(1, 2) if cfg.layout == "bshd" else t

    def reference(self, cfg: AttnCase, args: Sequence[Any]) -> Any:
        return reference(*(self._bhsd(cfg, a) for a in args[:3]), causal=cfg.causal,
                         causal_align=cfg.causal_align)[0]

    def output(self, cfg: AttnCase, outputs: Sequence[Any]) -> Any:
        import numpy as np
        import torch
        o = outputs[3]
        t = torch.from_numpy(np.ascontiguousarray(o)) if not isinstance(o, torch.Tensor) else o
        if cfg.kernel.out_dtype == "bf16" and t.dtype != torch.bfloat16:
            t = t.view(torch.bfloat16)
        return self._bhsd(cfg, t.float())

    def extra_comparisons(self, cfg: AttnCase, inputs: Sequence[Any],
                          outputs: Sequence[Any]) -> List[Tuple[str, Any, Any, float, float]]:
        """``(name, got, expected, atol, rtol)`` of the outputs besides O that ``check`` must
        compare: the log-sum-exp (fp32, natural log; -inf for rows that see no key)."""
        import numpy as np
        import torch
        if len(outputs) < 5 or outputs[4] is None:
            return []
        lse = outputs[4]
        got = torch.from_numpy(np.ascontiguousarray(lse)) if not isinstance(lse, torch.Tensor) \
            else lse
        ref = reference(*(self._bhsd(cfg, a) for a in inputs[:3]), causal=cfg.causal,
                        causal_align=cfg.causal_align)[1]
        return [("lse", got.float().reshape(ref.shape), ref, 1e-4, 1e-5)]

    def tolerance(self, cfg: AttnCase) -> Tuple[float, float]:
        # fp32 softmax/accumulation; P rounded to 16 bits before P V; output rounding
        return {"f16": (4e-3, 4e-3), "bf16": (2e-2, 2e-2)}[cfg.kernel.dtype]


def attention_case(*, batch: int, heads: int, kv_heads: Optional[int], seqlen_q: int,
                   seqlen_kv: int, head_dim: int, dtype: str, out_dtype: Optional[str] = None,
                   causal: bool = False, causal_align: str = "top_left", layout: str = "bhsd",
                   kv_splits: Optional[int] = None, block_n: Optional[int] = None,
                   waves: int = 4, arch: str = "gfx942", p_rounding: str = "rtne",
                   lds_stages: Optional[int] = None, pingpong: bool = False) -> AttnCase:
    """The problem ``layoutalg check attention`` runs, with the kernel
    :func:`kernels.amd.attention_api.select_kernel` picks for it (also the AMD-on-NVIDIA
    harness's entry: :func:`kernels.nvidia.amd_flavour.attention_case`)."""
    from .attention_api import select_kernel
    from .gemm_plan import ConfigError
    hk = kv_heads or heads
    for n, v in (("batch", batch), ("heads", heads), ("kv-heads", hk)):
        if v < 1:
            raise ConfigError(f"--{n} must be positive")
    if seqlen_q < 1 or seqlen_kv < 1:
        raise ConfigError("--seqlen-q and --seqlen-kv must be positive")
    if heads % hk:
        raise ConfigError(f"--heads {heads} is not a multiple of --kv-heads {hk}")
    decode = seqlen_q == 1 and (not causal or causal_align == "bottom_right")
    if kv_splits is not None and not decode:
        raise ConfigError("--kv-splits applies to decode (--seqlen-q 1) only")
    choice = select_kernel(batch=batch, heads=heads, seqlen_q=seqlen_q, seqlen_kv=seqlen_kv,
                           head_dim=head_dim, dtype=dtype, out_dtype=out_dtype, causal=causal,
                           causal_align=causal_align, decode=decode, kv_splits=kv_splits,
                           block_n=block_n, waves=waves, arch=arch, p_rounding=p_rounding,
                           lds_stages=None if decode else lds_stages,
                           pingpong=pingpong and not decode)
    return AttnCase(choice.config.normalized(), batch, heads, hk, seqlen_q, seqlen_kv, causal,
                    causal_align, layout, choice.n_splits, choice.kv_chunk)


def reference(q: Any, k: Any, v: Any, causal: bool = False, causal_align: str = "top_left",
              scale: Any = None):
    """(O, logsumexp) in fp32 from torch's scaled_dot_product_attention (BHSD, GQA expanded);
    rows that see no key give O = 0 and lse = -inf (the kernels' convention)."""
    import torch
    import torch.nn.functional as F
    B, H, SQ, D = q.shape
    HK, SKV = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    kk = k.float().repeat_interleave(H // HK, 1)
    vv = v.float().repeat_interleave(H // HK, 1)
    mask = None
    if causal:
        off = SKV - SQ if causal_align == "bottom_right" else 0
        i = torch.arange(SQ)[:, None]
        j = torch.arange(SKV)[None, :]
        mask = j <= i + off
    s = (q.float() @ kk.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    if mask is None:
        o = F.scaled_dot_product_attention(q.float(), kk, vv, scale=scale)
    else:
        o = F.scaled_dot_product_attention(q.float(), kk, vv, attn_mask=mask, scale=scale)
        o = torch.where(mask.any(-1)[None, None, :, None], o, torch.zeros_like(o))
    return o, lse
