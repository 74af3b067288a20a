"""`MatrixInstruction`: one matrix-core instruction with its operand layouts as TV layouts.

Layout convention
-----------------
Each operand is a tile of shape ``(rows, cols, blocks)``: ``A`` is ``(M, K, blocks)`` indexed
``A[i][k]``, ``B`` is ``(K, N, blocks)`` indexed ``B[k][j]``, ``C``/``D`` are ``(M, N, blocks)``
indexed ``C[i][j]`` (the convention of AMD's Matrix Instruction Calculator).  The tile is
numbered column-major::

    index = row + rows * col + rows * cols * block

``spec.tv_layout(op)`` is a :class:`layoutalg.Layout` of shape ``(lane_modes, item_modes)``
whose *value* at ``(lane, item)`` is that index: lane ``lane`` holds, in item ``item`` of its
register vector, the element ``idx2crd(index, (rows, cols, blocks))``.  ``item`` is the
element's position in the builtin's vector argument (16-bit: item e is VGPR e//2 bits
16*(e%2); 8-bit: byte e; f64: register pair e; accumulators: register e).  Example, CDNA3
``v_mfma_f32_16x16x16_f16`` operand A (lane l, item e -> ``A[l%16][4*(l//16)+e]``)::

    Layout(((16, 4), 4), ((1, 64), 16))

Lane modes with stride 0 are replicated lanes (RDNA3 WMMA copies A and B into both
half-waves).  :meth:`MatrixInstruction.element` is computed from the layout (``idx2crd`` of
its value), never from a table.

Sparse (SMFMAC) instructions: register item ``s`` of operand A is a *slot* holding 2 of 4
candidate ``k`` positions; which 2 is data (the compression index, operand ``"K"``).  Their
``tv_layout("A")`` therefore has item modes ``(4, slots)`` (candidate, slot) and maps to the
candidate positions; :meth:`element` refuses A/K and :meth:`candidates` returns the four
candidates of a slot.  SMFMAC has no separate C input: the accumulator is read from the D
registers, so operand ``"C"`` is the D layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from layoutalg import Layout
from layoutalg.inttuple import idx2crd

from .dtypes import DTYPE_BITS, DTYPE_LABELS
from .errors import LaneItemError, OperandError

__all__ = ["MatrixInstruction", "Param", "OPERANDS"]

OPERANDS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class Param:
    """One argument (or the result) of a clang builtin: ``ctype`` x ``width``."""

    name: str
    ctype: str               # "__fp16", "short", "float", "int", "long", "double", "bool"
    width: int = 1           # vector width; 1 means a scalar
    immediate: bool = False  # must be a compile-time constant

    def type_str(self) -> str:
        """Like the data file / clang prints it: ``"__fp16 x4"`` or ``"int"``."""
        return self.ctype if self.width == 1 else f"{self.ctype} x{self.width}"

    def c_decl(self) -> str:
        """A HIP type spelling usable in a declaration."""
        if self.width == 1:
            return self.ctype
        return f"{self.ctype} __attribute__((ext_vector_type({self.width})))"


@dataclass(frozen=True, eq=False)   # identity equality/hash: one object per (family, name, wave)
class MatrixInstruction:
    """One MFMA / SMFMAC / WMMA instruction of one ISA family.

    ``status`` says how far the facts are checked: ``"verified"`` (layouts equal AMD's Matrix
    Instruction Calculator at every entry, builtins compiled: the test suite checks this),
    ``"documented"`` (public docs/LLVM, not machine-checked here) or ``"inferred"`` (derived
    by a documented rule from neighbouring instructions; ``source`` says how).
    """

    name: str
    family: str
    kind: str                      # "mfma", "smfmac", "wmma"
    m: int
    n: int
    k: int
    blocks: int
    a_type: str
    b_type: str
    acc_type: str
    cycles: Optional[int]
    wave_size: int
    layouts: Mapping[str, Layout] = field(repr=False)
    builtin: Optional[str] = None
    builtin_params: Tuple[Param, ...] = field(default=(), repr=False)
    builtin_return: Optional[Param] = field(default=None, repr=False)
    source: str = field(default="", repr=False)
    status: str = "verified"
    notes: str = field(default="", repr=False)
    d_type: Optional[str] = None
    acc_halfword: bool = False     # 16-bit results, one per 32-bit VGPR (RDNA3, OPSEL=0)

    def _repr_svg_(self) -> str:
        """Jupyter renders a spec as its MMA diagram (C at the origin, A left, B above)."""
        from visualize import draw_mma
        return draw_mma(self)._repr_svg_()

    def _repr_html_(self) -> str:
        """The facts (as ``layoutalg mfma show`` prints them, without the lane tables) and the
        diagram fitted to the cell."""
        from visualize import draw_mma
        from visualize.notebook import result_html
        return result_html(self.describe(), None, draw_mma(self))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.describe())

    def describe(self) -> str:
        """A few lines: shape, types, cost, registers, builtin, TV layouts (no lane tables)."""
        from .cli import format_instruction
        return format_instruction(self, operands=[])

    # ---- shape and cost ---------------------------------------------------------------
    @property
    def sparse(self) -> bool:
        return self.kind == "smfmac"

    @property
    def out_type(self) -> str:
        return self.d_type or self.acc_type

    @property
    def passes(self) -> Optional[int]:
        """Pipeline passes (4 cycles each on CDNA)."""
        if self.cycles is None or self.kind == "wmma":
            return None
        return self.cycles // 4

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.blocks

    @property
    def operands(self) -> Tuple[str, ...]:
        return OPERANDS + (("K",) if self.sparse else ())

    def _op(self, operand: object) -> str:
        op = operand.upper() if isinstance(operand, str) else operand
        if op not in self.operands:
            valid = ", ".join(repr(o) for o in self.operands)
            extra = (" ('K' is the compression index of sparse SMFMAC instructions)"
                     if op == "K" else "")
            raise OperandError(f"{self.name}: unknown operand {operand!r}{extra}; "
                               f"valid operands: {valid}")
        return op

    def tile_shape(self, operand: str) -> Tuple[int, int, int]:
        """``(rows, cols, blocks)`` of the operand tile."""
        op = self._op(operand)
        if op in ("A", "K"):
            return (self.m, self.k, self.blocks)
        if op == "B":
            return (self.k, self.n, self.blocks)
        return (self.m, self.n, self.blocks)

    def tv_layout(self, operand: str) -> Layout:
        """The operand's TV layout ``(lane, item) -> column-major tile index`` (see module doc).

        For sparse A/K the item modes are ``(candidate, slot)``.
        """
        op = self._op(operand)
        if op == "C" and self.sparse:
            op = "D"
        return self.layouts[op]

    def items(self, operand: str) -> int:
        """Register items per lane (for sparse A/K: slots, each covering 4 candidates)."""
        op = self._op(operand)
        n = self.tv_layout(op)[1].size()
        return n // 4 if (self.sparse and op in ("A", "K")) else n

    def item_bits(self, operand: str) -> int:
        """Bits of one register item."""
        op = self._op(operand)
        if op == "K":
            return 4                                   # two 2-bit indices per slot
        if op == "A":
            bits = DTYPE_BITS[self.a_type]
            return 2 * bits if self.sparse else bits   # a slot stores 2 values
        if op == "B":
            return DTYPE_BITS[self.b_type]
        bits = DTYPE_BITS[self.acc_type if op == "C" else self.out_type]
        return 32 if self.acc_halfword else bits

    def gprs(self, operand: str) -> int:
        """32-bit VGPRs the operand occupies per lane."""
        return -(-self.items(operand) * self.item_bits(operand) // 32)

    # ---- lane maps --------------------------------------------------------------------
    def _check_lane_item(self, op: str, lane: object, item: object, limit: int,
                         what: str = "item") -> None:
        for name, value, hi in (("lane", lane, self.wave_size), (what, item, limit)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise LaneItemError(f"{self.name} operand {op}: {name} must be an int, "
                                    f"got {value!r}")
            if not 0 <= value < hi:
                raise LaneItemError(f"{self.name} operand {op}: {name} {value} is out of "
                                    f"range; valid {name}s are 0..{hi - 1}")

    def element(self, operand: str, lane: int, item: int) -> Tuple[int, int, int]:
        """``(row, col, block)`` of the element lane ``lane`` holds in register item ``item``.

        Rows/cols as in the calculator: ``A[i][k]`` -> ``(i, k, b)``, ``B[k][j]`` ->
        ``(k, j, b)``, ``C/D[i][j]`` -> ``(i, j, b)``.
        """
        op = self._op(operand)
        if self.sparse and op in ("A", "K"):
            raise OperandError(
                f"{self.name} operand {op} is 4:2 sparse: register item s (0..{self.items(op) - 1})"
                f" is a slot holding 2 of 4 candidate k positions chosen at run time by the "
                f"compression index; use spec.candidates({op!r}, lane, slot)")
        self._check_lane_item(op, lane, item, self.items(op))
        index = self.tv_layout(op)((lane, item))
        return tuple(idx2crd(int(index), self.tile_shape(op)))  # type: ignore[return-value]

    def candidates(self, operand: str, lane: int, slot: int) -> List[Tuple[int, int, int]]:
        """The 4 candidate ``(row, col, block)`` of sparse A/K slot ``slot`` of ``lane``."""
        op = self._op(operand)
        if not (self.sparse and op in ("A", "K")):
            raise OperandError(f"{self.name} operand {op} is dense; candidates() applies to "
                               "operands A and K of sparse (v_smfmac) instructions; use "
                               "element()")
        self._check_lane_item(op, lane, slot, self.items(op), "slot")
        lay = self.tv_layout(op)
        shape = self.tile_shape(op)
        return [tuple(idx2crd(int(lay((lane, (c, slot)))), shape)) for c in range(4)]

    def lane_map(self, operand: str) -> List[List[Tuple[int, int, int]]]:
        """``lane_map(op)[lane][item]`` for every lane and item (candidate lists for sparse A/K)."""
        op = self._op(operand)
        if self.sparse and op in ("A", "K"):
            return [[self.candidates(op, l, s) for s in range(self.items(op))]  # type: ignore
                    for l in range(self.wave_size)]
        return [[self.element(op, l, e) for e in range(self.items(op))]
                for l in range(self.wave_size)]

    def holders(self, operand: str, row: int, col: int, block: int = 0) -> List[Tuple[int, int]]:
        """Every ``(lane, item)`` holding element ``(row, col, block)`` (several if replicated)."""
        op = self._op(operand)
        shape = self.tile_shape(op)
        for name, v, hi in (("row", row, shape[0]), ("col", col, shape[1]),
                            ("block", block, shape[2])):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < hi:
                raise LaneItemError(f"{self.name} operand {op}: {name} {v!r} out of range "
                                    f"0..{hi - 1}")
        want = row + shape[0] * col + shape[0] * shape[1] * block
        lay = self.tv_layout(op)
        per_item = 4 if (self.sparse and op in ("A", "K")) else 1
        vals = lay.values().reshape(-1)
        lanes = lay[0].size()
        out = []
        for flat, v in enumerate(vals):
            if v == want:
                lane, it = flat % lanes, flat // lanes
                out.append((lane, it // per_item))
        return out

    # ---- presentation -----------------------------------------------------------------
    def type_label(self, operand: str) -> str:
        op = self._op(operand)
        t = {"A": self.a_type, "B": self.b_type, "C": self.acc_type, "D": self.out_type,
             "K": "index"}[op]
        return DTYPE_LABELS.get(t, t)

    def builtin_signature(self) -> Optional[str]:
        if self.builtin is None:
            return None
        ret = self.builtin_return.type_str() if self.builtin_return else "void"
        args = ", ".join(p.type_str() for p in self.builtin_params)
        return f"{ret} {self.builtin}({args})"

    def summary(self) -> Dict[str, object]:
        """The instruction's facts as a plain dict (for printing / JSON)."""
        return {
            "name": self.name, "family": self.family, "kind": self.kind,
            "M": self.m, "N": self.n, "K": self.k, "blocks": self.blocks,
            "a_type": self.a_type, "b_type": self.b_type, "acc_type": self.acc_type,
            "d_type": self.out_type, "cycles": self.cycles, "passes": self.passes,
            "flops": self.flops, "wave_size": self.wave_size,
            "gprs": {op: self.gprs(op) for op in self.operands},
            "builtin": self.builtin_signature(), "status": self.status,
            "source": self.source, "notes": self.notes,
            "layouts": {op: str(self.tv_layout(op)) for op in self.operands},
        }
