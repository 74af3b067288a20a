"""Generate the emulator's MFMA builtins from :mod:`mfma_specs`.

For every dense MFMA of an arch whose element types the emulator knows, :func:`generate` emits
C++ (plain string building) that defines the clang builtin name as a macro calling a wave
collective: when all 64 lanes of the wave have arrived, the collective

1. scatters each lane's register items into the A (M x K), B (K x N) and C (M x N) tiles of
   every block, using tables ``(lane, item) -> row + rows*col + rows*cols*block`` printed from
   ``spec.element(operand, lane, item)``;
2. computes ``D = A * B + C`` per block (products exact in double, summed in double, rounded to
   the accumulator type once; integer MFMAs sum in 64-bit and wrap to int32);
3. gathers D back into each lane's result vector with the D table.

The tables are checked here to be bijections onto the tiles, so a spec that lost or duplicated
an element fails generation instead of emulating something else.  Broadcast modifiers
(cbsz/abid/blgp) must be 0: other values stop the kernel with an EmulatorError.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, List, Optional, Sequence

from ..errors import EmulatorError, KernelError

__all__ = ["generate", "builtins_used", "emulated_instructions", "emit_instruction",
           "ELEMENT_READERS"]

# canonical mfma_specs dtype -> the hip_emu.h function reading item e of an operand
ELEMENT_READERS = {
    "f16": "elt_f16", "bf16": "elt_bf16", "f32": "elt_f32", "f64": "elt_f64", "i8": "elt_i8",
    "fp8e4m3fnuz": "elt_fp8", "fp8e5m2fnuz": "elt_bf8",
}
_WRITERS = {"f32": ("put_f32", "double"), "f64": ("put_f64", "double"),
            "i32": ("put_i32", "long long")}
_CTYPES = {"__fp16": "_Float16", "_Float16": "_Float16", "short": "short", "float": "float",
           "int": "int", "long": "long", "double": "double", "bool": "bool"}


def _lookup(arch: str, name: str):
    import mfma_specs
    return mfma_specs.lookup(arch, name)


def _all_specs(arch: str) -> list:
    import mfma_specs
    for fn in ("instructions", "list_instructions"):
        f = getattr(mfma_specs, fn, None)
        if f is not None:
            items = list(f(arch))
            return [_lookup(arch, s) if isinstance(s, str) else s for s in items]
    raise KernelError("mfma_specs has no instruction listing (instructions(arch)) yet")


def _supported(spec) -> Optional[str]:
    """None if the emulator can run ``spec``, else why not."""
    if getattr(spec, "kind", "mfma") != "mfma":
        return f"{spec.kind} instructions are not emulated (dense MFMA only)"
    if not spec.builtin:
        return "no clang builtin"
    for t in (spec.a_type, spec.b_type):
        if t not in ELEMENT_READERS:
            return f"element type {t} is not emulated"
    if spec.out_type not in _WRITERS or spec.acc_type != spec.out_type:
        return f"accumulator type {spec.acc_type} is not emulated"
    if getattr(spec, "wave_size", 64) != 64:
        return "not a wave64 instruction"
    return None


def emulated_instructions(arch: str = "gfx942") -> List[str]:
    """Names of the instructions :func:`generate` covers for ``arch``."""
    return [s.name for s in _all_specs(arch) if _supported(s) is None]


def _ctype(param) -> str:
    base = _CTYPES.get(param.ctype)
    if base is None:
        raise KernelError(f"builtin parameter type {param.ctype!r} unknown to the emulator")
    return base if param.width == 1 else f"lagen_emu_v{param.width}_{base.replace(' ', '_')}"


def _typedefs(params) -> List[str]:
    out = []
    for p in params:
        if p.width > 1:
            base = _CTYPES[p.ctype]
            out.append(f"typedef {base} {_ctype(p)} LAGEN_VEC({base}, {p.width});")
    return out


def _table(spec, operand: str) -> List[int]:
    """``[lane * items + item] -> column-major tile index``, checked to be a bijection."""
    rows, cols, blocks = spec.tile_shape(operand)
    n = spec.items(operand)
    tab = []
    for lane in range(64):
        for item in range(n):
            r, c, b = spec.element(operand, lane, item)
            tab.append(r + rows * c + rows * cols * b)
    if sorted(tab) != list(range(rows * cols * blocks)):
        raise KernelError(f"{spec.name} operand {operand}: the lane map is not a bijection onto "
                          f"the {rows}x{cols}x{blocks} tile; refusing to emulate it")
    return tab


def _c_array(name: str, values: Sequence[int]) -> str:
    ctype = "unsigned char" if max(values) < 256 else "unsigned short"
    body = ",".join(str(v) for v in values)
    return f"  static const {ctype} {name}[{len(values)}] = {{{body}}};"


def emit_instruction(spec) -> str:
    """C++ for one instruction: the collective, its wrapper and the builtin macro."""
    why = _supported(spec)
    if why:
        raise KernelError(f"cannot emulate {spec.name}: {why}")
    M, N, K, nb = spec.m, spec.n, spec.k, spec.blocks
    builtin = _builtin_name(spec)
    short = builtin[len("__builtin_amdgcn_"):]
    params = list(spec.builtin_params)
    if len(params) != 6:
        raise KernelError(f"{spec.name}: expected (A, B, C, cbsz, abid, blgp), got "
                          f"{[p.type_str() for p in params]}")
    ret = spec.builtin_return
    na, nb_items, nc, nd = (spec.items(o) for o in "ABCD")
    put, acc = _WRITERS[spec.out_type]
    ra, rb, rc = ELEMENT_READERS[spec.a_type], ELEMENT_READERS[spec.b_type], \
        {"f32": "elt_f32", "f64": "elt_f64", "i32": "elt_i32"}[spec.acc_type]
    fn = f"lagen_mfma_fn__{short}"
    lines = [f"// {spec.name} ({spec.family}): D = A*B + C; M={M} N={N} K={K} blocks={nb}; "
             f"A {spec.a_type} x{na}, B {spec.b_type} x{nb_items}, C/D {spec.acc_type} x{nc}",
             *_typedefs(params[:3] + [ret]),
             f"static void {fn}(::lagen_emu::Thread* const* L, long long imm) {{",
             "  using namespace ::lagen_emu;",
             f'  check_mfma_modifiers(imm, "{builtin}");',
             "  if (g_rt.failed) return;",
             _c_array("TA", _table(spec, "A")), _c_array("TB", _table(spec, "B")),
             _c_array("TC", _table(spec, "C")), _c_array("TD", _table(spec, "D")),
             f"  {acc} a[{M * K * nb}], b[{K * N * nb}], c[{M * N * nb}];",
             "  for (int l = 0; l < 64; ++l) {",
             f"    for (int e = 0; e < {na}; ++e) a[TA[l * {na} + e]] = {ra}(L[l]->in[0], e);",
             f"    for (int e = 0; e < {nb_items}; ++e) b[TB[l * {nb_items} + e]] = "
             f"{rb}(L[l]->in[1], e);",
             f"    for (int e = 0; e < {nc}; ++e) c[TC[l * {nc} + e]] = {rc}(L[l]->in[2], e);",
             "  }",
             f"  mfma_blocks<{acc}, {M}, {N}, {K}, {nb}>(a, b, c);",
             "  for (int l = 0; l < 64; ++l)",
             f"    for (int e = 0; e < {nd}; ++e) {put}(L[l]->out, e, c[TD[l * {nd} + e]]);",
             "}"]
    ta, tb, tc = (_ctype(p) for p in params[:3])
    tr = _ctype(ret)
    lines += [f"static inline {tr} lagen_emu_{short}({ta} a, {tb} b, {tc} c, int cbsz, int abid, "
              f"int blgp, const char* file, int line, int site) {{",
              f"  {tr} d;",
              f"  ::lagen_emu::wave_op({fn}, ((long long)cbsz << 16) | ((long long)abid << 8) | "
              f"(long long)blgp, true, &a, &b, &c, &d, \"{builtin}\", file, line, site);",
              "  return d;", "}",
              f"#define {builtin}(a, b, c, cbsz, abid, blgp) lagen_emu_{short}((a), (b), (c), "
              f"(cbsz), (abid), (blgp), LAGEN_EMU_SITE)", ""]
    return "\n".join(lines)


def _builtin_name(spec) -> str:
    b = spec.builtin
    return b if b.startswith("__builtin_") else f"__builtin_amdgcn_{b}"


@functools.lru_cache(maxsize=32)
def _generate(arch: str, builtins: Optional[tuple]) -> str:
    by_builtin = {}
    for s in _all_specs(arch):
        if s.builtin:
            by_builtin.setdefault(_builtin_name(s), s)  # an arch lists each builtin once
    if builtins is None:
        specs = [s for s in by_builtin.values() if _supported(s) is None]
    else:
        specs = []
        for b in builtins:
            if b not in by_builtin:
                raise EmulatorError(f"{b} is not a matrix builtin of {arch} (mfma_specs knows "
                                  f"{len(by_builtin)}: `layoutalg mfma list --arch {arch}`)")
            why = _supported(by_builtin[b])
            if why:
                raise EmulatorError(f"{b} ({by_builtin[b].name}) is not emulated: {why}")
            specs.append(by_builtin[b])
    head = (f"// lagen_mfma_emu.inc: generated by kernels/emulator/mfma_gen.py from mfma_specs "
            f"({arch}); do not edit.\n#pragma once\n")
    return head + "\n".join(emit_instruction(s) for s in specs)


def generate(arch: str = "gfx942", builtins: Optional[Iterable[str]] = None) -> str:
    """C++ source of ``lagen_mfma_emu.inc`` for ``arch``: the given clang ``builtins`` (e.g.
    ``"__builtin_amdgcn_mfma_f32_16x16x16f16"``), or every supported one when None."""
    return _generate(arch, tuple(sorted(set(builtins))) if builtins is not None else None)


def builtins_used(source: str) -> List[str]:
    """The matrix builtins a kernel source names."""
    return sorted(set(re.findall(r"\b__builtin_amdgcn_(?:mfma|smfmac)_\w+", source)))
