"""The AMD attention kernels as one function: which kernel runs a problem
(:func:`select_kernel`: prefill, decode or split-KV decode), each configuration built and
gated once (:func:`get_kernel`), and the torch API :func:`attention` (ROCm launch or the CPU
emulator).

:func:`select_kernel` is the one place the prefill / decode / split-KV choice is made: the
torch API, the CLI entry (:mod:`kernels.amd.attention_registry`) and the AMD-on-NVIDIA harness
(:mod:`kernels.nvidia.amd_flavour`) all call it.  The old path
``kernels.flash_attention.attention`` still works (``kernels.compat``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from .attention_plan import AttnConfig, ConfigError
from .decode import DecodeConfig, build_decode, decode_args, decode_grid
from .decode_splitkv import (SplitKVConfig, build_splitkv, choose_splits, combine_args,
                             split_args, validate_split)
from .flash_attention import BuiltAttention, PrefillShape, build_attention

__all__ = ["KernelChoice", "select_kernel", "get_kernel", "attention"]


@dataclass(frozen=True)
class KernelChoice:
    """The kernel for one problem: its configuration and, for split-KV, the split count and
    the keys per split (``n_splits`` 1 and ``kv_chunk`` 0 otherwise)."""

    config: Union[AttnConfig, DecodeConfig, SplitKVConfig]
    n_splits: int = 1
    kv_chunk: int = 0

    @property
    def kind(self) -> str:
        """``"prefill"``, ``"decode"`` or ``"decode_splitkv"``."""
        if isinstance(self.config, SplitKVConfig):
            return "decode_splitkv"
        return "decode" if isinstance(self.config, DecodeConfig) else "prefill"


def select_kernel(*, batch: int, heads: int, seqlen_q: int, seqlen_kv: int, head_dim: int,
                  dtype: str, out_dtype: Optional[str] = None, causal: bool = False,
                  causal_align: str = "top_left", decode: Optional[bool] = None,
                  kv_splits: Optional[int] = None, block_n: Optional[int] = None,
                  waves: int = 4, arch: str = "gfx942",
                  shape: Optional[PrefillShape] = None,
                  p_rounding: str = "rtne",
                  lds_stages: Optional[int] = None, pingpong: bool = False) -> KernelChoice:
    """Prefill, decode or split-KV decode for a problem.

    ``decode`` None: the decode kernel when ``seqlen_q == 1`` and the mask (if any) is
    bottom-right (top-left causal with one query row sees one key: that is prefill's job);
    True / False force or forbid it.  Decode with long KV becomes the split-KV pair
    (:func:`~kernels.amd.decode_splitkv.choose_splits`); ``kv_splits`` forces the split count
    (decode only).  ``shape``, when given, is validated for the decode kernel before the split
    (the torch API passes the tensors' strides).  ``p_rounding``: how the prefill kernel rounds
    P to bf16 (:mod:`kernels.ir.p_rounding`; decode keeps P in fp32, so only rtne is accepted
    there).  ``lds_stages``: the prefill kernel's K/V^T LDS stages (None: its default, see
    :class:`AttnConfig`).  ``pingpong``: the prefill kernel's ping-pong form
    (:mod:`kernels.amd.flash_attention_pingpong`, head_dim 128).  Raises :class:`ConfigError`
    with the reason.
    """
    use_decode = decode if decode is not None else (
        seqlen_q == 1 and (not causal or causal_align == "bottom_right"))
    if kv_splits is not None and not use_decode:
        raise ConfigError("kv_splits applies to the decode kernel (seqlen_q == 1) only")
    if not use_decode:
        return KernelChoice(AttnConfig(head_dim=head_dim, dtype=dtype, out_dtype=out_dtype,
                                       causal=bool(causal), block_n=block_n, waves=waves,
                                       arch=arch, p_rounding=p_rounding,
                                       lds_stages=lds_stages, pingpong=pingpong))
    if pingpong:
        raise ConfigError("pingpong applies to the prefill kernel only (decode has no MFMA "
                          "phase to alternate with the softmax)")
    if lds_stages is not None:
        raise ConfigError(f"lds_stages {lds_stages} applies to the prefill kernel only (decode "
                          "keeps no K/V tiles in LDS): leave it unset")
    if p_rounding != "rtne":
        raise ConfigError(f"p_rounding {p_rounding!r} applies to the prefill kernel only (decode "
                          "does not round P to 16 bits): use rtne")
    if seqlen_q != 1:
        raise ConfigError("the decode kernel needs seqlen_q == 1")
    cfg = DecodeConfig(head_dim=head_dim, dtype=dtype, out_dtype=out_dtype or dtype, arch=arch)
    n_splits, kv_chunk = choose_splits(batch, heads, seqlen_kv, cfg, kv_splits)
    if shape is not None:
        shape.validate(1)
    if n_splits > 1 or kv_splits is not None:
        cfg = SplitKVConfig(**{f: getattr(cfg, f) for f in DecodeConfig.__dataclass_fields__})
        validate_split(n_splits, kv_chunk, seqlen_kv, cfg)
    return KernelChoice(cfg, n_splits, kv_chunk)


_BUILT: Dict[Any, BuiltAttention] = {}


def get_kernel(cfg: Any) -> BuiltAttention:
    """The gated kernel for a config (``AttnConfig`` or ``decode.DecodeConfig``), built once per
    process (the code object is cached on disk by ``compile_hip``)."""
    key = (type(cfg).__name__, cfg.normalized())
    bk = _BUILT.get(key)
    if bk is None:
        if type(cfg).__name__ == "SplitKVConfig":
            bk = build_splitkv(cfg)
        elif type(cfg).__name__ == "DecodeConfig":
            bk = build_decode(cfg)
        elif getattr(cfg, "pingpong", False):
            from .flash_attention_pingpong import build_attention_pingpong
            bk = build_attention_pingpong(cfg)
        else:
            bk = build_attention(cfg)
        _BUILT[key] = bk
    return bk


_TDT = {"float16": "f16", "bfloat16": "bf16"}


def _flat(t: Any) -> Any:
    """A contiguous 1-D view of the storage ``t`` spans (for the CPU emulator)."""
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return t.as_strided((span,), (1,))


def attention(q: Any, k: Any, v: Any, causal: bool = False, scale: Optional[float] = None, *,
              causal_align: str = "top_left", out_dtype: Any = None, return_lse: bool = False,
              layout: str = "bhsd", backend: Optional[str] = None, decode: Optional[bool] = None,
              out: Any = None, kv_splits: Optional[int] = None,
              p_rounding: str = "rtne", lds_stages: Optional[int] = None,
              pingpong: bool = False) -> Any:
    """``softmax(scale q k^T [+ causal mask]) v`` on MFMA kernels built and verified here.

    ``q`` is ``[B, H, Sq, D]`` and ``k``, ``v`` are ``[B, HK, Skv, D]`` (``layout="bshd"``:
    ``[B, S, H, D]``), fp16 or bf16, any strides with a unit head-dim stride (others are copied);
    ``H`` a multiple of ``HK`` (GQA/MQA).  ``causal``: key j visible to query i iff ``j <= i``
    (``causal_align="top_left"``, torch SDPA's ``is_causal``) or ``j <= i + Skv - Sq``
    (``"bottom_right"``, flash-attention's); rows that see no key give 0 (lse -inf).
    ``scale`` defaults to ``1/sqrt(D)``; ``out_dtype`` to q's dtype (f16/bf16).
    Returns ``out`` (and the fp32 logsumexp ``[B, H, Sq]`` with ``return_lse``).

    ``backend``: ``None`` launches on the ROCm device the tensors live on (``kernels.launch``);
    ``"emulator"`` runs the same HIP source on the CPU emulator (CPU tensors, small shapes).
    ``decode``: force (True) or forbid (False) the seqlen_q = 1 decode kernel; by default it is
    used when ``Sq == 1`` and the mask (if any) is bottom-right.  With long KV it is the split-KV
    pair (:mod:`kernels.decode_splitkv`: partials per KV split, then an exact log-sum-exp merge);
    ``kv_splits`` sets the split count (default: :func:`~kernels.decode_splitkv.choose_splits`,
    1 split, i.e. the single decode kernel, below 512 keys).  ``p_rounding``: how the prefill
    kernel rounds P to bf16 before P V, ``"rtne"`` (default), ``"rtna"`` or ``"rtz"``
    (:mod:`kernels.ir.p_rounding`; bf16 inputs only).  ``lds_stages``: the prefill kernel's
    LDS stages of the K and V^T tiles, 1 or 2 (default: :class:`AttnConfig`'s, 1 for head_dim
    <= 128: 32 KiB of LDS, two work-groups per CU).  ``pingpong``: the prefill kernel's
    ping-pong form (256-row work-groups of two 4-wave groups taking turns on the MFMA pipe;
    head_dim 128).
    """
    import torch
    from ..errors import NoDeviceError
    if layout not in ("bhsd", "bshd"):
        raise ConfigError(f"layout {layout!r}: use 'bhsd' or 'bshd'")
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ConfigError("q, k, v must be 4-D ([B, H, S, D] or [B, S, H, D] with layout='bshd')")
    B, H, SQ, D = q.shape
    Bk, HK, SKV, Dk = k.shape
    if tuple(v.shape) != (Bk, HK, SKV, Dk) or Bk != B or Dk != D:
        raise ConfigError(f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
                          "do not match ([B, H, Sq, D] and [B, HK, Skv, D])")
    dt = _TDT.get(str(q.dtype).replace("torch.", ""))
    if dt is None or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ConfigError(f"q, k, v must share one dtype, fp16 or bf16 (got {q.dtype}, "
                          f"{k.dtype}, {v.dtype})")
    odt = out_dtype if out_dtype is not None else q.dtype
    if isinstance(odt, str):
        odt = {"f16": torch.float16, "fp16": torch.float16, "float16": torch.float16,
               "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}[odt]
    ot = _TDT[str(odt).replace("torch.", "")]
    if causal_align not in ("top_left", "bottom_right"):
        raise ConfigError(f"causal_align {causal_align!r}: use 'top_left' or 'bottom_right'")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    if not scale > 0:
        raise ConfigError(f"scale {scale} must be positive")

    def fix(x):  # unit head-dim stride and 8-element strides, else a contiguous copy
        if x.stride(-1) != 1 or any(s % 8 for s in x.stride()[:3]) or x.data_ptr() % 16:
            return x.contiguous()
        return x
    q, k, v = fix(q), fix(k), fix(v)
    if out is None:
        out = torch.empty((B, H, SQ, D), dtype=odt, device=q.device)
    lse = torch.empty((B, H, SQ), dtype=torch.float32, device=q.device)
    for x, n in ((q, "q"), (k, "k"), (v, "v"), (out, "out")):
        span = 1 + sum((s - 1) * st for s, st in zip(x.shape, x.stride()))
        if span > 2 ** 31 - 1:   # offsets are printed as 32-bit int expressions
            raise ConfigError(f"{n} spans {span} elements; the kernels index with 32-bit ints "
                              "(at most 2^31 - 1): split the batch")
    off = (SKV - SQ) if (causal and causal_align == "bottom_right") else 0
    st = lambda x: tuple(int(s) for s in x.stride()[:3])  # noqa: E731
    shape = PrefillShape(B, H, HK, SQ, SKV, st(q), st(k), st(v), st(out), off)
    choice = select_kernel(batch=B, heads=H, seqlen_q=SQ, seqlen_kv=SKV, head_dim=D, dtype=dt,
                           out_dtype=ot, causal=bool(causal), causal_align=causal_align,
                           decode=decode, kv_splits=kv_splits, shape=shape, p_rounding=p_rounding,
                           lds_stages=lds_stages, pingpong=pingpong)
    cfg, n_splits, kv_chunk = choice.config, choice.n_splits, choice.kv_chunk
    if choice.kind != "prefill":
        bk = get_kernel(cfg)
        if bk.kind == "decode_splitkv":
            if SQ == 0 or B * H == 0:
                return (out, lse) if return_lse else out
            _run_splitkv(bk, q, k, v, out, lse, shape, scale, n_splits, kv_chunk, backend)
            if layout == "bshd":
                out_v = out.transpose(1, 2)
                return (out_v, lse) if return_lse else out_v
            return (out, lse) if return_lse else out
        grid, scalars = decode_grid(shape, cfg), decode_args(shape, scale)
    else:
        bk = get_kernel(cfg)
        shape.validate(bk.plan.cfg.block_m)
        grid, scalars = shape.grid(bk.plan.cfg.block_m, bk.plan.cfg.causal), shape.scalar_args(scale)
    if SQ == 0 or B * H == 0:
        return (out, lse) if return_lse else out
    if backend == "emulator":
        bufs = [_flat(q), _flat(k), _flat(v), _flat(out), lse]
        bk.emulate(*bufs, *scalars, grid=grid)
    elif backend is None:
        if q.device.type == "cpu":
            raise NoDeviceError("kernels.attention: CPU tensors; launch needs ROCm tensors "
                                "(or pass backend='emulator' to run the same kernel on the CPU "
                                "emulator)")
        from ..runtime.rocm import TensorSpec, launch
        co = bk.code_object or bk.compile()
        specs = [TensorSpec(dtype=x.dtype, strides=(), align=16, name=n)
                 for x, n in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
        specs.append(TensorSpec(dtype=torch.float32, name="lse"))
        launch(co, bk.name, grid, bk.block, [q, k, v, out, lse] + scalars,
               specs=specs + [None] * len(scalars))
    else:
        raise ConfigError(f"backend {backend!r}: None (ROCm launch) or 'emulator'")
    if layout == "bshd":
        out_v = out.transpose(1, 2)
        return (out_v, lse) if return_lse else out_v
    return (out, lse) if return_lse else out


def _run_splitkv(bk: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, shape: PrefillShape,
                 scale: float, n_splits: int, kv_chunk: int, backend: Optional[str]) -> None:
    """The split kernel then the combine kernel (fp32 workspace: O, max, sum per split)."""
    import torch
    from ..errors import NoDeviceError
    if backend == "emulator":
        # the emulator writes out and lse in place
        bk.emulate_pair(_flat(q), _flat(k), _flat(v), _flat(out), lse, shape, scale, n_splits,
                        kv_chunk)
        return
    if backend is not None:
        raise ConfigError(f"backend {backend!r}: None (ROCm launch) or 'emulator'")
    if q.device.type == "cpu":
        raise NoDeviceError("kernels.attention: CPU tensors; launch needs ROCm tensors (or pass "
                            "backend='emulator' to run the same kernels on the CPU emulator)")
    from ..runtime.rocm import TensorSpec, launch
    B, H, D = shape.batch, shape.heads, bk.cfg.head_dim
    f32 = dict(dtype=torch.float32, device=q.device)
    op = torch.empty((B * H * n_splits * D,), **f32)
    mp = torch.empty((B * H * n_splits,), **f32)
    lp = torch.empty((B * H * n_splits,), **f32)
    co = bk.code_object or bk.compile()
    g1, g2 = bk.grids(shape, n_splits)
    s1 = split_args(shape, scale, n_splits, kv_chunk)
    specs = [TensorSpec(dtype=x.dtype, strides=(), align=16, name=n)
             for x, n in ((q, "q"), (k, "k"), (v, "v"), (op, "Op"))]
    specs += [TensorSpec(dtype=torch.float32, name="Mp"), TensorSpec(dtype=torch.float32,
                                                                     name="Lp")]
    launch(co, bk.split.name, g1, bk.block, [q, k, v, op, mp, lp] + s1,
           specs=specs + [None] * len(s1))
    s2 = combine_args(shape, n_splits)
    specs = [TensorSpec(dtype=torch.float32, align=16, name="Op"),
             TensorSpec(dtype=torch.float32, name="Mp"), TensorSpec(dtype=torch.float32,
                                                                    name="Lp"),
             TensorSpec(dtype=out.dtype, strides=(), align=16, name="out"),
             TensorSpec(dtype=torch.float32, name="lse")]
    launch(co, bk.combine.name, g2, bk.combine.block, [op, mp, lp, out, lse] + s2,
           specs=specs + [None] * len(s2))
