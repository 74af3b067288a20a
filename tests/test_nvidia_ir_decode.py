"""The NVIDIA split-KV decode's combine kernel built as kernel IR (issue 20 item 1): the one
verifier proves it and its printed CUDA on the sm_90 target, NVRTC compiles it, and each rule of
the LSE merge statements (kernels/ir/lse_merge.py) and of the CUDA attention text refuses a
planted bug by its named check."""

from __future__ import annotations

import pytest
import sympy

from kernels.ir import Let, Loop, sym, walk
from kernels.ir.core import Access
from kernels.ir.lse_merge import LseMax, LseMergeStep, LseNormalize
from kernels.nvidia.decode_mma import MmaDecodeConfig
from kernels.nvidia.decode_mma_ir import build_decode_combine_ir, combine_lse_spec
from kernels.printer.cuda_attention import HELPERS, emit_cuda_attention
from kernels.verify.rules import checks_for
from kernels.verify.spec import SpecError, SplitMerge
from kernels.verify.verifier import verify

CFG = MmaDecodeConfig(head_dim=64)


def _ir(cfg=CFG):
    return build_decode_combine_ir(cfg)


def _failed(k, source=None):
    r = verify(k, arch="sm_90", source=source)
    return {n for n, c in r.checks.items() if not c.holds}, r


def _why(r):
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", [MmaDecodeConfig(head_dim=64),
                                 MmaDecodeConfig(head_dim=128, out_dtype="bf16"),
                                 MmaDecodeConfig(head_dim=256)], ids=lambda c: c.name)
def test_every_check_holds_on_the_printed_text(cfg):
    k = _ir(cfg)
    r = verify(k, arch="sm_90", source=emit_cuda_attention(k))
    # the AMD combine kernel's checks, same names and order, plus the 3 printed-text checks
    assert tuple(r.checks) == checks_for(k.spec) + ("printed_source", "declarations",
                                                     "index_ranges")
    assert r.holds, _why(r)
    dom = r.checks["reduction_reads_partials"].domain
    assert "ragged-block-5-splits" in dom and "GQA groups [1, 4]" in dom


def test_nvrtc_compiles_without_spills():
    """ptxas spilled 4 bytes in the split loops under __launch_bounds__(128) (32 registers;
    38 % slower than the template's combine on an H100); the kernel asks for (128, 1)."""
    import re
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    for cfg in (CFG, MmaDecodeConfig(head_dim=128), MmaDecodeConfig(head_dim=256,
                                                                    out_dtype="bf16")):
        k = _ir(cfg)
        src = emit_cuda_attention(k)
        assert "__launch_bounds__(128, 1)" in src
        m = compile_cuda(src, "sm_90", name=f"{k.name}.cu", backend="nvrtc",
                         options=("--ptxas-options=-v",), use_cache=False)
        assert m.kernels == (k.name,)
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.log)]
        assert spills and not any(spills), m.log[-400:]


# ---- planted bugs in the IR ----------------------------------------------------------------

def _loops(k):
    return [s for s in k.body if isinstance(s, Loop)]


def test_merge_without_the_max_pass_is_refused():
    k = _ir()
    k.body.remove(_loops(k)[0])            # weights against -inf: no common maximum
    failed, r = _failed(k)
    assert "online_softmax" in failed, _why(r)
    assert "maximum over all" in r.checks["online_softmax"].counterexample


def test_max_raised_after_a_merge_step_is_refused():
    k = _ir()
    merge = _loops(k)[1]
    lse_fr = merge.body[0].regs.frag
    merge.body.append(LseMax("m_run", lse_fr, 0))   # online max after taking a weight
    failed, r = _failed(k)
    assert "online_softmax" in failed, _why(r)


def test_max_over_fewer_splits_is_refused():
    k = _ir()
    first = _loops(k)[0]
    first.stop = first.stop - 1
    failed, r = _failed(k)
    assert "online_softmax" in failed, _why(r)


def test_partial_of_another_split_is_refused():
    k = _ir()
    merge = _loops(k)[1]
    op = next(a for a in merge.body if isinstance(a, Access) and a.buf == "Op")
    s, ns = sym("s"), sympy.Symbol("n_splits", integer=True, nonnegative=True)
    rev = ns - 1 - s                       # O of split n-1-s weighted by the LSE of split s
    op.coords = tuple((rev,) + tuple(c[1:]) for c in op.coords)
    op.offset = sympy.expand(op.origin(op.coords[0]))
    failed, r = _failed(k)
    assert "reduction_reads_partials" in failed, _why(r)


def test_dropped_normalisation_is_refused():
    k = _ir()
    k.body[:] = [s for s in k.body if not isinstance(s, LseNormalize)]
    failed, r = _failed(k)
    assert "online_softmax" in failed, _why(r)


def test_a_split_left_out_of_the_merge_is_refused():
    k = _ir()
    merge = _loops(k)[1]
    merge.start = 1
    failed, r = _failed(k)
    assert "reduction_reads_partials" in failed, _why(r)


def test_merged_twice_is_refused():
    k = _ir()
    merge = _loops(k)[1]
    step = next(s for s in merge.body if isinstance(s, LseMergeStep))
    merge.body.append(step)
    failed, r = _failed(k)
    assert "reduction_reads_partials" in failed, _why(r)


def test_loads_of_the_unclamped_row_are_out_of_bounds():
    k = _ir()
    # the loads are unpredicated because qc clamps the row; without the clamp the threads past
    # the last row of a ragged block read past the workspace
    k.body[:] = [s for s in k.body if getattr(s, "name", "") != "qc"]
    k.body.insert(3, Let("qc", sym("qi")))
    failed, r = _failed(k)
    assert "in_bounds" in failed, _why(r)


def test_store_to_the_wrong_head_dim_is_refused():
    k = _ir()
    st = next(a for a in walk(k.body) if isinstance(a, Access) and a.buf == "O")
    st.coords = (st.coords[1],) + st.coords[1:]    # element 0 stored where element 1 goes
    failed, r = _failed(k)
    assert failed & {"reduction_reads_partials", "coverage", "emitted_index_math"}, _why(r)


def test_the_amd_partials_form_is_refused_on_this_kernel():
    k = _ir()
    spec = combine_lse_spec(k.name, 64, "f16")
    from dataclasses import replace
    from kernels.verify.spec import TensorSpec
    amd = replace(spec, tensors=spec.tensors + (
        TensorSpec("Lp", ("split", "one", "head", "batch"), "input", "f32"),),
        split_merge=SplitMerge(("Op", "LSEp", "Lp"), "O", "split", "d", key_tile=16))
    r = verify(k, amd, arch="sm_90")
    assert not r.checks["reduction_reads_partials"].holds
    assert "(O, LSE)" in r.checks["reduction_reads_partials"].counterexample


def test_a_merge_of_four_partials_is_an_ill_formed_spec():
    spec = combine_lse_spec("x", 64, "f16")
    from dataclasses import replace
    with pytest.raises(SpecError, match=r"\(O, max, sum\) or \(O, LSE\)"):
        replace(spec, split_merge=SplitMerge(("Op", "LSEp", "Op", "LSEp"), "O", "split", "d"))


# ---- planted bugs in the printed text ------------------------------------------------------

def _sub(src, old, new):
    assert old in src, old
    return src.replace(old, new, 1)


@pytest.mark.parametrize("old,new,check", [
    ("lg_lse_merge<4>(m_run, l_run, &o_acc[0], &x_fr[0], lse_fr[0]);",
     "lg_lse_merge<4>(m_run, l_run, &o_acc[0], &o_acc[0], lse_fr[0]);", "printed_source"),
    ("lg_lse_merge<4>(m_run, l_run,", "lg_lse_merge<4>(l_run, m_run,", "printed_source"),
    ("lg_lse_normalize<4>(&o_acc[0], l_run);", "lg_lse_normalize<4>(&o_acc[0], m_run);",
     "printed_source"),
    ("m_run = fmaxf(m_run, lse_fr[0]);", "m_run = fmaxf(m_run, x_fr[0]);", "printed_source"),
    ("lg_ldg_f32x4(&x_fr[0], Op + (64*bat*heads + 64*batch*heads*s + dc + 64*h));",
     "lg_ldg_f32x4(&x_fr[0], Op + (64*bat*heads + 64*batch*heads*s + dc + 64*h + 64));",
     "printed_source"),
    ("lg_ldg_f32x4(&x_fr[0]", "lg_ldg_f32x4(&o_acc[0]", "printed_source"),
    ("lg_ldg_f32x4(&x_fr[0], Op", "lg_ldg_f32x1(&x_fr[0], Op", "printed_source"),
    ("if (qi < batch*heads) lg_st_u32x2(", "lg_st_u32x2(", "printed_source"),
    ("lg_pack_f16x2(o_acc[0], o_acc[1])", "lg_pack_bf16x2(o_acc[0], o_acc[1])", "printed_source"),
    ("lg_pack_f16x2(o_acc[2], o_acc[3])", "lg_pack_f16x2(o_acc[3], o_acc[2])", "printed_source"),
    ("const int dc = 4*(((gi) % 16));", "const int dc = 4*(((gi) % 8));", "printed_source"),
    ("const int qc = min(qi, batch*heads - 1);", "const int qc = min(qi, batch*heads);",
     "printed_source"),
    ("int n_splits, int o_sb", "int n_splits, long long o_sb", "declarations"),
    ("float o_acc[4];", "float o_acc[2];", "declarations"),
    ("__launch_bounds__(128, 1)", "__launch_bounds__(128)", "declarations"),
    ("const float w = lg_exp2(lse - m);", "const float w = lg_exp2(m - lse);", "declarations"),
])
def test_printed_cuda_mutations_are_refused(old, new, check):
    k = _ir()
    src = _sub(emit_cuda_attention(k), old, new)
    failed, r = _failed(k, src)
    assert check in failed, _why(r)


def test_the_helpers_are_printed_once():
    k = _ir()
    src = emit_cuda_attention(k)
    assert src.count(HELPERS) == 1 and src.count("lg_lse_merge<4>(") == 1


def test_dropped_merge_line_is_refused():
    k = _ir()
    src = emit_cuda_attention(k)
    line = next(ln for ln in src.split("\n") if "lg_lse_merge<4>(" in ln)
    failed, _ = _failed(k, src.replace(line + "\n", ""))
    assert "printed_source" in failed


def test_unknown_attention_statements_are_refused_by_the_cuda_printer():
    from kernels.ir.attention import MergeFinal
    k = _ir()
    k.body.append(MergeFinal(k.frags[0], (0,), "l_run", "m_run", k.frags[1]))
    with pytest.raises(TypeError, match="MergeFinal has no CUDA form"):
        emit_cuda_attention(k)


def test_template_split_kernel_writes_the_combine_layouts():
    """The link of the pair while the split kernel is still a template: it writes partial
    (split s, row b H + h, element c) at OP[(s rows + b H + h) D + c] and its LSE at
    LSE[s rows + b H + h] (rows = B H), exactly where the IR combine's layouts read them."""
    from kernels.ir.attention import runtime_symbol as R
    from kernels.nvidia.decode_mma import emit_mma_decode
    from kernels.nvidia.decode_mma_ir import workspace_layouts
    for D in (64, 128, 256):
        src = emit_mma_decode(MmaDecodeConfig(head_dim=D))
        assert "const size_t row = (size_t)blockIdx.y * rows + (size_t)b * Hq + h0 + j;" in src
        assert f"float4* dst = reinterpret_cast<float4*>(OP + row * {D} + c);" in src
        assert "if (c == 0) LSE[row] = s_lse[j];" in src
        assert "rows, Hq, nsplit" not in src.split("_combine(")[0]   # the split kernel's args
        G = workspace_layouts(D)
        B, H, S = 3, 5, 4
        env = {R("batch"): B, R("heads"): H, R("n_splits"): S}
        for s, d, h, b in ((0, 0, 0, 0), (3, D - 1, 4, 2), (1, 7, 2, 1)):
            row = s * (B * H) + b * H + h
            assert G["Op"]((s, d, h, b)).subs(env) == row * D + d
            assert G["LSEp"]((s, 0, h, b)).subs(env) == row


def test_both_split_kernels_get_the_verified_combine(monkeypatch):
    """IrSplitKVDecode / IrMmaSplitKVDecode verify the combine at construction, and
    decode_attention launches the IR combine kernel after either split kernel (a pretend H100:
    tests/_fake_cuda.py; nothing is compiled)."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.nvidia import dispatch
    from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode, IrSplitKVDecode
    from kernels.nvidia.decode_splitkv import SplitKVDecodeConfig
    for dec in (IrSplitKVDecode(SplitKVDecodeConfig(head_dim=64)),
                IrMmaSplitKVDecode(MmaDecodeConfig(head_dim=256, out_dtype="bf16"))):
        assert dec.verification.holds
        assert dec.combine_ir.name == f"lg_decode_combine_ir_{dec.cfg.out_dtype}_d" \
                                      f"{dec.cfg.head_dim}"
    fake = fc.install(monkeypatch)
    try:
        bf = torch.bfloat16
        q, k = fc.FakeCudaTensor((4, 32, 1, 256), bf), fc.FakeCudaTensor((4, 8, 4096, 256), bf)
        o = fc.FakeCudaTensor((4, 32, 1, 256), torch.float16)
        dispatch.decode_attention(q, k, k, out=o)                       # tensor-core split
        # 10 keys: a cache the one-pass kernel serves (Skv 17-64 with few blocks runs the
        # tensor-core IR kernel now, dispatch.short_cache_on_ir), so forcing splits runs FMA
        q2, k2 = fc.FakeCudaTensor((1, 8, 1, 128), bf), fc.FakeCudaTensor((1, 2, 10, 128), bf)
        dispatch.decode_attention(q2, k2, k2, out=fc.FakeCudaTensor((1, 8, 1, 128),
                                                                    torch.float16),
                                  kv_splits=3)                          # FMA split, forced
        names = [L.kernel for L in fake.launches]
        # the tensor-core split decode is the one-launch IR kernel (decode_fused_ir: the IR
        # split kernel whose last block per group runs the combine's merge) here
        assert names[0].startswith("lg_decode_fused_ir_") and \
            names[1].startswith("lg_decode_splitkv")
        assert names[2] == "lg_decode_combine_ir_f16_d128" and len(names) == 3
        assert fake.launches[0].args[21] == fake.launches[0].grid[1]     # n_splits
    finally:
        fc.clear_caches()


def test_int_offsets_past_2_31_are_refused_at_launch(monkeypatch):
    """The printed offsets are int (index_ranges proves them at the instances only): a launch
    whose workspace or output offsets would leave int is a LaunchError, never a wrong write."""
    torch = pytest.importorskip("torch")
    import _fake_cuda as fc
    from kernels.errors import LaunchError
    from kernels.nvidia.decode_mma_ir import IrMmaSplitKVDecode
    fc.install(monkeypatch)
    try:
        dec = IrMmaSplitKVDecode(MmaDecodeConfig(head_dim=128))
        with pytest.raises(LaunchError, match="2\\^31"):
            dec.combine_site(1 << 16, dict(B=2048, Hq=32, splits=256))
        run = dec.combine_site(32, dict(B=1, Hq=32, splits=4))
        bf = torch.float16
        wide = fc.FakeCudaTensor((1, 32, 1, 128), bf, stride=(1, 1 << 27, 128, 1))
        with pytest.raises(LaunchError, match="output offsets"):
            run(None, None, wide)
    finally:
        fc.clear_caches()
