"""The AMD-flavoured kernels (the same emitted HIP source) through the CUDA flavour of lagen_hip.h.

CPU side (no GPU): MFMA code generation from mfma_specs, LDS layout and signatures parsed from
the emitted sources, launch-shape checks, and an offline compile for sm_90 - NVRTC (the test
extra installs it) or ``nvcc`` - of the GEMM (f16, ragged bf16), the prefill attention and a
probe kernel for every emulated gfx942 MFMA, with ptxas's spill report read.

Decode (CPU side): the emitter's vector typedefs (LAGEN_VEC_TYPEDEF), the decode and split-KV
sources' signatures against the registry's scalar arguments, the kernel choice of
:func:`decode_case`, :func:`run_decode`'s argument checks (refused before any compile), the
float64 decode reference against the registry's SDPA reference, bottom-right causal offsets;
NVRTC (or nvcc) compiles of the decode kernels when a CUDA compiler is present.

GPU side (``pytest -m gpu``, skipped without CUDA + cuda-python): every MFMA probe bit-identical
to the CPU emulator; GEMM 4096^3 f16 and 4000x3000x1000 bf16 and attention B=2 H=8 S=2048 D=128
(causal and not) against float64 torch references; the preshuffled-B GEMM (buffer loads) at
4096^3 bf16 and 4000x3000x1000 f16; bottom-right causal prefill (Sq < Skv with
GQA, Sq > Skv with rows that see no key); decode B=64 (single kernel, GQA) and split-KV decode
at seqlen_kv 16384.  Outputs (and the split-KV workspace) are poisoned with NaN first.
Tolerances (|out - ref| <= atol + rtol |ref| elementwise, the registry's): GEMM f16 out
2e-3/2e-3, bf16 out 1e-2/1e-2; attention and decode f16 in 4e-3/4e-3, bf16 in 2e-2/2e-2; decode
also meets the CPU emulator tests' criteria (max |err| 4e-3 for f16 out, cosine >= 0.9999,
|LSE err| <= 1e-4).
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from kernels.cuda import amd_flavour as af
from kernels.errors import KernelError, LaunchError

HAVE_NVCC = shutil.which("nvcc") is not None


def _gemm(m, n, k, dtype="f16", **kw):
    return af.gemm_kernel(m, n, k, dtype, **kw)


def _attn(causal=True, dtype="f16", seqlen=200):
    return af.attention_case(1, 2, seqlen, 128, causal, dtype)[2]


# ----------------------------------------------------------------------------- CPU side

def test_generate_every_emulated_mfma():
    from kernels.emulator import mfma_gen
    inc, scratch = af.generate_cuda(None)
    names = mfma_gen.emulated_instructions("gfx942")
    assert len(names) == 30
    assert len(re.findall(r"^#define __builtin_amdgcn_mfma_\w+\(", inc, re.M)) == 30
    assert scratch % 16 == 0 and scratch >= af.MIN_SCRATCH


def test_generated_tables_are_the_emulators():
    import mfma_specs
    from kernels.emulator import mfma_gen
    spec = mfma_specs.lookup("gfx942", "v_mfma_f32_32x32x8_f16")
    code = af.emit_cuda_instruction(spec)
    ta = mfma_gen._table(spec, "A")
    m = re.search(r"lagen_cuda_Tmfma_f32_32x32x8f16A\[256\] = \{([^}]*)\}", code)
    assert m and [int(x) for x in m.group(1).split(",")] == ta
    # products and sums in double, no contraction, rounded once per item
    assert "lagen_cuda_mac(s, (double)" in code and "lagen_cuda_put_f32" in code
    assert af.scratch_bytes(spec) == (32 * 8 + 8 * 32) * 4  # A and B tiles as float; C == D map


def test_unknown_builtin_refused():
    with pytest.raises(KernelError):
        af.generate_cuda(["__builtin_amdgcn_mfma_nope"])


def test_lds_layout_and_signature_of_gemm():
    k = _gemm(256, 256, 256)
    offs, total = af.lds_layout(k.source)
    assert offs == {"sA_v": 0, "sB_v": 16384} and total == 32768
    assert af.kernel_signatures(k.source) == {k.name: ("ptr", "ptr", "ptr")}
    opts, info = af.cuda_options(k.source)
    assert "-DLAGEN_LDS_OFF_sB_v=16384" in opts and "-DLAGEN_LDS_STATIC_BYTES=32768" in opts
    assert info["builtins"] == ["__builtin_amdgcn_mfma_f32_32x32x8f16"]


def test_attention_signature_and_lds():
    k = _attn()
    sig = af.kernel_signatures(k.source)[k.name]
    assert sig[:5] == ("ptr",) * 5 and sig[-1] == "f32" and set(sig[5:-1]) == {"i32"}
    scalars, grid = k.case_args()
    assert len(scalars) == len(sig) - 5
    offs, total = af.lds_layout(k.source)
    # d128 prefill, one LDS stage (the default since issue 16): K and V^T tiles of 64 keys
    assert total == 32768 and all(v % 16 == 0 for v in offs.values())


def test_lds_layout_rules():
    src = ("LAGEN_SHARED(float, a, 3);\nLAGEN_SHARED(lagen_f16x8, b, 4 * 2);\n"
           "LAGEN_SHARED(float, a, 3);\n")
    offs, total = af.lds_layout(src)
    assert offs == {"a": 0, "b": 16} and total == 16 + 128
    with pytest.raises(KernelError):
        af.lds_layout("LAGEN_SHARED(float, a, 3); LAGEN_SHARED(float, a, 4);")
    with pytest.raises(KernelError):
        af.lds_layout("LAGEN_SHARED(mystery_t, a, 3);")


def test_smem_bytes_and_launch_shape_checks():
    m = af.AmdCudaModule(module=None, signatures={"k": ("ptr",)}, lds_static_bytes=32768,
                         wave_scratch_bytes=2048, builtins=())
    assert m.smem_bytes(256) == 32768 + 4 * 2048 and m.smem_bytes(256, 100) == 32768 + 8192 + 100
    with pytest.raises(LaunchError, match="multiple of 64"):
        af.launch_amd(m, "k", 1, 96, [None])
    with pytest.raises(LaunchError, match="waves"):
        af.launch_amd(m, "k", 1, 1024, [None])
    with pytest.raises(LaunchError, match="no kernel"):
        af.launch_amd(m, "nope", 1, 64, [None])


def test_translation_unit_is_self_contained():
    k = _gemm(256, 256, 256)
    tu = af.translate(k.source)
    assert '#include "lagen_hip.h"' not in tu
    assert "#define LAGEN_LDS_OFF_sA_v 0" in tu and "lagen_cuda_mfma_mfma_f32_32x32x8f16" in tu
    assert k.source.split('#include "lagen_hip.h"')[1] in tu  # the kernel text itself, unchanged


def test_probe_runs_on_cpu_emulator():
    from kernels.emulator import run
    b = "__builtin_amdgcn_mfma_f32_16x16x16f16"
    src = af.mfma_probe_source([b])
    a = af.mfma_probe_inputs(b, 128)
    r = run(src, "probe_mfma_f32_16x16x16f16", 1, 128, a)
    d = r.outputs[3]
    assert np.isfinite(d).all() and np.abs(d).max() > 0


def test_nvrtc_buffers_are_never_shared_singletons(monkeypatch):
    """Regression: compile.py once passed b" " * n, CPython's shared one-byte object for an
    empty log; NVRTC writing its NUL there corrupted the process's " " on the device machine.
    The NVRTC call (used by kernels.cuda and amd_flavour alike) must hand it fresh buffers."""
    from kernels.cuda import compile as cc
    seen = []

    class FakeNvrtc:
        def nvrtcCreateProgram(self, src, name, n, h, i):
            return 0, "prog"

        def nvrtcCompileProgram(self, prog, n, opts):
            return (0,)

        def nvrtcGetProgramLogSize(self, prog):
            return 0, 1                       # empty log: just the NUL

        def nvrtcGetProgramLog(self, prog, buf):
            seen.append(buf)
            return (0,)

        def nvrtcGetCUBINSize(self, prog):
            return 0, 1

        def nvrtcGetCUBIN(self, prog, buf):
            seen.append(buf)
            return (0,)

        def nvrtcDestroyProgram(self, prog):
            return (0,)

    monkeypatch.setattr(cc, "_nvrtc", lambda: FakeNvrtc())
    cubin, log = cc._nvrtc_compile("x", "k.cu", "sm_90", ())
    assert len(seen) == 2 and all(len(b) >= 2 for b in seen)
    shared = (bytes([32]), bytes([0]), bytes(0))  # CPython's cached 0/1-byte objects
    assert all(all(b is not x for x in shared) for b in seen)
    assert (cubin, log) == (b"\0", "") and " ".join(["a", "b"]) == "a b"


def test_cuda_header_maps_builtins_nvrtc_lacks():
    h = (af.INCLUDE_DIR / "lagen_cuda.h").read_text()
    for b in ("__builtin_inff()", "__builtin_fmaf(", "__builtin_fmaxf(", "__builtin_exp2f(",
              "__builtin_log2f(", "__builtin_bit_cast(", "__builtin_shufflevector(",
              "__builtin_amdgcn_exp2f(", "__builtin_amdgcn_ds_bpermute("):
        assert f"#define {b}" in h, b
    assert '#include "lagen_cuda.h"' in (af.INCLUDE_DIR / "lagen_hip.h").read_text()


def _dec(batch=2, heads=4, seqlen_kv=77, kv_heads=2, kv_splits=None, **kw):
    return af.decode_case(batch, heads, seqlen_kv, kv_heads=kv_heads, kv_splits=kv_splits, **kw)


def test_emitted_vector_types_use_the_flavour_macro():
    """The emitter's own vector types are LAGEN_VEC_TYPEDEF lines (a clang vector on AMD, a
    lagen_vec under NVRTC): a raw ext_vector_type would silently be a scalar under NVCC/NVRTC
    (regression: decode's la_f32x8 did not compile for the GPU)."""
    src = _dec(kv_splits=0)[2].source
    assert "LAGEN_VEC_TYPEDEF(float, 8, la_f32x8);" in src
    for s in (src, _gemm(256, 256, 256).source, _attn().source):
        assert "ext_vector_type" not in s
    cuda_h = (af.INCLUDE_DIR / "lagen_cuda.h").read_text()
    assert "#define LAGEN_VEC_TYPEDEF(T, n, name) typedef lagen_vec<T, n> name" in cuda_h


def test_decode_signature_matches_registry_arguments():
    e, cfg, k = _dec(kv_splits=0)
    assert k.bk.kind == "decode" and cfg.n_splits == 1
    sig = af.kernel_signatures(k.source)
    assert list(sig) == [k.name]
    from kernels.decode import DECODE_SCALARS
    scalars, grid = k.case_args()
    assert sig[k.name] == ("ptr",) * 5 + ("i32",) * len(DECODE_SCALARS) + ("f32",)
    assert len(scalars) == len(sig[k.name]) - 5 and isinstance(scalars[-1], float)
    assert grid == (1, 1, 1) and k.block == 256           # 8 queries, 16 per block
    assert af.lds_layout(k.source) == ({}, 0)              # VALU + ds_swizzle: no LAGEN_SHARED
    opts, info = af.cuda_options(k.source)
    assert info["builtins"] == [] and "-DLAGEN_LDS_STATIC_BYTES=0" in opts


def test_splitkv_signatures_match_registry_arguments():
    from kernels.decode_splitkv import COMBINE_SCALARS, SPLIT_SCALARS, combine_args
    e, cfg, k = _dec(1, 4, 1000, 2, kv_splits=4, dtype="bf16", out_dtype="f16")
    assert k.bk.kind == "decode_splitkv" and (cfg.n_splits, cfg.kv_chunk) == (4, 256)
    sig = af.kernel_signatures(k.source)
    assert list(sig) == [k.bk.split.name, k.bk.combine.name]
    assert sig[k.bk.split.name] == ("ptr",) * 6 + ("i32",) * len(SPLIT_SCALARS) + ("f32",)
    assert sig[k.bk.combine.name] == ("ptr",) * 5 + ("i32",) * len(COMBINE_SCALARS)
    scalars, g1 = k.case_args()
    assert len(scalars) == len(sig[k.bk.split.name]) - 6 and g1 == (1, 4, 1)
    assert len(combine_args(k.shape(), 4)) == len(COMBINE_SCALARS)
    assert k.bk.grids(k.shape(), 4)[1] == (1, 1, 1)
    assert af.lds_layout(k.source) == ({}, 0)


def test_decode_case_picks_the_registrys_kernel():
    assert _dec(64, 16, 7, 16)[2].bk.kind == "decode"            # short KV: one kernel
    e, cfg, k = _dec(64, 16, 4096, 16)                            # auto: split-KV
    assert k.bk.kind == "decode_splitkv" and (cfg.n_splits, cfg.kv_chunk) == (15, 280)
    e, cfg, k = _dec(64, 16, 4096, 16, kv_splits=0)               # forced single kernel
    assert k.bk.kind == "decode" and cfg.n_splits == 1 and k.grid == (64, 1, 1)
    assert type(cfg.kernel).__name__ == "DecodeConfig"
    with pytest.raises(KernelError):
        _dec(kv_splits=-1)


def test_run_decode_refuses_bad_arguments_before_compiling():
    torch = pytest.importorskip("torch")
    e, cfg, k = _dec(2, 4, 77, 2, kv_splits=0)
    f16 = torch.float16
    q = torch.zeros(2, 4, 1, 128, dtype=f16)
    kv = torch.zeros(2, 2, 77, 128, dtype=f16)
    o = torch.zeros(2, 4, 1, 128, dtype=f16)
    lse = torch.zeros(2, 4, 1)
    mod = af.AmdCudaModule(module=None, signatures={}, lds_static_bytes=0,
                           wave_scratch_bytes=512, builtins=())   # never reached
    with pytest.raises(LaunchError, match="k has 38912 elements"):
        af.run_decode(k, q, kv[:, :, :77 - 1].contiguous(), kv, o, lse, module=mod)
    with pytest.raises(LaunchError, match="lse has 8 elements of 2 bytes"):
        af.run_decode(k, q, kv, kv, o, lse.half(), module=mod)
    with pytest.raises(LaunchError, match="contiguous: False"):
        af.run_decode(k, q, kv, kv, o.transpose(1, 3), lse, module=mod)
    with pytest.raises(LaunchError, match="decode_case"):
        af.run_decode(_attn(), q, kv, kv, o, lse, module=mod)
    e, cfg, s = _dec(2, 4, 1000, 2, kv_splits=4)
    kv = torch.zeros(2, 2, 1000, 128, dtype=f16)
    with pytest.raises(LaunchError, match="workspace"):
        af.run_decode(s, q, kv, kv, o, lse, module=mod)
    ws = list(af.decode_workspace(s, device="cpu"))
    assert [w.numel() for w in ws] == [2 * 4 * 4 * 128, 32, 32]
    assert all(bool(torch.isnan(w).all()) for w in ws)
    with pytest.raises(LaunchError, match="Mp has 31"):
        af.run_decode(s, q, kv, kv, o, lse, workspace=[ws[0], ws[1][:31], ws[2]], module=mod)


def test_decode_reference_is_the_registrys():
    torch = pytest.importorskip("torch")
    from kernels.attention_registry import reference
    g = torch.Generator().manual_seed(3)
    q = torch.randn(3, 8, 1, 64, generator=g).half()
    k = torch.randn(3, 2, 50, 64, generator=g).half()
    v = torch.randn(3, 2, 50, 64, generator=g).half()
    o, lse = af.decode_reference(q, k, v, chunk_bytes=1)          # one batch per chunk
    ro, rl = reference(q, k, v)
    assert o.dtype == torch.float64 and o.shape == (3, 8, 1, 64) and lse.shape == (3, 8, 1)
    assert float((o - ro.double()).abs().max()) < 1e-5
    assert float((lse - rl.double()).abs().max()) < 1e-5
    o2, _ = af.decode_reference(q, k, v.roll(1, 2))
    assert float((o2 - o).abs().max()) > 1e-2                     # sees V's order


def test_bottom_right_prefill_case():
    e, cfg, k = af.attention_case(1, 2, 130, 64, True, "f16", seqlen_kv=77,
                                  causal_align="bottom_right")
    assert cfg.causal_align == "bottom_right" and k.shape().causal_off == 77 - 130
    e, cfg, k2 = af.attention_case(1, 2, 77, 64, True, "f16", seqlen_kv=130,
                                   causal_align="bottom_right")
    assert k2.shape().causal_off == 130 - 77 and k2.source == k.source   # runtime offset only
    assert af.attention_case(1, 2, 77, 64, True, "f16", seqlen_kv=130)[2].shape().causal_off == 0
    sig = af.kernel_signatures(k.source)[k.name]
    assert len(k.case_args()[0]) == len(sig) - 5


def _cuda_compiler():
    try:
        from kernels.cuda import compile as cc
        if cc.nvrtc_available():
            return "nvrtc"
    except Exception:
        pass
    return "nvcc" if HAVE_NVCC else None


@pytest.mark.skipif(_cuda_compiler() is None, reason="neither NVRTC nor nvcc available")
@pytest.mark.parametrize("d,dtype,splits", [(128, "f16", 0), (64, "bf16", 4), (256, "f16", 4)])
def test_cuda_compiles_decode(d, dtype, splits):
    k = _dec(2, 4, 1000, 2, kv_splits=splits, head_dim=d, dtype=dtype)[2]
    m, spills = _compile(k.source)
    assert m.kernels == tuple(af.kernel_signatures(k.source)) and not any(spills)


needs_compiler = pytest.mark.skipif(_cuda_compiler() is None,
                                    reason="neither NVRTC (the test extra) nor nvcc available")


def _compile(source):
    """Offline compile with NVRTC (the test extra installs it) or nvcc; ptxas reports
    registers and spills (-v), so the spill checks below read a real log."""
    be = _cuda_compiler()
    opts = ("--ptxas-options=-v",) if be == "nvrtc" else ()
    m = af.compile_amd(source, "sm_90", backend=be, options=opts, use_cache=False)
    assert m.module.cubin[:4] == b"\x7fELF"
    assert "bytes spill stores" in m.module.log, m.module.log[-500:]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.module.log)]
    return m, spills


@needs_compiler
@pytest.mark.parametrize("shape,dtype", [((256, 256, 256), "f16"), ((4000, 3000, 1000), "bf16")])
def test_cuda_compiles_gemm(shape, dtype):
    k = _gemm(*shape, dtype)
    m, spills = _compile(k.source)
    assert m.kernels == (k.name,) and not any(spills)


@needs_compiler
@pytest.mark.parametrize("dtype,kw", [("fp8", {"b_major": "col"}),
                                      ("bf8", {"mfma": "16x16x32", "out_dtype": "f32"})])
def test_cuda_compiles_fp8_gemm(dtype, kw):
    """The fp8 GEMM's raw-byte types, LAGEN_BITCAST into the builtins' long and the scale
    arguments compile in the CUDA flavour (lagen_cuda.h) too."""
    k = _gemm(200, 136, 200, dtype, block_k=64, **kw)
    m, spills = _compile(k.source)
    assert m.kernels == (k.name,) and not any(spills)
    assert af.kernel_signatures(k.source)[k.name] == ("ptr",) * 5     # A, B, C, scale_a, scale_b


@needs_compiler
def test_cuda_compiles_preshuffled_gemm():
    k = _gemm(200, 136, 72, "bf16", b_layout="preshuffled")
    m, spills = _compile(k.source)
    assert m.kernels == (k.name,) and not any(spills)


@needs_compiler
def test_cuda_compiles_preshuffled_fp8_gemm():
    """fp8 with preshuffled B (the 224-row form of the fp8 choice): the raw-byte buffer loads,
    the scales and the 32x32x16 MFMA compile in the CUDA flavour.  (ptxas spills here, as for
    the plain-B 224-row fp8 default: 254 of gfx942's 256 VGPRs do not fit the flavour's 255
    registers of emulation state; a speed matter of the twin, not of what it checks.)"""
    k = _gemm(300, 136, 264, "fp8", b_layout="preshuffled", block_m=224, block_n=128,
              block_k=64, waves_m=1, waves_n=4, schedule="pipelined", waves_per_eu=2)
    m, _ = _compile(k.source)
    assert m.kernels == (k.name,)
    assert af.kernel_signatures(k.source)[k.name] == ("ptr",) * 5


@needs_compiler
def test_cuda_compiles_attention():
    k = _attn(causal=True)
    m, _ = _compile(k.source)
    assert m.kernels == (k.name,)


@needs_compiler
def test_cuda_compiles_every_mfma_probe():
    m, spills = _compile(af.mfma_probe_source())
    assert len(m.kernels) == 30 and not any(spills)


# ----------------------------------------------------------------------------- GPU side

def _cuda():
    try:
        from kernels.cuda.launch import cuda_available
        return cuda_available()
    except Exception:
        return False


gpu = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch "
                                           "with CUDA and cuda-python")]


def _host_compiler():
    try:
        from kernels.toolchain import find_host_compiler
        find_host_compiler()
        return True
    except Exception:
        return False


# emitted at collection, before any NVRTC compile of the process (on the device machine a source
# emitted after compiles once lost the blanks between types and names; docs/PERFORMANCE.md)
_GPU_GEMMS = {}
# the tile choice's kernels at the sizes the issue names (4096^3 and a ragged shape; fp8 NN)
_DEFAULT_CHOICES = [((4096, 4096, 4096), "f16"), ((4000, 3000, 1000), "bf16"),
                    ((4096, 4096, 4096), "fp8")]


def _chosen_gemm(m, n, k, dtype):
    from kernels.amd.gemm import build_gemm
    from kernels.amd.gemm_select import select_gemm
    return build_gemm(select_gemm(m, n, k, dtype=dtype).config)
_GPU_ATTN = {}
_GPU_BR = {}
_GPU_DEC = {}
# (batch, heads, seqlen_q, head_dim, causal, dtype, kv_heads, seqlen_kv), bottom-right causal:
# Sq < Skv with GQA; Sq > Skv (the first 500 rows see no key: O = 0, LSE = -inf)
_BR_CASES = [(2, 8, 1000, 128, True, "f16", 4, 3000), (2, 8, 1500, 128, True, "bf16", 8, 1000)]
# (batch, heads, kv_heads, seqlen_kv, head_dim, dtype, out_dtype, kv_splits): 0 = single kernel,
# None = the registry's choice (split-KV at these lengths)
_DEC_CASES = [(64, 16, 16, 7, 128, "f16", None, 0), (64, 16, 16, 1000, 128, "f16", None, 0),
              (64, 32, 8, 4096, 128, "bf16", "f16", 0),
              (64, 16, 16, 16384, 128, "f16", None, None),
              (1, 32, 8, 16384, 128, "bf16", "f16", None)]
if _cuda():
    for _shape, _dt in (((4096, 4096, 4096), "f16"), ((4000, 3000, 1000), "bf16")):
        _GPU_GEMMS[(_shape, _dt)] = af.gemm_kernel(*_shape, _dt)
    for _shape, _dt, _lay in (((4096, 4096, 4096), "fp8", "NT"), ((4000, 3000, 1000), "bf8", "NN")):
        _GPU_GEMMS[(_shape, _dt)] = af.gemm_kernel(*_shape, _dt, block_k=64,
                                                   b_major="col" if _lay[1] == "T" else "row")
    # the library's own choice (kernels.amd.gemm_select): the interleaved 224x256 tile with
    # swapped MFMA operands and branch-free edge buffer loads at these shapes
    for _shape, _dt in _DEFAULT_CHOICES:
        _GPU_GEMMS[(_shape, _dt, "chosen")] = _chosen_gemm(*_shape, _dt)
    # preshuffled B (buffer loads straight into registers): 4096^3 and a ragged shape
    for _shape, _dt in (((4096, 4096, 4096), "bf16"), ((4000, 3000, 1000), "f16")):
        _GPU_GEMMS[(_shape, _dt, "preshuffled")] = af.gemm_kernel(*_shape, _dt,
                                                                  b_layout="preshuffled")
    for _c in (False, True):
        _GPU_ATTN[_c] = af.attention_case(2, 8, 2048, 128, _c, "f16")
    for _a in _BR_CASES:
        _GPU_BR[_a] = af.attention_case(*_a[:6], seqlen_kv=_a[7], kv_heads=_a[6],
                                        causal_align="bottom_right")
    for _a in _DEC_CASES:
        _GPU_DEC[_a] = af.decode_case(_a[0], _a[1], _a[3], _a[4], _a[5], _a[6], kv_heads=_a[2],
                                      kv_splits=_a[7])


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.skipif(not _host_compiler(), reason="the CPU emulator needs a host C++ compiler")
def test_gpu_mfma_bit_identical_to_cpu_emulator():
    import torch
    from kernels.emulator import run
    src = af.mfma_probe_source()
    mod = af.compile_amd(src)
    threads, block = 512, 256                # 2 blocks of 4 waves: named barriers 1..4
    bad = []
    for spec in af._specs_for(None, "gfx942"):
        name = af._mg()._builtin_name(spec)
        kern = "probe_" + name[len("__builtin_amdgcn_"):]
        arrs = af.mfma_probe_inputs(name, threads, seed=7)
        cpu = run(src, kern, threads // block, block, [x.copy() for x in arrs]).outputs[3]
        dev = [torch.from_numpy(x).cuda() for x in arrs]
        dev[3].fill_(-1)
        af.launch_amd(mod, kern, threads // block, block, dev)
        torch.cuda.synchronize()
        got = dev[3].cpu().numpy()
        if not np.array_equal(got.view(np.uint8), cpu.view(np.uint8)):
            bad.append(kern)
    assert not bad, f"GPU MFMA differs from the CPU emulator: {bad}"


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("shape,dtype", [((4096, 4096, 4096), "f16"),
                                         ((4000, 3000, 1000), "bf16")])
def test_gpu_gemm_large(shape, dtype):
    r = af.check_gemm(*shape, dtype=dtype, reps=1, built=_GPU_GEMMS[(shape, dtype)])
    atol, rtol = {"f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}[dtype]
    assert r["unwritten_nan"] == 0
    assert r["max_abs_err"] <= atol + rtol * r["max_abs_ref"]
    assert r["rel_fro_err"] < {"f16": 1e-3, "bf16": 6e-3}[dtype]
    assert r["within_tol"], r


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("shape,dtype", _DEFAULT_CHOICES)
def test_gpu_gemm_library_choice(shape, dtype):
    """What `compile gemm` builds without --block (the interleaved one-wave-per-SIMD tile,
    swap_ab, lagen_buffer_load_if at the ragged edges), in its CUDA flavour, against torch."""
    built = _GPU_GEMMS[(shape, dtype, "chosen")]
    cfg = built.plan.cfg
    assert cfg.schedule == "interleaved" and cfg.swap_ab      # the form this test exists for
    r = af.check_gemm(*shape, dtype=dtype, reps=1, built=built)
    assert r["unwritten_nan"] == 0
    assert r["within_tol"], r


def test_library_choice_cases_are_the_interleaved_form():
    """CPU half of the test above: the chosen configurations are the form it is meant to run."""
    from kernels.amd.gemm_select import select_gemm
    for (m, n, k), dt in _DEFAULT_CHOICES:
        cfg = select_gemm(m, n, k, dtype=dt).config
        assert cfg.schedule == "interleaved" and cfg.swap_ab, (m, n, k, dt)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("shape,dtype,layout", [((4096, 4096, 4096), "fp8", "NT"),
                                                ((4000, 3000, 1000), "bf8", "NN")])
def test_gpu_fp8_gemm_large(shape, dtype, layout):
    """fp8/bf8 with per-tensor scales against float64 torch on the same 8-bit values."""
    r = af.check_gemm(*shape, dtype=dtype, layout=layout, reps=1,
                      built=_GPU_GEMMS[(shape, dtype)])
    assert r["unwritten_nan"] == 0
    assert r["out_dtype"] == "bf16"
    assert r["within_tol"], r


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("shape,dtype", [((4096, 4096, 4096), "bf16"),
                                         ((4000, 3000, 1000), "f16")])
def test_gpu_gemm_preshuffled_large(shape, dtype):
    bk = _GPU_GEMMS[(shape, dtype, "preshuffled")]
    assert "lagen_buffer_load_b128" in bk.source
    r = af.check_gemm(*shape, dtype=dtype, reps=1, built=bk)
    atol, rtol = {"f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}[dtype]
    assert r["unwritten_nan"] == 0
    assert r["max_abs_err"] <= atol + rtol * r["max_abs_ref"]
    assert r["rel_fro_err"] < {"f16": 1e-3, "bf16": 6e-3}[dtype]
    assert r["within_tol"], r


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_attention_large(causal):
    r = af.check_attention(2, 8, 2048, 128, causal, "f16", reps=1, case=_GPU_ATTN[causal])
    assert r["unwritten_nan"] == 0
    assert r["within_tol"], r
    assert r["rel_fro_err"] < 3e-3 and r["lse_max_abs_err"] < 1e-3


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("case", _BR_CASES, ids=lambda c: f"q{c[2]}-kv{c[7]}-{c[5]}")
def test_gpu_attention_bottom_right(case):
    b, h, sq, d, causal, dt, hk, skv = case
    r = af.check_attention(b, h, sq, d, causal, dt, reps=1, case=_GPU_BR[case], kv_heads=hk,
                           seqlen_kv=skv, causal_align="bottom_right")
    assert r["causal_offset"] == skv - sq and r["rows_without_keys"] == max(0, sq - skv) * b * h
    assert r["unwritten_nan"] == 0
    assert r["within_tol"], r
    assert r["lse_max_abs_err"] < 1e-3, r


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")
@pytest.mark.parametrize("case", _DEC_CASES, ids=lambda c: f"B{c[0]}-H{c[1]}-Hkv{c[2]}-kv{c[3]}-"
                         f"{c[5]}-{'single' if c[7] == 0 else 'auto'}")
def test_gpu_decode(case):
    b, h, hk, skv, d, dt, od, ks = case
    r = af.check_decode(b, h, skv, d, dt, od, kv_heads=hk, kv_splits=ks, reps=1,
                        case=_GPU_DEC[case])
    assert r["kind"] == ("decode" if ks == 0 else "decode_splitkv")
    assert r["unwritten_nan"] == 0 and r["workspace_nan"] == 0
    assert r["within_tol"], r
    assert r["emulator_criteria"], r
