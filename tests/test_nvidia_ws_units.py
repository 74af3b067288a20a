"""The persistent prefill's work-unit order (``WsFlashConfig.unit_heads``): the printed decode
covers every (query block, head, batch) exactly once over the grid's walks, the proof reads the
printed arithmetic, and planted decode bugs are caught."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, emit_ws_flash, plan_ws_flash
from kernels.nvidia.ws_tma_loads import (check_unit_decode, printed_unit_order,
                                         unit_order)


def _cfg(g: int, causal: bool = True) -> WsFlashConfig:
    return WsFlashConfig(loader="tma", causal=causal, persistent=True, stages=3, unit_heads=g)


@settings(max_examples=40, deadline=None)
@given(g=st.integers(0, 9), causal=st.booleans(), nqb=st.integers(1, 6),
       nh=st.integers(1, 7), nb=st.integers(1, 3), grid=st.integers(1, 40))
def test_printed_decode_is_the_model_and_covers_every_unit_once(g, causal, nqb, nh, nb, grid):
    cfg = _cfg(g, causal)
    printed = printed_unit_order(cfg)
    units = [printed(u, nqb, nh, nb) for u in range(nqb * nh * nb)]
    assert units == [unit_order(u, nqb, nh, nb, g, causal) for u in range(nqb * nh * nb)]
    assert sorted(units) == [(q, h, b) for q in range(nqb) for h in range(nh)
                             for b in range(nb)]
    assert check_unit_decode(cfg, [(nqb, nh, nb, grid)]).holds


def test_chunks_keep_few_heads_resident_and_longest_blocks_first():
    # unit_heads 4: the first 4 * nqb units are the first 4 (batch, head) pairs, last qb first
    first = [unit_order(u, 64, 32, 8, 4, True) for u in range(4 * 64)]
    assert {(h, b) for _, h, b in first} == {(0, 0), (1, 0), (2, 0), (3, 0)}
    assert [q for q, _, _ in first[:8]] == [63] * 4 + [62] * 4
    # 0 keeps the old order: every pair of the last query block first
    assert {unit_order(u, 64, 32, 8, 0, True)[0] for u in range(256)} == {63}


def test_the_plan_proves_the_decode_and_the_source_says_so():
    p = plan_ws_flash(_cfg(4))
    assert p.checks["persistent unit decode"].holds
    src = emit_ws_flash(_cfg(4))
    assert "const int gsz = min(4, n_heads * n_batch - chunk * 4);" in src
    assert _cfg(4).name.endswith("_pt_uh4") and not _cfg(0).name.endswith("uh0")


def _planted(bug: str):
    def order(u, nqb, nh, nb, g, causal):
        hbn = nh * nb
        chunk = u // (nqb * g)
        r = u - chunk * nqb * g
        gsz = g if bug == "no short last chunk" else min(g, hbn - chunk * g)
        rank, hb = r // gsz, chunk * g + r % gsz
        if bug == "pair modulo the full chunk":  # r % g instead of r % gsz
            hb = chunk * g + r % g
        qb = nqb - rank if bug == "qb off by one" else nqb - 1 - rank
        return qb, hb % nh, hb // nh
    return order


@pytest.mark.parametrize("bug, msg", [
    ("no short last chunk", "twice|outside"),         # 5 heads in chunks of 4: gsz must be 1
    ("qb off by one", "outside"),
    ("pair modulo the full chunk", "outside"),        # the short chunk runs past head 4
])
def test_planted_decode_bugs_are_caught(bug, msg):
    with pytest.raises(AttentionConfigError, match=msg):
        check_unit_decode(_cfg(4), [(3, 5, 1, 4)], order=_planted(bug))


def test_unit_heads_needs_the_persistent_kernel():
    with pytest.raises(AttentionConfigError, match="unit_heads=4: .*persistent=True only"):
        plan_ws_flash(WsFlashConfig(loader="tma", causal=True, unit_heads=4))
    with pytest.raises(AttentionConfigError, match="unit_heads=-1"):
        plan_ws_flash(_cfg(-1))
