"""Element identities of the attention gate (:mod:`kernels.verify.attention_gate`): which tensor,
(batch, head), row and column a register or LDS word holds, packed in an int64, and the
accumulator / variable records the dataflow pass tracks."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import KernelError

__all__ = ["POS_MASK", "UNSET", "PAD", "ZERO_ID", "T_SHIFT", "Z_BIT", "BH_SHIFT", "ROW_SHIFT", "encode_ids",
           "decode_ids", "rowid", "AccIds", "VarIds", "key_bits", "popcount", "result_text",
           "check_merge_slots"]


POS_MASK = (1 << 22) - 1


# ============================================================================ pass 2: dataflow

UNSET = np.int64(-1)
# element identity: tensor (3 bits) | zero-filled | batch*heads+head (20) | row (22) | col (16)
T_SHIFT, Z_BIT, BH_SHIFT, ROW_SHIFT = 59, np.int64(1) << 58, 38, 16
ZERO_ID = Z_BIT     # a constant zero register half (tensor 0, zero-filled): mma.sync padding
PAD = -2            # the row of an accumulator element made from a zero-padded operand row


def encode_ids(tensor: int, bh: np.ndarray, row: np.ndarray, col: np.ndarray,
         zero: np.ndarray) -> np.ndarray:
    if (np.asarray(row) >= (1 << 22)).any() or (np.asarray(bh) >= (1 << 20)).any():
        raise KernelError("attention gate: instance too large for the identity encoding")
    return ((np.int64(tensor) << T_SHIFT) | (bh.astype(np.int64) << BH_SHIFT)
            | (row.astype(np.int64) << ROW_SHIFT) | col.astype(np.int64)
            | np.where(zero, Z_BIT, 0))


def decode_ids(x: np.ndarray):
    """(tensor, batch*heads+head, row, col, zero-filled)."""
    return ((x >> T_SHIFT) & 7, (x >> BH_SHIFT) & ((1 << 20) - 1),
            (x >> ROW_SHIFT) & POS_MASK, x & 0xFFFF, (x & Z_BIT) != 0)


def rowid(bh: Any, pos: Any) -> Any:
    """The identity of a query row: (batch * heads + head) << 22 | position."""
    return (np.asarray(bh, dtype=np.int64) << 22) | np.asarray(pos, dtype=np.int64)


# what an accumulator frag holds (AccIds.kind): scores S, output O, probabilities P, a merge
SCORES, OUT, PROBS, MERGED = "scores", "output", "probs", "merged"


class AccIds:
    """Accumulator state of a frag: S (row, key, head-dim bits, masked) or O (row, d, key bits,
    visible-key bits, version, normalised)."""

    def __init__(self, T: int, n: int, words: int, kw: int) -> None:
        self.kind = None            # SCORES | OUT | PROBS | MERGED
        self.row = np.full((T, n), -1, np.int64)
        self.col = np.full((T, n), -1, np.int64)
        self.dbits = np.zeros((T, n, words), np.uint64)
        self.kbits = np.zeros((T, n, kw), np.uint64)
        self.vbits = np.zeros((T, n, kw), np.uint64)
        self.masked = np.zeros((T, n), bool)
        self.ver = np.zeros((T, n), np.int64)
        self.norm = np.zeros((T, n), bool)
        self.zeroed = np.zeros((T, n), bool)
        self.partial = np.zeros((T, n), bool)     # split-KV: unnormalised partial, stats taken
        # O from probabilities split hi + lo (kernels.ir.warp_registers.SplitProbs): the keys
        # the lo part added, and which items took a part of a split pair
        self.lobits = np.zeros((T, n, kw), np.uint64)
        self.paired = np.zeros((T, n), bool)


class VarIds:
    def __init__(self, T: int, kw: int) -> None:
        self.row = np.full(T, -1, np.int64)
        self.kbits = np.zeros((T, kw), np.uint64)
        self.vbits = np.zeros((T, kw), np.uint64)
        self.ver = np.zeros(T, np.int64)
        self.ver_from = np.zeros(T, np.int64)
        self.set = np.zeros(T, bool)


def key_bits(keys: np.ndarray, kw: int) -> np.ndarray:
    """One-hot uint64 words [..., kw] of keys (keys < 64 kw)."""
    out = np.zeros(keys.shape + (kw,), np.uint64)
    w = keys // 64
    b = np.left_shift(np.uint64(1), (keys % 64).astype(np.uint64))
    for i in range(kw):
        out[..., i] = np.where(w == i, b, np.uint64(0))
    return out


def popcount(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64)
    cnt = np.zeros(x.shape, np.int64)
    for s in range(64):
        cnt += ((x >> np.uint64(s)) & np.uint64(1)).astype(np.int64)
    return cnt


def result_text(r: Any) -> str:
    r = int(r)
    return f"bh {r >> 22} row {r & POS_MASK}" if r >= 0 else "none"


def check_merge_slots(acc: AccIds, idx: np.ndarray, rid: np.ndarray, xd: np.ndarray, what: str,
                      fail: Callable[[str, str], None]) -> bool:
    """The accumulator items ``idx`` a merge step adds into: each was zeroed before its first
    use, and one already merged holds the same query row ``rid`` and head dims ``xd``.  Reports
    to ``reduction_reads_partials`` through ``fail``; False when the step must stop (a slot holds
    another row or dim), True otherwise (a missing zero is reported but the step goes on)."""
    fresh = acc.row[:, idx] < 0
    if not acc.zeroed[:, idx][fresh].all():
        fail("reduction_reads_partials", f"{what}: accumulator used before it was zeroed")
    bad = ~fresh & ((acc.row[:, idx] != rid[:, None]) | (acc.col[:, idx] != xd))
    if bad.any():
        t, c = (int(v) for v in np.argwhere(bad)[0])
        fail("reduction_reads_partials", f"{what}: thread {t} item {int(idx[c])} holds "
                                         f"O({result_text(acc.row[t, idx[c]])}, d "
                                         f"{int(acc.col[t, idx[c]])}) but merges "
                                         f"({result_text(rid[t])}, d {int(xd[t, c])})")
        return False
    return True
