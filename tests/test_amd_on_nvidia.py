"""The AMD-flavoured kernels (the same emitted HIP source) through the CUDA flavour of lagen_hip.h.

CPU side (no GPU): MFMA code generation from mfma_specs, LDS layout and signatures parsed from
the emitted sources, launch-shape checks, and - when ``nvcc`` is on the PATH - an offline
``nvcc -cubin -arch=sm_90`` of the GEMM (f16, ragged bf16), the prefill attention and a probe
kernel for every emulated gfx942 MFMA.

GPU side (``pytest -m gpu``, skipped without CUDA + cuda-python): every MFMA probe bit-identical
to the CPU emulator; GEMM 4096^3 f16 and 4000x3000x1000 bf16 and attention B=2 H=8 S=2048 D=128
(causal and not) against float64 torch references.  Outputs are poisoned with NaN first.
Tolerances (|out - ref| <= atol + rtol |ref| elementwise, the registry's): GEMM f16 out
2e-3/2e-3, bf16 out 1e-2/1e-2; attention f16 4e-3/4e-3.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from kernels.cuda import amd_flavour as af
from kernels.errors import KernelError, LaunchError

HAVE_NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not on the PATH")


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
    assert total == 65536 and all(v % 16 == 0 for v in offs.values())


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


def _nvcc(source):
    m = af.compile_amd(source, "sm_90", backend="nvcc", use_cache=False)
    assert m.module.cubin[:4] == b"\x7fELF"
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", m.module.log)]
    return m, spills


@needs_nvcc
@pytest.mark.parametrize("shape,dtype", [((256, 256, 256), "f16"), ((4000, 3000, 1000), "bf16")])
def test_nvcc_compiles_gemm(shape, dtype):
    k = _gemm(*shape, dtype)
    m, spills = _nvcc(k.source)
    assert m.kernels == (k.name,) and not any(spills)


@needs_nvcc
def test_nvcc_compiles_attention():
    k = _attn(causal=True)
    m, _ = _nvcc(k.source)
    assert m.kernels == (k.name,)


@needs_nvcc
def test_nvcc_compiles_every_mfma_probe():
    m, spills = _nvcc(af.mfma_probe_source())
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
_GPU_ATTN = {}
if _cuda():
    for _shape, _dt in (((4096, 4096, 4096), "f16"), ((4000, 3000, 1000), "bf16")):
        _GPU_GEMMS[(_shape, _dt)] = af.gemm_kernel(*_shape, _dt)
    for _c in (False, True):
        _GPU_ATTN[_c] = af.attention_case(2, 8, 2048, 128, _c, "f16")


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
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_attention_large(causal):
    r = af.check_attention(2, 8, 2048, 128, causal, "f16", reps=1, case=_GPU_ATTN[causal])
    assert r["unwritten_nan"] == 0
    assert r["within_tol"], r
    assert r["rel_fro_err"] < 3e-3 and r["lse_max_abs_err"] < 1e-3
