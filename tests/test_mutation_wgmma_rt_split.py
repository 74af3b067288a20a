"""Planted bugs in the cp.async wgmma GEMM's split-K IR (kernels/nvidia/wgmma_rt_ir_split.py),
each refused by the check that owns it (kernels/verify/gate_split_partials.py composed with the
every-block engine and the reduce kernel's proof): a split multiplying another split's k
tiles, partials stored to the wrong plane (the per-split k range) or all to one plane
(workspace coverage), the reduce kernel skipping a plane or reading another layout
(merge_reads_partials), and printed text that is not the verified IR (printed_source)."""

from __future__ import annotations

import dataclasses

import sympy

from kernels.ir import Access, Let, Loop, sym, walk
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_rt_ir_split import (build_wgmma_rt_split_ir, split_instances,
                                              split_source)
from kernels.verify.verifier import verify

SMALL = WgmmaGemmConfig(bm=64, bn=64, stages=3, split_k=True)
SP = sym("sp")
EDGE = [i for i in split_instances(SMALL) if i.name == "edge_odd"]     # 3 splits of 2 tiles


def _failed(k, source=None):
    r = verify(k, arch="sm_90a", instances=EDGE, source=source)
    return {n: str(c.counterexample) for n, c in r.checks.items() if not c.holds}


def _w_stores(k):
    return [a for a in walk(k.body) if isinstance(a, Access) and a.buf == "W"]


def _plane(k, new):
    """Every W store at plane ``new`` (an expression of sp) instead of sp: offset and
    coordinates alike, so the index math still agrees with the layout."""
    for a in _w_stores(k):
        a.offset = sympy.expand(a.offset.xreplace({SP: new}))
        a.coords = tuple(tuple(sympy.expand(sympy.sympify(x).xreplace({SP: new})) for x in c)
                         for c in a.coords)


def test_unmutated_kernel_passes_at_the_instance():
    assert EDGE and EDGE[0].values["splits"] == 3
    assert not _failed(build_wgmma_rt_split_ir(SMALL))


def test_split_running_into_the_next_splits_tiles_is_refused():
    """``KTn = kt_per + 1``: split 0 also multiplies split 1's first k tile."""
    k = build_wgmma_rt_split_ir(SMALL)
    (let,) = [s for s in walk(k.body) if isinstance(s, Let) and s.name == "KTn"]
    let.expr = sym("kt_per") + 1
    bad = _failed(k)
    assert "lane_accumulator_writeback" in bad
    assert "unexpected k" in bad["lane_accumulator_writeback"]


def test_partials_in_the_wrong_plane_are_refused():
    """Split s stores to plane 2 - s: every element still written once (coverage holds), but
    plane s holds another split's k range."""
    k = build_wgmma_rt_split_ir(SMALL)
    _plane(k, 2 - SP)
    bad = _failed(k)
    assert set(bad) >= {"lane_accumulator_writeback"} and "coverage" not in bad, bad
    assert "missing k" in bad["lane_accumulator_writeback"]


def test_every_split_storing_plane_zero_is_refused():
    k = build_wgmma_rt_split_ir(SMALL)
    _plane(k, sympy.Integer(0))
    bad = _failed(k)
    assert "coverage" in bad and "stored 0 times" in bad["coverage"], bad
    assert "written 0 times" in bad["merge_reads_partials"]


def test_reduce_kernel_skipping_the_last_plane_is_refused():
    k = build_wgmma_rt_split_ir(SMALL)
    red = k.meta["reduce"]
    (loop,) = [s for s in walk(red.body) if isinstance(s, Loop)]
    loop.stop = sym("splits") - 1
    bad = _failed(k)
    assert "merge_reads_partials" in bad and "not one of each" in bad["merge_reads_partials"]


def test_reduce_kernel_reading_another_workspace_layout_is_refused():
    k = build_wgmma_rt_split_ir(SMALL)
    red = k.meta["reduce"]
    red.meta["row_stride"] = dict(red.meta["row_stride"], W=sym("N") + 1)
    bad = _failed(k)
    assert "merge_reads_partials" in bad and "row_stride" in bad["merge_reads_partials"]


def test_printed_reduce_kernel_missing_is_refused():
    k = build_wgmma_rt_split_ir(SMALL)
    src = split_source(k)
    cut = src[:src.index('extern "C" __global__', src.index(k.name + "(")) - 1]
    cut = cut[:cut.rindex("}") + 1] + "\n"
    bad = _failed(k, cut)
    assert "printed_source" in bad and "reduce kernel" in bad["printed_source"]


def test_printed_split_range_not_the_verified_one_is_refused():
    k = build_wgmma_rt_split_ir(SMALL)
    src = split_source(k)
    assert "const int kt0 = kt_per*sp;" in src
    bad = _failed(k, src.replace("const int kt0 = kt_per*sp;", "const int kt0 = kt_per*sp + 1;"))
    assert "printed_source" in bad


def test_dataclass_fields_are_what_the_mutations_edit():
    """The mutations above set Access.offset / coords and Let.expr: fields, not copies."""
    names = {f.name for f in dataclasses.fields(Access)}
    assert {"offset", "coords", "pred"} <= names
