"""The persistent warp-specialised d128 prefill built as IR (kernels/nvidia/wgmma_ws_ir_persist.py,
the plan's piece ``persistent_units``): the unit decode as IR lets proved by the plan's decode
proof on those lets, the ring counter carried over units (kernels/verify/ring_carried.py), the
Q ring, coverage over a grid smaller than the units; each planted bug refused by its rule."""

from __future__ import annotations

import copy
import itertools

import pytest
import sympy

from kernels.ir.attention import LetMinMax
from kernels.ir.core import If, Let, Loop, sym, walk
from kernels.ir.nvidia_tma import MbarrierArrive, RoleBranch, VarInit, VarSet
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia.wgmma_ws_ir_persist import build_ws_persist_ir, ws_persist_supported
from kernels.nvidia.ws_tma_loads import UNIT_DECODE_CASES, check_unit_decode, printed_unit_order
from kernels.nvidia.ws_units_ir import ir_unit_order, unit_decode_lets
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.verifier import verify

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow

#: the configuration the dispatch runs for causal problems up to 1024 rows
DISPATCHED = WsFlashConfig(head_dim=128, bn=128, stages=3, causal=True, pingpong=True,
                           loader="tma", persistent=True, unit_heads=4)


def _cfg(**kw) -> WsFlashConfig:
    return WsFlashConfig(**{"head_dim": 128, "loader": "tma", "persistent": True, **kw})


@pytest.fixture(scope="module")
def kernel():
    return build_ws_persist_ir(DISPATCHED)


def _mutate(k, fn):
    """A copy of ``k`` whose statements ``fn`` maps (each to a list), at every depth."""
    def rec(body):
        out = []
        for s in body:
            for r in fn(s):
                if isinstance(r, (If, Loop)):
                    r = copy.copy(r)
                    r.body = rec(r.body)
                out.append(r)
        return out
    m = copy.copy(k)
    m.body = rec(k.body)
    return m


def _fails(k, check, msg, instances=None):
    r = verify_ws_attention(k, instances=instances)
    bad = {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert check in bad, bad
    assert msg in str(bad[check]), bad[check]


# ---- the unit decode ------------------------------------------------------------------------

@pytest.mark.parametrize("uh,causal", list(itertools.product((0, 4), (False, True))))
def test_the_ir_decode_is_the_templates_order(uh, causal):
    """Unit by unit, the IR lets compute the (qb, h, b) the template's printed decode does
    (so the persistent IR walks the units as the template), and the plan's proof holds on
    the lets."""
    cfg = _cfg(unit_heads=uh, causal=causal)
    ir = ir_unit_order(unit_decode_lets(128, causal, uh, sym("u")), 128)
    tmpl = printed_unit_order(cfg)
    for nqb, nh, nb, _grid in UNIT_DECODE_CASES[:5]:
        for u in range(nqb * nh * nb):
            assert ir(u, nqb, nh, nb) == tmpl(u, nqb, nh, nb), (u, nqb, nh, nb)
    assert check_unit_decode(cfg, order=ir).holds


def _plant(lets, name, expr):
    return [Let(name, expr) if isinstance(s, (Let, LetMinMax)) and s.name == name else s
            for s in lets]


@pytest.mark.parametrize("name,expr,msg", [
    ("qb", sym("n_qb") - sym("rank"), "outside the problem"),                  # off by one
    ("hb", 2 * sympy.floor(sympy.Mod(sym("u"), sym("heads") * sym("batch")) / 2),
     "computed twice"),                                                         # pairs merged
    ("rank", sympy.floor(sym("u") / (sym("heads") * sym("batch") + 1)), "computed twice"),
])
def test_planted_ir_decode_bugs_are_refused(name, expr, msg):
    lets = unit_decode_lets(128, True, 0, sym("u"))
    # the runtime symbols as the lets spell them (integer, nonnegative)
    from kernels.ir.attention import runtime_symbol
    expr = expr.subs({sym("heads"): runtime_symbol("heads"),
                      sym("batch"): runtime_symbol("batch")})
    order = ir_unit_order(_plant(lets, name, expr), 128)
    with pytest.raises(AttentionConfigError, match=msg):
        check_unit_decode(_cfg(causal=True), order=order)


def test_the_build_proves_the_ir_decode(kernel):
    assert kernel.meta["unit_decode"].holds
    assert "unit_heads 4" in kernel.meta["unit_decode"].summary()


# ---- the kernel -----------------------------------------------------------------------------

def test_the_dispatched_persistent_kernel_is_verified_ir_and_text(kernel):
    """IR and printed text at instances whose grid is smaller than the units (each CTA walks
    several; one walks none), every check of the engine and the text reader."""
    insts = default_instances(kernel)
    tiles = [-(-i.values["seqlen_q"] // 128) * i.values["heads"] * i.values["batch"]
             for i in insts]
    assert any(i.grid[0] < t for i, t in zip(insts, tiles))
    assert any(i.grid[0] > t for i, t in zip(insts, tiles))           # an idle CTA
    assert all(i.grid[0] == i.values["ctas"] for i in insts)
    r = verify(kernel, source=emit_cuda_attention(kernel))
    assert all(c.holds for c in r.checks.values()), \
        {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert "lg_wsflash_ir_" in kernel.name and kernel.name.endswith("_pt_uh4")


@pytest.mark.parametrize("cfg", [_cfg(bn=128, stages=3, pingpong=True),
                                 _cfg(bn=128, stages=2, causal=True, defer_pv_wait=True),
                                 _cfg(bn=192, stages=2, unit_heads=4)],
                         ids=["s3-pp", "s2-causal-dw", "bn192-uh4"])
def test_other_persistent_configurations_are_verified(cfg):
    k = build_ws_persist_ir(cfg)
    r = verify_ws_attention(k)
    assert all(c.holds for c in r.checks.values()), \
        {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_non_persistent_and_unbuilt_configurations_are_refused():
    assert "persistent=False" in ws_persist_supported(_cfg(persistent=False))
    with pytest.raises(AttentionConfigError, match="rescale_vote"):
        build_ws_persist_ir(_cfg(rescale_vote=True))


def _in_role(role, fn):
    """``fn`` applied inside ``role``'s branch only."""
    def outer(s):
        if isinstance(s, RoleBranch) and s.role == role:
            r = copy.copy(s)
            r.body = _mutate(type("K", (), {"body": s.body})(), fn).body
            return [r]
        return [s]
    return outer


def _drop(pred):
    return lambda s: [] if pred(s) else [s]


def _insts(k, *names):
    return [i for i in default_instances(k) if i.name in names]


def test_a_consumer_counter_not_carried_is_refused(kernel):
    bad = _mutate(kernel, _in_role("consumer", _drop(lambda s: isinstance(s, VarSet))))
    _fails(bad, "mbarrier_protocol", "already observed", _insts(kernel, "units-gqa2"))


def test_a_producer_counter_not_carried_is_refused(kernel):
    bad = _mutate(kernel, _in_role("producer", _drop(lambda s: isinstance(s, VarSet))))
    _fails(bad, "mbarrier_protocol", "deadlock", _insts(kernel, "units-gqa2"))


def test_the_q_release_missing_is_refused(kernel):
    bad = _mutate(kernel, _drop(lambda s: isinstance(s, If) and any(
        isinstance(x, MbarrierArrive) and x.bar == "bQe" for x in s.body)))
    _fails(bad, "mbarrier_protocol", "deadlock", _insts(kernel, "units-gqa2"))


def test_a_unit_skipped_is_refused(kernel):
    bad = _mutate(kernel, lambda s: [Let("nloc", s.expr - 1)] if isinstance(s, Let)
                  and s.name == "nloc" else [s])
    _fails(bad, "coverage", "stored 0 times", _insts(kernel, "units-gqa2"))


def test_a_unit_done_twice_is_refused(kernel):
    """CTAs stepping by ctas - 1: units walked by two CTAs (and the last never)."""
    def plant(s):
        if isinstance(s, LetMinMax) and s.name == "u":
            return [LetMinMax("u", "min", s.a.subs(sym("ctas"), sym("ctas") - 1)
                              .subs(sympy.Symbol("ctas", integer=True, nonnegative=True),
                                    sympy.Symbol("ctas", integer=True, nonnegative=True) - 1),
                              s.b)]
        return [s]
    bad = _mutate(kernel, plant)
    _fails(bad, "coverage", "stored 2 times", _insts(kernel, "units-gqa2"))


def test_a_decode_off_by_one_in_the_kernel_is_refused(kernel):
    def plant(s):
        if isinstance(s, Let) and s.name == "qb":
            return [Let("qb", s.expr + 1)]
        return [s]
    bad = _mutate(kernel, plant)
    r = verify_ws_attention(bad, instances=_insts(kernel, "units-wrap"))
    assert not r.checks["coverage"].holds or not r.checks["in_bounds"].holds


def test_a_declared_range_too_small_is_refused(kernel):
    """The engine checks every value of the carried counter against the range the printed
    reader reads the text over (a planted bug of the new check)."""
    bad = copy.copy(kernel)
    bad.meta = dict(kernel.meta, carried_ranges=lambda v, g: {"g0": (0, 1)})
    _fails(bad, "in_bounds", "outside its declared range", _insts(kernel, "units-wrap"))


def test_the_engine_without_the_carry_refuses_the_correct_kernel(kernel, monkeypatch):
    """The carry is what makes the kernel pass: with it off (each iteration's env dropped,
    the base walk's behaviour) the counter restarts every unit and the ring refuses it."""
    from kernels.verify import attention_ring
    monkeypatch.setattr(attention_ring, "carry_back", lambda outer, inner, names: None)
    _fails(kernel, "mbarrier_protocol", "already observed", _insts(kernel, "units-gqa2"))


# ---- the printed text -----------------------------------------------------------------------

@pytest.mark.parametrize("old,new", [
    ("g0 = g0 + n_blocks;", "g0 = g0 + n_full;"),
    ("int g0 = 0;", "int g0 = 1;"),
])
def test_planted_text_bugs_of_the_counter_are_refused(kernel, old, new):
    src = emit_cuda_attention(kernel)
    assert old in src
    bad = src.replace(old, new, 1)
    from kernels.verify.printed_ws import verify_printed_ws
    r = verify_printed_ws(kernel, bad, instances=_insts(kernel, "units-gqa2"))
    assert not r["printed_source"].holds


def test_a_carried_variable_without_a_declared_range_is_refused(kernel):
    from kernels.verify.printed_ws import verify_printed_ws
    bad = copy.copy(kernel)
    bad.meta = {k: v for k, v in kernel.meta.items() if k != "carried_ranges"}
    r = verify_printed_ws(bad, emit_cuda_attention(kernel),
                          instances=_insts(kernel, "units-gqa2"))
    assert "without a declared range" in str(r["printed_source"].counterexample)


def test_the_counter_is_one_variable_per_role(kernel):
    inits = [s for s in walk(kernel.body) if isinstance(s, VarInit)]
    sets = [s for s in walk(kernel.body) if isinstance(s, VarSet)]
    assert [s.name for s in inits] == ["g0", "g0"] and len(sets) == 2


# ---- compiled and launched ------------------------------------------------------------------

def test_nvrtc_compiles_the_persistent_kernel_without_spills(kernel):
    """The consumers under setmaxnreg 240: no spills, no serialised wgmma (as the template)."""
    import re
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    m = compile_cuda(emit_cuda_attention(kernel), "sm_90a", name=f"{kernel.name}.cu",
                     backend="nvrtc", options=("--ptxas-options=-v",), use_cache=False)
    assert m.kernels == (kernel.name,)
    assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log
    assert re.search(r"Used \d+ registers", m.log), m.log


def test_the_walk_reads_batch_and_ctas_as_scalars(kernel):
    """The launcher passes ``ctas`` (its grid) and ``batch`` by name: both are scalars the
    printed text binds (the walk's lets read them), not unread int parameters."""
    names = [s.name for s in kernel.scalars]
    assert "ctas" in names and "batch" in names
    assert "batch" not in [p.name for p in kernel.params]
    src = emit_cuda_attention(kernel)
    assert "int ctas" in src and "int batch" in src


def test_a_counter_set_under_a_branch_is_carried_out_of_it(kernel):
    """The consumer's VarSet inside an always-true branch: the dataflow and the static pass
    carry it out of the branch (the kernel still verifies); under a never-true one the
    counter is not advanced, which the ring refuses."""
    def under(cond):
        done = set()

        def fn(s):
            if isinstance(s, VarSet) and id(s) not in done:
                done.add(id(s))
                return [If(cond, [s])]
            return [s]
        return _in_role("consumer", fn)
    insts = _insts(kernel, "units-gqa2")
    ok = _mutate(kernel, under(sympy.GreaterThan(sym("nloc"), 1, evaluate=False)))
    r = verify_ws_attention(ok, instances=insts)
    assert all(c.holds for c in r.checks.values()), \
        {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    bad = _mutate(kernel, under(sympy.StrictLessThan(sym("nloc"), 0, evaluate=False)))
    _fails(bad, "mbarrier_protocol", "already observed", insts)


def test_masked_set_changes_the_active_blocks_only():
    import numpy as np
    from kernels.verify.ring_carried import carry_back, masked_set
    env = {sym("g0"): np.array([[0], [5], [7]])}
    masked_set(env, "g0", np.array([[1], [6], [8]]), np.array([[True], [False], [True]]))
    assert env[sym("g0")].ravel().tolist() == [1, 5, 8]
    outer = {sym("g0"): 0, sym("x"): 1}
    carry_back(outer, {sym("g0"): 3, sym("x"): 9}, frozenset({"g0"}))
    assert outer == {sym("g0"): 3, sym("x"): 1}


# ---- block 0's mask only where a row of the unit does not see all of it ---------------------

def _block0_guard(k):
    """The consumer's If around block 0's mask (the first MaskScores of the kernel)."""
    from kernels.ir.attention import MaskScores
    return next(s for s in walk(k.body) if isinstance(s, If)
                and any(isinstance(x, MaskScores) for x in s.body))


def test_block0_is_masked_under_the_run_time_guard_only(kernel):
    """Block 0's mask runs where ``n_full < 1`` (the template's ``need_mask``): units below
    the diagonal skip it; the printed text says so."""
    g = _block0_guard(kernel)
    assert str(g.cond) == "n_full < 1", g.cond
    assert "if (n_full < 1) {" in emit_cuda_attention(kernel)


def test_block0_mask_never_run_is_refused(kernel):
    """The guard never true: the diagonal unit's block 0 unmasked (future keys in the
    softmax, keys past seqlen_kv read): the engine refuses it."""
    def plant(s):
        if s is g:
            return [If(sympy.StrictLessThan(sym("n_full"), 0, evaluate=False), s.body)]
        return [s]
    g = _block0_guard(kernel)
    bad = _mutate(kernel, plant)
    _fails(bad, "masking_and_tile_skipping", "invisible keys accumulated unmasked",
           _insts(kernel, "units-wrap"))


def test_block0_mask_guard_off_in_the_text_is_refused(kernel):
    from kernels.verify.printed_ws import verify_printed_ws
    src = emit_cuda_attention(kernel)
    bad = src.replace("if (n_full < 1) {", "if (n_full < 0) {", 1)
    assert bad != src
    r = verify_printed_ws(kernel, bad, instances=_insts(kernel, "units-wrap"))
    assert not r["printed_source"].holds
    assert "if (n_full < 0) {" in str(r["printed_source"].counterexample)


# ---- one key loop, the mask guarded at run time ---------------------------------------------

@pytest.fixture(scope="module")
def kernel1():
    """The dispatched configuration built with ``one_loop=True``."""
    return build_ws_persist_ir(DISPATCHED, one_loop=True)


def test_the_one_loop_kernel_is_verified_ir_and_text(kernel1):
    r = verify(kernel1, source=emit_cuda_attention(kernel1))
    assert all(c.holds for c in r.checks.values()), \
        {n: c.counterexample for n, c in r.checks.items() if not c.holds}


def test_one_loop_is_off_by_default(kernel):
    """Measured 1-3 % slower on the H100 (docs/PERFORMANCE.md): the default keeps the unmasked
    and masked loop copies."""
    src = emit_cuda_attention(kernel)
    assert "if (j >= n_full) {" not in src
    assert "for (int j = 1; j < n_full; ++j) {" in src


def _loop_guard(k):
    """The If around the key loop's mask (inside the consumer's loop over j)."""
    from kernels.ir.attention import MaskScores
    loops = [s for s in walk(k.body) if isinstance(s, Loop) and s.var == "j"
             and any(isinstance(x, MaskScores) for x in walk(s.body))]
    assert len(loops) == 1, loops
    return next(s for s in walk(loops[0].body) if isinstance(s, If)
                and any(isinstance(x, MaskScores) for x in s.body))


def test_one_key_loop_masks_from_n_full_on(kernel1):
    """Blocks 1.. run one loop (not an unmasked and a masked copy); its mask runs where
    ``j >= n_full``, in the IR and the printed text."""
    assert str(_loop_guard(kernel1).cond) == "j >= n_full"
    src = emit_cuda_attention(kernel1)
    assert src.count("for (int j = 1; j < n_blocks; ++j) {") == 1
    assert "if (j >= n_full) {" in src


def test_the_diagonal_block_unmasked_is_refused(kernel1):
    """The loop's guard one block late (``j >= n_full + 1``): the diagonal block of a causal
    unit runs unmasked, which the engine refuses."""
    g = _loop_guard(kernel1)

    def plant(s):
        if s is g:
            return [If(sympy.GreaterThan(sym("j"), sym("n_full") + 1, evaluate=False), s.body)]
        return [s]
    _fails(_mutate(kernel1, plant), "masking_and_tile_skipping",
           "invisible keys accumulated unmasked", _insts(kernel1, "units-wrap"))


def test_the_loop_guard_late_in_the_text_is_refused(kernel1):
    from kernels.verify.printed_ws import verify_printed_ws
    src = emit_cuda_attention(kernel1)
    bad = src.replace("if (j >= n_full) {", "if (j > n_full) {", 1)
    assert bad != src
    r = verify_printed_ws(kernel1, bad, instances=_insts(kernel1, "units-wrap"))
    assert not r["printed_source"].holds
    assert "if (j > n_full) {" in str(r["printed_source"].counterexample)


def test_nvrtc_compiles_the_one_loop_kernel_without_spills(kernel1):
    import re
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    m = compile_cuda(emit_cuda_attention(kernel1), "sm_90a", name=f"{kernel1.name}_1.cu",
                     backend="nvrtc", options=("--ptxas-options=-v",), use_cache=False)
    assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log
    assert re.search(r"Used \d+ registers", m.log), m.log
