"""``layoutalg mfma list|show``: print the instruction table of a target or one instruction's
facts and lane maps.

    layoutalg mfma list --arch gfx942
    layoutalg mfma show v_mfma_f32_16x16x16_f16 --arch gfx942 [--operand A] [--json]
    layoutalg mfma show v_mfma_f32_16x16x16_f16 --arch gfx942 --svg m.svg [--png m.png]

Drawing uses :mod:`visualize`, imported on first use only (as ``InstructionSpec._repr_svg_``
does), so this package keeps depending on nothing above it.

Errors are :class:`layoutalg.errors.LayoutError` subclasses; ``layoutalg.cli`` turns them into
exit code 2 with the message on stderr.
"""

from __future__ import annotations

import json
import sys
from typing import List, Optional

__all__ = ["register", "format_table", "format_instruction"]


def register(subparsers) -> None:
    p = subparsers.add_parser("mfma", help="AMD matrix-core instructions (MFMA/SMFMAC/WMMA)",
                              description="List a target's matrix instructions or show one "
                                          "instruction's shapes, types, builtin and lane maps.")
    sub = p.add_subparsers(dest="mfma_command", metavar="SUBCOMMAND")
    lp = sub.add_parser("list", help="the instruction table of a target")
    lp.add_argument("--arch", required=True, help="gfx target, e.g. gfx942")
    lp.add_argument("--wave", type=int, default=None, help="wave size (RDNA: 32 or 64)")
    lp.add_argument("--json", action="store_true", help="machine-readable output")
    lp.set_defaults(func=_cmd_list)
    sp = sub.add_parser("show", help="one instruction's facts and lane maps")
    sp.add_argument("name", help="ISA mnemonic, e.g. v_mfma_f32_16x16x16_f16")
    sp.add_argument("--arch", required=True, help="gfx target, e.g. gfx942")
    sp.add_argument("--wave", type=int, default=None, help="wave size (RDNA: 32 or 64)")
    sp.add_argument("--operand", action="append", default=None,
                    help="only these operands (A, B, C, D, K); repeatable")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    g = sp.add_argument_group("diagram output (the A, B and C/D lane maps in one picture)")
    g.add_argument("--svg", metavar="FILE", help="write the diagram as SVG")
    g.add_argument("--png", metavar="FILE", help="write the diagram as PNG (needs cairosvg, "
                   "rsvg-convert or chromium)")
    g.add_argument("--scale", type=float, default=None, help="PNG pixels per SVG unit")
    g.add_argument("--highlight", metavar="LANES", help="e.g. 0,5,8-11: others are faded")
    sp.set_defaults(func=_cmd_show)
    pp = sub.add_parser("preshuffle", help="an operand stored in MFMA fragment order (the "
                        "preshuffled B layout): print it, draw which lane loads each element")
    pp.add_argument("name", help="16x16x16 | 32x32x8 (f16/bf16) | 16x16x32 | 32x32x16 "
                    "(fp8/bf8), with --dtype, or a full MFMA name")
    pp.add_argument("--arch", default="gfx942", help="gfx target (default gfx942)")
    pp.add_argument("--dtype", default="f16", help="f16 | bf16 | fp8 (E4M3 FNUZ) | bf8 (E5M2 "
                    "FNUZ) (default f16)")
    pp.add_argument("--k", type=int, default=64, help="rows K of B[K, N] (default 64)")
    pp.add_argument("--n", type=int, default=32, help="columns N of B[K, N] (default 32)")
    g = pp.add_argument_group("diagram output (rows k, columns n, colour = lane of the load)")
    g.add_argument("--svg", metavar="FILE", help="write the diagram as SVG")
    g.add_argument("--png", metavar="FILE", help="write the diagram as PNG")
    g.add_argument("--scale", type=float, default=None, help="PNG pixels per SVG unit")
    pp.set_defaults(func=_cmd_preshuffle)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _ops_label(s) -> str:
    if s.a_type == s.b_type:
        ab = s.a_type
    else:
        ab = f"{s.a_type}*{s.b_type}"
    return f"{ab}->{s.out_type}"


def format_table(arch: str, specs) -> str:
    from .arch import target
    t = target(arch)
    rows = [("instruction", "MxNxK", "blk", "types", "cyc", "FLOP/cyc", "A/B/C vgpr", "status",
             "clang builtin")]
    for s in specs:
        gprs = f"{s.gprs('A')}/{s.gprs('B')}/{s.gprs('D')}"
        rate = str(s.flops // s.cycles) if s.cycles else "-"
        rows.append((s.name, f"{s.m}x{s.n}x{s.k}", str(s.blocks), _ops_label(s),
                     str(s.cycles or "-"), rate, gprs, s.status,
                     s.builtin.replace("__builtin_amdgcn_", "") if s.builtin else "(none)"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{t.name} ({t.family}, {t.marketing}): {len(specs)} matrix instructions, "
             f"wave{specs[0].wave_size if specs else t.wave_size}"]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("status: verified = equal to AMD's Matrix Instruction Calculator at every "
                 "entry (tests); documented = public ISA/LLVM facts; inferred = derived rule")
    return "\n".join(lines)


def _cell(s, op: str, coord) -> str:
    r, c, b = coord
    return f"{r},{c}" + (f"/{b}" if s.blocks > 1 else "")


def format_lane_map(s, op: str) -> str:
    """One line per lane: ``lane: item0 item1 ...`` with ``row,col[/block]`` cells."""
    rows, cols, blocks = s.tile_shape(op)
    sparse = s.sparse and op in ("A", "K")
    head = {"A": "A[i][k]: cells are i,k", "B": "B[k][j]: cells are k,j",
            "C": "C[i][j]: cells are i,j", "D": "D[i][j]: cells are i,j",
            "K": "compression index of A: cells are i,k0-k3"}[op]
    if s.blocks > 1:
        head += "/block"
    if sparse:
        head += " (slot s holds 2 of the 4 candidate k, chosen by the index)"
    lines = [f"  {op}: {head}"]
    lm = s.lane_map(op)
    cells: List[List[str]] = []
    for lane in range(s.wave_size):
        if sparse:
            row = []
            for cands in lm[lane]:
                (r, c0, b), c1 = cands[0], cands[-1][1]
                row.append(f"{r},{c0}-{c1}" + (f"/{b}" if s.blocks > 1 else ""))
        else:
            row = [_cell(s, op, x) for x in lm[lane]]
        cells.append(row)
    width = max(len(c) for row in cells for c in row)
    n_items = len(cells[0])
    label = "slot" if sparse else "item"
    lines.append("    lane | " + " ".join(f"{label}{e}".rjust(width) for e in range(n_items)))
    for lane, row in enumerate(cells):
        lines.append(f"    {lane:4d} | " + " ".join(c.rjust(width) for c in row))
    return "\n".join(lines)


def format_instruction(s, operands: Optional[List[str]] = None) -> str:
    lines = [f"{s.name} ({s.family}, {s.kind}, wave{s.wave_size}) [{s.status}]",
             f"  D[{s.m}x{s.n}] += A[{s.m}x{s.k}] * B[{s.k}x{s.n}]"
             + (f", {s.blocks} blocks" if s.blocks > 1 else ""),
             f"  types: A {s.type_label('A')}, B {s.type_label('B')}, "
             f"acc {s.type_label('C')}, D {s.type_label('D')}",
             f"  cycles {s.cycles if s.cycles is not None else '-'}"
             + (f", passes {s.passes}" if s.passes else "") + f", FLOPs {s.flops}",
             "  VGPRs per lane: " + ", ".join(f"{op} {s.gprs(op)}" for op in s.operands),
             f"  builtin: {s.builtin_signature() or '(no clang builtin)'}"]
    if s.notes:
        lines.append(f"  notes: {s.notes}")
    lines.append(f"  source: {s.source}")
    lines.append("  TV layouts ((lane, item) -> column-major index of the (rows, cols, blocks) "
                 "tile):")
    for op in s.operands:
        shape = s.tile_shape(op)
        items = f"{s.items(op)} slots x 4 candidates" if (s.sparse and op in "AK") \
            else f"{s.items(op)} items"
        lines.append(f"    {op}: {s.tv_layout(op)}  tile {shape}, {items}")
    for op in (s.operands if operands is None else operands):
        lines.append(format_lane_map(s, op))
    return "\n".join(lines)


def _emit(text: str) -> None:
    """Print, tolerating a closed pipe (``layoutalg mfma list ... | head``)."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _cmd_list(args) -> int:
    from . import instructions
    specs = instructions(args.arch, args.wave)
    if args.json:
        _emit(json.dumps([s.summary() for s in specs], indent=1))
    else:
        _emit(format_table(args.arch, specs))
    return 0


def _cmd_show(args) -> int:
    from . import lookup
    s = lookup(args.arch, args.name, args.wave)
    ops = None
    if args.operand:
        ops = [s._op(o) for o in args.operand]
    draw = None
    if args.svg or args.png:  # bad drawing options fail before anything is printed
        draw = _drawer(s, args)
        if isinstance(draw, int):
            return draw
    if args.json:
        out = s.summary()
        out["lane_maps"] = {op: s.lane_map(op) for op in (ops or s.operands)}
        _emit(json.dumps(out))
    else:
        _emit(format_instruction(s, ops))
    return draw() if draw else 0


def _drawer(s, args):
    """A callable that writes the diagram (returning an exit code), or an exit code now."""
    try:
        from visualize import draw_mma
        from visualize.cli import UsageError, threads_arg, warn_outside_threads, write_diagram
    except ImportError:
        print("layoutalg mfma show: drawing needs the visualize package, which is not "
              "installed", file=sys.stderr)
        return 3
    try:
        lanes = threads_arg(args.highlight)
    except UsageError as e:
        print(f"layoutalg mfma show: error: {e}", file=sys.stderr)
        return 2
    warn_outside_threads(args, "--highlight", lanes, s.wave_size)
    return lambda: write_diagram(draw_mma(s, highlight=lanes, arch=args.arch), args)


def _cmd_preshuffle(args) -> int:
    from layoutalg.errors import LayoutError
    from .preshuffle import preshuffle_geometry, preshuffle_layout
    try:
        g = preshuffle_geometry(args.k, args.n, args.name, args.dtype, args.arch)
        lay = preshuffle_layout(args.k, args.n, args.name, args.dtype, args.arch)
    except LayoutError as e:
        print(f"layoutalg mfma preshuffle: error: {e}", file=sys.stderr)
        return 2
    _emit(f"{g.instruction}: B[{g.k}, {g.n}] in fragment order, padded to "
          f"[{g.k_padded}, {g.n_padded}]\n"
          f"layout (k, n) -> offset: {lay}\n"
          f"lane l = n % {g.tile_n} + {g.tile_n} * ((k % {g.k_block}) // {g.vec}) loads "
          f"{g.vec} consecutive k ({g.vec * g.elem_bytes} bytes, {g.kpack} MFMAs of "
          f"{g.items} k each); a wave loads {64 * g.vec * g.elem_bytes} contiguous bytes per "
          f"(n tile, k block)")
    if not (args.svg or args.png):
        return 0
    try:
        from visualize import draw_preshuffle
        from visualize.cli import write_diagram
    except ImportError:
        print("layoutalg mfma preshuffle: drawing needs the visualize package, which is not "
              "installed", file=sys.stderr)
        return 3
    return write_diagram(draw_preshuffle(lay, g.vec, title=f"{g.instruction} B, preshuffled: "
                                                             f"{lay}"), args)
