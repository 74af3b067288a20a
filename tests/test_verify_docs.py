"""The examples in docs/VERIFY.md run and their assertions hold (docs stay honest)."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "VERIFY.md"


def test_verify_md_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 8
    ns: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"VERIFY.md block {i}", "exec"), ns)
