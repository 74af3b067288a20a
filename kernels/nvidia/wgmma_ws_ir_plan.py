"""The warp-specialised d128 / d256 prefill as kernel IR (issue 20 item 1): what the template
has, what the IR and the one verifier have today, and what is missing -- written down before
the builder, and kept true by :func:`missing_pieces` and its tests (a piece that lands flips
its probe, and the tests then ask for this note to be updated).

What runs (:func:`~.prefill_select.choose_prefill` on sm_90a, bf16/f16, head_dim 128; d256 is
the cp.async producer): the string template :mod:`.wgmma_attention_ws` in four configurations
(:func:`dispatched_d128_configs` lists them at the measured shapes), the first three built as
this plan's IR since 2026-11-25 (the builder, at parity on the H100: end of this note)::

    B8 H32 S8K, B4 H16 1000/4097  non-causal  lg_wsflash_*_d128_128x192_s2_pp_tma
    B8 H32 S8K, S4K               causal      lg_wsflash_*_d128_128x128_s2_pp_causal_tma_dw
    <= 1024 keys                  non-causal  lg_wsflash_*_d128_128x128_s3_pp_tma
    <= 1024 rows and keys         causal      lg_wsflash_*_d128_128x128_s3_pp_causal_tma_pt_uh4

Template features (each a :class:`~.wgmma_attention_ws.WsFlashConfig` field or a fixed part;
:data:`TEMPLATE_FEATURES` is the list the tests hold against the config's fields):

* one block of 3 warpgroups, ``__launch_bounds__(384, 1)``: warpgroup 0 the producer
  (``setmaxnreg.dec`` 24 with TMA), warpgroups 1 and 2 consumers (``setmaxnreg.inc`` 240),
  64 query rows each (``cw = wg - 1``); the tile's layouts, descriptors and P fragment are
  :func:`~.wgmma_attention.plan_wgmma_flash` with ``warpgroups=2``;
* ``loader="tma"``: thread 0 of the producer issues ``cp.async.bulk.tensor.4d`` boxes of 64
  head-dim elements x rows of 4-D tensor maps ``(head_dim, seq, head, batch)`` (rows past each
  (batch, head)'s sequence zero-filled by the hardware), ``arrive.expect_tx`` of the stage's
  bytes on the ``full`` barrier (count 1); Q once (``bQ``), then K and V of each block into a
  ring of ``stages``, waiting on the stage's ``empty`` barrier (count 8: lane 0 of each
  consumer warp, after the wgmma that read the stage retired) before each refill;
* consumers: wait ``bQ``; per block j wait ``K full[j % S]`` (parity ``(j / S) & 1``), issue
  ``S = Q K^T`` of j and ``O += P V`` of j - 1 together (FA3's intra-warpgroup overlap), wait
  S (``wait_group 1``), release K's stage, block j's softmax while P V runs, then wait P V,
  release V's stage of j - 1, rescale O; the last block's P V after the loop; write-back;
* ``pingpong``: the two consumers take turns to issue their GEMMs: ``bar.sync 1 + cw, 256``
  before, ``bar.arrive 2 - cw, 256`` after (consumer 1 opens with an arrive on barrier 1) --
  named barriers spanning **two** warpgroups, half of them arrive-only;
* ``defer_pv_wait``: the P V wait of block j - 1 moved to the top of block j + 1, after that
  block's ring waits (the V release then lags a block: ``check_release_lag``);
* ``bn=192`` (non-causal, more than 1024 keys): S is a ``wgmma.m64n192k16`` accumulator;
* ``persistent`` / ``unit_heads``: one block per SM walks (query block, head, batch) units
  (longest first in chunks of ``unit_heads`` pairs); the ring's counters run on over units
  (``g0``), Q is a one-stage ring (``bQe``), the producer waits the previous unit's Q release;
* off at d128 in what runs: ``rescale_vote`` (a warp-voted O rescale), ``v_behind_k`` (V of
  j - 1 loaded after K of j), ``loader="cp.async"`` (tensors TMA cannot address: 128 producer
  threads, ``cp.async.mbarrier.arrive.noinc``, count 128 / 256, and a generic-to-async proxy
  fence before each wgmma).

The softmax arithmetic is the IR's raw-score form (``raw=True`` statements of
:mod:`.wgmma_flash_ir`): raw scores masked to -inf, ``base = m == -inf ? 0 : m scale_log2``,
``exp2(fma(s, scale_log2, -base))``, pairs of probabilities summed into the row sum.  Two
spellings differ: the template prints ``alpha = exp2(m_old * scale_log2 - base)`` and ``l = l *
alpha + rs`` as a multiply and an add, which nvcc 13 may contract into fused multiply-adds
under its default ``--fmad`` (the first block's alpha, where ``m_old`` is the constant -inf,
stays a PTX ``mul.f32`` / ``sub.f32``), where the IR prints ``fmaf``; and the template masks at run time (``need_mask``), where the IR runs an unmasked
copy of the loop body for blocks every row sees.  Measured on the H100 all the same
(docs/PERFORMANCE.md, ``benchmarks/nvidia_ir_wgmma_flash_d128.py``): the two-warpgroup d128 IR
tile's output is bitwise the warp-specialised kernel's at B8 H32 S8K causal, B16 H32 S512
causal and B2 H4 S77 (128-key blocks on both sides), and the same tile with 192-key blocks is
bitwise it at B8 H32 S8K and B4 H16 1000 / 4097 (non-causal, where that kernel takes 192): the
IR form can be bitwise the template at every shape the dispatch was measured at.

The IR form has today (:mod:`kernels.ir.nvidia_tma`, verified by the per-role phase model
:mod:`kernels.verify.gate_tma` for the TMA GEMM): ``RoleBranch``, ``LeaderOnly``,
``Setmaxnreg``, ``MbarrierInit`` / ``InitFence`` / ``ExpectTx`` / ``Arrive`` (``per_warp``) /
``Wait``, ``TmaPrefetch``, ``VarInit`` / ``VarSet``, 2-D and 4-D ``TmaLoad``, ``NamedBarrier``
(``bar.sync`` / ``bar.arrive``, within one warpgroup or across several); and the consumers'
statements of the d64 IR (:mod:`.wgmma_flash_ir`: ``WgmmaMma`` with descriptors and register
A, ``RowMax`` / ``LaneXor`` / ``SoftmaxUpdate`` / ``ExpScores`` / ``Rescale`` /
``RoundProbs`` / ``FinalNormalize``, verified by the lockstep attention engine
:mod:`kernels.verify.attention_gate` with the GEMM's wgmma rules).  Missing, in the order a
builder needs them (:data:`PIECES`; :func:`missing_pieces` says which a configuration needs):

1. **the engine** (landed, with the ping-pong): :func:`kernels.verify.attention_ring
   .verify_ws_attention` -- one run holding the producer / consumer protocol and the
   consumers' softmax dataflow, which :func:`kernels.verify.verifier.verify` routes a spec
   with both ``softmax`` and ``warpgroup_roles`` to (with ``source``, piece 5's printed-text
   checks on the same instances).  The producer is the per-role model's agent, stepped by a
   :class:`~kernels.verify.ring_steps.Ring` (one CTA of the per-role model,
   ``gate_tma.role_cta``) while a consumer wait cannot complete, in a ``lazy`` and an ``eager``
   schedule; the consumer warpgroups are **one lockstep** ``AttentionDataflow`` over a view of
   the kernel (``block`` 256, ``tid = 128 + arange(256)``), whose walk calls the ring: waits
   and per-warp arrivals are the per-role model's agents' (parity observed once, arrival
   counts, expect-tx bytes, deadlocks, vector clocks), ``setmaxnreg`` its register rule; each
   box's elements become the dataflow's identities (``Ring.box_coords`` ->
   ``encode_ids``, zero-filled rows keeping their coordinates); each wgmma's operands go
   through the per-role model's stamp rule first (``DataRules.stamped_read`` /
   ``retire_reads``: an element no box wrote or whose phase the warpgroup has not observed, a
   box overwriting a read before the release after its retire: ``lds_races``).  The static
   pass runs on the consumer view (``RingStatic``: O index math, bounds, coverage; the (batch,
   head) anchor from the Q box its ``bQ`` wait observes).  Its first kernel:
   :func:`~.wgmma_ws_ir_serial.build_ws_serial_ir` (two consumers, two-stage K / V rings, the
   serial schedule, 4-D boxes; not dispatched; run on the H100, piece 5), verified causal and not
   at the mma.sync IR prefill's instances; planted bugs refused by their rule
   (``tests/test_ws_attention_engine.py``: consumer skips the full wait, producer skips the
   empty wait, expect-tx short / over, parity flipped, K released before S retired,
   setmaxnreg missing / over the file, K boxes at the query head, V a block late, Q at the next
   query block or head, Q's descriptor start unstepped, masks dropped, an O store dropped);
   the ring alone on the two-consumer TMA GEMM (``tests/test_ring_steps.py``).  The
   consumers' ping-pong (:data:`PIECES` ``engine_pingpong``, landed:
   :mod:`kernels.verify.ring_pingpong`): the named barriers split the consumers (``cw``), so
   the walk takes a split that only guards barriers for every thread's data and records each
   consumer warpgroup's own sequence of named barriers, mbarrier waits / arrives and wgmma
   issues; a second CTA of the per-role model then runs the producer's coroutine and the two
   recorded consumers as **three agents** in each of its schedules: the group named-barrier
   rule (ids, one thread count per id, one arrival per warpgroup per phase), deadlocks, no
   phase left part-way, and the turn rule (every wgmma inside its warpgroup's turn, from its
   ``bar.sync`` to its ``bar.arrive``; no two turns at once); any other split is still
   refused.  Its kernel: ``build_ws_serial_ir(pingpong=True)`` (the statements of
   :mod:`.ws_pingpong`, which the dispatched builder reuses: ``bar.sync 1 + cw, 256`` before
   each S and P V issue, ``bar.arrive 2 - cw, 256`` after, consumer 1 opening on barrier 1
   and skipping its last hand-over), verified causal and not with its printed text; planted
   bugs refused (``tests/test_ws_pingpong_engine.py``: a sync on the other consumer's
   barrier, thread counts 384 and 128, the opening arrive dropped, a sync without its arrive,
   the arrive before the issue it follows, P V issued before its turn, both consumers opened,
   the last hand-over kept; the barrier lines of the text: ids, counts, branch conditions,
   ``cw``, a dropped or misprinted line);
2. **4-D tensor maps** (landed): ``TensorMap(planes=(heads, batch))`` with four ``dims``,
   ``TmaLoad(coords=(head, batch))`` (counts checked where built; a ``TmaStore`` through a 4-D
   map refused); the per-role model's box identities over them (``gate_tma_data.plane_ids``:
   each dimension zero-filled past its own extent, a row past one plane's sequence kept apart
   from the next plane's rows; ``plane_coords`` reads them back) and ``Ring.box_coords`` (the
   spec coordinates of what the stamped boxes wrote); printed as ``lg_tma_load_4d`` (the
   template's helper text, :data:`~kernels.nvidia.tma.TMA_LOAD_4D_HELPER`, declared only where
   used), ``printed_tma`` reading the call and its plane coordinates back (literals included)
   and counting 2-D and 4-D calls (``tests/test_ring_4d.py``: a 4-D ring over two heads and two
   batches with a ragged sequence, misprints refused).  The host side (landed, :data:`PIECES`
   ``host_maps_4d``): :func:`~.ws_tma_loads.ir_attention_map_args` reads each 4-D map an IR
   kernel declares against its tensor at the launch (dims order, the extents its symbols
   evaluate to, box, dtype) and the template's encoder encodes it
   (:class:`~.ws_tma_loads.AttentionTensorMaps`: byte for byte the template's map);
   :class:`~.wgmma_ws_ir_launch.IrWsSerialAttention` launches the serial kernel by the IR's
   parameter names (``tests/test_nvidia_ws_ir_host.py``: every ``cuTensorMapEncodeTiled``
   argument read back on the fake driver, refusals);
3. **cross-warpgroup named barriers** (landed: ``NamedBarrier(id, threads, arrive)``, printed
   as ``lg_named_bar`` / ``lg_named_arrive``; on the per-role model one arrival per warpgroup
   per phase, a sync waiting for its phase, one thread count per id, no dangling phase at the
   end; the ping-pong on the two-consumer TMA GEMM and its planted bugs (wrong id, count,
   opening, last arrive) in ``tests/test_tma_group_named_barrier.py``);
4. **two consumer warpgroups in the builder** (landed: :mod:`.wgmma_flash_ir` builds
   ``warpgroups=2`` at head_dim 128, Q's descriptor start and the rows stepping by the
   warpgroup, ``bn`` 128 and 192, verified; the warp-specialised form adds K / V at
   ``stage * elems`` of a ring of ``stages``);
5. **the printer and its printed-text checks** (landed for the serial kernel, :data:`PIECES`
   ``printed_text``): :mod:`kernels.printer.cuda_attention` prints the attention statements
   and, through :func:`kernels.printer.cuda_tma.tma_stmt`, the role / mbarrier / TMA ones on
   one text; :mod:`kernels.verify.printed_ws` checks that text with both readers --
   ``verify_printed`` (the attention reader) on the text with exactly the role lines blanked
   (each blanked form counted against the IR's statements, ``__syncwarp`` / ``__syncthreads``
   companions required) against the IR without its TMA statements (the role and leader
   branches kept as the ``if`` statements they are: their conditions compared), and
   ``printed_tma_checks`` on the whole text against the whole IR (every call in order with the
   register-A P V wgmma, waits' parities, expect-tx bytes, box coordinates, the signature with
   the attention scalars); :func:`kernels.verify.verifier.verify` adds them with ``source``.
   The serial kernel's text verified causal and not; planted text bugs refused by
   ``printed_source`` / ``declarations`` (``tests/test_ws_printed_text.py``: a wait's parity,
   an expect-tx byte count, box coordinates, the role / leader branch conditions, softmax,
   row-sum and mask lines, a stray wait or box, a wait moved past the wgmma it guards, a
   dropped ``__syncwarp``, setmaxnreg, barrier counts and lengths).  **Left**: the index
   expressions of the blanked role lines are read back with C semantics (``printed_tma``) but
   not in the ``index_ranges`` interval pass; the serial kernel compiles (NVRTC, sm_90a: 168 registers, no spills; in the SASS the producer names
   registers up to R21 under its 24, the consumers up to R176 under their 240) and runs on
   the H100 through the host maps of piece 2 (``tests/test_nvidia_ws_ir_gpu.py``, 6 passed:
   bitwise the template of its configuration, ``lg_wsflash_*_d128_128x128_s2[_causal]_tma``,
   at B8 H32 S8K causal and not, B4 H16 1000 / 4097, B2 H4 S77 GQA bf16 and f16 BSHD, B16 H32
   S512 causal); its speed, the baseline the dispatched builder improves on
   (``benchmarks/nvidia_ws_ir_serial.py``, docs/PERFORMANCE.md): 0.89x that template at B8 H32
   S8K, 1.00x causal, 0.94x at 1000 / 4097, 1.02x at S512 causal, 1.10x at S77; 0.79-0.88x
   the dispatched configurations but at S77;
6. **the builder of the dispatched configurations** (landed, :data:`BUILDER_MODULE`,
   ``builder``: :func:`~.wgmma_ws_ir.build_ws_ir`): the template's overlap schedule on the
   serial kernel's ring parts (:class:`~.wgmma_ws_ir_serial.WsRingBuilder`, shared through its
   public methods): per block j wait K full, ``S = Q K_j^T`` and ``O += P V_{j-1}`` issued
   together, ``wait_group 1``, release K, block j's softmax while P V runs, ``wait_group 0``,
   release V of j - 1, rescale O; the last block's P V after the loop; ``stages`` 2 and 3,
   ``bn`` 128 and 192; verified, IR and printed text, at the IR prefills' instances and a
   ring-wrapping one (:func:`~.wgmma_ws_ir.ws_ir_instances`), causal and not; planted bugs
   refused by their rules (``tests/test_ws_ir_builder.py``: a wait_group count off by one, V
   released before its P V retired, a 2-stage parity on the 3-stage ring, the bn 192 S
   accumulator read past its columns, the deferred wait dropped, a release later than the
   ring absorbs).  The GEMM-turn hooks ``turn_begin`` / ``turn_end`` around each issue hold the
   ping-pong's named barriers (:mod:`.ws_pingpong`, verified by piece 1's replay) where
   ``pingpong`` is set, so the dispatched non-persistent configurations build as they run;
   ``persistent=True`` is piece 8's builder;
7. **deferred P V wait** (landed, ``defer_pv_wait``): the P V wait of block j - 1 at the top
   of block j + 1 after its ring waits, the V release of block j - 2 under ``j > 1`` (its lag
   run by the engine itself: the producer's refill waits the late release; a deadlock or a box
   over a read in flight is refused), alpha kept across blocks
   (``SoftmaxUpdate(alpha_declared=True)``, printed and read back as an assignment);
8. **persistent work units** (landed, ``persistent``; :mod:`.wgmma_ws_ir_persist`, a subclass
   of the overlap builder): the unit decode as IR lets (:mod:`.ws_units_ir`; the proof of
   :func:`~.ws_tma_loads.check_unit_decode` runs on those lets, which compute the template's
   order unit by unit), ``VarInit`` / ``VarSet`` ring counters over units (``g0`` in both
   roles; the engine carries them across loop iterations and checks each value against the
   kernel's declared range, :mod:`kernels.verify.ring_carried`; the printed-text reader reads
   the text over that range), the Q ring (``bQ`` / ``bQe``, released after the unit's last
   S), the unit's last V released, and coverage over a grid smaller than the units (every O
   element stored once over the CTAs' walks; a CTA with no unit).  Planted bugs refused
   (``tests/test_ws_persist_ir.py``: decode off by one / pairs merged, a counter not carried
   in either role, the Q release missing, a unit skipped / done twice, a range too small,
   misprinted counter lines).  NVRTC 13 sm_90a: 168 registers, no spills, as the template.
   On the H100 (:class:`~.wgmma_ws_ir_persist_launch.IrWsPersistAttention`,
   ``tests/test_nvidia_ws_persist_gpu.py``: 4 passed) bitwise the template
   ``lg_wsflash_*_d128_128x128_s3_pp_causal_tma_pt_uh4`` at B16 H32 S512 causal, H32/8,
   B2 H4/2 S77, B3 H5 S1000; 0.95-0.96x its speed (B16 H32 S512 0.961, H32/8 0.950, B8 H16
   S1024 0.961; one run, 9 rotated rounds); with its producer as the template's (printed last,
   its walk uniform, its block loop not unrolled) 0.99-1.04x (H100, 2026-11-25 03:20Z) and
   dispatched (:data:`~.prefill_select.IR_WS_PERSIST_AT_PARITY`; ``wgmma_ws_ir.build_ws_ir``
   builds the non-persistent kernel and names this one);
9. **the features off in what runs** (``unbuilt_features``): ``rescale_vote``,
   ``v_behind_k``, the ``cp.async`` producer at d128 (the fallback where TMA cannot address the
   tensors) and head_dim 64 are not in the builder;
10. **the cp.async producer** (landed, :data:`PIECES` ``cp_producer``; what d256 and tensors TMA
    cannot address run): :class:`~kernels.ir.nvidia_cp_ring.CpAsyncArrive`
    (``cp.async.mbarrier.arrive.noinc`` by every producer thread, printed as
    ``lg_cp_mbar_arrive`` with its helper declared only where used) and the producer's
    statements (:class:`~.ws_cp_producer.CpProducer`: the plan's 128-thread copies of Q, K and V
    into the tile's proved layouts, whole blocks unpredicated, the ragged one per row; ``bQ`` /
    ``full`` count 128).  On the per-role model (:mod:`kernels.verify.gate_cp_ring`): a copy's
    elements take the global element's identity and stay pending until their thread's arrive,
    which stamps them with the phase it joins (128 arrivals per warpgroup: a count of 1 is
    "more arrivals than the count", 256 a deadlock); a consumer's ``fence.proxy.async`` after
    the wait that acquired them is required before its wgmma reads them; copies no arrive covers
    at the end are refused; the engine reads the copies' identities (``copied_ids``) and runs
    the static pass on the producer too (index math, bounds, banks, the K / V head of each Q).
    **d256** (:data:`PIECES` ``d256_consumers``, landed): the two-consumer tile at head_dim 256
    and bn 64 (``WgmmaFlashBuilder(ws_consumer=True)``).  Its kernel:
    :func:`~.wgmma_ws_ir_cp.build_ws_cp_ir` (two consumers at 240 registers, two stages, the
    serial schedule, optional ping-pong; not dispatched), verified IR and text; planted bugs
    refused (``tests/test_ws_cp_producer.py``: full / bQ count 1 and 256, the K or V proxy fence
    dropped, a noinc arrive missing, a copy at the wrong row, copies no arrive covers, six
    misprints).  NVRTC 13.5 sm_90a: 168 registers, no spills (causal ping-pong: 4 bytes); in
    the SASS the producer names up to R21 under its 24, the consumers up to R208-R214 under
    240.  On the H100 (:class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`,
    ``tests/test_nvidia_ws_ir_cp_gpu.py``: 6 passed) bitwise the template of its configuration
    (``lg_wsflash_*_d256_128x64_s2[_pp][_causal]``) and the dispatched d256 kernel at B2 H16
    S4K, B4 H8/1 S513 causal, B2 H4 S77; 0.88-0.91x that template at S4K (the serial schedule),
    0.87-0.89x the dispatched one (docs/PERFORMANCE.md).
11. **the cp.async producer in the overlap builder** (landed, :data:`PIECES` ``cp_overlap``):
    the ring parts of :class:`~.wgmma_ws_ir_serial.WsRingBuilder` take either producer (the
    TMA boxes, or :class:`~.ws_cp_producer.CpProducer` with ``full`` counting 128 and the
    consumers' ``fence.proxy.async`` after their ring waits,
    :meth:`~.wgmma_ws_ir_serial.WsRingBuilder.acquired`: once per block, after both waits and
    the deferred P V wait, as the template), so :func:`~.wgmma_ws_ir.build_ws_ir` builds the
    dispatched d256 configuration (``lg_wsflash_ir_*_d256_128x64_s2_pp[_causal]_dw``), verified
    IR and text; planted bugs refused (``tests/test_ws_ir_cp_overlap.py``: the proxy fence
    dropped in the loops / before the last P V, the deferred V release above its wait, of the
    block in flight, two blocks late, the producer's V arrive dropped).  The serial d256 kernel
    is the serial builder on the same parts (its printed text byte-identical to the earlier
    duplicate's).  The overlap kernel's producer predicates every block (one copy of the
    loads, as the template): with the serial kernel's unpredicated second copy it spilled 164
    bytes under ``setmaxnreg.dec 24`` (NVRTC 13.5; now 16 / 20 bytes: four values computed
    before the roles).  On the H100 (:class:`~.wgmma_ws_ir_cp_launch.IrWsCpAttention`
    ``(cfg=...)``, ``tests/test_nvidia_ws_ir_cp_gpu.py``: 3 passed) bitwise its template at B2
    H16 S4K, B4 H8/1 S513 causal, B2 H4 S77; 0.74x (plain) / 0.77x (causal) its speed at S4K,
    0.94x at S513 causal, 0.99x at S77 -- slower than the serial IR (0.86-0.91x), open
    (docs/PERFORMANCE.md).

Registers (NVRTC 13.5, ``--ptxas-options=-v``, sm_90a; not a GPU run): the builder's kernels
compile without spills, as the template (a write-only S accumulator at scale-d 0 and O / P
pinned before each P V issue: :mod:`.wgmma_ws_ir`; at bn 192 Q's descriptors recomputed at
each S issue, ``lg_gmma_desc_u32_pin``: held across the key loop, eight 64-bit values, they
spilled 72 bytes in the ping-pong form, eight ``LDL.64`` in every key block -- the 3-4 % the
192-key tile measured below its template).  On the H100 (2026-11-25,
:class:`~.wgmma_ws_ir_launch.IrWsAttention`, ``tests/test_nvidia_ws_ir_gpu.py``, persistence
off): bitwise the template of the same configuration at every measured shape; with the pinned
Q descriptors (medians of 9 rotated rounds, one run): 128 x 192 s2 0.992 at B8 H32 S8K and
0.995 at B4 H16 1000 / 4097 (0.962 / 0.970 before), 128 x 128 s2 causal dw 0.999 at S8K
causal, 0.996 at B2 H32/8 S4K causal, 0.993 at B3 H8 S1500 causal, 128 x 128 s3 1.068 at B2
H4 S77 and 0.989 at B16 H32 S512, the short causal configuration without persistence 0.974 at
B16 H32 S512 causal (docs/PERFORMANCE.md).  **Dispatched** where at parity
(:data:`~.prefill_select.IR_WS_PREFILL_AT_PARITY`: the 192-key, causal-long and 3-stage
non-causal configurations; :mod:`.prefill_ir` falls back to the template for tensors TMA
cannot address and offsets past 2^31), and so is the persistent short causal configuration
(piece 8, :data:`~.prefill_select.IR_WS_PERSIST_AT_PARITY`: 0.99-1.04x with its producer as
the template's); the d256 one (piece 11) measured 0.84-0.87x and runs its template.

What the IR's hot loop is beside the template's (NVRTC 13.5 SASS, the unmasked key loop
against the template's one loop, which tests ``need_mask`` at run time): 709 instructions
against 872 at 128 x 192 s2 pp, 509 against 626 at 128 x 128 s3 pp; the 3-stage causal
kernel's gap at S512 (0.974, persistence off) is outside the loop (block 0 always masked, the
masked loop copy, 2928 instructions in all against 1944), not yet closed.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

from .wgmma_attention_ws import WsFlashConfig

__all__ = ["TEMPLATE_FEATURES", "Piece", "PIECES", "missing_pieces", "dispatched_d128_configs",
           "MEASURED_SHAPES"]

#: every ``WsFlashConfig`` field -> what it changes in the printed template (the docstring's
#: list; a field added to the config without a line here fails the tests)
TEMPLATE_FEATURES: Dict[str, str] = {
    "dtype": "bf16 / f16 operands and output",
    "head_dim": "64, 128 or 256 (d256: 24 / 240 registers, bn 64)",
    "bn": "keys per block: the S accumulator is m64n{bn}",
    "stages": "depth of the K and V rings (full / empty mbarriers per stage)",
    "causal": "the diagonal mask and the key-block count per query block",
    "pingpong": "the consumers' GEMM turns on named barriers 1 and 2 (256 threads)",
    "arch": "sm_90a",
    "loader": "cp.async (128 producer threads) or tma (one producer thread, 4-D boxes)",
    "persistent": "one block per SM over (query block, head, batch) units",
    "unit_heads": "units in chunks of this many (batch, head) pairs",
    "defer_pv_wait": "the P V wait after the next block's ring waits",
    "rescale_vote": "the O rescale skipped by a warp vote when no row max changed",
    "v_behind_k": "V of block j - 1 loaded after K of block j",
}


def _has_field(cls: type, name: str) -> bool:
    return dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}


def _module(name: str) -> Callable[[], bool]:
    """A probe: does the planned module ``name`` exist?"""
    def probe() -> bool:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    return probe


def _tma_load_4d() -> bool:
    """4-D boxes in the IR (``TmaLoad.coords``, with the per-role model's identities) *and*
    printed (the printer raised ``KernelError`` on one before it printed ``lg_tma_load_4d``)."""
    from ..errors import KernelError
    from ..ir.nvidia_tma import TensorMap, TmaLoad
    from ..printer.cuda_tma import tma_stmt
    if not _has_field(TmaLoad, "coords"):
        return False
    tm = TensorMap("tm", "T", ("d", "row", "head", "batch"), 64, 64, 64, 64, planes=(1, 1))
    try:
        tma_stmt(lambda d, line: None, TmaLoad(tm, 0, 0, "s", 0, "b", 0, coords=(0, 0)), 0)
    except KernelError:
        return False
    return True


def _host_maps_4d() -> bool:
    """Does the host read an IR kernel's 4-D tensor map against its tensor and describe it as
    the template's encoder does (the serial kernel's Q map over a (2, 4, 300, 128) BSHD bf16
    tensor)?"""
    if not _module("kernels.nvidia.wgmma_ws_ir_launch")():
        return False
    from ..ir.attention import runtime_symbol as R
    from ..ir.nvidia_tma import TensorMap
    from .ws_tma_loads import attention_map_args, ir_attention_map_args

    class _Tensor:      # shape, strides, pointer and dtype: all a map reads of a tensor
        shape, dtype = (2, 4, 300, 128), "torch.bfloat16"

        def stride(self, d=None):
            st = (300 * 4 * 128, 128, 4 * 128, 1)
            return st if d is None else st[d]

        def data_ptr(self) -> int:
            return 1 << 20

    tm = TensorMap("tmQ", "Q", ("d", "row", "head", "batch"), 128, R("seqlen_q"), 64, 128,
                   "bf16", planes=(R("heads"), R("batch")))
    t = _Tensor()
    sizes = {"seqlen_q": 300, "heads": 4, "batch": 2}
    try:
        return ir_attention_map_args(tm, t, sizes) == attention_map_args(t, 128) == {
            "dims": (128, 300, 4, 2), "strides": (1024, 256, 307200), "box": (64, 128, 1, 1)}
    except Exception:       # a reading that refuses the template's own map is not there
        return False


def _named_barrier_arrive() -> bool:
    from ..ir import nvidia_tma
    return hasattr(nvidia_tma, "NamedBarrierArrive") or _has_field(nvidia_tma.NamedBarrier,
                                                                   "arrive")


def _engine_pingpong() -> bool:
    """Does the warp-specialised attention engine take named barriers (it says so)?"""
    if not _module(ENGINE_MODULE)():
        return False
    from ..verify import attention_ring
    return bool(getattr(attention_ring, "NAMED_BARRIERS", False))


@functools.lru_cache(maxsize=None)
def _ws_printed_text() -> bool:
    """Is the printed text of the warp-specialised serial kernel checked (the verifier took a
    ``source`` for it only once :mod:`kernels.verify.printed_ws` existed)?  Runs the checks
    on its printed text (a fraction of a second past the build)."""
    if not _module("kernels.verify.printed_ws")():
        return False
    from ..printer.cuda_attention import emit_cuda_attention
    from ..verify.attention_static import default_instances
    from ..verify.printed_ws import verify_printed_ws
    from .wgmma_ws_ir_serial import build_ws_serial_ir
    k = build_ws_serial_ir()
    r = verify_printed_ws(k, emit_cuda_attention(k), instances=default_instances(k))
    return all(c.holds for c in r.values())


@functools.lru_cache(maxsize=None)
def _cp_producer() -> bool:
    """Is the cp.async producer there: its arrive on the per-role model, and the d256 kernel
    built from it with its printed text checked (a second past the build)?"""
    if not _module("kernels.nvidia.ws_cp_producer")():
        return False
    from ..ir.nvidia_cp_ring import CpAsyncArrive
    from ..printer.cuda_attention import emit_cuda_attention
    from ..verify.attention_static import default_instances
    from ..verify.gate_cp_ring import CP_STATEMENTS
    from ..verify.printed_ws import verify_printed_ws
    from .wgmma_ws_ir_cp import build_ws_cp_ir
    if CpAsyncArrive not in CP_STATEMENTS:
        return False
    k = build_ws_cp_ir()
    r = verify_printed_ws(k, emit_cuda_attention(k), instances=default_instances(k)[1:2])
    return all(c.holds for c in r.values())


def _d256_consumers() -> bool:
    from .wgmma_attention import WgmmaFlashConfig
    from .wgmma_flash_ir import wgmma_flash_ir_supported
    return wgmma_flash_ir_supported(WgmmaFlashConfig(head_dim=256, warpgroups=2, bn=64),
                                    ws_consumer=True) is None


def _two_consumer_builder() -> bool:
    from .wgmma_attention import WgmmaFlashConfig
    from .wgmma_flash_ir import wgmma_flash_ir_supported
    return wgmma_flash_ir_supported(WgmmaFlashConfig(head_dim=128, warpgroups=2)) is None


def _builder_takes(**change: object) -> Callable[[], bool]:
    """A probe: does the builder (:data:`BUILDER_MODULE`) take a d128 TMA configuration
    without ping-pong, with ``change`` (its ``ws_ir_supported`` says None)?"""
    return _builder_takes_all(change)


def _builder_takes_all(*changes: Dict[str, object]) -> Callable[[], bool]:
    def probe() -> bool:
        if not _module(BUILDER_MODULE)():
            return False
        from . import wgmma_ws_ir
        base = WsFlashConfig(head_dim=128, pingpong=False, loader="tma")
        return all(wgmma_ws_ir.ws_ir_supported(dataclasses.replace(base, **c)) is None
                   for c in changes)
    return probe


def _persist_builder() -> bool:
    """Does the persistent builder (:mod:`.wgmma_ws_ir_persist`) take the d128 TMA
    configuration with ``persistent`` (and ``unit_heads`` 4) on?"""
    if not _module("kernels.nvidia.wgmma_ws_ir_persist")():
        return False
    from .wgmma_ws_ir_persist import ws_persist_supported
    base = WsFlashConfig(head_dim=128, pingpong=False, loader="tma", persistent=True)
    return all(ws_persist_supported(dataclasses.replace(base, unit_heads=g)) is None
               for g in (0, 4))


def _builder_takes_d256() -> bool:
    """Does the builder take the dispatched d256 configuration (cp.async, bn 64, 2 stages,
    ping-pong, the deferred P V wait: ``prefill_select.WS_PREFILL_TILES[256]``)?"""
    if not _module(BUILDER_MODULE)():
        return False
    from . import wgmma_ws_ir
    from .prefill_select import WS_PREFILL_TILES
    cfg = WsFlashConfig(head_dim=256, **WS_PREFILL_TILES[256])
    return cfg.loader == "cp.async" and wgmma_ws_ir.ws_ir_supported(cfg) is None


#: the planned modules: the engine (per-role scheduler + attention dataflow) and the builder
ENGINE_MODULE = "kernels.verify.attention_ring"
BUILDER_MODULE = "kernels.nvidia.wgmma_ws_ir"


@dataclass(frozen=True)
class Piece:
    """One missing part of the IR form: its name, what it is, the configurations that need it
    (``needed_by(cfg)``) and a probe of the code base that turns True once it exists."""

    name: str
    what: str
    needed_by: Callable[[WsFlashConfig], bool]
    probe: Callable[[], bool]


PIECES: Tuple[Piece, ...] = (
    Piece("engine", "one verifier run over producer / consumer roles with mbarrier phases and "
          "the attention dataflow of the consumers", lambda c: True,
          _module(ENGINE_MODULE)),
    Piece("engine_pingpong", "the engine running the consumers' named barriers (ping-pong) "
          "beside their lockstep dataflow", lambda c: c.pingpong, _engine_pingpong),
    Piece("tma_4d", "4-D tensor maps (head_dim, seq, head, batch) in TensorMap / TmaLoad, the "
          "model and the printer", lambda c: c.loader == "tma", _tma_load_4d),
    Piece("host_maps_4d", "the host's cuTensorMapEncodeTiled of an IR kernel's 4-D tensor "
          "maps, read against the launch's tensors, and a launcher", lambda c: c.loader == "tma",
          _host_maps_4d),
    Piece("pingpong_barriers", "bar.sync / bar.arrive on 256 threads of two consumer "
          "warpgroups, with the sync-arrive pairing rule", lambda c: c.pingpong,
          _named_barrier_arrive),
    Piece("two_consumers", "the softmax builder for two consumer warpgroups (rows m0 + 64 cw, "
          "Q descriptor start cw * wg_step)", lambda c: c.consumers == 2,
          _two_consumer_builder),
    Piece("printed_text", "one printer for the attention and role statements, with the "
          "printed-text checks of both on the one text", lambda c: True, _ws_printed_text),
    Piece("builder", "the warp-specialised builder of the dispatched configurations (overlap "
          "schedule, stages, bn 192)", lambda c: True, _builder_takes()),
    Piece("deferred_pv_wait", "the deferred P V wait and V release of block j - 2",
          lambda c: c.defer_pv_wait, _builder_takes(defer_pv_wait=True)),
    Piece("persistent_units", "the unit decode as IR lets, ring counters over units, the Q "
          "ring", lambda c: c.persistent, _persist_builder),
    Piece("unbuilt_features", "the template's features off in what runs (rescale_vote, "
          "v_behind_k), the cp.async producer at d128 (the fallback where TMA cannot address "
          "the tensors) and head_dim 64 in the builder",
          lambda c: (c.rescale_vote or c.v_behind_k or c.head_dim == 64
                     or (c.loader != "tma" and c.head_dim != 256)),
          _builder_takes_all(dict(rescale_vote=True), dict(v_behind_k=True),
                             dict(loader="cp.async"), dict(head_dim=64))),
    Piece("cp_overlap", "the overlap builder on the cp.async producer (the ring parts taking "
          "either producer, the consumers' proxy fence after the ring waits): the dispatched "
          "d256 configuration", lambda c: c.loader == "cp.async" and c.head_dim == 256,
          _builder_takes_d256),
    Piece("cp_producer", "the cp.async producer: 128 copying threads, cp.async.mbarrier.arrive"
          ".noinc (full count 128), the consumers' proxy fence, on the per-role model",
          lambda c: c.loader == "cp.async", _cp_producer),
    Piece("d256_consumers", "two consumer warpgroups at head_dim 256 (bn 64, O's 128 "
          "registers)", lambda c: c.head_dim == 256, _d256_consumers),
)


def missing_pieces(cfg: WsFlashConfig) -> Tuple[str, ...]:
    """The names of the :data:`PIECES` the IR form of ``cfg`` needs and the code base does not
    have yet (empty once ``cfg`` can be built and verified as IR)."""
    return tuple(p.name for p in PIECES if p.needed_by(cfg) and not p.probe())


#: (label, batch, heads, query rows, key rows, causal) of the A/B the dispatch switch needs:
#: the brief's S8K shapes and the short / odd ones the prefill rules were measured at
MEASURED_SHAPES: Tuple[Tuple[str, int, int, int, int, bool], ...] = (
    ("B8 H32 S8K", 8, 32, 8192, 8192, False),
    ("B8 H32 S8K causal", 8, 32, 8192, 8192, True),
    ("B4 H16 1000/4097", 4, 16, 1000, 4097, False),
    ("B16 H32 S512 causal", 16, 32, 512, 512, True),
    ("B16 H32 S512", 16, 32, 512, 512, False),
)


def dispatched_d128_configs(dtype: str = "bf16") -> Dict[str, WsFlashConfig]:
    """The configuration :func:`~.prefill_select.choose_prefill` runs at each of
    :data:`MEASURED_SHAPES` on an sm_90a device with TMA-addressable tensors, head_dim 128."""
    from .prefill_select import choose_prefill
    out: Dict[str, WsFlashConfig] = {}
    for label, _b, _h, sq, skv, causal in MEASURED_SHAPES:
        ch = choose_prefill(dtype, 128, causal, "wgmma", True, max(sq, skv), skv)
        out[label] = ch.config
    return out
