"""RDNA3 (gfx11) and RDNA4 (gfx12) WMMA instructions with their lane layouts.

All are 16x16xK, one block, with the tile convention of :mod:`mfma_specs.spec`.

RDNA3 (AMD Matrix Instruction Calculator 1.02 formulas for gfx11; GPUOpen "WMMA on RDNA 3"):
each lane holds a *whole* row of A (``A[l%16][k]``, item ``e`` = ``k``) and a whole column of
B; lanes 16-31 hold copies of lanes 0-15 (and lanes 32-63 again in wave64) - stride-0 lane
modes.  C/D: ``C[(W/16)*v + l//16][l%16]`` for register ``v`` and wave size ``W``.  16-bit
results (``v_wmma_f16``/``bf16``) occupy one half of each 32-bit register (OPSEL=0: bits
15:0, i.e. element ``2v`` of the builtin's 16-wide vector); item ``v`` is register ``v``.

RDNA4 (wave32): A and B are no longer replicated; the two half-waves split K in chunks of 4
elements: lane ``l`` item ``e`` holds ``k = e%4 + 4*(l//16) + 8*(e//4)`` (IREE's gfx12 WMMA
note: "the value used for A[0, 4] comes out of lane 16's first register"), for 16-bit and
8-bit operands alike.  C/D: ``C[8*(l//16) + v][l%16]``, 16-bit results packed two per
register.  RDNA4 wave64 and the iu4 forms are not modelled (no public lane map we could
confirm); asking for them raises :class:`NotModelledError`.

Cycles: RDNA3 from the calculator (32; iu4 16).  RDNA4 from AMD's published per-CU rates
(1024 FP16/BF16 and 2048 FP8/INT8 FLOP/clk per CU of 2 SIMD32s): 16 and 8 cycles.
"""

from __future__ import annotations

from typing import Dict, Tuple

from .cdna import make_layout_from_modes
from .spec import MatrixInstruction, Param

__all__ = ["INSTRUCTIONS", "rdna3_layouts", "rdna4_layouts"]

RDNA3_SOURCE = ("AMD Matrix Instruction Calculator 1.02 (gfx11 register formulas, cycles); "
                "GPUOpen 'How to accelerate AI applications on RDNA 3 using WMMA'; builtin "
                "names and mnemonics compiled with clang 19 in tests")
RDNA4_SOURCE = ("RDNA4 ISA guide as implemented by IREE (gfx12 WMMA layouts and the K "
                "interleave note); AMD RDNA4 per-CU matrix rates (cycles); builtins compiled "
                "with clang 19 in tests")


def rdna3_layouts(wave: int) -> Dict[str, object]:
    reps = wave // 16
    return {
        "A": make_layout_from_modes([(16, 1), (reps, 0)], [(16, 16)]),
        "B": make_layout_from_modes([(16, 16), (reps, 0)], [(16, 1)]),
        "C": make_layout_from_modes([(16, 16), (reps, 1)], [(16 // reps, reps)]),
    }


def rdna4_layouts() -> Dict[str, object]:
    return {
        "A": make_layout_from_modes([(16, 1), (2, 4 * 16)], [(4, 16), (2, 8 * 16)]),
        "B": make_layout_from_modes([(16, 16), (2, 4)], [(4, 1), (2, 8)]),
        "C": make_layout_from_modes([(16, 16), (2, 8)], [(8, 1)]),
    }


def _p(name: str, ctype: str, width: int = 1, imm: bool = False) -> Param:
    return Param(name, ctype, width, imm)


def _build(family: str, wave: int) -> Dict[str, MatrixInstruction]:
    rdna3 = family == "RDNA3"
    lay = rdna3_layouts(wave) if rdna3 else rdna4_layouts()
    acc_items = 256 // wave
    # (mnemonic, a, b, acc, d, cycles, builtin stem, A vec, B vec, sign/opsel/clamp form)
    ab16 = 16 if rdna3 else 8          # 16-bit elements per lane in A/B
    ab8 = (4, 16) if rdna3 else (2, 8)  # (ints, bytes) per lane for 8-bit operands
    rows = [
        ("v_wmma_f32_16x16x16_f16", "f16", "f16", "f32", "f32", 32 if rdna3 else 16,
         "wmma_f32_16x16x16_f16", ("__fp16", ab16), "float"),
        ("v_wmma_f32_16x16x16_bf16", "bf16", "bf16", "f32", "f32", 32 if rdna3 else 16,
         "wmma_f32_16x16x16_bf16", ("short", ab16), "float"),
        ("v_wmma_f16_16x16x16_f16", "f16", "f16", "f16", "f16", 32 if rdna3 else 16,
         "wmma_f16_16x16x16_f16", ("__fp16", ab16), "__fp16"),
        ("v_wmma_bf16_16x16x16_bf16", "bf16", "bf16", "bf16", "bf16", 32 if rdna3 else 16,
         "wmma_bf16_16x16x16_bf16", ("short", ab16), "short"),
        ("v_wmma_i32_16x16x16_iu8", "iu8", "iu8", "i32", "i32", 32 if rdna3 else 8,
         "wmma_i32_16x16x16_iu8", ("int", ab8[0]), "int"),
    ]
    if rdna3:
        rows.append(("v_wmma_i32_16x16x16_iu4", "iu4", "iu4", "i32", "i32", 16,
                     "wmma_i32_16x16x16_iu4", ("int", 2), "int"))
    else:
        for an, at in (("fp8", "fp8e4m3fn"), ("bf8", "fp8e5m2")):
            for bn, bt in (("fp8", "fp8e4m3fn"), ("bf8", "fp8e5m2")):
                rows.append((f"v_wmma_f32_16x16x16_{an}_{bn}", at, bt, "f32", "f32", 8,
                             f"wmma_f32_16x16x16_{an}_{bn}", ("int", 2), "float"))
    suffix = f"_w{wave}" + ("" if rdna3 else "_gfx12")
    out: Dict[str, MatrixInstruction] = {}
    for name, at, bt, acc, dt, cycles, stem, (actype, aw), cctype in rows:
        half_out = dt in ("f16", "bf16")
        # RDNA3 16-bit results live in half of each register: the builtin vector is 2x wide
        c_width = acc_items * (2 if (half_out and rdna3) else 1)
        if half_out and not rdna3:
            c_width = acc_items                     # gfx12: packed, 8 values in 4 VGPRs
        a, b = Param("a", actype, aw), Param("b", actype, aw)
        c = Param("c", cctype, c_width)
        if at.startswith("iu"):
            params: Tuple[Param, ...] = (_p("sgn_a", "bool", 1, True), a,
                                         _p("sgn_b", "bool", 1, True), b, c,
                                         _p("clamp", "bool", 1, True))
        elif half_out and rdna3:
            params = (a, b, c, _p("opsel", "bool", 1, True))
        else:
            params = (a, b, c)
        layouts = dict(lay)
        layouts["D"] = layouts["C"]
        out[name] = MatrixInstruction(
            name=name, family=family, kind="wmma", m=16, n=16, k=16, blocks=1, a_type=at,
            b_type=bt, acc_type=acc, d_type=dt, cycles=cycles, wave_size=wave,
            layouts=layouts, builtin=f"__builtin_amdgcn_{stem}{suffix}", builtin_params=params,
            builtin_return=Param("d", cctype, c_width),
            source=RDNA3_SOURCE if rdna3 else RDNA4_SOURCE, status="documented",
            acc_halfword=half_out and rdna3,
            notes=("16-bit results: item v is bits 15:0 of VGPR v (OPSEL=0), element 2v of "
                   "the builtin vector; OPSEL=1 uses bits 31:16."
                   if half_out and rdna3 else ""))
    return out


# (family, wave size) -> instructions
INSTRUCTIONS: Dict[Tuple[str, int], Dict[str, MatrixInstruction]] = {
    ("RDNA3", 32): _build("RDNA3", 32),
    ("RDNA3", 64): _build("RDNA3", 64),
    ("RDNA4", 32): _build("RDNA4", 32),
}
