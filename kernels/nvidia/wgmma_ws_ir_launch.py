"""The host side of the warp-specialised IR prefill (:mod:`.wgmma_ws_ir_serial`): its 4-D
tensor maps and its launch -- the plan's piece 2 host part (:mod:`.wgmma_ws_ir_plan`).

An IR kernel with 4-D :class:`~kernels.ir.nvidia_tma.TensorMap` parameters takes each map as a
``const void*`` to a 128-byte ``CUtensorMap`` in device memory.  The host reads every map the
IR declares against the tensor it addresses at the launch
(:func:`~.ws_tma_loads.ir_attention_map_args`: the dims' order, the extents the IR's symbols
evaluate to, the box and the dtype) and then encodes it with the template's one mechanism
(:class:`~.ws_tma_loads.AttentionTensorMaps` -> :func:`~.tma.encode_tiled_map`: strides from
the tensor, the 128-byte swizzle, no interleave, zero fill), so an IR map is byte for byte the
template's map of the same tensor and box.

:class:`IrWsAttention` runs :func:`~.wgmma_ws_ir.build_ws_ir` of a configuration (the
dispatched ones but for persistence), :class:`IrWsSerialAttention` the serial kernel
:func:`~.wgmma_ws_ir_serial.build_ws_serial_ir` (each verified first: the IR and its printed
text), on (B, H, S, D) tensors of any strides TMA addresses
(BSHD included), GQA, bf16 / f16, head_dim 128: grid (query blocks, batch x heads), 384
threads, the arguments built by name from the IR's parameters and scalars (so the launch is
the printed signature's order, whatever it is).  It refuses with
:class:`~kernels.errors.LaunchError` what the maps cannot address (base not 16-byte aligned,
strides not positive multiples of 16 bytes, head_dim not contiguous) and what the IR's 32-bit
index math and grid cannot (:func:`~.flash_ir.ir_launch_fits`); its ``wide=True`` form
(:mod:`.prefill_wide`: 64-bit batch / head strides, grid (query blocks, heads, batch), each
launch proved at its values) takes those.  :class:`IrWsAttention` is dispatched
(:mod:`.prefill_ir`) for the configurations measured at parity.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import LaunchError
from ..ir.nvidia_tma import IntParam, TensorMap
from .attention import FlashAttention
from .builder import CompiledKernel
from .flash_ir import int_offsets_fit, ir_launch_fits, scale_log2_of
from .prefill_wide import launch_values, prove_launch, scalar_signature, wide_grid
from .wgmma_ws_ir_serial import build_ws_serial_ir
from .ws_tma_loads import AttentionTensorMaps, ir_attention_map_args

__all__ = ["IrWsAttention", "IrWsSerialAttention", "launch_sizes", "load_verified_ws"]


def launch_sizes(q: Any, k: Any) -> Dict[str, int]:
    """The runtime sizes of a launch on ``q`` (B, Hq, Sq, D) and ``k`` (B, Hkv, Skv, D), by
    the names of the IR's symbols."""
    B, Hq, Sq = (int(x) for x in q.shape[:3])
    Hkv, Skv = int(k.shape[1]), int(k.shape[2])
    return {"batch": B, "heads": Hq, "kv_heads": Hkv, "group": Hq // Hkv, "seqlen_q": Sq,
            "seqlen_kv": Skv}


def load_verified_ws(fa: Any, ir: Any, backend: str) -> None:
    """Give the launcher ``fa`` a warp-specialised IR kernel: ``ir``'s printed CUDA verified
    with the IR (:func:`~kernels.verify.report_cache.verified`: a passing verdict remembered
    on disk by content, a failing one raised) before it is compiled (``backend``); sets
    ``fa.ir`` / ``report`` / ``plan`` / ``ws_cfg`` / ``kernel_name``.  The one loading step of
    the TMA launchers here and the cp.async one (:mod:`.wgmma_ws_ir_cp_launch`)."""
    from ..printer.cuda_attention import emit_cuda_attention
    from ..verify.report_cache import verified
    fa.ir = ir
    source = emit_cuda_attention(ir)
    cfg = ir.meta["cfg"]
    fa.report = verified(ir, source, cfg.arch)
    fa.plan = ir.meta["plan"]
    fa.ws_cfg = ir.meta["ws_cfg"]
    CompiledKernel.__init__(fa, cfg, source, backend)
    fa.kernel_name = ir.name


class IrWsAttention(FlashAttention):
    """A warp-specialised d128 prefill built as IR by :func:`~.wgmma_ws_ir.build_ws_ir` for
    ``cfg`` (a :class:`~.wgmma_attention_ws.WsFlashConfig` the builder takes: TMA loader, the
    overlap schedule, stages 2 / 3, bn 128 / 192, ping-pong, the deferred P V wait; not
    persistent), verified (the IR and its printed CUDA; a passing verdict remembered on disk
    by content) before anything is compiled: ``fa(q, k, v, out=None, scale=None) -> out`` with
    the template's arguments and checks (:class:`~.attention.FlashAttention`), plus what its
    maps and 32-bit offsets need.  ``report`` is the verifier's; ``ws_cfg`` the template
    configuration of the same tile, stages and loader."""

    def __init__(self, cfg: Any, *, backend: str = "auto", wide: bool = False) -> None:
        from .attention import AttentionConfigError
        from .wgmma_ws_ir import build_ws_ir
        if cfg.loader != "tma":     # no tensor maps to encode: the pointer launch's kernel
            raise AttentionConfigError(f"{cfg.name}: loader={cfg.loader!r} has no tensor maps; "
                                       "its launcher is wgmma_ws_ir_cp_launch.IrWsCpAttention")
        self._init_ir(build_ws_ir(cfg), backend, wide)

    def _init_ir(self, ir: Any, backend: str, wide: bool = False) -> None:
        """Load ``ir`` verified; ``wide``: its 64-bit form first (:mod:`.prefill_wide`:
        ``long long`` strides, grid (query blocks, heads, batch)), for tensors whose offsets
        or batch x heads the 32-bit form cannot launch (the maps' limits stay)."""
        from .prefill_wide import widen_prefill
        self.wide = wide
        load_verified_ws(self, widen_prefill(ir) if wide else ir, backend)
        self._maps = AttentionTensorMaps()

    def map_rows(self, q: Any, k: Any, v: Any) -> Dict[str, int]:
        """Each of the IR's tensor maps read against its tensor at this launch
        (:func:`~.ws_tma_loads.ir_attention_map_args`): its name -> the box rows it is
        encoded with.  Raises :class:`LaunchError` where the map cannot address the tensor."""
        tensors = {"Q": q, "K": k, "V": v}
        sizes = launch_sizes(q, k)
        out = {}
        for tm in self.ir.params:
            if isinstance(tm, TensorMap):
                if tm.tensor not in tensors:
                    raise LaunchError(f"{self.kernel_name}: tensor map {tm.name} over "
                                      f"{tm.tensor}, which the launch has no tensor for")
                out[tm.name] = ir_attention_map_args(tm, tensors[tm.tensor], sizes)["box"][1]
        return out

    def signature(self) -> Tuple[List[str], List[Any]]:
        """The launch's argument kinds and tensor specs, from the IR's parameters and scalars
        in the printed order: maps 64-byte aligned pointers, O a pointer, ints i32."""
        from ..runtime.cuda import TensorSpec
        sig: List[str] = []
        specs: List[Any] = []
        for p in self.ir.params:
            if isinstance(p, TensorMap):
                sig.append("ptr")
                specs.append(TensorSpec(strides=(), align=64))
            elif isinstance(p, IntParam):
                sig.append("i32")
                specs.append(None)
            else:
                sig.append("ptr")
                specs.append(TensorSpec(strides=()))
        for kind in scalar_signature(self.ir):
            sig.append(kind)
            specs.append(None)
        return sig, specs

    def ir_grid(self, q: Any) -> Tuple[Tuple[int, int, int], Dict[str, int]]:
        """The launch's grid, and the values of any arguments the grid sets (none here):
        (query blocks, batch x heads).  The persistent launcher's differs."""
        B, Hq, Sq = (int(x) for x in q.shape[:3])
        if getattr(self, "wide", False):
            return wide_grid(self.kernel_name, q, self.cfg.bm), {}
        return (-(-Sq // self.cfg.bm), B * Hq, 1), {}

    def bind(self, q, k, v, out=None, scale: Optional[float] = None):
        """Check the arguments and the maps; ``run(q, k, v, out)`` for every call with their
        ``call_key``."""
        import torch
        from ..printer.cuda import smem_bytes
        from ..runtime.cuda import LaunchSite
        B, Hq, Sq, Hkv, Skv = self.check_args(q, k, v, out)
        wide = getattr(self, "wide", False)
        if not wide and not ir_launch_fits(q, k, v, out):
            raise LaunchError(f"{self.kernel_name}: an element offset or stride of q / k / v / "
                              f"out reaches 2^31, or batch x heads = {B * Hq} is past 65535: "
                              "the IR indexes with 32-bit int and a (query block, batch x "
                              "heads) grid (its wide=True form takes them)")
        rows = self.map_rows(q, k, v)
        sizes = launch_sizes(q, k)
        log2_scale = scale_log2_of(self.cfg.head_dim, scale)
        strides = {f"{n}_{a}": int(t.stride(d)) for n, t in (("q", q), ("k", k), ("v", v))
                   for a, d in (("sb", 0), ("sh", 1), ("ss", 2))}
        sig, specs = self.signature()
        grid, extra = self.ir_grid(q)
        site = LaunchSite(self.module, self.kernel_name, grid, self.ir.block, signature=sig,
                          specs=specs, smem_bytes=smem_bytes(self.ir))
        names = [p.name for p in self.ir.params] + [s.name for s in self.ir.scalars]
        fixed = dict(sizes, **strides, scale_log2=log2_scale, **extra)
        unknown = set(names) - set(fixed) - set(rows) - {"O", "o_sb", "o_sh", "o_ss"}
        if unknown:
            raise LaunchError(f"{self.kernel_name}: the IR takes {sorted(unknown)}, which "
                              "this launcher has no value for")
        if wide:        # this launch's own values proved (out: as given, or contiguous)
            vals = launch_values(q, k, v, out)
            o_st = (vals["o_sb"], vals["o_sh"], vals["o_ss"])
            prove_launch(self.ir, self.source, vals, grid)

        def run(q, k, v, out):
            if out is None:
                out = torch.empty(tuple(q.shape), dtype=q.dtype, device=q.device)
                if not wide and not int_offsets_fit(out):
                    raise LaunchError(f"{self.kernel_name}: out has offsets past 2^31")
            elif wide and tuple(out.stride()[:3]) != o_st:
                raise LaunchError(f"{self.kernel_name}: out strides {tuple(out.stride())} "
                                  f"differ from the proved launch's {o_st}")
            vals = dict(fixed, O=out, o_sb=out.stride(0), o_sh=out.stride(1),
                        o_ss=out.stride(2))
            for tm in self.ir.params:
                if isinstance(tm, TensorMap):
                    t = {"Q": q, "K": k, "V": v}[tm.tensor]
                    vals[tm.name] = self._maps.get(t, rows[tm.name])
            site([vals[n] for n in names])
            return out
        return run


class IrWsSerialAttention(IrWsAttention):
    """The serial warp-specialised d128 prefill (:func:`~.wgmma_ws_ir_serial
    .build_ws_serial_ir`: S, softmax, P V each waited for, two-stage rings) launched as
    :class:`IrWsAttention`; ``pingpong``: the consumers take turns to issue their GEMMs (the
    template's ping-pong)."""

    def __init__(self, causal: bool = False, dtype: str = "bf16", *,
                 pingpong: bool = False, backend: str = "auto") -> None:
        self._init_ir(build_ws_serial_ir(causal, dtype, pingpong=pingpong), backend)
