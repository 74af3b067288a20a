"""Loader for the committed MFMA test oracle (``tests/fixtures/mfma_ground_truth.json.gz``).

The fixture is AMD's Matrix Instruction Calculator 1.3.2 output for CDNA1-3 (every lane/item
of every operand) plus clang 19 builtin facts; ``fixtures/gen_mfma_ground_truth.py`` derives
it from the shared reference data.  Nothing under ``../shared`` is read at test time.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mfma_ground_truth.json.gz"
ARCH_OF = {"cdna1": "gfx908", "cdna2": "gfx90a", "cdna3": "gfx942"}
TYPE_OF = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "int8": "i8", "int32": "i32",
           "fp64": "f64", "xf32": "xf32", "amd_fp8": "fp8e4m3fnuz", "amd_bf8": "fp8e5m2fnuz"}


@functools.lru_cache(maxsize=1)
def oracle() -> Dict[str, dict]:
    with gzip.open(FIXTURE, "rb") as f:
        return json.loads(f.read())


def entries(flat: List[int]) -> Iterator[Tuple[int, int, int, int, int]]:
    """``(lane, item, row, col, block)`` tuples of a flattened entry list."""
    it = iter(flat)
    return zip(it, it, it, it, it)


def cases() -> List[Tuple[str, str]]:
    """Every ``(calculator arch, instruction)`` of the oracle."""
    data = oracle()
    return [(a, n) for a in ("cdna1", "cdna2", "cdna3") for n in data[a]]
