"""``layoutalg show | tv | banks``: print layouts and draw them from the shell.

(``layoutalg demo`` is registered by :mod:`layoutalg.cli`, which also runs the kernel steps.)

Each command prints a text view first (so it is useful over ssh and in logs) and writes a
diagram only when asked (``--svg F`` / ``--png F``).  Exit codes (see :mod:`layoutalg.cli`):
0 ok, 1 a check failed (bank conflicts found; a demo step failed), 2 bad input (a malformed
layout, an unwritable file), 3 a tool is missing (no SVG rasterizer for ``--png``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, List, Optional

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TOOL = 0, 1, 2, 3

SYNTAX_HELP = """\
LAYOUT syntax is CuTe's print syntax (quote it in the shell):
  "(4,8):(8,1)"                  4x8, row-major
  "((2,4),8):((1,16),2)"         hierarchical modes
  "Sw<3,3,3> o 0 o (8,64):(64,1)" a swizzled layout (swizzle o offset o layout)
"""


class UsageError(Exception):
    """Bad input: printed without a traceback, exit code 2."""


def _parse_layout(text: str, what: str = "LAYOUT", allow_composed: bool = True) -> Any:
    from layoutalg import ComposedLayout, Layout, parse
    from layoutalg.errors import LayoutError
    try:
        obj = parse(text)
    except LayoutError as e:
        raise UsageError(f"{what} {text!r} is not a layout: {e}\n{SYNTAX_HELP}") from None
    if text.strip().startswith("<"):
        raise UsageError(f"{what} {text!r} is a tiler, not a layout (shape:stride)\n"
                         f"{SYNTAX_HELP}")
    if isinstance(obj, int) or isinstance(obj, tuple) and all(
            isinstance(x, int) for x in _leaves(obj)):
        # a bare shape like "(4,8)" is a compact column-major layout, as in CuTe make_layout
        return Layout(obj)
    ok = (Layout, ComposedLayout) if allow_composed else (Layout,)
    if not isinstance(obj, ok):
        raise UsageError(f"{what} {text!r} parses to {type(obj).__name__}, not a layout "
                         f"(shape:stride)\n{SYNTAX_HELP}")
    return obj


def _leaves(t: Any):
    if isinstance(t, tuple):
        for x in t:
            yield from _leaves(x)
    else:
        yield t


def warn_outside_threads(args: argparse.Namespace, option: str,
                         threads: Optional[List[int]], count: int) -> None:
    """Threads the diagram does not have would be ignored silently: say so."""
    bad = sorted({t for t in threads or () if not 0 <= t < count})
    if bad:
        shown = ", ".join(map(str, bad[:8])) + (", ..." if len(bad) > 8 else "")
        print(f"layoutalg {args.command}: warning: {option} {shown}: not among the {count} "
              f"threads (0-{count - 1}); ignored", file=sys.stderr)


def threads_arg(text: Optional[str]) -> Optional[List[int]]:
    """'0,5,8-11' -> [0, 5, 8, 9, 10, 11]."""
    if text is None:
        return None
    out: List[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-")
                out += list(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise UsageError(f"thread list {text!r}: expected e.g. '0,5,8-11'") from None
    return out


def _add_output(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("diagram output")
    g.add_argument("--svg", metavar="FILE", help="write the diagram as SVG")
    g.add_argument("--png", metavar="FILE", help="write the diagram as PNG (needs cairosvg, "
                   "rsvg-convert or chromium)")
    g.add_argument("--scale", type=float, default=None,
                   help="PNG pixels per SVG unit (default 2, less for very large diagrams)")


def write_diagram(diagram: Any, args: argparse.Namespace) -> int:
    """Write the files ``--svg`` / ``--png`` ask for; returns an exit code (3: no rasterizer)."""
    return _write(diagram, args)


def _write(diagram: Any, args: argparse.Namespace) -> int:
    """Write the requested files; returns an exit code."""
    from layoutalg.progress import stage
    from .raster import RasterizerMissing
    for path, kind in ((args.svg, "svg"), (args.png, "png")):
        if not path:
            continue
        try:
            if kind == "png":
                with stage(f"rasterizing {path} ({diagram.width:.0f}x{diagram.height:.0f} "
                           "SVG units)"):
                    diagram.save(path, scale=args.scale)
            else:
                diagram.save(path)
        except RasterizerMissing as e:
            print(f"layoutalg {args.command}: {e}", file=sys.stderr)
            return EXIT_TOOL
        except OSError as e:
            print(f"layoutalg {args.command}: cannot write {path}: {e.strerror or e}",
                  file=sys.stderr)
            return EXIT_USAGE
        print(f"wrote {path}")
    for n in getattr(diagram, "notes", []):
        print(f"note: {n}")
    return EXIT_OK


def _drawing(cells: int, max_cells: int):
    """A stderr stage line for drawings big enough to take a while (every cell labelled)."""
    import contextlib
    from layoutalg.progress import stage
    if min(cells, max_cells) <= 4096:
        return contextlib.nullcontext()
    return stage(f"drawing {min(cells, max_cells)} labelled cells")


def _guard(fn):
    """Run a command, turning bad input into a clear message and exit code 2."""
    def run(args: argparse.Namespace) -> int:
        from layoutalg.errors import LayoutError
        try:
            return fn(args)
        except UsageError as e:
            print(f"layoutalg {args.command}: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except LayoutError as e:
            print(f"layoutalg {args.command}: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    return run


# ---- show -------------------------------------------------------------------------------------

def cmd_show(args: argparse.Namespace) -> int:
    from layoutalg.inttuple import flatten
    from .layout_diagram import draw_layout, offset_table
    L = _parse_layout(args.layout)
    print(f"layout   {L}")
    static = all(type(s) is int for s in flatten(L.shape))
    if not static:
        print("(symbolic shape: no table; substitute integers to draw it)")
        if args.svg or args.png:
            raise UsageError(f"cannot draw {L}: its shape is symbolic")
        return EXIT_OK
    print(f"size {L.size()}, cosize {L.cosize()}, rank {L.rank}, depth {L.depth}")
    print(offset_table(L, max_cols=args.max_cols))
    if args.svg or args.png:
        with _drawing(L.size(), args.max_cells):
            d = draw_layout(L, max_cells=args.max_cells)
        return _write(d, args)
    return EXIT_OK


# ---- tv ---------------------------------------------------------------------------------------

def tv_table(layout_tv: Any, tile: tuple, max_cols: int = 16, max_rows: int = 32) -> str:
    """Text table of the tile: 'T<t>V<v>' per cell (elided beyond the limits)."""
    from .tv_diagram import tv_owners
    owners, _, _, _ = tv_owners(layout_tv, tile)
    M, N = tile
    cols = list(range(min(N, max_cols)))
    rows = list(range(min(M, max_rows)))
    cells = {(i, j): (f"T{owners[(i, j)][0][0]}V{owners[(i, j)][0][1]}"
                      if (i, j) in owners else ".") for i in rows for j in cols}
    w = max(len(c) for c in cells.values()) + 1
    hw = len(str(M - 1)) + 1
    out = [" " * hw + "".join(str(j).rjust(w) for j in cols) + (" .." if N > len(cols) else "")]
    for i in rows:
        out.append(str(i).rjust(hw) + "".join(cells[(i, j)].rjust(w) for j in cols)
                   + (" .." if N > len(cols) else ""))
    if M > len(rows):
        out.append("..".rjust(hw))
    return "\n".join(out)


def cmd_tv(args: argparse.Namespace) -> int:
    from layoutalg import Layout, make_layout_tv
    from .tv_diagram import draw_tv
    if args.from_triton:                       # a layout pasted from a TTGIR dump
        from .from_triton import cmd_tv as tv_from_triton
        return tv_from_triton(args)
    if args.thr is None:
        raise UsageError("tv needs THR (or --from-triton ATTR)")
    highlight, isolate = threads_arg(args.highlight), threads_arg(args.isolate)
    thr = _parse_layout(args.thr, "THR", allow_composed=False)
    val = _parse_layout(args.val, "VAL", allow_composed=False) if args.val else Layout(1)
    tiler, tv = make_layout_tv(thr, val)
    M, N = (tuple(tiler) + (1,))[:2]
    print(f"threads  {thr}  ({thr.size()})")
    print(f"values   {val}  ({val.size()} per thread)")
    print(f"tile     {M}x{N}")
    print(f"layout_tv {tv}   ((thread, value) -> column-major tile index)")
    print(tv_table(tv, (M, N)))
    nthr = thr.size()
    warn_outside_threads(args, "--highlight", highlight, nthr)
    warn_outside_threads(args, "--isolate", isolate, nthr)
    if args.svg or args.png:
        with _drawing(M * N, args.max_cells):
            d = draw_tv((tiler, tv), highlight=highlight, isolate=isolate,
                        max_cells=args.max_cells)
        return _write(d, args)
    return EXIT_OK


# ---- banks ------------------------------------------------------------------------------------

def cmd_banks(args: argparse.Namespace) -> int:
    from .bank_diagram import draw_banks
    access = _parse_layout(args.access, "ACCESS") if args.access else None
    lds = _parse_layout(args.lds, "--lds") if args.lds else None
    if args.from_triton or args.lds_from_triton:   # layouts pasted from a TTGIR dump
        from .from_triton import banks_inputs
        access, lds = banks_inputs(args, access, lds)
    elif access is None:
        raise UsageError("banks needs ACCESS (or --from-triton ATTR)")
    try:
        from layoutalg.verify import bank_conflicts  # type: ignore[attr-defined]
    except ImportError:
        print("layoutalg banks: the verifier (layoutalg.verify.bank_conflicts) is not "
              "installed", file=sys.stderr)
        return EXIT_TOOL
    if args.suggest:
        return _suggest(access, lds, args)
    kw = dict(arch=args.arch, instruction=args.instruction, elem_bytes=args.elem_bytes)
    if lds is not None:
        kw["lds"] = lds
    report = bank_conflicts(access, **kw)
    print(report)
    code = EXIT_OK if report.holds else EXIT_FAIL
    if args.svg or args.png:
        w = _write(draw_banks(access, lds=lds, report=report), args)
        if w != EXIT_OK:
            return w
    print(f"{'PASS' if report.holds else 'FAIL'}: {args.instruction} on {args.arch} is "
          f"{'free of bank conflicts' if report.holds else 'bank-conflicted'} "
          f"({report.method}{'' if report.holds else ', exit 1'})")
    return code


def _tile_arg(text: Optional[str]) -> tuple:
    if not text:
        raise UsageError("--suggest needs --tile ROWSxCOLS: the LDS tile ACCESS's offsets "
                         "index (e.g. --tile 64x64 for a row-major 64x64 tile)")
    try:
        r, c = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--tile {text!r}: expected ROWSxCOLS, e.g. 64x64") from None
    if r < 1 or c < 1:
        raise UsageError(f"--tile {text!r}: rows and columns must be positive")
    return r, c


def _suggest(access: Any, lds: Any, args: argparse.Namespace) -> int:
    """Search a swizzle and a padding of the --tile that make ACCESS conflict-free; print each
    proved layout with the ``layoutalg banks`` command that re-checks it."""
    from layoutalg import Layout, composition
    from layoutalg.errors import LayoutError
    from layoutalg.verify import suggest_padding, suggest_swizzle
    if lds is not None:
        raise UsageError("--suggest searches the LDS layout itself; drop --lds (ACCESS gives "
                         "offsets into the plain --tile)")
    rows, cols = _tile_arg(args.tile)
    if access.cosize() > rows * cols:
        raise UsageError(f"ACCESS reaches offset {access.cosize() - 1}, outside the "
                         f"{rows}x{cols} --tile")
    # offsets of the plain tile -> its column-major index (what --lds layouts take, CuTe's
    # convention): row-major offset r*cols + c is index r + c*rows
    to_index = Layout((cols, rows), (rows, 1)) if args.major == "row" else Layout(rows * cols)
    try:
        idx = composition(to_index, access)
    except LayoutError as e:
        raise UsageError(f"ACCESS cannot be re-expressed as indices of the {rows}x{cols} tile "
                         f"({e}); use layoutalg.verify.suggest_swizzle from Python") from None
    side = "write" if args.instruction.startswith("ds_write") else "read"
    kw = {side: idx, f"{side}_instruction": args.instruction, "elem_bytes": args.elem_bytes,
          "arch": args.arch, "major": args.major}
    found = 0
    for fn in (suggest_swizzle, suggest_padding):
        try:
            res = fn((rows, cols), **kw)
        except LayoutError as e:  # e.g. a tile that is not a power of two for swizzles
            print(f"{fn.__name__}: not applicable: {e}")
            continue
        print(res)
        if res.holds:
            found += 1
            print(f"  check it: layoutalg banks \"{idx}\" --lds \"{res.lds}\" --instruction "
                  f"{args.instruction} --elem-bytes {args.elem_bytes} --arch {args.arch}")
    print(f"{'PASS' if found else 'FAIL'}: {found} proved conflict-free LDS layout(s) for "
          f"{args.instruction} on a {rows}x{cols} {args.major}-major tile")
    return EXIT_OK if found else EXIT_FAIL


# ---- registration -----------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "show", help="print a layout and its offset table; draw it",
        description="Print LAYOUT (CuTe syntax), its size/cosize and the offset of every "
                    "(row, column); optionally draw it (rows down, columns right, shaded by "
                    "offset).", epilog=SYNTAX_HELP + "\nexample: layoutalg show "
                    "\"(4,(2,4)):(2,(1,8))\" --svg layout.svg", formatter_class=fmt)
    p.add_argument("layout", metavar="LAYOUT", help="e.g. \"(4,8):(8,1)\"")
    p.add_argument("--max-cols", type=int, default=32, help="table columns before eliding")
    p.add_argument("--max-cells", type=int, default=4096,
                   help="above this many cells draw an overview plus a labelled 32x32 detail")
    _add_output(p)
    p.set_defaults(func=_guard(cmd_show))

    p = subparsers.add_parser(
        "tv", help="a TV layout from thread and value layouts (CuTe make_layout_tv)",
        description="Build the TV layout of threads THR each owning a VAL block of values "
                    "(CuTe make_layout_tv / raked_product), print which thread and value sit in "
                    "each tile cell, and optionally draw it (T<thread> over V<value>, one "
                    "colour per thread).", epilog=SYNTAX_HELP + "\nexample: layoutalg tv "
                    "\"(16,4):(4,1)\" \"(1,8)\" --highlight 0-3 --png tv.png",
        formatter_class=fmt)
    p.add_argument("thr", metavar="THR", nargs="?", help="thread layout, e.g. "
                   "\"(16,4):(4,1)\"")
    p.add_argument("val", metavar="VAL", nargs="?", help="value layout per thread, e.g. "
                   "\"(1,8)\" (default: one value)")
    p.add_argument("--highlight", metavar="THREADS", help="e.g. 0,5,8-11: others are faded")
    p.add_argument("--isolate", metavar="THREADS", help="draw only these threads")
    p.add_argument("--max-cells", type=int, default=4096,
                   help="above this many cells draw an overview plus a labelled 32x32 detail")
    from .from_triton import add_arguments as add_triton_arguments
    add_triton_arguments(p)
    _add_output(p)
    p.set_defaults(func=_guard(cmd_tv))

    p = subparsers.add_parser(
        "banks", help="verify an LDS access for bank conflicts and draw it",
        description="Prove or refute bank-conflict freedom of ACCESS, a TV layout "
                    "(lane, value) -> element offset, under the per-phase LDS model of "
                    "--instruction on --arch, and optionally draw the banks of every phase "
                    "(conflicting lanes marked). Exit code 1 when conflicts are found. "
                    "--suggest searches a swizzle and a padding that fix them.",
        epilog=SYNTAX_HELP + "\nexamples:\n  layoutalg banks \"(64,8):(64,1)\"      "
               "# 8-way conflict: every lane hits banks 0-3\n  layoutalg banks "
               "\"Sw<3,3,3> o 0 o (64,8):(64,1)\" --png fixed.png\n  layoutalg banks "
               "\"(64,8):(64,1)\" --suggest --tile 64x64   # a proved swizzle and padding",
        formatter_class=fmt)
    p.add_argument("access", metavar="ACCESS", nargs="?", help="e.g. \"(64,8):(64,1)\": (lane, value) -> "
                   "element offset in LDS, or with --lds -> index into the --lds layout")
    p.add_argument("--lds", metavar="LAYOUT", help="the LDS layout (a swizzle or padding). "
                   "NOTE: this changes what ACCESS means: ACCESS then gives the (column-major) "
                   "INDEX of each element in LDS's domain, and LDS maps it to the offset, "
                   "i.e. the address is LDS(ACCESS(lane, value))")
    p.add_argument("--suggest", action="store_true", help="search a swizzle and a padding of "
                   "--tile that make ACCESS conflict-free; each is proved and printed with the "
                   "command that re-checks it (exit 0 if one is found, 1 if none)")
    p.add_argument("--tile", metavar="ROWSxCOLS", help="with --suggest: the LDS tile ACCESS's "
                   "offsets index, e.g. 64x64")
    p.add_argument("--major", default="row", choices=("row", "col"),
                   help="with --suggest: the tile's storage order (default row)")
    p.add_argument("--arch", default="gfx942", help="target (default gfx942)")
    p.add_argument("--instruction", default="ds_read_b128",
                   help="ds_read_b32/b64/b128, ds_write_... (default ds_read_b128)")
    p.add_argument("--elem-bytes", type=int, default=2, help="element size in bytes (default 2)")
    add_triton_arguments(p, lds=True)
    _add_output(p)
    p.set_defaults(func=_guard(cmd_banks))

