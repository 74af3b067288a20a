"""The tensor-core split-KV decode with BOTH kernels built as kernel IR and proved by the one
verifier (issue 20 item 1): the split kernel of :mod:`.decode_split_ir` and the combine kernel
of :mod:`.decode_mma_ir`, whose workspace layouts are checked to be the same
(:func:`.decode_split_ir.check_same_workspace`).

:class:`IrSplitMmaDecode` has :class:`.decode_mma.MmaSplitKVDecode`'s arguments, split choice
and results (bitwise: ``tests/test_nvidia_ir_split_gpu.py``); it always runs the combine, also
for one split (the template's split kernel then writes O itself).  A call whose int offsets
would leave int runs the split kernel's wide IR form (batch / head strides ``long long``,
verified with a launch past 2^31 and proved at each launch's values; the prefills' mechanism,
:mod:`.prefill_wide`) with the IR combine (:data:`WIDE_SPLIT_ON_IR`, on); where that proof
fails, or with the switch off, the template split kernel (long long offsets).
"""

from __future__ import annotations

import math
from typing import Any, Dict, NamedTuple, Optional

from ..printer.cuda import smem_bytes
from ..printer.cuda_attention import emit_cuda_attention
from .builder import ir_compiled_kernel
from .decode_mma import MmaDecodeConfig
from .decode_mma_ir import IrMmaSplitKVDecode, build_decode_combine_ir
from .decode_padded import TEMPLATE_HEAD_DIMS, ir_head_dim_ok
from .decode_split_ir import SPLIT_IR_SCALARS, build_decode_split_ir, check_same_workspace

__all__ = ["IrCall", "IrSplitMmaDecode", "ir_split_supported", "WIDE_SPLIT_ON_IR"]

_INT = 2 ** 31

#: a call whose 32-bit offsets do not fit runs the split kernel's wide IR form (``long long``
#: batch / head strides, proved at the launch) + the IR combine, instead of the template split
#: kernel.  H100 2026-11-25 (benchmarks/gpu_decode_wide.py, whole calls split + combine,
#: medians of 7 rotated rounds; benchmarks/results/decode_wide_h100_2026-11-25.json): bitwise
#: the template split kernel (+ the same IR combine) at all three shapes, template / wide
#: 0.978 at B2 Hq16 Hkv4 S1000 d128 (35 us, rounds spread 33-48 us both ways), 1.000 at
#: B2 Hq32 Hkv8 S16384 and 0.995 at a real 2^31 + 2^25-element cache (B65 Hq32 Hkv8 S32768,
#: 2.85 ms); on: the one miss of the 0.98 bar is inside its own noise, and the call runs a
#: kernel proved at its values instead of an unverified one.  A new call key's bind proves the
#: launch (0.2-0.5 s of host time, once per key)
WIDE_SPLIT_ON_IR = True


class IrCall(NamedTuple):
    """What a bind of an IR decode launch needs of one call (:meth:`IrSplitMmaDecode.ir_call`):
    the plan, the output dtype, the resolved softmax scale, rows = B * Hq, the split count, the
    head dim, the IR split kernel's int scalars and whether its printed int offsets fit."""
    plan: Dict[str, Any]
    out_dtype: Any
    scale: float
    rows: int
    splits: int
    head_dim: int
    sizes: Dict[str, int]
    fits: bool


class IrSplitMmaDecode(IrMmaSplitKVDecode):
    """Split and combine kernels from the IR, each verified with its printed text at
    construction (a failed check raises :class:`~kernels.verify.gate.VerificationError`)."""

    def __init__(self, cfg: MmaDecodeConfig = MmaDecodeConfig(), *, backend: str = "auto"):
        super().__init__(cfg, backend=backend)
        from ..verify.verifier import verify
        self.split_ir = build_decode_split_ir(cfg)
        check_same_workspace(self.split_ir, build_decode_combine_ir(cfg))
        self.split_source = emit_cuda_attention(self.split_ir)
        self.split_verification = verify(self.split_ir, arch=cfg.arch,
                                         source=self.split_source)
        self.split_verification.raise_if_failed()
        self.split_kernel = ir_compiled_kernel(self.split_ir, cfg.arch, self.split_source, backend)
        self.split_smem = smem_bytes(self.split_ir)

    def bind(self, q, k, v, out=None, scale: Optional[float] = None,
             kv_splits: Optional[int] = None, sms: Optional[int] = None):
        """As :meth:`.decode_splitkv.SplitKVDecode.bind`: ``run(q, k, v, out)``."""
        c = self.ir_call(q, k, v, out, scale, kv_splits, sms)
        if not c.fits:
            # the printed int offsets would leave int (the template's are long long): the
            # wide IR split kernel (WIDE_SPLIT_ON_IR) or the template split kernel + the IR
            # combine (IrMmaSplitKVDecode) runs this call
            return self.template_bind(q, k, v, out, c.scale, kv_splits, sms)
        return self.split_bind(c, self.split_ir, self.split_kernel)

    def split_bind(self, c: "IrCall", split_ir: Any, split_kernel: Any):
        """``run(q, k, v, out)`` of the call ``c`` on the split kernel ``split_ir`` (compiled
        as ``split_kernel``; the 32-bit one or its wide form) and the IR combine."""
        import torch
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec
        from .prefill_wide import scalar_signature
        cfg, p, out_dt, scale, sizes = self.cfg, c.plan, c.out_dtype, c.scale, c.sizes
        rows, n, D = c.rows, c.splits, c.head_dim
        site = LaunchSite(split_kernel.module, split_ir.name, (p["blocks"], n),
                          cfg.threads, signature=("ptr",) * 5 + scalar_signature(split_ir),
                          specs=[TensorSpec(strides=())] * 5 +
                          [None] * (len(SPLIT_IR_SCALARS) + 1), smem_bytes=self.split_smem)
        combine = self.combine_site(rows, p)
        scalars = [sizes[s] for s in SPLIT_IR_SCALARS] + [scale * math.log2(math.e)]

        def run(q, k, v, out):
            if out is None:
                out = torch.empty(q.shape, dtype=out_dt, device=q.device)
            op = torch.empty((n, rows, D), dtype=torch.float32, device=q.device)
            lse = torch.empty((n, rows), dtype=torch.float32, device=q.device)
            site([q, k, v, op, lse, *scalars])
            combine(op, lse, out)
            return out
        return run

    def split_template_source(self, cfg: MmaDecodeConfig) -> str:
        """The template split kernel where it exists (head_dim 64 / 128 / 256); at the padded
        head dims (:mod:`.decode_padded`) none: an empty source that nothing compiles, since
        :meth:`template_bind` refuses the calls it would take."""
        return super().split_template_source(cfg) if \
            cfg.head_dim in TEMPLATE_HEAD_DIMS else ""

    def wide_split(self) -> Any:
        """(IR, compiled kernel) of the split kernel's wide form (``long long`` batch / head
        strides; :func:`~.decode_split_ir.build_decode_split_ir`), verified with its printed
        text (a launch past 2^31 among its instances) on first use."""
        if getattr(self, "_wide_split", None) is None:
            from ..verify.report_cache import verified
            ir = build_decode_split_ir(self.cfg, wide=True)
            source = emit_cuda_attention(ir)
            verified(ir, source, self.cfg.arch)
            self._wide_split = (ir, ir_compiled_kernel(ir, self.cfg.arch, source, self.backend),
                                source)
        return self._wide_split

    def wide_split_call(self, q, k, v, out, scale: float, kv_splits: Optional[int],
                        sms: Optional[int]) -> Optional["IrCall"]:
        """The call on the wide split kernel where :data:`WIDE_SPLIT_ON_IR` holds and its
        printed index arithmetic is proved at this launch's values
        (:func:`~.prefill_wide.launch_index_ranges`: the int row products and the workspace
        included); else None."""
        if not WIDE_SPLIT_ON_IR:
            return None
        from .prefill_wide import launch_index_ranges
        c = self.ir_call(q, k, v, out, scale, kv_splits, sms)
        ir, _, source = self.wide_split()
        vals = dict(c.sizes, n_splits=c.splits)
        if min(vals.values()) < 0 or not launch_index_ranges(
                ir, source, vals, (c.plan["blocks"], c.splits, 1)).holds:
            return None
        return c

    def template_bind(self, q, k, v, out, scale: float, kv_splits: Optional[int],
                      sms: Optional[int]):
        """A call whose int offsets leave int: the wide IR split kernel where it is proved at
        this launch (:meth:`wide_split_call`), else the template split kernel (long long
        offsets); + the IR combine; at a padded head dim, which has no template, a
        :class:`~kernels.errors.LaunchError`."""
        c = self.wide_split_call(q, k, v, out, scale, kv_splits, sms)
        if c is not None:
            ir, kern, _ = self.wide_split()
            return self.split_bind(c, ir, kern)
        if self.cfg.head_dim not in TEMPLATE_HEAD_DIMS:
            from ..errors import LaunchError
            raise LaunchError(f"head_dim {self.cfg.head_dim}: the IR decode's int offsets "
                              "would leave [0, 2^31) for these tensors, and the template "
                              "split kernel (long long offsets) exists only at head_dim 64, "
                              "128 and 256; split the batch")
        return IrMmaSplitKVDecode.bind(self, q, k, v, out, scale, kv_splits, sms)

    def ir_call(self, q, k, v, out, scale: Optional[float], kv_splits: Optional[int],
                sms: Optional[int]) -> IrCall:
        """The plan and launch values of one call, shared by the binds of the IR decodes (this
        two-kernel one and :class:`.decode_fused_ir.IrFusedMmaDecode`); ``fits`` False: the
        caller hands the call to the template split kernel (long long offsets)."""
        import torch
        p = self.plan(q, k, v, out, kv_splits, sms)
        cfg = self.cfg
        out_dt = torch.float16 if cfg.out_dtype == "f16" else torch.bfloat16
        scale = 1.0 / math.sqrt(cfg.head_dim) if scale is None else float(scale)
        rows, n = p["B"] * p["Hq"], p["splits"]
        sizes = self.ir_sizes(q, k, v, p)
        return IrCall(p, out_dt, scale, rows, n, cfg.head_dim, sizes,
                      self.ints_fit(sizes, n, rows))

    @staticmethod
    def ir_sizes(q, k, v, p: dict) -> dict:
        """The IR split kernel's int scalars (:data:`SPLIT_IR_SCALARS`) of a call planned
        as ``p``."""
        return dict(batch=p["B"], heads=p["Hq"], kv_heads=p["Hkv"], group=p["group"],
                    seqlen_kv=p["Skv"], kv_chunk=p["kv_chunk"], q_sb=q.stride(0),
                    q_sh=q.stride(1), k_sb=k.stride(0), k_sh=k.stride(1), k_ss=k.stride(2),
                    v_sb=v.stride(0), v_sh=v.stride(1), v_ss=v.stride(2))

    def ints_fit(self, s: dict, n: int, rows: int) -> bool:
        """Whether every value the printed ``int`` offsets take fits (the verifier evaluates
        them only at its instances): Q / K / V (a masked step past the last key included) and
        the workspace."""
        D, Skv = self.cfg.head_dim, s["seqlen_kv"]
        ends = ((s["batch"] - 1) * s["q_sb"] + (s["heads"] - 1) * s["q_sh"] + D,
                (s["batch"] - 1) * s["k_sb"] + (s["kv_heads"] - 1) * s["k_sh"] +
                (Skv + 16 * self.cfg.warps) * s["k_ss"] + D,
                (s["batch"] - 1) * s["v_sb"] + (s["kv_heads"] - 1) * s["v_sh"] +
                (Skv + 16 * self.cfg.warps) * s["v_ss"] + D,
                n * rows * D)
        return min(s.values()) >= 0 and all(0 <= e < _INT for e in ends)


def ir_split_supported(cfg: MmaDecodeConfig) -> bool:
    """The configurations the IR split kernel is built for: one 16-key tile per warp in
    flight, two launches (not the template's ``fused``); any ``hg`` (odd ones store into a
    padding head: :func:`.decode_split_ir.padded_heads`); head_dim a multiple of 16 up to 256
    (other than 64 / 128 / 256 over padded widths: :mod:`.decode_padded`)."""
    return cfg.chunk == 1 and not cfg.fused and ir_head_dim_ok(cfg.head_dim)
