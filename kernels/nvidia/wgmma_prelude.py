"""The inline-PTX helpers of the wgmma kernels (moved verbatim from :mod:`kernels.nvidia.wgmma`
so that the CUDA printer, :mod:`kernels.printer.cuda`, can print them for IR-built kernels
without importing a builder): ``wgmma`` fence / commit / wait, the register pins, the
generic-to-async proxy fence, the descriptor helper of the IR-built kernels, and the
``wgmma.mma_async`` wrapper of one shape."""

from typing import Any, List, Tuple

from mfma_specs.nvidia_wgmma import wgmma

__all__ = ["HELPERS", "wgmma_wrapper", "GMMA_DESC", "GMMA_DESC_U32", "GMMA_DESC_U32_PIN",
           "desc_helpers", "PIN_WORDS", "wgmma_fn", "wgmma_key"]


def wgmma_wrapper(fn: str, dtype: str, n: int, trans_b: int, a_regs: bool = False,
                  write_only: bool = False) -> str:
    """The inline-PTX wrapper ``fn`` of one ``wgmma.mma_async.m64n{n}k16`` accumulating into
    ``d`` (``n/2`` floats): ``fn(d, da, db)`` with A from shared memory (descriptor ``da``), or
    ``fn(d, a, db)`` with A from 4 registers (``a_regs``); ``scale_d`` 0 overwrites ``d``.
    ``write_only``: ``d`` is an output-only (``"=f"``) operand, for the scale-d 0 issue only
    (``scale_d`` has no default: the call passes its 0): the compiler may then keep other
    values in ``d``'s registers up to the issue (with ``"+f"`` the dead old values of ``d`` stay
    live until it)."""
    m = n // 2
    regs = ", ".join(f"%{i}" for i in range(m))
    outs = ", ".join(f'"{"=" if write_only else "+"}f"(d[{i}])' for i in range(m))
    name = wgmma(dtype, n).name
    if a_regs:
        a_ops, a_in, trans = (f"{{%{m}, %{m + 1}, %{m + 2}, %{m + 3}}}",
                              '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), ', f"{trans_b}")
        nb, sd, sig = m + 4, m + 5, "const lg_u32* a"
    else:
        a_ops, a_in, trans = f"%{m}", '"l"(da), ', f"0, {trans_b}"
        nb, sd, sig = m + 1, m + 2, "lg_u64 da"
    return (
        f"LG_DEV void {fn}(float* d, {sig}, lg_u64 db, int scale_d{'' if write_only else ' = 1'})"
        " {\n"
        f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n"\n'
        f'    "{name} {{{regs}}}, {a_ops}, %{nb}, p, 1, 1, {trans};\\n}}\\n"\n'
        f'    : {outs}\n'
        f'    : {a_in}"l"(db), "r"(scale_d));\n}}\n')


HELPERS = r"""
LG_DEV void lg_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
LG_DEV void lg_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> LG_DEV void lg_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// The compiler sees a wgmma's registers written at issue time, not at wait_group: without a
// use pinned after the wait it may move reads of the accumulators (or reuse the registers of
// a register-A operand) to before the wait.  An empty asm that "modifies" each register, placed
// after the wait, pins them (what CUTLASS's warpgroup_fence_operand does).
template <int N> LG_DEV void lg_pin(float (&r)[N]) {
  _Pragma("unroll") for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N, int M> LG_DEV void lg_pin(lg_u32 (&r)[N][M]) {
  _Pragma("unroll") for (int i = 0; i < N; ++i)
  _Pragma("unroll") for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j]) :: "memory");
}
// cp.async writes through the generic proxy; wgmma reads through the async proxy
LG_DEV void lg_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
"""


# IR-built kernels (kernels.printer.cuda): the descriptor of a shared operand, from its printed
# constant fields and the address of its first element
GMMA_DESC = r"""
// the descriptor of 16-bit element `start` (>= 0, a multiple of 8) of the 1024-byte aligned
// shared array `base`: the 14-bit address field counts 16-byte units and shared addresses are
// below 2^18, so the start's units add to the base's in 32 bits without a carry out of the
// field, whose bits are 0 in `bits` (the base part is loop-invariant)
LG_DEV lg_u64 lg_gmma_desc(lg_u64 bits, const void* base, int start) {
  return bits | (lg_u64)(((lg_smem_u32(base) & 0x3FFFF) >> 4) + ((lg_u32)start >> 3));
}
"""

# IR-built TMA kernels (kernels.printer.cuda_tma): the same descriptor from the array's 32-bit
# shared address, which those kernels compute once (a generic pointer's conversion inside the
# k loop cost the IR TMA GEMM ~40 SASS instructions per k tile and ~5-8 % of its speed)
GMMA_DESC_U32 = r"""
// as lg_gmma_desc, `base` the 32-bit shared address of the 1024-byte aligned array
LG_DEV lg_u64 lg_gmma_desc_u32(lg_u64 bits, lg_u32 base, int start) {
  return bits | (lg_u64)(((base & 0x3FFFF) >> 4) + ((lg_u32)start >> 3));
}
"""

# The same descriptor with `base` passed through an empty asm (the value unchanged): the
# compiler cannot hoist the descriptor out of a loop, so it is recomputed at each issue (two
# ALU instructions) instead of held.  The WS IR prefill's 192-key tile prints Q's this way
# (kernels.nvidia.wgmma_ws_ir): its eight hoisted 64-bit Q descriptors spilled 72 bytes
# in the ping-pong form, loaded in every key block.
GMMA_DESC_U32_PIN = r"""
// lg_gmma_desc_u32 recomputed at each use (`base` pinned: never hoisted out of a loop)
LG_DEV lg_u64 lg_gmma_desc_u32_pin(lg_u64 bits, lg_u32 base, int start) {
  asm volatile("" : "+r"(base));
  return bits | (lg_u64)(((base & 0x3FFFF) >> 4) + ((lg_u32)start >> 3));
}
"""


def desc_helpers(source: str) -> List[Tuple[str, str]]:
    """The descriptor helpers a printed ``source`` calls, each (its exact text, a name for a
    message): ``lg_gmma_desc_u32`` or ``lg_gmma_desc``, and ``lg_gmma_desc_u32_pin`` where
    called."""
    pin = "lg_gmma_desc_u32_pin(0x" in source     # printed beside lg_gmma_desc_u32 only
    out = [(GMMA_DESC_U32, "lg_gmma_desc_u32") if pin or "lg_gmma_desc_u32(0x" in source
           else (GMMA_DESC, "lg_gmma_desc")]
    return out + ([(GMMA_DESC_U32_PIN, "lg_gmma_desc_u32_pin")] if pin else [])


# IR-built kernels with a register-A wgmma: the printer declares a 16-bit frag as a flat
# ``lg_u32`` array, which HELPERS' pins (float arrays, 2-D lg_u32 arrays) do not take.  Printed
# only by those kernels, so every other source is unchanged.
PIN_WORDS = r"""
template <int N> LG_DEV void lg_pin(lg_u32 (&r)[N]) {
  _Pragma("unroll") for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}
"""


def wgmma_fn(dtype: str, n: int, trans_b: int, a_regs: bool = False,
             write_only: bool = False) -> str:
    """The wrapper name the CUDA printer gives ``m64n{n}k16`` of ``dtype`` (``tnspB``
    ``trans_b``), A from shared memory, or from registers (``a_regs``: ``_rs``); the
    output-only accumulator of :func:`wgmma_wrapper` (``write_only``): ``_wo``."""
    return (f"lg_wgmma_m64n{n}_{dtype}{'_rs' if a_regs else ''}_t{trans_b}"
            + ("_wo" if write_only else ""))


def wgmma_key(m: Any) -> Tuple[str, int, int, bool, bool]:
    """The wrapper a ``WgmmaMma`` statement ``m`` calls, as the arguments of :func:`wgmma_fn`
    and :func:`wgmma_wrapper` (dtype, n, tnspB, A from registers, write-only accumulator)."""
    return (m.atom.dtype, m.atom.n, m.trans_b, m.a_in_regs, m.write_only)
