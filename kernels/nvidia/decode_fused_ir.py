"""The tensor-core split-KV decode in ONE launch, built as kernel IR (issue 20 item 1): the IR
split kernel of :mod:`.decode_split_ir` whose blocks, after writing their partial, take a
ticket on their group's counter (:mod:`kernels.ir.ticket`); the block that draws
``n_splits - 1`` merges its group's ``hg`` query heads with the combine kernel's own merge
statements (:func:`.decode_mma_ir.lse_merge_statements`, the same IR the combine kernel
prints, so the output is the two-kernel form's bits) and zeroes the counter for the next launch.

What proves it: the one verifier (:func:`kernels.verify.verifier.verify`), from the kernel's
spec (:func:`fused_spec`, a :class:`~kernels.verify.spec.TicketProtocol`); :func:`verify_fused`
is that call:

* the body up to the ticket IS the split kernel's (the statement objects of
  :func:`.decode_split_ir.build_decode_split_ir`), proved by the one verifier on its instances
  with its printed text; the fused text holds that text's body lines, in order;
* the merge statements are the combine kernel's, proved by the one verifier
  (:func:`.decode_mma_ir.build_decode_combine_ir`);
* the ticket (fences, ticket, branch, reset, counter slots, arrival orders, which partials the
  branch reads and which outputs it stores) by :func:`kernels.verify.ticket_rules
  .check_ticket_protocol` at the split kernel's instances, on the IR; the printed ticket lines
  are read back and compared with the IR (:func:`check_printed_ticket`).

The counters (one int per group, ``grid.x``) are zeroed once per stream
(:class:`.decode_fused_combine.SplitCounters`) and left zero by every launch.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import sympy

from layoutalg.symbolic import to_c

from ..ir.attention import AttnKernel, LetMinMax, ScalarParam, runtime_symbol as R
from ..ir.core import Access, Barrier, Comment, Frag, Let, Loop, Param, sym
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, ThreadFence
from ..errors import KernelError
from .decode_ir import IrSplitMmaDecode
from .decode_mma import MmaDecodeConfig
from .decode_mma_ir import lse_merge_statements, workspace_layouts
from .decode_splitkv import COMBINE_ELEMS
from .decode_split_ir import SPLIT_IR_SCALARS, build_decode_split_ir, split_instance

__all__ = ["IrFusedMmaDecode", "build_decode_fused_ir", "fused_instances", "verify_fused", "check_printed_ticket",
           "fused_spec", "fused_parts",
           "FUSED_IR_SCALARS", "fused_ir_name"]

FUSED_IR_SCALARS = SPLIT_IR_SCALARS + ("n_splits", "o_sb", "o_sh")


def fused_ir_name(cfg: MmaDecodeConfig) -> str:
    return f"lg_decode_fused_ir_{cfg.in_dtype}_d{cfg.head_dim}_g{cfg.hg}_w{cfg.warps}"


def fused_tail(cfg: MmaDecodeConfig) -> List[Any]:
    """The ticket and the last block's merge of its group's ``hg`` rows (one thread per
    (row, :data:`COMBINE_ELEMS` head dims), as the combine kernel's threads)."""
    D, HG, T, E = cfg.head_dim, cfg.hg, cfg.threads, COMBINE_ELEMS
    per = D // E
    tid, it = sym("tid"), sym("fi")
    x, lse, o = Frag("x_mrg", "f32", E, E), Frag("lse_mrg", "f32", 1, 1), Frag("o_mrg", "f32", E, E)
    G = workspace_layouts(D)
    coords = tuple((0, sym("dc") + j, sym("h"), sym("bat")) for j in range(E))
    merge = Loop("fi", 0, -(-HG * per // T), [
        Let("fgi", tid + it * T),
        Let("frow", sympy.floor(sym("fgi") / per)),
        Comment("threads past the group's last row merge it again and store nothing"),
        LetMinMax("frc", "min", sym("frow"), HG - 1),
        Let("dc", E * sympy.Mod(sym("fgi"), per)),
        Let("h", sym("h0") + sym("frc")),
        *lse_merge_statements(D, x, lse, o, "m_mrg", "l_mrg"),
        Access("store", "global", "O", sympy.expand(G["O"](coords[0])), E, o.regs(range(E)),
               sym("frow") < HG, tag="O.store", origin=G["O"], coords=coords)])
    one = sympy.Eq(tid, 0)
    slot = sym("block_bh")
    return [
        Comment("one launch: the partial is visible GPU-wide, then this block takes its ticket"),
        ThreadFence(), Barrier(),
        AtomicTicket("CNT", slot, "s_ticket", one), Barrier(),
        LastArrival("s_ticket", R("n_splits") - 1, [
            Comment("every split of this group has stored and fenced its partial"),
            ThreadFence(), merge,
            CounterReset("CNT", slot, one)])], [x, lse, o]


def build_decode_fused_ir(cfg: MmaDecodeConfig) -> AttnKernel:
    """The one-launch kernel of ``cfg``: grid ``(batch x kv heads x head chunks, n_splits)``,
    the split kernel's parameters plus ``O``, ``CNT`` (``grid.x`` zeroed ints) and the
    scalars ``n_splits``, ``o_sb``, ``o_sh``."""
    split = build_decode_split_ir(cfg)
    tail, frags = fused_tail(cfg)
    name = fused_ir_name(cfg)
    params = list(split.params) + [Param("O", cfg.out_dtype, const=False),
                                   Param("CNT", "i32", const=False)]
    header = [f"split-KV decode in one launch (kernels/nvidia/decode_fused_ir.py): the IR "
              f"split kernel ({cfg.hg} query heads per block, {cfg.warps} warps, head_dim "
              f"{cfg.head_dim}); the last block of a group merges the splits; verified"]
    return AttnKernel(name, params, list(split.shared), list(split.frags) + frags,
                      list(split.body) + tail, cfg.threads, (0, 0, 1),
                      grid_symbols=("block_bh", "split"), header=header,
                      meta={"kind": "decode_fused_lse", "cfg": cfg, "split": split},
                      scalars=[ScalarParam(n) for n in FUSED_IR_SCALARS] +
                      [ScalarParam("scale_log2", "float")], min_blocks=1,
                      spec=fused_spec(name))


def fused_instances(cfg: MmaDecodeConfig) -> List[Any]:
    """The split kernel's instances (:func:`.decode_split_ir.split_instances`) with contiguous
    O strides, plus one with a single split."""
    out = []
    for name, B, HK, chunks, skv, ns in (("gqa-ragged-last-split", 2, 2, 1, 100, 3),
                                         ("splits-shorter-than-a-tile", 1, 1, 1, 37, 4),
                                         ("two-head-chunks-one-split", 1, 1, 2, 45, 1),
                                         ("two-chunks-five-splits", 1, 2, 2, 80, 5)):
        inst = split_instance(cfg, name, B, HK, chunks, skv, ns)
        H, D = inst.values["heads"], cfg.head_dim
        inst.values.update(o_sb=H * D, o_sh=D)
        out.append(inst)
    return out


_TICKET_LINES = (r"if \((?P<pred>.+)\) s_ticket = atomicAdd\(&CNT\[(?P<slot>.+)\], 1\);",
                 r"if \(s_ticket == (?P<last>.+)\) \{",
                 r"if \((?P<rpred>.+)\) CNT\[(?P<rslot>.+)\] = 0;")


def check_printed_ticket(k: AttnKernel, source: str) -> None:
    """The printed ticket, branch and reset lines read back (:mod:`kernels.verify.cexpr`) and
    equal to the IR's expressions at the verification instances; the fused text holds the
    verified split kernel's body lines in order, then ``__threadfence(); __syncthreads();``
    before the ticket.  Else :class:`~kernels.errors.KernelError`."""
    from ..ir.core import c_eval, walk
    from ..printer.cuda_attention import emit_cuda_attention
    from ..verify.cexpr import evaluate, parse
    lines = [ln.strip() for ln in source.splitlines()]
    found: Dict[str, str] = {}
    for pat in _TICKET_LINES:
        hits = [m for m in (re.fullmatch(pat, ln) for ln in lines) if m]
        if len(hits) != 1:
            raise KernelError(f"fused decode {k.name}: {len(hits)} printed lines match "
                              f"{pat!r}; exactly one")
        found.update(hits[0].groupdict())
    t = next(s for s in walk(k.body) if isinstance(s, AtomicTicket))
    la = next(s for s in walk(k.body) if isinstance(s, LastArrival))
    r = next(s for s in walk(k.body) if isinstance(s, CounterReset))
    pairs = (("slot", t.slot), ("pred", t.pred), ("last", la.last), ("rslot", r.slot),
             ("rpred", r.pred))
    for inst in fused_instances(k.meta["cfg"]):
        for g in range(inst.grid[0]):
            env = dict(inst.symbols())
            env.update({sym("block_bh"): g, sym("tid"): 0})
            names = dict(inst.values, block_bh=g, tid=0)
            for key, expr in pairs:
                a = int(evaluate(parse(found[key]), names))
                if a != int(c_eval(expr, env)):
                    raise KernelError(f"fused decode {k.name}: printed {key} {found[key]!r} is "
                                      f"{a} at {inst.name} block {g}, the IR's {to_c(expr)} "
                                      f"is {c_eval(expr, env)}")
    split_src = emit_cuda_attention(k.meta["split"]).splitlines()
    body = split_src[next(i for i, ln in enumerate(split_src) if ln.startswith("extern")) + 1:]
    body = [ln.strip() for ln in body[:-1]]          # the split kernel's closing brace off
    at = lines.index(next(ln for ln in lines if ln.startswith("extern"))) + 1
    own = {f"float {f.name}[{f.count}];" for f in k.frags if f not in k.meta["split"].frags}
    rest = [ln for ln in lines[at:] if ln not in own]     # the merge's registers declared
    if len(rest) != len(lines) - at - len(own):
        raise KernelError(f"fused decode {k.name}: the merge's registers are not declared "
                          "once each")
    lines, at = rest, 0
    mine = lines[at:at + len(body)]
    if mine != body:
        i = next(i for i, (a, b) in enumerate(zip(mine + [""] * len(body), body)) if a != b)
        raise KernelError(f"fused decode {k.name}: printed line {i} of the body is "
                          f"{mine[i] if i < len(mine) else None!r}, the verified split kernel's "
                          f"is {body[i]!r}")
    nxt = [ln for ln in lines[at + len(body):] if ln and not ln.startswith("//")][:2]
    if nxt != ["__threadfence();", "__syncthreads();"]:
        raise KernelError(f"fused decode {k.name}: after the split kernel's body {nxt}, not "
                          "a fence and a barrier")


def fused_parts(k: AttnKernel) -> List[Any]:
    """The kernels whose verified statements ``k`` runs, ``(name, IR, printed text)``: the
    split kernel (its body is ``k``'s up to the ticket, the same statement objects) and the
    combine kernel (the merge statements; the same workspace).  Else
    :class:`~kernels.errors.KernelError`."""
    from ..printer.cuda_attention import emit_cuda_attention
    from .decode_mma_ir import build_decode_combine_ir
    from .decode_split_ir import check_same_workspace
    split = k.meta["split"]
    if k.body[:len(split.body)] != split.body:
        raise KernelError(f"fused decode {k.name}: its body does not begin with the split "
                          "kernel's statements")
    combine = build_decode_combine_ir(k.meta["cfg"])
    check_same_workspace(split, combine)
    return [(n, kern, emit_cuda_attention(kern)) for n, kern in (("split", split),
                                                                 ("combine", combine))]


def fused_spec(name: str) -> Any:
    """The fused kernel's spec: a ticket protocol over the split kernel's partials (``Op``,
    ``LSEp``), counter ``CNT``, output ``O``, composed of :func:`fused_parts`, at
    :func:`fused_instances`, the printed ticket read back by :func:`check_printed_ticket`."""
    from ..verify.spec import Domain, KernelSpec, TicketProtocol
    return KernelSpec(name=name, dims=(), tensors=(),
                      domain=Domain.on_instances(lambda k: fused_instances(k.meta["cfg"])),
                      ticket=TicketProtocol("CNT", ("Op", "LSEp"), "O", fused_parts,
                                            check_printed_ticket))


def verify_fused(k: AttnKernel, source: str, arch: str = "sm_90") -> Dict[str, Any]:
    """The one verifier on ``k`` (its spec, :func:`fused_spec`, selects every check of the
    module docstring); raises :class:`~kernels.verify.gate.VerificationError` naming the
    failed checks, returns the parts' reports, the ticket counts and the report."""
    from ..verify.verifier import verify
    rep = verify(k, arch=arch, source=source).raise_if_failed()
    return {**rep.details["parts"], "ticket": rep.details["ticket"], "report": rep}


class IrFusedMmaDecode(IrSplitMmaDecode):
    """:class:`.decode_ir.IrSplitMmaDecode` in one launch: the fused kernel of
    :func:`build_decode_fused_ir`, verified at construction (:func:`verify_fused`); the
    partials and counters are kept per (device, stream) (two launches on one stream run in
    order, so they never share them; the counters are left zero by every launch).  A call
    whose int offsets would leave int runs the two-kernel form (the base class)."""

    def __init__(self, cfg: MmaDecodeConfig = MmaDecodeConfig(), *, backend: str = "auto"):
        super().__init__(cfg, backend=backend)
        from ..printer.cuda import smem_bytes
        from ..printer.cuda_attention import emit_cuda_attention
        from .builder import ir_compiled_kernel
        self.fused_ir = build_decode_fused_ir(cfg)
        self.fused_source = emit_cuda_attention(self.fused_ir)
        self.fused_verification = verify_fused(self.fused_ir, self.fused_source, cfg.arch)
        self.fused_kernel = ir_compiled_kernel(self.fused_ir, cfg.arch, self.fused_source, backend)
        self.fused_smem = smem_bytes(self.fused_ir)

    def bind(self, q, k, v, out=None, scale: Optional[float] = None,
             kv_splits: Optional[int] = None, sms: Optional[int] = None):
        """As :meth:`.decode_splitkv.SplitKVDecode.bind`: ``run(q, k, v, out)``."""
        import math
        import torch
        from ..errors import LaunchError
        from ..runtime.cuda import LaunchSite
        from ..runtime.launch_cache import PerStream
        from ..runtime.rocm import TensorSpec
        c = self.ir_call(q, k, v, out, scale, kv_splits, sms)
        if not c.fits:
            return self.template_bind(q, k, v, out, c.scale, kv_splits, sms)
        cfg, p, out_dt, scale, sizes = self.cfg, c.plan, c.out_dtype, c.scale, c.sizes
        rows, n, D, B, H = c.rows, c.splits, c.head_dim, p["B"], p["Hq"]
        nscal = len(FUSED_IR_SCALARS)
        site = LaunchSite(self.fused_kernel.module, self.fused_ir.name, (p["blocks"], n),
                          cfg.threads, signature=("ptr",) * 7 + ("i32",) * nscal + ("f32",),
                          specs=[TensorSpec(strides=())] * 7 + [None] * (nscal + 1),
                          smem_bytes=self.fused_smem)
        blocks = p["blocks"]
        work = PerStream(lambda dev: (
            torch.empty((n, rows, D), dtype=torch.float32, device=dev),
            torch.empty((n, rows), dtype=torch.float32, device=dev),
            torch.zeros(blocks, dtype=torch.int32, device=dev)))
        head = [sizes[s] for s in SPLIT_IR_SCALARS] + [n]
        log2_scale = scale * math.log2(math.e)

        def run(q, k, v, out):
            if out is None:
                out = torch.empty(q.shape, dtype=out_dt, device=q.device)
            sb, sh = out.stride(0), out.stride(1)
            if not (sb >= 0 and sh >= 0 and (B - 1) * sb + (H - 1) * sh + D < 2 ** 31):
                raise LaunchError(f"out strides ({sb}, {sh}) over batch {B} x heads {H}: the "
                                  "fused kernel's int output offsets leave [0, 2^31)")
            (op, lse, cnt), stream = work.on(q.device)
            site([q, k, v, op, lse, out, cnt, *head, sb, sh, log2_scale], stream)
            return out
        return run
