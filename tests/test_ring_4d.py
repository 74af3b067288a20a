"""4-D TMA boxes (plan piece 2, its IR and model half): ``TensorMap(planes=...)`` /
``TmaLoad(coords=...)`` over attention's ``(head_dim, seq, head, batch)``, loaded by the
per-role model's producer into a 2-stage ring and read back by the ring
(kernels/verify/ring_steps.py, ``Ring.box_coords``) as the spec coordinates the attention
dataflow will encode: each box one (batch, kv head) plane, rows past that plane's sequence
zero-filled with their own coordinates (not the next head's rows).  The printer prints a 4-D
load as ``lg_tma_load_4d`` (its helper only where used), and the printed checks read its
plane coordinates back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import sympy

from kernels.errors import KernelError
from kernels.ir.core import Kernel, Let, Loop, Shared, sym
from kernels.ir.nvidia_tma import (IntParam, LeaderOnly, MbarrierArrive, MbarrierExpectTx,
                                   MbarrierInit, MbarrierInitFence, MbarrierWait, RoleBranch,
                                   Setmaxnreg, TensorMap, TmaLoad, TmaStore)
from kernels.nvidia.tma import TMA_LOAD_4D_HELPER, TmaOperandLoad, tma_tile_addresses
from kernels.verify.gate_tma_data import plane_coords, plane_ids
from kernels.verify.ring_steps import RING_SCHEDULES, Ring, RingWalk
from kernels.verify.spec import Dim, KernelSpec, SpecError, Symbol, TensorSpec

SKV, HK, B, J = sym("seqlen_kv"), sym("kv_heads"), sym("batch"), sym("j")
TM = TensorMap("tmK", "K", ("d", "key", "kv_head", "batch"), 64, SKV, 64, 64, "bf16",
               planes=(HK, B))
SPEC = KernelSpec(name="ring4d", dims=(Dim("key"), Dim("d"), Dim("kv_head"), Dim("batch")),
                  tensors=(TensorSpec("K", ("key", "d", "kv_head", "batch"), "input", "bf16"),),
                  symbols=(Symbol("seqlen_kv", 1, 4096), Symbol("kv_heads", 1, 64),
                           Symbol("batch", 1, 64), Symbol("ctas", 1, 4096)),
                  warpgroup_roles=("producer", "consumer"))
#: keys not a multiple of the box (the last block's rows past seqlen_kv zero-filled), five
#: blocks on two stages (the ring wraps), two heads and two batches (a CTA per plane)
VALUES = {"seqlen_kv": 300, "kv_heads": 2, "batch": 2, "ctas": 4}
STAGE = 64 * 64


@dataclass
class Probe:
    """A test statement: the consumers look at block ``j``'s stage (after its full wait)."""
    j: object


def _kernel(coords=(sym("h"), sym("b")), parity=sympy.Mod(sympy.floor(J / 2), 2)):
    blocks = sympy.floor((SKV + 63) / 64)
    st = sympy.Mod(J, 2)
    producer = RoleBranch("producer", 0, 1, [
        Setmaxnreg(False, 24),
        LeaderOnly([Loop("j", 0, blocks, [
            MbarrierWait("empty", st, sympy.Mod(sympy.floor(J / 2) + 1, 2)),
            MbarrierExpectTx("full", st, TM.box_bytes),
            TmaLoad(TM, 0, 64 * J, "sK", STAGE * st, "full", st, "K.tma", coords=coords),
        ])])])
    consumer = RoleBranch("consumer", 1, 2, [
        Setmaxnreg(True, 240),
        Loop("j", 0, blocks, [
            MbarrierWait("full", st, parity),
            Probe(J),
            MbarrierArrive("empty", st, per_warp=True),
        ])])
    body = [Let("wg", sympy.floor(sym("tid") / 128)),
            Let("h", sympy.Mod(sym("bx"), HK)), Let("b", sympy.floor(sym("bx") / HK)),
            MbarrierInit("full", 2, 1), MbarrierInit("empty", 2, 8), MbarrierInitFence(),
            producer, consumer]
    k = Kernel("ring4d", [TM, IntParam("seqlen_kv"), IntParam("kv_heads"), IntParam("batch")],
               [Shared("sK", "bf16", 2 * STAGE)], [], body, 384, (4, 1, 1), ("bx",),
               min_blocks=1)
    k.spec = SPEC
    return k


#: box element -> (row, column) of the box (the TMA model's swizzled placement)
_EL = tma_tile_addresses(TmaOperandLoad(64, 64)) // 2


class _Look(RingWalk):
    def __init__(self, ring):
        super().__init__(ring)
        self.seen = []

    def data(self, s, env):
        if not isinstance(s, Probe):
            super().data(s, env)
        j = int(np.asarray(env[sym("j")]).flat[0])
        self.seen.append((j, self.ring.box_coords("sK", STAGE * (j % 2) + _EL)))


def _run(k, schedule="lazy", bx=0):
    ring = Ring(k, SPEC, "sm_90a", VALUES, bx, schedule=schedule)
    walk = _Look(ring)
    walk.run()
    return ring.f.first, walk.seen


@pytest.mark.parametrize("schedule", RING_SCHEDULES)
@pytest.mark.parametrize("bx", range(4))
def test_4d_boxes_land_at_their_plane_with_the_zero_fill(schedule, bx):
    fails, seen = _run(_kernel(), schedule, bx)
    assert fails == {}, fails
    h, b = bx % 2, bx // 2
    assert [j for j, _ in seen] == [0, 1, 2, 3, 4]
    r, c = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    for j, (tensor, co, zero) in seen:
        assert tensor == "K"
        assert (co["key"] == 64 * j + r).all() and (co["d"] == c).all()
        assert (co["kv_head"] == h).all() and (co["batch"] == b).all()
        assert (zero == (64 * j + r >= 300)).all()      # keys 300..319: zeros of this plane


def test_identities_round_trip_and_keep_overhang_rows_apart():
    env = {SKV: 100, HK: 2, B: 2}
    a = plane_ids(1, TM, 0, 64, [1, 0], env, SPEC.tensors[0].dims)
    b = plane_ids(1, TM, 0, 0, [0, 1], env, SPEC.tensors[0].dims)
    assert not np.isin(a, b).any()      # key 100+ of head 1 is not key 0.. of the next plane
    co, zero = plane_coords(a, TM, env)
    assert (co["key"][:, 0] == 64 + np.arange(64)).all() and (co["kv_head"] == 1).all()
    assert zero[36:].all() and not zero[:36].any()
    with pytest.raises(SpecError, match="not tensor K's"):
        plane_ids(1, TensorMap("tmX", "K", ("d", "key", "head", "batch"), 64, SKV, 64, 64,
                               planes=(HK, B)), 0, 0, [0, 0], env, SPEC.tensors[0].dims)


def test_a_wrong_plane_coordinate_is_what_the_ring_reads_back():
    """A box at the wrong head (h + 1) lands, stamped and complete: the ring's coordinates
    say which head it holds (the attention dataflow's GQA rule then refuses it)."""
    fails, seen = _run(_kernel(coords=(sym("h") + 1, sym("b"))), bx=0)
    assert fails == {}
    assert all((co["kv_head"] == 1).all() for _, (_, co, _) in seen)


def test_a_4d_wait_with_a_stale_parity_is_refused():
    fails, _ = _run(_kernel(parity=0))
    assert "a phase it had already observed" in fails["mbarrier_protocol"]


def test_4d_maps_and_loads_are_checked_where_built():
    with pytest.raises(ValueError, match="one per plane extent"):
        TensorMap("tmK", "K", ("d", "key", "kv_head"), 64, SKV, 64, 64, planes=(HK, B))
    with pytest.raises(ValueError, match="plane coordinates"):
        TmaLoad(TM, 0, 0, "sK", 0, "full", 0, "K.tma", coords=(0,))
    with pytest.raises(ValueError, match="4-D tensor map"):
        TmaStore(TM, "sK", 0, 0, 0)




# ---- the printer (plan piece 2's last part) ---------------------------------------------------

def _printable():
    """The ring4d kernel without its test probe: what the printer prints."""
    k = _kernel()
    cons = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "consumer")
    loop = next(s for s in cons.body if isinstance(s, Loop))
    loop.body = [s for s in loop.body if not isinstance(s, Probe)]
    return k


def test_a_4d_load_is_printed_with_its_helper_and_read_back():
    from kernels.printer.cuda import emit_cuda
    from kernels.verify.printed_tma import printed_tma_checks
    k = _printable()
    src = emit_cuda(k)
    assert src.count(TMA_LOAD_4D_HELPER) == 1
    assert "lg_tma_load_4d((sK_u32 + 2 * (4096*(((j) % 2)))), tmK, (lg_bar_full_u32 + 8 * " \
        "(((j) % 2))), 0, 64*j, h, b);" in src
    f = printed_tma_checks(k, src)
    assert f.first == {}, f.first


def test_kernels_without_4d_loads_print_no_4d_helper():
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir, tma_ir_source
    assert "lg_tma_load_4d" not in tma_ir_source(build_tma_gemm_ir(TmaGemmConfig()))


@pytest.mark.parametrize("old,new,check", [
    (", 0, 64*j, h, b);", ", 0, 64*j, b, h);", "printed_source"),       # planes swapped
    (", 0, 64*j, h, b);", ", 64, 64*j, h, b);", "printed_source"),      # a literal wrong
    (", 0, 64*j, h, b);", ", 0, 64*j, h);", "printed_source"),          # a plane dropped
    ("lg_tma_load_4d((sK", "lg_tma_load_2d((sK", "printed_source"),        # the 2-D call
])
def test_a_misprinted_4d_load_is_refused(old, new, check):
    from kernels.printer.cuda import emit_cuda
    from kernels.verify.printed_tma import printed_tma_checks
    k = _printable()
    src = emit_cuda(k)
    assert old in src
    f = printed_tma_checks(k, src.replace(old, new))
    assert check in f.first, f.first


def test_a_missing_4d_helper_is_refused():
    from kernels.printer.cuda import emit_cuda
    from kernels.verify.printed_tma import printed_tma_checks
    k = _printable()
    src = emit_cuda(k).replace(TMA_LOAD_4D_HELPER, "")
    assert "4-D box load helper" in printed_tma_checks(k, src).first["declarations"]
