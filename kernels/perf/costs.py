"""The per-instruction cost table of the gfx942 (MI300X) compute-unit model.

Every number is either a public fact (with its source) or a model constant that was fitted on
published anchors (``docs/PERFORMANCE.md``, "Calibration"); the latter say so.  Nothing here was
measured on an MI300X.

Classes (what an instruction occupies when it issues):

* ``mfma``: the SIMD's matrix pipe for ``cycles`` clocks (``mfma_specs``: AMD's calculator,
  e.g. ``v_mfma_f32_32x32x8_f16`` 8 passes = 32 cycles) and one VALU issue slot;
* ``valu``: the SIMD's vector ALU: 4 clocks for a wave64 on 16 lanes, 16 for transcendentals
  (quarter rate on CDNA3: CDNA3 ISA guide, "VALU" throughput);
* ``salu`` / ``branch`` / ``smem`` / ``internal`` (s_nop, s_waitcnt, s_barrier, s_setprio):
  one issue slot of the wave;
* ``lds``: the CU's LDS pipe, 128 B/clk (32 banks x 4 B, CDNA3 white paper), bytes =
  64 lanes x access width; bank conflicts are not modelled (the project's verifier proves our
  kernels conflict-free; other kernels may be slower);
* ``vmem``: the CU's share of the memory system, ``vmem_bytes_per_clk`` (fitted), plus the load
  latency ``vmem_latency`` (fitted).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Dict

from ..errors import KernelError

__all__ = ["MachineModel", "GFX942", "InsnCost", "classify", "mfma_cost"]


@dataclass(frozen=True)
class MachineModel:
    """Constants of one compute unit and the whole chip."""

    arch: str = "gfx942"
    cus: int = 304                     # MI300X: 8 XCDs x 38 CUs (AMD CDNA3 white paper)
    simds_per_cu: int = 4
    issue_period: int = 4              # a SIMD's arbiter picks instructions every 4 clocks (GCN/CDNA)
    valu_cycles: int = 4               # wave64 on 16 lanes
    trans_cycles: int = 16             # transcendental: quarter rate
    lds_bytes_per_clk: int = 128       # 32 banks x 4 B
    lds_latency: int = 64              # model constant (fitted), clocks from issue to data
    smem_latency: int = 200            # model constant, scalar loads (kernel args, descriptors)
    vmem_latency: int = 700            # model constant (fitted), global/buffer load to data
    vmem_bytes_per_clk: float = 64.0   # model constant (fitted): one CU's L2/MALL share
    peak_clock_mhz: int = 2100         # MI300X peak engine clock (AMD spec sheet)
    # model constant, fitted 2026-11-23 (benchmarks/perf_calibration.py) on three published
    # anchors, one per kernel family (hipBLASLt's bf16 GEMM, AITER's and Triton's causal FA at
    # S=8K): the effective clock that turns the modelled fraction of MFMA peak into TFLOP/s.
    # AMD's blog measured a 1207 MHz median clock under hipBLASLt's GEMM load.
    clock_mhz: int = 1172
    error_bar: float = 0.25            # relative: the largest error on the check points

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


GFX942 = MachineModel()


@dataclass(frozen=True)
class InsnCost:
    """What one instruction of a wave occupies when it issues."""

    cls: str                 # mfma valu salu branch smem lds vmem internal
    cycles: int = 0          # VALU busy clocks (valu), matrix-pipe clocks (mfma)
    bytes: int = 0           # LDS / VMEM bytes moved for the whole wave
    flops: int = 0           # MFMA flops of the whole wave
    store: bool = False      # VMEM/LDS write (no data comes back)


_TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")
_WIDTH = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "d16": 2, "b32": 4,
          "b64": 8, "b96": 12, "b128": 16, "2addr_b32": 8, "2addr_b64": 16,
          "2addr_stride64_b32": 8, "2addr_stride64_b64": 16}
_DW = re.compile(r"(dword|short|byte)(?:x(\d))?")


def _ds_bytes(mn: str) -> int:
    # ds_read2[st64]_bNN / ds_write2[st64]_bNN (the disassembler's names for the 2addr forms)
    # move two elements of bNN per lane
    pair = 2 if re.match(r"ds_(read|write|store|load)2", mn) else 1
    for suffix in sorted(_WIDTH, key=len, reverse=True):
        if mn.endswith(suffix) or ("_" + suffix + "_") in mn:
            return 64 * _WIDTH[suffix] * pair
    return 64 * 4        # ds_bpermute, ds_swizzle, atomics: one dword per lane


def _vmem_bytes(mn: str) -> int:
    m = _DW.search(mn)
    if not m:
        return 64 * 4
    unit = {"dword": 4, "short": 2, "byte": 1}[m.group(1)]
    return 64 * unit * int(m.group(2) or 1)


def mfma_cost(arch: str, mnemonic: str) -> InsnCost:
    """The matrix-pipe cycles and flops of one MFMA, from :mod:`mfma_specs`."""
    import mfma_specs
    try:
        spec = mfma_specs.lookup(arch, mnemonic)
    except mfma_specs.MfmaSpecError as e:
        raise KernelError(f"the performance model has no timing for {mnemonic!r} on {arch}: "
                          f"{e}") from None
    if not spec.cycles:
        raise KernelError(f"mfma_specs gives no cycle count for {mnemonic} on {arch}")
    k = spec.k * (2 if spec.kind == "smfmac" else 1)
    return InsnCost("mfma", cycles=int(spec.cycles),
                    flops=2 * spec.m * spec.n * k * spec.blocks)


def classify(arch: str, mnemonic: str, model: MachineModel = GFX942) -> InsnCost:
    """The :class:`InsnCost` of one instruction mnemonic (as ``llvm-objdump`` prints it)."""
    mn = mnemonic
    if mn.startswith(("v_mfma_", "v_smfmac_")):
        return mfma_cost(arch, mn)
    if mn.startswith("ds_"):
        store = mn.startswith(("ds_write", "ds_store"))
        return InsnCost("lds", bytes=_ds_bytes(mn), store=store)
    if mn.startswith(("global_", "buffer_", "flat_", "scratch_")):
        store = "_store" in mn or "atomic" in mn
        return InsnCost("vmem", bytes=_vmem_bytes(mn), store=store)
    if mn.startswith(("s_load", "s_buffer_load", "s_store", "s_dcache", "s_memtime",
                      "s_memrealtime")):
        return InsnCost("smem")
    if mn.startswith(("s_cbranch", "s_branch", "s_setpc", "s_swappc", "s_getpc")):
        return InsnCost("branch")
    if mn in ("s_nop", "s_waitcnt", "s_barrier", "s_setprio", "s_sleep", "s_endpgm",
              "s_sethalt", "s_trap", "s_icache_inv", "s_waitcnt_depctr") \
            or mn.startswith(("s_waitcnt", "s_sched")):
        return InsnCost("internal")
    if mn.startswith("s_"):
        return InsnCost("salu")
    if mn.startswith("v_"):
        return InsnCost("valu", cycles=model.trans_cycles if _TRANS.match(mn)
                        else model.valu_cycles)
    return InsnCost("salu")   # exp / export and anything unknown: one issue slot
