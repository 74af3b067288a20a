"""Which NVIDIA kernel runs a call: ``gemm()`` and ``flash_attention()`` pick mma.sync or wgmma
(:func:`pick_atom`) and a configuration, and build each configuration once.

This module sits above the builders (:mod:`kernels.nvidia.gemm`, :mod:`kernels.nvidia.wgmma`,
:mod:`kernels.nvidia.attention`, :mod:`kernels.nvidia.wgmma_attention`), so they never import
each other's siblings to dispatch (the cycles gemm <-> wgmma and attention <-> wgmma_attention
of issue 13).  The old paths ``kernels.cuda_gemm.gemm`` and ``kernels.cuda_attention
.flash_attention`` still work (``kernels.compat``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple

from ..errors import LaunchError
from ..runtime.cuda import device_info, require_gpu_tensors
from ..runtime.launch_cache import BoundedCache, PerStream, tensor_key
from .attention import FlashAttention, decode_attention as one_pass_decode
from .decode_onepass_ir import IrOnePassDecode, onepass_config, onepass_ir_name
from .decode_mma import MMA_BLOCKS_PER_SM, MmaDecodeConfig, heads_per_mma_block, mma_warps
from .decode_fused_ir import IrFusedMmaDecode
from .decode_padded import (TEMPLATE_HEAD_DIMS, ir_head_dim_ok, padded_decode_on_ir,
                            policy_head_dim, qk_width, v_width)
from .decode_ir import ir_split_supported
from .decode_mma_ir import IrMmaSplitKVDecode, IrSplitKVDecode
from .decode_splitkv import SplitKVDecode, SplitKVDecodeConfig, heads_per_block
from .builder import short_dtype
from ..select import select_gemm
from ..selection import H100, GemmChoice, GemmProblem, Target, nvidia_target
from .gemm import CudaGemm, CudaGemmConfig
from .gemm_rt_ir import IrMmaRtGemm, mma_rt_at_parity, mma_rt_kernel_name, mma_rt_refusal
from .wgmma import WgmmaGemm, WgmmaGemmConfig
from . import prefill_ir
from .prefill_ir import (ir_prefill, ir_prefill_launches, is_ir_prefill, prefill_config,
                         wide_prefill_launches)
from .prefill_select import choose_prefill, prefill_on_ir
from .wgmma_tma import TmaGemm, TmaGemmConfig, padded_empty, row_copier, tma_padded, tma_ready
from .wgmma_tma_ir import IrTmaGemm, ir_form_refusal, ir_kernel_name
from .wgmma_tma_ir_reduce import reduce_kernel_name
from .wgmma_rt_ir import IrWgmmaRtGemm, rt_ir_refusal, rt_kernel_name
from .wgmma_rt_ir_split import IrWgmmaRtSplitGemm, split_ir_refusal, split_kernel_name
from .wgmma_attention import WGMMA_FLASH_DEFAULTS, WgmmaFlashAttention, WgmmaFlashConfig
from .wgmma_attention_ws import WsFlashAttention, WsFlashConfig
from .ws_tma_loads import tma_attention_ready

__all__ = ["pick_atom", "capability_of", "gemm", "choose_gemm", "compiled_gemm", "wgmma_gemm",
           "flash_attention", "compiled_flash", "device_target", "row_vector",
           "decode_attention", "choose_decode", "DecodeChoice", "mma_decode_config",
           "short_cache_on_ir",
           "GemmPlan", "gemm_plan_key", "run_gemm_plan", "gemm_runner", "clear_plans"]


_GEMMS: Dict[Any, CudaGemm] = {}


def pick_atom(capability: Tuple[int, int], vec: int, atom: str = "auto") -> str:
    """``"wgmma"`` or ``"mma"`` for a device of compute ``capability`` and inputs allowing
    ``vec``-element (``2 * vec``-byte) copies.

    ``atom="auto"``: wgmma (:mod:`kernels.cuda_wgmma`) on compute capability 9.0 (H100/H200;
    its ``sm_90a`` code runs nowhere else) when 16-byte copies are possible, else mma.sync.
    ``"wgmma"`` refuses what wgmma cannot run; ``"mma"`` always takes mma.sync."""
    if atom not in ("auto", "wgmma", "mma"):
        raise LaunchError(f"atom must be 'auto', 'wgmma' or 'mma', got {atom!r}")
    wg_ok = tuple(capability) == (9, 0) and vec == 8
    if atom == "wgmma" and not wg_ok:
        raise LaunchError(
            f"atom='wgmma' needs compute capability 9.0 (H100/H200; this device is "
            f"{capability[0]}.{capability[1]}) and rows, leading dimensions and pointers that "
            f"allow 16-byte copies (here {2 * vec}-byte); use atom='auto' or 'mma'")
    if atom == "mma":
        return "mma"
    return "wgmma" if wg_ok else "mma"


def row_vector(a, b) -> int:
    """The widest copy vector (8, 4, 2 elements; 1 if none) that both matrices' row lengths,
    leading dimensions and data pointers allow."""
    inner_b = b.shape[1] if b.dim() == 2 else 0
    for v in (8, 4, 2):
        if all(x % v == 0 for x in (a.shape[1], a.stride(0), inner_b, b.stride(0))) and \
                a.data_ptr() % (2 * v) == 0 and b.data_ptr() % (2 * v) == 0:
            return v
    return 1


def device_target(t) -> Target:
    """The selection target of the CUDA device holding ``t``: compute capability and SM count
    read from the device (an H100 target for a CPU tensor: the launch then refuses it)."""
    if not getattr(t, "is_cuda", False):
        return H100
    info = device_info(device_index(t))
    return nvidia_target(info["cc"], info["sms"], info["name"])


def device_index(t) -> int:
    """The CUDA device index of tensor ``t`` (the current device when it has none)."""
    import torch
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def _check_2d(a, b) -> str:
    dt = short_dtype(a)
    if dt is None:
        raise LaunchError(f"a: dtype {a.dtype}; the NVIDIA GEMM takes float16 or bfloat16")
    for t, nm in ((a, "a"), (b, "b")):
        if not hasattr(t, "dim") or t.dim() != 2 or t.stride(1) != 1:
            raise LaunchError(f"{nm} must be a 2-D tensor with a contiguous last dimension, got "
                              f"shape {tuple(getattr(t, 'shape', ()))} strides "
                              f"{tuple(t.stride()) if hasattr(t, 'stride') else None}; "
                              "pass .contiguous()")
    return dt


def choose_gemm(a, b, *, b_major: str = "n", atom: str = "auto", target: Optional[Target] = None
                ) -> GemmChoice:
    """The kernel :func:`gemm` runs for these tensors (:func:`kernels.select.select_gemm` on
    the problem and the device), with its reason: ``print(choose_gemm(a, b))``."""
    dt = _check_2d(a, b)
    m, k = a.shape
    n = b.shape[1] if b_major == "n" else b.shape[0]
    if min(m, n, k) < 1:
        raise LaunchError(f"empty GEMM: M={m}, N={n}, K={k}")
    problem = GemmProblem(int(m), int(n), int(k), dt, b_major, row_vector(a, b))
    choice = select_gemm(problem, target or device_target(a), atom)
    cfg = choice.config
    if isinstance(cfg, TmaGemmConfig) and cfg.split_k and choice.splits == 1 and \
            ir_form_refusal(one_split_form(cfg)) is None:
        # one split needs no workspace, ticket or reduce: the verified IR direct store runs it
        cfg = one_split_form(cfg)
        choice = replace(choice, config=cfg, reason=choice.reason + f"; one split: {cfg.name} "
                         "(the direct store, no workspace)")
    if isinstance(cfg, TmaGemmConfig) and tma_on_ir(cfg):
        if cfg.split_k and cfg.reduce == "kernel":      # two launches: name both
            choice = replace(choice, reason=choice.reason + f"; then {reduce_kernel_name(cfg)}"
                             " (the IR reduce kernel)")
        return replace(choice, kernel=ir_kernel_name(cfg))     # what tma_gemm(cfg) runs
    if isinstance(cfg, WgmmaGemmConfig) and CP_ASYNC_WGMMA_IR and rt_ir_refusal(cfg) is None:
        return replace(choice, kernel=rt_kernel_name(cfg))     # what wgmma_gemm(cfg) runs
    if isinstance(cfg, WgmmaGemmConfig) and CP_ASYNC_WGMMA_IR and CP_SPLIT_ON_IR and \
            split_ir_refusal(cfg) is None:     # two launches: name both
        return replace(choice, kernel=split_kernel_name(cfg), reason=choice.reason +
                       f"; then {split_kernel_name(cfg)}_reduce (the IR reduce kernel)")
    if isinstance(cfg, WgmmaGemmConfig) and cfg.split_k:
        return replace(choice, reason=choice.reason + "; the cp.async split-K runs the string "
                       "TEMPLATE (WgmmaGemm + the splitk reduce kernel), not verified IR "
                       "(CP_SPLIT_ON_IR is off)")
    if isinstance(cfg, CudaGemmConfig) and MMA_RT_IR and mma_rt_refusal(cfg) is None:
        if mma_rt_at_parity(problem, cfg):          # what compiled_gemm(cfg) runs
            return replace(choice, kernel=mma_rt_kernel_name(cfg), reason=choice.reason +
                           "; the verified IR form (at least the template's speed here)")
        return replace(choice, reason=choice.reason + "; the template (the IR form measured "
                       "below 0.98x of it on a launch of one tile)")
    return choice


def one_split_form(cfg: TmaGemmConfig) -> TmaGemmConfig:
    """The non-split direct-store configuration of split-K ``cfg`` (same tile, stages, group
    and A box): what a launch of ``cfg`` with ONE split computes (the inline form then rounds
    ``0.f + acc`` straight to C, the reduce-kernel form rounds ``0.f + W[0]`` = the same
    accumulator; a wgmma sum is never -0.0, so ``0.f + acc`` has acc's bits), bitwise, and
    the form the verified IR kernel has (``wgmma_tma_ir``)."""
    return replace(cfg, split_k=False, reduce="kernel", store="direct")


def gemm(a, b, out=None, *, b_major: str = "n", config: Any = None, atom: str = "auto",
         splits: int = 1):
    """``a @ b`` (``b_major="n"``) or ``a @ b.T`` (``b_major="k"``) with the NVIDIA builders.

    Without ``config``: :func:`choose_gemm` picks the kernel (wgmma on H100/H200, mma.sync
    elsewhere), the tile against the device's SM count and the split-K count; any M, N, K and
    any leading dimensions run (vectors cut by an edge or misaligned take the kernels' edge
    copy).  The choice is made once per :func:`gemm_plan_key` (the operands' dtype, shape,
    strides, device and pointer alignment; ``b_major``, ``atom``) and re-used.  ``config`` may
    be a :class:`CudaGemmConfig` or a ``WgmmaGemmConfig`` (``splits`` then applies to a
    ``split_k`` one)."""
    if config is None:
        # the fast path: one key of the three operands -> the bound call of the kernel
        # (its checks passed when it was stored); issue 20, host time per call
        try:
            fast = (tensor_key(a), tensor_key(b), None if out is None else tensor_key(out),
                    b_major, atom)
        except (AttributeError, TypeError):
            fast = None
        run = _GEMM_RUNS.get(fast)
        if run is not None:
            return run(a, b, out)
        key = gemm_plan_key(a, b, b_major, atom)
        plan = _GEMM_PLANS.get(key)
        if plan is None:
            choice = choose_gemm(a, b, b_major=b_major, atom=atom)
            require_gpu_tensors("gemm", a=a, b=b, out=out)     # before the build verifies
            plan = _GEMM_PLANS.put(key, GemmPlan(compiled_gemm(choice.config,
                                                               template=not choice.kernel),
                                                 choice.splits,
                                                 choice.pad_rows, choice.pad_operands))
        run = gemm_runner(plan, a, b, out)
        c = run(a, b, out)
        _GEMM_RUNS.put(fast, run)          # stored only once a call has passed every check
        return c
    if splits != 1 and not isinstance(config, (TmaGemmConfig, WgmmaGemmConfig)):
        raise LaunchError(f"splits={splits}: split-K is a wgmma configuration "
                          "(WgmmaGemmConfig(split_k=True))")
    require_gpu_tensors("gemm", a=a, b=b, out=out)
    return run_gemm_plan(GemmPlan(compiled_gemm(config), splits, 0), a, b, out)


@dataclass(frozen=True)
class GemmPlan:
    """What :func:`gemm` decided for one :func:`gemm_plan_key`: the built kernel, its split
    count and the row padding the selection asked for (``GemmChoice.pad_rows`` of the operands
    in ``pad_operands``)."""

    kernel: Any
    splits: int
    pad_rows: int
    pad_operands: str = "ab"

    def line(self, operand: str) -> int:
        """The row alignment in bytes ``operand`` ("a" or "b") must have before the TMA kernel
        reads it (0: the 16 bytes TMA needs)."""
        return self.pad_rows if operand in self.pad_operands else 0


_GEMM_PLANS: BoundedCache = BoundedCache(256)
_GEMM_RUNS: BoundedCache = BoundedCache(256)


def gemm_plan_key(a, b, b_major: str, atom: str):
    """The hashable key of everything :func:`choose_gemm` reads (each operand's
    :func:`~kernels.runtime.launch_cache.tensor_key`, ``b_major``, ``atom``), or None for
    operands that are not tensors (they take the checking path, and its error)."""
    try:
        return (tensor_key(a), tensor_key(b), b_major, atom)
    except (AttributeError, TypeError):
        return None


def run_gemm_plan(plan: GemmPlan, a, b, out=None):
    """Run ``plan``'s kernel on ``a``, ``b`` (its own argument checks apply)."""
    g = plan.kernel
    config = g.cfg
    if isinstance(config, TmaGemmConfig):
        # the selection chose to copy the operands into buffers whose rows start on
        # pad_rows-byte lines (at least 16 bytes: what TMA can address)
        a = a if tma_ready(a, plan.line("a")) else tma_padded(a, plan.line("a"))
        b = b if tma_ready(b, plan.line("b")) else tma_padded(b, plan.line("b"))
        return tma_kernel_for(g, a, b, out, plan.splits)(a, b, out, splits=plan.splits)
    if isinstance(config, WgmmaGemmConfig):
        return g(a, b, out, splits=plan.splits)
    return g(a, b, out)


def gemm_runner(plan: GemmPlan, a, b, out=None) -> Callable[..., Any]:
    """``run(a, b, out)`` of ``plan`` for every call whose operands have these operands'
    :func:`~kernels.runtime.launch_cache.tensor_key` s: the kernel's bound call itself (its
    checks run here, raising for bad input) when no operand needs the TMA padding copy, else
    :func:`run_gemm_plan` (which copies per call)."""
    g = plan.kernel
    config = g.cfg
    if isinstance(config, TmaGemmConfig):
        g = tma_kernel_for(g, a, b, out, plan.splits)
        pad_a, pad_b = not tma_ready(a, plan.line("a")), not tma_ready(b, plan.line("b"))
        if pad_a or pad_b:
            return padded_runner(g, plan, a, b, out, pad_a, pad_b)
        return g.bound(a, b, out, plan.splits)
    if isinstance(config, WgmmaGemmConfig):
        return g.bound(a, b, out, plan.splits)
    return g.bound(a, b, out)


def padded_runner(g, plan: GemmPlan, a, b, out, pad_a: bool, pad_b: bool
                  ) -> Callable[..., Any]:
    """``run(a, b, out)`` of a TMA kernel whose operands ``a`` / ``b`` (``pad_a`` / ``pad_b``)
    are first copied onto ``plan.line`` -byte rows: the padded buffers, their copiers
    (:func:`~kernels.nvidia.wgmma_tma.row_copier`: element width and wide views decided
    once) and the kernel's bound call on them are made once per CUDA stream (``PerStream``:
    launches on one stream run in order, so a call's copy never overwrites a buffer an earlier
    kernel still reads) and kept, so a call is the copies and one prepared launch (the
    buffers' pointers, hence their tensor maps, stay the same).  Issue 20: the call's host
    time must stay below the kernels' ~48 us (4000x3000x1000) or the GPU idles between calls
    and the wall time is host + device."""
    def make(device):
        pa = padded_empty(a, plan.line("a")) if pad_a else None
        pb = padded_empty(b, plan.line("b")) if pad_b else None
        bound = g.bound(a if pa is None else pa, b if pb is None else pb, out, plan.splits)
        return (None if pa is None else row_copier(pa, a),
                None if pb is None else row_copier(pb, b), pa, pb, bound)
    spaces = PerStream(make)

    def run(a, b, out):
        (copy_a, copy_b, pa, pb, bound), _ = spaces.on(a.device)
        if pa is None:
            copy_b(b)
            return bound(a, pb, out)
        copy_a(a)
        if pb is None:
            return bound(pa, b, out)
        copy_b(b)
        return bound(pa, pb, out)
    return run


def compiled_gemm(cfg: Any, template: bool = False) -> CudaGemm:
    """The kernel of a :class:`CudaGemmConfig`, ``WgmmaGemmConfig`` or ``TmaGemmConfig``,
    built once per configuration (its module compiles on first launch).  Every
    ``TmaGemmConfig`` runs the IR-built kernel (:func:`tma_gemm`; :class:`IrTmaGemm`: its IR
    and printed text verified when it is built, ~1-4 s once per configuration, a passing
    verdict kept on disk by content: kernels.verify.report_cache; bitwise equal on the H100 at
    0.98-1.05x the template's device time, docs/PERFORMANCE.md), the template
    :class:`TmaGemm` only where :func:`tma_kernel_for` finds the IR's 32-bit offsets too small
    or a switch is turned off.

    What still runs a string template (not verified IR): a ``WgmmaGemmConfig(split_k=True)``
    only where its IR form's 32-bit offsets are too small or :data:`CP_SPLIT_ON_IR` is off
    (the cp.async wgmma GEMM's split-K, which the selection makes for split-K problems whose
    rows are not 16-byte aligned, otherwise runs as the verified :class:`IrWgmmaRtSplitGemm`:
    split kernel + IR reduce kernel; the template is :class:`WgmmaGemm` with gridDim.y splits
    and the reduce kernel of :mod:`.splitk`), a TMA call whose C or workspace
    has 2^31 elements or more, and the mma.sync :class:`CudaGemm` where the IR form is not at
    parity: a :class:`CudaGemmConfig` runs the IR-built runtime-size kernel where it has the
    form (:func:`mma_gemm`), the template :class:`CudaGemm` with ``template=True`` (what
    :func:`gemm` asks for where :func:`choose_gemm` did not name the IR kernel)."""
    key = (cfg, "template") if template and isinstance(cfg, CudaGemmConfig) else cfg
    g = _GEMMS.get(key)
    if g is None:
        g = _GEMMS[key] = (tma_gemm(cfg) if isinstance(cfg, TmaGemmConfig) else
                           wgmma_gemm(cfg) if isinstance(cfg, WgmmaGemmConfig) else
                           CudaGemm(cfg) if key != cfg else mma_gemm(cfg))
    return g


#: run the mma.sync GEMM as the IR-built runtime-size kernel (:class:`IrMmaRtGemm`) instead of
#: the template where it has the form (see :func:`mma_gemm`)
MMA_RT_IR = True


def mma_gemm(cfg: CudaGemmConfig) -> Any:
    """The kernel that runs ``cfg``: the verified IR-built runtime-size one
    (:mod:`.gemm_rt_ir`, bitwise the template) where it has the form (``mma_rt_refusal``:
    16-byte copy vectors, an even number of k steps per tile) and :data:`MMA_RT_IR`, else the
    string template :class:`CudaGemm`."""
    if MMA_RT_IR and mma_rt_refusal(cfg) is None:
        return IrMmaRtGemm(cfg)
    return CudaGemm(cfg)


#: run the non-split-K cp.async wgmma GEMM as the IR-built runtime-size kernel
#: (:class:`IrWgmmaRtGemm`) instead of the template (see :func:`wgmma_gemm`)
CP_ASYNC_WGMMA_IR = True


#: run the cp.async split-K (``WgmmaGemmConfig(split_k=True)``) as the IR split kernel + IR
#: reduce kernel (:class:`IrWgmmaRtSplitGemm`) instead of the template: on since the IR
#: epilogue's row / column Lets (H100 2026-11-24, session 11: bitwise equal, 0.98-0.99x the
#: template's device time at the three long-K shapes, 1.15-1.25x at the small ones; before
#: them 0.89-0.96x; benchmarks/results/nvidia_wgmma_rt_split_ir_h100_2026-11-24*.json)
CP_SPLIT_ON_IR = True


def wgmma_gemm(cfg: WgmmaGemmConfig) -> Any:
    """The kernel that runs ``cfg``: the verified IR-built runtime-size one
    (:mod:`.wgmma_rt_ir`, or for split-K :mod:`.wgmma_rt_ir_split` where
    :data:`CP_SPLIT_ON_IR`) where :data:`CP_ASYNC_WGMMA_IR`, else the string template
    :class:`WgmmaGemm`."""
    if CP_ASYNC_WGMMA_IR and rt_ir_refusal(cfg) is None:
        return IrWgmmaRtGemm(cfg)
    if CP_ASYNC_WGMMA_IR and CP_SPLIT_ON_IR and split_ir_refusal(cfg) is None:
        return IrWgmmaRtSplitGemm(cfg)
    return WgmmaGemm(cfg)


def tma_kernel_for(g: TmaGemm, a, b, out, splits: int = 1) -> TmaGemm:
    """The TMA kernel that runs these tensors for plan kernel ``g``: the direct-store form
    where ``out``'s rows are not 16-byte aligned (the TMA store cannot address them), and the
    template where the IR's 32-bit C or workspace offsets would overflow
    (:meth:`IrTmaGemm.fits`)."""
    cfg = g.cfg
    if cfg.store == "tma" and out is not None and not tma_ready(out):
        g = compiled_gemm(replace(cfg, store="direct"))
    n = b.shape[1] if cfg.b_major == "n" else b.shape[0]
    if isinstance(g, IrTmaGemm) and not g.fits(a.shape[0], n if out is None else out.stride(0),
                                               n, splits):
        g = _TEMPLATES.get(g.cfg) or _TEMPLATES.setdefault(g.cfg, TmaGemm(g.cfg))
    return g


_TEMPLATES: Dict[Any, TmaGemm] = {}


#: run the two-launch split-K (``reduce="kernel"``: the selection's 64x256 split tile) as the
#: IR split kernel + IR reduce kernel (:mod:`.wgmma_tma_ir_reduce`) instead of the template:
#: H100 2026-11-24, bitwise equal, device time (split + reduce, CUPTI) 1.006x the template's
#: at the selection's 192x3072x32768 (3 splits), 1.016-1.018x at two config= shapes
#: (benchmarks/results/nvidia_tma_ir_rest_h100_2026-11-24.json)
REDUCE_LAUNCH_ON_IR = True
#: run ``ctas_per_sm=2`` configurations (``config=`` only; the selection makes none) as the
#: IR-built kernel with launch bounds 2 instead of the template: same run, bitwise equal,
#: device time 0.982x (TMA store, 1024x4096x1000) to 1.011x (one-launch split-K, direct store)
TWO_CTAS_ON_IR = True


def tma_on_ir(cfg: TmaGemmConfig) -> bool:
    """Does :func:`tma_gemm` run ``cfg`` as the verified IR-built kernel?  Every form the
    template has is IR (``wgmma_tma_ir.ir_form_refusal``); the two-launch split-K and two CTAs
    per SM follow their switches (:data:`REDUCE_LAUNCH_ON_IR`, :data:`TWO_CTAS_ON_IR`: on
    where the H100 measured them at parity, docs/PERFORMANCE.md)."""
    if ir_form_refusal(cfg) is not None:
        return False
    if cfg.split_k and cfg.reduce == "kernel" and not REDUCE_LAUNCH_ON_IR:
        return False
    return cfg.ctas_per_sm == 1 or TWO_CTAS_ON_IR


def tma_gemm(cfg: TmaGemmConfig) -> TmaGemm:
    """The kernel that runs ``cfg``: the verified IR-built one where :func:`tma_on_ir` says
    so (TMA or direct store; no split-K, the one-launch or the two-launch split-K; one or two
    CTAs per SM; whole or short A boxes), else the string template :class:`TmaGemm`."""
    return IrTmaGemm(cfg) if tma_on_ir(cfg) else TmaGemm(cfg)


def capability_of(t) -> Tuple[int, int]:
    """Compute capability of the CUDA device holding ``t`` ((0, 0) for a CPU tensor: the
    launch then refuses it with its own message); read once per device (``device_info``)."""
    if not getattr(t, "is_cuda", False):
        return (0, 0)
    return tuple(device_info(device_index(t))["cc"])


_FLASH: Dict[Any, FlashAttention] = {}


def flash_attention(q, k, v, *, causal: bool = False, scale: Optional[float] = None, out=None,
                    config: Any = None, atom: str = "auto"):
    """``softmax(q k^T * scale [+ causal mask]) v`` with the NVIDIA prefill kernels.

    Without ``config``: :func:`kernels.nvidia.prefill_select.choose_prefill` -- on compute
    capability 9.0 (H100/H200) the wgmma kernel (:mod:`kernels.cuda_wgmma_attention`) with the
    tile measured best for the head_dim and mask, else the mma.sync kernel; ``atom="mma"``
    forces mma.sync, ``atom="wgmma"`` refuses what wgmma cannot run.
    ``config`` may be a :class:`FlashConfig` or a ``WgmmaFlashConfig``."""
    dt = short_dtype(q)
    if dt is None:
        raise LaunchError(f"q: dtype {q.dtype}; the NVIDIA attention takes float16 or bfloat16")
    if config is None:
        # the choice reads q's dtype, head_dim, device (its compute capability), whether TMA
        # can address the tensors and the sequence length: made once per key, like gemm()'s
        tma_ok = all(tma_attention_ready(t) for t in (q, k, v))
        seq = max(q.shape[2], k.shape[2])
        key = (q.dtype, q.shape[-1], q.device, bool(causal), atom, tma_ok, seq, k.shape[2])
        fa = _FLASH_PLANS.get(key)
        if fa is None:
            # the device first: building the kernel verifies it (seconds on a CPU)
            require_gpu_tensors("flash_attention", q=q, k=k, v=v, out=out)
            d = q.shape[-1]
            if atom == "wgmma" and d not in WGMMA_FLASH_DEFAULTS:
                raise LaunchError(f"atom='wgmma': head_dim {d}; the wgmma kernel takes 64, 128 "
                                  "or 256")
            config = choose_prefill(dt, d, causal, pick_atom(capability_of(q), 8, atom),
                                    tma_ok=tma_ok, seq=seq, seq_kv=k.shape[2]).config
            fa = _FLASH_PLANS.put(key, compiled_flash(config))
        return _within_offsets(fa, q, k, v, out)(q, k, v, out=out, scale=scale)
    if config.causal != causal:
        raise LaunchError(f"config.causal={config.causal} but causal={causal}")
    require_gpu_tensors("flash_attention", q=q, k=k, v=v, out=out)
    return _within_offsets(compiled_flash(config), q, k, v, out)(q, k, v, out=out, scale=scale)


def _within_offsets(fa: FlashAttention, q, k, v, out) -> FlashAttention:
    """``fa``, or where ``fa`` is the IR-built prefill and cannot launch these tensors
    (:func:`~.prefill_ir.ir_prefill_launches`: an element offset reaching 2^31, the IR
    indexing with 32-bit ``int``; batch x heads past grid y; the warp-specialised kernel's TMA
    maps unable to address them) the wide IR form of its configuration where that launches
    (with :data:`~.prefill_ir.WIDE_PREFILL_ON_IR`), else its template."""
    if is_ir_prefill(fa) and not ir_prefill_launches(fa, q, k, v, out):
        cfg = prefill_config(fa)
        if prefill_ir.WIDE_PREFILL_ON_IR and wide_prefill_launches(fa, q, k, v):
            wide = compiled_flash(cfg, wide=True)
            if ir_prefill_launches(wide, q, k, v, out):     # proved at this launch
                return wide
        return compiled_flash(cfg, template=True)
    return fa


_FLASH_PLANS: BoundedCache = BoundedCache(256)


def compiled_flash(cfg: Any, template: bool = False, wide: bool = False) -> FlashAttention:
    """The kernel of a :class:`FlashConfig`, ``WgmmaFlashConfig`` or ``WsFlashConfig``, built once per
    configuration (its module compiles on first launch): a configuration whose IR prefill runs
    at parity (:func:`.prefill_select.prefill_on_ir`: mma.sync, wgmma or warp-specialised) is
    the verified IR kernel (:func:`~.prefill_ir.ir_prefill`) unless ``template``; ``wide``:
    that kernel's 64-bit form (:mod:`.prefill_wide`)."""
    ir = not template and prefill_on_ir(cfg)
    if wide and not ir:
        raise LaunchError(f"{cfg.name}: no wide IR form (the configuration runs its template)")
    key = (("wide", cfg) if wide else cfg) if ir or not prefill_on_ir(cfg) \
        else ("template", cfg)
    fa = _FLASH.get(key)
    if fa is None:
        kind = {WgmmaFlashConfig: WgmmaFlashAttention, WsFlashConfig: WsFlashAttention}
        fa = _FLASH[key] = ir_prefill(cfg, wide) if ir else \
            kind.get(type(cfg), FlashAttention)(cfg)
    return fa


# --------------------------------------------------------------------------------- decode

SHORT_KV = 64      # up to this many keys no KV split pays: one pass (one split) per row
SHORT_IR_KEYS = 17     # ... and from this many keys, at d64/d128 and fewer (batch, KV head,
                       # head chunk) blocks than MMA_BLOCKS_PER_SM per SM, the verified IR
                       # kernel with one split runs instead of the one-pass template
                       # (H100 2026-11-24, benchmarks/gpu_decode_all_ir.py, medians of 2
                       # rounds x 10: B1/8/32 x H32/8 and B1/8 x H32/32, Skv 17 and 64:
                       # device 4.1-6.9 us against the one-pass's 7.1-22.1 us, back-to-back
                       # wall 23-42 us against 60-112 us; at Skv 1 the one-pass is faster on
                       # the device, 1.6-2.0 against 3.9-5.0 us, and with >= 1024 blocks,
                       # e.g. B32 H32/32 18-41 us against 2-24 us, B30720 10-95x: there the
                       # one-pass kernel keeps running, since 2026-11-24 the verified IR one,
                       # ONE_PASS_IR below; these bounds were measured against the template,
                       # which the IR one-pass is 1.0-2.1x faster than at 8-64 keys)


#: run the short caches' one-pass decode as the IR-built, verified kernel
#: (:class:`~.decode_onepass_ir.IrOnePassDecode`) instead of the template: bitwise equal at
#: every row measured (H100 2026-11-24, benchmarks/gpu_decode_onepass_ir.py: Skv 1/8/16 at
#: B1/B32 x H32/8 and H32/32 x d64/d128, d256 Skv 32, Skv 17/64 at B32 H32/32, B30720), device
#: time 1.17-2.15x the template's from 8 keys on, 0.93-1.14x at one key (1.6-1.8 us,
#: launch-bound: B32 H32/32 Skv 1 d128 measured 1.010 and 0.929 in two runs), back-to-back wall
#: 2.0-3.4x lower (its call binds once); benchmarks/results/nvidia_onepass_ir_h100_2026-11-24*
ONE_PASS_IR = True


@dataclass(frozen=True)
class DecodeChoice:
    """The decode kernel for a problem: ``kind`` "one_pass" (:class:`~.decode_onepass_ir
    .IrOnePassDecode`, or the template :class:`~.attention.DecodeAttention` with
    :data:`ONE_PASS_IR` off: D/8 lanes per (batch, head) row, for short caches and big
    batches) or
    "split_kv" (:class:`~.decode_splitkv.SplitKVDecode`: GQA heads share K/V reads, the KV
    split over blocks, exact LSE merge); ``config`` (None for one_pass: built per call) and
    the reason."""

    kind: str
    config: Any
    reason: str

    def __str__(self) -> str:
        name = getattr(self.config, "name", "lg_decode (built per call)")
        return f"{self.kind} {name}: {self.reason}"


def _sms(q) -> int:
    """The SM count of q's GPU; an H100's 132 for a tensor not on a GPU (offline planning)."""
    if not getattr(q, "is_cuda", False):
        return 132
    import torch
    idx = q.device.index if q.device.index is not None else torch.cuda.current_device()
    return device_info(idx)["sms"]


def choose_decode(q, k, *, out_dtype: str = "f16") -> DecodeChoice:
    """Which decode kernel :func:`decode_attention` runs for q (B, Hq, [1,] D) and
    k (B, Hkv, Skv, D), and why."""
    dt = short_dtype(q)
    if dt is None:
        raise LaunchError(f"q: dtype {q.dtype}; the decode kernels take float16 or bfloat16")
    if not hasattr(k, "dim") or k.dim() != 4:
        raise LaunchError(f"k must be (batch, kv_heads, seqlen_kv, head_dim), got "
                          f"{tuple(getattr(k, 'shape', ()))}")
    hq, hkv, skv = q.shape[1], k.shape[1], k.shape[2]
    if hkv < 1 or hq % hkv:
        raise LaunchError(f"q has {hq} heads, k/v {hkv}: GQA needs Hq a multiple of Hkv")
    group = hq // hkv
    check_decode_head_dim(q.shape[-1])
    if padded_decode_on_ir(q.shape[-1]):
        cfg = mma_decode_config(q, k, out_dtype)
        D = q.shape[-1]
        return DecodeChoice("split_kv", cfg, f"head_dim {D} (no template decode kernel takes "
                            f"it): all {cfg.hg} of the {group} query heads per KV head share "
                            f"each K/V read, dot products on tensor cores over D padded to "
                            f"{qk_width(D)} (Q K^T) / {v_width(D)} (P V) with zero-filled "
                            "loads, KV split to fill the SMs, one launch "
                            "(IrFusedMmaDecode: built as kernel IR and verified at this "
                            "head_dim; rule decode_padded.padded_decode_on_ir)")
    if skv <= SHORT_KV:
        if short_cache_on_ir(q, k):
            cfg = mma_decode_config(q, k, out_dtype)
            return DecodeChoice("split_kv", cfg, f"seqlen_kv {skv} <= {SHORT_KV}, >= "
                                f"{SHORT_IR_KEYS}, few blocks: one split of the tensor-core "
                                f"kernel, all {cfg.hg} of the {group} query heads per KV head "
                                "sharing each K/V read (IrFusedMmaDecode: built as kernel IR "
                                "and verified; measured faster than the one-pass template "
                                "here)")
        if ONE_PASS_IR:
            name = onepass_ir_name(onepass_config(q, k, out_dtype))
            return DecodeChoice("one_pass", None, f"seqlen_kv {skv} <= {SHORT_KV}: one lane "
                                "group per (batch, head) row, no split (IrOnePassDecode "
                                f"{name}: the one-pass kernel built as kernel IR and "
                                "verified; bitwise the template on the H100, 1.2-2.1x its "
                                "device time from 8 keys, 0.93-1.14x at one key; a call "
                                "whose offsets reach 2^31 runs its wide form, long long "
                                "strides)")
        return DecodeChoice("one_pass", None, f"seqlen_kv {skv} <= {SHORT_KV}: one lane group "
                            "per (batch, head) row, no split (the one-pass TEMPLATE kernel, "
                            "not verified IR: the IR kernel measured slower at this size)")
    cfg = mma_decode_config(q, k, out_dtype)      # head_dim 64 / 128 / 256 here
    return DecodeChoice("split_kv", cfg, f"seqlen_kv {skv} > {SHORT_KV}: all {cfg.hg} of "
                        f"the {group} query heads per KV head share each K/V read, dot "
                        "products on tensor cores; KV split to fill the SMs; one launch, "
                        "the last split block of a group merges (IrFusedMmaDecode: split "
                        "kernel, ticket and merge built as kernel IR and verified; a call "
                        "whose int offsets would leave int runs the split kernel's wide IR "
                        "form, proved at its launch, + the IR combine)")


def check_decode_head_dim(D: int) -> None:
    """A :class:`~kernels.errors.LaunchError` for a head_dim no decode kernel takes, naming the
    ones that are taken: 64 / 128 / 256 (the templates and the IR kernel) and every other
    multiple of 16 from 16 to 256 on the IR kernel while :func:`~.decode_padded
    .padded_decode_on_ir` holds (before that rule, such head dims were refused by the
    templates when built, after :func:`choose_decode` had named one)."""
    if D in TEMPLATE_HEAD_DIMS or padded_decode_on_ir(D):
        return
    off = " (that rule, decode_padded.PADDED_HEAD_DIMS_ON_IR, is switched off)" \
        if ir_head_dim_ok(D) else ""
    raise LaunchError(f"head_dim {D}: the decode kernels take 64, 128 and 256, and on the "
                      f"verified IR kernel every other multiple of 16 from 16 to 256{off}")


def short_cache_on_ir(q, k) -> bool:
    """Whether a cache of at most :data:`SHORT_KV` keys runs the verified IR kernel with one
    split rather than the one-pass template: :data:`SHORT_IR_KEYS` keys or more, head_dim 64
    or 128 (the sizes measured), and fewer blocks than ``MMA_BLOCKS_PER_SM`` per SM (4 warps;
    the one-pass kernel won every row of more)."""
    D, hkv, skv = q.shape[-1], k.shape[1], k.shape[2]
    hg = heads_per_mma_block(q.shape[1] // hkv)
    blocks = q.shape[0] * hkv * (q.shape[1] // hkv // hg)
    return SHORT_IR_KEYS <= skv <= SHORT_KV and D in (64, 128) and \
        blocks < MMA_BLOCKS_PER_SM * _sms(q)


def mma_decode_config(q, k, out_dtype: str = "f16") -> MmaDecodeConfig:
    """The tensor-core decode's configuration for q (B, Hq, [1,] D) and k (B, Hkv, Skv, D),
    head_dim 64/128/256: all heads of a KV head up to 8 per block, warps by
    :func:`~.decode_mma.mma_warps`.  ``chunk`` 1 and not the template's ``fused`` (its merge
    tail is compared with the template combine's text, not proved): the configurations the
    verified IR kernels are built for (:func:`~.decode_ir.ir_split_supported`)."""
    hkv, skv, D = k.shape[1], k.shape[2], q.shape[-1]
    group = q.shape[1] // hkv
    hg = heads_per_mma_block(group)
    # a padded head_dim (decode_padded) takes the warp rule of its policy head dim
    warps = mma_warps(q.shape[0] * hkv * (group // hg), _sms(q), policy_head_dim(D), hg, skv)
    return MmaDecodeConfig(in_dtype=short_dtype(q), out_dtype=out_dtype, head_dim=D, hg=hg,
                           warps=warps)


_SPLIT_DECODE: Dict[Any, SplitKVDecode] = {}
_ONE_PASS: Dict[Any, IrOnePassDecode] = {}


def decode_attention(q, k, v, *, out_dtype: Optional[str] = None, scale: Optional[float] = None,
                     out=None, kv_splits: Optional[int] = None):
    """One decode step ``softmax(q k^T * scale) v`` per (batch, query head), q (B, Hq, 1, D)
    or (B, Hq, D), k/v (B, Hkv, Skv, D), GQA when Hkv < Hq; fp16 out unless ``out_dtype``.
    The kernel is :func:`choose_decode`'s; ``kv_splits`` forces the split-KV kernel's count."""
    od = {None: "f16", "f16": "f16", "float16": "f16", "bf16": "bf16",
          "bfloat16": "bf16"}.get(out_dtype)
    if od is None:
        raise LaunchError(f"out_dtype must be 'f16' or 'bf16', got {out_dtype!r}")
    # choose_decode reads q's dtype, heads, head_dim and device (its SM count) and k's shape
    try:
        key = (q.dtype, q.shape, q.device, k.shape, od, kv_splits is None)
        hash(key)
    except (AttributeError, TypeError):
        key = None
    dec = _DECODE_PLANS.get(key)
    if dec is None:
        # the device first: building the kernel verifies it (seconds on a CPU)
        require_gpu_tensors("decode_attention", q=q, k=k, v=v, out=out)
        dec = _DECODE_PLANS.put(key, _decode_kernel(q, k, od, kv_splits))
    return dec(q, k, v, out=out, scale=scale, kv_splits=kv_splits)


_DECODE_PLANS: BoundedCache = BoundedCache(256)


def _decode_kernel(q, k, od: str, kv_splits: Optional[int]):
    """The callable :func:`decode_attention` runs: the one-pass kernel or a built split-KV
    kernel, per :func:`choose_decode` (``kv_splits`` forces split-KV)."""
    choice = choose_decode(q, k, out_dtype=od)
    if choice.kind == "one_pass" and kv_splits is None and ONE_PASS_IR:
        cfg = onepass_config(q, k, od)
        dec = _ONE_PASS.get(cfg)
        if dec is None:
            dec = _ONE_PASS[cfg] = IrOnePassDecode(cfg)     # verifies IR + text once
        return lambda q, k, v, out=None, scale=None, kv_splits=None: dec(
            q, k, v, out=out, scale=scale)
    if choice.kind == "one_pass" and kv_splits is None:
        return lambda q, k, v, out=None, scale=None, kv_splits=None: one_pass_decode(
            q, k, v, out_dtype=od, scale=scale, out=out)
    cfg = choice.config or SplitKVDecodeConfig(
        in_dtype=short_dtype(q), out_dtype=od, head_dim=q.shape[-1],
        hg=heads_per_block(q.shape[1] // k.shape[1]))
    dec = _SPLIT_DECODE.get(cfg)
    if dec is None:
        # both split kernels with the verified IR combine kernel (decode_mma_ir: bitwise
        # equal to the template's, 1.00-1.03x its speed on the H100 at the suite's split
        # shapes); construction verifies the combine IR and its printed text once
        # the tensor-core kernel's split kernel is IR too where it is built for the
        # configuration (decode_ir: bitwise equal to the template's, 0.99-1.03x its speed at
        # the suite's split rows on an H100, benchmarks/results/nvidia_ir_split_h100_*.json)
        # ... and in one launch (decode_fused_ir: the last block of a group merges; bitwise
        # the two-kernel form; H100 2026-11-24, suite split rows: device time 0.990-1.002x,
        # wall per call back to back B4 H32/8 Skv 4096 d256 96.1 -> 55.1 us,
        # benchmarks/results/nvidia_ir_fused_h100_2026-11-24.json)
        if isinstance(cfg, MmaDecodeConfig):
            kind = IrFusedMmaDecode if ir_split_supported(cfg) else IrMmaSplitKVDecode
        else:
            kind = IrSplitKVDecode
        dec = _SPLIT_DECODE[cfg] = kind(cfg)
    return dec


def clear_plans() -> None:
    """Forget every cached gemm / flash_attention / decode_attention choice, the bound calls
    of the kernels built here and the runtime's prepared launches (tests; a device whose
    properties changed): the next call of each key is chosen and checked again."""
    from ..runtime.cuda import clear_prepared
    for c in (_GEMM_PLANS, _GEMM_RUNS, _FLASH_PLANS, _DECODE_PLANS):
        c.clear()
    for g in (*_GEMMS.values(), *_TEMPLATES.values(), *_FLASH.values(), *_SPLIT_DECODE.values(),
              *_ONE_PASS.values()):
        g.forget_calls()
    clear_prepared()
