"""What the prefill GPU tests check of an IR-built kernel against its template (shared by
tests/test_nvidia_flash_ir_gpu.py and tests/test_nvidia_wgmma_flash_ir_gpu.py).  Import after
``pytest.importorskip("torch")``."""

from __future__ import annotations

import torch

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def qkv(B, Hq, Hkv, Sq, Skv, D, dt, seed, bshd=False):
    """Seeded q (B, Hq, Sq, D), k and v (B, Hkv, Skv, D) on the GPU, drawn in that order from
    one generator; ``bshd``: each a (B, S, H, D) tensor seen through its (B, H, S, D)
    transpose (strided heads)."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def make(H, S):
        t = torch.randn((B, S, H, D) if bshd else (B, H, S, D), device="cuda",
                        generator=g).to(DT[dt])
        return t.transpose(1, 2) if bshd else t
    return make(Hq, Sq), make(Hkv, Skv), make(Hkv, Skv)


def reference(q, k, v, causal):
    """softmax(q k^T / sqrt(d) [+ causal mask]) v in float32, GQA by repeating K and V."""
    G = q.shape[1] // k.shape[1]
    k, v = (t.float().repeat_interleave(G, dim=1) for t in (k, v))
    s = q.float() @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        Sq, Skv = s.shape[-2:]
        keep = torch.ones(Sq, Skv, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


def check_against_template(ir, tpl, q, k, v, causal, dt, bitwise=True, ref_batches=None):
    """``ir`` verified; run with ``tpl`` into NaN-poisoned outputs: every element written, the
    IR's error against :func:`reference` within the tolerance or 1.5x the template's, the two
    outputs within the tolerance of each other and, with ``bitwise``, equal bit for bit.
    ``ref_batches``: the reference of the first that many batches only (its float32 scores of
    a whole S8K batch are 8 GiB)."""
    B, Hq, Sq, D = q.shape
    assert ir.report.holds
    o_ir = torch.full((B, Hq, Sq, D), float("nan"), device="cuda", dtype=DT[dt])
    o_t = torch.full_like(o_ir, float("nan"))
    ir(q, k, v, out=o_ir)
    tpl(q, k, v, out=o_t)
    torch.cuda.synchronize()
    assert not o_ir.isnan().any()
    n = B if ref_batches is None else ref_batches
    ref = reference(q[:n], k[:n], v[:n], causal)
    tol = 2e-2 if dt == "bf16" else 4e-3
    e_ir = (o_ir[:n].float() - ref).abs().max().item()
    e_t = (o_t[:n].float() - ref).abs().max().item()
    del ref
    diff = (o_ir.float() - o_t.float()).abs().max().item()
    assert e_ir <= max(tol, 1.5 * e_t), (e_ir, e_t)
    assert diff <= tol, diff
    if bitwise:
        assert torch.equal(o_ir, o_t), f"not bitwise the template: max abs {diff}"
