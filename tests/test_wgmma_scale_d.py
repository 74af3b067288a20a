"""``WgmmaMma(accumulate=False)``: the wgmma's scale-d 0 (``acc = A B``), what the wgmma
prefill's first ``S = Q K^T`` step uses instead of zeroing S.  Each engine that runs wgmma
statements models it or refuses it: the GEMM dataflow (kernels/verify/gate_wgmma.py) and the
attention dataflow (kernels/verify/attention_wgmma.py) start the accumulator over; the TMA
per-role engine (kernels/verify/gate_tma_data.py) refuses it; the printed ``, 0`` is read
back.  Planted bugs: an overwrite that drops earlier k steps or tiles, a text that loses or
gains the flag."""

from __future__ import annotations

import copy

from kernels.ir import walk
from kernels.ir.nvidia_wgmma import WgmmaMma
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
from kernels.printer.cuda import emit_cuda
from kernels.verify.printed import verify_printed
from kernels.verify.verifier import verify

from _wgmma_planted import main_loop, verified_base


def _wgmmas(body):
    return [s for s in walk(body) if isinstance(s, WgmmaMma)]


def test_gemm_overwrite_of_the_second_k_step_drops_the_first():
    k, _ = verified_base()
    k = copy.deepcopy(k)
    _wgmmas(main_loop(k).body)[1].accumulate = False
    r = verify(k, arch="sm_90a", source=emit_cuda(k))
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert failed and failed <= {"lane_mfma_operands", "lane_accumulator_writeback"}, failed
    assert r.checks["printed_source"].holds        # the text says scale-d 0 too


def test_gemm_overwrite_in_every_tile_drops_the_earlier_tiles():
    k, _ = verified_base()
    k = copy.deepcopy(k)
    _wgmmas(main_loop(k).body)[0].accumulate = False
    r = verify(k, arch="sm_90a")
    assert not all(c.holds for c in r.checks.values())


def test_printed_scale_d_is_read_back():
    k, src = verified_base()
    first = "lg_wgmma_m64n64_f16_t1(&acc[0]"
    i = src.index(first)
    j = src.index(");", i)
    bad = src[:j] + ", 0" + src[j:]                 # the text overwrites, the IR accumulates
    assert not verify_printed(k, bad)["printed_source"].holds


def test_the_per_role_tma_engine_refuses_scale_d_0():
    k = build_tma_gemm_ir(TmaGemmConfig(), instances=((200, 300, 136, 3),))
    _wgmmas(k.body)[0].accumulate = False
    r = verify(k, arch="sm_90a")
    assert not r.checks["lane_mfma_operands"].holds
    assert "scale-d 0" in r.checks["lane_mfma_operands"].counterexample
