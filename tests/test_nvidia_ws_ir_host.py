"""The host side of the warp-specialised IR prefill (kernels/nvidia/wgmma_ws_ir_launch.py) on a
pretend H100 (tests/_fake_cuda.py): the 4-D tensor maps the IR declares, read against the
tensors and encoded by the template's encoder (every ``cuTensorMapEncodeTiled`` argument read
back against the IR's TensorMap), the launch's grid, block, shared memory and arguments by
name, and the refusals (our LaunchError) of what the maps or the 32-bit IR cannot address.
The GPU run is tests/test_nvidia_ws_ir_gpu.py."""

from __future__ import annotations

import dataclasses

import pytest
import sympy

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
from _fake_cuda import FakeCudaTensor  # noqa: E402

from kernels.errors import LaunchError  # noqa: E402
from kernels.ir.nvidia_tma import TensorMap  # noqa: E402
from kernels.nvidia.tma import SWIZZLE_REPEAT  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_launch import IrWsSerialAttention, launch_sizes  # noqa: E402
from kernels.nvidia.wgmma_ws_ir_serial import build_ws_serial_ir  # noqa: E402
from kernels.nvidia.ws_tma_loads import attention_map_args, ir_attention_map_args  # noqa: E402
from kernels.printer.cuda import smem_bytes  # noqa: E402

BF16 = torch.bfloat16


@pytest.fixture
def fake(monkeypatch):
    d = fc.install(monkeypatch)
    yield d
    fc.clear_caches()


@pytest.fixture(scope="module")
def ir():
    return build_ws_serial_ir()


@pytest.fixture(scope="module")
def _built():
    return IrWsSerialAttention()


@pytest.fixture
def fa(_built, fake):
    """The kernel, built once for the file, on this test's pretend H100: its bound calls,
    fake module and map copies forgotten after the test (none reaches another test's
    driver)."""
    yield _built
    _built.forget_calls()
    _built._module = None
    _built._maps.clear()


def _bhsd(B, H, S, D=128, dtype=BF16):
    return FakeCudaTensor((B, H, S, D), dtype)


def _bshd(B, H, S, D=128, dtype=BF16):
    """A (B, H, S, D) view of (B, S, H, D) storage: rows strided by the heads."""
    return FakeCudaTensor((B, H, S, D), dtype, stride=(S * H * D, D, H * D, 1))


def _maps(ir):
    return {tm.tensor: tm for tm in ir.params if isinstance(tm, TensorMap)}


@pytest.mark.parametrize("layout", [_bhsd, _bshd], ids=["bhsd", "bshd"])
def test_each_ir_map_is_the_templates_encoding_of_its_tensor(ir, layout):
    q, k = layout(2, 8, 300), layout(2, 2, 517)
    sizes = launch_sizes(q, k)
    assert sizes == {"batch": 2, "heads": 8, "kv_heads": 2, "group": 4, "seqlen_q": 300,
                     "seqlen_kv": 517}
    for name, t in (("Q", q), ("K", k), ("V", k)):
        tm = _maps(ir)[name]
        args = ir_attention_map_args(tm, t, sizes)
        assert args == attention_map_args(t, tm.box_outer)
        B, H, S, D = t.shape
        assert args["dims"] == (D, S, H, B)
        assert args["strides"] == tuple(2 * t.stride(i) for i in (2, 1, 0))
        assert args["box"] == (tm.box_inner, tm.box_outer, 1, 1) == (64, 128, 1, 1)


def test_the_launch_encodes_the_irs_maps_and_passes_every_argument_by_name(fake, monkeypatch,
                                                                          fa):
    enc = fc.install_tma_encoder(monkeypatch)
    B, H, HK, S, SK = 2, 6, 3, 263, 391
    q, k, v = _bshd(B, H, S), _bhsd(B, HK, SK), _bshd(B, HK, SK)
    out = fa(q, k, v, scale=0.125)
    assert len(enc.maps) == 3 and len(fake.launches) == 1
    L = fake.launches[0]
    ir = fa.ir
    assert L.kernel == ir.name == "lg_wsflash_ir_serial_bf16_d128_128x128_serial"
    assert L.grid == (-(-S // 128), B * H, 1) and L.block == (384, 1, 1)
    assert L.smem == smem_bytes(ir)
    names = [p.name for p in ir.params] + [s.name for s in ir.scalars]
    args = dict(zip(names, L.args))
    want = dict(kv_heads=HK, batch=B, seqlen_q=S, seqlen_kv=SK, heads=H, group=H // HK,
                q_sb=q.stride(0), q_sh=q.stride(1), q_ss=q.stride(2), k_sb=k.stride(0),
                k_sh=k.stride(1), k_ss=k.stride(2), v_sb=v.stride(0), v_sh=v.stride(1),
                v_ss=v.stride(2), o_sb=out.stride(0), o_sh=out.stride(1), o_ss=out.stride(2))
    assert {n: args[n] for n in want} == want
    assert args["scale_log2"] == pytest.approx(0.125 * 1.4426950408889634, rel=1e-6)
    assert args["O"] == out.data_ptr()
    sizes = launch_sizes(q, k)
    for tm, t, m in zip((p for p in ir.params if isinstance(p, TensorMap)), (q, k, v),
                        enc.maps):
        # read back against the IR's TensorMap: its extents, the tensor's byte strides in
        # the map's order, its box, its swizzle row, nothing interleaved, elements dense
        dims = tuple(_extent(e, sizes) for e in (tm.inner, tm.outer, *tm.planes))
        assert m.dims == dims == tuple(int(x) for x in reversed(t.shape))
        assert m.strides == tuple(2 * t.stride(i) for i in (2, 1, 0))
        assert m.box == (tm.box_inner, tm.box_outer, 1, 1) and m.rank == 4
        assert m.element_strides == (1, 1, 1, 1)
        assert m.swizzle == f"{tm.box_inner * 2}B" and tm.box_inner * 2 in SWIZZLE_REPEAT
        assert m.interleave == "NONE" and m.oob == "NONE" and m.dtype == "BFLOAT16"
        assert m.ptr == t.data_ptr()
        # the kernel gets the map's device copy (64-byte aligned), not the tensor
        assert args[tm.name] not in (t.data_ptr(), None) and args[tm.name] % 64 == 0
    # a second call with the same tensors re-uses the maps
    fa(q, k, v, out=out, scale=0.125)
    assert len(enc.maps) == 3 and len(fake.launches) == 2


def _extent(e, sizes):
    e = sympy.sympify(e)
    return int(e.subs({s: sizes[s.name] for s in e.free_symbols}))


def test_a_new_pointer_gets_its_own_map(fake, monkeypatch, fa):
    enc = fc.install_tma_encoder(monkeypatch)
    q, k, v = _bhsd(1, 2, 77), _bhsd(1, 2, 77), _bhsd(1, 2, 77)
    fa(q, k, v)
    k2 = _bhsd(1, 2, 77)
    fa(q, k2, v)
    assert [m.ptr for m in enc.maps] == [q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                         k2.data_ptr()]


# ------------------------------------------------------------------------------ refusals

@pytest.mark.parametrize("bad,words", [
    # a head stride of 0 (one head broadcast): checks pass it, a tensor map cannot take it
    (lambda: FakeCudaTensor((1, 2, 77, 128), BF16, stride=(77 * 128, 0, 128, 1)),
     "positive strides"),
    (lambda: FakeCudaTensor((1, 2, 77, 128), BF16, stride=(2 * 77 * 132, 77 * 132, 132, 1)),
     "multiples of 8"),
    (lambda: FakeCudaTensor((1, 2, 77, 128), BF16, ptr=(1 << 30) + 8), "16-byte aligned"),
], ids=["broadcast-head", "stride-not-16B", "misaligned"])
def test_what_a_map_cannot_address_is_refused(fake, monkeypatch, fa, bad, words):
    fc.install_tma_encoder(monkeypatch)
    q, k = _bhsd(1, 2, 77), _bhsd(1, 2, 77)
    with pytest.raises(LaunchError, match=words):
        fa(q, k, bad())


def test_the_irs_limits_are_refused(fake, monkeypatch, fa):
    fc.install_tma_encoder(monkeypatch)
    # batch x heads past grid y
    q = _bhsd(2, 40000, 1)
    with pytest.raises(LaunchError, match="65535"):
        fa(q, q, q)
    # an offset past 2^31 (the O store's 32-bit int math); TMA itself could address it
    big = _bhsd(1, 1, (1 << 24) + 8)
    with pytest.raises(LaunchError, match="2\\^31"):
        fa(big, big, big)
    assert not fake.launches


def test_the_wrong_dtype_is_refused(fake, monkeypatch, fa):
    fc.install_tma_encoder(monkeypatch)
    q = _bhsd(1, 2, 77, dtype=torch.float16)
    with pytest.raises(LaunchError, match="built for bfloat16"):
        fa(q, q, q)


# planted IR maps: each reading of the IR against the tensor refuses its own mismatch
@pytest.mark.parametrize("plant,words", [
    (lambda tm: dataclasses.replace(tm, outer=sympy.Symbol("seqlen_kv")), "extents"),
    (lambda tm: dataclasses.replace(tm, planes=(sympy.Symbol("kv_heads"), sympy.Symbol("batch"))),
     "extents"),
    (lambda tm: dataclasses.replace(tm, dims=("d", "head", "row", "batch")), "not \\(head_dim"),
    (lambda tm: dataclasses.replace(tm, dtype="f16"), "elements are f16"),
    (lambda tm: dataclasses.replace(tm, dims=("d", "row"), planes=()), "2-D map"),
    (lambda tm: dataclasses.replace(tm, outer=sympy.Symbol("rows_q")), "no launch value"),
], ids=["seq-extent", "plane-extent", "order", "dtype", "2d", "unknown-symbol"])
def test_planted_ir_maps_are_refused(ir, plant, words):
    q, k = _bhsd(2, 4, 300), _bhsd(2, 2, 517)
    tm = plant(_maps(ir)["Q"])
    with pytest.raises(LaunchError, match=words):
        ir_attention_map_args(tm, q, launch_sizes(q, k))


def test_a_planted_box_is_refused(ir):
    """A map object whose box is not the template's (64, rows): the TensorMap class refuses
    such boxes itself, so the host check is planted on a stand-in."""
    import types
    tm = _maps(ir)["K"]
    fake_tm = types.SimpleNamespace(**{f.name: getattr(tm, f.name)
                                       for f in dataclasses.fields(tm)})
    fake_tm.box_inner = 32
    k = _bhsd(2, 2, 517)
    with pytest.raises(LaunchError, match="box \\(32, 128"):
        ir_attention_map_args(fake_tm, k, launch_sizes(_bhsd(2, 4, 300), k))


def test_a_map_over_a_tensor_the_launch_lacks_is_refused(fake, monkeypatch):
    fc.install_tma_encoder(monkeypatch)
    fa2 = IrWsSerialAttention()
    tm = _maps(fa2.ir)["V"]
    fa2.ir.params = [dataclasses.replace(tm, tensor="W") if p is tm else p
                     for p in fa2.ir.params]
    q = _bhsd(1, 2, 77)
    with pytest.raises(LaunchError, match="tensor map tmV over W"):
        fa2(q, q, q)


# ------------------------------------------------------------- compiled offline (NVRTC)

def _sass_registers(sass: str):
    """The highest register index the producer's code (between ``USETMAXREG.DEALLOC`` and
    ``USETMAXREG.TRY_ALLOC``) and the consumers' (after it) name, counting the registers a
    64 / 128-bit operand and an HGMMA accumulator (N / 2 from its first) span past the one
    named; and the two USETMAXREG counts."""
    import re
    lines = sass.splitlines()
    dec = next(i for i, ln in enumerate(lines) if "USETMAXREG.DEALLOC" in ln)
    inc = next(i for i, ln in enumerate(lines) if "USETMAXREG.TRY_ALLOC" in ln)

    def top(part):
        m = -1
        for ln in part:
            if "*/" not in ln:
                continue
            ins = ln.split("*/", 1)[1]
            wide = 3 if ".128" in ins else 1 if ".64" in ins else 0
            for r in re.findall(r"\bR(\d+)\b", ins):
                m = max(m, int(r) + wide)
            g = re.search(r"HGMMA\.64x(\d+)x16\.F32\S*\s+R(\d+)", ins)
            if g:
                m = max(m, int(g.group(2)) + int(g.group(1)) // 2 - 1)
        return m
    counts = [int(re.search(r"0x([0-9a-f]+)", lines[i]).group(1), 16) for i in (dec, inc)]
    return top(lines[dec:inc]), top(lines[inc:]), counts


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_nvrtc_compiles_it_within_the_role_register_budgets(tmp_path, causal):
    """No spills at the kernel's 168 registers (384 threads x 168 <= 65536); where nvdisasm is
    on PATH, the SASS keeps the producer under its 24 registers and the consumers under
    their 240 (the setmaxnreg counts the IR prints)."""
    import shutil
    import subprocess
    from kernels.printer.cuda_attention import emit_cuda_attention
    from kernels.toolchain.nvrtc import compile_cuda, nvrtc_available
    from kernels.nvidia.ws_tma_loads import TMA_CONSUMER_REGS, TMA_PRODUCER_REGS
    if not nvrtc_available():
        pytest.skip("NVRTC not installed")
    k = build_ws_serial_ir(causal)
    m = compile_cuda(emit_cuda_attention(k), "sm_90a", name=f"{k.name}.cu", backend="nvrtc",
                     options=("--ptxas-options=-v",), use_cache=False)
    assert m.kernels == (k.name,)
    assert " 0 bytes spill stores" in m.log and "Used 168 registers" in m.log, m.log
    nvdisasm = shutil.which("nvdisasm")
    if nvdisasm is None:
        return
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(m.cubin)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    producer, consumer, counts = _sass_registers(sass)
    assert counts == [TMA_PRODUCER_REGS, TMA_CONSUMER_REGS]
    assert 0 < producer < TMA_PRODUCER_REGS and 64 < consumer < TMA_CONSUMER_REGS, \
        (producer, consumer)
