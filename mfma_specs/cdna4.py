"""CDNA4 (gfx950, MI350X/MI355X) matrix instructions, from public LLVM and ISA facts.

Neither AMD's Matrix Instruction Calculator (1.3.2) nor clang 19 knows gfx950, so nothing here
is machine-checked against hardware data; each instruction records its ``source`` and
``status``:

* Instructions inherited from CDNA3 keep the CDNA3 layouts (verified on CDNA3); the CDNA4 ISA
  describes them unchanged.  gfx950 removed the xf32 forms (LLVM MC tests reject
  ``v_mfma_f32_*_xf32`` on gfx950) and its FP8/BF8 operands are OCP E4M3/E5M2 instead of
  AMD's FNUZ.  FP64 runs at half the CDNA3 rate (64 and 32 cycles): that matches MI355X's
  published 78.6 TFLOP/s FP64 matrix peak (256 CUs, 2.4 GHz) and the CDNA4 ISA table.
* New dense instructions (K-doubled f16/bf16/i8, ``f8f6f4`` and its block-scaled form) follow
  the CDNA rule of :mod:`mfma_specs.cdna` (lane ``i + M*g`` holds ``kpl`` consecutive ``k``
  starting at ``g*kpl``), which is how the CDNA4 ISA guide, LLVM/IREE
  (``mfmaLhs16xK(k)``: 16 rows x 4 lane groups, ``k/4`` contiguous elements) and Triton
  (kBase = K/4 resp. K/2) describe them: ``status="documented"``.
* New sparse instructions (``v_smfmac_*`` with doubled K) use the CDNA3 sparse rule with the
  per-lane K doubled; their builtin vector widths (LLVM ``builtins-amdgcn-error-gfx950.cl``)
  agree, but the layouts are ``status="inferred"``.

Cycle counts of new instructions are the CDNA4 ISA guide's; they agree with MI355X peak rates
(dense FP16 2.5 PFLOP/s -> 1024 FLOP/clk/SIMD, FP8 2x that, FP6/FP4 4x, INT8 as FP8).
``f8f6f4`` operands hold 32 elements per lane whose width is chosen by CBSZ (A) / BLGP (B):
FP8/BF8 use 8 VGPRs, FP6/BF6 6 and FP4 4; the layout (which element sits in which item) is
the same for every format, and cycles are 2x lower when neither operand is FP8/BF8.
"""

from __future__ import annotations

from typing import Dict, List

from .cdna import (CDNA3_ROWS, build_cdna, fp8_rows, mfma_a_layout, mfma_b_layout,
                   mfma_c_layout)
from .spec import MatrixInstruction, Param

__all__ = ["INSTRUCTIONS", "CDNA4_SOURCE"]

_OCP_F8, _OCP_B8 = "fp8e4m3fn", "fp8e5m2"
_FNUZ = {"fp8e4m3fnuz": _OCP_F8, "fp8e5m2fnuz": _OCP_B8}
_F64_CYCLES = {"v_mfma_f64_16x16x4_f64": 64, "v_mfma_f64_4x4x4_4b_f64": 32}

CDNA4_SOURCE = ("AMD CDNA4 ISA reference guide (instruction table, cycles); LLVM gfx950 "
                "builtins (clang/test/SemaOpenCL/builtins-amdgcn-error-gfx950.cl) and MC "
                "tests; IREE/Triton gfx950 MFMA layouts")
_INHERITED_SOURCE = ("CDNA3 instruction carried to gfx950: layout identical to CDNA3 (verified "
                     "there against the AMD calculator); gfx950 cycles from the CDNA4 ISA "
                     "guide")


def _inherited_rows() -> List[tuple]:
    rows = []
    for name, m, k, blocks, at, bt, cycles, builtin, ab in CDNA3_ROWS:
        if "xf32" in name:
            continue                         # removed on gfx950
        rows.append((name, m, k, blocks, _FNUZ.get(at, at), _FNUZ.get(bt, bt),
                     _F64_CYCLES.get(name, cycles), builtin, ab))
    return rows


_NEW_DENSE: List[tuple] = [
    ("v_mfma_f32_16x16x32_f16", 16, 32, 1, "f16", "f16", 16, "mfma_f32_16x16x32_f16", "h8 h8"),
    ("v_mfma_f32_32x32x16_f16", 32, 16, 1, "f16", "f16", 32, "mfma_f32_32x32x16_f16", "h8 h8"),
    ("v_mfma_f32_16x16x32_bf16", 16, 32, 1, "bf16", "bf16", 16, "mfma_f32_16x16x32_bf16",
     "y8 y8"),
    ("v_mfma_f32_32x32x16_bf16", 32, 16, 1, "bf16", "bf16", 32, "mfma_f32_32x32x16_bf16",
     "y8 y8"),
    ("v_mfma_i32_16x16x64_i8", 16, 64, 1, "i8", "i8", 16, "mfma_i32_16x16x64_i8", "i4 i4"),
    ("v_mfma_i32_32x32x32_i8", 32, 32, 1, "i8", "i8", 32, "mfma_i32_32x32x32_i8", "i4 i4"),
]

_NEW_SPARSE: List[tuple] = [
    ("v_smfmac_f32_16x16x64_f16", 16, 64, 1, "f16", "f16", 16, "smfmac_f32_16x16x64_f16",
     "h8 h16"),
    ("v_smfmac_f32_32x32x32_f16", 32, 32, 1, "f16", "f16", 32, "smfmac_f32_32x32x32_f16",
     "h8 h16"),
    ("v_smfmac_f32_16x16x64_bf16", 16, 64, 1, "bf16", "bf16", 16, "smfmac_f32_16x16x64_bf16",
     "y8 y16"),
    ("v_smfmac_f32_32x32x32_bf16", 32, 32, 1, "bf16", "bf16", 32, "smfmac_f32_32x32x32_bf16",
     "y8 y16"),
    ("v_smfmac_i32_16x16x128_i8", 16, 128, 1, "i8", "i8", 16, "smfmac_i32_16x16x128_i8",
     "i4 i8"),
    ("v_smfmac_i32_32x32x64_i8", 32, 64, 1, "i8", "i8", 32, "smfmac_i32_32x32x64_i8", "i4 i8"),
] + fp8_rows("smfmac", ((16, 128, 16), (32, 64, 32)), _OCP_F8, _OCP_B8, "i4 i8")


def _f8f6f4() -> Dict[str, MatrixInstruction]:
    """The format-selected FP8/FP6/FP4 MFMAs and their block-scaled (``v_mfma_scale``) forms."""
    out: Dict[str, MatrixInstruction] = {}
    for m, k, cycles in ((16, 128, 32), (32, 64, 64)):
        c_items = m * m // 64
        layouts = {"A": mfma_a_layout(m, k, 1), "B": mfma_b_layout(m, k, 1)}
        layouts["C"] = layouts["D"] = mfma_c_layout(m, m, 1, 4)
        scale_builtin = f"__builtin_amdgcn_mfma_scale_f32_{m}x{m}x{k}_f8f6f4"
        params = (Param("a", "int", 8), Param("b", "int", 8), Param("c", "float", c_items),
                  Param("cbsz", "int", 1, True), Param("blgp", "int", 1, True),
                  Param("opsel_a", "int", 1, True), Param("scale_a", "int"),
                  Param("opsel_b", "int", 1, True), Param("scale_b", "int"))
        fmt_note = ("A/B format by CBSZ/BLGP: 0 FP8 E4M3, 1 BF8 E5M2, 2 FP6 E2M3, 3 BF6 E3M2, "
                    "4 FP4 E2M1; 32 elements per lane in 8/8/6/6/4 VGPRs; "
                    f"{cycles} cycles with an FP8/BF8 operand, {cycles // 2} otherwise.")
        common = dict(family="CDNA4", kind="mfma", m=m, n=m, k=k, blocks=1, a_type="f8f6f4",
                      b_type="f8f6f4", acc_type="f32", cycles=cycles, wave_size=64,
                      layouts=layouts, builtin_return=Param("d", "float", c_items),
                      source=CDNA4_SOURCE, status="documented")
        name = f"v_mfma_f32_{m}x{m}x{k}_f8f6f4"
        out[name] = MatrixInstruction(
            name=name, builtin=None, builtin_params=(),
            notes=fmt_note + " No dedicated clang builtin: LLVM reaches this encoding through "
                             f"llvm.amdgcn.mfma.scale.f32.{m}x{m}x{k}.f8f6f4; use inline asm "
                             "to force it.", **common)
        sname = f"v_mfma_scale_f32_{m}x{m}x{k}_f8f6f4"
        out[sname] = MatrixInstruction(
            name=sname, builtin=scale_builtin, builtin_params=params,
            notes=fmt_note + " Each lane passes one E8M0 scale per 32 K elements for A and B "
                             "(scale_a/scale_b, byte chosen by opsel).", **common)
    return out


def _build() -> Dict[str, MatrixInstruction]:
    out = build_cdna("CDNA4", _inherited_rows(), source=_INHERITED_SOURCE, status="documented")
    out.update(build_cdna("CDNA4", _NEW_DENSE, source=CDNA4_SOURCE, status="documented"))
    out.update(_f8f6f4())
    out.update(build_cdna(
        "CDNA4", _NEW_SPARSE, status="inferred",
        source=CDNA4_SOURCE + "; layout INFERRED: CDNA3 SMFMAC rule with doubled K per lane "
                              "(consistent with the builtin vector widths, not checked)"))
    return out


INSTRUCTIONS: Dict[str, Dict[str, MatrixInstruction]] = {"CDNA4": _build()}
