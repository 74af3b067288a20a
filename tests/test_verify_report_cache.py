"""The on-disk memory of passing verifications (kernels.verify.report_cache): a verdict is
reused only for the same printed source, IR, instances and verifier code; failing reports are
never stored; a damaged entry or LAYOUTALG_VERIFY_CACHE=0 verifies again."""

from __future__ import annotations

import copy
import json

import pytest

from kernels.ir.core import walk
from kernels.ir.nvidia_tma import MbarrierExpectTx
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import build_tma_gemm_ir
from kernels.printer.cuda import emit_cuda
from kernels.toolchain.cache import Cache
from kernels.verify.gate import VerificationError
from kernels.verify.report_cache import report_key, verified

SMALL = ((200, 300, 136, 3),)


@pytest.fixture(scope="module")
def kernel():
    return build_tma_gemm_ir(TmaGemmConfig(bn=128, stages=3), SMALL)


def test_a_passing_verdict_is_reused(kernel, tmp_path):
    cache, src = Cache(tmp_path), emit_cuda(kernel)
    first = verified(kernel, src, "sm_90a", cache)
    assert first.holds and "cached" not in first.details
    again = verified(kernel, src, "sm_90a", cache)
    assert again.holds and "cached" in again.details
    assert list(again.checks) == list(first.checks)
    assert {n: c.domain for n, c in again.checks.items()} == \
        {n: c.domain for n, c in first.checks.items()}


def test_the_key_follows_the_source_the_ir_and_the_instances(kernel):
    src = emit_cuda(kernel)
    key = report_key(kernel, src, "sm_90a")
    assert report_key(kernel, src.replace("% 2", "% 3", 1), "sm_90a") != key
    assert report_key(kernel, src, "sm_90") != key
    k2 = copy.deepcopy(kernel)
    tx = next(s for s in walk(k2.body) if isinstance(s, MbarrierExpectTx))
    tx.bytes -= 1024
    assert report_key(k2, src, "sm_90a") != key
    k3 = build_tma_gemm_ir(TmaGemmConfig(bn=128, stages=3), ((128, 128, 64, 1),))
    assert report_key(k3, emit_cuda(k3), "sm_90a") != key


def test_a_failing_verdict_is_never_stored(kernel, tmp_path):
    cache = Cache(tmp_path)
    src = emit_cuda(kernel)
    bad = src.replace("__launch_bounds__(384, 1)", "__launch_bounds__(384)")
    for _ in range(2):          # refused both times: nothing was remembered
        with pytest.raises(VerificationError):
            verified(kernel, bad, "sm_90a", cache)
    assert not list(tmp_path.rglob("*.report"))


def test_a_damaged_or_edited_entry_verifies_again(kernel, tmp_path):
    cache, src = Cache(tmp_path), emit_cuda(kernel)
    verified(kernel, src, "sm_90a", cache)
    product, side = cache.paths("verified", report_key(kernel, src, "sm_90a"), "report")
    data = json.loads(product.read_text())
    data["checks"]["lds_races"]["holds"] = False         # not a passing verdict any more
    product.write_text(json.dumps(data))
    r = verified(kernel, src, "sm_90a", cache)
    assert r.holds and "cached" not in r.details
    assert "cached" in verified(kernel, src, "sm_90a", cache).details


def test_the_store_can_be_turned_off(kernel, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTALG_VERIFY_CACHE", "0")
    cache, src = Cache(tmp_path), emit_cuda(kernel)
    verified(kernel, src, "sm_90a", cache)
    assert "cached" not in verified(kernel, src, "sm_90a", cache).details
    assert not list(tmp_path.rglob("*.report"))


def test_an_attention_kernels_key_is_the_same_in_another_process():
    """Regression: the attention instances (kernels.verify.attention_static.Instance) had no
    repr, so the key held object addresses and a verdict stored by one process was never found
    by the next (the mma.sync prefill verified again on every start)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    from kernels.nvidia.attention import FlashConfig
    from kernels.nvidia.flash_ir import build_flash_ir
    from kernels.printer.cuda_attention import emit_cuda_attention
    prog = ("from kernels.nvidia.attention import FlashConfig\n"
            "from kernels.nvidia.flash_ir import build_flash_ir\n"
            "from kernels.printer.cuda_attention import emit_cuda_attention\n"
            "from kernels.verify.report_cache import report_key\n"
            "k = build_flash_ir(FlashConfig(head_dim=64, causal=True))\n"
            "print(report_key(k, emit_cuda_attention(k), 'sm_90'))\n")
    k = build_flash_ir(FlashConfig(head_dim=64, causal=True))
    assert "object at" not in repr(list(k.spec.domain.instances(k)))
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH",
                                                                                 "")]))
    other = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           check=True, cwd=root, env=env).stdout.strip()
    assert other == report_key(k, emit_cuda_attention(k), "sm_90")
