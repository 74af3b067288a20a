"""Hopper wgmma atoms (mfma_specs.nvidia_wgmma) and the wgmma GEMM plan (kernels.cuda_wgmma).

Oracles: the PTX ISA's formulas restated literally here (accumulator fragment, the canonical
layout examples of section 9.7.15.5.1.2.1.3 with their exact layouts and LBO/SBO values, the
descriptor bit positions).  The GPU side (the kernel multiplying correctly) is in
tests/test_nvidia_gpu.py.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from layoutalg import Layout, Swizzle
from mfma_specs.errors import MfmaSpecError
from mfma_specs.nvidia_wgmma import (GmmaDescriptor, gmma_addresses, gmma_canonical,
                                     gmma_swizzle, wgmma)
from kernels.cuda.compile import kernel_names, nvcc_path, nvrtc_available
from kernels.cuda_gemm import GemmConfigError, pick_atom
from kernels.cuda_wgmma import (WgmmaGemmConfig, check_descriptor, emit_wgmma_gemm,
                                plan_wgmma_gemm)
from kernels.errors import LaunchError

HAVE_NVRTC = nvrtc_available()


# ------------------------------------------------------------------ accumulator fragment

@pytest.mark.parametrize("n", [8, 64, 136, 256])
def test_accumulator_layout_is_the_ptx_formula(n):
    w = wgmma("bf16", n)
    seen = set()
    for thread in range(128):
        warp, lane = divmod(thread, 32)
        g, t = divmod(lane, 4)
        for item in range(n // 2):
            j, e = divmod(item, 4)
            # PTX figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"
            want = (16 * warp + g + 8 * (e >> 1), 8 * j + 2 * t + (e & 1))
            assert w.element_c(thread, item) == want
            seen.add(want)
    assert len(seen) == 64 * n            # every element of the 64 x n tile exactly once


def test_register_a_layout_is_the_ptx_formula():
    w = wgmma("f16", 64)
    seen = set()
    for thread in range(128):
        warp, lane = divmod(thread, 32)
        g, t = divmod(lane, 4)
        for e in range(8):
            want = (16 * warp + g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2))
            assert w.element_a(thread, e) == want
            seen.add(want)
    assert len(seen) == 64 * 16
    with pytest.raises(MfmaSpecError, match="A item"):
        w.element_a(0, 8)


def test_wgmma_atom_errors():
    assert wgmma("torch.float16", 256).name == \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16"
    for bad in (("f32", 64), ("bf16", 12), ("bf16", 264), ("bf16", 0)):
        with pytest.raises(MfmaSpecError):
            wgmma(*bad)
    with pytest.raises(MfmaSpecError, match="thread"):
        wgmma("f16", 64).element_c(128, 0)
    with pytest.raises(MfmaSpecError, match="item"):
        wgmma("f16", 64).element_c(0, 32)


# ------------------------------------------------------------------ canonical layouts

def _same(canon, exact_elems, elem_bytes, mn, k):
    return all(canon((i, j)) == elem_bytes * exact_elems((i, j))
               for i in range(mn) for j in range(k))


def test_canonical_layouts_match_the_ptx_examples():
    # K-major, no swizzle, tf32: exact Swizzle<0,4,3> o ((8,2),(4,4)):((4,32),(1,64)),
    # LBO = 64*4 B, SBO = 32*4 B
    assert _same(gmma_canonical("K", 0, 4, 16, 16, 256, 128),
                 Layout(((8, 2), (4, 4)), ((4, 32), (1, 64))), 4, 16, 16)
    # K-major, 32-byte swizzle, tf32: ((8,2),(4,4)):((8,64),(1,4)), SBO = 64*4 B (the k
    # extent of one swizzle row: 8 tf32)
    assert _same(gmma_canonical("K", 32, 4, 16, 8, 16, 256),
                 Layout(((8, 2), (4, 4)), ((8, 64), (1, 4))), 4, 16, 8)
    # MN-major, no swizzle, bf16: ((8,1,2),(8,2)):((1,8,64),(8,128)), LBO = 128*2, SBO = 64*2
    assert _same(gmma_canonical("MN", 0, 2, 16, 16, 256, 128),
                 Layout(((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))), 2, 16, 16)


def test_mn_major_128b_swizzle_by_hand():
    lbo, sbo, start = 8192, 1024, 2048
    d = GmmaDescriptor(start, lbo, sbo, 128)
    got = gmma_addresses(d, "MN", 2, 256, 16)
    sw = Swizzle(3, 4, 3)
    for n in range(256):
        for k in range(16):
            plain = start + 2 * (n % 64) + (n // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo
            assert got[n, k] == sw(plain)


def test_k_major_start_inside_a_row_is_allowed_but_row_bits_are_not():
    d = GmmaDescriptor(1024 + 32, 16, 1024, 128)      # a k step: 32 bytes into each row
    a = gmma_addresses(d, "K", 2, 64, 16)
    assert a[0, 0] == 1024 + 32 and a[1, 0] == Swizzle(3, 4, 3)(1024 + 128 + 32)
    with pytest.raises(MfmaSpecError, match="base offset"):
        gmma_addresses(GmmaDescriptor(1024 + 128, 16, 1024, 128), "K", 2, 64, 16)


def test_canonical_layout_errors():
    with pytest.raises(MfmaSpecError, match="major"):
        gmma_canonical("M", 128, 2, 64, 16, 16, 1024)
    with pytest.raises(MfmaSpecError, match="swizzle width"):
        gmma_swizzle(256)
    with pytest.raises(MfmaSpecError, match="swizzle row"):
        gmma_canonical("K", 32, 2, 64, 32, 16, 256)       # 64 bytes of k in a 32-byte row
    with pytest.raises(MfmaSpecError, match="multiple of 64"):
        gmma_canonical("MN", 128, 2, 96, 16, 8192, 1024)


# ------------------------------------------------------------------ descriptor bits

def test_descriptor_bits():
    d = GmmaDescriptor(1056, 16, 1024, 128)
    v = d.encode()
    assert v & 0x3FFF == 1056 >> 4                  # bits 0-13: start >> 4
    assert v >> 16 & 0x3FFF == 1                    # bits 16-29: LBO >> 4
    assert v >> 32 & 0x3FFF == 64                   # bits 32-45: SBO >> 4
    assert v >> 62 == 1                             # bits 62-63: 1 = 128-byte swizzle
    assert v == 0x4000004000010042
    assert GmmaDescriptor.decode(v) == d
    assert d.constant_bits() == v & ~0x3FFF
    for w, mode in ((0, 0), (128, 1), (64, 2), (32, 3)):
        assert GmmaDescriptor(0, 16, 16, w).encode() >> 62 == mode


def test_descriptor_errors():
    with pytest.raises(MfmaSpecError, match="multiple of 16"):
        GmmaDescriptor(8, 16, 1024, 128)
    with pytest.raises(MfmaSpecError, match="start"):
        GmmaDescriptor(1 << 18, 16, 1024, 128)
    with pytest.raises(MfmaSpecError, match="swizzle width"):
        GmmaDescriptor(0, 16, 1024, 96)
    with pytest.raises(MfmaSpecError, match="base offset"):
        GmmaDescriptor.decode(1 << 49)
    with pytest.raises(MfmaSpecError, match="64-bit"):
        GmmaDescriptor.decode(-1)


# ------------------------------------------------------------------ the GEMM plan

@pytest.mark.parametrize("cfg", [
    WgmmaGemmConfig(), WgmmaGemmConfig(dtype="bf16", b_major="k"),
    WgmmaGemmConfig(bk=32, stages=6), WgmmaGemmConfig(bk=16, stages=8, bn=128),
    WgmmaGemmConfig(bm=256, bn=128), WgmmaGemmConfig(bm=64, bn=64, stages=3)])
def test_plan_proves_copies_and_descriptors(cfg):
    p = plan_wgmma_gemm(cfg)
    assert all(r.holds for r in p.checks.values())
    assert "conflict-free" in p.checks["A cp.async banks"].summary()
    assert "conflict-free" in p.checks["B cp.async banks"].summary()
    assert "descriptor reads == copy writes" in p.checks["B descriptors"].summary()
    src = emit_wgmma_gemm(cfg)
    assert kernel_names(src) == (cfg.name,)
    assert f"m64n{cfg.bn}k16" in src and "fence.proxy.async.shared::cta" in src
    assert src.count("lg_wgmma(acc,") == cfg.bk // 16


def test_a_wrong_descriptor_is_caught():
    """The descriptor check compares real addresses: a wrong SBO, LBO or k step fails it."""
    cfg = WgmmaGemmConfig()
    p = plan_wgmma_gemm(cfg)
    for bad in (replace(p.b, desc=GmmaDescriptor(0, p.b.desc.lbo, 512, 128)),
                replace(p.b, desc=GmmaDescriptor(0, 4096, 1024, 128)),
                replace(p.b, k_starts=(0, 1024, 2048, 3072)),
                replace(p.b, desc=GmmaDescriptor(0, p.b.desc.lbo, 1024, 64))):
        with pytest.raises(GemmConfigError, match="descriptor"):
            check_descriptor(bad, cfg, 1, cfg.bn)
    with pytest.raises(GemmConfigError, match="warpgroup 1"):
        check_descriptor(replace(p.a, wg_step=4096), cfg, 2, 64)


@pytest.mark.parametrize("kw, match", [
    (dict(bn=96), "multiple of 64"), (dict(bk=128), "bk=128"), (dict(stages=2), "at least 3"),
    (dict(arch="sm_90"), "sm_90a"), (dict(bm=96), "warpgroup"), (dict(dtype="f32"), "dtype"),
    (dict(bm=256, bn=256, stages=4), "shared memory"), (dict(b_major="t"), "b_major"),
    # regression: a 16x128 B tile has 256 vectors for 512 threads; the copy plan used to
    # build a zero-extent layout and fail with a ShapeError from deep inside
    (dict(bm=256, bn=128, bk=16, stages=8), "not a multiple of 512 threads")])
def test_bad_configs(kw, match):
    with pytest.raises(GemmConfigError, match=match):
        plan_wgmma_gemm(WgmmaGemmConfig(**kw))


def test_pick_atom():
    assert pick_atom((9, 0), 8) == "wgmma"
    assert pick_atom((9, 0), 4) == "mma"          # 8-byte copies: wgmma path needs 16
    assert pick_atom((8, 0), 8) == "mma"
    assert pick_atom((10, 0), 8) == "mma"         # sm_90a code does not run on sm_100
    assert pick_atom((9, 0), 8, "mma") == "mma"
    with pytest.raises(LaunchError, match="capability 9.0"):
        pick_atom((8, 9), 8, "wgmma")
    with pytest.raises(LaunchError, match="atom must be"):
        pick_atom((9, 0), 8, "tcgen05")


@pytest.mark.skipif(not (HAVE_NVRTC or nvcc_path()), reason="needs NVRTC (cuda-python) or nvcc")
def test_wgmma_kernels_compile_without_serialisation(tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    for cfg in (WgmmaGemmConfig(dtype="bf16"), WgmmaGemmConfig(b_major="k", bk=32, stages=6)):
        m = compile_cuda(emit_wgmma_gemm(cfg), "sm_90a", ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        assert m.cubin[:4] == b"\x7fELF"
        if m.backend == "nvrtc":
            # ptxas says when it has to serialise wgmma (accumulators moved between issues)
            assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


def _descriptor_offsets(src):
    """Every ``desc + (...)`` argument of a wgmma call in ``src``: (descriptor, text)."""
    out = []
    for line in src.splitlines():
        if "lg_wgmma" not in line or "desc +" not in line or "LG_DEV" in line:
            continue
        for m in re.finditer(r"(\w)desc \+ ", line):
            i, depth = m.end(), 0
            for j in range(i, len(line)):
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                if depth == 0:
                    out.append((m.group(1), line[i:j + 1]))
                    break
    return out


@pytest.mark.parametrize("src_fn", [
    lambda: emit_wgmma_gemm(WgmmaGemmConfig()),
    lambda: emit_wgmma_gemm(WgmmaGemmConfig(b_major="k", bk=32, stages=6)),
    lambda: __import__("kernels.cuda_wgmma_attention", fromlist=["x"]).emit_wgmma_flash(
        __import__("kernels.cuda_wgmma_attention", fromlist=["x"]).WgmmaFlashConfig()),
    lambda: __import__("kernels.cuda_wgmma_attention", fromlist=["x"]).emit_wgmma_flash(
        __import__("kernels.cuda_wgmma_attention", fromlist=["x"]).WgmmaFlashConfig(
            overlap=False, warpgroups=1, bn=64))])
def test_descriptor_stage_offsets_are_parenthesised(src_fn):
    """Regression: the wgmma attention printed ``buf ^ 1 * 32768`` (C reads ``buf ^ 32768``),
    so P V read the wrong V buffer.  Every printed descriptor offset must be
    ``((stage) * bytes + start) >> 4`` with the stage expression in parentheses (or a bare
    name), and evaluate to exactly that for every stage value."""
    offs = _descriptor_offsets(src_fn())
    assert offs
    # the stage: a bare name or a parenthesised expression
    pat = re.compile(r"^\(\((?:\((?P<stage>.+)\)|(?P<name>\w+)) \* (?P<bytes>\d+) \+ "
                     r"(?P<start>\d+)\) >> 4\)$")
    for which, text in offs:
        if which == "q":                       # Q has one stage: a plain constant
            assert re.fullmatch(r"\d+", text.strip("()")), text
            continue
        m = pat.match(text)
        assert m, f"{which}desc offset {text!r} is not ((stage) * bytes + start) >> 4"
        for env in ({"rs": r, "buf": b, "NB": n} for r in range(8) for b in (0, 1)
                    for n in range(1, 5)):
            stage = eval(m.group("stage") or m.group("name"), {}, env)   # ^ & * + >>: as in C
            got = eval(text, {}, env)
            assert got == (stage * int(m.group("bytes")) + int(m.group("start"))) >> 4


# ------------------------------------------------------------------ the wgmma attention plan

from kernels import cuda_wgmma_attention as wfa  # noqa: E402
from kernels.cuda_attention import AttentionConfigError  # noqa: E402


@pytest.mark.parametrize("cfg", [
    wfa.WgmmaFlashConfig(), wfa.WgmmaFlashConfig(dtype="bf16", causal=True),
    wfa.WgmmaFlashConfig(head_dim=64), wfa.WgmmaFlashConfig(warpgroups=1, bn=64, overlap=False),
    wfa.WgmmaFlashConfig(warpgroups=1, bn=192), wfa.WgmmaFlashConfig(head_dim=256, bn=64),
    wfa.WgmmaFlashConfig(head_dim=256, bn=64, dtype="bf16", causal=True),
    # key blocks off the 64 grid (FA3's 176, the 160 tried beside it): odd k-step counts
    wfa.WgmmaFlashConfig(bn=176, dtype="bf16"), wfa.WgmmaFlashConfig(bn=160, causal=True)])
def test_wgmma_flash_plan_proves_everything(cfg):
    p = wfa.plan_wgmma_flash(cfg)
    for name in ("Q descriptors", "K descriptors", "V descriptors", "P fragment",
                 "Q cp.async banks", "K cp.async banks", "K copy coverage"):
        assert p.checks[name].holds, name
    assert "register-A fragment" in p.checks["P fragment"].summary()
    src = wfa.emit_wgmma_flash(cfg)
    assert kernel_names(src) == (cfg.name,)
    assert f"m64n{cfg.bn}k16" in src and f"m64n{cfg.head_dim}k16" in src
    assert "{%" + str(cfg.head_dim // 2) + ", " in src          # P V: A from 4 registers
    assert src.count("lg_wgmma_wait<1>") == (1 if cfg.overlap else 0)


@pytest.mark.parametrize("bn", [64, 176])
def test_wgmma_flash_p_fragment_mismatch_is_caught(monkeypatch, bn):
    cfg = wfa.WgmmaFlashConfig(warpgroups=1, bn=bn)
    # rows g and g + 8 swapped: the packing an off-by-one layout reading would produce
    monkeypatch.setattr(wfa, "p_item", lambda s, e: 4 * (2 * s + (e >> 2)) + (e & 3) ^ 2)
    with pytest.raises(AttentionConfigError, match="A item"):
        wfa._check_p_fragment(cfg)


def test_wgmma_flash_p_fragment_last_k_step_of_176_keys_is_checked(monkeypatch):
    # only k step 10 (keys 160..175, past the old 64-multiple grid) packed from the wrong
    # 8-key column group: the proof must reach the last step of an 11-step block
    real = wfa.p_item
    monkeypatch.setattr(wfa, "p_item", lambda s, e: real(s, e) ^ 4 if s == 10 else real(s, e))
    with pytest.raises(AttentionConfigError, match="k step 10"):
        wfa._check_p_fragment(wfa.WgmmaFlashConfig(bn=176))


@pytest.mark.parametrize("kw, match", [
    (dict(head_dim=96), "head_dim=96"), (dict(head_dim=256), "shared memory"), (dict(bn=72), "bn=72"),
    (dict(bn=264), "bn=264"), (dict(bn=48), "bn=48"), (dict(warpgroups=4), "1, 2 or 3"),
    (dict(arch="sm_90"), "sm_90a"), (dict(warpgroups=3, bn=64), "multiple of 384 threads"),
    (dict(warpgroups=3, bn=192), "shared memory"), (dict(dtype="f32"), "dtype")])
def test_wgmma_flash_bad_configs(kw, match):
    with pytest.raises(AttentionConfigError, match=match):
        wfa.plan_wgmma_flash(wfa.WgmmaFlashConfig(**kw))


@pytest.mark.skipif(not (HAVE_NVRTC or nvcc_path()), reason="needs NVRTC (cuda-python) or nvcc")
def test_wgmma_flash_compiles_without_spills(tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    for cfg in (wfa.WgmmaFlashConfig(causal=True), wfa.WgmmaFlashConfig(head_dim=64, dtype="bf16"),
                # head_dim 256: O alone is 128 accumulator registers per thread
                wfa.WgmmaFlashConfig(head_dim=256, bn=64, dtype="bf16", causal=True)):
        m = compile_cuda(wfa.emit_wgmma_flash(cfg), "sm_90a", ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        assert m.cubin[:4] == b"\x7fELF"
        if m.backend == "nvrtc":
            assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


# -------------------------------------------------- the warp-specialised (FA3-style) prefill

from kernels.nvidia import wgmma as cgw  # noqa: E402
from kernels.nvidia import wgmma_attention_ws as wsa  # noqa: E402


@pytest.mark.parametrize("cfg", [wsa.WsFlashConfig(), wsa.WsFlashConfig(causal=True, dtype="f16"),
                                 wsa.WsFlashConfig(stages=3), wsa.WsFlashConfig(pingpong=False),
                                 wsa.WsFlashConfig(head_dim=64),
                                 wsa.WsFlashConfig(head_dim=256, bn=64, causal=True)],
                         ids=lambda c: c.name)
def test_ws_flash_plan_and_source(cfg):
    p = wsa.plan_ws_flash(cfg)
    for name in ("Q copy coverage", "K copy coverage", "Q cp.async banks", "K cp.async banks",
                 "ring"):
        assert p.checks[name].holds, name
    assert p.tile.checks["P fragment"].holds and p.tile.checks["V descriptors"].holds
    src = wsa.emit_ws_flash(cfg)
    assert kernel_names(src) == (cfg.name,)
    prod, cons = cfg.regs
    assert (prod, cons) == (wsa.WIDE_REGS if cfg.head_dim == 256 else
                            (wsa.PRODUCER_REGS, wsa.CONSUMER_REGS))
    assert f"setmaxnreg.dec.sync.aligned.u32 {prod}" in src
    assert f"setmaxnreg.inc.sync.aligned.u32 {cons}" in src
    assert src.count("lg_cp_async_mbar_arrive(") == 4        # helper + Q, K, V fills
    # the parities the ring model proves are the ones printed
    assert "if (use) lg_mbar_wait(bKe + 8 * s, (use - 1) & 1);" in src
    assert f"lg_mbar_wait(bKf + 8 * ((j) % {cfg.stages}), ((j) / {cfg.stages}) & 1);" in src
    assert ("lg_bar_sync(1 + cw, 256)" in src) == cfg.pingpong
    assert src.count("lg_wgmma_wait<1>") == 1


def test_ws_ring_wrong_empty_parity_is_caught(monkeypatch):
    good = wsa.ring_schedule

    def bad(nb, stages):   # waits for the phase of the block it is about to overwrite
        return [(op, j, s, (par ^ 1) if op.startswith("wait") else par)
                for op, j, s, par in good(nb, stages)]
    monkeypatch.setattr(wsa, "ring_schedule", bad)
    with pytest.raises(AttentionConfigError, match="overwrite"):
        wsa.check_ring_protocol(2)


def test_ws_ring_stage_reuse_without_wait_is_caught(monkeypatch):
    good = wsa.ring_schedule
    monkeypatch.setattr(wsa, "ring_schedule", lambda nb, stages: [
        x for x in good(nb, stages) if not x[0].startswith("wait_empty_v")] + [
        ("wait_empty_v", nb + stages, 0, 0)])
    with pytest.raises(AttentionConfigError, match="ring"):
        wsa.check_ring_protocol(2)


def test_ws_producer_layout_mismatch_is_caught(monkeypatch):
    real = wsa.kmajor_operand

    def shifted(name, rows, cols, threads, wg_rows=0):   # the producer's K tile 64 rows short
        return real(name, rows - 64 if name == "K" else rows, cols, threads, wg_rows)
    monkeypatch.setattr(wsa, "kmajor_operand", shifted)
    wsa.plan_ws_flash.cache_clear()
    try:
        with pytest.raises(AttentionConfigError, match="K: the producer's layout is not"):
            wsa.plan_ws_flash(wsa.WsFlashConfig(bn=128, stages=2, dtype="f16"))
    finally:
        wsa.plan_ws_flash.cache_clear()


def test_ws_producer_v_in_the_wrong_major_is_caught(monkeypatch):
    # V K-major: its copy would write rows where the P V descriptor reads columns
    monkeypatch.setattr(wsa, "mnmajor_operand",
                        lambda name, rows, cols, threads: wsa.kmajor_operand(name, rows, cols,
                                                                             threads))
    wsa.plan_ws_flash.cache_clear()
    try:
        with pytest.raises(AttentionConfigError, match="V: the producer's layout is not"):
            wsa.plan_ws_flash(wsa.WsFlashConfig(dtype="f16", causal=True))
    finally:
        wsa.plan_ws_flash.cache_clear()


@pytest.mark.parametrize("kw, match", [(dict(head_dim=96), "head_dim=96"),
                                       (dict(head_dim=256), "shared memory"),
                                       (dict(stages=5), "stages=5"),
                                       (dict(stages=4), "shared memory"),
                                       # 192 keys x 3 stages: 2 x 3 x 48 KiB of K/V + Q
                                       (dict(bn=192, stages=3), "shared memory"),
                                       (dict(bn=184), "bn=184")])
def test_ws_flash_bad_configs(kw, match):
    with pytest.raises(AttentionConfigError, match=match):
        wsa.plan_ws_flash(wsa.WsFlashConfig(**kw))


@pytest.mark.skipif(not (HAVE_NVRTC or nvcc_path()), reason="needs NVRTC (cuda-python) or nvcc")
def test_ws_flash_compiles_without_spills(tmp_path):
    from kernels.cache import Cache
    from kernels.cuda.compile import compile_cuda
    for cfg in (wsa.WsFlashConfig(causal=True), wsa.WsFlashConfig(head_dim=64, stages=3),
                wsa.WsFlashConfig(loader="tma", stages=3),
                # the non-causal choice: S is 96 registers, P 48, O 64 within 240
                wsa.WsFlashConfig(loader="tma", bn=192, stages=2),
                wsa.WsFlashConfig(loader="tma", causal=True, persistent=True),
                # head_dim 256: O is 128 registers; the consumers' 240 must hold it all
                wsa.WsFlashConfig(head_dim=256, bn=64, causal=True)):
        m = compile_cuda(wsa.emit_ws_flash(cfg), "sm_90a", ["--ptxas-options=-v"],
                         name=f"{cfg.name}.cu", cache=Cache(tmp_path))
        assert m.cubin[:4] == b"\x7fELF"
        if m.backend == "nvrtc":
            assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


# ------------------------------------- copies that cover half a swizzle period per iteration

def test_d256_one_warpgroup_copies_use_two_proved_bases():
    """128 threads x 256-wide rows: one iteration copies 4 rows, half the 8-row swizzle
    period, so odd iterations are base 1 (its own per-thread offset) + a constant."""
    cfg = wfa.WgmmaFlashConfig(head_dim=256, warpgroups=1, bn=64, dtype="bf16")
    p = wfa.plan_wgmma_flash(cfg)
    for op in (p.q, p.k, p.v):
        assert op.copy_bases == (0, 1), op.name
        assert [b for *_, b in op.copy_consts] == [i % 2 for i in range(op.copy.iters)]
        assert cgw.check_copy_offsets(op).holds
    src = wfa.emit_wgmma_flash(cfg)
    assert "const lg_u32 qs1 = 2u * lg_swz_q(" in src and "const lg_u32 kvs1 =" in src
    assert src.count("const lg_u32 dst1 = ") == 2                    # load_k and load_v
    assert "lg_cp_async16_i<0>(dst1, src + 4 * k_ss + 0);" in src
    # one base still serves the 2-warpgroup tile (256 threads: 8 rows per iteration)
    two = wfa.plan_wgmma_flash(wfa.WgmmaFlashConfig(head_dim=256, bn=64))
    assert two.q.copy_bases == (0,) and "qs1" not in wfa.emit_wgmma_flash(two.cfg)


def _d256_q():
    return cgw.kmajor_operand("Q", 64, 256, 128, wg_rows=64)


@pytest.mark.parametrize("mutate, match", [
    # constant off by one vector
    (lambda c: c[:1] + ((c[1][0], c[1][1], c[1][2] + 8, c[1][3]),) + c[2:], "iteration 1"),
    # iteration 1 printed on base 0 (what a single-base copy would do)
    (lambda c: c[:1] + ((c[1][0], c[1][1], 256, 0),) + c[2:], "iteration 1, thread"),
    # a row step that is not the partition's
    (lambda c: c[:2] + ((c[2][0] + 1, c[2][1], c[2][2], c[2][3]),) + c[3:], "row/col step"),
    (lambda c: c[:-1], "constants for"), (lambda c: c[:1] + ((4, 0, 0, 2),) + c[2:], "base 2")])
def test_copy_offset_check_catches_planted_bugs(mutate, match):
    q = _d256_q()
    bad = replace(q, copy_consts=mutate(q.copy_consts))
    with pytest.raises(cgw.GemmConfigError, match=match):
        cgw.check_copy_offsets(bad)


def test_copy_offset_check_catches_a_wrong_base_iteration():
    q = _d256_q()
    with pytest.raises(cgw.GemmConfigError, match="iteration 1, thread"):
        cgw.check_copy_offsets(replace(q, copy_bases=(0, 2)))


def test_gemm_refuses_a_two_base_copy():
    """The GEMM's loader prints one base per thread: a B tile of 64 x 256 on 128 threads
    (4 rows per iteration) is refused by name, not printed wrong."""
    with pytest.raises(cgw.GemmConfigError, match="per-thread shared bases"):
        cgw.plan_wgmma_gemm(cgw.WgmmaGemmConfig(bm=64, bn=256, b_major="n"))


# ------------------------------------------------------------ the TMA loader and persistence

@pytest.mark.parametrize("cfg", [wsa.WsFlashConfig(loader="tma"),
                                 wsa.WsFlashConfig(loader="tma", causal=True, stages=3),
                                 # key blocks off the 64 grid: 11 and 12 P V k steps
                                 wsa.WsFlashConfig(loader="tma", bn=176),
                                 wsa.WsFlashConfig(loader="tma", bn=192, dtype="f16"),
                                 wsa.WsFlashConfig(loader="tma", head_dim=64, dtype="f16"),
                                 wsa.WsFlashConfig(loader="tma", persistent=True, causal=True)],
                         ids=lambda c: c.name)
def test_ws_flash_tma_plan_and_source(cfg):
    p = wsa.plan_ws_flash(cfg)
    for nm in ("Q", "K", "V"):
        assert p.checks[f"{nm} TMA boxes vs descriptors"].holds
        assert p.checks[f"{nm} transaction bytes"].holds
    src = wsa.emit_ws_flash(cfg)
    assert kernel_names(src) == (cfg.name,)
    assert "setmaxnreg.dec.sync.aligned.u32 24" in src
    assert "setmaxnreg.inc.sync.aligned.u32 240" in src
    boxes = cfg.head_dim // 64
    # Q once, K and V per block: one box per 64 head_dim columns, on the stage's full barrier
    assert src.count("lg_tma_load_4d(") == 1 + 3 * boxes
    assert src.count(f"lg_mbar_expect_tx(bQ, {cfg.q_bytes}u)") == 1
    assert src.count(f"lg_mbar_expect_tx(bKf + 8 * s, {cfg.kv_bytes}u)") == 1
    assert "lg_cp_async" not in src.split("extern \"C\"")[1]     # no cp.async in the kernel
    assert "lg_fence_proxy_async();" not in src.split("extern \"C\"")[1]
    # full barriers: one expect_tx arrival; empty: one lane per consumer warp
    assert "lg_mbar_init(bKf + 8 * s, 1);" in src and "lg_mbar_init(bKe + 8 * s, 8);" in src
    assert ("lg_mbar_wait(bQe, (it - 1) & 1)" in src) == cfg.persistent
    assert ("lg_mbar_wait(bQ, it & 1);" in src) == cfg.persistent
    if cfg.persistent:
        assert p.checks["Q ring"].holds
        assert "if (cw == 0 || !(last_unit)) lg_bar_arrive(2 - cw, 256);" in src
        assert src.count("lg_mbar_arrive(bQe)") == 2   # NB == 1, and after the last S GEMM


def test_ws_tma_box_stride_mismatch_is_caught(monkeypatch):
    import kernels.nvidia.ws_tma_loads as wtl
    real = wtl.TmaOperandLoad

    def spread(rows, cols):      # boxes 2 KiB further apart than the descriptors' LBO says
        return real(rows, cols, box_stride=rows * 128 + 2048) if cols > 64 else real(rows, cols)
    monkeypatch.setattr(wtl, "TmaOperandLoad", spread)
    wsa.plan_ws_flash.cache_clear()
    try:
        with pytest.raises(AttentionConfigError, match="TMA wrote it at"):
            wsa.plan_ws_flash(wsa.WsFlashConfig(loader="tma", dtype="f16"))
    finally:
        wsa.plan_ws_flash.cache_clear()


def test_ws_tma_short_transaction_count_is_caught(monkeypatch):
    import kernels.nvidia.ws_tma_loads as wtl

    class OneBoxCounted(wtl.TmaOperandLoad):     # expect_tx of one box where two are issued
        @property
        def stage_bytes(self) -> int:
            return self.box_bytes
    monkeypatch.setattr(wtl, "TmaOperandLoad", OneBoxCounted)
    wsa.plan_ws_flash.cache_clear()
    try:
        with pytest.raises(AttentionConfigError, match="complete early or never"):
            wsa.plan_ws_flash(wsa.WsFlashConfig(loader="tma", causal=True))
    finally:
        wsa.plan_ws_flash.cache_clear()


@pytest.mark.parametrize("kw, match", [(dict(loader="ldg"), "loader='ldg'"),
                                       (dict(persistent=True), "persistent=True needs")])
def test_ws_flash_bad_loader_configs(kw, match):
    with pytest.raises(AttentionConfigError, match=match):
        wsa.plan_ws_flash(wsa.WsFlashConfig(**kw))


def test_attention_map_args_and_refusals():
    torch = pytest.importorskip("torch")
    from kernels.errors import LaunchError
    from kernels.nvidia.ws_tma_loads import attention_map_args, tma_attention_ready
    t = torch.empty(2, 300, 4, 128, dtype=torch.bfloat16).transpose(1, 2)   # (B, H, S, D) view
    assert attention_map_args(t, 128) == {"dims": (128, 300, 4, 2),
                                          "strides": (4 * 128 * 2, 128 * 2, 300 * 4 * 128 * 2),
                                          "box": (64, 128, 1, 1)}
    bcast = torch.empty(2, 1, 300, 128, dtype=torch.bfloat16).expand(2, 4, 300, 128)
    assert not tma_attention_ready(bcast)          # head stride 0: not a tensor map stride
    with pytest.raises(LaunchError, match="positive strides"):
        attention_map_args(bcast, 128)
    odd = torch.empty(1, 2, 10, 136, dtype=torch.bfloat16)[..., 4:132]
    with pytest.raises(LaunchError, match="16-byte aligned base"):
        attention_map_args(odd, 128)


def test_persistent_protocol_runs_to_the_end_and_the_printed_kernel_releases_the_last_v():
    from kernels.nvidia.ws_protocol import check_persistent_protocol
    assert check_persistent_protocol(2).holds and check_persistent_protocol(3).holds
    src = wsa.emit_ws_flash(wsa.WsFlashConfig(loader="tma", persistent=True, stages=3))
    assert "if ((t & 31) == 0) lg_mbar_arrive(bVe + 8 * ((g0 + NB - 1) % 3));" in src


def test_persistent_unit_end_without_the_last_v_release_hangs(monkeypatch):
    # the first persistent build's bug: each unit's last V stage never released
    import kernels.nvidia.ws_protocol as wp
    real = wp.consumer_ops

    def bad(nbs, stages, *lag):
        ops = real(nbs, stages, *lag)
        return [op for i, op in enumerate(ops)
                if not (op[0] == "arrive" and op[1].startswith("Ve") and ops[i - 1][0] == "wait"
                        and ops[i - 1][1].startswith("Vf"))]
    monkeypatch.setattr(wp, "consumer_ops", bad)
    with pytest.raises(AttentionConfigError, match="a hang"):
        wp.check_persistent_protocol(2)


def test_persistent_q_released_too_late_hangs(monkeypatch):
    # Q released only after the next unit's Q wait: the producer never refills it
    import kernels.nvidia.ws_protocol as wp
    real = wp.consumer_ops

    def bad(nbs, stages, *lag):
        ops = [op for op in real(nbs, stages, *lag) if op[1] != "Qe"]
        out = []
        for op in ops:
            out.append(op)
            if op[1] == "Qf" and op[2] >= 1:
                out.append(("arrive", "Qe"))
        return out
    monkeypatch.setattr(wp, "consumer_ops", bad)
    with pytest.raises(AttentionConfigError, match="a hang"):
        wp.check_persistent_protocol(2)
