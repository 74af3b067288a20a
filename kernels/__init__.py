"""kernels: a minimal HIP backend for AMD matrix cores (gfx942 first).

* :func:`compile_hip` (``kernels.toolchain``): HIP source -> :class:`CodeObject` (cached);
* :meth:`CodeObject.report` (``kernels.codeobject``): registers, LDS, scratch, spills,
  waves/SIMD, instruction histogram, MFMA counts (total and hot loop);
* :func:`kernels.emulator.run`: the same source executed on the CPU (work-groups, barriers, LDS,
  wave64 collectives, MFMA builtins generated from mfma_specs);
* :func:`kernels.launch.launch`: the code object on a ROCm GPU, with argument validation.

Kernel sources include ``lagen_hip.h`` (``kernels/include``); its header comment is the API.
"""

from . import compat
from .errors import (CompileError, Diagnostic, EmulatorError, KernelError, LaunchError,
                     NoDeviceError, ToolchainError)
from .toolchain.cache import Cache, content_key
from .toolchain.codeobject import CodeObject, KernelReport, occupancy
from .toolchain.hip import (INCLUDE_DIR, SUPPORTED_ARCHS, Toolchain, compile_hip,
                            find_host_compiler, find_toolchain)

compat.install()        # the old module paths (kernels.gemm, kernels.cuda_gemm, ...): compat.MOVED

__all__ = ["compile_hip", "CodeObject", "KernelReport", "occupancy", "Cache", "content_key",
           "find_toolchain", "find_host_compiler", "Toolchain", "INCLUDE_DIR", "SUPPORTED_ARCHS",
           "KernelError", "ToolchainError", "CompileError", "EmulatorError", "LaunchError",
           "NoDeviceError", "Diagnostic"]

# GEMM builder, verification gate and kernel registry (loaded on first use: they import sympy)
_LAZY = {"build_gemm": "amd.gemm", "BuiltKernel": "amd.gemm", "GemmConfig": "amd.gemm_plan",
         "plan_gemm": "amd.gemm_plan", "verify_kernel": "verify.gate",
         "VerificationError": "verify.gate", "GateReport": "verify.gate", "registry": "amd.registry"}


def __getattr__(name):
    import importlib
    if name in _LAZY:
        mod = importlib.import_module(f".{_LAZY[name]}", __name__)
        return mod if name == "registry" else getattr(mod, name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")

# the kernel IR (examples/03 builds a kernel from it), also loaded on first use
_LAZY.update(dict.fromkeys(("Kernel", "Param", "Shared", "Frag", "Regs", "Let", "Comment", "Loop",
                            "If", "Barrier", "Access", "Mfma", "ZeroFrag"), "ir"))
_LAZY["ConfigError"] = "amd.gemm_plan"
_LAZY["select_gemm"] = "amd.gemm_select"  # the tile choice for M, N, K (issue 15)
_LAZY["BuiltProgram"] = "built"           # the base of every built AMD kernel
# preshuffled B (issue 15): the storage order as a layout, and the GEMM that reads it
_LAZY.update(dict.fromkeys(("preshuffle", "unshuffle", "preshuffle_layout"), "amd.preshuffle"))
_LAZY["build_gemm_preshuffled"] = "amd.gemm_preshuffle"

# ``kernels.attention(q, k, v, causal=..., scale=...)``: the function (kernels/amd/attention_api.py)
_LAZY["attention"] = "amd.attention_api"
