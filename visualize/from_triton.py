"""``layoutalg tv --from-triton`` / ``layoutalg banks --from-triton``: layouts pasted from a
Triton TTGIR dump, checked and drawn (the shell side of :mod:`layoutalg.interop.ttgir`)."""

from __future__ import annotations

import argparse
from typing import Any, List, Optional

EXIT_OK, EXIT_FAIL = 0, 1


def add_arguments(p: argparse.ArgumentParser, *, lds: bool = False) -> None:
    """The options both commands share (and ``--lds-from-triton`` for banks)."""
    p.add_argument("--from-triton", metavar="ATTR", help="a distributed layout attribute from "
                   "a TTGIR dump, e.g. '#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 8}>' "
                   "(paste the '#mma = ...' line too); replaces THR/VAL or ACCESS")
    if not lds:                                # banks has its own --arch
        p.add_argument("--arch", default="gfx942", help="target whose Triton layout code and "
                       "instruction lane maps are used (default gfx942)")
    if lds:
        p.add_argument("--lds-from-triton", metavar="ATTR", help="the shared layout attribute "
                       "(e.g. '#ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, "
                       "order = [1, 0]}>'); replaces --lds")
    p.add_argument("--shape", metavar="M,N", help="the tensor shape the attribute lays out "
                   "(default: one instruction tile for MFMA/WMMA encodings)")


def _shape(args: argparse.Namespace, attr: Any) -> List[int]:
    from .cli import UsageError
    if args.shape:
        try:
            return [int(x) for x in args.shape.split(",")]
        except ValueError:
            raise UsageError(f"--shape {args.shape!r}: expected integers like 128,64") from None
    par = attr.get("parent", attr)
    if par.get("kind") == "amd_mfma" or par.get("kind") == "amd_wmma":
        m, n, k = (par.get("instrShape") or [16, 16, 16])[:3]
        op = attr.get("opIdx")
        return [m, k] if op == 0 else [k, n] if op == 1 else [m, n]
    raise UsageError(f"#ttg.{attr['kind']} needs --shape M,N")


def _read(text: str, args: argparse.Namespace) -> Any:
    from layoutalg.interop.ttgir import from_ttgir, parse_attribute
    attr = parse_attribute(text)
    shape = _shape(args, attr)
    return attr, shape, from_ttgir(attr, shape, arch=args.arch)


def cmd_tv(args: argparse.Namespace) -> int:
    from layoutalg import TVLayout
    from layoutalg.interop.ttgir import instruction_check
    from .cli import UsageError, _write, tv_table
    from .tv_diagram import draw_tv
    attr, shape, tv = _read(args.from_triton, args)
    if not isinstance(tv, TVLayout):
        raise UsageError(f"#ttg.{attr['kind']} is a shared layout: use 'layoutalg banks "
                         "--lds-from-triton' (or 'layoutalg show')")
    print(f"triton   #ttg.{attr['kind']} on {shape} ({args.arch})")
    print(f"layout_tv {tv.layout_tv}   ((thread, value) -> column-major tile index; thread = "
          "lane + wave_size * warp)")
    print(tv_table(tv.layout_tv, tuple(shape[:2])))
    code = EXIT_OK
    par = attr.get("parent", attr)
    if par.get("kind") in ("amd_mfma", "amd_wmma"):
        status, msg = instruction_check(attr, args.arch)
        print(f"lane map vs mfma_specs: {status}: {msg}")
        code = EXIT_FAIL if status == "differs" else EXIT_OK
    if args.svg or args.png:
        w = _write(draw_tv((tuple(shape[:2]), tv.layout_tv), max_cells=args.max_cells), args)
        if w != EXIT_OK:
            return w
    return code


def banks_inputs(args: argparse.Namespace, access: Optional[Any], lds: Optional[Any]):
    """``(access, lds)`` with the Triton attributes read in place of ACCESS / --lds."""
    from .cli import UsageError
    if args.from_triton:
        attr, shape, tv = _read(args.from_triton, args)
        if not hasattr(tv, "layout_tv"):
            raise UsageError("--from-triton takes the distributed (register) layout; pass the "
                             "shared one with --lds-from-triton")
        print(f"access   #ttg.{attr['kind']} on {shape}: {tv.layout_tv}")
        access = tv.layout_tv
    if args.lds_from_triton:
        attr, shape, lds = _read(args.lds_from_triton, args)
        print(f"lds      #ttg.{attr['kind']} on {shape}: {lds}")
    if access is None:
        raise UsageError("banks needs ACCESS or --from-triton")
    return access, lds
