"""The cp.async producer's sources printed as chained 64-bit pointers
(kernels/printer/cuda_cp_chain.py, ``meta["cp_src_chain"]``; WsOverlapBuilder.CP_SRC_CHAIN):
what the printer plans and prints, that the printed text of the dispatched d256 configuration
reads back and verifies with the chains, and the planted bugs of the new printing rule (a
wrong step, a pointer of the wrong type, an undeclared base, a name declared twice, a chain
into the other buffer, a pointer used before it is declared) refused by the text reader
(kernels/verify/source_pointers.py)."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from kernels.ir.nvidia import CpAsync
from kernels.ir.core import walk
from kernels.nvidia.prefill_select import choose_prefill
from kernels.nvidia.wgmma_ws_ir import WsOverlapBuilder, build_ws_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.printer.cuda_cp_chain import plan_chains
from kernels.verify.attention_static import default_instances
from kernels.verify.printed_ws import verify_printed_ws


def _cfg(causal=False):
    return choose_prefill("bf16", 256, causal, "wgmma", True, 4096, 4096).config


@lru_cache(maxsize=None)
def _kernel(depth: int, whole: bool = False, causal: bool = False):
    saved = WsOverlapBuilder.CP_SRC_CHAIN, WsOverlapBuilder.CP_WHOLE_BLOCKS
    WsOverlapBuilder.CP_SRC_CHAIN, WsOverlapBuilder.CP_WHOLE_BLOCKS = depth, whole
    try:
        k = build_ws_ir(_cfg(causal))
    finally:
        WsOverlapBuilder.CP_SRC_CHAIN, WsOverlapBuilder.CP_WHOLE_BLOCKS = saved
    return k, emit_cuda_attention(k)


def _printed_fails(k, src, inst="ragged-gqa2"):
    insts = {i.name: i for i in default_instances(k)}
    r = verify_printed_ws(k, src, instances=[insts[inst]])
    return {n: c.counterexample for n, c in r.items() if not c.holds}


# ---- the plan and the printed form -----------------------------------------------------------

def test_no_chain_without_the_meta_and_a_negative_depth_is_refused():
    k, src = _kernel(0)
    assert "lg_src" not in src and "cp_src_chain" not in k.meta
    assert plan_chains(k.body, 0) == {}
    with pytest.raises(ValueError, match="depth -1"):
        plan_chains(k.body, -1)


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_every_copy_reads_a_chained_pointer(depth):
    """Q, then K and V of the loop: three runs of 32, 16 and 16 copies; copy i steps from copy
    i - depth (from copy 0 below depth), each step a multiple of the row stride."""
    k, src = _kernel(depth)
    assert k.meta["cp_src_chain"] == depth
    copies = [s for s in walk(k.body) if isinstance(s, CpAsync)]
    plan = plan_chains(k.body, depth)
    assert set(plan) == {id(c) for c in copies}
    decl = re.findall(r"const lg_u16\* (lg_src(\d+)_(\d+)) = (\w+) \+ \((.*)\);", src)
    assert len(decl) == len(copies) == 64
    runs = {}
    for name, r, i, base, step in decl:
        runs.setdefault(int(r), []).append((int(i), base, step))
    assert sorted(len(v) for v in runs.values()) == [16, 16, 32]
    for r, links in runs.items():
        for i, base, step in links:
            if i == 0:
                assert base in ("Q", "K", "V")
            else:
                assert base == f"lg_src{r}_{i - depth if i >= depth else 0}"
                assert re.fullmatch(r"\d+\*[qkv]_ss", step), step
    # every cp.async's source is the name declared on the line above it
    lines = [ln.strip() for ln in src.splitlines()]
    for n, ln in enumerate(lines):
        if ln.startswith("lg_cp_async16("):
            name = re.match(r"const lg_u16\* (\w+) = ", lines[n - 1]).group(1)
            assert f", {name}, " in ln


@pytest.mark.parametrize("depth,whole,causal", [(2, False, False), (3, True, True)])
def test_the_chained_text_reads_back_and_verifies(depth, whole, causal):
    k, src = _kernel(depth, whole, causal)
    for inst in ("ragged-gqa2", "ring-wrap"):
        assert _printed_fails(k, src, inst) == {}


# ---- planted bugs of the printing rule ---------------------------------------------------------

def _plant(src, old, new):
    assert old in src, old
    return src.replace(old, new, 1)


def _step(src):
    """The first V chain's fifth link: its step one row-group short."""
    m = re.search(r"(const lg_u16\* lg_src2_5 = lg_src2_\d+ \+ \()(\d+)(\*v_ss\);)", src)
    return _plant(src, m.group(0), f"{m.group(1)}{int(m.group(2)) - 4}{m.group(3)}")


PLANTS = [
    ("a chain step one row group short", _step, "printed_source", r"printed -?\d+, IR -?\d+"),
    ("a pointer of another element type",
     lambda s: _plant(s, "const lg_u16* lg_src1_3 =", "const lg_u32* lg_src1_3 ="),
     "printed_source", r"its buffer K is const lg_u16\*"),
    ("a chain from an undeclared pointer",
     lambda s: _plant(s, "= lg_src1_1 + (", "= lg_src7_1 + ("),
     "printed_source", "no pointer parameter or declared pointer"),
    ("a pointer name declared twice",
     lambda s: _plant(s, "const lg_u16* lg_src1_3 =", "const lg_u16* lg_src1_2 ="),
     "printed_source", "declared again"),
    ("a V copy chained from K's pointers",
     lambda s: _plant(s, "const lg_u16* lg_src2_1 = lg_src2_0 + (",
                      "const lg_u16* lg_src2_1 = lg_src1_0 + ("),
     "printed_source", "accesses K, the IR V"),
]


@pytest.mark.parametrize("name,plant,check,msg", PLANTS, ids=[p[0] for p in PLANTS])
def test_planted_chain_bugs_are_refused(name, plant, check, msg):
    k, src = _kernel(2)
    assert _printed_fails(k, src) == {}
    bad = _printed_fails(k, plant(src))
    assert check in bad, (name, bad)
    assert re.search(msg, bad[check]), (name, bad[check])


def test_a_source_that_names_no_declared_pointer_is_refused():
    """A copy reading a name the text never declared: not rewritten, so unreadable."""
    k, src = _kernel(2)
    bad = _printed_fails(k, _plant(src, "lg_cp_async16((sK_u32 + 2 * (pkv1) + 2 * (16384*(((j) % 2)))), lg_src1_1,",
                                   "lg_cp_async16((sK_u32 + 2 * (pkv1) + 2 * (16384*(((j) % 2)))), lg_src9_1,"))
    assert "unreadable cp.async" in bad["printed_source"], bad
