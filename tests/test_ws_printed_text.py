"""The printed text of the warp-specialised serial d128 prefill (kernels/nvidia/
wgmma_ws_ir_serial.py) read back against its IR by both sets of printed-text checks on the one
text (kernels/verify/printed_ws.py: the attention reader's and the per-role / TMA text checks),
and planted text bugs each refused by the printed-text rule."""

from __future__ import annotations

import pytest

from kernels.nvidia.wgmma_ws_ir_serial import build_ws_serial_ir
from kernels.printer.cuda_attention import emit_cuda_attention
from kernels.verify.attention_static import default_instances
from kernels.verify.printed import PRINTED_CHECKS
from kernels.verify.printed_ws import verify_printed_ws

# every verification here takes seconds: tests/_file_order.py runs this file first
pytestmark = pytest.mark.slow

_CACHE = {}


def _kernel(causal: bool):
    if causal not in _CACHE:
        k = build_ws_serial_ir(causal)
        _CACHE[causal] = (k, emit_cuda_attention(k), default_instances(k))
    return _CACHE[causal]


@pytest.mark.parametrize("causal", [False, True])
def test_the_printed_text_is_verified_through_the_one_entry_point(causal):
    from kernels.verify.verifier import verify
    k, src, _ = _kernel(causal)
    r = verify(k, arch="sm_90a", source=src)
    assert r.holds, {n: c.counterexample for n, c in r.checks.items() if not c.holds}
    assert set(PRINTED_CHECKS) <= set(r.checks)
    assert r.details["engine"].startswith("warp-specialised attention")
    # both readers ran: the attention reader's points and the role lines in the domain
    dom = r.checks["printed_source"].domain
    assert "points)" in dom and "role / mbarrier / TMA lines" in dom


_WAIT_V = ("      lg_mbar_wait((lg_bar_fullV_u32 + 8 * (((j) % 2))), "
           "(lg_u32)(((((j) / 2)) % 2)));\n")


def _wait_past_pv(src: str) -> str:
    """The first V wait moved after the P V wgmmas it guards (their commit)."""
    out = src.replace(_WAIT_V, "", 1)
    i = out.index("lg_wgmma_commit();\n", out.index("&pa[0]")) + len("lg_wgmma_commit();\n")
    return out[:i] + _WAIT_V + out[i:]


def _sub(a: str, b: str):
    def plant(src: str) -> str:
        assert a in src, a
        return src.replace(a, b, 1)
    return plant


#: (name, the text change, the check refusing it, a phrase of its counterexample)
TEXT_BUGS = [
    ("consumer wait parity", _sub("(lg_u32)(((((j) / 2)) % 2)));",
                                  "(lg_u32)(((((j) / 2) + 1) % 2)));"),
     "printed_source", "Mod(floor(j/2), 2)"),
    ("producer wait parity", _sub("(lg_u32)(((((j) / 2) + 1) % 2)));",
                                  "(lg_u32)(((((j) / 2)) % 2)));"),
     "printed_source", "Mod(floor(j/2) + 1, 2)"),
    ("expect-tx byte count", _sub("(lg_bar_fullK_u32 + 8 * (((j) % 2))), 32768u);",
                                  "(lg_bar_fullK_u32 + 8 * (((j) % 2))), 16384u);"),
     "printed_source", "32768u"),
    ("K box at the query head", _sub("64, 128*j, hk, bat);", "64, 128*j, h, bat);"),
     "printed_source", "the IR's hk"),
    ("V box a block late", _sub("tmV, (lg_bar_fullV_u32 + 8 * (((j) % 2))), 0, 128*j, hk, bat);",
                                "tmV, (lg_bar_fullV_u32 + 8 * (((j) % 2))), 0, 128*j + 128, hk, "
                                "bat);"),
     "printed_source", "the IR's 128*j"),
    ("Q box inner coordinate", _sub("(lg_bar_bQ_u32 + 8 * (0)), 64, m0, h, bat);",
                                    "(lg_bar_bQ_u32 + 8 * (0)), 0, m0, h, bat);"),
     "printed_source", "the IR's 64"),
    ("consumer role branch", _sub("if (wg >= 1 && wg < 3) {", "if (wg >= 1 && wg < 2) {"),
     "printed_source", "printed 0, IR 1"),
    ("producer role branch", _sub("if (wg < 1) {", "if (wg < 2) {"),
     "printed_source", "printed 1, IR 0"),
    ("leader thread", _sub("if (((tid) % 128) == 0) {", "if (((tid) % 32) == 0) {"),
     "printed_source", "printed 1, IR 0"),
    ("softmax alpha of the other row", _sub("lg_exp2(fmaf(mr0, scale_log2, -mc0));",
                                            "lg_exp2(fmaf(mr0, scale_log2, -mc1));"),
     "printed_source", "update_alpha_f"),
    ("softmax exponent of the wrong score", _sub("pf[5] = lg_exp2(fmaf(sc[5], scale_log2",
                                                 "pf[5] = lg_exp2(fmaf(sc[4], scale_log2"),
     "printed_source", "exp_f"),
    ("row sum rescaled by the other row", _sub("lr0 = fmaf(lr0, alpha0, lr0_s);",
                                               "lr0 = fmaf(lr0, alpha1, lr0_s);"),
     "printed_source", "l_fold"),
    ("setmaxnreg budget", _sub("lg_setmaxnreg_inc<240>();", "lg_setmaxnreg_inc<232>();"),
     "printed_source", "lg_setmaxnreg_inc<240>()"),
    ("empty barrier count", _sub("lg_mbar_init((lg_bar_emptyK_u32 + 8 * (i)), 8); }",
                                 "lg_mbar_init((lg_bar_emptyK_u32 + 8 * (i)), 4); }"),
     "declarations", "to 8 arrivals"),
    ("mbarrier array length", _sub("unsigned long long lg_bar_fullV[2];",
                                   "unsigned long long lg_bar_fullV[1];"),
     "declarations", "fullV[2] is not declared"),
    ("arrive at the other stage",
     _sub("lg_mbar_arrive((lg_bar_emptyK_u32 + 8 * (((j) % 2))));",
          "lg_mbar_arrive((lg_bar_emptyK_u32 + 8 * (((j + 1) % 2))));"),
     "printed_source", "Mod(j, 2)"),
    ("__syncwarp before an arrive dropped", _sub("__syncwarp();\n", ""),
     "printed_source", "not printed with '__syncwarp();' before it"),
    ("__syncthreads after the init fence dropped",
     _sub("lg_mbar_init_fence();\n  __syncthreads();\n", "lg_mbar_init_fence();\n"),
     "printed_source", "not printed with '__syncthreads();' after it"),
    ("a stray wait", _sub("      lg_wgmma_commit();\n", "      lg_wgmma_commit();\n" + _WAIT_V),
     "printed_source", "8 printed wait lines; the IR has 7"),
    ("a stray box", _sub("      for (int j = 0; j < n_blocks; ++j) {\n",
                         "      for (int j = 0; j < n_blocks; ++j) {\n        lg_tma_load_4d("
                         "(sK_u32 + 2 * (0)), tmK, (lg_bar_fullK_u32 + 8 * (0)), 0, 0, hk, "
                         "bat);\n"),
     "printed_source", "7 printed box load lines; the IR has 6"),
    ("V wait moved past the P V it guards", _wait_past_pv, "printed_source",
     "no printed call ['lg_mbar_wait((lg_bar_fullK_u32"),
    ("P V reads the wrong P registers", _sub("&pa[0], lg_gmma", "&pa[4], lg_gmma"),
     "printed_source", "('pa', (8, 9, 10, 11, 12, 13, 14, 15))"),
    ("Q descriptor start unstepped", _sub("sQ_u32, 4096*wg - 4096)", "sQ_u32, 4096*wg)"),
     "printed_source", "4096*wg"),
    ("producer loop bound", _sub("for (int j = 0; j < n_blocks; ++j) {",
                                 "for (int j = 0; j < n_end; ++j) {"),
     "printed_source", "n_end"),
]


@pytest.mark.parametrize("name,plant,check,msg", TEXT_BUGS, ids=[b[0] for b in TEXT_BUGS])
def test_planted_text_bugs_are_refused(name, plant, check, msg):
    k, src, inst = _kernel(False)
    bad = plant(src)
    assert bad != src
    r = verify_printed_ws(k, bad, instances=inst)
    fails = {n: c.counterexample for n, c in r.items() if not c.holds}
    assert check in fails, (name, fails)
    assert msg in fails[check], (name, fails[check])


def test_a_causal_mask_line_is_refused():
    """The diagonal block's mask (causal only) is the attention reader's: a key on the diagonal
    masked off is refused."""
    k, src, inst = _kernel(True)
    line = "sc[0] = (col0 + n0 <= row0 && col0 + n0 < seqlen_kv) ? sc[0] : LG_NEG_INF;"
    assert line in src
    bad = src.replace(line, line.replace("col0 + n0 <= row0", "col0 + n0 < row0"), 1)
    r = verify_printed_ws(k, bad, instances=inst)
    assert not r["printed_source"].holds
    assert "sc[0]" in r["printed_source"].counterexample or \
        "col0 + n0 < row0" in r["printed_source"].counterexample


def test_the_tma_text_checks_read_a_register_a_wgmma_and_the_scalars():
    """printed_tma on its own over the attention text: the P V wgmma (A from registers) is
    found in order with its P words, and the signature's runtime scalars are the IR's."""
    from kernels.verify.printed_tma import printed_tma_checks
    k, src, _ = _kernel(False)
    assert printed_tma_checks(k, src).first == {}
    bad = printed_tma_checks(k, src.replace("&pa[0], lg_gmma", "&pa[4], lg_gmma", 1)).first
    assert "printed_source" in bad
    bad = printed_tma_checks(k, src.replace(", float scale_log2)", ")", 1)).first
    assert "float scale_log2" in bad["declarations"]
