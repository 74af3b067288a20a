"""The CUDA prelude every generated NVIDIA kernel starts with: inline-PTX helpers, no headers.

Only built-in types and inline PTX are used, so NVRTC needs no include path and the same text
compiles with ``nvcc``.  Helpers (all ``__device__ __forceinline__``):

* ``lg_smem_u32(p)``: 32-bit shared-window address of a generic pointer;
* ``lg_cp_async16/8/4(dst, src, bytes)``: ``cp.async`` global->shared of 16/8/4 bytes,
  zero-filling the destination past ``bytes`` (``bytes = 0`` reads nothing);
  ``lg_cp_async_commit()``, ``lg_cp_async_wait<N>()``;
* ``lg_ldmatrix_x{1,2,4}[_trans](r..., addr)``;
* ``lg_mma_f16 / lg_mma_bf16(d[4], a[4], b[2])``: ``mma.sync.aligned.m16n8k16.row.col.f32``
  accumulate in place;
* ``lg_pack_f16x2 / lg_pack_bf16x2(lo, hi)``: round two floats to one packed register (RN);
* ``lg_bf16_lo/hi, lg_f16_lo/hi``: unpack a register to float;
* ``lg_exp2(x)``: ``ex2.approx.ftz.f32``.
"""

from typing import Iterable, List

PRELUDE = r"""
typedef unsigned short lg_u16;
typedef unsigned int lg_u32;
typedef unsigned long long lg_u64;
struct __align__(16) lg_u32x4 { lg_u32 x, y, z, w; };
struct __align__(8) lg_u32x2 { lg_u32 x, y; };

#define LG_DEV __device__ __forceinline__

LG_DEV lg_u32 lg_smem_u32(const void* p) {
  lg_u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
LG_DEV void lg_cp_async16(lg_u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
LG_DEV void lg_cp_async8(lg_u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
LG_DEV void lg_cp_async4(lg_u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
LG_DEV void lg_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> LG_DEV void lg_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

LG_DEV void lg_ldmatrix_x4(lg_u32& r0, lg_u32& r1, lg_u32& r2, lg_u32& r3, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
LG_DEV void lg_ldmatrix_x4_trans(lg_u32& r0, lg_u32& r1, lg_u32& r2, lg_u32& r3, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
LG_DEV void lg_ldmatrix_x2(lg_u32& r0, lg_u32& r1, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(addr));
}
LG_DEV void lg_ldmatrix_x2_trans(lg_u32& r0, lg_u32& r1, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(addr));
}
LG_DEV void lg_ldmatrix_x1(lg_u32& r0, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(addr));
}
LG_DEV void lg_ldmatrix_x1_trans(lg_u32& r0, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(addr));
}
// immediate-offset forms: the constant part of a shared address folds into the instruction
template <int OFF> LG_DEV void lg_ldsm_x4(lg_u32& r0, lg_u32& r1, lg_u32& r2, lg_u32& r3, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr), "n"(OFF));
}
template <int OFF> LG_DEV void lg_ldsm_x4_trans(lg_u32& r0, lg_u32& r1, lg_u32& r2, lg_u32& r3, lg_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr), "n"(OFF));
}
template <int OFF> LG_DEV void lg_cp_async16_i(lg_u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0+%2], [%1], 16;\n" :: "r"(dst), "l"(src), "n"(OFF));
}
template <int OFF> LG_DEV void lg_cp_async8_i(lg_u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0+%2], [%1], 8;\n" :: "r"(dst), "l"(src), "n"(OFF));
}
template <int OFF> LG_DEV void lg_cp_async4_i(lg_u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0+%2], [%1], 4;\n" :: "r"(dst), "l"(src), "n"(OFF));
}
LG_DEV void lg_mma_f16(float* d, const lg_u32* a, const lg_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
LG_DEV void lg_mma_bf16(float* d, const lg_u32* a, const lg_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
LG_DEV lg_u32 lg_pack_f16x2(float lo, float hi) {
  lg_u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
LG_DEV lg_u32 lg_pack_bf16x2(float lo, float hi) {
  lg_u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
LG_DEV float lg_bf16_lo(lg_u32 v) { return __uint_as_float(v << 16); }
LG_DEV float lg_bf16_hi(lg_u32 v) { return __uint_as_float(v & 0xffff0000u); }
LG_DEV float lg_f16_lo(lg_u32 v) {
  float f; asm("{ .reg .f16 h; mov.b32 {h, _}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(v));
  return f;
}
LG_DEV float lg_f16_hi(lg_u32 v) {
  float f; asm("{ .reg .f16 h; mov.b32 {_, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(v));
  return f;
}
LG_DEV float lg_exp2(float x) {
  float y; asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x)); return y;
}
LG_DEV lg_u16 lg_f32_to_f16(float x) {
  lg_u16 r; asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(r) : "f"(x));
  return r;
}
LG_DEV lg_u16 lg_f32_to_bf16(float x) {
  lg_u16 r; asm("{ .reg .b16 h; cvt.rn.bf16.f32 h, %1; mov.b16 %0, h; }" : "=h"(r) : "f"(x));
  return r;
}
"""

# the prelude's per-dtype helpers: mma.sync on f16 / bf16 inputs, two floats packed to f16 / bf16
MMA = {"f16": "lg_mma_f16", "bf16": "lg_mma_bf16"}
PACK = {"f16": "lg_pack_f16x2", "bf16": "lg_pack_bf16x2"}


def source_head(generator: str, name: str, notes: Iterable[str]) -> List[str]:
    """The first lines of a generated source: which module generated kernel ``name``, one
    comment line per note (newlines flattened), then :data:`PRELUDE`."""
    return ([f"// generated by {generator}: {name}"]
            + [f"//   {n}".replace("\n", " ") for n in notes] + [PRELUDE])
