"""The persistent warp-specialised d128 IR prefill's unit start as the template's
(kernels/nvidia/wgmma_ws_ir_persist.py): the producer prefetches the three tensor maps once per
CTA ahead of its walk (``prefetch.tensormap``, read back from the printed text by the
warp-specialised reader), and block 0 does not rescale the unit's zero-filled O (the engine's
``online_softmax`` accepts a zero-filled O under any maximum: its rescale is the identity).
Each planted bug refused by its rule; the refinement itself shown to be what admits the
kernel."""

from __future__ import annotations

import copy

import pytest

from kernels.ir.attention import Rescale
from kernels.ir.core import Loop, ZeroFrag, walk
from kernels.ir.nvidia_tma import LeaderOnly, RoleBranch, TmaPrefetch
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia.wgmma_ws_ir_persist import build_ws_persist_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.printed_ws import verify_printed_ws

DISPATCHED = WsFlashConfig(head_dim=128, bn=128, stages=3, causal=True, pingpong=True,
                           loader="tma", persistent=True, unit_heads=4)


@pytest.fixture(scope="module")
def kernel():
    return build_ws_persist_ir(DISPATCHED)


def _insts(k, *names):
    return [i for i in default_instances(k) if i.name in names]


def _role(k, role):
    return next(s for s in walk(k.body) if isinstance(s, RoleBranch) and s.role == role)


def _unit_loop(k):
    """The consumers' loop over their units."""
    return next(s for s in _role(k, "consumer").body if isinstance(s, Loop) and s.var == "iu")


def _fails(k, check, msg, instances):
    r = verify_ws_attention(k, instances=instances)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, bad
    assert msg in str(bad[check]), bad[check]


# ---- block 0 leaves the zero-filled O alone -------------------------------------------------

def test_block0_does_not_rescale_the_zero_filled_o(kernel):
    body = _unit_loop(kernel).body
    first_loop = next(i for i, s in enumerate(body) if isinstance(s, Loop) and s.var == "j")
    zero = next(i for i, s in enumerate(body) if isinstance(s, ZeroFrag))
    assert zero < first_loop
    block0 = [x for s in body[zero:first_loop] for x in walk([s])]
    assert not any(isinstance(x, Rescale) for x in block0)
    # the key loops still rescale O by each block's alpha
    assert any(isinstance(x, Rescale) for x in walk(body[first_loop:]))
    src = emit_cuda_attention(kernel)
    unit = src[src.index("o_acc[i] = 0.f;"):src.index("for (int j = 1; j < n_full; ++j) {")]
    assert "o_acc[0] *= alpha0" not in unit and "o_acc[2] *= alpha1" not in unit


def test_the_engine_admits_the_kernel_through_the_zero_fill_rule(kernel, monkeypatch):
    """With the rule off (a zero-filled O keeps version 0 until rescaled), the kernel's first
    P V is refused as a missing rescale: the refinement is what admits it."""
    from kernels.verify import attention_dataflow
    monkeypatch.setattr(attention_dataflow, "zero_fill_version", lambda fresh, cur, want: cur)
    _fails(kernel, "online_softmax", "missing rescale", _insts(kernel, "units-gqa2"))


def test_a_rescale_dropped_from_a_key_loop_is_still_refused(kernel):
    """O holding block 0's sum, not rescaled by block 1's alpha: not a zero fill, refused."""
    def strip(body, in_j):
        out = []
        for s in body:
            if in_j and isinstance(s, Rescale):
                continue
            if hasattr(s, "body") and isinstance(s.body, list):
                s = copy.copy(s)
                s.body = strip(s.body, in_j or (isinstance(s, Loop) and s.var == "j"))
            out.append(s)
        return out
    bad = copy.copy(kernel)
    bad.body = strip(kernel.body, False)
    _fails(bad, "online_softmax", "missing rescale", _insts(kernel, "units-wrap"))


def test_o_zero_filled_once_per_cta_not_per_unit_is_refused(kernel):
    """The zero fill hoisted out of the unit loop: a CTA's second unit would start from the
    first unit's O, which is no zero fill (the rule admits only a fresh zero fill)."""
    loop = _unit_loop(kernel)
    zero = next(s for s in loop.body if isinstance(s, ZeroFrag))
    hoisted = copy.copy(loop)
    hoisted.body = [s for s in loop.body if s is not zero]
    r = verify_ws_attention(_replace(kernel, loop, zero, hoisted),
                            instances=_insts(kernel, "units-wrap"))
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "lane_mfma_operands" in bad and "held" in str(bad["lane_mfma_operands"]), bad


def _replace(k, old, *new):
    """A copy of ``k`` with statement ``old`` (at any depth) replaced by ``new``."""
    def rec(body):
        out = []
        for s in body:
            if s is old:
                out += list(new)
                continue
            if hasattr(s, "body") and isinstance(s.body, list):
                s = copy.copy(s)
                s.body = rec(s.body)
            out.append(s)
        return out
    m = copy.copy(k)
    m.body = rec(k.body)
    return m


# ---- the tensor maps prefetched once per CTA ------------------------------------------------

def test_the_producer_prefetches_each_map_once_before_its_walk(kernel):
    lead = next(s for s in _role(kernel, "producer").body if isinstance(s, LeaderOnly))
    pre = [s.tmap.name for s in lead.body if isinstance(s, TmaPrefetch)]
    assert pre == ["tmQ", "tmK", "tmV"]
    assert all(isinstance(s, TmaPrefetch) for s in lead.body[:3])
    src = emit_cuda_attention(kernel)
    # the producer's walk (its role is printed after the consumers', producer_last)
    role_at = src.index("lg_setmaxnreg_dec<")
    walk_at = src.index("for (int iu = 0; iu < nloc; ++iu) {", role_at)
    for name in pre:
        assert src.count(f"lg_tma_prefetch({name});") == 1
        assert role_at < src.index(f"lg_tma_prefetch({name});") < walk_at


@pytest.mark.parametrize("old,new", [
    ("lg_tma_prefetch(tmV);", ""),
    ("lg_tma_prefetch(tmV);", "lg_tma_prefetch(tmK);"),
], ids=["a-prefetch-dropped", "a-map-prefetched-twice"])
def test_planted_prefetch_text_bugs_are_refused(kernel, old, new):
    src = emit_cuda_attention(kernel)
    bad = src.replace(old, new, 1)
    assert bad != src
    r = verify_printed_ws(kernel, bad, instances=_insts(kernel, "units-gqa2"))
    assert not r["printed_source"].holds
    assert "prefetch" in str(r["printed_source"].counterexample).lower(), \
        r["printed_source"].counterexample
