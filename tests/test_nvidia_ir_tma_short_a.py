"""Short A boxes (``TmaGemmConfig.a_rows``) in the IR-built TMA GEMM: the A tensor map's box
and ``expect_tx`` carry ``a_rows`` rows; the wgmma still reads the tile's 64 rows, and the
per-role model lets the rows nothing wrote feed only accumulator rows that no store reaches.
Planted bugs: M past the box (the undefined rows would be stored), a whole-tile box against
the short expect_tx, the whole tile's bytes announced for the short box, a box row count that
is not the plan's."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from kernels.ir.core import If, Loop, walk
from kernels.ir.nvidia_tma import MbarrierExpectTx, RoleBranch, TmaLoad
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir, default_instances, ir_form_refusal
from kernels.printer.cuda import emit_cuda
from kernels.verify.verifier import verify

SKINNY = TmaGemmConfig(dtype="bf16", bm=64, bn=64, stages=6)


def _bad(k, source=None):
    r = verify(k, arch="sm_90a", source=source)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("kw", [dict(a_rows=8), dict(a_rows=16, bn=128, stages=8),
                                dict(a_rows=32, b_major="k")], ids=str)
def test_short_a_box_ir_verifies(kw):
    cfg = dataclasses.replace(SKINNY, **kw)
    assert ir_form_refusal(cfg) is None
    k = build_tma_gemm_ir(cfg)
    tm_a = k.meta["maps"][0]
    assert (tm_a.box_inner, tm_a.box_outer) == (64, cfg.a_rows)
    tx = {s.bytes for s in walk(k.body) if isinstance(s, MbarrierExpectTx)}
    assert tx == {cfg.a_rows * 128 + cfg.b_stage}
    assert all(v[0] <= cfg.a_rows for v in default_instances(cfg))
    src = emit_cuda(k)
    assert k.name.endswith(f"_a{cfg.a_rows}") and "A boxes of" in src
    assert _bad(k, src) == {}


def test_m_past_the_short_box_is_refused():
    """M = a_rows + 8: C rows a_rows.. are summed from A rows no box wrote, and stored."""
    cfg = dataclasses.replace(SKINNY, a_rows=16)
    k = build_tma_gemm_ir(cfg, instances=((24, 128, 64, 1),))
    bad = _bad(k)
    assert "read before anything was written" in bad.get("lds_races", ""), bad


def test_whole_tile_spec_is_refused():
    """The verifier must not take the short-box kernel at the whole tile's instances."""
    cfg = dataclasses.replace(SKINNY, a_rows=8)
    k = build_tma_gemm_ir(cfg, instances=((200, 300, 136, 3),))
    assert "lds_races" in _bad(k)


def _producer_loads(k):
    role = next(s for s in k.body if isinstance(s, RoleBranch) and s.role == "producer")
    return [s for s in walk(role.body) if isinstance(s, (TmaLoad, MbarrierExpectTx))]


def _swap(k, pred, fn):
    def go(body):
        for i, s in enumerate(body):
            if pred(s):
                body[i] = fn(s)
            elif isinstance(s, (Loop, If)):
                go(s.body)
    go(k.body)
    return k


@pytest.mark.parametrize("rows, match", [(64, "more than its expect_tx"), (8, "deadlock")])
def test_box_rows_other_than_the_plans_are_refused(rows, match):
    """A box of the whole tile (64 rows) brings more bytes than the short expect_tx; a box of
    8 rows where the plan says 16 brings fewer, and the phase never completes."""
    cfg = dataclasses.replace(SKINNY, a_rows=16)
    k = copy.deepcopy(build_tma_gemm_ir(cfg))
    tm = dataclasses.replace(k.meta["maps"][0], box_outer=rows)
    _swap(k, lambda s: isinstance(s, TmaLoad) and s.tmap.tensor == "A",
          lambda s: dataclasses.replace(s, tmap=tm))
    assert any(isinstance(s, TmaLoad) and s.tmap.box_outer == rows for s in _producer_loads(k))
    bad = _bad(k)
    assert match in bad.get("mbarrier_protocol", ""), bad


def test_whole_tile_bytes_for_the_short_box_deadlock():
    cfg = dataclasses.replace(SKINNY, a_rows=16)
    k = copy.deepcopy(build_tma_gemm_ir(cfg))
    _swap(k, lambda s: isinstance(s, MbarrierExpectTx),
          lambda s: MbarrierExpectTx(s.bar, s.index, s.bytes + 48 * 128))
    bad = _bad(k)
    assert "deadlock" in bad.get("mbarrier_protocol", ""), bad


def test_operand_nothing_wrote_is_refused_at_once():
    """No B box at all (expect_tx lowered to match): every B operand row is undefined, which
    is refused at the wgmma, not only when a store reaches C."""
    cfg = dataclasses.replace(SKINNY, a_rows=16)
    k = copy.deepcopy(build_tma_gemm_ir(cfg))

    def drop(body):
        body[:] = [s for s in body if not (isinstance(s, TmaLoad) and s.tmap.tensor == "B")]
        for s in body:
            if isinstance(s, (Loop, If)):
                drop(s.body)
    drop(k.body)
    _swap(k, lambda s: isinstance(s, MbarrierExpectTx),
          lambda s: MbarrierExpectTx(s.bar, s.index, s.bytes - cfg.b_stage))
    bad = _bad(k)
    assert "before anything was written" in bad.get("lds_races", ""), bad
