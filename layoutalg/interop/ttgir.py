"""Layout attributes pasted from a Triton TTGIR dump (``#ttg.amd_mfma<{...}>`` and friends).

:func:`parse_attribute` reads the attribute syntax (with ``#alias = ...`` lines of a dump
resolved); :func:`from_ttgir` turns one attribute and a tensor shape into a layoutalg layout:

============================  ===============================================  ==============
attribute                     result                                           needs Triton
============================  ===============================================  ==============
``#ttg.linear<{...}>``        TVLayout (from its bases)                        no
``#ttg.swizzled_shared<..>``  LDS layout (Triton's formula, ``Sw o 0 o L``)    no
``#ttg.amd_mfma``/``amd_wmma``  TVLayout, through Gluon's ``to_linear_layout``  yes
``#ttg.dot_op<{...}>``        TVLayout of the operand (parent mfma/wmma)       yes
``#ttg.blocked<{...}>``       TVLayout                                         yes
============================  ===============================================  ==============

:func:`instruction_check` rebuilds an MFMA/WMMA encoding (or a dot operand of one) for a single
warp and a single instruction tile and compares it with ``mfma_specs`` at every lane and item
(``mfma_specs`` is imported lazily: it depends on layoutalg).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import InteropError
from .triton import from_linear_layout

__all__ = ["parse_attribute", "from_ttgir", "instruction_check", "ARCH_VERSIONS"]

_TOK = re.compile(r"\s*(#[A-Za-z_][\w.]*|-?\d+|[A-Za-z_][\w.]*|:\+|.)")
ARCH_VERSIONS = {"gfx908": 1, "gfx90a": 2, "gfx942": 3, "gfx950": 4, "gfx1100": 1,
                 "gfx1101": 1, "gfx1102": 1, "gfx1200": 2, "gfx1201": 2}


class _P:
    def __init__(self, text: str, aliases: Dict[str, Any]) -> None:
        self.text, self.aliases = text, aliases
        self.toks = [m.group(1) for m in _TOK.finditer(text) if m.group(1).strip()]
        self.i = 0

    def peek(self) -> Optional[str]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def eat(self, want: Optional[str] = None) -> str:
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise InteropError(f"cannot read the TTGIR attribute {self.text.strip()!r}: expected "
                               f"{want or 'more'} at token {self.i}, got {t or 'end of text'}")
        self.i += 1
        return t

    def value(self) -> Any:
        t = self.peek()
        if t == "[":
            self.eat("[")
            items: List[Any] = []
            while self.peek() != "]":
                items.append(self.value())
                if self.peek() == ",":
                    self.eat(",")
            self.eat("]")
            return items
        if t == "{":
            return self.params()
        if t is not None and t.startswith("#"):
            return self.attribute()
        t = self.eat()
        if re.fullmatch(r"-?\d+", t):
            return int(t)
        if t in ("true", "false"):
            return t == "true"
        return t

    def params(self) -> Dict[str, Any]:
        self.eat("{")
        out: Dict[str, Any] = {}
        while self.peek() != "}":
            key = self.eat()
            self.eat("=")
            out[key] = self.value()
            if self.peek() == ",":
                self.eat(",")
        self.eat("}")
        return out

    def attribute(self) -> Dict[str, Any]:
        name = self.eat()
        if not name.startswith("#ttg."):
            if name in self.aliases:
                return self.aliases[name]
            raise InteropError(f"unknown attribute or alias {name!r} in {self.text.strip()!r}; "
                               "paste its '#name = ...' line too")
        self.eat("<")
        params = self.params() if self.peek() == "{" else {}
        depth = 0
        while not (self.peek() == ">" and depth == 0):   # padded_shared's '[32:+4] {...}' etc.
            t = self.eat()
            depth += {"<": 1, ">": -1}.get(t, 0)
        self.eat(">")
        return {"kind": name[len("#ttg."):], **params}


def parse_attribute(text: str) -> Dict[str, Any]:
    """Read a ``#ttg.<kind><{...}>`` attribute; lines ``#name = #ttg...`` before it (a pasted
    dump) define aliases.  With only alias lines, the last one is the attribute."""
    if not isinstance(text, str) or not text.strip():
        raise InteropError("expected a TTGIR layout attribute such as "
                           "'#ttg.amd_mfma<{version = 3, warpsPerCTA = [1, 1], instrShape = "
                           "[32, 32, 8], isTransposed = false}>'")
    aliases: Dict[str, Any] = {}
    last = None
    rest = []
    for line in text.strip().splitlines():
        m = re.match(r"\s*(#\w+)\s*=\s*(#ttg\..*)$", line)
        if m:
            if "shared_memory" in m.group(2) or m.group(2).startswith("#ttg.shared_memory"):
                continue
            aliases[m.group(1)] = last = _read(m.group(2), aliases)
        elif line.strip() and not line.strip().startswith("#loc"):
            rest.append(line)
    if rest:
        return _read(" ".join(rest), aliases)
    if last is None:
        raise InteropError(f"no #ttg layout attribute in {text.strip()[:80]!r}")
    return last


def _read(text: str, aliases: Dict[str, Any]) -> Dict[str, Any]:
    p = _P(text, aliases)
    out = p.value()
    if not isinstance(out, dict) or p.peek() is not None:
        raise InteropError(f"cannot read the TTGIR attribute {text.strip()!r}")
    return out


# ---- attribute -> layout -----------------------------------------------------------------------

def from_ttgir(text_or_attr: Any, shape: Sequence[int], *, arch: str = "gfx942") -> Any:
    """The layoutalg layout of a TTGIR attribute on a tensor of ``shape`` (see the table)."""
    a = parse_attribute(text_or_attr) if isinstance(text_or_attr, str) else text_or_attr
    kind = a["kind"]
    shape = [int(s) for s in shape]
    if kind == "linear":
        bases = {k: a.get(k, []) for k in ("register", "lane", "warp", "block")}
        return from_linear_layout({**bases, "shape": shape})
    if kind == "swizzled_shared":
        return from_linear_layout({"offset": _swizzled_bases(a, shape), "shape": shape})
    if kind in ("amd_mfma", "amd_wmma", "dot_op", "blocked"):
        return from_linear_layout(_gluon_bases(a, shape, arch))
    raise InteropError(f"#ttg.{kind} is not supported; supported: linear, swizzled_shared, "
                       "amd_mfma, amd_wmma, dot_op, blocked")


def _swizzled_bases(a: Dict[str, Any], shape: Sequence[int]) -> List[List[int]]:
    """Triton's swizzled_shared offset bases for a 2-D tile (order[0] is the fastest dim):
    element (r, c) along (slow, fast) sits at ``r * n + ((c // vec) ^ ((r // perPhase) %
    maxPhase)) * vec + c % vec``; each offset bit's coordinates by inverting that formula."""
    if len(shape) != 2 or sorted(a.get("order", [])) != [0, 1]:
        raise InteropError("swizzled_shared is read for 2-D tensors with order [1, 0] or [0, 1]")
    vec, pp, mp = int(a["vec"]), int(a["perPhase"]), int(a["maxPhase"])
    fast = a["order"][0]
    n, m = shape[fast], shape[1 - fast]
    inv = {}
    for r in range(m):
        for c in range(n):
            off = r * n + (((c // vec) ^ ((r // pp) % mp)) * vec) % n + c % vec
            inv[off] = (r, c)
    if len(inv) != m * n:
        raise InteropError(f"swizzled_shared {a} does not permute a {shape} tile")
    bases = []
    bit = 1
    while bit < m * n:
        r, c = inv[bit]
        v = [0, 0]
        v[fast], v[1 - fast] = c, r
        bases.append(v)
        bit <<= 1
    return bases


def _gluon(a: Dict[str, Any], arch: str) -> Any:
    try:
        import triton.experimental.gluon.language as gl
        from triton.experimental.gluon.language import amd
    except ImportError as e:
        raise InteropError(f"#ttg.{a['kind']} is built by Triton's own layout code, which needs "
                           f"Triton installed ({e}); #ttg.linear and #ttg.swizzled_shared do not")
    k = a["kind"]
    if k == "amd_mfma":
        return amd.AMDMFMALayout(version=a["version"], instr_shape=a["instrShape"],
                                 transposed=bool(a.get("isTransposed", False)),
                                 warps_per_cta=a["warpsPerCTA"],
                                 element_bitwidth=a.get("elementBitWidth"),
                                 tiles_per_warp=a.get("tilesPerWarp"))
    if k == "amd_wmma":
        warp = (a.get("ctaLayout") or {}).get("warp", [])
        kw = dict(instr_shape=a["instrShape"]) if "instrShape" in a else {}
        return amd.AMDWMMALayout(version=a["version"], transposed=bool(a.get("isTranspose",
                                                                               False)),
                                 warp_bases=warp, **kw)
    if k == "dot_op":
        parent = a["parent"]
        if not isinstance(parent, dict):
            raise InteropError(f"dot_op parent {parent!r} is not an attribute")
        return gl.DotOperandLayout(a["opIdx"], _gluon(parent, arch), a["kWidth"])
    if k == "blocked":
        return gl.BlockedLayout(a["sizePerThread"], a["threadsPerWarp"], a["warpsPerCTA"],
                                a["order"])
    raise InteropError(f"#ttg.{k} has no Gluon equivalent here")


def _gluon_bases(a: Dict[str, Any], shape: Sequence[int], arch: str) -> Dict[str, Any]:
    lay = _gluon(a, arch)                   # first: it says so when Triton is missing
    from triton._C.libtriton import gluon_ir, ir
    ctx = ir.context()
    ir.load_dialects(ctx)
    b = gluon_ir.GluonOpBuilder(ctx, arch)
    try:
        ll = b.to_linear_layout(lay._to_ir(b), list(shape))
    except Exception as e:   # Triton reports a bad shape/encoding as a Python error
        raise InteropError(f"Triton could not lay out #ttg.{a['kind']} on {list(shape)}: "
                           f"{e}") from None
    return {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases,
            "block": ll.block_bases, "shape": ll.shape}


# ---- the lane map against mfma_specs ----------------------------------------------------------

def instruction_check(attr: Dict[str, Any], arch: str) -> Tuple[str, str]:
    """Rebuild an MFMA/WMMA encoding (or its dot operand) for one warp and one instruction tile
    and compare with ``mfma_specs``; returns ``(status, message)`` with status ``"equal"``,
    ``"k-relabelled"`` (A or B differ only by a permutation of K, harmless when both operands
    share it) or ``"differs"``.  ``isTransposed`` encodings
    hold the transposed accumulator (Triton computes ``C^T = B^T A^T``), compared as such."""
    import mfma_specs as ms                 # lazily: mfma_specs depends on layoutalg
    dot = attr if attr["kind"] == "dot_op" else None
    par = dict(attr["parent"] if dot else attr)
    if par["kind"] not in ("amd_mfma", "amd_wmma"):
        raise InteropError(f"#ttg.{par['kind']} is not an MFMA/WMMA encoding: no instruction "
                           "lane map to check")
    m, n, k = (par.get("instrShape") or [16, 16, 16])[:3]
    op = "ABC"[dot["opIdx"]] if dot else "C"
    trans = bool(par.get("isTransposed", par.get("isTranspose", False)))
    blocked = (m, n) in ((4, 64), (64, 4))   # Triton's tiles of the 16-block 4x4 MFMAs
    inst = {"A": "B", "B": "A", "C": "C"}[op] if blocked and trans else op
    shape = (4, 4) if blocked else (m, n)
    cands = [s for s in ms.instructions(arch) if (s.m, s.n, s.k) == shape + (k,)
             and s.kind in ("mfma", "wmma") and s.blocks == (16 if blocked else 1)]
    exact = [s for s in cands if dot is None or s.items(inst) == dot["kWidth"]]
    if not cands:
        return "differs", f"no {arch} instruction is {m}x{n}x{k}: nothing to check against"
    s = (exact or cands)[0]
    one = dict(par, warpsPerCTA=[1, 1])
    if par["kind"] == "amd_wmma":
        one["ctaLayout"] = {"warp": []}
    target = dict(dot, parent=one) if dot else one
    tile = {"A": [m, k], "B": [k, n], "C": [m, n]}[op]
    tv = from_ttgir(target, tile, arch=arch)
    items, have = s.items(inst), tv.layout_tv[1].size()
    what = f"{op} of {s.name}" + (" (transposed)" if trans and (op == "C" or blocked) else "")
    if have != items and not (blocked and have % items == 0):
        return "differs", (f"{what}: Triton's layout has {have} registers per lane for one "
                           f"instruction, the instruction {items}")
    bad = []
    for lane in range(s.wave_size):
        for item in range(have):
            got = tv.coord(lane, item)
            exp = (tv.coord(lane, item % items) if item >= items   # copies of the first items
                   else _expected(s, op, inst, lane, item, trans, blocked))
            if got != exp:
                bad.append((lane, item, got, exp))
    if bad:
        lane, item, got, exp = bad[0]
        hint, status = "", "differs"
        if op in "AB" and not blocked and _k_relabelling(tv, s, op):
            status = "k-relabelled"
            hint = (" - only a permutation of K (same rows/columns, each K index moved "
                    "consistently): the product is unchanged when the other operand uses the "
                    "same permutation, which Triton's A and B encodings of one dot do")
        return status, (f"{what}: lane {lane} item {item} holds {got} in Triton's layout but "
                       f"{exp} in the instruction; {len(bad)} entries differ{hint}")
    return "equal", f"{what}: equal at all {s.wave_size * have} lane/item entries"


def _expected(s: Any, op: str, inst: str, lane: int, item: int, trans: bool,
              blocked: bool) -> Tuple[int, int]:
    """Where Triton's tile must hold the element the instruction puts at (lane, item).

    One instruction tile: the instruction's own ``(row, col)`` (the accumulator transposed
    when Triton computes ``C^T = B^T A^T``).  Triton's 4x64 tile of a 16-block 4x4 MFMA puts
    block b's columns at ``col + 4b`` with A shared by the blocks; its 64x4 tile is the
    transposed form (Triton's A feeds the instruction's B, its B the instruction's A)."""
    r, c, blk = s.element(inst, lane, item)
    if not blocked:
        return (c, r) if op == "C" and trans else (r, c)
    if op == "C":
        return (c + 4 * blk, r) if trans else (r, c + 4 * blk)
    if not trans:
        return (r, c) if op == "A" else (r, c + 4 * blk)
    return (c + 4 * blk, r) if op == "A" else (c, r)


def _k_relabelling(tv: Any, s: Any, op: str) -> bool:
    """True when ``tv`` differs from the instruction only by a bijection of the K index."""
    kpos = 1 if op == "A" else 0            # A[i][k], B[k][j]
    perm: Dict[int, int] = {}
    for lane in range(s.wave_size):
        for item in range(s.items(op)):
            got = tv.coord(lane, item)
            exp = s.element(op, lane, item)
            if got[1 - kpos] != exp[1 - kpos] or perm.setdefault(got[kpos], exp[kpos]) != \
                    exp[kpos]:
                return False
    return len(set(perm.values())) == len(perm)
