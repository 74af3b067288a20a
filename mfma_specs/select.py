"""Instruction selection as Triton 3.9's AMD backend does it (``AccelerateAMDMatmul.cpp``,
``MfmaGroup.cpp``), for CDNA targets (MFMA versions 1-4 = gfx908, gfx90a, gfx94x, gfx950).

Rules (each has a test case in ``tests/test_mfma_select.py``):

1. Tile: ``min(M, N) >= 32`` -> 32x32; ``>= 16`` -> 16x16; ``4 <= min < 16`` with the other
   side ``>= 64`` -> 4x64 / 64x4 (the 16-block 4x4 instructions); otherwise FMA.
   ``nonkdim=16|32`` forces the tile.
2. f64 has only 16x16x4: a 32x32 tile becomes 16x16.
3. Among instructions of one tile and type the larger K wins when ``K >= that K`` (gfx950's
   K-doubled forms), else the smaller one.
4. ``K % kDim != 0`` -> FMA (also with a forced ``nonkdim``).
5. fp32 with ``allow_xf32`` (Triton's ``input_precision="tf32"``) on gfx94x -> xf32.
6. OCP FP8 (e4m3fn/e5m2) before gfx950 is emulated with the f16 instruction (Triton remarks
   "low performance"); on gfx950 an FP8/FP6/FP4 dot first tries the block-scaled
   ``v_mfma_scale_*_f8f6f4`` (unit scales), then the plain fp8 instruction.
7. Accumulators: floats accumulate in f32 (an f16/bf16 accumulator is converted), i8 in i32,
   f64 in f64.

``warps_per_tile`` is Triton's ``warpsPerTile`` (plain, batched, chained-dot head/tail) and
``k_width`` its kWidth/kPack rule.  A dtype combination no instruction of the target supports
is an error (:class:`UnsupportedDtypeError`), not a fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import _table
from .arch import target
from .dtypes import canonical_dtype
from .errors import NotModelledError, SelectionError, UnsupportedDtypeError
from .spec import MatrixInstruction

__all__ = ["MfmaChoice", "FmaFallback", "FmaFallbackError", "choose_mfma", "warps_per_tile",
           "k_width", "supported_dtype_pairs"]

_F8, _B8 = "fp8e4m3fnuz", "fp8e5m2fnuz"
_OF8, _OB8 = "fp8e4m3fn", "fp8e5m2"
_MXFP = "f8f6f4"     # key of the block-scaled gfx950 instructions (Triton keys them by FP4)

# Triton's MFMA database: (mDim, nDim, aType, bType) -> {version: [(builtin stem, kDim, kBase)]}
# Lists are in preference order (larger K first).
_DB: Dict[Tuple[int, int, str, str], Dict[int, List[Tuple[str, int, int]]]] = {}


def _add(versions, m, n, a, b, *entries):
    for v in versions:
        _DB.setdefault((m, n, a, b), {})[v] = list(entries)


_V14, _V24, _V12, _V13 = (1, 2, 3, 4), (2, 3, 4), (1, 2), (1, 2, 3)
_add(_V24, 16, 16, "f64", "f64", ("mfma_f64_16x16x4f64", 4, 1))
_add(_V14, 32, 32, "f32", "f32", ("mfma_f32_32x32x2f32", 2, 1))
_add(_V14, 16, 16, "f32", "f32", ("mfma_f32_16x16x4f32", 4, 1))
for _mn in ((4, 64), (64, 4)):
    _add(_V14, *_mn, "f32", "f32", ("mfma_f32_4x4x1f32", 16, 1))
    _add(_V14, *_mn, "f16", "f16", ("mfma_f32_4x4x4f16", 64, 4))
    _add(_V24, *_mn, "bf16", "bf16", ("mfma_f32_4x4x4bf16_1k", 64, 4))
    _add((1,), *_mn, "bf16", "bf16", ("mfma_f32_4x4x2bf16", 2, 2))
    _add(_V14, *_mn, "i8", "i8", ("mfma_i32_4x4x4i8", 64, 4))
_add((3,), 16, 16, "xf32", "xf32", ("mfma_f32_16x16x8_xf32", 8, 2))
_add((3,), 32, 32, "xf32", "xf32", ("mfma_f32_32x32x4_xf32", 4, 2))
_add((4,), 32, 32, "f16", "f16", ("mfma_f32_32x32x16_f16", 16, 8), ("mfma_f32_32x32x8f16", 8, 4))
_add(_V13, 32, 32, "f16", "f16", ("mfma_f32_32x32x8f16", 8, 4))
_add((4,), 16, 16, "f16", "f16", ("mfma_f32_16x16x32_f16", 32, 8),
     ("mfma_f32_16x16x16f16", 16, 4))
_add(_V13, 16, 16, "f16", "f16", ("mfma_f32_16x16x16f16", 16, 4))
_add((4,), 32, 32, "bf16", "bf16", ("mfma_f32_32x32x16_bf16", 16, 8),
     ("mfma_f32_32x32x8bf16_1k", 8, 4))
_add((3,), 32, 32, "bf16", "bf16", ("mfma_f32_32x32x8bf16_1k", 8, 4))
_add((2,), 32, 32, "bf16", "bf16", ("mfma_f32_32x32x8bf16_1k", 8, 4),
     ("mfma_f32_32x32x4bf16_1k", 4, 2))
_add((4,), 16, 16, "bf16", "bf16", ("mfma_f32_16x16x32_bf16", 32, 8),
     ("mfma_f32_16x16x16bf16_1k", 16, 4))
_add((3,), 16, 16, "bf16", "bf16", ("mfma_f32_16x16x16bf16_1k", 16, 4))
_add((2,), 16, 16, "bf16", "bf16", ("mfma_f32_16x16x16bf16_1k", 16, 4),
     ("mfma_f32_16x16x8bf16", 8, 2))
_add((1,), 32, 32, "bf16", "bf16", ("mfma_f32_32x32x4bf16", 4, 2))
_add((1,), 16, 16, "bf16", "bf16", ("mfma_f32_16x16x8bf16", 8, 2))
for _an, _at, _ot in (("fp8", _F8, _OF8), ("bf8", _B8, _OB8)):
    for _bn, _bt, _obt in (("fp8", _F8, _OF8), ("bf8", _B8, _OB8)):
        for _m, _k in ((32, 16), (16, 32)):
            stem = (f"mfma_f32_{_m}x{_m}x{_k}_{_an}_{_bn}", _k, 8)
            _add((3,), _m, _m, _at, _bt, stem)
            _add((4,), _m, _m, _ot, _obt, stem)
_add((4,), 32, 32, "i8", "i8", ("mfma_i32_32x32x32_i8", 32, 16), ("mfma_i32_32x32x16_i8", 16, 8))
_add((3,), 32, 32, "i8", "i8", ("mfma_i32_32x32x16_i8", 16, 8))
_add(_V12, 32, 32, "i8", "i8", ("mfma_i32_32x32x8i8", 8, 4))
_add((4,), 16, 16, "i8", "i8", ("mfma_i32_16x16x64_i8", 64, 16), ("mfma_i32_16x16x32_i8", 32, 8))
_add((3,), 16, 16, "i8", "i8", ("mfma_i32_16x16x32_i8", 32, 8))
_add(_V12, 16, 16, "i8", "i8", ("mfma_i32_16x16x16i8", 16, 4))
_add((4,), 16, 16, _MXFP, _MXFP, ("mfma_scale_f32_16x16x128_f8f6f4", 128, 32))
_add((4,), 32, 32, _MXFP, _MXFP, ("mfma_scale_f32_32x32x64_f8f6f4", 64, 32))

class FmaFallbackError(SelectionError, AttributeError):
    """An instruction attribute was read from an :class:`FmaFallback`."""


_F8F6F4_TYPES = ("fp8e4m3fn", "fp8e5m2", "fp6e2m3", "fp6e3m2", "fp4e2m1")


@dataclass(frozen=True)
class MfmaChoice:
    """An MFMA instruction chosen for a dot, with Triton's mDim/nDim/kDim/kBase."""

    instruction: MatrixInstruction
    m_dim: int
    n_dim: int
    k_dim: int
    k_base: int
    a_dtype: str
    b_dtype: str
    acc_dtype: str
    notes: Tuple[str, ...] = ()
    is_fma = False

    @property
    def name(self) -> str:
        return self.instruction.name

    def __getattr__(self, attr: str):
        # A choice is its instruction plus selection facts: m, n, k, tv_layout(), builtin...
        if attr.startswith("__") or attr == "instruction":
            raise AttributeError(attr)
        return getattr(self.instruction, attr)

    def __str__(self) -> str:
        extra = f" ({'; '.join(self.notes)})" if self.notes else ""
        return (f"{self.name}: tile {self.m_dim}x{self.n_dim}, kDim {self.k_dim}, "
                f"kBase {self.k_base}{extra}")

    # defined here: __getattr__ would otherwise show the instruction alone, not the choice
    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(f"choose_mfma -> {self}")

    def _repr_html_(self) -> str:
        """The choice, then the chosen instruction's diagram (fitted to the cell)."""
        from visualize import draw_mma
        from visualize.notebook import result_html
        return result_html(f"choose_mfma -> {self}", True, draw_mma(self.instruction))


@dataclass(frozen=True)
class FmaFallback:
    """No MFMA: Triton keeps the dot on FMA (v_fma/v_dot) and says why."""

    reason: str
    rule: str
    is_fma = True

    @property
    def name(self) -> str:
        return "fma"

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise FmaFallbackError(f"choose_mfma chose no MFMA, so there is no {attr!r}: "
                               f"{self.reason} (check .is_fma before using the instruction)")

    def __str__(self) -> str:
        return f"FMA fallback [{self.rule}]: {self.reason}"

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(f"choose_mfma -> {self}")

    def _repr_html_(self) -> str:
        import html
        return (f"<div style='font-family:monospace;border-left:4px solid #8a8a8a;"
                f"padding-left:6px'>choose_mfma -&gt; {html.escape(str(self))}</div>")


def _pos_pow2(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise SelectionError(f"{name} must be a positive integer, got {v!r}")
    if v & (v - 1):
        raise SelectionError(f"{name}={v}: Triton block dimensions are powers of two "
                             f"(nearest: {1 << (v.bit_length() - 1)} or {1 << v.bit_length()})")
    return v


def _versions_pairs(version: int) -> List[Tuple[str, str]]:
    return sorted({(a, b) for (_, _, a, b), byv in _DB.items() if version in byv})


def supported_dtype_pairs(arch: str) -> List[Tuple[str, str]]:
    """The (A, B) dtype pairs some MFMA of ``arch`` takes (Triton's database), plus OCP FP8
    pairs before gfx950 (emulated with f16)."""
    t = _cdna_target(arch)
    pairs = [p for p in _versions_pairs(t.matrix_version) if _MXFP not in p and "xf32" not in p]
    if t.matrix_version <= 3:
        pairs += [(a, b) for a in (_OF8, _OB8) for b in (_OF8, _OB8)]
    if t.matrix_version == 4:
        pairs += [(a, b) for a in _F8F6F4_TYPES for b in _F8F6F4_TYPES
                  if (a, b) not in pairs]
    return sorted(set(pairs))


def _cdna_target(arch: str):
    t = target(arch)
    if not t.is_cdna:
        raise NotModelledError(f"choose_mfma models Triton's MFMA selection for CDNA targets; "
                               f"{t.name} is {t.family} (WMMA selection is not modelled)")
    return t


def _by_builtin(arch: str, stem: str) -> MatrixInstruction:
    want = "__builtin_amdgcn_" + stem
    for spec in _table(arch).values():
        if spec.builtin == want:
            return spec
    raise NotModelledError(f"internal: no {arch} instruction has builtin {want}")  # pragma: no cover


def choose_mfma(arch: str, M: int, N: int, K: int, a_dtype: str, b_dtype: str,
                acc_dtype: str, nonkdim: Optional[int] = None,
                allow_xf32: bool = False) -> Union[MfmaChoice, FmaFallback]:
    """The MFMA Triton 3.9 would pick for an ``M x N x K`` dot on ``arch`` (CDNA), or the FMA
    fallback with the rule that caused it.  See the module docstring for the rules."""
    t = _cdna_target(arch)
    version = t.matrix_version
    M, N, K = (_pos_pow2(n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    if nonkdim not in (None, 0, 16, 32):
        raise SelectionError(f"nonkdim={nonkdim!r}: Triton's matrix_instr_nonkdim is 0 "
                             "(automatic), 16 or 32")
    native = "ocp" if version >= 4 else "fnuz" if version == 3 else None
    a = canonical_dtype(a_dtype, native)
    b = canonical_dtype(b_dtype, native)
    acc = canonical_dtype(acc_dtype, native)
    notes: List[str] = []

    # --- types: which database key, and is the pair supported at all (rules 5-7) ---------
    key_a, key_b = a, b
    if allow_xf32 and a == b == "f32":
        if version != 3:
            notes.append("allow_xf32 ignored: xf32 MFMA exists only on gfx94x")
        else:
            key_a = key_b = "xf32"
    if version <= 3 and a in (_OF8, _OB8) and b in (_OF8, _OB8):
        key_a = key_b = "f16"
        notes.append("OCP fp8 has no native MFMA before gfx950: emulated with fp16 "
                     "(Triton remarks low performance)")
    pairs = supported_dtype_pairs(arch)
    if (a, b) not in pairs and not (key_a == key_b == "xf32"):
        raise UnsupportedDtypeError(
            f"no {t.name} MFMA takes A={a}, B={b}; supported (A, B) pairs: "
            + ", ".join(f"{x}x{y}" for x, y in pairs))
    int_in = a in ("i8",)
    want_acc = "f64" if a == "f64" else "i32" if int_in else "f32"
    ok_acc = {"f64": ("f64",), "i32": ("i32",), "f32": ("f32", "f16", "bf16")}[want_acc]
    if acc not in ok_acc:
        raise UnsupportedDtypeError(f"accumulator {acc} is not valid for {a} x {b} inputs on "
                                    f"{t.name}: use {' or '.join(ok_acc)}")
    if acc != want_acc:
        notes.append(f"{acc} accumulator converted: the MFMA accumulates in {want_acc}")

    # --- tile (rules 1, 2) ------------------------------------------------------------------
    if nonkdim:
        m_dim = n_dim = nonkdim
    else:
        lo = min(M, N)
        if lo >= 32:
            m_dim = n_dim = 32
        elif lo >= 16:
            m_dim = n_dim = 16
        elif 4 <= M < 16 and N >= 64:
            m_dim, n_dim = 4, 64
        elif 4 <= N < 16 and M >= 64:
            m_dim, n_dim = 64, 4
        else:
            return FmaFallback(f"min(M, N) = {lo} < 16 and no 4x64/64x4 tile fits "
                               f"(M={M}, N={N}: needs 4 <= min < 16 and the other side >= 64)",
                               "tile")
        if a == "f64" and m_dim == 32:
            m_dim = n_dim = 16
            notes.append("f64 has only the 16x16x4 MFMA")

    # --- gfx950 FP8/FP6/FP4: block-scaled f8f6f4 first (rule 6) -----------------------------
    tried = []
    if version == 4 and a in _F8F6F4_TYPES and b in _F8F6F4_TYPES:
        tried.append((_MXFP, _MXFP, "as a block-scaled f8f6f4 MFMA with unit scales"))
    tried.append((key_a, key_b, ""))

    fallbacks: List[FmaFallback] = []
    for ka, kb, how in tried:
        entries = _DB.get((m_dim, n_dim, ka, kb), {}).get(version)
        if not entries:
            fallbacks.append(FmaFallback(f"no {m_dim}x{n_dim} MFMA for {a} x {b} on {t.name}",
                                         "type"))
            continue
        stem, k_dim, k_base = next(((s, k, kb_) for s, k, kb_ in entries[:-1] if K >= k),
                                   entries[-1])                          # rule 3
        if K % k_dim:                                                    # rule 4
            fallbacks.append(FmaFallback(
                f"K={K} is not a multiple of the instruction K={k_dim} ({stem}); Triton "
                "prefers FMA over duplicated data" + (" (even with nonkdim forced)"
                                                      if nonkdim else ""), "k"))
            continue
        spec = _by_builtin(t.name, stem)
        return MfmaChoice(spec, m_dim, n_dim, k_dim, k_base, a, b, acc,
                          tuple(notes + ([how] if how else [])))
    # the most specific reason: a K mismatch of an existing instruction beats "no such type"
    return next((f for f in fallbacks if f.rule == "k"), fallbacks[-1])


def warps_per_tile(shape: Sequence[int], num_warps: int,
                   instr_shape: Tuple[int, int] = (32, 32),
                   chain: Optional[str] = None) -> Tuple[int, ...]:
    """Triton's ``warpsPerTile`` for a dot result of ``shape`` (``(M, N)`` or batched
    ``(B, M, N)``) with ``num_warps`` warps and an ``instr_shape`` (mDim, nDim) instruction.

    ``chain="head"``: first dot of an attention chain -> ``(num_warps, 1)``;
    ``chain="tail"``: second dot -> ``min(num_warps, ceil(M / mDim))`` along M, the rest
    along N.  Otherwise warps double along M while M still has twice the instruction tiles
    per warp that N has, else along N; if that leaves more N per warp than N has, the two
    are swapped.
    """
    shape = tuple(shape)
    if len(shape) not in (2, 3) or not all(isinstance(s, int) and not isinstance(s, bool)
                                           and s > 0 for s in shape):
        raise SelectionError(f"shape must be (M, N) or (batch, M, N) positive ints, got "
                             f"{shape!r}")
    _pos_pow2("num_warps", num_warps)
    if (len(instr_shape) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1
                                     for x in instr_shape)):
        raise SelectionError(f"instr_shape must be (mDim, nDim) positive ints, got "
                             f"{instr_shape!r}")
    if chain not in (None, "head", "tail"):
        raise SelectionError(f"chain={chain!r}: use None, 'head' or 'tail'")
    if len(shape) == 3:
        return (num_warps, 1, 1)                                       # batched
    m, n = shape
    mdim, ndim = instr_shape
    if chain == "head":
        return (num_warps, 1)
    if chain == "tail":
        along_m = min(num_warps, -(-m // mdim))
        return (along_m, num_warps // along_m)
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // (mdim * 2) // wm >= n // ndim // wn:
            if wm < m // mdim:
                wm *= 2
            else:
                wn *= 2
        else:
            wn *= 2
    if wn * ndim > n:
        return (wn, wm)
    return (wm, wn)


def k_width(choice: MfmaChoice, kpack: int = 1, chain_tail: bool = False) -> int:
    """Elements per thread per operand load (Triton's kWidth).

    ``kWidth = kBase`` (4x4 tile: ``kDim/16``; 4x64 / 64x4: ``kDim``, as Triton's
    ``BlockedToMFMA`` writes it - there one operand is broadcast block by block and the other
    holds a whole kDim per lane), times ``kpack`` (1 or 2) except on the second dot of an
    attention chain, whose operand comes from the first dot's accumulator layout: there
    16-bit types use kWidth 4.
    """
    if not isinstance(choice, MfmaChoice):
        raise SelectionError(f"k_width needs an MfmaChoice, got {choice!r}")
    if kpack not in (1, 2):
        raise SelectionError(f"kpack={kpack!r}: Triton accepts kpack 1 or 2")
    width = choice.k_base
    if (choice.m_dim, choice.n_dim) == (4, 4):
        width = choice.k_dim // 16
    if (choice.m_dim, choice.n_dim) in ((4, 64), (64, 4)):
        width = choice.k_dim
    if chain_tail:
        if choice.a_dtype in ("f16", "bf16"):
            return 4
        return width
    return width * kpack
