"""The GEMM's layout plan: every tile, thread-value and LDS layout as a layoutalg object.

``C[M,N] = A[M,K] @ B[K,N]``.  Both operands are handled as ``(mn, k)`` tiles (B through its
transpose view ``B^T[n][k]``), so one code path serves A and B and every NN/NT/TN/TT case:

* ``glob``  - ``(mn, k) -> element offset`` in global memory (row- or column-major via strides);
* ``copy``  - the global->LDS copy TV layout ``(tid, value) -> mn + BMN*k`` (CuTe convention,
  column-major tile index), split into the coordinate layouts ``copy_mn`` / ``copy_k``;
* ``smem``  - the LDS tile ``((mn, k), stage) -> element offset``: k-contiguous rows (an MFMA lane
  reads consecutive k), ``cfg.stages`` stages (2: double buffer), XOR-swizzled by the swizzle the verifier
  suggests for this tile's writes and MFMA reads together;
* ``frag_mn`` / ``frag_k`` - the MFMA operand TV layouts ``(tid, value) -> coordinate``: the
  instruction's own lane layout (``spec.tv_layout``) composed with a k-permutation that lets one
  16-byte LDS read feed ``kpack`` consecutive MFMAs (the reduction order over k is free as long as
  A and B use the same permutation; the gate proves they do, lane by lane).

The accumulator layouts ``acc_m`` / ``acc_n`` come from ``spec.tv_layout("C")``.  Nothing here
emits code; :mod:`kernels.gemm` evaluates these layouts on index symbols.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Tuple

import numpy as np

from layoutalg import Layout, ComposedLayout, Swizzle, composition, make_layout

from ..errors import KernelError
from ..ir.dtypes import ELEM_TYPES, FP8_ARCH_NOTE, is_ocp_fp8, lookup_dtype

__all__ = ["GemmConfig", "OperandPlan", "GemmPlan", "plan_gemm", "split_tv", "ConfigError",
           "DTYPE_BYTES", "operand_plan", "SCHEDULES"]

SCHEDULES = ("basic", "pipelined", "interleaved")
DTYPE_BYTES = {name: t.bytes for name, t in ELEM_TYPES.items()}


class ConfigError(KernelError):
    """Kernel options that cannot build a kernel (a bad value, or a divisibility that fails)."""

    exit_code = 2


def norm_dtype(d: str, what: str = "dtype") -> str:
    t = lookup_dtype(d)
    if t is not None:
        return t.name
    if is_ocp_fp8(d):
        raise ConfigError(f"{what} {d!r} is an OCP FP8 format; gfx942's MFMAs read the FNUZ "
                          "formats: use fp8 (e4m3fnuz) or bf8 (e5m2fnuz)")
    raise ConfigError(f"unknown {what} {d!r}; use one of {', '.join(ELEM_TYPES)}")


def _mfma_dtypes(arch: str) -> Tuple[str, ...]:
    """mfma_specs operand types with a dense MFMA on ``arch`` (empty if the arch is unknown)."""
    import mfma_specs
    try:
        names = mfma_specs.instructions(arch)
    except Exception:      # unknown arch: the instruction lookup says so later
        return ()
    out = set()
    for n in names:
        s = mfma_specs.lookup(arch, n) if isinstance(n, str) else n
        if getattr(s, "kind", "mfma") == "mfma":
            out.add(s.a_type)
    return tuple(sorted(out))


_SCALE_MODES = {None: None, True: "tensor", False: "none", "tensor": "tensor",
                "rowcol": "rowcol", "none": "none"}


@dataclass(frozen=True)
class GemmConfig:
    m: int
    n: int
    k: int
    dtype: str = "f16"             # A and B element type: f16 | bf16 | fp8 | bf8 (FNUZ)
    out_dtype: Optional[str] = None  # C element type: f16 | bf16 | f32 (default: dtype, or
                                   # bf16 for an 8-bit input)
    a_major: str = "row"           # A[M,K]: "row" (k contiguous) or "col" (m contiguous)
    b_major: str = "row"           # B[K,N]: "row" (n contiguous) or "col" (k contiguous)
    c_major: str = "row"
    block_m: int = 128
    block_n: int = 128
    block_k: int = 32
    waves_m: int = 2
    waves_n: int = 2
    mfma: Optional[str] = None     # "32x32x8" | "16x16x16" | full name | None (choose_mfma)
    vec: Optional[int] = None      # global vector width in elements (None: widest that fits)
    arch: str = "gfx942"
    stages: int = 2                # LDS buffers: 2 (double buffer, one barrier per k-tile) or
                                   # 1 (half the LDS, two barriers per k-tile)
    explicit_waits: bool = True    # one s_waitcnt vmcnt(0) before the LDS stores and one
                                   # lgkmcnt(0) per k-group of operand reads (instead of the
                                   # compiler's wait before each consumer)
    read_ahead: int = 0            # LDS operand reads issued this many k-groups ahead of
                                   # their MFMAs (0: each group's reads right before its MFMAs)
    scales: Any = None             # "tensor": C = scale_a[0] * scale_b[0] * (A @ B);
                                   # "rowcol": C[i][j] = scale_a[i] * scale_b[j] * (A @ B)[i][j]
                                   # (scale_a of M, scale_b of N floats); "none". Two extra
                                   # float* parameters unless "none". True = "tensor", False =
                                   # "none", None = the dtype's default (tensor for fp8/bf8)
    b_layout: str = "plain"        # "plain" (B[K,N] as b_major says, through LDS) or
                                   # "preshuffled" (kernels.amd.preshuffle, straight to
                                   # registers: build with kernels.amd.gemm_preshuffle)
    schedule: str = "basic"        # k-tile schedule: "basic" (reads, wait, MFMAs per k-group)
                                   # or "pipelined" (kernels.amd.gemm_schedule: every read of
                                   # the k-tile first, partial lgkmcnt waits, s_setprio, pinned
                                   # interleave) or "interleaved" (kernels.amd.gemm_interleave:
                                   # one LDS stage, one MFMA k-step per operand read, the next
                                   # step's reads, the LDS stores and the global prefetch issued
                                   # between the MFMAs; predicated loads as buffer loads)
    waves_per_eu: int = 0          # > 0: amdgpu_waves_per_eu(n) on the kernel, a register
                                   # budget of 512 / n per lane (2: 256, two waves per SIMD);
                                   # 0: no hint (the compiler's own choice)
    swap_ab: bool = False          # True: the MFMAs take B as srcA and A as srcB, computing
                                   # each C tile transposed, so a lane's accumulator values lie
                                   # along N (wide row-major C stores); square MFMAs only
    selection: Optional[str] = field(default=None, compare=False)  # why select_gemm chose
                                   # this config (None: the user's own); not in the source

    def normalized(self) -> "GemmConfig":
        dt = norm_dtype(self.dtype)
        et = ELEM_TYPES[dt]
        scales = _SCALE_MODES.get(self.scales if isinstance(self.scales, (bool, type(None)))
                                  else str(self.scales).lower(), "bad")
        if scales == "bad":
            raise ConfigError(f"scales must be 'tensor' (scale_a[0], scale_b[0]), 'rowcol' "
                              f"(scale_a[M], scale_b[N]), 'none', True (= tensor), False (= none) "
                              f"or None (the dtype's default), got {self.scales!r}")
        out = self.out_dtype or ("bf16" if et.operand_only else dt)
        c = replace(self, dtype=dt, out_dtype=norm_dtype(out, "out dtype"),
                    scales=scales or ("tensor" if et.scaled else "none"))
        if c.dtype not in ("f16", "bf16", "fp8", "bf8"):
            raise ConfigError(f"input dtype {c.dtype} is not supported (f16, bf16, fp8 or bf8)")
        if ELEM_TYPES[c.out_dtype].operand_only:
            raise ConfigError(f"out dtype {c.out_dtype} is an MFMA input type only; use f16, "
                              "bf16 or f32 for C")
        have = _mfma_dtypes(c.arch)
        if have and et.spec not in have:
            raise ConfigError(f"{c.arch} has no {et.label} MFMA; {FP8_ARCH_NOTE}"
                              if et.operand_only else f"{c.arch} has no {et.label} MFMA")
        for name in ("a_major", "b_major", "c_major"):
            if getattr(c, name) not in ("row", "col"):
                raise ConfigError(f"{name} must be 'row' or 'col', got {getattr(c, name)!r}")
        if c.b_layout not in ("plain", "preshuffled"):
            raise ConfigError(f"b_layout must be 'plain' or 'preshuffled', got {c.b_layout!r}")
        if c.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {', '.join(SCHEDULES)}, got "
                              f"{c.schedule!r}")
        if c.schedule == "pipelined" and c.read_ahead:
            raise ConfigError("read_ahead applies to the basic schedule; the pipelined one "
                              "issues every operand read of the k-tile before its MFMAs")
        if c.stages not in (1, 2):
            raise ConfigError(f"stages must be 1 or 2, got {c.stages!r}")
        if c.schedule == "interleaved" and c.stages != 1:
            raise ConfigError(f"the interleaved schedule uses one LDS stage (its stores wait "
                              f"for a barrier inside the MFMA run), got stages={c.stages}")
        if type(c.swap_ab) is not bool:
            raise ConfigError(f"swap_ab must be True or False, got {c.swap_ab!r}")
        if type(c.waves_per_eu) is not int or c.waves_per_eu not in range(0, 9):
            raise ConfigError(f"waves_per_eu must be 0 (no hint) .. 8, got {c.waves_per_eu!r}")
        for name in ("m", "n", "k", "block_m", "block_n", "block_k", "waves_m", "waves_n"):
            v = getattr(c, name)
            if type(v) is not int or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        return c

    @property
    def threads(self) -> int:
        return 64 * self.waves_m * self.waves_n

    @property
    def layout_code(self) -> str:
        """BLAS-style: N = row-major (as stored, no transpose) , T = column-major."""
        return ("N" if self.a_major == "row" else "T") + ("N" if self.b_major == "row" else "T")


def split_tv(tv: Layout, rows: int) -> Tuple[Layout, Layout]:
    """Split a layout into column-major tile index ``row + rows*col`` into ``(row, col)`` layouts.

    Each flat mode's stride ``d`` becomes ``(d % rows, d // rows)``.  Proved exact by
    enumeration: ``row(x) + rows*col(x) == tv(x)`` and ``0 <= row(x) < rows`` for every x.
    """
    fs, fd = tv.flat()
    rs = tuple(d % rows for d in fd)
    cs = tuple(d // rows for d in fd)
    r_l = Layout(unflatten(tv.shape, fs), unflatten(tv.shape, rs))
    c_l = Layout(unflatten(tv.shape, fs), unflatten(tv.shape, cs))
    v, rv, cv = tv.values(), r_l.values(), c_l.values()
    if not (np.array_equal(rv + rows * cv, v) and rv.min() >= 0 and rv.max() < rows):
        raise KernelError(f"split_tv: {tv} does not split into (row, col) coordinates of a "
                          f"{rows}-row tile mode by mode")
    return r_l, c_l


def unflatten(profile: Any, flat: tuple) -> Any:
    it = iter(flat)

    def build(p: Any) -> Any:
        if isinstance(p, tuple):
            return tuple(build(x) for x in p)
        return next(it)
    return build(profile)


def _join(a: Layout, b: Layout) -> Layout:
    """Same-shaped layouts with strides added mode by mode (their sum as functions)."""
    assert a.shape == b.shape
    fa, fb = a.flat()[1], b.flat()[1]
    return Layout(a.shape, unflatten(a.shape, tuple(x + y for x, y in zip(fa, fb))))


@dataclass
class OperandPlan:
    """One MFMA operand (A or B) as an ``(mn, k)`` tile."""

    name: str                      # "A" | "B"
    extent: Tuple[int, int]        # (MN, K) of the whole operand
    tile: Tuple[int, int]          # (BMN, BK)
    k_contig: bool                 # global memory is contiguous along k
    glob: Layout                   # (mn, k) -> global element offset
    vec: int                       # global vector width (elements)
    vk: int                        # k-extent of a thread's copy block (LDS write vector)
    vmn: int                       # mn-extent of a thread's copy block
    copy: Layout                   # (tid, v) -> mn + BMN*k
    copy_mn: Layout
    copy_k: Layout
    smem_inner: Layout             # ((mn, k), stage) -> offset before the swizzle
    swizzle: Swizzle = field(default_factory=lambda: Swizzle(0, 0, 0))
    frag_mn: Optional[Layout] = None  # (tid, v) -> mn within the block tile
    frag_k: Optional[Layout] = None   # (tid, v) -> k within the block tile
    lanes_mn: Optional[int] = None    # copy threads along mn before k (mn-contiguous operands)
    swizzle_search: Any = None        # the SwizzleSuggestion that chose ``swizzle``

    @property
    def smem(self) -> ComposedLayout:
        return ComposedLayout(self.swizzle, 0, self.smem_inner)

    @property
    def stage_elems(self) -> int:
        return self.tile[0] * self.tile[1]

    @property
    def copy_elems(self) -> int:
        return self.copy[1].size()


@dataclass
class GemmPlan:
    cfg: GemmConfig
    spec: Any
    a: OperandPlan
    b: OperandPlan
    acc_m: Layout                  # (tid, v) -> m within the block tile
    acc_n: Layout
    items: int                     # MFMA operand elements per lane
    kpack: int                     # MFMAs fed by one LDS read along k
    kgroups: int                   # BK / (IK * kpack)
    reps_m: int                    # MFMA tiles per wave along m
    reps_n: int
    c_glob: Layout                 # (m, n) -> global element offset of C
    grid: Tuple[int, int, int]
    notes: Tuple[str, ...] = ()

    @property
    def k_tiles(self) -> int:
        return -(-self.cfg.k // self.cfg.block_k)

    def describe(self) -> Dict[str, str]:
        """Every layout of the plan, printed (for the report and the kernel's header)."""
        out = {}
        for op in (self.a, self.b):
            out[f"{op.name}.glob"] = str(op.glob)
            out[f"{op.name}.copy"] = str(op.copy)
            out[f"{op.name}.smem"] = str(op.smem)
            out[f"{op.name}.frag_mn"] = str(op.frag_mn)
            out[f"{op.name}.frag_k"] = str(op.frag_k)
        out["C.acc_m"] = str(self.acc_m)
        out["C.acc_n"] = str(self.acc_n)
        out["C.glob"] = str(self.c_glob)
        return out


# ---------------------------------------------------------------------------- construction

def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def _vector_width(cfg: GemmConfig, name: str, contig_extent: int, ld: int, elem_bytes: int,
                  contig_dim: str) -> int:
    """Widest power-of-two vector (<= 16 bytes) that keeps every vector aligned and whole."""
    best = 16 // elem_bytes
    if cfg.vec is not None:
        v = cfg.vec
        _need(v in (1, 2, 4, 8, 16) and v * elem_bytes <= 16,
              f"--vec {v}: must be 1, 2, 4, 8 or 16 elements and at most 16 bytes "
              f"({16 // elem_bytes} elements of {elem_bytes} byte(s))")
        _need(contig_extent % v == 0 and ld % v == 0,
              f"{name}: {v}-element ({v * elem_bytes * 8}-bit) global vectors need the "
              f"contiguous extent {contig_dim}={contig_extent} and the leading dimension {ld} "
              f"to be multiples of {v}; pad {contig_dim} to {-(-contig_extent // v) * v} or use "
              f"a smaller --vec")
        return v
    v = best
    while v > 1 and (contig_extent % v or ld % v):
        v //= 2
    return v


def _rows_tiling_vector(vec: int, rows: int, bk: int, threads: int, min_vk: int) -> int:
    """The widest vector, at most ``vec``, whose copy rows tile a k-contiguous ``rows x bk``
    tile: ``threads / (bk / vk)`` threads per k-row set must divide ``rows``.  A tile whose
    rows are not a power of two (224 = 7 x 32, chosen against CU quantisation) needs narrower
    vectors (more threads along k) than a 128-row one; unchanged where ``vec`` already tiles."""
    v = vec
    while v > 1:
        vk = max(v, min_vk)
        tk = bk // vk if bk % vk == 0 else 0
        if tk and threads % tk == 0 and rows % (threads // tk) == 0:
            return v
        v //= 2
    return vec     # nothing narrower tiles either: keep the widest, _operand says why


def _operand(cfg: GemmConfig, name: str, lanes_mn: Optional[int] = None) -> OperandPlan:
    """Operand plan; ``lanes_mn`` (mn-contiguous operands only) is how many threads run along
    the contiguous mn dimension before the next k rows (default: the whole tile width)."""
    eb = DTYPE_BYTES[cfg.dtype]
    T = cfg.threads
    if name == "A":
        MN, BMN, k_contig = cfg.m, cfg.block_m, cfg.a_major == "row"
        ld = cfg.k if k_contig else cfg.m
        glob = Layout((MN, cfg.k), (ld, 1) if k_contig else (1, ld))
        dims = ("K", "M")
    else:
        MN, BMN, k_contig = cfg.n, cfg.block_n, cfg.b_major == "col"
        ld = cfg.k if k_contig else cfg.n
        glob = Layout((MN, cfg.k), (ld, 1) if k_contig else (1, ld))
        dims = ("K", "N")
    BK = cfg.block_k
    contig_extent = cfg.k if k_contig else MN
    vec = _vector_width(cfg, name, contig_extent, ld, eb, dims[0] if k_contig else dims[1])
    E = BMN * BK
    min_k = max(1, 4 // eb)      # elements in the narrowest LDS write with a phase model (b32)
    _need(E % T == 0, f"{name} tile {BMN}x{BK} ({E} elements) does not split over {T} threads")
    per_thread = E // T
    if k_contig:
        if cfg.vec is None:
            vec = _rows_tiling_vector(vec, BMN, BK, T, min(min_k, per_thread))
        # a thread owns vk consecutive k: one LDS write of at least 32 bits (2 or 4 elements)
        # even when the global loads are narrower (odd leading dimension: scalar loads)
        vk, vmn = max(vec, min(min_k, per_thread)), 1
        _need(BK % vk == 0, f"block_k={BK} must be a multiple of the {vec}-element vector")
        tk = BK // vk
        _need(T % tk == 0 and BMN % (T // tk) == 0,
              f"{name}: {T} threads in rows of {tk} do not tile {BMN} rows of the {BMN}x{BK} tile")
        tmn = T // tk
        reps = BMN // tmn
        copy = Layout(((tk, tmn), (vk, reps)), ((vk * BMN, 1), (BMN, tmn)))
    else:
        # keep LDS writes at least 32-bit: a thread needs >= min_k k values per vector of mn
        vmn = vec
        while vmn > 1 and per_thread < min_k * vmn:
            vmn //= 2
        vec = vmn
        _need(BMN % vmn == 0, f"block {BMN} must be a multiple of the {vec}-element vector")
        # k-extent of a thread's block: the LDS write vector (up to 16 bytes)
        vk = 1
        while vk * 2 * vmn <= per_thread and vk * 2 * eb <= 16 and BK % (vk * 2) == 0:
            vk *= 2
        tmn = BMN // vmn
        _need(T % tmn == 0, f"{name}: {T} threads do not split into rows of {tmn} vectors "
                            f"along the {BMN}-wide contiguous dimension")
        tk = T // tmn
        _need((BK // vk) % tk == 0, f"{name}: {tk} thread rows of {vk} k each do not tile "
                                    f"block_k={BK}")
        reps = (BK // vk) // tk
        a = tmn if lanes_mn is None else lanes_mn
        _need(tmn % a == 0, f"{name}: lanes_mn={a} must divide {tmn}")
        thr = Layout((a, tk, tmn // a), (vmn, vk * BMN, a * vmn)) if a < tmn else \
            Layout((tmn, tk), (vmn, vk * BMN))
        copy = make_layout(thr, Layout((vmn, vk, reps), (1, BMN, tk * vk * BMN)))
    copy_mn, copy_k = split_tv(copy, BMN)
    smem_inner = Layout(((BMN, BK), cfg.stages), ((BK, 1), BMN * BK))
    return OperandPlan(name, (MN, cfg.k), (BMN, BK), k_contig, glob, vec, vk, vmn, copy,
                       copy_mn, copy_k, smem_inner, lanes_mn=None if k_contig else a)


def operand_plan(plan: "GemmPlan", name: str, lanes_mn: Optional[int]) -> OperandPlan:
    """A copy of ``plan``'s operand ``name`` with another copy-thread arrangement."""
    old = plan.a if name == "A" else plan.b
    new = _operand(plan.cfg, name, lanes_mn)
    new.frag_mn, new.frag_k = old.frag_mn, old.frag_k
    return new


def _coords_of(spec: Any, operand: str) -> Tuple[Layout, Layout]:
    """``(mn, k)`` coordinate layouts (lane, item) of an MFMA operand, in (mn, k) orientation.

    A's tile is ``A[i][k]`` (rows M); B's is ``B[k][j]`` (rows K): B is transposed here.
    """
    tv = spec.tv_layout(operand)
    if operand == "A":
        return split_tv(tv, spec.m)
    k_l, n_l = split_tv(tv, spec.k)
    return n_l, k_l


def _frag(spec: Any, op: OperandPlan, cfg: GemmConfig, items: int, kpack: int, kgroups: int,
          reps: int, wave_tile: int, mn_is_m: bool) -> Tuple[Layout, Layout]:
    IK = spec.k
    mn_l, kslot_l = _coords_of(spec, op.name)
    # k-permutation: slot q = e + items*kq of step s reads k = e + items*s + items*kpack*kq
    kperm = Layout((items, IK // items), (1, items * kpack))
    k_l = composition(kperm, kslot_l)
    lane_shape = mn_l[0].shape
    item_shape = mn_l[1].shape
    waves = (cfg.waves_m, cfg.waves_n)
    wave_mn = (wave_tile, 0) if mn_is_m else (0, wave_tile)
    rows = spec.m if op.name == "A" else spec.n
    frag_mn = make_layout(
        Layout((lane_shape, waves), (mn_l[0].stride, wave_mn)),
        Layout((item_shape, kpack, reps, kgroups),
               (mn_l[1].stride, 0, rows, 0)))
    frag_k = make_layout(
        Layout((lane_shape, waves), (k_l[0].stride, (0, 0))),
        Layout((item_shape, kpack, reps, kgroups),
               (k_l[1].stride, items, 0, IK * kpack)))
    return frag_mn, frag_k


def _lookup(arch: str, name: str) -> Any:
    """``mfma_specs.lookup``; until it is exported, the CDNA instruction table directly."""
    import mfma_specs
    if hasattr(mfma_specs, "lookup"):
        return mfma_specs.lookup(arch, name)
    from mfma_specs.arch import target
    from mfma_specs.cdna import INSTRUCTIONS
    table = INSTRUCTIONS.get(target(arch).family, {})
    if name not in table:
        raise ConfigError(f"no MFMA {name!r} on {arch}")
    return table[name]


def _choose(arch: str, wtm: int, wtn: int, bk: int, dtype: str, nonkdim: Optional[int]) -> Any:
    """``mfma_specs.choose_mfma``; until it is exported, Triton's rule for f16/bf16
    (min(M, N) >= 32 -> 32x32x8, else 16x16x16)."""
    import mfma_specs
    if hasattr(mfma_specs, "choose_mfma"):
        # Triton's rule is stated for power-of-two dot shapes; round each extent down to one
        # (the rule only compares min(M, N) with 16 and 32 and checks K % instruction K)
        p2 = [1 << (max(int(v), 1).bit_length() - 1) for v in (wtm, wtn, bk)]
        st = ELEM_TYPES[dtype].spec
        ch = mfma_specs.choose_mfma(arch, p2[0], p2[1], p2[2], st, st, "f32", nonkdim=nonkdim)
        if getattr(ch, "is_fma", False):
            raise ConfigError(f"no MFMA for a {wtm}x{wtn}x{bk} wave tile ({ch.reason}); this "
                              "builder emits MFMA kernels only: use block_k a multiple of the "
                              "instruction K and wave tiles of at least 16x16")
        if bk % ch.instruction.k:
            raise ConfigError(f"block_k={bk} must be a multiple of the MFMA K={ch.instruction.k}")
        return ch.instruction
    dim = nonkdim or (32 if min(wtm, wtn) >= 32 else 16)
    shape = {32: "32x32x8", 16: "16x16x16"}.get(dim)
    if shape is None:
        raise ConfigError(f"no {dim}x{dim} f16/bf16 MFMA")
    return _lookup(arch, f"v_mfma_f32_{shape}_{dtype}")


def _resolve_mfma(cfg: GemmConfig, wtm: int, wtn: int) -> Any:
    if cfg.mfma and str(cfg.mfma).startswith("v_"):
        return _lookup(cfg.arch, cfg.mfma)
    nonkdim = None
    if cfg.mfma:
        try:
            want = tuple(int(x) for x in str(cfg.mfma).split("x"))
            nonkdim = want[0]
        except ValueError:
            raise ConfigError(f"--mfma {cfg.mfma!r}: use 32x32x8, 16x16x16 or a full "
                              "instruction name") from None
    spec = _choose(cfg.arch, wtm, wtn, cfg.block_k, cfg.dtype, nonkdim)
    if cfg.mfma:
        got = (spec.m, spec.n, spec.k)
        _need(got == want, f"--mfma {cfg.mfma}: choose_mfma picked {spec.name} {got} for a "
                           f"{wtm}x{wtn}x{cfg.block_k} wave tile")
    return spec


def plan_gemm(cfg: GemmConfig, spec: Any = None) -> GemmPlan:
    """All layouts of the GEMM for ``cfg``; raises :class:`ConfigError` on a bad combination."""
    cfg = cfg.normalized()
    _need(cfg.block_m % cfg.waves_m == 0 and cfg.block_n % cfg.waves_n == 0,
          f"block {cfg.block_m}x{cfg.block_n} does not split over {cfg.waves_m}x{cfg.waves_n} "
          "waves")
    _need(cfg.threads <= 1024, f"{cfg.threads} threads per block exceeds 1024")
    wtm, wtn = cfg.block_m // cfg.waves_m, cfg.block_n // cfg.waves_n
    if spec is None:
        spec = _resolve_mfma(cfg, wtm, wtn)
    _need(getattr(spec, "blocks", 1) == 1, f"{spec.name}: multi-block MFMAs are not supported")
    IM, IN, IK = spec.m, spec.n, spec.k
    _need(wtm % IM == 0 and wtn % IN == 0,
          f"wave tile {wtm}x{wtn} is not a multiple of the {IM}x{IN} MFMA tile of {spec.name}")
    items = spec.tv_layout("A")[1].size()
    eb = DTYPE_BYTES[cfg.dtype]
    kpack = 1
    # interleaved: one LDS read per MFMA k-step, so the next step's reads can be issued
    # between this step's MFMAs into registers of their own (kernels.amd.gemm_interleave)
    while (cfg.schedule != "interleaved" and kpack * 2 * items * eb <= 16
           and cfg.block_k % (IK * kpack * 2) == 0):
        kpack *= 2
    _need(cfg.block_k % (IK * kpack) == 0,
          f"block_k={cfg.block_k} must be a multiple of the MFMA K={IK}")
    kgroups = cfg.block_k // (IK * kpack)
    _need(cfg.schedule != "interleaved" or kgroups >= 2,
          f"the interleaved schedule needs block_k >= 2 x the MFMA K ({2 * IK}): the reads of "
          f"one k-step are issued behind the MFMAs of another, got block_k={cfg.block_k}")
    reps_m, reps_n = wtm // IM, wtn // IN
    a = _operand(cfg, "A")
    b = _operand(cfg, "B")
    a.frag_mn, a.frag_k = _frag(spec, a, cfg, items, kpack, kgroups, reps_m, wtm, True)
    b.frag_mn, b.frag_k = _frag(spec, b, cfg, items, kpack, kgroups, reps_n, wtn, False)
    # accumulator: C[i][j] tile, rows M (swap_ab: the instruction's tile is C^T, its i along N)
    cm, cn = split_tv(spec.tv_layout("C"), IM)
    if cfg.swap_ab:
        _need(IM == IN, f"swap_ab needs a square MFMA tile, {spec.name} is {IM}x{IN}")
        cm, cn = cn, cm
    waves = (cfg.waves_m, cfg.waves_n)
    c_items = cm[1].shape
    acc_m = make_layout(Layout((cm[0].shape, waves), (cm[0].stride, (wtm, 0))),
                        Layout((c_items, reps_m, reps_n), (cm[1].stride, IM, 0)))
    acc_n = make_layout(Layout((cn[0].shape, waves), (cn[0].stride, (0, wtn))),
                        Layout((c_items, reps_m, reps_n), (cn[1].stride, 0, IN)))
    ldc = cfg.n if cfg.c_major == "row" else cfg.m
    c_glob = Layout((cfg.m, cfg.n), (ldc, 1) if cfg.c_major == "row" else (1, ldc))
    grid = (-(-cfg.m // cfg.block_m), -(-cfg.n // cfg.block_n), 1)
    notes = []
    for op in (a, b):
        if op.vec * eb < 16:
            notes.append(f"{op.name}: {op.vec * eb * 8}-bit global loads (contiguous extent "
                         f"or leading dimension not a multiple of {16 // eb}, or too few "
                         "elements per thread for a transposed LDS write)")
    return GemmPlan(cfg, spec, a, b, acc_m, acc_n, items, kpack, kgroups, reps_m, reps_n,
                    c_glob, grid, tuple(notes))
