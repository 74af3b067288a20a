"""The default prefill's full-tile KV loop issues the next tile's global loads first (issue 16).

The IR always listed the prefetch at the top of the iteration, but clang-19's scheduler sank
the loads to just before their LDS stores (bf16 d128: loads at instructions ~189-257 of 407,
``vmcnt(0)`` at ~269), so they had about 70 instructions to cover a ~700-cycle latency and the
static model saw every wave wait on global memory.  A ``sched_barrier`` after the loads pins
them first.  These tests read the COMPILED loop (clang-19 offline, the same code object the
performance model reads), so a compiler or IR change that sinks the loads again fails here.
"""

from typing import List

import pytest

from kernels.amd.attention_plan import plan_attention
from kernels.amd.driver import build_program
from kernels.amd.flash_attention import (AttnBuilder, attention_family, built_attention)
from kernels.flash_attention import AttnConfig, get_kernel
from kernels.ir.core import Loop, SchedBarrier
from kernels.perf import load_program


def full_tile_loop(binary: bytes) -> List:
    """The full-tile loop: of the kernel's innermost loops with MFMAs, the shortest (the
    masked loop adds the mask's instructions)."""
    prog = load_program(binary)
    assert len(prog.mfma_loops) >= 2, "expected a full-tile and a masked KV loop"
    return min(prog.mfma_loops, key=len)


def load_order(loop: List) -> dict:
    """Positions in the loop of its global loads, first MFMA, first LDS write and the first
    ``s_waitcnt`` that waits on a prefetched load (vmcnt below the number of loads), and how
    many LDS reads follow that wait."""
    names = [o.mnemonic for o in loop]
    loads = [i for i, n in enumerate(names) if n.startswith("global_load")]
    mfma = [i for i, n in enumerate(names) if n.startswith("v_mfma")]
    reads = [i for i, n in enumerate(names) if n.startswith("ds_read")]
    waits = [i for i, o in enumerate(loop) if o.mnemonic == "s_waitcnt" and o.vmcnt is not None
             and o.vmcnt < len(loads) and i > loads[-1]]
    writes = [i for i, n in enumerate(names) if n.startswith("ds_write")]
    return {"n": len(loop), "loads": loads, "first_mfma": mfma[0], "wait": waits[0],
            "reads_after_wait": sum(r > waits[0] for r in reads), "first_write": writes[0]}


def assert_loads_early(o: dict) -> None:
    # every prefetch load is issued before the iteration's first MFMA
    assert o["loads"][-1] < o["first_mfma"], o
    # the wait on them comes before the stores, more than half the loop after the loads (the
    # latency they have to land), behind all but a few of the tile's LDS reads
    assert o["wait"] < o["first_write"], o
    assert o["wait"] - o["loads"][-1] > o["n"] // 2, o
    assert o["reads_after_wait"] <= 4, o


DEFAULTS = [(d, causal) for d in (64, 128) for causal in (False, True)]


@pytest.mark.parametrize("d,causal", DEFAULTS,
                         ids=[f"bf16-d{d}{'-causal' if c else ''}" for d, c in DEFAULTS])
def test_full_tile_loop_issues_prefetch_first(d, causal):
    bk = get_kernel(AttnConfig(head_dim=d, dtype="bf16", causal=causal))
    assert_loads_early(load_order(full_tile_loop(bk.compile().binary)))


def test_without_the_sched_barrier_the_loads_sink():
    """Planted bug: the same kernel without the sched_barrier compiles to the old order (the
    loads behind the first MFMA, little distance to their wait), and the check above fails."""
    def strip(k):
        for s in k.body:
            if isinstance(s, Loop):
                s.body = [x for x in s.body if not isinstance(x, SchedBarrier)]
        return k
    family = attention_family(lambda plan: strip(AttnBuilder(plan).build()), plan=plan_attention)
    bk = build_program([family], AttnConfig(head_dim=128, dtype="bf16"),
                       lambda sts: built_attention(sts[0]))
    assert "sched_barrier" not in bk.source
    with pytest.raises(AssertionError):
        assert_loads_early(load_order(full_tile_loop(bk.compile().binary)))


def test_the_sched_barrier_is_in_the_full_tile_loop_only():
    """One per full-tile iteration (after the 8 prefetch loads at d128); the masked loop and
    the one-trip last full tile keep their guarded prefetch unpinned (no gain by the model)."""
    k = get_kernel(AttnConfig(head_dim=128, dtype="bf16")).ir
    loops = [s for s in k.body if isinstance(s, Loop)]
    counts = [sum(isinstance(x, SchedBarrier) for x in lp.body) for lp in loops]
    assert counts == [1, 0, 0]
    first = loops[0].body
    at = next(i for i, x in enumerate(first) if isinstance(x, SchedBarrier))
    assert sum(getattr(x, "tag", "").endswith("copy.load") for x in first[:at]) == 8
