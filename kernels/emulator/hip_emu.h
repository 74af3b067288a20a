// hip_emu.h - runs a layoutalg HIP kernel on the CPU (included by lagen_hip.h under LAGEN_EMULATE).
//
// Model (one work-group at a time per process; kernels/emulator/runner.py forks workers for the
// blocks):
//   * every thread of the block is a fiber (ucontext) with its own stack (guard page below);
//   * a fiber runs until it reaches __syncthreads() or a wave collective (an MFMA, ds_swizzle,
//     ds_bpermute, readfirstlane, ballot, wave_barrier), or returns;
//   * the scheduler completes a wave collective when every live lane of that wave is waiting at
//     the SAME collective (same builtin, same source line, same immediates), and a barrier when
//     every thread of the block waits at the same barrier; all other states are reported as
//     errors (deadlock, divergent barrier, divergent wave collective, barrier after return);
//   * LDS is one arena per block (LAGEN_SHARED / LAGEN_DYNAMIC_SHARED), filled with 0xFF bytes
//     (NaN for floats) at block start so reads of never-written LDS show up in the results;
//   * between two synchronisation points the threads of a block run one after the other, so a
//     kernel that passes data between lanes through memory without a barrier, wave_barrier or
//     collective is not lockstep here: that is a race on hardware too, except inside one wave;
//     mark such wave-synchronous exchanges with __builtin_amdgcn_wave_barrier().
// MFMA semantics come from kernels/emulator/mfma_gen.py (generated from mfma_specs) via
// "lagen_mfma_emu.inc" on the include path.
#pragma once
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <type_traits>
#include <ucontext.h>
#include <unistd.h>
#include <utility>

// kernels carry an annotation so runner.py can find them in the preprocessed source
#define __global__ __attribute__((annotate("lagen_kernel")))
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define LAGEN_KERNEL extern "C" __global__
#define LAGEN_LAUNCH_BOUNDS(n)
#define LAGEN_WAVES_PER_EU(n)
#define LAGEN_STAGGERED_BARRIERS() (::lagen_emu::g_rt.staggered = true)
#define __shared__ lagen_error_use_LAGEN_SHARED_instead_of___shared__

namespace lagen_emu {

enum State : int { RUNNABLE = 0, AT_BARRIER = 1, AT_WAVE = 2, DONE = 3 };
struct Thread;
typedef void (*WaveFn)(Thread* const* lanes, long long imm);

struct Thread {
  ucontext_t ctx;
  lagen_dim3 tid;
  unsigned flat, lane, wave;
  int state;
  const char* what;   // the barrier / collective it waits at
  const char* file;
  int line;
  int site;           // __COUNTER__ of the macro expansion: tells apart barriers on one line
  WaveFn fn;
  long long imm;      // immediates that must be uniform across the wave
  bool full_wave;     // the collective needs all 64 lanes (MFMA)
  const void* in[3];
  void* out;
};

// Mirrored by ctypes in runner.py (field order and types must match).
struct LaunchParams {
  unsigned grid[3], block[3];
  unsigned long long lds_limit, dyn_lds;
  unsigned long long block_begin, block_step;
  unsigned long long stack_bytes;
  char* err;
  unsigned long long err_cap;
  long long catch_signals;
  unsigned long long stats[4];  // out: blocks, fiber switches, barriers, wave collectives
};

// An LDS array in its own mapping, its last byte against a PROT_NONE page (and one before it),
// so an access past its end (or reaching below its start) faults and is named (on_fault).
struct LdsSite { unsigned long long gen, off, launch; unsigned char* data; };
struct LdsRegion {
  unsigned char* map;
  unsigned long long map_bytes, bytes;
  unsigned char* data;
  const char* name;
  const char* file;
  int line;
};
static const unsigned kMaxLdsRegions = 64;

struct Runtime {
  LaunchParams* p;
  lagen_dim3 bid;
  Thread* threads;
  unsigned nthreads;
  Thread* cur;
  ucontext_t sched;
  unsigned char* lds;
  unsigned long long lds_used, gen, launch_id;
  LdsRegion regions[kMaxLdsRegions];
  unsigned nregions;
  unsigned char* stacks;
  unsigned long long stack_stride;
  bool failed;
  // the kernel called LAGEN_STAGGERED_BARRIERS(): its wave groups are offset by barriers only
  // some waves pass (ping-pong), so a barrier completes when every thread waits at A barrier,
  // whichever (s_barrier semantics: the k-th barrier of every wave), not at the same one
  bool staggered;
  void (*call)(void**);
  void** args;
};

static Runtime g_rt;  // internal linkage: one runtime per kernel library

// ------------------------------------------------------------------ errors
inline void vreport(const char* fmt, va_list ap) {
  Runtime& rt = g_rt;
  if (rt.failed) return;
  rt.failed = true;
  char* e = rt.p->err;
  size_t cap = rt.p->err_cap, n = 0;
  if (!e || !cap) return;
  n = (size_t)snprintf(e, cap, "block (%u,%u,%u)", rt.bid.x, rt.bid.y, rt.bid.z);
  if (rt.cur && n < cap)
    n += (size_t)snprintf(e + n, cap - n, " thread (%u,%u,%u) [wave %u lane %u]", rt.cur->tid.x,
                          rt.cur->tid.y, rt.cur->tid.z, rt.cur->wave, rt.cur->lane);
  if (n < cap) n += (size_t)snprintf(e + n, cap - n, ": ");
  if (n < cap) vsnprintf(e + n, cap - n, fmt, ap);
}

inline void report(const char* fmt, ...) {  // from the scheduler or a wave collective
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
}

[[noreturn]] inline void fail(const char* fmt, ...) {  // from kernel code (inside a fiber)
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
  Runtime& rt = g_rt;
  rt.failed = true;
  if (rt.cur) swapcontext(&rt.cur->ctx, &rt.sched);  // never resumed
  abort();
}

// ------------------------------------------------------------------ synchronisation
inline void block_on(int state, const char* what, const char* file, int line, int site) {
  Thread* t = g_rt.cur;
  t->state = state;
  t->what = what;
  t->file = file;
  t->line = line;
  t->site = site;
  g_rt.p->stats[1]++;
  swapcontext(&t->ctx, &g_rt.sched);
}

inline void barrier(const char* file, int line, int site) {
  block_on(AT_BARRIER, "__syncthreads", file, line, site);
}

inline void wave_op(WaveFn fn, long long imm, bool full_wave, const void* a, const void* b,
                    const void* c, void* out, const char* what, const char* file, int line,
                    int site) {
  Thread* t = g_rt.cur;
  t->fn = fn;
  t->imm = imm;
  t->full_wave = full_wave;
  t->in[0] = a;
  t->in[1] = b;
  t->in[2] = c;
  t->out = out;
  block_on(AT_WAVE, what, file, line, site);
}

// ------------------------------------------------------------------ LDS
// The array's own pages with a PROT_NONE page on each side, the array ending as close to the
// upper guard as its alignment allows (nullptr: no mapping left; the arena is used instead).
inline unsigned char* lds_guarded(unsigned long long bytes, unsigned long long align,
                                  const char* name, const char* file, int line) {
  Runtime& rt = g_rt;
  if (rt.nregions >= kMaxLdsRegions) return nullptr;
  const unsigned long long pg = 4096, pages = (bytes + pg - 1) / pg;
  const unsigned long long total = (pages + 2) * pg;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  unsigned char* map = (unsigned char*)m;
  mprotect(map, pg, PROT_NONE);
  mprotect(map + (pages + 1) * pg, pg, PROT_NONE);
  unsigned long long end = (unsigned long long)(map + (pages + 1) * pg);
  unsigned char* data = (unsigned char*)((end - bytes) / align * align);
  rt.regions[rt.nregions++] = LdsRegion{map, total, bytes, data, name, file, line};
  return data;
}

inline void* lds_alloc(LdsSite* s, unsigned long long bytes, unsigned long long align,
                       const char* name, const char* file, int line) {
  Runtime& rt = g_rt;
  if (s->gen != rt.gen || s->launch != rt.launch_id) {
    if (align < 16) align = 16;
    unsigned long long off = (rt.lds_used + align - 1) / align * align;
    if (off + bytes > rt.p->lds_limit)
      fail("LDS overflow at %s:%d: LAGEN_SHARED %s needs %llu bytes at offset %llu, but the "
           "work-group has %llu bytes of LDS (dynamic LDS: %llu)", file, line, name, bytes, off,
           rt.p->lds_limit, rt.p->dyn_lds);
    s->off = off;
    s->gen = rt.gen;
    rt.lds_used = off + bytes;
    if (s->launch != rt.launch_id) s->data = lds_guarded(bytes, align, name, file, line);
    s->launch = rt.launch_id;
    if (s->data) memset(s->data, 0xFF, bytes);
  }
  return s->data ? s->data : rt.lds + s->off;
}
inline void* lds_dynamic() { return g_rt.lds; }

// ------------------------------------------------------------------ element access for MFMA
inline double elt_f16(const void* v, int e) { return (double)((const _Float16*)v)[e]; }
inline double elt_f32(const void* v, int e) { return (double)((const float*)v)[e]; }
inline double elt_f64(const void* v, int e) { return ((const double*)v)[e]; }
inline double elt_bf16(const void* v, int e) {
  unsigned u = (unsigned)((const unsigned short*)v)[e] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline long long elt_i8(const void* v, int e) { return ((const signed char*)v)[e]; }
inline long long elt_i32(const void* v, int e) { return ((const int*)v)[e]; }
inline double fp8_fnuz(unsigned b, int mbits, int bias) {  // gfx942 FP8/BF8 ("fnuz") encodings
  if (b == 0x80) return __builtin_nan("");
  int sign = b >> 7, exp = (b >> mbits) & ((1 << (7 - mbits)) - 1), man = b & ((1 << mbits) - 1);
  double v = exp ? __builtin_ldexp(1.0 + man / (double)(1 << mbits), exp - bias)
                 : __builtin_ldexp(man / (double)(1 << mbits), 1 - bias);
  return sign ? -v : v;
}
inline double elt_fp8(const void* v, int e) { return fp8_fnuz(((const unsigned char*)v)[e], 3, 8); }
inline double elt_bf8(const void* v, int e) { return fp8_fnuz(((const unsigned char*)v)[e], 2, 16); }
inline void put_f32(void* v, int e, double x) { ((float*)v)[e] = (float)x; }
inline void put_f64(void* v, int e, double x) { ((double*)v)[e] = x; }
inline void put_i32(void* v, int e, long long x) { ((int*)v)[e] = (int)(unsigned)(unsigned long long)x; }

// c[blk][i][j] += sum_k a[blk][i][k] * b[blk][k][j]; tiles column-major (row + rows*col + ...)
template <class Acc, int M, int N, int K, int B>
inline void mfma_blocks(const Acc* a, const Acc* b, Acc* c) {
  for (int blk = 0; blk < B; ++blk)
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < M; ++i) {
        Acc s = c[i + M * j + M * N * blk];
        for (int k = 0; k < K; ++k) s += a[i + M * k + M * K * blk] * b[k + K * j + K * N * blk];
        c[i + M * j + M * N * blk] = s;
      }
}

inline void check_mfma_modifiers(long long imm, const char* name) {
  if (imm != 0)
    report("%s with cbsz/abid/blgp = %lld/%lld/%lld: the emulator implements only 0/0/0 "
           "(no broadcast modifiers)", name, (imm >> 16) & 0xff, (imm >> 8) & 0xff, imm & 0xff);
}

// ------------------------------------------------------------------ cross-lane collectives
inline bool lane_ok(Thread* const* L, int j, const char* what, int i) {
  if (L[j]) return true;
  report("%s: lane %d reads lane %d, which is not active (returned or outside the block)", what,
         i, j);
  return false;
}

inline void swizzle_fn(Thread* const* L, long long pattern) {
  for (int i = 0; i < 64; ++i) {
    if (!L[i]) continue;
    int j;
    if (pattern & 0x8000) {  // quad-permute mode: offset[7:0] = 4 x 2-bit lane selects
      j = (i & ~3) | (int)((pattern >> (2 * (i & 3))) & 3);
    } else {  // bit mode: and / or / xor masks on the lane's 5-bit id within its 32-lane half
      int and_m = pattern & 0x1f, or_m = (pattern >> 5) & 0x1f, xor_m = (pattern >> 10) & 0x1f;
      j = (i & 0x20) | ((((i & 0x1f) & and_m) | or_m) ^ xor_m);
    }
    if (!lane_ok(L, j, "ds_swizzle", i)) return;
    *(int*)L[i]->out = *(const int*)L[j]->in[0];
  }
}
inline void bpermute_fn(Thread* const* L, long long) {
  for (int i = 0; i < 64; ++i) {
    if (!L[i]) continue;
    int j = (*(const int*)L[i]->in[0] >> 2) & 63;
    if (!lane_ok(L, j, "ds_bpermute", i)) return;
    *(int*)L[i]->out = *(const int*)L[j]->in[1];
  }
}
inline void readfirstlane_fn(Thread* const* L, long long) {
  int first = 0;
  while (!L[first]) ++first;
  for (int i = 0; i < 64; ++i)
    if (L[i]) *(int*)L[i]->out = *(const int*)L[first]->in[0];
}
inline void ballot_fn(Thread* const* L, long long) {
  unsigned long long m = 0;
  for (int i = 0; i < 64; ++i)
    if (L[i] && *(const bool*)L[i]->in[0]) m |= 1ull << i;
  for (int i = 0; i < 64; ++i)
    if (L[i]) *(unsigned long long*)L[i]->out = m;
}

inline int ds_swizzle(int v, int pattern, const char* file, int line, int site) {
  int out;
  wave_op(swizzle_fn, pattern, false, &v, nullptr, nullptr, &out, "ds_swizzle", file, line, site);
  return out;
}
inline int ds_bpermute(int addr, int v, const char* file, int line, int site) {
  int out;
  wave_op(bpermute_fn, 0, false, &addr, &v, nullptr, &out, "ds_bpermute", file, line, site);
  return out;
}
inline int readfirstlane(int v, const char* file, int line, int site) {
  int out;
  wave_op(readfirstlane_fn, 0, false, &v, nullptr, nullptr, &out, "readfirstlane", file, line, site);
  return out;
}
inline unsigned long long ballot(bool p, const char* file, int line, int site) {
  unsigned long long out;
  wave_op(ballot_fn, 0, false, &p, nullptr, nullptr, &out, "ballot", file, line, site);
  return out;
}
inline void wave_barrier(const char* file, int line, int site) {
  wave_op(nullptr, 0, false, nullptr, nullptr, nullptr, nullptr, "wave_barrier", file, line, site);
}
inline unsigned mbcnt(unsigned mask, unsigned base, int half) {
  int lane = (int)g_rt.cur->lane - 32 * half;
  if (lane <= 0) return base;
  unsigned below = lane >= 32 ? mask : mask & ((1u << lane) - 1u);
  return base + (unsigned)__builtin_popcount(below);
}

template <class T> inline T atomic_add(T* p, T v) {
  // one block runs at a time per process, but worker processes share global memory
  T old, sum;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    sum = (T)(old + v);
  } while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}

// ------------------------------------------------------------------ the scheduler
inline bool same_site(const Thread& a, const Thread& b) {
  return a.site == b.site && a.line == b.line && a.what == b.what && strcmp(a.file, b.file) == 0;
}

inline void describe_threads(char* buf, size_t cap) {
  Runtime& rt = g_rt;
  size_t n = 0;
  static const char* names[] = {"running", "waiting at", "waiting at", "returned"};
  for (unsigned i = 0; i < rt.nthreads && n + 1 < cap;) {
    Thread& a = rt.threads[i];
    unsigned j = i + 1;
    while (j < rt.nthreads) {
      Thread& b = rt.threads[j];
      if (b.state != a.state || (a.state != DONE && !same_site(a, b)))
        break;
      ++j;
    }
    if (a.state == DONE)
      n += (size_t)snprintf(buf + n, cap - n, "\n  threads %u-%u: returned", i, j - 1);
    else
      n += (size_t)snprintf(buf + n, cap - n, "\n  threads %u-%u: %s %s (%s:%d)", i, j - 1,
                            names[a.state], a.what, a.file, a.line);
    i = j;
  }
}

// Completes the wave collectives that every live lane has reached; false if none could be.
inline bool complete_waves() {
  Runtime& rt = g_rt;
  bool any = false;
  for (unsigned w = 0; w * 64 < rt.nthreads; ++w) {
    Thread* lanes[64] = {};
    unsigned live = 0, waiting = 0, first = ~0u;
    for (unsigned l = 0; l < 64 && w * 64 + l < rt.nthreads; ++l) {
      Thread& t = rt.threads[w * 64 + l];
      if (t.state == DONE) continue;
      ++live;
      if (t.state != AT_WAVE) continue;
      ++waiting;
      lanes[l] = &t;
      if (first == ~0u) first = l;
    }
    if (!live || waiting != live) continue;
    Thread& f = *lanes[first];
    for (unsigned l = 0; l < 64; ++l) {
      if (!lanes[l]) continue;
      Thread& t = *lanes[l];
      if (!same_site(t, f) || t.fn != f.fn) {
        char buf[2048];
        describe_threads(buf, sizeof buf);
        report("wave %u diverged: lane %u waits at %s (%s:%d), lane %u at %s (%s:%d); every "
               "lane of a wave must reach the same collective%s", w, first, f.what, f.file,
               f.line, l, t.what, t.file, t.line, buf);
        return false;
      }
      if (t.imm != f.imm) {
        report("wave %u: %s (%s:%d) has a non-uniform immediate operand (lane %u: %lld, lane %u: "
               "%lld)", w, f.what, f.file, f.line, first, f.imm, l, t.imm);
        return false;
      }
    }
    if (f.full_wave && live != 64) {
      report("wave %u: %s (%s:%d) needs all 64 lanes of the wave, but only %u are active "
             "(block size not a multiple of 64, or lanes returned early)", w, f.what, f.file,
             f.line, live);
      return false;
    }
    if (f.fn) f.fn(lanes, f.imm);
    rt.p->stats[3]++;
    if (rt.failed) return false;
    for (unsigned l = 0; l < 64; ++l)
      if (lanes[l]) lanes[l]->state = RUNNABLE;
    any = true;
  }
  return any;
}

// Releases the block barrier if every thread waits at it; reports divergence / deadlock.
inline bool release_barrier() {
  Runtime& rt = g_rt;
  unsigned done = 0, at_barrier = 0;
  Thread* first = nullptr;
  for (unsigned i = 0; i < rt.nthreads; ++i) {
    Thread& t = rt.threads[i];
    if (t.state == DONE) ++done;
    if (t.state == AT_BARRIER) {
      ++at_barrier;
      if (!first) first = &t;
    }
  }
  char buf[2048];
  describe_threads(buf, sizeof buf);
  if (at_barrier && at_barrier + done == rt.nthreads) {
    for (unsigned i = 0; i < rt.nthreads; ++i) {
      Thread& t = rt.threads[i];
      if (t.state == AT_BARRIER && !rt.staggered && !same_site(t, *first)) {
        report("divergent barriers: threads wait at different barriers (%s:%d and %s:%d); "
               "every thread of the block must reach the same __syncthreads%s", first->file,
               first->line, t.file, t.line, buf);
        return false;
      }
    }
    if (done) {
      report("__syncthreads at %s:%d is reached by %u threads, but %u threads of the block "
             "already returned; a barrier must be reached by every thread%s", first->file,
             first->line, at_barrier, done, buf);
      return false;
    }
    for (unsigned i = 0; i < rt.nthreads; ++i) rt.threads[i].state = RUNNABLE;
    rt.p->stats[2]++;
    return true;
  }
  report("deadlock: no thread can proceed%s", buf);
  return false;
}

inline void fiber_entry() {
  Runtime& rt = g_rt;
  rt.call(rt.args);
  rt.cur->state = DONE;
  swapcontext(&rt.cur->ctx, &rt.sched);
}

inline int run_block() {
  Runtime& rt = g_rt;
  const LaunchParams& p = *rt.p;
  unsigned bx = p.block[0], by = p.block[1];
  for (unsigned i = 0; i < rt.nthreads; ++i) {
    Thread& t = rt.threads[i];
    memset((void*)&t, 0, sizeof t);
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = rt.stacks + i * rt.stack_stride + 4096;  // guard page below
    t.ctx.uc_stack.ss_size = rt.stack_stride - 4096;
    t.ctx.uc_link = nullptr;
    makecontext(&t.ctx, fiber_entry, 0);
    t.tid = lagen_dim3{i % bx, (i / bx) % by, i / (bx * by)};
    t.flat = i;
    t.lane = i % 64;
    t.wave = i / 64;
    t.state = RUNNABLE;
    t.file = "";
    t.what = "";
  }
  rt.gen++;
  rt.staggered = false;
  memset(rt.lds, 0xFF, p.lds_limit);
  rt.lds_used = (p.dyn_lds + 15) / 16 * 16;
  for (;;) {
    for (unsigned i = 0; i < rt.nthreads; ++i) {
      Thread& t = rt.threads[i];
      if (t.state != RUNNABLE) continue;
      rt.cur = &t;
      swapcontext(&rt.sched, &t.ctx);
      rt.cur = nullptr;
      if (rt.failed) return 1;
    }
    if (complete_waves()) continue;
    if (rt.failed) return 1;
    bool all_done = true;
    for (unsigned i = 0; i < rt.nthreads; ++i) all_done &= rt.threads[i].state == DONE;
    if (all_done) return 0;
    if (!release_barrier()) return 1;
  }
}

inline void on_fault(int sig, siginfo_t* si, void* uctx) {
  Runtime& rt = g_rt;
  char* e = rt.p->err;
  size_t cap = rt.p->err_cap;
  unsigned long long a = (unsigned long long)si->si_addr;
  const char* kind = "";
  if (a >= (unsigned long long)rt.stacks &&
      a < (unsigned long long)rt.stacks + rt.stack_stride * rt.nthreads &&
      (a - (unsigned long long)rt.stacks) % rt.stack_stride < 4096)
    kind = " (thread stack overflow: raise stack_kib)";
  if (e && cap) {
    int n = snprintf(e, cap, "FAULT %s addr=0x%llx block (%u,%u,%u)", sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                     a, rt.bid.x, rt.bid.y, rt.bid.z);
    if (rt.cur && n > 0 && (size_t)n < cap)
      n += snprintf(e + n, cap - n, " thread (%u,%u,%u) [wave %u lane %u]", rt.cur->tid.x,
                    rt.cur->tid.y, rt.cur->tid.z, rt.cur->wave, rt.cur->lane);
    // the faulting instruction, as an offset into this library (runner.py finds the line)
    unsigned long long pc = 0;
#if defined(__x86_64__)
    pc = (unsigned long long)((ucontext_t*)uctx)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (unsigned long long)((ucontext_t*)uctx)->uc_mcontext.pc;
#endif
    Dl_info di;
    if (pc && dladdr((void*)pc, &di) && di.dli_fbase && n > 0 && (size_t)n < cap)
      n += snprintf(e + n, cap - n, " pcoff=0x%llx", pc - (unsigned long long)di.dli_fbase);
    for (unsigned r = 0; r < rt.nregions; ++r) {
      const LdsRegion& g = rt.regions[r];
      unsigned long long lo = (unsigned long long)g.map, hi = lo + g.map_bytes;
      unsigned long long d0 = (unsigned long long)g.data, d1 = d0 + g.bytes;
      if (a < lo || a >= hi || n <= 0 || (size_t)n >= cap) continue;
      if (a >= d1)
        n += snprintf(e + n, cap - n, " LDS array %s (%llu bytes, LAGEN_SHARED at %s:%d): "
                      "%llu bytes past its end", g.name, g.bytes, g.file, g.line, a - d1);
      else if (a < d0)
        n += snprintf(e + n, cap - n, " LDS array %s (%llu bytes, LAGEN_SHARED at %s:%d): "
                      "%llu bytes before its start", g.name, g.bytes, g.file, g.line, d0 - a);
    }
    if (n > 0 && (size_t)n < cap) snprintf(e + n, cap - n, "%s", kind);
  }
  _exit(86);
}

inline int launch(LaunchParams* p, void (*call)(void**), void** args) {
  Runtime& rt = g_rt;
  memset((void*)&rt, 0, sizeof rt);
  rt.p = p;
  static unsigned long long launches = 0;
  rt.launch_id = ++launches;  // LdsSite mappings belong to one launch
  rt.call = call;
  rt.args = args;
  if (p->err && p->err_cap) p->err[0] = 0;
  rt.nthreads = p->block[0] * p->block[1] * p->block[2];
  if (!rt.nthreads || rt.nthreads > 1024) {
    report("block of %u threads: must be 1..1024", rt.nthreads);
    return 1;
  }
  if (p->dyn_lds > p->lds_limit) {
    report("dynamic LDS of %llu bytes exceeds the %llu bytes of LDS a work-group can have",
           p->dyn_lds, p->lds_limit);
    return 1;
  }
  rt.stack_stride = (p->stack_bytes + 4095) / 4096 * 4096 + 4096;
  size_t stack_total = rt.stack_stride * rt.nthreads;
  rt.stacks = (unsigned char*)mmap(nullptr, stack_total, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  rt.threads = (Thread*)calloc(rt.nthreads, sizeof(Thread));
  rt.lds = (unsigned char*)malloc(p->lds_limit ? p->lds_limit : 1);
  if (rt.stacks == MAP_FAILED || !rt.threads || !rt.lds) {
    report("out of memory for %u fibers", rt.nthreads);
    return 1;
  }
  for (unsigned i = 0; i < rt.nthreads; ++i) mprotect(rt.stacks + i * rt.stack_stride, 4096, PROT_NONE);
  static char altstack[1 << 16];
  if (p->catch_signals) {
    stack_t ss = {};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa = {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
  }
  int rc = 0;
  unsigned long long nblocks = (unsigned long long)p->grid[0] * p->grid[1] * p->grid[2];
  for (unsigned long long b = p->block_begin; b < nblocks && rc == 0; b += p->block_step) {
    rt.bid = lagen_dim3{(unsigned)(b % p->grid[0]), (unsigned)((b / p->grid[0]) % p->grid[1]),
                        (unsigned)(b / ((unsigned long long)p->grid[0] * p->grid[1]))};
    rc = run_block();
    p->stats[0]++;
  }
  munmap(rt.stacks, stack_total);
  for (unsigned r = 0; r < rt.nregions; ++r) munmap(rt.regions[r].map, rt.regions[r].map_bytes);
  free(rt.threads);
  free(rt.lds);
  return rc;
}

// ------------------------------------------------------------------ calling a kernel
template <class... P, size_t... I>
inline void invoke_impl(void (*f)(P...), void** args, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}
template <class... P> inline void invoke(void (*f)(P...), void** args) {
  invoke_impl(f, args, std::index_sequence_for<P...>{});
}

// Type codes read by runner.py: f2 f4 f8 (float), i1..i8 / u1..u8 (integers), b1 (bool),
// v<n><code> (vector), x<bytes> (anything else); pointers: p<code>, pc<code> (pointer to const).
template <class T> inline void scalar_code(char* o) {
  if constexpr (std::is_same_v<T, bool>) snprintf(o, 8, "b1");
  else if constexpr (std::is_same_v<T, _Float16> || std::is_floating_point_v<T>) snprintf(o, 8, "f%zu", sizeof(T));
  else if constexpr (std::is_integral_v<T>) snprintf(o, 8, "%c%zu", std::is_signed_v<T> ? 'i' : 'u', sizeof(T));
  else if constexpr (std::is_enum_v<T>) scalar_code<std::underlying_type_t<T>>(o);
  else if constexpr (std::is_class_v<T> || std::is_union_v<T> || std::is_array_v<T> ||
                     std::is_void_v<T> || std::is_pointer_v<T>)
    snprintf(o, 24, "x%zu", sizeof(std::conditional_t<std::is_void_v<T>, char, T>));
  else {  // a vector type: element type from subscripting
    using E = std::remove_cv_t<std::remove_reference_t<decltype(std::declval<T&>()[0])>>;
    char e[8];
    scalar_code<E>(e);
    snprintf(o, 24, "v%zu%s", sizeof(T) / sizeof(E), e);
  }
}
template <class T> inline void type_code(char* o) {
  if constexpr (std::is_pointer_v<T>) {
    using U = std::remove_pointer_t<T>;
    *o++ = 'p';
    if (std::is_const_v<U>) *o++ = 'c';
    scalar_code<std::remove_cv_t<U>>(o);
  } else {
    scalar_code<std::remove_cv_t<T>>(o);
  }
}
template <class... P> inline const char* signature(void (*)(P...)) {
  static char buf[1024];
  size_t n = 0;
  buf[0] = 0;
  ((type_code<P>(buf + n), n += strlen(buf + n), buf[n++] = ',', buf[n] = 0), ...);
  if (n) buf[n - 1] = 0;
  return buf;
}

}  // namespace lagen_emu

// ------------------------------------------------------------------ the kernel-facing names
#define threadIdx (::lagen_emu::g_rt.cur->tid)
#define blockIdx (::lagen_emu::g_rt.bid)
#define blockDim (lagen_dim3{::lagen_emu::g_rt.p->block[0], ::lagen_emu::g_rt.p->block[1], ::lagen_emu::g_rt.p->block[2]})
#define gridDim (lagen_dim3{::lagen_emu::g_rt.p->grid[0], ::lagen_emu::g_rt.p->grid[1], ::lagen_emu::g_rt.p->grid[2]})
#define LAGEN_EMU_SITE __FILE__, __LINE__, __COUNTER__
#define __syncthreads() ::lagen_emu::barrier(LAGEN_EMU_SITE)
#define LAGEN_SHARED(type, name, count)                                                        \
  static ::lagen_emu::LdsSite name##_lagen_site;                                               \
  type(&name)[count] = *reinterpret_cast<type(*)[count]>(::lagen_emu::lds_alloc(               \
      &name##_lagen_site, sizeof(type) * (count), alignof(type), #name, __FILE__, __LINE__))
#define LAGEN_DYNAMIC_SHARED(type, name) type* name = (type*)::lagen_emu::lds_dynamic()

inline unsigned lagen_lane_id() { return ::lagen_emu::g_rt.cur->lane; }
inline unsigned lagen_wave_id() { return ::lagen_emu::g_rt.cur->wave; }
inline float lagen_atomic_add(float* p, float v) { return ::lagen_emu::atomic_add(p, v); }
// raw buffer loads: the base and num_records of the V#; a load that is not entirely inside
// [0, num_records) stops the kernel (the hardware would return zeros for the out-of-range
// dwords; no layoutalg kernel relies on that, the verifier proves its loads in range)
struct lagen_buffer { const unsigned char* base; unsigned long long bytes; };
inline lagen_buffer lagen_make_buffer(const void* base, unsigned bytes) {
  return lagen_buffer{(const unsigned char*)base, bytes};
}
template <typename V> inline V lagen_buffer_load_b128(lagen_buffer b, int voff, int soff) {
  static_assert(sizeof(V) == 16, "lagen_buffer_load_b128 loads 16-byte vectors");
  const long long eb = (long long)sizeof(V{}[0]);
  const long long at = (long long)voff * eb + (long long)soff * eb;
  if (voff < 0 || soff < 0 || at + 16 > (long long)b.bytes)
    ::lagen_emu::fail("buffer_load_dwordx4 out of range: voffset %lld + soffset %lld bytes, "
                      "num_records %llu", (long long)voff * eb, (long long)soff * eb, b.bytes);
  V v;
  __builtin_memcpy(&v, b.base + at, 16);
  return v;
}
// a predicated buffer load: zeros where p is off (the hardware's out-of-range result, which
// the device helper relies on); where on, in range or the kernel stops, as above
template <typename V> inline V lagen_buffer_load_if(lagen_buffer b, bool p, int voff, int soff) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16,
                "lagen_buffer_load_if loads 4-, 8- or 16-byte vectors");
  V v{};
  if (!p) return v;
  const long long eb = (long long)sizeof(V{}[0]);
  const long long at = (long long)voff * eb + (long long)soff * eb;
  if (voff < 0 || soff < 0 || at + (long long)sizeof(V) > (long long)b.bytes)
    ::lagen_emu::fail("predicated buffer load out of range: voffset %lld + soffset %lld bytes, "
                      "num_records %llu", (long long)voff * eb, (long long)soff * eb, b.bytes);
  __builtin_memcpy(&v, b.base + at, sizeof(V));
  return v;
}
inline int lagen_atomic_add(int* p, int v) { return ::lagen_emu::atomic_add(p, v); }
inline unsigned lagen_atomic_add(unsigned* p, unsigned v) { return ::lagen_emu::atomic_add(p, v); }

#define __builtin_amdgcn_workitem_id_x() (threadIdx.x)
#define __builtin_amdgcn_workitem_id_y() (threadIdx.y)
#define __builtin_amdgcn_workitem_id_z() (threadIdx.z)
#define __builtin_amdgcn_workgroup_id_x() (blockIdx.x)
#define __builtin_amdgcn_workgroup_id_y() (blockIdx.y)
#define __builtin_amdgcn_workgroup_id_z() (blockIdx.z)
#define __builtin_amdgcn_workgroup_size_x() (blockDim.x)
#define __builtin_amdgcn_workgroup_size_y() (blockDim.y)
#define __builtin_amdgcn_workgroup_size_z() (blockDim.z)
#define __builtin_amdgcn_grid_size_x() (gridDim.x * blockDim.x)
#define __builtin_amdgcn_grid_size_y() (gridDim.y * blockDim.y)
#define __builtin_amdgcn_grid_size_z() (gridDim.z * blockDim.z)
#define __builtin_amdgcn_s_barrier() ::lagen_emu::barrier(LAGEN_EMU_SITE)
#define __builtin_amdgcn_wave_barrier() ::lagen_emu::wave_barrier(LAGEN_EMU_SITE)
#define __builtin_amdgcn_fence(order, scope) __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __builtin_amdgcn_s_waitcnt(n) ((void)0)
#define __builtin_amdgcn_sched_barrier(n) ((void)0)
#define __builtin_amdgcn_sched_group_barrier(a, b, c) ((void)0)
#define __builtin_amdgcn_s_setprio(n) ((void)0)
#define __builtin_amdgcn_ds_swizzle(v, pattern) ::lagen_emu::ds_swizzle((v), (pattern), LAGEN_EMU_SITE)
#define __builtin_amdgcn_ds_bpermute(addr, v) ::lagen_emu::ds_bpermute((addr), (v), LAGEN_EMU_SITE)
#define __builtin_amdgcn_readfirstlane(v) ::lagen_emu::readfirstlane((v), LAGEN_EMU_SITE)
#define __builtin_amdgcn_ballot_w64(p) ::lagen_emu::ballot((p), LAGEN_EMU_SITE)
#define __builtin_amdgcn_mbcnt_lo(mask, base) ::lagen_emu::mbcnt((mask), (base), 0)
#define __builtin_amdgcn_mbcnt_hi(mask, base) ::lagen_emu::mbcnt((mask), (base), 1)

#if __has_include("lagen_mfma_emu.inc")
#include "lagen_mfma_emu.inc"
#endif

// Appended by runner.py after the kernel source, once per kernel.
#define LAGEN_EMU_EXPORT(name)                                                                 \
  static void name##_lagen_call(void** args) { ::lagen_emu::invoke(&name, args); }             \
  extern "C" __attribute__((visibility("default"))) int lagen_emu_launch__##name(              \
      ::lagen_emu::LaunchParams* p, void** args) {                                             \
    return ::lagen_emu::launch(p, name##_lagen_call, args);                                    \
  }                                                                                            \
  extern "C" __attribute__((visibility("default"))) const char* lagen_emu_signature__##name() { \
    return ::lagen_emu::signature(&name);                                                      \
  }
