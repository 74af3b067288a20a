"""kernels.ir: the kernel IR the AMD builders produce, the verifiers check and the printers print.

* :mod:`kernels.ir.core`: statements (``Access``, ``Mfma``, ``Loop``, ...), ``Kernel``, ``walk``
  and ``c_eval`` (sympy expressions evaluated with C semantics);
* :mod:`kernels.ir.attention`: the softmax / reduction statements of the attention kernels.

``from kernels.ir import Access, Kernel, c_eval`` is the documented path (it was the module
``kernels/ir.py`` before the package).
"""

from .core import (Access, Barrier, Comment, Frag, If, Kernel, Let, LetThreadId, Loop, Mfma,
                   NonIntegerExpr, Param, THREAD_ID_AGAIN, Regs, SCHED_MASKS, Scale, SchedBarrier, SchedGroupBarrier, SetPrio,
                   Shared, WaitCnt, ZeroFrag, c_compile, c_eval, group_barrier, is_group_barrier,
                   swizzle_expr, sym, walk)

__all__ = ["Frag", "Regs", "Param", "Shared", "Let", "LetThreadId", "THREAD_ID_AGAIN", "Comment", "Loop", "If", "Barrier",
           "SchedBarrier", "SchedGroupBarrier", "SetPrio", "SCHED_MASKS", "WaitCnt", "Access",
           "Mfma", "Scale", "ZeroFrag", "Kernel", "sym", "c_eval", "c_compile", "NonIntegerExpr",
           "walk", "swizzle_expr", "group_barrier", "is_group_barrier"]
