"""tests/_planted.py, the runner of the planted-bug catalogues: its assertions fail where a
planted bug is not refused, refused without a reason, or not planted at all (so a catalogue
case can never pass vacuously)."""
from types import SimpleNamespace as NS

import pytest

from _planted import assert_refused, planted_source, replaced


def _checks(**kw):
    return {n: NS(holds=h, counterexample=c) for n, (h, c) in kw.items()}


def test_replaced_must_apply():
    assert replaced("a b a", "a", "c") == "c b a"
    assert replaced("a b a", "a", "c", 0) == "c b c"
    with pytest.raises(AssertionError):
        replaced("a b", "x", "y")
    with pytest.raises(AssertionError):
        replaced("a b", "a", "a")


def test_assert_refused_wants_the_named_check_failed_with_a_reason():
    assert_refused(_checks(lds_races=(False, "line 3: no barrier")), "lds_races", "c", "barrier")
    for bad in [_checks(lds_races=(True, "")), _checks(lds_races=(False, "")),
                _checks(lds_races=(False, "not evaluated: an earlier check failed")),
                _checks(in_bounds=(False, "sA[9]"))]:
        with pytest.raises(AssertionError):
            assert_refused(bad, "lds_races", "c")
    with pytest.raises(AssertionError):
        assert_refused(_checks(lds_races=(False, "line 3")), "lds_races", "c", "barrier")


def test_planted_source_prints_the_ir_bug_and_plants_the_text_bug_in_that_print():
    k = {"x": 1}
    src = planted_source(k, lambda k_: f"x = {k_['x']};", lambda k_: k_.update(x=2),
                         lambda s: s.replace(";", " + 1;"), "c")
    assert src == "x = 2 + 1;"
    with pytest.raises(AssertionError, match="changed nothing"):
        planted_source(k, lambda k_: "x;", None, lambda s: s, "c")
