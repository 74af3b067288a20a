"""The warp-specialised prefill's deferred P V wait (``WsFlashConfig.defer_pv_wait``) and the
warp-voted O rescale (``rescale_vote``): the printed structure that keeps ptxas from hoisting the
wait above the softmax, the V-release lag the ring absorbs (and a lag it cannot: a hang the
protocol check catches), and, where nvdisasm is at hand, the SASS claim itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernels.cuda.compile import nvrtc_available
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, emit_ws_flash, plan_ws_flash
from kernels.nvidia.ws_protocol import (check_persistent_protocol, check_release_lag,
                                        consumer_ops)

CONFIGS = [WsFlashConfig(loader="tma", bn=192, stages=2, defer_pv_wait=True),
           WsFlashConfig(loader="tma", causal=True, stages=3, defer_pv_wait=True),
           WsFlashConfig(loader="tma", causal=True, stages=3, persistent=True, unit_heads=4,
                         defer_pv_wait=True),
           WsFlashConfig(head_dim=256, bn=64, causal=True, defer_pv_wait=True)]


def _loop(src: str) -> str:
    """The key-block loop of a printed kernel (up to the last-block tail)."""
    a = src.index("  for (int j = 1; j < NB; ++j) {")
    return src[a:src.index("\n  }\n", a)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_the_wait_follows_the_ring_waits_and_the_softmax_precedes_it(cfg):
    src = emit_ws_flash(cfg)
    body = _loop(src)
    ring = body.index("lg_mbar_wait(bVf")
    wait0 = body.index("lg_wgmma_wait<0>();")
    # the P V wait sits after the ring waits (their spin loops end ptxas's basic block) ...
    assert ring < wait0 < body.index("lg_wgmma_fence();")
    # ... and nothing waits for P V between wait<1> and the end of the block: the softmax's
    # exp2 run while P V is on the tensor cores
    tail = body[body.index("lg_wgmma_wait<1>();"):]
    assert "lg_wgmma_wait<0>" not in tail and tail.count("lg_exp2(") >= 3
    # the V stage of block j - 2 is released there, for j > 1 only; the last two after the loop
    g = "g0 + " if cfg.persistent else ""
    assert f"if (j > 1" in body and f"bVe + 8 * (({g}j - 2) % {cfg.stages})" in body
    after = src[src.index("\n  }\n", src.index("  for (int j = 1; j < NB; ++j) {")):]
    assert f"bVe + 8 * (({g}NB - 2) % {cfg.stages})" in after and "if (NB > 1" in after
    assert "V release lag" in plan_ws_flash(cfg).checks


def test_default_configs_keep_the_wait_after_the_softmax():
    body = _loop(emit_ws_flash(WsFlashConfig(loader="tma", bn=192, stages=2)))
    assert body.index("lg_wgmma_wait<1>") < body.index("lg_wgmma_wait<0>")
    assert "bVe + 8 * pbuf" in body and "j > 1" not in body


def test_rescale_vote_skips_only_multiplications_by_one():
    src = emit_ws_flash(WsFlashConfig(loader="tma", stages=3, rescale_vote=True))
    guard = "if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {"
    assert src.count(guard) == 1
    after = src[src.index(guard):]
    assert re.match(r"if \(__any_sync[^\n]*\n\s*#pragma unroll\n\s*for \(int hh[^\n]*\n\s*"
                    r"#pragma unroll\n\s*for \(int jj[^\n]*acc\[[^\n]*\*= alpha\[hh\];[^\n]*"
                    r"\n\s*\}", after)
    assert WsFlashConfig(rescale_vote=True).name.endswith("_rv")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_one_block_of_lag_runs_at_every_stage_count(stages):
    assert check_release_lag(stages, 2, 1).holds
    assert check_persistent_protocol(stages, 2, 1).holds


def test_two_blocks_of_lag_hang_a_two_stage_ring():
    # planted: releasing V two blocks late. With 2 stages the producer's fill of V j waits for
    # V j - 2, released only at block j + 1's top, after K j + 1, which the producer loads
    # after V j: every actor waits
    with pytest.raises(AttentionConfigError, match="a hang"):
        check_release_lag(2, 2, 2)
    with pytest.raises(AttentionConfigError, match="a hang"):
        check_persistent_protocol(2, 2, 2)
    assert check_release_lag(3, 2, 2).holds          # a third stage absorbs it


def test_a_missing_release_is_caught(monkeypatch):
    # planted: the deferred consumer forgets its second V release (the one the first unit's
    # tail prints when the unit has two blocks or more); a later fill of that stage waits forever
    import kernels.nvidia.ws_protocol as wp
    real = wp.consumer_ops

    def forgetful(nbs, stages, lag=0):
        ops = real(nbs, stages, lag)
        arrives = [i for i, op in enumerate(ops) if op[0] == "arrive" and op[1][0] == "V"]
        return ops[:arrives[1]] + ops[arrives[1] + 1:] if len(arrives) > 1 else ops
    monkeypatch.setattr(wp, "consumer_ops", forgetful)
    with pytest.raises(AttentionConfigError, match="a hang"):
        wp.check_persistent_protocol(2, 2, 1)


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_every_v_block_is_released_once_in_order(lag):
    nbs = [1, 4, 2, 5]
    rel = [op[1] for op in consumer_ops(nbs, 3, lag) if op[0] == "arrive" and op[1][0] == "V"]
    assert rel == [f"Ve{g % 3}" for g in range(sum(nbs))]


def test_selection_defers_the_wait_at_d256_and_long_causal_d128():
    for causal in (False, True):
        c = choose_prefill("bf16", 256, causal, "wgmma", seq=4096, seq_kv=4096)
        assert c.config.defer_pv_wait and "P V wait deferred" in c.reason
        assert choose_prefill("bf16", 256, causal, "wgmma", tma_ok=False).config.defer_pv_wait
    long_causal = choose_prefill("bf16", 128, True, "wgmma", seq=8192).config
    assert long_causal.defer_pv_wait and long_causal.stages == 2 and long_causal.bn == 128
    assert not choose_prefill("bf16", 128, False, "wgmma", seq=8192).config.defer_pv_wait
    assert not choose_prefill("bf16", 128, True, "wgmma", seq=512).config.defer_pv_wait


def _nvdisasm():
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    return str(p) if p.exists() and os.access(p, os.X_OK) else None


def _ex2_between_waits(sass: str):
    """MUFU.EX2 counts of the loop: between wait<1> and the next wait<0>, and after it."""
    lines = sass.splitlines()
    i = next(n for n, ln in enumerate(lines) if "DEPBAR.LE gsb0, 0x1" in ln)
    j = next(n for n in range(i, len(lines)) if "DEPBAR.LE gsb0, 0x0" in lines[n])
    k = next(n for n in range(j, len(lines)) if "HGMMA" in lines[n])
    return (sum("MUFU.EX2" in ln for ln in lines[i:j]),
            sum("MUFU.EX2" in ln for ln in lines[j:k]))


@pytest.mark.skipif(not nvrtc_available() or _nvdisasm() is None,
                    reason="needs NVRTC (cuda-python) and nvdisasm")
@pytest.mark.parametrize("bn,d,defer", [(192, 128, False), (192, 128, True),
                                        (64, 256, True)])
def test_sass_runs_the_softmax_under_p_v_only_when_deferred(tmp_path, bn, d, defer):
    """The measured reason for the option: in ptxas's schedule the default loop runs every
    ex2 after the P V wait; the deferred loop runs them all before it."""
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    cfg = WsFlashConfig(head_dim=d, bn=bn, stages=2, loader="tma" if d == 128 else "cp.async",
                        defer_pv_wait=defer)
    m = compile_cuda(emit_ws_flash(cfg), "sm_90a", ["--ptxas-options=-v"], name=f"{cfg.name}.cu",
                     cache=Cache(tmp_path))
    if m.backend == "nvrtc":
        assert " 0 bytes spill stores" in m.log, m.log
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(m.cubin)
    sass = subprocess.run([_nvdisasm(), "-c", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    before, after = _ex2_between_waits(sass)
    per_block = bn // 2 + 2                 # S registers + the two rows' alpha
    if defer:
        assert before == per_block and after == 0, (before, after)
    else:
        assert before == 0 and after == per_block, (before, after)


# ------------------------------------------- the TMA producer's V one block behind its K

def test_v_behind_k_prints_k_then_the_previous_v():
    src = emit_ws_flash(WsFlashConfig(loader="tma", bn=192, stages=2, v_behind_k=True))
    prod = src[src.index("lg_tma_prefetch(tmQ)"):src.index("setmaxnreg.inc")]
    assert "for (int j = 0; j <= NB; ++j) {" in prod
    k, v = prod.index("if (j < NB) {"), prod.index("if (j > 0) {")
    assert k < v and "(j) * 192, hk, b);" in prod[k:v] and "(j - 1) * 192, hk, b);" in prod[v:]
    assert "V release lag" in plan_ws_flash(WsFlashConfig(loader="tma", v_behind_k=True)).checks
    with pytest.raises(AttentionConfigError, match="v_behind_k=True needs loader='tma'"):
        plan_ws_flash(WsFlashConfig(v_behind_k=True))


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("lag", [0, 1])
def test_v_behind_k_runs_with_either_release(stages, lag):
    assert check_release_lag(stages, 2, lag, v_behind_k=True).holds
    assert check_persistent_protocol(stages, 2, lag, v_behind_k=True).holds


def test_v_behind_k_without_the_last_v_hangs(monkeypatch):
    # planted: the producer's loop stops at j < NB, so the unit's last V is never loaded
    import kernels.nvidia.ws_protocol as wp
    real = wp.producer_ops

    def short(nbs, stages, v_behind_k=False):
        ops = real(nbs, stages, v_behind_k)
        last_v = max(i for i, op in enumerate(ops) if op == ("fill", op[1]) and op[1][0] == "V")
        return ops[:last_v] + ops[last_v + 1:]
    monkeypatch.setattr(wp, "producer_ops", short)
    with pytest.raises(AttentionConfigError, match="a hang"):
        wp.check_release_lag(2, 2, 1, v_behind_k=True)
