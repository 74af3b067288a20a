"""The runner the planted-bug (mutation) catalogues share: plant a bug in a kernel's IR or in its
printed text, verify, and assert that the check named for it refuses it with a counterexample.

* :func:`replaced`: a text mutation that must apply (the old text is there and the new one
  differs), so a printer change never turns a planted bug into a silent no-op;
* :func:`planted_source`: the IR bug planted first and printed with the kernel (the text agrees
  with the IR, so the IR check must catch it), then the text bug planted in that print;
* :func:`assert_refused`: the named check failed, and its counterexample says why (present, not
  a "not evaluated" placeholder, naming ``words``);
* :func:`producer_without_waits`: a warp-specialised kernel whose producer (its last role
  branch) lost every wait on one mbarrier;
* :func:`assert_case_refused`: one catalogue case end to end (build, plant, ``verify(ir,
  source=...)``, :func:`assert_refused`), the runner of tests/test_mutation_catalogue_*.py.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from kernels.verify.verifier import verify

Mutation = Optional[Callable[[Any], Any]]


def replaced(src: str, old: str, new: str, count: int = 1) -> str:
    """``src`` with ``old`` replaced by ``new`` (the first ``count`` times; 0: everywhere),
    asserting ``old`` is there and the text changed."""
    assert old in src, old
    out = src.replace(old, new, count) if count else src.replace(old, new)
    assert out != src, f"replacing {old!r} changed nothing"
    return out


def planted_source(k: Any, emit: Callable[[Any], str], ir_bug: Mutation = None,
                   text_bug: Mutation = None, case: str = "") -> str:
    """Plant ``ir_bug`` in ``k`` (in place), print ``k`` with ``emit`` and plant ``text_bug`` in
    the print (asserting it changed the text); the printed source."""
    if ir_bug is not None:
        ir_bug(k)
    src = emit(k)
    if text_bug is not None:
        bad = text_bug(src)
        assert bad != src, f"{case}: the text mutation changed nothing"
        src = bad
    return src


def assert_refused(checks: Mapping[str, Any], check: str, case: str = "",
                   words: str = "") -> None:
    """``checks`` (check name -> result with ``holds`` / ``counterexample``) has ``check``
    failed, with a counterexample that is not a "not evaluated" placeholder and names
    ``words``."""
    assert check in checks, (case, check, sorted(checks))
    got = checks[check]
    assert not got.holds, (case, {n: (c.holds, c.counterexample) for n, c in checks.items()
                                  if not c.holds})
    cex = str(got.counterexample or "")
    assert cex and "not evaluated" not in cex, (case, cex)
    assert words in cex, (case, words, cex)


def assert_case_refused(case: str, build: Callable[[], Any], emit: Callable[[Any], str],
                        check: str, ir_bug: Mutation, text_bug: Mutation, arch: str) -> None:
    """One catalogue case: ``build()`` the kernel, plant the bugs
    (:func:`planted_source`), ``verify(k, arch=arch, source=...)`` and assert ``check``
    refuses it (:func:`assert_refused`)."""
    k = build()
    src = planted_source(k, emit, ir_bug, text_bug, case)
    assert_refused(verify(k, arch=arch, source=src).checks, check, case)


def producer_without_waits(k: Any, bar: str, roles: Callable[[Any], Any]) -> Any:
    """A copy of the warp-specialised kernel ``k``, its producer printed last (``roles(k)[-1]``,
    the last role branch) with every ``MbarrierWait`` on ``bar`` dropped, in its loops and
    branches too; ``k`` is unchanged."""
    import copy
    from kernels.ir.core import If, Loop
    from kernels.ir.nvidia_tma import MbarrierWait

    def drop(body):
        out = []
        for s in body:
            if isinstance(s, MbarrierWait) and s.bar == bar:
                continue
            if isinstance(s, (If, Loop)):
                s = copy.copy(s)
                s.body = drop(s.body)
            out.append(s)
        return out
    bad = copy.copy(k)
    prod = copy.copy(roles(k)[-1])
    prod.body = drop(prod.body)
    bad.body = [*k.body[:-1], prod]
    return bad
