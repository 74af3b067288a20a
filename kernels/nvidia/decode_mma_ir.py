"""The NVIDIA split-KV decode's combine kernel built as kernel IR, printed as CUDA by
:mod:`kernels.printer.cuda_attention` and proved by the one verifier (issue 20 item 1, first
half: the split kernel of :mod:`.decode_mma` is still a string template).

:func:`build_decode_combine_ir` builds the kernel :func:`.decode_splitkv.emit_combine` prints:
one thread per (row, :data:`.decode_splitkv.COMBINE_ELEMS` head dims), rows = batch x query
heads; pass 1 takes the maximum of the splits' base-2 log-sum-exps, pass 2 merges every
split's normalised partial by its weight ``2^(lse_s - M)`` (:mod:`kernels.ir.lse_merge`), then
the merged row is divided by the sum of the weights and rounded to the output type.  Its spec
(:func:`combine_lse_spec`) is the AMD combine kernel's form with the partials ``(Op, LSEp)``:
``verify(ir, arch="sm_90", source=emit_cuda_attention(ir))`` runs the same 10 IR checks and 3
printed-text checks (``reduction_reads_partials``: every stored element merged each of the
``n_splits`` partials of its own (batch, head) and head dim exactly once, under one common
maximum over all splits).

:class:`IrMmaSplitKVDecode` is :class:`.decode_mma.MmaSplitKVDecode` (the template split kernel,
same launch and split choice) with this combine kernel in place of the template's;
:class:`IrSplitKVDecode` likewise for the FMA kernel of :mod:`.decode_splitkv` (same workspace).
"""

from __future__ import annotations

from typing import Any, List

import sympy

from layoutalg import Layout

from ..ir.attention import AttnKernel, FVar, LetMinMax, ScalarParam, runtime_symbol as R
from ..ir.core import Access, Comment, Frag, Let, Loop, Param, ZeroFrag, sym
from ..ir.lse_merge import LseMax, LseMergeStep, LseNormalize
from ..printer.cuda_attention import emit_cuda_attention
from ..verify.spec import (Dim, Domain, KernelSpec, SplitMerge, Symbol, TensorSpec)
from .builder import ir_compiled_kernel
from .decode_mma import MmaDecodeConfig, MmaSplitKVDecode
from .decode_splitkv import (COMBINE_ELEMS, COMBINE_THREADS, COMBINE_UNROLL, SplitKVDecode,
                             SplitKVDecodeConfig)

__all__ = ["build_decode_combine_ir", "combine_lse_spec", "lse_merge_statements", "combine_instances",
           "COMBINE_IR_SCALARS", "IrCombine", "IrMmaSplitKVDecode", "IrSplitKVDecode",
           "ir_combine_name"]

COMBINE_IR_SCALARS = ("batch", "heads", "n_splits", "o_sb", "o_sh")
_INT_MAX = 2 ** 31 - 1


def ir_combine_name(cfg: Any) -> str:
    return f"lg_decode_combine_ir_{cfg.out_dtype}_d{cfg.head_dim}"


def workspace_layouts(D: int):
    """The split kernel's partials as it writes them (:func:`.decode_splitkv.emit_row_merge`):
    ``OP[(s rows + b H + h) D + d]`` and ``LSE[s rows + b H + h]``, rows = batch x heads, as
    layouts of the spec's coordinates ``(split, d, head, batch)`` / ``(split, 0, head,
    batch)``; O is ``(row, d, head, batch) -> b o_sb + h o_sh + d``."""
    S, H, B = R("n_splits"), R("heads"), R("batch")
    rows = B * H
    return {"Op": Layout((S, D, H, B), (rows * D, 1, D, H * D)),
            "LSEp": Layout((S, 1, H, B), (rows, 0, 1, H)),
            "O": Layout((1, D, H, B), (0, 1, R("o_sh"), R("o_sb")))}


def combine_lse_spec(name: str, head_dim: int, out_dtype: str, key_tile: int = 16) -> KernelSpec:
    """O merges every split's normalised partial ``Op`` by its log-sum-exp ``LSEp``."""
    dims = (Dim("row", "seqlen_q"), Dim("key", "seqlen_kv"), Dim("d", head_dim),
            Dim("head", "heads"), Dim("kv_head", "kv_heads"), Dim("batch", "batch"),
            Dim("split", "n_splits"), Dim("one", 1))
    return KernelSpec(
        name=name, dims=dims,
        tensors=(TensorSpec("Op", ("split", "d", "head", "batch"), "input", "f32"),
                 TensorSpec("LSEp", ("split", "one", "head", "batch"), "input", "f32"),
                 TensorSpec("O", ("row", "d", "head", "batch"), "output", out_dtype)),
        split_merge=SplitMerge(("Op", "LSEp"), "O", "split", "d", key_tile=key_tile),
        symbols=tuple(Symbol(n, 0, _INT_MAX) for n in COMBINE_IR_SCALARS),
        domain=Domain.on_instances(combine_instances), head_anchor="LSEp",
        head_symbols=("bat", "h"))


def lse_merge_statements(D: int, x: Frag, lse: Frag, o: Frag, m: str, l: str) -> List[Any]:
    """The merge of one thread's :data:`COMBINE_ELEMS` head dims ``dc`` of row (``bat``,
    ``h``) over every split ``s``: the maximum of the splits' LSEs, then each partial weighted
    by ``2^(lse_s - M)``, then the division by the weights' sum (``o`` holds the result).  The
    combine kernel and the fused split kernel (:mod:`.decode_fused_ir`) print these same
    statements, so their results are the same bits."""
    E, G, s = COMBINE_ELEMS, workspace_layouts(D), sym("s")

    def load(buf: str, fr: Frag, n: int) -> Access:
        coords = tuple((s, (sym("dc") + j) if n > 1 else 0, sym("h"), sym("bat"))
                       for j in range(n))
        return Access("load", "global", buf, sympy.expand(G[buf](coords[0])), n,
                      fr.regs(range(n)), None, tag=f"{buf}.load", origin=G[buf], coords=coords)

    return [
        FVar(m, "-inf"),
        Loop("s", 0, R("n_splits"), [load("LSEp", lse, 1), LseMax(m, lse, 0)],
             unroll=COMBINE_UNROLL),
        ZeroFrag(o), FVar(l, "0"),
        Comment("every split weighted by 2^(lse_s - M): exact, and no weight above 1"),
        Loop("s", 0, R("n_splits"),
             [load("LSEp", lse, 1), load("Op", x, E),
              LseMergeStep(o, tuple(range(E)), x, tuple(range(E)), lse, 0, m, l)],
             unroll=COMBINE_UNROLL),
        LseNormalize(o, tuple(range(E)), l)]


def build_decode_combine_ir(cfg: Any) -> AttnKernel:
    """The combine kernel of ``cfg`` (a split decode configuration of either kernel,
    :class:`.decode_splitkv.SplitDecodeShape`: its head_dim and output type) as IR with its
    spec."""
    D, E, T = cfg.head_dim, COMBINE_ELEMS, COMBINE_THREADS
    G = workspace_layouts(D)
    tid = sym("tid")
    ok = sym("qi") < R("batch") * R("heads")
    x = Frag("x_fr", "f32", E, E)
    lse = Frag("lse_fr", "f32", 1, 1)
    o = Frag("o_acc", "f32", E, E)

    body: List[Any] = [
        Comment(f"one thread per (row, {E} head dims): row qi = batch x heads + head"),
        Let("gi", sym("block_c") * T + tid),
        Let("qi", sympy.floor(sym("gi") / (D // E))),
        Comment("threads past the last row merge the last row again and store nothing: every "
                "load stays unpredicated (as the template's early return leaves them)"),
        LetMinMax("qc", "min", sym("qi"), R("batch") * R("heads") - 1),
        Let("dc", E * sympy.Mod(sym("gi"), D // E)),
        Let("bat", sympy.floor(sym("qc") / R("heads"))),
        Let("h", sympy.Mod(sym("qc"), R("heads"))),
        *lse_merge_statements(D, x, lse, o, "m_run", "l_run")]
    coords = tuple((0, sym("dc") + j, sym("h"), sym("bat")) for j in range(E))
    body.append(Access("store", "global", "O", sympy.expand(G["O"](coords[0])), E,
                       o.regs(range(E)), ok, tag="O.store", origin=G["O"], coords=coords))
    name = ir_combine_name(cfg)
    params = [Param("Op", "f32"), Param("LSEp", "f32"), Param("O", cfg.out_dtype, const=False)]
    header = [f"split-KV decode, combine kernel (kernels/nvidia/decode_mma_ir.py): fp32 "
              f"normalised partials + base-2 LSE -> {cfg.out_dtype} O, head_dim {D}; built as "
              "kernel IR and verified"]
    return AttnKernel(name, params, [], [x, lse, o], body, T, (0, 0, 1),
                      grid_symbols=("block_c",), header=header,
                      meta={"kind": "decode_combine_lse", "cfg": cfg},
                      scalars=[ScalarParam(n) for n in COMBINE_IR_SCALARS],
                      # __launch_bounds__(128, 1): with (128) alone ptxas kept 32 registers and
                      # spilled 4 bytes in the unrolled split loops (H100: 13.4 us vs the
                      # template's 9.7 us at 64 splits); with 1 it uses 64, no spill
                      min_blocks=1,
                      spec=combine_lse_spec(name, D, cfg.out_dtype))


def combine_grid_ir(rows: int, head_dim: int) -> int:
    return -(-(rows * head_dim // COMBINE_ELEMS) // COMBINE_THREADS)


def combine_instances(k: Any) -> List[Any]:
    """Verification launches: GQA rows over 3 splits (contiguous O), one split with strided O
    rows, and a ragged last block (15 rows) over 5 splits."""
    from ..verify.attention_gate import Instance
    D = k.meta["cfg"].head_dim
    cases = [("gqa-3-splits", 2, 4, 1, 3, D, 4 * D),
             ("one-split-strided-o", 1, 3, 3, 1, 2 * D, 7 * D),
             ("ragged-block-5-splits", 3, 5, 5, 5, D, 5 * D)]
    out = []
    for name, b, h, hk, ns, o_sh, o_sb in cases:
        v = dict(batch=b, heads=h, kv_heads=hk, group=h // hk, seqlen_q=1, seqlen_kv=64 * ns,
                 n_splits=ns, o_sh=o_sh, o_sb=o_sb)
        out.append(Instance(name, v, (combine_grid_ir(b * h, D), 1, 1), False))
    return out


def verify_combine(k: AttnKernel, source: str, arch: str = "sm_90"):
    """The report of the one verifier on ``k`` and its printed ``source``."""
    from ..verify.verifier import verify
    return verify(k, arch=arch, source=source)


class IrCombine:
    """The verified IR combine kernel (:func:`build_decode_combine_ir`) for a split-KV decode
    class (:class:`~.decode_splitkv.SplitKVDecode` or a subclass): it replaces the class's
    :meth:`~.decode_splitkv.SplitKVDecode.combine_site`; the split kernel, launch arguments and
    split choice stay the class's.  Construction verifies the IR and its printed text (a failed
    check raises :class:`~kernels.verify.gate.VerificationError`)."""

    def __init__(self, cfg: Any, *, backend: str = "auto") -> None:
        super().__init__(cfg, backend=backend)
        self.combine_ir = build_decode_combine_ir(cfg)
        self.combine_source = emit_cuda_attention(self.combine_ir)
        self.verification = verify_combine(self.combine_ir, self.combine_source, cfg.arch)
        self.verification.raise_if_failed()
        # its own compiled source (the split kernel's module is the template's)
        self.combine_kernel = ir_compiled_kernel(self.combine_ir, cfg.arch, self.combine_source,
                                                 backend)

    @property
    def combine_module(self):
        return self.combine_kernel.module

    def combine_site(self, rows: int, p: dict):
        """The IR combine kernel's launch: ``run(op, lse, out)``."""
        from ..errors import LaunchError
        from ..runtime.cuda import LaunchSite
        from ..runtime.rocm import TensorSpec as TS
        B, H, n, D = p["B"], p["Hq"], p["splits"], self.cfg.head_dim
        if n * rows * D >= 2 ** 31:
            raise LaunchError(f"{n} splits x {rows} rows x head_dim {D}: the IR combine "
                              "kernel's int offsets reach 2^31; fewer splits (kv_splits)")
        site = LaunchSite(self.combine_module, self.combine_ir.name, combine_grid_ir(rows, D),
                          COMBINE_THREADS, signature=("ptr",) * 3 + ("i32",) * 5,
                          specs=[TS(strides=())] * 3 + [None] * 5)

        def run(op, lse, out):
            sb, sh = out.stride(0), out.stride(1)
            # the printed int offset b * o_sb + h * o_sh + d (checked by index_ranges only at
            # the verification instances): every value it takes must fit an int
            if not 0 <= (B - 1) * sb + (H - 1) * sh + D < 2 ** 31:
                raise LaunchError(f"out strides ({sb}, {sh}) over batch {B} x heads {H}: the "
                                  "IR combine kernel's int output offsets leave [0, 2^31)")
            site([op, lse, out, B, H, n, sb, sh])
        return run


class IrMmaSplitKVDecode(IrCombine, MmaSplitKVDecode):
    """:class:`.decode_mma.MmaSplitKVDecode` (tensor-core split kernel) with the verified IR
    combine kernel (:class:`IrCombine`)."""

    def __init__(self, cfg: MmaDecodeConfig = MmaDecodeConfig(), *, backend: str = "auto"):
        super().__init__(cfg, backend=backend)


class IrSplitKVDecode(IrCombine, SplitKVDecode):
    """:class:`.decode_splitkv.SplitKVDecode` (FMA split kernel) with the verified IR combine
    kernel (:class:`IrCombine`): the same workspace, written by the same row merge."""

    def __init__(self, cfg: SplitKVDecodeConfig = SplitKVDecodeConfig(), *,
                 backend: str = "auto"):
        super().__init__(cfg, backend=backend)

