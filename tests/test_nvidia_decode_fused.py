"""The split-KV decode's combine folded into the split kernel (kernels/nvidia/decode_fused_combine
.py, issue 20), without a GPU: the printed protocol, the statement-for-statement check against
the combine kernel's merge (bitwise the same output) with planted bugs, NVRTC compiles, the
dispatch choice.  On a GPU: tests/test_nvidia_decode_fused_gpu.py."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kernels.nvidia import decode_fused_combine as dfc
from kernels.nvidia.attention import AttentionConfigError
from kernels.nvidia.decode_mma import MmaDecodeConfig, emit_mma_decode
from kernels.nvidia.decode_splitkv import emit_combine

CONFIGS = [dict(), dict(hg=8), dict(head_dim=64, hg=8), dict(hg=4, warps=8),
           dict(in_dtype="f16", out_dtype="bf16", hg=3, chunk=2), dict(head_dim=256, hg=4),
           dict(head_dim=256, hg=8, in_dtype="f16"), dict(head_dim=256, hg=4, warps=8)]


@pytest.mark.parametrize("kw", CONFIGS, ids=str)
def test_fused_source_is_one_kernel_with_the_ticket_and_reset(kw):
    cfg = MmaDecodeConfig(fused=True, **kw)
    src = emit_mma_decode(cfg)
    assert cfg.name.endswith("_fc") and src.count("__global__") == 1
    assert f"{cfg.name}(" in src and dfc.FUSED_PARAM in src
    assert "atomicAdd(&CNT[blockIdx.x], 1) == (int)gridDim.y - 1" in src
    assert "CNT[blockIdx.x] = 0;" in src
    # every thread fences its partial stores before the barrier that precedes the ticket
    tail = src[src.index("if (gridDim.y > 1) {\n    __shared__ int s_last;"):]
    assert tail.index("__threadfence();") < tail.index("__syncthreads();") < tail.index("atomicAdd")


def test_unfused_source_keeps_the_combine_kernel():
    src = emit_mma_decode(MmaDecodeConfig())
    assert src.count("__global__") == 2 and "CNT" not in src


@settings(max_examples=40, deadline=None)
@given(D=st.sampled_from([64, 128, 256]), hg=st.integers(1, 8),
       dts=st.sampled_from([("bf16", "f16"), ("f16", "f16"), ("f16", "bf16"), ("bf16", "bf16")]))
def test_fused_merge_is_the_combine_merge(D, hg, dts):
    cfg = MmaDecodeConfig(in_dtype=dts[0], out_dtype=dts[1], head_dim=D, hg=hg, fused=True)
    comb = []
    emit_combine(comb.append, cfg)
    dfc.check_same_merge(dfc._fused_merge(cfg), comb)     # raises if not
    assert len(dfc.merge_ops(dfc._fused_merge(cfg))) >= 15


@pytest.mark.parametrize("old,new", [
    ("for (int s = 0; s < nsplit; ++s) {", "for (int s = nsplit - 1; s >= 0; --s) {"),
    ("Ls += w;", "Ls = w + Ls * 1.f;"),
    ("f.x = fmaf(w, a.x, f.x);", "f.x = w * a.x + f.x;"),
    ("const float inv = 1.f / Ls;", "const float inv = __frcp_rn(Ls);"),
    ("M = fmaxf(M, __ldcg(LSE", "M = fmaxf(__ldcg(LSE"),
])
def test_planted_merge_differences_are_refused(monkeypatch, old, new):
    real = dfc._fused_merge

    def planted(cfg):
        lines = real(cfg)
        hit = [i for i, ln in enumerate(lines) if old in ln]
        assert hit, old
        lines[hit[0]] = lines[hit[0]].replace(old, new).replace("(M, __ldcg", "(__ldcg")
        return lines
    monkeypatch.setattr(dfc, "_fused_merge", planted)
    with pytest.raises(AttentionConfigError, match="differs from the combine kernel's"):
        emit_mma_decode(MmaDecodeConfig(fused=True))


def test_a_missing_merge_is_refused():
    with pytest.raises(AttentionConfigError, match="was not found"):
        dfc.check_same_merge(["float4 f;"], ["float M = LG_NEG_INF;", "r.x = 0;"])


def test_dispatch_keeps_the_verified_combine_not_the_fused_kernel():
    """The fused merge tail is compared with the template combine's text, not proved by the
    verifier: decode_attention runs the two-launch form whose combine is the IR kernel."""
    torch = pytest.importorskip("torch")
    from kernels.nvidia.dispatch import choose_decode
    q = torch.empty(4, 32, 1, 256, dtype=torch.bfloat16)
    k = torch.empty(4, 8, 1, 256, dtype=torch.bfloat16).expand(4, 8, 4096, 256)
    c = choose_decode(q, k)
    assert not c.config.fused and c.config.name == "lg_decode_mma_bf16_f16_d256_g4_c1_w8"


def test_nvrtc_fused_keeps_registers_and_spills_nothing(tmp_path):
    from kernels.toolchain.nvrtc import nvrtc_available
    if not nvrtc_available():
        pytest.skip("needs NVRTC (cuda-python)")
    import re
    from kernels.cache import Cache
    from kernels.toolchain.nvrtc import compile_cuda

    def regs(cfg):
        m = compile_cuda(emit_mma_decode(cfg), cfg.arch, ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        spills = [ln for ln in m.log.splitlines() if "spill stores" in ln]
        assert spills and all(" 0 bytes spill stores" in ln for ln in spills), m.log
        return max(int(r) for r in re.findall(r"Used (\d+) registers", m.log))
    for kw in (dict(), dict(head_dim=64), dict(head_dim=256, hg=4, warps=8),
               dict(head_dim=256, hg=8, in_dtype="f16")):
        assert regs(MmaDecodeConfig(fused=True, **kw)) <= regs(MmaDecodeConfig(**kw)), kw
