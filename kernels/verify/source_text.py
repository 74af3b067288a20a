"""The printed kernel source read back: its declarations and the statements that carry index math.

:func:`read_source` finds one kernel (``LAGEN_KERNEL ... void NAME(...)``) in a printed source
and returns a :class:`ParsedSource`: the launch bounds, parameters, ``LAGEN_SHARED`` arrays and
their aliases, register arrays, vector typedefs, and the body as a tree of
:class:`SourceStmt` (``const int`` bindings, loops, ``if`` blocks, memory references with
their vector type, predicate and register side, barriers, MFMAs, mask conditions, lane
exchanges).  Index expressions are parsed by :mod:`kernels.verify.cexpr`.  What it does not
recognise it leaves out; :mod:`kernels.verify.printed` pairs the result with the IR, so a
statement missing on either side is reported there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..ir.core import THREAD_ID_AGAIN
from ..ir.dtypes import ELEM_TYPES
from .cexpr import CExprError, parse, split_args
from .source_pointers import PointerChains

__all__ = ["SourceStmt", "ParsedSource", "read_source", "read_cuda_source", "ctype_of", "split_args",
           "register_operand", "SCALAR_DTYPE", "param_decl"]

SCALAR_DTYPE = {t.c_scalar: name for name, t in ELEM_TYPES.items()}
_VEC = re.compile(r"^(?:lagen|la)_(" + "|".join(ELEM_TYPES) + r")x(\d+)$")


def ctype_of(name: str) -> Optional[Tuple[str, int]]:
    """``lagen_f16x8`` -> ("f16", 8); ``_Float16`` -> ("f16", 1); None if unknown."""
    if name in SCALAR_DTYPE:
        return SCALAR_DTYPE[name], 1
    m = _VEC.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def param_decl(p: Any, ctype: Dict[str, str]) -> str:
    """How the CUDA printer declares the kernel parameter ``p``: a pointer of ``ctype[dtype]``
    (``const`` where the IR reads it only), a tensor map (``const void*``, kernels.ir
    .nvidia_tma.TensorMap: it has ``planes``) or a by-value ``int`` (``IntParam``)."""
    if hasattr(p, "planes"):
        return f"const void* __restrict__ {p.name}"
    if getattr(p, "ctype", None) == "int":
        return f"int {p.name}"
    return f"{'const ' if p.const else ''}{ctype.get(p.dtype, '?')}* __restrict__ {p.name}"


# ---------------------------------------------------------------------------- reading the text

@dataclass
class SourceStmt:
    """One index-bearing statement of the printed body (or of the IR, for pairing)."""

    kind: str                      # let | loop | if | mem | mask | bperm | swz
    line: int = 0                  # 1-based line in the source (text side)
    name: str = ""                 # let / loop variable; buffer of a mem
    exprs: Tuple[Any, ...] = ()    # parsed trees (text) or sympy objects (IR)
    store: bool = False            # mem: store?
    vtype: Optional[Tuple[str, int]] = None   # mem: (dtype, width) of the printed reference
    pred: Any = None               # mem: predicate (tree / sympy) or None
    regs: Tuple[Any, ...] = ()     # mem: (frag, element indices); mfma: builtin, acc, a, b
    body: List["SourceStmt"] = field(default_factory=list)
    text: str = ""


def _balanced(s: str, i: int, open_: str = "(", close: str = ")") -> int:
    """Index just past the bracket that closes the one at ``s[i]``."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_:
            depth += 1
        elif s[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    raise CExprError(f"unbalanced {open_}{close} in {s!r}")


_KHEAD = re.compile(r"^LAGEN_KERNEL LAGEN_LAUNCH_BOUNDS\((\d+)\) (?:LAGEN_WAVES_PER_EU\((\d+)\) )?"
                    r"void (\w+)\((.*)\) \{$")
_SHARED = re.compile(r"^LAGEN_SHARED\((\w+), (\w+), (\d+)\);$")
_ALIAS = re.compile(r"^(\w+)\* const (\w+) = \((\w+)\*\)(\w+);$")
_FRAG = re.compile(r"^(\w+) (\w+)\[(\d+)\];$")
_LET = re.compile(r"^const int (\w+) = (.*);$")
_LOOP = re.compile(r"^for \(int (\w+) = (.*); (\w+) < (.*); \+\+(\w+)\) \{$")
_TYPEDEF = re.compile(r"^LAGEN_VEC_TYPEDEF\((\w+), (\d+), (\w+)\);$")
_PTR = re.compile(r"\*\((const )?(\w+)\*\)\((\w+) \+ ")
_BUFLOAD = re.compile(r"lagen_buffer_load_(?:b128|(if))<(\w+)>\((\w+)_rsrc, ")
_RSRC = re.compile(r"^const lagen_buffer (\w+)_rsrc = lagen_make_buffer\((\w+), (\d+)u\);$")
_MASK = re.compile(r"^(\w+\[\d+\](?:\[\d+\])?) = \(")
_MFMA = re.compile(r"^(\w+\[\d+\]) = (__builtin_amdgcn_mfma_\w+)\((.*)\);$")
_UNPACK = re.compile(r"^(\w+\[\d+\](?:\[\d+\])?) = v\[(\d+)\];$")


@dataclass
class ParsedSource:
    block: int = 0
    waves_per_eu: int = 0
    min_blocks: int = 0             # CUDA: __launch_bounds__(block, min_blocks)
    params: List[str] = field(default_factory=list)
    shared: Dict[str, Tuple[str, int, int]] = field(default_factory=dict)  # name_v: type, n, line
    alias: Dict[str, Tuple[str, str, int]] = field(default_factory=dict)    # name -> type, of
    frags: Dict[str, Tuple[str, int, int]] = field(default_factory=dict)
    typedefs: List[Tuple[str, int, str, int]] = field(default_factory=list)
    ids: Dict[str, Tuple[str, int]] = field(default_factory=dict)           # tid / grid symbols
    buffers: Dict[str, Tuple[str, int, int]] = field(default_factory=dict)  # rsrc: of, bytes, line
    body: List[SourceStmt] = field(default_factory=list)
    smem_align: int = 0            # CUDA: alignment of the dynamic shared base the arrays use


def _body_lines(lines: List[str], start: int) -> Iterator[Tuple[int, str]]:
    """(1-based line number, statement text without its comment) of each non-empty line of a
    kernel body that starts at index ``start``, up to the kernel's closing ``}`` line."""
    for i in range(start, len(lines)):
        s = lines[i].strip()
        if "//" in s:
            s = s[:s.index("//")].rstrip()
        if lines[i] == "}":
            return
        if s:
            yield i + 1, s


def _scope_opener(s: str, ln: int) -> Optional[SourceStmt]:
    """The ``loop`` or ``if`` statement a line ``for (...) {`` / ``if (...) {`` opens (its body
    still empty), or None when the line opens neither."""
    m = _LOOP.match(s)
    if m:
        if not m.group(1) == m.group(3) == m.group(5):
            raise CExprError(f"line {ln}: loop over mixed variables: {s}")
        return SourceStmt("loop", ln, m.group(1), (parse(m.group(2)), parse(m.group(4))),
                          text=s)
    if s.startswith("if (") and s.endswith("{"):
        e = _balanced(s, 3)
        return SourceStmt("if", ln, exprs=(parse(s[4:e - 1]),), text=s)
    return None


def _leading_predicate(s: str) -> Tuple[Any, str]:
    """A statement ``if (cond) rest``: (parsed cond, rest); any other: (None, s)."""
    if not s.startswith("if ("):
        return None, s
    e = _balanced(s, 3)
    return parse(s[4:e - 1]), s[e:].strip()


def read_source(src: str, kernel: str, memory: Sequence[str]) -> ParsedSource:
    lines = src.split("\n")
    out = ParsedSource()
    for i, raw in enumerate(lines):
        m = _TYPEDEF.match(raw.strip())
        if m:
            out.typedefs.append((m.group(1), int(m.group(2)), m.group(3), i + 1))
    start = None
    for i, raw in enumerate(lines):
        m = _KHEAD.match(raw)
        if m and m.group(3) == kernel:
            out.block = int(m.group(1))
            out.waves_per_eu = int(m.group(2) or 0)
            out.params = [p.strip() for p in m.group(4).split(",")] if m.group(4) else []
            start = i + 1
            break
    if start is None:
        raise CExprError(f"the printed source has no kernel {kernel!r} "
                         f"(no 'LAGEN_KERNEL ... void {kernel}(...)' line)")
    mem_re = re.compile(r"\b(" + "|".join(map(re.escape, memory)) + r")\[") if memory else None
    stack: List[List[SourceStmt]] = [out.body]
    opened: List[str] = []
    pending: List[str] = []          # `elem = v[j];` lines after a non-vector load
    for ln, s in _body_lines(lines, start):
        m = _SHARED.match(s)
        if m:
            out.shared[m.group(2)] = (m.group(1), int(m.group(3)), ln)
            continue
        m = _RSRC.match(s)
        if m:
            out.buffers[m.group(1)] = (m.group(2), int(m.group(3)), ln)
            continue
        m = _ALIAS.match(s)
        if m:
            out.alias[m.group(2)] = (m.group(1), m.group(4), ln)
            continue
        m = _LET.match(s)
        if m and m.group(2) in ("threadIdx.x", "blockIdx.x", "blockIdx.y", "blockIdx.z"):
            out.ids[m.group(1)] = (m.group(2), ln)
            continue
        if m and m.group(2) == THREAD_ID_AGAIN:
            # the thread index recomputed from lane and wave (LetThreadId): a let of tid
            stack[-1].append(SourceStmt("let", ln, m.group(1), (parse("tid"),), text=s))
            continue
        if m:
            stack[-1].append(SourceStmt("let", ln, m.group(1), (parse(m.group(2)),), text=s))
            continue
        m = _FRAG.match(s)
        if m and ctype_of(m.group(1)):
            out.frags[m.group(2)] = (m.group(1), int(m.group(3)), ln)
            continue
        st = _scope_opener(s, ln)
        if st is not None:
            stack[-1].append(st)
            stack.append(st.body)
            opened.append(st.kind)
            continue
        if s.startswith("{"):
            opened.append("block")
            continue
        if s == "}":
            if pending:
                stack[-1][-1].regs = (", ".join(pending),)
                pending = []
            if not opened:
                raise CExprError(f"line {ln}: '}}' closes nothing")
            if opened.pop() != "block":
                stack.pop()
            continue
        if s == "__syncthreads();":
            stack[-1].append(SourceStmt("barrier", ln, text=s))
            continue
        m = _MFMA.match(s)
        if m:
            args = split_args(m.group(3))
            stack[-1].append(SourceStmt("mfma", ln, text=s, regs=(m.group(2), m.group(1),
                                                                   *args)))
            continue
        m = _UNPACK.match(s)
        if m and stack[-1] and stack[-1][-1].kind == "mem" and stack[-1][-1].regs == ("v",):
            pending.append(m.group(1))
            continue
        if pending:
            stack[-1][-1].regs = (", ".join(pending),)
            pending = []
        _statement(s, ln, stack[-1], memory, mem_re)
    return out


def _statement(s: str, ln: int, into: List[SourceStmt], memory: Sequence[str],
               mem_re: Any) -> None:
    """Memory references, mask conditions and lane exchanges of one printed statement."""
    pred, s = _leading_predicate(s)
    m = _MASK.match(s)
    if m and s.endswith(f") ? {m.group(1)} : -__builtin_inff();"):
        e = _balanced(s, m.end() - 1)
        into.append(SourceStmt("mask", ln, exprs=(parse(s[m.end():e - 1]),), text=s))
        return
    j = s.find("__builtin_amdgcn_ds_bpermute(")
    if j >= 0:
        a0 = j + len("__builtin_amdgcn_ds_bpermute(")
        depth, k = 0, a0
        while k < len(s) and not (depth == 0 and s[k] == ","):
            depth += {"(": 1, ")": -1}.get(s[k], 0)
            k += 1
        into.append(SourceStmt("bperm", ln, exprs=(parse(s[a0:k]),), text=s))
    m = re.search(r"__builtin_amdgcn_ds_swizzle\(.*, (0x[0-9a-fA-F]+|\d+)\)\)", s)
    if m:
        into.append(SourceStmt("swz", ln, exprs=(int(m.group(1), 0),), text=s))
    refs: List[Tuple[int, SourceStmt]] = []
    for m in _BUFLOAD.finditer(s):
        if m.group(3) not in memory:
            continue
        paren = s.index("(", m.start())
        e = _balanced(s, paren)
        args = split_args(s[paren + 1:e - 1])
        # lagen_buffer_load_if(rsrc, pred, voffset, soffset): the predicate is an argument
        if m.group(1):
            if len(args) != 4 or pred is not None:
                raise CExprError(f"line {ln}: a predicated buffer load needs (rsrc, predicate, "
                                 f"voffset, soffset) and no enclosing if: {s}")
            pred, args = parse(args[1]), [args[0], *args[2:]]
        if len(args) != 3:
            raise CExprError(f"line {ln}: a buffer load needs (rsrc, voffset, soffset): {s}")
        refs.append((m.start(), SourceStmt("mem", ln, m.group(3),
                                           (parse(args[1]), parse(args[2])), store=False,
                                           vtype=ctype_of(m.group(2)), pred=pred, text=s)))
    for m in _PTR.finditer(s):
        if m.group(3) not in memory:
            continue
        e = _balanced(s, m.end() - len(m.group(3)) - 4)
        off = s[m.end():e - 1]
        vt = ctype_of(m.group(2))
        refs.append((m.start(), SourceStmt("mem", ln, m.group(3), (parse(off),),
                                           store=m.start() == 0, vtype=vt, pred=pred,
                                           text=s)))
    if mem_re is not None:
        for m in mem_re.finditer(s):
            e = _balanced(s, m.end() - 1, "[", "]")
            refs.append((m.start(), SourceStmt("mem", ln, m.group(1), (parse(s[m.end():e - 1]),),
                                               store=m.start() == 0, vtype=None, pred=pred,
                                               text=s)))
    if len(refs) == 1 and " = " in s:
        lhs, rhs = s.rstrip(";").split(" = ", 1)
        refs[0][1].regs = (rhs,) if refs[0][1].store else (lhs.split()[-1],)
    for _, r in sorted(refs, key=lambda t: t[0]):
        into.append(r)


_CONV = (re.compile(r"^\(_Float16\)\((.*)\)$"), re.compile(r"^\(short\)lagen_f32_to_bf16\((.*)\)$"),
         re.compile(r"^LAGEN_BITCAST\(\w+, (.*)\)$"))


def register_operand(text: str, frags: Dict[str, Any]) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """(frag, element indices) of a printed register operand, or None if not one."""
    t = text.strip()
    for cv in _CONV:
        m = cv.match(t)
        if m:
            t = m.group(1).strip()
    m = re.match(r"^(\w+)\[(\d+)\]$", t)
    if m and m.group(1) in frags:
        w = frags[m.group(1)].width
        i = int(m.group(2))
        return m.group(1), tuple(range(i * w, i * w + w)) if w > 1 else (i,)
    m = re.match(r"^(\w+)\[(\d+)\]\[(\d+)\]$", t)
    if m and m.group(1) in frags:
        return m.group(1), (int(m.group(2)) * frags[m.group(1)].width + int(m.group(3)),)
    m = re.match(r"^__builtin_shufflevector\((\w+)\[(\d+)\], \1\[\2\], ([\d, ]+)\)$", t)
    if m and m.group(1) in frags:
        base = int(m.group(2)) * frags[m.group(1)].width
        return m.group(1), tuple(base + int(j) for j in m.group(3).split(","))
    m = re.match(r"^lagen_gather_bytes4\((\w+)\[(\d+)\], \1\[(\d+)\], \1\[(\d+)\], "
                 r"\1\[(\d+)\], (\d+)\)$", t)
    if m and m.group(1) in frags:       # byte j of four whole vectors (lagen_hip.h)
        w, j = frags[m.group(1)].width, int(m.group(6))
        if j < w:
            return m.group(1), tuple(int(m.group(g)) * w + j for g in range(2, 6))
    m = re.match(r"^\w+\{(.*)\}$", t)
    if m:
        parts = [register_operand(p, frags) for p in split_args(m.group(1))]
        if parts and all(p is not None and p[0] == parts[0][0] and len(p[1]) == 1
                         for p in parts):
            return parts[0][0], tuple(p[1][0] for p in parts)
    if "," in text and "{" not in text and "(" not in text:   # unpacked `elem = v[j]` lines
        parts = [register_operand(p, frags) for p in text.split(",")]
        if all(p is not None and p[0] == parts[0][0] and len(p[1]) == 1 for p in parts):
            return parts[0][0], tuple(p[1][0] for p in parts)
    return None


# ---------------------------------------------------------------------------- CUDA text
# What kernels.printer.cuda prints, read back into the same statement trees (``regs`` hold
# resolved (frag, element indices) pairs: the text's 32-bit words are two 16-bit elements).

_CU_HEAD = re.compile(r'^extern "C" __global__ void __launch_bounds__\((\d+)(?:, (\d+))?\) '
                      r'(\w+)\((.*)\) \{$')
_CU_SMEM = re.compile(r"^(\w+)\* const (\w+) = reinterpret_cast<(\w+)\*>\(lg_smem \+ (\d+)\);$")
_CU_ZERO = re.compile(r"^for \(int i = 0; i < (\d+); \+\+i\) (\w+)\[i\] = (0\.f|0u);$")
_CU_CP = re.compile(r"^lg_cp_async(4|8|16)\((.*)\);$")
_CU_SADDR = re.compile(r"^lg_smem_u32\((\w+) \+ (.*)\)$")
_CU_GADDR = re.compile(r"^(\w+) \+ (.*)$")
_CU_LDM = re.compile(r"^lg_ldmatrix_x(\d)(_trans)?\((.*)\);$")
_CU_MMA = re.compile(r"^(lg_mma_\w+)\(&(\w+)\[(\d+)\], &(\w+)\[(\d+)\], &(\w+)\[(\d+)\]\);$")
_CU_PAIR = re.compile(r"^\*reinterpret_cast<lg_u32\*>\((\w+) \+ (.*)\) = (lg_pack_\w+)\((.*)\);$")
_CU_ONE = re.compile(r"^(\w+)\[(.*)\] = (lg_f32_to_\w+)\((.*)\);$")
_CU_WAIT = re.compile(r"^lg_cp_async_wait<(\d+)>\(\);$")
_CU_WG_WAIT = re.compile(r"^lg_wgmma_wait<(\d+)>\(\);$")
_CU_PIN = re.compile(r"^lg_pin\((\w+)\);$")
_CU_WGMMA = re.compile(r"^(lg_wgmma_m64n\d+_\w+)\(&(\w+)\[(\d+)\], (.*)\);$")
_CU_AREG = re.compile(r"^&(\w+)\[(\d+)\]$")
_CU_DESC = re.compile(r"^lg_gmma_desc\(0x([0-9a-f]{16})ull, (\w+), (.*)\)$")
_CU_SIMPLE = {"lg_wgmma_fence();": "wg_fence", "lg_wgmma_commit();": "wg_commit",
              "lg_fence_proxy_async();": "proxy_fence"}
# kernels.printer.cuda_attention: f32 loads, 4-wide 16-bit stores, float variables, the LSE merge
_CU_LDG = re.compile(r"^lg_ldg_f32x(\d)\(&(\w+)\[(\d+)\], (\w+) \+ (.*)\);$")
_CU_ST4 = re.compile(r"^lg_st_u32x2\((.*)\);$")
_CU_PACK = re.compile(r"^(lg_pack_\w+)\((.*)\)$")
# the runtime-size GEMMs' 32-bit shared bases and their uses (kernels.printer.cuda_gemm_edge)
_CU_U32 = re.compile(r"^const lg_u32 (\w+) = lg_smem_u32\((\w+)\);$")
_CU_U32_ADDR = re.compile(r"\((\w+) \+ (\d+) \* (?=\()")
# (``lg_gmma_desc_u32_pin``: the same value, its base pinned; the helper's text is checked)
_CU_DESC_U32 = re.compile(r"lg_gmma_desc_u32(?:_pin)?\((0x[0-9a-f]{16}ull), (\w+), ")
# the edge copy of the runtime-size GEMMs (kernels.printer.cuda_gemm_edge)
_CU_LD16 = re.compile(r"^(\w+)\[(\d+)\] (\|?=) lg_ld16z\((.*)\)( << 16)?;$")
_CU_STV4 = re.compile(r"^lg_st_shared_v4\((.*)\);$")
_CU_FVAR = re.compile(r"^float \w+ = (LG_NEG_INF|0\.f);$")
_CU_PRAGMA = re.compile(r"^#pragma unroll \d+$")
_CU_LSE_MAX = re.compile(r"^(\w+) = fmaxf\(\1, (\w+)\[(\d+)\]\);$")
_CU_LSE_MERGE = re.compile(r"^lg_lse_merge<(\d+)>\((\w+), (\w+), &(\w+)\[(\d+)\], "
                           r"&(\w+)\[(\d+)\], (\w+)\[(\d+)\]\);$")
_CU_LSE_NORM = re.compile(r"^lg_lse_normalize<(\d+)>\(&(\w+)\[(\d+)\], (\w+)\);$")
_CU_RAW = "extern __shared__ __align__(1024) unsigned char lg_smem_raw[];"
_CU_ALIGN = ("unsigned char* const lg_smem = lg_smem_raw + ((1024u - (lg_smem_u32(lg_smem_raw) & "
             "1023u)) & 1023u);")
_CU_CTYPE = {"lg_u16": 2, "float": 4}


def _words(regs: List[str]) -> Tuple[str, Tuple[int, ...]]:
    """``af[3], af[4]`` (32-bit words) -> ("af", (6, 7, 8, 9)); raises on anything else."""
    names, idx = set(), []
    for r in regs:
        m = re.match(r"^(\w+)\[(\d+)\]$", r.strip())
        if not m:
            raise CExprError(f"not a register word: {r!r}")
        names.add(m.group(1))
        idx += [2 * int(m.group(2)), 2 * int(m.group(2)) + 1]
    if len(names) != 1:
        raise CExprError(f"register words of several arrays: {regs}")
    return names.pop(), tuple(idx)


def _flat(reg: str) -> Tuple[str, Tuple[int, ...]]:
    m = re.match(r"^(\w+)\[(\d+)\]$", reg.strip())
    if not m:
        raise CExprError(f"not a register: {reg!r}")
    return m.group(1), (int(m.group(2)),)


def _paren(e: str) -> str:
    """The text of a printed ``(expr)`` operand without its outer parentheses."""
    e = e.strip()
    if e.startswith("(") and _balanced(e, 0) == len(e):
        return e[1:-1]
    return e


def read_cuda_source(src: str, kernel: str, dtypes: Dict[str, str],
                     extra: Optional[Callable[..., Optional[List["SourceStmt"]]]] = None
                     ) -> ParsedSource:
    """The CUDA text of ``kernel`` (:mod:`kernels.printer.cuda`) as a :class:`ParsedSource`:
    ``shared`` maps each carved array to (its C type, byte offset in the dynamic buffer, line),
    ``frags`` each register array to (C type, length, line); memory statements carry the
    buffer's (dtype, width in elements) as ``vtype``.  ``dtypes``: the element type of every
    memory name (parameters and shared arrays).  ``extra(line, line number, dtypes,
    predicate)``: a reader of further statement forms (records, or None for none of its own),
    tried before a line is refused (:func:`kernels.verify.source_decode
    .read_decode_statement`)."""
    lines = src.split("\n")
    out = ParsedSource()
    start = None
    for i, raw in enumerate(lines):
        m = _CU_HEAD.match(raw)
        if m and m.group(3) == kernel:
            out.block, out.min_blocks = int(m.group(1)), int(m.group(2) or 0)
            out.params = [p.strip() for p in m.group(4).split(",")] if m.group(4) else []
            start = i + 1
            break
    if start is None:
        raise CExprError(f"the printed source has no kernel {kernel!r} (no 'extern \"C\" "
                         f"__global__ void __launch_bounds__(N) {kernel}(...)' line)")
    stack: List[List[SourceStmt]] = [out.body]
    chains = PointerChains(out.params)      # cp.async sources as chained pointers
    for ln, s in _body_lines(lines, start):
        if chains.declare(s, ln):
            continue
        s = chains.resolve(s)
        if s == "extern __shared__ __align__(128) unsigned char lg_smem[];":
            out.smem_align = 128
            continue
        if s == _CU_RAW:            # a wgmma kernel: the base rounded up to 1024 bytes
            out.smem_align = -1
            continue
        if s == _CU_ALIGN and out.smem_align == -1:
            out.smem_align = 1024
            continue
        m = _CU_SMEM.match(s)
        if m:
            out.shared[m.group(2)] = (m.group(1) + "|" + m.group(3), int(m.group(4)), ln)
            continue
        m = _CU_ZERO.match(s)
        if m:
            out.typedefs.append(("zero", int(m.group(1)), m.group(2), ln))
            continue
        m = _CU_U32.match(s)
        if m and m.group(2) in out.shared:     # a shared array's 32-bit address, once
            out.alias[m.group(1)] = ("lg_u32", m.group(2), ln)
            continue
        s = _u32_addresses(s, ln, out.alias, dtypes)
        m = _FRAG.match(s)
        if m and m.group(1) in ("lg_u32", "float"):
            out.frags[m.group(2)] = (m.group(1), int(m.group(3)), ln)
            continue
        m = _LET.match(s)
        if m and m.group(2) in ("threadIdx.x", "blockIdx.x", "blockIdx.y", "blockIdx.z"):
            out.ids[m.group(1)] = (m.group(2), ln)
            continue
        if m:
            stack[-1].append(SourceStmt("let", ln, m.group(1), (parse(m.group(2)),), text=s))
            continue
        st = _scope_opener(s, ln)
        if st is not None:
            stack[-1].append(st)
            stack.append(st.body)
            continue
        if s == "}":
            if len(stack) == 1:
                raise CExprError(f"line {ln}: '}}' closes nothing")
            stack.pop()
            continue
        stack[-1].extend(_cuda_statement(s, ln, dtypes, extra))
    return out


def _u32_addresses(s: str, ln: int, alias: Dict[str, Tuple[str, str, int]],
                   dtypes: Dict[str, str]) -> str:
    """``s`` with each shared address written from a 32-bit base (``(sA_u32 + 2 * (off))``,
    ``lg_gmma_desc_u32(bits, sA_u32, start)``; the runtime-size GEMMs'
    :mod:`kernels.printer.cuda_gemm_edge`) in the generic forms the statement readers take
    (``lg_smem_u32(sA + (off))``, ``lg_gmma_desc(bits, sA, start)``): only names the text
    defined as ``const lg_u32 X = lg_smem_u32(array);``, each scaled by its array's element
    size (else the line is refused)."""
    s = _join_split_offsets(s, alias)

    def addr(m: "re.Match[str]") -> str:
        name, scale = m.group(1), int(m.group(2))
        if name not in alias:
            return m.group(0)
        arr = alias[name][1]
        if scale != ELEM_TYPES[dtypes[arr]].bytes:
            raise CExprError(f"line {ln}: {name} + {scale} * (...) addresses {arr}, whose "
                             f"elements are {ELEM_TYPES[dtypes[arr]].bytes} bytes: {s}")
        return f"lg_smem_u32({arr} + "
    s = _CU_U32_ADDR.sub(addr, s)
    return _CU_DESC_U32.sub(lambda m: f"lg_gmma_desc({m.group(1)}, {alias[m.group(2)][1]}, "
                            if m.group(2) in alias else m.group(0), s)


def _closing(s: str, i: int) -> int:
    """The index of the ``)`` matching the ``(`` at ``s[i]`` (-1: none)."""
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return j
    return -1


def _join_split_offsets(s: str, alias: Dict[str, Tuple[str, str, int]]) -> str:
    """``(sA_u32 + 2 * (a) + 2 * (b) ...)`` (an offset printed as several scaled terms, so
    the compiler keeps the per-thread term in a register and the stage term in a uniform
    one: :mod:`kernels.printer.cuda_gemm_edge`) as ``(sA_u32 + 2 * ((a) + (b) ...))``, the
    one-offset form the readers take; only names defined as 32-bit bases, only terms of one
    scale, the whole parenthesised address (anything else is left as written)."""
    out, i = [], 0
    for m in _CU_U32_ADDR.finditer(s):
        if m.start() < i or m.group(1) not in alias:
            continue
        scale = f" + {m.group(2)} * ("
        terms, j = [], m.end()
        while True:
            end = _closing(s, j)
            if end < 0:
                break
            terms.append(s[j:end + 1])
            if s.startswith(scale, end + 1):
                j = end + len(scale)
                continue
            if s.startswith(")", end + 1) and len(terms) > 1:
                out += [s[i:m.end()], "(", " + ".join(terms), "))"]
                i = end + 2
            break
    return "".join(out) + s[i:]


def _cuda_statement(s: str, ln: int, dt: Dict[str, str],
                    extra: Optional[Callable[..., Any]] = None) -> List[SourceStmt]:
    def vt(buf: str, nbytes: int) -> Tuple[Optional[str], int]:
        if buf not in dt:
            raise CExprError(f"line {ln}: {buf} is no parameter or shared array: {s}")
        return dt[buf], nbytes // ELEM_TYPES[dt[buf]].bytes

    if s == "__syncthreads();":
        return [SourceStmt("barrier", ln, text=s)]
    if s == "lg_cp_async_commit();":
        return [SourceStmt("commit", ln, text=s)]
    if s in _CU_SIMPLE:
        return [SourceStmt(_CU_SIMPLE[s], ln, text=s)]
    m = _CU_WG_WAIT.match(s)
    if m:
        return [SourceStmt("wg_wait", ln, exprs=(parse(m.group(1)),), text=s)]
    m = _CU_PIN.match(s)
    if m:
        return [SourceStmt("pin", ln, m.group(1), text=s)]
    m = _CU_WGMMA.match(s)
    if m:
        args = split_args(m.group(4))
        a_regs: Tuple[Any, ...] = ()
        ra = _CU_AREG.match(args[0]) if args else None
        if ra:                      # A from registers: 4 words = 8 16-bit elements
            w = int(ra.group(2))
            a_regs, args = ((ra.group(1), tuple(range(2 * w, 2 * w + 8))),), args[1:]
        scale_d = 1                 # the wrapper's default; a trailing 0 / 1 sets it
        if args and args[-1] in ("0", "1"):
            scale_d, args = int(args[-1]), args[:-1]
        descs = [_CU_DESC.match(a) for a in args]
        if len(descs) != 2 - len(a_regs) or not all(descs):
            raise CExprError(f"line {ln}: unreadable wgmma (A as lg_gmma_desc or &regs[w], "
                             f"then B as lg_gmma_desc): {s}")
        return [SourceStmt("wgmma", ln, text=s,
                           exprs=tuple(parse(_paren(d.group(3))) for d in descs),
                           regs=(m.group(1), (m.group(2), int(m.group(3))), *a_regs,
                                 *((d.group(2), int(d.group(1), 16)) for d in descs),
                                 ("scale_d", scale_d)))]
    m = _CU_WAIT.match(s)
    if m:
        return [SourceStmt("wait", ln, exprs=(parse(m.group(1)),), text=s)]
    m = _CU_CP.match(s)
    if m:
        args = split_args(m.group(2))
        sm = _CU_SADDR.match(args[0]) if len(args) == 3 else None
        gm = _CU_GADDR.match(args[1]) if sm else None
        if gm is None:
            raise CExprError(f"line {ln}: unreadable cp.async: {s}")
        nbytes, sbuf, gbuf = int(m.group(1)), sm.group(1), gm.group(1)
        n = args[2]
        pm = re.match(r"^\((.*)\) \? (\d+) : 0$", n)
        if pm and int(pm.group(2)) != nbytes or not pm and n != str(nbytes):
            raise CExprError(f"line {ln}: cp.async of {nbytes} bytes copies {n}: {s}")
        pred = parse(pm.group(1)) if pm else None
        return [SourceStmt("mem", ln, gbuf, (parse(_paren(gm.group(2))),), store=False,
                           vtype=vt(gbuf, nbytes), pred=pred, text=s),
                SourceStmt("mem", ln, sbuf, (parse(_paren(sm.group(2))),), store=True,
                           vtype=vt(sbuf, nbytes), text=s)]
    m = _CU_LDM.match(s)
    if m:
        args = split_args(m.group(3))
        am = re.match(r"^lg_smem_u32\((\w+) \+ (.*)\)$", args[-1])
        if not am or len(args) != int(m.group(1)) + 1:
            raise CExprError(f"line {ln}: unreadable ldmatrix: {s}")
        return [SourceStmt("mem", ln, am.group(1), (parse(_paren(am.group(2))),), store=False,
                           vtype=vt(am.group(1), 16), text=s,
                           regs=(_words(args[:-1]), "trans" if m.group(2) else ""))]
    m = _CU_MMA.match(s)
    if m:
        acc, a, b = (m.group(2), int(m.group(3))), (m.group(4), int(m.group(5))), \
            (m.group(6), int(m.group(7)))
        return [SourceStmt("mfma", ln, text=s, regs=(
            m.group(1), (acc[0], tuple(range(acc[1], acc[1] + 4))),
            (a[0], tuple(range(2 * a[1], 2 * a[1] + 8))),
            (b[0], tuple(range(2 * b[1], 2 * b[1] + 4)))))]
    edge = _cuda_edge_statement(s, ln, vt)
    if edge is not None:
        return [edge]
    if _CU_FVAR.match(s) or _CU_PRAGMA.match(s):
        return []          # no index math (a scheduling hint; a float variable's declaration)
    lse = _cuda_lse_statement(s, ln)
    if lse is not None:
        return [lse]
    pred, s = _leading_predicate(s)
    m = _CU_LDG.match(s)
    if m:
        n, i = int(m.group(1)), int(m.group(3))
        return [SourceStmt("mem", ln, m.group(4), (parse(_paren(m.group(5))),), store=False,
                           vtype=vt(m.group(4), 4 * n), pred=pred, text=s,
                           regs=((m.group(2), tuple(range(i, i + n))), ""))]
    m = _CU_ST4.match(s)
    if m:
        args = split_args(m.group(1))
        gm = _CU_GADDR.match(args[0]) if len(args) == 3 else None
        packs = [_CU_PACK.match(a) for a in args[1:]] if gm else []
        if not gm or not all(packs) or packs[0].group(1) != packs[1].group(1):
            raise CExprError(f"line {ln}: unreadable 4-wide store: {s}")
        regs = [_flat(r) for p in packs for r in split_args(p.group(2))]
        return [SourceStmt("mem", ln, gm.group(1), (parse(_paren(gm.group(2))),), store=True,
                           vtype=vt(gm.group(1), 8), pred=pred, text=s,
                           regs=((regs[0][0], tuple(r[1][0] for r in regs)), packs[0].group(1)))]
    m = _CU_PAIR.match(s)
    if m:
        regs = [_flat(r) for r in split_args(m.group(4))]
        return [SourceStmt("mem", ln, m.group(1), (parse(_paren(m.group(2))),), store=True,
                           vtype=vt(m.group(1), 4), pred=pred, text=s,
                           regs=((regs[0][0], tuple(r[1][0] for r in regs)), m.group(3)))]
    m = _CU_ONE.match(s)
    if m:
        return [SourceStmt("mem", ln, m.group(1), (parse(m.group(2)),), store=True,
                           vtype=(vt(m.group(1), 0)[0], 1), pred=pred, text=s,
                           regs=(_flat(m.group(4)), m.group(3)))]
    dec = extra(s, ln, dt, pred) if extra is not None else None
    if dec is not None:
        return dec
    raise CExprError(f"line {ln}: a statement the CUDA printer does not print: {s}")


def _cuda_edge_statement(s: str, ln: int, vt: Callable[[str, int], Tuple[Optional[str], int]]
                         ) -> Optional[SourceStmt]:
    """The edge copy's element load (``ev[w] = lg_ld16z(buf + (off), pred);``, the odd element
    ``ev[w] |= ... << 16;``) or its 16-byte shared store (``lg_st_shared_v4(lg_smem_u32(sA +
    (off)), &ev[w]);``); None for any other line."""
    m = _CU_LD16.match(s)
    if m:
        args = split_args(m.group(4))
        gm = _CU_GADDR.match(args[0]) if len(args) == 2 else None
        odd = m.group(3) == "|="
        if gm is None or odd != bool(m.group(5)):
            raise CExprError(f"line {ln}: unreadable edge load (the even element '=', the odd "
                             f"'|= ... << 16'): {s}")
        elem = 2 * int(m.group(2)) + int(odd)
        return SourceStmt("mem", ln, gm.group(1), (parse(_paren(gm.group(2))),), store=False,
                          vtype=vt(gm.group(1), 2), pred=parse(args[1]), text=s,
                          regs=((m.group(1), (elem,)), ""))
    m = _CU_STV4.match(s)
    if m:
        args = split_args(m.group(1))
        sm = _CU_SADDR.match(args[0]) if len(args) == 2 else None
        rm = _CU_AREG.match(args[1]) if sm else None
        if rm is None:
            raise CExprError(f"line {ln}: unreadable edge store: {s}")
        w = int(rm.group(2))
        return SourceStmt("mem", ln, sm.group(1), (parse(_paren(sm.group(2))),), store=True,
                          vtype=vt(sm.group(1), 16), text=s,
                          regs=((rm.group(1), tuple(range(2 * w, 2 * w + 8))), ""))
    return None


def _cuda_lse_statement(s: str, ln: int) -> Optional[SourceStmt]:
    """The log-sum-exp merge statements (:mod:`kernels.ir.lse_merge`) as ``lse_*`` statements
    whose ``regs`` name the variables and registers, or None."""
    m = _CU_LSE_MAX.match(s)
    if m:
        return SourceStmt("lse_max", ln, text=s, regs=(m.group(1), m.group(2), int(m.group(3))))
    m = _CU_LSE_MERGE.match(s)
    if m:
        n, o, x = int(m.group(1)), int(m.group(5)), int(m.group(7))
        return SourceStmt("lse_merge", ln, text=s, regs=(
            m.group(2), m.group(3), (m.group(4), tuple(range(o, o + n))),
            (m.group(6), tuple(range(x, x + n))), m.group(8), int(m.group(9))))
    m = _CU_LSE_NORM.match(s)
    if m:
        n, o = int(m.group(1)), int(m.group(3))
        return SourceStmt("lse_norm", ln, text=s, regs=((m.group(2), tuple(range(o, o + n))),
                                                       m.group(4)))
    return None
