"""The specs of the AMD kernel families: what each kernel must compute, for the verifier.

Each builder attaches one of these to its IR (``Kernel.spec``); the verifier
(:func:`kernels.verify.verifier.verify`) reads tensor names, dimensions, roles and the
computation from it and knows no kernel family.  A tensor's ``dims`` are the dimensions of the
coordinates its accesses carry, in order (attention tensors: ``(row, head dim, head, batch)``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..verify.spec import (Contraction, Dim, Domain, KernelSpec, OnlineSoftmax, SplitMerge,
                           SplitPartition, Symbol, TensorSpec)

__all__ = ["gemm_spec", "prefill_spec", "decode_spec", "split_spec", "combine_spec"]

INT_MAX = 2 ** 31 - 1
# the attention builders' (batch, head) symbols: the grid's block_bh and the lets from it
HEAD_SYMBOLS = ("bat", "h", "hk", "block_bh")


def gemm_spec(name: str, cfg: Any, grid: Sequence[int], k_span: int) -> KernelSpec:
    """``C[m, n] = sum_k A[m, k] B[n, k]`` (B's coordinates are (n, k) whatever its memory
    order), every block of the compile-time grid."""
    return KernelSpec(
        name=name, dims=(Dim("m", cfg.m), Dim("n", cfg.n), Dim("k", cfg.k)),
        tensors=(TensorSpec("A", ("m", "k"), "input", cfg.dtype),
                 TensorSpec("B", ("n", "k"), "input", cfg.dtype),
                 TensorSpec("C", ("m", "n"), "output", cfg.out_dtype)),
        contractions=(Contraction("C", "A", "B", ("k",), k_span),),
        symbols=(Symbol("block_m", 0, max(0, grid[0] - 1)),
                 Symbol("block_n", 0, max(0, grid[1] - 1))),
        domain=Domain.every_block())


def _attn_dims(head_dim: int) -> tuple:
    return (Dim("row", "seqlen_q"), Dim("key", "seqlen_kv"), Dim("d", head_dim),
            Dim("head", "heads"), Dim("kv_head", "kv_heads"), Dim("batch", "batch"),
            Dim("split", "n_splits"), Dim("one", 1))


def _symbols(names: Sequence[str]) -> tuple:
    # the range the int argument admits; the verdicts hold on the domain's instances
    return tuple(Symbol(n, 0, INT_MAX) for n in names)


def _qkv(dtype: str) -> tuple:
    return (TensorSpec("Q", ("row", "d", "head", "batch"), "input", dtype),
            TensorSpec("K", ("key", "d", "kv_head", "batch"), "input", dtype),
            TensorSpec("V", ("key", "d", "kv_head", "batch"), "input", dtype))


def _attention(name: str, cfg: Any, scalars: Sequence[str], key_tile: int,
               instances: Callable[[Any], Sequence[Any]],
               stat_frags: Optional[Sequence[str]] = None) -> KernelSpec:
    """``S = Q K^T`` over the head dim, online softmax over the keys (masked past seqlen_kv and,
    causal, past the diagonal), ``O = P V`` over the keys, the LSE; split: the partial O and
    its (max, sum) per split instead, the splits partitioning the keys."""
    split = stat_frags is not None
    if split:
        outs = (TensorSpec("Op", ("split", "d", "head", "batch"), "workspace", "f32"),
                TensorSpec("Mp", ("split", "one", "head", "batch"), "workspace", "f32"),
                TensorSpec("Lp", ("split", "one", "head", "batch"), "workspace", "f32"))
        out, lse, stats = "Op", None, ("Mp", "Lp")
    else:
        outs = (TensorSpec("O", ("row", "d", "head", "batch"), "output", cfg.out_dtype),
                TensorSpec("LSE", ("row", "head", "batch"), "output", "f32"))
        out, lse, stats = "O", "LSE", None
    return KernelSpec(
        name=name, dims=_attn_dims(cfg.head_dim), tensors=_qkv(cfg.dtype) + outs,
        contractions=(Contraction("S", "Q", "K", ("d",)), Contraction(out, "P", "V", ("key",))),
        softmax=OnlineSoftmax("S", "P", "key", "d", key_tile, lse=lse, stats=stats),
        split_partition=SplitPartition("split", tuple(stat_frags)) if split else None,
        symbols=_symbols(scalars), domain=Domain.on_instances(instances),
        head_anchor="Q", kv_head="kv_head", head_symbols=HEAD_SYMBOLS)


def prefill_spec(name: str, cfg: Any, scalars: Sequence[str],
                 instances: Callable[[Any], Sequence[Any]]) -> KernelSpec:
    return _attention(name, cfg, scalars, cfg.block_n, instances)


def decode_spec(name: str, cfg: Any, scalars: Sequence[str],
                instances: Callable[[Any], Sequence[Any]]) -> KernelSpec:
    return _attention(name, cfg, scalars, cfg.block_n, instances)


def split_spec(name: str, cfg: Any, scalars: Sequence[str],
               instances: Callable[[Any], Sequence[Any]], *,
               stat_frags: Sequence[str]) -> KernelSpec:
    """The split kernel of split-KV decode: each split's partials over its key chunk;
    ``stat_frags`` hold the running max whose stored value carries each partial's keys."""
    return _attention(name, cfg, scalars, cfg.block_n, instances, stat_frags)


def combine_spec(name: str, cfg: Any, scalars: Sequence[str],
                 instances: Callable[[Any], Sequence[Any]]) -> KernelSpec:
    """The combine kernel: O and LSE merge every split's (Op, Mp, Lp) of their (batch, head)
    by log-sum-exp.  ``Mp`` anchors the thread's (batch, head): it is read first."""
    return KernelSpec(
        name=name, dims=_attn_dims(cfg.head_dim),
        tensors=(TensorSpec("Op", ("split", "d", "head", "batch"), "input", "f32"),
                 TensorSpec("Mp", ("split", "one", "head", "batch"), "input", "f32"),
                 TensorSpec("Lp", ("split", "one", "head", "batch"), "input", "f32"),
                 TensorSpec("O", ("row", "d", "head", "batch"), "output", cfg.out_dtype),
                 TensorSpec("LSE", ("row", "head", "batch"), "output", "f32")),
        split_merge=SplitMerge(("Op", "Mp", "Lp"), "O", "split", "d", lse="LSE",
                               key_tile=cfg.block_n),
        symbols=_symbols(scalars), domain=Domain.on_instances(instances), head_anchor="Mp",
        head_symbols=HEAD_SYMBOLS)
