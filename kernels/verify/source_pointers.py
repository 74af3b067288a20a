"""Reading back the chained source pointers of ``cp.async`` copies
(:mod:`kernels.printer.cuda_cp_chain`): the CUDA text reader
(:func:`~.source_text.read_cuda_source`) takes each declaration

    ``const T* name = base + (offset);``    (base: a pointer parameter or an earlier such name)

as a binding of ``name`` to ``buffer + (sum of its chain's offsets)`` and rewrites a
``cp.async`` whose source is a bare bound name into the plain form ``buffer + (offset)``
the statement reader checks against the IR (offset, element type, predicate, ranges).

What is refused (:class:`~.cexpr.CExprError`, with the line): a name declared twice (the
printer's names are unique, so no C scoping question arises), a base that is neither a
parameter nor a declared name, a pointer type other than the buffer parameter's own (pointer
arithmetic counts elements of the declared type), an offset the C parser does not take.  Each
chain offset is evaluated with C int semantics as part of the resolved sum, so the range
check (``index_ranges``) bounds the chain's partial sums as well as the whole.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from .cexpr import CExprError, parse, split_args

__all__ = ["PointerChains", "POINTER_DECL"]

#: ``const T* name = base + (offset);``
POINTER_DECL = re.compile(r"^(const \w+)\* (\w+) = (\w+) \+ \((.*)\);$")
_CP = re.compile(r"^(lg_cp_async(?:4|8|16)\()(.*)\);$")


class PointerChains:
    """The pointer bindings of one kernel body, read in text order.  ``params``: the
    kernel's parameter declarations as printed (``const lg_u16* __restrict__ K``)."""

    def __init__(self, params: List[str]) -> None:
        self.types: Dict[str, str] = {}
        for p in params:
            m = re.match(r"^(const \w+)\* __restrict__ (\w+)$", p.strip())
            if m:
                self.types[m.group(2)] = m.group(1)
        self.bound: Dict[str, Tuple[str, str, int]] = {}     # name -> buffer, offset, line

    def declare(self, s: str, ln: int) -> bool:
        """Take ``s`` if it is a pointer declaration (True), refusing a malformed one."""
        m = POINTER_DECL.match(s)
        if not m:
            return False
        ctype, name, base, off = m.groups()
        if name in self.bound or name in self.types:
            raise CExprError(f"line {ln}: pointer {name} declared again: {s}")
        if base in self.types:
            buf, prior = base, ""
        elif base in self.bound:
            buf, prior, _ = self.bound[base]
        else:
            raise CExprError(f"line {ln}: pointer {name} from {base}, which is no pointer "
                             f"parameter or declared pointer: {s}")
        if ctype != self.types[buf]:
            raise CExprError(f"line {ln}: pointer {name} is {ctype}*, its buffer {buf} is "
                             f"{self.types[buf]}*: {s}")
        parse(off)                  # a C expression the readers take, or refused here
        self.bound[name] = (buf, f"{prior} + ({off})" if prior else f"({off})", ln)
        return True

    def resolve(self, s: str) -> str:
        """``s`` with a ``cp.async`` source that is a bound name written as
        ``buffer + (offset)`` (other lines as they are)."""
        m = _CP.match(s)
        if not m or not self.bound:
            return s
        args = split_args(m.group(2))
        if len(args) != 3 or args[1].strip() not in self.bound:
            return s
        buf, off, _ = self.bound[args[1].strip()]
        return f"{m.group(1)}{args[0].strip()}, {buf} + ({off}), {args[2].strip()});"
