"""NVIDIA matrix-core atoms (sm_80 / sm_90 ``mma.sync`` and ``ldmatrix``) as ``layoutalg`` TV layouts.

The AMD specs next to this module describe MFMA operands as ``(lane, item) -> column-major
tile index``; the NVIDIA atoms use the same convention so the same verifier
(:mod:`layoutalg.verify`) checks kernels built on either:

* :data:`MMA_M16N8K16_F16` / :data:`MMA_M16N8K16_BF16` -- ``mma.sync.aligned.m16n8k16.row.col
  .f32.{f16,bf16}.{f16,bf16}.f32``, warp-wide (32 lanes).  They are
  :class:`~mfma_specs.spec.MatrixInstruction` objects (``family="SM80"``, ``kind="mma"``), so
  ``spec.element(op, lane, item)`` and :func:`layoutalg.verify.lane_correctness` work unchanged.
  Operand tiles: ``A[i][k]`` 16x16, ``B[k][j]`` 16x8, ``C/D[i][j]`` 16x8, numbered
  ``row + rows*col``.  ``item`` is the element's position in the instruction's register list
  (A: ``a0..a7`` = 4 ``.b32`` registers of 2 halves, low half first; B: ``b0..b3``; C/D:
  ``c0..c3``), exactly the PTX ISA's fragment numbering.
* :func:`ldmatrix` -- ``ldmatrix.sync.aligned.m8n8.x{1,2,4}{,.trans}.shared.b16``: the
  destination fragment (``(lane, item) -> row + 8*col + 64*matrix`` of ``num`` 8x8 matrices,
  item ``2*r + h`` = register ``r``, half ``h``) and the address side (which lane supplies the
  address of which matrix row).
* :func:`smem_model` -- the 32-bank x 4-byte shared-memory model as a
  :class:`layoutalg.verify.LdsModel` (wave_size 32).

Source of every formula: PTX ISA 8.x, section 9.7.14.5.8 ("Matrix Fragments for
mma.m16n8k16 with floating point type") and 9.7.9.24 (``ldmatrix``); the tests
(``tests/test_nvidia_atoms.py``) restate those formulas literally and compare at every
lane and item, and cross-check against CuTe's ``SM80_16x8x16_F32F16F16F32_TN`` traits.

Shared-memory model (``smem_model``): 32 banks of 4 bytes; a warp's request is served in
one pass when every bank is asked for at most one distinct 4-byte word.  4-byte accesses
are one phase of 32 lanes.  Wider accesses are split by the hardware into 128-byte
wavefronts: 8-byte accesses into 2 phases of 16 lanes (half warps), 16-byte accesses
(``ld.shared.v4``, ``cp.async`` 16-byte writes, ``ldmatrix`` whose 8 lanes per matrix each
supply one 16-byte row) into 4 phases of 8 lanes.  That split is the documented behaviour of
the CUDA programming guide (compute capability 5.x+ shared memory) and what CUTLASS's
swizzle design assumes; the exact phase grouping for 8/16-byte accesses is stated there only
for contiguous lane groups, which is what is modelled here (``source`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from layoutalg import Layout
from layoutalg.verify.model import LdsModel

from .errors import MfmaSpecError
from .spec import MatrixInstruction, Param

__all__ = ["MMA_M16N8K16_F16", "MMA_M16N8K16_BF16", "mma_m16n8k16", "LdMatrix", "ldmatrix",
           "smem_model", "SMEM_BANKS", "SMEM_BANK_BYTES", "WARP_SIZE", "nvidia_instructions"]

WARP_SIZE = 32
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4

_PTX = "PTX ISA 8.x section 9.7.14.5.8 (mma.m16n8k16 .f16/.bf16 fragments)"

# lane = t + 4*g  (t = threadID_in_group = lane % 4, g = groupID = lane // 4)
# A (16x16, row = i, col = k), item e = a_e:
#   row = g + 8*((e >> 1) & 1), col = 2*t + (e & 1) + 8*(e >> 2)
_A = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
# B (16x8, row = k, col = j), item e = b_e:  row = 2*t + (e & 1) + 8*(e >> 1), col = g
_B = Layout(((4, 8), (2, 2)), ((2, 16), (1, 8)))
# C/D (16x8, row = i, col = j), item e = c_e: row = g + 8*(e >> 1), col = 2*t + (e & 1)
_C = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))


def _mma(dtype: str) -> MatrixInstruction:
    ctype = "unsigned"  # every operand register is a .b32 holding two 16-bit values
    return MatrixInstruction(
        name=f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32",
        family="SM80", kind="mma", m=16, n=8, k=16, blocks=1,
        a_type=dtype, b_type=dtype, acc_type="f32", cycles=None, wave_size=WARP_SIZE,
        layouts={"A": _A, "B": _B, "C": _C, "D": _C},
        builtin=None,
        builtin_params=(Param("a", ctype, 4), Param("b", ctype, 2), Param("c", "float", 4)),
        builtin_return=Param("d", "float", 4),
        source=_PTX, status="documented",
        notes="sm_80+ (runs on sm_90: Hopper executes mma.sync on its tensor cores, at about "
              "two thirds of the wgmma rate); PTX operand order {a0..a3} {b0,b1} {c0..c3}, "
              "each A/B register holds element 2r in its low 16 bits and 2r+1 in its high bits")


MMA_M16N8K16_F16 = _mma("f16")
MMA_M16N8K16_BF16 = _mma("bf16")


def mma_m16n8k16(dtype: str) -> MatrixInstruction:
    """The m16n8k16 atom for ``dtype`` ("f16"/"float16"/"half" or "bf16"/"bfloat16")."""
    key = str(dtype).replace("torch.", "").lower()
    if key in ("f16", "float16", "fp16", "half"):
        return MMA_M16N8K16_F16
    if key in ("bf16", "bfloat16"):
        return MMA_M16N8K16_BF16
    raise MfmaSpecError(f"mma.sync m16n8k16 is modelled for f16 and bf16 inputs, not {dtype!r}")


def nvidia_instructions() -> Tuple[MatrixInstruction, ...]:
    return (MMA_M16N8K16_F16, MMA_M16N8K16_BF16)


@dataclass(frozen=True)
class LdMatrix:
    """``ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16`` (sm_75+).

    ``num`` 8x8 matrices of 16-bit elements; lanes ``8*m .. 8*m+7`` supply the shared-memory
    addresses of rows 0..7 of matrix ``m`` (16 contiguous bytes each); lane ``l`` receives
    register ``r`` = matrix ``r``: without ``.trans`` elements ``[l//4][2*(l%4) + h]``, with
    ``.trans`` elements ``[2*(l%4) + h][l//4]`` (``h`` = low/high half).
    """

    num: int
    trans: bool

    @property
    def name(self) -> str:
        return f"ldmatrix.sync.aligned.m8n8.x{self.num}{'.trans' if self.trans else ''}.shared.b16"

    @property
    def wave_size(self) -> int:
        return WARP_SIZE

    @property
    def address_lanes(self) -> int:
        """Lanes whose address is used (8 per matrix); the others' are ignored."""
        return 8 * self.num

    def tile_shape(self) -> Tuple[int, int, int]:
        return (8, 8, self.num)

    def tv_layout(self) -> Layout:
        """Destination: ``(lane, (h, r)) -> row + 8*col + 64*matrix`` (matrix = register r)."""
        if self.trans:   # row = 2t + h, col = g
            return Layout(((4, 8), (2, self.num)), ((2, 8), (1, 64)))
        return Layout(((4, 8), (2, self.num)), ((16, 1), (8, 64)))   # row = g, col = 2t + h

    def element(self, lane: int, item: int) -> Tuple[int, int, int]:
        """``(row, col, matrix)`` of the element lane ``lane`` gets in item ``2*r + h``."""
        if not (isinstance(lane, int) and 0 <= lane < WARP_SIZE):
            raise MfmaSpecError(f"{self.name}: lane {lane!r} out of range 0..31")
        if not (isinstance(item, int) and 0 <= item < 2 * self.num):
            raise MfmaSpecError(f"{self.name}: item {item!r} out of range 0..{2 * self.num - 1}")
        v = self.tv_layout()((lane, item))
        return (v % 8, (v // 8) % 8, v // 64)

    def address_layout(self) -> Layout:
        """Address side: ``(lane, value) -> row + 8*col + 64*matrix`` of the 8 elements of the
        row lane ``lane`` points at (lanes past ``8*num`` repeat lanes 0.., their addresses
        being ignored by the hardware)."""
        rep = WARP_SIZE // (8 * self.num)
        if rep == 1:
            return Layout(((8, self.num), 8), ((1, 64), 8))
        return Layout(((8, self.num, rep), 8), ((1, 64, 0), 8))

    def row_of_lane(self, lane: int) -> Tuple[int, int]:
        """``(matrix, row)`` whose address lane ``lane`` supplies (None-free: wraps past 8*num)."""
        lane %= self.address_lanes
        return (lane // 8, lane % 8)


def ldmatrix(num: int = 4, trans: bool = False) -> LdMatrix:
    if num not in (1, 2, 4):
        raise MfmaSpecError(f"ldmatrix loads 1, 2 or 4 matrices (x1/x2/x4), not {num!r}")
    return LdMatrix(int(num), bool(trans))


_SMEM_SOURCE = ("NVIDIA shared memory, compute capability 5.x-9.0: 32 banks x 4 bytes; "
                "64/128-bit accesses served per half/quarter warp (CUDA C programming guide, "
                "shared memory; CUTLASS swizzle design). Contiguous lane groups modelled.")


def smem_model(access: object = 4, *, write: bool = False) -> LdsModel:
    """The shared-memory bank model for one warp-wide access as an :class:`LdsModel`.

    ``access``: bytes per lane (4, 8 or 16) or an instruction name: ``"ld.shared.b32"``,
    ``"ld.shared.v2.b32"``/``"ld.shared.b64"``, ``"ld.shared.v4.b32"``, ``"st.shared.*"``,
    ``"cp.async.16"`` (16-byte cp.async writes), ``"ldmatrix"`` (any ``ldmatrix``: 8 lanes
    x 16-byte rows per matrix, one phase per matrix).  Phases: 4 bytes -> one phase of 32
    lanes; 8 bytes -> 2 phases of 16; 16 bytes -> 4 phases of 8 (128 bytes per pass).
    """
    name = None
    if isinstance(access, str):
        name = access.strip().lower()
        if name.startswith("ldmatrix"):
            nbytes = 16
        elif name.startswith("cp.async"):
            nbytes = int(name.rsplit(".", 1)[1]) if name.rsplit(".", 1)[1].isdigit() else 16
            write = True
        elif any(t in name for t in (".v4", ".b128", "128")):
            nbytes = 16
        elif any(t in name for t in (".v2", ".b64", "64")):
            nbytes = 8
        elif any(t in name for t in (".b32", ".u32", ".f32", "32")):
            nbytes = 4
        else:
            raise MfmaSpecError(f"unknown shared-memory access {access!r}; give bytes (4, 8, 16) "
                                "or e.g. 'ld.shared.v4.b32', 'cp.async.16', 'ldmatrix'")
        if name.startswith("st.shared"):
            write = True
    elif isinstance(access, int) and not isinstance(access, bool):
        nbytes = access
    else:
        raise MfmaSpecError(f"smem_model: access must be bytes or an instruction name, "
                            f"got {access!r}")
    if nbytes not in (4, 8, 16):
        raise MfmaSpecError(f"shared-memory accesses of {nbytes} bytes per lane are not "
                            "modelled; 4, 8 or 16")
    per = 128 // nbytes
    phases = tuple(tuple(range(s, s + per)) for s in range(0, WARP_SIZE, per))
    label = name or ("st.shared" if write else "ld.shared") + f".b{8 * nbytes}"
    # the verifier recognises writes by the "ds_write" prefix (it then also reports races)
    instr = f"ds_write_b{8 * nbytes} ({label})" if write else label
    return LdsModel(arch="sm_90", instruction=instr, access_bytes=nbytes, banks=SMEM_BANKS,
                    bank_bytes=SMEM_BANK_BYTES, phases=phases, wave_size=WARP_SIZE,
                    source=f"{label}: {_SMEM_SOURCE}")
