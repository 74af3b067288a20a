"""Helpers shared by the GEMM gate (:mod:`kernels.gate`) and the attention gate
(:mod:`kernels.attention_gate`): failure collection and the verdict per check, the LDS
capacity check, layout-evaluation pieces, the cached LDS bank check, MFMA lane tables, uint64
bit-set helpers and the LDS race model of the dataflow passes.  The checks themselves, and their
messages, stay in the two gates."""

from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, List, Tuple

import numpy as np

from layoutalg import ComposedLayout, Swizzle
from layoutalg.verify.result import CheckResult

from ..errors import KernelError
from ..ir.dtypes import ELEM_TYPES
from .spec import MFMA_OPERANDS

BYTES = {name: t.bytes for name, t in ELEM_TYPES.items()}

# The GEMM dataflow's element identities (kernels.verify.gate_dataflow, gate_wgmma): an int64
# ``buf << ID_SH_BUF | zero-filled flag ID_ZERO | c0 << ID_SH_C0 | c1`` (c0 below ID_MASK0,
# c1 below ID_MASK), and an accumulator's C element ``m << ACC_SH | n``.
ID_SH_C0, ID_SH_BUF, ID_ZERO = 30, 60, np.int64(1) << 59
ID_MASK0, ID_MASK = (1 << 29) - 1, (1 << 30) - 1
ACC_SH = 31


class Fail:
    """First counterexample per check (later ones are counted, not kept)."""

    def __init__(self) -> None:
        self.first: Dict[str, str] = {}
        self.count: Dict[str, int] = {}

    def add(self, check: str, msg: str) -> None:
        self.count[check] = self.count.get(check, 0) + 1
        self.first.setdefault(check, msg)

    def results(self, checks: Iterable[str], domains: Dict[str, str]) -> Dict[str, CheckResult]:
        """One exhaustive :class:`CheckResult` per check over its domain: it holds unless a
        counterexample was added (then the first one, and how many more)."""
        out = {}
        for name in checks:
            ok = name not in self.first
            cex = None
            if not ok:
                n = self.count[name]
                cex = self.first[name] + (f"\n(and {n - 1} more)" if n > 1 else "")
            out[name] = CheckResult(check=name, holds=ok, method="exhaustive",
                                    domain=domains[name], counterexample=cex)
        return out


# shared memory one block may allocate (opt-in maximum), CUDA C programming guide table 21
NVIDIA_SMEM_BYTES = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024,
                     "sm_90": 227 * 1024, "sm_90a": 227 * 1024}
# shared memory of one SM, which the resident blocks share (same table), and what the driver
# reserves per resident block (sm_80 and later)
NVIDIA_SM_SMEM_BYTES = {"sm_80": 164 * 1024, "sm_86": 100 * 1024, "sm_89": 100 * 1024,
                        "sm_90": 228 * 1024, "sm_90a": 228 * 1024}
SMEM_RESERVED = 1024


def is_nvidia(arch: str) -> bool:
    """``sm_*`` targets: 32-lane warps and the 32-bank shared-memory model of
    :func:`mfma_specs.nvidia.smem_model`."""
    return str(arch).startswith("sm_")


def lds_instruction(arch: str, a: Any, eb: int) -> str:
    """The instruction name an LDS access is checked as: ``ds_read_b128`` / ``ds_write_b64``
    on AMD; on NVIDIA ``ldmatrix`` for an :class:`~kernels.ir.nvidia.LdMatrixLoad`, else
    ``ld.shared.b<bits>`` / ``st.shared.b<bits>`` (a ``cp.async`` shared write has the phases
    of a store of its width)."""
    bits = a.width * eb * 8
    if is_nvidia(arch):
        if getattr(a, "atom", None) is not None:
            return "ldmatrix"
        return f"{'ld' if a.kind == 'load' else 'st'}.shared.b{bits}"
    return f"ds_{'read' if a.kind == 'load' else 'write'}_b{bits}"


def check_lds_capacity(k: Any, arch: str, fails: Fail) -> Tuple[int, int]:
    """``lds_capacity``: the kernel's LDS arrays fit ``arch``; returns (their bytes, the
    target's)."""
    lds_total = sum(s.count * BYTES[s.dtype] for s in k.shared)
    if is_nvidia(arch):
        if arch not in NVIDIA_SMEM_BYTES:
            raise KernelError(f"no shared-memory capacity known for {arch!r}; known: "
                              f"{', '.join(NVIDIA_SMEM_BYTES)}")
        cap = NVIDIA_SMEM_BYTES[arch]
    else:
        from mfma_specs.arch import target
        cap = target(arch).lds_bytes
    if lds_total > cap:
        fails.add("lds_capacity", f"{lds_total} bytes of LDS > {cap} on {arch}")
    return lds_total, cap


# ---------------------------------------------------------------------------- layout evaluation

def leaves(c: Any) -> List[Any]:
    """The leaves of a nested tuple, left to right (a non-tuple is its own single leaf)."""
    if isinstance(c, tuple):
        out: List[Any] = []
        for x in c:
            out += leaves(x)
        return out
    return [c]


def mode_coords(origin: Any, coords: Any) -> List[Any]:
    """One logical coordinate per top-level mode of ``origin`` from ``coords``, which give one
    coordinate per flat mode (nested like the shape): a mode of shape ``(s0, s1, ...)`` with
    natural coordinates ``(c0, c1, ...)`` has the colexicographic index ``c0 + s0*c1 + ...``
    (layoutalg's ``crd2idx``).  For flat layouts this is ``leaves(coords)``.  The dataflow
    checks compare these: a preshuffled B (``((IN, NT), (V, G, KB))``) is still B[n][k]."""
    inner = origin.inner if isinstance(origin, ComposedLayout) else origin
    shape = inner.shape if isinstance(inner.shape, tuple) else (inner.shape,)
    cs = coords if isinstance(coords, tuple) and len(coords) == len(shape) else None
    if cs is None:
        return leaves(coords)
    out: List[Any] = []
    for sh, c in zip(shape, cs):
        sizes, parts = leaves(sh), leaves(c)
        if len(sizes) != len(parts):
            raise KernelError(f"gate: coordinate {c} does not match mode {sh} of {origin}")
        idx: Any = 0
        span = 1
        for size, x in zip(sizes, parts):
            idx = idx + x * span
            span *= int(size)
        out.append(idx)
    return out


def mode_extents(origin: Any) -> List[int]:
    """The size of each top-level mode of ``origin``."""
    inner = origin.inner if isinstance(origin, ComposedLayout) else origin
    shape = inner.shape if isinstance(inner.shape, tuple) else (inner.shape,)
    return [int(np.prod(leaves(sh))) for sh in shape]


def compose_offset(origin: Any, off: Any) -> Any:
    """``off`` (the inner layout's offset) through the rest of ``origin``: unchanged for a
    Layout; plus the offset, then the swizzle, for a Swizzle-ComposedLayout."""
    if not isinstance(origin, ComposedLayout):
        return off
    off = off + origin.offset
    sw = origin.outer
    if not isinstance(sw, Swizzle):
        raise KernelError(f"gate: unsupported composed layout {origin}")
    if sw.bits:
        y = off & sw.yyy_mask
        off = off ^ (y >> sw.shift if sw.shift >= 0 else y << -sw.shift)
    return off


# ---------------------------------------------------------------------------- LDS banks

def bank_result(cache: Dict[Any, Any], full: np.ndarray, arch: str, instr: str,
                eb: int) -> Any:
    """:func:`layoutalg.verify.bank_conflicts` (exhaustive) of one wave's element offsets
    ``full`` [lane, element], memoised in ``cache``; the exception instead where it cannot
    check (no phase model for the instruction, bad access...), for the caller to report."""
    from layoutalg.verify import bank_conflicts
    ck = (instr, full.tobytes())
    if ck not in cache:
        try:
            if is_nvidia(arch):
                from mfma_specs.nvidia import smem_model
                cache[ck] = bank_conflicts(full, model=smem_model(instr), elem_bytes=eb,
                                           method="exhaustive")
            else:
                cache[ck] = bank_conflicts(full, arch=arch, instruction=instr, elem_bytes=eb,
                                           method="exhaustive")
        except Exception as e:  # noqa: BLE001 - reported as the check's counterexample
            cache[ck] = e
    return cache[ck]


# ---------------------------------------------------------------------------- MFMA lane tables

def mfma_inverse(lay: Any, shape: Tuple[int, int], lanes: int):
    """``(lane, item)`` tables [shape] of an MFMA operand's TV layout: for every element of
    the tile, the first (lane, item) that holds it."""
    v = lay.values().reshape((lanes, -1), order="F")
    lane = np.full(shape[0] * shape[1], -1)
    item = np.full(shape[0] * shape[1], -1)
    for l in range(v.shape[0]):
        for e in range(v.shape[1]):
            if lane[v[l, e]] < 0:
                lane[v[l, e]] = l
                item[v[l, e]] = e
    if (lane < 0).any():
        raise KernelError(f"gate: MFMA layout {lay} does not cover its {shape} tile")
    return lane.reshape(shape, order="F"), item.reshape(shape, order="F")


class MfmaTables:
    """Index tables of one MFMA instruction, from ``spec.tv_layout`` (lane, item) values:
    ``a_lane``/``a_item`` [M, K] and ``b_lane``/``b_item`` [K, N] (who holds each operand
    element), ``c_i``/``c_j`` [lane, item] (the accumulator element each register holds).

    ``swap_ab`` (:class:`~kernels.ir.core.Mfma`): the tables of the statement's own A and B
    when the instruction takes B as srcA and A as srcB: A[m][k] sits where srcB's (k, m) does,
    B[k][n] where srcA's (n, k) does, and the register of the spec's (i, j) holds C[j][i]."""

    def __init__(self, spec: Any, swap_ab: bool = False) -> None:
        self.spec = spec
        M, N, K = spec.m, spec.n, spec.k
        op_a, op_b, op_c = MFMA_OPERANDS     # the instruction's operands, not tensor names
        la = spec.tv_layout(op_a)
        lanes = la[0].size()
        self.a_lane, self.a_item = mfma_inverse(la, (M, K), lanes)
        self.b_lane, self.b_item = mfma_inverse(spec.tv_layout(op_b), (K, N), lanes)
        lc = spec.tv_layout(op_c)
        v = lc.values().reshape((lanes, -1), order="F")
        self.c_i, self.c_j = v % M, v // M          # [lane, item]
        if swap_ab:
            if M != N:
                raise KernelError(f"gate: {spec.name} is {M}x{N}: swapped operands need a "
                                  "square MFMA tile")
            self.a_lane, self.b_lane = self.b_lane.T, self.a_lane.T
            self.a_item, self.b_item = self.b_item.T, self.a_item.T
            self.c_i, self.c_j = self.c_j, self.c_i
        self.M, self.N, self.K = M, N, K
        self.lanes = int(lanes)                     # 64 (an AMD wave) or 32 (an NVIDIA warp)


# ---------------------------------------------------------------------------- bit sets

def bits_below(n: int, words: int) -> np.ndarray:
    """uint64 words [words] with bits 0 .. n-1 set (bits past 64 * words dropped)."""
    out = np.zeros(words, np.uint64)
    for w in range(words):
        lo, hi = w * 64, min(n, (w + 1) * 64)
        if hi > lo:
            k = hi - lo
            out[w] = np.uint64((1 << k) - 1) if k < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return out


def bits_to_list(words: np.ndarray) -> List[int]:
    """The set bits of uint64 words, as indices (word * 64 + bit), ascending."""
    out = []
    for w, x in enumerate(words):
        x = int(x)
        for b in range(64):
            if x >> b & 1:
                out.append(w * 64 + b)
    return out


# ---------------------------------------------------------------------------- LDS races

class LdsRaces:
    """Per LDS element since the last barrier (``epoch``): epoch and thread of the last write,
    and of the reads (thread -1: several threads).  Bump ``epoch`` at every barrier."""

    def __init__(self, shared: Any) -> None:
        self.epoch = 0
        self.w_ep = {s.name: np.full(s.count, -1) for s in shared}
        self.w_th = {s.name: np.full(s.count, -1) for s in shared}
        self.r_ep = {s.name: np.full(s.count, -1) for s in shared}
        self.r_th = {s.name: np.full(s.count, -1) for s in shared}

    def touch(self, b: str, addr: np.ndarray, th: np.ndarray,
              write: bool) -> List[Tuple[str, int, int]]:
        """Record that thread ``th[i]`` reads (or writes) ``b[addr[i]]`` for every i, and return
        the races it makes, in this order, each as ``(kind, i, other thread)``:
        ``"write_twice"`` (two threads write one element in this access), ``"read"`` /
        ``"wrote"`` (the write hits an element another thread read / wrote since the last
        barrier; other -1: several threads), ``"raw"`` (the read hits an element another thread
        wrote since the last barrier).  Addresses outside ``b`` record nothing (the static pass
        reports them as in_bounds)."""
        ep = self.epoch
        w_ep, w_th, r_ep, r_th = self.w_ep[b], self.w_th[b], self.r_ep[b], self.r_th[b]
        n = w_ep.shape[0]
        # no thread active (a store whose predicate no lane meets): nothing touched
        if addr.size == 0 or addr.min() < 0 or addr.max() >= n:
            return []
        out: List[Tuple[str, int, int]] = []
        multi = np.bincount(addr, minlength=n)[addr] > 1
        if write:
            if multi.any():
                out.append(("write_twice", int(np.argmax(multi)), -1))
            war = (r_ep[addr] == ep) & (r_th[addr] != th)
            waw = (w_ep[addr] == ep) & (w_th[addr] != th)
            for bad, kind, who in ((war, "read", r_th), (waw, "wrote", w_th)):
                if bad.any():
                    t = int(np.argmax(bad))
                    out.append((kind, t, int(who[addr[t]])))
            w_ep[addr] = ep
            w_th[addr] = th
        else:
            raw = (w_ep[addr] == ep) & (w_th[addr] != th)
            if raw.any():
                t = int(np.argmax(raw))
                out.append(("raw", t, int(w_th[addr[t]])))
            fresh = r_ep[addr] != ep
            new_th = np.where(fresh | (r_th[addr] == th), th, -1)
            r_ep[addr] = ep
            r_th[addr] = np.where(multi, -1, new_th)
        return out


@functools.lru_cache(maxsize=None)
def ldmatrix_lane_table(atom: Any) -> Tuple[np.ndarray, np.ndarray]:
    """``(source lane, column)`` per (lane, item) of an ``ldmatrix`` atom: lane ``l`` item
    ``e`` receives element ``col`` of the row that lane ``8 * matrix + row`` of its warp
    addresses (``atom.element(l, e)`` is ``(row, col, matrix)``).  One table per atom, shared
    by the GEMM and attention dataflows (read only: both index with it)."""
    items = 2 * atom.num
    el = np.array([[atom.element(l, e) for e in range(items)] for l in range(32)])
    return 8 * el[..., 2] + el[..., 0], el[..., 1]
