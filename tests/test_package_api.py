"""Top-level API: lazily exported symbolic helpers, and the import stays light."""

import subprocess
import sys

import pytest

import layoutalg as la


def test_symbolic_helpers_are_top_level():
    tid = la.index_symbol("tid")
    expr = la.parse("(4,8):(8,1)")(tid)
    assert la.substitute(expr, {tid: 13}) == la.parse("(4,8):(8,1)")(13)
    assert la.to_c(expr) == "8*(((tid) % 4)) + ((tid) / 4)"
    assert {"index_symbol", "to_c", "offset_expr", "Xor", "substitute"} <= set(la.__all__)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        la.nope  # noqa: B018


def test_import_does_not_load_sympy():
    code = "import sys, layoutalg; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
