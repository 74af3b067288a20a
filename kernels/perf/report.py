"""The performance model's result: :class:`PerfReport`, its JSON and its text summary.

Every printed figure is a model estimate and says so, with the model's error bar; nothing here
is a measured MI300X number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .simulate import IDLE_CAUSES

__all__ = ["PerfReport", "binding_resource", "MODEL_NOTE"]

MODEL_NOTE = ("static model of one MI300X (gfx942) CU, not a measurement; calibrated against "
              "published MI300X numbers (docs/PERFORMANCE.md)")

# an idle cause -> the resource a kernel author would fix
_CAUSE_RESOURCE = {"memory_wait": "global_memory_latency", "lds_wait": "lds_latency",
                   "mfma_dependency": "mfma_dependency", "instruction_issue": "instruction_issue",
                   "arbitration": "instruction_issue", "barrier": "barrier",
                   "no_wave": "occupancy", "valu_busy": "valu"}
_UTIL_RESOURCE = {"mfma": "mfma", "lds": "lds_bandwidth", "vmem": "global_memory_bandwidth",
                  "valu": "valu"}
SATURATED = 0.85


def binding_resource(utilisation: Dict[str, float], idle: Dict[str, float]) -> str:
    """The resource that limits the loop: a unit busy >= 85% of the time, else the largest
    cause of MFMA idle time."""
    unit, busiest = max(utilisation.items(), key=lambda kv: kv[1])
    if busiest >= SATURATED:
        return _UTIL_RESOURCE[unit]
    if not idle:
        return _UTIL_RESOURCE[unit]
    cause = max(idle.items(), key=lambda kv: kv[1])[0]
    return _CAUSE_RESOURCE.get(cause, cause)


@dataclass
class PerfReport:
    """What :func:`kernels.perf.analyze` found for one kernel."""

    kernel: str
    arch: str
    mfma_busy: float                      # matrix pipes busy, fraction of the CU's 4 SIMDs
    binding: str
    idle_breakdown: Dict[str, float]      # MFMA idle clocks by cause, fractions of all clocks
    utilisation: Dict[str, float]
    cycles_per_iteration: float
    loop: Dict[str, Any]
    occupancy: Dict[str, Any]
    error_bar: float
    peak_fraction: Optional[float] = None  # whole kernel, with a problem size
    whole_kernel: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)
    model: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {"model": MODEL_NOTE, "error_bar": self.error_bar, "kernel": self.kernel,
                "arch": self.arch, "mfma_busy": round(self.mfma_busy, 4),
                "peak_fraction": self.peak_fraction, "binding": self.binding,
                "idle_breakdown": self.idle_breakdown, "utilisation": self.utilisation,
                "cycles_per_iteration": round(self.cycles_per_iteration, 1),
                "loop": self.loop, "occupancy": self.occupancy,
                "whole_kernel": self.whole_kernel, "notes": self.notes,
                "machine_model": self.model}

    def report_fields(self) -> Dict[str, Any]:
        """The fields a compiled kernel's ``report.json`` carries (key ``perf_model``)."""
        return {"model": MODEL_NOTE, "error_bar": self.error_bar,
                "mfma_busy": round(self.mfma_busy, 4), "binding": self.binding,
                "idle_breakdown": self.idle_breakdown,
                "cycles_per_iteration": round(self.cycles_per_iteration, 1),
                "peak_fraction": self.peak_fraction}

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        eb = f"+-{100 * self.error_bar:.0f}%"
        lines = [
            f"{self.kernel} [{self.arch}] -- {MODEL_NOTE}",
            f"hot loop: {self.loop['instructions']} instructions, {self.loop['mfma']} MFMA "
            f"({self.loop['workgroups_per_cu']} work-group(s) of {self.loop['waves_per_workgroup']}"
            f" wave(s) per CU, {self.occupancy.get('waves_per_simd')} waves/SIMD allowed)",
            f"model: MFMA pipes busy {100 * self.mfma_busy:.1f}% of the loop ({eb} relative), "
            f"{self.cycles_per_iteration:.0f} clocks per iteration; binding: {self.binding}",
            "model: MFMA idle time by cause (fraction of all SIMD clocks):"]
        for k, v in self.idle_breakdown.items():
            lines.append(f"  {k:18s} {100 * v:5.1f}%  {IDLE_CAUSES.get(k, '')}")
        lines.append("model: unit utilisation " + ", ".join(
            f"{k} {100 * v:.0f}%" for k, v in self.utilisation.items()))
        if self.whole_kernel:
            w = self.whole_kernel
            lines.append(
                f"model estimate, whole kernel: {100 * w['peak_fraction']:.1f}% of MFMA peak = "
                f"{w['tflops']:.0f} TFLOP/s at a {w['clock_mhz']} MHz effective clock (error bar "
                f"{eb}: {w['tflops_low']:.0f}-{w['tflops_high']:.0f}); not a measured number")
            lines.extend(_loop_lines(w))
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)


def _loop_lines(whole: Dict[str, Any]) -> List[str]:
    """The whole-kernel estimate's loop table: each MFMA loop with its trip count (over the
    grid) and its share of the work-groups' clocks."""
    if not whole.get("loops"):
        return []
    out = [f"model: loops weighted by trip count ({whole['trip_model']}):",
           "  loop               instr  units          clk/iter  MFMA busy  binding"
           "                  trips  share"]
    for r in whole["loops"]:
        out.append(f"  {r['start']:#07x}-{r['end']:#07x} {r['instructions']:5d}  "
                   f"{r['units']:13s} {r['cycles_per_iteration']:9.0f}  "
                   f"{100 * r['mfma_busy']:8.1f}%  {r['binding']:22s} {r['trips']:7d}  "
                   f"{100 * r['share']:5.1f}%")
    out.append(f"  prologue/epilogue (straight-line code, issue rate + 2 memory latencies)"
               f"{'':18s}{100 * whole['prologue_epilogue_share']:5.1f}%")
    out.append(f"  MFMA busy weighted by the loops' clocks: "
               f"{100 * whole['mfma_busy_weighted']:.1f}%")
    return out
