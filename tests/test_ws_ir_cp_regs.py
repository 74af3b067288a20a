"""The cp.async warp-specialised IR prefills' register splits (kernels/nvidia/wgmma_ws_ir.py,
WsOverlapBuilder.CP_REGS, per head_dim): the d256 producer runs at 40 registers and its
consumers at 232 (the template's 24 / 240 made the producer serialise its copies), the d128
fallback at its template's 56 / 224 (fewer copy-address waits than at 40 / 232:
docs/PERFORMANCE.md), the TMA kernels and the templates keep theirs, a head_dim without a split
is refused, and a split past the register file or the launch is refused by the verifier's
register_budget rule (the planted bugs)."""
from __future__ import annotations

import pytest

from kernels.cuda.compile import nvrtc_available
from kernels.ir.core import walk
from kernels.ir.nvidia_tma import Setmaxnreg
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig, emit_ws_flash
from kernels.nvidia.wgmma_ws_ir import WsOverlapBuilder, build_ws_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow


def _dispatched(causal: bool) -> WsFlashConfig:
    return choose_prefill("bf16", 256, causal, "wgmma", True, 4096, 4096).config


def _fallback128(causal: bool) -> WsFlashConfig:
    """The d128 configuration choose_prefill runs where TMA cannot address q / k / v."""
    cfg = choose_prefill("bf16", 128, causal, "wgmma", False, 8192, 8192).config
    assert cfg.loader == "cp.async"
    return cfg


def _splits(k):
    return sorted((s.inc, s.regs) for s in walk(k.body) if isinstance(s, Setmaxnreg))


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_cp_async_overlap_kernel_runs_its_producer_at_40_registers(causal):
    cfg = _dispatched(causal)
    k = build_ws_ir(cfg)
    assert _splits(k) == [(False, 40), (True, 232)]
    assert 128 * 40 + 256 * 232 <= 384 * 168        # the launch's 168 registers a thread
    src = emit_cuda_attention(k)
    assert "lg_setmaxnreg_dec<40>();" in src and "lg_setmaxnreg_inc<232>();" in src
    # the template keeps its split
    assert cfg.regs == (24, 240)
    assert 'setmaxnreg.dec.sync.aligned.u32 24;' in emit_ws_flash(cfg)


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_d128_cp_async_fallback_runs_the_template_split(causal):
    cfg = _fallback128(causal)
    k = build_ws_ir(cfg)
    assert _splits(k) == [(False, 56), (True, 224)] and cfg.regs == (56, 224)
    assert 128 * 56 + 256 * 224 == 384 * 168        # exactly the launch's registers
    src = emit_cuda_attention(k)
    assert "lg_setmaxnreg_dec<56>();" in src and "lg_setmaxnreg_inc<224>();" in src
    assert verify_ws_attention(k, instances=default_instances(k)[:1]) \
        .checks["register_budget"].holds


class _D256Only(WsOverlapBuilder):
    CP_REGS = {256: (40, 232)}


def test_a_head_dim_without_a_cp_async_split_is_refused():
    with pytest.raises(AttentionConfigError, match="head_dim 128: no cp.async register split"):
        _D256Only(_fallback128(False)).build_ws()


def test_the_tma_kernels_keep_the_template_registers():
    cfg = WsFlashConfig(head_dim=128, bn=128, stages=2, loader="tma", pingpong=True)
    assert _splits(build_ws_ir(cfg)) == sorted([(False, cfg.regs[0]), (True, cfg.regs[1])])


class _OverBudget(WsOverlapBuilder):
    CP_REGS = {256: (40, 248)}   # 128 x 40 + 256 x 248 = 68608 > 65536


def test_a_split_past_the_register_file_is_refused():
    k = _OverBudget(_dispatched(False)).build_ws()
    assert _splits(k) == [(False, 40), (True, 248)]
    insts = default_instances(k)[:1]
    r = verify_ws_attention(k, instances=insts)
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert "register_budget" in failed, failed
    ok = verify_ws_attention(build_ws_ir(_dispatched(False)), instances=insts)
    assert ok.checks["register_budget"].holds


class _PastTheLaunch(WsOverlapBuilder):
    CP_REGS = {256: (48, 232)}   # 65536: the file, but past the CTA's 384 x 168 = 64512


def test_a_split_past_the_launch_registers_is_refused():
    """setmaxnreg.inc only gets what the CTA was launched with (the others' .dec released):
    48 + 2 x 232 fills the file yet asks 1024 registers more than 384 threads x 168 hold, so
    the consumers' .inc would wait forever; the 40 / 232 split is exactly the launch's."""
    insts = default_instances(build_ws_ir(_dispatched(False)))[:1]
    r = verify_ws_attention(_PastTheLaunch(_dispatched(False)).build_ws(), instances=insts)
    c = r.checks["register_budget"]
    assert not c.holds and "launched with at most 64512" in str(c.counterexample), c


@pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC (cuda-python)")
@pytest.mark.parametrize("cfg", [_dispatched(False), _fallback128(True)], ids=["d256", "d128"])
def test_no_spills_at_the_split(tmp_path, cfg):
    """The reason the consumers may give up registers: ptxas fits them in 232 at d256 (and
    the 16-byte prologue spill of the 24 / 240 split goes too), in 224 at d128 (NVRTC 13.5,
    sm_90a)."""
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    m = compile_cuda(emit_cuda_attention(build_ws_ir(cfg)), "sm_90a",
                     ["--ptxas-options=-v"], name=f"{cfg.name}_ir.cu", cache=Cache(tmp_path))
    if m.backend != "nvrtc":
        pytest.skip("ptxas log only from NVRTC")
    assert " 0 bytes spill stores" in m.log, m.log
