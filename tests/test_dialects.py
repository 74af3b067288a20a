"""Printed forms of CuTe C++, CuTe DSL and FlyDSL: read by layoutalg.parse, printed back.

The strings come from tests/fixtures/dialect_strings.json, printed by the tools themselves
(CuTe C++ via g++, CuTe DSL 4.8.1 traced on the CPU, FlyDSL 0.5.0); the file says how.
"""

from __future__ import annotations

import json
import os

import pytest
import sympy
from hypothesis import given, settings

import layoutalg as la
from layoutalg.dialects import DIALECTS, canonical, format_as, read
from layoutalg.strategies import layouts

HERE = os.path.dirname(__file__)
STRINGS = json.load(open(os.path.join(HERE, "fixtures", "dialect_strings.json")))
SW_TILE = la.ComposedLayout(la.Swizzle(3, 3, 3), 0, la.Layout((8, 64), (64, 1)))


@pytest.mark.parametrize("text, dialect, value", [
    (STRINGS["cute-c++"]["strings"][0], "cute-c++", la.Layout((8, 64), (64, 1))),
    (STRINGS["cute-c++"]["strings"][1], "cute-c++", la.Layout((8, 64), (64, 1))),
    (STRINGS["cute-c++"]["strings"][2], "cute-c++", SW_TILE),
    (STRINGS["cute-c++"]["strings"][4], "cute-c++", SW_TILE),
    (STRINGS["cute-c++"]["strings"][5], "cute-c++", SW_TILE),
    (STRINGS["cute-c++"]["strings"][6], "cute-c++", la.Layout(((16, 4), 4), ((1, 64), 16))),
    (STRINGS["flydsl"]["strings"][0], "flydsl", la.Swizzle(3, 3, 3)),
    (STRINGS["flydsl"]["strings"][1], "flydsl", la.Layout((8, 64), (64, 1))),
    (STRINGS["flydsl"]["strings"][3], "flydsl", SW_TILE),
    (STRINGS["cute-dsl"]["strings"][2], "cute-dsl", SW_TILE),
    (STRINGS["cute-dsl"]["strings"][1], "cute-dsl", la.Swizzle(3, 3, 3)),
    (STRINGS["cute-dsl"]["strings"][5], "layoutalg", la.Layout(((16, 4), 4), ((1, 64), 16))),
    ("Layout<(4,2):(2,1)>", "flydsl", la.Layout((4, 2), (2, 1))),
    ("(8,64):(64,1)", "layoutalg", la.Layout((8, 64), (64, 1))),
])
def test_real_printed_strings_parse_and_name_their_dialect(text, dialect, value):
    got, d = read(text)
    assert got == value
    assert d.name == dialect
    assert la.parse(text) == value          # the hook in parse() reads them too


def test_pointer_prefix_records_the_element_width():
    _, d = read(STRINGS["cute-c++"]["strings"][4])
    assert d.elem_bits == 16


def test_gmma_smem_flag_swizzle_is_cute_offsets_at_every_element():
    g = STRINGS["cute-c++-gmma"]
    lds = la.parse(g["layout"])
    m, n = g["shape"]
    ours = [lds(i + m * j) for i in range(m) for j in range(n)]
    assert ours == g["offsets"]             # CuTe's own &T(i,j) - base, 512 entries


def test_dynamic_extents_become_distinct_symbols():
    v, d = read(STRINGS["flydsl"]["strings"][2])          # !fly.layout<(4,?):(1,4)>
    assert d.name == "flydsl" and d.dynamic == ("dyn0",)
    assert v.shape[1] == sympy.Symbol("dyn0", integer=True, positive=True)
    v, d = read(STRINGS["cute-dsl"]["strings"][3])          # (8,?):(?,1)
    assert d.dynamic == ("dyn0", "dyn1") and d.name == "cute-dsl"
    assert v.shape[1] != v.stride[0]        # two '?' are not known to be equal
    _, d = read(STRINGS["cute-dsl"]["strings"][4])          # (8,?{div=16}):(?{div=16},1)
    assert d.divisibility == (16, 16)
    _, d = read("(?{div=8},4):(1,?)")
    assert d.divisibility == (8, None)


def test_flydsl_zero_extent_is_refused_with_the_reason():
    with pytest.raises(la.ParseError, match="extents must be >= 1, got 0"):
        la.parse(STRINGS["flydsl"]["strings"][4])         # FlyDSL's MFMA(32,32,1,f32) A


@pytest.mark.parametrize("text, msg", [
    ("Sw<3,0,3> o smem_ptr[16b](unset) o 8:1", "splits a 16-bit element"),
    ("Sw<3,4,3> o smem_ptr[12b](unset) o 8:1", "power-of-two number of bytes"),
    ("8:1 o smem_ptr[16b](unset)", "smem_ptr is read only"),
    ("!fly.layout<(4,2):(2,1)", "cannot parse"),
])
def test_malformed_dialect_text_is_refused(text, msg):
    with pytest.raises(la.ParseError, match=msg):
        la.parse(text)


@pytest.mark.parametrize("dialect, text", [
    ("cute-c++", "Sw<3,3,3> o _0 o (_8,_64):(_64,_1)"),
    ("cute-dsl", "S<3,3,3> o 0 o (8,64):(64,1)"),
    ("flydsl", "!fly.composed_layout<S<3,3,3> o 0 o (8,64):(64,1)>"),
    ("layoutalg", "Sw<3,3,3> o 0 o (8,64):(64,1)"),
])
def test_format_as_prints_what_each_tool_prints(dialect, text):
    assert format_as(SW_TILE, dialect) == text
    assert la.parse(text) == SW_TILE


def test_format_as_symbols_and_refusals():
    v = la.parse("(4,?):(1,4)")
    assert format_as(v, "flydsl") == "!fly.layout<(4,?):(1,4)>"
    assert format_as(la.Swizzle(3, 3, 3), "flydsl") == "!fly.swizzle<S<3,3,3>>"
    assert format_as(la.Layout(4, -1), "cute-c++") == "_4:_-1"
    assert la.parse("_4:_-1") == la.Layout(4, -1)
    with pytest.raises(la.ParseError, match="unknown dialect"):
        format_as(SW_TILE, "cutlass")


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_every_dialect_round_trips(L):
    for d in DIALECTS:
        assert la.parse(format_as(L, d)) == L, d
        assert canonical(format_as(L, d)).name in (d, "layoutalg")


@pytest.mark.parametrize("a, b, cute, witness", [
    # cutlass #3177 / REFERENCE: CuTe DSL and FlyDSL answer (6,4):(1,10) o 4:4
    ("(6,4):(1,10)", "4:4", "(2,2):(4,10)", "at index 2 gives 10 where A(B(2)) = 12"),
    ("(3,4):(1,5)", "(2,8):(1,2)", "(2,(2,4)):(1,(2,5))", "at index 3 gives 3 where A(B(3)) = 5"),
])
def test_refusal_says_what_cute_returns_and_where_it_is_wrong(a, b, cute, witness):
    """Users porting CuTe code meet these refusals where CuTe answered (the first one is what
    CuTe DSL 4.8.1 printed here: dialect_strings.json)."""
    assert STRINGS["cute-dsl"]["composition_6_4_1_10_o_4_4"] == "(2,2):(4,10)"
    with pytest.raises(la.CompositionError) as e:
        la.composition(la.parse(a), la.parse(b))
    assert f"CuTe returns {cute}, which {witness}" in str(e.value)
    c = la.parse(cute)
    A, B = la.parse(a), la.parse(b)
    idx = int(witness.split()[2])
    assert c(idx) != A(B(idx))       # the witness is real


def test_dynamic_stride_from_cute_dsl_gets_a_symbolic_bank_verdict():
    """A '?' row pitch (CuTe DSL / FlyDSL) is a symbol: the verifier answers for every value."""
    from layoutalg.verify import bank_conflicts
    r = bank_conflicts(la.parse("(64,8):(?,1)"), instruction="ds_read_b128", elem_bytes=2,
                       domain=(8, 512))
    assert "conflict-free exactly for dyn0 = 8 (mod 16)" in r.summary()
