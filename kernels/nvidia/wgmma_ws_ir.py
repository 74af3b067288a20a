"""The warp-specialised d128 prefill of the dispatched configurations built as kernel IR (the
``builder`` and ``deferred_pv_wait`` pieces of :mod:`.wgmma_ws_ir_plan`): the template's
overlap schedule (:func:`~.wgmma_attention_ws.emit_ws_flash`) on the ring of
:class:`~.wgmma_ws_ir_serial.WsRingBuilder`, verified, IR and printed text, by the one
verifier (:func:`kernels.verify.verifier.verify` routes it to the warp-specialised attention
engine, :mod:`kernels.verify.attention_ring`; with ``source`` the printed text is read back by
:mod:`kernels.verify.printed_ws`).

Takes a :class:`~.wgmma_attention_ws.WsFlashConfig` with ``loader="tma"``, head_dim 128,
``bn`` 128 or 192, ``stages`` 2 or 3 (what shared memory admits: bn 192 takes 2), causal or
not, ``defer_pv_wait`` on or off; or with ``loader="cp.async"`` the dispatched d256 tile
(head_dim 256, bn 64, 2 stages: ``prefill_select.WS_PREFILL_TILES[256]``) and the d128
fallback where TMA cannot address the tensors (bn 128, 2 stages:
``prefill_select.WS_PREFILL_FALLBACK[128]``; :data:`CP_TILES`).  One block of 384
threads: the producer (warpgroup 0, ``setmaxnreg.dec`` 24; with ``cp.async`` 40 at d256, 56 at
d128: Q once, K and
V of each block into a ring of ``stages``, each refill after the stage's ``empty`` phase; one
thread's TMA boxes, or the 128 threads' ``cp.async`` copies of
:class:`~.ws_cp_producer.CpProducer`: whole blocks unpredicated, the ragged one predicated
per row, the sources printed as chained 64-bit pointers, :attr:`WsOverlapBuilder.CP_SRC_CHAIN`)
and two consumers
(``setmaxnreg.inc`` 240; with ``cp.async`` 232 / 224, :attr:`WsOverlapBuilder.CP_REGS` says why; 64
rows each), which run the
template's order of ring waits, GEMM issues, wgmma waits, releases and softmax (after a
``cp.async`` producer's ring waits, ``fence.proxy.async`` before the wgmmas read the stages:
:meth:`~.wgmma_ws_ir_serial.WsRingBuilder.acquired`, once per block as the template):

* block 0: wait ``bQ`` and ``fullK[0]``, ``S = Q K_0^T``, wait it, release K's stage, mask
  and softmax;
* block ``j >= 1``: wait ``fullK[j % S]`` (parity ``(j / S) & 1``) and ``fullV[(j - 1) % S]``;
  P of block ``j - 1`` rounded into the register-A fragment; ``S = Q K_j^T`` and ``O += P
  V_{j-1}`` issued together (two commit groups), ``wgmma.wait_group 1`` (S retired, P V may
  still run), release K's stage, block ``j``'s mask and softmax while P V runs, then
  ``wait_group 0``, release V of ``j - 1``, rescale O by block ``j``'s alpha;
* after the loop, the last block's P V (wait ``fullV``, round P, issue, wait); the write-back.

``defer_pv_wait`` moves the P V wait of block ``j - 1`` to the top of block ``j + 1``, after
that block's ring waits (the template's fix for ptxas hoisting the wait above the softmax):
there, ``wait_group 0``, release V of ``j - 2`` (under ``j > 1``; V's release lags a block)
and O rescaled by block ``j - 1``'s alpha, which therefore lives across the loop's iterations
(``SoftmaxUpdate(alpha_declared=True)``: a variable declared before the loop, as the
template's ``alpha[2]``; block 0's softmax leaves O alone, block 1 rescales it).  The last
block: ``wait_group 0``, release V of ``NB - 2`` (under ``NB > 1``), rescale, then its P V.
The lag is checked by the engine itself: the producer's refill of a V stage waits the lagging
release (a deadlock, or a box over a read in flight, is refused), on instances whose rings
wrap several times (:func:`ws_ir_instances`).

The arithmetic is the IR's raw-score form (:mod:`.wgmma_flash_ir`; the plan's docstring says
why it can be bitwise the template).  What differs from the template's text: the key blocks
every row sees whole run an unmasked copy of the loop body (the template tests ``need_mask``
at run time); block 0 is always masked; without the deferred wait block 0's softmax rescales O
(still zero: exact; the template leaves it), as the wgmma prefill IR does.

Registers (NVRTC 13, ``--ptxas-options=-v``, sm_90a; compiled, not run): every configuration
above compiles without spills or serialised wgmmas (168 at launch, the consumers under
``setmaxnreg.inc`` 240), as the template.  Two printing choices get there, each found by a
spill: the S wgmma's scale-d 0 step has a write-only accumulator
(``WgmmaMma(write_only=True)``, an ``"=f"`` asm operand): with the in-out form the previous
block's masked scores stayed live up to the next S issue beside the probabilities the IR keeps
in their own fragment (the template exponentiates in place): bn 192 spilled 72 bytes; and O and
P are pinned before the fence of each P V issue (``WgmmaFence(pins)``, the template's
``lg_pin`` there): without it ptxas sank O's rescale below the issue and the deferred wait
spilled 104-112 bytes.

``pingpong``: the GEMM-turn hooks :meth:`~.wgmma_ws_ir_serial.WsRingBuilder.turn_begin` /
``turn_end`` around each issue below hold the consumers' named barriers (:mod:`.ws_pingpong`,
verified by the engine's three-agent replay, :mod:`kernels.verify.ring_pingpong`).  Not built
(refused with :class:`~.attention.AttentionConfigError` naming the missing piece of the plan):
``rescale_vote``, ``v_behind_k``, the ``cp.async`` loader at other tiles than :data:`CP_TILES`
(the d256 one and the d128 fallback), head_dim 64; ``persistent`` / ``unit_heads`` are
refused here naming their builder, the subclass in :mod:`.wgmma_ws_ir_persist`.  The d256
kernel (H100, 2026-11-25, docs/PERFORMANCE.md): bitwise its template at B2 H16 S4K, B4 H8/1
S513 causal, B2 H4 S77; with the 40 / 232 split, whole blocks unpredicated and chained copy
sources 0.99-1.02x its speed at those shapes (15 rounds), so it is dispatched
(:data:`~.prefill_select.IR_WS_CP_PREFILL_AT_PARITY`); the d128 cp.async fallback, at its
template's 56 / 224, is not (0.96-0.97x).  The d128 TMA kernels are dispatched where measured
at parity with the template (:data:`~.prefill_select.IR_WS_PREFILL_AT_PARITY`,
:mod:`.prefill_ir`).

The producer as the template's (:attr:`WsOverlapBuilder.PRODUCER_AS_TEMPLATE`, per loader; the
persistent kernel's fix, :mod:`.wgmma_ws_ir_persist`): its role branch printed after the
consumers' (:func:`producer_last`) and its block loop kept a loop (``#pragma unroll 1``).  On
for the cp.async producer (H100: not slower at any measured shape); off for TMA, whose set read
0.956 / 0.979x at two shapes in its one run (docs/PERFORMANCE.md, branch prodlast).

At bn 192 Q's eight descriptors are printed pinned (``meta["pinned_desc_bases"]``,
``lg_gmma_desc_u32_pin``: recomputed at each S issue): hoisted out of the key loop they
spilled 72 bytes in the ping-pong form (eight reloads per key block; 0.96-0.97x the template
on the H100, 0.99x pinned).  At bn 128 nothing spills and the recompute would cost 25 SASS
instructions per block, so they stay held.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import sympy

from ..ir.attention import FVar, SoftmaxUpdate
from ..ir.core import Comment, If, Let, ZeroFrag, sym
from ..ir.nvidia_tma import RoleBranch
from ..ir.nvidia_wgmma import WgmmaCommit, WgmmaFence, WgmmaWait
from .attention import AttentionConfigError
from .flash_ir import flash_instance, flash_ir_instances
from .wgmma_attention_ws import WsFlashConfig, plan_ws_flash
from .wgmma_ws_ir_serial import WsRingBuilder

__all__ = ["ws_ir_supported", "build_ws_ir", "ws_ir_name", "ws_ir_instances", "WsOverlapBuilder",
           "kv_broadcast_instance", "CP_TILES", "producer_last"]


#: (head_dim, bn, stages) the builder takes with the cp.async producer: the dispatched d256
#: tile (prefill_select.WS_PREFILL_TILES[256]) and the d128 fallback where TMA cannot address
#: q / k / v (prefill_select.WS_PREFILL_FALLBACK[128])
CP_TILES = frozenset({(256, 64, 2), (128, 128, 2)})


def ws_ir_supported(cfg: WsFlashConfig) -> Optional[str]:
    """None if :func:`build_ws_ir` builds ``cfg``, else why not (a feature the IR form lacks
    names the piece of :data:`~.wgmma_ws_ir_plan.PIECES` it waits for)."""
    if cfg.persistent or cfg.unit_heads:
        return ("persistent=True / unit_heads: the plan's piece 'persistent_units' builds them "
                "(wgmma_ws_ir_persist.build_ws_persist_ir); this builder is the "
                "non-persistent kernel's")
    if cfg.loader == "cp.async":
        if (cfg.head_dim, cfg.bn, cfg.stages) not in CP_TILES:
            return (f"loader='cp.async' at head_dim {cfg.head_dim}, bn {cfg.bn}, stages "
                    f"{cfg.stages}: the IR form builds the cp.async producer at the dispatched "
                    "tiles (head_dim 256, bn 64, 2 stages; head_dim 128, bn 128, 2 stages: "
                    "the fallback where TMA cannot address the tensors)")
        return _unbuilt(cfg)
    if cfg.loader != "tma":
        return f"loader={cfg.loader!r}: the IR form has the TMA and cp.async producers"
    if cfg.head_dim != 128:
        return (f"head_dim={cfg.head_dim}: the IR form takes the TMA producer at head_dim 128 "
                "(256: the cp.async producer)")
    if cfg.bn not in (128, 192):
        return f"bn={cfg.bn}: the IR form takes the dispatched key blocks, 128 and 192"
    if cfg.stages not in (2, 3):
        return f"stages={cfg.stages}: the IR form takes 2 and 3 (the dispatched rings)"
    return _unbuilt(cfg)


def _unbuilt(cfg: WsFlashConfig) -> Optional[str]:
    if cfg.rescale_vote or cfg.v_behind_k:
        return ("rescale_vote / v_behind_k: not in the IR form (off in every dispatched "
                "configuration)")
    return None


def ws_ir_name(cfg: WsFlashConfig) -> str:
    """The IR kernel's name: the template's with ``lg_wsflash_ir_`` for ``lg_wsflash_``."""
    return "lg_wsflash_ir_" + cfg.name[len("lg_wsflash_"):]


def ws_ir_instances(k: Any) -> List[Any]:
    """The IR prefills' instances (:func:`~.flash_ir.flash_ir_instances`) and one whose rings
    wrap several times (non-causal: 8 key blocks for one query block; causal: 6 query blocks,
    the last reaching 6 key blocks), so the stage parities, the refills over a lagging release
    (``defer_pv_wait``) and 3-stage rings run past their first rounds."""
    c = k.meta["cfg"]
    bm, bn = c.bm, c.bn
    if c.causal:
        wrap = flash_instance(c, "ring-wrap", 1, 1, 1, 5 * bm + 3, 5 * bm + 3)
    else:
        wrap = flash_instance(c, "ring-wrap", 1, 1, 1, 67, 7 * bn + 11)
    out = flash_ir_instances(k) + [wrap]
    if "loads" not in k.meta:       # the cp.async producer: also what TMA cannot address
        out.append(kv_broadcast_instance(c))
    return out


def kv_broadcast_instance(c: Any) -> Any:
    """K and V of one head broadcast over 3 heads (head stride 0: ``expand``, which no tensor
    map takes, so the dispatch gives it to the ``cp.async`` producer), 2 batches, a ragged
    key block and partial query block."""
    inst = flash_instance(c, "kv-broadcast", 2, 3, 3, c.bm + 9, 2 * c.bn + 5)
    for t in ("k", "v"):
        inst.values[f"{t}_sb"] = inst.values["seqlen_kv"] * c.head_dim
        inst.values[f"{t}_sh"] = 0
    return inst


class WsOverlapBuilder(WsRingBuilder):
    """The consumers' overlap schedule (module docstring) on the shared ring parts."""

    #: the cp.async producer copies a block inside the sequence unpredicated, the ragged one
    #: predicated per row (the template's two paths).  With the int-index sources that spilled
    #: 164 bytes (76 at 40 / 232); with the chained pointers below nothing spills (NVRTC 13.5)
    CP_WHOLE_BLOCKS = True
    #: head_dim -> (producer, consumer) registers with the cp.async producer (each fits the
    #: template's 384 x 168 launch: 128 x 40 + 256 x 232 = 128 x 56 + 256 x 224 = 64512).
    #: d256 (the template's are (24, 240)): its gap to the template was its producer's copy
    #: loop (H100 A/B of source variants: producer-only changes gained 7-19%, the template's
    #: every-thread release nothing); at 40 ptxas schedules that loop with 30% fewer static
    #: stall cycles: 0.87x / 0.84x the template at B2 H16 S4K (0.73x / 0.76x at 24), the
    #: consumers without spills at 232 (docs/PERFORMANCE.md).  d128: the template's own
    #: (56, 224); offline (NVRTC 13.5, SASS) its producer then has 1 of 24 copies waiting on the
    #: previous operand read against 7 of 45 at 40 / 232 (0.936 / 0.952x the template at B8
    #: H32 S8K K/V broadcast with 40 / 232; docs/PERFORMANCE.md for the 56 / 224 run)
    CP_REGS: Dict[int, Tuple[int, int]] = {128: (56, 224), 256: (40, 232)}
    #: the cp.async producer's sources as chained 64-bit pointers, this many chains deep
    #: (:mod:`kernels.printer.cuda_cp_chain`; 0: each copy's ``K + (int index)``, whose
    #: widening into one register pair made every cp.async wait for the previous one's
    #: operand read).  H100, d256 dispatched configuration, 7 rotated rounds
    #: (benchmarks/results/nvidia_ws_ir_cp_chain_variants_h100_2026-11-25.json): with the two
    #: paths and depth 2, 1.008 / 1.017 / 1.089 / 1.025x the template at B2 H16 S4K, the same
    #: causal, B4 H8/1 S513 causal, B2 H4 S77 (0.858 / 0.844 / 0.977 / 1.021 before); at S4K
    #: one predicated path at depths 2-4 0.97-1.00x, two paths at depths 3-4 0.98-1.01x.  A
    #: second run of this form: 0.996 / 1.001 / 1.032 / 0.948 (docs/PERFORMANCE.md)
    CP_SRC_CHAIN = 2

    def role_regs(self) -> Tuple[int, int]:
        """:attr:`CP_REGS` of the head dim with the ``cp.async`` producer, else the template's
        registers."""
        if self.cp is None:
            return super().role_regs()
        if self.ws.head_dim not in self.CP_REGS:
            raise AttentionConfigError(f"head_dim {self.ws.head_dim}: no cp.async register split "
                              f"(WsOverlapBuilder.CP_REGS has {sorted(self.CP_REGS)})")
        return self.CP_REGS[self.ws.head_dim]

    def __init__(self, cfg: WsFlashConfig) -> None:
        super().__init__(cfg, overlap=True)
        self.dw = cfg.defer_pv_wait

    # ---- pieces of the schedule ----------------------------------------------------------
    def scores(self, st: Any) -> List[Any]:
        """The ring's ``S = Q K^T``, its scale-d 0 first step with a write-only accumulator:
        the masked scores of the block before die at its softmax, not at this issue (with an
        in-out operand they stayed live beside the probabilities: spills at bn 192)."""
        return [dataclasses.replace(s, write_only=True) if not s.accumulate else s
                for s in super().scores(st)]

    def softmax(self, rescale: bool = True) -> List[Any]:
        """The wgmma prefill's softmax; deferred P V wait: alpha assigned to the variables
        declared before the loop (O is rescaled by it a block later)."""
        out = super().softmax(rescale)
        if not self.dw:
            return out
        return [dataclasses.replace(s, alpha_declared=True) if isinstance(s, SoftmaxUpdate)
                else s for s in out]

    def pv_done(self, v_block: Any, when: Any = None) -> List[Any]:
        """The last P V retired: V's stage of block ``v_block`` released (under ``when``, a
        condition: the deferred wait's block may not exist), O rescaled by the latest alpha."""
        rel = [Comment("P V retired: its V stage is free"), self.release("V", v_block)]
        return [WgmmaWait(0, (self.o.name, self.pa.name)),
                *(rel if when is None else [If(when, rel)]),
                *self.rescale_half(0), *self.rescale_half(1)]

    def issue(self, scores_stage: Any = None, pv_stage: Any = None,
              last: Any = sympy.false) -> List[Any]:
        """One GEMM issue of a consumer, inside its turn: ``S = Q K^T`` from ``scores_stage``
        and / or ``O += P V`` from ``pv_stage``, each its own commit group (S first)."""
        # O (just rescaled) and P (just converted) pinned before the fence: ptxas otherwise
        # sank the rescale and the conversion below the issue and spilled (deferred wait)
        pins = (self.o.name, self.pa.name) if pv_stage is not None else ()
        out: List[Any] = [*self.turn_begin(), WgmmaFence(pins)]
        if scores_stage is not None:
            out += [*self.scores(scores_stage), WgmmaCommit()]
        if pv_stage is not None:
            out += [*self.pv(pv_stage), WgmmaCommit()]
        return out + self.turn_end(last)

    def first_block(self) -> List[Any]:
        return [Comment("block 0: S and its softmax"),
                Let("n0", 0),
                self.wait_full("K", sympy.Integer(0)), *self.acquired(),
                *self.issue(scores_stage=sympy.Integer(0)),
                WgmmaWait(0, (self.sc.name,)),
                Comment("S retired: K's stage is free"),
                self.release("K", sympy.Integer(0)),
                # deferred: block 1 rescales O (zero here) by this alpha, as the template
                *self.mask(True), *self.softmax(rescale=not self.dw)]

    def overlap_block(self, masked: bool) -> List[Any]:
        """Block ``j >= 1`` (module docstring)."""
        j, jp = sym("j"), sym("jp")
        out: List[Any] = [Let("n0", j * self.c.bn),
                          Comment("jp = j - 1 >= 0: the block whose P V is issued here"),
                          Let("jp", j - 1),
                          self.wait_full("K", j), self.wait_full("V", jp)]
        if self.dw:
            out += [Comment("the P V of block j - 2, waited for here: after the ring waits, so "
                            "ptxas keeps the softmax above it"),
                    *self.pv_done(jp - 1, sympy.StrictGreaterThan(j, 1, evaluate=False))]
        out += [*self.acquired(), *self.round_p(),
                *self.issue(scores_stage=self.stage_of(j), pv_stage=self.stage_of(jp)),
                Comment("S of block j done; P V of block j - 1 may still run"),
                WgmmaWait(1, (self.sc.name,)),
                self.release("K", j),
                *self.mask(masked), *self.softmax(rescale=False)]
        if not self.dw:
            out += self.pv_done(jp)
        return out

    def last_block(self) -> List[Any]:
        nl = sym("j_last")
        out: List[Any] = [Comment("the last block's P V (j_last = n_blocks - 1 >= 0)"),
                          Let("j_last", sym("n_blocks") - 1), self.wait_full("V", nl)]
        if self.dw:
            out += self.pv_done(nl - 1, sympy.StrictGreaterThan(nl, 0, evaluate=False))
        return out + [*self.acquired(), *self.round_p(),
                      *self.issue(pv_stage=self.stage_of(nl), last=sympy.true),
                      WgmmaWait(0, (self.o.name, self.pa.name))]

    def consumer(self) -> List[Any]:
        body: List[Any] = self.consumer_start()
        for hh in range(2):
            body += [FVar(f"mr{hh}", "-inf"), FVar(f"lr{hh}", "0")]
            if self.dw:     # block j's alpha, applied to O at the top of block j + 1
                body.append(FVar(f"alpha{hh}", "0"))
        return body + [
            ZeroFrag(self.o), *self.open_turns(), *self.first_block(), *self.key_loops(),
            *self.last_block(), *self.epilogue_ws()]

    #: the loaders whose producer is printed as the template's: its role branch after the
    #: consumers' (:func:`producer_last`) and its block loop kept a loop (``#pragma unroll
    #: 1``), the persistent kernel's fix (:mod:`.wgmma_ws_ir_persist`) applied here.  H100,
    #: 2026-11-25 03:55Z (docs/PERFORMANCE.md): cp.async d256 1.005 / 1.019 / 1.022 / 1.089x
    #: its template (0.996 / 1.001 / 1.032 / 0.948 before), d128 fallback 0.946 / 0.956x
    #: (0.936 / 0.952): on.  TMA (NVRTC 13.5: 6 box loads against 22, 2488-3160 SASS
    #: instructions against 2800-3464) read 0.956x at B4 H16 1000 / 4097 and 0.979x at B16 H32
    #: S512 by medians (a step in every kind's rounds; per-round ratios 0.991 / 0.999), below
    #: the dispatched set's 0.98 bar in that one run: off until re-timed
    PRODUCER_AS_TEMPLATE = frozenset({"cp.async"})

    def producer_as_template(self) -> bool:
        """Whether this kernel's producer is printed as the template's
        (:attr:`PRODUCER_AS_TEMPLATE`)."""
        return self.ws.loader in self.PRODUCER_AS_TEMPLATE

    def producer_unroll(self) -> Optional[int]:
        """1 (the block loop kept a loop) where :meth:`producer_as_template`, else the
        compiler's choice."""
        return 1 if self.producer_as_template() else None

    def build_ws(self) -> Any:
        from ..verify.spec import Domain
        k = self.frame(ws_ir_name(self.ws), "wgmma_ws_ir")
        if self.producer_as_template():
            k.body = producer_last(k.body)
        k.spec = dataclasses.replace(k.spec, domain=Domain.on_instances(ws_ir_instances))
        if self.c.bn == 192:
            # Q's eight descriptors recomputed at each S issue (lg_gmma_desc_u32_pin): held
            # across the loop they spilled 72 bytes at bn 192 with ping-pong (eight 8-byte
            # reloads per key block, NVRTC 13.5); at bn 128 nothing spills and the recompute
            # costs 25 SASS instructions per block, so only the 192-key tile pins them
            k.meta = dict(k.meta, pinned_desc_bases=("sQ",))
        if self.cp is not None and self.CP_SRC_CHAIN:
            k.meta = dict(k.meta, cp_src_chain=self.CP_SRC_CHAIN)
        k.header = [h.replace("kernels/nvidia/wgmma_flash_ir.py", "kernels/nvidia/wgmma_ws_ir.py")
                    .replace("overlapped schedule", f"warp-specialised ({self.producer_name} "
                             f"producer, "
                             f"{self.S}-stage rings), overlapped schedule"
                             + (", P V wait deferred" if self.dw else ""))
                    for h in k.header]
        return k


def producer_last(body: List[Any]) -> List[Any]:
    """``body`` with the producer's role branch moved behind the consumers' (the template's
    layout: its producer returns, nothing follows it).  The roles run disjoint warpgroups, so
    their order in the text changes no thread's program; what it changes is ptxas's code: a
    producer branch followed by the consumers' is a divergent region that reconverges
    (``BSSY`` / ``BSYNC``), and inside it the producer's walk (the unit decode, the ring's
    stage and parity) ran in vector registers; as the kernel's last statement it runs on the
    uniform datapath as the template's does (NVRTC 13 sm_90a, the persistent kernel: 127
    uniform instructions of 269, against 32 of 255 before).  ``ValueError`` unless the body
    ends in its role branches, exactly one of them the producer's."""
    roles = [i for i, s in enumerate(body) if isinstance(s, RoleBranch)]
    prod = [i for i in roles if body[i].role == "producer"]
    if len(prod) != 1 or roles != list(range(roles[0], len(body))):
        raise ValueError("producer_last: the kernel must end in its role branches, one of "
                         "them the producer's")
    return [s for i, s in enumerate(body) if i != prod[0]] + [body[prod[0]]]


def build_ws_ir(cfg: WsFlashConfig) -> Any:
    """The IR of ``cfg`` with its spec (module docstring); :class:`~.attention
    .AttentionConfigError` where the IR form does not build ``cfg`` (:func:`ws_ir_supported`)
    or the template's plan refuses it (shared memory, the ring and release-lag models, the
    boxes against the descriptors: :func:`~.wgmma_attention_ws.plan_ws_flash`)."""
    why = ws_ir_supported(cfg)
    if why is not None:
        raise AttentionConfigError(f"{ws_ir_name(cfg)}: {why}")
    plan_ws_flash(cfg)
    try:
        return WsOverlapBuilder(cfg).build_ws()
    except ValueError as e:
        raise AttentionConfigError(f"warp-specialised IR {ws_ir_name(cfg)}: {e}") from None
