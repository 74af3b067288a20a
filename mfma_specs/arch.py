"""Architecture model: gfx targets, LDS banks and access phases, registers and occupancy.

Every number here is a public fact and says where it comes from (``Target.sources``, the LDS
phase tables' ``source`` strings).  Facts that were *inferred* rather than documented or
measured are marked so: :func:`lds_phase_entries` reports ``inferred=True`` and the
:class:`~layoutalg.verify.model.LdsModel` built from such an entry has a ``source`` that starts
with ``"INFERRED"``.  Anything we do not know raises :class:`NotModelledError` instead of
guessing.

Main entry points
-----------------
``targets()`` / ``target(arch)``            the known gfx targets and their :class:`Target`.
``lds_model(arch, instruction)``             the phase/bank model of one ds_read/ds_write.
``waves_per_simd(arch, vgprs, ...)``         occupancy from registers, LDS and work-group size.
``occupancy(arch, vgpr_unified=..., ...)``  the same with the per-resource limits spelled out.

Sources (public): LLVM ``AMDGPUBaseInfo.cpp`` (VGPR totals, allocation granules, max waves),
LLVM ``AMDGPUUsage.rst`` (LDS allocation granularity), nod-ai/amd-shark-ai
``docs/empirical-lds`` (measured LDS bank counts and ds_read phase groups for MI300X/gfx942,
MI350X/gfx950, W7900/gfx1100, RX 9070 XT/gfx1201), ROCm CK-Tile LDS bank-conflict doc
(ds_write_b128 phases), AMD CDNA3/CDNA4 product facts (LDS sizes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from layoutalg.verify.model import LdsModel

from .errors import NotModelledError, ResourceError, UnknownTargetError, close_matches

__all__ = ["Target", "UnknownTargetError", "target", "targets", "lds_model", "lds_instructions",
           "lds_phase_entries", "LdsPhaseEntry", "waves_per_simd", "occupancy",
           "families"]


@dataclass(frozen=True)
class Target:
    """One gfx target.

    ``lds_bytes`` is the LDS a work-group may allocate (64 KiB on CDNA1-3 and RDNA, 160 KiB on
    gfx950).  ``lds_per_cu_bytes`` is what the occupancy calculation shares between
    work-groups (on RDNA in WGP mode the two CUs of a WGP pool their LDS: 128 KiB).
    Register fields follow LLVM's ``AMDGPUBaseInfo``: ``vgpr_file`` registers per SIMD lane
    (for the default wave size), allocated in ``vgpr_granule`` steps; ``unified_vgprs`` means
    ArchVGPRs and AccVGPRs share one file (gfx90a+), else AccVGPRs are a separate file
    (gfx908) or do not exist (RDNA).
    """

    name: str
    family: str                  # "CDNA1".."CDNA4", "RDNA3", "RDNA4", "GFX1250"
    wave_size: int               # default wave size
    lds_bytes: int               # max LDS per work-group
    lds_banks: int
    lds_bank_bytes: int
    wave_sizes: Tuple[int, ...] = (64,)
    matrix_isa: str = "mfma"     # "mfma" (CDNA) or "wmma" (RDNA, gfx1250)
    matrix_version: int = 0      # Triton's numbering: MFMA v1..v4, WMMA v1..v3
    lds_per_cu_bytes: int = 65536
    lds_alloc_granule: int = 512
    vgpr_file: Optional[int] = None        # per SIMD lane, default wave size; None: not modelled
    arch_vgprs_max: int = 256
    agprs_max: int = 0
    unified_vgprs: bool = False
    vgpr_granule: Optional[int] = None
    max_waves_per_simd: Optional[int] = None
    simds_per_cu: int = 4
    marketing: str = ""
    sources: Tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_cdna(self) -> bool:
        return self.family.startswith("CDNA")


_LLVM_REGS = "LLVM AMDGPUBaseInfo.cpp (getTotalNumVGPRs, getVGPRAllocGranule, getMaxWavesPerEU)"
_LLVM_LDS = "LLVM AMDGPUUsage.rst (COMPUTE_PGM_RSRC2.LDS_SIZE granularity)"
_NOD_LDS = "nod-ai/amd-shark-ai docs/empirical-lds (measured bank count)"


def _cdna(name: str, family: str, version: int, marketing: str, **kw) -> Target:
    base = dict(wave_size=64, wave_sizes=(64,), matrix_isa="mfma", matrix_version=version,
                lds_bytes=65536, lds_per_cu_bytes=65536, lds_banks=32, lds_bank_bytes=4,
                lds_alloc_granule=512, vgpr_file=512, arch_vgprs_max=256, agprs_max=256,
                unified_vgprs=True, vgpr_granule=8, max_waves_per_simd=8,
                sources=(_LLVM_REGS, _LLVM_LDS, "AMD CDNA ISA guides (64 KiB LDS, 32 banks)"))
    base.update(kw)
    return Target(name=name, family=family, marketing=marketing, **base)


def _rdna(name: str, family: str, version: int, marketing: str, vgprs_1_5x: bool,
          **kw) -> Target:
    base = dict(wave_size=32, wave_sizes=(32, 64), matrix_isa="wmma", matrix_version=version,
                lds_bytes=65536, lds_per_cu_bytes=131072, lds_banks=32, lds_bank_bytes=4,
                lds_alloc_granule=1024, vgpr_file=1536 if vgprs_1_5x else 1024,
                arch_vgprs_max=256, agprs_max=0, unified_vgprs=False,
                vgpr_granule=24 if vgprs_1_5x else 16, max_waves_per_simd=16,
                sources=(_LLVM_REGS + "; which targets have Feature1_5xVGPRs is taken from "
                         "LLVM's processor definitions, not machine-checked here",
                         "LLVM PR #224852: GFX10.3-GFX12.0 allocate LDS in 1024-byte blocks",
                         "WGP mode: a WGP's 4 SIMDs share 128 KiB LDS, 64 KiB per work-group",
                         _NOD_LDS))
    base.update(kw)
    return Target(name=name, family=family, marketing=marketing, **base)


_TARGETS: Dict[str, Target] = {t.name: t for t in [
    _cdna("gfx908", "CDNA1", 1, "MI100", unified_vgprs=False, vgpr_file=256, vgpr_granule=4,
          max_waves_per_simd=10),
    _cdna("gfx90a", "CDNA2", 2, "MI200 (MI210/MI250/MI250X)"),
    _cdna("gfx940", "CDNA3", 3, "MI300 (early)"),
    _cdna("gfx941", "CDNA3", 3, "MI300 (early)"),
    _cdna("gfx942", "CDNA3", 3, "MI300X/MI300A/MI325X"),
    _cdna("gfx950", "CDNA4", 4, "MI350X/MI355X", lds_bytes=163840, lds_per_cu_bytes=163840,
          lds_banks=64, lds_alloc_granule=1280,
          sources=(_LLVM_REGS, _LLVM_LDS + ": GFX950 allocates 320-dword (1280-byte) blocks",
                   "AMD CDNA4: 160 KiB LDS per CU", _NOD_LDS + ": 64 banks on MI350X")),
    _rdna("gfx1100", "RDNA3", 1, "RX 7900 XTX / W7900", True),
    _rdna("gfx1101", "RDNA3", 1, "RX 7800 XT / 7700 XT", True),
    _rdna("gfx1102", "RDNA3", 1, "RX 7600", False),
    _rdna("gfx1103", "RDNA3", 1, "Radeon 780M (APU)", False),
    _rdna("gfx1150", "RDNA3", 1, "Radeon 890M (RDNA 3.5 APU)", False),
    _rdna("gfx1151", "RDNA3", 1, "Radeon 8060S (RDNA 3.5, Strix Halo)", True),
    _rdna("gfx1200", "RDNA4", 2, "RX 9060 XT", True),
    _rdna("gfx1201", "RDNA4", 2, "RX 9070 XT / 9070", True),
    Target(name="gfx1250", family="GFX1250", wave_size=32, wave_sizes=(32,),
           matrix_isa="wmma", matrix_version=3, lds_bytes=327680, lds_per_cu_bytes=327680,
           lds_banks=64, lds_bank_bytes=4, lds_alloc_granule=2048, vgpr_file=None,
           arch_vgprs_max=256, agprs_max=0, unified_vgprs=False, vgpr_granule=None,
           max_waves_per_simd=None, marketing="(gfx1250, announced)",
           sources=("LLVM FeatureAddressableLocalMemorySize327680 (320 KiB LDS)",
                    _LLVM_LDS + ": GFX125x allocates 512-dword (2048-byte) blocks",
                    "64 LDS banks: third-party tooling note, INFERRED")),
]}


def targets() -> Tuple[str, ...]:
    """Names of every known target, sorted."""
    return tuple(sorted(_TARGETS, key=lambda n: (len(n), n)))


def families() -> Dict[str, Tuple[str, ...]]:
    """Family name -> its target names."""
    out: Dict[str, List[str]] = {}
    for name in targets():
        out.setdefault(_TARGETS[name].family, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def target(arch: str) -> Target:
    """The :class:`Target` named ``arch`` (e.g. ``"gfx942"``); a clear error for unknown ones."""
    if isinstance(arch, Target):
        return arch
    key = str(arch).strip().lower() if isinstance(arch, str) else arch
    t = _TARGETS.get(key) if isinstance(key, str) else None
    if t is None:
        raise UnknownTargetError(f"unknown target {arch!r}{close_matches(arch, _TARGETS)}; "
                                 f"known targets: {', '.join(targets())}")
    return t


# --------------------------------------------------------------------------- LDS phases
@dataclass(frozen=True)
class LdsPhaseEntry:
    """The lanes served together by one LDS instruction, with provenance."""

    instruction: str
    phases: Tuple[Tuple[int, ...], ...]
    inferred: bool
    source: str


def _blocks(n: int, size: int) -> Tuple[Tuple[int, ...], ...]:
    return tuple(tuple(range(i, i + size)) for i in range(0, n, size))


def _quads(*starts: int) -> Tuple[int, ...]:
    """Lanes ``s..s+3`` for every start ``s`` (the measured b128 groups are unions of quads)."""
    return tuple(l for s in starts for l in range(s, s + 4))


def _plus(groups, off: int):
    return tuple(tuple(l + off for l in g) for g in groups)


_B128_32 = (_quads(0, 20), _quads(4, 16), _quads(8, 28), _quads(12, 24))

_SRC_CDNA3 = ("MI300X measurements (nod-ai amd-shark-ai docs/empirical-lds/cdna3info.md); "
              "ROCm CK-Tile LDS bank-conflict doc for ds_write_b128")
_SRC_CDNA4 = "MI350X measurements (nod-ai amd-shark-ai docs/empirical-lds/cdna4info.md)"
_SRC_RDNA3 = "W7900 measurements (nod-ai amd-shark-ai docs/empirical-lds/rdna3info.md)"
_SRC_RDNA4 = "RX 9070 XT measurements (nod-ai amd-shark-ai docs/empirical-lds/lds_summary.md)"


def _e(instr, phases, inferred, source):
    return instr, LdsPhaseEntry(instr, tuple(tuple(p) for p in phases), inferred, source)


_CDNA3_TABLE = dict([
    _e("ds_read_b32", _blocks(64, 32), False, _SRC_CDNA3),
    _e("ds_write_b32", _blocks(64, 32), False, "ROCm LDS docs: 32-bit accesses in half-waves"),
    _e("ds_read_b64", _blocks(64, 16), False, _SRC_CDNA3),
    _e("ds_write_b64", _blocks(64, 16), True, "by analogy with ds_read_b64 (not measured)"),
    _e("ds_read_b128", _B128_32 + _plus(_B128_32, 32), False, _SRC_CDNA3),
    _e("ds_write_b128", _blocks(64, 8), False, "ROCm CK-Tile LDS bank-conflict doc"),
])

# gfx950: 64 banks x 4 B serve 256 bytes per phase.  Reads are measured; writes are inferred
# by the same bytes-per-phase rule with contiguous lanes (as measured for CDNA3 writes).
_CDNA4_TABLE = dict([
    _e("ds_read_b32", _blocks(64, 64), False, _SRC_CDNA4),
    _e("ds_write_b32", _blocks(64, 64), True, "inferred: 256 B per phase, contiguous lanes"),
    _e("ds_read_b64", _blocks(64, 32), False, _SRC_CDNA4),
    _e("ds_write_b64", _blocks(64, 32), True, "inferred: 256 B per phase, contiguous lanes"),
    _e("ds_read_b128", (_quads(0, 12, 20, 24), _quads(32, 44, 52, 56),
                        _quads(4, 8, 16, 28), _quads(36, 40, 48, 60)), False, _SRC_CDNA4),
    _e("ds_write_b128", _blocks(64, 16), True, "inferred: 256 B per phase, contiguous lanes"),
])

_RDNA3_TABLE = dict([
    _e("ds_read_b32", _blocks(32, 32), False, _SRC_RDNA3),
    _e("ds_write_b32", _blocks(32, 32), True, "inferred: as ds_read_b32"),
    _e("ds_read_b64", _blocks(32, 16), False, _SRC_RDNA3),
    _e("ds_write_b64", _blocks(32, 16), True, "inferred: as ds_read_b64"),
    _e("ds_read_b128", _B128_32, False, _SRC_RDNA3),
    _e("ds_write_b128", _blocks(32, 8), True, "inferred: 128 B per phase, contiguous lanes"),
])

_RDNA4_TABLE = dict([
    _e("ds_read_b32", _blocks(32, 32), False, _SRC_RDNA4),
    _e("ds_write_b32", _blocks(32, 32), True, "inferred: as ds_read_b32"),
    _e("ds_read_b64", _blocks(32, 16), False, _SRC_RDNA4),
    _e("ds_write_b64", _blocks(32, 16), True, "inferred: as ds_read_b64"),
    _e("ds_read_b128", _blocks(32, 8), False, _SRC_RDNA4),
    _e("ds_write_b128", _blocks(32, 8), True, "inferred: as ds_read_b128"),
])


def _mark_inferred(table, why: str):
    return {k: LdsPhaseEntry(v.instruction, v.phases, True, f"{why}; {v.source}")
            for k, v in table.items()}


_PHASE_TABLES = {
    "CDNA1": _mark_inferred(_CDNA3_TABLE, "assumed equal to CDNA3 (not measured on gfx908)"),
    "CDNA2": _mark_inferred(_CDNA3_TABLE, "assumed equal to CDNA3 (not measured on gfx90a)"),
    "CDNA3": _CDNA3_TABLE,
    "CDNA4": _CDNA4_TABLE,
    "RDNA3": _RDNA3_TABLE,
    "RDNA4": _RDNA4_TABLE,
}
_ACCESS_BYTES = {"b32": 4, "b64": 8, "b128": 16}
# gfx11+ spell ds_read/ds_write as ds_load/ds_store.
_ALIASES = {"ds_load_": "ds_read_", "ds_store_": "ds_write_"}


def _canonical_lds(instruction: str) -> str:
    ins = str(instruction).strip().lower()
    for new, old in _ALIASES.items():
        if ins.startswith(new):
            return old + ins[len(new):]
    return ins


def _phase_table(arch: str):
    t = target(arch)
    table = _PHASE_TABLES.get(t.family)
    if table is None:
        raise NotModelledError(f"no LDS phase table for {t.name} ({t.family}): its phases have "
                               "not been published or measured; modelled families: "
                               f"{', '.join(_PHASE_TABLES)}")
    return t, table


def lds_instructions(arch: str) -> Tuple[str, ...]:
    """The LDS instructions :func:`lds_model` knows for ``arch``."""
    return tuple(sorted(_phase_table(arch)[1]))


def lds_phase_entries(arch: str) -> Tuple[LdsPhaseEntry, ...]:
    """Every phase-table entry of ``arch`` with its ``inferred`` flag and source."""
    _, table = _phase_table(arch)
    return tuple(table[k] for k in sorted(table))


def lds_model(arch: str, instruction: str) -> LdsModel:
    """The phase model of ``instruction`` (e.g. ``"ds_read_b128"``) on ``arch``.

    ``ds_load_*``/``ds_store_*`` (gfx11+ names) are accepted as aliases.  The model's
    ``source`` starts with ``"INFERRED"`` when the phase grouping was not measured.
    """
    t, table = _phase_table(arch)
    key = _canonical_lds(instruction)
    entry = table.get(key)
    if entry is None:
        raise UnknownTargetError(
            f"no LDS phase model for {instruction!r} on {t.name}"
            f"{close_matches(key, table)}; known: {', '.join(sorted(table))}")
    width = _ACCESS_BYTES[key.rsplit("_", 1)[1]]
    source = ("INFERRED: " if entry.inferred else "") + entry.source
    wave = sum(len(p) for p in entry.phases)   # 64 on CDNA, 32 (wave32) on RDNA
    return LdsModel(t.name, key, width, t.lds_banks, t.lds_bank_bytes, entry.phases, wave,
                    source)


# --------------------------------------------------------------------------- occupancy
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def _check_count(name: str, value, lo: int, hi: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResourceError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ResourceError(f"{name}={value} is out of range for {what}: valid {lo}..{hi}")
    return value


def _register_model(t: Target, wave_size: int):
    if t.vgpr_file is None or t.vgpr_granule is None or t.max_waves_per_simd is None:
        raise NotModelledError(f"the register/occupancy model of {t.name} ({t.family}) is not "
                               "public yet; modelled: "
                               + ", ".join(n for n in targets() if _TARGETS[n].vgpr_file))
    if wave_size not in t.wave_sizes:
        raise UnknownTargetError(f"{t.name} runs wave{'/wave'.join(map(str, t.wave_sizes))}, "
                                 f"not wave{wave_size}")
    # RDNA: the per-lane file and the granule halve in wave64 (LLVM getTotalNumVGPRs)
    scale = wave_size // t.wave_size
    return t.vgpr_file // scale, t.vgpr_granule // scale, t.max_waves_per_simd


def occupancy(arch: str, vgpr_unified: Optional[int] = None, sgpr: int = 0,
              lds_bytes: int = 0, block_threads: int = 0, *, vgprs: Optional[int] = None,
              agprs: int = 0, wave_size: Optional[int] = None) -> dict:
    """Waves per SIMD of a kernel and the limit each resource imposes.

    Give either ``vgpr_unified`` (the code object's ``.vgpr_count``: on gfx90a+ already
    ``align(arch_vgprs, 4) + agprs``) or ``vgprs`` (+ ``agprs``).  Rules (LLVM AMDGPUBaseInfo,
    MI300 occupancy notes):

    * registers: a wave allocates ``align(n, granule)`` of the SIMD lane's ``vgpr_file``
      registers; waves = ``min(max_waves, file // alloc)``.  gfx90a+: one 512-entry file
      shared by ArchVGPRs and AGPRs (``n = align(vgprs, 4) + agprs``), granule 8, at most 8
      waves.  gfx908: separate 256-entry files, ``n = max(vgprs, agprs)``, granule 4, 10 waves.
    * SGPRs (GFX9 only): <= 80 -> 10, <= 88 -> 9, <= 100 -> 8, else 7 waves.
    * LDS (needs ``block_threads``): ``lds_per_cu // align(lds_bytes, granule)`` work-groups
      fit; their ``ceil(block/wave)`` waves spread over the CU's SIMDs:
      ``ceil(wgs * waves_per_wg / simds)``.
    * a work-group needs ``ceil(waves_per_wg / simds)`` waves resident per SIMD; if the
      resources allow fewer, ``waves_per_simd`` is 0 with a ``reason``.

    Returns ``{"waves_per_simd", "limits", "vgpr_alloc", "limiter"}`` (or ``"reason"``).
    """
    t = target(arch)
    wave = t.wave_size if wave_size is None else wave_size
    total, granule, max_waves = _register_model(t, wave)
    if vgpr_unified is None:
        if vgprs is None:
            raise ResourceError("occupancy needs vgpr_unified= or vgprs=")
        _check_count("vgprs", vgprs, 0, t.arch_vgprs_max, f"{t.name} ArchVGPRs per wave")
        _check_count("agprs", agprs, 0, t.agprs_max, f"{t.name} AccVGPRs per wave")
        if t.unified_vgprs:
            n = _align(vgprs, 4) + agprs if agprs else vgprs
        else:
            n = max(vgprs, agprs)   # gfx908: two separate files; RDNA: agprs must be 0
    else:
        hi = total if t.unified_vgprs else t.arch_vgprs_max
        n = _check_count("vgpr_unified", vgpr_unified, 0, hi, f"{t.name} VGPRs per wave")
    _check_count("lds_bytes", lds_bytes, 0, t.lds_bytes, f"{t.name} LDS per work-group")
    _check_count("block_threads", block_threads, 0, 1024, "work-group size")
    alloc = max(granule, _align(max(n, 1), granule))
    limits = {"vgpr": min(max_waves, total // alloc)}
    if t.is_cdna:
        limits["sgpr"] = min(max_waves, 10 if sgpr <= 80 else 9 if sgpr <= 88
                             else 8 if sgpr <= 100 else 7)
    if block_threads:
        waves_per_wg = _ceil_div(block_threads, wave)
        if lds_bytes:
            wgs = t.lds_per_cu_bytes // _align(lds_bytes, t.lds_alloc_granule)
            limits["lds"] = min(max_waves, _ceil_div(wgs * waves_per_wg, t.simds_per_cu))
        if waves_per_wg > 1:  # multi-wave work-groups hold one of 16 barriers per CU
            limits["barriers"] = min(max_waves,
                                     _ceil_div(16 * waves_per_wg, t.simds_per_cu))
        need = _ceil_div(waves_per_wg, t.simds_per_cu)
        if need > min(limits.values()):
            return {"waves_per_simd": 0, "limits": limits, "vgpr_alloc": alloc,
                    "reason": f"a work-group of {block_threads} threads needs {need} waves per "
                              f"SIMD resident; resources allow {min(limits.values())}"}
    waves = min(limits.values())
    limiter = min(limits, key=lambda k: limits[k])
    return {"waves_per_simd": waves, "limits": limits, "vgpr_alloc": alloc, "limiter": limiter}


def waves_per_simd(arch: str, vgprs: int, agprs: int = 0, lds_bytes: int = 0,
                   workgroup_size: int = 256, wave_size: Optional[int] = None) -> int:
    """Resident waves per SIMD for a kernel using ``vgprs`` ArchVGPRs, ``agprs`` AccVGPRs and
    ``lds_bytes`` of LDS per work-group of ``workgroup_size`` threads (see :func:`occupancy`).

    >>> waves_per_simd("gfx942", 128), waves_per_simd("gfx942", 256, 19)
    (4, 1)
    >>> waves_per_simd("gfx942", 160, lds_bytes=32768)   # LDS-bound: 2 work-groups per CU
    2
    """
    return occupancy(arch, vgprs=vgprs, agprs=agprs, lds_bytes=lds_bytes,
                     block_threads=workgroup_size, wave_size=wave_size)["waves_per_simd"]
