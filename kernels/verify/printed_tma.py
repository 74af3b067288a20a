"""Printed-text checks of a warpgroup-specialised (TMA) kernel, added to its per-role report.

``declarations``: the printed helpers are exactly the texts the PTX rules were written against
(:data:`kernels.nvidia.tma.TMA_HELPERS`, the wgmma helpers and one wrapper per wgmma shape of
:mod:`kernels.nvidia.wgmma_prelude`, each defined once); the signature's parameters are the IR's
(tensor maps ``const void*``, sizes ``int``); ``__launch_bounds__(threads, min_blocks)``
with the IR's ``min_blocks`` (the ``setmaxnreg`` budgets are shares of the register file of
that many CTAs, which the per-role model's ``register_budget`` checks); every shared array is carved at
a 1024-byte aligned offset with the IR's element count, and every mbarrier array has the IR's
length.

Also declared: each shared array's and mbarrier array's 32-bit shared address, once, from that
array (``const lg_u32 sA_u32 = lg_smem_u32(sA);``, ``lg_bar_full_u32``), and each mbarrier
array initialised by the IR's loop with the IR's count.

(``lg_named_arrive``, ``bar.arrive``, is printed and checked only in a kernel that has one.)

``printed_source``: every TMA / mbarrier / wgmma / named-barrier call of the IR appears in the
text, in program order, with the IR's barrier, tensor map, buffer and constant arguments (shared
addresses as ``(sA_u32 + 2 * (offset))`` and ``(lg_bar_full_u32 + 8 * (index))``, descriptors
as ``lg_gmma_desc_u32(bits, sA_u32, start)``); every index expression of the text - each
``const int`` binding, loop-carried variable's declaration and update (``int st = 0;``,
``st = ((st + 1) % 3);``), loop bound, branch condition, box coordinate and shared offset,
barrier index, parity, descriptor start and C-buffer offset - read back
(:mod:`kernels.verify.cexpr`, C semantics) equals the IR's expression (``c_eval``) at 256
sampled values of its symbols (1..400; the runtime divisors are positive); and each loop-carried
variable is assigned on exactly as many lines as the IR has declarations and updates of it (a
stray update would change every later stage or parity).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import sympy

from layoutalg.verify.result import CheckResult

from ..ir.core import Access, If, Let, Loop, Param, c_eval, walk
from ..ir.nvidia_tma import (BulkCommit, LeaderOnly, MbarrierArrive,
                             MbarrierExpectTx, MbarrierInit, MbarrierWait, NamedBarrier,
                             RoleBranch, Setmaxnreg, TensorMap, TmaLoad, TmaPrefetch, TmaStore,
                             VarInit, VarSet)
from ..ir.nvidia import CpAsync
from ..ir.nvidia_cp_ring import CP_ARRIVE_HELPER, CpAsyncArrive
from ..ir.nvidia_wgmma import WgmmaMma
from ..ir.ticket import AtomicTicket, CounterReset, LastArrival, PartialAdd, ThreadFence
from ..nvidia.prelude import PACK
from ..printer.cuda import f32_store_line
from ..printer.cuda_ticket import ticket_stmt
from ..nvidia.tma import NAMED_ARRIVE_HELPER, TMA_HELPERS, TMA_LOAD_4D_HELPER
from ..nvidia.wgmma_prelude import (GMMA_DESC_U32, GMMA_DESC_U32_PIN, HELPERS, wgmma_fn,
                                     wgmma_key, wgmma_wrapper)
from .cexpr import CExprError, evaluate, parse
from .gate_common import Fail
from .source_text import split_args

__all__ = ["attach_printed_tma", "printed_tma_checks"]

_CALLS = {TmaLoad: "lg_tma_load_2d", TmaStore: "lg_tma_store_2d", MbarrierWait: "lg_mbar_wait",
          MbarrierExpectTx: "lg_mbar_expect_tx", MbarrierArrive: "lg_mbar_arrive",
          NamedBarrier: "lg_named_bar", BulkCommit: "lg_bulk_commit",
          WgmmaMma: "lg_wgmma_m64n", Setmaxnreg: "lg_setmaxnreg_",
          CpAsyncArrive: "lg_cp_mbar_arrive"}


def _desc(op: Any, pinned: Any) -> str:
    """The printed start of an operand's descriptor (``_pin``: recomputed at each issue)."""
    return (f"lg_gmma_desc_u32{'_pin' if op.buf in pinned else ''}("
            f"0x{op.desc.constant_bits():016x}ull, {op.buf}_u32, ")


def _expected(s: Any, pinned: Any = ()) -> List[str]:
    """Fragments the printed call of ``s`` must contain (``pinned``: the arrays whose
    descriptors the kernel prints pinned, ``meta["pinned_desc_bases"]``)."""
    if isinstance(s, TmaLoad):
        return [f"{_load_fn(s)}(({s.dst}_u32 + 2 * (", f", {s.tmap.name}, ",
                f"(lg_bar_{s.bar}_u32 + 8 * ("]
    if isinstance(s, TmaStore):
        return [f"lg_tma_store_2d({s.tmap.name}, ({s.src}_u32 + 2 * ("]
    if isinstance(s, MbarrierWait):
        return [f"lg_mbar_wait((lg_bar_{s.bar}_u32 + 8 * ("]
    if isinstance(s, MbarrierExpectTx):
        return [f"lg_mbar_expect_tx((lg_bar_{s.bar}_u32 + 8 * (", f", {int(s.bytes)}u)"]
    if isinstance(s, MbarrierArrive):
        return [f"lg_mbar_arrive((lg_bar_{s.bar}_u32 + 8 * ("]
    if isinstance(s, CpAsyncArrive):
        return [f"lg_cp_mbar_arrive((lg_bar_{s.bar}_u32 + 8 * ("]
    if isinstance(s, NamedBarrier):
        fn = f"lg_named_{'arrive' if s.arrive else 'bar'}("
        if _const_id(s):   # the call's id is a literal (the text reader skips literals)
            return [f"{fn}{int(s.id)}, {s.threads})"]
        return [fn, f", {s.threads})"]
    if isinstance(s, BulkCommit):
        return ["lg_bulk_commit()"]
    if isinstance(s, Setmaxnreg):
        return [f"lg_setmaxnreg_{'inc' if s.inc else 'dec'}<{s.regs}>()"]
    if isinstance(s, TmaPrefetch):    # the map it names, in program order
        return [f"lg_tma_prefetch({s.tmap.name})"]
    if isinstance(s, WgmmaMma) and s.a_in_regs:    # A from registers: 4 words of a frag
        return [f"{wgmma_fn(*wgmma_key(s))}(&{s.acc.frag.name}[0], "
                f"&{s.a.frag.name}[{s.a.idx[0] // 2}], " + _desc(s.b, pinned)]
    if isinstance(s, WgmmaMma):
        return [f"{wgmma_fn(*wgmma_key(s))}(&{s.acc.frag.name}[0], " + _desc(s.a, pinned),
                _desc(s.b, pinned)]
    return []


def _load_fn(s: TmaLoad) -> str:
    """The printed box load of ``s``: ``lg_tma_load_2d``, or ``_4d`` with plane coordinates."""
    return f"lg_tma_load_{2 + len(s.coords)}d"


def _const_id(s: NamedBarrier) -> bool:
    return not sympy.sympify(s.id).free_symbols


_CALL = re.compile(r"(lg_\w+(?:<\d+>)?)\((.*)\);$")
_SADDR = re.compile(r"^\((\w+)_u32 \+ 2 \* \((.*)\)\)$")
_BAR = re.compile(r"^\(lg_bar_(\w+)_u32 \+ 8 \* \((.*)\)\)$")
_VAR = re.compile(r"^(?:int )?(\w+) = (.*);$")


def _ir_exprs(s: Any) -> Optional[Tuple[str, List[Any]]]:
    """(how the text line starts, the IR expressions it prints in order) of ``s``."""
    if isinstance(s, VarInit):
        return f"int {s.name} = ", [s.expr]
    if isinstance(s, VarSet):
        return f"{s.name} = ", [s.expr]
    if isinstance(s, Let):
        return f"const int {s.name} = ", [s.expr]
    if isinstance(s, Loop):
        return f"for (int {s.var} = ", [s.start, s.stop]
    if isinstance(s, If) and not isinstance(s, (RoleBranch, LeaderOnly)):
        return "if (", [s.cond]
    if isinstance(s, TmaLoad):
        return f"{_load_fn(s)}(", [s.offset, s.index, s.c0, s.c1, *s.coords]
    if isinstance(s, TmaStore):
        return "lg_tma_store_2d(", [s.offset, s.c0, s.c1]
    if isinstance(s, MbarrierWait):
        return "lg_mbar_wait(", [s.index, s.parity]
    if isinstance(s, (MbarrierExpectTx, MbarrierArrive)):
        return ("lg_mbar_expect_tx(" if isinstance(s, MbarrierExpectTx) else
                "if ((tid & 31) == 0) lg_mbar_arrive(" if s.per_warp else "lg_mbar_arrive("), \
            [s.index]
    if isinstance(s, CpAsyncArrive):
        return "lg_cp_mbar_arrive(", [s.index]
    if isinstance(s, NamedBarrier):
        return f"lg_named_{'arrive' if s.arrive else 'bar'}(", [] if _const_id(s) else [s.id]
    if isinstance(s, WgmmaMma):
        return "lg_wgmma_m64n", [s.b.start] if s.a_in_regs else [s.a.start, s.b.start]
    if isinstance(s, Access):
        return f"*reinterpret_cast<lg_u32*>({s.buf} + (", [s.offset]
    return None


_TO_16 = {"f16": "lg_f32_to_f16", "bf16": "lg_f32_to_bf16"}
_PTR = {"f16": "lg_u16", "bf16": "lg_u16", "f32": "float", "i32": "int"}


def _global_store(s: Access, dtype: str) -> "re.Pattern[str]":
    """The printed line of a predicated global store of accumulators (pred, offset, the
    conversion and the registers as groups): ``if (pred) *reinterpret_cast<lg_u32*>(C +
    (offset)) = lg_pack_*(acc[i], acc[i + 1]);`` or ``if (pred) C[offset] =
    lg_f32_to_*(acc[i]);``."""
    if s.width == 2:
        return re.compile(rf"^if \((?P<pred>.*)\) \*reinterpret_cast<lg_u32\*>\({s.buf} \+ "
                          rf"\((?P<off>.*)\)\) = (?P<fn>\w+)\((?P<regs>[^()]*)\);$")
    return re.compile(rf"^if \((?P<pred>.*)\) {s.buf}\[(?P<off>.*)\] = (?P<fn>\w+)"
                      rf"\((?P<regs>[^()]*)\);$")


def _global_store_line(s: Access, dtype: str, line: str) -> Optional[str]:
    """None if ``line`` is the printed form of ``s`` (its conversion and registers; the
    predicate and offset are read back by :func:`_expressions`), else what differs."""
    m = _global_store(s, dtype).match(line)
    if m is None:
        return f"{line!r} is not a predicated {s.width}-element store to {s.buf}"
    fn = PACK[dtype] if s.width == 2 else _TO_16[dtype]
    regs = ", ".join(f"{s.regs.frag.name}[{i}]" for i in s.regs.idx)
    if (m.group("fn"), m.group("regs")) != (fn, regs):
        return (f"{line!r} stores {m.group('fn')}({m.group('regs')}); the IR's {s.tag} stores "
                f"{fn}({regs})")
    return None


def _canonical(s: Any, dtypes: Dict[str, str]) -> Optional[List[str]]:
    """The exact printed lines of a statement read back as text (the inter-CTA ticket's
    statements, partial reads and fp32 partial stores: kernels.printer.cuda_ticket /
    cuda.f32_store_line print them from the IR), or None for the others."""
    if isinstance(s, ThreadFence):
        return ["__threadfence();"]
    if isinstance(s, (AtomicTicket, LastArrival, CounterReset, PartialAdd)):
        out: List[str] = []
        ticket_stmt(_Lines(out), s if not isinstance(s, LastArrival) else
                    LastArrival(s.dst, s.last, [], index=s.index), 0)
        return out[:-1] if isinstance(s, LastArrival) else out
    if isinstance(s, Access) and s.space == "global" and dtypes.get(s.buf) == "f32":
        return [f32_store_line(s)]
    return None


class _Lines:
    """A stand-in printer collecting the stripped lines ``ticket_stmt`` prints."""

    def __init__(self, out: List[str]) -> None:
        self.lines = out

    def out(self, d: int, text: str) -> None:
        self.lines.append(text.strip())

    def stmts(self, body: List[Any], d: int) -> None:
        pass


def _named(arrive: bool) -> Any:
    return lambda s: isinstance(s, NamedBarrier) and s.arrive == arrive


#: text every such line holds, and the IR statements that print it: their counts must agree
#: (a stray fence, ticket, reset, partial read or named barrier the IR does not have is
#: refused)
_COUNTED = (("__threadfence();", (ThreadFence,)), ("atomicAdd(", (AtomicTicket,)),
            ("__ldcg(", (PartialAdd,)), ("lg_named_bar(", _named(False)),
            ("lg_named_arrive(", _named(True)),
            ("lg_tma_load_2d(", lambda s: isinstance(s, TmaLoad) and not s.coords),
            ("lg_tma_load_4d(", lambda s: isinstance(s, TmaLoad) and bool(s.coords)),
            ("lg_cp_mbar_arrive(", (CpAsyncArrive,)), ("lg_tma_prefetch(", (TmaPrefetch,)))


def _counted(k: Any, body: str, f: Fail) -> None:
    for token, kinds in _COUNTED:
        hit = kinds if callable(kinds) else (lambda s, kinds=kinds: isinstance(s, kinds))
        want = sum(1 for s in walk(k.body) if hit(s))
        got = sum(1 for ln in body.splitlines() if token in ln)
        if got != want:
            what = (("TmaLoad" if "tma_load" in token else "NamedBarrier") if callable(kinds)
                    else ", ".join(c.__name__ for c in kinds))
            f.add("printed_source", f"{got} printed lines hold {token!r}; the IR has {want} "
                                    f"such statements ({what})")
    resets = [s for s in walk(k.body) if isinstance(s, CounterReset)]
    for cnt in {s.counter for s in resets}:
        got = sum(1 for ln in body.splitlines() if re.search(rf"\b{cnt}\[.*\] = 0;", ln))
        want = sum(1 for s in resets if s.counter == cnt)
        if got != want:
            f.add("printed_source", f"{got} printed lines zero {cnt}; the IR resets it {want} "
                                    "times")


def _txt_exprs(line: str) -> List[str]:
    """The index expressions of a printed line, in the order :func:`_ir_exprs` lists them."""
    if line.startswith("const int "):
        return [line.split(" = ", 1)[1][:-1]]
    m = re.match(r"for \(int (\w+) = (.*); \1 < (.*); \+\+\1\) \{$", line)
    if m:
        return [m.group(2), m.group(3)]
    if line.startswith("if (") and line.endswith(") {"):
        return [line[4:-3]]
    if line.startswith("*reinterpret_cast"):
        m = re.match(r"\*reinterpret_cast<lg_u32\*>\(\w+ \+ \((.*)\)\) = ", line)
        return [m.group(1)] if m else []
    m = _VAR.match(line)
    if m and not line.startswith("lg_"):
        return [m.group(2)]
    if line.startswith("if ((tid & 31) == 0) "):
        line = line[len("if ((tid & 31) == 0) "):]
    m = _CALL.search(line)
    if not m:
        return []
    out = []
    # a box load's arguments past its tensor map are all coordinates, literals included
    # (elsewhere a literal is a count or byte total, not an index expression of the IR)
    box = m.group(1).startswith("lg_tma_load_")
    for a in split_args(m.group(2)):
        a = a.strip()
        if box and re.fullmatch(r"-?\d+", a):
            out.append(a)
            continue
        sm, bm = _SADDR.match(a), _BAR.match(a)
        if sm:
            out.append(sm.group(2))
        elif bm:
            out.append(bm.group(2))
        elif a.startswith(("lg_gmma_desc_u32(", "lg_gmma_desc_u32_pin(")):
            out.append(split_args(a[a.index("(") + 1:-1])[2].strip())
        elif a.startswith("(lg_u32)("):
            out.append(a[len("(lg_u32)("):-1])
        elif not re.fullmatch(r"\d+u?|tm\w+|&\w+\[\d+\]", a):
            out.append(a)
    return out


def _same(ir: Any, text: str, rng: np.random.Generator) -> Optional[str]:
    """None if ``text`` (C) equals ``ir`` at sampled symbol values, else the first difference."""
    try:
        node = parse(text)
    except CExprError as e:
        return str(e)
    e = sympy.sympify(ir)
    names = set(re.findall(r"[A-Za-z_]\w*", text)) | {str(x) for x in e.free_symbols}
    env: Dict[str, Any] = {n: rng.integers(1, 400, 256) for n in sorted(names)}
    with np.errstate(all="ignore"):
        want = np.broadcast_to(np.asarray(c_eval(e, {sympy.Symbol(n, integer=True,
                                                                  nonnegative=True): v
                                                     for n, v in env.items()}),
                                          dtype=np.int64), (256,))
        got = np.broadcast_to(np.asarray(evaluate(node, env), dtype=np.int64), (256,))
    if (want != got).any():
        i = int(np.argmax(want != got))
        at = ", ".join(f"{n}={int(v[i])}" for n, v in env.items())
        return f"{text!r} is {int(got[i])}, the IR's {ir} is {int(want[i])} at {at}"
    return None


def _expressions(k: Any, body: str, f: Fail) -> None:
    lines = [ln.strip() for ln in body.splitlines()]
    rng = np.random.default_rng(20)
    dtypes = {p.name: p.dtype for p in k.params if isinstance(p, Param)}
    pos = 0
    # a cp.async's two halves are the attention reader's (kernels.verify.printed reads the
    # copies back); this reader takes the role / mbarrier lines around them
    copies = {id(a) for c in walk(k.body) if isinstance(c, CpAsync) for a in c.accesses()}
    for s in walk(k.body):
        if id(s) in copies:
            continue
        canon = _canonical(s, dtypes)
        if canon is not None:
            for line in canon:
                at = lines.index(line, pos) if line in lines[pos:] else -1
                if at < 0:
                    f.add("printed_source", f"{type(s).__name__} {getattr(s, 'tag', '')}: no "
                                            f"printed line {line!r} (the IR's) after line {pos}")
                    return
                pos = at + 1
            continue
        glob = isinstance(s, Access) and s.space == "global"
        if glob:
            pat = _global_store(s, dtypes.get(s.buf, "f16"))
            while pos < len(lines) and not pat.match(lines[pos]):
                pos += 1
            if pos == len(lines):
                f.add("printed_source", f"global store {s.tag}: no printed predicated "
                                        f"{s.width}-element store to {s.buf} where the IR has one")
                return
            why = _global_store_line(s, dtypes[s.buf], lines[pos])
            m = pat.match(lines[pos])
            for ir, t in ((s.pred, m.group("pred")), (s.offset, m.group("off"))):
                why = why or _same(ir, t, rng)
            if why:
                f.add("printed_source", f"line {lines[pos]!r}: {why}")
                return
            pos += 1
            continue
        spec = _ir_exprs(s)
        if spec is None:
            continue
        head, irs = spec
        while pos < len(lines) and not lines[pos].startswith(head):
            pos += 1
        if pos == len(lines):
            f.add("printed_source", f"{type(s).__name__} {getattr(s, 'tag', '')}: no printed "
                                    f"line starting {head!r} where the IR has one")
            return
        txt = _txt_exprs(lines[pos])
        if len(txt) != len(irs):
            f.add("printed_source", f"line {lines[pos]!r}: {len(txt)} index expressions, the "
                                    f"IR's {type(s).__name__} has {len(irs)}")
            return
        for ir, t in zip(irs, txt):
            why = _same(ir, t, rng)
            if why:
                f.add("printed_source", f"line {lines[pos]!r}: {why}")
                return
        pos += 1


def _bases(k: Any, source: str, f: Fail) -> None:
    """Each shared / mbarrier array's 32-bit address: declared once, from that array."""
    names = [(s.name, s.name) for s in k.shared] + \
        [(f"lg_bar_{s.bar}", f"lg_bar_{s.bar}") for s in walk(k.body)
         if isinstance(s, MbarrierInit)]
    for base, arr in names:
        decl = re.findall(rf"const lg_u32 {base}_u32 = (.*);", source)
        if decl != [f"lg_smem_u32({arr})"]:
            f.add("declarations", f"the 32-bit address {base}_u32 is declared as {decl}; the IR "
                                  f"needs it once, lg_smem_u32({arr})")


def _carried(k: Any, body: str, f: Fail) -> None:
    """Each loop-carried variable is assigned on as many printed lines as the IR assigns it."""
    want: Dict[str, int] = {}
    for s in walk(k.body):
        if isinstance(s, (VarInit, VarSet)):
            want[s.name] = want.get(s.name, 0) + 1
    lines = [ln.strip() for ln in body.splitlines()]
    for name, n in want.items():
        got = sum(1 for ln in lines if re.match(rf"^(?:int )?{name} (?:[-+*/%^&|]?=|\+\+|--)", ln)
                  or re.search(rf"(?:\+\+|--){name}\b|\b{name}(?:\+\+|--)", ln))
        if got != n:
            f.add("printed_source", f"the loop-carried variable {name} is assigned on {got} "
                                    f"printed lines; the IR declares / updates it {n} times")


def printed_tma_checks(k: Any, source: str) -> Fail:
    f = Fail()
    # ---- declarations ----------------------------------------------------------------------
    ms = [s for s in walk(k.body) if isinstance(s, WgmmaMma)]
    helpers = [("TMA helpers", TMA_HELPERS)] + ([("wgmma helpers", HELPERS),
                                                 ("descriptor helper", GMMA_DESC_U32)]
                                                if ms else [])
    pinned = frozenset(k.meta.get("pinned_desc_bases", ()))
    if pinned:
        helpers.append(("pinned descriptor helper", GMMA_DESC_U32_PIN))
    if any(_named(True)(s) for s in walk(k.body)):
        helpers.append(("bar.arrive helper", NAMED_ARRIVE_HELPER))
    if any(isinstance(s, TmaLoad) and s.coords for s in walk(k.body)):
        helpers.append(("4-D box load helper", TMA_LOAD_4D_HELPER))
    if any(isinstance(s, CpAsyncArrive) for s in walk(k.body)):
        helpers.append(("cp.async arrive helper", CP_ARRIVE_HELPER))
    for key in sorted({wgmma_key(m) for m in ms}):
        helpers.append((wgmma_fn(*key), wgmma_wrapper(wgmma_fn(*key), *key)))
    for what, text in helpers:
        n = source.count(text)
        if n != 1:
            f.add("declarations", f"the {what} are printed {n} times, not once with the text the "
                                  "rules were written against")
    m = re.search(r'__launch_bounds__\((\d+)(?:, (\d+))?\)\s+(\w+)\(([^)]*)\)', source)
    if m is None or m.group(3) != k.name:
        f.add("declarations", f"no __launch_bounds__ signature of {k.name}")
        return f
    blocks = max(1, int(getattr(k, "min_blocks", 0) or 0))
    if int(m.group(1)) != k.block or m.group(2) != str(blocks):
        f.add("declarations", f"__launch_bounds__({m.group(1)}, {m.group(2)}); the IR has "
                              f"{k.block} threads and {blocks} CTA(s) per SM (its setmaxnreg "
                              "shares)")
    got = [p.strip() for p in m.group(4).split(",")]
    want = [(f"const void* __restrict__ {p.name}" if isinstance(p, TensorMap) else
             f"int {p.name}" if getattr(p, "ctype", None) == "int" else
             f"{'const ' if p.const else ''}{_PTR.get(p.dtype)}* __restrict__ {p.name}"
             if isinstance(p, Param) and p.dtype in _PTR else None) for p in k.params]
    # an attention kernel's runtime scalars follow its parameters (kernels.printer.cuda_attention)
    want += [f"{p.ctype} {p.name}" for p in getattr(k, "scalars", ())]
    if got != want:
        f.add("declarations", f"printed parameters {got}; the IR's are {want}")
    at = 0
    for s in k.shared:
        line = re.search(rf"lg_u16\* const {s.name} = reinterpret_cast<lg_u16\*>\(lg_smem \+ "
                         rf"(\d+)\);  // (\d+) x", source)
        if line is None or int(line.group(1)) % 1024 or int(line.group(2)) != s.count or \
                int(line.group(1)) < at:
            f.add("declarations", f"shared array {s.name}: printed "
                                  f"{line.group(0) if line else 'nowhere'}; the IR has "
                                  f"{s.count} elements at a 1024-byte aligned offset >= {at}")
        at = int(line.group(1)) + 2 * s.count if line else at
    for s in walk(k.body):
        if isinstance(s, MbarrierInit) and \
                f"unsigned long long lg_bar_{s.bar}[{s.n}];" not in source:
            f.add("declarations", f"mbarrier array {s.bar}[{s.n}] is not declared")
        if isinstance(s, MbarrierInit) and \
                (f"if (tid == 0) {{ for (int i = 0; i < {s.n}; ++i) lg_mbar_init((lg_bar_{s.bar}"
                 f"_u32 + 8 * (i)), {s.count}); }}") not in source:
            f.add("declarations", f"mbarrier array {s.bar}: no printed initialisation of its "
                                  f"{s.n} barriers to {s.count} arrivals by thread 0")
    _bases(k, source, f)
    # ---- printed_source ----------------------------------------------------------------------
    body = source[m.end():]
    pos = 0
    for s in walk(k.body):
        frags = _expected(s, pinned)
        if not frags:
            continue
        i = body.find(frags[0], pos)
        end = body.find(";", i) if i >= 0 else -1
        line = body[i:end] if i >= 0 else ""
        if i < 0 or not all(x in line for x in frags[1:]):
            f.add("printed_source", f"{type(s).__name__} {getattr(s, 'tag', '')}: no printed "
                                    f"call {frags} after offset {pos} of the kernel body")
            break
        pos = end
    _expressions(k, body, f)
    _carried(k, body, f)
    _counted(k, body, f)
    return f


def attach_printed_tma(report: Any, k: Any, source: str) -> None:
    """Add ``declarations`` and ``printed_source`` to ``report`` (a GateReport)."""
    f = printed_tma_checks(k, source)
    for name in ("printed_source", "declarations"):
        ok = name not in f.first
        report.checks[name] = CheckResult(
            check=name, holds=ok, method="exhaustive",
            domain="the printed text: helpers, signature, shared arrays, calls in order",
            counterexample=None if ok else f.first[name])
