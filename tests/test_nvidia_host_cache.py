"""Issue 20, host time of a call: the per-key plan caches of ``kernels.nvidia.dispatch`` and
the kernel classes (``CompiledKernel.bound``) and the runtime's prepared launches, on the CPU
with a pretend H100 (``_fake_cuda``): a cached call launches the same kernel with the same
arguments as an uncached one, a new pointer is re-packed, a changed stride / dtype /
alignment / scalar misses, and bad input raises its own error every time."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import _fake_cuda as fc  # noqa: E402
import kernels.runtime.cuda as rc  # noqa: E402
from kernels.errors import LaunchError  # noqa: E402
from kernels.nvidia import dispatch, wgmma_tma  # noqa: E402
from kernels.nvidia.gemm import CudaGemmConfig  # noqa: E402
from kernels.nvidia.wgmma import WgmmaGemmConfig  # noqa: E402
from kernels.runtime.launch_cache import BoundedCache, call_key, tensor_key  # noqa: E402

F16, BF16 = torch.float16, torch.bfloat16


@pytest.fixture
def fake(monkeypatch):
    f = fc.install(monkeypatch)
    yield f
    fc.clear_caches()


def T(shape, dtype=F16, stride=None, ptr=None):
    return fc.FakeCudaTensor(shape, dtype, stride, ptr)


def roles(launches, **named):
    """Launches with each pointer argument named by the tensor it is ('a', 'b', ...) or
    'other' (workspaces, tensor maps): comparable across calls that allocate anew."""
    by_ptr = {t.data_ptr(): n for n, t in named.items()}
    return [(L.kernel, L.grid, L.block, L.smem, L.stream,
             tuple(by_ptr.get(x, "other") if isinstance(x, int) and x > 1 << 19 else x
                   for x in L.args)) for L in launches]


def calls(fake, fn, n=1):
    start = len(fake.launches)
    for _ in range(n):
        fn()
    return fake.launches[start:]


GEMMS = [  # (M, N, K, dtype, kwargs, kernel name prefix)
    (16, 4096, 4096, BF16, {}, "lg_irtma_bf16_n_64x64x64_s12_ds_ski_a16"),  # TMA split-K, IR
    (2048, 2048, 2048, BF16, {}, "lg_irtma_bf16_n_128x256x64_s3"),  # TMA persistent, IR-built
    (777, 333, 130, F16, {}, "lg_irwgmma_rt_f16_n_64x64x64_s6"),  # cp.async wgmma, IR-built
    (64, 256, 512, F16, {"atom": "mma"}, "lg_irgemm_rt_f16_n"),  # mma.sync, IR (an M edge)
    (256, 256, 512, F16, {"atom": "mma"}, "lg_irgemm_rt_f16_n"),  # mma.sync, IR (no edge)
    (128, 256, 32, F16, {"atom": "mma"}, "lg_gemm_f16_n"),     # mma.sync template (one tile)
    (64, 256, 2048, F16, {"config": WgmmaGemmConfig(bm=64, bn=128, split_k=True), "splits": 4},
     "lg_irwgmma_rt_f16_n_64x128x64_s4_sk"),                        # wgmma split-K, IR-built
]


@pytest.mark.parametrize("M,N,K,dt,kw,name", GEMMS)
def test_cached_gemm_launches_what_the_uncached_call_launches(fake, M, N, K, dt, kw, name):
    a, b, out = T((M, K), dt), T((K, N), dt), T((M, N), dt)
    first = calls(fake, lambda: dispatch.gemm(a, b, out, **kw))
    prepared = fake.prepared
    cached = calls(fake, lambda: dispatch.gemm(a, b, out, **kw), 3)
    assert fake.prepared == prepared, "a cached call ran the launch checks again"
    assert first[0].kernel.startswith(name)
    want = roles(first, a=a, b=b, out=out)
    assert roles(cached, a=a, b=b, out=out) == want * 3
    fc.clear_caches()                   # the uncached path again, from scratch
    assert roles(calls(fake, lambda: dispatch.gemm(a, b, out, **kw)), a=a, b=b, out=out) == want


def test_a_new_pointer_hits_and_is_the_one_launched(fake):
    a, b, out = T((777, 130)), T((130, 333)), T((777, 333))
    dispatch.gemm(a, b, out)
    prepared = fake.prepared
    a2, out2 = T((777, 130)), T((777, 333))
    L = calls(fake, lambda: dispatch.gemm(a2, b, out2))
    assert fake.prepared == prepared
    assert L[0].args[:3] == (a2.data_ptr(), b.data_ptr(), out2.data_ptr())


def test_a_new_pointer_gets_its_own_tensor_map(fake, monkeypatch):
    encoded = []
    monkeypatch.setattr(wgmma_tma, "encode_tensor_map",
                        lambda t, bi, bo: (encoded.append(t.data_ptr()), bytes(128))[1])
    a, b, out = T((2048, 2048), BF16), T((2048, 2048), BF16), T((2048, 2048), BF16)
    L1 = calls(fake, lambda: dispatch.gemm(a, b, out))
    a2 = T((2048, 2048), BF16)
    L2 = calls(fake, lambda: dispatch.gemm(a2, b, out))
    assert encoded == [a.data_ptr(), b.data_ptr(), out.data_ptr(), a2.data_ptr()]
    assert L2[0].args[0] != L1[0].args[0] and L2[0].args[1:] == L1[0].args[1:]


@pytest.mark.parametrize("M, N, K, maps", [(2048, 2048, 2048, 3),      # TMA store: A, B, C
                                           (128, 4096, 14336, 2)])   # direct store: A, B
def test_a_cached_tma_call_finds_its_tensor_maps_by_pointer(fake, monkeypatch, M, N, K, maps):
    """Session 12 (host time per call, benchmarks/gpu_gemm_wall.py): a cached call of the IR
    TMA GEMM takes its tensor maps from one look-up of the operands' pointers
    (wgmma_tma_ir_split.operand_maps), not from tensor_map's key of shape, strides, dtype and
    device per map; a new pointer still gets its own map, and the direct store's C (no map)
    does not take part in the look-up."""
    a, b, out = T((M, K), BF16), T((K, N), BF16), T((M, N), BF16)
    L1 = calls(fake, lambda: dispatch.gemm(a, b, out))
    looked = []
    real = dispatch.IrTmaGemm.tensor_map
    monkeypatch.setattr(dispatch.IrTmaGemm, "tensor_map",
                        lambda self, t, *box: (looked.append(t.data_ptr()), real(self, t, *box))[1])
    L2 = calls(fake, lambda: dispatch.gemm(a, b, out), 3)
    assert looked == [] and [L.args for L in L2] == [L1[0].args] * 3
    out2 = T((M, N), BF16)
    L3 = calls(fake, lambda: dispatch.gemm(a, b, out2))
    if maps == 3:                   # C's map is the new pointer's
        assert looked == [a.data_ptr(), b.data_ptr(), out2.data_ptr()]
        assert L3[0].args[:2] == L1[0].args[:2] and L3[0].args[2] != L1[0].args[2]
    else:                           # no map for C: same maps, the new C pointer passed
        assert looked == [] and L3[0].args[:2] == L1[0].args[:2]
        assert out2.data_ptr() in L3[0].args
    a2 = T((M, K), BF16)
    L4 = calls(fake, lambda: dispatch.gemm(a2, b, out2))
    assert looked[-maps:][0] == a2.data_ptr() and L4[0].args[0] != L1[0].args[0]


@pytest.mark.parametrize("change", ["stride", "dtype", "alignment", "b_major"])
def test_a_changed_key_misses(fake, change):
    a, b = T((256, 512)), T((512, 256))
    L1 = calls(fake, lambda: dispatch.gemm(a, b))
    misses = dispatch._GEMM_PLANS.misses
    kw = {}
    if change == "stride":
        a = T((256, 512), stride=(520, 1))
    elif change == "dtype":
        a, b = T((256, 512), BF16), T((512, 256), BF16)
    elif change == "alignment":
        a = T((256, 512), ptr=a.data_ptr() + (1 << 24) + 2)      # 2-byte aligned only
    else:
        b, kw = T((256, 512)), {"b_major": "k"}
    prepared = fake.prepared
    L2 = calls(fake, lambda: dispatch.gemm(a, b, **kw))
    assert dispatch._GEMM_PLANS.misses == misses + 1 and fake.prepared > prepared
    if change == "stride":             # the same kernel; the stride is in a's new tensor map
        assert L2[0].kernel == L1[0].kernel and L2[0].args[0] != L1[0].args[0]
    elif change == "dtype":
        assert "bf16" in L2[0].kernel
    elif change == "alignment":        # no TMA, no 16-byte copies: the cp.async kernel
        assert L2[0].kernel.startswith("lg_irwgmma_rt_f16") and "tma" not in L2[0].kernel
    else:
        assert "_k_" in L2[0].kernel


def test_errors_are_raised_every_time_and_never_cached(fake):
    a, b = T((64, 128)), T((128, 64))
    dispatch.gemm(a, b)
    sizes = len(dispatch._GEMM_PLANS), fake.prepared
    for _ in range(2):
        with pytest.raises(LaunchError, match="must be"):
            dispatch.gemm(a, T((96, 64)))
        with pytest.raises(LaunchError, match="float16 or bfloat16"):
            dispatch.gemm(T((64, 128), torch.float32), T((128, 64), torch.float32))
        with pytest.raises(LaunchError, match="NVIDIA GPU"):        # same shape, on the CPU
            dispatch.gemm(torch.zeros(64, 128, dtype=F16), torch.zeros(128, 64, dtype=F16))
    assert fake.prepared == sizes[1]
    g = dispatch.compiled_gemm(dispatch.choose_gemm(T((2048, 2048)), T((2048, 2048))).config)
    for _ in range(2):                  # a direct call of the TMA kernel on a misaligned base
        with pytest.raises(LaunchError, match="TMA needs a 16-byte aligned base"):
            g(T((2048, 2048), ptr=(1 << 30) + 2), T((2048, 2048)))


def test_flash_attention_cached_and_scale_in_the_key(fake):
    q, k, o = T((4, 8, 513, 256), BF16), T((4, 1, 513, 256), BF16), T((4, 8, 513, 256), BF16)
    first = calls(fake, lambda: dispatch.flash_attention(q, k, k, causal=True, out=o))
    prepared = fake.prepared
    again = calls(fake, lambda: dispatch.flash_attention(q, k, k, causal=True, out=o), 2)
    assert fake.prepared == prepared and [L.args for L in again] == [first[0].args] * 2
    halved = calls(fake, lambda: dispatch.flash_attention(q, k, k, causal=True, out=o,
                                                          scale=0.5 / 16))
    assert fake.prepared == prepared + 1
    assert halved[0].args[-1] == pytest.approx(first[0].args[-1] / 2, rel=1e-6)
    for _ in range(2):
        with pytest.raises(LaunchError, match="scale"):
            dispatch.flash_attention(q, k, k, causal=True, out=o, scale=-1.0)


def test_decode_cached_launches_the_fused_ir_kernel_again(fake):
    q, k, o = T((4, 32, 1, 256), BF16), T((4, 8, 4096, 256), BF16), T((4, 32, 1, 256))
    first = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
    # split-KV in one launch: the verified IR split kernel whose last block per group merges
    # (kernels/nvidia/decode_fused_ir.py), its partials and counters kept per stream
    assert len(first) == 1 and first[0].kernel.startswith("lg_decode_fused_ir_")
    prepared = fake.prepared
    again = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
    assert fake.prepared == prepared
    assert roles(again, q=q, k=k, o=o) == roles(first, q=q, k=k, o=o)
    with pytest.raises(LaunchError, match="GQA"):
        dispatch.decode_attention(T((4, 30, 1, 256), BF16), k, k)


def _force_fused_decode(monkeypatch):
    """Make decode_attention choose the opt-in fused kernel (one launch, the last split
    block merges)."""
    import dataclasses
    real = dispatch.choose_decode

    def fused_choice(q, k, **kw):
        c = real(q, k, **kw)
        return dataclasses.replace(c, config=dataclasses.replace(c.config, fused=True))
    monkeypatch.setattr(dispatch, "choose_decode", fused_choice)
    dispatch.clear_plans()


def test_decode_fused_cached_launches_the_fused_kernel_again(fake, monkeypatch):
    _force_fused_decode(monkeypatch)
    q, k, o = T((4, 32, 1, 256), BF16), T((4, 8, 4096, 256), BF16), T((4, 32, 1, 256))
    first = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
    # one launch: the split kernel whose last block per group merges (no combine kernel),
    # its counter buffer last
    assert len(first) == 1 and first[0].kernel.endswith("_fc")
    assert fake.signatures[first[0].kernel][-1] == "ptr"
    prepared = fake.prepared
    again = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
    assert fake.prepared == prepared
    assert roles(again, q=q, k=k, o=o) == roles(first, q=q, k=k, o=o)
    assert again[0].args[-1] == first[0].args[-1]    # the same stream's counters, kept


def test_decode_counters_are_per_stream(fake, monkeypatch):
    """Two streams never share the fused decode's counters (blocks of concurrent launches
    would take each other's tickets); the same stream keeps its buffer."""
    _force_fused_decode(monkeypatch)
    from types import SimpleNamespace
    q, k, o = T((4, 32, 1, 256), BF16), T((4, 8, 4096, 256), BF16), T((4, 32, 1, 256))
    cnt = {}
    for s in (7, 9, 7):
        monkeypatch.setattr(torch.cuda, "current_stream", lambda i=None, s=s: SimpleNamespace(cuda_stream=s))
        (L,) = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
        assert L.stream == ("stream", s)
        assert cnt.setdefault(s, L.args[-1]) == L.args[-1]
    assert cnt[7] != cnt[9]


def test_fused_ir_decode_workspaces_are_per_stream(fake, monkeypatch):
    """The dispatched one-launch IR decode keeps its partials (Op, LSEp) and counters (CNT)
    per stream: the same stream reuses them, two streams never share them."""
    from types import SimpleNamespace
    q, k, o = T((4, 32, 1, 256), BF16), T((4, 8, 4096, 256), BF16), T((4, 32, 1, 256))
    seen = {}
    for s in (7, 9, 7):
        monkeypatch.setattr(torch.cuda, "current_stream", lambda i=None, s=s: SimpleNamespace(cuda_stream=s))
        (L,) = calls(fake, lambda: dispatch.decode_attention(q, k, k, out=o))
        assert L.kernel.startswith("lg_decode_fused_ir_") and L.stream == ("stream", s)
        work = (L.args[3], L.args[4], L.args[6])           # Op, LSEp, CNT
        assert seen.setdefault(s, work) == work
    assert all(a != b for a, b in zip(seen[7], seen[9]))


def test_inline_split_k_workspaces_are_per_stream(fake, monkeypatch):
    """The one-launch split-K GEMM's partials and arrival counters (kernels.runtime
    .launch_cache.PerStream, as the fused decode's counters): one pair per stream, kept for
    that stream's later calls, never shared by two streams."""
    from types import SimpleNamespace
    a, b, c = T((16, 4096), BF16), T((4096, 4096), BF16), T((16, 4096), BF16)
    seen = {}
    for s in (7, 9, 7):
        monkeypatch.setattr(torch.cuda, "current_stream", lambda i=None, s=s: SimpleNamespace(cuda_stream=s))
        (L,) = calls(fake, lambda: dispatch.gemm(a, b, c))
        assert "_ski" in L.kernel and L.stream == ("stream", s)
        ws = (L.args[2], L.args[4])           # partials, counters (the IR kernel's W, cnt)
        assert all(w is not None for w in ws)
        assert seen.setdefault(s, ws) == ws
    assert not set(seen[7]) & set(seen[9])


def test_launch_site_rechecks_when_a_scalar_changes(fake):
    a, b = T((64, 128)), T((128, 64))
    g = dispatch.compiled_gemm(CudaGemmConfig(dtype="f16"), template=True)
    run = g.bind(a, b, None)
    run(a, b, None)
    run(a, b, None)
    assert fake.prepared == 1
    site = rc.LaunchSite(g.module, g.cfg.name, 1, g.cfg.threads,
                         signature=("ptr", "ptr", "ptr") + ("i32",) * 6,
                         smem_bytes=g.cfg.smem_bytes)
    args = [a, b, T((64, 64)), 64, 64, 128, 128, 64, 64]
    site(args)
    site(args)
    site(args[:3] + [32] + args[4:])
    assert fake.prepared == 3 and fake.launches[-1].args[3] == 32


def test_prepared_launch_makes_its_context_current_when_another_is(fake, monkeypatch):
    entered = []
    monkeypatch.setattr(torch.cuda, "device", lambda i: entered.append(i) or fc.contextlib
                        .nullcontext())
    a, b = T((64, 128)), T((128, 64))
    dispatch.gemm(a, b, atom="mma")
    n = len(entered)
    dispatch.gemm(a, b, atom="mma")
    assert len(entered) == n                   # steady state: no device guard
    fake.ctx = 0xD0                            # another context current on this thread
    dispatch.gemm(a, b, atom="mma")
    # (64 rows: an M edge, so the IR-built runtime-size mma.sync kernel)
    assert len(entered) > n and fake.launches[-1].kernel.startswith("lg_irgemm_rt_f16")


def test_runtime_launch_caches_per_key(fake):
    g = dispatch.compiled_gemm(CudaGemmConfig(dtype="f16"), template=True)
    a, b, c = T((64, 128)), T((128, 64)), T((64, 64))
    kw = dict(signature=("ptr", "ptr", "ptr") + ("i32",) * 6, smem_bytes=g.cfg.smem_bytes)
    args = [a, b, c, 64, 64, 128, 128, 64, 64]
    for _ in range(3):
        rc.launch(g.module, g.cfg.name, 1, g.cfg.threads, args, **kw)
    assert fake.prepared == 1
    rc.launch(g.module, g.cfg.name, 1, g.cfg.threads, [T((64, 128)), b, c] + args[3:], **kw)
    assert fake.prepared == 1                  # a new pointer: packed, not re-checked
    rc.launch(g.module, g.cfg.name, 2, g.cfg.threads, args, **kw)
    assert fake.prepared == 2                  # another grid
    with pytest.raises(LaunchError, match="threads"):
        rc.launch(g.module, g.cfg.name, 1, 2048, args, **kw)
    with pytest.raises(LaunchError, match="does not fit"):
        rc.launch(g.module, g.cfg.name, 1, g.cfg.threads, args[:3] + [2 ** 40] + args[4:], **kw)


def test_keys_and_bounded_cache():
    a = torch.zeros(4, 6, dtype=F16)
    assert tensor_key(a) == (F16, torch.Size([4, 6]), (6, 1), a.device, a.data_ptr() % 128)
    assert call_key(a, None, 3) == (tensor_key(a), None, (int, 3))
    assert call_key(a, [1, 2]) is None and call_key(object(), a) is not None
    assert call_key(a, 1) != call_key(a, 1.5) and call_key(a, True) != call_key(a, 1)
    c: BoundedCache = BoundedCache(limit=2)
    c.put(1, "x")
    c.put(2, "y")
    assert c.get(1) == "x" and c.get(None) is None and (c.hits, c.misses) == (1, 1)
    c.put(3, "z")                              # full: forgets everything, keeps working
    assert c.get(1) is None and c.get(3) == "z" and len(c) == 1


def test_tma_store_configs_dispatch_to_the_verified_ir_kernel(fake):
    """gemm()'s TMA path runs the IR-built kernel (verified when built) for TMA-store,
    and direct-store non-split-K configurations, the template for the split-K forms the IR
    does not have (issue 20 item 1)."""
    from kernels.nvidia.wgmma_tma import TmaGemm, TmaGemmConfig
    from kernels.nvidia.wgmma_tma_ir import IrTmaGemm
    g = dispatch.compiled_gemm(TmaGemmConfig(dtype="bf16"))
    assert isinstance(g, IrTmaGemm) and g.report.holds
    assert dispatch.compiled_gemm(TmaGemmConfig(dtype="bf16")) is g      # verified once
    d = dispatch.compiled_gemm(TmaGemmConfig(store="direct"))
    assert isinstance(d, IrTmaGemm) and d.report.holds and d.kernel_name.endswith("_ds")
    sk = dispatch.compiled_gemm(TmaGemmConfig(bm=64, bn=128, store="direct", split_k=True,
                                              reduce="inline"))
    assert isinstance(sk, IrTmaGemm) and sk.report.holds and sk.kernel_name.endswith("_ski")
    # the two-launch split-K and two CTAs per SM are IR too; their switches off: the template
    rest = (TmaGemmConfig(bm=64, bn=256, stages=4, store="direct", split_k=True),
            TmaGemmConfig(bm=64, bn=64, stages=4, store="direct", split_k=True,
                          reduce="inline", ctas_per_sm=2))
    for cfg in rest:
        t = dispatch.compiled_gemm(cfg)
        assert isinstance(t, IrTmaGemm) and t.report.holds, cfg.name
    for switch in ("REDUCE_LAUNCH_ON_IR", "TWO_CTAS_ON_IR"):
        old = getattr(dispatch, switch)
        setattr(dispatch, switch, False)
        try:
            assert type(dispatch.tma_gemm(rest[switch == "TWO_CTAS_ON_IR"])) is TmaGemm
        finally:
            setattr(dispatch, switch, old)
    a, b = T((2048, 2048), BF16), T((2048, 2048), BF16)
    L = calls(fake, lambda: dispatch.gemm(a, b))
    assert L[0].kernel == g.kernel_name


def test_two_launch_split_k_runs_both_ir_kernels(fake):
    """The two-launch IR split-K launches its split kernel, then its reduce kernel on the same
    stream (workspace, M, N, ldc, the split count), and choose_gemm names the split kernel and
    the reduce kernel at the selection's 64x256 shape (192x3072x32768: 3 splits)."""
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    cfg = TmaGemmConfig(dtype="bf16", bm=64, bn=256, stages=5, store="direct", split_k=True)
    a, b = T((192, 32768), BF16), T((32768, 3072), BF16)
    ch = dispatch.choose_gemm(a, b)
    assert ch.config == cfg and ch.splits == 3, ch
    assert ch.kernel == "lg_irtma_bf16_n_64x256x64_s5_ds_sk" and ch.kernel + "_reduce" in ch.reason
    L = calls(fake, lambda: dispatch.gemm(a, b))
    assert [x.kernel for x in L] == [ch.kernel, ch.kernel + "_reduce"]
    assert L[0].stream == L[1].stream and tuple(L[1].args[2:]) == (192, 3072, 3072, 3)
    assert L[0].args[2] == L[1].args[0]          # the reduce reads the split kernel's W


def test_cp_async_split_k_runs_the_ir_pair(fake):
    """A split-K problem whose rows are not 16-byte aligned (64x4096x4096 at lda 4099: the
    selection's cp.async split-K, 64x128 tile, 8 splits) runs the IR split kernel and then
    its IR reduce kernel (CP_SPLIT_ON_IR, on since the session-11 H100 run), and choose_gemm
    names both; with the switch off choose_gemm names the template and wgmma_gemm builds it."""
    a = T((64, 4096), F16, stride=(4099, 1))
    b = T((4096, 4096), F16)
    ch = dispatch.choose_gemm(a, b)
    assert ch.config.split_k and ch.splits == 8, ch
    assert ch.kernel == "lg_irwgmma_rt_f16_n_64x128x64_s4_sk"
    assert ch.kernel + "_reduce (the IR reduce kernel)" in ch.reason
    L = calls(fake, lambda: dispatch.gemm(a, b))
    assert [x.kernel for x in L] == [ch.kernel, ch.kernel + "_reduce"]
    assert L[0].grid == (32, 8, 1) and L[0].args[2] == L[1].args[0]   # the reduce reads W
    dispatch.CP_SPLIT_ON_IR = False
    try:
        dispatch.clear_plans()
        ch = dispatch.choose_gemm(a, b)
        name = str(ch).split()[1].rstrip(",")          # the template's: the config's name
        assert name == "lg_wgmma_f16_n_64x128x64_s4_sk" and "TEMPLATE" in ch.reason, str(ch)
        assert type(dispatch.wgmma_gemm(ch.config)).__name__ == "WgmmaGemm"
    finally:
        dispatch.CP_SPLIT_ON_IR = True


def test_choose_gemm_names_the_kernel_that_runs(fake):
    """print(choose_gemm(a, b)) names the kernel gemm() launches: the IR-built one where it
    runs (the benchmark suite's 'choice' column showed the template's name for the IR kernel),
    the template's for a split-K choice."""
    for shape in (((2048, 2048), (2048, 2048)), ((16, 4096), (4096, 4096))):
        a, b = T(shape[0], BF16), T(shape[1], BF16)
        (L,) = calls(fake, lambda: dispatch.gemm(a, b))
        assert str(dispatch.choose_gemm(a, b)).split()[1].rstrip(",") == L.kernel


def test_one_split_choices_run_the_ir_direct_store(fake):
    """A split-K TMA choice of ONE split (16x14336x4096, 128x4096x14336: the suite's skinny
    shapes) computes what the non-split direct store does: gemm() runs the verified IR kernel
    of that form (one launch, no workspace, no counter), and choose_gemm names it; two splits
    stay on the template's split-K."""
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    for (m, n, k), suffix in (((16, 14336, 4096), "_64x128x64_s8_ds_a16"),
                              ((128, 4096, 14336), "_64x64x64_s12_ds")):
        a, b = T((m, k), BF16), T((k, n), BF16)
        ch = dispatch.choose_gemm(a, b)
        assert ch.splits == 1 and not ch.config.split_k and ch.config.store == "direct"
        assert ch.kernel == "lg_irtma_bf16_n" + suffix and "one split" in ch.reason
        (L,) = calls(fake, lambda: dispatch.gemm(a, b))
        assert L.kernel == ch.kernel and L.args[-1] == n        # ldc: C's row stride
    assert dispatch.one_split_form(TmaGemmConfig(bm=64, bn=64, stages=4, store="direct",
                                                 split_k=True, reduce="inline")) == \
        TmaGemmConfig(bm=64, bn=64, stages=4, store="direct")
    a, b = T((16, 4096), BF16), T((4096, 4096), BF16)
    assert dispatch.choose_gemm(a, b).splits == 2
    (L,) = calls(fake, lambda: dispatch.gemm(a, b))
    assert L.kernel.startswith("lg_irtma_") and "_ski" in L.kernel      # the IR split-K


def test_ir_direct_store_passes_the_row_stride_and_refuses_int32_overflow(fake):
    """The IR direct store takes C's row stride as its last argument (a strided out: the
    stride, not N) and refuses a C of 2^31 elements or more: its printed offsets are 32-bit
    ints (the template's are size_t, and gemm() runs the template there)."""
    from kernels.nvidia.wgmma_tma import TmaGemmConfig
    from kernels.nvidia.wgmma_tma_ir import IrTmaGemm
    g = dispatch.compiled_gemm(TmaGemmConfig(dtype="bf16", store="direct"))
    assert isinstance(g, IrTmaGemm)
    a, b = T((300, 256), BF16), T((256, 301), BF16, stride=(304, 1))     # B rows padded
    out = T((300, 301), BF16, stride=(310, 1))
    (L,) = calls(fake, lambda: g(a, b, out))
    # M, N, K, ctas (3 x 2 tiles of 128x256), ldc
    assert L.kernel == g.kernel_name and tuple(L.args[-5:]) == (300, 301, 256, 6, 310)
    big_a, big_b = T((65536, 64), BF16), T((64, 32768), BF16)
    with pytest.raises(LaunchError, match="32-bit"):
        g(big_a, big_b)
    # gemm() runs such a C on the template (size_t offsets): no refusal, no overflow
    big_b = T((64, 32769), BF16, stride=(32776, 1))
    assert dispatch.choose_gemm(big_a, big_b).kernel.endswith("_ds")
    (L,) = calls(fake, lambda: dispatch.gemm(big_a, big_b))
    assert L.kernel.startswith("lg_wgmma_tma_") and L.kernel.endswith("_ds")


def test_padded_operands_are_kept_per_stream(fake, monkeypatch):
    """A GEMM whose B rows straddle 128-byte lines (the selection copies B alone onto lines):
    the padded buffer and the bound call on it are made once per stream, so later calls launch
    with the same B pointer (its tensor map cached) and never re-run the launch checks; A and
    out are the caller's; another stream gets its own buffer."""
    from types import SimpleNamespace
    a, b, c = T((4000, 1000), F16), T((1000, 3000), F16), T((4000, 3000), F16)
    first = calls(fake, lambda: dispatch.gemm(a, b, c))
    prepared = fake.prepared
    later = calls(fake, lambda: dispatch.gemm(a, b, c), 3)
    assert fake.prepared == prepared, "a cached call ran the launch checks again"
    (L,) = first
    assert L.kernel == "lg_irtma_f16_n_128x256x64_s3" and all(x == L for x in later)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda i=None: SimpleNamespace(cuda_stream=9))
    (L9,) = calls(fake, lambda: dispatch.gemm(a, b, c))
    assert L9.stream == ("stream", 9) and L9.args[1] != L.args[1], "one B buffer per stream"


def test_padded_call_host_work_is_one_view_and_one_copy(fake, monkeypatch):
    """Issue 20 (4000x3000x1000 f16 read 0.56x cuBLAS by wall: the padded call's host time,
    ~47 us on the H100 host, matched the kernels' ~48 us, so the GPU idled between calls): a
    cached padded call decides nothing again. It copies B once through the wide view made
    when the call was bound (no wide_copy_dtype, one view: of the caller's B), allocates
    nothing, prepares no launch, and reads the stream through stream_handle at most twice."""
    a, b, c = T((4000, 1000), F16), T((1000, 3000), F16), T((4000, 3000), F16)
    dispatch.gemm(a, b, c)
    counts = {"wide": 0, "view": 0, "stream": 0, "empty": 0}

    def counted(name, fn):
        def f(*args, **kw):
            counts[name] += 1
            return fn(*args, **kw)
        return f
    monkeypatch.setattr(wgmma_tma, "wide_copy_dtype", counted("wide", wgmma_tma.wide_copy_dtype))
    monkeypatch.setattr(fc.FakeCudaTensor, "view", counted("view", fc.FakeCudaTensor.view))
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *s, **kw: (
        counts.__setitem__("empty", counts["empty"] + (kw.get("device") is not None))
        or real_empty(*s, **kw)))
    import kernels.runtime.launch_cache as lc
    handle = lc.stream_handle
    monkeypatch.setattr(lc, "stream_handle", counted("stream", handle))
    monkeypatch.setattr(rc, "stream_handle", counted("stream", handle))
    copied = []
    monkeypatch.setattr(fc.FakeCudaTensor, "copy_",
                        lambda self, src: copied.append((self.data_ptr(), src.data_ptr())))
    prepared = fake.prepared
    (L,) = calls(fake, lambda: dispatch.gemm(a, b, c))
    assert fake.prepared == prepared
    assert counts == {"wide": 0, "view": 1, "stream": 2, "empty": 0}, counts
    assert len(copied) == 1 and copied[0][1] == b.data_ptr(), "B copied once, from b"
    assert copied[0][0] not in (a.data_ptr(), b.data_ptr(), c.data_ptr()), "into the buffer"


def test_stream_handle_uses_torch_raw_entry_when_present(monkeypatch):
    """stream_handle: torch's raw current-stream entry (no Stream object) when torch has one
    and RAW_STREAM allows it, with the device's index (the current device for none), else
    torch.cuda.current_stream(...).cuda_stream."""
    import kernels.runtime.launch_cache as lc
    from types import SimpleNamespace
    seen = []
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream",
                        lambda i: seen.append(i) or 1000 + i, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda d=None: SimpleNamespace(cuda_stream=55))
    monkeypatch.setattr(lc, "RAW_STREAM", True)
    assert lc.stream_handle(torch.device("cuda", 1)) == 1001
    assert lc.stream_handle(torch.device("cuda")) == 1003 and lc.stream_handle(2) == 1002
    assert seen == [1, 3, 2]
    monkeypatch.setattr(lc, "RAW_STREAM", False)
    assert lc.stream_handle(torch.device("cuda", 1)) == 55
    monkeypatch.delattr(torch._C, "_cuda_getCurrentRawStream", raising=False)
    monkeypatch.setattr(lc, "RAW_STREAM", True)
    assert lc.stream_handle(0) == 55


def test_fake_driver_drops_the_modules_of_every_kernel_part(monkeypatch):
    """Regression (H100 run of the merged main, 2026-11-24): the IR decodes hold their split,
    combine and fused kernels as parts; a module a real-GPU test compiled earlier in the same
    process survived the fake fixture's reset and reached the fake driver (AttributeError on
    a real CUfunction). Every CompiledKernel part is dropped now."""
    from types import SimpleNamespace
    from kernels.nvidia.builder import CompiledKernel

    part = CompiledKernel(SimpleNamespace(name="lg_part", arch="sm_90"), "", "auto")
    part._module = "a real module"
    holder = SimpleNamespace(forget_calls=lambda: None, _module="real", fused_kernel=part)
    monkeypatch.setitem(dispatch._SPLIT_DECODE, "regression-key", holder)
    fc.clear_caches()
    assert holder._module is None and part._module is None
