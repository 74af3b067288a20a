"""CDNA1-3 MFMA/SMFMAC instructions and their operand layouts in closed form.

Every CDNA matrix instruction (wave64, ``M == N``) distributes its operands by one rule,
parametrised by ``M, N, K, blocks`` and the accumulator's row group ``S``.  With ``G = 64 / M``
lane groups and ``kpl = M*K*blocks/64`` elements of A per lane (``KG = K / kpl`` K-groups)::

    A[i][k].b   lane = i + M*(b + blocks*kg),  item = e,   k = kg*kpl + e
    B[k][j].b   lane = j + N*(b + blocks*kg),  item = e,   k = kg*kpl + e
    C[i][j].b   the N columns are lanes ``j = lane % N``; the M rows are split into groups of S
                consecutive rows held in consecutive items (S = 4 for 32-bit accumulators, 1
                for f64); as many row groups as fit go to the remaining lane bits, the rest
                to items; what is left of the lanes (just above j) and of the items indexes
                the block.

As CuTe layouts (lane modes, item modes) of the column-major tile index:

    A  ((M, blocks, KG), kpl)        : ((1, M*K, M*kpl), M)
    B  ((N, blocks, KG), kpl)        : ((K, K*N, kpl), 1)
    C  ((N, LB, RGl), (S, RGi, BI))  : ((M, M*N, S), (1, S*RGl, M*N*LB))

with ``RG = M/S`` row groups, ``RGl = min(G, RG)`` of them on lanes, ``LB = G/RGl`` lane
blocks, ``RGi = RG/RGl`` row groups on items and ``BI = blocks/LB`` item blocks.  Size-1
modes are dropped.  Sparse SMFMAC A (4:2) uses the A rule for its 4*slots candidate
positions, with items split as ``(4 candidates, slots)``.

The instruction tables below state what each instruction *is* (shape, types, cycles, clang
builtin); the lane layouts come only from the functions above.  The test suite compares them
with AMD's Matrix Instruction Calculator at every entry and compiles every CDNA3 builtin.

Every operand of every instruction modelled here (CDNA1-4 and RDNA3/4 WMMA) is a single CuTe
``Layout``: all maps are bit permutations of (lane, item) (plus stride-0 replication on RDNA3),
so no ``ComposedLayout`` or swizzle is needed.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from layoutalg import Layout

from .spec import MatrixInstruction, Param

__all__ = ["mfma_a_layout", "mfma_b_layout", "mfma_c_layout", "smfmac_a_layout",
           "make_layout_from_modes", "build_cdna", "INSTRUCTIONS", "CALCULATOR_SOURCE",
           "param_types"]

WAVE = 64
CALCULATOR_SOURCE = ("AMD Matrix Instruction Calculator 1.3.2 (layouts, cycles), LLVM/clang 19 "
                     "(builtins); verified in tests/test_mfma_specs.py")


def make_layout_from_modes(lanes: Sequence[Tuple[int, int]],
                           items: Sequence[Tuple[int, int]]) -> Layout:
    """``Layout((lane_shape, item_shape), (lane_stride, item_stride))`` from (size, stride)
    modes, dropping size-1 modes and unwrapping single modes (``(16,)`` -> ``16``)."""
    def side(modes):
        modes = [(s, d) for s, d in modes if s != 1] or [(1, 0)]
        if len(modes) == 1:
            return modes[0]
        return tuple(s for s, _ in modes), tuple(d for _, d in modes)
    (ls, ld), (is_, id_) = side(lanes), side(items)
    return Layout((ls, is_), (ld, id_))


def _groups(m: int, k: int, blocks: int, wave: int = WAVE) -> Tuple[int, int]:
    kpl = m * k * blocks // wave
    if kpl * wave != m * k * blocks or k % kpl:
        raise ValueError(f"no CDNA layout for M={m} K={k} blocks={blocks}")
    return kpl, k // kpl


def mfma_a_layout(m: int, k: int, blocks: int) -> Layout:
    """A (M x K per block): lane = i + M*(b + blocks*kg), item e -> k = kg*kpl + e."""
    kpl, kg = _groups(m, k, blocks)
    return make_layout_from_modes([(m, 1), (blocks, m * k), (kg, m * kpl)], [(kpl, m)])


def mfma_b_layout(n: int, k: int, blocks: int) -> Layout:
    """B (K x N per block): lane = j + N*(b + blocks*kg), item e -> k = kg*kpl + e."""
    kpl, kg = _groups(n, k, blocks)
    return make_layout_from_modes([(n, k), (blocks, k * n), (kg, kpl)], [(kpl, 1)])


def mfma_c_layout(m: int, n: int, blocks: int, rows_per_group: int) -> Layout:
    """C/D (M x N per block); ``rows_per_group`` S = 4 (32-bit acc) or 1 (f64 acc)."""
    s = rows_per_group
    g = WAVE // n
    rg = m // s
    rg_l = min(g, rg)
    lb = g // rg_l
    rg_i = rg // rg_l
    bi = blocks // lb
    if s * rg != m or lb * rg_l != g or bi * lb != blocks:
        raise ValueError(f"no CDNA accumulator layout for M={m} N={n} blocks={blocks} S={s}")
    return make_layout_from_modes([(n, m), (lb, m * n), (rg_l, s)],
                                  [(s, 1), (rg_i, s * rg_l), (bi, m * n * lb)])


def smfmac_a_layout(m: int, k: int) -> Layout:
    """Sparse A: candidates ``(c, slot)`` of lane l -> A[l%M][kg*kpl + 4*slot + c]."""
    kpl, kg = _groups(m, k, 1)
    return make_layout_from_modes([(m, 1), (kg, m * kpl)], [(4, m), (kpl // 4, 4 * m)])


# ----------------------------------------------------------------------------- builtins
_CTYPES = {"f": "float", "h": "__fp16", "s": "short", "i": "int", "l": "long", "d": "double",
           "y": "__bf16"}


def param_types(code: str) -> Tuple[str, int]:
    """``"h4"`` -> ``("__fp16", 4)``; ``"l"`` -> ``("long", 1)``."""
    return _CTYPES[code[0]], int(code[1:] or 1)


def _acc_ctype(acc: str) -> str:
    return {"f32": "float", "i32": "int", "f64": "double"}[acc]


def _mfma_params(a: str, b: str, sparse: bool) -> Tuple[Param, ...]:
    pa, pb = Param("a", *param_types(a)), Param("b", *param_types(b))
    if sparse:   # (A, B, C, idx, cbsz, abid): idx is a run-time VGPR
        tail = (Param("idx", "int"), Param("cbsz", "int", 1, True), Param("abid", "int", 1, True))
    else:
        tail = (Param("cbsz", "int", 1, True), Param("abid", "int", 1, True),
                Param("blgp", "int", 1, True))
    return pa, pb, tail


_ACC = {"f32": "f32", "xf32": "f32", "f16": "f32", "bf16": "f32", "i8": "i32", "f64": "f64",
        "fp8e4m3fnuz": "f32", "fp8e5m2fnuz": "f32", "fp8e4m3fn": "f32", "fp8e5m2": "f32",
        "f8f6f4": "f32"}


_SPARSE_NOTE = ("4:2 sparse A: each A slot stores 2 of 4 candidate k values; the index VGPR "
                "(idx) holds one 4-bit field (two 2-bit positions) per slot, CBSZ/ABID select "
                "which index set; no separate C: D is read and written (C layout = D layout).")
_FAMILY_NOTES = {"CDNA1": "CDNA1: C/D must be AccVGPRs (no ArchVGPR accumulators)."}


def build_cdna(family: str, rows: Sequence[tuple], source: str = CALCULATOR_SOURCE,
               status: str = "verified", notes: Dict[str, str] = None) -> Dict[str, MatrixInstruction]:
    """Instruction objects from table rows
    ``(mnemonic, M, K, blocks, a_type, b_type, cycles, builtin_suffix, "a b")``.

    ``builtin_suffix`` None means there is no clang builtin for the instruction.
    """
    out: Dict[str, MatrixInstruction] = {}
    for name, m, k, blocks, at, bt, cycles, builtin, abtypes in rows:
        sparse = name.startswith("v_smfmac")
        acc = _ACC[at]
        a_code, b_code = abtypes.split()
        pa, pb, tail = _mfma_params(a_code, b_code, sparse)
        c_items = m * m * blocks // WAVE
        cparam = Param("c", _acc_ctype(acc), c_items)
        layouts = {
            "A": smfmac_a_layout(m, k) if sparse else mfma_a_layout(m, k, blocks),
            "B": mfma_b_layout(m, k, blocks),
            "D": mfma_c_layout(m, m, blocks, 1 if acc == "f64" else 4),
        }
        if sparse:
            layouts["K"] = layouts["A"]
        else:
            layouts["C"] = layouts["D"]
        out[name] = MatrixInstruction(
            name=name, family=family, kind="smfmac" if sparse else "mfma", m=m, n=m, k=k,
            blocks=blocks, a_type=at, b_type=bt, acc_type=acc, cycles=cycles, wave_size=WAVE,
            layouts=layouts,
            builtin=None if builtin is None else "__builtin_amdgcn_" + builtin,
            builtin_params=(pa, pb, cparam) + tail,
            builtin_return=Param("d", _acc_ctype(acc), c_items),
            source=source, status=status,
            notes=" ".join(x for x in ((notes or {}).get(name, ""),
                                        _SPARSE_NOTE if sparse else "",
                                        _FAMILY_NOTES.get(family, "")) if x))
    return out


# ----------------------------------------------------------------------------- tables
# (mnemonic, M(=N), K, blocks, A type, B type, cycles, clang builtin, "A-arg B-arg")
_F8, _B8 = "fp8e4m3fnuz", "fp8e5m2fnuz"


def fp8_rows(kind: str, shapes: Sequence[Tuple[int, int, int]], fp8: str, bf8: str,
             args: str) -> List[tuple]:
    """Table rows of the ``kind`` ("mfma"/"smfmac") f32 instructions for every (A, B) pairing of
    fp8 and bf8 (types ``fp8``/``bf8``), one set per ``(M, K, cycles)`` in ``shapes``."""
    fmts = (("bf8", bf8), ("fp8", fp8))
    return [(f"v_{kind}_f32_{m}x{m}x{k}_{an}_{bn}", m, k, 1, at, bt, cyc,
             f"{kind}_f32_{m}x{m}x{k}_{an}_{bn}", args)
            for m, k, cyc in shapes for an, at in fmts for bn, bt in fmts]


_GFX9_COMMON: List[tuple] = [
    ("v_mfma_f32_32x32x1f32", 32, 1, 2, "f32", "f32", 64, "mfma_f32_32x32x1f32", "f f"),
    ("v_mfma_f32_16x16x1f32", 16, 1, 4, "f32", "f32", 32, "mfma_f32_16x16x1f32", "f f"),
    ("v_mfma_f32_4x4x1f32", 4, 1, 16, "f32", "f32", 8, "mfma_f32_4x4x1f32", "f f"),
    ("v_mfma_f32_32x32x2f32", 32, 2, 1, "f32", "f32", 64, "mfma_f32_32x32x2f32", "f f"),
    ("v_mfma_f32_16x16x4f32", 16, 4, 1, "f32", "f32", 32, "mfma_f32_16x16x4f32", "f f"),
    ("v_mfma_f32_32x32x4f16", 32, 4, 2, "f16", "f16", 64, "mfma_f32_32x32x4f16", "h4 h4"),
    ("v_mfma_f32_16x16x4f16", 16, 4, 4, "f16", "f16", 32, "mfma_f32_16x16x4f16", "h4 h4"),
    ("v_mfma_f32_4x4x4f16", 4, 4, 16, "f16", "f16", 8, "mfma_f32_4x4x4f16", "h4 h4"),
    ("v_mfma_f32_32x32x8f16", 32, 8, 1, "f16", "f16", 64, "mfma_f32_32x32x8f16", "h4 h4"),
    ("v_mfma_f32_16x16x16f16", 16, 16, 1, "f16", "f16", 32, "mfma_f32_16x16x16f16", "h4 h4"),
    ("v_mfma_i32_32x32x4i8", 32, 4, 2, "i8", "i8", 64, "mfma_i32_32x32x4i8", "i i"),
    ("v_mfma_i32_16x16x4i8", 16, 4, 4, "i8", "i8", 32, "mfma_i32_16x16x4i8", "i i"),
    ("v_mfma_i32_4x4x4i8", 4, 4, 16, "i8", "i8", 8, "mfma_i32_4x4x4i8", "i i"),
    ("v_mfma_i32_32x32x8i8", 32, 8, 1, "i8", "i8", 64, "mfma_i32_32x32x8i8", "i i"),
    ("v_mfma_i32_16x16x16i8", 16, 16, 1, "i8", "i8", 32, "mfma_i32_16x16x16i8", "i i"),
]
_BF16_ORIG: List[tuple] = [   # CDNA1 bf16: 2 bf16 per VGPR, half the K of the f16 forms
    ("v_mfma_f32_32x32x2bf16", 32, 2, 2, "bf16", "bf16", 64, "mfma_f32_32x32x2bf16", "s2 s2"),
    ("v_mfma_f32_16x16x2bf16", 16, 2, 4, "bf16", "bf16", 32, "mfma_f32_16x16x2bf16", "s2 s2"),
    ("v_mfma_f32_4x4x2bf16", 4, 2, 16, "bf16", "bf16", 8, "mfma_f32_4x4x2bf16", "s2 s2"),
    ("v_mfma_f32_32x32x4bf16", 32, 4, 1, "bf16", "bf16", 64, "mfma_f32_32x32x4bf16", "s2 s2"),
    ("v_mfma_f32_16x16x8bf16", 16, 8, 1, "bf16", "bf16", 32, "mfma_f32_16x16x8bf16", "s2 s2"),
]
_BF16_1K: List[tuple] = [     # CDNA2 "_1k" bf16: same shapes and rate as f16
    ("v_mfma_f32_32x32x4bf16_1k", 32, 4, 2, "bf16", "bf16", 64, "mfma_f32_32x32x4bf16_1k",
     "s4 s4"),
    ("v_mfma_f32_16x16x4bf16_1k", 16, 4, 4, "bf16", "bf16", 32, "mfma_f32_16x16x4bf16_1k",
     "s4 s4"),
    ("v_mfma_f32_4x4x4bf16_1k", 4, 4, 16, "bf16", "bf16", 8, "mfma_f32_4x4x4bf16_1k", "s4 s4"),
    ("v_mfma_f32_32x32x8bf16_1k", 32, 8, 1, "bf16", "bf16", 64, "mfma_f32_32x32x8bf16_1k",
     "s4 s4"),
    ("v_mfma_f32_16x16x16bf16_1k", 16, 16, 1, "bf16", "bf16", 32, "mfma_f32_16x16x16bf16_1k",
     "s4 s4"),
]
_F64_CDNA2: List[tuple] = [
    ("v_mfma_f64_16x16x4f64", 16, 4, 1, "f64", "f64", 32, "mfma_f64_16x16x4f64", "d d"),
    ("v_mfma_f64_4x4x4f64", 4, 4, 4, "f64", "f64", 16, "mfma_f64_4x4x4f64", "d d"),
]

CDNA1_ROWS = _GFX9_COMMON + _BF16_ORIG
CDNA2_ROWS = _GFX9_COMMON + _BF16_1K + _BF16_ORIG + _F64_CDNA2

# CDNA3 renamed the multi-block forms (_2b, _4b, _16b), doubled the rate of the single-block
# f16/bf16/i8 forms (fewer cycles), dropped the original bf16 forms and i8 K=8/16, and added
# xf32, K-doubled i8, fp8/bf8 and the sparse SMFMAC family.  Builtins keep the CDNA2 names.
CDNA3_ROWS: List[tuple] = [
    ("v_mfma_f32_16x16x8_xf32", 16, 8, 1, "xf32", "xf32", 16, "mfma_f32_16x16x8_xf32", "f2 f2"),
    ("v_mfma_f32_32x32x4_xf32", 32, 4, 1, "xf32", "xf32", 32, "mfma_f32_32x32x4_xf32", "f2 f2"),
    ("v_mfma_f32_32x32x1_2b_f32", 32, 1, 2, "f32", "f32", 64, "mfma_f32_32x32x1f32", "f f"),
    ("v_mfma_f32_16x16x1_4b_f32", 16, 1, 4, "f32", "f32", 32, "mfma_f32_16x16x1f32", "f f"),
    ("v_mfma_f32_4x4x1_16b_f32", 4, 1, 16, "f32", "f32", 8, "mfma_f32_4x4x1f32", "f f"),
    ("v_mfma_f32_32x32x2_f32", 32, 2, 1, "f32", "f32", 64, "mfma_f32_32x32x2f32", "f f"),
    ("v_mfma_f32_16x16x4_f32", 16, 4, 1, "f32", "f32", 32, "mfma_f32_16x16x4f32", "f f"),
    ("v_mfma_f32_32x32x4_2b_f16", 32, 4, 2, "f16", "f16", 64, "mfma_f32_32x32x4f16", "h4 h4"),
    ("v_mfma_f32_16x16x4_4b_f16", 16, 4, 4, "f16", "f16", 32, "mfma_f32_16x16x4f16", "h4 h4"),
    ("v_mfma_f32_4x4x4_16b_f16", 4, 4, 16, "f16", "f16", 8, "mfma_f32_4x4x4f16", "h4 h4"),
    ("v_mfma_f32_32x32x8_f16", 32, 8, 1, "f16", "f16", 32, "mfma_f32_32x32x8f16", "h4 h4"),
    ("v_mfma_f32_16x16x16_f16", 16, 16, 1, "f16", "f16", 16, "mfma_f32_16x16x16f16", "h4 h4"),
    ("v_mfma_i32_32x32x4_2b_i8", 32, 4, 2, "i8", "i8", 64, "mfma_i32_32x32x4i8", "i i"),
    ("v_mfma_i32_16x16x4_4b_i8", 16, 4, 4, "i8", "i8", 32, "mfma_i32_16x16x4i8", "i i"),
    ("v_mfma_i32_4x4x4_16b_i8", 4, 4, 16, "i8", "i8", 8, "mfma_i32_4x4x4i8", "i i"),
    ("v_mfma_i32_32x32x16_i8", 32, 16, 1, "i8", "i8", 32, "mfma_i32_32x32x16_i8", "l l"),
    ("v_mfma_i32_16x16x32_i8", 16, 32, 1, "i8", "i8", 16, "mfma_i32_16x16x32_i8", "l l"),
    ("v_mfma_f32_32x32x4_2b_bf16", 32, 4, 2, "bf16", "bf16", 64, "mfma_f32_32x32x4bf16_1k",
     "s4 s4"),
    ("v_mfma_f32_16x16x4_4b_bf16", 16, 4, 4, "bf16", "bf16", 32, "mfma_f32_16x16x4bf16_1k",
     "s4 s4"),
    ("v_mfma_f32_4x4x4_16b_bf16", 4, 4, 16, "bf16", "bf16", 8, "mfma_f32_4x4x4bf16_1k", "s4 s4"),
    ("v_mfma_f32_32x32x8_bf16", 32, 8, 1, "bf16", "bf16", 32, "mfma_f32_32x32x8bf16_1k", "s4 s4"),
    ("v_mfma_f32_16x16x16_bf16", 16, 16, 1, "bf16", "bf16", 16, "mfma_f32_16x16x16bf16_1k",
     "s4 s4"),
    ("v_smfmac_f32_16x16x32_f16", 16, 32, 1, "f16", "f16", 16, "smfmac_f32_16x16x32_f16", "h4 h8"),
    ("v_smfmac_f32_32x32x16_f16", 32, 16, 1, "f16", "f16", 32, "smfmac_f32_32x32x16_f16", "h4 h8"),
    ("v_smfmac_f32_16x16x32_bf16", 16, 32, 1, "bf16", "bf16", 16, "smfmac_f32_16x16x32_bf16",
     "s4 s8"),
    ("v_smfmac_f32_32x32x16_bf16", 32, 16, 1, "bf16", "bf16", 32, "smfmac_f32_32x32x16_bf16",
     "s4 s8"),
    ("v_smfmac_i32_16x16x64_i8", 16, 64, 1, "i8", "i8", 16, "smfmac_i32_16x16x64_i8", "i2 i4"),
    ("v_smfmac_i32_32x32x32_i8", 32, 32, 1, "i8", "i8", 32, "smfmac_i32_32x32x32_i8", "i2 i4"),
    ("v_mfma_f64_16x16x4_f64", 16, 4, 1, "f64", "f64", 32, "mfma_f64_16x16x4f64", "d d"),
    ("v_mfma_f64_4x4x4_4b_f64", 4, 4, 4, "f64", "f64", 16, "mfma_f64_4x4x4f64", "d d"),
]
CDNA3_ROWS += fp8_rows("mfma", ((16, 32, 16), (32, 16, 32)), _F8, _B8, "l l")
CDNA3_ROWS += fp8_rows("smfmac", ((16, 64, 16), (32, 32, 32)), _F8, _B8, "i2 i4")

INSTRUCTIONS: Dict[str, Dict[str, MatrixInstruction]] = {
    "CDNA1": build_cdna("CDNA1", CDNA1_ROWS),
    "CDNA2": build_cdna("CDNA2", CDNA2_ROWS),
    "CDNA3": build_cdna("CDNA3", CDNA3_ROWS),
}
