// lagen_hip.h - the whole HIP surface a layoutalg kernel may use.
//
// One header, three builds of the SAME kernel source:
//   * device:    clang -x hip -nogpuinc -nogpulib --offload-arch=gfx942 (no HIP headers needed);
//   * emulation: host C++ with -DLAGEN_EMULATE (kernels/emulator/hip_emu.h implements every name
//                below on the CPU: fibers per thread, barriers, LDS arena, wave64 collectives).
//   * cuda:      nvcc/NVRTC include lagen_cuda.h instead (kernels/cuda/amd_flavour.py).
// Every flavour implements the same names; kernels must use nothing else.
//
// The API (keep it exactly this; the emitter prints these names):
//   LAGEN_KERNEL void name(args...)          extern "C" __global__ kernel (what run()/launch() find)
//   LAGEN_LAUNCH_BOUNDS(threads)             max threads per block (lets the compiler use > 128 VGPRs)
//   LAGEN_WAVES_PER_EU(n)                    register-budget hint (amdgpu_waves_per_eu); other builds: nothing
//   threadIdx.{x,y,z} blockIdx.{x,y,z} blockDim.{x,y,z} gridDim.{x,y,z}  (unsigned)
//   lagen_lane_id()  lagen_wave_id()         lane in the wave (0..63), wave in the block
//   __syncthreads()                          work-group barrier with workgroup-scope fences
//   LAGEN_SHARED(type, name, count)          static LDS: `type name[count]` (an array, per block)
//   LAGEN_DYNAMIC_SHARED(type, name)         dynamic LDS (bytes given at launch): `type* name`
//   __device__ __host__ __forceinline__ __restrict__ as in HIP; NO plain __shared__ (use the macros)
//   vector types: lagen_f16x4 lagen_f16x8 lagen_bf16x4 (short) lagen_f32x4 lagen_f32x16 ...
//   lagen_bf16_to_f32(unsigned short)  lagen_f32_to_bf16(float) (round to nearest even)
//   lagen_perm_b32(hi, lo, sel)          v_perm_b32 (byte selectors 0..7 only)
//   lagen_gather_bytes4(v0, v1, v2, v3, j)  {v0[j], v1[j], v2[j], v3[j]} of four 1-byte
//                                        vectors as one 32-bit word (fp8 B transpose)
//   clang builtins (semantics in hip_emu.h):
//     __builtin_amdgcn_mfma_*            the MFMA instructions (emulated from mfma_specs)
//     __builtin_amdgcn_ds_swizzle(v, pattern)   bit mode and quad-permute mode
//     __builtin_amdgcn_ds_bpermute(byte_addr, v)
//     __builtin_amdgcn_readfirstlane(v)  __builtin_amdgcn_ballot_w64(pred)
//     __builtin_amdgcn_wave_barrier()    in emulation a wave rendezvous: put one wherever lanes
//                                        of a wave exchange data through LDS without __syncthreads
//     __builtin_amdgcn_s_barrier / _fence / s_waitcnt / sched_barrier / s_setprio (no-ops in
//                                        emulation except s_barrier == __syncthreads)
//   lagen_atomic_add(float* / int* / unsigned*, value)  relaxed device-scope atomic add
//   lagen_buffer lagen_make_buffer(const void* base, unsigned bytes)   a raw buffer resource
//                                        (V#: stride 0, num_records = bytes; kernels use it only
//                                        for in-range loads, which the verifier proves)
//   lagen_buffer_load_b128<V>(buf, voff, soff)   buffer_load_dwordx4 of the 16-byte vector type V
//                                        at ELEMENT offset voff (per lane, a VGPR) + soff
//                                        (wave-uniform, an SGPR); offsets are scaled to bytes
//                                        here. The emulator stops the kernel on an out-of-range
//                                        load instead of modelling the hardware's zero fill.
//   lagen_buffer_load_if<V>(buf, p, voff, soff)   a 4-, 8- or 16-byte V at voff + soff where p,
//                                        zeros where not, with no branch: an off lane's voffset
//                                        becomes LAGEN_BUFFER_OOB bytes, past num_records (the
//                                        hardware returns zeros; buffers stay below that size)
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// the CUDA flavour (NVIDIA GPUs, wave64 as two warps): kernels/include/lagen_cuda.h
#include "lagen_cuda.h"
#else

// ---------------------------------------------------------------- vector types (both builds)
#if defined(__clang__)
#define LAGEN_VEC(T, n) __attribute__((ext_vector_type(n)))
#else
#define LAGEN_VEC(T, n) __attribute__((vector_size((n) * sizeof(T))))
#endif
// a kernel's own vector type (the emitter prints this for any type not listed below); the CUDA
// flavour defines the same macro as lagen_vec<T, n>, so one emitted line means one type in all
// three builds
#define LAGEN_VEC_TYPEDEF(T, n, name) typedef T name LAGEN_VEC(T, n)
typedef _Float16 lagen_f16;
typedef _Float16 lagen_f16x2 LAGEN_VEC(_Float16, 2);
typedef _Float16 lagen_f16x4 LAGEN_VEC(_Float16, 4);
typedef _Float16 lagen_f16x8 LAGEN_VEC(_Float16, 8);
typedef short lagen_bf16x2 LAGEN_VEC(short, 2);   // bf16 values as raw bits (the builtins' type)
typedef short lagen_bf16x4 LAGEN_VEC(short, 4);
typedef short lagen_bf16x8 LAGEN_VEC(short, 8);
typedef short lagen_i16x4 LAGEN_VEC(short, 4);
typedef float lagen_f32x2 LAGEN_VEC(float, 2);
typedef float lagen_f32x4 LAGEN_VEC(float, 4);
typedef float lagen_f32x16 LAGEN_VEC(float, 16);
typedef float lagen_f32x32 LAGEN_VEC(float, 32);
typedef double lagen_f64x4 LAGEN_VEC(double, 4);
typedef int lagen_i32x2 LAGEN_VEC(int, 2);
typedef int lagen_i32x4 LAGEN_VEC(int, 4);
typedef int lagen_i32x16 LAGEN_VEC(int, 16);
typedef int lagen_i32x32 LAGEN_VEC(int, 32);
typedef unsigned int lagen_u32x4 LAGEN_VEC(unsigned int, 4);
typedef unsigned char lagen_fp8;   // gfx942 FP8 E4M3 FNUZ, raw bits (bias 8, max 240, NaN 0x80)
typedef unsigned char lagen_bf8;   // gfx942 BF8 E5M2 FNUZ, raw bits (bias 16, max 57344, NaN 0x80)

struct lagen_dim3 { unsigned x, y, z; };

#if defined(LAGEN_EMULATE)
#include "hip_emu.h"
#else  // ------------------------------------------------------------ device (amdgcn) build
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define LAGEN_KERNEL extern "C" __global__
#define LAGEN_LAUNCH_BOUNDS(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define LAGEN_WAVES_PER_EU(n) __attribute__((amdgpu_waves_per_eu(n)))
#define LAGEN_SHARED(type, name, count) __attribute__((shared)) type name[count]
#define LAGEN_DYNAMIC_SHARED(type, name) extern __attribute__((shared)) type name[]
#define __shared__ lagen_error_use_LAGEN_SHARED_instead_of___shared__

#define threadIdx (lagen_dim3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(), \
                              __builtin_amdgcn_workitem_id_z()})
#define blockIdx (lagen_dim3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(), \
                             __builtin_amdgcn_workgroup_id_z()})
#define blockDim (lagen_dim3{__builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(), \
                             __builtin_amdgcn_workgroup_size_z()})
// grid_size is the dispatch's size in work-items; HIP's gridDim counts blocks
#define gridDim (lagen_dim3{__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(), \
                            __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(), \
                            __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()})

__device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__device__ __forceinline__ unsigned lagen_lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
__device__ __forceinline__ unsigned lagen_wave_id() {
  unsigned flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return __builtin_amdgcn_readfirstlane(flat / 64u);
}
__device__ __forceinline__ float lagen_atomic_add(float* p, float v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
__device__ __forceinline__ int lagen_atomic_add(int* p, int v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
__device__ __forceinline__ unsigned lagen_atomic_add(unsigned* p, unsigned v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
// Raw buffer resource (V#) for gfx9/CDNA: stride 0 (raw), num_records in bytes, word 3 =
// DST_SEL_XYZW | NUM_FORMAT float | DATA_FORMAT 32 (0x00027000, the value Triton's AMD
// backend uses for CDNA3 buffer ops). Never validated on hardware here (no AMD GPU).
typedef __amdgpu_buffer_rsrc_t lagen_buffer;
#define LAGEN_BUFFER_OOB 0x7ffffff0  // bytes: past every buffer a kernel makes
__device__ __forceinline__ lagen_buffer lagen_make_buffer(const void* base, unsigned bytes) {
  return __builtin_amdgcn_make_buffer_rsrc((void*)base, (short)0, (int)bytes, 0x00027000);
}
template <typename V>
__device__ __forceinline__ V lagen_buffer_load_b128(lagen_buffer b, int voff, int soff) {
  static_assert(sizeof(V) == 16, "lagen_buffer_load_b128 loads 16-byte vectors");
  constexpr int eb = (int)sizeof(V{}[0]);
  // soff is wave-uniform (the gate proves it), but where clang cannot see that (a soffset
  // computed under a lane predicate, e.g. an N-edge tile) it wraps every load in a
  // readfirstlane "waterfall" loop; the explicit readfirstlane says it once, for free
  return __builtin_bit_cast(V, __builtin_amdgcn_raw_buffer_load_b128(
      b, voff * eb, __builtin_amdgcn_readfirstlane(soff * eb), 0));
}
template <typename V>
__device__ __forceinline__ V lagen_buffer_load_if(lagen_buffer b, bool p, int voff, int soff) {
  constexpr int eb = (int)sizeof(V{}[0]);
  const int vb = p ? voff * eb : LAGEN_BUFFER_OOB;
  if constexpr (sizeof(V) == 16)
    return __builtin_bit_cast(V, __builtin_amdgcn_raw_buffer_load_b128(b, vb, soff * eb, 0));
  else if constexpr (sizeof(V) == 8)
    return __builtin_bit_cast(V, __builtin_amdgcn_raw_buffer_load_b64(b, vb, soff * eb, 0));
  else {
    static_assert(sizeof(V) == 4, "lagen_buffer_load_if loads 4-, 8- or 16-byte vectors");
    return __builtin_bit_cast(V, __builtin_amdgcn_raw_buffer_load_b32(b, vb, soff * eb, 0));
  }
}
#endif

// ---------------------------------------------------------------- helpers (both builds)
// the same bytes as another type of the same size (8 fp8 values -> the MFMA builtin's long)
template <class T, class F>
__device__ __forceinline__ T lagen_bitcast(const F& f) {
  static_assert(sizeof(T) == sizeof(F), "LAGEN_BITCAST: sizes differ");
  T t;
  __builtin_memcpy(&t, &f, sizeof(T));
  return t;
}
#define LAGEN_BITCAST(T, v) lagen_bitcast<T>(v)
// v_perm_b32: byte i of the result is byte sel.b[i] of the 8-byte value {hi, lo} (selectors
// 0..3: lo's bytes, 4..7: hi's; the only selectors the helpers below use)
__device__ __forceinline__ unsigned lagen_perm_b32(unsigned hi, unsigned lo, unsigned sel) {
#if defined(LAGEN_EMULATE)
  unsigned long long both = ((unsigned long long)hi << 32) | lo;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((both >> (8 * ((sel >> (8 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
#else
  return __builtin_amdgcn_perm(hi, lo, sel);
#endif
}
// byte j of each of four 1-byte-element vectors, as one 32-bit word {v0[j], v1[j], v2[j], v3[j]}
// (a column of a 4x4 byte transpose: the fp8 B tile written to LDS k-contiguous). Two levels of
// v_perm: pairs {x[2h], y[2h], x[2h+1], y[2h+1]} (h = j%4/2), shared by the two j of a half once
// inlined, then the half of each pair: 8 v_perm for the 4 words of a 4x4 block (clang's own
// lowering of the byte-wise vector initializer took ~28 VALU instructions).
template <class V>
__device__ __forceinline__ unsigned lagen_gather_bytes4(V v0, V v1, V v2, V v3, int j) {
  static_assert(sizeof(V) % 4 == 0 && sizeof(v0[0]) == 1, "lagen_gather_bytes4: 1-byte vectors");
  unsigned w[4];
  __builtin_memcpy(&w[0], (const char*)&v0 + 4 * (j / 4), 4);
  __builtin_memcpy(&w[1], (const char*)&v1 + 4 * (j / 4), 4);
  __builtin_memcpy(&w[2], (const char*)&v2 + 4 * (j / 4), 4);
  __builtin_memcpy(&w[3], (const char*)&v3 + 4 * (j / 4), 4);
  const unsigned pair = (j % 4) / 2 ? 0x03070206u : 0x01050004u;  // {x.b, y.b, x.b', y.b'}
  const unsigned p = lagen_perm_b32(w[0], w[1], pair), q = lagen_perm_b32(w[2], w[3], pair);
  return lagen_perm_b32(q, p, (j % 2) ? 0x07060302u : 0x05040100u);
}
__device__ __forceinline__ float lagen_bf16_to_f32(unsigned short b) {
  unsigned u = (unsigned)b << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
__device__ __forceinline__ unsigned short lagen_f32_to_bf16(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  // both results, then a select (an early return for NaN compiled to a branch around every
  // element of a bf16 epilogue: exec-mask save/restore, ~8 more instructions per element)
  // selected as 32-bit words, shifted last: the high halves of two results then pack into
  // one bf16x2 word with one v_perm_b32 (no shift per element)
  const unsigned nan = u | 0x400000u;                           // quiet NaN
  const unsigned rne = u + 0x7fffu + ((u >> 16) & 1u);          // round to nearest, ties to even
  // (an integer NaN test: __builtin_isnan would fold to false under -ffinite-math-only)
  return (unsigned short)((((u & 0x7fffffffu) > 0x7f800000u) ? nan : rne) >> 16);
}
#endif  // not CUDA
