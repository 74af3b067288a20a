"""Split-KV decode (kernels/decode_splitkv.py): gate (all checks hold, mutations are caught),
split choice, emulator vs torch SDPA in fp32, CLI.

Thresholds as test_attention_emulate.py: max |out - ref| <= 4e-3 (f16 out), cosine >= 0.9999,
logsumexp within 1e-4.
"""

import json
import subprocess
import sys

import pytest
import sympy
import torch

import kernels.flash_attention as attn
from kernels.attention_gate import CHECKS, SPLIT_CHECKS, verify_attention
from kernels.attention_registry import reference
from kernels.decode import DecodeConfig
from kernels.decode_splitkv import (CombineBuilder, SplitBuilder, SplitKVConfig, choose_splits,
                                    splitkv_bytes)
from kernels.ir import Access, Let, Loop, sym, walk


def _failed(k):
    rep = verify_attention(k)
    return {c for c, r in rep.checks.items() if not r.holds}, rep


@pytest.mark.parametrize("d", [128, 256])
def test_gate_all_checks_hold(d):
    bk = attn.get_kernel(SplitKVConfig(head_dim=d))
    v = bk.verification.as_bools()
    assert set(v) == set(CHECKS) | set(SPLIT_CHECKS) and all(v.values()), v
    inst = bk.verification.details["instances"]
    assert any("empty-split" in i for i in inst) and any("ragged" in i for i in inst)
    for r in bk.verification.split.checks.values():
        assert r.method == "exhaustive" and r.domain


# ---- mutations: each must fail the named check ------------------------------------------------

def test_split_reading_the_previous_step_is_caught():
    k = SplitBuilder(DecodeConfig(head_dim=128)).build()
    for s in walk(k.body):
        if isinstance(s, Let) and s.name == "it0":
            s.expr = s.expr - 1
    failed, _ = _failed(k)
    assert {"split_partition", "masking_and_tile_skipping"} <= failed


def test_split_chunk_offset_is_caught():
    """Split s starting one step late: its first keys belong to no split."""
    k = SplitBuilder(DecodeConfig(head_dim=128)).build()
    U = 8
    for s in walk(k.body):
        if isinstance(s, Let) and s.name == "k0":
            s.expr = s.expr + U
    failed, _ = _failed(k)
    assert "split_partition" in failed


def test_split_storing_max_and_sum_swapped_is_caught():
    k = SplitBuilder(DecodeConfig(head_dim=128)).build()
    st = {s.buf: s for s in walk(k.body) if isinstance(s, Access) and s.buf in ("Mp", "Lp")}
    st["Mp"].regs, st["Lp"].regs = st["Lp"].regs, st["Mp"].regs
    failed, _ = _failed(k)
    assert "lane_accumulator_writeback" in failed


def test_combine_skipping_a_split_is_caught():
    k = CombineBuilder(DecodeConfig(head_dim=128)).build()
    for s in walk(k.body):
        if isinstance(s, Loop) and s.var == "s":
            s.start = 1
    failed, _ = _failed(k)
    assert "reduction_reads_partials" in failed


def test_combine_mixing_splits_is_caught():
    """O partial of split n-1-s merged with the max/sum of split s (consistent index math)."""
    k = CombineBuilder(DecodeConfig(head_dim=128)).build()
    rev = sym("n_splits") - 1 - sym("s")
    for s in walk(k.body):
        if isinstance(s, Access) and s.buf == "Op":
            s.offset = sympy.expand(s.offset.xreplace({sym("s"): rev}))
            s.coords = tuple(tuple(sympy.sympify(x).xreplace({sym("s"): rev}) for x in c)
                             for c in s.coords)
    failed, _ = _failed(k)
    assert failed == {"reduction_reads_partials"}


def test_combine_reading_another_head_is_caught():
    k = CombineBuilder(DecodeConfig(head_dim=128)).build()
    for s in walk(k.body):
        if isinstance(s, Access) and s.buf == "Lp":
            h = sym("h")
            alt = sympy.Mod(h + 1, sympy.Symbol("heads", integer=True, nonnegative=True))
            s.offset = sympy.expand(s.offset.xreplace({h: alt}))
            s.coords = tuple(tuple(sympy.sympify(x).xreplace({h: alt}) for x in c)
                             for c in s.coords)
    failed, _ = _failed(k)
    assert "reduction_reads_partials" in failed


# ---- split choice / bytes -------------------------------------------------------------------

def test_choose_splits():
    c = DecodeConfig(head_dim=128)
    assert choose_splits(1, 32, 32768, c) == (128, 256)
    assert choose_splits(8, 32, 32768, c) == (57, 576)
    assert choose_splits(1, 32, 300, c)[0] == 1            # short KV: the single decode kernel
    for skv in (1, 7, 77, 1000, 4097, 32768):
        for ks in (None, 1, 3, 1000):
            n, chunk = choose_splits(2, 4, skv, c, ks)
            assert chunk % 8 == 0 and n * chunk >= skv and (n - 1) * chunk < skv
    b = splitkv_bytes(1, 32, 32, 32768, 128, 128)
    assert b["kv"] == 2 * 32 * 32768 * 128 * 2 and b["partials_write"] == 32 * 128 * 130 * 4


# ---- emulator vs SDPA -----------------------------------------------------------------------

CASES = {
    # name: (B, H, HK, Skv, D, kv_splits, layout)
    "skv1-one-split": (2, 4, 2, 1, 128, 1, "bhsd"),
    "skv77-3-splits-gqa": (2, 4, 2, 77, 128, 3, "bhsd"),
    "skv77-bshd-mqa": (1, 4, 1, 77, 128, 4, "bshd"),
    "skv1000-auto-d256": (1, 2, 1, 1000, 256, None, "bhsd"),
    "skv4097-auto-d256-mqa": (1, 2, 1, 4097, 256, None, "bhsd"),
    # seqlen_kv 4097 at d128 (16 splits, chosen automatically): test_cli_check_emulate_4097
}


@pytest.mark.parametrize("name", list(CASES))
def test_splitkv_matches_sdpa(name):
    b, h, hk, skv, d, ks, layout = CASES[name]
    g = torch.Generator().manual_seed(1)
    shp = (lambda hh, s: (b, s, hh, d)) if layout == "bshd" else (lambda hh, s: (b, hh, s, d))
    q, k, v = (torch.randn(*shp(hh, s), generator=g).to(torch.bfloat16)
               for hh, s in ((h, 1), (hk, skv), (hk, skv)))
    out, lse = attn.attention(q, k, v, out_dtype=torch.float16, return_lse=True,
                              backend="emulator", layout=layout, kv_splits=ks)
    assert out.dtype == torch.float16
    assert any(key[0] == "SplitKVConfig" for key in attn._BUILT)
    if layout == "bshd":
        q, k, v, out = (x.transpose(1, 2) for x in (q, k, v, out))
    ref, lref = reference(q, k, v)
    err = float((out.float() - ref).abs().max())
    cos = float(torch.nn.functional.cosine_similarity(out.float().reshape(1, -1),
                                                      ref.reshape(1, -1)))
    assert err <= 4e-3 and cos >= 0.9999, (err, cos)
    assert float((lse - lref).abs().max()) <= 1e-4


def test_workspace_fully_written_and_merge_exact():
    """Every partial is written (the workspace starts as NaN), and merging the partials in
    float64 on the host gives the kernel's output."""
    from kernels.decode_splitkv import choose_splits as cs
    from kernels.flash_attention import PrefillShape
    bk = attn.get_kernel(SplitKVConfig(head_dim=128))
    B, H, skv, D = 1, 2, 100, 128
    g = torch.Generator().manual_seed(2)
    q = torch.randn(B, H, 1, D, generator=g).bfloat16()
    k = torch.randn(B, H, skv, D, generator=g).bfloat16()
    v = torch.randn(B, H, skv, D, generator=g).bfloat16()
    out = torch.zeros(B, H, 1, D, dtype=torch.float16)
    lse = torch.zeros(B, H, 1)
    n, chunk = cs(B, H, skv, bk.cfg, 4)
    shape = PrefillShape.bhsd(B, H, H, 1, skv, D)
    res = bk.emulate_pair(q, k, v, out, lse, shape, D ** -0.5, n, chunk)
    op, mp, lp = res.stats["workspace"]
    assert not torch.isnan(op).any() and not torch.isnan(mp).any() and not torch.isnan(lp).any()
    op, mp, lp = op.double().view(B * H, n, D), mp.double().view(B * H, n), lp.double().view(-1, n)
    M = mp.max(1, keepdim=True).values
    w = torch.exp2(mp - M)
    o = (w[..., None] * op).sum(1) / (w * lp).sum(1, keepdim=True)
    assert float((o - out.double().view(B * H, D)).abs().max()) <= 1e-3
    ref, _ = reference(q, k, v)
    assert float((o - ref.double().view(B * H, D)).abs().max()) <= 1e-4


# ---- code object and CLI --------------------------------------------------------------------

def test_cli_compile_long_kv_is_splitkv(tmp_path):
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "layoutalg.cli", "compile", "attention", "--out",
                        str(out), "--dtype", "bf16", "--out-dtype", "f16", "--seqlen-q", "1",
                        "--seqlen-kv", "32768"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "decode_splitkv" and all(rep["verification"].values())
    assert len(rep["verification"]) == 16
    assert rep["splits"] == {"n_splits": 128, "kv_chunk": 256}      # B=1, H=2
    assert rep["bytes_moved"]["kv"] == 2 * 2 * 32768 * 128 * 2
    for who in ("split", "combine"):
        kr = rep["kernels"][who]
        assert kr["scratch_bytes"] == 0 and kr["spills"] == 0 and kr["lds_bytes"] == 0
    loads = {k: v for k, v in rep["kernels"]["split"]["hot_loop"]["histogram"].items()
             if k.startswith("global_load")}
    assert loads == {"global_load_dwordx4": 16}, loads
    src = (out / "kernel.hip").read_text()
    assert "la_attn_decode_split_" in src and "la_attn_decode_combine_" in src


def test_cli_check_emulate_4097(capsys):
    from layoutalg.cli import main
    rc = main(["check", "attention", "--emulate", "--dtype", "bf16", "--out-dtype", "f16",
               "--seqlen-q", "1", "--seqlen-kv", "4097", "--heads", "2", "--kv-heads", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "16/16 checks hold" in out and "grid 1x16" in out
    lines = out.strip().splitlines()
    assert lines[-1].startswith("PASS: ")
    assert float(next(x for x in lines if x.startswith("max error")).split()[2]) < 4e-3


def test_kv_splits_for_prefill_is_refused():
    from kernels.gemm_plan import ConfigError
    q = torch.zeros(1, 1, 4, 128, dtype=torch.bfloat16)
    with pytest.raises(ConfigError, match="kv_splits"):
        attn.attention(q, q, q, kv_splits=2, backend="emulator")


def test_32_bit_index_math_overflow_is_refused():
    from kernels.gemm_plan import ConfigError
    q = torch.empty(16, 32, 1, 128, dtype=torch.bfloat16, device="meta")
    k = torch.empty(16, 32, 32768, 128, dtype=torch.bfloat16, device="meta")   # 2^31 elements
    with pytest.raises(ConfigError, match="32-bit"):
        attn.attention(q, k, k)


def test_launch_arguments_match_the_code_object(monkeypatch):
    """The ROCm path (no GPU here): both launches' arguments packed against the code object's
    metadata (count, kinds, sizes), with meta tensors standing in for device ones."""
    import kernels.launch as L
    calls = []

    def fake(co, name, grid, block, args, *, specs=None, lds_bytes=0, stream=None):
        calls.append((name, grid, len(L.pack_args(co.kernel_metadata(name), args, specs,
                                                  check_device=False))))
    monkeypatch.setattr(L, "launch", fake)
    B, H, HK, S, D = 2, 4, 2, 3000, 128
    q = torch.empty(B, H, 1, D, dtype=torch.bfloat16, device="meta")
    k = torch.empty(B, HK, S, D, dtype=torch.bfloat16, device="meta")
    attn.attention(q, k, torch.empty_like(k), out_dtype=torch.float16)
    ns, _ = choose_splits(B, H, S, DecodeConfig())
    assert [(c[0].split("_")[3], c[1]) for c in calls] == [("split", (1, ns, 1)),
                                                            ("combine", (1, 1, 1))]


def test_pair_link_is_checked():
    """A combine kernel reading the workspace through another layout than the split kernel
    writes it fails reduction_reads_partials."""
    from kernels.decode_splitkv import _check_same_workspace
    from kernels.ir import Access, walk
    from layoutalg import Layout
    bk = attn.get_kernel(SplitKVConfig(head_dim=128))
    import copy
    bk2 = copy.copy(bk)
    bk2.combine = copy.deepcopy(bk.combine)
    for a in walk(bk2.combine.ir.body):
        if isinstance(a, Access) and a.buf == "Mp":
            a.origin = Layout(a.origin.shape, (2,) + tuple(a.origin.stride[1:]))
    _check_same_workspace(bk2)
    r = bk2.combine.verification.checks["reduction_reads_partials"]
    assert not r.holds and "Mp" in r.counterexample
    assert bk.verification.checks["reduction_reads_partials"].holds
