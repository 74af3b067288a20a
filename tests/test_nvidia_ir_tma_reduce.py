"""The TMA GEMM's split-K with a second, reduce launch (``TmaGemmConfig(split_k=True,
reduce="kernel")``, :mod:`kernels.nvidia.wgmma_tma_ir_reduce`) as IR: the split kernel on the
per-role model and its reduce kernel run over every thread against the workspace the split
kernel wrote (:mod:`kernels.verify.gate_split_reduce`).

The registry :data:`REDUCE_BUGS` plants one bug per rule of the reduce kernel's model (the sum's
order and count, its workspace layout, the C address, the zero fill, the predicates, the split
kernel's partials and the declaration of the second launch) and :data:`TEXT_BUGS` in the printed
reduce kernel; each is refused by its named check."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from kernels.ir.core import Access, Loop, ZeroFrag, sym, walk
from kernels.ir.ticket import AtomicTicket, PartialAdd
from kernels.nvidia.wgmma_tma import TmaGemmConfig
from kernels.nvidia.wgmma_tma_ir import (build_tma_gemm_ir, ir_form_refusal, ir_kernel_name,
                                         tma_ir_source)
from kernels.nvidia.wgmma_tma_ir_reduce import reduce_kernel_name
from kernels.verify.verifier import verify

#: the selection's two-launch split tile (64x256: the inline merge would spill)
RED = TmaGemmConfig(dtype="bf16", bm=64, bn=256, stages=5, store="direct", split_k=True,
                    reduce="kernel")
SMALL = ((70, 75, 320, 2, 75, 3), (130, 128, 200, 2, 136, 2))


def _bad(k, source=None):
    r = verify(k, arch="sm_90a", source=source)
    return {n: c.counterexample for n, c in r.checks.items() if not c.holds}


@pytest.mark.parametrize("cfg", [
    RED, dataclasses.replace(RED, dtype="f16", b_major="k", a_rows=16),
    dataclasses.replace(RED, bm=128, bn=128, stages=6),
], ids=lambda c: c.name)
def test_two_launch_split_k_ir_verifies(cfg):
    assert ir_form_refusal(cfg) is None
    k = build_tma_gemm_ir(cfg)
    src = tma_ir_source(k)
    red = k.meta["reduce"]
    assert k.name == ir_kernel_name(cfg) and red.name == reduce_kernel_name(cfg)
    assert not any(isinstance(s, AtomicTicket) for s in walk(k.body))
    r = verify(k, arch="sm_90a", source=src)
    assert "merge_reads_partials" in r.checks and "printed_source" in r.checks
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert src.count("__global__") == 2 and src.rstrip().endswith("}")


@settings(max_examples=5, deadline=None)
@given(m=st.integers(1, 140), n=st.integers(1, 300), pad=st.integers(0, 9),
       k=st.integers(1, 700), ctas=st.integers(1, 4), splits=st.integers(1, 6))
def test_two_launch_split_k_verifies_at_any_size(m, n, pad, k, ctas, splits):
    kern = build_tma_gemm_ir(RED, ((m, n, k, ctas, n + pad, splits),))
    assert _bad(kern) == {}


# ---------------------------------------------------------------------------- planted bugs

def _red(k):
    return k.meta["reduce"]


def _loop(k):
    return next(s for s in _red(k).body if isinstance(s, Loop))


def _add(k):
    return _loop(k).body[0]


def _store(k):
    return next(s for s in _red(k).body if isinstance(s, Access))


def _reverse_order(k):
    a = _add(k)
    a.offset = a.offset.subs(sym("sp"), sym("splits") - 1 - sym("sp"))


def _split_short(k):
    _loop(k).stop = sym("splits") - 1


def _split_twice(k):
    _loop(k).body.append(copy.deepcopy(_add(k)))


def _next_element(k):
    a = _add(k)
    a.offset = a.offset + 1


def _neighbours_swapped(k):
    a, e = _add(k), sym("e")
    a.offset = a.offset + 1 - 2 * sympy.Mod(e, 2)       # M N even at SMALL


def _store_ignores_ldc(k):
    s = _store(k)
    r, e = sym("r"), sym("e")
    s.offset = r * sym("N") + e - r * sym("N")


def _no_zero_fill(k):
    body = _red(k).body
    del body[next(i for i, s in enumerate(body) if isinstance(s, ZeroFrag))]


def _store_unpredicated(k):
    _store(k).pred = None


def _read_unpredicated(k):
    _add(k).pred = None


def _layout_mismatch(k):
    _red(k).meta["plane_stride"] = {"W": sym("M") * sym("N") + 1}


def _no_reduce_declared(k):
    del k.meta["reduce"]


def _partials_one_plane_up(k):
    for s in walk(k.body):
        if isinstance(s, Access) and s.buf == "W":
            s.offset = s.offset + sym("M") * sym("N")


def _stored_twice(k):
    body = _red(k).body
    body.append(copy.deepcopy(_store(k)))


def _last_element_skipped(k):
    s = _store(k)
    s.pred = sym("e") < sym("M") * sym("N") - 1


def _unmodelled_statement(k):
    from kernels.ir.core import Barrier
    _red(k).body.insert(1, Barrier())


REDUCE_BUGS = (
    ("the last C element never stored", _last_element_skipped, "coverage"),
    ("a statement the reduce model does not run", _unmodelled_statement, "lds_races"),
    ("splits summed in reverse order", _reverse_order, "merge_reads_partials"),
    ("a split left out", _split_short, "merge_reads_partials"),
    ("a split summed twice", _split_twice, "merge_reads_partials"),
    ("the next element's partial (the last reads past W)", _next_element, "in_bounds"),
    ("neighbouring elements' partials", _neighbours_swapped, "merge_reads_partials"),
    ("C's row stride taken as N (stores in the padding)", _store_ignores_ldc, "in_bounds"),
    ("no zero fill before the sum", _no_zero_fill, "lane_accumulator_writeback"),
    ("C stored past M x N", _store_unpredicated, "in_bounds"),
    ("partials read past the workspace", _read_unpredicated, "in_bounds"),
    ("reduce kernel's workspace layout differs", _layout_mismatch, "merge_reads_partials"),
    ("no reduce kernel named", _no_reduce_declared, "merge_reads_partials"),
    ("partials stored a plane up", _partials_one_plane_up, "in_bounds"),
    ("C stored twice per thread", _stored_twice, "lane_accumulator_writeback"),
)


@pytest.fixture(scope="module")
def built():
    k = build_tma_gemm_ir(RED, SMALL)
    assert _bad(k, tma_ir_source(k)) == {}
    return k


@pytest.mark.parametrize("bug", REDUCE_BUGS, ids=[b[0] for b in REDUCE_BUGS])
def test_planted_reduce_bug_is_refused(built, bug):
    name, plant, check = bug
    k = copy.deepcopy(built)
    plant(k)
    bad = _bad(k)
    assert check in bad, (name, bad)


TEXT_BUGS = (
    ("assign instead of add", lambda s: s.replace("acc[0] += x;", "acc[0] = x;")),
    ("reduce kernel missing", lambda s: s[:s.rindex('extern "C"')]),
    ("reduce kernel printed twice", lambda s: s + s[s.rindex('extern "C"'):]),
    ("C's row stride edited", lambda s: s.replace("ldc*r]", "N*r]")),
)


@pytest.mark.parametrize("bug", TEXT_BUGS, ids=[b[0] for b in TEXT_BUGS])
def test_printed_reduce_mutation_is_refused(built, bug):
    name, mutate = bug
    src = tma_ir_source(built)
    bad_src = mutate(src)
    assert bad_src != src, name
    assert "printed_source" in _bad(built, bad_src), name


def test_split_kernel_text_still_checked(built):
    """The split kernel's own printed checks run on its part of the text: an edited k range
    of its consumers is refused there."""
    src = tma_ir_source(built)
    line = "\n      const int kt0 = kt_per*split;"
    assert src.count(line) == 1
    assert "printed_source" in _bad(built, src.replace(line, "\n      const int kt0 = kt_per*split"
                                                             " + 1;"))
