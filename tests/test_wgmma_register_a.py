"""The wgmma with A from registers (the ``.rs`` form an attention kernel feeds P through) as
kernel IR (kernels/ir/nvidia_wgmma.py ``WgmmaMma`` with ``a`` a ``Regs``), its rules in the
verifier (kernels/verify/gate_wgmma.py) and its printed form, on the IR-built wgmma GEMM with
A loaded into registers by ldmatrix (``build_wgmma_gemm_ir(..., a_from="registers")``).

Every rule has a planted bug here, refused by the NAMED check it reports to (the mutation
catalogue of tests/test_mutation_catalogue.py is at the 800-line limit)."""

from __future__ import annotations

import copy

import pytest
import sympy

from kernels.ir import Frag, Let, ZeroFrag, sym, walk
from kernels.ir.nvidia import LdMatrixLoad
from kernels.ir.nvidia_wgmma import WgmmaFence, WgmmaMma, WgmmaWait
from kernels.nvidia.gemm import GemmConfigError
from kernels.nvidia.wgmma import WgmmaGemmConfig
from kernels.nvidia.wgmma_ir import build_wgmma_gemm_ir
from kernels.printer.cuda import emit_cuda
from kernels.verify.verifier import verify
from mfma_specs.nvidia_wgmma import wgmma

from _wgmma_planted import SMALL, assert_ir_bug_refused, main_loop, verified_base

CONFIGS = [(SMALL, (256, 128, 128)),
           (WgmmaGemmConfig(bm=64, bn=128, bk=64, stages=3, dtype="bf16", b_major="k"),
            (128, 256, 192)),
           (WgmmaGemmConfig(), (256, 512, 256))]


@pytest.fixture(scope="module")
def base():
    return verified_base(a_from="registers")


@pytest.mark.parametrize("cfg,shape", CONFIGS, ids=lambda x: getattr(x, "name", str(x)))
def test_every_check_holds_ir_and_printed(cfg, shape):
    k = build_wgmma_gemm_ir(cfg, *shape, a_from="registers")
    r = verify(k, arch="sm_90a", source=emit_cuda(k))
    assert r.holds, r
    assert {"lane_mfma_operands", "printed_source", "declarations"} <= set(r.checks)
    assert k.name.endswith("_rs")


def test_printed_form(base):
    k, src = base
    # 4 words of af per k step, B by descriptor; the .rs wrapper and the flat-array pin
    assert "lg_wgmma_m64n64_f16_rs_t1(&acc[0], &af[0], lg_gmma_desc(" in src
    assert "lg_wgmma_m64n64_f16_rs_t1(&acc[0], &af[4], lg_gmma_desc(" in src
    assert "LG_DEV void lg_wgmma_m64n64_f16_rs_t1(float* d, const lg_u32* a, lg_u64 db" in src
    assert "template <int N> LG_DEV void lg_pin(lg_u32 (&r)[N])" in src
    assert "lg_u32 af[8];" in src and "lg_pin(af);" in src
    assert src.count("    lg_ldmatrix_x4(af[") == 2


def test_shared_a_source_has_no_register_a_helpers():
    src = emit_cuda(build_wgmma_gemm_ir(SMALL, 256, 128, 128))
    assert "_rs_t" not in src and "lg_pin(lg_u32 (&r)[N])" not in src


def test_register_a_table_is_the_ptx_fragment():
    """layout_a restated: thread t = lane + 32 w, item e holds A[16w + lane/4 + 8((e>>1)&1),
    2(lane%4) + (e&1) + 8(e>>2)] (PTX figure 'WGMMA .m64nNk16 register fragment layout for
    matrix A'), a bijection of 128 x 8 onto 64 x 16."""
    atom, seen = wgmma("f16", 64), set()
    for t in range(128):
        w, lane = divmod(t, 32)
        for e in range(8):
            want = (16 * w + lane // 4 + 8 * ((e >> 1) & 1), 2 * (lane % 4) + (e & 1) + 8 * (e >> 2))
            assert atom.element_a(t, e) == want
            seen.add(want)
    assert len(seen) == 64 * 16


def test_nvrtc_compiles_without_spills_or_serialisation():
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    for cfg, shape in CONFIGS:
        k = build_wgmma_gemm_ir(cfg, *shape, a_from="registers")
        m = compile_cuda(emit_cuda(k), "sm_90a", name=f"{k.name}.cu", backend="nvrtc",
                         options=("--ptxas-options=-v",), use_cache=False)
        assert m.kernels == (k.name,)
        assert "serialized" not in m.log and " 0 bytes spill stores" in m.log, m.log


def test_refuses_bad_register_a():
    with pytest.raises(GemmConfigError, match="a_from must be one of"):
        build_wgmma_gemm_ir(SMALL, 256, 128, 128, a_from="regs")
    w = next(s for s in walk(build_wgmma_gemm_ir(SMALL, 256, 128, 128, a_from="registers").body)
             if isinstance(s, WgmmaMma))
    af = w.a.frag
    for regs, words in ((af.regs(range(4)), "8 consecutive"), (af.regs(range(1, 9)), "even"),
                        (Frag("x", "f32", 8).regs(range(8)), "f16 items"),
                        (Frag("x", "bf16", 8).regs(range(8)), "f16 items")):
        with pytest.raises(ValueError, match=words):
            WgmmaMma(w.atom, w.acc, regs, w.b, tag="t")
    with pytest.raises(ValueError, match="GmmaOperand"):
        WgmmaMma(w.atom, w.acc, "sA", w.b, tag="t")


# ---- planted bugs in the IR --------------------------------------------------------------

def _ldmatrix_lets(k):
    """The ldmatrix statements and the Lets of their shared offsets (one builder bug changes
    both: a consistent but wrong fragment, which the static index check cannot see)."""
    body = main_loop(k).body
    out = []
    for i, s in enumerate(body):
        if isinstance(s, LdMatrixLoad):
            assert isinstance(body[i - 1], Let)
            out.append((body[i - 1], s))
    return out


def _subs_fragment(k, old, new):
    for let, ld in _ldmatrix_lets(k):
        let.expr = sympy.expand(let.expr.subs(old, new))
        ld.coords = tuple(tuple(sympy.expand(sympy.sympify(x).subs(old, new)) for x in c)
                          for c in ld.coords)


def _mutate(k, what):
    k = copy.deepcopy(k)
    body = main_loop(k).body
    lane = sym("lane")
    ws = [s for s in body if isinstance(s, WgmmaMma)]
    if what == "a-k-step-swapped":          # k step 0 multiplies the registers of k step 1
        ws[0].a = ws[1].a
    elif what == "a-rows-half-wrong":       # matrices 1/3 read rows 0-7 again, not 8-15
        _subs_fragment(k, sympy.Mod(sympy.floor(lane / 8), 2), 0)
    elif what == "a-k-halves-swapped":      # matrices 2/3 (k 8-15) swapped with 0/1
        _subs_fragment(k, sympy.floor(lane / 16), 1 - sympy.floor(lane / 16))
    elif what == "a-never-loaded":
        i = next(i for i, s in enumerate(body) if isinstance(s, LdMatrixLoad)
                 and s.regs.idx[0] == 8)
        del body[i - 1:i + 1]
    elif what == "no-fence-after-ldmatrix":
        i = next(i for i, s in enumerate(body) if isinstance(s, WgmmaFence))
        fence = body.pop(i)
        body.insert(next(i for i, s in enumerate(body) if isinstance(s, Let)
                         and s.name.startswith("sa_")), fence)
    elif what == "lax-wait-overwrites-a":
        for s in body:
            if isinstance(s, WgmmaWait):
                s.pending = 1
    elif what == "a-zeroed-in-flight":     # a zero fill of af between commit and wait
        i = next(i for i, s in enumerate(body) if isinstance(s, WgmmaWait))
        body.insert(i, ZeroFrag(ws[0].a.frag))
    elif what == "wait-without-pinning-a":
        for s in body:
            if isinstance(s, WgmmaWait):
                s.pins = ("acc",)
    return k


@pytest.mark.parametrize("what, check, words", [
    ("a-k-step-swapped", "lane_mfma_operands", "reduction slot"),
    ("a-rows-half-wrong", "lane_accumulator_writeback", ""),
    ("a-k-halves-swapped", "lane_mfma_operands", "reduction slot"),
    ("a-never-loaded", "lane_mfma_operands", "was never loaded"),
    ("no-fence-after-ldmatrix", "lane_mfma_operands", "since the last wgmma.fence"),
    ("lax-wait-overwrites-a", "lane_mfma_operands", "overwrites A registers"),
    ("a-zeroed-in-flight", "lane_mfma_operands", "overwrites A registers"),
    ("wait-without-pinning-a", "lane_accumulator_writeback", "without pinning af"),
])
def test_ir_planted_bug_is_refused_by_its_rule(base, what, check, words):
    assert_ir_bug_refused(_mutate(base[0], what), what, check, words)


def test_rows_half_wrong_keeps_the_index_math_consistent(base):
    """The planted fragment bug is a consistent layout (printed offset == origin(coords)): only
    the dataflow's register-A rule can see it."""
    r = verify(_mutate(base[0], "a-rows-half-wrong"), arch="sm_90a")
    assert r.checks["emitted_index_math"].holds and r.checks["in_bounds"].holds


# ---- planted bugs in the printed text ----------------------------------------------------

@pytest.mark.parametrize("what, check", [
    ("a-register-word", "printed_source"),
    ("a-pin-dropped", "printed_source"),
    ("rs-wrapper-operands", "declarations"),
    ("flat-pin-helper-dropped", "declarations"),
])
def test_printed_planted_bug_is_refused(base, what, check):
    k, src = base
    if what == "a-register-word":
        bad = src.replace("_rs_t1(&acc[0], &af[4],", "_rs_t1(&acc[0], &af[0],")
    elif what == "a-pin-dropped":
        bad = src.replace("    lg_pin(af);\n", "", 1)
    elif what == "rs-wrapper-operands":
        bad = src.replace('"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])',
                          '"r"(a[1]), "r"(a[0]), "r"(a[2]), "r"(a[3])')
    else:
        bad = src.replace("template <int N> LG_DEV void lg_pin(lg_u32 (&r)[N]) {", "", 1)
    assert bad != src
    r = verify(k, arch="sm_90a", source=bad)
    failed = {n for n, c in r.checks.items() if not c.holds}
    assert check in failed, (what, failed)
