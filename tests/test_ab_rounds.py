"""benchmarks/ab_rounds.py, the A/B scaffolding of the IR-versus-template benchmark scripts,
run without a GPU (CPU tensors, fake kernels, the CUDA clock and synchronize replaced): the
rotation order, the reductions, the poisoned outputs and the errors are pinned, and every
script that uses it still answers ``--help``."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# appended, never inserted first: benchmarks/visualize.py would shadow the visualize
# package for every test module collected after this one
sys.path.append(str(ROOT / "benchmarks"))
import ab_rounds  # noqa: E402

SCRIPTS = ("nvidia_wgmma_rt_ir", "nvidia_wgmma_rt_split_ir", "nvidia_ir_flash",
           "nvidia_ir_wgmma_flash", "nvidia_ir_wgmma_flash_d128", "nvidia_tma_ir_speed",
           "nvidia_ws_ir_serial", "nvidia_ws_ir_cp", "nvidia_ws_ir_persist")


def test_two_names_alternate_and_three_rotate():
    log = []
    two = ab_rounds.rotated_rounds(["ir", "template"], 3, lambda n: log.append(n) or len(log))
    assert log == ["ir", "template", "template", "ir", "ir", "template"]
    assert two == {"ir": [1, 4, 5], "template": [2, 3, 6]}
    log.clear()
    ab_rounds.rotated_rounds("abc", 4, log.append)
    assert "".join(log) == "abc" + "bca" + "cab" + "abc"


def test_medians_and_the_printed_row(capsys):
    assert ab_rounds.medians({"a": [3.0, 1.0, 2.0], "b": [4.0, 1.0]}) == {"a": 2.0, "b": 2.5}
    ab_rounds.print_row({"x": 1, "rounds_us": [1, 2], "y": "z"}, "rounds_us")
    assert json.loads(capsys.readouterr().out) == {"x": 1, "y": "z"}


@pytest.mark.parametrize("b_major,pad", [("n", 0), ("k", 1)])
def test_gemm_operands_pad_lda_and_are_seeded(b_major, pad):
    dt, a, b = ab_rounds.gemm_operands("bf16", 5, 3, 7, b_major, pad, device="cpu")
    assert dt == torch.bfloat16 and a.dtype == b.dtype == dt
    assert a.shape == (5, 7) and a.stride(0) == 7 + pad
    assert b.shape == ((7, 3) if b_major == "n" else (3, 7))
    _, a2, b2 = ab_rounds.gemm_operands("bf16", 5, 3, 7, b_major, pad, device="cpu")
    assert torch.equal(a, a2) and torch.equal(b, b2)


class _Kernel:
    """A fake GEMM kernel: ``bound`` returns a launch writing ``rows`` rows of A @ B."""
    def __init__(self, rows=None):
        self.rows, self.binds, self.module = rows, [], "compiled"

    def bound(self, a, b, out, *extra):
        self.binds.append(extra)

        def run(a_, b_, o):
            r = o.shape[0] if self.rows is None else self.rows
            o[:r] = (a_.float() @ b_.float())[:r].to(o.dtype)
        return run


def test_first_build_builds_once_per_configuration():
    made = []
    built = {}
    ir, tpl, first = ab_rounds.first_build(built, "cfg", lambda c: made.append(c) or _Kernel(),
                                           lambda c: "template")
    assert set(first) == {"build_verify_s", "compile_s"} and tpl == "template"
    ir2, _, again = ab_rounds.first_build(built, "cfg", lambda c: made.append(c), None)
    assert ir2 is ir and again == {} and made == ["cfg"]


def test_gemm_outputs_poison_bind_and_measure(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    _, a, b = ab_rounds.gemm_operands("f16", 4, 3, 8, "n", 0, device="cpu")
    ir, tpl = _Kernel(), _Kernel(rows=2)
    o_ir, o_tp, calls, err = ab_rounds.gemm_outputs(ir, tpl, a, b, "n", 5)
    assert ir.binds == tpl.binds == [(5,)]
    assert set(calls) == {"ir", "template"}
    assert not o_ir.isnan().any() and err < 1e-3
    assert o_tp[2:].isnan().all()           # rows the template never wrote stay NaN
    o_ir.zero_()
    calls["ir"]()
    assert not o_ir.isnan().any() and o_ir.abs().sum() > 0
    _, _, _, bad = ab_rounds.gemm_outputs(_Kernel(rows=2), tpl, a, b, "n")
    assert math.isnan(bad)                  # an unwritten IR row is never a small error


def test_prefill_rounds_time_each_kernel_in_rotation(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    order = []

    def clock(fn, n):
        assert n == 10
        fn()
        order.append(fn)
        return float(len(order))
    monkeypatch.setattr(ab_rounds, "event_round_us", clock)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1, 4, 8, generator=g) for _ in range(3))

    def exact(q_, k_, v_, out):
        out.copy_(torch.nn.functional.scaled_dot_product_attention(q_, k_, v_))

    def off(q_, k_, v_, out):
        exact(q_, k_, v_, out)
        out[0, 0, 0, 0] += 0.5
    outs, ts, med, err = ab_rounds.prefill_rounds({"template": exact, "ir": off}, q, k, v,
                                                  False, 3, poison=True)
    assert ts == {"template": [1.0, 4.0, 5.0], "ir": [2.0, 3.0, 6.0]}
    assert med == {"template": 4.0, "ir": 3.0}
    assert err["template"] == 0.0 and err["ir"] == pytest.approx(0.5)
    outs2, *_ = ab_rounds.prefill_rounds({"lazy": lambda q_, k_, v_, out: None}, q, k, v,
                                         False, 1, poison=True)
    assert outs2["lazy"].isnan().all()


def test_prefill_rounds_repeat_kv_heads_for_gqa_and_count_calls(monkeypatch):
    """GQA (4 query heads on 2 K / V heads): the reference repeats each K / V head for its
    query heads, so an exact GQA kernel has no error; ``calls_per_round`` reaches the clock."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    seen = []
    monkeypatch.setattr(ab_rounds, "event_round_us", lambda fn, n: seen.append(n) or 1.0)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 5, 8, generator=g)
    k, v = (torch.randn(1, 2, 5, 8, generator=g) for _ in range(2))

    def gqa(q_, k_, v_, out):
        out.copy_(torch.nn.functional.scaled_dot_product_attention(
            q_, k_.repeat_interleave(2, 1), v_.repeat_interleave(2, 1), is_causal=True))
    _, _, _, err = ab_rounds.prefill_rounds({"ir": gqa}, q, k, v, True, 2, calls_per_round=20)
    assert err == {"ir": 0.0} and seen == [20, 20]


def test_prefill_ab_fields_compare_the_ir_with_each_kernel():
    same = torch.zeros(1, 1, 2, 2)
    other = same.clone()
    other[0, 0, 0, 0] = 0.25
    outs = {"ir": same, "template": same.clone(), "ws": other}
    ts = {"ir": [2.0], "template": [3.0], "ws": [1.0]}
    f = ab_rounds.prefill_ab_fields(outs, ts, {"ir": 2.0, "template": 3.0, "ws": 1.0},
                                    {"ir": 0.1, "template": 0.1, "ws": 0.2})
    assert f["ir_us"] == 2.0 and f["ir_speed_vs_template"] == 1.5
    assert f["ir_speed_vs_ws"] == 0.5 and "ir_speed_vs_ir" not in f
    assert f["bitwise_equal"] is True and f["max_abs_ir_vs_template"] == 0.0
    assert f["bitwise_equal_ws"] is False and f["ir_nan"] is False
    assert f["max_abs_ws_vs_f32_ref_b0"] == 0.2 and f["rounds_us"] is ts
    nan = same.clone()
    nan[0, 0, 1, 1] = float("nan")
    assert ab_rounds.prefill_ab_fields({"ir": nan, "template": same}, {}, {"ir": 1.0,
                                       "template": 1.0}, {})["ir_nan"] is True


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_still_answer_help(script):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--help"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage:") and "--rounds" in r.stdout
