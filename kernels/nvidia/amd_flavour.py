"""Run the AMD-flavoured kernels (the SAME emitted HIP source) on an NVIDIA GPU, to check their logic
at scale.  Correctness, not speed: a wave64 is two warps, every MFMA is emulated on CUDA cores in
double precision (bit-identical to the CPU emulator), wave collectives go through shared memory.

The HIP source's ``#include "lagen_hip.h"`` picks ``kernels/include/lagen_cuda.h`` under
nvcc/NVRTC (its header comment is the model).  This module supplies what that header needs:

* :func:`generate_cuda` - ``lagen_mfma_cuda.inc``: one device function per MFMA builtin the source
  names, generated from :mod:`mfma_specs` with the CPU emulator's own lane tables
  (``kernels.emulator.mfma_gen._table``, checked bijections);
* :func:`lds_layout` - every ``LAGEN_SHARED`` array placed in dynamic shared memory
  (``-DLAGEN_LDS_OFF_<name>=<offset>``), then the per-wave scratch, then ``LAGEN_DYNAMIC_SHARED``;
* :func:`compile_amd` - NVRTC (kernels.cuda.compile._nvrtc_compile, no cubin cache, ~1 s a kernel) or
  ``nvcc -cubin`` offline through :func:`kernels.cuda.compile_cuda`, with those options and
  include paths; :func:`launch_amd` - :func:`kernels.cuda.launch.launch`
  with the signature parsed from the source and the shared-memory size computed;
* in :mod:`kernels.nvidia.amd_flavour_checks` (the harness, built on this module):
  ``run_gemm`` / ``run_attention`` / ``run_decode`` - the registry's GEMM, prefill attention
  (top-left or bottom-right causal) and decode attention (the single decode kernel or the
  split-KV split + combine pair, ``decode_case``) on torch CUDA tensors;
  ``python3 -m kernels.nvidia.amd_flavour_checks`` runs the large-shape checks and timings.

The emitted source is compiled as it is: the emitter spells its own vector types
(``la_f32x8`` of the decode kernels) with ``LAGEN_VEC_TYPEDEF``, which ``lagen_cuda.h`` defines
as ``lagen_vec<T, n>`` (NVCC/NVRTC ignore clang's ``ext_vector_type``).

Limits: blocks of a multiple of 64 threads, at most 960 (15 named barriers besides barrier 0);
every collective must be reached by all 64 lanes of the wave (a partial wave hangs instead of
reporting, unlike the emulator); ``.x``-style vector swizzles are not provided.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from ..errors import CompileError, KernelError, LaunchError

# the runners (run_gemm, run_decode, ...) live in amd_flavour_checks, which imports this module
__all__ = ["generate_cuda", "lds_layout", "kernel_signatures", "cuda_options", "AmdCudaModule",
           "compile_amd", "launch_amd", "translate", "MAX_WAVES", "INCLUDE_DIR",
           "mfma_probe_source", "mfma_probe_inputs"]

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
MAX_WAVES = 15           # named barriers 1..15 (0 is __syncthreads)

# mfma_specs dtype -> (CUDA element reader, scratch type)
_READERS = {"f16": ("lagen_cuda_elt_f16", "float"), "bf16": ("lagen_cuda_elt_bf16", "float"),
            "f32": ("lagen_cuda_elt_f32", "float"), "f64": ("lagen_cuda_elt_f64", "double"),
            "i8": ("lagen_cuda_elt_i8", "int"), "fp8e4m3fnuz": ("lagen_cuda_elt_fp8", "float"),
            "fp8e5m2fnuz": ("lagen_cuda_elt_bf8", "float")}
_ACC = {"f32": ("lagen_cuda_elt_f32", "double", "lagen_cuda_put_f32"),
        "f64": ("lagen_cuda_elt_f64", "double", "lagen_cuda_put_f64"),
        "i32": ("lagen_cuda_elt_i32", "long long", "lagen_cuda_put_i32")}
_CTYPES = {"__fp16": "_Float16", "_Float16": "_Float16", "short": "short", "float": "float",
           "int": "int", "long": "long", "double": "double", "bool": "bool"}
_SIZEOF = {"float": 4, "double": 8, "int": 4}
MIN_SCRATCH = 512


# ----------------------------------------------------------------------------- MFMA generator

def _mg():
    from ..emulator import mfma_gen
    return mfma_gen


def _ctype(p) -> str:
    base = _CTYPES.get(p.ctype)
    if base is None:
        raise KernelError(f"builtin parameter type {p.ctype!r} unknown to the CUDA flavour")
    return base if p.width == 1 else f"lagen_vec<{base}, {p.width}>"


def scratch_bytes(spec) -> int:
    """Per-wave shared-memory bytes one instruction's collective needs."""
    mg = _mg()
    st = _READERS[spec.a_type][1]
    n = (spec.m * spec.k + spec.k * spec.n) * spec.blocks * _SIZEOF[st]
    if mg._table(spec, "C") != mg._table(spec, "D"):
        n = (n + 7) // 8 * 8 + spec.m * spec.n * spec.blocks * 8
    return max(MIN_SCRATCH, (n + 15) // 16 * 16)


def emit_cuda_instruction(spec) -> str:
    """CUDA C++ for one MFMA builtin: tables, the device function and the builtin macro."""
    mg = _mg()
    why = mg._supported(spec)
    if why:
        raise KernelError(f"cannot emulate {spec.name} on CUDA: {why}")
    if spec.a_type != spec.b_type and _READERS[spec.a_type][1] != _READERS[spec.b_type][1]:
        raise KernelError(f"{spec.name}: A and B scratch types differ")
    M, N, K, nb = spec.m, spec.n, spec.k, spec.blocks
    builtin = mg._builtin_name(spec)
    short = builtin[len("__builtin_amdgcn_"):]
    params = list(spec.builtin_params)
    if len(params) != 6:
        raise KernelError(f"{spec.name}: expected (A, B, C, cbsz, abid, blgp)")
    na, nbi, nc, nd = (spec.items(o) for o in "ABCD")
    ra, st = _READERS[spec.a_type]
    rb, _ = _READERS[spec.b_type]
    rc, acc, put = _ACC[spec.acc_type]
    ta, tb, tc_, td = (mg._table(spec, o) for o in "ABCD")
    same_cd = tc_ == td
    if not same_cd and nc != nd:
        raise KernelError(f"{spec.name}: C and D item counts differ")
    ta_t, tb_t, tc_t = (_ctype(p) for p in params[:3])
    tr = _ctype(spec.builtin_return)

    def arr(name, vals):
        return (f"static __device__ const unsigned short {name}[{len(vals)}] = "
                f"{{{','.join(str(v) for v in vals)}}};")

    p = f"lagen_cuda_T{short}"
    a_elems = M * K * nb
    b_elems = K * N * nb
    off_c = ((a_elems + b_elems) * _SIZEOF[st] + 7) // 8 * 8
    lines = [f"// {spec.name} ({spec.family}): D = A*B + C; M={M} N={N} K={K} blocks={nb}; "
             f"A {spec.a_type} x{na}, B {spec.b_type} x{nbi}, C/D {spec.acc_type} x{nc}",
             arr(p + "A", ta), arr(p + "B", tb), arr(p + "D", td)]
    if not same_cd:
        lines.append(arr(p + "C", tc_))
    lines += [
        f"static_assert({scratch_bytes(spec)} <= LAGEN_CUDA_WAVE_SCRATCH_BYTES, "
        f"\"wave scratch too small for {builtin}\");",
        f"__device__ __noinline__ {tr} lagen_cuda_mfma_{short}({ta_t} a, {tb_t} b, {tc_t} c, "
        f"int cbsz, int abid, int blgp) {{",
        "  lagen_cuda_check_modifiers(cbsz, abid, blgp);",
        "  const unsigned l = lagen_lane_id();",
        "  unsigned char* scr = lagen_cuda_wave_scratch();",
        f"  {st}* const sa = ({st}*)scr;",
        f"  {st}* const sb = sa + {a_elems};",
        "  lagen_cuda_wave_sync();  // the previous collective's readers are done",
        "#pragma unroll",
        f"  for (int e = 0; e < {na}; ++e) sa[{p}A[l * {na} + e]] = {ra}(&a, e);",
        "#pragma unroll",
        f"  for (int e = 0; e < {nbi}; ++e) sb[{p}B[l * {nbi} + e]] = {rb}(&b, e);"]
    if not same_cd:
        lines += [f"  {acc}* const sc = ({acc}*)(scr + {off_c});",
                  "#pragma unroll",
                  f"  for (int e = 0; e < {nc}; ++e) sc[{p}C[l * {nc} + e]] = {rc}(&c, e);"]
    lines += [
        "  lagen_cuda_wave_sync();",
        f"  {tr} d;",
        "#pragma unroll",
        f"  for (int e = 0; e < {nd}; ++e) {{",
        f"    const int t = {p}D[l * {nd} + e];",
        f"    const int i = t % {M}, j = (t / {M}) % {N}, blk = t / {M * N};",
        f"    {acc} s = " + (f"{rc}(&c, e);" if same_cd else "sc[t];"),
        f"    const {st}* ar = sa + i + {M * K} * blk;",
        f"    const {st}* bc = sb + {K} * j + {K * N} * blk;",
        "#pragma unroll 4",
        f"    for (int k = 0; k < {K}; ++k) s = lagen_cuda_mac(s, ({acc})ar[{M} * k], ({acc})bc[k]);",
        f"    {put}(&d, e, s);",
        "  }",
        "  return d;",
        "}",
        f"#define {builtin}(a, b, c, cbsz, abid, blgp) lagen_cuda_mfma_{short}((a), (b), (c), "
        f"(cbsz), (abid), (blgp))", ""]
    return "\n".join(lines)


def _specs_for(builtins: Optional[Iterable[str]], arch: str) -> list:
    mg = _mg()
    by = {}
    for s in mg._all_specs(arch):
        if s.builtin:
            by.setdefault(mg._builtin_name(s), s)
    if builtins is None:
        return [s for s in by.values() if mg._supported(s) is None]
    out = []
    for b in sorted(set(builtins)):
        if b not in by:
            raise KernelError(f"{b} is not a matrix builtin of {arch}")
        why = mg._supported(by[b])
        if why:
            raise KernelError(f"{b} ({by[b].name}) is not emulated: {why}")
        out.append(by[b])
    return out


def generate_cuda(builtins: Optional[Iterable[str]] = None, arch: str = "gfx942") -> Tuple[str, int]:
    """(``lagen_mfma_cuda.inc`` text, per-wave scratch bytes) for the given builtins (all when None)."""
    specs = _specs_for(builtins, arch)
    scratch = max([MIN_SCRATCH] + [scratch_bytes(s) for s in specs])
    head = (f"// lagen_mfma_cuda.inc: generated by kernels/cuda/amd_flavour.py from mfma_specs "
            f"({arch}); do not edit.\n#pragma once\n")
    return head + "\n".join(emit_cuda_instruction(s) for s in specs), scratch


# ----------------------------------------------------------------------------- source analysis

_ELEM = {"f16": 2, "bf16": 2, "i16": 2, "f32": 4, "i32": 4, "u32": 4, "f64": 8, "fp8": 1,
         "bf8": 1}
_SCALAR = {"_Float16": 2, "lagen_f16": 2, "short": 2, "unsigned short": 2, "float": 4, "int": 4,
           "unsigned": 4, "unsigned int": 4, "double": 8, "char": 1, "unsigned char": 1,
           "signed char": 1, "long": 8, "long long": 8, "lagen_fp8": 1, "lagen_bf8": 1}


def _sizeof(t: str) -> int:
    t = " ".join(t.split())
    m = re.fullmatch(r"(?:lagen|la)_(f16|bf16|i16|f32|i32|u32|f64|fp8|bf8)x(\d+)", t)
    if m:
        return _ELEM[m.group(1)] * int(m.group(2))
    if t in _SCALAR:
        return _SCALAR[t]
    raise KernelError(f"CUDA flavour: unknown LDS element type {t!r} (add it to amd_flavour._SCALAR)")


def _int_expr(e: str) -> int:
    if not re.fullmatch(r"[\d\s()+\-*/]+", e):
        raise KernelError(f"CUDA flavour: LDS count {e!r} is not an integer expression")
    return int(eval(e.replace("/", "//"), {"__builtins__": {}}))  # digits and operators only


def lds_layout(source: str) -> Tuple[Dict[str, int], int]:
    """({name: byte offset}, total bytes) of the source's LAGEN_SHARED arrays, 16-byte aligned."""
    offs: Dict[str, Tuple[int, int]] = {}
    end = 0
    for m in re.finditer(r"LAGEN_SHARED\(\s*([^,]+?)\s*,\s*(\w+)\s*,\s*([^)]*(?:\([^)]*\)[^)]*)*)\)",
                         source):
        t, name, count = m.group(1), m.group(2), m.group(3)
        if t == "type":   # the macro's own definition quoted in a comment
            continue
        size = _sizeof(t) * _int_expr(count)
        if name in offs:
            if offs[name][1] != size:
                raise KernelError(f"CUDA flavour: two LDS arrays named {name} of different sizes")
            continue
        offs[name] = (end, size)
        end = (end + size + 15) // 16 * 16
    return {k: v[0] for k, v in offs.items()}, end


_KERNEL = re.compile(r"LAGEN_KERNEL\s+(?:LAGEN_LAUNCH_BOUNDS\s*\(\s*\d+\s*\)\s*)?"
                     r"(?:LAGEN_WAVES_PER_EU\s*\(\s*\d+\s*\)\s*)?void\s+(\w+)\s*"
                     r"\(([^)]*)\)", re.S)


def _param_kind(p: str) -> str:
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", p, flags=re.S)
    if "*" in text:
        return "ptr"
    words = [w for w in re.findall(r"[A-Za-z_]\w*", text)
             if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")]
    t = " ".join(words[:-1])
    if t in ("int", "int32_t", "signed int", "signed"):
        return "i32"
    if t in ("unsigned", "unsigned int", "uint32_t"):
        return "u32"
    if t == "float":
        return "f32"
    if t in ("long long", "int64_t", "long", "long long int"):
        return "i64"
    raise KernelError(f"CUDA flavour: kernel parameter {p!r} has no launch type")


def kernel_signatures(source: str) -> Dict[str, Tuple[str, ...]]:
    """{kernel name: launch signature} of every LAGEN_KERNEL in ``source``."""
    out = {}
    for m in _KERNEL.finditer(source):
        params = [p.strip() for p in m.group(2).split(",") if p.strip()]
        out[m.group(1)] = tuple(_param_kind(p) for p in params)
    return out


# ----------------------------------------------------------------------------- compile

def _inc_dir(inc: str) -> Path:
    h = hashlib.sha256(inc.encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / "layoutalg-amd-cuda" / h
    f = d / "lagen_mfma_cuda.inc"
    if not f.exists() or f.read_text() != inc:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"inc.{os.getpid()}.tmp"
        tmp.write_text(inc)
        os.replace(tmp, f)
    return d


def cuda_options(source: str, arch: str = "gfx942") -> Tuple[Tuple[str, ...], Dict[str, Any]]:
    """Compiler options (include paths, LDS offsets, scratch size, content key) and the layout."""
    mg = _mg()
    used = mg.builtins_used(source)
    inc, scratch = generate_cuda(used, arch)
    offs, static = lds_layout(source)
    d = _inc_dir(inc)
    hdr = hashlib.sha256()
    for f in ("lagen_hip.h", "lagen_cuda.h"):
        hdr.update((INCLUDE_DIR / f).read_bytes())
    hdr.update(inc.encode())
    opts = [f"-I{INCLUDE_DIR}", f"-I{d}", "-DLAGEN_CUDA_MFMA_INC=1",
            f"-DLAGEN_LDS_STATIC_BYTES={static}", f"-DLAGEN_CUDA_WAVE_SCRATCH_BYTES={scratch}",
            f"-DLAGEN_CUDA_HEADERS={hdr.hexdigest()[:16]}"]
    opts += [f"-DLAGEN_LDS_OFF_{k}={v}" for k, v in offs.items()]
    return tuple(opts), {"lds_offsets": offs, "lds_static_bytes": static,
                         "wave_scratch_bytes": scratch, "builtins": used}


def translate(source: str, arch: str = "gfx942") -> str:
    """One self-contained CUDA translation unit (headers and options inlined), for inspection or
    ``nvcc`` by hand: the options as #defines, lagen_cuda.h, the generated MFMA code, the source."""
    opts, info = cuda_options(source, arch)
    inc, _ = generate_cuda(info["builtins"], arch)
    defs = []
    for o in opts:
        if o.startswith("-D"):
            k, _, v = o[2:].partition("=")
            if k != "LAGEN_CUDA_MFMA_INC":
                defs.append(f"#define {k} {v or 1}")
    hdr = (INCLUDE_DIR / "lagen_cuda.h").read_text()
    body = re.sub(r'^\s*#\s*include\s*"lagen_hip.h".*$', "// (lagen_hip.h -> lagen_cuda.h above)",
                  source, flags=re.M)
    return ("\n".join(defs) + "\n" + hdr + "\n" + inc + "\n#line 1 \"kernel.hip\"\n"
            + body)


@dataclass
class AmdCudaModule:
    """A compiled AMD-flavoured source: the CUDA module plus what the launch needs."""

    module: Any                                  # kernels.cuda.compile.CudaModule
    signatures: Dict[str, Tuple[str, ...]]
    lds_static_bytes: int
    wave_scratch_bytes: int
    builtins: Tuple[str, ...]

    @property
    def kernels(self) -> Tuple[str, ...]:
        return tuple(self.signatures)

    def smem_bytes(self, threads: int, dyn_lds: int = 0) -> int:
        waves = (threads + 63) // 64
        return self.lds_static_bytes + waves * self.wave_scratch_bytes + int(dyn_lds)


def compile_amd(source: str, sm: str = "sm_90", *, arch: str = "gfx942", backend: str = "auto",
                options: Sequence[str] = (), name: str = "amd_flavour.cu",
                use_cache: bool = True) -> AmdCudaModule:
    """Compile an AMD-flavoured HIP source for an NVIDIA GPU (NVRTC, or nvcc offline)."""
    from ..toolchain import nvrtc as cc
    opts, info = cuda_options(source, arch)
    sigs = kernel_signatures(source)
    if not sigs:
        raise CompileError("CUDA flavour: the source has no LAGEN_KERNEL")
    all_opts = cc.DEFAULT_OPTIONS + tuple(o for o in tuple(opts) + tuple(options)
                                          if o not in cc.DEFAULT_OPTIONS)
    if backend == "nvrtc" or (backend == "auto" and cc.nvrtc_available()):
        arch_sm = cc._norm_arch(sm)
        t0 = time.perf_counter()
        cubin, log = cc._nvrtc_compile(source, name, arch_sm, all_opts)
        mod = cc.CudaModule(cubin=cubin, arch=arch_sm, source=source, name=name, options=all_opts,
                            backend="nvrtc", compiler=cc._nvrtc_version(cc._nvrtc()),
                            key="amd-nvrtc-" + hashlib.sha256(cubin).hexdigest(),  # launch's cache
                            cache_status="uncached", compile_seconds=time.perf_counter() - t0,
                            log=log, kernels=tuple(sigs))
    else:
        mod = cc.compile_cuda(source, sm, tuple(opts) + tuple(options), name=name,
                              backend=backend, use_cache=use_cache)
        mod = replace(mod, kernels=tuple(sigs))
    return AmdCudaModule(mod, sigs, info["lds_static_bytes"], info["wave_scratch_bytes"],
                         tuple(info["builtins"]))


def launch_amd(m: AmdCudaModule, kernel: Optional[str], grid, block, args: Sequence[Any], *,
               dyn_lds: int = 0, stream: Any = None) -> None:
    """Launch on torch CUDA tensors; ``block`` must be a multiple of 64 threads (<= 960)."""
    from ..runtime.rocm import dim3
    from ..runtime.cuda import launch
    kernel = kernel or m.kernels[0]
    if kernel not in m.signatures:
        raise LaunchError(f"no kernel {kernel!r} in the module; it has {', '.join(m.kernels)}")
    b = dim3(block, "block")
    threads = b[0] * b[1] * b[2]
    if threads % 64:
        raise LaunchError(f"{kernel}: block of {threads} threads; the CUDA flavour runs whole "
                          f"waves only (a multiple of 64 threads)")
    if threads > 64 * MAX_WAVES:
        raise LaunchError(f"{kernel}: block of {threads} threads is more than {MAX_WAVES} waves "
                          f"(named barriers 1..15)")
    launch(m.module, kernel, grid, block, args, signature=m.signatures[kernel],
           smem_bytes=m.smem_bytes(threads, dyn_lds), stream=stream)


# ----------------------------------------------------------------------------- MFMA probes

_PROBE_T = {("float", 1): "float", ("float", 4): "lagen_f32x4", ("float", 16): "lagen_f32x16",
            ("float", 32): "lagen_f32x32", ("__fp16", 4): "lagen_f16x4", ("__fp16", 8): "lagen_f16x8",
            ("short", 4): "lagen_bf16x4", ("short", 8): "lagen_bf16x8", ("int", 1): "int",
            ("int", 4): "lagen_i32x4", ("int", 16): "lagen_i32x16", ("int", 32): "lagen_i32x32",
            ("long", 1): "long", ("double", 1): "double", ("double", 4): "lagen_f64x4"}
# numpy dtype and items per lane of a probe operand, from the builtin parameter
_PROBE_NP = {"float": "float32", "__fp16": "float16", "short": "int16", "int": "int32",
             "long": "int64", "double": "float64"}


def mfma_probe_source(builtins: Optional[Iterable[str]] = None, arch: str = "gfx942") -> str:
    """A HIP source (lagen API) with one kernel ``probe_<builtin>`` per MFMA builtin: thread g
    loads its A/B/C registers from a[g], b[g], c[g] and stores D to d[g]; any block of whole
    waves.  Runs unchanged on the CPU emulator and through the CUDA flavour."""
    mg = _mg()
    out = ["#include \"lagen_hip.h\"", ""]
    for s in _specs_for(builtins, arch):
        b = mg._builtin_name(s)
        short = b[len("__builtin_amdgcn_"):]
        ta, tb, tc = (_PROBE_T[(p.ctype, p.width)] for p in s.builtin_params[:3])
        td = _PROBE_T[(s.builtin_return.ctype, s.builtin_return.width)]
        out += [f"LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS(256) void probe_{short}(const {ta}* __restrict__ a, "
                f"const {tb}* __restrict__ b, const {tc}* __restrict__ c, {td}* __restrict__ d) {{",
                "  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;",
                f"  d[g] = {b}(a[g], b[g], c[g], 0, 0, 0);", "}", ""]
    return "\n".join(out)


def mfma_probe_inputs(builtin: str, threads: int, seed: int = 0, arch: str = "gfx942"):
    """numpy (a, b, c, d) for ``probe_<builtin>`` over ``threads`` threads: finite random values
    of the operand types (fp8 bytes without the NaN code 0x80), d zeroed."""
    import numpy as np
    (s,) = _specs_for([builtin], arch)
    rng = np.random.default_rng(seed)
    arrs = []
    for p, et in zip(list(s.builtin_params[:3]) + [s.builtin_return],
                     (s.a_type, s.b_type, s.acc_type, s.out_type)):
        dt = np.dtype(_PROBE_NP[p.ctype])
        n = threads * p.width
        if et in ("fp8e4m3fnuz", "fp8e5m2fnuz", "i8"):
            raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
            if et != "i8":
                raw[raw == 0x80] = 0x81
            x = raw.view(dt)
        elif et == "bf16":
            f = rng.standard_normal(n).astype(np.float32)
            x = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.int16)
        elif et == "i32":
            x = rng.integers(-1000, 1000, size=n).astype(dt)
        else:
            x = rng.standard_normal(n).astype(dt)
        arrs.append(np.ascontiguousarray(x))
    arrs[3] = np.zeros_like(arrs[3])
    return arrs
