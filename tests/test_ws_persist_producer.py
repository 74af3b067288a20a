"""The persistent d128 IR's producer as the template's (kernels/nvidia/wgmma_ws_ir_persist.py,
``producer_last``): its role branch printed behind the consumers' (no reconverging region
around it, so ptxas keeps its walk on the uniform datapath) and its key-block loop kept a loop
(``#pragma unroll 1``); the layout still verified, a planted producer bug still refused."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess

import pytest

from kernels.ir.core import Let, Loop, walk
from kernels.ir.nvidia_tma import MbarrierWait, RoleBranch
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig
from kernels.nvidia.wgmma_ws_ir_persist import build_ws_persist_ir, producer_last
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_ring import verify_ws_attention
from kernels.verify.attention_static import default_instances
from _planted import producer_without_waits

DISPATCHED = WsFlashConfig(head_dim=128, bn=128, stages=3, causal=True, pingpong=True,
                           loader="tma", persistent=True, unit_heads=4)


@pytest.fixture(scope="module")
def kernel():
    return build_ws_persist_ir(DISPATCHED)


def _roles(k):
    return [s for s in k.body if isinstance(s, RoleBranch)]


def _block_loop(role):
    return next(s for s in walk(role.body) if isinstance(s, Loop) and s.var == "j")


def test_the_producer_is_the_kernels_last_statement(kernel):
    assert [r.role for r in _roles(kernel)] == ["consumer", "producer"]
    assert kernel.body[-1] is _roles(kernel)[-1]
    src = emit_cuda_attention(kernel)
    assert src.index("lg_setmaxnreg_inc<") < src.index("lg_setmaxnreg_dec<")


def test_the_producers_block_loop_is_kept_a_loop(kernel):
    prod = _roles(kernel)[-1]
    assert _block_loop(prod).unroll == 1
    lines = [ln.strip() for ln in emit_cuda_attention(kernel).split("\n")]
    at = [i for i, ln in enumerate(lines) if ln == "#pragma unroll 1"]
    assert len(at) == 1 and lines[at[0] + 1] == "for (int j = 0; j < n_blocks; ++j) {"
    # the consumers' key loops are left to the compiler
    cons = _roles(kernel)[0]
    assert all(s.unroll is None for s in walk(cons.body) if isinstance(s, Loop))


def test_producer_last_only_permutes_the_roles(kernel):
    body = [*kernel.body[:-2], kernel.body[-1], kernel.body[-2]]    # the builder's order
    again = producer_last(body)
    assert [id(s) for s in again] == [id(s) for s in kernel.body]
    assert producer_last(again) == again


@pytest.mark.parametrize("tail", ["let after", "no producer", "two producers"])
def test_producer_last_refuses_other_layouts(kernel, tail):
    roles = _roles(kernel)
    body = list(kernel.body)
    if tail == "let after":
        body.append(Let("stray", 0))
    elif tail == "no producer":
        body = [s for s in body if s is not roles[-1]]
    else:
        body.append(copy.copy(roles[-1]))
    with pytest.raises(ValueError, match="producer_last"):
        producer_last(body)


def test_a_producer_wait_dropped_is_still_refused_with_the_producer_last(kernel):
    """The verifier still reads the producer's program at its new place: its wait for a
    released V stage dropped, a later block's V overwrites a stage a P V still reads.  (Not
    the K wait: in the overlap schedule a consumer releases V(b) after K(b + 1), so the V wait
    before each K box already orders it; dropping it is no race.)"""
    bad = producer_without_waits(kernel, "emptyV", _roles)
    r = verify_ws_attention(bad, instances=[i for i in default_instances(kernel)
                                            if i.name == "units-wrap"])
    assert not r.checks["lds_races"].holds, r.checks["lds_races"]
    assert sum(isinstance(s, MbarrierWait) and s.bar == "emptyV" for s in walk(bad.body)) == 0


def _nvdisasm():
    found = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    return found if found and os.access(found, os.X_OK) else None


def test_sass_has_one_copy_of_the_producers_loop(kernel, tmp_path):
    """The measured reason (NVRTC 13 sm_90a): six box loads in the kernel (Q's two and one
    K / V pair), where the unrolled loop had 30; the producer on the uniform datapath."""
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available() or _nvdisasm() is None:
        pytest.skip("needs NVRTC and nvdisasm (PATH or $NVDISASM)")
    m = compile_cuda(emit_cuda_attention(kernel), "sm_90a", name=f"{kernel.name}.cu",
                     backend="nvrtc", options=("--ptxas-options=-v",), use_cache=False)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(m.cubin)
    sass = subprocess.run([_nvdisasm(), "-c", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    assert sass.count("UTMALDG.4D") == 6
    # the producer's code: from its register release to the kernel's end (its branch last)
    lines = sass.split("\n")
    start = next(i for i, ln in enumerate(lines) if "USETMAXREG.DEALLOC" in ln)
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)",
                     "\n".join(lines[start:]))
    # uniform: 127 of 269 instructions (NVRTC 13.5); as the first branch, 32 of 255
    assert sum(op.startswith("U") for op in ops) > len(ops) // 3, ops
